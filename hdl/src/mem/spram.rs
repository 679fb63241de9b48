//! A row of 8-bit RAM lanes in the iCE40 UP5K's single-port SPRAMs (`SB_SPRAM256KA`).
//!
//! The UP5K has four SPRAMs of 16,384 words of 16 bits, 128 KiB where its 30 block RAMs hold
//! 15. [`SpramRows`] keeps lanes `2k` and `2k + 1` of a row in the low and high byte of SPRAM
//! `k`'s word (so four SPRAMs hold a row of eight INT8 lanes), each lane written through its
//! own nibble masks. An SPRAM has one port: in a cycle it writes it does not read, and its
//! output is undefined after that cycle (Yosys' model gives `x`, this model 0). The machine
//! never uses such a read: core's single-port timing (`ArrayConfig::single_port_spad`) keeps
//! every read that is used out of the cycles of writes.
//!
//! SPRAM contents are not set by the bitstream, so `clear` (the machine's reset) writes zeros
//! over every word, one word of each SPRAM a cycle: a board holds its power-on reset for the
//! 16,384 cycles this takes (`systole_boards::wrapper`), and the scratchpad starts as core's
//! does, all zeros.
//!
//! The Rust model below is what rust-hdl simulates; the Verilog instantiates the cells, whose
//! behaviour a Verilated simulation takes from Yosys' own model (`ice40/cells_sim.v`).

use rust_hdl::prelude::*;

/// Words in one SPRAM: its address is 14 bits.
pub const SPRAM_WORDS: usize = 16_384;
/// SPRAMs in the UP5K.
pub const UP5K_SPRAMS: usize = 4;
/// 8-bit lanes one SPRAM word holds.
pub const LANES_PER_SPRAM: usize = 2;

/// `lanes` 8-bit lanes (in `W`-bit buses, `W >= 8`, the bits above the byte read as zero) of
/// up to [`SPRAM_WORDS`] rows in `ceil(lanes / 2)` SPRAMs; see the module docs.
#[derive(LogicBlock)]
pub struct SpramRows<const W: usize> {
    pub clock: Signal<In, Clock>,
    /// Zeros written over every word while set, a word of each SPRAM a cycle.
    pub clear: Signal<In, Bit>,
    /// The read register loads only while this is set (and its SPRAM does not write).
    pub read_enable: Signal<In, Bit>,
    pub read_address: Signal<In, Bits<16>>,
    pub read_data: Vec<Signal<Out, Bits<W>>>,
    pub write_address: Signal<In, Bits<16>>,
    pub write_data: Vec<Signal<In, Bits<W>>>,
    pub write_lane: Vec<Signal<In, Bit>>,
    _mem: Vec<Vec<u16>>,
    _out: Vec<u16>,
    _clear_at: usize,
}

impl<const W: usize> SpramRows<W> {
    /// `lanes` lanes; at most [`UP5K_SPRAMS`] `*` [`LANES_PER_SPRAM`].
    pub fn new(lanes: usize) -> SpramRows<W> {
        assert!((1..=UP5K_SPRAMS * LANES_PER_SPRAM).contains(&lanes), "{lanes} lanes");
        assert!(W >= 8, "{W}-bit buses");
        let sprams = lanes.div_ceil(LANES_PER_SPRAM);
        SpramRows {
            clock: Default::default(),
            clear: Default::default(),
            read_enable: Default::default(),
            read_address: Default::default(),
            read_data: (0..lanes).map(|_| Default::default()).collect(),
            write_address: Default::default(),
            write_data: (0..lanes).map(|_| Default::default()).collect(),
            write_lane: (0..lanes).map(|_| Default::default()).collect(),
            _mem: vec![vec![0; SPRAM_WORDS]; sprams],
            _out: vec![0; sprams],
            _clear_at: 0,
        }
    }

    fn lanes(&self) -> usize {
        self.read_data.len()
    }
}

impl<const W: usize> Logic for SpramRows<W> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let at = |bits: Bits<16>| bits.index() % SPRAM_WORDS;
            let (ra, wa) = (at(self.read_address.val()), at(self.write_address.val()));
            let clear = self.clear.val();
            for k in 0..self._mem.len() {
                let (mut data, mut mask) = (0u16, 0u16);
                for (half, j) in (LANES_PER_SPRAM * k..self.lanes()).take(2).enumerate() {
                    if self.write_lane[j].val() {
                        let byte = self.write_data[j].val().index() as u16 & 0xFF;
                        data |= byte << (8 * half);
                        mask |= 0xFF << (8 * half);
                    }
                }
                if clear {
                    self._mem[k][self._clear_at] = 0;
                    self._out[k] = 0;
                } else if mask != 0 {
                    let word = &mut self._mem[k][wa];
                    *word = (*word & !mask) | (data & mask);
                    self._out[k] = 0;
                } else if self.read_enable.val() {
                    self._out[k] = self._mem[k][ra];
                }
            }
            if clear {
                self._clear_at = (self._clear_at + 1) % SPRAM_WORDS;
            }
        }
        for j in 0..self.lanes() {
            let word = self._out[j / LANES_PER_SPRAM] >> (8 * (j % LANES_PER_SPRAM));
            self.read_data[j].next = ((word & 0xFF) as u64).into();
        }
    }

    fn connect(&mut self) {
        for data in &mut self.read_data {
            data.connect();
        }
    }

    fn hdl(&self) -> Verilog {
        let mut v = String::from(
            "reg [13:0] clear_at;\ninitial clear_at = 0;\n\
             always @(posedge clock) if (clear) clear_at <= clear_at + 14'd1;\n",
        );
        // A lane's byte, zero-extended to the bus.
        let (pad, close) =
            if W > 8 { (format!("{{{}'h0, ", W - 8), "}") } else { (String::new(), "") };
        for k in 0..self._mem.len() {
            let lanes: Vec<usize> = (LANES_PER_SPRAM * k..self.lanes()).take(2).collect();
            let writes: Vec<String> = lanes.iter().map(|j| format!("write_lane${j}")).collect();
            // The high lane's byte and masks, where this SPRAM holds two lanes.
            let (high_data, high_mask) = match lanes.get(1) {
                Some(j) => (format!("write_data${j}[7:0]"), format!("{{2{{write_lane${j}}}}}")),
                None => ("8'h00".to_string(), "2'b00".to_string()),
            };
            let low = lanes[0];
            v += &format!(
                "wire write_{k} = clear || {writes};\n\
                 wire [13:0] address_{k} = clear ? clear_at : \
                 (write_{k} ? write_address[13:0] : read_address[13:0]);\n\
                 wire [15:0] data_{k} = clear ? 16'h0000 : {{{high_data}, write_data${low}[7:0]}};\n\
                 wire [3:0] mask_{k} = clear ? 4'hf : {{{high_mask}, {{2{{write_lane${low}}}}}}};\n\
                 wire [15:0] out_{k};\n\
                 SB_SPRAM256KA spram_{k} (\n    \
                 .ADDRESS(address_{k}), .DATAIN(data_{k}), .MASKWREN(mask_{k}), .WREN(write_{k}),\n    \
                 .CHIPSELECT(read_enable || write_{k}), .CLOCK(clock), .STANDBY(1'b0),\n    \
                 .SLEEP(1'b0), .POWEROFF(1'b1), .DATAOUT(out_{k})\n);\n",
                writes = writes.join(" || "),
            );
            for (half, j) in lanes.iter().enumerate() {
                let msb = 8 * half + 7;
                let lsb = 8 * half;
                v += &format!("always @(*) read_data${j} = {pad}out_{k}[{msb}:{lsb}]{close};\n");
            }
        }
        Verilog::Custom(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::RowRam;
    use crate::testing::{tick, verilog_of};

    /// One clock of both memories: `writes` (lane mask) at `wa`, a read at `ra`.
    fn cycle(
        spram: &mut SpramRows<16>,
        ebr: &mut RowRam<16>,
        (writes, wa, data): (u32, u64, &[u64]),
        (re, ra): (bool, u64),
    ) {
        for j in 0..spram.lanes() {
            let (w, d) = (writes >> j & 1 == 1, data[j]);
            spram.write_lane[j].next = w;
            spram.write_data[j].next = d.into();
            ebr.write_lane[j].next = w;
            ebr.write_data[j].next = d.into();
        }
        spram.write_address.next = wa.into();
        spram.read_address.next = ra.into();
        spram.read_enable.next = re;
        ebr.write_address.next = wa.into();
        ebr.read_address.next = ra.into();
        ebr.read_enable.next = re;
        tick(spram, |s| &mut s.clock);
        tick(ebr, |r| &mut r.clock);
    }

    /// Random writes of some lanes and reads, never in one cycle (as core's single-port timing
    /// has them), read what the block-RAM row reads; a read in a write's cycle is undefined
    /// (0 here) in the SPRAMs the write touches and a read in the others; `clear` zeroes every
    /// word.
    #[test]
    fn reads_between_writes_are_the_block_ram_rows() {
        for lanes in [8, 3] {
            let mut spram = SpramRows::<16>::new(lanes);
            let mut ebr = RowRam::<16>::with_bits(lanes, 64, 8);
            spram.connect_all();
            ebr.connect_all();
            let mut rng = systole_core::check::SplitMix(lanes as u64);
            let mut next = |n: u64| rng.next_u64() % n;
            let mut compared = 0;
            for step in 0..3000 {
                let data: Vec<u64> = (0..lanes).map(|_| next(1 << 16)).collect();
                if next(2) == 0 {
                    let writes = next(1 << lanes) as u32;
                    cycle(&mut spram, &mut ebr, (writes, next(64), &data), (false, 0));
                } else {
                    cycle(&mut spram, &mut ebr, (0, 0, &data), (true, next(64)));
                    for j in 0..lanes {
                        let (s, e) = (spram.read_data[j].val(), ebr.read_data[j].val());
                        assert_eq!(s, e, "{lanes} lanes, step {step}, lane {j}");
                        compared += 1;
                    }
                }
            }
            assert!(compared > 4000, "{compared}");
            // A write of lane 0 leaves SPRAM 1 free to read; SPRAM 0's output is undefined.
            let mut data = vec![0u64; lanes];
            data[0] = 0x5a;
            cycle(&mut spram, &mut ebr, (1, 7, &data), (true, 7));
            assert_eq!(spram.read_data[0].val().index(), 0, "read in the cycle of a write");
            assert_eq!(spram.read_data[2].val(), ebr.read_data[2].val(), "another SPRAM's read");
            spram.clear.next = true;
            for _ in 0..SPRAM_WORDS {
                tick(&mut spram, |s| &mut s.clock);
            }
            spram.clear.next = false;
            assert!(spram._mem.iter().all(|m| m.iter().all(|&w| w == 0)), "cleared");
        }
    }

    /// Yosys maps the rows to SPRAMs and nothing else of memory: four for eight lanes, two for
    /// three.
    #[test]
    fn synthesizes_to_sprams() {
        for (lanes, want) in [(8, 4), (3, 2)] {
            let verilog = verilog_of(SpramRows::<16>::new(lanes));
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("spram.v");
            std::fs::write(&file, &verilog).unwrap();
            let stat = dir.path().join("stat.txt");
            let out = std::process::Command::new("yosys")
                .args(["-q", "-p"])
                .arg(format!(
                    "read_verilog {}; synth_ice40 -top top; tee -q -o {} stat",
                    file.display(),
                    stat.display()
                ))
                .output()
                .expect("yosys must be installed (apt-get install yosys)");
            let log = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{log}");
            let text = std::fs::read_to_string(&stat).unwrap();
            let count = |cell: &str| {
                text.lines()
                    .find(|l| l.trim_start().starts_with(cell))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u32>().ok())
                    .unwrap_or(0)
            };
            assert_eq!(count("SB_SPRAM256KA"), want, "{lanes} lanes:\n{text}");
            assert_eq!(count("SB_RAM40_4K"), 0, "{lanes} lanes:\n{text}");
        }
    }
}
