//! The UART: 8N1, `divisor` clock cycles per bit, LSB first.

use rust_hdl::prelude::*;

use crate::decode::{constant, holding};

/// UART receiver, 8N1: `valid` pulses for one cycle with each byte whose stop bit is high.
#[derive(LogicBlock)]
pub struct UartRx {
    pub clock: Signal<In, Clock>,
    pub rx: Signal<In, Bit>,
    pub data: Signal<Out, Bits<8>>,
    pub valid: Signal<Out, Bit>,
    sync1: DFF<Bit>,
    sync2: DFF<Bit>,
    state: DFF<Bits<2>>,
    count: DFF<Bits<16>>,
    bit_index: DFF<Bits<4>>,
    shift: DFF<Bits<8>>,
    out: DFF<Bits<8>>,
    strobe: DFF<Bit>,
    divisor_m1: Constant<Bits<16>>,
    /// The bits `count` can have: it counts down from `divisor - 1` (DECISIONS 94).
    count_bits: Constant<Bits<16>>,
    half_m1: Constant<Bits<16>>,
}

impl UartRx {
    pub fn new(divisor: u16) -> UartRx {
        assert!(divisor >= 4, "a UART divisor below 4 cannot find the middle of a bit");
        UartRx {
            clock: Default::default(),
            rx: Default::default(),
            data: Default::default(),
            valid: Default::default(),
            sync1: Default::default(),
            sync2: Default::default(),
            state: Default::default(),
            count: Default::default(),
            bit_index: Default::default(),
            shift: Default::default(),
            out: Default::default(),
            strobe: Default::default(),
            divisor_m1: constant(divisor as u64 - 1),
            count_bits: constant(holding(divisor as u64 - 1)),
            half_m1: constant(divisor as u64 / 2 - 1),
        }
    }
}

impl Logic for UartRx {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, sync1, sync2, state, count, bit_index, shift, out, strobe);
        self.sync1.d.next = self.rx.val();
        self.sync2.d.next = self.sync1.q.val();
        self.strobe.d.next = false;
        self.count.d.next = (self.count.q.val() - 1) & self.count_bits.val();
        // States: 0 idle, 1 start bit, 2 data bits, 3 stop bit.
        if self.state.q.val() == 0 {
            self.count.d.next = self.half_m1.val();
            if !self.sync2.q.val() {
                self.state.d.next = 1.into();
            }
        } else if !self.count.q.val().any() {
            self.count.d.next = self.divisor_m1.val();
            if self.state.q.val() == 1 {
                // The middle of the start bit: still low, or it was a glitch.
                self.state.d.next = 2.into();
                self.bit_index.d.next = 0.into();
                if self.sync2.q.val() {
                    self.state.d.next = 0.into();
                }
            } else if self.state.q.val() == 2 {
                self.shift.d.next =
                    (self.shift.q.val() >> 1) | (bit_cast::<8, 1>(self.sync2.q.val().into()) << 7);
                self.bit_index.d.next = self.bit_index.q.val() + 1;
                if self.bit_index.q.val() == 7 {
                    self.state.d.next = 3.into();
                }
            } else {
                self.state.d.next = 0.into();
                if self.sync2.q.val() {
                    self.out.d.next = self.shift.q.val();
                    self.strobe.d.next = true;
                }
            }
        }
        self.data.next = self.out.q.val();
        self.valid.next = self.strobe.q.val();
    }
}

/// UART transmitter, 8N1: takes `data` when `valid` and idle (`take` pulses), sends start bit,
/// eight data bits LSB first, stop bit; `tx` idles high.
#[derive(LogicBlock)]
pub struct UartTx {
    pub clock: Signal<In, Clock>,
    pub data: Signal<In, Bits<8>>,
    pub valid: Signal<In, Bit>,
    pub take: Signal<Out, Bit>,
    pub tx: Signal<Out, Bit>,
    shift: DFF<Bits<10>>,
    bits_left: DFF<Bits<4>>,
    count: DFF<Bits<16>>,
    divisor_m1: Constant<Bits<16>>,
    /// The bits `count` can have: it counts down from `divisor - 1`.
    count_bits: Constant<Bits<16>>,
}

impl UartTx {
    pub fn new(divisor: u16) -> UartTx {
        assert!(divisor >= 4, "UART divisor {divisor}");
        UartTx {
            clock: Default::default(),
            data: Default::default(),
            valid: Default::default(),
            take: Default::default(),
            tx: Default::default(),
            shift: Default::default(),
            bits_left: Default::default(),
            count: Default::default(),
            divisor_m1: constant(divisor as u64 - 1),
            count_bits: constant(holding(divisor as u64 - 1)),
        }
    }
}

impl Logic for UartTx {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, shift, bits_left, count);
        self.take.next = false;
        self.tx.next = true;
        if self.bits_left.q.val().any() {
            self.tx.next = self.shift.q.val().get_bit(0);
            self.count.d.next = (self.count.q.val() - 1) & self.count_bits.val();
            if !self.count.q.val().any() {
                self.count.d.next = self.divisor_m1.val();
                self.shift.d.next = self.shift.q.val() >> 1;
                self.bits_left.d.next = self.bits_left.q.val() - 1;
            }
        } else if self.valid.val() {
            self.take.next = true;
            // Stop bit, data, start bit; sent from bit 0 up.
            self.shift.d.next = (bit_cast::<10, 8>(self.data.val()) << 1) | 0x200;
            self.bits_left.d.next = 10.into();
            self.count.d.next = self.divisor_m1.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, tick};

    /// A byte sent by the transmitter comes out of the receiver.
    #[test]
    fn uart_loops_back() {
        #[derive(LogicBlock)]
        struct Loop {
            clock: Signal<In, Clock>,
            tx: UartTx,
            rx: UartRx,
        }
        impl Logic for Loop {
            #[hdl_gen]
            fn update(&mut self) {
                self.tx.clock.next = self.clock.val();
                self.rx.clock.next = self.clock.val();
                self.rx.rx.next = self.tx.tx.val();
            }
        }
        let mut l = Loop { clock: Default::default(), tx: UartTx::new(5), rx: UartRx::new(5) };
        l.connect_all();
        let mut got = vec![];
        let bytes = [0xA5u8, 0x00, 0xFF, 0x5A];
        let mut next = 0;
        for _ in 0..bytes.len() * 60 {
            l.tx.valid.next = next < bytes.len();
            l.tx.data.next = (bytes[next.min(bytes.len() - 1)] as u64).into();
            settle(&mut l);
            if l.tx.take.val() {
                next += 1;
            }
            if l.rx.valid.val() {
                got.push(l.rx.data.val().index() as u8);
            }
            tick(&mut l, |l| &mut l.clock);
        }
        assert_eq!(got, bytes);
    }
}
