//! The whole flow: sources -> netlist -> placed and routed design -> bitstream + report.

use std::path::Path;

use crate::board::Board;
use crate::built::Built;
use crate::nextpnr::Pnr;
use crate::report::{self, Bitstream, Report};
use crate::tool::ToolError;
use crate::yosys::Products;
use crate::{nextpnr, pack, yosys};

/// What to build: Verilog sources (file name, text) and the top module; `built` describes the
/// accelerator inside, for the report; `pe_products`, where an ECP5 build forms its PEs'
/// products.
#[derive(Clone, Debug)]
pub struct Design {
    pub sources: Vec<(String, String)>,
    pub top: String,
    pub built: Option<Built>,
    pub pe_products: Products,
}

/// Why a build did not give a usable bitstream.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error(
        "the design does not fit on {board}: {over}. nextpnr: {error} (its whole output is in \
         {log}; Yosys mapped the design to: {cells})"
    )]
    DoesNotFit { board: String, over: String, error: String, cells: String, log: String },
    #[error(
        "timing not met on {}: {:.2} MHz achieved, {:.2} MHz asked; lower --clock-mhz or the \
         array size (the report is in {})", report.board, report.fmax_mhz, report.target_mhz, dir
    )]
    Timing { report: Box<Report>, dir: String },
}

/// Builds `design` for `board` at `target_mhz` in `out` (created if needed), placed and routed
/// as `pnr` says: writes the sources, the constraints, the netlist, the bitstream and
/// `report.json`, which records the bitstream's SHA-256. A design that does not fit fails in
/// nextpnr with its own message, leaving a previous build's bitstream and report in `out`
/// untouched; one that misses timing fails with [`FlowError::Timing`] after writing both.
/// `progress` is told the router's headway as it routes (`nextpnr::routing_progress`).
pub fn build(
    board: &Board,
    design: &Design,
    target_mhz: f64,
    pnr: Pnr,
    out: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, FlowError> {
    std::fs::create_dir_all(out).map_err(ToolError::io(out))?;
    let mut names = Vec::new();
    for (name, text) in &design.sources {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(ToolError::io(&path))?;
        names.push(name.as_str());
    }
    let constraints = out.join(board.constraints_name);
    let text = aimed_constraints(board, target_mhz, pnr.aim_mhz);
    std::fs::write(&constraints, text).map_err(ToolError::io(&constraints))?;
    let stat = yosys::synthesize(board, out, &names, &design.top, design.pe_products)?;
    match nextpnr::place_and_route(board, out, board.constraints_name, target_mhz, pnr, progress) {
        Err(ToolError::Failed { output, .. }) if does_not_fit(&output).is_some() => {
            let log = out.join("nextpnr.log");
            let full = std::fs::read_to_string(&log).unwrap_or(output.clone());
            return Err(FlowError::DoesNotFit {
                board: board.name.into(),
                over: overused(&full),
                error: does_not_fit(&output).unwrap_or_default(),
                cells: cell_lines(&stat),
                log: log.display().to_string(),
            });
        }
        r => r?,
    }
    // The new bitstream and its report replace a previous build's only once both are whole: a
    // build that fails before this point leaves the previous bitstream and report.json as they
    // were. The bitstream goes first; were the report not to follow, the old report's checksum
    // would no longer match and `board program` would refuse the pair.
    let file = board.bitstream_name();
    let pending = format!("{file}.new");
    pack::pack(board, out, &pending)?;
    let raw_path = out.join("nextpnr-report.json");
    let json = std::fs::read_to_string(&raw_path).map_err(ToolError::io(&raw_path))?;
    let device = board.device.join(" ");
    let mut report = report::parse(
        &json,
        board.family,
        board.name,
        &device,
        target_mhz,
        report::yosys_flip_flops(&stat),
    )?;
    report.built = design.built.clone();
    report.pnr = pnr;
    let pending_path = out.join(&pending);
    let bits = std::fs::read(&pending_path).map_err(ToolError::io(&pending_path))?;
    report.bitstream = Some(Bitstream::of(file, &bits));
    let text =
        serde_json::to_string_pretty(&report).map_err(|e| ToolError::Report(e.to_string()))?;
    let json_path = out.join("report.json");
    let json_pending = out.join("report.json.new");
    std::fs::write(&json_pending, text + "\n").map_err(ToolError::io(&json_pending))?;
    let bit_path = out.join(file);
    std::fs::rename(&pending_path, &bit_path).map_err(ToolError::io(&bit_path))?;
    std::fs::rename(&json_pending, &json_path).map_err(ToolError::io(&json_path))?;
    if !report.timing_met {
        return Err(FlowError::Timing { report: Box::new(report), dir: out.display().to_string() });
    }
    Ok(report)
}

/// The board's constraints with nextpnr aimed at `aim_mhz` instead of the clock: nextpnr-ecp5
/// times a PLL's output against the constraint it derives from the oscillator's
/// (`FREQUENCY PORT`), never against `--freq`, so the oscillator's constraint is scaled by
/// `aim / clock`. iCE40 constraints carry no frequency: `--freq` aims those builds.
fn aimed_constraints(board: &Board, clock_mhz: f64, aim_mhz: Option<f64>) -> String {
    let Some(aim) = aim_mhz else { return board.constraints.to_string() };
    let scaled = board.clock_mhz * aim / clock_mhz;
    board
        .constraints
        .lines()
        .map(|line| match line.trim_start().starts_with("FREQUENCY PORT") {
            true => format!("FREQUENCY PORT \"{}\" {scaled:.4} MHZ;", board.clock_port),
            false => line.to_string(),
        })
        .map(|line| line + "\n")
        .collect()
}

/// nextpnr's reason when the design needs more of some resource than the device has: its first
/// error line about a cell type or placement, or any error line when its utilisation report
/// shows a resource above 100% (nextpnr-ice40 then fails to "expand region" while placing).
fn does_not_fit(output: &str) -> Option<String> {
    let errors: Vec<String> =
        output.lines().filter(|l| l.contains("ERROR")).map(|l| l.trim().to_string()).collect();
    let known = ["but device", "Unable to place", "too many", "Failed to expand region"];
    errors
        .iter()
        .find(|l| known.iter().any(|k| l.contains(k)))
        .or_else(|| errors.first().filter(|_| overused(output) != "placement failed"))
        .cloned()
}

/// nextpnr's utilisation lines of the resources used beyond 100%: `ICESTORM_DSP 22 of 8`.
fn overused(output: &str) -> String {
    let over: Vec<String> = output
        .lines()
        .filter_map(|l| {
            // "Info:          ICESTORM_LC: 11181/ 5280   211%"
            let (name, rest) = l.trim_start_matches("Info:").trim().split_once(':')?;
            let (used, rest) = rest.split_once('/')?;
            let mut it = rest.split_whitespace();
            let (available, percent) = (it.next()?, it.next()?);
            let percent: u64 = percent.trim_end_matches('%').parse().ok()?;
            (percent > 100).then(|| format!("{} {} of {available}", name.trim(), used.trim()))
        })
        .collect();
    if over.is_empty() {
        "placement failed".into()
    } else {
        format!("needs {}", over.join(", "))
    }
}

/// The cell counts of Yosys' `stat`, for an error message: `SB_CARRY 22, SB_MAC16 9`.
fn cell_lines(stat: &str) -> String {
    let lines: Vec<String> =
        report::yosys_cells(stat).map(|(name, count)| format!("{name} {count}")).collect();
    lines.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ICEBREAKER, ULX3S_25F};

    /// A counter on the board's clock pin and an LED: the flow end to end, tools included.
    fn blink(board: &Board, led: &str) -> Design {
        let v = format!(
            "module blink(input wire {clk}, output wire {led});\n  reg [23:0] c = 0;\n  \
             always @(posedge {clk}) c <= c + 1;\n  assign {led} = c[23];\nendmodule\n",
            clk = board.clock_port
        );
        Design {
            sources: vec![("blink.v".into(), v)],
            top: "blink".into(),
            built: None,
            pe_products: Products::default(),
        }
    }

    #[test]
    fn icebreaker_flow_builds_a_bitstream_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let mut said = vec![];
        let blink = blink(&ICEBREAKER, "led_red_n");
        let mut progress = |line: &str| said.push(line.to_string());
        let report =
            build(&ICEBREAKER, &blink, 12.0, Pnr::default(), dir.path(), &mut progress).unwrap();
        // The router's headway was reported.
        assert!(
            said.iter().any(|l| l.starts_with("router1: ") && l.contains("arcs left")),
            "{said:?}"
        );
        assert!(dir.path().join("systole.bin").metadata().unwrap().len() > 100_000);
        assert!(report.luts > 0 && report.luts < 200, "{report:?}");
        assert_eq!(report.flip_flops, 24);
        assert!(report.timing_met && report.fmax_mhz > 12.0);
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap())
                .unwrap();
        assert_eq!(json["timing_met"], true);
    }

    #[test]
    fn overuse_is_read_from_nextpnrs_utilisation() {
        let log = "Info: Device utilisation:\nInfo: \t         ICESTORM_LC: 11181/ 5280   211%\n\
                   Info: \t        ICESTORM_RAM:    29/   30    96%\n\
                   Info: \t        ICESTORM_DSP:    22/    8   275%\n";
        assert_eq!(overused(log), "needs ICESTORM_LC 11181 of 5280, ICESTORM_DSP 22 of 8");
        assert_eq!(overused("Info: nothing"), "placement failed");
        let stat = "   Number of cells:   60\n     SB_CARRY   22\n     SB_MAC16   9\n";
        assert_eq!(cell_lines(stat), "SB_CARRY 22, SB_MAC16 9");
        let stat = "    29924 cells\n      753   $scopeinfo\n     2626   CCU2C\n    18354   LUT4\n";
        assert_eq!(cell_lines(stat), "CCU2C 2626, LUT4 18354");
        let err = "ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'ICESTORM_DSP'";
        assert!(does_not_fit(err).is_some());
        assert!(does_not_fit("ERROR: something else").is_none());
        let region = "ERROR: Failed to expand region (0, 0) |_> (25, 31) of 7186 ICESTORM_LCs";
        assert_eq!(does_not_fit(region).as_deref(), Some(region));
        let over = format!("{log}ERROR: something else");
        assert_eq!(does_not_fit(&over).as_deref(), Some("ERROR: something else"));
    }

    #[test]
    fn an_impossible_clock_fails_with_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let err = build(
            &ICEBREAKER,
            &blink(&ICEBREAKER, "led_red_n"),
            2000.0,
            Pnr::default(),
            dir.path(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(matches!(err, FlowError::Timing { .. }), "{err}");
        assert!(err.to_string().contains("timing not met"), "{err}");
        assert!(dir.path().join("report.json").is_file());
        // Both are written, and `board program` refuses them unless forced.
        let err = crate::program::loadable(&ICEBREAKER, dir.path(), false).unwrap_err();
        assert!(err.to_string().contains("missed timing"), "{err}");
        assert!(crate::program::loadable(&ICEBREAKER, dir.path(), true).is_ok());
    }

    #[test]
    fn a_failed_rebuild_leaves_the_previous_build_whole() {
        let dir = tempfile::tempdir().unwrap();
        let good = blink(&ICEBREAKER, "led_red_n");
        let report =
            build(&ICEBREAKER, &good, 12.0, Pnr::default(), dir.path(), &mut |_| {}).unwrap();
        let bin = std::fs::read(dir.path().join("systole.bin")).unwrap();
        let json = std::fs::read(dir.path().join("report.json")).unwrap();
        assert_eq!(report.bitstream, Some(Bitstream::of("systole.bin", &bin)));
        // The same counter with an output no pin is assigned to: nextpnr refuses it.
        let mut bad = good.clone();
        bad.sources[0].1 = bad.sources[0]
            .1
            .replace("output wire", "output wire nope, output wire")
            .replace("endmodule", "  assign nope = c[22];\nendmodule");
        let err =
            build(&ICEBREAKER, &bad, 12.0, Pnr::default(), dir.path(), &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
        assert_eq!(std::fs::read(dir.path().join("systole.bin")).unwrap(), bin);
        assert_eq!(std::fs::read(dir.path().join("report.json")).unwrap(), json);
        assert!(crate::program::loadable(&ICEBREAKER, dir.path(), false).is_ok());
    }

    #[test]
    fn an_aim_scales_the_oscillators_constraint() {
        use crate::board::ULX3S_85F;
        assert_eq!(aimed_constraints(&ULX3S_85F, 37.5, None), ULX3S_85F.constraints);
        let aimed = aimed_constraints(&ULX3S_85F, 37.5, Some(33.3333));
        // 25 MHz x 33.3333 / 37.5: the PLL's output is then timed at the aim.
        assert!(aimed.contains("FREQUENCY PORT \"clk_25mhz\" 22.2222 MHZ;"), "{aimed}");
        assert!(!aimed.contains(" 25 MHZ"), "{aimed}");
        assert_eq!(aimed.lines().count(), ULX3S_85F.constraints.lines().count());
        assert_eq!(aimed_constraints(&ICEBREAKER, 12.0, Some(10.0)), ICEBREAKER.constraints);
    }

    #[test]
    fn ecp5_flow_builds_when_the_yowasp_tools_are_installed() {
        let dir = tempfile::tempdir().unwrap();
        // router2, another seed and an aim below the clock, as `board build --router router2
        // --seed 5 --pnr-mhz 12.5` asks.
        let pnr = Pnr { seed: 5, router: crate::nextpnr::Router::Router2, aim_mhz: Some(12.5) };
        match build(&ULX3S_25F, &blink(&ULX3S_25F, "led"), 25.0, pnr, dir.path(), &mut |_| {}) {
            Ok(report) => {
                assert!(dir.path().join("systole.bit").is_file());
                assert_eq!(report.flip_flops, 24);
                assert_eq!(report.pnr, pnr);
                let log = std::fs::read_to_string(dir.path().join("nextpnr.log")).unwrap();
                assert!(log.contains("router2"), "nextpnr was not asked for router2");
                // nextpnr timed against the aim; the report judges the clock.
                assert!(log.contains("at 12.50 MHz)"), "nextpnr was not aimed at 12.5 MHz");
                assert_eq!(report.target_mhz, 25.0);
                assert_eq!(report.timing_met, report.fmax_mhz >= 25.0);
            }
            Err(FlowError::Tool(ToolError::Missing { tool, provider, .. })) => {
                panic!("{tool} is missing: CI installs it ({provider})")
            }
            Err(e) => panic!("{e}"),
        }
    }
}
