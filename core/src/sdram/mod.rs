//! The board's SDRAM: a 16-bit single-data-rate SDRAM (the ULX3S's 32 MB MT48LC16M16A2 class)
//! as the accelerator's large memory, its controller defined cycle by cycle, and a datasheet
//! model of the chip that checks every command the controller gives it.
//!
//! * [`part`]: the chip's datasheet figures in nanoseconds ([`SdramPart`]) and the same figures
//!   in cycles of a clock ([`SdramTiming`]).
//! * [`command`]: the commands on the chip's pins ([`Command`]).
//! * [`controller`]: the controller, a next-state function of its state and the word request
//!   it is offered ([`Controller`]): open rows per bank, precharge, activate, one-word reads and
//!   writes, refresh at a fixed cadence from the start of a run. Every machine times the SDRAM
//!   with it, so the cycle machine and the RTL agree on each command's cycle.
//! * [`chip`]: the chip as its datasheet describes it ([`Chip`]): it stores words, returns a
//!   read's word `cas` cycles after the command, and refuses any command that breaks a timing
//!   rule, naming the rule, the commands and the nanoseconds.
//!
//! Words are addressed as one flat range: column in the low bits, then bank, then row
//! ([`Geometry::locate`]), so a sequential stream stays in one row for a whole row of columns
//! and then moves to the next bank, whose row opens while the last bank's is still open.

pub mod command;
pub mod controller;
pub mod part;

#[cfg(feature = "alloc")]
pub mod chip;

pub use command::{kept_bits, Command, Pins, A10};
pub use controller::{Controller, Request};
pub use part::{SdramPart, SdramTiming, TimingError, ULX3S_SDRAM};

#[cfg(feature = "alloc")]
pub use chip::{Chip, ChipError};

/// Bytes of one SDRAM word: the chip's data bus is 16 bits wide.
pub const WORD_BYTES: u64 = 2;

/// The part a machine with an SDRAM port ([`DramPort::Sdram`](crate::config::DramPort)) is
/// timed by: the ULX3S's, whose DRAM region is this chip (at most its
/// [`Geometry::bytes`]).
pub const SDRAM_PART: SdramPart = ULX3S_SDRAM;

/// SDRAM cycles in each cycle of an accelerator clocked at `array_mhz`: 2 where twice that clock
/// is one `part` runs at (the SDRAM on a clock of twice the array's, its controller giving two
/// commands an array cycle, docs/DECISIONS.md 146), else 1. A 16-bit SDRAM moves 2 bytes a
/// cycle of its own clock, and the array's clock is set by its PEs, not by the SDRAM
/// (docs/DECISIONS.md 142).
pub fn clock_ratio(part: &SdramPart, array_mhz: f64) -> u64 {
    if 2.0 * array_mhz <= part.cl3_max_mhz {
        2
    } else {
        1
    }
}

/// `part`'s rules in cycles of its own clock under an array clocked at `array_mhz`, and the
/// [`clock_ratio`] between the two.
pub fn timing_under(part: &SdramPart, array_mhz: f64) -> Result<(SdramTiming, u64), TimingError> {
    let ratio = clock_ratio(part, array_mhz);
    Ok((SdramTiming::at(part, array_mhz * ratio as f64)?, ratio))
}

/// Banks, rows and columns of an SDRAM chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Geometry {
    pub banks: u32,
    pub rows: u32,
    pub cols: u32,
}

/// Where a word lives in the chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Location {
    pub bank: u8,
    pub row: u16,
    pub col: u16,
}

impl Geometry {
    /// Words the chip holds.
    pub const fn words(&self) -> u64 {
        self.banks as u64 * self.rows as u64 * self.cols as u64
    }

    /// Bytes the chip holds.
    pub const fn bytes(&self) -> u64 {
        self.words() * WORD_BYTES
    }

    /// Word `word`'s bank, row and column: the column from the low bits, then the bank, then
    /// the row (every dimension a power of two).
    pub const fn locate(&self, word: u32) -> Location {
        let col = word % self.cols;
        let rest = word / self.cols;
        Location {
            bank: (rest % self.banks) as u8,
            row: (rest / self.banks % self.rows) as u16,
            col: col as u16,
        }
    }

    /// The word at `at`: the inverse of [`Geometry::locate`].
    pub const fn word(&self, at: Location) -> u32 {
        (at.row as u32 * self.banks + at.bank as u32) * self.cols + at.col as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequential_stream_fills_a_row_then_moves_to_the_next_bank() {
        let g = ULX3S_SDRAM.geometry;
        assert_eq!(g.bytes(), 32 << 20);
        assert_eq!(g.locate(0), Location { bank: 0, row: 0, col: 0 });
        assert_eq!(g.locate(511), Location { bank: 0, row: 0, col: 511 });
        assert_eq!(g.locate(512), Location { bank: 1, row: 0, col: 0 });
        assert_eq!(g.locate(4 * 512), Location { bank: 0, row: 1, col: 0 });
        let last = (g.words() - 1) as u32;
        assert_eq!(g.locate(last), Location { bank: 3, row: 8191, col: 511 });
        for word in [0, 1, 511, 512, 2047, 2048, 1_234_567, last] {
            assert_eq!(g.word(g.locate(word)), word);
        }
    }
}
