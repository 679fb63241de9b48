//! A convolution's input gradient on the vector unit: the patches' gradient (f32 words, one
//! row per output position) added back into the image, the adjoint of [`super::im2col`].
//!
//! One image row at a time (and one residue class of columns modulo the stride, so that the
//! columns a tap reaches are consecutive accumulator rows): the rows start at zero (`Equal` of
//! a row with itself gives ones, an `Axpy` by -1 of them zeros), then for each kernel tap
//! `(ky, kx)`, last first, one `LoadAcc` of that tap's `c` columns from the output positions
//! that read these pixels and one `Add` adds them. Descending taps are ascending output
//! positions: each pixel's sum is made in `conv::col2im`'s order, with the vector unit's adder,
//! as the accelerator's numerics sum it ([`crate::exec::Accel`]). The row is then stored as f32
//! words where a pooling's gradient reads it, or through the ReLU before the convolution
//! (its mask loaded beside) as bf16 elements.

extern crate alloc;

use super::acc_rows::{store_rows, vector, Regions};
use super::paired::Paired;
use super::{CompileError, Compiler};
use crate::conv::ConvGeometry;
use crate::graph::TensorId;
use crate::isa::{Instruction, VectorOp};

impl Compiler<'_> {
    /// `dx = col2im(dy)` into program 1; with `relu = (mask, out)`, `out = relu_grad(dx,
    /// mask)` instead.
    pub(super) fn col2im(
        &mut self,
        dy: TensorId,
        dx: TensorId,
        g: ConvGeometry,
        relu: Option<(TensorId, TensorId)>,
    ) -> Result<(), CompileError> {
        let (k, s, p) = (g.kernel as i64, g.stride as i64, g.padding as i64);
        let (h, w, c) = (g.h, g.w, g.c);
        let (oh, ow, patch) = (g.out_h() as i64, g.out_w() as i64, g.patch() as u32);
        let words = self.buffers[dx as usize].words;
        let regions = Regions::new(self.config.acc_depth, 3)?;
        let start = self.programs[1].len();
        let mut run = 0;
        let mut paired = Paired::new(&regions);
        for n in 0..self.batch {
            for y in 0..h {
                for c0 in (0..c).step_by(self.config.cols as usize) {
                    let len = (self.config.cols as u32).min(c - c0) as u16;
                    for rho in 0..g.stride.min(w) {
                        let count = (w - rho).div_ceil(g.stride);
                        for j0 in (0..count).step_by(regions.rows as usize) {
                            let pc = regions.rows.min(count - j0);
                            let [acc, src, mask] = [0, 1, 2].map(|i| regions.at(run, i));
                            run += 1;
                            let mut steps = alloc::vec![alloc::vec![
                                vector(VectorOp::Equal, acc, acc, pc, 0),
                                vector(VectorOp::Axpy, acc, acc, pc, (-1.0f32).to_bits()),
                            ]];
                            for ky in (0..k).rev() {
                                let t = y as i64 + p - ky;
                                if t < 0 || t % s != 0 || t / s >= oh {
                                    continue;
                                }
                                let oy = t / s;
                                for kx in (0..k).rev() {
                                    let u = rho as i64 + p - kx;
                                    if u.rem_euclid(s) != 0 {
                                        continue;
                                    }
                                    // Column j of the class reads output position j + off.
                                    let off = u.div_euclid(s);
                                    let lo = (j0 as i64).max(-off);
                                    let hi = ((j0 + pc) as i64).min(ow - off);
                                    if lo >= hi {
                                        continue;
                                    }
                                    let position = (n as i64 * oh + oy) * ow + lo + off;
                                    let column = ((ky * k + kx) * c as i64) as u32 + c0;
                                    let load = Instruction::LoadAcc {
                                        acc_row: src,
                                        dram_addr: self.words(dy)
                                            + 4 * (position as u32 * patch + column),
                                        rows: (hi - lo) as u16,
                                        len,
                                        row_stride: patch,
                                    };
                                    let dst = acc + (lo - j0 as i64) as u16;
                                    let rows = (hi - lo) as u32;
                                    steps.push(alloc::vec![
                                        load,
                                        vector(VectorOp::Add, dst, src, rows, 0)
                                    ]);
                                }
                            }
                            let at = ((n * h + y) * w + rho + j0 * g.stride) * c + c0;
                            let (rows, row_stride) = (pc as u16, g.stride * c);
                            let mut code = alloc::vec::Vec::new();
                            // Through the ReLU before the convolution, its output the mask.
                            let out = match relu {
                                Some((m, out)) => {
                                    code.push(Instruction::LoadAcc {
                                        acc_row: mask,
                                        dram_addr: self.words(m) + 4 * at,
                                        rows,
                                        len,
                                        row_stride,
                                    });
                                    code.push(vector(VectorOp::ReluGrad, acc, mask, pc, 0));
                                    Some(out)
                                }
                                None => words.is_none().then_some(dx),
                            };
                            let buffers = (words, out.map(|t| self.elems(t)));
                            code.extend(store_rows(acc, buffers, at, (rows, len, row_stride)));
                            steps.push(code);
                            paired.push(steps, &mut self.programs[1]);
                        }
                    }
                }
            }
        }
        paired.finish(&mut self.programs[1]);
        let layer = match self.graph.info(dy).kind {
            crate::graph::TensorKind::Grad(patches) => self.layer_of_patches(patches),
            _ => 0,
        };
        self.push_segment(("col2im", layer), 1, start);
        Ok(())
    }
}
