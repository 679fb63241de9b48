//! `systole sim`'s flags.

use std::path::PathBuf;

use clap::Args;
use systole_core::tiler::GemmShape;

use super::{ArrayArgs, DtypeArg};
use crate::sim::{HostLink, Injection};

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Datapath.
    #[arg(long, value_enum, required_unless_present = "netlist")]
    pub dtype: Option<DtypeArg>,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Run on a board build's synthesized netlist instead of the emitted RTL: DIR is what
    /// `systole board build` wrote, and the machine is the one its report.json records (the
    /// array options do not apply). Each cell takes Yosys' model of it (the ECP5's block RAM,
    /// multiplier and PLL, which Yosys only declares, this simulator's); the link is the
    /// board's UART at its divisor.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["dtype", "ArrayArgs", "dram_bytes"])]
    pub netlist: Option<PathBuf>,
    /// The host link that carries the program and the memories: the UART (what a board's USB
    /// serial port drives), or the SPI slave at an eighth of the machine's clock, a byte in 64
    /// cycles (a board's UART takes 1,760 and more: the faster way through a netlist).
    #[arg(long, value_enum, default_value_t = HostLink::Uart)]
    pub link: HostLink,
    /// A program file: 16-byte little-endian instruction words (`--save-program` writes one).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["gemm", "random"],
        conflicts_with_all = ["gemm", "random"]
    )]
    pub program: Option<PathBuf>,
    /// A tiled GEMM, M x K x N, on the random operands DRAM starts with.
    #[arg(long, value_name = "MxKxN", value_parser = parse_shape, conflicts_with = "random")]
    pub gemm: Option<GemmShape>,
    /// A random valid program from --seed (core's `check::random_program`, what the
    /// conformance tests run): up to 24 instructions of every kind the machine has, on random
    /// memories.
    #[arg(long)]
    pub random: bool,
    /// Seeds the memories every machine starts from (and a --random program).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// DRAM bytes of the simulated accelerator (default: enough for the GEMM, at least 64 KiB,
    /// rounded up to a power of two). Every memory is loaded and compared whole, so small
    /// memories (this, --spad-depth, --acc-depth) make a run quicker.
    #[arg(long, value_name = "BYTES")]
    pub dram_bytes: Option<usize>,
    /// Write a VCD: of the whole run, or on a mismatch of the last cycles of the first
    /// differing prefix (default there: systole-mismatch.vcd).
    #[arg(long, value_name = "out.vcd")]
    pub vcd: Option<PathBuf>,
    /// Cycles a mismatch's VCD covers, ending where the differing prefix ends.
    #[arg(long, default_value_t = 4000, value_name = "N")]
    pub vcd_cycles: u64,
    /// Verilator threads of the model (default: one).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: Option<u32>,
    /// Write the program that runs (e.g. a GEMM's) as a program file.
    #[arg(long, value_name = "FILE")]
    pub save_program: Option<PathBuf>,
    /// Write the run's figures and the comparison as JSON.
    #[arg(long, value_name = "sim.json")]
    pub json: Option<PathBuf>,
    /// Self-test of the mismatch report: flip bit 0 of this byte of the RTL's memory, REGION
    /// (dram, spad, acc) at OFFSET, after any run of more than K instructions.
    #[arg(long, value_name = "K:REGION:OFFSET", value_parser = Injection::parse, hide = true)]
    pub inject_fault: Option<Injection>,
}

fn parse_shape(s: &str) -> Result<GemmShape, String> {
    let dims: Vec<&str> = s.split(['x', 'X']).collect();
    let bad = || format!("{s:?}: expected MxKxN with each dimension 1 to 65535, e.g. 64x96x32");
    let [m, k, n] = dims.as_slice() else { return Err(bad()) };
    let dim = |d: &str| d.trim().parse::<u32>().ok().filter(|v| (1..=65535).contains(v));
    match (dim(m), dim(k), dim(n)) {
        (Some(m), Some(k), Some(n)) => Ok(GemmShape { m, k, n }),
        _ => Err(bad()),
    }
}
