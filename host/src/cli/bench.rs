//! `systole bench`'s flags.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{parse_mhz, ArrayArgs, DtypeArg};
use crate::bench::Suite;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which workloads: GEMMs, the training steps (the digits MLP at each --batches size, then
    /// LeNet-5 at the smallest), or both.
    #[arg(long, value_enum, default_value_t = Suite::All)]
    pub suite: Suite,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// The accelerator's datapath for the GEMM suite (training always runs in bf16): bf16
    /// unless asked. With --machine board, which of the board's builds: int8 unless asked.
    #[arg(long, value_enum)]
    pub dtype: Option<DtypeArg>,
    /// A board's achieved clock (nextpnr's fmax): adds accelerator rows at that clock.
    #[arg(long, value_name = "MHZ")]
    #[arg(value_parser = parse_mhz, allow_negative_numbers = true)]
    pub fmax_mhz: Option<f64>,
    /// GEMM sizes N: square N x N x N and skinny 64 x N x N shapes.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512,1024,2048,4096,8192")]
    pub sizes: Vec<u32>,
    /// Batch sizes of the training-step suite.
    #[arg(long, value_delimiter = ',', default_value = "64,1024")]
    pub batches: Vec<u32>,
    /// Also run bench/pytorch_mlp.py (needs `python3 -c 'import torch'` to work).
    #[arg(long)]
    pub pytorch: bool,
    /// `model`: the array of --rows/--cols at --clock-mhz (and --fmax-mhz); `board`: a board's
    /// measured build (--board), at the fmax its build achieved.
    #[arg(long, value_enum, default_value_t = BenchMachine::Model)]
    pub machine: BenchMachine,
    /// With --machine board: the board (see `systole board list`).
    #[arg(long, value_name = "NAME")]
    pub board: Option<String>,
    /// With --machine board: a `report.json` of `systole board build` instead of the board's
    /// committed measurement.
    #[arg(long, value_name = "report.json")]
    pub report: Option<PathBuf>,
    /// With --machine board: also run the GEMMs that fit the board's DRAM on the board attached
    /// to this serial port, checked exactly, with its cycle counter read back.
    #[arg(long, value_name = "PATH")]
    pub port: Option<String>,
    /// Baud rate of the board's UART (with --port; default: the build's, its clock over its
    /// report's divisor).
    #[arg(long)]
    pub baud: Option<u32>,
    /// Write every row as JSON.
    #[arg(long, value_name = "bench.json")]
    pub json: Option<PathBuf>,
    /// Print the table of a report `--json` wrote (here or on another machine, such as a GPU
    /// host's) instead of running anything.
    #[arg(long, value_name = "bench.json", conflicts_with_all = ["json", "plot", "pytorch", "port"])]
    pub show: Option<PathBuf>,
    /// Draw throughput against size and a roofline as SVG.
    #[arg(long, value_name = "bench.svg")]
    pub plot: Option<PathBuf>,
}

/// What the accelerator rows describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchMachine {
    /// The modelled array at the given clocks.
    Model,
    /// A board's measured build, at its achieved fmax.
    Board,
}
