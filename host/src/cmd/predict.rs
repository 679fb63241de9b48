//! `systole predict`: a model saved by `systole train --save`, reloaded and run by the f32 CPU
//! reference on the test side of the same deterministic split (the seed comes from the model's
//! metadata), so it reproduces the training run's `test_accuracy_f32` exactly.

use serde::Serialize;
use systole_core::graph::Graph;

use crate::cli::PredictArgs;
use crate::limits::check_memory;
use crate::model::{accuracy, f32_predictions, Model};
use crate::network::describe;
use crate::outputs::Outputs;
use systole_core::layers::Shape;

/// What `--json` writes.
#[derive(Serialize)]
struct PredictReport {
    model: String,
    dataset: String,
    /// The network: an MLP's widths (`64-64-10`), else its input, layer kinds and classes.
    network: String,
    /// An MLP's `inputs, hidden..., classes` (empty for a network with other layers).
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
    let mut outputs = Outputs::new();
    outputs.reads("--model", &args.model)?;
    for path in args.dataset.files() {
        outputs.reads("--dataset", path)?;
    }
    let json_file = outputs.writes_opt("--json", args.json.as_deref())?;
    let model = Model::load(&args.model)?;
    let data = args.dataset.load()?;
    let net = &model.net;
    let mut split = data.into_split_for_model(
        model.seed,
        model.feature_scale,
        net.input.elements() as usize,
        net.classes(),
    )?;
    if let Shape::Image { c, h, w } = net.input {
        split.to_channels_last(c as usize, h as usize * w as usize);
    }
    let test = &split.test;
    // The model's shapes come from its file and the rows from the data set's: together they
    // can imply far more activations than either file holds.
    if let Ok(graph) = Graph::network(net) {
        check_memory(
            format_args!("{}: the f32 reference", args.model.display()),
            crate::train::reference_bytes(&graph, test.len().min(crate::fit::EVAL_ROWS)),
        )?;
    }
    let predicted = f32_predictions(net, &model.params, test);
    let correct = predicted.iter().zip(&test.labels).filter(|(p, l)| p == l).count();
    let test_accuracy_f32 = accuracy(&predicted, &test.labels);
    let widths = net.mlp_widths().map_or_else(Vec::new, |w| w.to_vec());
    let network = describe(net);
    let kind = if widths.is_empty() { "network" } else { "MLP" };
    println!(
        "{}: {network} {kind} ({} trained, seed {}); {} test split: f32 CPU-reference test \
         accuracy {:.2}% ({correct}/{})",
        args.model.display(),
        model.dtype,
        model.seed,
        args.dataset,
        100.0 * test_accuracy_f32,
        test.len()
    );

    if let Some(file) = json_file {
        let report = PredictReport {
            model: args.model.display().to_string(),
            dataset: args.dataset.name(),
            network,
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
