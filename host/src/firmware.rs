//! `systole firmware blob`: a trained model (from `systole train --save`) compiled into the blob
//! a firmware embeds and runs as INT8 or BF16 inference (core::blob, docs/FIRMWARE.md).

use anyhow::anyhow;
use systole_core::compile::Int8Plan;
use systole_core::graph::Graph;

use crate::cli::{BlobArgs, DtypeArg};
use crate::model::Model;
use crate::outputs::Outputs;
use crate::train::CALIBRATION_ROWS;

pub fn blob(args: &BlobArgs) -> anyhow::Result<()> {
    let mut outputs = Outputs::new();
    outputs.reads("--model", &args.model)?;
    for path in args.dataset.files() {
        outputs.reads("--dataset", path)?;
    }
    let out = outputs.writes("-o", &args.out)?;
    let model = Model::load(&args.model)?;
    let spec = model.mlp_spec().ok_or_else(|| {
        anyhow!(
            "{}: a firmware blob runs an MLP so far; this model is {}",
            args.model.display(),
            crate::network::describe(&model.net)
        )
    })?;
    let dtype = systole_core::Dtype::from(args.dtype);
    let config = args.array.config(dtype);
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    let int8 = match args.dtype {
        DtypeArg::Bf16 => None,
        DtypeArg::Int8 => {
            // Calibrated as `systole train --dtype int8` does: on the training side of the
            // model's own split.
            let data = args.dataset.load()?;
            let split = data.split_for_model(
                model.seed,
                model.feature_scale,
                spec.inputs as usize,
                spec.classes,
            )?;
            let graph = Graph::mlp(&spec).map_err(|e| anyhow!("{}: {e}", args.model.display()))?;
            let rows = split.train.len().min(CALIBRATION_ROWS);
            let plan = Int8Plan::calibrate(&graph, &model.params, split.train.head(rows), rows)
                .map_err(|e| anyhow!("int8 calibration: {e}"))?;
            Some(plan)
        }
    };
    let bytes = systole_core::blob::build(
        &spec,
        &model.params,
        &config,
        args.batch,
        int8.as_ref(),
        model.feature_scale,
    )
    .map_err(|e| anyhow!("cannot build the blob: {e}"))?;
    outputs.write(out, |file| file.write_all(&bytes))?;
    outputs.commit()?;
    println!(
        "{}: {} bytes, {} inference of a {} MLP on a {}x{} {} array, batch {}",
        args.out.display(),
        bytes.len(),
        dtype.name(),
        spec.widths().map(|w| w.to_string()).collect::<Vec<_>>().join("-"),
        config.rows,
        config.cols,
        config.dataflow.short_name(),
        args.batch
    );
    Ok(())
}
