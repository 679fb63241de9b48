//! `systole firmware blob`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::{ArrayArgs, DtypeArg};
use crate::dataset::Source;

#[derive(Debug, Args)]
pub struct BlobArgs {
    /// A model written by `systole train --save`.
    #[arg(long, value_name = "model.safetensors")]
    pub model: PathBuf,
    /// int8 (calibrated on the model's training split) or bf16.
    #[arg(long, value_enum, default_value_t = DtypeArg::Int8)]
    pub dtype: DtypeArg,
    /// The data set the model was trained on, for INT8 calibration: digits, mnist, a CSV file
    /// or an IDX pair, as `train --dataset` takes it.
    #[arg(long, default_value = "digits", value_name = "digits|mnist|PATH.csv|IMAGES,LABELS", value_parser = Source::parse)]
    pub dataset: Source,
    /// Samples per inference (1 to 65535).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub batch: u16,
    /// A board's default build in --dtype (`systole board list`): its array, memories and clock
    /// instead of the array flags, and the blob refused if it needs more DRAM than the board has.
    #[arg(long, value_name = "NAME")]
    pub board: Option<String>,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Where the blob is written.
    #[arg(short = 'o', long = "out", value_name = "model.blob")]
    pub out: PathBuf,
}
