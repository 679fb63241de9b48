//! A DRAM transfer on the SDRAM: core's `timing::sdram` contract in logic. The sequencer hands
//! it a `Load`'s, `LoadAcc`'s or store's DRAM side as it starts; it offers the transfer's words
//! to the [`super::SdramPort`], one a phase ([`SdramWalk`]), and
//!
//! * for a read, places each word's bytes in a row register as they land (`read_arrival`
//!   array cycles after their READ) and shows a row on `row_data` in the cycle its last word
//!   lands (`row_valid`), the row's bytes from 0 as the row port's DRAM shows them. A row's last
//!   word is not offered in a phase after one in which a row ended, so rows land one a cycle.
//! * for a write, takes the source rows the sequencer reads into [`WRITE_SLOTS`] row registers
//!   (`push`, with `push_data` from byte 0, as the row port's DRAM takes them) and offers a
//!   row's words from the cycle after its push. The sequencer may address a source row (`issue`)
//!   while `room`: fewer than two rows addressed and not yet written.
//!
//! `last_row` says the transfer's last row lands in this cycle.
//!
//! The transfer keeps the machine's time (`enable`, low in a frozen cycle: nothing moves, no word
//! is offered), as the controller does, while the chip answers in real time: the port hands each
//! READ's word on a cycle before it lands, and a queue of words (real time in, the landing
//! words out) holds it until its READ's landing cycle comes, however long the machine froze.

use rust_hdl::prelude::*;
use systole_core::timing::sdram::WRITE_SLOTS;

use super::each;
use super::sdram_walk::SdramWalk;
use crate::delay::Delay;
use crate::optional::Optional;

// Two row registers: `room` compares a count with 2, the registers alternate.
const _: () = assert!(WRITE_SLOTS == 2);

/// One transfer at a time between the sequencer and the SDRAM port; see the module docs.
/// Each port to the SDRAM is one per phase.
#[derive(LogicBlock)]
pub struct SdramTransfer {
    pub clock: Signal<In, Clock>,
    /// Low in a frozen cycle of a run (module docs).
    pub enable: Signal<In, Bit>,
    /// A transfer is dispatched next cycle: its direction, first DRAM byte, rows, elements a row,
    /// the row and element strides in elements, and the bytes of an element (1, 2 or 4).
    pub start: Signal<In, Bit>,
    pub write: Signal<In, Bit>,
    pub addr: Signal<In, Bits<32>>,
    pub rows: Signal<In, Bits<16>>,
    pub len: Signal<In, Bits<16>>,
    pub row_stride: Signal<In, Bits<32>>,
    pub elem_stride: Signal<In, Bits<32>>,
    pub es: Signal<In, Bits<3>>,
    /// A read's row lands.
    pub row_valid: Signal<Out, Bit>,
    pub row_data: Vec<Signal<Out, Bits<8>>>,
    /// The transfer's last row lands (a read's) or is written (a write's).
    pub last_row: Signal<Out, Bit>,
    /// A write's source rows: one may be addressed now; one is addressed; one is here.
    pub room: Signal<Out, Bit>,
    pub issue: Signal<In, Bit>,
    pub push: Signal<In, Bit>,
    pub push_data: Vec<Signal<In, Bits<8>>>,
    /// The SDRAM port's request side, and each phase's READ word, a cycle before it lands.
    pub request: Vec<Signal<Out, Bit>>,
    pub word: Vec<Signal<Out, Bits<32>>>,
    pub write_word: Vec<Signal<Out, Bit>>,
    pub write_data: Vec<Signal<Out, Bits<16>>>,
    pub write_mask: Vec<Signal<Out, Bits<2>>>,
    pub accept: Vec<Signal<In, Bit>>,
    pub read_valid: Vec<Signal<In, Bit>>,
    pub read_data: Vec<Signal<In, Bits<16>>>,
    walk0: SdramWalk,
    walk1: Optional<SdramWalk>,
    // The transfer, latched as it starts.
    writing: DFF<Bit>,
    strided: DFF<Bit>,
    span_m1: DFF<Bits<32>>,
    elem_step: DFF<Bits<32>>,
    row_step: DFF<Bits<32>>,
    es_bytes: DFF<Bits<16>>,
    len_m1: DFF<Bits<16>>,
    // Where the walk stands (`SdramWalk`).
    active: DFF<Bit>,
    word_at: DFF<Bits<32>>,
    word_last: DFF<Bits<32>>,
    first_word: DFF<Bit>,
    lo_odd: DFF<Bit>,
    end_odd: DFF<Bit>,
    pos: DFF<Bits<16>>,
    span_lo: DFF<Bits<32>>,
    span_dest: DFF<Bits<16>>,
    row_base: DFF<Bits<32>>,
    elems_left: DFF<Bits<16>>,
    rows_left: DFF<Bits<16>>,
    /// Per phase, a READ given, its row byte, its bytes that are the row's, whether it ends its
    /// row and the transfer: lines of `read_arrival` registers, whose ends are its word's.
    lands_valid: Vec<Delay<Bit>>,
    lands_pos: Vec<Delay<Bits<16>>>,
    lands_lo: Vec<Delay<Bit>>,
    lands_hi: Vec<Delay<Bit>>,
    lands_end: Vec<Delay<Bit>>,
    lands_last: Vec<Delay<Bit>>,
    /// The read's row as its words land.
    row: Vec<DFF<Bits<8>>>,
    // The write's two row registers, whether each holds a row, which one the next push fills and
    // which one the walk writes from; source rows addressed and rows written.
    slot0: Vec<DFF<Bits<8>>>,
    slot1: Vec<DFF<Bits<8>>>,
    full0: DFF<Bit>,
    full1: DFF<Bit>,
    push_at: DFF<Bit>,
    pop_at: DFF<Bit>,
    issued: DFF<Bits<16>>,
    written: DFF<Bits<16>>,
    // Phase 1's: its row register, and whether a row ended in phase 0.
    pop_second: Signal<Local, Bit>,
    ended_first: Signal<Local, Bit>,
    /// Each phase's word's bytes from the row register it writes from.
    lo_byte: Vec<Signal<Local, Bits<8>>>,
    hi_byte: Vec<Signal<Local, Bits<8>>>,
    /// Each phase's row byte of its word's low byte (`pos - 1`), offered and landing.
    pos_m1: Vec<Signal<Local, Bits<16>>>,
    land_m1: Vec<Signal<Local, Bits<16>>>,
    /// The row's bytes with phase 0's landed word, and with every phase's.
    merged: Vec<Signal<Local, Bits<8>>>,
    landed: Vec<Signal<Local, Bits<8>>>,
    /// The READs' words, in order, until they land, and how many there are; the first two,
    /// and this cycle's words as they come in, in order.
    queue: Vec<DFF<Bits<16>>>,
    queued: DFF<Bits<5>>,
    word0: Signal<Local, Bits<16>>,
    word1: Signal<Local, Bits<16>>,
    in0: Signal<Local, Bits<16>>,
    in1: Signal<Local, Bits<16>>,
    ins: Signal<Local, Bits<5>>,
    pops: Signal<Local, Bits<5>>,
    tail: Signal<Local, Bits<5>>,
    /// Phase 1's landed word ends its row; phase 1 gives a write row's last WRITE.
    second_ends: Signal<Local, Bit>,
    end_second: Signal<Local, Bit>,
    /// The starting transfer's first span's last byte, its span less one.
    start_hi: Signal<Local, Bits<32>>,
    start_span_m1: Signal<Local, Bits<32>>,
    start_strided: Signal<Local, Bit>,
}

impl SdramTransfer {
    /// The transfer logic of a machine whose DRAM rows are up to `row_bytes` bytes, with `phases`
    /// SDRAM cycles an array cycle and a READ's word landing `read_arrival` array cycles on.
    pub fn new(row_bytes: usize, phases: usize, read_arrival: usize) -> SdramTransfer {
        assert!((1..=2).contains(&phases) && (1..=8).contains(&read_arrival));
        assert!((1..1 << 15).contains(&row_bytes), "rows of {row_bytes} bytes");
        SdramTransfer {
            clock: Default::default(),
            enable: Default::default(),
            start: Default::default(),
            write: Default::default(),
            addr: Default::default(),
            rows: Default::default(),
            len: Default::default(),
            row_stride: Default::default(),
            elem_stride: Default::default(),
            es: Default::default(),
            row_valid: Default::default(),
            row_data: each(row_bytes),
            last_row: Default::default(),
            room: Default::default(),
            issue: Default::default(),
            push: Default::default(),
            push_data: each(row_bytes),
            request: each(phases),
            word: each(phases),
            write_word: each(phases),
            write_data: each(phases),
            write_mask: each(phases),
            accept: each(phases),
            read_valid: each(phases),
            read_data: each(phases),
            walk0: Default::default(),
            walk1: Optional::default_when(phases == 2),
            writing: Default::default(),
            strided: Default::default(),
            span_m1: Default::default(),
            elem_step: Default::default(),
            row_step: Default::default(),
            es_bytes: Default::default(),
            len_m1: Default::default(),
            active: Default::default(),
            word_at: Default::default(),
            word_last: Default::default(),
            first_word: Default::default(),
            lo_odd: Default::default(),
            end_odd: Default::default(),
            pos: Default::default(),
            span_lo: Default::default(),
            span_dest: Default::default(),
            row_base: Default::default(),
            elems_left: Default::default(),
            rows_left: Default::default(),
            lands_valid: (0..phases).map(|_| Delay::new(read_arrival)).collect(),
            lands_pos: (0..phases).map(|_| Delay::new(read_arrival)).collect(),
            lands_lo: (0..phases).map(|_| Delay::new(read_arrival)).collect(),
            lands_hi: (0..phases).map(|_| Delay::new(read_arrival)).collect(),
            lands_end: (0..phases).map(|_| Delay::new(read_arrival)).collect(),
            lands_last: (0..phases).map(|_| Delay::new(read_arrival)).collect(),
            row: each(row_bytes),
            slot0: each(row_bytes),
            slot1: each(row_bytes),
            full0: Default::default(),
            full1: Default::default(),
            push_at: Default::default(),
            pop_at: Default::default(),
            issued: Default::default(),
            written: Default::default(),
            pop_second: Default::default(),
            ended_first: Default::default(),
            lo_byte: each(phases),
            hi_byte: each(phases),
            pos_m1: each(phases),
            land_m1: each(phases),
            merged: each(row_bytes),
            landed: each(row_bytes),
            queue: each(phases * read_arrival),
            queued: Default::default(),
            word0: Default::default(),
            word1: Default::default(),
            in0: Default::default(),
            in1: Default::default(),
            ins: Default::default(),
            pops: Default::default(),
            tail: Default::default(),
            second_ends: Default::default(),
            end_second: Default::default(),
            start_hi: Default::default(),
            start_span_m1: Default::default(),
            start_strided: Default::default(),
        }
    }
}

impl Logic for SdramTransfer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, writing, strided, span_m1, elem_step, row_step, es_bytes, len_m1, active,
            word_at, word_last, first_word, lo_odd, end_odd, pos, span_lo, span_dest, row_base,
            elems_left, rows_left, full0, full1, push_at, pop_at, issued, written, queued
        );
        for q in 0..self.queue.len() {
            self.queue[q].clock.next = self.clock.val();
            self.queue[q].d.next = self.queue[q].q.val();
        }
        for j in 0..self.row.len() {
            self.row[j].clock.next = self.clock.val();
            self.slot0[j].clock.next = self.clock.val();
            self.slot1[j].clock.next = self.clock.val();
            self.slot0[j].d.next = self.slot0[j].q.val();
            self.slot1[j].d.next = self.slot1[j].q.val();
        }
        for p in 0..self.request.len() {
            self.lands_valid[p].clock.next = self.clock.val();
            self.lands_pos[p].clock.next = self.clock.val();
            self.lands_lo[p].clock.next = self.clock.val();
            self.lands_hi[p].clock.next = self.clock.val();
            self.lands_end[p].clock.next = self.clock.val();
            self.lands_last[p].clock.next = self.clock.val();
            self.lands_valid[p].enable.next = self.enable.val();
            self.lands_pos[p].enable.next = self.enable.val();
            self.lands_lo[p].enable.next = self.enable.val();
            self.lands_hi[p].enable.next = self.enable.val();
            self.lands_end[p].enable.next = self.enable.val();
            self.lands_last[p].enable.next = self.enable.val();
        }

        // Phase 0: the walk from the registers, its word's bytes from the row register it
        // writes from (a write's only once the register holds the row).
        self.walk0.strided.next = self.strided.q.val();
        self.walk0.span_m1.next = self.span_m1.q.val();
        self.walk0.elem_step.next = self.elem_step.q.val();
        self.walk0.row_step.next = self.row_step.q.val();
        self.walk0.es.next = self.es_bytes.q.val();
        self.walk0.len_m1.next = self.len_m1.q.val();
        self.walk0.active.next = self.active.q.val();
        self.walk0.word.next = self.word_at.q.val();
        self.walk0.word_last.next = self.word_last.q.val();
        self.walk0.first.next = self.first_word.q.val();
        self.walk0.lo_odd.next = self.lo_odd.q.val();
        self.walk0.end_odd.next = self.end_odd.q.val();
        self.walk0.pos.next = self.pos.q.val();
        self.walk0.span_lo.next = self.span_lo.q.val();
        self.walk0.span_dest.next = self.span_dest.q.val();
        self.walk0.row_base.next = self.row_base.q.val();
        self.walk0.elems_left.next = self.elems_left.q.val();
        self.walk0.rows_left.next = self.rows_left.q.val();
        self.walk0.go.next = !self.writing.q.val()
            || (!self.pop_at.q.val() && self.full0.q.val())
            || (self.pop_at.q.val() && self.full1.q.val());
        self.walk0.accept.next = self.accept[0].val();
        self.pos_m1[0].next = self.walk0.pos.val() - 1;
        self.lo_byte[0].next = 0.into();
        self.hi_byte[0].next = 0.into();
        for j in 0..self.row.len() {
            if self.pos_m1[0].val() == j.to_bits::<16>() {
                self.lo_byte[0].next = self.slot0[j].q.val();
                if self.pop_at.q.val() {
                    self.lo_byte[0].next = self.slot1[j].q.val();
                }
            }
            if self.walk0.pos.val() == j.to_bits::<16>() {
                self.hi_byte[0].next = self.slot0[j].q.val();
                if self.pop_at.q.val() {
                    self.hi_byte[0].next = self.slot1[j].q.val();
                }
            }
        }
        self.request[0].next = self.walk0.request.val();
        self.word[0].next = self.walk0.word.val();
        self.write_word[0].next = self.writing.q.val();
        self.write_data[0].next = bit_cast::<16, 8>(self.hi_byte[0].val()) << 8
            | bit_cast::<16, 8>(self.lo_byte[0].val());
        self.write_mask[0].next = 0.into();
        if !self.walk0.lo_ok.val() {
            self.write_mask[0].next = 1.into();
        }
        if !self.walk0.hi_ok.val() {
            self.write_mask[0].next = 2.into();
        }
        self.lands_valid[0].d_in.next = self.accept[0].val() && !self.writing.q.val();
        self.lands_pos[0].d_in.next = self.walk0.pos.val();
        self.lands_lo[0].d_in.next = self.walk0.lo_ok.val();
        self.lands_hi[0].d_in.next = self.walk0.hi_ok.val();
        self.lands_end[0].d_in.next = self.walk0.row_end.val();
        self.lands_last[0].d_in.next = self.walk0.last.val();
        self.ended_first.next = self.accept[0].val() && self.walk0.row_end.val();
        self.pop_second.next = self.pop_at.q.val() ^ self.ended_first.val();
        self.last_row.next = self.writing.q.val() && self.accept[0].val() && self.walk0.last.val();

        // The walk's state after the last phase (phase 1's overrides phase 0's).
        self.active.d.next = self.walk0.next_active.val();
        self.word_at.d.next = self.walk0.next_word.val();
        self.word_last.d.next = self.walk0.next_word_last.val();
        self.first_word.d.next = self.walk0.next_first.val();
        self.lo_odd.d.next = self.walk0.next_lo_odd.val();
        self.end_odd.d.next = self.walk0.next_end_odd.val();
        self.pos.d.next = self.walk0.next_pos.val();
        self.span_lo.d.next = self.walk0.next_span_lo.val();
        self.span_dest.d.next = self.walk0.next_span_dest.val();
        self.row_base.d.next = self.walk0.next_row_base.val();
        self.elems_left.d.next = self.walk0.next_elems_left.val();
        self.rows_left.d.next = self.walk0.next_rows_left.val();
        self.second_ends.next = false;

        // Phase 1, from phase 0: a read row's last word waits out a phase in which a row ended.
        for _s in 0..self.walk1.len() {
            self.walk1.strided.next = self.strided.q.val();
            self.walk1.span_m1.next = self.span_m1.q.val();
            self.walk1.elem_step.next = self.elem_step.q.val();
            self.walk1.row_step.next = self.row_step.q.val();
            self.walk1.es.next = self.es_bytes.q.val();
            self.walk1.len_m1.next = self.len_m1.q.val();
            self.walk1.active.next = self.walk0.next_active.val();
            self.walk1.word.next = self.walk0.next_word.val();
            self.walk1.word_last.next = self.walk0.next_word_last.val();
            self.walk1.first.next = self.walk0.next_first.val();
            self.walk1.lo_odd.next = self.walk0.next_lo_odd.val();
            self.walk1.end_odd.next = self.walk0.next_end_odd.val();
            self.walk1.pos.next = self.walk0.next_pos.val();
            self.walk1.span_lo.next = self.walk0.next_span_lo.val();
            self.walk1.span_dest.next = self.walk0.next_span_dest.val();
            self.walk1.row_base.next = self.walk0.next_row_base.val();
            self.walk1.elems_left.next = self.walk0.next_elems_left.val();
            self.walk1.rows_left.next = self.walk0.next_rows_left.val();
            self.walk1.go.next = !(self.ended_first.val() && self.walk1.row_end.val());
            if self.writing.q.val() {
                self.walk1.go.next = (!self.pop_second.val() && self.full0.q.val())
                    || (self.pop_second.val() && self.full1.q.val());
            }
            self.walk1.accept.next = self.accept[1].val();
            self.pos_m1[1].next = self.walk1.pos.val() - 1;
            self.lo_byte[1].next = 0.into();
            self.hi_byte[1].next = 0.into();
            for j in 0..self.row.len() {
                if self.pos_m1[1].val() == j.to_bits::<16>() {
                    self.lo_byte[1].next = self.slot0[j].q.val();
                    if self.pop_second.val() {
                        self.lo_byte[1].next = self.slot1[j].q.val();
                    }
                }
                if self.walk1.pos.val() == j.to_bits::<16>() {
                    self.hi_byte[1].next = self.slot0[j].q.val();
                    if self.pop_second.val() {
                        self.hi_byte[1].next = self.slot1[j].q.val();
                    }
                }
            }
            self.request[1].next = self.walk1.request.val();
            self.word[1].next = self.walk1.word.val();
            self.write_word[1].next = self.writing.q.val();
            self.write_data[1].next = bit_cast::<16, 8>(self.hi_byte[1].val()) << 8
                | bit_cast::<16, 8>(self.lo_byte[1].val());
            self.write_mask[1].next = 0.into();
            if !self.walk1.lo_ok.val() {
                self.write_mask[1].next = 1.into();
            }
            if !self.walk1.hi_ok.val() {
                self.write_mask[1].next = 2.into();
            }
            self.lands_valid[1].d_in.next = self.accept[1].val() && !self.writing.q.val();
            self.lands_pos[1].d_in.next = self.walk1.pos.val();
            self.lands_lo[1].d_in.next = self.walk1.lo_ok.val();
            self.lands_hi[1].d_in.next = self.walk1.hi_ok.val();
            self.lands_end[1].d_in.next = self.walk1.row_end.val();
            self.lands_last[1].d_in.next = self.walk1.last.val();
            if self.writing.q.val() && self.accept[1].val() && self.walk1.last.val() {
                self.last_row.next = true;
            }
            self.active.d.next = self.walk1.next_active.val();
            self.word_at.d.next = self.walk1.next_word.val();
            self.word_last.d.next = self.walk1.next_word_last.val();
            self.first_word.d.next = self.walk1.next_first.val();
            self.lo_odd.d.next = self.walk1.next_lo_odd.val();
            self.end_odd.d.next = self.walk1.next_end_odd.val();
            self.pos.d.next = self.walk1.next_pos.val();
            self.span_lo.d.next = self.walk1.next_span_lo.val();
            self.span_dest.d.next = self.walk1.next_span_dest.val();
            self.row_base.d.next = self.walk1.next_row_base.val();
            self.elems_left.d.next = self.walk1.next_elems_left.val();
            self.rows_left.d.next = self.walk1.next_rows_left.val();
            self.second_ends.next =
                self.lands_valid[1].d_out.val() && self.lands_end[1].d_out.val();
        }

        // A write's row registers: each row's last WRITE frees its register; a push fills the
        // next one.
        self.end_second.next = false;
        if self.writing.q.val() && self.ended_first.val() {
            self.pop_at.d.next = !self.pop_at.q.val();
            if self.pop_at.q.val() {
                self.full1.d.next = false;
            } else {
                self.full0.d.next = false;
            }
        }
        for _s in 0..self.walk1.len() {
            self.end_second.next =
                self.writing.q.val() && self.accept[1].val() && self.walk1.row_end.val();
            if self.end_second.val() {
                self.pop_at.d.next = !self.pop_second.val();
                if self.pop_second.val() {
                    self.full1.d.next = false;
                } else {
                    self.full0.d.next = false;
                }
            }
        }
        self.written.d.next = self.written.q.val()
            + bit_cast::<16, 1>((self.writing.q.val() && self.ended_first.val()).into())
            + bit_cast::<16, 1>(self.end_second.val().into());
        self.room.next = (self.issued.q.val() - self.written.q.val()) < 2;
        if self.issue.val() {
            self.issued.d.next = self.issued.q.val() + 1;
        }
        if self.push.val() {
            self.push_at.d.next = !self.push_at.q.val();
            if self.push_at.q.val() {
                self.full1.d.next = true;
            } else {
                self.full0.d.next = true;
            }
            for j in 0..self.row.len() {
                if self.push_at.q.val() {
                    self.slot1[j].d.next = self.push_data[j].val();
                } else {
                    self.slot0[j].d.next = self.push_data[j].val();
                }
            }
        }

        // The READs' words queue as they come; a landing word is the queue's first (phase 1's,
        // its second if phase 0's lands too).
        self.in0.next = self.read_data[0].val();
        self.in1.next = 0.into();
        self.ins.next = 0.into();
        if self.read_valid[0].val() {
            self.ins.next = 1.into();
        }
        for _s in 0..self.walk1.len() {
            if self.read_valid[1].val() {
                self.ins.next = self.ins.val() + 1;
                if self.read_valid[0].val() {
                    self.in1.next = self.read_data[1].val();
                } else {
                    self.in0.next = self.read_data[1].val();
                }
            }
        }
        self.word0.next = self.queue[0].q.val();
        self.word1.next = self.queue[0].q.val();
        self.pops.next = 0.into();
        if self.enable.val() && self.lands_valid[0].d_out.val() {
            self.pops.next = 1.into();
            self.word1.next = self.queue[1].q.val();
        }
        for _s in 0..self.walk1.len() {
            if self.enable.val() && self.lands_valid[1].d_out.val() {
                self.pops.next = self.pops.val() + 1;
            }
        }
        for q in 1..self.queue.len() {
            if self.pops.val() == 1 {
                self.queue[q - 1].d.next = self.queue[q].q.val();
            }
        }
        for q in 2..self.queue.len() {
            if self.pops.val() == 2 {
                self.queue[q - 2].d.next = self.queue[q].q.val();
            }
        }
        self.tail.next = self.queued.q.val() - self.pops.val();
        for q in 0..self.queue.len() {
            if self.tail.val() == q.to_bits::<5>() && self.ins.val().any() {
                self.queue[q].d.next = self.in0.val();
            }
        }
        for q in 1..self.queue.len() {
            if self.tail.val() + 1 == q.to_bits::<5>() && self.ins.val() == 2 {
                self.queue[q].d.next = self.in1.val();
            }
        }
        self.queued.d.next = self.tail.val() + self.ins.val();

        // A read's words land: phase 0's, then phase 1's, each byte in its row byte. The row
        // shown is the one whose last word lands: phase 1's only if it ends a row.
        self.land_m1[0].next = self.lands_pos[0].d_out.val() - 1;
        for _s in 0..self.walk1.len() {
            self.land_m1[1].next = self.lands_pos[1].d_out.val() - 1;
        }
        for j in 0..self.row.len() {
            self.merged[j].next = self.row[j].q.val();
            if self.lands_valid[0].d_out.val() {
                if self.lands_lo[0].d_out.val() && self.land_m1[0].val() == j.to_bits::<16>() {
                    self.merged[j].next = self.word0.val().get_bits::<8>(0);
                }
                if self.lands_hi[0].d_out.val()
                    && self.lands_pos[0].d_out.val() == j.to_bits::<16>()
                {
                    self.merged[j].next = self.word0.val().get_bits::<8>(8);
                }
            }
            self.landed[j].next = self.merged[j].val();
            for _s in 0..self.walk1.len() {
                if self.lands_valid[1].d_out.val() {
                    if self.lands_lo[1].d_out.val() && self.land_m1[1].val() == j.to_bits::<16>() {
                        self.landed[j].next = self.word1.val().get_bits::<8>(0);
                    }
                    if self.lands_hi[1].d_out.val()
                        && self.lands_pos[1].d_out.val() == j.to_bits::<16>()
                    {
                        self.landed[j].next = self.word1.val().get_bits::<8>(8);
                    }
                }
            }
            self.row[j].d.next = self.landed[j].val();
            self.row_data[j].next = self.merged[j].val();
            if self.second_ends.val() {
                self.row_data[j].next = self.landed[j].val();
            }
        }
        self.row_valid.next = self.lands_valid[0].d_out.val() && self.lands_end[0].d_out.val()
            || self.second_ends.val();
        if self.lands_valid[0].d_out.val() && self.lands_last[0].d_out.val() {
            self.last_row.next = true;
        }
        for _s in 0..self.walk1.len() {
            if self.lands_valid[1].d_out.val() && self.lands_last[1].d_out.val() {
                self.last_row.next = true;
            }
        }

        // A frozen cycle: no word offered, nothing lands, the state kept (the queue takes the
        // words the chip sends meanwhile).
        if !self.enable.val() {
            for p in 0..self.request.len() {
                self.request[p].next = false;
            }
            self.row_valid.next = false;
            self.last_row.next = false;
            self.active.d.next = self.active.q.val();
            self.word_at.d.next = self.word_at.q.val();
            self.word_last.d.next = self.word_last.q.val();
            self.first_word.d.next = self.first_word.q.val();
            self.lo_odd.d.next = self.lo_odd.q.val();
            self.end_odd.d.next = self.end_odd.q.val();
            self.pos.d.next = self.pos.q.val();
            self.span_lo.d.next = self.span_lo.q.val();
            self.span_dest.d.next = self.span_dest.q.val();
            self.row_base.d.next = self.row_base.q.val();
            self.elems_left.d.next = self.elems_left.q.val();
            self.rows_left.d.next = self.rows_left.q.val();
            self.full0.d.next = self.full0.q.val();
            self.full1.d.next = self.full1.q.val();
            self.push_at.d.next = self.push_at.q.val();
            self.pop_at.d.next = self.pop_at.q.val();
            self.issued.d.next = self.issued.q.val();
            self.written.d.next = self.written.q.val();
            for j in 0..self.row.len() {
                self.row[j].d.next = self.row[j].q.val();
                self.slot0[j].d.next = self.slot0[j].q.val();
                self.slot1[j].d.next = self.slot1[j].q.val();
            }
        }

        // A transfer starts: its first span.
        self.start_strided.next = self.elem_stride.val() > 1;
        self.start_span_m1.next = bit_cast::<32, 3>(self.es.val()) - 1;
        if !self.start_strided.val() && self.elem_stride.val().any() {
            self.start_span_m1.next = bit_cast::<32, 16>(self.len.val()) - 1;
            if self.es.val() == 2 {
                self.start_span_m1.next = (bit_cast::<32, 16>(self.len.val()) << 1) - 1;
            }
            if self.es.val() == 4 {
                self.start_span_m1.next = (bit_cast::<32, 16>(self.len.val()) << 2) - 1;
            }
        }
        self.start_hi.next = self.addr.val() + self.start_span_m1.val();
        if self.start.val() && self.enable.val() {
            self.writing.d.next = self.write.val();
            self.strided.d.next = self.start_strided.val();
            self.span_m1.d.next = self.start_span_m1.val();
            self.elem_step.d.next = self.elem_stride.val();
            self.row_step.d.next = self.row_stride.val();
            if self.es.val() == 2 {
                self.elem_step.d.next = self.elem_stride.val() << 1;
                self.row_step.d.next = self.row_stride.val() << 1;
            }
            if self.es.val() == 4 {
                self.elem_step.d.next = self.elem_stride.val() << 2;
                self.row_step.d.next = self.row_stride.val() << 2;
            }
            self.es_bytes.d.next = bit_cast::<16, 3>(self.es.val());
            self.len_m1.d.next = self.len.val() - 1;
            self.active.d.next = true;
            self.word_at.d.next = self.addr.val() >> 1;
            self.word_last.d.next = self.start_hi.val() >> 1;
            self.first_word.d.next = true;
            self.lo_odd.d.next = self.addr.val().get_bit(0);
            self.end_odd.d.next = self.start_hi.val().get_bit(0);
            self.pos.d.next = 1.into();
            if self.addr.val().get_bit(0) {
                self.pos.d.next = 0.into();
            }
            self.span_lo.d.next = self.addr.val();
            self.span_dest.d.next = 0.into();
            self.row_base.d.next = self.addr.val();
            self.elems_left.d.next = self.len.val() - 1;
            self.rows_left.d.next = self.rows.val() - 1;
        }
    }
}

#[cfg(test)]
mod tests;
