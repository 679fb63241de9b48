//! # systole-sim
//!
//! The emitted Verilog, Verilated and driven from Rust. This crate turns Verilog text plus its
//! port list into a shared library (Verilator, a generated C++ shim with a C ABI, g++), caches it
//! by a hash of everything that went into it, and loads it at run time, so a config nobody built
//! before is built on demand and a second run of the same config starts at once.
//!
//! * [`toolchain`]: finding Verilator and a C++ compiler, with errors that carry their output.
//! * [`build`]: verilate, compile, cache.
//! * [`cells`]: models of the FPGA cells a text instantiates (Yosys' own; and for the cells
//!   Yosys only declares, the PLLs and the ECP5's block RAM and multiplier, this crate's).
//! * [`port`]: a top module's ports, which a model is built for and loaded with.
//! * [`model`]: a loaded model: set inputs, read outputs, tick the clock, dump a VCD.
//! * [`rtl`]: the whole accelerator through its pins: its UART and SPI links as byte streams, so
//!   `core::link::LinkMachine` drives the RTL as it drives a board.
//! * [`machine`]: that, built for a config: the RTL as a `core::Machine`.
//! * [`compare`]: one program on two machines from the same memories, and where they first
//!   part (result, memory element, cycle count; the first instruction by bisection).
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod build;
pub mod cells;
pub mod compare;
pub mod machine;
pub mod model;
pub mod port;
pub mod rtl;
pub mod toolchain;

pub use build::{build_library, build_model, BuildOptions};
pub use machine::{
    rtl_machine, rtl_top_config, rtl_top_config_exact, verilate_top, RtlBuild, RtlMachine,
};
pub use model::Model;
pub use port::{Port, PortDir};
pub use rtl::{HostLink, RtlTop, SpiLink, UartLink};
pub use toolchain::SimError;
