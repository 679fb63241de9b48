//! The controller: the instruction FIFO, the dispatcher and its three units, each a next-state
//! function of its registers, timed exactly as core's `CycleMachine` (core/src/machine/cycle.rs,
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

use rust_hdl::prelude::*;
use systole_core::protocol::FaultCode;
use systole_core::ArrayConfig;

use crate::decode::constant;
use crate::mem::Ram;
use crate::vector::AccOp;

/// The instruction FIFO: 128-bit words in block RAM, first-word-fall-through (`head` is the
/// oldest word whenever `valid`), one push and one pop per cycle.
///
/// The RAM is read-first (no 128-bit bypass): a head read issued in the cycle its word is
/// pushed (a push into an empty FIFO, or a push and a pop of the last word) returns a stale
/// word, so `valid` stays low for that one cycle and the read is issued again. The word reaches
/// the dispatcher a cycle later; the machine is frozen meanwhile and frozen cycles are
/// not counted (docs/DECISIONS.md 23), so no result or cycle count changes.
#[derive(LogicBlock)]
pub struct InstrFifo {
    pub clock: Signal<In, Clock>,
    pub push: Signal<In, Bit>,
    pub push_word: Signal<In, Bits<128>>,
    /// A bit queued with the word: its DRAM extent check ([`crate::decode::ExtentCheck`]).
    pub push_flag: Signal<In, Bit>,
    pub pop: Signal<In, Bit>,
    /// Empties the FIFO (wins over push and pop).
    pub clear: Signal<In, Bit>,
    pub head: Signal<Out, Bits<128>>,
    pub head_flag: Signal<Out, Bit>,
    pub valid: Signal<Out, Bit>,
    /// Free slots.
    pub free: Signal<Out, Bits<16>>,
    ram: Ram<129, 16>,
    /// The head read issued in the last cycle collided with a write to its word.
    stale: DFF<Bit>,
    read_ptr: DFF<Bits<16>>,
    write_ptr: DFF<Bits<16>>,
    count: DFF<Bits<16>>,
    depth: Constant<Bits<16>>,
    last: Constant<Bits<16>>,
    read_next: Signal<Local, Bits<16>>,
    write_next: Signal<Local, Bits<16>>,
}

impl InstrFifo {
    pub fn new(depth: usize) -> InstrFifo {
        assert!((1..1 << 16).contains(&depth), "FIFO depth {depth}");
        InstrFifo {
            clock: Default::default(),
            push: Default::default(),
            push_word: Default::default(),
            push_flag: Default::default(),
            pop: Default::default(),
            clear: Default::default(),
            head: Default::default(),
            head_flag: Default::default(),
            valid: Default::default(),
            free: Default::default(),
            ram: Ram::read_first(depth),
            stale: Default::default(),
            read_ptr: Default::default(),
            write_ptr: Default::default(),
            count: Default::default(),
            depth: constant(depth as u64),
            last: constant(depth as u64 - 1),
            read_next: Default::default(),
            write_next: Default::default(),
        }
    }
}

impl Logic for InstrFifo {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, stale, read_ptr, write_ptr, count);
        self.read_next.next = self.read_ptr.q.val() + 1;
        if self.read_ptr.q.val() == self.last.val() {
            self.read_next.next = 0.into();
        }
        self.write_next.next = self.write_ptr.q.val() + 1;
        if self.write_ptr.q.val() == self.last.val() {
            self.write_next.next = 0.into();
        }
        self.valid.next = self.count.q.val().any() && !self.stale.q.val();
        self.free.next = self.depth.val() - self.count.q.val();
        self.ram.clock.next = self.clock.val();
        self.ram.write_enable.next = self.push.val() && !self.clear.val();
        self.ram.write_address.next = self.write_ptr.q.val();
        self.ram.write_data.next = bit_cast::<129, 128>(self.push_word.val())
            | (bit_cast::<129, 1>(self.push_flag.val().into()) << 128);
        self.ram.read_enable.next = true;
        // The head register always holds the word at the read pointer's next value.
        self.ram.read_address.next = self.read_ptr.q.val();
        if self.pop.val() && self.count.q.val().any() {
            self.ram.read_address.next = self.read_next.val();
            self.read_ptr.d.next = self.read_next.val();
            if !self.push.val() {
                self.count.d.next = self.count.q.val() - 1;
            }
        } else if self.push.val() {
            self.count.d.next = self.count.q.val() + 1;
        }
        if self.push.val() {
            self.write_ptr.d.next = self.write_next.val();
        }
        if self.clear.val() {
            self.read_ptr.d.next = 0.into();
            self.write_ptr.d.next = 0.into();
            self.count.d.next = 0.into();
            self.ram.read_address.next = 0.into();
        }
        self.stale.d.next = self.ram.write_enable.val()
            && (self.ram.read_address.val() == self.ram.write_address.val());
        self.head.next = self.ram.read_data.val().get_bits::<128>(0);
        self.head_flag.next = self.ram.read_data.val().get_bit(128);
    }
}

/// The sequencer: `Load`, `Store`, `Vector`, `CastBf16`, `Requantize`, `LoadAcc`, `StoreSpad`
/// one row per cycle (a strided `Load` gathers one element per cycle), `Sync` in one cycle.
#[derive(LogicBlock)]
pub struct Sequencer {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    // The instruction, as decoded.
    pub load: Signal<In, Bit>,
    pub store: Signal<In, Bit>,
    pub vector: Signal<In, Bit>,
    pub cast_bf16: Signal<In, Bit>,
    pub requantize: Signal<In, Bit>,
    pub load_acc: Signal<In, Bit>,
    pub store_spad: Signal<In, Bit>,
    pub bias_add: Signal<In, Bit>,
    pub relu: Signal<In, Bit>,
    pub relu_grad: Signal<In, Bit>,
    pub scale: Signal<In, Bit>,
    pub spad_row: Signal<In, Bits<16>>,
    pub acc_row: Signal<In, Bits<16>>,
    pub dst: Signal<In, Bits<16>>,
    pub src: Signal<In, Bits<16>>,
    pub dram_addr: Signal<In, Bits<32>>,
    pub rows: Signal<In, Bits<16>>,
    pub len: Signal<In, Bits<16>>,
    pub row_stride: Signal<In, Bits<32>>,
    pub elem_stride: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub multiplier: Signal<In, Bits<32>>,
    pub shift: Signal<In, Bits<5>>,
    pub zero_point: Signal<In, Bits<8>>,
    /// Idle at the start of the next cycle, unless started now.
    pub free: Signal<Out, Bit>,
    /// Busy in the next cycle (the memory ports it addresses are its).
    pub busy_next: Signal<Out, Bit>,
    // What the datapath does this cycle.
    pub is_load: Signal<Out, Bit>,
    pub is_store: Signal<Out, Bit>,
    pub gather: Signal<Out, Bit>,
    pub broadcast: Signal<Out, Bit>,
    pub element: Signal<Out, Bits<16>>,
    pub length: Signal<Out, Bits<16>>,
    pub spad_write: Signal<Out, Bit>,
    pub spad_write_row: Signal<Out, Bits<16>>,
    pub acc_write: Signal<Out, Bit>,
    pub acc_write_row: Signal<Out, Bits<16>>,
    pub acc_op: Signal<Out, AccOp>,
    pub dram_write_address: Signal<Out, Bits<32>>,
    pub dram_write_count: Signal<Out, Bits<16>>,
    pub immediate: Signal<Out, Bits<32>>,
    pub requant_multiplier: Signal<Out, Bits<32>>,
    /// A `Requantize` row is being converted (its lane borrows the accumulator lanes'
    /// multipliers).
    pub requantizing: Signal<Out, Bit>,
    pub requant_shift: Signal<Out, Bits<5>>,
    pub requant_zero_point: Signal<Out, Bits<8>>,
    // Read addresses for the next cycle.
    pub dram_read_address: Signal<Out, Bits<32>>,
    pub spad_read: Signal<Out, Bits<16>>,
    pub acc_read_x: Signal<Out, Bits<16>>,
    pub acc_read_y: Signal<Out, Bits<16>>,
    busy: DFF<Bit>,
    k_load: DFF<Bit>,
    k_store: DFF<Bit>,
    k_vector: DFF<Bit>,
    k_cast: DFF<Bit>,
    k_requant: DFF<Bit>,
    k_load_acc: DFF<Bit>,
    k_store_spad: DFF<Bit>,
    op: DFF<AccOp>,
    row: DFF<Bits<16>>,
    n_rows: DFF<Bits<16>>,
    elem: DFF<Bits<16>>,
    n_len: DFF<Bits<16>>,
    gathering: DFF<Bit>,
    broadcasting: DFF<Bit>,
    spad_ptr: DFF<Bits<16>>,
    acc_ptr: DFF<Bits<16>>,
    src_ptr: DFF<Bits<16>>,
    src_moves: DFF<Bit>,
    dram_row: DFF<Bits<32>>,
    dram_ptr: DFF<Bits<32>>,
    row_step: DFF<Bits<32>>,
    elem_step: DFF<Bits<32>>,
    /// The vector op's immediate, or `Requantize`'s multiplier (one register serves both).
    imm_q: DFF<Bits<32>>,
    shift_q: DFF<Bits<5>>,
    zp: DFF<Bits<8>>,
    /// log2 of the scratchpad element's bytes.
    elem_shift: Constant<Bits<2>>,
    row_last: Signal<Local, Bit>,
    last: Signal<Local, Bit>,
}

impl Sequencer {
    pub fn new(config: &ArrayConfig) -> Sequencer {
        Sequencer {
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            load: Default::default(),
            store: Default::default(),
            vector: Default::default(),
            cast_bf16: Default::default(),
            requantize: Default::default(),
            load_acc: Default::default(),
            store_spad: Default::default(),
            bias_add: Default::default(),
            relu: Default::default(),
            relu_grad: Default::default(),
            scale: Default::default(),
            spad_row: Default::default(),
            acc_row: Default::default(),
            dst: Default::default(),
            src: Default::default(),
            dram_addr: Default::default(),
            rows: Default::default(),
            len: Default::default(),
            row_stride: Default::default(),
            elem_stride: Default::default(),
            imm: Default::default(),
            multiplier: Default::default(),
            shift: Default::default(),
            zero_point: Default::default(),
            free: Default::default(),
            busy_next: Default::default(),
            is_load: Default::default(),
            is_store: Default::default(),
            gather: Default::default(),
            broadcast: Default::default(),
            element: Default::default(),
            length: Default::default(),
            spad_write: Default::default(),
            spad_write_row: Default::default(),
            acc_write: Default::default(),
            acc_write_row: Default::default(),
            acc_op: Default::default(),
            dram_write_address: Default::default(),
            dram_write_count: Default::default(),
            immediate: Default::default(),
            requant_multiplier: Default::default(),
            requantizing: Default::default(),
            requant_shift: Default::default(),
            requant_zero_point: Default::default(),
            dram_read_address: Default::default(),
            spad_read: Default::default(),
            acc_read_x: Default::default(),
            acc_read_y: Default::default(),
            busy: Default::default(),
            k_load: Default::default(),
            k_store: Default::default(),
            k_vector: Default::default(),
            k_cast: Default::default(),
            k_requant: Default::default(),
            k_load_acc: Default::default(),
            k_store_spad: Default::default(),
            op: Default::default(),
            row: Default::default(),
            n_rows: Default::default(),
            elem: Default::default(),
            n_len: Default::default(),
            gathering: Default::default(),
            broadcasting: Default::default(),
            spad_ptr: Default::default(),
            acc_ptr: Default::default(),
            src_ptr: Default::default(),
            src_moves: Default::default(),
            dram_row: Default::default(),
            dram_ptr: Default::default(),
            row_step: Default::default(),
            elem_step: Default::default(),
            imm_q: Default::default(),
            shift_q: Default::default(),
            zp: Default::default(),
            elem_shift: constant((config.dtype == systole_core::Dtype::Bf16) as u64),
            row_last: Default::default(),
            last: Default::default(),
        }
    }
}

impl Logic for Sequencer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            busy,
            k_load,
            k_store,
            k_vector,
            k_cast,
            k_requant,
            k_load_acc,
            k_store_spad,
            op,
            row,
            n_rows,
            elem,
            n_len,
            gathering,
            broadcasting,
            spad_ptr,
            acc_ptr,
            src_ptr,
            src_moves,
            dram_row,
            dram_ptr,
            row_step,
            elem_step,
            imm_q,
            shift_q,
            zp
        );
        // A row ends in its last cycle (the element `len - 1` of a gather, else its only one);
        // `Sync` (no kind) is its own last cycle.
        self.row_last.next =
            !self.gathering.q.val() || (self.elem.q.val() == self.n_len.q.val() - 1);
        self.last.next = (self.row_last.val() && (self.row.q.val() == self.n_rows.q.val() - 1))
            || !(self.k_load.q.val()
                || self.k_store.q.val()
                || self.k_vector.q.val()
                || self.k_cast.q.val()
                || self.k_requant.q.val()
                || self.k_load_acc.q.val()
                || self.k_store_spad.q.val());
        self.free.next = !self.busy.q.val() || self.last.val();
        if self.enable.val() {
            if self.busy.q.val() {
                if self.last.val() {
                    self.busy.d.next = false;
                } else if self.row_last.val() {
                    self.row.d.next = self.row.q.val() + 1;
                    self.elem.d.next = 0.into();
                    self.spad_ptr.d.next = self.spad_ptr.q.val() + 1;
                    self.acc_ptr.d.next = self.acc_ptr.q.val() + 1;
                    if self.src_moves.q.val() {
                        self.src_ptr.d.next = self.src_ptr.q.val() + 1;
                    }
                    self.dram_row.d.next = self.dram_row.q.val() + self.row_step.q.val();
                    self.dram_ptr.d.next = self.dram_row.q.val() + self.row_step.q.val();
                } else {
                    self.elem.d.next = self.elem.q.val() + 1;
                    self.dram_ptr.d.next = self.dram_ptr.q.val() + self.elem_step.q.val();
                }
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.k_load.d.next = self.load.val();
                self.k_store.d.next = self.store.val();
                self.k_vector.d.next = self.vector.val();
                self.k_cast.d.next = self.cast_bf16.val();
                self.k_requant.d.next = self.requantize.val();
                self.k_load_acc.d.next = self.load_acc.val();
                self.k_store_spad.d.next = self.store_spad.val();
                self.op.d.next = AccOp::Axpy;
                if self.bias_add.val() {
                    self.op.d.next = AccOp::BiasAdd;
                }
                if self.relu.val() {
                    self.op.d.next = AccOp::Relu;
                }
                if self.relu_grad.val() {
                    self.op.d.next = AccOp::ReluGrad;
                }
                if self.scale.val() {
                    self.op.d.next = AccOp::Scale;
                }
                if self.load_acc.val() {
                    self.op.d.next = AccOp::Word;
                }
                self.row.d.next = 0.into();
                self.n_rows.d.next = self.rows.val();
                self.elem.d.next = 0.into();
                self.n_len.d.next = self.len.val();
                // timing::load_row_cycles: one cycle per element unless contiguous or single.
                self.gathering.d.next =
                    self.load.val() && (self.elem_stride.val() > 1) && (self.len.val() > 1);
                self.broadcasting.d.next = self.load.val() && !self.elem_stride.val().any();
                self.spad_ptr.d.next = self.spad_row.val();
                self.acc_ptr.d.next = self.acc_row.val();
                if self.vector.val() {
                    self.acc_ptr.d.next = self.dst.val();
                }
                self.src_ptr.d.next = self.src.val();
                self.src_moves.d.next = !self.bias_add.val();
                self.dram_row.d.next = self.dram_addr.val();
                self.dram_ptr.d.next = self.dram_addr.val();
                self.row_step.d.next = self.row_stride.val() << self.elem_shift.val();
                if self.store.val() || self.load_acc.val() {
                    self.row_step.d.next = self.row_stride.val() << 2;
                }
                self.elem_step.d.next = self.elem_stride.val() << self.elem_shift.val();
                self.imm_q.d.next = self.imm.val();
                if self.requantize.val() {
                    self.imm_q.d.next = self.multiplier.val();
                }
                self.shift_q.d.next = self.shift.val();
                self.zp.d.next = self.zero_point.val();
            }
            if self.abort.val() {
                self.busy.d.next = false;
            }
        }
        self.busy_next.next = self.busy.d.val();
        self.is_load.next = self.busy.q.val() && self.k_load.q.val();
        self.is_store.next = self.busy.q.val() && self.k_store.q.val();
        self.gather.next = self.gathering.q.val();
        self.broadcast.next = self.broadcasting.q.val();
        self.element.next = self.elem.q.val();
        self.length.next = self.n_len.q.val();
        self.spad_write.next = self.busy.q.val()
            && self.row_last.val()
            && (self.k_load.q.val() || self.k_cast.q.val() || self.k_requant.q.val());
        self.spad_write_row.next = self.spad_ptr.q.val();
        self.acc_write.next =
            self.busy.q.val() && (self.k_vector.q.val() || self.k_load_acc.q.val());
        self.acc_write_row.next = self.acc_ptr.q.val();
        self.acc_op.next = self.op.q.val();
        self.dram_write_address.next = self.dram_row.q.val();
        self.dram_write_count.next = 0.into();
        if self.busy.q.val() && self.k_store.q.val() {
            self.dram_write_count.next = self.n_len.q.val() << 2;
        }
        if self.busy.q.val() && self.k_store_spad.q.val() {
            self.dram_write_count.next = self.n_len.q.val() << self.elem_shift.val();
        }
        self.immediate.next = self.imm_q.q.val();
        self.requant_multiplier.next = self.imm_q.q.val();
        self.requantizing.next = self.busy.q.val() && self.k_requant.q.val();
        self.requant_shift.next = self.shift_q.q.val();
        self.requant_zero_point.next = self.zp.q.val();
        self.dram_read_address.next = self.dram_ptr.d.val();
        self.spad_read.next = self.spad_ptr.d.val();
        self.acc_read_x.next = self.acc_ptr.d.val();
        self.acc_read_y.next = self.src_ptr.d.val();
    }
}

/// The weight loader: `LoadWeights` in R cycles, tile row `R - 1 - tau` entering the shadow's
/// top row in cycle `tau` (zero past the tile's rows and columns).
#[derive(LogicBlock)]
pub struct WeightLoader {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    pub spad_row: Signal<In, Bits<16>>,
    pub rows: Signal<In, Bits<16>>,
    pub cols: Signal<In, Bits<16>>,
    pub free: Signal<Out, Bit>,
    /// In its last cycle: the shadow is full from the next one.
    pub finishing: Signal<Out, Bit>,
    pub shift: Signal<Out, Bit>,
    /// The row entering now is a tile row (not zero fill).
    pub row_valid: Signal<Out, Bit>,
    /// The tile's columns: lanes at or past this are zero.
    pub columns: Signal<Out, Bits<16>>,
    /// Scratchpad row for the next cycle (read port B).
    pub spad_read: Signal<Out, Bits<16>>,
    busy: DFF<Bit>,
    tau: DFF<Bits<16>>,
    base: DFF<Bits<16>>,
    k: DFF<Bits<16>>,
    n: DFF<Bits<16>>,
    last_row: Constant<Bits<16>>,
    last: Signal<Local, Bit>,
}

impl WeightLoader {
    pub fn new(config: &ArrayConfig) -> WeightLoader {
        WeightLoader {
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            spad_row: Default::default(),
            rows: Default::default(),
            cols: Default::default(),
            free: Default::default(),
            finishing: Default::default(),
            shift: Default::default(),
            row_valid: Default::default(),
            columns: Default::default(),
            spad_read: Default::default(),
            busy: Default::default(),
            tau: Default::default(),
            base: Default::default(),
            k: Default::default(),
            n: Default::default(),
            last_row: constant(config.rows as u64 - 1),
            last: Default::default(),
        }
    }
}

impl Logic for WeightLoader {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, busy, tau, base, k, n);
        self.last.next = self.tau.q.val() == self.last_row.val();
        self.free.next = !self.busy.q.val() || self.last.val();
        self.finishing.next = self.busy.q.val() && self.last.val();
        if self.enable.val() {
            if self.busy.q.val() {
                self.tau.d.next = self.tau.q.val() + 1;
                if self.last.val() {
                    self.busy.d.next = false;
                }
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.tau.d.next = 0.into();
                self.base.d.next = self.spad_row.val();
                self.k.d.next = self.rows.val();
                self.n.d.next = self.cols.val();
            }
            if self.abort.val() {
                self.busy.d.next = false;
            }
        }
        self.shift.next = self.busy.q.val();
        self.row_valid.next = (self.last_row.val() - self.tau.q.val()) < self.k.q.val();
        self.columns.next = self.n.q.val();
        self.spad_read.next = self.base.d.val() + (self.last_row.val() - self.tau.d.val());
    }
}

/// The array unit: a weight-stationary `Matmul` (`rows + R + C - 1` cycles) or an
/// output-stationary `MatmulOs` (`k + R + C - 2 + rows`), feeding the array and writing its
/// output rows to the accumulators.
#[derive(LogicBlock)]
pub struct ArrayUnit {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    pub a_row: Signal<In, Bits<16>>,
    pub b_row: Signal<In, Bits<16>>,
    pub acc_row: Signal<In, Bits<16>>,
    pub rows: Signal<In, Bits<16>>,
    pub k: Signal<In, Bits<16>>,
    pub swap: Signal<In, Bit>,
    pub accumulate: Signal<In, Bit>,
    pub free: Signal<Out, Bit>,
    /// Input rows enter this cycle (else the array's edges take zeros).
    pub feed: Signal<Out, Bit>,
    /// Weight-stationary: the shadow becomes active this cycle.
    pub swap_now: Signal<Out, Bit>,
    /// Output-stationary: the first pair enters (each PE restarts its sum), the sums drain.
    pub first: Signal<Out, Bit>,
    pub drain: Signal<Out, Bit>,
    pub acc_write: Signal<Out, Bit>,
    pub acc_write_row: Signal<Out, Bits<16>>,
    pub acc_op: Signal<Out, AccOp>,
    pub spad_read_a: Signal<Out, Bits<16>>,
    pub spad_read_b: Signal<Out, Bits<16>>,
    pub acc_read: Signal<Out, Bits<16>>,
    busy: DFF<Bit>,
    tau: DFF<Bits<18>>,
    /// Cycle of the first output row, and the op's last cycle.
    out_from: DFF<Bits<18>>,
    last_tau: DFF<Bits<18>>,
    feed_rows: DFF<Bits<18>>,
    a_ptr: DFF<Bits<16>>,
    b_ptr: DFF<Bits<16>>,
    acc_ptr: DFF<Bits<16>>,
    swapping: DFF<Bit>,
    accumulating: DFF<Bit>,
    weight_stationary: Constant<Bit>,
    /// `R + C - 1` (weight-stationary) or `R + C - 2` (output-stationary).
    skew: Constant<Bits<18>>,
    last: Signal<Local, Bit>,
    writing: Signal<Local, Bit>,
}

impl ArrayUnit {
    pub fn new(config: &ArrayConfig) -> ArrayUnit {
        let ws = config.dataflow == systole_core::Dataflow::WeightStationary;
        let (r, c) = (config.rows as u64, config.cols as u64);
        ArrayUnit {
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            a_row: Default::default(),
            b_row: Default::default(),
            acc_row: Default::default(),
            rows: Default::default(),
            k: Default::default(),
            swap: Default::default(),
            accumulate: Default::default(),
            free: Default::default(),
            feed: Default::default(),
            swap_now: Default::default(),
            first: Default::default(),
            drain: Default::default(),
            acc_write: Default::default(),
            acc_write_row: Default::default(),
            acc_op: Default::default(),
            spad_read_a: Default::default(),
            spad_read_b: Default::default(),
            acc_read: Default::default(),
            busy: Default::default(),
            tau: Default::default(),
            out_from: Default::default(),
            last_tau: Default::default(),
            feed_rows: Default::default(),
            a_ptr: Default::default(),
            b_ptr: Default::default(),
            acc_ptr: Default::default(),
            swapping: Default::default(),
            accumulating: Default::default(),
            weight_stationary: Constant::new(ws),
            skew: constant(if ws { r + c - 1 } else { r + c - 2 }),
            last: Default::default(),
            writing: Default::default(),
        }
    }
}

impl Logic for ArrayUnit {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            busy,
            tau,
            out_from,
            last_tau,
            feed_rows,
            a_ptr,
            b_ptr,
            acc_ptr,
            swapping,
            accumulating
        );
        self.last.next = self.tau.q.val() == self.last_tau.q.val();
        self.writing.next = self.busy.q.val() && (self.tau.q.val() >= self.out_from.q.val());
        self.free.next = !self.busy.q.val() || self.last.val();
        if self.enable.val() {
            if self.busy.q.val() {
                self.tau.d.next = self.tau.q.val() + 1;
                self.a_ptr.d.next = self.a_ptr.q.val() + 1;
                self.b_ptr.d.next = self.b_ptr.q.val() + 1;
                if self.writing.val() {
                    self.acc_ptr.d.next = self.acc_ptr.q.val() + 1;
                }
                if self.last.val() {
                    self.busy.d.next = false;
                }
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.tau.d.next = 0.into();
                self.a_ptr.d.next = self.a_row.val();
                self.b_ptr.d.next = self.b_row.val();
                self.acc_ptr.d.next = self.acc_row.val();
                self.swapping.d.next = self.swap.val() && self.weight_stationary.val();
                self.accumulating.d.next = self.accumulate.val();
                if self.weight_stationary.val() {
                    // rows + R + C - 1 cycles; row m is written in cycle m + R + C - 1.
                    self.out_from.d.next = self.skew.val();
                    self.last_tau.d.next =
                        self.skew.val() + bit_cast::<18, 16>(self.rows.val()) - 1;
                    self.feed_rows.d.next = bit_cast::<18, 16>(self.rows.val());
                } else {
                    // k + R + C - 2 cycles of compute, then one per drained row.
                    self.out_from.d.next = self.skew.val() + bit_cast::<18, 16>(self.k.val());
                    self.last_tau.d.next = self.skew.val()
                        + bit_cast::<18, 16>(self.k.val())
                        + bit_cast::<18, 16>(self.rows.val())
                        - 1;
                    self.feed_rows.d.next = bit_cast::<18, 16>(self.k.val());
                }
            }
            if self.abort.val() {
                self.busy.d.next = false;
            }
        }
        self.feed.next = self.busy.q.val() && (self.tau.q.val() < self.feed_rows.q.val());
        self.swap_now.next = self.busy.q.val() && self.swapping.q.val() && !self.tau.q.val().any();
        self.first.next = self.busy.q.val() && !self.tau.q.val().any();
        self.drain.next = self.writing.val();
        self.acc_write.next = self.writing.val();
        self.acc_write_row.next = self.acc_ptr.q.val();
        self.acc_op.next = AccOp::Overwrite;
        if self.accumulating.q.val() {
            self.acc_op.next = AccOp::Accumulate;
        }
        self.spad_read_a.next = self.a_ptr.d.val();
        self.spad_read_b.next = self.b_ptr.d.val();
        self.acc_read.next = self.acc_ptr.d.val();
    }
}

/// The dispatcher: run state, dispatch decisions one cycle ahead on the FIFO's head (the
/// candidate), the shadow-full flag, the cycle counter and the status the host reads.
#[derive(LogicBlock)]
pub struct Dispatcher {
    pub clock: Signal<In, Clock>,
    /// `Run` from the host: start dispatching (ignored while running).
    pub run: Signal<In, Bit>,
    /// `Reset` from the host (or the reset pin): stop, empty the FIFO, clear the status.
    pub reset: Signal<In, Bit>,
    /// The FIFO's head: the candidate, the oldest word not yet dispatched.
    pub head_valid: Signal<In, Bit>,
    pub head_word: Signal<In, Bits<128>>,
    /// The candidate's fault code, from the decoder and checker of `word` (0 if none).
    pub fault_in: Signal<In, Bits<4>>,
    /// The candidate, decoded.
    pub load_weights: Signal<In, Bit>,
    pub matmul: Signal<In, Bit>,
    pub matmul_os: Signal<In, Bit>,
    pub halt: Signal<In, Bit>,
    pub swap: Signal<In, Bit>,
    pub seq_free: Signal<In, Bit>,
    pub wl_free: Signal<In, Bit>,
    pub wl_finishing: Signal<In, Bit>,
    pub arr_free: Signal<In, Bit>,
    /// The candidate word.
    pub word: Signal<Out, Bits<128>>,
    pub pop: Signal<Out, Bit>,
    pub fifo_clear: Signal<Out, Bit>,
    /// Global clock enable: low while frozen.
    pub enable: Signal<Out, Bit>,
    pub abort: Signal<Out, Bit>,
    pub start_seq: Signal<Out, Bit>,
    pub start_wl: Signal<Out, Bit>,
    pub start_arr: Signal<Out, Bit>,
    pub running: Signal<Out, Bit>,
    pub done: Signal<Out, Bit>,
    pub fault: Signal<Out, Bits<4>>,
    pub cycles: Signal<Out, Bits<64>>,
    running_q: DFF<Bit>,
    done_q: DFF<Bit>,
    fault_q: DFF<Bits<4>>,
    cycles_q: DFF<Bits<64>>,
    started: DFF<Bit>,
    halting: DFF<Bit>,
    shadow_full: DFF<Bit>,
    code_no_weights: Constant<Bits<4>>,
    all_free: Signal<Local, Bit>,
    shadow_ready: Signal<Local, Bit>,
    deciding: Signal<Local, Bit>,
    go_seq: Signal<Local, Bit>,
    go_wl: Signal<Local, Bit>,
    go_arr: Signal<Local, Bit>,
    go_halt: Signal<Local, Bit>,
    stop: Signal<Local, Bit>,
    stop_code: Signal<Local, Bits<4>>,
    dispatch: Signal<Local, Bit>,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Dispatcher {
            clock: Default::default(),
            run: Default::default(),
            reset: Default::default(),
            head_valid: Default::default(),
            head_word: Default::default(),
            fault_in: Default::default(),
            load_weights: Default::default(),
            matmul: Default::default(),
            matmul_os: Default::default(),
            halt: Default::default(),
            swap: Default::default(),
            seq_free: Default::default(),
            wl_free: Default::default(),
            wl_finishing: Default::default(),
            arr_free: Default::default(),
            word: Default::default(),
            pop: Default::default(),
            fifo_clear: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start_seq: Default::default(),
            start_wl: Default::default(),
            start_arr: Default::default(),
            running: Default::default(),
            done: Default::default(),
            fault: Default::default(),
            cycles: Default::default(),
            running_q: Default::default(),
            done_q: Default::default(),
            fault_q: Default::default(),
            cycles_q: Default::default(),
            started: Default::default(),
            halting: Default::default(),
            shadow_full: Default::default(),
            code_no_weights: constant(FaultCode::NoWeightsLoaded as u64),
            all_free: Default::default(),
            shadow_ready: Default::default(),
            deciding: Default::default(),
            go_seq: Default::default(),
            go_wl: Default::default(),
            go_arr: Default::default(),
            go_halt: Default::default(),
            stop: Default::default(),
            stop_code: Default::default(),
            dispatch: Default::default(),
        }
    }
}

impl Logic for Dispatcher {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            running_q,
            done_q,
            fault_q,
            cycles_q,
            started,
            halting,
            shadow_full
        );
        // Frozen: running, the program not over, and no candidate to decide on.
        self.enable.next =
            !(self.running_q.q.val() && !self.head_valid.val() && !self.halting.q.val());
        self.all_free.next = self.seq_free.val() && self.wl_free.val() && self.arr_free.val();
        self.shadow_ready.next = self.shadow_full.q.val() || self.wl_finishing.val();
        // Decide whether the candidate dispatches in the next cycle (core's rules, cycle.rs).
        self.deciding.next =
            self.running_q.q.val() && self.head_valid.val() && !self.halting.q.val();
        self.go_seq.next = false;
        self.go_wl.next = false;
        self.go_arr.next = false;
        self.go_halt.next = false;
        self.stop.next = false;
        self.stop_code.next = self.fault_in.val();
        if self.deciding.val() {
            if self.fault_in.val().any() {
                self.stop.next = self.all_free.val();
            } else if self.halt.val() {
                self.go_halt.next = self.all_free.val();
            } else if self.load_weights.val() {
                self.go_wl.next = self.seq_free.val() && self.wl_free.val();
            } else if self.matmul.val() {
                if self.seq_free.val() && self.arr_free.val() {
                    if !self.swap.val() || self.shadow_ready.val() {
                        self.go_arr.next = true;
                    } else if self.wl_free.val() {
                        self.stop.next = true;
                        self.stop_code.next = self.code_no_weights.val();
                    }
                }
            } else if self.matmul_os.val() {
                self.go_arr.next = self.seq_free.val() && self.arr_free.val();
            } else {
                self.go_seq.next = self.all_free.val();
            }
        }
        self.dispatch.next =
            self.go_seq.val() || self.go_wl.val() || self.go_arr.val() || self.go_halt.val();
        self.start_seq.next = self.go_seq.val();
        self.start_wl.next = self.go_wl.val();
        self.start_arr.next = self.go_arr.val();
        self.abort.next = self.reset.val();
        self.fifo_clear.next = false;
        self.pop.next = false;
        // Units, flags and the counter move only in enabled cycles.
        if self.enable.val() {
            self.shadow_full.d.next = self.shadow_ready.val();
            if self.go_wl.val() || (self.go_arr.val() && self.matmul.val() && self.swap.val()) {
                self.shadow_full.d.next = false;
            }
            if self.dispatch.val() {
                // The candidate leaves the FIFO; its successor is the head in the next cycle.
                self.started.d.next = true;
                self.pop.next = true;
            }
            if self.go_halt.val() {
                self.halting.d.next = true;
            }
            if self.running_q.q.val() && self.started.q.val() {
                self.cycles_q.d.next = self.cycles_q.q.val() + 1;
            }
            if self.halting.q.val() {
                // Halt's own cycle is the last one counted.
                self.halting.d.next = false;
                self.running_q.d.next = false;
                self.done_q.d.next = true;
                self.fifo_clear.next = true;
            }
            if self.stop.val() {
                self.running_q.d.next = false;
                self.fault_q.d.next = self.stop_code.val();
                self.fifo_clear.next = true;
            }
        }
        if self.run.val() && !self.running_q.q.val() {
            self.running_q.d.next = true;
            self.done_q.d.next = false;
            self.fault_q.d.next = 0.into();
            self.cycles_q.d.next = 0.into();
            self.started.d.next = false;
            self.halting.d.next = false;
            // Every program starts with an empty shadow (core's timing model, and its machines).
            self.shadow_full.d.next = false;
        }
        if self.reset.val() {
            self.running_q.d.next = false;
            self.done_q.d.next = false;
            self.fault_q.d.next = 0.into();
            self.cycles_q.d.next = 0.into();
            self.started.d.next = false;
            self.halting.d.next = false;
            self.shadow_full.d.next = false;
            self.fifo_clear.next = true;
            self.pop.next = false;
        }
        self.word.next = self.head_word.val();
        self.running.next = self.running_q.q.val();
        self.done.next = self.done_q.q.val();
        self.fault.next = self.fault_q.q.val();
        self.cycles.next = self.cycles_q.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};
    use systole_core::Dtype;

    fn word(v: u128) -> Bits<128> {
        v.to_bits()
    }

    #[test]
    fn fifo_falls_through_and_counts() {
        let mut f = InstrFifo::new(3);
        f.connect_all();
        assert_eq!(f.free.val().index(), 0, "before settling");
        tick(&mut f, |f| &mut f.clock);
        assert!(!f.valid.val());
        assert_eq!(f.free.val().index(), 3);
        // Push 1, 2, 3: the head read issued with the first push collides with it, so the head
        // is valid (and 1) from the cycle after the second push.
        for v in 1..=3u128 {
            f.push.next = true;
            f.push_word.next = word(v << 100 | v);
            tick(&mut f, |f| &mut f.clock);
            assert_eq!(f.valid.val(), v > 1, "after push {v}");
            if v > 1 {
                assert_eq!(f.head.val(), word(1 << 100 | 1));
            }
        }
        assert_eq!(f.free.val().index(), 0);
        // Pop while pushing 4 (wrapping): heads 2, 3, 4.
        f.pop.next = true;
        f.push_word.next = word(4);
        tick(&mut f, |f| &mut f.clock);
        assert_eq!(f.head.val(), word(2 << 100 | 2));
        f.push.next = false;
        tick(&mut f, |f| &mut f.clock);
        assert_eq!(f.head.val(), word(3 << 100 | 3));
        tick(&mut f, |f| &mut f.clock);
        assert_eq!(f.head.val(), word(4));
        assert_eq!(f.free.val().index(), 2);
        // Pop the last word while pushing 5 into its successor's slot: stale for one cycle.
        f.push.next = true;
        f.push_word.next = word(5);
        tick(&mut f, |f| &mut f.clock);
        f.push.next = false;
        f.pop.next = false;
        assert!(!f.valid.val(), "the head read collided with the push");
        tick(&mut f, |f| &mut f.clock);
        assert!(f.valid.val());
        assert_eq!(f.head.val(), word(5));
        f.clear.next = true;
        tick(&mut f, |f| &mut f.clock);
        assert!(!f.valid.val());
        assert_eq!(f.free.val().index(), 3);
    }

    /// A weight load takes R cycles, bottom tile row first, and reports its last one.
    #[test]
    fn weight_loader_walks_the_tile_bottom_up() {
        let config = ArrayConfig::new(3, 2, Dtype::Int8);
        let mut wl = WeightLoader::new(&config);
        wl.connect_all();
        wl.enable.next = true;
        wl.start.next = true;
        wl.spad_row.next = 10u64.into();
        wl.rows.next = 2u64.into();
        wl.cols.next = 1u64.into();
        crate::testing::settle(&mut wl);
        assert_eq!(wl.spad_read.val().index(), 12, "the first read is addressed before dispatch");
        tick(&mut wl, |w| &mut w.clock);
        wl.start.next = false;
        let mut seen = vec![];
        for _ in 0..3 {
            crate::testing::settle(&mut wl);
            seen.push((wl.shift.val(), wl.row_valid.val(), wl.finishing.val(), wl.free.val()));
            tick(&mut wl, |w| &mut w.clock);
        }
        // Tile row 2 (past its 2 rows) is zero fill; rows 1 and 0 are real.
        assert_eq!(
            seen,
            vec![(true, false, false, false), (true, true, false, false), (true, true, true, true)]
        );
        crate::testing::settle(&mut wl);
        assert!(!wl.shift.val() && wl.free.val());
    }

    /// Run with an empty FIFO freezes the machine without counting; a `Sync` then `Halt`
    /// count two cycles (`Halt`'s own included), however long the words took to arrive.
    #[test]
    fn the_dispatcher_freezes_on_an_empty_fifo_and_counts_program_cycles() {
        let mut d = Dispatcher::default();
        d.connect_all();
        d.seq_free.next = true;
        d.wl_free.next = true;
        d.arr_free.next = true;
        d.run.next = true;
        tick(&mut d, |d| &mut d.clock);
        d.run.next = false;
        for _ in 0..5 {
            tick(&mut d, |d| &mut d.clock);
            assert!(d.running.val() && !d.enable.val(), "frozen while the FIFO is empty");
        }
        assert_eq!(d.cycles.val().to_u64(), 0);
        // A word arrives (decoded elsewhere; here a sequencer op, then a halt).
        d.head_valid.next = true;
        d.head_word.next = word(9);
        crate::testing::settle(&mut d);
        assert_eq!(d.word.val(), word(9), "the FIFO's head is the candidate");
        assert!(d.enable.val() && d.start_seq.val(), "the sync dispatches into the next cycle");
        assert!(d.pop.val(), "and leaves the FIFO");
        tick(&mut d, |d| &mut d.clock);
        d.head_valid.next = false;
        crate::testing::settle(&mut d);
        assert!(!d.enable.val() && !d.pop.val(), "frozen: the sync's own cycle waits for a word");
        for _ in 0..3 {
            tick(&mut d, |d| &mut d.clock);
            assert!(!d.enable.val(), "frozen again, waiting for the halt");
        }
        assert_eq!(d.cycles.val().to_u64(), 0);
        d.head_valid.next = true;
        d.halt.next = true;
        tick(&mut d, |d| &mut d.clock);
        d.head_valid.next = false;
        for _ in 0..3 {
            tick(&mut d, |d| &mut d.clock);
        }
        assert!(!d.running.val() && d.done.val());
        assert_eq!(d.cycles.val().to_u64(), 2, "sync, halt");
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(3, 4, Dtype::Bf16);
        yosys_validate("fifo", &verilog_of(InstrFifo::new(5))).unwrap();
        yosys_validate("sequencer", &verilog_of(Sequencer::new(&config))).unwrap();
        yosys_validate("weight_loader", &verilog_of(WeightLoader::new(&config))).unwrap();
        yosys_validate("array_unit", &verilog_of(ArrayUnit::new(&config))).unwrap();
        yosys_validate("dispatcher", &verilog_of(Dispatcher::default())).unwrap();
    }
}
