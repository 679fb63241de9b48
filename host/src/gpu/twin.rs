//! The CPU twin of the GPU: a [`StepPlan`] interpreted with the kernels' twins and a plain
//! column-major BLAS loop in cuBLAS's place. It is the GPU path with only the launches
//! swapped, so its agreement with the reference executor tests the lowering (buffers,
//! transposes, casts, order) on any machine; `systole bench` times it as the CPU twin row.

use systole_core::exec::BatchOutcome;
use systole_core::graph::{Graph, TensorKind};
use systole_core::params::Params;

use super::plan::{BlasGemm, Elem, Precision, Role, StepOp, StepPlan};
use super::{image_kernels, kernels};
use super::{labels_for_device, outcome, GpuDtype, GpuError};

/// A buffer's contents on the host.
#[derive(Clone, Debug, PartialEq)]
pub enum HostBuf {
    F32(Vec<f32>),
    Bf16(Vec<u16>),
    I32(Vec<i32>),
}

impl HostBuf {
    fn zeros(elem: Elem, len: usize) -> HostBuf {
        match elem {
            Elem::F32 => HostBuf::F32(vec![0.0; len]),
            Elem::Bf16 => HostBuf::Bf16(vec![0; len]),
            Elem::I32 => HostBuf::I32(vec![0; len]),
        }
    }

    fn f32(&self) -> &[f32] {
        match self {
            HostBuf::F32(v) => v,
            other => panic!("plan error: expected an f32 buffer, found {other:?}"),
        }
    }

    fn f32_mut(&mut self) -> &mut Vec<f32> {
        match self {
            HostBuf::F32(v) => v,
            other => panic!("plan error: expected an f32 buffer, found {other:?}"),
        }
    }

    fn i32(&self) -> &[i32] {
        match self {
            HostBuf::I32(v) => v,
            other => panic!("plan error: expected an i32 buffer, found {other:?}"),
        }
    }

    /// A matrix operand as f32 (bf16 widened exactly).
    fn operand(&self) -> std::borrow::Cow<'_, [f32]> {
        match self {
            HostBuf::F32(v) => std::borrow::Cow::Borrowed(v),
            HostBuf::Bf16(v) => std::borrow::Cow::Owned(
                v.iter().map(|&b| f32::from_bits((b as u32) << 16)).collect(),
            ),
            HostBuf::I32(_) => panic!("plan error: an i32 buffer as a matrix operand"),
        }
    }
}

/// What cuBLAS `sgemm` (and `GemmEx` on widened bf16) computes with alpha 1 and beta 0:
/// column-major `C = op(A) op(B)` with BLAS's argument meanings, each sum in f32 in k order.
/// (cuBLAS's own order is its choice; results agree within f32 rounding, not bit for bit.)
pub fn blas_gemm(p: &BlasGemm, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    let (lda, ldb, ldc) = (p.lda as usize, p.ldb as usize, p.ldc as usize);
    let mut col = vec![0.0f32; k];
    let mut row = vec![0.0f32; k];
    for j in 0..n {
        for (l, v) in col.iter_mut().enumerate() {
            *v = if p.transb { b[j + l * ldb] } else { b[l + j * ldb] };
        }
        for i in 0..m {
            for (l, v) in row.iter_mut().enumerate() {
                *v = if p.transa { a[l + i * lda] } else { a[i + l * lda] };
            }
            let mut s = 0.0f32;
            for l in 0..k {
                s += row[l] * col[l];
            }
            c[i + j * ldc] = s;
        }
    }
}

/// Runs every op of `plan` over `bufs` (one per plan buffer, persistent ones included).
pub fn run_plan(plan: &StepPlan, bufs: &mut [HostBuf]) {
    let sgd = plan.sgd;
    for op in &plan.ops {
        match *op {
            StepOp::CastBf16 { src, dst, .. } => {
                let mut out = std::mem::replace(&mut bufs[dst], HostBuf::Bf16(Vec::new()));
                if let HostBuf::Bf16(out) = &mut out {
                    kernels::cast_bf16(bufs[src].f32(), out);
                }
                bufs[dst] = out;
            }
            StepOp::Gemm { a, b, c, shape, precision } => {
                let blas = shape.blas();
                let mut out = std::mem::take(bufs[c].f32_mut());
                debug_assert_eq!(
                    precision == Precision::Bf16,
                    matches!(bufs[a], HostBuf::Bf16(_)),
                    "operand precision"
                );
                // cuBLAS's first operand is the row-major B, its second the row-major A.
                blas_gemm(&blas, &bufs[b].operand(), &bufs[a].operand(), &mut out);
                *bufs[c].f32_mut() = out;
            }
            StepOp::BiasAct { x, bias, y, rows, cols, relu } => {
                let mut out = std::mem::take(bufs[y].f32_mut());
                kernels::bias_act(bufs[x].f32(), bufs[bias].f32(), &mut out, rows, cols, relu);
                *bufs[y].f32_mut() = out;
            }
            StepOp::Relu { x, y, .. } => {
                let mut out = std::mem::take(bufs[y].f32_mut());
                kernels::relu(bufs[x].f32(), &mut out);
                *bufs[y].f32_mut() = out;
            }
            StepOp::SoftmaxXent { logits, labels, loss, correct, dlogits, rows, classes } => {
                let mut l = std::mem::take(bufs[loss].f32_mut());
                let mut d = std::mem::take(bufs[dlogits].f32_mut());
                let mut hits = match std::mem::replace(&mut bufs[correct], HostBuf::I32(Vec::new()))
                {
                    HostBuf::I32(v) => v,
                    other => panic!("plan error: correct is {other:?}"),
                };
                kernels::softmax_xent(
                    bufs[logits].f32(),
                    bufs[labels].i32(),
                    &mut l,
                    &mut hits,
                    &mut d,
                    rows,
                    classes,
                );
                *bufs[loss].f32_mut() = l;
                *bufs[dlogits].f32_mut() = d;
                bufs[correct] = HostBuf::I32(hits);
            }
            StepOp::ReluGrad { dy, y, dx, .. } => {
                let mut out = std::mem::take(bufs[dx].f32_mut());
                kernels::relu_grad(bufs[dy].f32(), bufs[y].f32(), &mut out);
                *bufs[dx].f32_mut() = out;
            }
            StepOp::SgdMomentum { param, grad, velocity, .. } => {
                let s = sgd.expect("a training plan has SGD settings");
                let mut p = std::mem::take(bufs[param].f32_mut());
                let mut v = std::mem::take(bufs[velocity].f32_mut());
                kernels::sgd_momentum(
                    &mut p,
                    bufs[grad].f32(),
                    &mut v,
                    s.lr,
                    s.momentum,
                    s.weight_decay,
                );
                *bufs[param].f32_mut() = p;
                *bufs[velocity].f32_mut() = v;
            }
            StepOp::Sgd { param, grad, .. } => {
                let s = sgd.expect("a training plan has SGD settings");
                let mut p = std::mem::take(bufs[param].f32_mut());
                kernels::sgd(&mut p, bufs[grad].f32(), s.lr, s.weight_decay);
                *bufs[param].f32_mut() = p;
            }
            StepOp::Im2col { x, cols, n, geom } => {
                let mut out = std::mem::take(bufs[cols].f32_mut());
                image_kernels::im2col(&geom, n, bufs[x].f32(), &mut out);
                *bufs[cols].f32_mut() = out;
            }
            StepOp::Col2im { cols, x, n, geom } => {
                let mut out = std::mem::take(bufs[x].f32_mut());
                image_kernels::col2im(&geom, n, bufs[cols].f32(), &mut out);
                *bufs[x].f32_mut() = out;
            }
            StepOp::MaxPool { x, y, n, geom } => {
                let mut out = std::mem::take(bufs[y].f32_mut());
                image_kernels::max_pool(&geom, n, bufs[x].f32(), &mut out);
                *bufs[y].f32_mut() = out;
            }
            StepOp::MaxPoolGrad { dy, x, dx, n, geom } => {
                let mut out = std::mem::take(bufs[dx].f32_mut());
                image_kernels::max_pool_grad(&geom, n, bufs[dy].f32(), bufs[x].f32(), &mut out);
                *bufs[dx].f32_mut() = out;
            }
            StepOp::AvgPool { x, y, n, geom } => {
                let mut out = std::mem::take(bufs[y].f32_mut());
                image_kernels::avg_pool(&geom, n, bufs[x].f32(), &mut out);
                *bufs[y].f32_mut() = out;
            }
            StepOp::AvgPoolGrad { dy, dx, n, geom } => {
                let mut out = std::mem::take(bufs[dx].f32_mut());
                image_kernels::avg_pool_grad(&geom, n, bufs[dy].f32(), &mut out);
                *bufs[dx].f32_mut() = out;
            }
        }
    }
}

/// Training on the CPU twin, with the interface of [`super::train::GpuTrainer`].
pub struct TwinTrainer {
    pub graph: Graph,
    pub dtype: GpuDtype,
    /// Parameters and velocities by tensor id (empty for other tensors).
    persistent: Vec<Vec<f32>>,
    /// Plans and their scratch buffers, by (batch, training).
    plans: Vec<(StepPlan, Vec<HostBuf>)>,
}

impl TwinTrainer {
    pub fn new(graph: &Graph, params: &Params, dtype: GpuDtype) -> TwinTrainer {
        let mut persistent = vec![Vec::new(); graph.tensors.len()];
        for (l, &(w, b)) in graph.params.iter().enumerate() {
            persistent[w as usize] = params.layers[l].weight.clone();
            persistent[b as usize] = params.layers[l].bias.clone();
        }
        for (t, info) in graph.tensors.iter().enumerate() {
            if let TensorKind::Velocity(_) = info.kind {
                persistent[t] = vec![0.0; (info.rows(1) * info.cols) as usize];
            }
        }
        TwinTrainer { graph: graph.clone(), dtype, persistent, plans: Vec::new() }
    }

    fn plan_for(&mut self, batch: usize, training: bool) -> Result<usize, GpuError> {
        if let Some(i) =
            self.plans.iter().position(|(p, _)| p.batch == batch && p.training == training)
        {
            return Ok(i);
        }
        let plan = if training {
            StepPlan::training(&self.graph, batch, self.dtype)?
        } else {
            StepPlan::inference(&self.graph, batch, self.dtype)?
        };
        let bufs = plan
            .buffers
            .iter()
            .map(|b| match b.role {
                Role::Ones => HostBuf::F32(vec![1.0; b.len]),
                _ => HostBuf::zeros(b.elem, b.len),
            })
            .collect();
        self.plans.push((plan, bufs));
        Ok(self.plans.len() - 1)
    }

    fn run(&mut self, x: &[f32], labels: &[u16], training: bool) -> Result<usize, GpuError> {
        let classes = self.graph.classes() as usize;
        let inputs = self.graph.inputs() as usize;
        if x.len() != labels.len() * inputs || labels.is_empty() {
            return Err(GpuError::Input(format!(
                "a batch of {} labels needs {} features, got {}",
                labels.len(),
                labels.len() * inputs,
                x.len()
            )));
        }
        let labels = labels_for_device(labels, classes)?;
        let i = self.plan_for(labels.len(), training)?;
        let (plan, bufs) = &mut self.plans[i];
        bufs[plan.input] = HostBuf::F32(x.to_vec());
        bufs[plan.labels] = HostBuf::I32(labels);
        for (b, buffer) in plan.buffers.iter().enumerate() {
            if let Role::Persistent(t) = buffer.role {
                bufs[b] = HostBuf::F32(std::mem::take(&mut self.persistent[t as usize]));
            }
        }
        run_plan(plan, bufs);
        for (b, buffer) in plan.buffers.iter().enumerate() {
            if let Role::Persistent(t) = buffer.role {
                self.persistent[t as usize] = std::mem::take(bufs[b].f32_mut());
            }
        }
        Ok(i)
    }

    fn outcome_of(&self, i: usize) -> BatchOutcome {
        let (plan, bufs) = &self.plans[i];
        outcome(bufs[plan.loss].f32(), bufs[plan.correct].i32())
    }

    /// One training step: forward, backward, SGD.
    pub fn step(&mut self, x: &[f32], labels: &[u16]) -> Result<BatchOutcome, GpuError> {
        let i = self.run(x, labels, true)?;
        Ok(self.outcome_of(i))
    }

    /// Loss and hits of a batch without training on it.
    pub fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> Result<BatchOutcome, GpuError> {
        let i = self.run(x, labels, false)?;
        Ok(self.outcome_of(i))
    }

    /// The logits of the last batch run.
    #[cfg(test)]
    pub fn last_logits(&self) -> Vec<f32> {
        self.plans.last().map(|(plan, bufs)| bufs[plan.logits].f32().to_vec()).unwrap_or_default()
    }

    pub fn params(&self) -> Params {
        let mut p = Params::zeros(&self.graph);
        for (l, &(w, b)) in self.graph.params.iter().enumerate() {
            p.layers[l].weight = self.persistent[w as usize].clone();
            p.layers[l].bias = self.persistent[b as usize].clone();
        }
        p
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use systole_core::check::Tolerance;
    use systole_core::exec::{Accel, Executor, Plain};
    use systole_core::graph::{MlpSpec, Sgd};
    use systole_core::params::SplitMix64;
    use systole_core::{ArrayConfig, Dtype};

    fn setup(hidden: &[u32], sgd: Sgd, seed: u64) -> (Graph, Params) {
        let spec = MlpSpec { inputs: 20, hidden: hidden.iter().copied().collect(), classes: 5 };
        (Graph::training(&spec, sgd).unwrap(), Params::init(&spec, seed))
    }

    fn batch(rng: &mut SplitMix64, rows: usize) -> (Vec<f32>, Vec<u16>) {
        let x = (0..rows * 20).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let y = (0..rows).map(|_| rng.below(5) as u16).collect();
        (x, y)
    }

    /// `|got - want| <= abs + rel |want|` element by element: core's one comparison by
    /// tolerance (STYLE 1).
    fn assert_close(what: &str, got: &[f32], want: &[f32], abs: f64, rel: f64) {
        systole_core::check::assert_close(what, want, got, Tolerance { abs, rel });
    }

    #[test]
    fn blas_loop_equals_the_reference_matmul_for_every_transpose() {
        let p = Plain::<f32>::new();
        use systole_core::exec::{transpose, Numerics};
        let mut rng = SplitMix64(11);
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|_| rng.next_f64() as f32 - 0.5).collect();
        let b: Vec<f32> = (0..k * n).map(|_| rng.next_f64() as f32 - 0.5).collect();
        let want = p.matmul(&a, &b, m, k, n);
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let sa = if trans_a { transpose(&a, m, k) } else { a.clone() };
            let sb = if trans_b { transpose(&b, k, n) } else { b.clone() };
            let shape = super::super::plan::RowMajorGemm { m, n, k, trans_a, trans_b };
            let mut c = vec![0.0; m * n];
            blas_gemm(&shape.blas(), &sb, &sa, &mut c);
            // Same products, same k order: bit for bit.
            assert_eq!(c, want, "trans_a {trans_a}, trans_b {trans_b}");
        }
    }

    #[test]
    fn f32_twin_trains_like_the_reference_executor() {
        for (hidden, sgd) in [
            (&[16][..], Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 }),
            (&[12, 8][..], Sgd { lr: 0.05, momentum: 0.0, weight_decay: 1e-3 }),
            (&[6][..], Sgd { lr: 0.2, momentum: 0.5, weight_decay: 0.01 }),
        ] {
            let (graph, params) = setup(hidden, sgd, 3);
            let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
            let mut reference = Executor::new(graph.clone(), Plain::<f32>::new(), &params);
            let mut rng = SplitMix64(4);
            for step in 0..20 {
                let rows = if step % 5 == 4 { 7 } else { 16 }; // a partial batch too
                let (x, y) = batch(&mut rng, rows);
                let got = twin.step(&x, &y).unwrap();
                let want = reference.step(&x, &y);
                assert!(
                    (got.loss - want.loss).abs() <= 1e-5 * (1.0 + want.loss),
                    "{hidden:?} step {step}: loss {} vs {}",
                    got.loss,
                    want.loss
                );
                assert_eq!(got.correct, want.correct, "{hidden:?} step {step}");
            }
            let (got, want) = (twin.params(), reference.params());
            for (l, (g, w)) in got.layers.iter().zip(&want.layers).enumerate() {
                assert_close(&format!("{hidden:?} weight {l}"), &g.weight, &w.weight, 1e-5, 1e-4);
                assert_close(&format!("{hidden:?} bias {l}"), &g.bias, &w.bias, 1e-5, 1e-4);
            }
            // Evaluation does not train.
            let (x, y) = batch(&mut rng, 9);
            let before = twin.params();
            let e = twin.evaluate(&x, &y).unwrap();
            assert_eq!(twin.params(), before);
            let r = reference.forward(&x, &y);
            assert!((e.loss - r.loss).abs() <= 1e-5 * (1.0 + r.loss));
            assert_close(
                "logits",
                &twin.last_logits(),
                &reference.values[graph.logits as usize],
                1e-5,
                1e-5,
            );
        }
    }

    #[test]
    fn bf16_twin_tracks_the_accelerator_numerics() {
        // The GPU's bf16 mode rounds the matmul operands as the accelerator does, so its loss
        // stays close to the accelerator reference's over a short run (not bit for bit: the
        // GPU sums in f32 without the array's chunking and flushing).
        let sgd = Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 };
        let (graph, params) = setup(&[16], sgd, 5);
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::Bf16);
        let mut accel = Executor::new(graph.clone(), Accel { config }, &params);
        let mut f32_twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
        let mut rng = SplitMix64(6);
        let mut gap_bf16_f32 = 0.0f64;
        for step in 0..30 {
            let (x, y) = batch(&mut rng, 16);
            let got = twin.step(&x, &y).unwrap();
            let want = accel.step(&x, &y);
            let f = f32_twin.step(&x, &y).unwrap();
            assert!(
                (got.loss - want.loss).abs() <= 0.02 * want.loss,
                "step {step}: bf16 twin {} vs accelerator {}",
                got.loss,
                want.loss
            );
            gap_bf16_f32 = gap_bf16_f32.max((got.loss - f.loss).abs());
        }
        assert!(gap_bf16_f32 > 0.0, "bf16 mode must actually round the operands");
    }

    /// A small CNN with every image op: a padded convolution, max pooling, a second
    /// convolution (whose input gradient is a col2im), average pooling and a flatten.
    pub(crate) fn cnn(sgd: Sgd, seed: u64) -> (Graph, Params) {
        use systole_core::layers::{Layer, Net, Shape};
        let conv = |in_channels, out_channels, kernel, padding| Layer::Conv2d {
            in_channels,
            out_channels,
            kernel,
            stride: 1,
            padding,
        };
        let layers = [
            conv(2, 3, 3, 1),
            Layer::Relu,
            Layer::MaxPool2d { kernel: 2, stride: 2 },
            conv(3, 4, 2, 0),
            Layer::Relu,
            Layer::AvgPool2d { kernel: 2, stride: 1 },
            Layer::Flatten,
            Layer::Dense { inputs: 4, outputs: 5 },
        ];
        let net = Net::new(Shape::Image { c: 2, h: 6, w: 6 }, &layers).unwrap();
        (Graph::network_training(&net, sgd).unwrap(), Params::init(&net, seed))
    }

    fn image_batch(rng: &mut SplitMix64, rows: usize) -> (Vec<f32>, Vec<u16>) {
        let x = (0..rows * 72).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let y = (0..rows).map(|_| rng.below(5) as u16).collect();
        (x, y)
    }

    /// The GPU plan of a CNN (im2col, the patches' GEMM, pooling, col2im, flatten as an
    /// alias), run by the twin, trains as the f32 reference executor does.
    #[test]
    fn f32_twin_trains_a_cnn_like_the_reference_executor() {
        for sgd in [
            Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 },
            Sgd { lr: 0.05, momentum: 0.0, weight_decay: 1e-3 },
        ] {
            let (graph, params) = cnn(sgd, 8);
            let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
            let mut reference = Executor::new(graph.clone(), Plain::<f32>::new(), &params);
            let mut rng = SplitMix64(9);
            for step in 0..12 {
                let rows = if step % 4 == 3 { 3 } else { 8 };
                let (x, y) = image_batch(&mut rng, rows);
                let got = twin.step(&x, &y).unwrap();
                let want = reference.step(&x, &y);
                assert!(
                    (got.loss - want.loss).abs() <= 1e-5 * (1.0 + want.loss),
                    "step {step}: loss {} vs {}",
                    got.loss,
                    want.loss
                );
                assert_eq!(got.correct, want.correct, "step {step}");
            }
            let (got, want) = (twin.params(), reference.params());
            for (l, (g, w)) in got.layers.iter().zip(&want.layers).enumerate() {
                assert_close(&format!("weight {l}"), &g.weight, &w.weight, 1e-5, 1e-4);
                assert_close(&format!("bias {l}"), &g.bias, &w.bias, 1e-5, 1e-4);
            }
            let (x, y) = image_batch(&mut rng, 5);
            twin.evaluate(&x, &y).unwrap();
            reference.forward(&x, &y);
            let logits = &reference.values[graph.logits as usize];
            assert_close("logits", &twin.last_logits(), logits, 1e-5, 1e-5);
        }
    }

    #[test]
    fn bf16_twin_tracks_the_accelerator_numerics_on_a_cnn() {
        let (graph, params) = cnn(Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 }, 10);
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::Bf16);
        let mut accel = Executor::new(graph.clone(), Accel { config }, &params);
        let mut rng = SplitMix64(11);
        for step in 0..15 {
            let (x, y) = image_batch(&mut rng, 8);
            let got = twin.step(&x, &y).unwrap();
            let want = accel.step(&x, &y);
            assert!(
                (got.loss - want.loss).abs() <= 0.02 * want.loss,
                "step {step}: bf16 twin {} vs accelerator {}",
                got.loss,
                want.loss
            );
        }
    }

    #[test]
    fn bad_batches_are_refused() {
        let (graph, params) = setup(&[4], Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0 }, 1);
        let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
        assert!(
            matches!(twin.step(&[0.0; 20], &[5]), Err(GpuError::Input(_))),
            "label 5 of 5 classes"
        );
        assert!(matches!(twin.step(&[0.0; 19], &[1]), Err(GpuError::Input(_))), "short features");
        assert!(matches!(twin.step(&[], &[]), Err(GpuError::Input(_))), "empty batch");
    }
}
