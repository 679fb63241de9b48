//! Pooling gradients on the vector unit.
//!
//! Max pooling's routes each output's gradient to the first tap equal to the maximum, the ReLU
//! before the pooling fused in. Per tap: `Equal` marks the taps equal to the maximum, a
//! `ReluGrad` by a row of "not yet claimed" ones keeps the first of them, an `Axpy` by -1
//! clears the claim, and a `ReluGrad` by the mark selects the gradient, which a `StoreBf16`
//! writes in place. The ReLU's gradient costs one op a run: the claims open only where the
//! maximum is above zero, since the tap they route to equals it.
//!
//! Average pooling's is each output's gradient scaled by the window's reciprocal (the share
//! `conv::avg_pool_grad` gives every tap), stored at every tap; with the ReLU before the pooling
//! fused in, the share is made again for each tap and masked by the tap's ReLU output.
//!
//! Windows that tile the input write every input gradient element once ([`super::tiles`];
//! `check_lowered` refuses other gradients), so no element sums two shares.

extern crate alloc;

use super::{runs, Compiler};
use crate::compile::acc_rows::{store_rows, vector, Regions};
use crate::compile::paired::Paired;
use crate::compile::CompileError;
use crate::conv::PoolGeometry;
use crate::graph::{Op, TensorId, TensorKind};
use crate::isa::{Instruction, VectorOp};

impl Compiler<'_> {
    /// The gradient `dx` of max pooling `g` of `x` from the pooled gradient `dy` (f32 words),
    /// into program 1, through the ReLU before the pooling when `relu` names its gradient: the
    /// input gradient (or the ReLU's input's) is written as bf16 elements, and as f32 words
    /// where another pooling's gradient reads them.
    pub(in crate::compile) fn max_pool_grad(
        &mut self,
        (dy, x, dx): (TensorId, TensorId, TensorId),
        g: PoolGeometry,
        relu: Option<TensorId>,
    ) -> Result<(), CompileError> {
        let y = self.graph.forward.iter().find_map(|op| match *op {
            Op::MaxPool { x: px, y, .. } if px == x => Some(y),
            _ => None,
        });
        let Some(y) = y else {
            return Err(CompileError::Unsupported {
                op: "max pooling gradient without its pooling",
            });
        };
        let pooled = self.words(y);
        let out = relu.unwrap_or(dx);
        let (out_elems, out_words) = (self.elems(out), self.buffers[out as usize].words);
        let regions = Regions::new(self.config.acc_depth, 4)?;
        let start = self.programs[1].len();
        let taps_per_window = g.kernel * g.kernel;
        let mut run = 0;
        let mut paired = Paired::new(&regions);
        for r in runs(&g, self.batch, regions.rows) {
            for px in 0..g.out_w() {
                for c0 in (0..g.c).step_by(self.config.cols as usize) {
                    let [acc_y, claim, acc_x, acc_d] = [0, 1, 2, 3].map(|i| regions.at(run, i));
                    run += 1;
                    let taps = self.pool_taps(&g, r, px, c0);
                    let (rows, len) = (r.rows as u16, taps.len);
                    let load = |acc_row, dram_addr, row_stride| Instruction::LoadAcc {
                        acc_row,
                        dram_addr,
                        rows,
                        len,
                        row_stride,
                    };
                    let v = |op, dst, src, imm| vector(op, dst, src, r.rows, imm);
                    let out_stride = taps.output_stride;
                    let mut code = alloc::vec![
                        load(acc_y, pooled + 4 * taps.output, out_stride),
                        // Any row equals itself: the claims start as ones.
                        v(VectorOp::Equal, claim, claim, 0),
                    ];
                    let mut steps = alloc::vec::Vec::new();
                    if relu.is_some() {
                        // The tap a window routes to equals its maximum, so the ReLU passes it
                        // where the maximum is above zero: there only is a claim open.
                        code.push(v(VectorOp::ReluGrad, claim, acc_y, 0));
                    }
                    steps.push(core::mem::take(&mut code));
                    for tap in 0..taps_per_window {
                        let (input, stride) = (taps.input(tap), taps.input_stride);
                        code.push(load(acc_x, self.words(x) + 4 * input, stride));
                        code.push(load(acc_d, self.words(dy) + 4 * taps.output, out_stride));
                        code.push(v(VectorOp::Equal, acc_x, acc_y, 0));
                        code.push(v(VectorOp::ReluGrad, acc_x, claim, 0));
                        if tap + 1 < taps_per_window {
                            code.push(v(VectorOp::Axpy, claim, acc_x, (-1.0f32).to_bits()));
                        }
                        code.push(v(VectorOp::ReluGrad, acc_d, acc_x, 0));
                        let at = (out_words, Some(out_elems));
                        code.extend(store_rows(acc_d, at, input, (rows, len, stride)));
                        steps.push(core::mem::take(&mut code));
                    }
                    paired.push(steps, &mut self.programs[1]);
                }
            }
        }
        paired.finish(&mut self.programs[1]);
        let layer = self.producer_layer(x);
        self.push_segment(("max_pool_grad", layer), 1, start);
        Ok(())
    }

    /// The gradient `dx` of average pooling `g` from the pooled gradient `dy` (f32 words),
    /// into program 1; with `relu = (mask, out)`, `out = relu_grad(dx, mask)` instead. Written as
    /// bf16 elements, and as f32 words where another pooling's gradient reads them.
    pub(in crate::compile) fn avg_pool_grad(
        &mut self,
        dy: TensorId,
        dx: TensorId,
        g: PoolGeometry,
        relu: Option<(TensorId, TensorId)>,
    ) -> Result<(), CompileError> {
        let out = relu.map_or(dx, |(_, out)| out);
        let (out_elems, out_words) = (self.elems(out), self.buffers[out as usize].words);
        let regions = Regions::new(self.config.acc_depth, 2)?;
        let factor = g.mean_factor().to_bits();
        let start = self.programs[1].len();
        let mut run = 0;
        for r in runs(&g, self.batch, regions.rows) {
            for px in 0..g.out_w() {
                for c0 in (0..g.c).step_by(self.config.cols as usize) {
                    let (acc_d, acc_x) = (regions.at(run, 0), regions.at(run, 1));
                    run += 1;
                    let taps = self.pool_taps(&g, r, px, c0);
                    let (rows, len, stride) = (r.rows as u16, taps.len, taps.input_stride);
                    let share = [
                        Instruction::LoadAcc {
                            acc_row: acc_d,
                            dram_addr: self.words(dy) + 4 * taps.output,
                            rows,
                            len,
                            row_stride: taps.output_stride,
                        },
                        vector(VectorOp::Scale, acc_d, 0, r.rows, factor),
                    ];
                    let at = (out_words, Some(out_elems));
                    let mut code = alloc::vec::Vec::new();
                    if relu.is_none() {
                        code.extend(share);
                    }
                    for tap in 0..g.size() {
                        let input = taps.input(tap);
                        if let Some((mask, _)) = relu {
                            code.extend(share);
                            code.push(Instruction::LoadAcc {
                                acc_row: acc_x,
                                dram_addr: self.words(mask) + 4 * input,
                                rows,
                                len,
                                row_stride: stride,
                            });
                            code.push(vector(VectorOp::ReluGrad, acc_d, acc_x, r.rows, 0));
                        }
                        code.extend(store_rows(acc_d, at, input, (rows, len, stride)));
                    }
                    self.programs[1].extend(code);
                }
            }
        }
        let layer = match self.graph.info(dx).kind {
            TensorKind::Grad(x) => self.producer_layer(x),
            _ => 0,
        };
        self.push_segment(("avg_pool_grad", layer), 1, start);
        Ok(())
    }
}
