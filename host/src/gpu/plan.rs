//! One training step (or forward pass) of a [`Graph`], lowered for the GPU: a list of GEMMs and
//! kernel launches over numbered buffers. The same plan runs on the device
//! ([`super::device`]) and on the CPU twin ([`super::twin`]), so everything above the level of
//! a single launch (which buffer feeds which GEMM, the transposes, the casts, the order) is
//! tested against the reference executor without a GPU.
//!
//! Lowering, op by op of the graph: `Dense` is one GEMM; `BiasAdd` followed by its `Relu` is
//! one fused `BiasAct` launch (the ReLU gradient reads the ReLU's output, as PyTorch's does, so
//! the pre-activation need not be kept); the softmax cross-entropy and its gradient are one
//! launch; `DenseGradWeight` and `DenseGradInput` are GEMMs with a transposed operand (cuBLAS
//! reads the transpose in place); a bias gradient is a GEMM with a ones vector, `1^T dY`, as on
//! the accelerator (docs/DECISIONS.md, entry 12), always in f32; SGD is one launch per
//! parameter. In BF16 mode each matrix operand is cast to bf16 once after it is written (one
//! cast kernel), products accumulate in f32, and everything else stays f32: the accelerator's
//! mixed precision.
//!
//! A convolution is the graph's `Im2col`, `Dense` and `BiasAdd`: an im2col launch, then the
//! dense GEMM on the patches (one row per output position) and the bias launch as above; its
//! input gradient is the dense one's GEMM and a col2im launch. Pooling and its gradients are
//! one launch each ([`super::image_kernels`]); a reshape (flatten) names the same buffer.

use std::fmt;

use systole_core::conv::{ConvGeometry, PoolGeometry};
use systole_core::graph::{Graph, Op, Sgd, TensorId, TensorKind, MAX_TENSORS};

use super::GpuDtype;

/// Element type of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    /// bf16 bits, as `u16`.
    Bf16,
    I32,
}

impl Elem {
    pub const fn bytes(self) -> usize {
        match self {
            Elem::F32 | Elem::I32 => 4,
            Elem::Bf16 => 2,
        }
    }
}

/// Who owns a buffer's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A parameter or velocity of the graph: shared by every plan of one trainer, kept across
    /// steps (the trainer holds one copy per tensor).
    Persistent(TensorId),
    /// The input batch (written before each step).
    Input,
    /// The labels (written before each step).
    Labels,
    /// `batch` ones, for bias gradients (written once).
    Ones,
    /// Written and read within one step.
    Scratch,
}

/// One buffer of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// For messages: the graph tensor or purpose.
    pub name: String,
    pub elem: Elem,
    pub len: usize,
    pub role: Role,
}

/// Index into [`StepPlan::buffers`].
pub type Buf = usize;

/// `C (m x n) = op(A) (m x k) * op(B) (k x n)`, every matrix row-major, `op` a transpose when
/// asked: the stored `A` is `k x m` when `trans_a`, the stored `B` is `n x k` when `trans_b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMajorGemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub trans_a: bool,
    pub trans_b: bool,
}

/// The column-major (BLAS) call that computes a [`RowMajorGemm`]: a row-major matrix is its
/// transpose in column-major order, so `C^T = op(B)^T op(A)^T` is computed with the operands
/// swapped. `first` is the row-major `B`, `second` the row-major `A`; `C` is `m x n`
/// column-major with leading dimension `ldc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlasGemm {
    pub transa: bool,
    pub transb: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub lda: i32,
    pub ldb: i32,
    pub ldc: i32,
}

impl RowMajorGemm {
    pub fn blas(&self) -> BlasGemm {
        BlasGemm {
            transa: self.trans_b,
            transb: self.trans_a,
            m: self.n as i32,
            n: self.m as i32,
            k: self.k as i32,
            lda: if self.trans_b { self.k } else { self.n } as i32,
            ldb: if self.trans_a { self.m } else { self.k } as i32,
            ldc: self.n as i32,
        }
    }

    pub fn macs(&self) -> u64 {
        self.m as u64 * self.n as u64 * self.k as u64
    }
}

/// The precision of a GEMM's operands; products always accumulate in f32 and `C` is f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// cuBLAS `sgemm`: f32 operands, true FP32 (never TF32).
    F32,
    /// cuBLAS `GemmEx`: bf16 operands, f32 compute and output.
    Bf16,
}

/// One launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepOp {
    CastBf16 {
        src: Buf,
        dst: Buf,
        n: usize,
    },
    Gemm {
        a: Buf,
        b: Buf,
        c: Buf,
        shape: RowMajorGemm,
        precision: Precision,
    },
    BiasAct {
        x: Buf,
        bias: Buf,
        y: Buf,
        rows: usize,
        cols: usize,
        relu: bool,
    },
    Relu {
        x: Buf,
        y: Buf,
        n: usize,
    },
    SoftmaxXent {
        logits: Buf,
        labels: Buf,
        loss: Buf,
        correct: Buf,
        dlogits: Buf,
        rows: usize,
        classes: usize,
    },
    ReluGrad {
        dy: Buf,
        y: Buf,
        dx: Buf,
        n: usize,
    },
    SgdMomentum {
        param: Buf,
        grad: Buf,
        velocity: Buf,
        n: usize,
    },
    Sgd {
        param: Buf,
        grad: Buf,
        n: usize,
    },
    /// `n` images' patches ([`super::image_kernels`]).
    Im2col {
        x: Buf,
        cols: Buf,
        n: usize,
        geom: ConvGeometry,
    },
    /// Patch gradients added back into `n` images.
    Col2im {
        cols: Buf,
        x: Buf,
        n: usize,
        geom: ConvGeometry,
    },
    MaxPool {
        x: Buf,
        y: Buf,
        n: usize,
        geom: PoolGeometry,
    },
    /// The max-pooling gradient, each window's maximum found again in the pool's input `x`.
    MaxPoolGrad {
        dy: Buf,
        x: Buf,
        dx: Buf,
        n: usize,
        geom: PoolGeometry,
    },
    AvgPool {
        x: Buf,
        y: Buf,
        n: usize,
        geom: PoolGeometry,
    },
    AvgPoolGrad {
        dy: Buf,
        dx: Buf,
        n: usize,
        geom: PoolGeometry,
    },
}

impl StepOp {
    /// Short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            StepOp::CastBf16 { .. } => "cast_bf16",
            StepOp::Gemm { precision: Precision::F32, .. } => "sgemm",
            StepOp::Gemm { precision: Precision::Bf16, .. } => "gemm_bf16",
            StepOp::BiasAct { .. } => "bias_act",
            StepOp::Relu { .. } => "relu",
            StepOp::SoftmaxXent { .. } => "softmax_xent",
            StepOp::ReluGrad { .. } => "relu_grad",
            StepOp::SgdMomentum { .. } => "sgd_momentum",
            StepOp::Sgd { .. } => "sgd",
            StepOp::Im2col { .. } => "im2col",
            StepOp::Col2im { .. } => "col2im",
            StepOp::MaxPool { .. } => "max_pool",
            StepOp::MaxPoolGrad { .. } => "max_pool_grad",
            StepOp::AvgPool { .. } => "avg_pool",
            StepOp::AvgPoolGrad { .. } => "avg_pool_grad",
        }
    }
}

/// Why a graph cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// Batch size 0, or too large for the kernels' 32-bit indices.
    Batch(usize),
    /// An op in a position this lowering does not know.
    Unsupported(&'static str),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Batch(b) => write!(f, "batch size {b} is not supported by the GPU plan"),
            PlanError::Unsupported(op) => write!(f, "the GPU plan cannot lower {op} here"),
        }
    }
}

/// A lowered step for one batch size.
#[derive(Clone, Debug, PartialEq)]
pub struct StepPlan {
    pub dtype: GpuDtype,
    pub batch: usize,
    /// Forward, backward and update; `false`: forward and loss only.
    pub training: bool,
    pub buffers: Vec<Buffer>,
    pub ops: Vec<StepOp>,
    pub input: Buf,
    pub labels: Buf,
    pub logits: Buf,
    /// Per-row loss (f32) and whether the row's arg-max is its label (i32).
    pub loss: Buf,
    pub correct: Buf,
    pub sgd: Option<Sgd>,
}

impl StepPlan {
    /// Forward, backward and SGD of a training graph (one made by `Graph::training`).
    pub fn training(graph: &Graph, batch: usize, dtype: GpuDtype) -> Result<StepPlan, PlanError> {
        Builder::new(graph, batch, dtype, true).build()
    }

    /// The forward pass and the loss (evaluation).
    pub fn inference(graph: &Graph, batch: usize, dtype: GpuDtype) -> Result<StepPlan, PlanError> {
        Builder::new(graph, batch, dtype, false).build()
    }

    /// Multiply-accumulates of every GEMM.
    pub fn macs(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                StepOp::Gemm { shape, .. } => shape.macs(),
                _ => 0,
            })
            .sum()
    }

    /// Bytes each launch must read and write at least (every operand once): the denominator of
    /// the step's arithmetic intensity.
    pub fn bytes(&self) -> u64 {
        let size = |b: Buf| (self.buffers[b].len * self.buffers[b].elem.bytes()) as u64;
        self.ops
            .iter()
            .map(|op| match *op {
                StepOp::CastBf16 { src, dst, .. } => size(src) + size(dst),
                StepOp::Gemm { a, b, c, .. } => size(a) + size(b) + size(c),
                StepOp::BiasAct { x, bias, y, .. } => size(x) + size(bias) + size(y),
                StepOp::Relu { x, y, .. } => size(x) + size(y),
                StepOp::SoftmaxXent { logits, labels, loss, correct, dlogits, .. } => {
                    size(logits) + size(labels) + size(loss) + size(correct) + size(dlogits)
                }
                StepOp::ReluGrad { dy, y, dx, .. } => size(dy) + size(y) + size(dx),
                StepOp::SgdMomentum { param, grad, velocity, .. } => {
                    2 * size(param) + size(grad) + 2 * size(velocity)
                }
                StepOp::Sgd { param, grad, .. } => 2 * size(param) + size(grad),
                StepOp::Im2col { x, cols: y, .. }
                | StepOp::Col2im { cols: x, x: y, .. }
                | StepOp::MaxPool { x, y, .. }
                | StepOp::AvgPool { x, y, .. }
                | StepOp::AvgPoolGrad { dy: x, dx: y, .. } => size(x) + size(y),
                StepOp::MaxPoolGrad { dy, x, dx, .. } => size(dy) + size(x) + size(dx),
            })
            .sum()
    }
}

struct Builder<'g> {
    graph: &'g Graph,
    batch: usize,
    dtype: GpuDtype,
    training: bool,
    buffers: Vec<Buffer>,
    ops: Vec<StepOp>,
    /// The f32 buffer of each graph tensor.
    f32_of: [Option<Buf>; MAX_TENSORS],
    /// The bf16 copy of each tensor, and whether it holds the current value.
    bf16_of: [Option<(Buf, bool)>; MAX_TENSORS],
}

impl<'g> Builder<'g> {
    fn new(graph: &'g Graph, batch: usize, dtype: GpuDtype, training: bool) -> Builder<'g> {
        Builder {
            graph,
            batch,
            dtype,
            training,
            buffers: Vec::new(),
            ops: Vec::new(),
            f32_of: [None; MAX_TENSORS],
            bf16_of: [None; MAX_TENSORS],
        }
    }

    fn buffer(&mut self, name: String, elem: Elem, len: usize, role: Role) -> Buf {
        self.buffers.push(Buffer { name, elem, len, role });
        self.buffers.len() - 1
    }

    fn len_of(&self, t: TensorId) -> usize {
        let info = self.graph.info(t);
        info.rows(self.batch as u32) as usize * info.cols as usize
    }

    fn cols(&self, t: TensorId) -> usize {
        self.graph.info(t).cols as usize
    }

    /// Rows of tensor `t` for this batch (a convolution's patches and outputs have one per
    /// output position of each sample).
    fn rows_of(&self, t: TensorId) -> usize {
        self.graph.info(t).rows(self.batch as u32) as usize
    }

    /// `y` as another name for `x`'s f32 buffer (a reshape moves no data).
    fn alias(&mut self, x: TensorId, y: TensorId) -> Result<(), PlanError> {
        if self.f32_of[y as usize].is_some() {
            return Err(PlanError::Unsupported("a reshape into a tensor already written"));
        }
        self.f32_of[y as usize] = Some(self.tensor(x));
        Ok(())
    }

    /// The f32 buffer of tensor `t`, made on first use.
    fn tensor(&mut self, t: TensorId) -> Buf {
        if let Some(b) = self.f32_of[t as usize] {
            return b;
        }
        let kind = self.graph.info(t).kind;
        let role = match kind {
            TensorKind::Weight(_) | TensorKind::Bias(_) | TensorKind::Velocity(_) => {
                Role::Persistent(t)
            }
            _ => Role::Scratch,
        };
        let b = self.buffer(format!("{kind:?} (tensor {t})"), Elem::F32, self.len_of(t), role);
        self.f32_of[t as usize] = Some(b);
        b
    }

    /// The buffer a GEMM multiplies for tensor `t` in this plan's precision: the f32 buffer, or
    /// its bf16 copy, cast now unless the copy is current.
    fn operand(&mut self, t: TensorId) -> Buf {
        let src = self.tensor(t);
        if self.dtype == GpuDtype::F32 {
            return src;
        }
        match self.bf16_of[t as usize] {
            Some((b, true)) => b,
            existing => {
                let n = self.len_of(t);
                let dst = match existing {
                    Some((b, _)) => b,
                    None => self.buffer(
                        format!("bf16 copy of tensor {t}"),
                        Elem::Bf16,
                        n,
                        Role::Scratch,
                    ),
                };
                self.ops.push(StepOp::CastBf16 { src, dst, n });
                self.bf16_of[t as usize] = Some((dst, true));
                dst
            }
        }
    }

    fn precision(&self) -> Precision {
        match self.dtype {
            GpuDtype::F32 => Precision::F32,
            GpuDtype::Bf16 => Precision::Bf16,
        }
    }

    /// Whether tensor `t` is read by any op other than `except` (forward or backward).
    fn read_elsewhere(&self, t: TensorId, except: usize) -> bool {
        let reads = |op: &Op| -> bool {
            match *op {
                Op::Dense { x, w, .. } => x == t || w == t,
                Op::BiasAdd { x, b, .. } => x == t || b == t,
                Op::Relu { x, .. } => x == t,
                Op::SoftmaxCrossEntropy { logits, .. } => logits == t,
                Op::SoftmaxCrossEntropyGrad { logits, .. } => logits == t,
                Op::DenseGradInput { dy, w, .. } => dy == t || w == t,
                Op::DenseGradWeight { x, dy, .. } => x == t || dy == t,
                Op::BiasGrad { dy, .. } => dy == t,
                Op::ReluGrad { dy, y, .. } => dy == t || y == t,
                Op::Sgd { param, grad, .. } => param == t || grad == t,
                Op::Im2col { x, .. }
                | Op::Reshape { x, .. }
                | Op::MaxPool { x, .. }
                | Op::AvgPool { x, .. } => x == t,
                Op::Col2im { dy, .. } | Op::AvgPoolGrad { dy, .. } => dy == t,
                Op::MaxPoolGrad { dy, x, .. } => dy == t || x == t,
            }
        };
        let forward = self.graph.forward.iter().enumerate().any(|(i, op)| i != except && reads(op));
        forward || self.graph.backward.iter().any(reads)
    }

    fn build(mut self) -> Result<StepPlan, PlanError> {
        let g = self.graph;
        let rows = self.batch;
        if rows == 0 {
            return Err(PlanError::Batch(rows));
        }
        let input = self.tensor(g.input);
        self.buffers[input].role = Role::Input;
        let labels = self.buffer("labels".into(), Elem::I32, rows, Role::Labels);
        let loss = self.buffer("loss per row".into(), Elem::F32, rows, Role::Scratch);
        let correct = self.buffer("correct per row".into(), Elem::I32, rows, Role::Scratch);
        let mut logits_buf = None;

        let mut i = 0;
        while i < g.forward.len() {
            match g.forward[i] {
                Op::Dense { x, w, y } => {
                    let (k, n) = (self.cols(x), self.cols(y));
                    let a = self.operand(x);
                    let b = self.operand(w);
                    let c = self.tensor(y);
                    let m = self.rows_of(x);
                    let shape = RowMajorGemm { m, n, k, trans_a: false, trans_b: false };
                    self.ops.push(StepOp::Gemm { a, b, c, shape, precision: self.precision() });
                }
                Op::BiasAdd { x, b, y } => {
                    let (rows, cols) = (self.rows_of(y), self.cols(y));
                    let (xb, bb) = (self.tensor(x), self.tensor(b));
                    let fused = match g.forward.get(i + 1) {
                        Some(&Op::Relu { x: rx, y: ry })
                            if rx == y && !self.read_elsewhere(y, i + 1) =>
                        {
                            Some(ry)
                        }
                        _ => None,
                    };
                    let out = self.tensor(fused.unwrap_or(y));
                    self.ops.push(StepOp::BiasAct {
                        x: xb,
                        bias: bb,
                        y: out,
                        rows,
                        cols,
                        relu: fused.is_some(),
                    });
                    if fused.is_some() {
                        i += 1;
                    }
                }
                Op::Relu { x, y } => {
                    let (xb, yb) = (self.tensor(x), self.tensor(y));
                    self.ops.push(StepOp::Relu { x: xb, y: yb, n: self.len_of(y) });
                }
                Op::SoftmaxCrossEntropy { logits, .. } => {
                    let classes = self.cols(logits);
                    let lb = self.tensor(logits);
                    let dlogits = match g.gradient(logits).filter(|_| self.training) {
                        Some(d) => self.tensor(d),
                        None => self.buffer(
                            "dlogits (unused)".into(),
                            Elem::F32,
                            rows * classes,
                            Role::Scratch,
                        ),
                    };
                    self.ops.push(StepOp::SoftmaxXent {
                        logits: lb,
                        labels,
                        loss,
                        correct,
                        dlogits,
                        rows,
                        classes,
                    });
                    logits_buf = Some(lb);
                }
                Op::Im2col { x, y, geom } => {
                    let (x, cols) = (self.tensor(x), self.tensor(y));
                    self.ops.push(StepOp::Im2col { x, cols, n: rows, geom });
                }
                Op::Reshape { x, y } => self.alias(x, y)?,
                Op::MaxPool { x, y, geom } => {
                    let (x, y) = (self.tensor(x), self.tensor(y));
                    self.ops.push(StepOp::MaxPool { x, y, n: rows, geom });
                }
                Op::AvgPool { x, y, geom } => {
                    let (x, y) = (self.tensor(x), self.tensor(y));
                    self.ops.push(StepOp::AvgPool { x, y, n: rows, geom });
                }
                _ => return Err(PlanError::Unsupported("a backward op in the forward list")),
            }
            i += 1;
        }
        let logits = logits_buf.ok_or(PlanError::Unsupported("a graph without a loss"))?;
        if logits != self.f32_of[g.logits as usize].unwrap_or(usize::MAX) {
            return Err(PlanError::Unsupported("a loss of something other than the logits"));
        }

        if self.training {
            let mut ones = None;
            // The ones vector is as long as the longest bias gradient's sum.
            let ones_len = g.bias_sum_rows(rows as u32) as usize;
            for op in g.backward.iter().copied() {
                match op {
                    // Computed with the loss, by the same launch.
                    Op::SoftmaxCrossEntropyGrad { .. } => {}
                    Op::DenseGradWeight { x, dy, dw } => {
                        let (k, n) = (self.cols(x), self.cols(dy));
                        let a = self.operand(x);
                        let b = self.operand(dy);
                        let c = self.tensor(dw);
                        let sum = self.rows_of(x);
                        let shape = RowMajorGemm { m: k, n, k: sum, trans_a: true, trans_b: false };
                        self.ops.push(StepOp::Gemm { a, b, c, shape, precision: self.precision() });
                    }
                    Op::DenseGradInput { dy, w, dx } => {
                        let (n, k) = (self.cols(dy), self.cols(dx));
                        let a = self.operand(dy);
                        let b = self.operand(w);
                        let c = self.tensor(dx);
                        let m = self.rows_of(dy);
                        let shape = RowMajorGemm { m, n: k, k: n, trans_a: false, trans_b: true };
                        self.ops.push(StepOp::Gemm { a, b, c, shape, precision: self.precision() });
                    }
                    Op::BiasGrad { dy, db } => {
                        let n = self.cols(dy);
                        let a = *ones.get_or_insert_with(|| {
                            self.buffer("ones".into(), Elem::F32, ones_len, Role::Ones)
                        });
                        let b = self.tensor(dy);
                        let c = self.tensor(db);
                        let sum = self.rows_of(dy);
                        let shape =
                            RowMajorGemm { m: 1, n, k: sum, trans_a: false, trans_b: false };
                        self.ops.push(StepOp::Gemm { a, b, c, shape, precision: Precision::F32 });
                    }
                    Op::ReluGrad { dy, y, dx } => {
                        let (dyb, yb, dxb) = (self.tensor(dy), self.tensor(y), self.tensor(dx));
                        self.ops.push(StepOp::ReluGrad {
                            dy: dyb,
                            y: yb,
                            dx: dxb,
                            n: self.len_of(dx),
                        });
                    }
                    Op::Col2im { dy, dx, geom } => {
                        let (cols, x) = (self.tensor(dy), self.tensor(dx));
                        self.ops.push(StepOp::Col2im { cols, x, n: rows, geom });
                    }
                    Op::Reshape { x, y } => self.alias(x, y)?,
                    Op::MaxPoolGrad { dy, x, dx, geom } => {
                        let (dy, x, dx) = (self.tensor(dy), self.tensor(x), self.tensor(dx));
                        self.ops.push(StepOp::MaxPoolGrad { dy, x, dx, n: rows, geom });
                    }
                    Op::AvgPoolGrad { dy, dx, geom } => {
                        let (dy, dx) = (self.tensor(dy), self.tensor(dx));
                        self.ops.push(StepOp::AvgPoolGrad { dy, dx, n: rows, geom });
                    }
                    _ => {
                        return Err(PlanError::Unsupported(
                            "a forward or update op in the backward list",
                        ))
                    }
                }
            }
            for op in g.update.iter().copied() {
                let Op::Sgd { param, grad, velocity } = op else {
                    return Err(PlanError::Unsupported("an update other than SGD"));
                };
                let n = self.len_of(param);
                let (p, gr) = (self.tensor(param), self.tensor(grad));
                let op = match velocity {
                    Some(v) => {
                        StepOp::SgdMomentum { param: p, grad: gr, velocity: self.tensor(v), n }
                    }
                    None => StepOp::Sgd { param: p, grad: gr, n },
                };
                self.ops.push(op);
                if let Some((b, _)) = self.bf16_of[param as usize] {
                    self.bf16_of[param as usize] = Some((b, false));
                }
            }
        }
        // The kernels index with 32-bit ints.
        if self.buffers.iter().any(|b| b.len > i32::MAX as usize) {
            return Err(PlanError::Batch(rows));
        }
        Ok(StepPlan {
            dtype: self.dtype,
            batch: rows,
            training: self.training,
            buffers: self.buffers,
            ops: self.ops,
            input,
            labels,
            logits,
            loss,
            correct,
            sgd: if self.training { g.sgd } else { None },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::compile::compile_training;
    use systole_core::graph::MlpSpec;
    use systole_core::{ArrayConfig, Dtype};

    fn graph(hidden: &[u32], momentum: f32) -> Graph {
        let spec = MlpSpec { inputs: 64, hidden: hidden.iter().copied().collect(), classes: 10 };
        Graph::training(&spec, Sgd { lr: 0.05, momentum, weight_decay: 0.0 }).unwrap()
    }

    #[test]
    fn an_mlp_step_is_the_expected_launches() {
        let plan = StepPlan::training(&graph(&[32], 0.9), 16, GpuDtype::F32).unwrap();
        let names: Vec<&str> = plan.ops.iter().map(|o| o.name()).collect();
        assert_eq!(
            names,
            [
                "sgemm",
                "bias_act",
                "sgemm",
                "bias_act",
                "softmax_xent", // forward
                "sgemm",
                "sgemm",
                "sgemm",
                "relu_grad",
                "sgemm",
                "sgemm", // db, dw, dx, relu', db, dw
                "sgd_momentum",
                "sgd_momentum",
                "sgd_momentum",
                "sgd_momentum",
            ]
        );
        assert!(matches!(plan.ops[1], StepOp::BiasAct { relu: true, .. }));
        assert!(matches!(plan.ops[3], StepOp::BiasAct { relu: false, .. }));
        let persistent =
            plan.buffers.iter().filter(|b| matches!(b.role, Role::Persistent(_))).count();
        assert_eq!(persistent, 8, "two weights, two biases and their velocities");
        let plain = StepPlan::training(&graph(&[32], 0.0), 16, GpuDtype::F32).unwrap();
        assert!(plain.ops.iter().any(|o| matches!(o, StepOp::Sgd { .. })));
    }

    /// A CNN's step: im2col and the patches' GEMM for each convolution, the pooling
    /// launches, no launch for the flatten, and col2im for the second convolution's input
    /// gradient only (the first's input is the batch). GEMMs over the patches have one row
    /// per output position.
    #[test]
    fn a_cnn_step_is_the_expected_launches() {
        let sgd = Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0 };
        let (g, _) = crate::gpu::twin::tests::cnn(sgd, 1);
        let plan = StepPlan::training(&g, 3, GpuDtype::F32).unwrap();
        let names: Vec<&str> = plan.ops.iter().map(|o| o.name()).collect();
        let forward = [
            "im2col",
            "sgemm",
            "bias_act",
            "max_pool",
            "im2col",
            "sgemm",
            "bias_act",
            "avg_pool",
            "sgemm",
            "bias_act",
            "softmax_xent",
        ];
        assert_eq!(names[..forward.len()], forward);
        let count = |name: &str| names.iter().filter(|n| **n == name).count();
        assert_eq!(
            (count("col2im"), count("max_pool_grad"), count("avg_pool_grad"), count("sgd")),
            (1, 1, 1, 6)
        );
        // The first convolution: 3 images of 6 x 6 positions, 2 x 3 x 3 patches, 3 channels.
        let StepOp::Gemm { shape, .. } = plan.ops[1] else { panic!("{:?}", plan.ops[1]) };
        assert_eq!((shape.m, shape.k, shape.n), (3 * 36, 18, 3));
        // Its weight gradient sums over those 108 rows; its bias gradient too, with the ones.
        let sums: Vec<usize> = plan
            .ops
            .iter()
            .filter_map(|o| match *o {
                StepOp::Gemm { shape, .. } if shape.trans_a || shape.m == 1 => Some(shape.k),
                _ => None,
            })
            .collect();
        assert!(sums.contains(&108), "{sums:?}");
        let ones = plan.buffers.iter().find(|b| b.role == Role::Ones).unwrap();
        assert_eq!(ones.len, 108);
        assert_eq!(plan.macs(), graph_macs(&g, 3));
    }

    /// Multiply-accumulates of the graph's GEMMs, counted from the graph itself.
    fn graph_macs(g: &Graph, batch: u32) -> u64 {
        let rows = |t: TensorId| g.info(t).rows(batch) as u64;
        let cols = |t: TensorId| g.info(t).cols as u64;
        let ops = g.forward.iter().chain(&g.backward);
        ops.map(|op| match *op {
            Op::Dense { x, y, .. } => rows(x) * cols(x) * cols(y),
            Op::DenseGradInput { dy, dx, .. } => rows(dy) * cols(dy) * cols(dx),
            Op::DenseGradWeight { x, dy, .. } => rows(x) * cols(x) * cols(dy),
            Op::BiasGrad { dy, .. } => rows(dy) * cols(dy),
            _ => 0,
        })
        .sum()
    }

    #[test]
    fn bf16_casts_each_operand_once_after_it_is_written() {
        let plan = StepPlan::training(&graph(&[32], 0.9), 16, GpuDtype::Bf16).unwrap();
        let casts: Vec<(Buf, Buf)> = plan
            .ops
            .iter()
            .filter_map(|o| match *o {
                StepOp::CastBf16 { src, dst, .. } => Some((src, dst)),
                _ => None,
            })
            .collect();
        // input, w0, h, w1 (forward); dlogits, dh' (backward): each once.
        assert_eq!(casts.len(), 6, "{:?}", plan.ops);
        let mut srcs: Vec<Buf> = casts.iter().map(|c| c.0).collect();
        srcs.sort();
        srcs.dedup();
        assert_eq!(srcs.len(), 6);
        for op in &plan.ops {
            if let StepOp::Gemm { a, b, precision, .. } = *op {
                let want = if precision == Precision::Bf16 { Elem::Bf16 } else { Elem::F32 };
                assert_eq!(plan.buffers[a].elem, want);
                assert_eq!(plan.buffers[b].elem, want);
            }
        }
        // Bias gradients stay f32.
        assert_eq!(
            plan.ops
                .iter()
                .filter(|o| matches!(o, StepOp::Gemm { precision: Precision::F32, .. }))
                .count(),
            2
        );
    }

    #[test]
    fn the_plan_does_the_compiled_steps_work() {
        let g = graph(&[64, 32], 0.9);
        let config = ArrayConfig::new(16, 16, Dtype::Bf16);
        for batch in [1, 32, 100] {
            let plan = StepPlan::training(&g, batch, GpuDtype::F32).unwrap();
            let step = compile_training(&g, &config, batch as u32).unwrap();
            assert_eq!(plan.macs(), step.macs(), "batch {batch}");
        }
        let eval = StepPlan::inference(&g, 50, GpuDtype::Bf16).unwrap();
        assert_eq!(eval.macs(), 50 * (64 * 64 + 64 * 32 + 32 * 10));
        assert!(!eval
            .ops
            .iter()
            .any(|o| matches!(o, StepOp::Sgd { .. } | StepOp::SgdMomentum { .. })));
        assert_eq!(StepPlan::training(&g, 0, GpuDtype::F32).unwrap_err(), PlanError::Batch(0));
    }

    /// A column-major `C = op(A) op(B)` loop with BLAS's argument meanings.
    fn blas_loop(p: &BlasGemm, a: &[f64], b: &[f64]) -> Vec<f64> {
        let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
        let at = |i: usize, l: usize| {
            if p.transa {
                a[l + i * p.lda as usize]
            } else {
                a[i + l * p.lda as usize]
            }
        };
        let bt = |l: usize, j: usize| {
            if p.transb {
                b[j + l * p.ldb as usize]
            } else {
                b[l + j * p.ldb as usize]
            }
        };
        let mut c = vec![0.0; p.ldc as usize * n];
        for j in 0..n {
            for i in 0..m {
                c[i + j * p.ldc as usize] = (0..k).map(|l| at(i, l) * bt(l, j)).sum();
            }
        }
        c
    }

    #[test]
    fn row_major_products_map_onto_column_major_blas_arguments() {
        let mut rng = systole_core::params::SplitMix64(7);
        for (m, n, k) in [(3, 5, 4), (1, 7, 9), (6, 1, 2), (4, 4, 1)] {
            for trans_a in [false, true] {
                for trans_b in [false, true] {
                    let g = RowMajorGemm { m, n, k, trans_a, trans_b };
                    let a: Vec<f64> = (0..m * k).map(|_| rng.next_f64() - 0.5).collect();
                    let b: Vec<f64> = (0..k * n).map(|_| rng.next_f64() - 0.5).collect();
                    // Element (i, l) of op(A), (l, j) of op(B), from the stored row-major arrays.
                    let opa =
                        |i: usize, l: usize| if trans_a { a[l * m + i] } else { a[i * k + l] };
                    let opb =
                        |l: usize, j: usize| if trans_b { b[j * k + l] } else { b[l * n + j] };
                    let c = blas_loop(&g.blas(), &b, &a);
                    for i in 0..m {
                        for j in 0..n {
                            let want: f64 = (0..k).map(|l| opa(i, l) * opb(l, j)).sum();
                            let got = c[i * n + j];
                            assert!(
                                (got - want).abs() < 1e-12,
                                "{g:?} at ({i}, {j}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
