//! `systole`: the host's command line. Each subcommand lives in its own module; this file only
//! parses and dispatches, and turns any error into one line on stderr and exit status 2.

use std::process::ExitCode;

use clap::Parser;

use systole_host::cli::{self, Cli, Command};
use systole_host::cmd::{bench, board, firmware, gemm, hdl, predict, sim, train};

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version (status 0); no subcommand: the help, status 2.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            // clap's message, folded onto the one line every error gets; its usage hint dropped.
            let text = e.render().to_string();
            let message: Vec<&str> =
                text.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
            eprintln!("{}", message.join(" "));
            return ExitCode::from(2);
        }
    };
    systole_host::verbose::set(cli.verbose);
    let result = match &cli.command {
        Command::Train(args) => train::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Gemm(args) => gemm::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Hdl(cli::HdlCommand::Emit(args)) => hdl::emit(args),
        Command::Sim(args) => sim::run(args),
        Command::Firmware(cli::FirmwareCommand::Blob(args)) => firmware::blob(args),
        Command::Board(cli::BoardCommand::List) => board::list(),
        Command::Board(cli::BoardCommand::Build(args)) => board::build(args),
        Command::Board(cli::BoardCommand::Program(args)) => board::program(args),
        Command::Board(cli::BoardCommand::Blocks(args)) => board::blocks(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Reported in full on stdout already.
        Err(e) if e.is::<systole_host::sim::Mismatch>() => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// `systole train | head -1` should end quietly when `head` closes the pipe, as Unix tools do,
/// not panic in `println!`: Rust starts programs with SIGPIPE ignored; take the default back.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Error messages promise one line; a library's multi-line message is folded onto it.
fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}
