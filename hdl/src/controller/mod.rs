//! The controller: the instruction FIFO, the dispatcher and its three units, each a next-state
//! function of its registers, timed exactly as core's `CycleMachine` (core/src/machine/cycle/mod.rs,
//! module docs).
//!
//! # Dispatch one cycle ahead
//!
//! Block RAM reads are registered, so the data a unit uses in cycle `t` must be addressed in
//! cycle `t - 1`. Every unit therefore addresses its memories from its *next* state (the inputs
//! of its registers), and the dispatcher decides in cycle `t - 1` whether the candidate
//! instruction dispatches in cycle `t`: the unit's registers take the instruction at the end of
//! `t - 1`, and its first read is issued in `t - 1` from the same next state. The decision needs
//! each unit's state at the start of `t` (before the dispatch), which is known in `t - 1`: a unit
//! is *free* then if it is idle now or in its last cycle (`free` outputs). The shadow weights are
//! full at the start of `t` if they are now, or the weight loader finishes now.
//!
//! The candidate, the oldest word not yet dispatched, is the FIFO's head (first-word
//! fall-through from the block RAM's output register; popped when it dispatches, so its
//! successor is the head in the next cycle). One decoder and the program checks
//! ([`crate::decode`]) read it, so its fields and its fault code are known in the cycle it is
//! decided on.
//!
//! # Registered reads
//!
//! Built with `ArrayConfig::read_stages` 1, every memory's read word
//! passes one more register ([`crate::mem::Ram::with_read_stage`],
//! [`crate::mem::Dram::with_read_stage`]), so a read addressed in `t - 1` is used in `t + 1`. The
//! units address their reads exactly as above; what they drive into the datapath with the
//! rows (the sequencer's [`seq_writes::SeqWrites`], the weight loader's shift, the array
//! unit's feed, swap and restart, the stream unit's feed and tag, the transpose buffer's
//! controls) passes as many registers to meet them, the array unit's
//! output rows already leave that much later (core's `timing::ws_latency` counts it), and
//! each instruction ends with a tail of as many cycles in which its last writes land: core's
//! "every instruction starts its work a cycle after dispatch".
//!
//! # Freezing
//!
//! While a program runs and the FIFO has no valid head (it ran dry before `Halt`),
//! `enable` is low and the whole machine stands still: every unit, every PE, every memory write
//! and every read register. The cycle counter counts only enabled cycles from the first
//! dispatch through `Halt`, so the count equals core's however slowly the host feeds the FIFO.
//! The FIFO keeps taking words while frozen: that is how the machine thaws.
//!
//! # Faults
//!
//! A word that fails decoding or core's program checks, or a swapping `Matmul` with no weights
//! pending (`NoWeightsLoaded`, detected exactly when core detects it), stops dispatch. Once every
//! unit is idle the fault code is latched, the program stops and the FIFO is emptied; nothing
//! after the faulting word runs.
//!
//! # Units
//!
//! One file per block, each ending with its tests:
//!
//! * [`InstrFifo`] (`instr_fifo.rs`): the instruction FIFO, first-word fall-through, and the
//!   [`HeadRegister`] after it (decoupled schedule).
//! * [`Sequencer`] (`sequencer.rs`): loads, stores, vector ops, casts, requantization, `Sync`.
//! * [`WeightLoader`] (`weight_loader.rs`): `LoadWeights` into the shadow weights.
//! * [`ArrayUnit`] (`array_unit.rs`): `Matmul` and `MatmulOs` through the array.
//! * [`StreamUnit`] (`stream_unit.rs`): weight-stationary `Matmul`s under the decoupled
//!   schedule, entering the tagged array back to back, each row's bank and accumulator row
//!   carried beside it (its docs say how `top.rs` wires it in place of `ArrayUnit`).
//! * [`Dispatcher`] (`dispatcher.rs`): run state, dispatch, freezing, cycle counter, faults.
//!
//! The top (`top`, `systole_top`) wires them together with the decoder, the memories and the
//! array.

mod array_unit;
mod decoupled;
mod dispatcher;
mod footprint;
mod instr_fifo;
mod seq_writes;
mod sequencer;
mod stream_unit;
mod weight_loader;

pub use array_unit::ArrayUnit;
pub use decoupled::DecoupledDispatcher;
pub use dispatcher::Dispatcher;
pub use footprint::{Conflict, Footprint, FootprintOf, FOOTPRINT_BITS};
pub use instr_fifo::{HeadRegister, InstrFifo, FIFO_ENTRY_BITS};
pub use sequencer::Sequencer;
pub use stream_unit::StreamUnit;
pub use weight_loader::WeightLoader;
