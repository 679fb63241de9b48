//! The byte-banked DRAM.

use rust_hdl::prelude::*;

use super::{Ram, Rotator};
use crate::optional::Optional;

/// Banks of a DRAM for rows of up to `row_bytes` bytes: the smallest power of two that holds one.
pub fn dram_banks(row_bytes: usize) -> usize {
    row_bytes.max(1).next_power_of_two()
}

/// Byte-addressed DRAM of `banks` one-byte lanes (byte `a` in bank `a mod banks`, word
/// `a / banks`). `read_data[i]` is the byte at `read_address + i` of the last enabled read;
/// `write_data[i]` goes to `write_address + i` for `i < write_count`. Its users keep every
/// access inside the memory; the banks decode only the word-address bits their depth needs.
///
/// The DRAM is write-first as a whole: the banks are read-first RAMs, and one set of registers
/// beside them (the row's word addresses and bank offsets, each bank's write enable and byte)
/// forwards a byte written in the cycle of its read, compared in the cycle of use as
/// [`Ram`]'s own forwarding is, with the registers shared by the banks rather than one set
/// per bank.
///
/// Built with a read stage ([`Dram::with_read_stage`]), each bank's byte (forwarded as above)
/// passes one more register before the rotation, and a byte written to the read's word of a
/// bank in that register's cycle is forwarded past it, as [`Ram::with_read_stage`] does. A
/// DRAM built without one emits none of its parts.
#[derive(LogicBlock)]
pub struct Dram {
    pub clock: Signal<In, Clock>,
    pub read_enable: Signal<In, Bit>,
    pub read_address: Signal<In, Bits<32>>,
    pub read_data: Vec<Signal<Out, Bits<8>>>,
    pub write_address: Signal<In, Bits<32>>,
    pub write_data: Vec<Signal<In, Bits<8>>>,
    pub write_count: Signal<In, Bits<16>>,
    banks: Vec<Ram<8, 32>>,
    read_rotate: Rotator,
    write_rotate: Rotator,
    read_offset: DFF<Bits<16>>,
    // The forwarding registers, loaded with each enabled read.
    read_word: DFF<Bits<32>>,
    write_word: DFF<Bits<32>>,
    write_offset: DFF<Bits<16>>,
    wrote: Vec<DFF<Bit>>,
    written: Vec<DFF<Bits<8>>>,
    /// Bank k forwards its written byte.
    forward: Vec<Signal<Local, Bit>>,
    /// Bank k holds the read's (the write's) wrapped tail: its word is one further on.
    read_wraps: Vec<Signal<Local, Bit>>,
    write_wraps: Vec<Signal<Local, Bit>>,
    same_word: Signal<Local, Bit>,
    /// The read's word plus one is the write's (and the other way round), masked.
    read_word_behind: Signal<Local, Bit>,
    write_word_behind: Signal<Local, Bit>,
    bank_bits: Constant<Bits<32>>,
    bank_mask: Constant<Bits<32>>,
    /// A byte count's bits below and at or above the number of banks.
    count_low: Constant<Bits<16>>,
    count_high: Constant<Bits<16>>,
    /// The word-address bits the banks decode.
    word_mask: Constant<Bits<32>>,
    lanes: Constant<Bits<16>>,
    read_low: Signal<Local, Bits<32>>,
    write_low: Signal<Local, Bits<32>>,
    write_amount: Signal<Local, Bits<16>>,
    /// The read stage (each `Vec` one per bank, or empty): the rotation of the staged row,
    /// each bank's byte as the plain DRAM shows it, and the byte written in the stage's cycle
    /// to the read's word of each bank, with whether it was.
    staged_offset: Optional<DFF<Bits<16>>>,
    staged: Vec<DFF<Bits<8>>>,
    hit: Vec<DFF<Bit>>,
    written2: Vec<DFF<Bits<8>>>,
    /// The word written now, compared with the registered read's word as `same_word` and the
    /// two `behind`s compare the registered write's; bank k holds the write's wrapped tail.
    write_word_now: Optional<Signal<Local, Bits<32>>>,
    same_word_now: Optional<Signal<Local, Bit>>,
    read_word_behind_now: Optional<Signal<Local, Bit>>,
    write_word_behind_now: Optional<Signal<Local, Bit>>,
    write_wraps_now: Vec<Signal<Local, Bit>>,
}

impl Dram {
    /// The same DRAM with its banks' writes registered on the way in ([`Ram::with_write_stage`]):
    /// the same reads, and a `Store`'s path from the scratchpad or the accumulators through the
    /// write rotator ends at flip-flops beside it.
    pub fn with_write_stage(self) -> Dram {
        Dram { banks: self.banks.into_iter().map(Ram::with_write_stage).collect(), ..self }
    }

    /// The same DRAM with a read stage (type docs): a read issued in `t` and used in `t + 2`
    /// sees the bytes written in `t + 1` as the plain DRAM's read sees those of `t`
    /// (`ArrayConfig::read_stages`, docs/DECISIONS.md 106).
    pub fn with_read_stage(self) -> Dram {
        let banks = self.banks.len();
        fn per_bank<T: Default>(banks: usize) -> Vec<T> {
            (0..banks).map(|_| T::default()).collect()
        }
        Dram {
            staged_offset: Optional::default_when(true),
            staged: per_bank(banks),
            hit: per_bank(banks),
            written2: per_bank(banks),
            write_word_now: Optional::default_when(true),
            same_word_now: Optional::default_when(true),
            read_word_behind_now: Optional::default_when(true),
            write_word_behind_now: Optional::default_when(true),
            write_wraps_now: per_bank(banks),
            ..self
        }
    }

    /// `bytes` of DRAM in `banks` banks (a power of two).
    pub fn new(bytes: usize, banks: usize) -> Dram {
        assert!(banks.is_power_of_two() && bytes >= 1, "{bytes} bytes in {banks} banks");
        let depth = bytes.div_ceil(banks);
        let word_bits = Ram::<8, 32>::new(depth).address_bits();
        Dram {
            clock: Default::default(),
            read_enable: Default::default(),
            read_address: Default::default(),
            read_data: (0..banks).map(|_| Default::default()).collect(),
            write_address: Default::default(),
            write_data: (0..banks).map(|_| Default::default()).collect(),
            write_count: Default::default(),
            banks: (0..banks).map(|_| Ram::read_first(depth)).collect(),
            read_rotate: Rotator::new(banks),
            write_rotate: Rotator::new(banks),
            read_offset: Default::default(),
            read_word: Default::default(),
            write_word: Default::default(),
            write_offset: Default::default(),
            wrote: (0..banks).map(|_| Default::default()).collect(),
            written: (0..banks).map(|_| Default::default()).collect(),
            forward: (0..banks).map(|_| Default::default()).collect(),
            read_wraps: (0..banks).map(|_| Default::default()).collect(),
            write_wraps: (0..banks).map(|_| Default::default()).collect(),
            same_word: Default::default(),
            read_word_behind: Default::default(),
            write_word_behind: Default::default(),
            bank_bits: Constant::new((banks.trailing_zeros() as u64).into()),
            bank_mask: Constant::new((banks as u64 - 1).into()),
            count_low: Constant::new((banks as u64 - 1).into()),
            count_high: Constant::new((!(banks as u64 - 1) & 0xFFFF).into()),
            word_mask: Constant::new(((1u64 << word_bits) - 1).into()),
            lanes: Constant::new((banks as u64).into()),
            read_low: Default::default(),
            write_low: Default::default(),
            write_amount: Default::default(),
            staged_offset: Optional::none(),
            staged: vec![],
            hit: vec![],
            written2: vec![],
            write_word_now: Optional::none(),
            same_word_now: Optional::none(),
            read_word_behind_now: Optional::none(),
            write_word_behind_now: Optional::none(),
            write_wraps_now: vec![],
        }
    }

    pub fn banks(&self) -> usize {
        self.banks.len()
    }
}

impl Logic for Dram {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, read_offset, read_word, write_word, write_offset);
        self.read_low.next = self.read_address.val() & self.bank_mask.val();
        self.write_low.next = self.write_address.val() & self.bank_mask.val();
        if self.read_enable.val() {
            self.read_offset.d.next = self.read_low.val().get_bits::<16>(0);
            self.read_word.d.next =
                (self.read_address.val() >> self.bank_bits.val()) & self.word_mask.val();
            self.write_word.d.next =
                (self.write_address.val() >> self.bank_bits.val()) & self.word_mask.val();
            self.write_offset.d.next = self.write_low.val().get_bits::<16>(0);
        }
        self.read_rotate.amount.next = self.read_offset.q.val();
        // Bank k's word of the read is `read_word + read_wraps[k]` (masked), of the write
        // `write_word + write_wraps[k]`: the three ways they can be equal, compared once for
        // all banks rather than with an adder per bank in the cycle of use.
        self.same_word.next = self.read_word.q.val() == self.write_word.q.val();
        self.read_word_behind.next =
            ((self.read_word.q.val() + 1) & self.word_mask.val()) == self.write_word.q.val();
        self.write_word_behind.next =
            self.read_word.q.val() == ((self.write_word.q.val() + 1) & self.word_mask.val());
        // Bank k takes lane (k - low) mod n of the row: lane (k + n - low) mod n.
        self.write_amount.next = self.lanes.val() - self.write_low.val().get_bits::<16>(0);
        self.write_rotate.amount.next = self.write_amount.val();
        for k in 0..self.banks.len() {
            self.banks[k].clock.next = self.clock.val();
            self.banks[k].read_enable.next = self.read_enable.val();
            // Banks below the row's first bank hold its wrapped tail, one word further on.
            self.banks[k].read_address.next = (self.read_address.val() >> self.bank_bits.val())
                + (self.read_low.val() > k.to_bits());
            self.banks[k].write_address.next = (self.write_address.val() >> self.bank_bits.val())
                + (self.write_low.val() > k.to_bits());
            // Bank k is written when its offset from the first bank is below the count: every
            // bank when the count reaches a row of banks (its high bits, one shared test), else
            // a compare of bank-number bits alone.
            self.banks[k].write_enable.next = (self.write_count.val() & self.count_high.val())
                .any()
                || (((k.to_bits::<32>() - self.write_low.val()) & self.bank_mask.val())
                    < bit_cast::<32, 16>(self.write_count.val() & self.count_low.val()));
            self.banks[k].write_data.next = self.write_rotate.data_out[k].val();
            self.write_rotate.data_in[k].next = self.write_data[k].val();
            self.wrote[k].clock.next = self.clock.val();
            self.written[k].clock.next = self.clock.val();
            self.wrote[k].d.next = self.wrote[k].q.val();
            self.written[k].d.next = self.written[k].q.val();
            if self.read_enable.val() {
                self.wrote[k].d.next = self.banks[k].write_enable.val();
                self.written[k].d.next = self.write_rotate.data_out[k].val();
            }
            // Bank k's word of the read and of the write, from the registers: a byte written
            // in the cycle of its read is forwarded.
            self.read_rotate.data_in[k].next = self.banks[k].read_data.val();
            self.read_wraps[k].next = self.read_offset.q.val() > k.to_bits();
            self.write_wraps[k].next = self.write_offset.q.val() > k.to_bits();
            self.forward[k].next = self.wrote[k].q.val()
                && ((self.read_wraps[k].val() == self.write_wraps[k].val()
                    && self.same_word.val())
                    || (self.read_wraps[k].val()
                        && !self.write_wraps[k].val()
                        && self.read_word_behind.val())
                    || (!self.read_wraps[k].val()
                        && self.write_wraps[k].val()
                        && self.write_word_behind.val()));
            if self.forward[k].val() {
                self.read_rotate.data_in[k].next = self.written[k].q.val();
            }
            self.read_data[k].next = self.read_rotate.data_out[k].val();
        }
        // The read stage: the row's rotation and each bank's byte move on with each enabled
        // read, or the byte written now to bank k's word of the registered read does.
        for _s in 0..self.staged_offset.len() {
            self.staged_offset.clock.next = self.clock.val();
            self.staged_offset.d.next = self.staged_offset.q.val();
            if self.read_enable.val() {
                self.staged_offset.d.next = self.read_offset.q.val();
            }
            self.read_rotate.amount.next = self.staged_offset.q.val();
            self.write_word_now.next =
                (self.write_address.val() >> self.bank_bits.val()) & self.word_mask.val();
            self.same_word_now.next = self.read_word.q.val() == self.write_word_now.val();
            self.read_word_behind_now.next =
                ((self.read_word.q.val() + 1) & self.word_mask.val()) == self.write_word_now.val();
            self.write_word_behind_now.next =
                self.read_word.q.val() == ((self.write_word_now.val() + 1) & self.word_mask.val());
        }
        for k in 0..self.staged.len() {
            self.staged[k].clock.next = self.clock.val();
            self.hit[k].clock.next = self.clock.val();
            self.written2[k].clock.next = self.clock.val();
            self.staged[k].d.next = self.staged[k].q.val();
            self.hit[k].d.next = self.hit[k].q.val();
            self.written2[k].d.next = self.written2[k].q.val();
            self.write_wraps_now[k].next = self.write_low.val() > k.to_bits();
            if self.read_enable.val() {
                self.staged[k].d.next = self.banks[k].read_data.val();
                if self.forward[k].val() {
                    self.staged[k].d.next = self.written[k].q.val();
                }
                self.written2[k].d.next = self.write_rotate.data_out[k].val();
                self.hit[k].d.next = self.banks[k].write_enable.val()
                    && ((self.read_wraps[k].val() == self.write_wraps_now[k].val()
                        && self.same_word_now.val())
                        || (self.read_wraps[k].val()
                            && !self.write_wraps_now[k].val()
                            && self.read_word_behind_now.val())
                        || (!self.read_wraps[k].val()
                            && self.write_wraps_now[k].val()
                            && self.write_word_behind_now.val()));
            }
            self.read_rotate.data_in[k].next = self.staged[k].q.val();
            if self.hit[k].q.val() {
                self.read_rotate.data_in[k].next = self.written2[k].q.val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};

    /// Unaligned rows are written and read back through the wrap between banks, with and
    /// without the banks' write stage.
    #[test]
    fn dram_moves_unaligned_rows() {
        for d in [Dram::new(40, 8), Dram::new(40, 8).with_write_stage()] {
            moves_unaligned_rows(d);
        }
    }

    fn moves_unaligned_rows(mut d: Dram) {
        d.connect_all();
        d.read_enable.next = true;
        let mut model = [0u8; 40];
        for (addr, count) in [(0usize, 8usize), (5, 8), (13, 3), (30, 7)] {
            for i in 0..8 {
                d.write_data[i].next = ((addr * 7 + i * 3) as u64 & 0xFF).into();
            }
            for i in 0..count {
                model[addr + i] = ((addr * 7 + i * 3) & 0xFF) as u8;
            }
            d.write_address.next = (addr as u64).into();
            d.write_count.next = (count as u64).into();
            tick(&mut d, |d| &mut d.clock);
        }
        d.write_count.next = 0u64.into();
        for addr in [0usize, 3, 5, 12, 29, 32] {
            d.read_address.next = (addr as u64).into();
            tick(&mut d, |d| &mut d.clock);
            for i in 0..8.min(40 - addr) {
                assert_eq!(d.read_data[i].val().index() as u8, model[addr + i], "{addr} + {i}");
            }
        }
    }

    /// A read issued in the cycle of a write sees the bytes written, in every bank the two
    /// rows share (write-first), and the old bytes elsewhere; so does one issued a cycle after,
    /// with and without the banks' write stage.
    #[test]
    fn dram_forwards_bytes_written_in_the_cycle_of_their_read() {
        for d in [Dram::new(64, 8), Dram::new(64, 8).with_write_stage()] {
            forwards(d);
        }
    }

    fn forwards(mut d: Dram) {
        d.connect_all();
        d.read_enable.next = true;
        let mut model = [0u8; 64];
        let mut state = 7u64;
        for _ in 0..200 {
            let seed = (crate::testing::lcg_step(&mut state) >> 32) as u32;
            let (wa, count) = ((seed >> 8) as usize % 57, (seed >> 20) as usize % 9);
            let ra = (seed >> 4) as usize % 57;
            for i in 0..8 {
                d.write_data[i].next = ((seed >> i) as u64 & 0xFF).into();
            }
            d.write_address.next = (wa as u64).into();
            d.write_count.next = (count as u64).into();
            d.read_address.next = (ra as u64).into();
            for i in 0..count {
                model[wa + i] = ((seed >> i) & 0xFF) as u8;
            }
            tick(&mut d, |d| &mut d.clock);
            for i in 0..8 {
                let got = d.read_data[i].val().index() as u8;
                assert_eq!(got, model[ra + i], "read {ra} + {i}, write {wa} x {count}");
            }
        }
    }

    /// With a read stage, the row read in an enabled cycle shows after the next enabled cycle,
    /// with the bytes that cycle writes into it: rows at random byte addresses, some across the
    /// bank wrap and the end of the DRAM's words, some reads disabled, with and without the
    /// banks' write stage.
    #[test]
    fn a_read_stage_shows_the_row_a_cycle_later_with_that_cycles_writes() {
        for (seed, d) in [(11, Dram::new(64, 8)), (12, Dram::new(64, 8).with_write_stage())] {
            read_stage_forwards(d.with_read_stage(), seed);
        }
    }

    fn read_stage_forwards(mut d: Dram, mut state: u64) {
        d.connect_all();
        let mut model = [0u8; 64];
        // The plain DRAM's row for the last enabled read, its address, and the row shown.
        let (mut pending, mut last_read, mut shown) = ([0u8; 8], 0usize, [0u8; 8]);
        let mut forwarded = 0;
        for cycle in 0..3000 {
            let seed = (crate::testing::lcg_step(&mut state) >> 32) as u32;
            let count = (seed >> 20) as usize % 9;
            let wa = match seed % 3 {
                0 => (last_read + (seed >> 8) as usize % 5).min(56),
                _ => (seed >> 8) as usize % 57,
            };
            let ra = (seed >> 4) as usize % 57;
            let re = (seed >> 28) % 8 > 0;
            for i in 0..8 {
                d.write_data[i].next = ((seed >> (i + 2)) as u64 & 0xFF).into();
            }
            d.write_address.next = (wa as u64).into();
            d.write_count.next = (count as u64).into();
            d.read_address.next = (ra as u64).into();
            d.read_enable.next = re;
            tick(&mut d, |d| &mut d.clock);
            if re {
                for (i, byte) in shown.iter_mut().enumerate() {
                    let a = last_read + i;
                    *byte = if (wa..wa + count).contains(&a) {
                        forwarded += 1;
                        ((seed >> (a - wa + 2)) & 0xFF) as u8
                    } else {
                        pending[i]
                    };
                }
            }
            for i in 0..count {
                model[wa + i] = ((seed >> (i + 2)) & 0xFF) as u8;
            }
            if re {
                pending.copy_from_slice(&model[ra..ra + 8]);
                last_read = ra;
            }
            for (i, &want) in shown.iter().enumerate() {
                let got = d.read_data[i].val().index() as u8;
                assert_eq!(got, want, "cycle {cycle}: byte {i} of the read of {last_read}");
            }
        }
        assert!(forwarded > 1000, "bytes forwarded past the read stage: {forwarded}");
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("dram", &verilog_of(Dram::new(1000, 16))).unwrap();
        yosys_validate("dram_staged", &verilog_of(Dram::new(1000, 16).with_write_stage())).unwrap();
        let read_stage = Dram::new(1000, 16).with_write_stage().with_read_stage();
        yosys_validate("dram_read_stage", &verilog_of(read_stage)).unwrap();
    }
}
