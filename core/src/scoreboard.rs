//! The decoupled schedule's hazard rules ([`Schedule::Decoupled`](crate::config::Schedule)):
//! which unit runs each instruction, what each one touches, and when two instructions on
//! different units may not be in flight together. The timing model and the cycle machine both
//! decide dispatches with [`conflicts`]; the hardware's comparators are these rules.
//!
//! Instructions issue in program order. One on a free unit dispatches unless an earlier one still
//! in flight on another unit conflicts with it:
//!
//! * **data**: one writes scratchpad rows or DRAM bytes the other reads or writes (read after
//!   write, write after read, write after write), by the span each touches;
//! * **accumulator banks**: the accumulators are two banks, rows `0..ceil(acc_depth / 2)` and the
//!   rest; each bank has the ports for one unit at a time, so two units never share a bank;
//! * **scratchpad ports**: one write port (`Load`, `CastBf16`, `Requantize`) and a second read
//!   port (`LoadWeights`, `StoreSpad`, and an output-stationary `MatmulOs`'s `B` rows) beside the
//!   array's.
//!
//! Ops of one unit run in program order on that unit, so they never conflict with each other.

use crate::config::ArrayConfig;
use crate::isa::Instruction;

/// The units of the decoupled machine. `Sync` and `Halt` run on none: they wait for all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Unit {
    /// `Load`, `LoadAcc`: DRAM into the scratchpad or the accumulators.
    Load,
    /// `LoadWeights`: scratchpad rows into the shadow weights.
    Weights,
    /// `Matmul`, `MatmulOs`.
    Array,
    /// `Vector`, `CastBf16`, `Requantize`, `Store`, `StoreSpad`, `StoreBf16`.
    Vector,
}

impl Unit {
    pub const ALL: [Unit; 4] = [Unit::Load, Unit::Weights, Unit::Array, Unit::Vector];
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Load => "load",
            Unit::Weights => "weights",
            Unit::Array => "array",
            Unit::Vector => "vector",
        }
    }
}

/// The unit an instruction runs on; `None` for `Sync` and `Halt`.
pub const fn unit(ins: &Instruction) -> Option<Unit> {
    match ins {
        Instruction::Load { .. } | Instruction::LoadAcc { .. } => Some(Unit::Load),
        Instruction::LoadWeights { .. } => Some(Unit::Weights),
        Instruction::Matmul { .. } | Instruction::MatmulOs { .. } => Some(Unit::Array),
        Instruction::Vector { .. }
        | Instruction::CastBf16 { .. }
        | Instruction::Requantize { .. }
        | Instruction::Store { .. }
        | Instruction::StoreSpad { .. }
        | Instruction::StoreBf16 { .. } => Some(Unit::Vector),
        Instruction::Sync | Instruction::Halt => None,
    }
}

/// Matmuls in the array at once (one entering, the rest draining): the depth of the hardware's
/// queue of drain descriptors (accumulator row, rows, accumulate).
pub const ARRAY_SLOTS: usize = 4;

/// Weight banks in each PE: the active one, the one `LoadWeights` fills (the shadow), and one
/// more, so a weight load need not wait for the matmul before the active one to drain. Rows carry
/// their bank down the array; a swap makes the shadow active and the next bank the shadow. (The
/// blocking schedule never swaps under a running matmul, so two banks give it the same
/// behaviour; its RTL has two.)
pub const WEIGHT_BANKS: usize = 3;

/// The bank after `bank`: where a `LoadWeights` goes while `bank` is active.
pub const fn next_bank(bank: usize) -> usize {
    (bank + 1) % WEIGHT_BANKS
}

/// A half-open span `lo..hi` of rows or bytes; empty when `lo >= hi`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Span {
    pub lo: u64,
    pub hi: u64,
}

impl Span {
    pub const EMPTY: Span = Span { lo: 0, hi: 0 };
    pub const fn new(lo: u64, len: u64) -> Span {
        Span { lo, hi: lo + len }
    }
    pub const fn overlaps(self, other: Span) -> bool {
        self.lo < self.hi && other.lo < other.hi && self.lo < other.hi && other.lo < self.hi
    }
}

/// One past the last byte of a 2-D strided DRAM access: `rows` rows `row_stride` elements apart,
/// `len` elements `elem_stride` apart in each, `es` bytes an element. `rows` and `len` are at
/// least 1 in every valid instruction.
pub const fn dram_end(
    addr: u32,
    rows: u16,
    row_stride: u32,
    len: u16,
    elem_stride: u64,
    es: u64,
) -> u64 {
    addr as u64 + ((rows as u64 - 1) * row_stride as u64 + (len as u64 - 1) * elem_stride) * es + es
}

/// The scratchpad ports beside the array's read port, one bit each in
/// [`Footprint::spad_ports`]: the write port, and the second read port.
pub const SPAD_WRITE: u8 = 1;
pub const SPAD_READ2: u8 = 2;

/// What one instruction touches while it is in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Footprint {
    pub spad_reads: [Span; 2],
    pub spad_write: Span,
    pub dram_read: Span,
    pub dram_write: Span,
    /// Accumulator banks read or written, one bit each.
    pub acc_banks: u8,
    /// Scratchpad ports besides the array's read port, one bit each.
    pub spad_ports: u8,
    /// Whether it holds the SDRAM ([`DramPort::Sdram`](crate::config::DramPort)): every DRAM
    /// transfer does, and one at a time streams its words through the one controller.
    pub dram_bus: bool,
}

/// The accumulator banks rows `rows` touches, one bit each.
pub fn acc_banks(config: &ArrayConfig, rows: Span) -> u8 {
    if rows.lo >= rows.hi {
        return 0;
    }
    let split = config.acc_depth.div_ceil(2) as u64;
    (rows.lo < split) as u8 | (((rows.hi > split) as u8) << 1)
}

/// The footprint of a valid instruction.
pub fn footprint(config: &ArrayConfig, ins: &Instruction) -> Footprint {
    let es = config.dtype.elem_bytes() as u64;
    let rows_at = |row: u16, rows: u16| Span::new(row as u64, rows as u64);
    let banks = |row: u16, rows: u16| acc_banks(config, rows_at(row, rows));
    let dram = |addr: u32, end: u64| Span { lo: addr as u64, hi: end };
    let mut fp = Footprint::default();
    match *ins {
        Instruction::Load { spad_row, dram_addr, rows, len, row_stride, elem_stride } => {
            fp.spad_write = rows_at(spad_row, rows);
            fp.spad_ports = SPAD_WRITE;
            let end = dram_end(dram_addr, rows, row_stride, len, elem_stride as u64, es);
            fp.dram_read = dram(dram_addr, end);
        }
        Instruction::LoadAcc { acc_row, dram_addr, rows, len, row_stride } => {
            fp.acc_banks = banks(acc_row, rows);
            fp.dram_read = dram(dram_addr, dram_end(dram_addr, rows, row_stride, len, 1, 4));
        }
        Instruction::Store { acc_row, dram_addr, rows, len, row_stride } => {
            fp.acc_banks = banks(acc_row, rows);
            fp.dram_write = dram(dram_addr, dram_end(dram_addr, rows, row_stride, len, 1, 4));
        }
        Instruction::StoreBf16 { acc_row, dram_addr, rows, len, row_stride } => {
            fp.acc_banks = banks(acc_row, rows);
            fp.dram_write = dram(dram_addr, dram_end(dram_addr, rows, row_stride, len, 1, 2));
        }
        Instruction::StoreSpad { spad_row, dram_addr, rows, len, row_stride } => {
            fp.spad_reads[0] = rows_at(spad_row, rows);
            fp.spad_ports = SPAD_READ2;
            fp.dram_write = dram(dram_addr, dram_end(dram_addr, rows, row_stride, len, 1, es));
        }
        Instruction::LoadWeights { spad_row, rows, .. } => {
            fp.spad_reads[0] = rows_at(spad_row, rows);
            fp.spad_ports = SPAD_READ2;
        }
        Instruction::Matmul { a_row, acc_row, rows, .. } => {
            fp.spad_reads[0] = rows_at(a_row, rows);
            fp.acc_banks = banks(acc_row, rows);
        }
        Instruction::MatmulOs { a_row, b_row, k, acc_row, rows, .. } => {
            fp.spad_reads = [rows_at(a_row, k), rows_at(b_row, k)];
            fp.spad_ports = SPAD_READ2;
            fp.acc_banks = banks(acc_row, rows);
        }
        Instruction::Vector { op, dst, src, rows, .. } => {
            let src_rows = match (op.uses_src(), op.src_is_one_row()) {
                (true, true) => 1,
                (true, false) => rows,
                (false, _) => 0,
            };
            fp.acc_banks = banks(dst, rows) | banks(src, src_rows);
        }
        Instruction::CastBf16 { acc_row, spad_row, rows }
        | Instruction::Requantize { acc_row, spad_row, rows, .. } => {
            fp.acc_banks = banks(acc_row, rows);
            fp.spad_write = rows_at(spad_row, rows);
            fp.spad_ports = SPAD_WRITE;
        }
        Instruction::Sync | Instruction::Halt => {}
    }
    fp.dram_bus = config.dram_port == crate::config::DramPort::Sdram
        && (fp.dram_read.lo < fp.dram_read.hi || fp.dram_write.lo < fp.dram_write.hi);
    fp
}

/// Whether two instructions on different units may not be in flight together.
pub fn conflicts(a: &Footprint, b: &Footprint) -> bool {
    let writes_read = |w: Span, r: &Footprint| {
        w.overlaps(r.spad_reads[0]) || w.overlaps(r.spad_reads[1]) || w.overlaps(r.spad_write)
    };
    writes_read(a.spad_write, b)
        || writes_read(b.spad_write, a)
        || a.dram_write.overlaps(b.dram_read)
        || a.dram_write.overlaps(b.dram_write)
        || b.dram_write.overlaps(a.dram_read)
        || a.acc_banks & b.acc_banks != 0
        || a.spad_ports & b.spad_ports != 0
        || a.dram_bus && b.dram_bus
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Dtype;

    fn cfg() -> ArrayConfig {
        ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(4, 4, Dtype::Int8) }
    }

    fn load(spad_row: u16, dram_addr: u32) -> Instruction {
        Instruction::Load { spad_row, dram_addr, rows: 4, len: 4, row_stride: 4, elem_stride: 1 }
    }

    #[test]
    fn spans_overlap_only_when_they_share_a_row() {
        assert!(Span::new(0, 4).overlaps(Span::new(3, 1)));
        assert!(!Span::new(0, 4).overlaps(Span::new(4, 1)));
        assert!(!Span::EMPTY.overlaps(Span::new(0, 10)));
    }

    #[test]
    fn banks_split_the_accumulators_in_halves() {
        let c = cfg();
        assert_eq!(acc_banks(&c, Span::new(0, 8)), 0b01);
        assert_eq!(acc_banks(&c, Span::new(8, 8)), 0b10);
        assert_eq!(acc_banks(&c, Span::new(7, 2)), 0b11);
        assert_eq!(acc_banks(&c, Span::EMPTY), 0);
    }

    #[test]
    fn hazards_between_units() {
        let c = cfg();
        let fp = |ins: Instruction| footprint(&c, &ins);
        let mm = |a_row, acc_row| Instruction::Matmul {
            a_row,
            acc_row,
            rows: 4,
            swap: false,
            accumulate: false,
        };
        let store = |acc_row, dram_addr| Instruction::Store {
            acc_row,
            dram_addr,
            rows: 4,
            len: 4,
            row_stride: 4,
        };
        // A load into rows a matmul reads: read after write, and write after read.
        assert!(conflicts(&fp(load(0, 0)), &fp(mm(2, 0))));
        assert!(!conflicts(&fp(load(4, 0)), &fp(mm(0, 0))));
        // A store of one bank while the array writes the other; and of the same bank.
        assert!(!conflicts(&fp(store(8, 64)), &fp(mm(0, 0))));
        assert!(conflicts(&fp(store(0, 64)), &fp(mm(0, 3))));
        // A load of DRAM bytes a store writes; of bytes beside them.
        assert!(conflicts(&fp(store(8, 0)), &fp(load(8, 60))));
        assert!(!conflicts(&fp(store(8, 0)), &fp(load(8, 64))));
        // Two scratchpad writers share one port even on disjoint rows.
        let cast = Instruction::Requantize {
            acc_row: 8,
            spad_row: 40,
            rows: 1,
            requant: crate::numerics::Requant::from_scale(0.5, 0).unwrap(),
        };
        assert!(conflicts(&fp(load(0, 0)), &fp(cast)));
        // The weight loader and a store of the scratchpad share the second read port.
        let lw = Instruction::LoadWeights { spad_row: 0, rows: 4, cols: 4 };
        let spill =
            Instruction::StoreSpad { spad_row: 20, dram_addr: 0, rows: 1, len: 4, row_stride: 4 };
        assert!(conflicts(&fp(lw), &fp(spill)));
        assert!(!conflicts(&fp(lw), &fp(mm(0, 0))));
    }
}
