//! nextpnr: placement, routing and timing analysis, with a JSON report.

use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{ToolError, NEXTPNR_ECP5, NEXTPNR_ICE40};

/// Places and routes `dir/netlist.json` against `constraints` (a file in `dir`) at
/// `target_mhz`. Writes `dir/report.json` and the routed design (`routed.asc` or
/// `routed.config`) and its whole output to `dir/nextpnr.log`. Timing failures do not stop it:
/// the report says whether timing was met.
pub fn place_and_route(
    board: &Board,
    dir: &Path,
    constraints: &str,
    target_mhz: f64,
    seed: u32,
) -> Result<(), ToolError> {
    let freq = format!("{target_mhz}");
    let seed = seed.to_string();
    let mut args: Vec<&str> = board.device.to_vec();
    args.extend([
        "--json",
        "netlist.json",
        "--report",
        "report.json",
        "--freq",
        &freq,
        "--seed",
        &seed,
    ]);
    args.push("--timing-allow-fail");
    match board.family {
        Family::Ice40 => {
            args.extend(["--pcf", constraints, "--asc", "routed.asc"]);
            NEXTPNR_ICE40.run_logged(dir, &args, Some("nextpnr.log"))?;
        }
        Family::Ecp5 => {
            args.extend(["--lpf", constraints, "--textcfg", "routed.config"]);
            NEXTPNR_ECP5.run_logged(dir, &args, Some("nextpnr.log"))?;
        }
    }
    Ok(())
}
