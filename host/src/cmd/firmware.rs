//! `systole firmware blob`: a trained model (from `systole train --save`) compiled into the blob
//! a firmware embeds and runs as INT8 or BF16 inference (core::blob, docs/FIRMWARE.md). MLPs
//! and image models alike: an image model's blob says where each pixel goes.

use anyhow::{anyhow, bail};
use systole_core::compile::{check_lowered, CompileError, Int8Plan};
use systole_core::graph::Graph;
use systole_core::layers::Shape;

use crate::cli::{BlobArgs, DtypeArg};
use crate::model::Model;
use crate::network::describe;
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
    let net = &model.net;
    let graph = Graph::network(net).map_err(|e| anyhow!("{}: {e}", args.model.display()))?;
    let dtype = systole_core::Dtype::from(args.dtype);
    let board = args.board.as_deref().map(systole_boards::board::named).transpose()?;
    let config = match &board {
        Some(b) => b.preset_config(dtype).ok_or_else(|| {
            anyhow!("--board {}: no {} build fits it (`systole board list`)", b.name, dtype.name())
        })?,
        None => args.array.config(dtype),
    };
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    // What the array cannot run is named before the data set is read.
    check_lowered(&graph, &config).map_err(|e| match e {
        CompileError::NotLowered { .. } if dtype == systole_core::Dtype::Int8 => {
            anyhow!("{}: {e}; a blob of this model needs --dtype bf16", args.model.display())
        }
        e => anyhow!("{}: {e}", args.model.display()),
    })?;
    let int8 = match args.dtype {
        DtypeArg::Bf16 => None,
        DtypeArg::Int8 => {
            // Calibrated as `systole train --dtype int8` does: on the training side of the
            // model's own split, images channels-last as every machine runs them.
            let data = args.dataset.load()?;
            let mut split = data.into_split_for_model(
                model.seed,
                model.feature_scale,
                net.input.elements() as usize,
                net.classes(),
            )?;
            if let Shape::Image { c, h, w } = net.input {
                split.to_channels_last(c as usize, h as usize * w as usize);
            }
            let rows = split.train.len().min(CALIBRATION_ROWS);
            let plan = Int8Plan::calibrate(&graph, &model.params, split.train.head(rows), rows)
                .map_err(|e| anyhow!("int8 calibration: {e}"))?;
            Some(plan)
        }
    };
    let bytes = systole_core::blob::build(
        net,
        &model.params,
        &config,
        args.batch,
        int8.as_ref(),
        model.feature_scale,
    )
    .map_err(|e| anyhow!("cannot build the blob: {e}"))?;
    if let Some(b) = &board {
        let needs = systole_core::blob::Blob::parse(&bytes)
            .map_err(|e| anyhow!("the built blob does not parse: {e}"))?
            .target
            .dram_bytes as usize;
        if needs > b.memories.dram_bytes {
            bail!(
                "--board {}: the blob needs {needs} bytes of DRAM (batch {}), the board's \
                 accelerator has {}",
                b.name,
                args.batch,
                b.memories.dram_bytes
            );
        }
    }
    outputs.write(out, |file| file.write_all(&bytes))?;
    outputs.commit()?;
    let kind = if net.mlp_widths().is_some() { "MLP" } else { "network" };
    println!(
        "{}: {} bytes, {} inference of a {} {kind} on a {}x{} {} array{}, batch {}",
        args.out.display(),
        bytes.len(),
        dtype.name(),
        describe(net),
        config.rows,
        config.cols,
        config.dataflow.short_name(),
        board.map(|b| format!(" ({}'s default build)", b.name)).unwrap_or_default(),
        args.batch
    );
    Ok(())
}
