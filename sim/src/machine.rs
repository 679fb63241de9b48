//! The RTL as a `core::Machine`: the emitted `systole_top` for a [`TopConfig`], Verilated (or
//! found in the cache), and `core::link::LinkMachine` driving it through its host interface,
//! the very packets the host and the firmware send a board.
//!
//! The link is the UART at 4 clock cycles per bit, the fastest the design takes: host traffic
//! costs the fewest simulated cycles there, and none of them is counted in a program's cycles
//! (the controller freezes while its FIFO is empty; `docs/HARDWARE.md`).

use std::path::PathBuf;

use systole_core::link::{Framed, LinkMachine};
use systole_core::ArrayConfig;
use systole_hdl::{emit, Emitted, TopConfig, TOP_MODULE};

use crate::build::{build_library, BuildOptions};
use crate::model::Model;
use crate::port::Port;
use crate::rtl::{HostLink, RtlTop, SpiLink, UartLink};
use crate::toolchain::SimError;
use systole_core::sdram::SDRAM_PART;

/// The UART divisor of RTL machines: the smallest the design allows.
pub const RTL_UART_DIVISOR: u16 = 4;

/// A `Machine` whose every instruction runs on the Verilated RTL.
pub type RtlMachine = LinkMachine<Framed<HostLink>>;

/// The hardware parameters an RTL machine is built with for `array` and a need of `dram`
/// bytes: the DRAM rounded up to a power of two (at least 64 KiB), so most runs share a few
/// cached models; the FIFO and the UART divisor fixed.
pub fn rtl_top_config(array: ArrayConfig, dram: usize) -> TopConfig {
    let dram_bytes = dram.max(systole_hdl::top::DEFAULT_DRAM_BYTES).next_power_of_two();
    TopConfig { dram_bytes, uart_divisor: RTL_UART_DIVISOR, ..TopConfig::new(array) }
}

/// [`rtl_top_config`] with exactly `dram_bytes` of DRAM (`systole sim --dram-bytes`).
pub fn rtl_top_config_exact(array: ArrayConfig, dram_bytes: usize) -> TopConfig {
    TopConfig { dram_bytes, ..rtl_top_config(array, dram_bytes) }
}

/// A Verilated `systole_top`: built once (or found in the cache), instantiated any number of
/// times, each instance a fresh accelerator out of reset.
#[derive(Clone, Debug)]
pub struct RtlBuild {
    pub top: TopConfig,
    pub library: PathBuf,
    ports: Vec<Port>,
    /// Simulated clock cycles per machine cycle: 1, or a board's divider.
    clock_ratio: u32,
    /// Cycles the instance runs after its reset before the link speaks (a board's power-on
    /// reset holds the machine a while longer).
    settle: u32,
    name: &'static str,
}

impl RtlBuild {
    /// Emits `top`'s Verilog and Verilates it, unless the cache has it.
    pub fn new(top: &TopConfig, opts: &BuildOptions) -> Result<RtlBuild, SimError> {
        let emitted = emit(top).map_err(|e| SimError::Config(e.to_string()))?;
        let ports = ports_of(&emitted);
        let library = build_library(&emitted.verilog, TOP_MODULE, &ports, opts)?;
        Ok(RtlBuild { top: *top, library, ports, clock_ratio: 1, settle: 0, name: "rtl" })
    }

    /// Verilates a board build's netlist for `top`, the machine it was built from:
    /// `verilog` is the netlist with a `systole_top` module around the board's top (its pins
    /// renamed to the machine's, `systole_boards::wrapper::sim_adapter`) that has `ports`;
    /// its clock ticks `clock_ratio` times a machine cycle (a board's divider), and its power-on
    /// reset holds the machine for up to `settle` cycles after the pin's.
    pub fn from_netlist(
        top: &TopConfig,
        verilog: &str,
        ports: Vec<Port>,
        clock_ratio: u32,
        settle: u32,
        opts: &BuildOptions,
    ) -> Result<RtlBuild, SimError> {
        let library = build_library(verilog, TOP_MODULE, &ports, opts)?;
        let clock_ratio = clock_ratio.max(1);
        Ok(RtlBuild { top: *top, library, ports, clock_ratio, settle, name: "netlist" })
    }

    /// A fresh instance's pins, after reset.
    pub fn pins(&self) -> Result<RtlTop, SimError> {
        let mut top = RtlTop::new(Model::load(&self.library, &self.ports)?)?;
        if self.top.array.dram_port == systole_core::DramPort::Sdram {
            let ratio = systole_core::sdram::clock_ratio(&SDRAM_PART, self.top.array.clock_mhz);
            top = top.with_sdram(self.top.array.clock_mhz * ratio as f64);
        }
        for _ in 0..self.settle {
            top.step();
        }
        Ok(top)
    }

    /// A fresh instance as a machine, over its UART.
    pub fn machine(&self) -> Result<RtlMachine, SimError> {
        let divisor = self.top.uart_divisor as u32 * self.clock_ratio;
        let mut link = UartLink::new(self.pins()?, divisor);
        // A status poll is answered in a few byte times; a long program is polled, not waited
        // on, so this only bounds how long a dead device takes to be declared dead.
        link.patience_bytes = 256;
        Ok(self.over(HostLink::Uart(link)))
    }

    /// A fresh instance as a machine, over its SPI slave at the fastest clock it takes (an
    /// eighth of the machine's): a byte in 64 cycles, where the UART takes ten bit times.
    pub fn machine_over_spi(&self) -> Result<RtlMachine, SimError> {
        Ok(self.over(HostLink::Spi(SpiLink::new(self.pins()?, 4 * self.clock_ratio))))
    }

    /// The machine over `link`, moving as many bytes a memory request as the build takes (a
    /// build of a revision before large requests refuses more than `BASE_DATA`).
    fn over(&self, link: HostLink) -> RtlMachine {
        LinkMachine::new(Framed { stream: link }, self.top.array, self.top.dram_bytes)
            .with_max_data(self.top.max_data())
            .named(self.name)
    }
}

/// The ports of emitted Verilog, as the model builder takes them.
pub fn ports_of(emitted: &Emitted) -> Vec<Port> {
    emitted
        .ports
        .iter()
        .map(|p| match p.direction {
            "input" => Port::input(&p.name, p.bits as u32),
            _ => Port::output(&p.name, p.bits as u32),
        })
        .collect()
}

/// Emits and Verilates `top` (or loads it from the cache): a fresh instance's pins.
pub fn verilate_top(top: &TopConfig, opts: &BuildOptions) -> Result<RtlTop, SimError> {
    RtlBuild::new(top, opts)?.pins()
}

/// The RTL machine of `top`, over its UART ([`RTL_UART_DIVISOR`] is the fastest; any divisor
/// the design takes works).
pub fn rtl_machine(top: &TopConfig, opts: &BuildOptions) -> Result<RtlMachine, SimError> {
    RtlBuild::new(top, opts)?.machine()
}

/// The pins under an RTL machine.
pub fn pins(machine: &mut RtlMachine) -> &mut RtlTop {
    machine.transport.stream.top_mut()
}

/// Clock cycles the RTL has simulated since it was built, host traffic included.
pub fn simulated_cycles(machine: &RtlMachine) -> u64 {
    machine.transport.stream.top().cycles
}
