//! Max pooling on the vector unit, and its gradient.
//!
//! A pooling's input is a channels-last image in DRAM as f32 words (the convolution's epilogue
//! stores them), one row of `c` channels per position, so a window's taps are whole rows and the
//! pooling is a row-wise reduction. For one output column `px` and one tap `(ky, kx)`, the
//! input rows of the outputs `(n, py)` are `stride x w` rows apart (across images too when the
//! windows tile the height), so one strided `LoadAcc` brings a tap for a run of outputs and one
//! `Max` folds it into the running maximum, taps in window order: `Max` keeps the first of equal
//! values and of NaNs, as `conv::max_pool` picks them. The result is stored as f32 words (the
//! gradient finds the maximum in them) and bf16 elements (the next layer's operand).
//!
//! The gradient routes each output's gradient to the first tap equal to the maximum, the ReLU
//! before the pooling fused in. Per tap: `Equal` marks the taps equal to the maximum, a
//! `ReluGrad` by a row of "not yet claimed" ones keeps the first of them, an `Axpy` by -1
//! clears the claim, and a `ReluGrad` by the mark selects the gradient, which a `StoreBf16`
//! writes in place. Windows that tile the input write every input gradient element
//! ([`tiles`]; `check_lowered` refuses other gradients).
//!
//! Runs alternate between the accumulator banks ([`Regions`]), so under the decoupled schedule
//! one run's loads overlap the previous run's vector ops.

extern crate alloc;
use alloc::vec::Vec;

use super::acc_rows::{store_rows, vector, Regions};
use super::{CompileError, Compiler, Segment};
use crate::conv::PoolGeometry;
use crate::graph::{Op, TensorId};
use crate::isa::{Instruction, VectorOp};

/// Max pooling on an INT8 array.
pub const INT8: &str =
    "max pooling on an INT8 array (its accumulator lanes have no comparator; docs/DECISIONS.md 66)";
/// Max pooling reads f32 words, which the host's bf16 input is not.
pub const OF_INPUT: &str = "max pooling of the network's input";
/// The gradient of windows that overlap or leave elements out.
pub const UNTILED: &str = "the gradient of a max pooling whose windows do not tile its input \
                           (stride equal to the kernel, dividing the height and width)";

/// Whether the windows of `g` cover every input element exactly once.
pub fn tiles(g: &PoolGeometry) -> bool {
    g.stride == g.kernel && g.h % g.kernel == 0 && g.w % g.kernel == 0
}

/// A run of outputs `(n, py)` (`q = n x out_h + py`) of one output column, whose input rows
/// are evenly spaced.
#[derive(Clone, Copy)]
struct Run {
    q0: u32,
    rows: u32,
    /// The input image row (over the batch: `n x h + py x stride`) of output `q0`.
    in_row: u32,
}

/// The runs of `batch` images' outputs, at most `most` rows each: across images where the
/// windows' rows tile the height (the input rows then stay `stride` apart), else per image.
fn runs(g: &PoolGeometry, batch: u32, most: u32) -> Vec<Run> {
    let (ph, s) = (g.out_h(), g.stride);
    let groups: Vec<(u32, u32)> = match g.h == ph * s {
        true => alloc::vec![(0, batch * ph)],
        false => (0..batch).map(|n| (n * ph, ph)).collect(),
    };
    let mut out = Vec::new();
    for (start, len) in groups {
        for q0 in (start..start + len).step_by(most.max(1) as usize) {
            let rows = most.min(start + len - q0);
            out.push(Run { q0, rows, in_row: (q0 / ph) * g.h + (q0 % ph) * s });
        }
    }
    out
}

impl Compiler<'_> {
    /// The max pooling `y` of image `x` (f32 words) into program 0.
    pub(super) fn max_pool(
        &mut self,
        x: TensorId,
        y: TensorId,
        g: PoolGeometry,
    ) -> Result<(), CompileError> {
        let pooled = self.pooled(y);
        let words = (self.training || pooled.any).then(|| self.words(y));
        let elems = (!pooled.only).then(|| self.elems(y));
        let regions = Regions::new(self.config.acc_depth, 2)?;
        let start = self.programs[0].len();
        let mut run = 0;
        for r in runs(&g, self.batch, regions.rows) {
            for px in 0..g.out_w() {
                for c0 in (0..g.c).step_by(self.config.cols as usize) {
                    let (acc_y, acc_x) = (regions.at(run, 0), regions.at(run, 1));
                    run += 1;
                    let taps = self.pool_taps(&g, r, px, c0);
                    let len = taps.len;
                    let load = |acc_row, tap| Instruction::LoadAcc {
                        acc_row,
                        dram_addr: self.words(x) + 4 * taps.input(tap),
                        rows: r.rows as u16,
                        len,
                        row_stride: taps.input_stride,
                    };
                    let mut code = alloc::vec![load(acc_y, 0)];
                    for tap in 1..g.kernel * g.kernel {
                        code.push(load(acc_x, tap));
                        code.push(vector(VectorOp::Max, acc_y, acc_x, r.rows, 0));
                    }
                    let rows = (r.rows as u16, len, taps.output_stride);
                    code.extend(store_rows(acc_y, (words, elems), taps.output, rows));
                    self.programs[0].extend(code);
                }
            }
        }
        let layer = self.producer_layer(x);
        self.push_segment(("max_pool", layer), 0, start);
        Ok(())
    }

    /// The gradient `dx` of max pooling `g` of `x` from the pooled gradient `dy` (f32 words),
    /// into program 1, through the ReLU before the pooling when `relu` names its gradient: the
    /// input gradient (or the ReLU's input's) is written as bf16 elements, and as f32 words
    /// where another pooling's gradient reads them.
    pub(super) fn max_pool_grad(
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
                    for tap in 0..taps_per_window {
                        let (input, stride) = (taps.input(tap), taps.input_stride);
                        code.push(load(acc_x, self.words(x) + 4 * input, stride));
                        code.push(load(acc_d, self.words(dy) + 4 * taps.output, out_stride));
                        if relu.is_some() {
                            code.push(v(VectorOp::ReluGrad, acc_d, acc_x, 0));
                        }
                        code.push(v(VectorOp::Equal, acc_x, acc_y, 0));
                        code.push(v(VectorOp::ReluGrad, acc_x, claim, 0));
                        if tap + 1 < taps_per_window {
                            code.push(v(VectorOp::Axpy, claim, acc_x, (-1.0f32).to_bits()));
                        }
                        code.push(v(VectorOp::ReluGrad, acc_d, acc_x, 0));
                        let at = (out_words, Some(out_elems));
                        code.extend(store_rows(acc_d, at, input, (rows, len, stride)));
                    }
                    self.programs[1].extend(code);
                }
            }
        }
        let layer = self.producer_layer(x);
        self.push_segment(("max_pool_grad", layer), 1, start);
        Ok(())
    }

    /// Where run `r`'s taps of output column `px`, channels `c0..`, sit (in elements).
    fn pool_taps(&self, g: &PoolGeometry, r: Run, px: u32, c0: u32) -> Taps {
        let (c, s, w) = (g.c, g.stride, g.w);
        Taps {
            first: (r.in_row * w + px * s) * c + c0,
            k: g.kernel,
            w,
            c,
            len: (self.config.cols as u32).min(c - c0) as u16,
            input_stride: s * w * c,
            output: (r.q0 * g.out_w() + px) * c + c0,
            output_stride: g.out_w() * c,
        }
    }

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
    fn producer_layer(&self, t: TensorId) -> u8 {
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

/// One run's tap addresses.
struct Taps {
    /// Element offset of tap (0, 0) of the run's first output.
    first: u32,
    k: u32,
    w: u32,
    c: u32,
    len: u16,
    input_stride: u32,
    /// Element offset of the run's first output, and the stride between its outputs.
    output: u32,
    output_stride: u32,
}

impl Taps {
    /// Element offset of tap `tap` (window order) of the run's first output.
    fn input(&self, tap: u32) -> u32 {
        let (ky, kx) = (tap / self.k, tap % self.k);
        self.first + (ky * self.w + kx) * self.c
    }
}
