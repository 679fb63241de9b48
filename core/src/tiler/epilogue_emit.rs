//! The instructions of an output block's [`Epilogue`].

use super::epilogue::{CastTo, Update};
use super::GemmPlan;
use crate::isa::{Instruction, VectorOp};

impl GemmPlan {
    /// The epilogue of the output block in accumulator rows `acc_base..`: rows `m0..m0 + mb`,
    /// columns `n0..n0 + nj` of C. Mask rows follow the outputs; the bias row follows those; an
    /// update's parameter and velocity rows follow the outputs too. Each load goes right before
    /// the op that reads it, but an update's when `update_loaded`
    /// ([`emit_update_loads`](Self::emit_update_loads) issued them ahead).
    pub(super) fn emit_epilogue(
        &self,
        sink: &mut impl FnMut(Instruction),
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        cast_row: u16,
        acc_base: u16,
        update_loaded: bool,
    ) {
        let n = self.shape.n;
        let e = &self.epilogue;
        let rows = mb as u16;
        let mask_row = acc_base + self.mb as u16;
        let bias_row = acc_base + self.mb as u16 * (1 + e.relu_grad_mask.is_some() as u16);
        if let Some(bias) = e.bias {
            sink(Instruction::LoadAcc {
                acc_row: bias_row,
                dram_addr: bias + n0 * 4,
                rows: 1,
                len: nj as u16,
                row_stride: 0,
            });
            // With a ReLU after it, both are one pass.
            let op = if e.relu { VectorOp::BiasRelu } else { VectorOp::BiasAdd };
            sink(Instruction::Vector { op, dst: acc_base, src: bias_row, rows, imm: 0 });
        }
        if let Some(mask) = e.relu_grad_mask {
            sink(Instruction::LoadAcc {
                acc_row: mask_row,
                dram_addr: mask + (m0 * n + n0) * 4,
                rows,
                len: nj as u16,
                row_stride: n,
            });
            sink(Instruction::Vector {
                op: VectorOp::ReluGrad,
                dst: acc_base,
                src: mask_row,
                rows,
                imm: 0,
            });
        }
        if e.relu && e.bias.is_none() {
            sink(Instruction::Vector { op: VectorOp::Relu, dst: acc_base, src: 0, rows, imm: 0 });
        }
        if e.store {
            sink(Instruction::Store {
                acc_row: acc_base,
                dram_addr: self.layout.c + (m0 * n + n0) * 4,
                rows,
                len: nj as u16,
                row_stride: n,
            });
        }
        if let Some(u) = e.update {
            if !update_loaded {
                self.emit_update_loads(sink, (m0, mb, n0, nj), acc_base);
            }
            self.emit_update(sink, &u, (m0, mb, n0, nj), acc_base);
        }
        match e.cast {
            // BF16 goes straight from the accumulators to DRAM.
            Some(CastTo { addr, requant: None }) => sink(Instruction::StoreBf16 {
                acc_row: acc_base,
                dram_addr: addr + (m0 * n + n0) * 2,
                rows,
                len: nj as u16,
                row_stride: n,
            }),
            // INT8 is requantized into the scratchpad, then stored.
            Some(CastTo { addr, requant: Some(requant) }) => {
                sink(Instruction::Requantize {
                    acc_row: acc_base,
                    spad_row: cast_row,
                    rows,
                    requant,
                });
                sink(Instruction::StoreSpad {
                    spad_row: cast_row,
                    dram_addr: addr + (m0 * n + n0),
                    rows,
                    len: nj as u16,
                    row_stride: n,
                });
            }
            None => {}
        }
    }

    /// First accumulator rows of an update's parameter and velocity tiles, beside the gradient
    /// in rows `acc_base..`.
    fn update_rows(&self, acc_base: u16) -> (u16, u16) {
        (acc_base + self.mb as u16, acc_base + 2 * self.mb as u16)
    }

    /// An [`Update`]'s loads of the parameter (and velocity) tiles into the accumulators, which
    /// touch none of the block's own rows: a pipelined program may issue them before the block's
    /// first matmul, while its bank waits for the array anyway. Nothing without an update.
    pub(super) fn emit_update_loads(
        &self,
        sink: &mut impl FnMut(Instruction),
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        acc_base: u16,
    ) {
        let Some(u) = self.epilogue.update else { return };
        let n = self.shape.n;
        let (p, v) = self.update_rows(acc_base);
        let load = |acc_row, base: u32| Instruction::LoadAcc {
            acc_row,
            dram_addr: base + (m0 * n + n0) * 4,
            rows: mb as u16,
            len: nj as u16,
            row_stride: n,
        };
        sink(load(p, u.param));
        if let Some(vel) = u.velocity {
            sink(load(v, vel));
        }
    }

    /// [`Update`]'s vector ops and stores for one block: the gradient in rows `acc_base..`, the
    /// parameter and the velocity, already loaded, in the next two runs of `self.mb` rows.
    fn emit_update(
        &self,
        sink: &mut impl FnMut(Instruction),
        u: &Update,
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        acc_base: u16,
    ) {
        let n = self.shape.n;
        let rows = mb as u16;
        let (p, v) = self.update_rows(acc_base);
        let g = acc_base;
        let at = |base: u32| base + (m0 * n + n0) * 4;
        let store = |acc_row, base| Instruction::Store {
            acc_row,
            dram_addr: at(base),
            rows,
            len: nj as u16,
            row_stride: n,
        };
        let axpy = |dst, src, imm| Instruction::Vector { op: VectorOp::Axpy, dst, src, rows, imm };
        if f32::from_bits(u.weight_decay) != 0.0 {
            sink(axpy(g, p, u.weight_decay));
        }
        if u.velocity.is_some() {
            sink(axpy(g, v, u.momentum));
        }
        sink(axpy(p, g, u.neg_lr));
        if let Some(vel) = u.velocity {
            sink(store(g, vel));
        }
        sink(store(p, u.param));
        if let Some(copy) = u.copy {
            sink(Instruction::StoreBf16 {
                acc_row: p,
                dram_addr: copy + (m0 * n + n0) * 2,
                rows,
                len: nj as u16,
                row_stride: n,
            });
        }
    }
}
