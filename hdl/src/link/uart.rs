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

/// The sampling margin of [`UartRx`] at `divisor` for a sender `rate_error` off its rate
/// (0.01: the sender's bits are 1% shorter; -0.01: 1% longer): the least distance, in the
/// sender's bits, from a sample to an edge of the bit it samples, over a frame's start bit,
/// eight data bits and stop bit. Negative: some frame is misread.
///
/// The receiver sees the start bit's falling edge through its two synchroniser flops at the
/// first clock edge after it, or (a flop gone metastable) the one after: a cycle of uncertainty,
/// `phase` in (0, 1] below. From there it samples bit `i` at `phase + divisor / 2 + i * divisor`
/// cycles after the falling edge (the counter's half bit rounds down), through the same flops,
/// so their fixed delay cancels. A sender's bit `i` spans `[i, i + 1)` times its bit,
/// `divisor / (1 + rate_error)` cycles. The margin is the worse of the two ends of the
/// uncertainty: the earliest samples against the start of their bits, the latest against
/// their end; the error accumulates to the stop bit.
pub fn sampling_margin(divisor: u16, rate_error: f64) -> f64 {
    let d = divisor as f64;
    let half = (divisor / 2) as f64;
    let bit = d / (1.0 + rate_error);
    (0..10)
        .map(|i| {
            let i = i as f64;
            let early = half + i * d - i * bit;
            let late = (i + 1.0) * bit - (1.0 + half + i * d);
            early.min(late) / bit
        })
        .fold(f64::INFINITY, f64::min)
}

/// The rate error at which [`sampling_margin`] at `divisor` reaches zero: the fastest sender
/// (`faster`) or the slowest whose every frame the receiver reads, to a part in 10^12.
pub fn rate_error_limit(divisor: u16, faster: bool) -> f64 {
    let (mut ok, mut bad) = (0.0, if faster { 0.5 } else { -0.5 });
    for _ in 0..40 {
        let mid = (ok + bad) / 2.0;
        if sampling_margin(divisor, mid) >= 0.0 {
            ok = mid;
        } else {
            bad = mid;
        }
    }
    ok
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

    /// The bytes `UartRx::new(divisor)` takes from a sender at `rate` times its rate, each bit
    /// edge on the nearest cycle, frames back to back.
    fn received(divisor: u16, rate: f64, bytes: &[u8]) -> Vec<u8> {
        let mut rx = UartRx::new(divisor);
        rx.connect_all();
        let bit = divisor as f64 / rate;
        // Idle long enough for the receiver to leave the start its flops' reset value looks like.
        let idle = 4 * divisor as usize;
        let mut line = vec![true; idle];
        let mut edge = 0.0;
        for &b in bytes {
            let bits = (0..10).map(|i| match i {
                0 => false,
                9 => true,
                _ => b >> (i - 1) & 1 == 1,
            });
            for level in bits {
                edge += bit;
                line.resize(idle + edge.round() as usize, level);
            }
        }
        line.extend([true; 64]);
        let mut got = vec![];
        for level in line {
            rx.rx.next = level;
            settle(&mut rx);
            if rx.valid.val() {
                got.push(rx.data.val().index() as u8);
            }
            tick(&mut rx, |r| &mut r.clock);
        }
        got
    }

    /// A perfect sender leaves half a bit less the cycle of uncertainty (and half a cycle more
    /// on an odd divisor, whose half bit rounds down); a rate error eats it over ten bits.
    #[test]
    fn the_sampling_margin_is_half_a_bit_less_the_uncertainty_and_the_drift() {
        assert!((sampling_margin(4, 0.0) - 0.25).abs() < 1e-12);
        assert!((sampling_margin(100, 0.0) - 0.49).abs() < 1e-12);
        assert!((sampling_margin(25, 0.0) - 0.48).abs() < 1e-12, "12 of 25 cycles either side");
        // 2% fast at 50 cycles a bit: the stop bit's sample is 9.5 x 2% of a bit later in it.
        let m = sampling_margin(50, 0.02);
        assert!(m > 0.28 && m < 0.31, "{m}");
        assert!(sampling_margin(16, 0.06) < 0.0);
    }

    /// "Measure the margin": the receiver takes every byte of a sender just inside the rate
    /// errors where the margin reaches zero, either way, and misreads those of one just beyond.
    #[test]
    fn bytes_arrive_inside_the_sampling_margin_and_are_corrupted_beyond_it() {
        let bytes = [0x55, 0x00, 0xFF, 0x0F, 0xF0, 0xA5];
        for sign in [1.0, -1.0] {
            let edge = rate_error_limit(40, sign > 0.0);
            assert!(edge.abs() > 0.04 && edge.abs() < 0.06, "{edge}");
            // A cycle of a 40-cycle bit over the ten bits of a frame is 0.26% of the rate: the test is a cycle and a half either side.
            assert_eq!(received(40, 1.0 + edge - sign * 0.004, &bytes), bytes, "inside {edge}");
            assert_ne!(received(40, 1.0 + edge + sign * 0.004, &bytes), bytes, "beyond {edge}");
        }
    }
}
