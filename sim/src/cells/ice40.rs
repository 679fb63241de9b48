//! The iCE40 cells' models.
//!
//! Two kinds of text instantiate iCE40 cells: the emitted machine (its PE pairs' `SB_MAC16`s,
//! `systole_hdl::pe::DspPair`) and a board build's synthesized netlist (every LUT, carry,
//! flip-flop, block RAM and DSP of the bitstream, `crate::machine::RtlBuild::from_netlist`).
//! Each cell takes Yosys' own model of it (`ice40/cells_sim.v` of the installed Yosys). The
//! models give an input the part ties high when nothing drives it (a flip-flop's enable, a
//! block RAM's clock enables) a default value, which Verilator cannot read; the models are
//! read without them (`NO_ICE40_DEFAULT_ASSIGNMENTS`) and each instance that leaves such an
//! input unconnected has it tied high in the text instead ([`tie_high_defaults`]). Verilator
//! ties every other unconnected input low, as the part does. The PLL, which Yosys models as a
//! black box, is the one cell given here: its output is its input, and it is locked from the
//! start, so a netlist runs at the clock its harness ticks.

use super::{instantiated, module_name};
use crate::toolchain::SimError;

/// The PLL cells a board build instantiates (`systole_boards::wrapper::pll`), as pass-throughs.
const PLL_STUBS: &str = "
// systole-sim: an iCE40 PLL as its input clock, locked from the start.
module SB_PLL40_PAD(input PACKAGEPIN, output PLLOUTCORE, output PLLOUTGLOBAL, output LOCK,
    input BYPASS, input RESETB, input EXTFEEDBACK, input [7:0] DYNAMICDELAY,
    input LATCHINPUTVALUE, input SDI, input SCLK, output SDO);
  parameter FEEDBACK_PATH = \"SIMPLE\";
  parameter DIVR = 4'b0000;
  parameter DIVF = 7'b0000000;
  parameter DIVQ = 3'b000;
  parameter FILTER_RANGE = 3'b000;
  assign PLLOUTCORE = PACKAGEPIN;
  assign PLLOUTGLOBAL = PACKAGEPIN;
  assign LOCK = 1'b1;
  assign SDO = 1'b0;
endmodule
";

/// `verilog` with the models of the iCE40 cells it instantiates (none added to a text that
/// instantiates none), and its instances' inputs the part ties high tied high.
pub fn with_cell_models(verilog: &str) -> Result<String, SimError> {
    if !verilog.contains("SB_") {
        return Ok(verilog.to_string());
    }
    let missing =
        |why: String| SimError::Missing { tool: "Yosys' iCE40 cell models", package: "yosys", why };
    let path = systole_hdl::pe::ice40_cells_model().map_err(missing)?;
    let library = std::fs::read_to_string(&path).map_err(SimError::io(&path))?;
    let used = instantiated(verilog, &library);
    if used.is_empty() {
        return Ok(verilog.to_string());
    }
    // The library's preamble (its timescale and the macros its modules use), then each model.
    let preamble = &library[..library.find("\nmodule ").unwrap_or(0)];
    let mut text = format!("`define NO_ICE40_DEFAULT_ASSIGNMENTS\n{preamble}\n");
    for name in used {
        if name.starts_with("SB_PLL40") {
            if name != "SB_PLL40_PAD" {
                return Err(SimError::Config(format!(
                    "the netlist instantiates {name}, a PLL this simulator has no model of \
                     (it models SB_PLL40_PAD, the one the board builds use)"
                )));
            }
            text.push_str(PLL_STUBS);
            continue;
        }
        let model = systole_hdl::pe::module_of(&library, name)
            .ok_or_else(|| missing(format!("{} has no module {name}", path.display())))?;
        text.push_str(&model);
    }
    let verilog = tie_high_defaults(verilog, &library);
    Ok(format!("{text}\n{verilog}"))
}

/// The inputs each cell of `library` ties high when unconnected (declared with
/// `ICE40_DEFAULT_ASSIGNMENT_1`).
fn high_defaults(library: &str) -> Vec<(&str, Vec<&str>)> {
    let mut cells: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut cell = None;
    for line in library.lines() {
        if let Some(name) = module_name(line) {
            cell = Some(name);
        } else if let (Some(name), Some(decl)) =
            (cell, line.trim().strip_suffix("`ICE40_DEFAULT_ASSIGNMENT_1,"))
        {
            let port = decl.split_whitespace().last().unwrap_or_default();
            match cells.last_mut() {
                Some((c, ports)) if *c == name => ports.push(port),
                _ => cells.push((name, vec![port])),
            }
        }
    }
    cells
}

/// `verilog` with every instance of a cell that leaves an input of [`high_defaults`]
/// unconnected connecting it to `1'b1`. Instances are read as Yosys writes them: the cell's
/// name first on a line, one connection `.PIN(...)` a line, `);` alone closing it.
pub fn tie_high_defaults(verilog: &str, library: &str) -> String {
    let defaults = high_defaults(library);
    let mut out = String::with_capacity(verilog.len() + verilog.len() / 16);
    let mut open: Option<(&[&str], Vec<&str>)> = None;
    for line in verilog.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if open.is_none() {
            if let Some((_, ports)) = defaults.iter().find(|(c, _)| *c == first) {
                if line.split_whitespace().nth(1).is_some() {
                    open = Some((ports.as_slice(), Vec::new()));
                }
            }
        }
        match open.as_mut() {
            Some((ports, lines)) if line.trim() == ");" => {
                let missing: Vec<&str> = ports
                    .iter()
                    .copied()
                    .filter(|p| !lines.iter().any(|l| l.trim().starts_with(&format!(".{p}("))))
                    .collect();
                for (i, l) in lines.iter().enumerate() {
                    out.push_str(l);
                    if i + 1 == lines.len() && !missing.is_empty() && l.trim_end().ends_with(')') {
                        out.push(',');
                    }
                    out.push('\n');
                }
                let ties: Vec<String> = missing.iter().map(|p| format!("    .{p}(1'b1)")).collect();
                if !ties.is_empty() {
                    out.push_str(&ties.join(",\n"));
                    out.push('\n');
                }
                out.push_str(line);
                out.push('\n');
                open = None;
            }
            Some((_, lines)) => lines.push(line),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBRARY: &str = "`timescale 1ps / 1ps\n\nmodule SB_LUT4 (output O);\nendmodule\n\
        module SB_CARRY (output CO, input I0, I1, CI);\nendmodule\nmodule SB_DFFE (output Q);\n\
        endmodule\nmodule SB_RAM40_4K (\n);\nendmodule\n";

    /// A flip-flop without its enable gets it tied high; one with it, and a cell without such
    /// inputs, are left as they are.
    #[test]
    fn unconnected_inputs_the_part_ties_high_are_tied_high() {
        let library = "module SB_DFFE (\n\toutput Q,\n\tinput C,\n\
            \tinput E `ICE40_DEFAULT_ASSIGNMENT_1,\n\tinput D\n);\nendmodule\n\
            module SB_LUT4 (output O, input I0 `ICE40_DEFAULT_ASSIGNMENT_0,\n);\nendmodule\n";
        assert_eq!(high_defaults(library), [("SB_DFFE", vec!["E"])]);
        let netlist = "  SB_DFFE q (\n    .C(clk),\n    .D(d),\n    .Q(q)\n  );\n\
            SB_DFFE r (\n    .C(clk),\n    .E(e),\n    .Q(r)\n  );\n  SB_LUT4 #(\n  ) l (\n\
            .O(o)\n  );\n";
        let tied = tie_high_defaults(netlist, library);
        assert!(
            tied.starts_with(
                "  SB_DFFE q (\n    .C(clk),\n    .D(d),\n    .Q(q),\n    .E(1'b1)\n  );\n"
            ),
            "{tied}"
        );
        assert_eq!(tied.matches("1'b1").count(), 1, "{tied}");
        assert!(tied.ends_with("  SB_LUT4 #(\n  ) l (\n.O(o)\n  );\n"), "{tied}");
    }

    #[test]
    fn the_cells_a_netlist_instantiates_are_found() {
        let netlist = "module board_top(a);\n  SB_LUT4 #(\n    .LUT_INIT(16'h8000)\n  ) \\x.y  (\n\
            .O(a)\n  );\n  SB_DFFE spi_q (\n    .Q(a)\n  );\nendmodule\n";
        assert_eq!(instantiated(netlist, LIBRARY), ["SB_LUT4", "SB_DFFE"]);
        let emitted = "module pair(input clock);\nSB_MAC16 #(\n  .MODE_8x8(1'b1)\n) dsp (\n);\n\
            endmodule\n";
        let library = format!("{LIBRARY}module SB_MAC16 (\n);\nendmodule\n");
        assert_eq!(instantiated(emitted, &library), ["SB_MAC16"]);
        // A module that defines a cell of that name is not given the library's.
        let own = format!("{netlist}\nmodule SB_LUT4 (output O);\nendmodule\n");
        assert_eq!(instantiated(&own, LIBRARY), ["SB_DFFE"]);
        // Words that merely mention a cell are not instances.
        assert!(instantiated("// SB_LUT4s below\nwire SB_CARRY_x;\n", LIBRARY).is_empty());
    }
}
