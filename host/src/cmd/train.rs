//! `systole train`: the flags checked and turned into a run's [`Settings`], the data set and
//! model resolved, then the training itself ([`crate::train`]) or the GPU's
//! ([`crate::gpu::train`]), and the run's lines, report and saved model.

use std::time::Instant;

use anyhow::{anyhow, bail};
use systole_core::compile::{check_lowered, CompileError};
use systole_core::graph::{Graph, Sgd, MAX_LAYERS, MAX_WIDTH};
use systole_core::isa::Instruction;
use systole_core::layers::Shape;
use systole_core::params::ParamShapes;
use systole_core::Dtype;

use crate::cli::TrainArgs;
use crate::fit::EVAL_ROWS;
use crate::gpu::train::SideBySide;
use crate::gpu::GpuDtype;
use crate::limits::check_memory;
use crate::model::Model;
use crate::network::describe;
use crate::outputs::Outputs;
use crate::report::{self, DatasetReport, RunConfig, RunReport, StepReport};
use crate::train::{
    reference_bytes, step_instructions, write_json, Batches, Device, Outcome, Settings, Shuffled,
    Training,
};
use crate::train_dtype::TrainDtype;

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
            args.machine.name(),
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

    let settings = Settings {
        dtype: args.dtype,
        machine: args.machine,
        link: args.link.link(),
        epochs: args.epochs(),
        batch: args.batch,
        sgd,
        seed: args.seed,
    };
    let training = Training { settings: &settings, split: &split, net: &net, graph: &graph };
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
        machine: accel.map(|_| args.machine.name()),
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

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}
