//! The boards' USB-serial bridges, and the rate a build runs its UART at: the fastest the
//! bridge carries reliably whose divisor at the build's clock leaves the RTL receiver enough
//! sampling margin against the rate the bridge makes (docs/DECISIONS.md 140).

use systole_hdl::link::sampling_margin;
use systole_hdl::top::BAUD_TOLERANCE;

/// The least sampling margin a build's link may have, in bits: of the half bit a perfect
/// receiver has, what the clocks' mismatch and the receiver's cycle of uncertainty leave
/// must keep 0.3 bit for what is not modelled (edge jitter and skew, a bridge's fractional
/// divisor alternating bit lengths).
pub const MIN_MARGIN: f64 = 0.3;

/// The rate error the clocks themselves may add, either way: USB full speed holds a bridge
/// without a crystal (the FT231X) to 0.25%, and the boards' crystals add well under 0.05%.
pub const CLOCK_ALLOWANCE: f64 = 0.003;

/// A USB-serial bridge: what it is, the fastest rate it carries reliably, and the rates its
/// baud generator makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsbBridge {
    pub chip: &'static str,
    /// The fastest rate it makes.
    pub max_baud: u32,
    /// The fastest rate it carries reliably, by its maker's or its users' word.
    pub reliable_baud: u32,
    /// Its baud generator's base: it makes the base, two thirds of it, and the base over
    /// `n + k / 8` for `n` from 2 and `k` from 0 to 7 (FTDI's sub-integer divisors).
    pub base_baud: u32,
}

/// The ULX3S's bridge: a full-speed FT231X, 3 Mbaud at most, reported unreliable there on some
/// boards (prjtrellis PR #200); whether a build may use it is left to the sampling margin.
pub const FT231X: UsbBridge = UsbBridge {
    chip: "FT231X",
    max_baud: 3_000_000,
    reliable_baud: 3_000_000,
    base_baud: 3_000_000,
};

/// The iCEBreaker's and the Alchitry Cu's bridge: a high-speed FT2232H, whose channel B carries
/// UART up to 12 Mbaud; pyftdi's author advises staying at or below 6 Mbaud.
pub const FT2232H: UsbBridge = UsbBridge {
    chip: "FT2232H",
    max_baud: 12_000_000,
    reliable_baud: 6_000_000,
    base_baud: 12_000_000,
};

/// The link a build runs: its UART's divisor and the rate that makes at the build's clock, the
/// rate the bridge makes nearest it, and the receiver's sampling margin between the two with
/// the clocks' allowance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkRate {
    pub divisor: u16,
    pub baud: f64,
    pub bridge_baud: f64,
    pub margin: f64,
}

impl LinkRate {
    /// The bridge's rate error against the UART's (positive: the bridge is faster).
    pub fn rate_error(&self) -> f64 {
        self.bridge_baud / self.baud - 1.0
    }

    /// The link's data rate in bytes a second, 10 bits a byte.
    pub fn bytes_per_s(&self) -> f64 {
        self.baud / 10.0
    }
}

/// Why no rate suits a clock.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "no UART rate at {clock_mhz} MHz that the {chip} makes within {tol}% leaves the receiver \
     {min} bit of sampling margin",
    tol = 100.0 * BAUD_TOLERANCE,
    min = MIN_MARGIN
)]
pub struct LinkRateError {
    pub chip: &'static str,
    pub clock_mhz: f64,
}

impl UsbBridge {
    /// The rate its baud generator makes nearest `baud`.
    pub fn nearest(&self, baud: f64) -> f64 {
        let base = self.base_baud as f64;
        // Eighths of a divisor from 2 up; 0 and 1 are the base and two thirds of it.
        let eighths = (base / baud * 8.0).round().max(16.0);
        [base, base * 2.0 / 3.0, base * 8.0 / eighths]
            .into_iter()
            .min_by(|a, b| (a - baud).abs().total_cmp(&(b - baud).abs()))
            .unwrap_or(base)
    }

    /// The link of a build at `clock_mhz`: the smallest divisor (from the UART's 4) whose rate
    /// the bridge carries reliably, makes within [`BAUD_TOLERANCE`] (its own receiver's share
    /// of a frame), and leaves the RTL receiver at least [`MIN_MARGIN`] with the clocks off by
    /// [`CLOCK_ALLOWANCE`] either way.
    pub fn link_rate(&self, clock_mhz: f64) -> Result<LinkRate, LinkRateError> {
        let clock = clock_mhz * 1e6;
        let none = LinkRateError { chip: self.chip, clock_mhz };
        if !(clock.is_finite() && clock > 0.0) {
            return Err(none);
        }
        (4..=u16::MAX)
            .map(|divisor| {
                let baud = clock / divisor as f64;
                let bridge_baud = self.nearest(baud);
                let error = bridge_baud / baud - 1.0;
                let margin = sampling_margin(divisor, error + CLOCK_ALLOWANCE)
                    .min(sampling_margin(divisor, error - CLOCK_ALLOWANCE));
                (LinkRate { divisor, baud, bridge_baud, margin }, error)
            })
            .find(|(r, error)| {
                r.baud <= self.reliable_baud as f64
                    && error.abs() <= BAUD_TOLERANCE
                    && r.margin >= MIN_MARGIN
            })
            .map(|(r, _)| r)
            .ok_or(none)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::BOARDS;

    /// FTDI's generator: 3 Mbaud, 2 Mbaud, then eighths of a divisor from 2.
    #[test]
    fn the_generator_makes_the_base_two_thirds_and_eighths_of_a_divisor() {
        assert_eq!(FT231X.nearest(2.9e6), 3e6);
        assert_eq!(FT231X.nearest(2.1e6), 2e6);
        assert_eq!(FT231X.nearest(1.6e6), 1.5e6);
        assert_eq!(FT231X.nearest(1.42e6), 3e6 / 2.125);
        assert_eq!(FT2232H.nearest(5.3e6), 12e6 / 2.25);
    }

    /// Each board's default builds get the fastest rate with the margin, never 3 Mbaud on the
    /// FT231X (50 MHz makes 2.94 Mbaud, 2% off the bridge's 3 Mbaud: 0.26 bit) nor over the
    /// FT2232H's 6 Mbaud; each clock's rate is below the next faster divisor's, which fails.
    #[test]
    fn each_default_build_runs_the_fastest_rate_with_the_margin() {
        let mut got = vec![];
        for b in BOARDS {
            for p in [Some(b.int8), b.bf16].into_iter().flatten() {
                let mhz = p.knobs.clock_mhz;
                let r = b.bridge.link_rate(mhz).unwrap_or_else(|e| panic!("{}: {e}", b.name));
                assert!(r.margin >= MIN_MARGIN && r.baud <= b.bridge.reliable_baud as f64);
                if r.divisor > 4 {
                    let faster = r.divisor - 1;
                    let baud = mhz * 1e6 / faster as f64;
                    let error = b.bridge.nearest(baud) / baud - 1.0;
                    let m = sampling_margin(faster, error + CLOCK_ALLOWANCE)
                        .min(sampling_margin(faster, error - CLOCK_ALLOWANCE));
                    assert!(
                        baud > b.bridge.reliable_baud as f64
                            || error.abs() > BAUD_TOLERANCE
                            || m < MIN_MARGIN
                    );
                }
                got.push((b.name, mhz, r.divisor));
            }
        }
        assert_eq!(
            got,
            [
                ("icebreaker", 20.25, 7),
                ("icebreaker", 10.5, 5),
                ("alchitry-cu", 47.5, 9),
                ("alchitry-cu", 16.666667, 5),
                ("ulx3s", 50.0, 25),
                ("ulx3s", 40.0, 20),
                ("ulx3s-25f", 55.0, 37),
                ("ulx3s-25f", 42.8571, 29),
            ]
        );
    }

    /// A clock too slow for even the slowest rate to be made, or no clock, is refused with
    /// a line naming the bridge.
    #[test]
    fn a_clock_no_rate_suits_is_refused() {
        let e = FT231X.link_rate(f64::NAN).unwrap_err();
        assert!(e.to_string().contains("FT231X"), "{e}");
        assert!(FT231X.link_rate(0.0).is_err());
        assert!(FT2232H.link_rate(12.0).is_ok());
    }
}
