//! A board build's synthesized netlist as Verilog a simulator runs: the cells Yosys mapped the
//! design to (`netlist.json`, what nextpnr placed and the bitstream holds), written back as
//! Verilog, and a `systole_top` around the board's top that gives its pins the machine's port
//! names, so the harness that drives the emitted machine drives the netlist as it is.
//!
//! The cells' models come from the simulator (`systole_sim::cells`): Yosys' own for every
//! iCE40 cell and the ECP5's logic, and the simulator's behaviour for the three ECP5 cells
//! Yosys only declares (its block RAM, multiplier and PLL; [`share_dir`] finds the library).
//!
//! [`share_dir`]: crate::yosys::share_dir

use std::fmt::Write as _;
use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::ToolError;
use crate::wrapper::{leds_vector, reset_pin, TopPort};

/// The Verilog of `build_dir/netlist.json`, written back by the Yosys that wrote it (through
/// `work`, a scratch directory; the build's directory is only read).
pub fn netlist_verilog(board: &Board, build_dir: &Path, work: &Path) -> Result<String, ToolError> {
    let json = build_dir.join("netlist.json");
    if !json.is_file() {
        return Err(ToolError::Report(format!(
            "{} is missing: give the directory `systole board build` wrote",
            json.display()
        )));
    }
    // A damaged file is named here, not left to Yosys' message about its own copy.
    let bytes = std::fs::read(&json).map_err(ToolError::io(&json))?;
    // Its syntax and its `modules` object, read without building the (large) document.
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct YosysJson {
        modules: std::collections::BTreeMap<String, serde::de::IgnoredAny>,
    }
    if let Err(e) = serde_json::from_slice::<YosysJson>(&bytes) {
        return Err(ToolError::Report(format!(
            "{}: not a Yosys JSON netlist ({e}); give the directory `systole board build` wrote",
            json.display()
        )));
    }
    // A copy beside the output, named relative to it: YoWASP's Yosys sees only the directory
    // it runs in (a path under /tmp outside it was "not found").
    let copy = work.join("netlist.json");
    std::fs::write(&copy, &bytes).map_err(ToolError::io(&copy))?;
    // Newer Yosys releases (the ECP5's) record the design's hierarchy in `$scopeinfo` cells,
    // which simulate as nothing.
    let script = match board.family {
        Family::Ice40 => "read_json netlist.json; write_verilog -noattr netlist.v",
        Family::Ecp5 => {
            "read_json netlist.json; delete t:$scopeinfo; write_verilog -noattr netlist.v"
        }
    };
    crate::yosys::tool(board).run(work, &["-q", "-p", script]).map_err(|e| match e {
        ToolError::Failed { tool, code, output } => {
            ToolError::Failed { tool: format!("{tool} reading {}", json.display()), code, output }
        }
        other => other,
    })?;
    let out = work.join("netlist.v");
    std::fs::read_to_string(&out).map_err(ToolError::io(out))
}

/// A module `systole_top` around the board's `board_top`: the clock drives the board's
/// oscillator pin, `reset` presses its reset button, the host interface keeps its names, and
/// the status LEDs come out as `done` and `error` (and `busy`, on a board that shows it). Its
/// ports, in order.
pub fn machine_adapter(board: &Board) -> (String, Vec<TopPort>) {
    let port = |name: &str, input: bool| TopPort { name: name.into(), input, bits: 1 };
    let mut ports = vec![
        port("clock", true),
        port("reset", true),
        port("uart_rx", true),
        port("uart_tx", false),
        port("spi_cs_n", true),
        port("spi_sck", true),
        port("spi_mosi", true),
        port("spi_miso", false),
        port("done", false),
        port("error", false),
    ];
    let vector = leds_vector(board);
    if vector {
        ports.push(port("busy", false));
    }
    let mut v = String::new();
    let list: Vec<String> = ports
        .iter()
        .map(|p| format!("{} wire {}", if p.input { "input" } else { "output" }, p.name))
        .collect();
    let _ = writeln!(v, "// systole-boards: {}'s board_top as the machine's ports.", board.title);
    let _ = writeln!(v, "module systole_top({});", list.join(", "));
    let mut conns =
        vec![format!(".{}(clock)", board.clock_port), format!(".{}(~reset)", reset_pin(board))];
    for name in ["uart_rx", "uart_tx", "spi_cs_n", "spi_sck", "spi_mosi", "spi_miso"] {
        conns.push(format!(".{name}({name})"));
    }
    if vector {
        let _ = writeln!(v, "  wire [7:0] led;");
        conns.push(".led(led)".into());
        let _ = writeln!(
            v,
            "  assign busy = led[0];\n  assign done = led[1];\n  assign error = led[2];"
        );
    } else {
        let _ = writeln!(v, "  wire led_red_n, led_green_n;");
        conns.push(".led_red_n(led_red_n)".into());
        conns.push(".led_green_n(led_green_n)".into());
        let _ = writeln!(v, "  assign done = ~led_green_n;\n  assign error = ~led_red_n;");
    }
    let _ = writeln!(v, "  board_top board({});", conns.join(", "));
    let _ = writeln!(v, "endmodule");
    (v, ports)
}

/// Cycles of the board's clock after its reset pin is released before the machine leaves
/// reset: the wrapper's power-on counter (`reset`'s cycles of the design's clock) and a margin.
pub fn settle_cycles(clock_ratio: u32, reset: crate::wrapper::PowerOnReset) -> u32 {
    (reset.cycles() + 48) * clock_ratio.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ALCHITRY_CU, ICEBREAKER, ULX3S_85F};

    #[test]
    fn the_adapter_maps_each_boards_pins() {
        let (v, ports) = machine_adapter(&ICEBREAKER);
        assert!(v.contains(".clk_12mhz(clock)") && v.contains(".btn_n(~reset)"), "{v}");
        assert!(v.contains("assign done = ~led_green_n;"), "{v}");
        assert!(!ports.iter().any(|p| p.name == "busy"), "the iCEBreaker shows no busy LED");
        let (v, ports) = machine_adapter(&ALCHITRY_CU);
        assert!(v.contains(".rst_n(~reset)") && v.contains("assign busy = led[0];"), "{v}");
        assert!(ports.iter().any(|p| p.name == "busy" && !p.input));
    }

    #[test]
    fn a_directory_without_a_netlist_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for board in [&ULX3S_85F, &ICEBREAKER] {
            let err = netlist_verilog(board, dir.path(), dir.path()).unwrap_err().to_string();
            assert!(err.contains("netlist.json is missing"), "{err}");
        }
    }
}
