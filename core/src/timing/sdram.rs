//! DRAM transfers on the SDRAM port ([`DramPort::Sdram`](crate::config::DramPort)): the cycles
//! of a `Load`, `LoadAcc`, `Store`, `StoreSpad` or `StoreBf16` depend on the rows the last
//! transfer left open and on the refreshes due, so they come from core's controller
//! ([`crate::sdram::Controller`]) stepped through the run, not from a closed form.
//!
//! # The rules (the contract the RTL meets)
//!
//! The SDRAM runs on a clock `k` times the array's ([`crate::sdram::clock_ratio`]: 2 where the
//! part allows), driven at the array's rate: in each array cycle the port gives `k` commands,
//! one a phase, through double-data-rate registers in the pins' I/O cells (docs/DECISIONS.md
//! 146). Array cycle `c` is SDRAM cycles `k c .. k c + k - 1`, and the controller's cycles (and
//! its refresh cadence) count from the run's first SDRAM cycle. One transfer holds the SDRAM at
//! a time (`scoreboard::Footprint::dram_bus`), so transfers reach the controller in dispatch
//! order, and a transfer offers its words one after another, each from the SDRAM cycle after
//! the one before it was accepted.
//!
//! * Row `r` of the transfer starts at byte `dram_addr + r * row_stride * es` (`es` the bytes
//!   of its DRAM elements: the dtype's for `Load` and `StoreSpad`, 4 for `LoadAcc` and
//!   `Store`, 2 for `StoreBf16`). Its bytes are one span when its elements are contiguous
//!   (`elem_stride` 1; 0, a repeated element, is the one element's bytes), else one span per
//!   element. Each span moves the 16-bit words that cover it ([`WORD_BYTES`]), in order; a
//!   write of a partial word masks the other byte (the chip's DQM pins).
//! * **A read** (`Load`, `LoadAcc`) dispatched in array cycle `at` offers its first word from
//!   the first SDRAM cycle of `at`. A word lands [`SdramBus::read_arrival`] array cycles after
//!   the array cycle its READ is given in (a register out, the CAS latency, a register in), and
//!   a row lands `read_stages` cycles after its last word (through the output registers every
//!   memory read passes). Rows land in distinct array cycles (the scratchpad takes one a cycle):
//!   a row's last word is not offered in the array cycle in which the row before it ended (its
//!   last READ); it waits for the next.
//! * **A write** (`Store`, `StoreSpad`, `StoreBf16`) reads its source rows one an array cycle
//!   into [`WRITE_SLOTS`] row registers: row `r`'s read is issued in array cycle `i_r`, with
//!   `i_0 = at`, `i_r = i_(r-1) + 1`, and no earlier than two cycles after the array cycle in
//!   which row `r - WRITE_SLOTS`, whose register it takes, gave its last WRITE. Its bytes reach
//!   the register `lead` cycles after that (`read_stages`, and `convert_stages` for a
//!   `StoreBf16`: through the memory's output registers and the lanes), and its words are
//!   offered from the first SDRAM cycle of the array cycle after: `i_r + lead + 1`. A row lands
//!   in the array cycle of its last WRITE.
//! * The transfer is in flight until the array cycle after its last row lands. Between
//!   transfers the controller gives the refreshes due, on their cadence from the run's start.

use crate::config::{ArrayConfig, DramPort};
use crate::isa::Instruction;
use crate::sdram::{timing_under, Command, Controller, Request, SDRAM_PART, WORD_BYTES};

/// Source rows a write's port holds at once: the row whose words are going out and the next.
pub const WRITE_SLOTS: usize = 2;

/// The DRAM side of a transfer: where its rows are, which way they go, and from which cycle
/// after its dispatch it offers words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub addr: u64,
    pub rows: u64,
    pub row_stride: u64,
    pub len: u64,
    pub elem_stride: u64,
    /// Bytes of one DRAM element.
    pub es: u64,
    pub write: bool,
    /// The machine's stages between the SDRAM and its memories: a write's source row reaches
    /// its register `lead` cycles after its read (`read_stages`, and `convert_stages` for a
    /// `StoreBf16`); a read's row lands in the memory `lead` cycles after its last word
    /// (`read_stages`: through the same output registers every memory read passes).
    pub lead: u64,
}

impl Transfer {
    /// The DRAM side of `ins`, or `None` for an instruction that moves no DRAM bytes.
    pub fn of(config: &ArrayConfig, ins: &Instruction) -> Option<Transfer> {
        let es = config.dtype.elem_bytes() as u64;
        let store = |dram_addr: u32, rows: u16, len: u16, row_stride: u32, es: u64, lead: u64| {
            Some(Transfer {
                addr: dram_addr as u64,
                rows: rows as u64,
                row_stride: row_stride as u64,
                len: len as u64,
                elem_stride: 1,
                es,
                write: true,
                lead: config.read_stages as u64 + lead,
            })
        };
        match *ins {
            Instruction::Load { dram_addr, rows, len, row_stride, elem_stride, .. } => {
                Some(Transfer {
                    addr: dram_addr as u64,
                    rows: rows as u64,
                    row_stride: row_stride as u64,
                    len: len as u64,
                    elem_stride: elem_stride as u64,
                    es,
                    write: false,
                    lead: config.read_stages as u64,
                })
            }
            Instruction::LoadAcc { dram_addr, rows, len, row_stride, .. } => Some(Transfer {
                addr: dram_addr as u64,
                rows: rows as u64,
                row_stride: row_stride as u64,
                len: len as u64,
                elem_stride: 1,
                es: 4,
                write: false,
                lead: config.read_stages as u64,
            }),
            Instruction::Store { dram_addr, rows, len, row_stride, .. } => {
                store(dram_addr, rows, len, row_stride, 4, 0)
            }
            Instruction::StoreSpad { dram_addr, rows, len, row_stride, .. } => {
                store(dram_addr, rows, len, row_stride, es, 0)
            }
            Instruction::StoreBf16 { dram_addr, rows, len, row_stride, .. } => {
                store(dram_addr, rows, len, row_stride, 2, config.convert_stages as u64)
            }
            _ => None,
        }
    }

    /// The byte spans of row `r`, `(first byte, bytes)` each, to `each`.
    pub fn spans(&self, r: u64, mut each: impl FnMut(u64, u64)) {
        let base = self.addr + r * self.row_stride * self.es;
        match self.elem_stride {
            0 => each(base, self.es),
            1 => each(base, self.len * self.es),
            stride => (0..self.len).for_each(|e| each(base + e * stride * self.es, self.es)),
        }
    }

    /// Words row `r` moves, fewest cycles it can take.
    pub fn row_words(&self, r: u64) -> u64 {
        let mut words = 0;
        self.spans(r, |lo, n| words += (lo + n - 1) / WORD_BYTES - lo / WORD_BYTES + 1);
        words
    }
}

/// The SDRAM as a run sees it: core's controller, from the run's first cycle, on a clock
/// `ratio` times the array's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdramBus {
    pub controller: Controller,
    pub ratio: u64,
}

impl SdramBus {
    /// The SDRAM at the start of a run of a machine of `config` (whose clock the part's
    /// timing allows: `ArrayConfig::validate`).
    pub fn new(config: &ArrayConfig) -> SdramBus {
        let (timing, ratio) = timing_under(&SDRAM_PART, config.clock_mhz)
            .unwrap_or_else(|e| panic!("an SDRAM machine of an unvalidated config: {e}"));
        SdramBus { controller: Controller::new(timing, SDRAM_PART.geometry), ratio }
    }

    /// The SDRAM of a run of `config`'s machine, if its DRAM is the SDRAM.
    pub fn of(config: &ArrayConfig) -> Option<SdramBus> {
        (config.dram_port == DramPort::Sdram).then(|| SdramBus::new(config))
    }

    /// Times `transfer` dispatched in array cycle `at` (at or after the last transfer's end):
    /// `row(r, lands)` gets the array cycle, counted from `at`, each row lands in. Returns the
    /// array cycles it is in flight (module docs: the rules).
    pub fn time(&mut self, transfer: &Transfer, at: u64, mut row: impl FnMut(u64, u64)) -> u64 {
        let k = self.ratio;
        let arrival = self.read_arrival();
        let c = &mut self.controller;
        // The array cycle each of the last WRITE_SLOTS rows' last word was accepted in, and the
        // cycle the last row's source read was issued in.
        let mut ends = [0u64; WRITE_SLOTS];
        let mut issued = at;
        let mut lands = at;
        // The array cycle the row before ended in (its last READ or WRITE).
        let mut ended = None;
        for r in 0..transfer.rows {
            let mut first = at;
            if transfer.write {
                if r > 0 {
                    issued += 1;
                }
                if r >= WRITE_SLOTS as u64 {
                    issued = issued.max(ends[r as usize % WRITE_SLOTS] + 2);
                }
                first = issued + transfer.lead + 1;
            }
            c.idle_until(first * k, |_, _| {});
            let last_word = transfer.row_words(r);
            let mut n = 0;
            let mut accepted = 0;
            transfer.spans(r, |lo, bytes| {
                for word in lo / WORD_BYTES..=(lo + bytes - 1) / WORD_BYTES {
                    n += 1;
                    let request =
                        Request { word: word as u32, write: transfer.write.then_some(0), mask: 0 };
                    accepted = loop {
                        let t = c.now();
                        // A read row's last word waits for an array cycle in which no row ended.
                        if !transfer.write && n == last_word && ended == Some(t / k) {
                            c.step(None);
                            continue;
                        }
                        match c.step(Some(request)) {
                            Command::Read { .. } | Command::Write { .. } => break t,
                            _ => {}
                        }
                    };
                }
            });
            ends[r as usize % WRITE_SLOTS] = accepted / k;
            ended = Some(accepted / k);
            lands = accepted / k + if transfer.write { 0 } else { arrival + transfer.lead };
            row(r, lands - at);
        }
        lands + 1 - at
    }

    /// Array cycles from the one a READ is given in to the one its word lands in: the half-rate
    /// port's registers out and in ([`IO_STAGES`]), and the CAS latency rounded up to array
    /// cycles (module docs).
    pub fn read_arrival(&self) -> u64 {
        crate::sdram::controller::read_arrival(&self.controller.timing, self.ratio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DramPort, Dtype, Schedule};

    fn config() -> ArrayConfig {
        let config = ArrayConfig::new(4, 4, Dtype::Int8)
            .with_schedule(Schedule::Decoupled)
            .with_dram_port(DramPort::Sdram);
        ArrayConfig { clock_mhz: 50.0, ..config }
    }

    fn load(dram_addr: u32, rows: u16, len: u16, row_stride: u32, elem_stride: u32) -> Instruction {
        Instruction::Load { spad_row: 0, dram_addr, rows, len, row_stride, elem_stride }
    }

    /// A row's words: a contiguous odd-aligned row covers one word more than its bytes' half;
    /// a strided one a word per element.
    #[test]
    fn rows_move_the_words_that_cover_their_bytes() {
        let c = config();
        let t = |ins| Transfer::of(&c, &ins).unwrap();
        assert_eq!(t(load(0, 1, 4, 4, 1)).row_words(0), 2);
        assert_eq!(t(load(1, 1, 4, 4, 1)).row_words(0), 3);
        assert_eq!(t(load(0, 1, 4, 4, 7)).row_words(0), 4);
        assert_eq!(t(load(0, 1, 4, 4, 0)).row_words(0), 1);
        let store =
            Instruction::Store { acc_row: 0, dram_addr: 64, rows: 2, len: 4, row_stride: 4 };
        let s = t(store);
        assert_eq!((s.write, s.es, s.row_words(1)), (true, 4, 8));
        assert_eq!(Transfer::of(&c, &Instruction::Sync), None);
    }

    /// A 50 MHz array's SDRAM at 100 MHz (CAS 2, tRCD 2, tRFC 7, in SDRAM cycles): the run's
    /// first refresh at cycle 0 holds the first ACTIVE until tRFC, the READ follows tRCD later,
    /// and its word lands `read_arrival` (3) array cycles after the READ's; the next row's word,
    /// in the open row, an SDRAM cycle later.
    #[test]
    fn a_load_waits_for_the_first_refresh_then_streams_a_word_a_cycle() {
        let c = config();
        let mut bus = SdramBus::new(&c);
        assert_eq!((bus.ratio, bus.controller.timing.rcd, bus.controller.timing.rfc), (2, 2, 7));
        assert_eq!(bus.read_arrival(), 3);
        let mut lands = [0u64; 2];
        let ins = load(0, 2, 2, 2, 1);
        let d = bus.time(&Transfer::of(&c, &ins).unwrap(), 0, |r, at| lands[r as usize] = at);
        // REFRESH at 0, ACTIVE at 7, READs at 9 and 10 (array cycles 4 and 5): land in 7 and 8.
        assert_eq!(lands, [7, 8]);
        assert_eq!(d, 9);
        // A write from the same row later: its source row in its register a cycle after the
        // dispatch, no ACTIVE, its WRITE at its first offer.
        let store =
            Instruction::StoreSpad { spad_row: 0, dram_addr: 4, rows: 1, len: 2, row_stride: 2 };
        let mut at = 0;
        let d = bus.time(&Transfer::of(&c, &store).unwrap(), 20, |_, l| at = l);
        assert_eq!((at, d), (1, 2));
    }

    /// One-word rows: a read's rows land in distinct array cycles, so a row's only word waits
    /// out the phase after the row before it ended; a write's rows wait for their source rows,
    /// two registers of them, each freed two cycles before the next read into it.
    #[test]
    fn rows_land_one_an_array_cycle_and_writes_wait_for_their_registers() {
        let c = config();
        let mut bus = SdramBus::new(&c);
        let mut lands = [0u64; 4];
        // Warm the row: REFRESH at 0, ACTIVE at 7, READ at 9.
        bus.time(&Transfer::of(&c, &load(0, 1, 2, 1, 1)).unwrap(), 0, |_, _| {});
        // From array cycle 10 (SDRAM 20): READs at 20, 22, 24 (not 21, 23: each row's last
        // word), landing 3 array cycles after 10, 11, 12.
        let ins = load(0, 3, 2, 1, 1);
        let d = bus.time(&Transfer::of(&c, &ins).unwrap(), 10, |r, l| lands[r as usize] = l);
        assert_eq!((lands, d), ([3, 4, 5, 0], 6));
        // A StoreSpad of four one-word rows from array cycle 20: source reads in 20, 21, then
        // two cycles after rows 0 and 1 gave their WRITEs (21 and 22): 23, 24. Their words go
        // from the cycle after (read_stages 0): WRITEs in array cycles 21, 22, 24, 25.
        assert_eq!(c.read_stages, 0);
        let store =
            Instruction::StoreSpad { spad_row: 0, dram_addr: 0, rows: 4, len: 2, row_stride: 2 };
        let d = bus.time(&Transfer::of(&c, &store).unwrap(), 20, |r, l| lands[r as usize] = l);
        assert_eq!((lands, d), ([1, 2, 4, 5], 6));
    }
}
