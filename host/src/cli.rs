//! The command line: one subcommand per task, and the flags they share.
//!
//! Every error exits with status 2 and one line on stderr, `error: ...`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use systole_core::machine::GoldenKind;
use systole_core::{ArrayConfig, Dataflow, Dtype};

/// The array the host picks when no flag says otherwise; the depths and the clock are the
/// core's own defaults, read from [`ArrayConfig::new`] rather than written here again.
const DEFAULT_ARRAY: ArrayConfig = ArrayConfig::new(16, 16, Dtype::Int8);

#[derive(Debug, Parser)]
#[command(name = "systole", version, about = "Run workloads on the Systole accelerator's machines")]
#[command(after_help = "Exit status: 0 on success, 2 on any error.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// C = A x B on a golden machine, from and to NumPy .npy files.
    Gemm(GemmArgs),
}

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
    /// Which golden machine runs the program.
    #[arg(long, value_enum, default_value_t = MachineArg::Functional)]
    pub machine: MachineArg,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Where C (M x N accumulators: int32, or float32 for bf16) is written.
    #[arg(short = 'o', long = "out", value_name = "C.npy")]
    pub out: PathBuf,
    /// Also write the run's statistics (cycles, utilization, ...) as JSON.
    #[arg(long, value_name = "stats.json")]
    pub stats: Option<PathBuf>,
}

/// The accelerator instance: what [`ArrayConfig`] holds, less the dtype.
#[derive(Debug, Args)]
pub struct ArrayArgs {
    /// PE rows (R).
    #[arg(long, default_value_t = DEFAULT_ARRAY.rows)]
    pub rows: u16,
    /// PE columns (C).
    #[arg(long, default_value_t = DEFAULT_ARRAY.cols)]
    pub cols: u16,
    /// ws: weight-stationary; os: output-stationary.
    #[arg(long, value_enum, default_value_t = DataflowArg::Ws)]
    pub dataflow: DataflowArg,
    /// Scratchpad rows.
    #[arg(long, default_value_t = DEFAULT_ARRAY.spad_depth)]
    pub spad_depth: u32,
    /// Accumulator rows.
    #[arg(long, default_value_t = DEFAULT_ARRAY.acc_depth)]
    pub acc_depth: u32,
    /// Clock frequency, for turning cycles into time.
    #[arg(long, default_value_t = DEFAULT_ARRAY.clock_mhz)]
    pub clock_mhz: f64,
}

impl ArrayArgs {
    /// The config these flags describe, not yet validated.
    pub fn config(&self, dtype: Dtype) -> ArrayConfig {
        ArrayConfig {
            rows: self.rows,
            cols: self.cols,
            dtype,
            dataflow: self.dataflow.into(),
            spad_depth: self.spad_depth,
            acc_depth: self.acc_depth,
            clock_mhz: self.clock_mhz,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DtypeArg {
    Int8,
    Bf16,
}

impl From<DtypeArg> for Dtype {
    fn from(d: DtypeArg) -> Dtype {
        match d {
            DtypeArg::Int8 => Dtype::Int8,
            DtypeArg::Bf16 => Dtype::Bf16,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DataflowArg {
    Ws,
    Os,
}

impl From<DataflowArg> for Dataflow {
    fn from(d: DataflowArg) -> Dataflow {
        match d {
            DataflowArg::Ws => Dataflow::WeightStationary,
            DataflowArg::Os => Dataflow::OutputStationary,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MachineArg {
    /// Instruction by instruction; cycles from the closed form.
    Functional,
    /// Cycle-accurate; cycles counted.
    Cycle,
}

impl From<MachineArg> for GoldenKind {
    fn from(m: MachineArg) -> GoldenKind {
        match m {
            MachineArg::Functional => GoldenKind::Functional,
            MachineArg::Cycle => GoldenKind::Cycle,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
