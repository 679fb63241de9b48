//! The functional machine: executes whole instructions at once. It defines the results every
//! other machine must reproduce bit for bit.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;
use core::marker::PhantomData;

use crate::config::ArrayConfig;
use crate::isa::Instruction;
use crate::machine::{
    validate_program, ExecErrorKind, Machine, MachineError, Memories, Region, Stats,
};
use crate::numerics::Arith;

/// Input rows the functional weight-stationary matmul takes at once.
const ROW_BLOCK: usize = 4;

/// Weights in the array: `rows x cols` operands (row-major) and their useful extent.
pub(crate) struct WeightTile<A: Arith> {
    pub w: Vec<A::Operand>,
    pub k: u16,
    pub n: u16,
}

impl<A: Arith> WeightTile<A> {
    pub fn zero(cfg: &ArrayConfig) -> Self {
        WeightTile { w: vec![A::operand(A::Elem::default()); cfg.pe_count() as usize], k: 0, n: 0 }
    }
}

/// Rows a data-movement instruction processes, one per cycle.
pub(crate) fn seq_rows(ins: &Instruction) -> usize {
    match *ins {
        Instruction::Load { rows, .. }
        | Instruction::Store { rows, .. }
        | Instruction::Vector { rows, .. }
        | Instruction::CastBf16 { rows, .. }
        | Instruction::Requantize { rows, .. }
        | Instruction::LoadAcc { rows, .. }
        | Instruction::StoreSpad { rows, .. }
        | Instruction::StoreBf16 { rows, .. } => rows as usize,
        _ => 0,
    }
}

/// The functional golden machine for datapath `A`.
pub struct FunctionalMachine<A: Arith> {
    pub mem: Memories,
    active: WeightTile<A>,
    shadow: WeightTile<A>,
    shadow_full: bool,
    /// Output-stationary partial sums, one per PE.
    os_acc: Vec<A::Acc>,
    _arith: PhantomData<A>,
}

impl<A: Arith> FunctionalMachine<A> {
    /// A machine with zeroed memories; `config` must already be valid.
    pub fn new(config: ArrayConfig, dram_bytes: usize) -> Self {
        FunctionalMachine {
            mem: Memories::new(config, dram_bytes),
            active: WeightTile::zero(&config),
            shadow: WeightTile::zero(&config),
            shadow_full: false,
            os_acc: vec![A::zero(); config.pe_count() as usize],
            _arith: PhantomData,
        }
    }

    fn load_weights(&mut self, spad_row: u16, k: u16, n: u16) {
        let (r, c) = (self.mem.config.rows as usize, self.mem.config.cols as usize);
        for i in 0..r {
            for j in 0..c {
                let e = if i < k as usize && j < n as usize {
                    A::elem_from_bits(self.mem.spad_row(spad_row as usize + i)[j])
                } else {
                    A::Elem::default()
                };
                self.shadow.w[i * c + j] = A::operand(e);
            }
        }
        self.shadow.k = k;
        self.shadow.n = n;
        self.shadow_full = true;
    }

    /// Weight-stationary: each input row is summed down the columns, top row first, from zero.
    /// Rows go through in blocks of [`ROW_BLOCK`] so each weight row is loaded once per block
    /// and the independent sums keep the FPU busy; the order of each sum is unchanged.
    fn matmul_ws(&mut self, a_row: u16, acc_row: u16, rows: u16, accumulate: bool) {
        let (r, c) = (self.mem.config.rows as usize, self.mem.config.cols as usize);
        let zero_op = A::operand(A::Elem::default());
        let mut a = [[zero_op; 256]; ROW_BLOCK];
        let mut s = [[A::zero(); 256]; ROW_BLOCK];
        let rows = rows as usize;
        let mut m = 0;
        while m < rows {
            let block = ROW_BLOCK.min(rows - m);
            for (b, ab) in a.iter_mut().enumerate().take(block) {
                let spad = self.mem.spad_row(a_row as usize + m + b);
                for i in 0..r {
                    ab[i] = A::operand(A::elem_from_bits(spad[i]));
                }
            }
            for sb in s.iter_mut().take(block) {
                sb[..c].fill(A::zero());
            }
            for (i, w) in self.active.w.chunks_exact(c).take(r).enumerate() {
                for b in 0..block {
                    let ai = a[b][i];
                    for (sj, &wj) in s[b][..c].iter_mut().zip(w) {
                        *sj = A::mac(*sj, ai, wj);
                    }
                }
            }
            for (b, sb) in s.iter().enumerate().take(block) {
                write_acc::<A>(
                    self.mem.acc_row_mut(acc_row as usize + m + b),
                    &sb[..c],
                    accumulate,
                );
            }
            m += block;
        }
    }

    /// Output-stationary: each PE sums its products in k order from zero.
    fn matmul_os(&mut self, ins: &Instruction) {
        let Instruction::MatmulOs { a_row, b_row, k, acc_row, rows, accumulate, .. } = *ins else {
            return;
        };
        let (r, c) = (self.mem.config.rows as usize, self.mem.config.cols as usize);
        self.os_acc.fill(A::zero());
        let mut b = [A::operand(A::Elem::default()); 256];
        for kk in 0..k as usize {
            let arow = self.mem.spad_row(a_row as usize + kk);
            let brow = self.mem.spad_row(b_row as usize + kk);
            for j in 0..c {
                b[j] = A::operand(A::elem_from_bits(brow[j]));
            }
            for (sums, &ai) in self.os_acc.chunks_exact_mut(c).zip(&arow[..r]) {
                let ai = A::operand(A::elem_from_bits(ai));
                for (sj, &bj) in sums.iter_mut().zip(&b[..c]) {
                    *sj = A::mac(*sj, ai, bj);
                }
            }
        }
        for i in 0..rows as usize {
            let out = &self.os_acc[i * c..(i + 1) * c];
            let row = &mut self.mem.acc[(acc_row as usize + i) * c..(acc_row as usize + i + 1) * c];
            write_acc::<A>(row, out, accumulate);
        }
    }
}

/// One array output row into the accumulator: overwrite, or add to what is there.
#[inline]
pub(crate) fn write_acc<A: Arith>(row: &mut [u32], out: &[A::Acc], accumulate: bool) {
    if accumulate {
        for (m, &o) in row.iter_mut().zip(out) {
            *m = A::acc_to_bits(A::add(A::acc_from_bits(*m), o));
        }
    } else {
        for (m, &o) in row.iter_mut().zip(out) {
            *m = A::acc_to_bits(o);
        }
    }
}

impl<A: Arith> Machine for FunctionalMachine<A> {
    fn config(&self) -> &ArrayConfig {
        &self.mem.config
    }
    fn name(&self) -> &'static str {
        "functional"
    }
    fn region_size(&self, region: Region) -> usize {
        self.mem.region_size(region)
    }
    fn write(&mut self, region: Region, offset: usize, bytes: &[u8]) -> Result<(), MachineError> {
        self.mem.write(region, offset, bytes)
    }
    fn read(&mut self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError> {
        self.mem.read(region, offset, out)
    }

    fn run(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        validate_program(&self.mem.config, program, self.mem.dram.len())?;
        // Every program starts with an empty shadow: a swap needs a load of its own program.
        self.shadow_full = false;
        let mut stats = Stats::default();
        for (index, ins) in program.iter().enumerate() {
            match *ins {
                Instruction::LoadWeights { spad_row, rows, cols } => {
                    stats.instructions += 1;
                    self.load_weights(spad_row, rows, cols)
                }
                Instruction::Matmul { a_row, acc_row, rows, swap, accumulate } => {
                    if swap {
                        if !self.shadow_full {
                            return Err(MachineError::Exec {
                                index,
                                kind: ExecErrorKind::NoWeightsLoaded,
                            });
                        }
                        core::mem::swap(&mut self.active, &mut self.shadow);
                        self.shadow_full = false;
                    }
                    stats.instructions += 1;
                    self.matmul_ws(a_row, acc_row, rows, accumulate);
                    stats.macs += rows as u64 * self.active.k as u64 * self.active.n as u64;
                }
                Instruction::MatmulOs { k, rows, cols, .. } => {
                    stats.instructions += 1;
                    self.matmul_os(ins);
                    stats.macs += k as u64 * rows as u64 * cols as u64;
                }
                Instruction::Sync => stats.instructions += 1,
                Instruction::Halt => {
                    stats.instructions += 1;
                    return Ok(stats);
                }
                _ => {
                    stats.instructions += 1;
                    for r in 0..seq_rows(ins) {
                        self.mem.row_step::<A>(ins, r);
                    }
                }
            }
        }
        Ok(stats)
    }
}
