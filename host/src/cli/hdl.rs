//! `systole hdl emit`'s flags.

use std::path::PathBuf;

use clap::Args;

use super::array::{parse_mhz, DEFAULT_ARRAY};
use super::{DataflowArg, DtypeArg, ScheduleArg};

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// PE rows (R).
    #[arg(long, default_value_t = DEFAULT_ARRAY.rows)]
    pub rows: u16,
    /// PE columns (C).
    #[arg(long, default_value_t = DEFAULT_ARRAY.cols)]
    pub cols: u16,
    /// Datapath.
    #[arg(long, value_enum)]
    pub dtype: DtypeArg,
    /// ws: weight-stationary; os: output-stationary.
    #[arg(long, value_enum, default_value_t = DEFAULT_ARRAY.dataflow.into())]
    pub dataflow: DataflowArg,
    /// Scratchpad rows.
    #[arg(long, default_value_t = DEFAULT_ARRAY.spad_depth)]
    pub spad_depth: u32,
    /// Accumulator rows.
    #[arg(long, default_value_t = DEFAULT_ARRAY.acc_depth)]
    pub acc_depth: u32,
    /// The clock the design is built for (sets the default UART divisor).
    #[arg(long, default_value_t = DEFAULT_ARRAY.clock_mhz, value_name = "MHZ")]
    #[arg(value_parser = parse_mhz, allow_negative_numbers = true)]
    pub clock_mhz: f64,
    /// DRAM bytes (on-chip memory the host link writes).
    #[arg(long, default_value_t = systole_hdl::top::DEFAULT_DRAM_BYTES)]
    pub dram_bytes: usize,
    /// Instruction FIFO depth, in words.
    #[arg(long, default_value_t = systole_hdl::top::DEFAULT_FIFO_DEPTH)]
    pub fifo_depth: usize,
    /// System clock cycles per UART bit (default: 115200 baud at --clock-mhz).
    #[arg(long)]
    pub uart_divisor: Option<u16>,
    /// decoupled: the units overlap under a scoreboard and matmuls stream; blocking: loads,
    /// stores and vector ops wait for an idle array, in less logic (docs/HARDWARE.md).
    #[arg(long, value_enum, default_value_t = DEFAULT_ARRAY.schedule.into())]
    pub schedule: ScheduleArg,
    /// Pipeline registers in the requantize and cast lanes (0 to 3): each `Requantize`,
    /// `CastBf16` and `StoreBf16` takes as many cycles more, for a shorter clock period.
    #[arg(long, default_value_t = DEFAULT_ARRAY.convert_stages)]
    pub convert_stages: u8,
    /// Cycles each requantized row takes in the INT8 conversion lanes: 1 (a 32 x 32
    /// multiplier per lane) or 4 (one 16 x 16 multiplier per lane, a quarter of the logic).
    #[arg(long, default_value_t = DEFAULT_ARRAY.requant_cycles)]
    pub requant_cycles: u8,
    /// Cycles each `Scale` or `Axpy` row takes in the BF16 accumulator lanes: 1, 2 with the
    /// lanes' product registered, or 3 with the multiplier's halves registered apart too (a
    /// shorter clock period each).
    #[arg(long, default_value_t = DEFAULT_ARRAY.scale_cycles)]
    pub scale_cycles: u8,
    /// Cycles each PE takes from its operands to its sum: 1, or 2 with the product registered
    /// (a shorter clock period; results leave the array a cycle later), or 3 with the f32 add's
    /// aligned operands registered too (BF16 weight-stationary blocking machines: results
    /// `rows + 1` cycles later), or 4 with its normalised sum registered as well (`2 rows + 1`).
    #[arg(long, default_value_t = DEFAULT_ARRAY.pe_stages)]
    pub pe_stages: u8,
    /// Cycles a BF16 accumulator lane's f32 add takes: 1, or 2 with its aligned operands
    /// registered, or 3 with its normalised sum registered too (a shorter clock period each;
    /// results land a cycle later, and adding vector rows take a cycle more, for each).
    #[arg(long, default_value_t = DEFAULT_ARRAY.add_stages)]
    pub add_stages: u8,
    /// Whether INT8 accumulator lanes have a comparator (`Max`, for max pooling in INT8
    /// inference).
    #[arg(long, default_value_t = DEFAULT_ARRAY.int8_max, action = clap::ArgAction::Set, value_name = "true|false")]
    pub int8_max: bool,
    /// The revision of the RTL to emit, 1 to the latest (the default): each computes the same
    /// bits in the same cycles in a different netlist (docs/DECISIONS.md 118).
    #[arg(long, value_name = "N", default_value_t = systole_hdl::RTL_REVISION)]
    pub rtl_revision: u8,
    /// Output directory (created if missing).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
}
