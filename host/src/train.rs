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
use std::time::Instant;

use anyhow::{anyhow, bail};
use systole_core::compile::{check_lowered, im2col, CompileError, Int8Plan};
use systole_core::exec::{argmax, Executor, Plain};
use systole_core::graph::{Graph, Op, Sgd, MAX_LAYERS, MAX_WIDTH};
use systole_core::isa::Instruction;
use systole_core::layers::{Net, Shape};
use systole_core::params::{ParamShapes, Params, SplitMix64};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::train::{AccelTrainer, Int8Inference, TrainError, Work};
use systole_core::{ArrayConfig, Dtype};

use crate::cli::{Device, TrainArgs, TrainDtype};
use crate::dataset::{Samples, Split};
use crate::fit::{
    train_curves, AccelStepTrainer, CpuReference, CurvePoint, EpochBatches, Observer, StepTrainer,
    EVAL_ROWS,
};
use crate::gpu::train::SideBySide;
use crate::gpu::GpuDtype;
use crate::limits::check_memory;
use crate::model::{accuracy, f32_predictions, Model};
use crate::network::describe;
use crate::outputs::Outputs;
use crate::progress::EpochProgress;
use crate::report::{self, DatasetReport, EpochReport, RunConfig, RunReport, StepReport, Totals};

/// Training rows INT8 calibration runs through the f32 model.
pub const CALIBRATION_ROWS: usize = 512;
/// Seeds the per-epoch shuffles: `SplitMix64(seed ^ SHUFFLE_STREAM)`, apart from the split's
/// stream and from the weights' (`Params::init(spec, seed)`).
const SHUFFLE_STREAM: u64 = 0x5348_5546_464c_4553; // "SHUFFLES"

pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let sgd = check_flags(args)?;
    if let Some(line) = crate::cli::note(&args.ignored()) {
        eprintln!("{line}");
    }
    // The outputs first, so a path that cannot be written (or is an input) fails before any work.
    let mut outputs = Outputs::new();
    for path in args.dataset.files() {
        outputs.reads("--dataset", path)?;
    }
    let json_file = outputs.writes_opt("--json", args.json.as_deref())?;
    let model_file = outputs.writes_opt("--save", args.save.as_deref())?;
    if let Some(path) = args.model.file() {
        outputs.reads("--model", path)?;
    }
    let data = args.dataset.load()?;
    let net = args.model.resolve(&args.hidden, data.features as u32, data.classes)?;
    let graph = Graph::network_training(&net, sgd).map_err(|e| anyhow!("model: {e}"))?;
    // An MLP's widths (`inputs, hidden..., classes`), or none for a network with other layers.
    let widths = net.mlp_widths().map_or_else(Vec::new, |w| w.to_vec());
    let on_accelerator =
        args.compare || (args.device == Device::Accel && args.dtype != TrainDtype::F32);
    if on_accelerator {
        // What the compiler does not lower yet is named before any work: training runs on a
        // BF16 array, and `--dtype int8` then infers on an INT8 one.
        let mut arrays = vec![Dtype::Bf16];
        if args.dtype == TrainDtype::Int8 {
            arrays.push(Dtype::Int8);
        }
        for dtype in arrays {
            let config = args.array.config(dtype);
            // Every array the run will use, checked before the first epoch (the INT8 one was
            // only built after training).
            config.validate().map_err(|e| {
                anyhow!(
                    "array config of the {} array (--dtype {}): {e}",
                    dtype.name(),
                    args.dtype.name()
                )
            })?;
            let what = match check_lowered(&graph, &config) {
                Err(CompileError::NotLowered { what }) => what.to_string(),
                Err(CompileError::Relu { layer, what }) => format!("layer {layer} (relu): {what}"),
                _ => continue,
            };
            bail!(
                "--model {}: {what} does not run on the accelerator yet; this model trains on \
                 the f32 CPU reference (--dtype f32) and the GPU (--device gpu){}",
                args.model,
                match dtype {
                    Dtype::Int8 => ", and on the accelerator in bf16 (--dtype bf16)",
                    Dtype::Bf16 => "",
                }
            );
        }
    }
    // What the report says of the data set, before the split takes over its features.
    let (rows, features, classes) = (data.rows(), data.features, data.classes);
    let mut split = data.into_split(args.seed)?;
    if let Shape::Image { c, h, w } = net.input {
        // Images are channels-last inside every machine (core's `conv`); a data set's rows are
        // PyTorch's channels-first.
        split.to_channels_last(c as usize, h as usize * w as usize);
    }
    // Every path trains the f32 reference, and most compile accelerator steps beside it: both
    // are checked before any of it is allocated (the accelerator's DRAM, once it is known).
    let batch = (args.batch as usize).min(split.train.len());
    let eval_rows = split.test.len().min(EVAL_ROWS);
    let steps = match on_accelerator {
        true => step_instructions(&graph, &args.array.config(Dtype::Bf16), batch, eval_rows),
        false => 0,
    };
    check_memory(
        format_args!(
            "model {} (the f32 reference{})",
            describe(&net),
            match steps {
                0 => String::new(),
                n => format!(" and {n} instructions of the accelerator's compiled steps"),
            }
        ),
        reference_bytes(&graph, batch.max(eval_rows))
            .saturating_add(steps.saturating_mul(size_of::<Instruction>() as u64)),
    )?;
    if args.device == Device::Gpu || args.compare {
        // The GPU path (host/src/gpu/train.rs) trains on this run's split and batch order.
        let run = side_by_side(args)?;
        let order = Batches::new(split.train.len(), batch, args.seed);
        let mut batches = Shuffled { order, samples: &split.train };
        return crate::gpu::train::run(&run, &graph, &split.test, &mut batches, outputs, json_file);
    }
    let accel = match args.dtype {
        TrainDtype::F32 => None,
        TrainDtype::Bf16 | TrainDtype::Int8 => {
            let config = args.array.config(Dtype::Bf16);
            config.validate().map_err(|e| anyhow!("array config: {e}"))?;
            Some(config)
        }
    };

    println!(
        "{}: {} rows ({} train, {} test), {} features divided by {}, {} classes",
        args.dataset,
        rows,
        split.train.len(),
        split.test.len(),
        features,
        split.feature_scale,
        classes
    );
    let on = match accel {
        Some(c) => format!(
            "bf16 on the {} machine, {}x{} {}{} array{}",
            machine_name(args),
            c.rows,
            c.cols,
            c.dataflow.short_name(),
            crate::report::schedule_word(&c),
            crate::report::dram_port_words(c.dram_port)
        ),
        None => "f32 on the CPU reference".into(),
    };
    println!(
        "model {} ({} parameters), {on}; batch {}, lr {}, momentum {}, weight decay {}, seed {}",
        describe(&net),
        net.parameter_count(),
        args.batch,
        args.lr(),
        args.momentum,
        args.weight_decay,
        args.seed
    );

    let training = Training { args, split: &split, net: &net, graph: &graph };
    let outcome = match accel {
        Some(config) => training.on_accelerator(config)?,
        None => training.reference_only()?,
    };

    let config = RunConfig {
        dataset: DatasetReport {
            name: args.dataset.name(),
            rows,
            features,
            classes,
            train_rows: split.train.len(),
            test_rows: split.test.len(),
            feature_scale: split.feature_scale,
        },
        model: describe(&net),
        hidden: if widths.is_empty() { vec![] } else { args.hidden.clone() },
        widths: widths.clone(),
        parameters: net.parameter_count(),
        dtype: args.dtype.name(),
        machine: accel.map(|_| machine_name(args)),
        array: accel.as_ref().map(Into::into),
        epochs: args.epochs(),
        batch: args.batch,
        lr: args.lr(),
        momentum: args.momentum,
        weight_decay: args.weight_decay,
        seed: args.seed,
    };
    let Outcome { epochs, params, accel: accel_outcome, .. } = outcome;
    let report = RunReport {
        config,
        epochs,
        step: accel_outcome.as_ref().map(|a| StepReport::new(&a.step)),
        test_accuracy_bf16: accel_outcome.as_ref().map(|a| a.test_accuracy_bf16),
        totals: accel_outcome.as_ref().map(|a| a.totals.clone()),
        test_accuracy_f32: outcome.test_accuracy_f32,
        test_accuracy_int8: outcome.test_accuracy_int8,
        reference_test_accuracy_f32: outcome.reference_test_accuracy_f32,
    };

    let mut summary = format!("test accuracy: f32 {}", pct(report.test_accuracy_f32));
    if let Some(a) = report.test_accuracy_bf16 {
        summary += &format!(", bf16 (accelerator) {}", pct(a));
    }
    if let Some(a) = report.test_accuracy_int8 {
        summary += &format!(", int8 (accelerator) {}", pct(a));
    }
    if accel.is_some() {
        summary += &format!(", f32 reference {}", pct(report.reference_test_accuracy_f32));
    }
    println!("{summary}");
    if let (Some(step), Some(totals), Some(a)) = (&report.step, &report.totals, &accel_outcome) {
        println!("{}", report::step_table(step, &a.step.config, a.per_epoch, totals));
    }

    if let Some(file) = json_file {
        outputs.write(file, |out| write_json(out, &report))?;
    }
    if let Some(file) = model_file {
        let model = Model {
            net: net.clone(),
            params,
            dtype: args.dtype.name().into(),
            seed: args.seed,
            feature_scale: split.feature_scale,
            dataset: args.dataset.name(),
            accuracies: [
                ("test_accuracy_f32", Some(report.test_accuracy_f32)),
                ("test_accuracy_bf16", report.test_accuracy_bf16),
                ("test_accuracy_int8", report.test_accuracy_int8),
                ("reference_test_accuracy_f32", Some(report.reference_test_accuracy_f32)),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v?)))
            .collect(),
        };
        let path = outputs.path(file).display().to_string();
        let bytes = model.to_safetensors().map_err(|e| anyhow!("{path}: {e}"))?;
        outputs.write(file, |out| out.write_all(&bytes))?;
    }
    for path in outputs.commit()? {
        println!("wrote {}", path.display());
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `--device gpu` or `--compare` as the GPU back end takes it, or why the flags cannot run.
fn side_by_side(args: &TrainArgs) -> anyhow::Result<SideBySide> {
    if args.save.is_some() {
        bail!("--save keeps the accelerator's weights: it is not available with --device gpu or --compare");
    }
    let compare = match args.compare {
        true => {
            let kind = args
                .machine
                .golden()
                .ok_or_else(|| anyhow!("--compare needs a golden machine (functional or cycle)"))?;
            Some((kind, args.array.config(Dtype::Bf16)))
        }
        false => None,
    };
    let dtype = match (args.dtype, args.compare) {
        (_, true) | (TrainDtype::F32, false) => GpuDtype::F32,
        (TrainDtype::Bf16, false) => GpuDtype::Bf16,
        (TrainDtype::Int8, false) => bail!("--device gpu trains in f32 or bf16, not int8"),
    };
    Ok(SideBySide {
        compare,
        dtype,
        epochs: args.epochs(),
        batch: args.batch,
        seed: args.seed,
        dataset: args.dataset.name(),
    })
}

/// The flags `clap` cannot check alone; returns the optimizer they describe.
fn check_flags(args: &TrainArgs) -> anyhow::Result<Sgd> {
    let hidden = args.hidden.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    if args.hidden.is_empty() || args.hidden.len() >= MAX_LAYERS {
        bail!("--hidden {hidden}: give 1 to {} hidden layer widths", MAX_LAYERS - 1);
    }
    if args.hidden.iter().any(|&w| w == 0 || w > MAX_WIDTH) {
        bail!("--hidden {hidden}: every hidden layer needs a width of 1 to {MAX_WIDTH}");
    }
    if args.epochs() == 0 {
        bail!("--epochs 0: train for at least 1 epoch");
    }
    if !(1..=u16::MAX as u32).contains(&args.batch) {
        bail!("--batch {}: the batch size must be 1 to {}", args.batch, u16::MAX);
    }
    if !(args.lr().is_finite() && args.lr() > 0.0) {
        bail!("--lr {}: the learning rate must be a finite number > 0", args.lr());
    }
    if !(args.momentum.is_finite() && (0.0..1.0).contains(&args.momentum)) {
        bail!("--momentum {}: the momentum must be at least 0 and below 1", args.momentum);
    }
    if !(args.weight_decay.is_finite() && args.weight_decay >= 0.0) {
        bail!(
            "--weight-decay {}: the weight decay must be a finite number >= 0",
            args.weight_decay
        );
    }
    Ok(Sgd { lr: args.lr(), momentum: args.momentum, weight_decay: args.weight_decay })
}

fn machine_name(args: &TrainArgs) -> &'static str {
    args.machine.name()
}

/// `64-64-10`.
pub(crate) fn dashed(widths: &[u32]) -> String {
    widths.iter().map(u32::to_string).collect::<Vec<_>>().join("-")
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// One run's fixed inputs.
struct Training<'a> {
    args: &'a TrainArgs,
    split: &'a Split,
    net: &'a Net,
    graph: &'a Graph,
}

/// What a run produced.
struct Outcome {
    epochs: Vec<EpochReport>,
    /// The trained f32 weights (saved by `--save`).
    params: Params,
    test_accuracy_f32: f64,
    test_accuracy_int8: Option<f64>,
    reference_test_accuracy_f32: f64,
    accel: Option<AccelOutcome>,
}

struct AccelOutcome {
    step: systole_core::compile::CompiledStep,
    /// Steps and cycles of one epoch.
    per_epoch: (usize, u64),
    totals: Totals,
    test_accuracy_bf16: f64,
}

/// The training rows' order for each epoch, and each batch gathered into reused buffers.
struct Batches {
    order: Vec<usize>,
    rng: SplitMix64,
    size: usize,
    x: Vec<f32>,
    labels: Vec<u16>,
}

impl Batches {
    fn new(rows: usize, size: usize, seed: u64) -> Batches {
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
struct Shuffled<'a> {
    order: Batches,
    samples: &'a Samples,
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
    /// The optimizer the flags describe (what the graph was built with).
    fn sgd(&self) -> Sgd {
        let args = self.args;
        Sgd { lr: args.lr(), momentum: args.momentum, weight_decay: args.weight_decay }
    }

    fn batch(&self) -> usize {
        (self.args.batch as usize).min(self.split.train.len())
    }

    fn reference(&self) -> Executor<Plain<f32>> {
        let params = Params::init(self.net, self.args.seed);
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
        let (args, train, test) = (self.args, &self.split.train, &self.split.test);
        let order = Batches::new(train.len(), self.batch(), args.seed);
        let mut batches = Shuffled { order, samples: train };
        let mut lines =
            EpochLines { epochs: args.epochs(), config, progress: None, reports: vec![] };
        let test = (&test.x[..], &test.labels[..]);
        train_curves(trainers, args.epochs(), &mut batches, test, &self.sgd(), &mut lines)?;
        Ok(lines.reports)
    }

    /// With `--dtype f32`: the reference alone.
    fn reference_only(&self) -> anyhow::Result<Outcome> {
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
    fn on_accelerator(&self, config: ArrayConfig) -> anyhow::Result<Outcome> {
        let (args, train, test) = (self.args, &self.split.train, &self.split.test);
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
        let mut reference = CpuReference(self.reference());
        let epochs = self.fit(&mut [&mut accel, &mut reference], Some(config))?;
        let mut total = Work::default();
        for e in &epochs {
            total += Work { cycles: e.cycles.unwrap_or(0), macs: e.macs.unwrap_or(0) };
        }
        let per_epoch = epochs.last().and_then(|e| e.cycles).unwrap_or(0);
        let accel = &mut accel.trainer;
        let reference = &mut reference.0;
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
                totals: Totals::new(&config, steps as u64 * args.epochs() as u64, total),
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
        let machine = crate::machines::open(self.args.machine, &self.args.link, config, dram)?;
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
fn step_instructions(graph: &Graph, config: &ArrayConfig, batch: usize, eval_rows: usize) -> u64 {
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

fn write_json(out: &mut dyn Write, report: &RunReport) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    out.write_all(b"\n")
}

/// `systole train`'s [`Observer`]: a progress bar through each epoch, then the epoch's line
/// and report.
struct EpochLines {
    epochs: u32,
    /// The accelerator's array, when the first trainer is the accelerator.
    config: Option<ArrayConfig>,
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
        };
        if let Some(progress) = self.progress.take() {
            progress.finish(&report.line(self.epochs));
        }
        self.reports.push(report);
        Ok(())
    }
}
