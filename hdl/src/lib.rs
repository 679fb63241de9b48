//! # systole-hdl
//!
//! The Systole accelerator described in rust-hdl and emitted as Verilog: what the Verilated
//! co-simulation runs and what the FPGA boards build. The golden model in `systole-core` is its
//! specification: every block computes exactly core's bits, and the whole machine takes exactly
//! the cycles of core's `CycleMachine` (docs/HARDWARE.md has the pipeline and where each
//! cycle goes).
//!
//! * [`float`]: the BF16 multiplier, the f32 adder and multiplier, from `Bits`.
//! * [`pe`]: the INT8 and BF16 multiply-accumulate units and the processing elements.
//! * [`array`]: the R x C mesh with input skew and output de-skew, weight- and output-stationary.
//! * [`emit`]: Verilog for an `ArrayConfig` (modules de-duplicated) and its port list.
#![forbid(unsafe_code)]
// Hardware loops index several parallel port vectors (and PEs) by one lane number, the only loop
// form rust-hdl's `hdl_gen` translates; iterators would hide that correspondence.
#![allow(clippy::needless_range_loop)]

pub mod array;
pub mod emit;
pub mod float;
pub mod pe;

#[cfg(test)]
pub(crate) mod testing;

pub use emit::{emit, EmitError, Emitted, Port, TOP_MODULE};
