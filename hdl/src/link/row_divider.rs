//! Division of a host byte address by a row's bytes, for rows whose bytes are not a power of
//! two.

use rust_hdl::prelude::*;

use crate::decode::constant;

/// Restoring division of a 32-bit byte address by a row's bytes, one quotient bit per cycle:
/// `start` loads `dividend`, `busy` stays set for the 32 steps, then `quotient` and
/// `remainder` hold. The engine needs it only for rows whose bytes are not a
/// power of two; otherwise a shift and a mask split the address.
#[derive(LogicBlock)]
pub struct RowDivider {
    pub clock: Signal<In, Clock>,
    pub start: Signal<In, Bit>,
    pub dividend: Signal<In, Bits<32>>,
    /// Divide by a scratchpad row's bytes (else an accumulator row's).
    pub spad: Signal<In, Bit>,
    pub busy: Signal<Out, Bit>,
    pub quotient: Signal<Out, Bits<32>>,
    pub remainder: Signal<Out, Bits<32>>,
    rest: DFF<Bits<16>>,
    shifted: DFF<Bits<32>>,
    steps: DFF<Bits<6>>,
    spad_row_bytes: Constant<Bits<16>>,
    acc_row_bytes: Constant<Bits<16>>,
    divisor: Signal<Local, Bits<16>>,
    trial: Signal<Local, Bits<16>>,
}

impl RowDivider {
    pub fn new(spad_row_bytes: u64, acc_row_bytes: u64) -> RowDivider {
        RowDivider {
            clock: Default::default(),
            start: Default::default(),
            dividend: Default::default(),
            spad: Default::default(),
            busy: Default::default(),
            quotient: Default::default(),
            remainder: Default::default(),
            rest: Default::default(),
            shifted: Default::default(),
            steps: Default::default(),
            spad_row_bytes: constant(spad_row_bytes),
            acc_row_bytes: constant(acc_row_bytes),
            divisor: Default::default(),
            trial: Default::default(),
        }
    }
}

impl Logic for RowDivider {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, rest, shifted, steps);
        self.divisor.next = self.acc_row_bytes.val();
        if self.spad.val() {
            self.divisor.next = self.spad_row_bytes.val();
        }
        // The quotient shifts into `shifted` from the right as the dividend leaves at the left.
        self.trial.next =
            (self.rest.q.val() << 1) | bit_cast::<16, 1>(self.shifted.q.val().get_bits::<1>(31));
        if self.steps.q.val().any() {
            self.steps.d.next = self.steps.q.val() - 1;
            self.shifted.d.next = self.shifted.q.val() << 1;
            self.rest.d.next = self.trial.val();
            if self.trial.val() >= self.divisor.val() {
                self.rest.d.next = self.trial.val() - self.divisor.val();
                self.shifted.d.next = (self.shifted.q.val() << 1) | 1;
            }
        }
        if self.start.val() {
            self.rest.d.next = 0.into();
            self.shifted.d.next = self.dividend.val();
            self.steps.d.next = 32.into();
        }
        self.busy.next = self.steps.q.val().any();
        self.quotient.next = self.shifted.q.val();
        self.remainder.next = bit_cast::<32, 16>(self.rest.q.val());
    }
}
