//! nextpnr: placement, routing and timing analysis, with a JSON report.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::board::{Board, Family};
use crate::tool::{ToolError, NEXTPNR_ECP5, NEXTPNR_ICE40};

/// nextpnr's router. `router1` (nextpnr's default) is the one every committed figure used
/// unless its report says otherwise; `router2` is its newer, congestion-driven router.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Router {
    #[default]
    Router1,
    Router2,
}

impl Router {
    pub fn name(self) -> &'static str {
        match self {
            Router::Router1 => "router1",
            Router::Router2 => "router2",
        }
    }
}

/// How nextpnr places and routes: its placement seed and its router. Both change the achieved
/// fmax, so the report records them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pnr {
    pub seed: u32,
    pub router: Router,
}

impl Default for Pnr {
    fn default() -> Pnr {
        Pnr { seed: 1, router: Router::Router1 }
    }
}

/// Places and routes `dir/netlist.json` against `constraints` (a file in `dir`) at
/// `target_mhz`. Writes nextpnr's own report, `dir/nextpnr-report.json`, the routed design
/// (`routed.asc` or `routed.config`) and its whole output to `dir/nextpnr.log`. Timing
/// failures do not stop it: the report says whether timing was met.
pub fn place_and_route(
    board: &Board,
    dir: &Path,
    constraints: &str,
    target_mhz: f64,
    pnr: Pnr,
) -> Result<(), ToolError> {
    let freq = format!("{target_mhz}");
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
