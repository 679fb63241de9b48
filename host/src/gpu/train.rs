//! Training on the GPU: [`GpuTrainer`] runs a graph's step plan on the device, one CUDA graph
//! per batch size, as a [`StepTrainer`] like the CPU twin ([`TwinTrainer`]), the f32 reference
//! and the accelerator, so the one training loop ([`crate::fit`]) runs it; [`run`] is `systole
//! train --device gpu` and `--compare`.

use anyhow::anyhow;
use cudarc::driver::{CudaGraph, CudaSlice, DevicePtr};
use serde::Serialize;
use systole_core::exec::BatchOutcome;
use systole_core::graph::{Graph, TensorKind};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::Params;
use systole_core::train::AccelTrainer;
use systole_core::ArrayConfig;

use crate::dataset::Samples;
use crate::fit::{
    gap, side_by_side, train_curves, AccelStepTrainer, CpuReference, Curve, CurvePoint,
    EpochBatches, StepTrainer, EVAL_ROWS,
};
use crate::outputs::{OutputId, Outputs};

use super::device::{driver_error, median, DeviceBuf, Gpu};
use super::plan::{Elem, Role, StepPlan};
use super::twin::TwinTrainer;
use super::{check_batch, outcome, GpuDtype, GpuError};

/// How a plan runs after its first, eager, run.
enum Replay {
    /// Not run yet.
    NotYet,
    /// Captured: one graph launch per step.
    Graph(CudaGraph),
    /// Capture failed (the driver's message): every op is launched each time.
    Eager(String),
}

/// One batch size's plan on the device: its buffers and, after its first (eager) run, the
/// CUDA graph that replays it.
struct DeviceStep {
    /// Declared first, so a graph is destroyed before the buffers its nodes point to.
    replay: Replay,
    plan: StepPlan,
    /// The plan's own buffers; `None` for the trainer's persistent ones.
    bufs: Vec<Option<DeviceBuf>>,
    /// Every buffer's device address, in plan order.
    ptrs: Vec<u64>,
}

/// A graph trained on the GPU: f32 master parameters and velocities on the device, a plan and a
/// captured CUDA graph per batch size.
pub struct GpuTrainer {
    pub graph: Graph,
    pub dtype: GpuDtype,
    steps: Vec<DeviceStep>,
    /// Parameters and velocities by tensor id.
    persistent: Vec<Option<CudaSlice<f32>>>,
    gpu: Gpu,
}

impl GpuTrainer {
    /// Opens the GPU and writes `params` (f32 masters) and zero velocities to it.
    pub fn new(graph: &Graph, params: &Params, dtype: GpuDtype) -> Result<GpuTrainer, GpuError> {
        let gpu = Gpu::open()?;
        let mut persistent: Vec<Option<CudaSlice<f32>>> =
            (0..graph.tensors.len()).map(|_| None).collect();
        for (l, &(w, b)) in graph.params.iter().enumerate() {
            let layer = &params.layers[l];
            persistent[w as usize] =
                Some(gpu.stream.clone_htod(&layer.weight).map_err(driver_error)?);
            persistent[b as usize] =
                Some(gpu.stream.clone_htod(&layer.bias).map_err(driver_error)?);
        }
        for (t, info) in graph.tensors.iter().enumerate() {
            if let TensorKind::Velocity(_) = info.kind {
                let n = (info.rows(1) * info.cols) as usize;
                persistent[t] = Some(gpu.stream.alloc_zeros::<f32>(n).map_err(driver_error)?);
            }
        }
        Ok(GpuTrainer { graph: graph.clone(), dtype, steps: Vec::new(), persistent, gpu })
    }

    fn step_for(&mut self, batch: usize, training: bool) -> Result<usize, GpuError> {
        if let Some(i) =
            self.steps.iter().position(|s| s.plan.batch == batch && s.plan.training == training)
        {
            return Ok(i);
        }
        let plan = if training {
            StepPlan::training(&self.graph, batch, self.dtype)?
        } else {
            StepPlan::inference(&self.graph, batch, self.dtype)?
        };
        let stream = &self.gpu.stream;
        let mut bufs = Vec::with_capacity(plan.buffers.len());
        let mut ptrs = Vec::with_capacity(plan.buffers.len());
        for buffer in &plan.buffers {
            let buf = match (buffer.role, buffer.elem) {
                (Role::Persistent(t), _) => {
                    let slice = self.persistent[t as usize].as_ref().ok_or_else(|| {
                        GpuError::Input(format!("tensor {t} is not a parameter or velocity"))
                    })?;
                    ptrs.push(slice.device_ptr(stream).0);
                    bufs.push(None);
                    continue;
                }
                (Role::Ones, _) => DeviceBuf::F32(
                    stream.clone_htod(&vec![1.0f32; buffer.len]).map_err(driver_error)?,
                ),
                (_, Elem::F32) => {
                    DeviceBuf::F32(stream.alloc_zeros(buffer.len).map_err(driver_error)?)
                }
                (_, Elem::Bf16) => {
                    DeviceBuf::Bf16(stream.alloc_zeros(buffer.len).map_err(driver_error)?)
                }
                (_, Elem::I32) => {
                    DeviceBuf::I32(stream.alloc_zeros(buffer.len).map_err(driver_error)?)
                }
            };
            ptrs.push(buf.ptr(stream));
            bufs.push(Some(buf));
        }
        self.steps.push(DeviceStep { replay: Replay::NotYet, plan, bufs, ptrs });
        Ok(self.steps.len() - 1)
    }

    /// Copies the batch in and runs the plan: eagerly the first time (which also warms up
    /// cuBLAS), then captured, and as a graph replay every later time. Should the capture fail,
    /// the step says so once on stderr and goes on with separate launches.
    fn run(&mut self, x: &[f32], labels: &[u16], training: bool) -> Result<usize, GpuError> {
        let labels = check_batch(&self.graph, x, labels)?;
        let i = self.step_for(labels.len(), training)?;
        let (gpu, step) = (&self.gpu, &mut self.steps[i]);
        let stream = &gpu.stream;
        match step.bufs[step.plan.input].as_mut() {
            Some(DeviceBuf::F32(input)) => stream.memcpy_htod(x, input).map_err(driver_error)?,
            _ => return Err(GpuError::Input("the plan's input is not an f32 buffer".into())),
        }
        match step.bufs[step.plan.labels].as_mut() {
            Some(DeviceBuf::I32(dst)) => stream.memcpy_htod(&labels, dst).map_err(driver_error)?,
            _ => return Err(GpuError::Input("the plan's labels are not an i32 buffer".into())),
        }
        match &step.replay {
            Replay::Graph(graph) => graph.launch().map_err(driver_error)?,
            Replay::Eager(_) => {
                for op in &step.plan.ops {
                    gpu.enqueue(op, &step.ptrs, step.plan.sgd)?;
                }
            }
            Replay::NotYet => {
                for op in &step.plan.ops {
                    gpu.enqueue(op, &step.ptrs, step.plan.sgd)?;
                }
                gpu.synchronize()?;
                step.replay = match gpu.capture(&step.plan.ops, &step.ptrs, step.plan.sgd) {
                    Ok(graph) => Replay::Graph(graph),
                    Err(e) => {
                        eprintln!("warning: CUDA graph capture failed ({e}); launching each op");
                        Replay::Eager(e.to_string())
                    }
                };
            }
        }
        gpu.synchronize()?;
        Ok(i)
    }

    fn read_f32(&self, i: usize, b: usize) -> Result<Vec<f32>, GpuError> {
        match self.steps[i].bufs[b].as_ref() {
            Some(DeviceBuf::F32(s)) => self.gpu.download(s),
            _ => Err(GpuError::Input("not an f32 buffer".into())),
        }
    }

    fn outcome_of(&self, i: usize) -> Result<BatchOutcome, GpuError> {
        let plan = &self.steps[i].plan;
        let loss = self.read_f32(i, plan.loss)?;
        let correct = match self.steps[i].bufs[plan.correct].as_ref() {
            Some(DeviceBuf::I32(s)) => self.gpu.download(s)?,
            _ => return Err(GpuError::Input("not an i32 buffer".into())),
        };
        Ok(outcome(&loss, &correct))
    }

    /// One training step: forward, backward, SGD.
    pub fn step(&mut self, x: &[f32], labels: &[u16]) -> Result<BatchOutcome, GpuError> {
        let i = self.run(x, labels, true)?;
        self.outcome_of(i)
    }

    /// Loss and hits of a batch without training on it.
    pub fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> Result<BatchOutcome, GpuError> {
        let i = self.run(x, labels, false)?;
        self.outcome_of(i)
    }

    /// The f32 master parameters, read back.
    pub fn params(&self) -> Result<Params, GpuError> {
        let mut p = Params::zeros(&self.graph);
        let read = |t: u8| -> Result<Vec<f32>, GpuError> {
            let slice = self.persistent[t as usize]
                .as_ref()
                .ok_or_else(|| GpuError::Input(format!("tensor {t} is not on the device")))?;
            self.gpu.download(slice)
        };
        for (l, &(w, b)) in self.graph.params.iter().enumerate() {
            p.layers[l].weight = read(w)?;
            p.layers[l].bias = read(b)?;
        }
        Ok(p)
    }

    /// Milliseconds of one training step on this batch, timed with CUDA events: `warmup`
    /// untimed steps, then the median of `reps`; and how the steps ran ("graph replays", or
    /// separate launches after a failed capture). The batch is copied in once; every step
    /// trains on it again.
    pub fn time_step(
        &mut self,
        x: &[f32],
        labels: &[u16],
        warmup: usize,
        reps: usize,
    ) -> Result<(f64, String), GpuError> {
        let i = self.run(x, labels, true)?;
        let (gpu, step) = (&self.gpu, &self.steps[i]);
        let (mut times, how) = match &step.replay {
            Replay::Graph(graph) => (
                gpu.time_ms(warmup, reps, || graph.launch().map_err(driver_error))?,
                "graph replays".to_string(),
            ),
            other => {
                let why = match other {
                    Replay::Eager(why) => why.as_str(),
                    _ => "not captured",
                };
                let sgd = step.plan.sgd;
                let times = gpu.time_ms(warmup, reps, || {
                    step.plan.ops.iter().try_for_each(|op| gpu.enqueue(op, &step.ptrs, sgd))
                })?;
                (times, format!("separate launches (CUDA graph capture failed: {why})"))
            }
        };
        Ok((median(&mut times), how))
    }
}

impl StepTrainer for GpuTrainer {
    fn label(&self) -> String {
        format!("gpu {} ({})", self.dtype.name(), self.gpu.name)
    }
    fn step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        Ok(GpuTrainer::step(self, x, labels)?)
    }
    fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        Ok(GpuTrainer::evaluate(self, x, labels)?)
    }
}

impl StepTrainer for TwinTrainer {
    fn label(&self) -> String {
        format!("cpu twin of the gpu step, {}", self.dtype.name())
    }
    fn step(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        Ok(TwinTrainer::step(self, x, labels)?)
    }
    fn evaluate(&mut self, x: &[f32], labels: &[u16]) -> anyhow::Result<BatchOutcome> {
        Ok(TwinTrainer::evaluate(self, x, labels)?)
    }
}

/// What `systole train --device gpu` and `--compare` write with `--json`.
#[derive(Debug, Serialize)]
struct CompareReport<'a> {
    mode: &'static str,
    dataset: &'a str,
    /// The network as `train` describes it (`64-64-10`, or `1 x 8 x 8 conv2d relu ... -> 10`).
    model: String,
    widths: Vec<u32>,
    epochs: u32,
    batch: u32,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
    seed: u64,
    curves: &'a [Curve],
    /// Largest per-epoch relative loss gap of the first curve from the second.
    max_loss_gap: f64,
}

/// A side-by-side run: the GPU beside the f32 CPU reference, or (`compare`) the accelerator
/// beside the GPU in FP32 (the f32 CPU reference without a GPU). Plain values: the CLI checks
/// its flags and fills this in.
#[derive(Clone, Debug)]
pub struct SideBySide {
    /// `Some((machine, array))`: the accelerator (BF16) on that golden machine first.
    pub compare: Option<(GoldenKind, ArrayConfig)>,
    /// The precision of the GPU's products without `compare` (with it, FP32).
    pub dtype: GpuDtype,
    pub epochs: u32,
    /// The batch size asked for (the JSON's); batches themselves come from the caller.
    pub batch: u32,
    pub seed: u64,
    pub dataset: String,
}

/// `systole train --device gpu` and `systole train --compare`: the two trainers of `run` from
/// the same initial weights, on the same batches; both curves side by side.
///
/// `batches` is the run's own epoch order (the caller's shuffle), `test` the test split.
pub fn run(
    run: &SideBySide,
    graph: &Graph,
    test: &Samples,
    batches: &mut dyn EpochBatches,
    mut outputs: Outputs,
    json_file: Option<OutputId>,
) -> anyhow::Result<()> {
    let sgd = graph.sgd.ok_or_else(|| anyhow!("the training graph has no optimizer"))?;
    let params = Params::init(&graph.net, run.seed);
    let mut trainers: Vec<Box<dyn StepTrainer>> = Vec::new();
    let mode = if let Some((kind, config)) = run.compare {
        config.validate().map_err(|e| anyhow!("array config: {e}"))?;
        let batch = run.batch.min(u16::MAX as u32);
        let eval = (test.len().clamp(1, EVAL_ROWS)) as u32;
        let dram = AccelTrainer::dram_needed(graph, &config, batch, eval)
            .map_err(|e| anyhow!("cannot train on this array: {e}"))?;
        let machine = golden(kind, config, dram).map_err(|e| anyhow!("array config: {e}"))?;
        let trainer = AccelTrainer::new(machine, graph.clone(), &params)
            .map_err(|e| anyhow!("accelerator: {e}"))?;
        let label =
            format!("accelerator bf16, {} {}x{}", machine_name(kind), config.rows, config.cols);
        trainers.push(Box::new(AccelStepTrainer::new(trainer, label)));
        match GpuTrainer::new(graph, &params, GpuDtype::F32) {
            Ok(gpu) => trainers.push(Box::new(gpu)),
            Err(GpuError::Unavailable(why)) => {
                println!("no GPU, comparing with the f32 CPU reference instead: {why}");
                trainers.push(Box::new(CpuReference::new(graph, &params)));
            }
            Err(e) => return Err(e.into()),
        }
        "compare"
    } else {
        trainers.push(Box::new(GpuTrainer::new(graph, &params, run.dtype)?));
        trainers.push(Box::new(CpuReference::new(graph, &params)));
        "gpu"
    };
    println!("training {} and {} side by side", trainers[0].label(), trainers[1].label());
    let epochs = run.epochs;
    let test_set = (&test.x[..], &test.labels[..]);
    let mut each: Vec<&mut (dyn StepTrainer + 'static)> =
        trainers.iter_mut().map(|t| t.as_mut()).collect();
    let mut lines = |points: &[CurvePoint]| {
        let line: Vec<String> = points
            .iter()
            .map(|p| {
                format!(
                    "loss {:.5} train {:.2}% test {:.2}%",
                    p.loss,
                    100.0 * p.train_accuracy,
                    100.0 * p.test_accuracy
                )
            })
            .collect();
        println!("epoch {:>3}/{epochs}: {}", points[0].epoch, line.join(" | "));
    };
    let curves = train_curves(&mut each, epochs, batches, test_set, &sgd, &mut lines)?;
    println!("{}", side_by_side(&curves[0], &curves[1]));
    let max_loss_gap = curves[0]
        .points
        .iter()
        .zip(&curves[1].points)
        .map(|(p, q)| gap(p, q).abs())
        .fold(0.0f64, f64::max);
    println!("largest per-epoch loss gap: {:.2}%", 100.0 * max_loss_gap);
    if let Some(file) = json_file {
        let report = CompareReport {
            mode,
            dataset: &run.dataset,
            model: crate::network::describe(&graph.net),
            widths: graph.mlp_widths().map_or_else(Vec::new, |w| w.to_vec()),
            epochs,
            batch: run.batch,
            lr: sgd.lr,
            momentum: sgd.momentum,
            weight_decay: sgd.weight_decay,
            seed: run.seed,
            curves: &curves,
            max_loss_gap,
        };
        outputs.write(file, |out| {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            out.write_all(b"\n")
        })?;
    }
    for path in outputs.commit()? {
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn machine_name(kind: GoldenKind) -> &'static str {
    match kind {
        GoldenKind::Functional => "functional machine",
        GoldenKind::Cycle => "cycle machine",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::SameBatches;
    use systole_core::graph::{MlpSpec, Sgd};
    use systole_core::params::SplitMix64;

    fn data(rng: &mut SplitMix64, rows: usize) -> (Vec<f32>, Vec<u16>) {
        // Two well separated classes in 6 features.
        let mut x = Vec::new();
        let mut y = Vec::new();
        for _ in 0..rows {
            let c = rng.below(2) as u16;
            for f in 0..6 {
                let centre = if (f % 2 == 0) == (c == 0) { 0.8 } else { -0.8 };
                x.push((centre + 0.3 * (rng.next_f64() * 2.0 - 1.0)) as f32);
            }
            y.push(c);
        }
        (x, y)
    }

    fn two_class_graph(hidden: u32, momentum: f32) -> (Graph, Params) {
        let spec = MlpSpec { inputs: 6, hidden: [hidden].iter().copied().collect(), classes: 2 };
        let graph = Graph::training(&spec, Sgd { lr: 0.1, momentum, weight_decay: 0.0 }).unwrap();
        let params = Params::init(&spec, 1);
        (graph, params)
    }

    #[test]
    fn curves_of_the_twin_the_reference_and_the_accelerator_agree_and_learn() {
        let (graph, params) = two_class_graph(8, 0.9);
        let mut rng = SplitMix64(2);
        let (train_x, train_y) = data(&mut rng, 100);
        let (test_x, test_y) = data(&mut rng, 40);
        let mut batches = SameBatches(
            train_x
                .chunks(16 * 6)
                .zip(train_y.chunks(16))
                .map(|(x, y)| (x.to_vec(), y.to_vec()))
                .collect(),
        );
        let config = ArrayConfig::new(4, 4, systole_core::Dtype::Bf16);
        let dram = AccelTrainer::dram_needed(&graph, &config, 16, 40).unwrap();
        let machine = golden(GoldenKind::Functional, config, dram).unwrap();
        let accel = AccelTrainer::new(machine, graph.clone(), &params).unwrap();
        let mut trainers: Vec<Box<dyn StepTrainer>> = vec![
            Box::new(TwinTrainer::new(&graph, &params, GpuDtype::F32)),
            Box::new(CpuReference::new(&graph, &params)),
            Box::new(AccelStepTrainer::new(accel, "accelerator")),
        ];
        let mut seen = 0;
        let sgd = graph.sgd.unwrap();
        let mut each: Vec<&mut (dyn StepTrainer + 'static)> =
            trainers.iter_mut().map(|t| t.as_mut()).collect();
        let mut observe = |points: &[CurvePoint]| {
            assert_eq!(points.len(), 3);
            assert!(points[0].work.is_none() && points[1].work.is_none());
            // The accelerator counts its steps' cycles: 7 batches of the compiled steps.
            assert!(points[2].work.is_some_and(|w| w.cycles > 0 && w.macs > 0), "{points:?}");
            seen += 1;
        };
        let test = (&test_x[..], &test_y[..]);
        let curves = train_curves(&mut each, 4, &mut batches, test, &sgd, &mut observe).unwrap();
        assert_eq!(seen, 4);
        let (a, b, c) = (&curves[0], &curves[1], &curves[2]);
        for ((p, q), r) in a.points.iter().zip(&b.points).zip(&c.points) {
            assert!((p.loss - q.loss).abs() <= 1e-5 * (1.0 + q.loss), "{p:?} vs {q:?}");
            assert_eq!(p.train_accuracy, q.train_accuracy);
            assert_eq!(p.test_accuracy, q.test_accuracy);
            assert!(gap(r, q).abs() < 0.05, "accelerator {r:?} vs reference {q:?}");
        }
        assert!(b.points[3].loss < b.points[0].loss, "it learns");
        assert!(b.points[3].test_accuracy > 0.9, "{:?}", b.points);
        let table = side_by_side(a, b);
        assert_eq!(table.lines().count(), 3 + 4);
        assert!(table.contains("cpu twin") && table.contains("cpu f32 reference"), "{table}");
    }

    #[test]
    fn a_diverging_run_stops_with_the_machine_named() {
        let spec = MlpSpec { inputs: 6, hidden: [8].iter().copied().collect(), classes: 2 };
        let graph =
            Graph::training(&spec, Sgd { lr: 1e30, momentum: 0.0, weight_decay: 0.0 }).unwrap();
        let params = Params::init(&spec, 1);
        let mut rng = SplitMix64(2);
        let (x, y) = data(&mut rng, 32);
        let mut batches = SameBatches(vec![(x.clone(), y.clone())]);
        let mut reference = CpuReference::new(&graph, &params);
        let sgd = graph.sgd.unwrap();
        let mut each: [&mut dyn StepTrainer; 1] = [&mut reference];
        let mut quiet = |_: &[CurvePoint]| {};
        let e = train_curves(&mut each, 5, &mut batches, (&x, &y), &sgd, &mut quiet).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("cpu f32 reference") && e.contains("diverged"), "{e}");
        assert!(e.contains("; try a lower --lr (now "), "{e}");
    }

    #[test]
    fn a_bad_batch_is_refused_by_every_trainer() {
        let (graph, params) = two_class_graph(4, 0.0);
        let mut reference = CpuReference::new(&graph, &params);
        assert!(reference.step(&[0.0; 6], &[2]).is_err());
        assert!(reference.evaluate(&[0.0; 5], &[1]).is_err());
        let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
        assert!(StepTrainer::step(&mut twin, &[0.0; 6], &[2]).is_err());
    }

    /// Without a GPU, opening one is an error naming what was searched, never a panic.
    #[test]
    fn opening_the_gpu_fails_cleanly_or_works() {
        let spec = MlpSpec { inputs: 6, hidden: [4].iter().copied().collect(), classes: 2 };
        let graph =
            Graph::training(&spec, Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0 }).unwrap();
        let params = Params::init(&spec, 1);
        match GpuTrainer::new(&graph, &params, GpuDtype::F32) {
            Ok(mut gpu) => {
                // A GPU: one step must agree with the CPU twin.
                let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
                let (x, y) = data(&mut SplitMix64(3), 8);
                let (g, t) = (gpu.step(&x, &y).unwrap(), twin.step(&x, &y).unwrap());
                assert!((g.loss - t.loss).abs() <= 1e-5 * (1.0 + t.loss), "{g:?} vs {t:?}");
            }
            Err(GpuError::Unavailable(why)) => {
                assert!(!why.contains('\n'));
                println!("SKIPPED: no CUDA GPU ({why})");
            }
            Err(e) => panic!("a GPU that fails: {e}"),
        }
    }
}
