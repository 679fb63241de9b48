//! Yosys: synthesis to the family's cells, as a JSON netlist for nextpnr.

use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{ToolError, YOSYS, YOSYS_ECP5};

/// Synthesizes `sources` (file names in `dir`) with top module `top` into `dir/netlist.json`;
/// returns Yosys' cell statistics.
pub fn synthesize(
    board: &Board,
    dir: &Path,
    sources: &[&str],
    top: &str,
) -> Result<String, ToolError> {
    // `-abc9`: ABC's timing-driven mapping; on the iCEBreaker's 1 x 1 systole_top it gives 4,306
    // LUTs and 1,413 carries where the default mapping gives 4,420 and 1,552 (DECISIONS 34).
    let synth = match board.family {
        Family::Ice40 => format!(
            "synth_ice40 -abc9 {} -top {top} -json netlist.json",
            if board.dsps { "-dsp" } else { "" }
        ),
        Family::Ecp5 => format!("synth_ecp5 -top {top} -json netlist.json"),
    };
    let script =
        format!("read_verilog -sv {}; {synth}; tee -q -o stat.txt stat", sources.join(" "));
    let tool = match board.family {
        Family::Ice40 => YOSYS,
        Family::Ecp5 => YOSYS_ECP5,
    };
    // The whole log goes to yosys.log as it runs (the console gets warnings and errors only).
    tool.run(dir, &["-q", "-l", "yosys.log", "-p", &script])?;
    let stat = dir.join("stat.txt");
    std::fs::read_to_string(&stat).map_err(ToolError::io(stat))
}
