//! The sequencer: the unit that moves rows between DRAM, the scratchpad and the accumulators
//! (loads, stores, vector ops, casts, requantization, casting stores), and runs `Sync`.
//!
//! # Transposing loads (decoupled configs)
//!
//! Built for `Schedule::Decoupled`, the sequencer runs a `Load` that core's
//! `timing::transposes` picks (`row_stride == 1`, `elem_stride > 1`, `len > 1`, `rows > 1`)
//! through the [`crate::transpose::Transposer`], in blocks of `W = spad_width` rows, driving
//! its controls (`transpose_write`, `transpose_read`, `transpose_half`, `transpose_next_row`,
//! `transpose_next_half`, and `element` as the column). A block takes
//! `max(len, W) = W` cycles (the program checks keep `len <= W`); counting cycles from
//! dispatch:
//!
//! * block `b`'s `len` wide DRAM reads land in cycles `b * W + e` (`e < len`): read `e` is the
//!   `W` consecutive elements from element `b * W + e * elem_stride` of the view (addressed a
//!   cycle ahead on `dram_read_address`, from the next state, as every read), and
//!   `transpose_write` is high with `element` at `e` and `transpose_half` at `b mod 2` (not in
//!   a frozen cycle);
//! * block `b`'s row `i` (rows that exist: the last block may be partial) is written to
//!   scratchpad row `spad_row + b * W + i` in cycle `b * W + len + i` (core's
//!   `timing::row_lands`), so rows land back to back, row `r` in cycle `len + r`:
//!   `transpose_read` puts it on the buffer's output (from the half that is not filling; the
//!   buffer took `i` from `transpose_next_row` a cycle before) while `spad_write` is high and
//!   `spad_write_row` is the row (block `b + 1` is filling the other half meanwhile);
//! * `is_load` is high and `gather` and `broadcast` low throughout, so the scratchpad lanes
//!   take their elements from the buffer's output, zero at and past `length`; `free` is high
//!   in the cycle of the last row, `len + rows - 1` (core's `timing::duration`).
//!
//! While the last block drains, the reads of the block after it may start; they fill the other
//! half and nothing uses them. `systole_top` wires the buffer as `crate::transpose`'s module
//! docs say. Built for the blocking schedule, the sequencer has no transpose controls and every
//! transposing register's input is a constant, which synthesis removes: the blocking sequencer
//! has its ports and synthesises to the cells it had.
//!
//! # The byte port (blocking)
//!
//! Built for `DramPort::Byte`, the DRAM is one byte wide and every row of a DRAM transfer takes
//! a cycle per byte (core's `timing::load_row_cycles` and `timing::transfer_row_cycles`):
//! `elem` counts the row's bytes, `n_len` holds how many (`len`, or `4 len` for a `Store` or
//! `LoadAcc`), and the row ends, and lands, in the last. A `Load` of more than one element
//! gathers (its lanes' row-buffer registers keep each byte, `element` naming the lane); a
//! `LoadAcc` gathers its words in `crate::top::ByteWord`s and writes the accumulator row in
//! the last cycle; a `Store` or `StoreSpad` writes its byte each cycle at `dram_ptr` (byte
//! `element mod 4` of word `element / 4`, or element `element`), stepping one byte a cycle
//! and `row_stride` from row to row. On a BF16 machine a `Load`, `StoreSpad` or `StoreBf16`
//! row moves two bytes an element, low first: a `Load` steps one byte within an element and
//! `2 elem_stride - 1` to the next, its lanes pairing the bytes (`SpadLane::pairing_bytes`);
//! a `StoreBf16` writes its bytes `convert_stages` cycles after their reads, with the element
//! and address delayed beside them (`conv_element`). Every byte-port choice is made in a loop
//! over `span` or `conv_element`, which only byte-port sequencers have, so a row-port one is
//! emitted exactly as before the byte port existed (docs/DECISIONS.md 114).

//! # The SDRAM port
//!
//! Built for `DramPort::Sdram`, the sequencer leaves a DRAM transfer's words to
//! `crate::mem::SdramTransfer` (core's `timing::sdram` contract) and paces its rows by it: a
//! `Load` or `LoadAcc` row is written when the transfer says one lands (`sdram_row`; the row
//! arrives assembled, so nothing gathers or transposes), and the instruction ends, after its
//! read-stage tail, with the last. A store reads its source rows one a cycle while the transfer
//! has room for them: row `r + 1` is addressed (`sdram_issue`) in a cycle with `sdram_room`, and
//! each row's datapath write (`dram_write_count`, which the top pushes into the transfer) is
//! shown once, in the cycle of its read (`fresh`); the store ends when its last word is written
//! (`sdram_last`). Every SDRAM choice is made in a loop over `sdram_row`, which only SDRAM
//! sequencers have.

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::{ArrayConfig, DramPort, Schedule};

use super::seq_writes::SeqWrites;
use crate::decode::{constant, holding};
use crate::delay::Delay;
use crate::optional::Optional;
use crate::vector::AccOp;

// The drain counter (`tail`, two bits) counts up to `MAX_CONVERT_STAGES + MAX_READ_STAGES - 1`.
const _: () = assert!(systole_core::MAX_CONVERT_STAGES + systole_core::MAX_READ_STAGES <= 4);

/// The sequencer: `Load`, `Store`, `Vector`, `CastBf16`, `Requantize`, `LoadAcc`, `StoreSpad`,
/// `StoreBf16` one row per cycle (a strided `Load` gathers one element per cycle, a transposing one goes
/// through the transpose buffer: module docs; a `Requantize` row takes `requant_cycles`), `Sync`
/// in one cycle.
#[derive(LogicBlock)]
pub struct Sequencer {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    /// The instruction, as decoded.
    pub ins: Decoded,
    /// Idle at the start of the next cycle, unless started now.
    pub free: Signal<Out, Bit>,
    /// Busy in the next cycle: the decoupled top gives it the ports it addresses then. (The
    /// blocking top selects them a step earlier, from `free` and the dispatcher's
    /// `seq_may_start`, before the program checks decide.)
    pub busy_next: Signal<Out, Bit>,
    // What the datapath does this cycle.
    pub is_load: Signal<Out, Bit>,
    pub is_store: Signal<Out, Bit>,
    /// A `StoreBf16` row: the DRAM takes the cast lanes' elements.
    pub is_store_bf16: Signal<Out, Bit>,
    pub gather: Signal<Out, Bit>,
    pub broadcast: Signal<Out, Bit>,
    pub element: Signal<Out, Bits<16>>,
    pub length: Signal<Out, Bits<16>>,
    pub spad_write: Signal<Out, Bit>,
    pub spad_write_row: Signal<Out, Bits<16>>,
    pub acc_write: Signal<Out, Bit>,
    pub acc_write_row: Signal<Out, Bits<16>>,
    /// A vector op or `LoadAcc` runs: the accumulator lanes take `acc_op` (through both cycles
    /// of a paced row, which writes in its second only).
    pub lanes_busy: Signal<Out, Bit>,
    pub acc_op: Signal<Out, AccOp>,
    pub dram_write_address: Signal<Out, Bits<32>>,
    pub dram_write_count: Signal<Out, Bits<16>>,
    pub immediate: Signal<Out, Bits<32>>,
    pub requant_multiplier: Signal<Out, Bits<32>>,
    pub requant_shift: Signal<Out, Bits<5>>,
    pub requant_zero_point: Signal<Out, Bits<8>>,
    /// The transpose buffer's controls (under the decoupled schedule only): write this cycle's
    /// DRAM row into column `element` of half `transpose_half` (low in frozen cycles); read a
    /// row of the other half for this cycle's scratchpad write, the one named in the cycle
    /// before by `transpose_next_row` and `transpose_next_half` (the drain row and the filling
    /// half of the next cycle, unless an instruction starts: its first cycle reads nothing).
    pub transpose_write: Optional<Signal<Out, Bit>>,
    pub transpose_read: Optional<Signal<Out, Bit>>,
    pub transpose_half: Optional<Signal<Out, Bit>>,
    pub transpose_next_row: Optional<Signal<Out, Bits<16>>>,
    pub transpose_next_half: Optional<Signal<Out, Bit>>,
    // Read addresses for the next cycle.
    pub dram_read_address: Signal<Out, Bits<32>>,
    pub spad_read: Signal<Out, Bits<16>>,
    pub acc_read_x: Signal<Out, Bits<16>>,
    pub acc_read_y: Signal<Out, Bits<16>>,
    /// Built for the SDRAM port only (module docs): a transfer's row lands now; its last lands or
    /// is written now; a store's next source row may be addressed now; it is.
    pub sdram_row: Optional<Signal<In, Bit>>,
    pub sdram_last: Optional<Signal<In, Bit>>,
    pub sdram_room: Optional<Signal<In, Bit>>,
    pub sdram_issue: Optional<Signal<Out, Bit>>,
    /// A store reads its current source row in this cycle (the row's first); it has read its
    /// last one (it waits for the transfer); it is a store.
    fresh: Optional<DFF<Bit>>,
    all_read: Optional<DFF<Bit>>,
    sdram_store: Optional<Signal<Local, Bit>>,
    busy: DFF<Bit>,
    k_load: DFF<Bit>,
    k_store: DFF<Bit>,
    k_vector: DFF<Bit>,
    k_cast: DFF<Bit>,
    k_requant: DFF<Bit>,
    k_load_acc: DFF<Bit>,
    k_store_spad: DFF<Bit>,
    k_store_bf16: DFF<Bit>,
    op: DFF<AccOp>,
    row: DFF<Bits<16>>,
    n_rows: DFF<Bits<16>>,
    elem: DFF<Bits<16>>,
    n_len: DFF<Bits<16>>,
    /// `row == n_rows - 1` and `elem == n_len - 1`, registered: set in the cycle before, as
    /// the counters move, so the dispatch decision (`free`, then the scoreboard) waits on no
    /// 16-bit compare.
    row_at_last: DFF<Bit>,
    elem_at_last: DFF<Bit>,
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
    k_transpose: DFF<Bit>,
    /// The first block is in the buffer: a row is written every cycle from now on.
    draining: DFF<Bit>,
    drain_row: DFF<Bits<16>>,
    half: DFF<Bit>,
    /// A conversion's rows are all read; the lanes' pipeline drains (`convert_stages` cycles).
    tailing: DFF<Bit>,
    tail: DFF<Bits<2>>,
    /// Built with conversion stages, and the drain's last cycle (`convert_stages - 1`).
    pipelined: Constant<Bit>,
    tail_last: Constant<Bits<2>>,
    /// Built with `requant_cycles = 4` (one constant, 3; else none): a `Requantize` row takes
    /// four cycles, counted by `elem` (on `element`) and ending in the one this names, while
    /// the conversion lanes make its products (`crate::convert::SerialProducts`).
    requant_last: Vec<Constant<Bits<2>>>,
    /// Built with paced BF16 lanes (`crate::vector::paced_scale`): a `Scale` or `Axpy` row takes
    /// `scale_extra` cycles more for the product (one, or two on lanes that split it,
    /// `crate::vector::split_product`). Built with a staged add (`crate::vector::add_registers`):
    /// a row that adds (`BiasAdd`, `BiasRelu`, `Add`, `Axpy`) takes `add_extra` cycles more for
    /// the sum, one for each register inside the lanes' f32 add. Such a row (`k_paced`) takes
    /// `pace_last + 1` cycles (core's `timing::vector_row_cycles`), counted by `elem`, and is
    /// written in the last.
    scale_extra: Constant<Bits<2>>,
    add_extra: Constant<Bits<2>>,
    k_paced: DFF<Bit>,
    pace_last: DFF<Bits<3>>,
    /// The candidate's extra cycles a row: for the product, for the sum.
    pace_product: Signal<Local, Bits<2>>,
    pace_sum: Signal<Local, Bits<2>>,
    /// The write side of a conversion, `convert_stages` cycles behind its reads: the
    /// scratchpad write and its row (`CastBf16`, `Requantize`), the DRAM write and its address
    /// (`StoreBf16`).
    conv_spad_write: Delay<Bit>,
    conv_spad_row: Delay<Bits<16>>,
    conv_store: Delay<Bit>,
    conv_dram_address: Delay<Bits<32>>,
    /// This cycle's datapath controls, and those the datapath takes (the same, or built with
    /// read stages, `late`'s); nothing at all (an idle cycle, and a read-stage tail's).
    now: Signal<Local, SeqWrites>,
    shown: Signal<Local, SeqWrites>,
    idle: Constant<SeqWrites>,
    late: Optional<Delay<SeqWrites>>,
    /// Built with read stages (`ArrayConfig::read_stages`): every instruction but `Sync` ends
    /// with a tail of as many cycles (a conversion's follows its pipeline's, `tail_last` then
    /// counting both) while its last rows' registered reads arrive and are written; this is
    /// the last cycle of such a tail.
    read_tail_last: Optional<Constant<Bits<2>>>,
    /// Built for the decoupled schedule: transposing loads exist.
    decoupled: Constant<Bit>,
    /// A BF16 machine: `CastBf16` and `StoreBf16` run, `Requantize` never does (and the
    /// other way round on INT8).
    bf16: Constant<Bit>,
    /// The bits `row` and `n_rows` can have (an instruction's rows are within a memory), and
    /// `elem` and `n_len` (a row's elements, a block's cycles, a paced row's phases): masks
    /// that let Yosys drop the bits above (docs/DECISIONS.md 94).
    rows_bits: Constant<Bits<16>>,
    elem_bits: Constant<Bits<16>>,
    /// `W - 1`, a block's last cycle.
    width_last: Constant<Bits<16>>,
    /// `W` elements in bytes: from one block's first DRAM element to the next's.
    block_step: Constant<Bits<32>>,
    /// log2 of the scratchpad element's bytes.
    elem_shift: Constant<Bits<2>>,
    /// Built with the byte port only (`ArrayConfig::dram_port`, module docs): the candidate's
    /// cycles a row, its `len`, or its bytes for a `Store` or `LoadAcc` (`len * 4`) and, on a
    /// BF16 machine, for a `Load`, `StoreSpad` or `StoreBf16` (`len * 2`). Every byte-port
    /// choice below is made inside a loop over it, so a row-port sequencer is emitted exactly
    /// as it was before the byte port existed.
    span: Optional<Signal<Local, Bits<16>>>,
    /// Built with the byte port on a BF16 machine only, its two-byte elements: the byte a
    /// `StoreBf16` writes (`element`), `convert_stages` cycles behind its read as the write's
    /// address is. Every two-byte choice is made inside a loop over it.
    conv_element: Optional<Delay<Bits<16>>>,
    row_last: Signal<Local, Bit>,
    /// The instruction's last row ends in this cycle.
    final_row: Signal<Local, Bit>,
    /// A `CastBf16`, `Requantize` or `StoreBf16` (core's `timing::converts`).
    converting: Signal<Local, Bit>,
    last: Signal<Local, Bit>,
    /// The candidate is a transposing `Load` (`timing::transposes`).
    transposes: Signal<Local, Bit>,
    /// The pointers' next values while an instruction continues (not started, enabled): the
    /// reads it issues. They never depend on `start`, which waits for the program checks.
    dram_cont: Signal<Local, Bits<32>>,
    /// The drain row and filling half of the next cycle if nothing starts: a dispatch's first
    /// cycle reads no block from the transpose buffer, so its read addresses need not wait for
    /// `start`, which the scoreboard decides late in the cycle.
    drain_cont: Optional<Signal<Local, Bits<16>>>,
    half_cont: Optional<Signal<Local, Bit>>,
    spad_cont: Signal<Local, Bits<16>>,
    acc_cont: Signal<Local, Bits<16>>,
    src_cont: Signal<Local, Bits<16>>,
    /// The candidate's first accumulator row (a vector op's destination).
    acc_first: Signal<Local, Bits<16>>,
    /// A transposing `Load` reads its block this cycle (`element < len`).
    filling: Signal<Local, Bit>,
}

impl Sequencer {
    pub fn new(config: &ArrayConfig) -> Sequencer {
        let w = config.spad_width();
        let decoupled = config.schedule == Schedule::Decoupled;
        let byte_port = config.dram_port == DramPort::Byte;
        let sdram = config.dram_port == DramPort::Sdram;
        // On the byte port `elem` counts a row's bytes, four a word.
        let elems = w.max(config.cols as usize).max(4);
        let elems = if byte_port {
            elems.max(4 * config.cols as usize).max(w * config.dtype.elem_bytes())
        } else {
            elems
        };
        Sequencer {
            ins: Default::default(),
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            free: Default::default(),
            busy_next: Default::default(),
            is_load: Default::default(),
            is_store: Default::default(),
            is_store_bf16: Default::default(),
            gather: Default::default(),
            broadcast: Default::default(),
            element: Default::default(),
            length: Default::default(),
            spad_write: Default::default(),
            spad_write_row: Default::default(),
            acc_write: Default::default(),
            acc_write_row: Default::default(),
            lanes_busy: Default::default(),
            acc_op: Default::default(),
            dram_write_address: Default::default(),
            dram_write_count: Default::default(),
            immediate: Default::default(),
            requant_multiplier: Default::default(),
            requant_shift: Default::default(),
            requant_zero_point: Default::default(),
            transpose_write: Optional::default_when(decoupled),
            transpose_read: Optional::default_when(decoupled),
            transpose_half: Optional::default_when(decoupled),
            transpose_next_row: Optional::default_when(decoupled),
            transpose_next_half: Optional::default_when(decoupled),
            dram_read_address: Default::default(),
            spad_read: Default::default(),
            acc_read_x: Default::default(),
            acc_read_y: Default::default(),
            sdram_row: Optional::default_when(sdram),
            sdram_last: Optional::default_when(sdram),
            sdram_room: Optional::default_when(sdram),
            sdram_issue: Optional::default_when(sdram),
            fresh: Optional::default_when(sdram),
            all_read: Optional::default_when(sdram),
            sdram_store: Optional::default_when(sdram),
            busy: Default::default(),
            k_load: Default::default(),
            k_store: Default::default(),
            k_vector: Default::default(),
            k_cast: Default::default(),
            k_requant: Default::default(),
            k_load_acc: Default::default(),
            k_store_spad: Default::default(),
            k_store_bf16: Default::default(),
            op: Default::default(),
            row: Default::default(),
            n_rows: Default::default(),
            elem: Default::default(),
            n_len: Default::default(),
            row_at_last: Default::default(),
            elem_at_last: Default::default(),
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
            k_transpose: Default::default(),
            draining: Default::default(),
            drain_row: Default::default(),
            half: Default::default(),
            tailing: Default::default(),
            tail: Default::default(),
            pipelined: Constant::new(config.convert_stages > 0 || config.read_stages > 0),
            tail_last: constant(
                (config.convert_stages + config.read_stages).saturating_sub(1) as u64
            ),
            requant_last: if crate::convert::serial_requant(config) {
                vec![constant(config.requant_cycles as u64 - 1)]
            } else {
                vec![]
            },
            scale_extra: constant(if crate::vector::paced_scale(config) {
                config.scale_cycles as u64 - 1
            } else {
                0
            }),
            add_extra: constant(crate::vector::add_registers(config) as u64),
            k_paced: Default::default(),
            pace_last: Default::default(),
            pace_product: Default::default(),
            pace_sum: Default::default(),
            conv_spad_write: Delay::new(config.convert_stages as usize),
            conv_spad_row: Delay::new(config.convert_stages as usize),
            conv_store: Delay::new(config.convert_stages as usize),
            conv_dram_address: Delay::new(config.convert_stages as usize),
            now: Default::default(),
            shown: Default::default(),
            idle: Constant::new(SeqWrites::default()),
            late: Optional::when(config.read_stages > 0, || {
                Delay::new(config.read_stages as usize)
            }),
            read_tail_last: Optional::when(config.read_stages > 0, || {
                constant(config.read_stages as u64 - 1)
            }),
            decoupled: Constant::new(config.schedule == Schedule::Decoupled),
            bf16: Constant::new(config.dtype == systole_core::Dtype::Bf16),
            rows_bits: constant(holding(config.spad_depth.max(config.acc_depth) as u64)),
            elem_bits: constant(holding(elems as u64)),
            width_last: constant(w as u64 - 1),
            block_step: constant((w * config.dtype.elem_bytes()) as u64),
            elem_shift: constant((config.dtype == systole_core::Dtype::Bf16) as u64),
            span: Optional::default_when(byte_port),
            conv_element: Optional::when(
                byte_port && config.dtype == systole_core::Dtype::Bf16,
                || Delay::new(config.convert_stages as usize),
            ),
            row_last: Default::default(),
            final_row: Default::default(),
            converting: Default::default(),
            last: Default::default(),
            transposes: Default::default(),
            filling: Default::default(),
            dram_cont: Default::default(),
            drain_cont: Optional::default_when(decoupled),
            half_cont: Optional::default_when(decoupled),
            spad_cont: Default::default(),
            acc_cont: Default::default(),
            src_cont: Default::default(),
            acc_first: Default::default(),
        }
    }
}

impl Logic for Sequencer {
    // The pointers' continuation reads as the branches below it do (clippy would fold it).
    #[allow(clippy::nonminimal_bool)]
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
            k_store_bf16,
            k_paced,
            pace_last,
            op,
            row,
            n_rows,
            elem,
            n_len,
            row_at_last,
            elem_at_last,
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
            zp,
            k_transpose,
            draining,
            drain_row,
            half,
            tailing,
            tail
        );
        self.conv_spad_write.clock.next = self.clock.val();
        self.conv_spad_row.clock.next = self.clock.val();
        self.conv_store.clock.next = self.clock.val();
        self.conv_dram_address.clock.next = self.clock.val();
        self.conv_spad_write.enable.next = self.enable.val();
        self.conv_spad_row.enable.next = self.enable.val();
        self.conv_store.enable.next = self.enable.val();
        self.conv_dram_address.enable.next = self.enable.val();
        self.pace_product.next = 0.into();
        if self.ins.scale.val() || self.ins.axpy.val() {
            self.pace_product.next = self.scale_extra.val();
        }
        self.pace_sum.next = 0.into();
        if self.ins.bias_add.val()
            || self.ins.add.val()
            || self.ins.bias_relu.val()
            || self.ins.axpy.val()
        {
            self.pace_sum.next = self.add_extra.val();
        }
        // A row ends in its last cycle (the element `len - 1` of a gather, else its only one);
        // `Sync` (no kind) is its own last cycle.
        self.row_last.next = !self.gathering.q.val() || self.elem_at_last.q.val();
        // A transposing `Load`'s rows end as its blocks drain.
        self.filling.next = self.elem.q.val() < self.n_len.q.val();
        if self.k_transpose.q.val() {
            self.row_last.next = self.draining.q.val();
        }
        // A paced `Requantize` row ends in its last phase.
        for k in 0..self.requant_last.len() {
            if self.k_requant.q.val() {
                self.row_last.next =
                    self.elem.q.val().get_bits::<2>(0) == self.requant_last[k].val();
            }
        }
        // A paced row ends in its last cycle.
        if self.k_paced.q.val() {
            self.row_last.next = self.elem.q.val().get_bits::<3>(0) == self.pace_last.q.val();
        }
        self.transposes.next = self.decoupled.val()
            && self.ins.load.val()
            && (self.ins.row_stride.val() == 1)
            && (self.ins.elem_stride.val() > 1)
            && (self.ins.len.val() > 1)
            && (self.ins.rows.val() > 1);
        // On the SDRAM a load's row ends as it lands; a store's advances while the transfer has
        // room, its last in the cycle of its read.
        for _s in 0..self.sdram_row.len() {
            self.transposes.next = false;
            self.sdram_store.next =
                self.k_store.q.val() || self.k_store_spad.q.val() || self.k_store_bf16.q.val();
            if self.k_load.q.val() || self.k_load_acc.q.val() {
                self.row_last.next = self.sdram_row.val();
            }
            if self.sdram_store.val() {
                self.row_last.next = self.sdram_room.val();
                if self.row_at_last.q.val() {
                    self.row_last.next = self.fresh.q.val();
                }
                if self.all_read.q.val() {
                    self.row_last.next = false;
                }
            }
        }
        self.final_row.next = self.row_last.val() && self.row_at_last.q.val();
        self.converting.next =
            self.k_cast.q.val() || self.k_requant.q.val() || self.k_store_bf16.q.val();
        // A conversion built with stages ends when its last row leaves the lanes.
        self.last.next = (self.final_row.val() && !(self.pipelined.val() && self.converting.val()))
            || (self.tailing.q.val() && (self.tail.q.val() == self.tail_last.val()))
            || !(self.k_load.q.val()
                || self.k_store.q.val()
                || self.k_vector.q.val()
                || self.k_cast.q.val()
                || self.k_requant.q.val()
                || self.k_load_acc.q.val()
                || self.k_store_spad.q.val()
                || self.k_store_bf16.q.val());
        for _s in 0..self.read_tail_last.len() {
            self.last.next = (self.tailing.q.val()
                && ((self.converting.val() && (self.tail.q.val() == self.tail_last.val()))
                    || (!self.converting.val()
                        && (self.tail.q.val() == self.read_tail_last.val()))))
                || !(self.k_load.q.val()
                    || self.k_store.q.val()
                    || self.k_vector.q.val()
                    || self.k_cast.q.val()
                    || self.k_requant.q.val()
                    || self.k_load_acc.q.val()
                    || self.k_store_spad.q.val()
                    || self.k_store_bf16.q.val());
        }
        for _s in 0..self.sdram_row.len() {
            if self.busy.q.val() && self.sdram_store.val() {
                self.last.next = self.sdram_last.val();
            }
        }
        self.free.next = !self.busy.q.val() || self.last.val();
        for _b in 0..self.span.len() {
            self.span.next = self.ins.len.val();
            if self.ins.store.val() || self.ins.load_acc.val() {
                self.span.next = self.ins.len.val() << 2;
            }
        }
        // Two bytes an element for a BF16 `Load`, `StoreSpad` or `StoreBf16`.
        for _p in 0..self.conv_element.len() {
            if self.ins.load.val() || self.ins.store_spad.val() || self.ins.store_bf16.val() {
                self.span.next = self.ins.len.val() << 1;
            }
        }
        self.acc_first.next = self.ins.acc_row.val();
        if self.ins.vector.val() {
            self.acc_first.next = self.ins.dst.val();
        }
        // Where a continuing instruction's pointers go (held in its last cycle, while the
        // conversion pipeline drains, and from its final row into the drain).
        self.dram_cont.next = self.dram_ptr.q.val();
        self.spad_cont.next = self.spad_ptr.q.val();
        self.acc_cont.next = self.acc_ptr.q.val();
        self.src_cont.next = self.src_ptr.q.val();
        if self.busy.q.val()
            && !self.last.val()
            && !self.tailing.q.val()
            && !(self.pipelined.val() && self.final_row.val())
        {
            if self.k_transpose.q.val() {
                if self.draining.q.val() {
                    self.spad_cont.next = self.spad_ptr.q.val() + 1;
                }
                if self.elem_at_last.q.val() {
                    self.dram_cont.next = self.dram_row.q.val() + self.row_step.q.val();
                } else if self.filling.val() {
                    self.dram_cont.next = self.dram_ptr.q.val() + self.elem_step.q.val();
                }
            } else if self.row_last.val() {
                self.spad_cont.next = self.spad_ptr.q.val() + 1;
                self.acc_cont.next = self.acc_ptr.q.val() + 1;
                if self.src_moves.q.val() {
                    self.src_cont.next = self.src_ptr.q.val() + 1;
                }
                self.dram_cont.next = self.dram_row.q.val() + self.row_step.q.val();
            } else {
                self.dram_cont.next = self.dram_ptr.q.val() + self.elem_step.q.val();
            }
        }
        // A BF16 `Load` on the byte port steps one byte from an element's low byte to its high
        // one, and `elem_step` from there to the next element's low byte.
        for _p in 0..self.conv_element.len() {
            if self.busy.q.val()
                && !self.last.val()
                && !self.tailing.q.val()
                && !(self.pipelined.val() && self.final_row.val())
                && !self.row_last.val()
                && self.k_load.q.val()
                && !self.elem.q.val().get_bit(0)
            {
                self.dram_cont.next = self.dram_ptr.q.val() + 1;
            }
        }
        for _k in 0..self.drain_cont.len() {
            self.drain_cont.next = self.drain_row.q.val();
            self.half_cont.next = self.half.q.val();
        }
        if self.enable.val() {
            self.dram_ptr.d.next = self.dram_cont.val();
            self.spad_ptr.d.next = self.spad_cont.val();
            self.acc_ptr.d.next = self.acc_cont.val();
            self.src_ptr.d.next = self.src_cont.val();
            if self.busy.q.val() {
                if self.last.val() {
                    self.busy.d.next = false;
                    self.tailing.d.next = false;
                } else if self.tailing.q.val() {
                    self.tail.d.next = self.tail.q.val() + 1;
                } else if self.pipelined.val() && self.final_row.val() {
                    // Only a conversion's last row gets here: its pipeline drains.
                    self.tailing.d.next = true;
                    self.tail.d.next = 0.into();
                } else if self.k_transpose.q.val() {
                    // `elem` counts a block's W cycles (len <= W); its reads are the first len.
                    if self.draining.q.val() {
                        self.row.d.next = (self.row.q.val() + 1) & self.rows_bits.val();
                        self.row_at_last.d.next = self.row.q.val() + 1 == self.n_rows.q.val() - 1;
                        self.drain_row.d.next = self.drain_row.q.val() + 1;
                    }
                    if self.elem_at_last.q.val() {
                        // The block is in the buffer: drain it while the next one fills. The
                        // previous block drained its last row in this cycle.
                        self.half.d.next = !self.half.q.val();
                        self.draining.d.next = true;
                        self.drain_row.d.next = 0.into();
                        self.dram_row.d.next = self.dram_row.q.val() + self.row_step.q.val();
                    }
                    self.elem.d.next = (self.elem.q.val() + 1) & self.elem_bits.val();
                    self.elem_at_last.d.next = self.elem.q.val() + 1 == self.n_len.q.val() - 1;
                    if self.elem.q.val() == self.width_last.val() {
                        self.elem.d.next = 0.into();
                        self.elem_at_last.d.next = self.n_len.q.val() == 1;
                    }
                } else if self.row_last.val() {
                    self.row.d.next = (self.row.q.val() + 1) & self.rows_bits.val();
                    self.row_at_last.d.next = self.row.q.val() + 1 == self.n_rows.q.val() - 1;
                    self.elem.d.next = 0.into();
                    self.elem_at_last.d.next = self.n_len.q.val() == 1;
                    self.dram_row.d.next = self.dram_row.q.val() + self.row_step.q.val();
                } else {
                    self.elem.d.next = (self.elem.q.val() + 1) & self.elem_bits.val();
                    self.elem_at_last.d.next = self.elem.q.val() + 1 == self.n_len.q.val() - 1;
                }
            }
            for _k in 0..self.drain_cont.len() {
                self.drain_cont.next = self.drain_row.d.val();
                self.half_cont.next = self.half.d.val();
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.k_load.d.next = self.ins.load.val();
                self.k_store.d.next = self.ins.store.val();
                self.k_vector.d.next = self.ins.vector.val();
                // Each conversion runs on its own dtype's machine only (core's checks refuse the
                // other's), so the other's paths are never built.
                self.k_cast.d.next = self.ins.cast_bf16.val() && self.bf16.val();
                self.k_requant.d.next = self.ins.requantize.val() && !self.bf16.val();
                self.k_load_acc.d.next = self.ins.load_acc.val();
                self.k_store_spad.d.next = self.ins.store_spad.val();
                self.k_store_bf16.d.next = self.ins.store_bf16.val() && self.bf16.val();
                self.k_paced.d.next = self.ins.vector.val()
                    && (self.pace_product.val().any() || self.pace_sum.val().any());
                self.pace_last.d.next = bit_cast::<3, 2>(self.pace_product.val())
                    + bit_cast::<3, 2>(self.pace_sum.val());
                self.op.d.next = AccOp::Axpy;
                // `Add` is the lanes' `BiasAdd` with a source row per row (`src_moves`).
                if self.ins.bias_add.val() || self.ins.add.val() {
                    self.op.d.next = AccOp::BiasAdd;
                }
                if self.ins.relu.val() {
                    self.op.d.next = AccOp::Relu;
                }
                if self.ins.relu_grad.val() {
                    self.op.d.next = AccOp::ReluGrad;
                }
                if self.ins.scale.val() {
                    self.op.d.next = AccOp::Scale;
                }
                if self.ins.bias_relu.val() {
                    self.op.d.next = AccOp::BiasRelu;
                }
                if self.ins.max.val() {
                    self.op.d.next = AccOp::Max;
                }
                if self.ins.equal.val() {
                    self.op.d.next = AccOp::Equal;
                }
                if self.ins.load_acc.val() {
                    self.op.d.next = AccOp::Word;
                }
                self.row.d.next = 0.into();
                self.n_rows.d.next = self.ins.rows.val() & self.rows_bits.val();
                self.row_at_last.d.next = self.ins.rows.val() == 1;
                self.elem.d.next = 0.into();
                self.n_len.d.next = self.ins.len.val() & self.elem_bits.val();
                self.elem_at_last.d.next = self.ins.len.val() == 1;
                // timing::load_row_cycles: one cycle per element unless contiguous or single
                // (or transposing).
                self.gathering.d.next = self.ins.load.val()
                    && (self.ins.elem_stride.val() > 1)
                    && (self.ins.len.val() > 1)
                    && !self.transposes.val();
                // On the byte port a cycle per byte of every DRAM transfer
                // (`timing::transfer_row_cycles`), one a byte apart but a `Load`'s elements.
                for _b in 0..self.span.len() {
                    self.n_len.d.next = self.span.val() & self.elem_bits.val();
                    self.elem_at_last.d.next = self.span.val() == 1;
                    self.gathering.d.next = (self.span.val() > 1)
                        && (self.ins.load.val()
                            || self.ins.store.val()
                            || self.ins.load_acc.val()
                            || self.ins.store_spad.val());
                }
                for _p in 0..self.conv_element.len() {
                    self.gathering.d.next = (self.span.val() > 1)
                        && (self.ins.load.val()
                            || self.ins.store.val()
                            || self.ins.load_acc.val()
                            || self.ins.store_spad.val()
                            || self.ins.store_bf16.val());
                }
                self.k_transpose.d.next = self.transposes.val();
                for _s in 0..self.sdram_row.len() {
                    self.gathering.d.next = false;
                }
                self.draining.d.next = false;
                self.drain_row.d.next = 0.into();
                self.half.d.next = false;
                self.tailing.d.next = false;
                self.tail.d.next = 0.into();
                self.broadcasting.d.next = self.ins.load.val() && !self.ins.elem_stride.val().any();
                self.spad_ptr.d.next = self.ins.spad_row.val();
                self.acc_ptr.d.next = self.acc_first.val();
                self.src_ptr.d.next = self.ins.src.val();
                self.src_moves.d.next = !(self.ins.bias_add.val() || self.ins.bias_relu.val());
                self.dram_row.d.next = self.ins.dram_addr.val();
                self.dram_ptr.d.next = self.ins.dram_addr.val();
                self.row_step.d.next = self.ins.row_stride.val() << self.elem_shift.val();
                if self.ins.store.val() || self.ins.load_acc.val() {
                    self.row_step.d.next = self.ins.row_stride.val() << 2;
                }
                if self.transposes.val() {
                    self.row_step.d.next = self.block_step.val();
                }
                self.elem_step.d.next = self.ins.elem_stride.val() << self.elem_shift.val();
                for _b in 0..self.span.len() {
                    if !self.ins.load.val() {
                        self.elem_step.d.next = 1.into();
                    }
                }
                for _p in 0..self.conv_element.len() {
                    if self.ins.load.val() {
                        self.elem_step.d.next = (self.ins.elem_stride.val() << 1) - 1;
                    }
                }
                self.imm_q.d.next = self.ins.imm.val();
                if self.ins.requantize.val() {
                    self.imm_q.d.next = self.ins.multiplier.val();
                }
                self.shift_q.d.next = self.ins.shift.val();
                self.zp.d.next = self.ins.zero_point.val();
            }
            if self.abort.val() {
                self.busy.d.next = false;
            }
        }
        // A store's source rows on the SDRAM: the first is addressed as it starts, each next one
        // as the row before it advances.
        for _s in 0..self.sdram_row.len() {
            self.fresh.clock.next = self.clock.val();
            self.fresh.d.next = self.fresh.q.val();
            self.all_read.clock.next = self.clock.val();
            self.all_read.d.next = self.all_read.q.val();
            self.sdram_issue.next = false;
            if self.enable.val() {
                self.fresh.d.next = self.busy.q.val()
                    && self.sdram_store.val()
                    && self.row_last.val()
                    && !self.row_at_last.q.val();
                self.sdram_issue.next = self.busy.q.val()
                    && self.sdram_store.val()
                    && self.row_last.val()
                    && !self.row_at_last.q.val();
                if self.busy.q.val() && self.sdram_store.val() && self.final_row.val() {
                    self.all_read.d.next = true;
                }
                if self.start.val() {
                    self.all_read.d.next = false;
                    self.fresh.d.next = true;
                    self.sdram_issue.next = self.ins.store.val()
                        || self.ins.store_spad.val()
                        || self.ins.store_bf16.val();
                }
            }
        }
        self.busy_next.next = self.busy.d.val();
        self.now.next = self.idle.val();
        self.now.next.is_load = self.busy.q.val() && self.k_load.q.val();
        self.now.next.is_store = self.busy.q.val() && self.k_store.q.val();
        // A conversion's writes come `convert_stages` cycles after its reads, with the lanes'
        // results; a reset (`busy` falls) drops those still in the pipeline.
        self.conv_store.d_in.next =
            self.busy.q.val() && self.k_store_bf16.q.val() && !self.tailing.q.val();
        for _s in 0..self.sdram_row.len() {
            if !self.fresh.q.val() {
                self.conv_store.d_in.next = false;
            }
        }
        self.conv_dram_address.d_in.next = self.dram_row.q.val();
        self.conv_spad_write.d_in.next = self.busy.q.val()
            && self.row_last.val()
            && (self.k_cast.q.val() || self.k_requant.q.val())
            && !self.tailing.q.val();
        self.conv_spad_row.d_in.next = self.spad_ptr.q.val();
        // On a BF16 machine's byte port a `StoreBf16` writes a byte a cycle at its pointer.
        for _p in 0..self.conv_element.len() {
            self.conv_element.clock.next = self.clock.val();
            self.conv_element.enable.next = self.enable.val();
            self.conv_element.d_in.next = self.elem.q.val();
            self.conv_dram_address.d_in.next = self.dram_ptr.q.val();
        }
        self.now.next.is_store_bf16 = self.busy.q.val() && self.conv_store.d_out.val();
        self.now.next.gather = self.gathering.q.val();
        self.now.next.broadcast = self.broadcasting.q.val();
        self.now.next.element = self.elem.q.val();
        self.now.next.length = self.n_len.q.val();
        self.now.next.spad_write =
            (self.busy.q.val() && self.row_last.val() && self.k_load.q.val())
                || (self.busy.q.val() && self.conv_spad_write.d_out.val());
        self.now.next.spad_write_row = self.conv_spad_row.d_out.val();
        if self.k_load.q.val() {
            self.now.next.spad_write_row = self.spad_ptr.q.val();
        }
        self.now.next.lanes_busy =
            self.busy.q.val() && (self.k_vector.q.val() || self.k_load_acc.q.val());
        // A paced row writes in its last cycle (`k_paced` is a constant zero where the lanes
        // are neither paced nor staged, so the write is the plain one there).
        self.now.next.acc_write = self.now.val().lanes_busy
            && (!self.k_paced.q.val()
                || self.elem.q.val().get_bits::<3>(0) == self.pace_last.q.val());
        // On the byte port a `LoadAcc` row is written in its last cycle.
        for _b in 0..self.span.len() {
            if self.k_load_acc.q.val() && !self.row_last.val() {
                self.now.next.acc_write = false;
            }
        }
        self.now.next.acc_write_row = self.acc_ptr.q.val();
        self.now.next.acc_op = self.op.q.val();
        self.now.next.dram_write_address = self.dram_row.q.val();
        if self.k_store_bf16.q.val() {
            self.now.next.dram_write_address = self.conv_dram_address.d_out.val();
        }
        self.now.next.dram_write_count = 0.into();
        if self.busy.q.val() && self.k_store.q.val() {
            self.now.next.dram_write_count = self.n_len.q.val() << 2;
        }
        // A `StoreBf16` runs on BF16 configs only, whose elements are its 2 bytes.
        if (self.busy.q.val() && self.k_store_spad.q.val()) || self.now.val().is_store_bf16 {
            self.now.next.dram_write_count = self.n_len.q.val() << self.elem_shift.val();
        }
        // On the byte port a `Store` or `StoreSpad` writes its byte each cycle, at the pointer.
        for _b in 0..self.span.len() {
            self.now.next.dram_write_address = self.dram_ptr.q.val();
            self.now.next.dram_write_count = 0.into();
            if self.busy.q.val() && (self.k_store.q.val() || self.k_store_spad.q.val()) {
                self.now.next.dram_write_count = 1.into();
            }
        }
        for _p in 0..self.conv_element.len() {
            if self.k_store_bf16.q.val() {
                self.now.next.dram_write_address = self.conv_dram_address.d_out.val();
                self.now.next.element = self.conv_element.d_out.val();
            }
            if self.now.val().is_store_bf16 {
                self.now.next.dram_write_count = 1.into();
            }
        }
        // On the SDRAM a store row is written to the transfer once, in the cycle of its read; a
        // `LoadAcc` row as it lands.
        for _s in 0..self.sdram_row.len() {
            if (self.k_store.q.val() || self.k_store_spad.q.val()) && !self.fresh.q.val() {
                self.now.next.dram_write_count = 0.into();
            }
            if self.k_load_acc.q.val() && !self.row_last.val() {
                self.now.next.acc_write = false;
            }
        }
        self.now.next.immediate = self.imm_q.q.val();
        self.now.next.requant_multiplier = self.imm_q.q.val();
        self.now.next.requant_shift = self.shift_q.q.val();
        self.now.next.requant_zero_point = self.zp.q.val();
        // Block `b` fills half `b mod 2` (`half`) while block `b - 1` drains from the other.
        for _k in 0..self.transpose_write.len() {
            self.transpose_write.next = self.enable.val()
                && self.busy.q.val()
                && self.k_transpose.q.val()
                && self.filling.val();
            self.transpose_read.next =
                self.busy.q.val() && self.k_transpose.q.val() && self.draining.q.val();
            self.transpose_half.next = self.half.q.val();
            self.transpose_next_row.next = self.drain_cont.val();
            self.transpose_next_half.next = self.half_cont.val();
        }
        // What reaches the datapath: this cycle's controls, or (built with read stages) those
        // of `read_stages` cycles before, when the rows they name arrive from the registered
        // reads. An instruction's own read-stage tail sends nothing (a conversion's tail
        // carries its pipelined writes).
        self.shown.next = self.now.val();
        for _s in 0..self.late.len() {
            self.late.clock.next = self.clock.val();
            self.late.enable.next = self.enable.val();
            self.late.d_in.next = self.now.val();
            if self.tailing.q.val() && !self.converting.val() {
                self.late.d_in.next = self.idle.val();
            }
            self.shown.next = self.late.d_out.val();
        }
        self.is_load.next = self.shown.val().is_load;
        self.is_store.next = self.shown.val().is_store;
        self.is_store_bf16.next = self.shown.val().is_store_bf16;
        self.gather.next = self.shown.val().gather;
        self.broadcast.next = self.shown.val().broadcast;
        self.element.next = self.shown.val().element;
        self.length.next = self.shown.val().length;
        self.spad_write.next = self.shown.val().spad_write;
        self.spad_write_row.next = self.shown.val().spad_write_row;
        self.acc_write.next = self.shown.val().acc_write;
        self.acc_write_row.next = self.shown.val().acc_write_row;
        self.lanes_busy.next = self.shown.val().lanes_busy;
        self.acc_op.next = self.shown.val().acc_op;
        self.dram_write_address.next = self.shown.val().dram_write_address;
        self.dram_write_count.next = self.shown.val().dram_write_count;
        self.immediate.next = self.shown.val().immediate;
        self.requant_multiplier.next = self.shown.val().requant_multiplier;
        self.requant_shift.next = self.shown.val().requant_shift;
        self.requant_zero_point.next = self.shown.val().requant_zero_point;
        // The reads for the next cycle: a continuing instruction's, else (free) the candidate's
        // first, whether or not it dispatches. That keeps the program checks, which decide
        // `start`, off the memories' address pins; a read nobody dispatched for is never used
        // (the unit is idle), and `systole_top` gives the shared ports to the sequencer only
        // when it continues or its candidate may dispatch.
        self.dram_read_address.next = self.dram_cont.val();
        self.spad_read.next = self.spad_cont.val();
        self.acc_read_x.next = self.acc_cont.val();
        self.acc_read_y.next = self.src_cont.val();
        if self.free.val() {
            self.dram_read_address.next = self.ins.dram_addr.val();
            self.spad_read.next = self.ins.spad_row.val();
            self.acc_read_x.next = self.acc_first.val();
            self.acc_read_y.next = self.ins.src.val();
        }
    }
}

#[cfg(test)]
mod tests;
