//! The whole flow: sources -> netlist -> placed and routed design -> bitstream + report.

use std::path::Path;

use crate::board::Board;
use crate::report::{self, Report};
use crate::tool::ToolError;
use crate::{nextpnr, pack, yosys};

/// What to build: Verilog sources (file name, text) and the top module.
#[derive(Clone, Debug)]
pub struct Design {
    pub sources: Vec<(String, String)>,
    pub top: String,
}

/// Why a build did not give a usable bitstream.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error(
        "timing not met on {}: {:.2} MHz achieved, {:.2} MHz asked; lower --clock-mhz or the \
         array size (the report is in {})", report.board, report.fmax_mhz, report.target_mhz, dir
    )]
    Timing { report: Box<Report>, dir: String },
}

/// Builds `design` for `board` at `target_mhz` in `out` (created if needed): writes the
/// sources, the constraints, the netlist, the bitstream and `report.json`. A design that does
/// not fit fails in nextpnr with its own message; one that misses timing fails with
/// [`FlowError::Timing`] after writing its report.
pub fn build(
    board: &Board,
    design: &Design,
    target_mhz: f64,
    out: &Path,
) -> Result<Report, FlowError> {
    std::fs::create_dir_all(out).map_err(ToolError::io(out))?;
    let mut names = Vec::new();
    for (name, text) in &design.sources {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(ToolError::io(&path))?;
        names.push(name.as_str());
    }
    let constraints = out.join(board.constraints_name);
    std::fs::write(&constraints, board.constraints).map_err(ToolError::io(&constraints))?;
    let stat = yosys::synthesize(board, out, &names, &design.top)?;
    nextpnr::place_and_route(board, out, board.constraints_name, target_mhz, 1)?;
    pack::pack(board, out)?;
    let json_path = out.join("report.json");
    let json = std::fs::read_to_string(&json_path).map_err(ToolError::io(&json_path))?;
    let device = board.device.join(" ");
    let report = report::parse(
        &json,
        board.family,
        board.name,
        &device,
        target_mhz,
        report::yosys_flip_flops(&stat),
    )?;
    // Our report replaces nextpnr's raw one under the documented name; keep the raw one too.
    let raw = out.join("nextpnr-report.json");
    std::fs::rename(&json_path, &raw).map_err(ToolError::io(&raw))?;
    let text =
        serde_json::to_string_pretty(&report).map_err(|e| ToolError::Report(e.to_string()))?;
    std::fs::write(&json_path, text + "\n").map_err(ToolError::io(&json_path))?;
    if !report.timing_met {
        return Err(FlowError::Timing { report: Box::new(report), dir: out.display().to_string() });
    }
    Ok(report)
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
        Design { sources: vec![("blink.v".into(), v)], top: "blink".into() }
    }

    #[test]
    fn icebreaker_flow_builds_a_bitstream_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let report =
            build(&ICEBREAKER, &blink(&ICEBREAKER, "led_red_n"), 12.0, dir.path()).unwrap();
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
    fn an_impossible_clock_fails_with_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let err =
            build(&ICEBREAKER, &blink(&ICEBREAKER, "led_red_n"), 2000.0, dir.path()).unwrap_err();
        assert!(matches!(err, FlowError::Timing { .. }), "{err}");
        assert!(err.to_string().contains("timing not met"), "{err}");
        assert!(dir.path().join("report.json").is_file());
    }

    #[test]
    fn ecp5_flow_builds_when_the_yowasp_tools_are_installed() {
        let dir = tempfile::tempdir().unwrap();
        match build(&ULX3S_25F, &blink(&ULX3S_25F, "led"), 25.0, dir.path()) {
            Ok(report) => {
                assert!(dir.path().join("systole.bit").is_file());
                assert_eq!(report.flip_flops, 24);
            }
            Err(FlowError::Tool(ToolError::Missing { tool, provider, .. })) => {
                panic!("{tool} is missing: CI installs it ({provider})")
            }
            Err(e) => panic!("{e}"),
        }
    }
}
