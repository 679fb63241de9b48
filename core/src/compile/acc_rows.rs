//! What the vector-unit lowerings (`pool`, `col2im`) share: their accumulator row regions,
//! storing a run of rows as f32 words and bf16 elements, and their segments and layers.

use super::{CompileError, Compiler, Segment};
use crate::graph::{Op, TensorId};
use crate::isa::{Instruction, VectorOp};

/// Accumulator row regions for `regions` buffers of one run: `rows` rows each, the banks
/// alternating run by run where each bank holds them all, so under the decoupled schedule one
/// run's loads overlap the previous run's vector ops.
pub(super) struct Regions {
    pub(super) rows: u32,
    split: u32,
    per_bank: bool,
}

impl Regions {
    pub(super) fn new(acc_depth: u32, regions: u32) -> Result<Regions, CompileError> {
        let split = acc_depth.div_ceil(2);
        match (split / regions, acc_depth / regions) {
            (0, 0) => Err(CompileError::NotLowered { what: TOO_FEW }),
            (0, rows) => Ok(Regions { rows, split, per_bank: false }),
            (rows, _) => Ok(Regions { rows: rows.min(u16::MAX as u32), split, per_bank: true }),
        }
    }
    /// Whether consecutive runs use different rows (each bank holds a run's regions): only then
    /// may their code interleave ([`super::paired::Paired`]).
    pub(super) fn alternate(&self) -> bool {
        self.per_bank
    }
    /// Region `i` of run number `run`.
    pub(super) fn at(&self, run: usize, i: u32) -> u16 {
        let bank = if self.per_bank { (run % 2) as u32 * self.split } else { 0 };
        (bank + i * self.rows) as u16
    }
}

/// Pooling's gradient needs four accumulator rows, col2im three, pooling two.
const TOO_FEW: &str = "pooling or col2im on an array of fewer than 4 accumulator rows";

/// Accumulator rows from `acc_row` stored at element offset `at` of the f32 words at `words`
/// and of the bf16 elements at `elems` (either may be absent), `(rows, len, row_stride)` as the
/// stores take them (the stride in elements).
pub(super) fn store_rows(
    acc_row: u16,
    (words, elems): (Option<u32>, Option<u32>),
    at: u32,
    (rows, len, row_stride): (u16, u16, u32),
) -> impl Iterator<Item = Instruction> {
    let store = words.map(|base| Instruction::Store {
        acc_row,
        dram_addr: base + 4 * at,
        rows,
        len,
        row_stride,
    });
    let store_bf16 = elems.map(|base| Instruction::StoreBf16 {
        acc_row,
        dram_addr: base + 2 * at,
        rows,
        len,
        row_stride,
    });
    [store, store_bf16].into_iter().flatten()
}

pub(super) fn vector(op: VectorOp, dst: u16, src: u16, rows: u32, imm: u32) -> Instruction {
    Instruction::Vector { op, dst, src, rows: rows as u16, imm }
}

impl Compiler<'_> {
    /// Closes a segment without MACs of `program` from instruction `start`.
    pub(super) fn push_segment(
        &mut self,
        (op, layer): (&'static str, u8),
        program: u8,
        start: usize,
    ) {
        let end = self.programs[program as usize].len();
        self.segments.push(Segment { op, layer, program, start, end, macs: 0, cycles: 0 });
    }

    /// The parameter layer whose output (through bias, ReLU, pooling, reshapes) `t` is.
    pub(super) fn producer_layer(&self, t: TensorId) -> u8 {
        let mut t = t;
        loop {
            let from = self.graph.forward.iter().find_map(|op| match *op {
                Op::Dense { w, y, .. } if y == t => Some(Err(self.layer_of(w))),
                Op::BiasAdd { x, y, .. }
                | Op::Relu { x, y }
                | Op::Reshape { x, y }
                | Op::MaxPool { x, y, .. }
                | Op::AvgPool { x, y, .. } => (y == t).then_some(Ok(x)),
                _ => None,
            });
            match from {
                Some(Ok(x)) => t = x,
                Some(Err(layer)) => return layer,
                None => return 0,
            }
        }
    }
}
