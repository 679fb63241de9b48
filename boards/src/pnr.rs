//! How nextpnr places and routes a build: its seed, its router and its aim. A board's default
//! build names them, `nextpnr` follows them and the report records them.

use serde::{Deserialize, Serialize};

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

/// How nextpnr places and routes: its placement seed, its router and the frequency it aims at.
/// Each changes the achieved fmax, so the report records them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pnr {
    pub seed: u32,
    pub router: Router,
    /// The frequency nextpnr's timing-driven placement and routing aim at (its `--freq`) when
    /// it is not the clock. A large design aimed below its clock can place better and route far
    /// faster than aimed at it (docs/DECISIONS.md 91); the achieved fmax, never the aim, says
    /// whether the clock is met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aim_mhz: Option<f64>,
}

impl Default for Pnr {
    fn default() -> Pnr {
        Pnr { seed: 1, router: Router::Router1, aim_mhz: None }
    }
}
