//! The epilogue of an output block: what happens to its accumulators before they leave.

use super::GemmPlan;
use crate::isa::{Instruction, VectorOp};

impl GemmPlan {
    /// The epilogue of the output block in accumulator rows `0..mb`: rows `m0..m0 + mb`,
    /// columns `n0..n0 + nj` of C. Mask rows follow the outputs; the bias row follows those.
    pub(super) fn emit_epilogue(
        &self,
        sink: &mut impl FnMut(Instruction),
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        cast_row: u16,
        acc_base: u16,
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
            sink(Instruction::Vector {
                op: VectorOp::BiasAdd,
                dst: acc_base,
                src: bias_row,
                rows,
                imm: 0,
            });
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
        if e.relu {
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
        if let Some(cast) = e.cast {
            sink(match cast.requant {
                None => Instruction::CastBf16 { acc_row: acc_base, spad_row: cast_row, rows },
                Some(requant) => {
                    Instruction::Requantize { acc_row: acc_base, spad_row: cast_row, rows, requant }
                }
            });
            let es = self.config.dtype.elem_bytes() as u32;
            sink(Instruction::StoreSpad {
                spad_row: cast_row,
                dram_addr: cast.addr + (m0 * n + n0) * es,
                rows,
                len: nj as u16,
                row_stride: n,
            });
        }
    }
}
