//! The array flags every command that builds an accelerator shares, their defaults, and the
//! names of core's enums on the command line.

use clap::{Args, ValueEnum};
use systole_core::{ArrayConfig, Dataflow, DramPort, Dtype, Schedule};

/// The array the host picks when no flag says otherwise: 16 x 16 on the decoupled schedule,
/// the fastest machine every golden machine and the RTL run (the boards' presets keep their
/// own). The depths and the clock are the core's own defaults, read from [`ArrayConfig::new`]
/// rather than written here again.
pub(super) const DEFAULT_ARRAY: ArrayConfig =
    ArrayConfig::new(16, 16, Dtype::Int8).with_schedule(Schedule::Decoupled);

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
    #[arg(long, value_enum, default_value_t = DEFAULT_ARRAY.dataflow.into())]
    pub dataflow: DataflowArg,
    /// Scratchpad rows.
    #[arg(long, default_value_t = DEFAULT_ARRAY.spad_depth)]
    pub spad_depth: u32,
    /// Accumulator rows.
    #[arg(long, default_value_t = DEFAULT_ARRAY.acc_depth)]
    pub acc_depth: u32,
    /// Clock frequency, for turning cycles into time.
    #[arg(long, default_value_t = DEFAULT_ARRAY.clock_mhz, value_name = "MHZ")]
    #[arg(value_parser = parse_mhz, allow_negative_numbers = true)]
    pub clock_mhz: f64,
    /// decoupled: the units overlap under a scoreboard and matmuls stream; blocking: loads,
    /// stores and vector ops wait for an idle array, in less logic (the small boards' builds;
    /// a byte-wide DRAM port, a single-port scratchpad and BF16 PEs of 3 or 4 stages need it).
    #[arg(long, value_enum, default_value_t = DEFAULT_ARRAY.schedule.into())]
    pub schedule: ScheduleArg,
    /// Pipeline registers in the requantize and cast lanes (0 to 3; the boards' builds say
    /// theirs): each `Requantize`, `CastBf16` and `StoreBf16` takes as many cycles more.
    #[arg(long, default_value_t = DEFAULT_ARRAY.convert_stages)]
    pub convert_stages: u8,
    /// Cycles each `Requantize` row takes in the conversion lanes: 1, or 4 on lanes with one
    /// 16 x 16 multiplier each (the boards' builds say theirs).
    #[arg(long, default_value_t = DEFAULT_ARRAY.requant_cycles)]
    pub requant_cycles: u8,
    /// Cycles each `Scale` or `Axpy` row takes in the BF16 accumulator lanes: 1, 2 on lanes
    /// that register their product, or 3 on lanes that register their multiplier's halves
    /// apart too (the boards' builds say theirs).
    #[arg(long, default_value_t = DEFAULT_ARRAY.scale_cycles)]
    pub scale_cycles: u8,
    /// Cycles each PE takes from its operands to its sum: 1, 2 on PEs that register their
    /// product, 3 on BF16 PEs that register their f32 add's aligned operands too, or 4 on ones
    /// that register its normalised sum as well (the boards' builds say theirs).
    #[arg(long, default_value_t = DEFAULT_ARRAY.pe_stages)]
    pub pe_stages: u8,
    /// Cycles a BF16 accumulator lane's f32 add takes: 1, 2 on lanes that register their
    /// aligned operands, or 3 on ones that register the normalised sum too (the boards' builds
    /// say theirs).
    #[arg(long, default_value_t = DEFAULT_ARRAY.add_stages)]
    pub add_stages: u8,
    /// Whether INT8 accumulator lanes have a comparator (`Max`, for max pooling in INT8
    /// inference; the boards' builds say theirs).
    #[arg(long, default_value_t = DEFAULT_ARRAY.int8_max, action = clap::ArgAction::Set, value_name = "true|false")]
    pub int8_max: bool,
    /// Registers after each memory's read port: 0, or 1 for memories that register their read
    /// word once more (the ECP5 block RAM's output register), which makes every instruction a
    /// cycle longer (docs/DECISIONS.md 106).
    #[arg(long, default_value_t = DEFAULT_ARRAY.read_stages)]
    pub read_stages: u8,
    /// How the DRAM moves bytes: row, a row of a transfer a cycle; byte, a byte a cycle, for
    /// parts too small for the row port's banks (the blocking schedule only; docs/DECISIONS.md
    /// 111); sdram, the ULX3S's 32 MB SDRAM, a 16-bit word a cycle in an open row, with its
    /// activates, precharges and refreshes (the decoupled schedule, the golden machines only
    /// so far; docs/DECISIONS.md 141).
    #[arg(long, value_enum, default_value_t = DEFAULT_ARRAY.dram_port.into())]
    pub dram_port: DramPortArg,
    /// Whether the scratchpad is a single-port memory (the iCE40 UP5K's SPRAM): `LoadWeights`
    /// then waits for the matmul's reads and `Matmul` for the weight loader, and each `Load` and
    /// `Requantize` takes a cycle more (weight-stationary, blocking schedule only).
    #[arg(long, default_value_t = DEFAULT_ARRAY.single_port_spad, action = clap::ArgAction::Set, value_name = "true|false")]
    pub single_port_spad: bool,
}

/// Parses a clock flag (`--clock-mhz`, `--fmax-mhz`): a number of MHz in the range core allows
/// an [`ArrayConfig`] ([`ArrayConfig::check_clock`], in core's words), so a clock that would
/// print as `inf us` or as hundreds of digits is refused with the flag's name.
pub fn parse_mhz(s: &str) -> Result<f64, String> {
    let mhz: f64 = s.trim().parse().map_err(|_| "not a number of MHz".to_string())?;
    ArrayConfig::check_clock(mhz).map(|()| mhz).map_err(|e| e.to_string())
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
            schedule: self.schedule.into(),
            convert_stages: self.convert_stages,
            requant_cycles: self.requant_cycles,
            scale_cycles: self.scale_cycles,
            pe_stages: self.pe_stages,
            int8_max: self.int8_max,
            add_stages: self.add_stages,
            read_stages: self.read_stages,
            dram_port: self.dram_port.into(),
            single_port_spad: self.single_port_spad,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DramPortArg {
    Row,
    Byte,
    Sdram,
}

impl From<DramPortArg> for DramPort {
    fn from(p: DramPortArg) -> DramPort {
        match p {
            DramPortArg::Row => DramPort::Row,
            DramPortArg::Byte => DramPort::Byte,
            DramPortArg::Sdram => DramPort::Sdram,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScheduleArg {
    Blocking,
    Decoupled,
}

impl From<DramPort> for DramPortArg {
    fn from(p: DramPort) -> DramPortArg {
        match p {
            DramPort::Row => DramPortArg::Row,
            DramPort::Byte => DramPortArg::Byte,
            DramPort::Sdram => DramPortArg::Sdram,
        }
    }
}

impl From<ScheduleArg> for Schedule {
    fn from(s: ScheduleArg) -> Schedule {
        match s {
            ScheduleArg::Blocking => Schedule::Blocking,
            ScheduleArg::Decoupled => Schedule::Decoupled,
        }
    }
}

impl From<Schedule> for ScheduleArg {
    fn from(s: Schedule) -> ScheduleArg {
        match s {
            Schedule::Blocking => ScheduleArg::Blocking,
            Schedule::Decoupled => ScheduleArg::Decoupled,
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

impl From<Dataflow> for DataflowArg {
    fn from(d: Dataflow) -> DataflowArg {
        match d {
            Dataflow::WeightStationary => DataflowArg::Ws,
            Dataflow::OutputStationary => DataflowArg::Os,
        }
    }
}

impl From<DataflowArg> for Dataflow {
    fn from(d: DataflowArg) -> Dataflow {
        match d {
            DataflowArg::Ws => Dataflow::WeightStationary,
            DataflowArg::Os => Dataflow::OutputStationary,
        }
    }
}
