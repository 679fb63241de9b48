//! What a build achieved: resources from nextpnr's `--report` JSON (flip-flops on iCE40 from
//! Yosys' statistics, since iCE40 logic cells pair a LUT with a flip-flop), fmax, and whether
//! timing was met.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::board::Family;
use crate::built::Built;
use crate::pnr::Pnr;
use crate::tool::ToolError;

/// `report.json` of `systole board build`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub board: String,
    pub device: String,
    /// The accelerator built (absent for designs other than `systole_top`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built: Option<Built>,
    /// nextpnr's seed, router and aim (reports from before they were recorded used the
    /// defaults).
    #[serde(default)]
    pub pnr: Pnr,
    /// iCE40 logic cells (LUT4 + FF pairs) or ECP5 LUT4s ("TRELLIS_COMB").
    pub luts: u64,
    pub luts_available: u64,
    pub flip_flops: u64,
    /// Block RAMs used (iCE40 EBR of 4 Kbit, ECP5 DP16KD of 18 Kbit) and available.
    pub bram: u64,
    pub bram_available: u64,
    /// iCE40 UP5K SPRAM blocks (256 Kbit each); 0 elsewhere.
    pub spram: u64,
    pub dsps: u64,
    pub dsps_available: u64,
    pub fmax_mhz: f64,
    pub target_mhz: f64,
    pub timing_met: bool,
    /// The slowest clock's critical path, where the clock is lost (absent in reports from before
    /// it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critical_path: Option<CriticalPath>,
    /// The bitstream this build wrote beside the report (absent in reports from before it was
    /// recorded): `systole board program` loads only that file, byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitstream: Option<Bitstream>,
}

/// A bitstream as its report records it: its file name in the build directory, its size and its
/// SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bitstream {
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
}

impl Bitstream {
    /// The record of `bytes`, a bitstream saved as `file`.
    pub fn of(file: &str, bytes: &[u8]) -> Bitstream {
        let digest = Sha256::digest(bytes);
        Bitstream {
            file: file.into(),
            bytes: bytes.len() as u64,
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

/// A register-to-register path as nextpnr's timing analysis reports it: where it starts and
/// ends (nextpnr's cell names, less the suffixes its packer appends, and the port) and how its
/// delay splits into logic and routing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CriticalPath {
    pub from: String,
    pub to: String,
    pub delay_ns: f64,
    pub logic_ns: f64,
    pub routing_ns: f64,
    /// Logic cells the path passes through.
    pub logic_levels: u64,
}

impl std::fmt::Display for CriticalPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "critical path {:.2} ns ({:.2} logic in {} cells, {:.2} routing): {} -> {}",
            self.delay_ns, self.logic_ns, self.logic_levels, self.routing_ns, self.from, self.to
        )
    }
}

/// A cell's name as the design named it: nextpnr's packer appends `_SB_LUT4_...`,
/// `_TRELLIS_FF_Q...`, `_LUT4_D_Z_CCU2C...` and the like to the net or cell it packed, and `$` parts for its own.
fn design_name(cell: &str) -> &str {
    let cut = [
        "_SB_",
        "_TRELLIS_",
        "_DFFLC",
        "_LC",
        "$sb_io",
        "$tr_io",
        "_LUT4_",
        "_CCU2C",
        "_PFUMX",
        "_L6MUX21",
    ]
    .iter()
    .filter_map(|marker| cell.find(marker))
    .min()
    .unwrap_or(cell.len());
    &cell[..cut]
}

/// The longest path that starts and ends on the clock `clock` (a key of nextpnr's `fmax`).
fn critical_path(v: &serde_json::Value, clock: &str) -> Option<CriticalPath> {
    let edge = format!("posedge {clock}");
    let num = |x: &serde_json::Value| x.as_f64().unwrap_or(0.0);
    v["critical_paths"]
        .as_array()?
        .iter()
        .filter(|p| p["from"].as_str() == Some(&edge) && p["to"].as_str() == Some(&edge))
        .filter_map(|p| {
            let segments = p["path"].as_array()?;
            let end = |s: &serde_json::Value| {
                format!(
                    "{} ({})",
                    design_name(s["cell"].as_str().unwrap_or("?")),
                    s["port"].as_str().unwrap_or("?")
                )
            };
            let of = |kind: &str| -> f64 {
                segments.iter().filter(|s| s["type"] == kind).map(|s| num(&s["delay"])).sum()
            };
            Some(CriticalPath {
                from: end(&segments.first()?["from"]),
                to: end(&segments.last()?["to"]),
                delay_ns: round2(segments.iter().map(|s| num(&s["delay"])).sum()),
                logic_ns: round2(of("logic")),
                routing_ns: round2(of("routing")),
                logic_levels: segments.iter().filter(|s| s["type"] == "logic").count() as u64,
            })
        })
        .max_by(|a, b| a.delay_ns.total_cmp(&b.delay_ns))
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn used(util: &serde_json::Value, cell: &str) -> (u64, u64) {
    let entry = &util[cell];
    (entry["used"].as_u64().unwrap_or(0), entry["available"].as_u64().unwrap_or(0))
}

/// Parses nextpnr's report. `fmax` is the slowest clock domain's achieved frequency;
/// `yosys_ffs` is the flip-flop count from Yosys' `stat` (used on iCE40).
pub fn parse(
    json: &str,
    family: Family,
    board: &str,
    device: &str,
    target_mhz: f64,
    yosys_ffs: u64,
) -> Result<Report, ToolError> {
    let v: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| ToolError::Report(format!("nextpnr report: {e}")))?;
    let clocks = v["fmax"]
        .as_object()
        .ok_or_else(|| ToolError::Report("nextpnr report has no fmax".into()))?;
    let slowest = clocks
        .iter()
        .filter_map(|(name, c)| Some((name, c["achieved"].as_f64()?)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let Some((clock, fmax)) = slowest else {
        return Err(ToolError::Report(
            "nextpnr report: no clock domain has an achieved fmax".into(),
        ));
    };
    let util = &v["utilization"];
    let (luts, luts_available, flip_flops, (bram, bram_available), spram, (dsps, dsps_available)) =
        match family {
            Family::Ice40 => {
                let lc = used(util, "ICESTORM_LC");
                (
                    lc.0,
                    lc.1,
                    yosys_ffs,
                    used(util, "ICESTORM_RAM"),
                    used(util, "ICESTORM_SPRAM").0,
                    used(util, "ICESTORM_DSP"),
                )
            }
            Family::Ecp5 => {
                let comb = used(util, "TRELLIS_COMB");
                (
                    comb.0,
                    comb.1,
                    used(util, "TRELLIS_FF").0,
                    used(util, "DP16KD"),
                    0,
                    used(util, "MULT18X18D"),
                )
            }
        };
    Ok(Report {
        board: board.into(),
        device: device.into(),
        built: None,
        pnr: Pnr::default(),
        luts,
        luts_available,
        flip_flops,
        bram,
        bram_available,
        spram,
        dsps,
        dsps_available,
        fmax_mhz: round2(fmax),
        target_mhz,
        timing_met: fmax >= target_mhz,
        critical_path: critical_path(&v, clock),
        bitstream: None,
    })
}

impl Report {
    /// A `report.json` that `systole board build` wrote.
    pub fn from_json(json: &str) -> Result<Report, ToolError> {
        serde_json::from_str(json).map_err(|e| ToolError::Report(format!("board report: {e}")))
    }

    /// Peak multiply-accumulates per second at the achieved clock: one per PE per cycle.
    pub fn peak_macs_per_s(&self) -> Option<f64> {
        self.built.as_ref().map(|b| b.knobs.rows as f64 * b.knobs.cols as f64 * self.fmax_mhz * 1e6)
    }
}

/// The cell counts in Yosys' `stat` text, as (cell type, count): every line of exactly a name
/// and a count whose name starts with a capital (so `$scopeinfo` and the totals are left out).
/// Yosys 0.23 writes a cell line as `name count`, later ones as `count name`; both are read.
pub fn yosys_cells(stat: &str) -> impl Iterator<Item = (&str, u64)> {
    let is_cell = |name: &str| name.chars().next().is_some_and(|c| c.is_ascii_uppercase());
    stat.lines().filter_map(move |l| {
        let mut it = l.split_whitespace();
        let (a, b) = (it.next()?, it.next()?);
        if it.next().is_some() {
            return None;
        }
        match (a.parse::<u64>(), b.parse::<u64>()) {
            (Err(_), Ok(count)) if is_cell(a) => Some((a, count)),
            (Ok(count), Err(_)) if is_cell(b) => Some((b, count)),
            _ => None,
        }
    })
}

/// Flip-flop cells in Yosys' `stat` text: every cell type whose name contains `DFF` or is
/// `TRELLIS_FF`, summed.
pub fn yosys_flip_flops(stat: &str) -> u64 {
    yosys_cells(stat)
        .filter(|(name, _)| name.contains("DFF") || *name == "TRELLIS_FF")
        .map(|(_, count)| count)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_ice40_report() {
        let json = r#"{"fmax": {"clk": {"achieved": 79.75, "constraint": 100}},
            "utilization": {"ICESTORM_LC": {"available": 5280, "used": 27},
                            "ICESTORM_RAM": {"available": 30, "used": 4},
                            "ICESTORM_DSP": {"available": 8, "used": 2}}}"#;
        let r = parse(json, Family::Ice40, "icebreaker", "up5k", 100.0, 24).unwrap();
        assert_eq!((r.luts, r.luts_available, r.bram, r.dsps, r.flip_flops), (27, 5280, 4, 2, 24));
        assert_eq!(r.fmax_mhz, 79.75);
        assert!(!r.timing_met);
        assert!(parse("{}", Family::Ice40, "b", "d", 1.0, 0).is_err());
        assert!(parse("not json", Family::Ice40, "b", "d", 1.0, 0).is_err());
    }

    #[test]
    fn names_the_slowest_clocks_critical_path() {
        // Shaped like nextpnr-ice40's report: the slowest clock's path, another clock's, and
        // one from an input.
        let seg = |kind: &str, delay: f64, from: &str, to: &str| {
            format!(
                r#"{{"type": "{kind}", "delay": {delay},
                    "from": {{"cell": "{from}", "port": "O"}}, "to": {{"cell": "{to}", "port": "I3"}}}}"#
            )
        };
        let json = format!(
            r#"{{"fmax": {{"clk": {{"achieved": 9.5}}, "fast": {{"achieved": 90.0}}}},
                "utilization": {{}},
                "critical_paths": [
                  {{"from": "posedge fast", "to": "posedge fast",
                    "path": [{}]}},
                  {{"from": "posedge clk", "to": "posedge clk",
                    "path": [{}, {}, {}, {}]}},
                  {{"from": "<async>", "to": "posedge clk", "path": [{}]}}]}}"#,
            seg("logic", 200.0, "a", "b"),
            seg("clk-to-q", 1.25, "top.seq.row.q_SB_DFFE_Q_D_SB_LUT4_O_LC", "x"),
            seg("routing", 60.5, "x", "y"),
            seg("logic", 40.0, "y", "z"),
            seg("setup", 0.1, "z", "top.spad.lanes$0.mem.0.0_RAM"),
            seg("routing", 300.0, "pin", "por"),
        );
        let r = parse(&json, Family::Ice40, "b", "d", 10.0, 0).unwrap();
        let path = r.critical_path.unwrap();
        assert_eq!(path.from, "top.seq.row.q (O)");
        assert_eq!(path.to, "top.spad.lanes$0.mem.0.0_RAM (I3)");
        assert_eq!((path.delay_ns, path.logic_ns, path.routing_ns), (101.85, 40.0, 60.5));
        assert_eq!(path.logic_levels, 1);
        // Reports from before it was recorded still read.
        let text = serde_json::to_string(&Report { critical_path: None, ..r }).unwrap();
        assert!(!text.contains("critical_path"), "{text}");
    }

    #[test]
    fn records_nextpnrs_seed_and_router() {
        let json = r#"{"fmax": {"clk": {"achieved": 20.5}},
            "utilization": {"TRELLIS_COMB": {"available": 83640, "used": 100}}}"#;
        let mut r = parse(json, Family::Ecp5, "ulx3s", "85k", 15.0, 0).unwrap();
        assert_eq!(r.pnr, Pnr::default());
        r.pnr = Pnr { seed: 7, router: crate::nextpnr::Router::Router2, aim_mhz: None };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""pnr":{"seed":7,"router":"router2"}"#), "{text}");
        assert_eq!(Report::from_json(&text).unwrap(), r);
        // An aim other than the clock is recorded beside them.
        let aimed = Report { pnr: Pnr { aim_mhz: Some(12.5), ..r.pnr }, ..r.clone() };
        let aimed_text = serde_json::to_string(&aimed).unwrap();
        assert!(aimed_text.contains(r#""router":"router2","aim_mhz":12.5}"#), "{aimed_text}");
        assert_eq!(Report::from_json(&aimed_text).unwrap(), aimed);
        // Reports written before the seed and router were recorded used nextpnr's defaults.
        let old = text.replace(r#""pnr":{"seed":7,"router":"router2"},"#, "");
        assert_eq!(Report::from_json(&old).unwrap().pnr, Pnr::default());
        let bad = text.replace("router2", "router9");
        assert!(Report::from_json(&bad).unwrap_err().to_string().contains("router9"));
    }

    #[test]
    fn records_the_bitstream_it_describes() {
        let json = r#"{"fmax": {"clk": {"achieved": 20.5}},
            "utilization": {"TRELLIS_COMB": {"available": 83640, "used": 100}}}"#;
        let mut r = parse(json, Family::Ecp5, "ulx3s", "85k", 15.0, 0).unwrap();
        assert_eq!(r.bitstream, None);
        r.bitstream = Some(Bitstream::of("systole.bit", b"abc"));
        let text = serde_json::to_string(&r).unwrap();
        // SHA-256 of "abc" (FIPS 180-2's example).
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let want = format!(r#""bitstream":{{"file":"systole.bit","bytes":3,"sha256":"{abc}"}}"#);
        assert!(text.contains(&want), "{text}");
        assert_eq!(Report::from_json(&text).unwrap(), r);
        // Reports from before the bitstream was recorded still read.
        let old = text.replace(&format!(",{want}"), "");
        assert_eq!(Report::from_json(&old).unwrap().bitstream, None);
    }

    #[test]
    fn counts_flip_flops_in_yosys_stats() {
        let stat = "   Number of cells:  60\n     SB_CARRY   22\n     SB_DFF   3\n     SB_DFFER   21\n     SB_LUT4   10\n";
        assert_eq!(yosys_flip_flops(stat), 24);
        // Yosys 0.33 and later: the count first.
        let stat = "     8970 cells\n     1374   SB_CARRY\n      101   SB_DFF\n      510   SB_DFFE\n     6475   SB_LUT4\n";
        assert_eq!(yosys_flip_flops(stat), 611);
    }
}
