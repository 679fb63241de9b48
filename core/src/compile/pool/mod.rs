//! Pooling on the vector unit, and its gradients.
//!
//! A pooling's input is a channels-last image in DRAM as f32 words (the convolution's epilogue
//! stores them), one row of `c` channels per position, so a window's taps are whole rows and the
//! pooling is a row-wise reduction. For one output column `px` and one tap `(ky, kx)`, the
//! input rows of the outputs `(n, py)` are `stride x w` rows apart (across images too when the
//! windows tile the height), so one strided `LoadAcc` brings a tap for a run of outputs and one
//! vector op folds it in, taps in window order:
//!
//! * max pooling: `Max` into the running maximum, which keeps the first of equal values and of
//!   NaNs, as `conv::max_pool` picks them;
//! * average pooling: `Add` into the running sum (the vector unit's add, in `conv::avg_pool`'s
//!   order), then `Scale` by the window's reciprocal ([`PoolGeometry::mean_factor`];
//!   [`crate::exec::Accel`] divides so). An INT8 lane has no multiplier: there the pooling
//!   leaves the i32 sum, and the layer's requantization divides by the window's size
//!   ([`Int8Plan::pool_sums`], docs/DECISIONS.md 80).
//!
//! The result is stored as bf16 elements (the next layer's operand) and as f32 words where the
//! max pooling's gradient (which finds the maximum in them) or another pooling reads them.
//! The gradients are in `grad`. Runs alternate between the accumulator banks (`Regions`),
//! so under the decoupled schedule one run's loads overlap the previous run's vector ops (a
//! tap's load cannot overlap the previous tap's op: that op holds both banks' ports when its
//! operands are in different banks, and its own bank's when they are not).

extern crate alloc;
use alloc::vec::Vec;

mod grad;

use super::acc_rows::{store_rows, vector, Regions};
use super::paired::Paired;
use super::{CompileError, Compiler, Int8Plan};
use crate::conv::PoolGeometry;
use crate::graph::TensorId;
use crate::isa::{Instruction, VectorOp};
use crate::numerics::Requant;

/// Max pooling on an INT8 array built without its lanes' comparator.
pub const INT8: &str = "max pooling on an INT8 array whose accumulator lanes have no comparator \
                        (built with int8_max false; docs/DECISIONS.md 75)";
/// Pooling reads f32 words, which the host's bf16 input is not.
pub const OF_INPUT: &str = "pooling of the network's input";
/// The gradient of windows that overlap or leave elements out.
pub const UNTILED: &str = "the gradient of a pooling whose windows do not tile its input \
                           (stride equal to the kernel, dividing the height and width)";

/// Which reduction a pooling makes.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Max,
    Avg,
}

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
    /// The pooling `y` of image `x` (f32 words, or i32 on an INT8 array) into program 0. In
    /// INT8 inference (`int8`) the pooled words are requantized by the producing layer's
    /// requantization into the next layer's i8 elements: a requantization never reorders two
    /// words, so the maximum of the requantized taps is the requantized maximum, and the
    /// elements are those of pooling after the requantization. An average pooling there leaves
    /// each window's sum, which that requantization divides by the window's size.
    pub(super) fn pool(
        &mut self,
        kind: Kind,
        (x, y): (TensorId, TensorId),
        g: PoolGeometry,
        int8: Option<&Int8Plan>,
    ) -> Result<(), CompileError> {
        let pooled = self.pooled(y);
        // Max pooling's gradient reads the maximum back; average pooling's needs no output. The
        // logits (the pooling's output flattened) are read as words, and nothing reads their
        // elements.
        let keep = self.training && kind == Kind::Max;
        let is_logits = self.source_of(self.graph.logits) == y;
        let words = (keep || pooled.any || is_logits).then(|| self.words(y));
        let elems = (!pooled.only && !is_logits).then(|| self.elems(y));
        // The producing layer's requantization (none after the last layer: its words are the
        // logits).
        let requant = int8.and_then(|plan| plan.requant.get(self.producer_layer(x) as usize));
        let requant = requant.copied();
        let fold = match kind {
            Kind::Max => VectorOp::Max,
            Kind::Avg => VectorOp::Add,
        };
        let regions = Regions::new(self.config.acc_depth, 2)?;
        // Requantized rows pass through the scratchpad, a half of it a run.
        let half = self.config.spad_depth / 2;
        let most = if int8.is_some() { regions.rows.min(half) } else { regions.rows };
        let start = self.programs[0].len();
        let mut run = 0;
        let mut paired = Paired::new(&regions);
        for r in runs(&g, self.batch, most) {
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
                    let mut steps = alloc::vec![alloc::vec![load(acc_y, 0)]];
                    for tap in 1..g.size() {
                        steps.push(alloc::vec![
                            load(acc_x, tap),
                            vector(fold, acc_y, acc_x, r.rows, 0)
                        ]);
                    }
                    let mut code = alloc::vec::Vec::new();
                    if kind == Kind::Avg && int8.is_none() {
                        let factor = g.mean_factor().to_bits();
                        code.push(vector(VectorOp::Scale, acc_y, 0, r.rows, factor));
                    }
                    let rows = (r.rows as u16, len, taps.output_stride);
                    match requant {
                        None => code.extend(store_rows(acc_y, (words, elems), taps.output, rows)),
                        Some(requant) => {
                            code.extend(store_rows(acc_y, (words, None), taps.output, rows));
                            if let Some(base) = elems {
                                let spad_row = ((run % 2) as u32 * half) as u16;
                                let at = base + taps.output;
                                code.extend(requantized(acc_y, spad_row, requant, at, rows));
                            }
                        }
                    }
                    steps.push(code);
                    paired.push(steps, &mut self.programs[0]);
                }
            }
        }
        paired.finish(&mut self.programs[0]);
        let name = match kind {
            Kind::Max => "max_pool",
            Kind::Avg => "avg_pool",
        };
        let layer = self.producer_layer(x);
        self.push_segment((name, layer), 0, start);
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
}

/// Accumulator rows from `acc_row` requantized into scratchpad rows from `spad_row`, then stored
/// as i8 elements at byte `at` of DRAM, `(rows, len, row_stride)` as the stores take them.
fn requantized(
    acc_row: u16,
    spad_row: u16,
    requant: Requant,
    at: u32,
    (rows, len, row_stride): (u16, u16, u32),
) -> [Instruction; 2] {
    [
        Instruction::Requantize { acc_row, spad_row, rows, requant },
        Instruction::StoreSpad { spad_row, dram_addr: at, rows, len, row_stride },
    ]
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
