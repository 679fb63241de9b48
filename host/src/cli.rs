//! The command line: one subcommand per task, and the flags they share.
//!
//! Every error exits with status 2 and one line on stderr, `error: ...`.

mod board;
#[cfg(test)]
mod help;
mod ignored;

use crate::network::ModelChoice;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use systole_core::graph::Sgd;
use systole_core::machine::GoldenKind;
use systole_core::{ArrayConfig, Dataflow, DramPort, Dtype, Schedule};

use crate::dataset::Source;

pub use board::*;
pub use ignored::note;

/// The array the host picks when no flag says otherwise: 16 x 16 on the decoupled schedule,
/// the fastest machine every golden machine and the RTL run (the boards' presets keep their
/// own). The depths and the clock are the core's own defaults, read from [`ArrayConfig::new`]
/// rather than written here again.
const DEFAULT_ARRAY: ArrayConfig =
    ArrayConfig::new(16, 16, Dtype::Int8).with_schedule(Schedule::Decoupled);

#[derive(Debug, Parser)]
#[command(name = "systole", version, about = "Run workloads on the Systole accelerator's machines")]
#[command(after_help = "Exit status: 0 on success, 2 on any error; `sim` exits 1 on a mismatch.")]
pub struct Cli {
    /// Print detail beyond the results (such as every place the CUDA search looked).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a network (an MLP, LeNet-5, or a JSON model of conv, pool and dense layers) on an
    /// accelerator machine beside an f32 CPU reference, or on a CUDA GPU.
    Train(TrainArgs),
    /// Reload a model saved by `train --save` and report its test accuracy (f32, on the CPU).
    Predict(PredictArgs),
    /// C = A x B on any machine (golden, RTL, board), from and to NumPy .npy files.
    Gemm(GemmArgs),
    /// The accelerator against the CPU and a CUDA GPU on the same GEMMs and training steps
    /// (the digits MLP and LeNet-5).
    Bench(crate::bench::BenchArgs),
    /// The hardware: emit Verilog for an array config.
    #[command(subcommand)]
    Hdl(HdlCommand),
    /// Run a program or a GEMM on the Verilated RTL and compare it with the cycle machine.
    Sim(crate::sim::SimArgs),
    /// FPGA dev boards: list them, build a bitstream, program a board.
    #[command(subcommand)]
    Board(BoardCommand),
    /// Firmware support: compile a trained model into the blob a microcontroller runs.
    #[command(subcommand)]
    Firmware(FirmwareCommand),
}

#[derive(Debug, Subcommand)]
pub enum FirmwareCommand {
    /// Write a model blob: program, weights image and scales for one array config.
    Blob(BlobArgs),
}

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

#[derive(Debug, Subcommand)]
pub enum HdlCommand {
    /// Write DIR/systole_top.v (top module `systole_top`) and DIR/manifest.json.
    Emit(EmitArgs),
}

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
    #[arg(long, value_enum, default_value_t = MachineArg::Functional)]
    pub machine: MachineArg,
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

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// `digits` (built in: 1,797 8x8 handwritten digits), `mnist` (built in: MNIST's 70,000
    /// 28x28 digits), a CSV file (features, then an integer label 0-255 in the last column; an
    /// optional header row) or an IDX pair `IMAGES,LABELS` (MNIST's format, plain or gzipped).
    #[arg(long, default_value = "digits", value_name = "digits|mnist|PATH.csv|IMAGES,LABELS", value_parser = Source::parse)]
    pub dataset: Source,
    /// The network: `mlp` (dense layers of the --hidden widths), `lenet` (LeNet-5 for 1 x 28 x
    /// 28 images: --dataset mnist) or a JSON model file of an input shape and a layer list
    /// (conv2d, maxpool2d, avgpool2d, relu, flatten, dense; README "Networks"). The
    /// accelerator trains convolutions and pooling in BF16 (pooling whose windows tile its
    /// input, not of the network's input), and --dtype int8 runs the trained network, max and
    /// average pooling included, in INT8 inference; other networks train on the f32 CPU
    /// reference (--dtype f32) and the GPU (--device gpu).
    #[arg(long, default_value = "mlp", value_name = "mlp|lenet|PATH.json", value_parser = ModelChoice::parse)]
    pub model: ModelChoice,
    /// Hidden layer widths of `--model mlp`, input side first (at most 7 layers).
    #[arg(long, value_delimiter = ',', default_value = "64", value_name = "W[,W...]")]
    pub hidden: Vec<u32>,
    /// bf16: train on the accelerator (and the f32 reference beside it); int8: the same, then
    /// quantize and run INT8 inference; f32: train only the f32 CPU reference.
    #[arg(long, value_enum, default_value_t = TrainDtype::Bf16)]
    pub dtype: TrainDtype,
    /// Which machine trains (rtl and board: every step's programs run there).
    #[arg(long, value_enum, default_value_t = MachineArg::Functional)]
    pub machine: MachineArg,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Passes over the training split [default: 30; 6 with --model lenet].
    #[arg(long)]
    pub epochs: Option<u32>,
    /// Rows per SGD step (the last batch of an epoch may be smaller).
    #[arg(long, default_value_t = 32)]
    pub batch: u32,
    /// SGD learning rate [default: 0.05; 0.01 with --model lenet].
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f32>,
    /// SGD momentum, 0 <= m < 1 (0: plain SGD).
    #[arg(long, default_value_t = Sgd::DEFAULT.momentum, allow_negative_numbers = true)]
    pub momentum: f32,
    /// L2 penalty added to every gradient: g + wd * p.
    #[arg(long, default_value_t = Sgd::DEFAULT.weight_decay, allow_negative_numbers = true)]
    pub weight_decay: f32,
    /// Seeds the split, the shuffles and the initial weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the whole run (config, per-epoch figures, per-op cycles, accuracies) as JSON.
    #[arg(long, value_name = "run.json")]
    pub json: Option<PathBuf>,
    /// Save the trained f32 weights as safetensors, in PyTorch's layouts (nn.Linear's
    /// out x in, nn.Conv2d's out x in x kh x kw), with the network and the run's facts.
    #[arg(long, value_name = "model.safetensors")]
    pub save: Option<PathBuf>,
    /// accel: a golden machine (--dtype bf16|int8); gpu: a CUDA GPU, beside the f32 CPU
    /// reference (--dtype f32|bf16: the precision of its matrix products).
    #[arg(long, value_enum, default_value_t = Device::Accel)]
    pub device: Device,
    /// Train the accelerator (bf16) and the GPU (f32; the f32 CPU reference when there is no
    /// GPU) from the same weights on the same batches, and print both curves side by side.
    #[arg(long)]
    pub compare: bool,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// A model written by `systole train --save`.
    #[arg(long, value_name = "model.safetensors")]
    pub model: PathBuf,
    /// The data set to split (with the model's seed) and predict the test side of: digits,
    /// mnist, a CSV file or an IDX pair, as `train --dataset` takes it.
    #[arg(long, default_value = "digits", value_name = "digits|mnist|PATH.csv|IMAGES,LABELS", value_parser = Source::parse)]
    pub dataset: Source,
    /// Write the accuracy and every test row's prediction as JSON.
    #[arg(long, value_name = "out.json")]
    pub json: Option<PathBuf>,
}

/// What `train` trains in.
/// Where `systole train` trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Device {
    /// A machine of the accelerator (with the f32 CPU reference beside it).
    Accel,
    /// A CUDA GPU (with the f32 CPU reference beside it); `--dtype f32|bf16` is the precision
    /// of its matrix products.
    Gpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TrainDtype {
    Bf16,
    Int8,
    F32,
}

impl TrainDtype {
    pub fn name(self) -> &'static str {
        match self {
            TrainDtype::Bf16 => "bf16",
            TrainDtype::Int8 => "int8",
            TrainDtype::F32 => "f32",
        }
    }
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
    /// 111).
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
}

impl From<DramPortArg> for DramPort {
    fn from(p: DramPortArg) -> DramPort {
        match p {
            DramPortArg::Row => DramPort::Row,
            DramPortArg::Byte => DramPort::Byte,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MachineArg {
    /// Instruction by instruction; cycles from the closed form.
    Functional,
    /// Cycle-accurate; cycles counted.
    Cycle,
    /// The emitted Verilog, Verilated, driven through its UART pins (built on first use).
    Rtl,
    /// An FPGA board running the accelerator, over USB serial (--port).
    Board,
}

impl MachineArg {
    /// The golden machine this names, if it names one.
    pub fn golden(self) -> Option<GoldenKind> {
        match self {
            MachineArg::Functional => Some(GoldenKind::Functional),
            MachineArg::Cycle => Some(GoldenKind::Cycle),
            MachineArg::Rtl | MachineArg::Board => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MachineArg::Functional => "functional",
            MachineArg::Cycle => "cycle",
            MachineArg::Rtl => "rtl",
            MachineArg::Board => "board",
        }
    }
}

/// Where `--machine board` is, and how `--machine rtl` is built.
#[derive(Debug, Args)]
pub struct LinkArgs {
    /// The board's serial port, e.g. /dev/ttyUSB1 (with --machine board).
    #[arg(long, value_name = "PATH")]
    pub port: Option<String>,
    /// Baud rate of the board's UART.
    #[arg(long, default_value_t = systole_boards::serial::DEFAULT_BAUD)]
    pub baud: u32,
    /// Verilator threads of the RTL model (with --machine rtl; default: one).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: Option<u32>,
}

impl TrainArgs {
    /// `--epochs`, or the model's default.
    pub fn epochs(&self) -> u32 {
        self.epochs.unwrap_or_else(|| self.model.default_epochs())
    }
    /// `--lr`, or the model's default.
    pub fn lr(&self) -> f32 {
        self.lr.unwrap_or_else(|| self.model.default_lr())
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        super::Cli::command().debug_assert();
    }

    /// LeNet's own defaults apply only where the command line gives no value.
    #[test]
    fn lenet_has_its_own_epochs_and_learning_rate() {
        use clap::Parser;
        let train =
            |args: &[&str]| match super::Cli::parse_from([&["systole", "train"], args].concat())
                .command
            {
                super::Command::Train(t) => (t.epochs(), t.lr()),
                _ => unreachable!("a train command"),
            };
        assert_eq!(train(&[]), (30, 0.05));
        assert_eq!(train(&["--model", "lenet"]), (6, 0.01));
        assert_eq!(train(&["--model", "lenet", "--epochs", "2", "--lr", "0.1"]), (2, 0.1));
    }

    /// `--clock-mhz 1e-320` printed `inf us`, and `1e-300` a time of 300 digits.
    #[test]
    fn clock_flags_hold_to_the_core_clock_range() {
        use super::parse_mhz;
        assert_eq!(parse_mhz("12"), Ok(12.0));
        assert_eq!(parse_mhz("0.001"), Ok(0.001));
        assert_eq!(parse_mhz("10000"), Ok(10_000.0));
        let refused = [
            ("1e-320", "1e-320"),
            ("1e-300", "1e-300"),
            ("0", "0"),
            ("-1", "-1"),
            ("0.0009", "9e-4"),
            ("10001", "10001"),
            ("inf", "inf"),
            ("NaN", "NaN"),
        ];
        for (bad, shown) in refused {
            let message = format!("clock_mhz = {shown}: must be 0.001 to 10000 MHz");
            assert_eq!(parse_mhz(bad), Err(message), "{bad}");
        }
        assert_eq!(parse_mhz("fast"), Err("not a number of MHz".to_string()));
    }
}
