//! The instruction FIFO: the host's words wait here, in block RAM, until the dispatcher takes
//! them (first-word fall-through, so the oldest word is always the candidate).

use rust_hdl::prelude::*;

use super::footprint::{Footprint, FOOTPRINT_BITS};
use crate::decode::{constant, holding};
use crate::mem::Ram;
use crate::optional::Optional;

/// Bits the FIFO stores per word: the 128-bit word, its DRAM extent bit and its 4-bit fault code.
pub const FIFO_ENTRY_BITS: usize = 133;
/// Of those, the bits of the FIFO's block RAM: the word and its fault code. The extent bit has a
/// RAM of its own, in flip-flops ([`Ram::in_logic`]): a top reads either the fault code (checks
/// as words are queued) or the extent bit (checks at the head), and Yosys drops what is not
/// read, so a head-checking machine keeps its words in 8 iCE40 block RAMs of 16 bits, not 9
/// (docs/DECISIONS.md 94).
const FIFO_RAM_BITS: usize = FIFO_ENTRY_BITS - 1;

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
    /// Queued with the word: its DRAM extent check ([`crate::decode::ExtentCheck`]) and its
    /// fault code ([`crate::decode::WordFault`]; a machine that checks the head instead
    /// queues 0).
    pub push_flag: Signal<In, Bit>,
    pub push_fault: Signal<In, Bits<4>>,
    /// The word's footprint, queued with it when the FIFO is built `with_footprints` (the
    /// decoupled schedule's scoreboard compares it with the instructions in flight).
    pub push_fp: Optional<Signal<In, Footprint>>,
    pub pop: Signal<In, Bit>,
    /// Empties the FIFO (wins over push and pop).
    pub clear: Signal<In, Bit>,
    pub head: Signal<Out, Bits<128>>,
    pub head_flag: Signal<Out, Bit>,
    pub head_fault: Signal<Out, Bits<4>>,
    /// The head's footprint (built `with_footprints`).
    pub head_fp: Optional<Signal<Out, Footprint>>,
    pub valid: Signal<Out, Bit>,
    /// Free slots.
    pub free: Signal<Out, Bits<16>>,
    ram: Ram<FIFO_RAM_BITS, 16>,
    flags: Ram<1, 16>,
    /// The footprints, in a RAM of their own that only a decoupled build has.
    fps: Optional<FootprintRam>,
    /// The head read issued in the last cycle collided with a write to its word.
    stale: DFF<Bit>,
    read_ptr: DFF<Bits<16>>,
    write_ptr: DFF<Bits<16>>,
    count: DFF<Bits<16>>,
    depth: Constant<Bits<16>>,
    last: Constant<Bits<16>>,
    /// The bits a pointer (below `depth`) and the count (up to `depth`) can have.
    ptr_bits: Constant<Bits<16>>,
    count_bits: Constant<Bits<16>>,
    read_next: Signal<Local, Bits<16>>,
    write_next: Signal<Local, Bits<16>>,
    /// Built [`InstrFifo::precompared`] only: the write pointer equals the read pointer, or its
    /// successor, compared from registers before the pop is known.
    at_read: Optional<Signal<Local, Bit>>,
    at_read_next: Optional<Signal<Local, Bit>>,
}

impl InstrFifo {
    /// A FIFO of `depth` words that also queues each word's footprint when `with_footprints`.
    pub fn new(depth: usize, with_footprints: bool) -> InstrFifo {
        assert!((1..1 << 16).contains(&depth), "FIFO depth {depth}");
        InstrFifo {
            clock: Default::default(),
            push: Default::default(),
            push_word: Default::default(),
            push_flag: Default::default(),
            push_fault: Default::default(),
            push_fp: Optional::default_when(with_footprints),
            pop: Default::default(),
            clear: Default::default(),
            head: Default::default(),
            head_flag: Default::default(),
            head_fault: Default::default(),
            head_fp: Optional::default_when(with_footprints),
            valid: Default::default(),
            free: Default::default(),
            ram: Ram::read_first(depth),
            flags: Ram::read_first(depth).in_logic(),
            fps: Optional::when(with_footprints, || FootprintRam::new(depth)),
            stale: Default::default(),
            read_ptr: Default::default(),
            write_ptr: Default::default(),
            count: Default::default(),
            depth: constant(depth as u64),
            last: constant(depth as u64 - 1),
            ptr_bits: constant(holding(depth as u64 - 1)),
            count_bits: constant(holding(depth as u64)),
            read_next: Default::default(),
            write_next: Default::default(),
            at_read: Optional::none(),
            at_read_next: Optional::none(),
        }
    }

    /// The same FIFO with its stale flag formed from two pointer comparisons made from
    /// registers, between which the pop only selects: the dispatch decision then reaches the
    /// flag through a multiplexer rather than through the read address and a comparator. The
    /// same flag every cycle; unbuilt, it leaves no trace in the Verilog.
    pub fn precompared(self) -> InstrFifo {
        InstrFifo {
            at_read: Optional::default_when(true),
            at_read_next: Optional::default_when(true),
            ..self
        }
    }
}

impl Logic for InstrFifo {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, stale, read_ptr, write_ptr, count);
        self.read_next.next = (self.read_ptr.q.val() + 1) & self.ptr_bits.val();
        if self.read_ptr.q.val() == self.last.val() {
            self.read_next.next = 0.into();
        }
        self.write_next.next = (self.write_ptr.q.val() + 1) & self.ptr_bits.val();
        if self.write_ptr.q.val() == self.last.val() {
            self.write_next.next = 0.into();
        }
        self.valid.next = self.count.q.val().any() && !self.stale.q.val();
        self.free.next = self.depth.val() - self.count.q.val();
        self.ram.clock.next = self.clock.val();
        self.ram.write_enable.next = self.push.val() && !self.clear.val();
        self.ram.write_address.next = self.write_ptr.q.val();
        self.ram.write_data.next = bit_cast::<FIFO_RAM_BITS, 128>(self.push_word.val())
            | (bit_cast::<FIFO_RAM_BITS, 4>(self.push_fault.val()) << 128);
        self.ram.read_enable.next = true;
        // The head register always holds the word at the read pointer's next value.
        self.ram.read_address.next = self.read_ptr.q.val();
        if self.pop.val() && self.count.q.val().any() {
            self.ram.read_address.next = self.read_next.val();
            self.read_ptr.d.next = self.read_next.val();
            if !self.push.val() {
                self.count.d.next = (self.count.q.val() - 1) & self.count_bits.val();
            }
        } else if self.push.val() {
            self.count.d.next = (self.count.q.val() + 1) & self.count_bits.val();
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
        // Precompared: a clear reads slot 0 and writes nothing, so it is never stale.
        for _k in 0..self.at_read.len() {
            self.at_read.next = self.read_ptr.q.val() == self.write_ptr.q.val();
            self.at_read_next.next = self.read_next.val() == self.write_ptr.q.val();
            self.stale.d.next = self.ram.write_enable.val() && self.at_read.val();
            if self.pop.val() && self.count.q.val().any() {
                self.stale.d.next = self.ram.write_enable.val() && self.at_read_next.val();
            }
        }
        self.head.next = self.ram.read_data.val().get_bits::<128>(0);
        self.head_fault.next = self.ram.read_data.val().get_bits::<4>(128);
        // The extent bits: the same writes and reads as the words'.
        self.flags.clock.next = self.clock.val();
        self.flags.write_enable.next = self.ram.write_enable.val();
        self.flags.write_address.next = self.ram.write_address.val();
        self.flags.write_data.next = self.push_flag.val().into();
        self.flags.read_enable.next = true;
        self.flags.read_address.next = self.ram.read_address.val();
        self.head_flag.next = self.flags.read_data.val().any();
        for _k in 0..self.fps.len() {
            self.fps.clock.next = self.clock.val();
            self.fps.write_enable.next = self.ram.write_enable.val();
            self.fps.write_address.next = self.ram.write_address.val();
            self.fps.write_fp.next = self.push_fp.val();
            self.fps.read_address.next = self.ram.read_address.val();
            self.head_fp.next = self.fps.read_fp.val();
        }
    }
}

/// The FIFO's footprints: a RAM of [`FOOTPRINT_BITS`]-bit words, read first like the words'.
#[derive(LogicBlock)]
pub struct FootprintRam {
    pub clock: Signal<In, Clock>,
    pub write_enable: Signal<In, Bit>,
    pub write_address: Signal<In, Bits<16>>,
    pub write_fp: Signal<In, Footprint>,
    pub read_address: Signal<In, Bits<16>>,
    pub read_fp: Signal<Out, Footprint>,
    ram: Ram<FOOTPRINT_BITS, 16>,
}

impl FootprintRam {
    fn new(depth: usize) -> FootprintRam {
        FootprintRam {
            clock: Default::default(),
            write_enable: Default::default(),
            write_address: Default::default(),
            write_fp: Default::default(),
            read_address: Default::default(),
            read_fp: Default::default(),
            ram: Ram::read_first(depth),
        }
    }
}

impl Logic for FootprintRam {
    #[hdl_gen]
    fn update(&mut self) {
        self.ram.clock.next = self.clock.val();
        self.ram.write_enable.next = self.write_enable.val();
        self.ram.write_address.next = self.write_address.val();
        self.ram.write_data.next = self.write_fp.val().into();
        self.ram.read_enable.next = true;
        self.ram.read_address.next = self.read_address.val();
        // The fields at the offsets `Footprint`'s bits give them (first field lowest); the
        // FIFO's test reads back a footprint whose every field differs.
        self.read_fp.next.read0_lo = self.ram.read_data.val().get_bits::<17>(0);
        self.read_fp.next.read0_hi = self.ram.read_data.val().get_bits::<17>(17);
        self.read_fp.next.read1_lo = self.ram.read_data.val().get_bits::<17>(34);
        self.read_fp.next.read1_hi = self.ram.read_data.val().get_bits::<17>(51);
        self.read_fp.next.write_lo = self.ram.read_data.val().get_bits::<17>(68);
        self.read_fp.next.write_hi = self.ram.read_data.val().get_bits::<17>(85);
        self.read_fp.next.dram_read_lo = self.ram.read_data.val().get_bits::<32>(102);
        self.read_fp.next.dram_read_hi = self.ram.read_data.val().get_bits::<32>(134);
        self.read_fp.next.dram_write_lo = self.ram.read_data.val().get_bits::<32>(166);
        self.read_fp.next.dram_write_hi = self.ram.read_data.val().get_bits::<32>(198);
        self.read_fp.next.acc_banks = self.ram.read_data.val().get_bits::<2>(230);
        self.read_fp.next.ports = self.ram.read_data.val().get_bits::<2>(232);
    }
}

/// A register after the FIFO's head: the dispatcher's candidate (with its fault code, and its
/// footprint when built `with_footprints`) leaves flip-flops, not the FIFO's block RAM, whose
/// unregistered output started the decoupled 85F build's critical path (docs/DECISIONS.md 59)
/// and the blocking 85F BF16 build's (102). It holds one word and takes the next from the FIFO
/// whenever it is empty or its word is popped, so a word reaches the dispatcher one cycle later
/// than without it (the machine is frozen meanwhile and frozen cycles are not counted: no result
/// or cycle count changes) and a program streams one word a cycle as before.
#[derive(LogicBlock)]
pub struct HeadRegister {
    pub clock: Signal<In, Clock>,
    /// Empties the register (with the FIFO).
    pub clear: Signal<In, Bit>,
    /// The FIFO's head.
    pub in_valid: Signal<In, Bit>,
    pub in_word: Signal<In, Bits<128>>,
    pub in_fault: Signal<In, Bits<4>>,
    pub in_fp: Optional<Signal<In, Footprint>>,
    /// Pops the FIFO's head into the register.
    pub take: Signal<Out, Bit>,
    /// The dispatcher takes the register's word (only while `valid`).
    pub pop: Signal<In, Bit>,
    pub valid: Signal<Out, Bit>,
    pub head: Signal<Out, Bits<128>>,
    pub head_fault: Signal<Out, Bits<4>>,
    pub head_fp: Optional<Signal<Out, Footprint>>,
    full: DFF<Bit>,
    word: DFF<Bits<128>>,
    fault: DFF<Bits<4>>,
    fp: Optional<DFF<Footprint>>,
}

impl HeadRegister {
    /// A head register that also holds the word's footprint when `with_footprints` (the
    /// decoupled top's scoreboard reads it).
    pub fn new(with_footprints: bool) -> HeadRegister {
        HeadRegister {
            clock: Default::default(),
            clear: Default::default(),
            in_valid: Default::default(),
            in_word: Default::default(),
            in_fault: Default::default(),
            in_fp: Optional::default_when(with_footprints),
            take: Default::default(),
            pop: Default::default(),
            valid: Default::default(),
            head: Default::default(),
            head_fault: Default::default(),
            head_fp: Optional::default_when(with_footprints),
            full: Default::default(),
            word: Default::default(),
            fault: Default::default(),
            fp: Optional::default_when(with_footprints),
        }
    }
}

impl Logic for HeadRegister {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, full, word, fault);
        for _k in 0..self.fp.len() {
            self.fp.clock.next = self.clock.val();
            self.fp.d.next = self.fp.q.val();
        }
        self.take.next =
            self.in_valid.val() && !self.clear.val() && (!self.full.q.val() || self.pop.val());
        if self.take.val() {
            self.word.d.next = self.in_word.val();
            self.fault.d.next = self.in_fault.val();
            self.full.d.next = true;
        } else if self.pop.val() || self.clear.val() {
            self.full.d.next = false;
        }
        for _k in 0..self.fp.len() {
            if self.take.val() {
                self.fp.d.next = self.in_fp.val();
            }
            self.head_fp.next = self.fp.q.val();
        }
        self.valid.next = self.full.q.val();
        self.head.next = self.word.q.val();
        self.head_fault.next = self.fault.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{lcg_step, settle, tick, verilog_of};

    fn word(v: u128) -> Bits<128> {
        v.to_bits()
    }

    /// A footprint whose every field differs from the others and from `v`'s other footprints,
    /// with each field's top bit set in some of them.
    fn footprint(v: u64) -> Footprint {
        let f =
            |k: u64, bits: u32| -> u64 { (v * 131 + k * 7919 + (k << (bits - 1))) % (1 << bits) };
        Footprint {
            read0_lo: f(1, 17).into(),
            read0_hi: f(2, 17).into(),
            read1_lo: f(3, 17).into(),
            read1_hi: f(4, 17).into(),
            write_lo: f(5, 17).into(),
            write_hi: f(6, 17).into(),
            dram_read_lo: f(7, 32).into(),
            dram_read_hi: f(8, 32).into(),
            dram_write_lo: f(9, 32).into(),
            dram_write_hi: f(10, 32).into(),
            acc_banks: f(v, 2).into(),
            ports: f(v + 1, 2).into(),
        }
    }

    #[test]
    fn fifo_falls_through_and_counts() {
        let mut f = InstrFifo::new(3, true);
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
            f.push_fp.next = footprint(v as u64);
            f.push_fault.next = (v as u64 + 12).to_bits();
            f.push_flag.next = v == 1;
            tick(&mut f, |f| &mut f.clock);
            assert_eq!(f.valid.val(), v > 1, "after push {v}");
            if v > 1 {
                assert_eq!(f.head.val(), word(1 << 100 | 1));
                assert_eq!(f.head_fp.val(), footprint(1), "the footprint travels with its word");
                assert_eq!(f.head_fault.val().index(), 13, "and so does the fault code");
                assert!(f.head_flag.val(), "and the flag");
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
        assert_eq!(f.head_fp.val(), footprint(3));
        assert_eq!(f.head_fault.val().index(), 15);
        assert!(!f.head_flag.val());
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

    /// The register takes the FIFO's head when empty or popped: words stream one a cycle, a
    /// cycle behind the FIFO's head, and `clear` empties it.
    #[test]
    fn head_register_streams_the_fifo_a_cycle_behind() {
        let mut h = HeadRegister::new(true);
        h.connect_all();
        h.in_valid.next = true;
        h.in_word.next = word(1);
        h.in_fault.next = 3u64.into();
        h.in_fp.next = footprint(40);
        settle(&mut h);
        assert!(h.take.val() && !h.valid.val(), "an empty register takes the head");
        tick(&mut h, |h| &mut h.clock);
        assert!(h.valid.val() && !h.take.val(), "a full one waits for a pop");
        assert_eq!(
            (h.head.val(), h.head_fault.val().index(), h.head_fp.val()),
            (word(1), 3, footprint(40))
        );
        // Popped while the FIFO has the next word: replaced in the same cycle.
        h.in_word.next = word(2);
        h.pop.next = true;
        settle(&mut h);
        assert!(h.take.val());
        tick(&mut h, |h| &mut h.clock);
        assert!(h.valid.val());
        assert_eq!(h.head.val(), word(2));
        // Popped with the FIFO empty: empty.
        h.in_valid.next = false;
        settle(&mut h);
        assert!(!h.take.val());
        tick(&mut h, |h| &mut h.clock);
        assert!(!h.valid.val());
        // `clear` wins over a waiting head.
        h.pop.next = false;
        h.in_valid.next = true;
        tick(&mut h, |h| &mut h.clock);
        assert!(h.valid.val());
        h.clear.next = true;
        settle(&mut h);
        assert!(!h.take.val(), "nothing is taken while clearing");
        tick(&mut h, |h| &mut h.clock);
        assert!(!h.valid.val());
    }

    /// Built [`InstrFifo::precompared`], the FIFO shows the same head, validity and free slots
    /// as the plain one in every cycle of random pushes, pops and clears, stale cycles
    /// included.
    #[test]
    fn precompared_fifo_is_the_plain_one() {
        for depth in [1, 3, 16] {
            let mut plain = InstrFifo::new(depth, false);
            let mut pre = InstrFifo::new(depth, false).precompared();
            plain.connect_all();
            pre.connect_all();
            let mut seed = depth as u64;
            let (mut stale_cycles, mut pops) = (0, 0);
            for cycle in 0..3000u128 {
                let r = lcg_step(&mut seed) >> 33;
                for f in [&mut plain, &mut pre] {
                    f.push.next = r % 3 != 0;
                    f.push_word.next = word(cycle);
                    f.pop.next = f.valid.val() && r % 5 < 3;
                    f.clear.next = r % 97 == 0;
                    settle(f);
                }
                pops += plain.pop.val() as u32;
                tick(&mut plain, |f| &mut f.clock);
                tick(&mut pre, |f| &mut f.clock);
                let show = |f: &InstrFifo| (f.valid.val(), f.head.val(), f.free.val());
                assert_eq!(show(&pre), show(&plain), "depth {depth}, cycle {cycle}");
                stale_cycles += (plain.stale.q.val() && plain.count.q.val().any()) as u32;
            }
            assert!(stale_cycles > 10 && pops > 200, "{depth}: {stale_cycles} stale, {pops} pops");
        }
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("fifo", &verilog_of(InstrFifo::new(5, false).precompared())).unwrap();
        yosys_validate("fifo", &verilog_of(InstrFifo::new(5, false))).unwrap();
        yosys_validate("fifo", &verilog_of(InstrFifo::new(5, true))).unwrap();
        yosys_validate("head_register", &verilog_of(HeadRegister::new(true))).unwrap();
        yosys_validate("head_register", &verilog_of(HeadRegister::new(false))).unwrap();
    }
}
