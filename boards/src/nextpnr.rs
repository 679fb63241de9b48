//! nextpnr: placement, routing and timing analysis, with a JSON report.

use std::path::Path;

use crate::board::{Board, Family};
pub use crate::pnr::{Pnr, Router};
use crate::tool::{ToolError, NEXTPNR_ECP5, NEXTPNR_ICE40};

/// Places and routes `dir/netlist.json` against `constraints` (a file in `dir`), aiming at
/// `target_mhz` unless `pnr` names another aim. Writes nextpnr's own report, `dir/nextpnr-report.json`, the routed design
/// (`routed.asc` or `routed.config`) and its whole output to `dir/nextpnr.log`. Timing
/// failures do not stop it: the report says whether timing was met.
/// `progress` is told the router's headway, a line at a time ([`routing_progress`]).
pub fn place_and_route(
    board: &Board,
    dir: &Path,
    constraints: &str,
    target_mhz: f64,
    pnr: Pnr,
    progress: &mut dyn FnMut(&str),
) -> Result<(), ToolError> {
    let freq = format!("{}", pnr.aim_mhz.unwrap_or(target_mhz));
    let seed = pnr.seed.to_string();
    let mut args: Vec<&str> = board.device.to_vec();
    args.extend([
        "--json",
        "netlist.json",
        "--report",
        "nextpnr-report.json",
        "--freq",
        &freq,
        "--seed",
        &seed,
        "--router",
        pnr.router.name(),
    ]);
    args.push("--timing-allow-fail");
    // A line a minute at most, and every router2 iteration.
    let mut last: Option<std::time::Instant> = None;
    let mut watch = |line: &str| {
        let Some(said) = routing_progress(line) else { return };
        let due = last.is_none_or(|t| t.elapsed().as_secs() >= 60);
        if due || said.starts_with("router2") {
            progress(&said);
            last = Some(std::time::Instant::now());
        }
    };
    match board.family {
        Family::Ice40 => {
            args.extend(["--pcf", constraints, "--asc", "routed.asc"]);
            NEXTPNR_ICE40.run_watched(dir, &args, Some("nextpnr.log"), &mut watch)?;
        }
        Family::Ecp5 => {
            args.extend(["--lpf", constraints, "--textcfg", "routed.config"]);
            NEXTPNR_ECP5.run_watched(dir, &args, Some("nextpnr.log"), &mut watch)?;
        }
    }
    Ok(())
}

/// The router's headway in one line of nextpnr's output, in words: router1's table row
/// (`Info:  IterCnt | w/ripup wo/ripup | w/r wo/r | arcs | batch(sec) total(sec) |`) gives the
/// arcs still to route and its seconds so far, router2's `iter=N ... overused=K` line its
/// iteration and the wires still shared. `None` for every other line.
pub fn routing_progress(line: &str) -> Option<String> {
    let line = line.trim_start_matches("Info:").trim();
    if let Some(rest) = line.strip_prefix("iter=") {
        let iteration = rest.split_whitespace().next()?;
        let overused = rest.split_whitespace().find_map(|f| f.strip_prefix("overused="))?;
        return Some(format!("router2: iteration {iteration}, {overused} wires overused"));
    }
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    if cells.len() < 5 || cells[0].parse::<u64>().is_err() {
        return None;
    }
    let arcs: u64 = cells[3].parse().ok()?;
    let seconds: f64 = cells[4].split_whitespace().last()?.parse().ok()?;
    Some(format!("router1: {arcs} arcs left to route after {seconds:.0} s of routing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router's headway is read from router1's table rows and router2's iteration lines,
    /// and from no other line (router1's header included).
    #[test]
    fn routing_progress_is_read_from_either_router() {
        let row = "Info:     575000 |   133236     441763 |  307   693 |    216649|       5.42    2217.31|";
        assert_eq!(
            routing_progress(row).as_deref(),
            Some("router1: 216649 arcs left to route after 2217 s of routing")
        );
        let iter = "Info:     iter=13 wires=1253741 overused=16740 overuse=17088 archfail=NA";
        assert_eq!(
            routing_progress(iter).as_deref(),
            Some("router2: iteration 13, 16740 wires overused")
        );
        for other in [
            "Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|",
            "Info: Routing..",
            "Info: Max frequency for clock '$glbnet$clk': 58.41 MHz (PASS at 55.00 MHz)",
            "",
        ] {
            assert_eq!(routing_progress(other), None, "{other}");
        }
    }
}
