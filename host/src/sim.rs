//! What `systole sim` runs a program through: the host link to the simulated machine
//! ([`HostLink`]), the hidden fault injection that tests its mismatch report ([`Injected`]), and
//! the error a mismatch ends with ([`Mismatch`]).

use systole_core::isa::Instruction;
use systole_core::machine::{Region, Stats};
use systole_core::{ArrayConfig, Machine, MachineError};
use systole_sim::{RtlBuild, RtlMachine};

/// The host link that carries a program and the memories to a simulated machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostLink {
    Uart,
    Spi,
}

impl HostLink {
    pub const ALL: [HostLink; 2] = [HostLink::Uart, HostLink::Spi];

    pub fn name(self) -> &'static str {
        match self {
            HostLink::Uart => "UART",
            HostLink::Spi => "SPI",
        }
    }

    /// A fresh machine of `build` over this link.
    pub fn machine(self, build: &RtlBuild) -> Result<RtlMachine, systole_sim::SimError> {
        match self {
            HostLink::Uart => build.machine(),
            HostLink::Spi => build.machine_over_spi(),
        }
    }
}

/// A mismatch found: reported, then the command exits with status 1.
#[derive(Debug)]
pub struct Mismatch;

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the simulated machine differs from the cycle machine (see above)")
    }
}

impl std::error::Error for Mismatch {}

/// A fault injected into the RTL machine's results (the hidden `--inject-fault`).
#[derive(Clone, Copy, Debug)]
pub struct Injection {
    after: usize,
    region: Region,
    offset: usize,
}

impl Injection {
    /// `K:REGION:OFFSET`, e.g. `3:dram:0x40`.
    pub fn parse(s: &str) -> Result<Injection, String> {
        let bad = || format!("{s:?}: expected K:REGION:OFFSET, e.g. 3:dram:0x40");
        let parts: Vec<&str> = s.split(':').collect();
        let [k, region, offset] = parts.as_slice() else { return Err(bad()) };
        let region = match *region {
            "dram" => Region::Dram,
            "spad" => Region::Spad,
            "acc" => Region::Acc,
            _ => return Err(bad()),
        };
        let offset = match offset.strip_prefix("0x") {
            Some(hex) => usize::from_str_radix(hex, 16).ok(),
            None => offset.parse().ok(),
        };
        Ok(Injection {
            after: k.parse().map_err(|_| bad())?,
            region,
            offset: offset.ok_or_else(bad)?,
        })
    }
}

/// The RTL machine, with a fault injected into what it leaves when asked to.
pub struct Injected {
    pub inner: RtlMachine,
    pub fault: Option<Injection>,
}

impl Machine for Injected {
    fn config(&self) -> &ArrayConfig {
        self.inner.config()
    }
    fn name(&self) -> &'static str {
        "rtl"
    }
    fn region_size(&self, region: Region) -> usize {
        self.inner.region_size(region)
    }
    fn write(&mut self, region: Region, offset: usize, bytes: &[u8]) -> Result<(), MachineError> {
        self.inner.write(region, offset, bytes)
    }
    fn read(&mut self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError> {
        self.inner.read(region, offset, out)
    }
    fn link_traffic(&self) -> Option<systole_core::link::Traffic> {
        self.inner.link_traffic()
    }
    fn run(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        let result = self.inner.run(program);
        let body = program.iter().take_while(|i| **i != Instruction::Halt).count();
        if let Some(f) = self.fault.filter(|f| body > f.after) {
            // The whole aligned element around the byte: accumulator words, scratchpad elements.
            let width = match f.region {
                Region::Dram => 1,
                Region::Spad => self.inner.config().dtype.elem_bytes(),
                Region::Acc => 4,
            };
            let at = f.offset / width * width;
            let mut element = vec![0u8; width];
            self.inner.read(f.region, at, &mut element)?;
            element[f.offset - at] ^= 1;
            self.inner.write(f.region, at, &element)?;
        }
        result
    }
}
