//! `systole`: the host's command line. Each subcommand lives in its own module; this file only
//! parses and dispatches, and turns any error into one line on stderr and exit status 2.

use std::process::ExitCode;

use clap::Parser;

use systole_host::cli::{self, Cli, Command};
use systole_host::{bench, board, firmware, gemm, hdl, predict, train};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Train(args) => train::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Gemm(args) => gemm::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Hdl(cli::HdlCommand::Emit(args)) => hdl::emit(args),
        Command::Firmware(cli::FirmwareCommand::Blob(args)) => firmware::blob(args),
        Command::Board(cli::BoardCommand::List) => board::list(),
        Command::Board(cli::BoardCommand::Build(args)) => board::build(args),
        Command::Board(cli::BoardCommand::Program(args)) => board::program(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// Error messages promise one line; a library's multi-line message is folded onto it.
fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}
