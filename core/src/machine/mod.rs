//! Machines: anything that runs a [`Program`](crate::isa::Instruction) and must agree with the
//! golden model.
//!
//! A machine has three memories, addressed in bytes (little-endian):
//!
//! * [`Region::Dram`]: the host-visible main memory that `Load` gathers from and `Store` writes.
//! * [`Region::Spad`]: `spad_depth` rows of `spad_width` elements (1 byte each for INT8, 2 for
//!   BF16); byte offset `(row * spad_width + e) * elem_bytes`.
//! * [`Region::Acc`]: `acc_depth` rows of `cols` 32-bit words; byte offset `(row * cols + e) * 4`.
//!
//! [`Machine::run`] validates the whole program first ([`validate_program`]) and executes nothing
//! if any instruction is invalid.

pub mod traffic;
pub use traffic::Traffic;
mod program;
pub use program::{check_instruction, validate_program, ProgramError, ProgramErrorKind};

#[cfg(feature = "alloc")]
mod memories;
#[cfg(feature = "alloc")]
pub use memories::Memories;

#[cfg(feature = "alloc")]
pub mod cycle;
#[cfg(feature = "alloc")]
pub mod functional;

use crate::config::ArrayConfig;
use crate::fault::LinkFault;
pub use crate::fault::{ExecErrorKind, Region};
use crate::isa::Instruction;

/// What one run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stats {
    /// Clock cycles from the first dispatch to `Halt`, inclusive; `None` on machines that do not
    /// model time (the functional machine).
    pub cycles: Option<u64>,
    /// Useful multiply-accumulates: those on real (not zero-padded) rows and columns of a tile.
    pub macs: u64,
    /// Instructions dispatched, `Halt` included.
    pub instructions: u64,
    /// Cycles in which the array was busy with a matmul (fill, stream, drain).
    pub array_cycles: Option<u64>,
}

impl Stats {
    /// Useful MACs over the peak the array could have done in the same cycles.
    pub fn utilization(&self, config: &ArrayConfig) -> Option<f64> {
        let cycles = self.cycles?;
        if cycles == 0 {
            return Some(0.0);
        }
        Some(self.macs as f64 / (config.pe_count() as f64 * cycles as f64))
    }
}

/// Everything a machine can refuse.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MachineError {
    /// The program was rejected before anything ran.
    Program(ProgramError),
    /// Instruction `index` faulted; everything before it completed, nothing after it ran.
    Exec { index: usize, kind: ExecErrorKind },
    /// A host access outside a memory.
    OutOfRange { region: Region, offset: usize, len: usize, size: usize },
    /// A host access not aligned to the memory's element size.
    Misaligned { region: Region, offset: usize, len: usize, align: usize },
    /// The host link to a remote machine failed (see [`crate::link`]).
    Link(LinkFault),
}

impl From<ProgramError> for MachineError {
    fn from(e: ProgramError) -> Self {
        MachineError::Program(e)
    }
}

impl core::error::Error for MachineError {}

impl core::fmt::Display for MachineError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MachineError::Program(e) => write!(f, "{e}"),
            MachineError::Exec { index, kind: ExecErrorKind::NoWeightsLoaded } => write!(
                f,
                "instruction {index}: matmul swaps in weights but no load_weights is pending"
            ),
            MachineError::OutOfRange { region, offset, len, size } => write!(
                f,
                "{} access of {len} bytes at offset {offset} is outside its {size} bytes",
                region.name()
            ),
            MachineError::Link(fault) => write!(f, "host link: {fault}"),
            MachineError::Misaligned { region, offset, len, align } => write!(
                f,
                "{} access of {len} bytes at offset {offset} is not aligned to {align} bytes",
                region.name()
            ),
        }
    }
}

/// A machine that executes Systole programs.
pub trait Machine {
    fn config(&self) -> &ArrayConfig;
    /// Short name: "functional", "cycle", "rtl", "board".
    fn name(&self) -> &'static str;
    /// Size of a memory in bytes.
    fn region_size(&self, region: Region) -> usize;
    /// Host write into a memory.
    fn write(&mut self, region: Region, offset: usize, bytes: &[u8]) -> Result<(), MachineError>;
    /// Host read from a memory.
    fn read(&mut self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError>;
    /// Validate, then run the program to its first `Halt`.
    fn run(&mut self, program: &[Instruction]) -> Result<Stats, MachineError>;
    /// What has crossed the host link so far, for a machine reached over one (the RTL, a
    /// board); `None` for the golden machines, which have no link.
    fn link_traffic(&self) -> Option<Traffic> {
        None
    }
}

#[cfg(feature = "alloc")]
mod boxed {
    extern crate alloc;
    use alloc::boxed::Box;
    use alloc::vec;
    use alloc::vec::Vec;

    use super::{cycle::CycleMachine, functional::FunctionalMachine, Machine, MachineError};
    use super::{Region, Stats};
    use crate::config::{ArrayConfig, ConfigError, Dtype};
    use crate::isa::Instruction;
    use crate::numerics::{Int8, BF16};
    use crate::tiler::{GemmPlan, GemmShape};

    /// Which golden machine.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum GoldenKind {
        Functional,
        Cycle,
    }

    /// A golden machine for `config` with `dram_bytes` of DRAM, its datapath picked by dtype.
    pub fn golden(
        kind: GoldenKind,
        config: ArrayConfig,
        dram_bytes: usize,
    ) -> Result<Box<dyn Machine>, ConfigError> {
        config.validate()?;
        let sdram = crate::sdram::SDRAM_PART.geometry.bytes();
        if config.dram_port == crate::config::DramPort::Sdram && dram_bytes as u64 > sdram {
            return Err(ConfigError::SdramBytes { bytes: dram_bytes as u64, max: sdram });
        }
        Ok(match (kind, config.dtype) {
            (GoldenKind::Functional, Dtype::Int8) => {
                Box::new(FunctionalMachine::<Int8>::new(config, dram_bytes))
            }
            (GoldenKind::Functional, Dtype::Bf16) => {
                Box::new(FunctionalMachine::<BF16>::new(config, dram_bytes))
            }
            (GoldenKind::Cycle, Dtype::Int8) => {
                Box::new(CycleMachine::<Int8>::new(config, dram_bytes))
            }
            (GoldenKind::Cycle, Dtype::Bf16) => {
                Box::new(CycleMachine::<BF16>::new(config, dram_bytes))
            }
        })
    }

    /// Runs a planned GEMM: writes `a` and `b` (raw little-endian elements) at the plan's
    /// layout, runs its program, returns C's accumulator words (row-major) and the statistics.
    pub fn run_gemm(
        machine: &mut dyn Machine,
        plan: &GemmPlan,
        a: &[u8],
        b: &[u8],
    ) -> Result<(Vec<u32>, Stats), MachineError> {
        let es = plan.config.dtype.elem_bytes();
        let GemmShape { m, k, n } = plan.shape;
        for (view, elems, rows, cols) in [(plan.layout.a, a, m, k), (plan.layout.b, b, k, n)] {
            let image = view.image(elems, rows, cols, es);
            machine.write(Region::Dram, view.addr as usize, image.as_deref().unwrap_or(elems))?;
        }
        let mut program = Vec::new();
        plan.emit(&mut |ins: Instruction| program.push(ins));
        let stats = machine.run(&program)?;
        let words = plan.shape.m as usize * plan.shape.n as usize;
        let mut bytes = vec![0u8; words * 4];
        machine.read(Region::Dram, plan.layout.c as usize, &mut bytes)?;
        let c =
            bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        Ok((c, stats))
    }
}
#[cfg(feature = "alloc")]
pub use boxed::{golden, run_gemm, GoldenKind};
