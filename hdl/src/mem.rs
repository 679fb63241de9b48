//! The machine's memories: block-RAM lanes, row memories built from them (scratchpad and
//! accumulator), and the byte-banked DRAM.
//!
//! Every RAM here has a registered read port, so that Yosys maps it to block RAM (iCE40 EBR,
//! ECP5 DP16KD). Its memory carries Yosys' `no_rw_check`: what the block RAM returns for a
//! read of the word being written does not matter, because the forwarding below (or the
//! user, for a read-first RAM) never uses it; without it Yosys adds its own bypass in logic
//! cells (about 450 iCE40 cells and 500 flip-flops for a 1 x 1 machine). All but the
//! instruction FIFO and the request buffer (which never use a word in the cycle they write it)
//! are *write-first*: a read issued in the cycle of a write to the same word returns the new
//! word (the DRAM as a whole: its banks are read-first and it forwards for them). The controller issues each read one cycle ahead of the cycle that uses
//! its data (from the next state of the unit that reads, docs/HARDWARE.md), and with write-first
//! forwarding that is indistinguishable from reading in the cycle of use, which is what core's
//! `CycleMachine` does: a row written in cycle `t` is seen by a read for cycle `t + 1`.
//!
//! * [`Ram`]: one lane, `depth` words of `T`, one write port and one read port with an enable
//!   (off while the machine is frozen, so the read register holds its word).
//! * [`RowRam`]: `lanes` RAMs sharing their row addresses, written lane by lane: a scratchpad or
//!   accumulator row in one cycle. A memory with two read ports is two `RowRam`s written alike
//!   (docs/DECISIONS.md).
//! * [`Rotator`]: a byte barrel rotator, `out[i] = in[(i + amount) mod n]`.
//! * [`Dram`]: `banks` one-byte RAMs (a power of two at least as wide as any row) and two
//!   rotators, so a contiguous row of up to `banks` bytes at any byte address is read or written
//!   in one cycle.

use rust_hdl::prelude::*;

/// One block-RAM lane: `depth` words, write-first, registered read. It may store fewer bits
/// than its ports carry (an INT8 scratchpad lane keeps the low byte of the 16-bit element bus);
/// the bits above read as zero. It decodes only the address bits its depth needs
/// ([`Ram::address_bits`]): its users never address past its end (core's program checks and the
/// host link's range checks see to that), and no address arithmetic is built wider than the
/// memory. The write-first bypass keeps both addresses and compares them in the cycle the word
/// is used, so the logic that computes an address ends at the block RAM's address pins, not at
/// a comparator (docs/DECISIONS.md).
#[derive(LogicBlock)]
pub struct Ram<const W: usize, const A: usize> {
    pub clock: Signal<In, Clock>,
    /// The read register loads only while this is set.
    pub read_enable: Signal<In, Bit>,
    pub read_address: Signal<In, Bits<A>>,
    /// The word at the address of the last enabled read (or the word written in that cycle).
    pub read_data: Signal<Out, Bits<W>>,
    pub write_enable: Signal<In, Bit>,
    pub write_address: Signal<In, Bits<A>>,
    pub write_data: Signal<In, Bits<W>>,
    _mem: Vec<Bits<W>>,
    _read: Bits<W>,
    _forward: bool,
    _written: Bits<W>,
    _bits: usize,
    _write_first: bool,
    /// Built with a write stage ([`Ram::with_write_stage`]): the write of the last cycle, its
    /// forwarding to a read, and the word that forwarding holds.
    _write_stage: bool,
    _late: Option<(usize, Bits<W>)>,
    _late_forward: bool,
    _late_written: Bits<W>,
    /// Built in flip-flops ([`Ram::in_logic`]).
    _in_logic: bool,
}

impl<const W: usize, const A: usize> Ram<W, A> {
    /// A zeroed RAM of `depth` words (at most `2^A`).
    pub fn new(depth: usize) -> Self {
        Ram::with_bits(depth, W)
    }

    /// A zeroed RAM without write-first forwarding: a read issued in the cycle of a write to
    /// the same word returns the old word. For users that never read a word in the cycle they
    /// write it (or discard that read): no bypass register and multiplexer.
    pub fn read_first(depth: usize) -> Self {
        Ram { _write_first: false, ..Ram::new(depth) }
    }

    /// A zeroed RAM of `depth` words of which it keeps the low `bits`.
    pub fn with_bits(depth: usize, bits: usize) -> Self {
        assert!(depth >= 1 && (A >= 64 || depth as u128 <= 1u128 << A), "depth {depth}");
        assert!((1..=W).contains(&bits), "{bits} bits of {}", W);
        Ram {
            clock: Default::default(),
            read_enable: Default::default(),
            read_address: Default::default(),
            read_data: Default::default(),
            write_enable: Default::default(),
            write_address: Default::default(),
            write_data: Default::default(),
            _mem: vec![Bits::<W>::default(); depth],
            _read: Bits::<W>::default(),
            _forward: false,
            _written: Bits::<W>::default(),
            _bits: bits,
            _write_first: true,
            _write_stage: false,
            _late: None,
            _late_forward: false,
            _late_written: Bits::<W>::default(),
            _in_logic: false,
        }
    }

    /// The same RAM with its writes registered on the way in: a word written in cycle `t`
    /// reaches the block RAM at the end of `t + 1`, and a read issued in `t + 1` takes it from
    /// the write register instead. What every read returns is unchanged (write-first, as
    /// [`Ram::new`], or read-first as [`Ram::read_first`]); what changes is that the logic
    /// computing the write data ends at flip-flops that can sit beside it, not at a block RAM's
    /// data pins across the chip.
    pub fn with_write_stage(self) -> Self {
        Ram { _write_stage: true, ..self }
    }

    /// The same RAM built in flip-flops (Yosys' `ram_style = "logic"`), not in a block RAM:
    /// for a few bits that would otherwise take a block RAM of their own.
    pub fn in_logic(self) -> Self {
        Ram { _in_logic: true, ..self }
    }

    /// The attributes of the `mem` array: Yosys' `no_rw_check` (module docs), and the
    /// mapping to flip-flops where built [`Ram::in_logic`].
    fn mem_attributes(&self) -> &'static str {
        if self._in_logic {
            "(* no_rw_check, ram_style = \"logic\" *)"
        } else {
            "(* no_rw_check *)"
        }
    }

    pub fn depth(&self) -> usize {
        self._mem.len()
    }

    /// The address bits the RAM decodes: enough for its depth. Higher bits are ignored, so
    /// that the address arithmetic that feeds it is built no wider than the memory (Yosys
    /// drops an adder's unused high bits).
    pub fn address_bits(&self) -> usize {
        (usize::BITS - (self._mem.len() - 1).leading_zeros()).clamp(1, A as u32) as usize
    }

    fn decoded(&self, address: Bits<A>) -> usize {
        let bits = self.address_bits();
        let a = address.index();
        if bits >= usize::BITS as usize {
            a
        } else {
            a & ((1usize << bits) - 1)
        }
    }

    /// The word as stored: the bits above `bits` cleared.
    fn stored(&self, word: Bits<W>) -> Bits<W> {
        let mut v = word;
        for i in self._bits..W {
            v = v.replace_bit(i, false);
        }
        v
    }
}

impl<const W: usize, const A: usize> Logic for Ram<W, A> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let ra = self.decoded(self.read_address.val());
            let wa = self.decoded(self.write_address.val());
            let we = self.write_enable.val() && wa < self._mem.len();
            let word = self.stored(self.write_data.val());
            if self.read_enable.val() {
                self._read = self._mem.get(ra).copied().unwrap_or_default();
                self._forward = self._write_first && we && ra == wa;
                self._written = word;
                if let Some((la, word)) = self._late {
                    self._late_forward = la == ra;
                    self._late_written = word;
                } else {
                    self._late_forward = false;
                }
            }
            if self._write_stage {
                if let Some((la, late)) = self._late {
                    self._mem[la] = late;
                }
                self._late = we.then_some((wa, word));
            } else if we {
                self._mem[wa] = word;
            }
        }
        self.read_data.next = if self._forward {
            self._written
        } else if self._late_forward {
            self._late_written
        } else {
            self._read
        };
    }

    fn connect(&mut self) {
        self.read_data.connect();
    }

    fn hdl(&self) -> Verilog {
        let ab = self.address_bits();
        let (ra, wa) = if ab == A {
            ("read_address".to_string(), "write_address".to_string())
        } else {
            (format!("read_address[{}:0]", ab - 1), format!("write_address[{}:0]", ab - 1))
        };
        let kept = if self._bits == W {
            "write_data".to_string()
        } else {
            format!("write_data[{}:0]", self._bits - 1)
        };
        if !self._write_first && !self._write_stage {
            return Verilog::Custom(format!(
                "\
{attributes} reg [{msb}:0] mem [0:{last}];
reg [{msb}:0] read_q;
initial read_q = 0;
always @(posedge clock) begin
   if (write_enable) mem[{wa}] <= {kept};
end
always @(posedge clock) begin
   if (read_enable) read_q <= mem[{ra}];
end
always @(*) read_data = read_q;
",
                attributes = self.mem_attributes(),
                msb = self._bits - 1,
                last = self._mem.len() - 1,
            ));
        }
        let msb = self._bits - 1;
        Verilog::Custom(forwarding_verilog(
            self.mem_attributes(),
            [msb, ab - 1, self._mem.len() - 1],
            (&ra, &wa, &kept),
            self._write_first,
            self._write_stage,
        ))
    }
}

/// The Verilog of a RAM that forwards: `mem` and its registered read, with (`write_first`) the
/// bypass that returns a word written in the cycle of its read, and (`staged`) a register
/// (`late_*`) that writes pass before they reach `mem`, from which a read issued while a word
/// waits there takes it. `[msb, amsb, last]` are the word's and the address's top bits and the
/// last word.
fn forwarding_verilog(
    attributes: &str,
    [msb, amsb, last]: [usize; 3],
    (ra, wa, kept): (&str, &str, &str),
    write_first: bool,
    staged: bool,
) -> String {
    let pick = |first: &[&'static str], late: &[&'static str]| -> Vec<&'static str> {
        let first = if write_first { first } else { &[] };
        first.iter().chain(if staged { late } else { &[] }).copied().collect()
    };
    let data: Vec<&str> =
        ["read_q"].into_iter().chain(pick(&["written_q"], &["late_data", "late_q"])).collect();
    let addresses: Vec<&str> = ["read_address_q"]
        .into_iter()
        .chain(pick(&["write_address_q"], &["late_address", "late_address_q"]))
        .collect();
    let flags = pick(&["write_q"], &["late_write", "late_write_q"]);
    let mut v = format!("{attributes} reg [{msb}:0] mem [0:{last}];\n");
    for (width, names) in [(msb, &data), (amsb, &addresses)] {
        for name in names {
            v += &format!("reg [{width}:0] {name};\n");
        }
    }
    for name in &flags {
        v += &format!("reg {name};\n");
    }
    v += "initial begin\n";
    for name in data.iter().chain(&addresses).chain(&flags) {
        v += &format!("   {name} = 0;\n");
    }
    v += "end\nalways @(posedge clock) begin\n";
    if staged {
        v += &format!(
            "   late_write <= write_enable;\n   late_address <= {wa};\n   late_data <= {kept};\n   \
             if (late_write) mem[late_address] <= late_data;\n"
        );
    } else {
        v += &format!("   if (write_enable) mem[{wa}] <= {kept};\n");
    }
    v += &format!("end\nalways @(posedge clock) begin\n   if (read_enable) begin\n      read_q <= mem[{ra}];\n");
    if write_first {
        v += &format!(
            "      written_q <= {kept};\n      read_address_q <= {ra};\n      \
             write_address_q <= {wa};\n      write_q <= write_enable;\n"
        );
    } else {
        v += &format!("      read_address_q <= {ra};\n");
    }
    if staged {
        v += "      late_q <= late_data;\n      late_address_q <= late_address;\n      \
              late_write_q <= late_write;\n";
    }
    v += "   end\nend\nalways @(*) read_data = ";
    if write_first {
        v += "(write_q && write_address_q == read_address_q) ? written_q";
        v += if staged { "\n   : " } else { " : " };
    }
    if staged {
        v += "(late_write_q && late_address_q == read_address_q) ? late_q : ";
    }
    v += "read_q;\n";
    v
}

/// `lanes` RAM lanes addressed by one row: a row of a scratchpad or accumulator per cycle.
/// Lane `j` is written where `write_lane[j]` is set (a whole row, or one host element).
#[derive(LogicBlock)]
pub struct RowRam<const W: usize> {
    pub clock: Signal<In, Clock>,
    pub read_enable: Signal<In, Bit>,
    pub read_address: Signal<In, Bits<16>>,
    pub read_data: Vec<Signal<Out, Bits<W>>>,
    pub write_address: Signal<In, Bits<16>>,
    pub write_data: Vec<Signal<In, Bits<W>>>,
    pub write_lane: Vec<Signal<In, Bit>>,
    lanes: Vec<Ram<W, 16>>,
}

impl<const W: usize> RowRam<W> {
    pub fn new(lanes: usize, depth: usize) -> Self {
        RowRam::with_bits(lanes, depth, W)
    }

    /// Lanes that keep the low `bits` of each word.
    pub fn with_bits(lanes: usize, depth: usize, bits: usize) -> Self {
        RowRam {
            clock: Default::default(),
            read_enable: Default::default(),
            read_address: Default::default(),
            read_data: (0..lanes).map(|_| Default::default()).collect(),
            write_address: Default::default(),
            write_data: (0..lanes).map(|_| Default::default()).collect(),
            write_lane: (0..lanes).map(|_| Default::default()).collect(),
            lanes: (0..lanes).map(|_| Ram::with_bits(depth, bits)).collect(),
        }
    }

    /// The same memory with its lanes' writes registered ([`Ram::with_write_stage`]).
    pub fn with_write_stage(self) -> Self {
        RowRam { lanes: self.lanes.into_iter().map(Ram::with_write_stage).collect(), ..self }
    }
}

impl<const W: usize> Logic for RowRam<W> {
    #[hdl_gen]
    fn update(&mut self) {
        for j in 0..self.lanes.len() {
            self.lanes[j].clock.next = self.clock.val();
            self.lanes[j].read_enable.next = self.read_enable.val();
            self.lanes[j].read_address.next = self.read_address.val();
            self.lanes[j].write_address.next = self.write_address.val();
            self.lanes[j].write_data.next = self.write_data[j].val();
            self.lanes[j].write_enable.next = self.write_lane[j].val();
            self.read_data[j].next = self.lanes[j].read_data.val();
        }
    }
}

/// `data_out[i] = data_in[(i + amount) mod n]` for `n` byte lanes, `n` a power of two.
#[derive(LogicBlock)]
pub struct Rotator {
    pub data_in: Vec<Signal<In, Bits<8>>>,
    pub amount: Signal<In, Bits<16>>,
    pub data_out: Vec<Signal<Out, Bits<8>>>,
}

impl Rotator {
    pub fn new(lanes: usize) -> Rotator {
        assert!(lanes.is_power_of_two() && lanes <= 1 << 15, "{lanes} lanes");
        Rotator {
            data_in: (0..lanes).map(|_| Default::default()).collect(),
            amount: Default::default(),
            data_out: (0..lanes).map(|_| Default::default()).collect(),
        }
    }
}

impl Logic for Rotator {
    fn update(&mut self) {
        let n = self.data_in.len();
        let amount = self.amount.val().index() % n;
        for i in 0..n {
            self.data_out[i].next = self.data_in[(i + amount) % n].val();
        }
    }

    fn connect(&mut self) {
        for o in &mut self.data_out {
            o.connect();
        }
    }

    /// A shift of the lanes concatenated twice: Yosys builds a log-depth shifter from it.
    fn hdl(&self) -> Verilog {
        let n = self.data_in.len();
        let bits = n.trailing_zeros() as usize;
        let packed: Vec<String> = (0..n).rev().map(|i| format!("data_in${i}")).collect();
        let amount = if bits == 0 { "0".to_string() } else { format!("amount[{}:0]", bits - 1) };
        let mut v = format!(
            "wire [{w}:0] lanes_in = {{{list}}};\nwire [{w2}:0] doubled = {{lanes_in, lanes_in}};\n\
             wire [{w}:0] rotated = doubled >> ({{{amount}, 3'b000}});\n",
            w = 8 * n - 1,
            w2 = 16 * n - 1,
            list = packed.join(", "),
        );
        for i in 0..n {
            v.push_str(&format!("always @(*) data_out${i} = rotated[{}:{}];\n", 8 * i + 7, 8 * i));
        }
        Verilog::Custom(v)
    }
}

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
}

impl Dram {
    /// The same DRAM with its banks' writes registered on the way in ([`Ram::with_write_stage`]):
    /// the same reads, and a `Store`'s path from the scratchpad or the accumulators through the
    /// write rotator ends at flip-flops beside it.
    pub fn with_write_stage(self) -> Dram {
        Dram { banks: self.banks.into_iter().map(Ram::with_write_stage).collect(), ..self }
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, tick, verilog_of};

    #[test]
    fn ram_reads_are_registered_and_write_first() {
        let mut ram = Ram::<16, 16>::new(8);
        ram.connect_all();
        ram.read_enable.next = true;
        ram.write_enable.next = true;
        ram.write_address.next = 3u64.into();
        ram.write_data.next = 0xBEEFu64.into();
        ram.read_address.next = 3u64.into();
        tick(&mut ram, |r| &mut r.clock);
        assert_eq!(ram.read_data.val().index(), 0xBEEF, "a read in the cycle of the write");
        ram.write_address.next = 4u64.into();
        ram.write_data.next = 0x1234u64.into();
        tick(&mut ram, |r| &mut r.clock);
        assert_eq!(ram.read_data.val().index(), 0xBEEF, "registered: the word, not the bypass");
        ram.write_enable.next = false;
        ram.read_address.next = 4u64.into();
        ram.read_enable.next = false;
        tick(&mut ram, |r| &mut r.clock);
        assert_eq!(ram.read_data.val().index(), 0xBEEF, "held while the read is disabled");
        ram.read_enable.next = true;
        tick(&mut ram, |r| &mut r.clock);
        assert_eq!(ram.read_data.val().index(), 0x1234);
        // A narrow RAM keeps the low bits, bypass included.
        let mut narrow = Ram::<16, 16>::with_bits(4, 8);
        narrow.connect_all();
        narrow.read_enable.next = true;
        narrow.write_enable.next = true;
        narrow.write_data.next = 0xBEEFu64.into();
        tick(&mut narrow, |r| &mut r.clock);
        assert_eq!(narrow.read_data.val().index(), 0xEF);
        narrow.write_enable.next = false;
        tick(&mut narrow, |r| &mut r.clock);
        assert_eq!(narrow.read_data.val().index(), 0xEF);
    }

    /// A write stage changes no read: random writes and reads (some of the word being written,
    /// some of the word written a cycle before, some while the read is disabled) return the same
    /// words from a RAM with and without it, write-first and read-first, in the model, and the
    /// Verilog of each is valid.
    #[test]
    fn a_write_stage_returns_what_the_plain_ram_returns() {
        let new = || Ram::<16, 16>::new(16);
        let read_first = || Ram::<16, 16>::read_first(16);
        reads_match(new(), new().with_write_stage(), 7);
        reads_match(read_first(), read_first().with_write_stage(), 8);
        yosys_validate("ram_staged", &verilog_of(Ram::<16, 16>::new(100).with_write_stage()))
            .unwrap();
        let read_first = Ram::<16, 16>::read_first(100).with_write_stage();
        yosys_validate("ram_read_first_staged", &verilog_of(read_first)).unwrap();
    }

    fn reads_match(mut plain: Ram<16, 16>, mut staged: Ram<16, 16>, seed: u64) {
        plain.connect_all();
        staged.connect_all();
        let mut rng = systole_core::check::SplitMix(seed);
        let mut next = |n: u64| rng.next_u64() % n;
        let (mut last_write, mut forwarded_late) = (0u64, 0);
        for cycle in 0..4000 {
            let we = next(3) > 0;
            let wa = next(16);
            let ra = match next(3) {
                0 => wa,
                1 => last_write,
                _ => next(16),
            };
            forwarded_late += (ra == last_write && ra != wa) as u32;
            let (re, data) = (next(8) > 0, next(1 << 16));
            for ram in [&mut plain, &mut staged] {
                ram.write_enable.next = we;
                ram.write_address.next = wa.into();
                ram.write_data.next = data.into();
                ram.read_address.next = ra.into();
                ram.read_enable.next = re;
                tick(ram, |r| &mut r.clock);
            }
            assert_eq!(staged.read_data.val(), plain.read_data.val(), "cycle {cycle}");
            if we {
                last_write = wa;
            }
        }
        assert!(forwarded_late > 500, "reads of the word written a cycle before: {forwarded_late}");
    }

    /// A RAM decodes the address bits its depth needs: higher bits wrap, in the model as in the
    /// Verilog (`mem[address[9:0]]`).
    #[test]
    fn ram_decodes_its_depths_address_bits() {
        assert_eq!(Ram::<8, 32>::new(1024).address_bits(), 10);
        assert_eq!(Ram::<8, 32>::new(1000).address_bits(), 10);
        assert_eq!(Ram::<8, 32>::new(1025).address_bits(), 11);
        assert_eq!(Ram::<8, 32>::new(1).address_bits(), 1);
        assert_eq!(Ram::<8, 4>::new(16).address_bits(), 4);
        let mut ram = Ram::<8, 32>::new(1024);
        assert!(verilog_of(Ram::<8, 32>::new(1024)).contains("mem[write_address[9:0]]"));
        ram.connect_all();
        ram.read_enable.next = true;
        ram.write_enable.next = true;
        ram.write_address.next = (1024u64 * 5 + 3).into();
        ram.write_data.next = 0x5Au64.into();
        tick(&mut ram, |r| &mut r.clock);
        ram.write_enable.next = false;
        ram.read_address.next = 3u64.into();
        tick(&mut ram, |r| &mut r.clock);
        assert_eq!(ram.read_data.val().index(), 0x5A);
    }

    #[test]
    fn rotator_rotates() {
        let mut r = Rotator::new(8);
        r.connect_all();
        for i in 0..8 {
            r.data_in[i].next = (10 + i as u64).into();
        }
        for amount in [0usize, 1, 5, 7, 9] {
            r.amount.next = (amount as u64).into();
            settle(&mut r);
            for i in 0..8 {
                assert_eq!(r.data_out[i].val().index(), 10 + (i + amount) % 8, "amount {amount}");
            }
        }
    }

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

    /// Yosys maps a RAM lane to the FPGA's block RAM (iCE40 EBR, ECP5 DP16KD), read register
    /// and enable included, with or without a write stage; only the write-first bypass (and the
    /// write register) stays in logic.
    #[test]
    fn ram_infers_block_ram_on_ice40_and_ecp5() {
        let dir = std::env::temp_dir().join(format!("systole-bram-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ram.v");
        let targets = [("synth_ice40", "SB_RAM40_4K", 4u64), ("synth_ecp5", "DP16KD", 1)];
        for ((synth, cell, want), staged) in
            targets.into_iter().flat_map(|target| [(target, false), (target, true)])
        {
            let ram = Ram::<16, 16>::new(1024);
            let ram = if staged { ram.with_write_stage() } else { ram };
            std::fs::write(&file, verilog_of(ram)).unwrap();
            let stat = dir.join(format!("{synth}.txt"));
            let script = format!(
                "read_verilog {}; {synth} -top top; tee -q -o {} stat",
                file.display(),
                stat.display()
            );
            let out = std::process::Command::new("yosys").args(["-q", "-p", &script]).output();
            let out = out.expect("yosys must be installed (apt-get install yosys)");
            assert!(out.status.success(), "{synth}: {}", String::from_utf8_lossy(&out.stderr));
            let text = std::fs::read_to_string(&stat).unwrap();
            let count = text
                .lines()
                .find(|l| l.trim_start().starts_with(cell))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
            assert_eq!(count, Some(want), "{synth} (write stage: {staged}): {cell}s:\n{text}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A RAM built `in_logic` takes no block RAM where the same RAM takes one, with forwarding
    /// or without.
    #[test]
    fn ram_in_logic_takes_no_block_ram() {
        let dir = std::env::temp_dir().join(format!("systole-logic-ram-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ram.v");
        let stat = dir.join("stat.txt");
        let count = |ram: Ram<16, 16>| {
            std::fs::write(&file, verilog_of(ram)).unwrap();
            let script = format!(
                "read_verilog {}; synth_ice40 -top top; tee -q -o {} stat",
                file.display(),
                stat.display()
            );
            let out = std::process::Command::new("yosys").args(["-q", "-p", &script]).output();
            let out = out.expect("yosys must be installed (apt-get install yosys)");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let text = std::fs::read_to_string(&stat).unwrap();
            let cells = |name: &str| {
                text.lines()
                    .find(|l| l.trim_start().starts_with(name))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            (cells("SB_RAM40_4K"), cells("SB_DFFE"))
        };
        assert_eq!(count(Ram::read_first(16)).0, 1, "a 16 x 16 RAM in a block RAM");
        for ram in [Ram::read_first(16).in_logic(), Ram::new(16).in_logic()] {
            let (brams, enabled_flops) = count(ram);
            assert_eq!(brams, 0, "built in logic");
            assert!(enabled_flops >= 256, "its 256 bits in flip-flops: {enabled_flops}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("ram", &verilog_of(Ram::<32, 16>::new(100))).unwrap();
        yosys_validate("row_ram", &verilog_of(RowRam::<16>::with_bits(3, 64, 8))).unwrap();
        yosys_validate("rotator", &verilog_of(Rotator::new(16))).unwrap();
        yosys_validate("dram", &verilog_of(Dram::new(1000, 16))).unwrap();
        yosys_validate("dram_staged", &verilog_of(Dram::new(1000, 16).with_write_stage())).unwrap();
    }
}
