//! The machine's memories: block-RAM lanes, row memories built from them (scratchpad and
//! accumulator), and the byte-banked DRAM.
//!
//! Every RAM here has a registered read port, so that Yosys maps it to block RAM (iCE40 EBR,
//! ECP5 DP16KD). Its memory carries Yosys' `no_rw_check`: what the block RAM returns for a
//! read of the word being written does not matter, because the forwarding below (or the
//! user, for a read-first RAM) never uses it; without it Yosys adds its own bypass in logic
//! cells (about 450 iCE40 cells and 500 flip-flops for a 1 x 1 machine). All but the
//! instruction FIFO and the request buffer (which never use a word in the cycle they write it)
//! are *write-first*: a read issued in the cycle of a write to the same word returns the new
//! word (the DRAM as a whole: its banks are read-first and it forwards for them). The controller issues each read one cycle ahead of the cycle that uses
//! its data (from the next state of the unit that reads, docs/HARDWARE.md), and with write-first
//! forwarding that is indistinguishable from reading in the cycle of use, which is what core's
//! `CycleMachine` does: a row written in cycle `t` is seen by a read for cycle `t + 1`.
//!
//! * [`Ram`]: one lane, `depth` words of `T`, one write port and one read port with an enable
//!   (off while the machine is frozen, so the read register holds its word).
//! * [`RowRam`]: `lanes` RAMs sharing their row addresses, written lane by lane: a scratchpad or
//!   accumulator row in one cycle. A memory with two read ports is two `RowRam`s written alike
//!   (docs/DECISIONS.md).
//! * [`SpramRows`]: a row of 8-bit lanes in the iCE40 UP5K's single-port SPRAMs, two lanes to
//!   each, for a scratchpad of up to 16,384 rows (`ArrayConfig::single_port_spad`).
//! * [`Rotator`]: a byte barrel rotator, `out[i] = in[(i + amount) mod n]`.
//! * [`Dram`]: `banks` one-byte RAMs (a power of two at least as wide as any row) and two
//!   rotators, so a contiguous row of up to `banks` bytes at any byte address is read or written
//!   in one cycle.
//! * [`SdramStep`]: one SDRAM cycle of core's `sdram::Controller` in logic, without registers.
//! * [`SdramController`]: the board SDRAM's controller, a step per SDRAM cycle of the array's.
//! * [`SdramPort`]: the SDRAM's power-up and its controller behind the pins' registers.
//! * [`SdramWalk`], [`SdramTransfer`]: a DRAM transfer's words offered to the port, a phase at a
//!   time, and its rows assembled as they land (a read) or taken from the sequencer (a write).
//! * [`SdramMemory`]: the SDRAM as a machine's DRAM: a run's transfers, the host's bytes between
//!   runs, and a run's start once the chip is quiet.

mod dram;
mod ram;
mod rotator;
mod row_ram;
mod sdram;
mod sdram_memory;
mod sdram_port;
mod sdram_step;
mod sdram_transfer;
mod sdram_walk;
mod spram;

pub use dram::{dram_banks, Dram};
pub use ram::Ram;
pub use rotator::Rotator;
pub use row_ram::RowRam;
pub use sdram::SdramController;
pub use sdram_memory::SdramMemory;
pub use sdram_port::SdramPort;
pub use sdram_step::SdramStep;
pub use sdram_transfer::SdramTransfer;
pub use sdram_walk::SdramWalk;
/// `n` defaults: a block's ports or registers, one of each a lane or a phase.
pub(crate) fn each<T: Default>(n: usize) -> Vec<T> {
    (0..n).map(|_| T::default()).collect()
}

pub use spram::{SpramRows, LANES_PER_SPRAM, SPRAM_WORDS, UP5K_SPRAMS};
