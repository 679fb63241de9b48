//! The decoupled schedule's scoreboard in hardware: what an instruction touches while it is in
//! flight ([`Footprint`], core's `scoreboard::Footprint` as one signal bundle), computed from
//! the decoded candidate ([`FootprintOf`]), and the hazard test between two of them
//! ([`Conflict`], core's `scoreboard::conflicts`). The dispatcher keeps one footprint per
//! instruction in flight and compares the candidate with each.
//!
//! Spans are half-open `lo..hi`, an empty one `0..0`. Scratchpad and accumulator rows take 17
//! bits (`row + rows` of two 16-bit fields); DRAM bytes 32, the end coming from the host link's
//! extent check through the FIFO (an emitted DRAM is far below 4 GiB, `top::MAX_DRAM_BYTES`).

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::scoreboard::{SPAD_READ2, SPAD_WRITE};
use systole_core::ArrayConfig;

use crate::decode::constant;
use crate::optional::Optional;

/// What one instruction touches while it is in flight.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, LogicStruct)]
pub struct Footprint {
    pub read0_lo: Bits<17>,
    pub read0_hi: Bits<17>,
    pub read1_lo: Bits<17>,
    pub read1_hi: Bits<17>,
    pub write_lo: Bits<17>,
    pub write_hi: Bits<17>,
    pub dram_read_lo: Bits<32>,
    pub dram_read_hi: Bits<32>,
    pub dram_write_lo: Bits<32>,
    pub dram_write_hi: Bits<32>,
    /// Accumulator banks, one bit each (core's `scoreboard::acc_banks`).
    pub acc_banks: Bits<2>,
    /// Scratchpad ports beside the array's read port (core's `SPAD_WRITE`, `SPAD_READ2`).
    pub ports: Bits<2>,
}

/// Bits of a [`Footprint`] as one word (the instruction FIFO stores it beside its word).
pub const FOOTPRINT_BITS: usize = <Footprint as Synth>::BITS;

/// The footprint of a decoded instruction (combinational).
#[derive(LogicBlock)]
pub struct FootprintOf {
    /// The instruction, as decoded.
    pub ins: Decoded,
    /// The byte after the last DRAM byte the word touches, read as a DRAM access (the FIFO's).
    pub dram_end: Signal<In, Bits<32>>,
    pub fp: Signal<Out, Footprint>,
    empty: Constant<Footprint>,
    /// The first accumulator row of the second bank: `ceil(acc_depth / 2)`.
    split: Constant<Bits<17>>,
    port_write: Constant<Bits<2>>,
    port_read2: Constant<Bits<2>>,
    /// Accumulator spans: the instruction's rows (`acc_row` or `dst`), and a vector op's source.
    acc_lo: Signal<Local, Bits<17>>,
    acc_hi: Signal<Local, Bits<17>>,
    src_lo: Signal<Local, Bits<17>>,
    src_hi: Signal<Local, Bits<17>>,
    rows_end: Signal<Local, Bits<17>>,
    bank0: Signal<Local, Bit>,
    bank1: Signal<Local, Bit>,
}

impl FootprintOf {
    pub fn new(config: &ArrayConfig) -> FootprintOf {
        FootprintOf {
            ins: Default::default(),
            dram_end: Default::default(),
            fp: Default::default(),
            empty: Constant::new(Footprint::default()),
            split: constant(config.acc_depth.div_ceil(2) as u64),
            port_write: constant(SPAD_WRITE as u64),
            port_read2: constant(SPAD_READ2 as u64),
            acc_lo: Default::default(),
            acc_hi: Default::default(),
            src_lo: Default::default(),
            src_hi: Default::default(),
            rows_end: Default::default(),
            bank0: Default::default(),
            bank1: Default::default(),
        }
    }
}

impl Logic for FootprintOf {
    #[hdl_gen]
    fn update(&mut self) {
        self.fp.next = self.empty.val();
        self.acc_lo.next = 0.into();
        self.acc_hi.next = 0.into();
        self.src_lo.next = 0.into();
        self.src_hi.next = 0.into();
        self.rows_end.next = bit_cast::<17, 16>(self.ins.rows.val());
        if self.ins.load.val() {
            self.fp.next.write_lo = bit_cast::<17, 16>(self.ins.spad_row.val());
            self.fp.next.write_hi =
                bit_cast::<17, 16>(self.ins.spad_row.val()) + self.rows_end.val();
            self.fp.next.ports = self.port_write.val();
            self.fp.next.dram_read_lo = self.ins.dram_addr.val();
            self.fp.next.dram_read_hi = self.dram_end.val();
        }
        if self.ins.load_acc.val() {
            self.acc_lo.next = bit_cast::<17, 16>(self.ins.acc_row.val());
            self.fp.next.dram_read_lo = self.ins.dram_addr.val();
            self.fp.next.dram_read_hi = self.dram_end.val();
        }
        if self.ins.store.val() || self.ins.store_bf16.val() {
            self.acc_lo.next = bit_cast::<17, 16>(self.ins.acc_row.val());
            self.fp.next.dram_write_lo = self.ins.dram_addr.val();
            self.fp.next.dram_write_hi = self.dram_end.val();
        }
        if self.ins.store_spad.val() {
            self.fp.next.read0_lo = bit_cast::<17, 16>(self.ins.spad_row.val());
            self.fp.next.read0_hi =
                bit_cast::<17, 16>(self.ins.spad_row.val()) + self.rows_end.val();
            self.fp.next.ports = self.port_read2.val();
            self.fp.next.dram_write_lo = self.ins.dram_addr.val();
            self.fp.next.dram_write_hi = self.dram_end.val();
        }
        if self.ins.load_weights.val() {
            self.fp.next.read0_lo = bit_cast::<17, 16>(self.ins.spad_row.val());
            self.fp.next.read0_hi =
                bit_cast::<17, 16>(self.ins.spad_row.val()) + self.rows_end.val();
            self.fp.next.ports = self.port_read2.val();
        }
        if self.ins.matmul.val() {
            self.fp.next.read0_lo = bit_cast::<17, 16>(self.ins.a_row.val());
            self.fp.next.read0_hi = bit_cast::<17, 16>(self.ins.a_row.val()) + self.rows_end.val();
            self.acc_lo.next = bit_cast::<17, 16>(self.ins.acc_row.val());
        }
        if self.ins.matmul_os.val() {
            self.fp.next.read0_lo = bit_cast::<17, 16>(self.ins.a_row.val());
            self.fp.next.read0_hi =
                bit_cast::<17, 16>(self.ins.a_row.val()) + bit_cast::<17, 16>(self.ins.k.val());
            self.fp.next.read1_lo = bit_cast::<17, 16>(self.ins.b_row.val());
            self.fp.next.read1_hi =
                bit_cast::<17, 16>(self.ins.b_row.val()) + bit_cast::<17, 16>(self.ins.k.val());
            self.fp.next.ports = self.port_read2.val();
            self.acc_lo.next = bit_cast::<17, 16>(self.ins.acc_row.val());
        }
        if self.ins.cast_bf16.val() || self.ins.requantize.val() {
            self.acc_lo.next = bit_cast::<17, 16>(self.ins.acc_row.val());
            self.fp.next.write_lo = bit_cast::<17, 16>(self.ins.spad_row.val());
            self.fp.next.write_hi =
                bit_cast::<17, 16>(self.ins.spad_row.val()) + self.rows_end.val();
            self.fp.next.ports = self.port_write.val();
        }
        if self.ins.vector.val() {
            self.acc_lo.next = bit_cast::<17, 16>(self.ins.dst.val());
            if !self.ins.relu.val() && !self.ins.scale.val() {
                // The source: one bias row, or a row per destination row.
                self.src_lo.next = bit_cast::<17, 16>(self.ins.src.val());
                self.src_hi.next = bit_cast::<17, 16>(self.ins.src.val()) + self.rows_end.val();
                if self.ins.bias_add.val() || self.ins.bias_relu.val() {
                    self.src_hi.next = bit_cast::<17, 16>(self.ins.src.val()) + 1;
                }
            }
        }
        if self.ins.load_acc.val()
            || self.ins.store.val()
            || self.ins.store_bf16.val()
            || self.ins.matmul.val()
            || self.ins.matmul_os.val()
            || self.ins.cast_bf16.val()
            || self.ins.requantize.val()
            || self.ins.vector.val()
        {
            self.acc_hi.next = self.acc_lo.val() + self.rows_end.val();
        }
        // The banks: rows below `split` are the first, the rest the second.
        self.bank0.next = ((self.acc_lo.val() < self.acc_hi.val())
            && (self.acc_lo.val() < self.split.val()))
            || ((self.src_lo.val() < self.src_hi.val()) && (self.src_lo.val() < self.split.val()));
        self.bank1.next = ((self.acc_lo.val() < self.acc_hi.val())
            && (self.acc_hi.val() > self.split.val()))
            || ((self.src_lo.val() < self.src_hi.val()) && (self.src_hi.val() > self.split.val()));
        self.fp.next.acc_banks = bit_cast::<2, 1>(self.bank0.val().into())
            | (bit_cast::<2, 1>(self.bank1.val().into()) << 1);
    }
}

/// Whether two instructions on different units may not be in flight together (combinational).
#[derive(LogicBlock, Default)]
pub struct Conflict {
    pub a: Signal<In, Footprint>,
    pub b: Signal<In, Footprint>,
    pub conflict: Signal<Out, Bit>,
    a_writes_b: Signal<Local, Bit>,
    b_writes_a: Signal<Local, Bit>,
    dram: Signal<Local, Bit>,
    /// Built for an SDRAM machine only: both move DRAM bytes (core's `Footprint::dram_bus`: one
    /// transfer holds the SDRAM at a time).
    bus: Optional<Signal<Local, Bit>>,
}

impl Conflict {
    /// The hazard test of a machine of `config`.
    pub fn new(config: &ArrayConfig) -> Conflict {
        let sdram = config.dram_port == systole_core::DramPort::Sdram;
        Conflict { bus: Optional::default_when(sdram), ..Default::default() }
    }
}

impl Logic for Conflict {
    #[hdl_gen]
    fn update(&mut self) {
        // Scratchpad rows one writes and the other reads or writes (each span non-empty).
        self.a_writes_b.next = false;
        if self.a.val().write_lo < self.a.val().write_hi {
            if (self.b.val().read0_lo < self.b.val().read0_hi)
                && (self.a.val().write_lo < self.b.val().read0_hi)
                && (self.b.val().read0_lo < self.a.val().write_hi)
            {
                self.a_writes_b.next = true;
            }
            if (self.b.val().read1_lo < self.b.val().read1_hi)
                && (self.a.val().write_lo < self.b.val().read1_hi)
                && (self.b.val().read1_lo < self.a.val().write_hi)
            {
                self.a_writes_b.next = true;
            }
            if (self.b.val().write_lo < self.b.val().write_hi)
                && (self.a.val().write_lo < self.b.val().write_hi)
                && (self.b.val().write_lo < self.a.val().write_hi)
            {
                self.a_writes_b.next = true;
            }
        }
        self.b_writes_a.next = false;
        if self.b.val().write_lo < self.b.val().write_hi {
            if (self.a.val().read0_lo < self.a.val().read0_hi)
                && (self.b.val().write_lo < self.a.val().read0_hi)
                && (self.a.val().read0_lo < self.b.val().write_hi)
            {
                self.b_writes_a.next = true;
            }
            if (self.a.val().read1_lo < self.a.val().read1_hi)
                && (self.b.val().write_lo < self.a.val().read1_hi)
                && (self.a.val().read1_lo < self.b.val().write_hi)
            {
                self.b_writes_a.next = true;
            }
        }
        // DRAM bytes one writes and the other reads or writes.
        self.dram.next = false;
        if self.a.val().dram_write_lo < self.a.val().dram_write_hi {
            if (self.b.val().dram_read_lo < self.b.val().dram_read_hi)
                && (self.a.val().dram_write_lo < self.b.val().dram_read_hi)
                && (self.b.val().dram_read_lo < self.a.val().dram_write_hi)
            {
                self.dram.next = true;
            }
            if (self.b.val().dram_write_lo < self.b.val().dram_write_hi)
                && (self.a.val().dram_write_lo < self.b.val().dram_write_hi)
                && (self.b.val().dram_write_lo < self.a.val().dram_write_hi)
            {
                self.dram.next = true;
            }
        }
        if (self.b.val().dram_write_lo < self.b.val().dram_write_hi)
            && (self.a.val().dram_read_lo < self.a.val().dram_read_hi)
            && (self.b.val().dram_write_lo < self.a.val().dram_read_hi)
            && (self.a.val().dram_read_lo < self.b.val().dram_write_hi)
        {
            self.dram.next = true;
        }
        self.conflict.next = self.a_writes_b.val()
            || self.b_writes_a.val()
            || self.dram.val()
            || (self.a.val().acc_banks & self.b.val().acc_banks).any()
            || (self.a.val().ports & self.b.val().ports).any();
        for _s in 0..self.bus.len() {
            self.bus.next = ((self.a.val().dram_read_lo < self.a.val().dram_read_hi)
                || (self.a.val().dram_write_lo < self.a.val().dram_write_hi))
                && ((self.b.val().dram_read_lo < self.b.val().dram_read_hi)
                    || (self.b.val().dram_write_lo < self.b.val().dram_write_hi));
            if self.bus.val() {
                self.conflict.next = true;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decode::Decoder;
    use crate::testing::{settle, verilog_of};
    use systole_core::check::{random_program, SplitMix};
    use systole_core::isa::{encode, Instruction, VectorOp};
    use systole_core::scoreboard::{self, conflicts, Span};
    use systole_core::{Dataflow, DramPort, Dtype};

    /// Core's footprint in the hardware's bundle.
    fn bundle(fp: &scoreboard::Footprint) -> Footprint {
        let b = |s: Span| -> (Bits<17>, Bits<17>) { (s.lo.into(), s.hi.into()) };
        let d = |s: Span| -> (Bits<32>, Bits<32>) { (s.lo.into(), s.hi.into()) };
        let ((read0_lo, read0_hi), (read1_lo, read1_hi)) =
            (b(fp.spad_reads[0]), b(fp.spad_reads[1]));
        let (write_lo, write_hi) = b(fp.spad_write);
        let (dram_read_lo, dram_read_hi) = d(fp.dram_read);
        let (dram_write_lo, dram_write_hi) = d(fp.dram_write);
        Footprint {
            read0_lo,
            read0_hi,
            read1_lo,
            read1_hi,
            write_lo,
            write_hi,
            dram_read_lo,
            dram_read_hi,
            dram_write_lo,
            dram_write_hi,
            acc_banks: (fp.acc_banks as u64).into(),
            ports: (fp.spad_ports as u64).into(),
        }
    }

    /// The DRAM end the host link's extent check queues with a word (0 for other opcodes; the
    /// extent check itself is tested against core's `dram_end` in decode/checks.rs).
    pub(crate) fn end_of(config: &ArrayConfig, ins: &Instruction) -> u64 {
        let fp = scoreboard::footprint(config, ins);
        fp.dram_read.hi.max(fp.dram_write.hi)
    }

    fn footprint_of(config: &ArrayConfig, ins: &Instruction) -> Footprint {
        let mut d = Decoder::default();
        d.connect_all();
        d.word.next = encode(ins).unwrap().0.to_bits();
        settle(&mut d);
        let mut f = FootprintOf::new(config);
        f.connect_all();
        crate::decoded::DecodedOut::join(&mut d.out, &mut f.ins);
        f.dram_end.next = end_of(config, ins).into();
        settle(&mut f);
        f.fp.val()
    }

    fn conflict(config: &ArrayConfig, a: Footprint, b: Footprint) -> bool {
        let mut c = Conflict::new(config);
        c.connect_all();
        c.a.next = a;
        c.b.next = b;
        settle(&mut c);
        c.conflict.val()
    }

    /// Every instruction of random valid programs has core's footprint, and every pair of them
    /// conflicts exactly when core says so, on configs whose accumulator splits evenly and not.
    #[test]
    fn footprints_and_conflicts_are_cores() {
        let mut rng = SplitMix(5);
        let mut seen = [0usize; 2];
        for (r, c, dtype, dataflow, acc) in [
            (2, 3, Dtype::Int8, Dataflow::WeightStationary, 9),
            (3, 2, Dtype::Bf16, Dataflow::WeightStationary, 12),
            (4, 4, Dtype::Bf16, Dataflow::OutputStationary, 11),
            (3, 2, Dtype::Int8, Dataflow::WeightStationary, 10),
        ] {
            let config =
                ArrayConfig { spad_depth: 24, acc_depth: acc, ..ArrayConfig::new(r, c, dtype) }
                    .with_dataflow(dataflow);
            // The last on the SDRAM, where any two DRAM transfers conflict.
            let config = match acc {
                10 => ArrayConfig { clock_mhz: 50.0, ..config.with_dram_port(DramPort::Sdram) },
                _ => config,
            };
            let mut all = vec![];
            // Rows at the bank split, where one row more or less changes the banks.
            let split = config.acc_depth.div_ceil(2) as u16;
            let mut edges = vec![];
            for op in VectorOp::ALL {
                for (at, rows) in [(split - 1, 1), (split - 1, 2), (split, 1), (split - 2, 2)] {
                    let src = if op.uses_src() { at } else { 0 };
                    let imm = if op.uses_imm() { 1.5f32.to_bits() } else { 0 };
                    edges.push(Instruction::Vector { op, dst: 0, src, rows, imm });
                    edges.push(Instruction::Vector { op, dst: at, src: 0, rows, imm });
                }
            }
            for ins in
                edges.into_iter().chain((0..6).flat_map(|_| random_program(&config, 512, &mut rng)))
            {
                {
                    let want = scoreboard::footprint(&config, &ins);
                    let got = footprint_of(&config, &ins);
                    assert_eq!(got, bundle(&want), "{ins:?} on {config:?}");
                    all.push((want, got));
                }
            }
            for (i, (wa, ga)) in all.iter().enumerate() {
                for (wb, gb) in all.iter().skip(i).step_by(3) {
                    let want = conflicts(wa, wb);
                    assert_eq!(conflict(&config, *ga, *gb), want, "{wa:?} against {wb:?}");
                    seen[want as usize] += 1;
                }
            }
        }
        assert!(seen[0] > 200 && seen[1] > 200, "both answers exercised: {seen:?}");
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(4, 4, Dtype::Int8);
        yosys_validate("footprint", &verilog_of(FootprintOf::new(&config))).unwrap();
        yosys_validate("conflict", &verilog_of(Conflict::default())).unwrap();
        let sdram = ArrayConfig { clock_mhz: 50.0, ..config.with_dram_port(DramPort::Sdram) };
        yosys_validate("conflict_sdram", &verilog_of(Conflict::new(&sdram))).unwrap();
    }
}
