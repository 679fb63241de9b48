//! The CPU reference executor: a [`Graph`] interpreted op by op with plain loops. It is the
//! oracle of the compiled path and of the GPU, in one of three numerics:
//!
//! * [`Plain<f32>`]: the f32 reference (natural summation order, IEEE f32 everywhere);
//! * [`Plain<f64>`]: the same in f64, for gradient checks against finite differences;
//! * [`Accel`]: the accelerator's rounding points and summation order (bf16 matmul operands,
//!   chunked f32 sums, flushed subnormals, the vector unit's SGD), which the compiled training
//!   step on any machine must equal bit for bit.
//!
//! The image ops (`conv`: patches, reshapes, pooling and their gradients) move values
//! and, where they sum (`Col2im`, the pooling gradients, average pooling), add in `T` in a
//! fixed order, under every numerics.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;
use core::marker::PhantomData;

use crate::config::ArrayConfig;
use crate::graph::{Graph, Op, Sgd, TensorKind};
use crate::numerics::{Arith, Bf16, BF16};
use crate::params::Params;
use crate::{conv, reference, tiler};

pub use crate::numerics::Float;

/// Where and how the reference rounds.
pub trait Numerics {
    type T: Float;
    /// `a (m x k) x b (k x n)`, both row-major.
    fn matmul(&self, a: &[Self::T], b: &[Self::T], m: usize, k: usize, n: usize) -> Vec<Self::T>;
    fn bias_add(&self, x: Self::T, b: Self::T) -> Self::T;
    fn relu(&self, x: Self::T) -> Self::T;
    /// `y <= 0 ? 0 : dy` (NaN `y` passes the gradient, as PyTorch).
    fn relu_grad(&self, dy: Self::T, y: Self::T) -> Self::T;
    /// Column sums of a `rows x cols` matrix.
    fn bias_grad(&self, dy: &[Self::T], rows: usize, cols: usize) -> Vec<Self::T>;
    /// One SGD step on one element: returns the new parameter (and updates `v`).
    fn sgd(&self, p: Self::T, g: Self::T, v: Option<&mut Self::T>, sgd: &Sgd) -> Self::T;
    /// `a + b` where the image ops sum (`Col2im`, the pooling gradients, average pooling).
    fn add(&self, a: Self::T, b: Self::T) -> Self::T;
    /// A value as the machine compares it (max pooling).
    fn compared(&self, x: Self::T) -> Self::T;
    /// A window's sum of `g` made its mean, or an output's gradient each tap's share
    /// (average pooling and its gradient).
    fn mean(&self, sum: Self::T, g: &conv::PoolGeometry) -> Self::T;
}

/// Plain IEEE arithmetic in `T`, natural order.
#[derive(Clone, Copy, Debug, Default)]
pub struct Plain<T>(PhantomData<T>);

impl<T> Plain<T> {
    pub const fn new() -> Self {
        Plain(PhantomData)
    }
}

impl<T: Float> Numerics for Plain<T> {
    type T = T;
    fn matmul(&self, a: &[T], b: &[T], m: usize, k: usize, n: usize) -> Vec<T> {
        // Row by row of B, so the inner loop runs along contiguous rows (and vectorizes); each
        // element still sums its products in the order of k from zero, so the bits are those
        // of the plain dot products.
        let mut c = vec![T::default(); m * n];
        for (c_row, a_row) in c.chunks_exact_mut(n.max(1)).zip(a.chunks_exact(k.max(1))).take(m) {
            for (&a_ik, b_row) in a_row.iter().zip(b.chunks_exact(n.max(1))) {
                for (c_ij, &b_kj) in c_row.iter_mut().zip(b_row) {
                    *c_ij = *c_ij + a_ik * b_kj;
                }
            }
        }
        c
    }
    fn bias_add(&self, x: T, b: T) -> T {
        x + b
    }
    fn relu(&self, x: T) -> T {
        if x <= T::default() {
            T::default()
        } else {
            x
        }
    }
    fn relu_grad(&self, dy: T, y: T) -> T {
        if y <= T::default() {
            T::default()
        } else {
            dy
        }
    }
    fn bias_grad(&self, dy: &[T], rows: usize, cols: usize) -> Vec<T> {
        (0..cols).map(|j| (0..rows).fold(T::default(), |s, i| s + dy[i * cols + j])).collect()
    }
    fn sgd(&self, p: T, g: T, v: Option<&mut T>, sgd: &Sgd) -> T {
        let g = g + T::from_f64(sgd.weight_decay as f64) * p;
        match v {
            Some(v) => {
                *v = T::from_f64(sgd.momentum as f64) * *v + g;
                p - T::from_f64(sgd.lr as f64) * *v
            }
            None => p - T::from_f64(sgd.lr as f64) * g,
        }
    }
    fn add(&self, a: T, b: T) -> T {
        a + b
    }
    fn compared(&self, x: T) -> T {
        x
    }
    fn mean(&self, sum: T, g: &conv::PoolGeometry) -> T {
        sum / T::from_f64(g.size() as f64)
    }
}

/// The accelerator's numerics for BF16 mixed-precision training on `config`.
#[derive(Clone, Copy, Debug)]
pub struct Accel {
    pub config: ArrayConfig,
}

/// A stored f32 word as the datapath reads it (subnormals and -0 as +0).
#[inline]
fn rd(x: f32) -> f32 {
    BF16::acc_from_bits(x.to_bits())
}

/// A datapath value as memory stores it (NaN canonical).
#[inline]
fn wr(x: f32) -> f32 {
    f32::from_bits(BF16::acc_to_bits(x))
}

pub use crate::numerics::bf16::to_operand;

impl Numerics for Accel {
    type T = f32;
    fn matmul(&self, a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let a: Vec<Bf16> = a.iter().map(|&x| to_operand(x)).collect();
        let b: Vec<Bf16> = b.iter().map(|&x| to_operand(x)).collect();
        let chunk = tiler::k_chunk(&self.config, k as u32) as usize;
        reference::gemm::<BF16>(&a, &b, m, k, n, chunk).into_iter().map(f32::from_bits).collect()
    }
    fn bias_add(&self, x: f32, b: f32) -> f32 {
        wr(BF16::add(rd(x), rd(b)))
    }
    fn relu(&self, x: f32) -> f32 {
        let x = rd(x);
        wr(if BF16::le_zero(x) { 0.0 } else { x })
    }
    fn relu_grad(&self, dy: f32, y: f32) -> f32 {
        wr(if BF16::le_zero(rd(y)) { 0.0 } else { rd(dy) })
    }
    fn bias_grad(&self, dy: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        // The compiler sums over the batch with a ones-vector matmul on the array.
        self.matmul(&vec![1.0; rows], dy, 1, rows, cols)
    }
    fn sgd(&self, p: f32, g: f32, v: Option<&mut f32>, sgd: &Sgd) -> f32 {
        // The vector-unit sequence of the update the compiler fuses into a parameter gradient's
        // epilogue, op for op (tiler::Update): the gradient becomes the new velocity in place.
        let k = |x: f32| BF16::acc_from_bits(x.to_bits());
        let mut g = rd(g);
        if sgd.weight_decay != 0.0 {
            g = wr(BF16::add(g, BF16::mul_acc(k(sgd.weight_decay), rd(p))));
        }
        if let Some(v) = v {
            *v = wr(BF16::add(rd(g), BF16::mul_acc(k(sgd.momentum), rd(*v))));
            g = rd(*v);
        }
        wr(BF16::add(rd(p), BF16::mul_acc(k(-sgd.lr), g)))
    }
    fn add(&self, a: f32, b: f32) -> f32 {
        // The vector unit's `Axpy` by one (compile::col2im), whose product is exact.
        wr(BF16::add(rd(a), rd(b)))
    }
    fn compared(&self, x: f32) -> f32 {
        wr(rd(x))
    }
    fn mean(&self, sum: f32, g: &conv::PoolGeometry) -> f32 {
        // The vector unit's `Scale` by the window's reciprocal (compile::pool).
        wr(BF16::mul_acc(rd(g.mean_factor()), rd(sum)))
    }
}

/// Loss and correct predictions of one batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchOutcome {
    /// Mean softmax cross-entropy over the batch.
    pub loss: f64,
    /// Rows whose arg-max logit is the label.
    pub correct: u32,
}

/// Softmax cross-entropy of `rows` logits rows against `labels`, its gradient
/// `(softmax - onehot) / rows`, and the correct count. Computed in f64 whatever `T` is; shared
/// by every executor so the host side of a compiled step is the reference's, exactly.
pub fn softmax_cross_entropy<T: Float>(
    logits: &[T],
    labels: &[u16],
    classes: usize,
) -> (BatchOutcome, Vec<T>) {
    let rows = labels.len();
    let mut grad = vec![T::default(); rows * classes];
    let mut loss = 0.0f64;
    let mut correct = 0u32;
    for (i, &label) in labels.iter().enumerate() {
        let row = &logits[i * classes..(i + 1) * classes];
        let max = row.iter().map(|x| x.to_f64()).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|x| libm::exp(x.to_f64() - max)).sum();
        let arg = argmax(row);
        correct += (arg == label as usize) as u32;
        for (j, x) in row.iter().enumerate() {
            let p = libm::exp(x.to_f64() - max) / sum;
            let target = (j == label as usize) as u8 as f64;
            grad[i * classes + j] = T::from_f64((p - target) / rows as f64);
        }
        loss -= row[label as usize].to_f64() - max - libm::log(sum);
    }
    (BatchOutcome { loss: loss / rows as f64, correct }, grad)
}

/// Index of the largest value, the first on ties; NaN never wins.
pub fn argmax<T: Float>(row: &[T]) -> usize {
    let mut best = 0;
    for (j, x) in row.iter().enumerate() {
        if x.to_f64() > row[best].to_f64() || row[best].to_f64().is_nan() {
            best = j;
        }
    }
    best
}

/// A graph, its numerics, and the values of every tensor.
pub struct Executor<N: Numerics> {
    pub graph: Graph,
    pub numerics: N,
    /// One buffer per tensor; parameters and velocities persist across steps.
    pub values: Vec<Vec<N::T>>,
}

impl<N: Numerics> Executor<N> {
    /// An executor with the given parameters and zeroed velocities.
    pub fn new(graph: Graph, numerics: N, params: &Params) -> Self {
        let mut values: Vec<Vec<N::T>> = vec![Vec::new(); graph.tensors.len()];
        for (l, &(w, b)) in graph.params.iter().enumerate() {
            values[w as usize] =
                params.layers[l].weight.iter().map(|&x| N::T::from_f64(x as f64)).collect();
            values[b as usize] =
                params.layers[l].bias.iter().map(|&x| N::T::from_f64(x as f64)).collect();
        }
        for (t, info) in graph.tensors.iter().enumerate() {
            if let TensorKind::Velocity(of) = info.kind {
                values[t] = vec![N::T::default(); values[of as usize].len()];
            }
        }
        Executor { graph, numerics, values }
    }

    /// The current parameters, as f32.
    pub fn params(&self) -> Params {
        let mut p = Params::zeros(&self.graph);
        for (l, &(w, b)) in self.graph.params.iter().enumerate() {
            p.layers[l].weight =
                self.values[w as usize].iter().map(|x| x.to_f64() as f32).collect();
            p.layers[l].bias = self.values[b as usize].iter().map(|x| x.to_f64() as f32).collect();
        }
        p
    }

    /// Runs the forward ops on a batch (`labels.len()` rows of `x`); returns loss and accuracy.
    pub fn forward(&mut self, x: &[N::T], labels: &[u16]) -> BatchOutcome {
        let batch = labels.len();
        self.values[self.graph.input as usize] = x.to_vec();
        let classes = self.graph.classes() as usize;
        let mut outcome = BatchOutcome { loss: 0.0, correct: 0 };
        for op in self.graph.forward.clone() {
            match op {
                Op::Dense { x, w, y } => {
                    let (m, k, n) = (self.rows(x, batch), self.cols(x), self.cols(y));
                    self.values[y as usize] = self.numerics.matmul(
                        &self.values[x as usize],
                        &self.values[w as usize],
                        m,
                        k,
                        n,
                    );
                }
                Op::BiasAdd { x, b, y } => {
                    let n = self.cols(y);
                    let out = self.values[x as usize]
                        .iter()
                        .enumerate()
                        .map(|(i, &v)| self.numerics.bias_add(v, self.values[b as usize][i % n]))
                        .collect();
                    self.values[y as usize] = out;
                }
                Op::Relu { x, y } => {
                    let out =
                        self.values[x as usize].iter().map(|&v| self.numerics.relu(v)).collect();
                    self.values[y as usize] = out;
                }
                Op::SoftmaxCrossEntropy { logits, .. } => {
                    let (o, _) =
                        softmax_cross_entropy(&self.values[logits as usize], labels, classes);
                    outcome = o;
                }
                Op::Im2col { x, y, geom } => {
                    self.values[y as usize] = conv::im2col(&geom, &self.values[x as usize], batch);
                }
                Op::Reshape { x, y } => self.values[y as usize] = self.values[x as usize].clone(),
                Op::MaxPool { x, y, geom } => {
                    self.values[y as usize] = conv::max_pool(&geom, &self.compared(x), batch).0;
                }
                Op::AvgPool { x, y, geom } => {
                    let (add, mean) =
                        (|a, b| self.numerics.add(a, b), |s| self.numerics.mean(s, &geom));
                    self.values[y as usize] =
                        conv::avg_pool_with(&geom, &self.values[x as usize], batch, add, mean);
                }
                _ => {}
            }
        }
        outcome
    }

    /// Runs the backward ops after [`forward`](Self::forward) on the same labels.
    pub fn backward(&mut self, labels: &[u16]) {
        let batch = labels.len();
        let classes = self.graph.classes() as usize;
        for op in self.graph.backward.clone() {
            match op {
                Op::SoftmaxCrossEntropyGrad { logits, dlogits, .. } => {
                    let (_, g) =
                        softmax_cross_entropy(&self.values[logits as usize], labels, classes);
                    self.values[dlogits as usize] = g;
                }
                Op::DenseGradWeight { x, dy, dw } => {
                    let (m, k, n) = (self.rows(x, batch), self.cols(x), self.cols(dy));
                    let xt = transpose(&self.values[x as usize], m, k);
                    self.values[dw as usize] =
                        self.numerics.matmul(&xt, &self.values[dy as usize], k, m, n);
                }
                Op::DenseGradInput { dy, w, dx } => {
                    let (m, n, k) = (self.rows(dy, batch), self.cols(dy), self.cols(dx));
                    let wt = transpose(&self.values[w as usize], k, n);
                    self.values[dx as usize] =
                        self.numerics.matmul(&self.values[dy as usize], &wt, m, n, k);
                }
                Op::BiasGrad { dy, db } => {
                    let (m, n) = (self.rows(dy, batch), self.cols(dy));
                    self.values[db as usize] =
                        self.numerics.bias_grad(&self.values[dy as usize], m, n);
                }
                Op::ReluGrad { dy, y, dx } => {
                    let out = self.values[dy as usize]
                        .iter()
                        .zip(&self.values[y as usize])
                        .map(|(&g, &v)| self.numerics.relu_grad(g, v))
                        .collect();
                    self.values[dx as usize] = out;
                }
                Op::Col2im { dy, dx, geom } => {
                    let add = |a, b| self.numerics.add(a, b);
                    self.values[dx as usize] =
                        conv::col2im_with(&geom, &self.values[dy as usize], batch, add);
                }
                Op::Reshape { x, y } => self.values[y as usize] = self.values[x as usize].clone(),
                Op::MaxPoolGrad { dy, x, dx, geom } => {
                    let (_, at) = conv::max_pool(&geom, &self.compared(x), batch);
                    let add = |a, b| self.numerics.add(a, b);
                    self.values[dx as usize] =
                        conv::max_pool_grad_with(&geom, &self.values[dy as usize], &at, batch, add);
                }
                Op::AvgPoolGrad { dy, dx, geom } => {
                    let (add, mean) =
                        (|a, b| self.numerics.add(a, b), |s| self.numerics.mean(s, &geom));
                    self.values[dx as usize] = conv::avg_pool_grad_with(
                        &geom,
                        &self.values[dy as usize],
                        batch,
                        add,
                        mean,
                    );
                }
                _ => {}
            }
        }
    }

    /// Applies the update ops.
    pub fn update(&mut self) {
        let Some(sgd) = self.graph.sgd else { return };
        for op in self.graph.update.clone() {
            if let Op::Sgd { param, grad, velocity } = op {
                let g = core::mem::take(&mut self.values[grad as usize]);
                let mut v = velocity.map(|v| core::mem::take(&mut self.values[v as usize]));
                for (i, p) in self.values[param as usize].iter_mut().enumerate() {
                    *p = self.numerics.sgd(*p, g[i], v.as_mut().map(|v| &mut v[i]), &sgd);
                }
                self.values[grad as usize] = g;
                if let (Some(t), Some(v)) = (velocity, v) {
                    self.values[t as usize] = v;
                }
            }
        }
    }

    /// One training step: forward, backward, update.
    pub fn step(&mut self, x: &[N::T], labels: &[u16]) -> BatchOutcome {
        let outcome = self.forward(x, labels);
        self.backward(labels);
        self.update();
        outcome
    }

    /// The logits of a batch of `rows` inputs (labels not needed).
    pub fn logits(&mut self, x: &[N::T], rows: usize) -> Vec<N::T> {
        let labels = vec![0u16; rows];
        self.forward(x, &labels);
        self.values[self.graph.logits as usize].clone()
    }

    /// Tensor `t`'s values as the numerics compare them.
    fn compared(&self, t: crate::graph::TensorId) -> Vec<N::T> {
        self.values[t as usize].iter().map(|&v| self.numerics.compared(v)).collect()
    }

    fn cols(&self, t: crate::graph::TensorId) -> usize {
        self.graph.info(t).cols as usize
    }

    fn rows(&self, t: crate::graph::TensorId, batch: usize) -> usize {
        self.graph.info(t).rows(batch as u32) as usize
    }
}

/// Row-major `rows x cols` -> `cols x rows`.
pub fn transpose<T: Copy>(m: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut t = Vec::with_capacity(m.len());
    for j in 0..cols {
        for i in 0..rows {
            t.push(m[i * cols + j]);
        }
    }
    t
}
