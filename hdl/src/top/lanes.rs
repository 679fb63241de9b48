//! The scratchpad's and the accumulators' write lanes from a DRAM row: what a `Load` or
//! `LoadAcc` writes in each lane.

use rust_hdl::prelude::*;
use systole_core::Dtype;

use crate::decode::constant;
use crate::optional::Optional;

/// One scratchpad lane's write data: a `Load` element (contiguous, broadcast, or gathered over
/// several cycles into this lane's row-buffer register), a cast or requantized word, or a host
/// element. Lanes at or past the instruction's `len` (or past C for casts) write zero.
#[derive(LogicBlock)]
pub struct SpadLane {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    /// Low and high byte of this lane's element, and of element 0, in the DRAM row just read.
    pub lo: Signal<In, Bits<8>>,
    pub hi: Signal<In, Bits<8>>,
    pub lo0: Signal<In, Bits<8>>,
    pub hi0: Signal<In, Bits<8>>,
    pub is_load: Signal<In, Bit>,
    pub gather: Signal<In, Bit>,
    pub broadcast: Signal<In, Bit>,
    pub element: Signal<In, Bits<16>>,
    pub length: Signal<In, Bits<16>>,
    pub cast: Signal<In, Bits<16>>,
    pub host: Signal<In, Bit>,
    pub host_lane: Signal<In, Bits<16>>,
    pub host_elem: Signal<In, Bits<16>>,
    pub host_write: Signal<In, Bit>,
    pub data: Signal<Out, Bits<16>>,
    /// The host writes this lane (the units write whole rows).
    pub host_writes: Signal<Out, Bit>,
    row_buffer: DFF<Bits<16>>,
    /// Built for a BF16 machine's byte port only ([`SpadLane::pairing_bytes`]): `element`
    /// counts a row's bytes, two an element, and an element's low byte waits here for its
    /// high one (in the low bits; kept 16 bits wide, the kernel's widths being taken from
    /// signals that always exist).
    lo_held: Optional<DFF<Bits<16>>>,
    lane: Constant<Bits<16>>,
    /// The bits of a lane number, and those above: the lane compares and matches on the low
    /// bits alone once the high ones are known zero (a shared test), so no lane builds a
    /// 16-bit comparator.
    low: Constant<Bits<16>>,
    high: Constant<Bits<16>>,
    bf16: Constant<Bit>,
    mine: Signal<Local, Bits<16>>,
    first: Signal<Local, Bits<16>>,
    loaded: Signal<Local, Bits<16>>,
    /// The gathered element is this lane's.
    at_element: Signal<Local, Bit>,
}

/// The mask of the bits that number `lanes` lanes (lane numbers below the next power of two).
fn lane_bits(lanes: usize) -> u64 {
    (lanes.max(2).next_power_of_two() - 1) as u64
}

impl SpadLane {
    /// Lane `lane` of `lanes`.
    pub fn new(lane: usize, lanes: usize, dtype: Dtype) -> SpadLane {
        SpadLane {
            clock: Default::default(),
            enable: Default::default(),
            lo: Default::default(),
            hi: Default::default(),
            lo0: Default::default(),
            hi0: Default::default(),
            is_load: Default::default(),
            gather: Default::default(),
            broadcast: Default::default(),
            element: Default::default(),
            length: Default::default(),
            cast: Default::default(),
            host: Default::default(),
            host_lane: Default::default(),
            host_elem: Default::default(),
            host_write: Default::default(),
            data: Default::default(),
            host_writes: Default::default(),
            row_buffer: Default::default(),
            lo_held: Optional::none(),
            lane: constant(lane as u64),
            low: constant(lane_bits(lanes)),
            high: constant(!lane_bits(lanes) & 0xFFFF),
            bf16: Constant::new(dtype == Dtype::Bf16),
            mine: Default::default(),
            first: Default::default(),
            loaded: Default::default(),
            at_element: Default::default(),
        }
    }

    /// The same lane on a BF16 machine's byte port: a gathered element arrives a byte a
    /// cycle, low byte first (`element` is then the row's byte).
    pub fn pairing_bytes(self) -> SpadLane {
        SpadLane { lo_held: Optional::default_when(true), ..self }
    }
}

impl Logic for SpadLane {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, row_buffer);
        self.mine.next = bit_cast::<16, 8>(self.lo.val());
        self.first.next = bit_cast::<16, 8>(self.lo0.val());
        if self.bf16.val() {
            self.mine.next =
                bit_cast::<16, 8>(self.lo.val()) | (bit_cast::<16, 8>(self.hi.val()) << 8);
            self.first.next =
                bit_cast::<16, 8>(self.lo0.val()) | (bit_cast::<16, 8>(self.hi0.val()) << 8);
        }
        // A gather reads one element per cycle, always at the row's offset 0.
        self.loaded.next = self.mine.val();
        if self.broadcast.val() {
            self.loaded.next = self.first.val();
        }
        self.at_element.next = !(self.element.val() & self.high.val()).any()
            && ((self.element.val() & self.low.val()) == self.lane.val());
        if self.gather.val() {
            self.loaded.next = self.row_buffer.q.val();
            if self.at_element.val() {
                self.loaded.next = self.first.val();
            }
        }
        if self.enable.val() && self.is_load.val() && self.gather.val() && self.at_element.val() {
            self.row_buffer.d.next = self.first.val();
        }
        // Pairing bytes: byte `element` of the row is this lane's if `element / 2` is; an odd
        // one completes the element with the low byte held.
        for _k in 0..self.lo_held.len() {
            self.lo_held.clock.next = self.clock.val();
            self.lo_held.d.next = self.lo_held.q.val();
            self.row_buffer.d.next = self.row_buffer.q.val();
            self.at_element.next = !((self.element.val() >> 1) & self.high.val()).any()
                && (((self.element.val() >> 1) & self.low.val()) == self.lane.val());
            if self.gather.val() {
                self.loaded.next = self.row_buffer.q.val();
                if self.at_element.val() && self.element.val().get_bit(0) {
                    self.loaded.next =
                        self.lo_held.q.val() | (bit_cast::<16, 8>(self.lo0.val()) << 8);
                }
            }
            if self.enable.val() && self.is_load.val() && self.gather.val() && self.at_element.val()
            {
                if self.element.val().get_bit(0) {
                    self.row_buffer.d.next =
                        self.lo_held.q.val() | (bit_cast::<16, 8>(self.lo0.val()) << 8);
                } else {
                    self.lo_held.d.next = bit_cast::<16, 8>(self.lo0.val());
                }
            }
        }
        self.data.next = self.cast.val();
        if self.is_load.val() {
            self.data.next = 0.into();
            if (self.length.val() & self.high.val()).any()
                || ((self.length.val() & self.low.val()) > self.lane.val())
            {
                self.data.next = self.loaded.val();
            }
        }
        if self.host.val() {
            self.data.next = self.host_elem.val();
        }
        self.host_writes.next = self.host.val()
            && self.host_write.val()
            && !(self.host_lane.val() & self.high.val()).any()
            && ((self.host_lane.val() & self.low.val()) == self.lane.val());
    }
}

/// A `LoadAcc` word from four DRAM bytes, little-endian; zero in lanes at or past `length`.
#[derive(LogicBlock)]
pub struct WordLane {
    pub b0: Signal<In, Bits<8>>,
    pub b1: Signal<In, Bits<8>>,
    pub b2: Signal<In, Bits<8>>,
    pub b3: Signal<In, Bits<8>>,
    pub length: Signal<In, Bits<16>>,
    pub word: Signal<Out, Bits<32>>,
    lane: Constant<Bits<16>>,
    /// As [`SpadLane`]'s: the compare on a lane number's bits alone.
    low: Constant<Bits<16>>,
    high: Constant<Bits<16>>,
}

impl WordLane {
    /// Lane `lane` of `lanes`.
    pub fn new(lane: usize, lanes: usize) -> WordLane {
        WordLane {
            b0: Default::default(),
            b1: Default::default(),
            b2: Default::default(),
            b3: Default::default(),
            length: Default::default(),
            word: Default::default(),
            lane: constant(lane as u64),
            low: constant(lane_bits(lanes)),
            high: constant(!lane_bits(lanes) & 0xFFFF),
        }
    }
}

impl Logic for WordLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.word.next = 0.into();
        if (self.length.val() & self.high.val()).any()
            || ((self.length.val() & self.low.val()) > self.lane.val())
        {
            self.word.next = bit_cast::<32, 8>(self.b0.val())
                | (bit_cast::<32, 8>(self.b1.val()) << 8)
                | (bit_cast::<32, 8>(self.b2.val()) << 16)
                | (bit_cast::<32, 8>(self.b3.val()) << 24);
        }
    }
}

/// On the byte port (`ArrayConfig::dram_port`): accumulator lane `lane`'s `LoadAcc` word,
/// gathered a byte a cycle. In the cycle of byte `element` of the row (byte `element mod 4` of
/// word `element / 4`) the DRAM's one byte, `dram_byte`, is this lane's if `element / 4 ==
/// lane`: it shows at once as `b0` to `b3` (little-endian) and is held for the row's later
/// cycles, so in the row's last cycle they are the lane's whole word for a [`WordLane`].
#[derive(LogicBlock)]
pub struct ByteWord {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub dram_byte: Signal<In, Bits<8>>,
    pub element: Signal<In, Bits<16>>,
    pub b0: Signal<Out, Bits<8>>,
    pub b1: Signal<Out, Bits<8>>,
    pub b2: Signal<Out, Bits<8>>,
    pub b3: Signal<Out, Bits<8>>,
    bytes: Vec<Signal<Local, Bits<8>>>,
    held: Vec<DFF<Bits<8>>>,
    lane: Constant<Bits<16>>,
    mine: Signal<Local, Bit>,
}

impl ByteWord {
    /// Lane `lane`.
    pub fn new(lane: usize) -> ByteWord {
        ByteWord {
            clock: Default::default(),
            enable: Default::default(),
            dram_byte: Default::default(),
            element: Default::default(),
            b0: Default::default(),
            b1: Default::default(),
            b2: Default::default(),
            b3: Default::default(),
            bytes: (0..4).map(|_| Default::default()).collect(),
            held: (0..4).map(|_| Default::default()).collect(),
            lane: constant(lane as u64),
            mine: Default::default(),
        }
    }
}

impl Logic for ByteWord {
    #[hdl_gen]
    fn update(&mut self) {
        self.mine.next = (self.element.val() >> 2) == self.lane.val();
        for k in 0..self.held.len() {
            self.held[k].clock.next = self.clock.val();
            self.held[k].d.next = self.held[k].q.val();
            self.bytes[k].next = self.held[k].q.val();
            if self.mine.val() && (self.element.val().get_bits::<2>(0) == k.to_bits()) {
                self.bytes[k].next = self.dram_byte.val();
                if self.enable.val() {
                    self.held[k].d.next = self.dram_byte.val();
                }
            }
        }
        self.b0.next = self.bytes[0].val();
        self.b1.next = self.bytes[1].val();
        self.b2.next = self.bytes[2].val();
        self.b3.next = self.bytes[3].val();
    }
}
