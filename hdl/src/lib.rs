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
//! * [`optional`]: ports and registers that only some configs build (the blocking schedule's
//!   `swap`, the decoupled one's weight-bank tags), absent from the others' Verilog.
//! * [`array`](mod@array): the R x C mesh with input skew and output de-skew, weight- and output-stationary;
//!   [`array_tree`]: the weight-stationary INT8 array with each column summed in an adder tree.
//! * [`mem`]: block-RAM lanes (write-first), row memories, the byte-banked DRAM.
//! * [`vector`]: the accumulator lanes (every vector op, the array's writes).
//! * [`convert`]: the conversion lanes (cast to bf16, requantize), pipelined by
//!   `ArrayConfig::convert_stages`; [`delay`]: the delay line their registers are.
//! * [`decode`]: the instruction decoder generated from core's layout tables, the program checks.
//! * [`decoded`]: the decoded instruction as one signal bundle, from the decoder to its readers.
//! * [`controller`]: the instruction FIFO, the sequencer, weight loader and array unit, the
//!   dispatcher (one cycle ahead; freezing on an empty FIFO; cycle counter and faults).
//! * [`transpose`]: the load unit's double-buffered transpose buffer (decoupled schedule).
//! * [`link`]: the host interface: CRC, UART, SPI slave, packet engine.
//! * [`top`]: `systole_top`, the whole machine, and [`TopConfig`], what it is built for.
//! * [`emit`](mod@emit): Verilog for a [`TopConfig`] or an array alone (modules de-duplicated), its ports
//!   and memories.
#![forbid(unsafe_code)]
// Hardware loops index several parallel port vectors (and PEs) by one lane number, the only loop
// form rust-hdl's `hdl_gen` translates; iterators would hide that correspondence.
#![allow(clippy::needless_range_loop)]

pub mod acc_banks;
pub mod array;
pub(crate) mod array_pairs;
pub mod array_tree;
pub mod controller;
pub mod convert;
pub mod decode;
pub mod decoded;
pub mod delay;
pub mod emit;
pub mod float;
pub mod link;
pub mod mem;
pub mod optional;
pub mod pe;
pub mod top;
pub mod transpose;
pub mod vector;
pub(crate) mod wire;

#[cfg(test)]
pub(crate) mod testing;

pub use emit::{emit, emit_array, EmitError, Emitted, MemoryInfo, Port, ARRAY_MODULE, TOP_MODULE};
pub use top::{TopConfig, RTL_REVISION};
