//! The machine a command runs on: a golden machine, the Verilated RTL, or a board over its
//! serial port.

use anyhow::{anyhow, bail};
use systole_boards::serial::SerialStream;
use systole_core::link::{Framed, LinkMachine};
use systole_core::machine::{golden, GoldenKind};
use systole_core::{ArrayConfig, Machine};
use systole_sim::machine::RTL_UART_DIVISOR;
use systole_sim::{rtl_machine, rtl_top_config, BuildOptions, RtlMachine};

/// Which machine runs a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineKind {
    /// Instruction by instruction; cycles from the closed form.
    Functional,
    /// Cycle-accurate; cycles counted.
    Cycle,
    /// The emitted Verilog, Verilated, driven through its UART pins (built on first use).
    Rtl,
    /// An FPGA board running the accelerator, over USB serial.
    Board,
}

impl MachineKind {
    pub const ALL: [MachineKind; 4] =
        [MachineKind::Functional, MachineKind::Cycle, MachineKind::Rtl, MachineKind::Board];

    /// The golden machine this names, if it names one.
    pub fn golden(self) -> Option<GoldenKind> {
        match self {
            MachineKind::Functional => Some(GoldenKind::Functional),
            MachineKind::Cycle => Some(GoldenKind::Cycle),
            MachineKind::Rtl | MachineKind::Board => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MachineKind::Functional => "functional",
            MachineKind::Cycle => "cycle",
            MachineKind::Rtl => "rtl",
            MachineKind::Board => "board",
        }
    }
}

/// Where a board is, and how the RTL is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The board's serial port, e.g. /dev/ttyUSB1.
    pub port: Option<String>,
    /// Baud rate of the board's UART.
    pub baud: u32,
    /// Verilator threads of the RTL model (default: one).
    pub threads: Option<u32>,
}

/// The baud rate of the link to `choice`, if it is reached over one: the board's serial port at
/// `link.baud`, or the RTL's UART at its clock over [`RTL_UART_DIVISOR`].
pub fn link_baud(choice: MachineKind, link: &Link, config: &ArrayConfig) -> Option<f64> {
    match choice {
        MachineKind::Board => Some(link.baud as f64),
        MachineKind::Rtl => Some(config.clock_mhz * 1e6 / RTL_UART_DIVISOR as f64),
        MachineKind::Functional | MachineKind::Cycle => None,
    }
}

/// Opens `choice` for `config` with at least `dram` bytes of DRAM. A board must identify as an
/// accelerator of exactly this config, with enough DRAM, or it is refused with the difference.
pub fn open(
    choice: MachineKind,
    link: &Link,
    config: ArrayConfig,
    dram: usize,
) -> anyhow::Result<Box<dyn Machine>> {
    if let Some(kind) = choice.golden() {
        return golden(kind, config, dram).map_err(|e| anyhow!("array config: {e}"));
    }
    if let MachineKind::Rtl = choice {
        return Ok(Box::new(rtl(link, config, dram)?));
    }
    let port = link.port.as_deref().ok_or_else(|| anyhow!("--machine board needs --port PATH"))?;
    let stream = SerialStream::open(port, link.baud, std::time::Duration::from_millis(500))
        .map_err(|e| anyhow!("cannot open {port}: {e}"))?;
    let mut board = LinkMachine::new(Framed { stream }, config, dram);
    let id = board
        .identify(config.clock_mhz)
        .map_err(|e| anyhow!("{port}: no accelerator answers ({e})"))?;
    let got = id.config;
    // Each field the run and the board disagree on, with the flags that would match the board.
    let differs = |what: &str, want: String, have: String, flags: String| -> anyhow::Result<()> {
        if want != have {
            let fix = match flags.is_empty() {
                true => "rebuild the bitstream".to_string(),
                false => format!("pass {flags} or rebuild the bitstream"),
            };
            bail!(
                "{port}: the board's accelerator has {what} {have}, this run needs {want}; {fix}"
            );
        }
        Ok(())
    };
    let (isa, board_isa) = (systole_core::isa::ISA_VERSION, id.isa_version);
    differs("ISA version", isa.to_string(), board_isa.to_string(), String::new())?;
    differs(
        "array",
        format!("{}x{}", config.rows, config.cols),
        format!("{}x{}", got.rows, got.cols),
        format!("--rows {} --cols {}", got.rows, got.cols),
    )?;
    let (dtype, board_dtype) = (config.dtype.name(), got.dtype.name());
    differs("dtype", dtype.into(), board_dtype.into(), format!("--dtype {board_dtype}"))?;
    let (flow, board_flow) = (config.dataflow.short_name(), got.dataflow.short_name());
    differs("dataflow", flow.into(), board_flow.into(), format!("--dataflow {board_flow}"))?;
    let (spad, board_spad) = (config.spad_depth, got.spad_depth);
    let flags = format!("--spad-depth {board_spad}");
    differs("scratchpad depth", spad.to_string(), board_spad.to_string(), flags)?;
    let (acc, board_acc) = (config.acc_depth, got.acc_depth);
    let flags = format!("--acc-depth {board_acc}");
    differs("accumulator depth", acc.to_string(), board_acc.to_string(), flags)?;
    let (schedule, board_schedule) = (config.schedule.name(), got.schedule.name());
    let flags = format!("--schedule {board_schedule}");
    differs("schedule", schedule.into(), board_schedule.into(), flags)?;
    if (id.dram_bytes as usize) < dram {
        bail!(
            "{port}: this run needs {dram} bytes of DRAM, the board's accelerator has {}",
            id.dram_bytes
        );
    }
    // Programs are checked against what the board has: a `Max` on INT8 lanes built without
    // their comparator is refused by name before it is sent.
    let config = ArrayConfig { int8_max: got.int8_max, ..config };
    // Its memory commands move as many bytes as its identity says it takes.
    let board = LinkMachine::new(board.transport, config, id.dram_bytes as usize)
        .with_max_data(id.max_data())
        .named("board");
    Ok(Box::new(board))
}

/// The RTL of `config` with at least `dram` bytes of DRAM, Verilated on first use (a minute or
/// more for a large array; cached after, see `systole_sim::build`).
pub fn rtl(link: &Link, config: ArrayConfig, dram: usize) -> anyhow::Result<RtlMachine> {
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    let top = rtl_top_config(config, dram);
    let opts = BuildOptions { threads: link.threads, ..Default::default() };
    let started = std::time::Instant::now();
    let machine = rtl_machine(&top, &opts).map_err(|e| {
        anyhow!("the {}x{} {} RTL: {e}", config.rows, config.cols, config.dtype.name())
    })?;
    let took = started.elapsed().as_secs_f64();
    if took > 2.0 {
        eprintln!(
            "Verilated the {}x{} {} RTL in {took:.0} s (cached for the next run)",
            config.rows,
            config.cols,
            config.dtype.name()
        );
    }
    Ok(machine)
}
