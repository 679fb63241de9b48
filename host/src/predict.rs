//! `systole predict`: a model saved by `systole train --save`, reloaded and run by the f32 CPU
//! reference on the test side of the same deterministic split (the seed comes from the model's
//! metadata), so it reproduces the training run's `test_accuracy_f32` exactly.

use std::io::Write;

use anyhow::{anyhow, Context};
use serde::Serialize;

use crate::cli::PredictArgs;
use crate::model::{accuracy, f32_predictions, Model};
use crate::staged::StagedFile;

/// What `--json` writes.
#[derive(Serialize)]
struct PredictReport {
    model: String,
    dataset: String,
    widths: Vec<u32>,
    seed: u64,
    feature_scale: f32,
    test_rows: usize,
    correct: usize,
    test_accuracy_f32: f64,
    /// One per test sample, in file order.
    predictions: Vec<Prediction>,
}

#[derive(Serialize)]
struct Prediction {
    /// The sample's data row in the file, 0-based, header not counted.
    row: usize,
    label: u16,
    predicted: u16,
}

pub fn run(args: &PredictArgs) -> anyhow::Result<()> {
    let model = Model::load(&args.model)?;
    let data = args.dataset.load()?;
    let split = data.split_for_model(
        model.seed,
        model.feature_scale,
        model.spec.inputs as usize,
        model.spec.classes,
    )?;
    let mut json_file = args
        .json
        .as_deref()
        .map(|p| StagedFile::beside(p).with_context(|| format!("cannot create {}", p.display())))
        .transpose()?;

    let test = &split.test;
    let predicted = f32_predictions(&model.spec, &model.params, test);
    let correct = predicted.iter().zip(&test.labels).filter(|(p, l)| p == l).count();
    let test_accuracy_f32 = accuracy(&predicted, &test.labels);
    let widths: Vec<u32> = model.spec.widths().collect();
    let dashed = widths.iter().map(u32::to_string).collect::<Vec<_>>().join("-");
    println!(
        "{}: {dashed} MLP ({} trained, seed {}); {} test split: f32 CPU-reference test accuracy \
         {:.2}% ({correct}/{})",
        args.model.display(),
        model.dtype,
        model.seed,
        args.dataset,
        100.0 * test_accuracy_f32,
        test.len()
    );

    if let (Some(file), Some(path)) = (json_file.as_mut(), args.json.as_deref()) {
        let report = PredictReport {
            model: args.model.display().to_string(),
            dataset: args.dataset.name(),
            widths,
            seed: model.seed,
            feature_scale: model.feature_scale,
            test_rows: test.len(),
            correct,
            test_accuracy_f32,
            predictions: test
                .rows
                .iter()
                .zip(&test.labels)
                .zip(&predicted)
                .map(|((&row, &label), &predicted)| Prediction { row, label, predicted })
                .collect(),
        };
        let mut out = std::io::BufWriter::new(file.file());
        serde_json::to_writer_pretty(&mut out, &report)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let (Some(file), Some(path)) = (json_file, args.json.as_deref()) {
        file.commit().map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
