//! The requantize lane's products made by one 16 x 16 multiplier over four cycles, for machines
//! built with `ArrayConfig::requant_cycles = 4` (docs/DECISIONS.md 57): a quarter of the logic
//! of the accumulator lane's [`Mul32`](crate::vector::Mul32), which an FPGA without multipliers
//! builds from LUTs.
//!
//! The sequencer holds each `Requantize` row on the accumulators' read port for four cycles
//! and counts them on `phase` (0 to 3). Phase `k` multiplies the halves it names (`ll`, `lh`,
//! `hl`, `hh` in that order: bit 1 picks `a`'s high half, bit 0 `b`'s) and keeps the product;
//! in phase 3 all four are on the outputs, the last one straight from the multiplier, so the
//! requantize lane reads them as it would [`Mul32`]'s in a one-cycle row. A register takes its
//! product whenever the phase names it, frozen cycles included: the row and the multiplier
//! hold still while it is read, so taking it again changes nothing.

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dtype};

// The products take four phases, the one `requant_cycles` other than 1 that core allows.
const _: () = assert!(
    systole_core::REQUANT_CYCLES.len() == 2
        && systole_core::REQUANT_CYCLES[0] == 1
        && systole_core::REQUANT_CYCLES[1] == 4
);

/// Whether a machine built for `config` makes its requantize products over four cycles: an INT8
/// machine (BF16 ones have no requantize lanes) with `requant_cycles > 1`.
pub fn serial_requant(config: &ArrayConfig) -> bool {
    config.dtype == Dtype::Int8 && config.requant_cycles > 1
}

/// `a * b` as four unsigned 16 x 16 products, one a cycle (module docs).
#[derive(LogicBlock, Default)]
pub struct SerialProducts {
    pub clock: Signal<In, Clock>,
    /// The row's cycle: 0 to 3.
    pub phase: Signal<In, Bits<2>>,
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
    a_half: Signal<Local, Bits<16>>,
    b_half: Signal<Local, Bits<16>>,
    product: Signal<Local, Bits<32>>,
    ll_q: DFF<Bits<32>>,
    lh_q: DFF<Bits<32>>,
    hl_q: DFF<Bits<32>>,
}

impl Logic for SerialProducts {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, ll_q, lh_q, hl_q);
        self.a_half.next = self.a.val().get_bits::<16>(0);
        if self.phase.val().get_bit(1) {
            self.a_half.next = self.a.val().get_bits::<16>(16);
        }
        self.b_half.next = self.b.val().get_bits::<16>(0);
        if self.phase.val().get_bit(0) {
            self.b_half.next = self.b.val().get_bits::<16>(16);
        }
        self.product.next = self.a_half.val() * self.b_half.val();
        if self.phase.val() == 0 {
            self.ll_q.d.next = self.product.val();
        }
        if self.phase.val() == 1 {
            self.lh_q.d.next = self.product.val();
        }
        if self.phase.val() == 2 {
            self.hl_q.d.next = self.product.val();
        }
        self.ll.next = self.ll_q.q.val();
        self.lh.next = self.lh_q.q.val();
        self.hl.next = self.hl_q.q.val();
        self.hh.next = self.product.val();
    }
}
