//! `systole train`: a classifier trained on a machine of the accelerator in BF16 mixed
//! precision, with the f32 CPU reference trained beside it from the same seed, split, initial
//! weights and batches (both through the one training loop, [`crate::fit`]), so every epoch
//! says how far the accelerator's numerics move the loss.
//!
//! Per run: the data set is split and scaled once ([`crate::dataset`]); the step programs are
//! compiled once per batch size (the full size and the epoch's last, smaller batch) and cached
//! by [`AccelTrainer`]; each step only gathers its rows into reused buffers. With `--dtype int8`
//! the trained model is then quantized (per-tensor scales calibrated on up to
//! [`CALIBRATION_ROWS`] training rows) and run on an INT8 machine of the same shape.

use std::io::Write;

use anyhow::anyhow;
use systole_core::compile::{im2col, Int8Plan};
use systole_core::exec::{argmax, Executor, Plain};
use systole_core::graph::{Graph, Op, Sgd};
use systole_core::isa::Instruction;
use systole_core::layers::Net;
use systole_core::params::{ParamShapes, Params, SplitMix64};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::train::{AccelTrainer, Int8Inference, TrainError, Work};
use systole_core::{ArrayConfig, Dtype};

use crate::dataset::{Samples, Split};
use crate::fit::{
    train_curves, AccelStepTrainer, Beside, CpuReference, CurvePoint, EpochBatches, Observer,
    StepTrainer, EVAL_ROWS,
};
use crate::limits::check_memory;
use crate::machines::{Link, MachineKind};
use crate::model::{accuracy, f32_predictions};
use crate::network::describe;
use crate::progress::EpochProgress;
use crate::report::{self, EpochReport, LinkReport, RunReport, Totals};
use crate::train_dtype::TrainDtype;

/// Where `systole train` trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// A machine of the accelerator (with the f32 CPU reference beside it).
    Accel,
    /// A CUDA GPU (with the f32 CPU reference beside it).
    Gpu,
}

impl Device {
    pub const ALL: [Device; 2] = [Device::Accel, Device::Gpu];
}

/// Training rows INT8 calibration runs through the f32 model.
pub const CALIBRATION_ROWS: usize = 512;
/// Seeds the per-epoch shuffles: `SplitMix64(seed ^ SHUFFLE_STREAM)`, apart from the split's
/// stream and from the weights' (`Params::init(spec, seed)`).
const SHUFFLE_STREAM: u64 = 0x5348_5546_464c_4553; // "SHUFFLES"

/// What a run trains with, as the command line gave it.
#[derive(Clone, Debug)]
pub struct Settings {
    pub dtype: TrainDtype,
    pub machine: MachineKind,
    pub link: Link,
    pub epochs: u32,
    pub batch: u32,
    /// The optimizer the graph was built with.
    pub sgd: Sgd,
    pub seed: u64,
}

/// One run's fixed inputs.
pub struct Training<'a> {
    pub settings: &'a Settings,
    pub split: &'a Split,
    pub net: &'a Net,
    pub graph: &'a Graph,
}

/// What a run produced.
pub struct Outcome {
    pub epochs: Vec<EpochReport>,
    /// The trained f32 weights (saved by `--save`).
    pub params: Params,
    pub test_accuracy_f32: f64,
    pub test_accuracy_int8: Option<f64>,
    pub reference_test_accuracy_f32: f64,
    pub accel: Option<AccelOutcome>,
}

pub struct AccelOutcome {
    pub step: systole_core::compile::CompiledStep,
    /// Steps and cycles of one epoch.
    pub per_epoch: (usize, u64),
    pub totals: Totals,
    pub test_accuracy_bf16: f64,
}

/// The training rows' order for each epoch, and each batch gathered into reused buffers.
pub struct Batches {
    order: Vec<usize>,
    rng: SplitMix64,
    size: usize,
    x: Vec<f32>,
    labels: Vec<u16>,
}

impl Batches {
    pub fn new(rows: usize, size: usize, seed: u64) -> Batches {
        Batches {
            order: (0..rows).collect(),
            rng: SplitMix64(seed ^ SHUFFLE_STREAM),
            size,
            x: Vec::new(),
            labels: Vec::new(),
        }
    }

    /// Shuffles the order for the next epoch.
    fn next_epoch(&mut self) {
        self.rng.shuffle(&mut self.order);
    }

    /// Batches per epoch: all full but the last.
    fn count(&self) -> usize {
        self.order.len().div_ceil(self.size)
    }

    /// Batch `b` of the current epoch.
    fn gather(&mut self, b: usize, samples: &Samples) -> (&[f32], &[u16]) {
        let rows = &self.order[b * self.size..((b + 1) * self.size).min(self.order.len())];
        let d = samples.features;
        self.x.clear();
        self.labels.clear();
        for &i in rows {
            self.x.extend_from_slice(&samples.x[i * d..(i + 1) * d]);
            self.labels.push(samples.labels[i]);
        }
        (&self.x, &self.labels)
    }
}

/// A split's rows in the run's shuffled order, one epoch after another, gathered into
/// [`Batches`]' reused buffers.
pub struct Shuffled<'a> {
    pub order: Batches,
    pub samples: &'a Samples,
}

impl EpochBatches for Shuffled<'_> {
    fn start(&mut self, _epoch: u32) -> usize {
        self.order.next_epoch();
        self.order.count()
    }
    fn batch(&mut self, b: usize) -> (&[f32], &[u16]) {
        self.order.gather(b, self.samples)
    }
}

impl Training<'_> {
    fn batch(&self) -> usize {
        (self.settings.batch as usize).min(self.split.train.len())
    }

    fn reference(&self) -> Executor<Plain<f32>> {
        let params = Params::init(self.net, self.settings.seed);
        Executor::new(self.graph.clone(), Plain::<f32>::new(), &params)
    }

    /// The trainers through every epoch on this run's batches, each epoch's line printed as
    /// it ends: the first trainer's figures, with the reference's beside them when it is the
    /// second.
    fn fit(
        &self,
        trainers: &mut [&mut dyn StepTrainer],
        config: Option<ArrayConfig>,
    ) -> anyhow::Result<Vec<EpochReport>> {
        let (args, train, test) = (self.settings, &self.split.train, &self.split.test);
        let order = Batches::new(train.len(), self.batch(), args.seed);
        let mut batches = Shuffled { order, samples: train };
        let baud = config.and_then(|c| crate::machines::link_baud(args.machine, &args.link, &c));
        let mut lines =
            EpochLines { epochs: args.epochs, config, baud, progress: None, reports: vec![] };
        let test = (&test.x[..], &test.labels[..]);
        train_curves(trainers, args.epochs, &mut batches, test, &args.sgd, &mut lines)?;
        Ok(lines.reports)
    }

    /// With `--dtype f32`: the reference alone.
    pub fn reference_only(&self) -> anyhow::Result<Outcome> {
        let test = &self.split.test;
        let mut reference = CpuReference(self.reference());
        let epochs = self.fit(&mut [&mut reference], None)?;
        let params = reference.0.params();
        let acc = accuracy(&f32_predictions(self.net, &params, test), &test.labels);
        Ok(Outcome {
            epochs,
            params,
            test_accuracy_f32: acc,
            test_accuracy_int8: None,
            reference_test_accuracy_f32: acc,
            accel: None,
        })
    }

    /// BF16 on the accelerator, the f32 reference beside it; then INT8 with `--dtype int8`.
    pub fn on_accelerator(&self, config: ArrayConfig) -> anyhow::Result<Outcome> {
        let (args, train, test) = (self.settings, &self.split.train, &self.split.test);
        let batch = self.batch();
        let eval_rows = test.len().min(EVAL_ROWS);
        let dram = AccelTrainer::dram_needed(self.graph, &config, batch as u32, eval_rows as u32)
            .map_err(|e| anyhow!("cannot train on this array: {e}"))?;
        // The machine's DRAM (and, for INT8, the inference machine's, never larger) beside the
        // f32 reference and the compiled steps, checked in `run`.
        let machines = 1 + (args.dtype == TrainDtype::Int8) as u64;
        let steps = step_instructions(self.graph, &config, batch, eval_rows);
        check_memory(
            format_args!(
                "model {} on the accelerator ({dram} bytes of DRAM, beside the f32 reference \
                 and {steps} instructions of compiled steps)",
                describe(self.net)
            ),
            reference_bytes(self.graph, batch.max(eval_rows))
                .saturating_add(steps.saturating_mul(size_of::<Instruction>() as u64))
                .saturating_add(machines.saturating_mul(dram as u64)),
        )?;
        let machine = crate::machines::open(args.machine, &args.link, config, dram)?;
        let params = Params::init(self.net, args.seed);
        let trainer =
            AccelTrainer::new(machine, self.graph.clone(), &params).map_err(accel_error)?;
        let mut accel = AccelStepTrainer::new(
            trainer,
            format!("the accelerator ({} machine)", args.machine.name()),
        );
        // The reference steps on the other core, beside the accelerator.
        let mut reference = Beside::new(CpuReference(self.reference()));
        let epochs = self.fit(&mut [&mut accel, &mut reference], Some(config))?;
        let mut total = Work::default();
        for e in &epochs {
            total += Work { cycles: e.cycles.unwrap_or(0), macs: e.macs.unwrap_or(0) };
        }
        let per_epoch = epochs.last().and_then(|e| e.cycles).unwrap_or(0);
        let accel = &mut accel.trainer;
        let reference = reference.into_inner()?.0;
        let test_accuracy_bf16 = epochs.last().map_or(0.0, |e| e.test_accuracy);
        let params = accel.params().map_err(accel_error)?;
        let test_accuracy_f32 = accuracy(&f32_predictions(self.net, &params, test), &test.labels);
        let reference_params = reference.params();
        let reference_test_accuracy_f32 =
            accuracy(&f32_predictions(self.net, &reference_params, test), &test.labels);
        let test_accuracy_int8 = match args.dtype {
            TrainDtype::Int8 => Some(self.int8_accuracy(config, &params)?),
            _ => None,
        };
        let step = accel.compiled(batch as u32).map_err(accel_error)?.clone();
        let steps = train.len().div_ceil(batch);
        Ok(Outcome {
            epochs,
            params,
            test_accuracy_f32,
            test_accuracy_int8,
            reference_test_accuracy_f32,
            accel: Some(AccelOutcome {
                step,
                per_epoch: (steps, per_epoch),
                totals: Totals::new(&config, steps as u64 * args.epochs as u64, total),
                test_accuracy_bf16,
            }),
        })
    }

    /// Post-training quantization of `params` and INT8 inference of the test split on an INT8
    /// machine of the training array's shape.
    fn int8_accuracy(&self, bf16: ArrayConfig, params: &Params) -> anyhow::Result<f64> {
        let (train, test) = (&self.split.train, &self.split.test);
        let rows = train.len().min(CALIBRATION_ROWS);
        let plan = Int8Plan::calibrate(self.graph, params, train.head(rows), rows)
            .map_err(|e| anyhow!("int8 quantization: {e}"))?;
        let config = ArrayConfig { dtype: Dtype::Int8, ..bf16 };
        let eval_rows = test.len().min(EVAL_ROWS);
        let dram = Int8Inference::dram_needed(self.graph, &config, &plan, eval_rows as u32)
            .map_err(|e| anyhow!("int8 inference: {e}"))?;
        let machine =
            crate::machines::open(self.settings.machine, &self.settings.link, config, dram)?;
        let mut int8 = Int8Inference::new(machine, self.graph.clone(), params, plan)
            .map_err(|e| anyhow!("int8 inference: {e}"))?;
        let classes = self.net.classes() as usize;
        let mut predicted = Vec::with_capacity(test.len());
        for (x, rows) in chunks(test) {
            let (logits, _) = int8.logits(x, rows).map_err(|e| anyhow!("int8 inference: {e}"))?;
            predicted.extend(logits.chunks_exact(classes).map(|r| argmax(r) as u16));
        }
        Ok(accuracy(&predicted, &test.labels))
    }
}

/// The samples in passes of at most [`EVAL_ROWS`] rows: `(features, rows)`.
fn chunks(samples: &Samples) -> impl Iterator<Item = (&[f32], usize)> {
    samples.x.chunks(EVAL_ROWS * samples.features).map(|x| (x, x.len() / samples.features))
}

/// Instructions the accelerator's compiled steps hold at once, before any is compiled: training
/// steps at `batch` rows and at the epoch's last, smaller batch, and evaluation passes at
/// `eval_rows` and at the test split's remainder. Each layer's GEMMs (forward; weight and input
/// gradients when training) count as plain tiled GEMMs on `config`
/// ([`GemmPlan::instruction_count`]); their epilogues and the SGD update add a few more per
/// output tile. A GEMM that cannot be tiled counts nothing: compiling it fails before it emits.
pub fn step_instructions(
    graph: &Graph,
    config: &ArrayConfig,
    batch: usize,
    eval_rows: usize,
) -> u64 {
    let gemm = |m: u32, k: u32, n: u32| {
        let shape = GemmShape { m, k, n };
        GemmLayout::packed(config, &shape)
            .ok()
            .and_then(|(layout, _)| GemmPlan::new(config, shape, layout).ok())
            .map_or(0, |plan| plan.instruction_count())
    };
    let pass = |rows: usize, training: bool| -> u64 {
        let rows = rows as u32;
        let (info, ops) = (|t| graph.info(t), graph.backward.iter().filter(|_| training));
        graph.forward.iter().chain(ops).fold(0u64, |n, op| {
            let more = match *op {
                Op::Dense { x, y, .. } => gemm(info(x).rows(rows), info(x).cols, info(y).cols),
                Op::DenseGradWeight { x, dy, .. } => {
                    gemm(info(x).cols, info(x).rows(rows), info(dy).cols)
                }
                Op::DenseGradInput { dy, dx, .. } => {
                    gemm(info(dy).rows(rows), info(dy).cols, info(dx).cols)
                }
                Op::Im2col { x, geom, .. } => {
                    im2col::instructions(&geom, rows, config, x != graph.input)
                }
                _ => 0,
            };
            n.saturating_add(more)
        })
    };
    let (train, eval) = (pass(batch, true), pass(eval_rows, false));
    train.saturating_mul(2).saturating_add(eval.saturating_mul(2))
}

/// Bytes the f32 reference holds training `graph` in passes of at most `rows` rows: every
/// tensor of the graph (parameters, gradients, velocities, activations) at `rows` rows, and
/// three more copies of the parameters (the initial ones it is built from, a transposed weight
/// in the backward pass, the trained ones it hands back).
pub fn reference_bytes(graph: &Graph, rows: usize) -> u64 {
    let elements = |info: &systole_core::graph::TensorInfo| {
        (info.rows(rows as u32) as u64).saturating_mul(info.cols as u64)
    };
    let tensors: u64 = graph.tensors.iter().map(elements).fold(0, u64::saturating_add);
    let params = graph.parameter_count();
    tensors.saturating_add(params.saturating_mul(3)).saturating_mul(size_of::<f32>() as u64)
}

fn accel_error(e: TrainError) -> anyhow::Error {
    anyhow!("accelerator: {e}")
}

pub fn write_json(out: &mut dyn Write, report: &RunReport) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    out.write_all(b"\n")
}

/// `systole train`'s [`Observer`]: a progress bar through each epoch, then the epoch's line
/// and report.
struct EpochLines {
    epochs: u32,
    /// The accelerator's array, when the first trainer is the accelerator.
    config: Option<ArrayConfig>,
    /// Its host link's baud rate, on a machine reached over one.
    baud: Option<f64>,
    progress: Option<EpochProgress>,
    reports: Vec<EpochReport>,
}

impl Observer for EpochLines {
    fn epoch_started(&mut self, epoch: u32, batches: usize) {
        self.progress = Some(EpochProgress::start(epoch, self.epochs, batches));
    }

    fn stepped(&mut self) {
        if let Some(p) = &self.progress {
            p.step();
        }
    }

    fn epoch_done(&mut self, points: &[CurvePoint]) -> anyhow::Result<()> {
        let p = points[0];
        // Beside the accelerator, the reference is the second trainer.
        let reference = points.get(1);
        let work = p.work.zip(self.config);
        let report = EpochReport {
            epoch: p.epoch,
            loss: p.loss,
            train_accuracy: p.train_accuracy,
            test_accuracy: p.test_accuracy,
            reference_loss: reference.map(|r| r.loss),
            loss_gap: reference.map(|r| (p.loss - r.loss) / r.loss),
            reference_train_accuracy: reference.map(|r| r.train_accuracy),
            reference_test_accuracy: reference.map(|r| r.test_accuracy),
            cycles: work.map(|(w, _)| w.cycles),
            macs: work.map(|(w, _)| w.macs),
            utilization: work.map(|(w, c)| report::utilization(&c, w)),
            link: match (p.link, self.baud, work) {
                (Some(traffic), Some(baud), Some((w, c))) => {
                    Some(LinkReport::new(traffic, baud, w.cycles as f64 / (c.clock_mhz * 1e6)))
                }
                _ => None,
            },
        };
        if let Some(progress) = self.progress.take() {
            progress.finish(&report.line(self.epochs));
        }
        self.reports.push(report);
        Ok(())
    }
}
