//! One block-RAM lane and its forwarding.

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
    /// Built with a read stage ([`Ram::with_read_stage`]): the last enabled read's address, the
    /// word the stage holds, and the write of the stage's cycle to that address.
    _read_stage: bool,
    _read_address: usize,
    _out: Bits<W>,
    _hit: bool,
    _written2: Bits<W>,
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
            _read_stage: false,
            _read_address: 0,
            _out: Bits::<W>::default(),
            _hit: false,
            _written2: Bits::<W>::default(),
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

    /// The same write-first RAM with a read stage: the word read moves through one more
    /// register before it is used, so a read issued in enabled cycle `t` shows, after the next
    /// enabled cycle `t'`, the word as it is after the writes of `t'` (the new word where `t'`
    /// writes it, else the word a plain RAM shows after `t`: write-first over both cycles).
    /// The logic after the RAM starts at that register, which can sit beside the block RAM,
    /// not at the block RAM's data pins (5.83 ns of clock-to-out on the ECP5); every user
    /// takes the word a cycle later (`ArrayConfig::read_stages`, docs/DECISIONS.md 106).
    pub fn with_read_stage(self) -> Self {
        assert!(self._write_first, "a read stage is for write-first RAMs");
        Ram { _read_stage: true, ..self }
    }

    /// The word the RAM's registered read shows: the read register's, or a word forwarded to it.
    fn first_stage(&self) -> Bits<W> {
        if self._forward {
            self._written
        } else if self._late_forward {
            self._late_written
        } else {
            self._read
        }
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
                if self._read_stage {
                    self._out = self.first_stage();
                    self._hit = we && wa == self._read_address;
                    self._written2 = word;
                }
                self._read_address = ra;
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
        self.read_data.next = match (self._read_stage, self._hit) {
            (false, _) => self.first_stage(),
            (true, true) => self._written2,
            (true, false) => self._out,
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
            self._read_stage,
        ))
    }
}

/// The Verilog of a RAM that forwards: `mem` and its registered read, with (`write_first`) the
/// bypass that returns a word written in the cycle of its read, and (`staged`) a register
/// (`late_*`) that writes pass before they reach `mem`, from which a read issued while a word
/// waits there takes it, and (`read_stage`) the register the word then passes (`out_q`), with
/// the write of that register's cycle to the word's address forwarded past it (`hit_q`,
/// `written2_q`). `[msb, amsb, last]` are the word's and the address's top bits and the last
/// word.
fn forwarding_verilog(
    attributes: &str,
    [msb, amsb, last]: [usize; 3],
    (ra, wa, kept): (&str, &str, &str),
    write_first: bool,
    staged: bool,
    read_stage: bool,
) -> String {
    let pick = |first: &[&'static str], late: &[&'static str]| -> Vec<&'static str> {
        let first = if write_first { first } else { &[] };
        first.iter().chain(if staged { late } else { &[] }).copied().collect()
    };
    let second: &[&str] = if read_stage { &["out_q", "written2_q"] } else { &[] };
    let data: Vec<&str> = ["read_q"]
        .into_iter()
        .chain(pick(&["written_q"], &["late_data", "late_q"]))
        .chain(second.iter().copied())
        .collect();
    let addresses: Vec<&str> = ["read_address_q"]
        .into_iter()
        .chain(pick(&["write_address_q"], &["late_address", "late_address_q"]))
        .collect();
    let mut flags = pick(&["write_q"], &["late_write", "late_write_q"]);
    if read_stage {
        flags.push("hit_q");
    }
    let mut v = format!("{attributes} reg [{msb}:0] mem [0:{last}];\n");
    for (width, names) in [(msb, &data), (amsb, &addresses)] {
        for name in names {
            v += &format!("reg [{width}:0] {name};\n");
        }
    }
    for name in &flags {
        v += &format!("reg {name};\n");
    }
    if read_stage {
        v += &format!("reg [{msb}:0] first;\n");
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
    if read_stage {
        v += &format!(
            "      out_q <= first;\n      hit_q <= write_enable && {wa} == read_address_q;\n      \
             written2_q <= {kept};\n"
        );
    }
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
    v += "   end\nend\n";
    v += if read_stage { "always @(*) first = " } else { "always @(*) read_data = " };
    if write_first {
        v += "(write_q && write_address_q == read_address_q) ? written_q";
        v += if staged { "\n   : " } else { " : " };
    }
    if staged {
        v += "(late_write_q && late_address_q == read_address_q) ? late_q : ";
    }
    v += "read_q;\n";
    if read_stage {
        v += "always @(*) read_data = hit_q ? written2_q : out_q;\n";
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};

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

    /// A read stage shows, after the next enabled cycle, what the plain RAM showed for the read
    /// or the word that cycle writes to its address: random writes and reads (of the word being
    /// written, of the word written a cycle before, and others), some while the read is
    /// disabled, with and without a write stage and a narrow word; and its Verilog is valid.
    #[test]
    fn a_read_stage_shows_the_read_a_cycle_later_and_forwards_that_cycles_write() {
        for (seed, bits, write_stage) in [(3, 16, false), (4, 16, true), (5, 9, false)] {
            let make = || {
                let ram = Ram::<16, 16>::with_bits(16, bits);
                if write_stage {
                    ram.with_write_stage()
                } else {
                    ram
                }
            };
            read_stage_follows(make(), make().with_read_stage(), seed);
        }
        let ram = Ram::<16, 16>::new(100).with_read_stage();
        yosys_validate("ram_read_stage", &verilog_of(ram)).unwrap();
        let ram = Ram::<16, 16>::new(100).with_write_stage().with_read_stage();
        yosys_validate("ram_read_write_stage", &verilog_of(ram)).unwrap();
    }

    fn read_stage_follows(mut plain: Ram<16, 16>, mut staged: Ram<16, 16>, seed: u64) {
        plain.connect_all();
        staged.connect_all();
        let mut rng = systole_core::check::SplitMix(seed);
        let mut next = |n: u64| rng.next_u64() % n;
        let mask = (1u64 << plain._bits) - 1;
        // The plain RAM's word for the last enabled read, and that read's address.
        let (mut pending, mut last_read, mut last_write) = (0u64, 0u64, 0u64);
        let (mut shown, mut forwarded) = (0u64, 0u32);
        for cycle in 0..4000 {
            let we = next(3) > 0;
            let wa = match next(3) {
                0 => last_read,
                _ => next(16),
            };
            let ra = match next(3) {
                0 => wa,
                1 => last_write,
                _ => next(16),
            };
            let (re, data) = (next(8) > 0, next(1 << 16));
            for ram in [&mut plain, &mut staged] {
                cycle_of(ram, (we, wa, data), (re, ra));
            }
            if re {
                let hit = we && wa == last_read;
                forwarded += hit as u32;
                shown = if hit { data & mask } else { pending };
                pending = plain.read_data.val().index() as u64;
                last_read = ra;
            }
            assert_eq!(staged.read_data.val().index() as u64, shown, "cycle {cycle}");
            if we {
                last_write = wa;
            }
        }
        assert!(forwarded > 300, "writes forwarded past the read stage: {forwarded}");
    }

    /// One clock of `ram` with a write (`enable`, address, data) and a read (`enable`, address).
    fn cycle_of(ram: &mut Ram<16, 16>, (we, wa, data): (bool, u64, u64), (re, ra): (bool, u64)) {
        ram.write_enable.next = we;
        ram.write_address.next = wa.into();
        ram.write_data.next = data.into();
        ram.read_address.next = ra.into();
        ram.read_enable.next = re;
        tick(ram, |r| &mut r.clock);
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
                cycle_of(ram, (we, wa, data), (re, ra));
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

    /// Yosys' statistics for `ram` synthesised by `synth` (`synth_ice40`, `synth_ecp5`) in `dir`:
    /// each cell type's count, 0 for the types it did not use.
    fn synthesised(dir: &std::path::Path, ram: Ram<16, 16>, synth: &str) -> impl Fn(&str) -> u64 {
        let (file, stat) = (dir.join("ram.v"), dir.join(format!("{synth}.txt")));
        std::fs::write(&file, verilog_of(ram)).unwrap();
        let script = format!(
            "read_verilog {}; {synth} -top top; tee -q -o {} stat",
            file.display(),
            stat.display()
        );
        let out = std::process::Command::new("yosys").args(["-q", "-p", &script]).output();
        let out = out.expect("yosys must be installed (apt-get install yosys)");
        assert!(out.status.success(), "{synth}: {}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&stat).unwrap();
        move |cell: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(cell))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
        }
    }

    /// Yosys maps a RAM lane to the FPGA's block RAM (iCE40 EBR, ECP5 DP16KD), read register
    /// and enable included, with or without a write stage or a read stage; only the write-first
    /// bypass (and the write register, and the read stage) stays in logic.
    #[test]
    fn ram_infers_block_ram_on_ice40_and_ecp5() {
        let dir = std::env::temp_dir().join(format!("systole-bram-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let targets = [("synth_ice40", "SB_RAM40_4K", 4u64), ("synth_ecp5", "DP16KD", 1)];
        for ((synth, cell, want), stage) in
            targets.into_iter().flat_map(|target| [(target, 0), (target, 1), (target, 2)])
        {
            let ram = Ram::<16, 16>::new(1024);
            let ram = match stage {
                0 => ram,
                1 => ram.with_write_stage(),
                _ => ram.with_read_stage(),
            };
            let cells = synthesised(&dir, ram, synth);
            assert_eq!(cells(cell), want, "{synth} (variant {stage}): {cell}s");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A RAM built `in_logic` takes no block RAM where the same RAM takes one, with forwarding
    /// or without.
    #[test]
    fn ram_in_logic_takes_no_block_ram() {
        let dir = std::env::temp_dir().join(format!("systole-logic-ram-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let count = |ram: Ram<16, 16>| {
            let cells = synthesised(&dir, ram, "synth_ice40");
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
    }
}
