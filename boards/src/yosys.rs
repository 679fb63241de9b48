//! Yosys: synthesis to the family's cells, as a JSON netlist for nextpnr.

use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{ToolError, YOSYS, YOSYS_BOOTH, YOSYS_ECP5};

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
        Family::Ecp5 => format!("synth_ecp5 -top {top} -json netlist.json"),
    };
    let script =
        format!("read_verilog -sv {}; {synth}; tee -q -o stat.txt stat", sources.join(" "));
    let tool = match board.family {
        Family::Ice40 if board.dsps => YOSYS,
        Family::Ice40 => YOSYS_BOOTH,
        Family::Ecp5 => YOSYS_ECP5,
    };
    // The whole log goes to yosys.log as it runs (the console gets warnings and errors only).
    tool.run(dir, &["-q", "-l", "yosys.log", "-p", &script])?;
    let stat = dir.join("stat.txt");
    std::fs::read_to_string(&stat).map_err(ToolError::io(stat))
}
