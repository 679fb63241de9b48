//! The training compiler: a [`Graph`] lowered to programs for one [`ArrayConfig`].
//!
//! One training step is two programs with the host between them:
//!
//! 1. **forward**: per layer one tiled GEMM `X W` whose epilogue adds the bias, applies ReLU
//!    (hidden layers), stores the f32 result (the ReLU mask for backward, or the logits) and
//!    casts it to bf16 (the next layer's input). The host then reads the logits and computes
//!    the softmax cross-entropy and its gradient on the CPU (small vectors), and writes the
//!    gradient as bf16.
//! 2. **backward and update**: per layer, last first: `dW = X^T dY` and `db = 1^T dY` (a
//!    ones-vector matmul: the batch sum on the array), then `dX = dY W^T` with the ReLU gradient
//!    and the bf16 cast fused in its epilogue. Then SGD on every parameter in the vector unit:
//!    f32 master weights loaded into the accumulators, updated, stored, and cast to the bf16
//!    copy the next forward pass multiplies with.
//!
//! Transposes cost nothing: the tiler's strided loads read `X^T` and `W^T` from the row-major
//! buffers. Parameters, gradients and velocities sit at addresses that do not depend on the batch
//! size, so steps compiled for different batch sizes share one machine's memory.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use crate::config::{ArrayConfig, Dtype};
use crate::graph::{Graph, Op, TensorId, TensorKind};
use crate::isa::{Instruction, VectorOp};
use crate::machine::ExecErrorKind;
use crate::numerics::Requant;
use crate::tiler::{CastTo, Epilogue, GemmLayout, GemmPlan, GemmShape, MatrixView, TileError};
use crate::timing;

/// Why a graph cannot be compiled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CompileError {
    /// The config's dtype cannot run this program (training needs BF16, INT8 inference INT8).
    Dtype { needs: Dtype },
    /// A GEMM of the step cannot be tiled.
    Tile { op: &'static str, layer: u8, error: TileError },
    /// The graph is not an MLP this compiler knows how to fuse.
    Unsupported { op: &'static str },
    /// The memory plan needs more than 4 GiB of DRAM.
    Dram { needed: u64 },
    /// Batch size zero, or wider than 16 bits of rows.
    Batch { batch: u32 },
}

impl core::fmt::Display for CompileError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            CompileError::Dtype { needs } => {
                write!(f, "this program needs a {} array", needs.name())
            }
            CompileError::Tile { op, layer, error } => write!(f, "{op} of layer {layer}: {error}"),
            CompileError::Unsupported { op } => {
                write!(f, "cannot compile op {op} in this position")
            }
            CompileError::Dram { needed } => {
                write!(f, "the memory plan needs {needed} bytes of DRAM")
            }
            CompileError::Batch { batch } => write!(f, "batch size {batch} must be 1 to 65535"),
        }
    }
}

/// DRAM buffers of one tensor: its f32 words and/or its elements (bf16 or i8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    pub words: Option<u32>,
    pub elems: Option<u32>,
}

/// One operation of a compiled step, for per-op cycle and utilisation reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// "dense", "dense_grad_weight", "bias_grad", "dense_grad_input", "sgd".
    pub op: &'static str,
    pub layer: u8,
    /// 0: forward program, 1: backward-and-update program.
    pub program: u8,
    /// Instructions `start..end` of that program.
    pub start: usize,
    pub end: usize,
    /// Useful MACs on the array.
    pub macs: u64,
    /// Cycles from this segment's first dispatch to the next one's (timing model).
    pub cycles: u64,
}

/// A compiled training step (or inference pass) for one batch size.
#[derive(Clone, Debug)]
pub struct CompiledStep {
    pub config: ArrayConfig,
    pub batch: u32,
    pub forward: Vec<Instruction>,
    /// Backward and update; empty for inference.
    pub backward: Vec<Instruction>,
    pub segments: Vec<Segment>,
    /// Per tensor of the graph.
    pub buffers: Vec<Buffers>,
    /// DRAM this step touches: every address is below it.
    pub dram_bytes: usize,
    /// Cycles of each program (timing model, equal to the cycle machine's).
    pub forward_cycles: u64,
    pub backward_cycles: u64,
    /// The bf16 ones vector for bias gradients (`batch` elements), which the host must fill.
    pub ones: Option<u32>,
}

impl CompiledStep {
    pub fn macs(&self) -> u64 {
        self.segments.iter().map(|s| s.macs).sum()
    }
    pub fn cycles(&self) -> u64 {
        self.forward_cycles + self.backward_cycles
    }
}

/// Per-tensor INT8 quantization of an MLP for inference (symmetric, zero points 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Plan {
    /// Scale of each layer's input: `real = scale * q`.
    pub input_scales: Vec<f32>,
    /// Scale of each layer's weights.
    pub weight_scales: Vec<f32>,
    /// Requantization of each hidden layer's output to the next layer's input scale.
    pub requant: Vec<Requant>,
}

struct Dram {
    next: u64,
}

impl Dram {
    fn alloc(&mut self, bytes: u64) -> u32 {
        let at = self.next;
        self.next = (self.next + bytes).div_ceil(16) * 16;
        at as u32
    }
}

/// The parameter-side buffers: f32 masters, element copies, gradients, velocities. They come
/// first in DRAM and depend only on the graph, not on the batch nor on whether the program
/// trains: an inference pass of a training graph keeps clear of the gradients and velocities, so
/// evaluating between training steps on one machine leaves the optimizer's state intact.
fn plan_params(graph: &Graph, dram: &mut Dram, buffers: &mut [Buffers], elem_bytes: u64) {
    for (t, info) in graph.tensors.iter().enumerate() {
        let n = info.rows(1) as u64 * info.cols as u64;
        match info.kind {
            TensorKind::Weight(_) => {
                buffers[t].words = Some(dram.alloc(4 * n));
                buffers[t].elems = Some(dram.alloc(elem_bytes * n));
            }
            TensorKind::Bias(_) => buffers[t].words = Some(dram.alloc(4 * n)),
            TensorKind::Grad(of) | TensorKind::Velocity(of) if graph.info(of).is_param() => {
                buffers[t].words = Some(dram.alloc(4 * n))
            }
            _ => {}
        }
    }
}

/// Compiles one BF16 training step for `batch` rows.
pub fn compile_training(
    graph: &Graph,
    config: &ArrayConfig,
    batch: u32,
) -> Result<CompiledStep, CompileError> {
    if config.dtype != Dtype::Bf16 {
        return Err(CompileError::Dtype { needs: Dtype::Bf16 });
    }
    Compiler::new(graph, config, batch, true)?.finish(None)
}

/// Compiles a forward pass for `batch` rows: BF16, or INT8 with `int8`.
pub fn compile_inference(
    graph: &Graph,
    config: &ArrayConfig,
    batch: u32,
    int8: Option<&Int8Plan>,
) -> Result<CompiledStep, CompileError> {
    let needs = if int8.is_some() { Dtype::Int8 } else { Dtype::Bf16 };
    if config.dtype != needs {
        return Err(CompileError::Dtype { needs });
    }
    Compiler::new(graph, config, batch, false)?.finish(int8)
}

struct Compiler<'g> {
    graph: &'g Graph,
    config: ArrayConfig,
    batch: u32,
    training: bool,
    dram: Dram,
    buffers: Vec<Buffers>,
    programs: [Vec<Instruction>; 2],
    segments: Vec<Segment>,
    ones: Option<u32>,
}

impl<'g> Compiler<'g> {
    fn new(
        graph: &'g Graph,
        config: &ArrayConfig,
        batch: u32,
        training: bool,
    ) -> Result<Self, CompileError> {
        if batch == 0 || batch > u16::MAX as u32 {
            return Err(CompileError::Batch { batch });
        }
        let mut c = Compiler {
            graph,
            config: *config,
            batch,
            training,
            dram: Dram { next: 0 },
            buffers: vec![Buffers::default(); graph.tensors.len()],
            programs: [Vec::new(), Vec::new()],
            segments: Vec::new(),
            ones: None,
        };
        let es = config.dtype.elem_bytes() as u64;
        plan_params(graph, &mut c.dram, &mut c.buffers, es);
        // Batch-side buffers: the input's elements, every activation's words and elements, the
        // logits gradient and the hidden gradients' elements.
        for (t, info) in graph.tensors.iter().enumerate() {
            let n = info.rows(batch) as u64 * info.cols as u64;
            match info.kind {
                TensorKind::Input => c.buffers[t].elems = Some(c.dram.alloc(es * n)),
                TensorKind::Activation => {
                    c.buffers[t].words = Some(c.dram.alloc(4 * n));
                    c.buffers[t].elems = Some(c.dram.alloc(es * n));
                }
                TensorKind::Grad(of) if training && !graph.info(of).is_param() => {
                    c.buffers[t].elems = Some(c.dram.alloc(es * n))
                }
                _ => {}
            }
        }
        if training {
            c.ones = Some(c.dram.alloc(es * batch as u64));
        }
        if c.dram.next > u32::MAX as u64 {
            return Err(CompileError::Dram { needed: c.dram.next });
        }
        Ok(c)
    }

    fn words(&self, t: TensorId) -> u32 {
        self.buffers[t as usize].words.unwrap_or(0)
    }
    fn elems(&self, t: TensorId) -> u32 {
        self.buffers[t as usize].elems.unwrap_or(0)
    }
    fn cols(&self, t: TensorId) -> u32 {
        self.graph.info(t).cols
    }
    fn layer_of(&self, w: TensorId) -> u8 {
        match self.graph.info(w).kind {
            TensorKind::Weight(l) | TensorKind::Bias(l) => l,
            _ => 0,
        }
    }

    /// Appends one tiled GEMM to `program` as a segment.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &mut self,
        program: usize,
        op: &'static str,
        layer: u8,
        shape: GemmShape,
        a: MatrixView,
        b: MatrixView,
        c: u32,
        epilogue: Epilogue,
    ) -> Result<(), CompileError> {
        let plan = GemmPlan::with_epilogue(&self.config, shape, GemmLayout { a, b, c }, epilogue)
            .map_err(|error| CompileError::Tile { op, layer, error })?;
        let start = self.programs[program].len();
        let out = &mut self.programs[program];
        plan.emit_body(&mut |i| out.push(i));
        let end = self.programs[program].len();
        self.segments.push(Segment {
            op,
            layer,
            program: program as u8,
            start,
            end,
            macs: shape.macs(),
            cycles: 0,
        });
        Ok(())
    }

    fn forward(&mut self, int8: Option<&Int8Plan>) -> Result<(), CompileError> {
        let ops = &self.graph.forward;
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                Op::Dense { x, w, y } => {
                    let Some(&Op::BiasAdd { x: bx, b, y: z }) = ops.get(i + 1) else {
                        return Err(CompileError::Unsupported { op: "dense without bias" });
                    };
                    if bx != y {
                        return Err(CompileError::Unsupported { op: "bias_add" });
                    }
                    let (relu, out) = match ops.get(i + 2) {
                        Some(&Op::Relu { x: rx, y: h }) if rx == z => (true, h),
                        _ => (false, z),
                    };
                    let layer = self.layer_of(w);
                    let shape = GemmShape { m: self.batch, k: self.cols(x), n: self.cols(y) };
                    let is_logits = out == self.graph.logits;
                    let cast = (!is_logits).then(|| CastTo {
                        addr: self.elems(out),
                        requant: int8.map(|q| q.requant[layer as usize]),
                    });
                    let epilogue = Epilogue {
                        bias: Some(self.words(b)),
                        relu_grad_mask: None,
                        relu,
                        // Training keeps the f32 output as the ReLU mask; inference only the logits.
                        store: is_logits || self.training,
                        cast,
                    };
                    let a = MatrixView::row_major(self.elems(x), shape.k);
                    let bv = MatrixView::row_major(self.elems(w), shape.n);
                    self.gemm(0, "dense", layer, shape, a, bv, self.words(out), epilogue)?;
                    i += if relu { 3 } else { 2 };
                }
                Op::SoftmaxCrossEntropy { .. } => i += 1,
                _ => return Err(CompileError::Unsupported { op: "forward op" }),
            }
        }
        Ok(())
    }

    fn backward(&mut self) -> Result<(), CompileError> {
        let ops = &self.graph.backward;
        let mut i = 0;
        while i < ops.len() {
            match ops[i] {
                Op::SoftmaxCrossEntropyGrad { .. } => i += 1, // on the host, between the programs
                Op::BiasGrad { dy, db } => {
                    let layer = self.layer_of_grad(db);
                    let shape = GemmShape { m: 1, k: self.batch, n: self.cols(dy) };
                    let a = MatrixView::row_major(self.ones.unwrap_or(0), self.batch);
                    let b = MatrixView::row_major(self.elems(dy), shape.n);
                    self.gemm(1, "bias_grad", layer, shape, a, b, self.words(db), Epilogue::STORE)?;
                    i += 1;
                }
                Op::DenseGradWeight { x, dy, dw } => {
                    let layer = self.layer_of_grad(dw);
                    let shape = GemmShape { m: self.cols(x), k: self.batch, n: self.cols(dy) };
                    let a = MatrixView::row_major(self.elems(x), shape.m).t();
                    let b = MatrixView::row_major(self.elems(dy), shape.n);
                    self.gemm(
                        1,
                        "dense_grad_weight",
                        layer,
                        shape,
                        a,
                        b,
                        self.words(dw),
                        Epilogue::STORE,
                    )?;
                    i += 1;
                }
                Op::DenseGradInput { dy, w, dx } => {
                    let layer = self.layer_of(w);
                    let (mask, out) = match ops.get(i + 1) {
                        Some(&Op::ReluGrad { dy: rdy, y, dx: rdx }) if rdy == dx => {
                            (Some(self.words(y)), rdx)
                        }
                        _ => (None, dx),
                    };
                    let shape = GemmShape { m: self.batch, k: self.cols(dy), n: self.cols(dx) };
                    let a = MatrixView::row_major(self.elems(dy), shape.k);
                    let b = MatrixView::row_major(self.elems(w), shape.k).t();
                    let epilogue = Epilogue {
                        bias: None,
                        relu_grad_mask: mask,
                        relu: false,
                        store: false,
                        cast: Some(CastTo { addr: self.elems(out), requant: None }),
                    };
                    self.gemm(1, "dense_grad_input", layer, shape, a, b, 0, epilogue)?;
                    i += if mask.is_some() { 2 } else { 1 };
                }
                _ => return Err(CompileError::Unsupported { op: "backward op" }),
            }
        }
        Ok(())
    }

    fn layer_of_grad(&self, g: TensorId) -> u8 {
        match self.graph.info(g).kind {
            TensorKind::Grad(of) => self.layer_of(of),
            _ => 0,
        }
    }

    fn update(&mut self) -> Result<(), CompileError> {
        let Some(sgd) = self.graph.sgd else { return Ok(()) };
        for op in self.graph.update.clone() {
            let Op::Sgd { param, grad, velocity } = op else {
                return Err(CompileError::Unsupported { op: "update op" });
            };
            let info = *self.graph.info(param);
            let n = info.rows(1) * info.cols;
            let copy = self.buffers[param as usize].elems;
            let buffers = SgdBuffers {
                len: n,
                param: self.words(param),
                grad: self.words(grad),
                velocity: velocity.map(|v| self.words(v)),
                copy,
            };
            let start = self.programs[1].len();
            emit_sgd(&self.config, &mut self.programs[1], buffers, &sgd);
            let end = self.programs[1].len();
            let layer = self.layer_of(param);
            self.segments.push(Segment {
                op: "sgd",
                layer,
                program: 1,
                start,
                end,
                macs: 0,
                cycles: 0,
            });
        }
        Ok(())
    }

    fn finish(mut self, int8: Option<&Int8Plan>) -> Result<CompiledStep, CompileError> {
        self.forward(int8)?;
        if self.training {
            self.backward()?;
            self.update()?;
        }
        let mut cycles = [0u64; 2];
        for (p, cycles) in cycles.iter_mut().enumerate() {
            if self.programs[p].is_empty() && p == 1 {
                continue;
            }
            self.programs[p].push(Instruction::Halt);
            let mut dispatch = vec![0u64; self.programs[p].len()];
            let total = timing::schedule(&self.config, &self.programs[p], |i, t| dispatch[i] = t)
                .map_err(|(_, ExecErrorKind::NoWeightsLoaded)| {
                CompileError::Unsupported { op: "weights" }
            })?;
            *cycles = total;
            for s in self.segments.iter_mut().filter(|s| s.program as usize == p) {
                let end = if s.end < dispatch.len() - 1 { dispatch[s.end] } else { total - 1 };
                s.cycles = end - dispatch[s.start];
            }
        }
        let [forward, backward] = self.programs;
        Ok(CompiledStep {
            config: self.config,
            batch: self.batch,
            forward,
            backward,
            segments: self.segments,
            buffers: self.buffers,
            dram_bytes: self.dram.next as usize,
            forward_cycles: cycles[0],
            backward_cycles: cycles[1],
            ones: self.ones,
        })
    }
}

/// Where one parameter's SGD reads and writes: `len` f32 words each.
pub struct SgdBuffers {
    pub len: u32,
    pub param: u32,
    pub grad: u32,
    pub velocity: Option<u32>,
    /// The bf16 copy to refresh after the update (weights; biases have none).
    pub copy: Option<u32>,
}

/// SGD over a flat f32 tensor in DRAM, in blocks of accumulator rows of C words:
/// load p, g (and v); `g += wd * p`; `v = momentum * v; v += 1.0 * g; p += -lr * v` (or
/// `p += -lr * g`); store p (and v); cast p to the bf16 copy.
///
/// Under the decoupled schedule the blocks alternate accumulator banks (each holds its p, g and v
/// in one bank) and each block's loads are issued before the previous block's vector work, so
/// the load unit fills one bank while the vector unit works through the other.
pub fn emit_sgd(
    config: &ArrayConfig,
    out: &mut Vec<Instruction>,
    buf: SgdBuffers,
    sgd: &crate::graph::Sgd,
) {
    let c = config.cols as u32;
    let per_row = 2 + buf.velocity.is_some() as u32;
    let decoupled = config.schedule == crate::config::Schedule::Decoupled;
    // Rows of acc a block may use, and where the two banks start.
    let (space, banks) = if decoupled {
        (config.acc_depth / 2, [0, config.acc_depth.div_ceil(2) as u16])
    } else {
        (config.acc_depth, [0, 0])
    };
    let block = (space / per_row).min(config.spad_depth).min(u16::MAX as u32);
    let block = if decoupled { block.min(SGD_BLOCK) } else { block };
    let full_rows = buf.len / c;
    let rest = buf.len % c;
    // Each block: (offset in bytes, rows, elements a row).
    let mut blocks = Vec::new();
    let mut row = 0;
    while row < full_rows {
        let rows = block.min(full_rows - row);
        blocks.push((row * c * 4, rows, c));
        row += rows;
    }
    if rest > 0 {
        blocks.push((full_rows * c * 4, 1, rest));
    }
    let mut pending_math: Vec<Instruction> = Vec::new();
    for (i, &(offset, rows, len)) in blocks.iter().enumerate() {
        let mut ops = Vec::new();
        emit_sgd_block(&mut ops, &buf, sgd, (offset, rows, len), c, banks[i % 2]);
        if !decoupled {
            out.extend(ops);
            continue;
        }
        // This block's loads go before the previous block's vector work.
        let (loads, math): (Vec<_>, Vec<_>) =
            ops.into_iter().partition(|ins| matches!(ins, Instruction::LoadAcc { .. }));
        out.extend(loads);
        out.append(&mut pending_math);
        pending_math = math;
    }
    out.append(&mut pending_math);
}

/// Accumulator rows of one decoupled SGD block: small enough that the next block's loads start
/// early, large enough that each instruction's dispatch is a small share of its rows.
const SGD_BLOCK: u32 = 64;

/// One block: `rows` accumulator rows of `len` words at byte `offset` of each tensor, p, g and v
/// from accumulator row `base`.
fn emit_sgd_block(
    out: &mut Vec<Instruction>,
    buf: &SgdBuffers,
    sgd: &crate::graph::Sgd,
    (offset, rows, len): (u32, u32, u32),
    c: u32,
    base: u16,
) {
    let (rows16, len16) = (rows as u16, len as u16);
    let (p, g, v) = (base, base + rows16, base + 2 * rows16);
    let load = |acc_row: u16, base: u32| Instruction::LoadAcc {
        acc_row,
        dram_addr: base + offset,
        rows: rows16,
        len: len16,
        row_stride: c,
    };
    let store = |acc_row: u16, base: u32| Instruction::Store {
        acc_row,
        dram_addr: base + offset,
        rows: rows16,
        len: len16,
        row_stride: c,
    };
    let vector = |op, dst, src, imm: f32| Instruction::Vector {
        op,
        dst,
        src,
        rows: rows16,
        imm: imm.to_bits(),
    };
    out.push(load(p, buf.param));
    out.push(load(g, buf.grad));
    if sgd.weight_decay != 0.0 {
        out.push(vector(VectorOp::Axpy, g, p, sgd.weight_decay));
    }
    match buf.velocity {
        Some(vel) => {
            out.push(load(v, vel));
            out.push(vector(VectorOp::Scale, v, 0, sgd.momentum));
            out.push(vector(VectorOp::Axpy, v, g, 1.0));
            out.push(vector(VectorOp::Axpy, p, v, -sgd.lr));
            out.push(store(v, vel));
        }
        None => out.push(vector(VectorOp::Axpy, p, g, -sgd.lr)),
    }
    out.push(store(p, buf.param));
    if let Some(copy) = buf.copy {
        out.push(Instruction::CastBf16 { acc_row: p, spad_row: 0, rows: rows16 });
        out.push(Instruction::StoreSpad {
            spad_row: 0,
            dram_addr: copy + offset / 4 * 2, // word offset -> bf16 element offset
            rows: rows16,
            len: len16,
            row_stride: c,
        });
    }
}
