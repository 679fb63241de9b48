//! An SDRAM chip's datasheet timing ([`SdramPart`], nanoseconds) and the same rules in cycles of
//! the accelerator's clock ([`SdramTiming`]), each rounded up as the datasheet says: a rule of
//! `t` ns at a period of `p` ns is `ceil(t / p)` cycles.

use super::Geometry;

/// A chip as its datasheet describes it. Times in nanoseconds unless named in clocks.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SdramPart {
    pub name: &'static str,
    pub geometry: Geometry,
    /// ACTIVE to READ or WRITE in the same bank.
    pub t_rcd: f64,
    /// PRECHARGE to ACTIVE or REFRESH.
    pub t_rp: f64,
    /// ACTIVE to PRECHARGE in the same bank.
    pub t_ras: f64,
    /// ACTIVE to ACTIVE in the same bank.
    pub t_rc: f64,
    /// REFRESH to ACTIVE or REFRESH.
    pub t_rfc: f64,
    /// ACTIVE in one bank to ACTIVE in another.
    pub t_rrd: f64,
    /// The last written word to PRECHARGE.
    pub t_wr: f64,
    /// LOAD MODE REGISTER to any command, in clocks.
    pub mrd_clocks: u64,
    /// The average time between REFRESH commands: the refresh period over its rows.
    pub t_refi: f64,
    /// Refreshes that may be postponed and made up later (JEDEC's SDR allowance).
    pub postponed_refreshes: u64,
    /// From power and a stable clock to the first command other than NOP.
    pub t_init: f64,
    /// The fastest clock at CAS latency 2, and at 3.
    pub cl2_max_mhz: f64,
    pub cl3_max_mhz: f64,
}

/// Every ULX3S's SDRAM: 32 MB, 4 banks of 8,192 rows of 512 16-bit words, timed as the slowest
/// grade of the Micron MT48LC16M16A2 datasheet (-75: PC100 at CAS latency 2, 133 MHz at 3).
/// Boards that carry the 64 MB AS4C32M16SB (1,024 columns) are used as 32 MB, column bit 9 low.
pub const ULX3S_SDRAM: SdramPart = SdramPart {
    name: "MT48LC16M16A2-75",
    geometry: Geometry { banks: 4, rows: 8192, cols: 512 },
    t_rcd: 20.0,
    t_rp: 20.0,
    t_ras: 44.0,
    t_rc: 66.0,
    t_rfc: 66.0,
    t_rrd: 15.0,
    t_wr: 15.0,
    mrd_clocks: 2,
    t_refi: 64_000_000.0 / 8192.0,
    postponed_refreshes: 8,
    t_init: 100_000.0,
    cl2_max_mhz: 100.0,
    cl3_max_mhz: 133.0,
};

/// A part's rules in cycles of one clock: what the controller waits between its commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SdramTiming {
    /// CAS latency: a READ's word is on the data pins this many cycles after the command.
    pub cas: u64,
    pub rcd: u64,
    pub rp: u64,
    pub ras: u64,
    pub rc: u64,
    pub rfc: u64,
    pub rrd: u64,
    pub wr: u64,
    pub mrd: u64,
    /// Cycles from one refresh's due cycle to the next's: the average interval, rounded down.
    pub refi: u64,
    /// Cycles of the power-up wait.
    pub init: u64,
}

/// Why a clock cannot run a part.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TimingError {
    /// Not a positive, finite clock.
    Clock { mhz: f64 },
    /// Faster than the part runs at any CAS latency.
    TooFast { part: &'static str, mhz: f64, max_mhz: f64 },
    /// So slow that a refresh may still be owed when the next falls due.
    TooSlow { part: &'static str, mhz: f64, refi: u64 },
}

/// The fewest cycles between refreshes the controller takes: a due refresh waits for the open
/// rows to close (tRAS), tRP and tRFC, some twenty cycles at the part's fastest clock, and must
/// be given before the next is due (`sdram::controller` counts one owed refresh at a time).
pub const MIN_REFI: u64 = 32;

impl core::fmt::Display for TimingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TimingError::Clock { mhz } => write!(f, "an SDRAM clock of {mhz} MHz is not a clock"),
            TimingError::TooFast { part, mhz, max_mhz } => {
                write!(f, "the {part} runs at {max_mhz} MHz at most, not {mhz} MHz")
            }
            TimingError::TooSlow { part, mhz, refi } => write!(
                f,
                "at {mhz} MHz the {part} needs a refresh every {refi} cycles, fewer than the \
                 controller's {MIN_REFI}"
            ),
        }
    }
}

/// Cycles of `period_ns` that cover `ns`, at least one.
fn cycles(ns: f64, period_ns: f64) -> u64 {
    // A rule that is a whole number of periods is met by that number: the tolerance keeps the
    // division's rounding from adding a cycle.
    (libm::ceil(ns / period_ns - 1e-9) as u64).max(1)
}

impl SdramTiming {
    /// `part`'s rules at a `clock_mhz` clock, at the lowest CAS latency the clock allows.
    pub fn at(part: &SdramPart, clock_mhz: f64) -> Result<SdramTiming, TimingError> {
        if !(clock_mhz.is_finite() && clock_mhz > 0.0) {
            return Err(TimingError::Clock { mhz: clock_mhz });
        }
        let cas = if clock_mhz <= part.cl2_max_mhz {
            2
        } else if clock_mhz <= part.cl3_max_mhz {
            3
        } else {
            return Err(TimingError::TooFast {
                part: part.name,
                mhz: clock_mhz,
                max_mhz: part.cl3_max_mhz,
            });
        };
        let p = 1000.0 / clock_mhz;
        let refi = (part.t_refi / p) as u64;
        if refi < MIN_REFI {
            return Err(TimingError::TooSlow { part: part.name, mhz: clock_mhz, refi });
        }
        Ok(SdramTiming {
            cas,
            rcd: cycles(part.t_rcd, p),
            rp: cycles(part.t_rp, p),
            ras: cycles(part.t_ras, p),
            rc: cycles(part.t_rc, p),
            rfc: cycles(part.t_rfc, p),
            rrd: cycles(part.t_rrd, p),
            wr: cycles(part.t_wr, p),
            mrd: part.mrd_clocks.max(1),
            refi,
            init: cycles(part.t_init, p),
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;
    use super::*;

    #[test]
    fn the_ulx3s_part_at_the_boards_clocks() {
        let t = SdramTiming::at(&ULX3S_SDRAM, 50.0).unwrap();
        // 20 ns periods: tRCD and tRP are exactly one, tRAS 2.2 and tRC 3.3 round up.
        assert_eq!((t.cas, t.rcd, t.rp, t.ras, t.rc, t.rfc, t.rrd, t.wr), (2, 1, 1, 3, 4, 4, 1, 1));
        // 7,812.5 ns between refreshes is 390.6 periods: due every 390.
        assert_eq!((t.refi, t.init, t.mrd), (390, 5000, 2));
        let t = SdramTiming::at(&ULX3S_SDRAM, 55.0).unwrap();
        assert_eq!((t.rcd, t.rp, t.ras, t.rc, t.refi), (2, 2, 3, 4, 429));
        let t = SdramTiming::at(&ULX3S_SDRAM, 120.0).unwrap();
        assert_eq!(t.cas, 3);
    }

    #[test]
    fn a_clock_the_part_cannot_take_is_refused_naming_both() {
        let e = SdramTiming::at(&ULX3S_SDRAM, 150.0).unwrap_err();
        assert_eq!(
            alloc::format!("{e}"),
            "the MT48LC16M16A2-75 runs at 133 MHz at most, not 150 MHz"
        );
        assert!(SdramTiming::at(&ULX3S_SDRAM, 0.0).is_err());
        let e = SdramTiming::at(&ULX3S_SDRAM, 2.0).unwrap_err();
        assert_eq!(
            alloc::format!("{e}"),
            "at 2 MHz the MT48LC16M16A2-75 needs a refresh every 15 cycles, fewer than the \
             controller's 32"
        );
        assert!(SdramTiming::at(&ULX3S_SDRAM, 5.0).is_ok());
        assert!(SdramTiming::at(&ULX3S_SDRAM, f64::NAN).is_err());
    }
}
