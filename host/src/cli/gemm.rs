//! `systole gemm`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::{ArrayArgs, DtypeArg, LinkArgs};
use crate::machines::MachineKind;

#[derive(Debug, Args)]
pub struct GemmArgs {
    /// A, an M x K matrix: int8 for --dtype int8, float32 for --dtype bf16.
    #[arg(long, value_name = "A.npy")]
    pub a: PathBuf,
    /// B, a K x N matrix of the same dtype as A.
    #[arg(long, value_name = "B.npy")]
    pub b: PathBuf,
    /// Datapath: int8 (int32 accumulators) or bf16 (float32 inputs rounded to bf16 on load,
    /// float32 accumulators).
    #[arg(long, value_enum)]
    pub dtype: DtypeArg,
    /// Which machine runs the program.
    #[arg(long, value_enum, default_value_t = MachineKind::Functional)]
    pub machine: MachineKind,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Where C (M x N accumulators: int32, or float32 for bf16) is written.
    #[arg(short = 'o', long = "out", value_name = "C.npy")]
    pub out: PathBuf,
    /// Also write the run's statistics (cycles, utilization, ...) as JSON.
    #[arg(long, value_name = "stats.json")]
    pub stats: Option<PathBuf>,
}
