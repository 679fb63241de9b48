//! One SDRAM cycle of a transfer's word walk, as logic without registers: from where the walk
//! stands, the word it offers (core's `timing::sdram::Transfer::spans`: each row's spans, each
//! span's 16-bit words in order) and where it stands after, one word further if the offer was
//! accepted. [`super::SdramTransfer`] chains one per phase and registers the last.
//!
//! A span is `span_m1 + 1` bytes from DRAM byte `span_lo`, the bytes of row byte `span_dest` on;
//! its words run from `span_lo / 2` to `word_last`. `pos` is one more than the row byte the
//! offered word's low byte holds (0 for a span that starts at an odd byte, whose word's low byte
//! is not the row's), and the word's low (high) byte is the row's unless it lies before (after)
//! the span.

use rust_hdl::prelude::*;

/// The walk over a transfer's words; see the module docs.
#[derive(LogicBlock, Default)]
pub struct SdramWalk {
    /// The transfer: its spans are one element each (`strided`), `span_m1 + 1` bytes; elements
    /// `elem_step` bytes apart and `es` row bytes each; rows `row_step` bytes apart; `len_m1 + 1`
    /// elements a row.
    pub strided: Signal<In, Bit>,
    pub span_m1: Signal<In, Bits<32>>,
    pub elem_step: Signal<In, Bits<32>>,
    pub row_step: Signal<In, Bits<32>>,
    pub es: Signal<In, Bits<16>>,
    pub len_m1: Signal<In, Bits<16>>,
    /// Where the walk stands: words are left; the word; its span's last; whether it is its span's
    /// first; the span's first byte and whether it (its last) is odd; the row byte of the word;
    /// the span's first row byte and DRAM byte; the row's DRAM byte; elements and rows after
    /// this one.
    pub active: Signal<In, Bit>,
    pub word: Signal<In, Bits<32>>,
    pub word_last: Signal<In, Bits<32>>,
    pub first: Signal<In, Bit>,
    pub lo_odd: Signal<In, Bit>,
    pub end_odd: Signal<In, Bit>,
    pub pos: Signal<In, Bits<16>>,
    pub span_lo: Signal<In, Bits<32>>,
    pub span_dest: Signal<In, Bits<16>>,
    pub row_base: Signal<In, Bits<32>>,
    pub elems_left: Signal<In, Bits<16>>,
    pub rows_left: Signal<In, Bits<16>>,
    /// The word may be offered in this cycle; its READ or WRITE was given.
    pub go: Signal<In, Bit>,
    pub accept: Signal<In, Bit>,
    /// The offer: the word, its bytes that are the row's, whether it ends its row (and the
    /// transfer).
    pub request: Signal<Out, Bit>,
    pub lo_ok: Signal<Out, Bit>,
    pub hi_ok: Signal<Out, Bit>,
    pub row_end: Signal<Out, Bit>,
    pub last: Signal<Out, Bit>,
    /// Where the walk stands after this cycle.
    pub next_active: Signal<Out, Bit>,
    pub next_word: Signal<Out, Bits<32>>,
    pub next_word_last: Signal<Out, Bits<32>>,
    pub next_first: Signal<Out, Bit>,
    pub next_lo_odd: Signal<Out, Bit>,
    pub next_end_odd: Signal<Out, Bit>,
    pub next_pos: Signal<Out, Bits<16>>,
    pub next_span_lo: Signal<Out, Bits<32>>,
    pub next_span_dest: Signal<Out, Bits<16>>,
    pub next_row_base: Signal<Out, Bits<32>>,
    pub next_elems_left: Signal<Out, Bits<16>>,
    pub next_rows_left: Signal<Out, Bits<16>>,
    span_end: Signal<Local, Bit>,
    /// The next span (a new one starts), its first byte, last byte and row byte.
    new_span: Signal<Local, Bit>,
    lo: Signal<Local, Bits<32>>,
    hi: Signal<Local, Bits<32>>,
    dest: Signal<Local, Bits<16>>,
}

impl Logic for SdramWalk {
    #[hdl_gen]
    fn update(&mut self) {
        self.span_end.next = self.word.val() == self.word_last.val();
        self.row_end.next =
            self.span_end.val() && (!self.strided.val() || !self.elems_left.val().any());
        self.last.next = self.row_end.val() && !self.rows_left.val().any();
        self.request.next = self.active.val() && self.go.val();
        self.lo_ok.next = !(self.first.val() && self.lo_odd.val());
        self.hi_ok.next = !self.span_end.val() || self.end_odd.val();

        self.next_active.next = self.active.val();
        self.next_word.next = self.word.val();
        self.next_word_last.next = self.word_last.val();
        self.next_first.next = self.first.val();
        self.next_lo_odd.next = self.lo_odd.val();
        self.next_end_odd.next = self.end_odd.val();
        self.next_pos.next = self.pos.val();
        self.next_span_lo.next = self.span_lo.val();
        self.next_span_dest.next = self.span_dest.val();
        self.next_row_base.next = self.row_base.val();
        self.next_elems_left.next = self.elems_left.val();
        self.next_rows_left.next = self.rows_left.val();
        self.new_span.next = false;
        self.lo.next = self.span_lo.val() + self.elem_step.val();
        self.dest.next = self.span_dest.val() + self.es.val();
        if self.accept.val() {
            if !self.span_end.val() {
                self.next_word.next = self.word.val() + 1;
                self.next_first.next = false;
                self.next_pos.next = self.pos.val() + 2;
            } else if !self.row_end.val() {
                // The row's next element.
                self.new_span.next = true;
                self.next_elems_left.next = self.elems_left.val() - 1;
            } else if !self.last.val() {
                // The next row.
                self.new_span.next = true;
                self.lo.next = self.row_base.val() + self.row_step.val();
                self.dest.next = 0.into();
                self.next_row_base.next = self.lo.val();
                self.next_elems_left.next = self.len_m1.val();
                self.next_rows_left.next = self.rows_left.val() - 1;
            } else {
                self.next_active.next = false;
            }
        }
        self.hi.next = self.lo.val() + self.span_m1.val();
        if self.new_span.val() {
            self.next_word.next = self.lo.val() >> 1;
            self.next_word_last.next = self.hi.val() >> 1;
            self.next_first.next = true;
            self.next_lo_odd.next = self.lo.val().get_bit(0);
            self.next_end_odd.next = self.hi.val().get_bit(0);
            self.next_pos.next = self.dest.val() + 1;
            if self.lo.val().get_bit(0) {
                self.next_pos.next = self.dest.val();
            }
            self.next_span_lo.next = self.lo.val();
            self.next_span_dest.next = self.dest.val();
        }
    }
}
