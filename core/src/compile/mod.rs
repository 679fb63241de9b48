//! The training compiler: a [`Graph`] lowered to programs for one [`ArrayConfig`].
//!
//! One training step is two programs with the host between them:
//!
//! 1. **forward**: per layer one tiled GEMM `X W` whose epilogue adds the bias, applies ReLU
//!    (hidden layers), stores the f32 result (the ReLU mask for backward, or the logits) and
//!    casts it to bf16 (the next layer's input). The host then reads the logits and computes
//!    the softmax cross-entropy and its gradient on the CPU (small vectors), and writes the
//!    gradient as bf16.
//! 2. **backward and update**: per layer, last first: `dX = dY W^T` with the ReLU gradient and
//!    the bf16 cast fused in its epilogue, then `dW = X^T dY` and `db = 1^T dY` (a ones-vector
//!    matmul: the batch sum on the array; on weight-stationary arrays one GEMM `[X^T; 1^T] dY`
//!    gives both), with the parameters' SGD updates fused in the epilogue
//!    ([`crate::tiler::Update`]): the f32 master weights (and velocity) are loaded beside the
//!    gradient in the accumulators, updated, stored, and cast to the bf16 copy the next forward
//!    pass multiplies with. `dX` goes first because it reads the weights the update rewrites.
//!
//! Transposes cost nothing: the tiler's strided loads read `X^T` and `W^T` from the row-major
//! buffers. Parameters, gradients and velocities sit at addresses that do not depend on the batch
//! size, so steps compiled for different batch sizes share one machine's memory. Under the
//! decoupled schedule each program is then list-scheduled ([`crate::reorder`]).

extern crate alloc;

mod acc_rows;
mod backward;
mod col2im;
pub mod im2col;
mod memory;
mod paired;
pub mod pool;
mod step;

use alloc::vec;
use alloc::vec::Vec;
use memory::{plan_params, Dram};
pub use step::{Buffers, CompiledStep, Segment};

use crate::config::{ArrayConfig, Dtype, Schedule};
use crate::graph::{Graph, Op, TensorId, TensorKind};
use crate::isa::{Instruction, VectorOp};
use crate::layers::Layer;
use crate::machine::ExecErrorKind;
use crate::numerics::Requant;
use crate::tiler::{
    CastTo, Epilogue, GemmLayout, GemmPlan, GemmShape, MatrixView, TileError, UpdateLoads,
};
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
    /// An op of the graph that the compiler does not lower to the array yet.
    NotLowered { what: &'static str },
    /// A ReLU (layer `layer` of the list) that follows no GEMM to fuse into, even where
    /// [`crate::graph::Graph::network`] moves it (DECISIONS 131): `what` says where it is.
    Relu { layer: usize, what: &'static str },
}

/// Where a ReLU cannot run ([`CompileError::Relu`]).
pub const RELU_OF_INPUT: &str =
    "a ReLU of the network's input (the array applies a ReLU to the GEMM before it, and none is)";
pub const RELU_AFTER_AVG_POOL: &str =
    "a ReLU after an average pooling (the array applies a ReLU to the GEMM before it, and a mean \
     does not commute with it)";

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
            CompileError::NotLowered { what } => {
                write!(f, "{what} does not run on the accelerator yet")
            }
            CompileError::Relu { layer, what } => {
                write!(f, "layer {layer} (relu): {what} does not run on the accelerator yet")
            }
        }
    }
}

/// Per-tensor INT8 quantization of a network for inference (symmetric, zero points 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Plan {
    /// Scale of each layer's input: `real = scale * q`.
    pub input_scales: Vec<f32>,
    /// Scale of each layer's weights.
    pub weight_scales: Vec<f32>,
    /// Requantization of each hidden layer's output to the next layer's input scale.
    pub requant: Vec<Requant>,
    /// How many of each layer's words its average poolings sum into one (the product of their
    /// window sizes, 1 where it has none): an INT8 average pooling only sums, and the layer's
    /// requantization (or, after the last layer, the logits' scale) divides by this.
    pub pool_sums: Vec<u32>,
}

/// Whether every op of `graph` is one the compiler lowers to an array of `config`; the first
/// that is not, named, otherwise. Cheap (no program is built), so a caller can refuse a network
/// before any work; compiling checks it first, so this is the one place that names what is not
/// lowered.
pub fn check_lowered(graph: &Graph, config: &ArrayConfig) -> Result<(), CompileError> {
    let not = |what| Err(CompileError::NotLowered { what });
    let layers = crate::graph::lowered_layers(&graph.net);
    for (at, &(layer, kind, _)) in layers.iter().enumerate() {
        let what = match (kind, at.checked_sub(1).map(|before| layers[before].1)) {
            (Layer::Relu, None) => RELU_OF_INPUT,
            (Layer::Relu, Some(Layer::AvgPool2d { .. })) => RELU_AFTER_AVG_POOL,
            _ => continue,
        };
        return Err(CompileError::Relu { layer, what });
    }
    for op in graph.forward.iter().chain(&graph.backward) {
        match *op {
            Op::MaxPool { .. } if !VectorOp::Max.runs_on(config) => return not(pool::INT8),
            Op::MaxPool { x, .. } | Op::AvgPool { x, .. } if x == graph.input => {
                return not(pool::OF_INPUT)
            }
            Op::MaxPoolGrad { geom, .. } | Op::AvgPoolGrad { geom, .. } if !pool::tiles(&geom) => {
                return not(pool::UNTILED)
            }
            _ => {}
        }
    }
    Ok(())
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

/// The ReLU a network ends in (through flattens): its gradient op's output, whose buffers the
/// host writes the logits' gradient to, masked by the ReLU as the golden model's `ReluGrad`
/// masks it (`exec::Accel::relu_grad`), beside the softmax between the programs. `None` if the
/// network ends otherwise.
pub fn logits_relu(graph: &Graph) -> Option<TensorId> {
    let mut grad = graph.gradient(graph.logits)?;
    let logits = reshape_source(graph, graph.logits);
    for op in &graph.backward {
        match *op {
            Op::SoftmaxCrossEntropyGrad { .. } => {}
            Op::Reshape { x, y } if x == grad => grad = y,
            Op::ReluGrad { dy, y, dx } if dy == grad && y == logits => return Some(dx),
            _ => return None,
        }
    }
    None
}

/// The tensor whose buffers `t` is, through the reshapes of either pass (`t` itself if none).
fn reshape_source(graph: &Graph, t: TensorId) -> TensorId {
    let mut t = t;
    while let Some(x) = graph.forward.iter().chain(&graph.backward).find_map(|op| match *op {
        Op::Reshape { x, y } if y == t => Some(x),
        _ => None,
    }) {
        t = x;
    }
    t
}

/// How poolings read a tensor ([`Compiler::pooled`]).
struct Pooled {
    any: bool,
    only: bool,
}

struct Compiler<'g> {
    graph: &'g Graph,
    config: ArrayConfig,
    batch: u32,
    training: bool,
    dram: Dram,
    buffers: Vec<Buffers>,
    programs: [Vec<Instruction>; 2],
    /// The accumulator bank each program's next GEMM starts in ([`GemmPlan::starting_in_bank`]).
    banks: [u32; 2],
    segments: Vec<Segment>,
    ones: Option<u32>,
    ones_len: u32,
    input_padding: u32,
    /// The zero-padded copy of each padded convolution's input that the array made (`(input,
    /// padding, address)`; [`super::im2col`]), and the DRAM that must hold zeros when the step
    /// runs (`(address, bytes)`: those copies, whose borders nothing writes).
    padded: Vec<(TensorId, u32, u32)>,
    zeroed: Vec<(u32, u32)>,
    /// SGD ops fused into the gradient GEMMs' epilogues so far.
    updates: usize,
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
        check_lowered(graph, config)?;
        let mut c = Compiler {
            graph,
            config: *config,
            batch,
            training,
            dram: Dram { next: 0 },
            buffers: vec![Buffers::default(); graph.tensors.len()],
            programs: [Vec::new(), Vec::new()],
            banks: [0, 0],
            segments: Vec::new(),
            ones: None,
            ones_len: 0,
            input_padding: 0,
            padded: Vec::new(),
            zeroed: Vec::new(),
            updates: 0,
        };
        let es = config.dtype.elem_bytes() as u64;
        plan_params(graph, &mut c.dram, &mut c.buffers, config.dtype);
        // The input is read padded when the first convolution pads it (`im2col`).
        c.input_padding = graph
            .forward
            .iter()
            .find_map(|op| match *op {
                Op::Im2col { x, geom, .. } if x == graph.input => Some(geom.padding),
                _ => None,
            })
            .unwrap_or(0);
        let padded = |t: usize| match (t == graph.input as usize, graph.net.input) {
            (true, crate::layers::Shape::Image { c: ch, h, w }) => {
                let p = c.input_padding as u64;
                batch as u64 * (h as u64 + 2 * p) * (w as u64 + 2 * p) * ch as u64
            }
            _ => 0,
        };
        // A reshape's output is its input's buffers under another shape (and so is the
        // gradient's, backwards).
        let aliases: Vec<(TensorId, TensorId)> = graph
            .forward
            .iter()
            .chain(&graph.backward)
            .filter_map(|op| match *op {
                Op::Reshape { x, y } => Some((y, x)),
                _ => None,
            })
            .collect();
        // Gradients the vector unit reads as f32 words: a pooling's (`pool`) and a
        // convolution's patches' (`col2im`), at the tensor whose buffers they are.
        let read_as_words: Vec<TensorId> = graph
            .backward
            .iter()
            .filter_map(|op| match *op {
                Op::MaxPoolGrad { dy, .. } | Op::AvgPoolGrad { dy, .. } | Op::Col2im { dy, .. } => {
                    Some(reshape_source(graph, dy))
                }
                _ => None,
            })
            .collect();
        let patches: Vec<TensorId> = graph
            .forward
            .iter()
            .filter_map(|op| match *op {
                Op::Im2col { y, .. } => Some(y),
                _ => None,
            })
            .collect();
        // Batch-side buffers: the input's elements, every activation's words and elements (a
        // convolution's patches: elements only), the logits gradient and the hidden
        // gradients' elements.
        for (t, info) in graph.tensors.iter().enumerate() {
            if aliases.iter().any(|&(y, _)| y as usize == t) {
                continue;
            }
            let n = info.rows(batch) as u64 * info.cols as u64;
            match info.kind {
                TensorKind::Input => c.buffers[t].elems = Some(c.dram.alloc(es * n.max(padded(t)))),
                TensorKind::Activation if patches.contains(&(t as TensorId)) => {
                    c.buffers[t].elems = Some(c.dram.alloc(es * n))
                }
                TensorKind::Activation => {
                    c.buffers[t].words = Some(c.dram.alloc(4 * n));
                    c.buffers[t].elems = Some(c.dram.alloc(es * n));
                }
                TensorKind::Grad(of) if training && !graph.info(of).is_param() => {
                    c.buffers[t].elems = Some(c.dram.alloc(es * n));
                    if read_as_words.contains(&(t as TensorId)) {
                        c.buffers[t].words = Some(c.dram.alloc(4 * n));
                    }
                }
                _ => {}
            }
        }
        for &(y, x) in &aliases {
            c.buffers[y as usize] = c.buffers[x as usize];
        }
        // A padded convolution of an input the array made reads a zero-padded copy of it.
        for op in &graph.forward {
            let Op::Im2col { x, geom, .. } = *op else { continue };
            if x == graph.input || geom.padding == 0 || c.padded_copy(x, geom.padding).is_some() {
                continue;
            }
            let p = geom.padding as u64;
            let (h, w) = (geom.h as u64 + 2 * p, geom.w as u64 + 2 * p);
            let bytes = es * batch as u64 * h * w * geom.c as u64;
            let at = c.dram.alloc(bytes);
            c.padded.push((x, geom.padding, at));
            c.zeroed.push((at, bytes.min(u32::MAX as u64) as u32));
        }
        if training {
            c.ones_len = graph.bias_sum_rows(batch);
            c.ones = Some(c.dram.alloc(es * c.ones_len as u64));
        }
        if c.dram.next > u32::MAX as u64 {
            return Err(CompileError::Dram { needed: c.dram.next });
        }
        Ok(c)
    }

    /// The zero-padded copy of `x` by `padding`, if a convolution reads one.
    fn padded_copy(&self, x: TensorId, padding: u32) -> Option<u32> {
        self.padded.iter().find(|&&(t, p, _)| t == x && p == padding).map(|&(_, _, at)| at)
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
    /// The tensor whose buffers `t` is ([`reshape_source`]).
    fn source_of(&self, t: TensorId) -> TensorId {
        reshape_source(self.graph, t)
    }
    /// Whether poolings read `t` (as f32 words): any, and only they (in the forward pass).
    fn pooled(&self, t: TensorId) -> Pooled {
        let readers = self.graph.forward.iter().filter(|op| match **op {
            Op::Dense { x, .. }
            | Op::BiasAdd { x, .. }
            | Op::Relu { x, .. }
            | Op::Im2col { x, .. }
            | Op::Reshape { x, .. }
            | Op::MaxPool { x, .. }
            | Op::AvgPool { x, .. } => x == t,
            Op::SoftmaxCrossEntropy { logits, .. } => logits == t,
            _ => false,
        });
        let (mut any, mut only) = (false, true);
        for op in readers {
            let pool = matches!(op, Op::MaxPool { .. } | Op::AvgPool { .. });
            any |= pool;
            only &= pool;
        }
        Pooled { any, only: any && only }
    }
    /// Whether `t` is a convolution's patches (its GEMMs are the convolution's).
    fn is_patches(&self, t: TensorId) -> bool {
        self.graph.forward.iter().any(|op| matches!(*op, Op::Im2col { y, .. } if y == t))
    }
    /// Rows of tensor `t` in this step: the batch, or a convolution's output positions over it.
    fn rows(&self, t: TensorId) -> u32 {
        self.graph.info(t).rows(self.batch)
    }
    fn layer_of(&self, w: TensorId) -> u8 {
        match self.graph.info(w).kind {
            TensorKind::Weight(l) | TensorKind::Bias(l) => l,
            _ => 0,
        }
    }

    /// Appends one tiled GEMM to `program` as a segment.
    fn gemm(
        &mut self,
        program: usize,
        (op, layer): (&'static str, u8),
        shape: GemmShape,
        layout: GemmLayout,
        epilogue: Epilogue,
    ) -> Result<(), CompileError> {
        let plan = GemmPlan::with_epilogue(&self.config, shape, layout, epilogue)
            .map_err(|error| CompileError::Tile { op, layer, error })?
            .starting_in_bank(self.banks[program]);
        let plan = self.place_update_loads(program, plan);
        self.banks[program] = plan.next_bank();
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

    /// On the decoupled schedule, the placement of an SGD update's loads ([`UpdateLoads`]) under
    /// which the program so far, this GEMM appended, finishes first in the timing model (the
    /// first in [`UpdateLoads::ALL`] on a tie).
    fn place_update_loads(&self, program: usize, plan: GemmPlan) -> GemmPlan {
        if plan.epilogue.update.is_none() || self.config.schedule != Schedule::Decoupled {
            return plan;
        }
        let mut before = timing::DecoupledScheduler::new(&self.config);
        // Compiled programs are valid, so the scheduler cannot fault.
        for ins in &self.programs[program] {
            let _ = before.push(ins);
        }
        let finish = |loads: &UpdateLoads| {
            let mut scheduler = before.clone();
            plan.with_update_loads(*loads).emit_body(&mut |ins| {
                let _ = scheduler.push(&ins);
            });
            scheduler.push(&Instruction::Halt).unwrap_or(u64::MAX)
        };
        let best = UpdateLoads::ALL.iter().min_by_key(|l| finish(l));
        plan.with_update_loads(best.copied().unwrap_or_default())
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
                    let shape = GemmShape { m: self.rows(x), k: self.cols(x), n: self.cols(y) };
                    // The logits may be this output flattened (a reshape shares its buffers).
                    let is_logits = self.source_of(self.graph.logits) == out;
                    // A pooling reads the f32 words; only another reader needs the elements.
                    let pooled = self.pooled(out);
                    let cast = (!is_logits && !pooled.only).then(|| CastTo {
                        addr: self.elems(out),
                        requant: int8.map(|q| q.requant[layer as usize]),
                    });
                    let epilogue = Epilogue {
                        bias: Some(self.words(b)),
                        relu,
                        // Training keeps the f32 output as the ReLU mask; inference only the logits
                        // and what a pooling reads.
                        store: is_logits || self.training || pooled.any,
                        cast,
                        ..Epilogue::STORE
                    };
                    let a = MatrixView::row_major(self.elems(x), shape.k);
                    let bv = MatrixView::row_major(self.elems(w), shape.n);
                    let layout = GemmLayout::new(a, bv, self.words(out));
                    let name = if self.is_patches(x) { "conv" } else { "dense" };
                    self.gemm(0, (name, layer), shape, layout, epilogue)?;
                    i += if relu { 3 } else { 2 };
                }
                Op::SoftmaxCrossEntropy { .. } => i += 1,
                Op::Im2col { x, y, geom } => {
                    self.im2col(x, y, geom)?;
                    i += 1;
                }
                Op::MaxPool { x, y, geom } => {
                    self.pool(pool::Kind::Max, (x, y), geom, int8)?;
                    i += 1;
                }
                Op::AvgPool { x, y, geom } => {
                    self.pool(pool::Kind::Avg, (x, y), geom, int8)?;
                    i += 1;
                }
                // The output shares the input's buffers.
                Op::Reshape { .. } => i += 1,
                _ => return Err(CompileError::Unsupported { op: "forward op" }),
            }
        }
        Ok(())
    }

    /// Program `p` in the order [`crate::reorder::reorder`] picks, its segments following
    /// their instructions: a segment starts at its first instruction (or the one before it
    /// starts, whichever is later) and ends where the next starts.
    fn reorder(&mut self, p: usize) {
        let order = crate::reorder::reorder(&self.config, &self.programs[p]);
        let program = &mut self.programs[p];
        *program = order.iter().map(|&i| program[i]).collect();
        let segments: Vec<&mut Segment> =
            self.segments.iter_mut().filter(|s| s.program as usize == p).collect();
        // Where each original index went.
        let mut position = vec![0usize; order.len()];
        for (at, &i) in order.iter().enumerate() {
            position[i] = at;
        }
        let halt = program.len() - 1;
        let mut starts: Vec<usize> = Vec::with_capacity(segments.len());
        for s in &segments {
            let first = (s.start..s.end).map(|i| position[i]).min().unwrap_or(halt);
            starts.push(first.max(starts.last().copied().unwrap_or(0)));
        }
        for (t, s) in segments.into_iter().enumerate() {
            s.start = starts[t];
            s.end = starts.get(t + 1).copied().unwrap_or(halt);
        }
    }

    fn finish(mut self, int8: Option<&Int8Plan>) -> Result<CompiledStep, CompileError> {
        self.forward(int8)?;
        if self.training {
            self.backward()?;
        }
        let mut cycles = [0u64; 2];
        for (p, cycles) in cycles.iter_mut().enumerate() {
            if self.programs[p].is_empty() && p == 1 {
                continue;
            }
            self.programs[p].push(Instruction::Halt);
            self.reorder(p);
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
            ones_len: self.ones_len,
            input_padding: self.input_padding,
            zeroed: self.zeroed,
            input_image: match self.graph.net.input {
                crate::layers::Shape::Image { c, h, w } => Some((c, h, w)),
                _ => None,
            },
        })
    }
}
