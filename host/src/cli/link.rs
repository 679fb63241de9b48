//! Where `--machine board` is, and how `--machine rtl` is built.

use clap::Args;

use crate::machines::Link;

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

impl LinkArgs {
    pub fn link(&self) -> Link {
        Link { port: self.port.clone(), baud: self.baud, threads: self.threads }
    }
}
