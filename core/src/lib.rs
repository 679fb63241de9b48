//! # systole-core
//!
//! The golden model of the Systole systolic-array accelerator: what every other machine (the
//! Verilated RTL, an FPGA board, the firmware's view of it) must compute, bit for bit and cycle
//! for cycle.
//!
//! * [`numerics`]: INT8 (i8 x i8 -> i32, gemmlowp requantization) and BF16 (PyTorch-exact
//!   conversion, exact products, f32 accumulation, flushed subnormals) behind one [`Arith`] trait.
//! * [`config`]: [`ArrayConfig`], the one description of an accelerator instance.
//! * [`isa`]: the instruction set and its 128-bit encoding.
//! * [`machine`]: the [`Machine`] trait, the functional and the cycle-accurate machines.
//! * [`fault`]: the memory regions and the faults that machines, the link and the protocol share.
//! * [`protocol`]: the host link's packets (SPI and UART), their checksum and codes.
//! * [`blob`]: model blobs, a compiled inference pass with its weights for firmware to run.
//! * [`scoreboard`]: the decoupled schedule's units and the hazards between them.
//! * [`sdram`]: the board's SDRAM: its datasheet timing, the controller every machine times it
//!   with, and a model of the chip that checks the controller's commands.
//! * [`tiler`]: `C = A x B` of any shape into a program, and its closed-form cycle count.
//! * [`reference`](mod@reference): naive loops that sum in the array's order, the tests' oracle.
//! * [`check`]: the one bit-exact comparison every machine's tests use, and a seeded generator.
//!
//! `#![no_std]`; the executable machines need the `alloc` feature (on by default), everything
//! else needs no heap.
#![no_std]
#![forbid(unsafe_code)]

pub mod blob;
#[cfg(feature = "alloc")]
pub mod check;
#[cfg(feature = "alloc")]
pub mod compile;
pub mod config;
pub mod conv;
#[cfg(feature = "alloc")]
pub mod exec;
pub mod fault;
pub mod graph;
pub mod isa;
pub mod layers;
pub mod limits;
pub mod link;
pub mod machine;
pub mod numerics;
#[cfg(feature = "alloc")]
pub mod params;
pub mod protocol;
pub mod reference;
#[cfg(feature = "alloc")]
pub mod reorder;
pub mod scoreboard;
pub mod sdram;
pub mod tiler;
pub mod timing;
#[cfg(feature = "alloc")]
pub mod train;

pub use config::{
    ArrayConfig, ConfigError, Dataflow, DramPort, Dtype, Schedule, ADD_STAGES, MAX_CONVERT_STAGES,
    MAX_READ_STAGES, PE_STAGES, REQUANT_CYCLES, SCALE_CYCLES,
};
pub use isa::{decode, encode, DecodeError, Instruction, Opcode, VectorOp, Word};
pub use machine::{Machine, MachineError, Region, Stats};
pub use numerics::{Arith, Bf16, Int8, Requant, BF16};
