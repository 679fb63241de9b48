//! The command line: one subcommand per task, and the flags they share.
//!
//! Every error exits with status 2 and one line on stderr, `error: ...`.

mod array;
mod bench;
mod board;
mod firmware;
mod gemm;
mod hdl;
#[cfg(test)]
mod help;
mod ignored;
mod link;
mod sim;
mod train;
mod values;

use clap::{Parser, Subcommand};

pub use array::{parse_mhz, ArrayArgs, DataflowArg, DramPortArg, DtypeArg, ScheduleArg};
pub use bench::{BenchArgs, BenchMachine};
pub use board::*;
pub use firmware::BlobArgs;
pub use gemm::GemmArgs;
pub use hdl::EmitArgs;
pub use ignored::note;
pub use link::LinkArgs;
pub use sim::SimArgs;
pub use train::{PredictArgs, TrainArgs};

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
    Bench(BenchArgs),
    /// The hardware: emit Verilog for an array config.
    #[command(subcommand)]
    Hdl(HdlCommand),
    /// Run a program or a GEMM on the Verilated RTL and compare it with the cycle machine.
    Sim(SimArgs),
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

#[derive(Debug, Subcommand)]
pub enum HdlCommand {
    /// Write DIR/systole_top.v (top module `systole_top`) and DIR/manifest.json.
    Emit(EmitArgs),
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
