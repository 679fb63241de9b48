//! The checks core's `validate_program` makes of each decoded instruction.
//!
//! [`Checker`] takes the decoded fields and the config (as constants) and gives the fault code
//! of the first check core's `validate_program` would fail: dataflow, dtype, widths against the
//! array, and every memory range ([`RangeCheck`]). The DRAM range, a 2-D strided extent, comes
//! from [`ExtentCheck`], which the host link runs without a multiplier as it queues the word;
//! the FIFO carries its answer to the checker.

use rust_hdl::prelude::*;
use systole_core::isa::Opcode;
use systole_core::protocol::FaultCode;
use systole_core::{ArrayConfig, Dataflow, Dtype};

use super::{below_twice, constant};
use crate::decoded::Decoded;
use crate::optional::Optional;

/// `start + count > limit` for 16-bit `start` and `count`, in no more bits than `limit` needs:
/// an operand at or above `2^(b+1)` (`b` the bits of `limit`) is over on its own, and the sum of
/// two smaller ones is formed in `b + 2` bits (Yosys drops an adder's constant-zero high bits).
#[derive(LogicBlock)]
pub struct RangeCheck {
    pub start: Signal<In, Bits<16>>,
    pub count: Signal<In, Bits<16>>,
    pub over: Signal<Out, Bit>,
    limit: Constant<Bits<17>>,
    low: Constant<Bits<16>>,
}

impl RangeCheck {
    pub fn new(limit: u64) -> RangeCheck {
        RangeCheck {
            start: Default::default(),
            count: Default::default(),
            over: Default::default(),
            limit: constant(limit),
            low: constant(below_twice(limit, 16)),
        }
    }
}

impl Logic for RangeCheck {
    #[hdl_gen]
    fn update(&mut self) {
        self.over.next = (self.start.val() & !self.low.val()).any()
            || (self.count.val() & !self.low.val()).any()
            || (bit_cast::<17, 16>(self.start.val() & self.low.val())
                + bit_cast::<17, 16>(self.count.val() & self.low.val())
                > self.limit.val());
    }
}

/// Where a field of the DRAM instructions sits in the word, and its width: the same in `Load`,
/// `Store`, `LoadAcc`, `StoreSpad` and `StoreBf16` (checked against core's layouts);
/// `elem_stride` is `Load`'s only.
fn dram_field(name: &str) -> (usize, usize) {
    let ops = [Opcode::Load, Opcode::Store, Opcode::LoadAcc, Opcode::StoreSpad, Opcode::StoreBf16];
    let places: Vec<(usize, usize)> = ops.iter().filter_map(|op| op.place(name)).collect();
    let place = *places.first().unwrap_or_else(|| panic!("no DRAM instruction has `{name}`"));
    assert!(places.iter().all(|p| *p == place), "core's DRAM instructions place `{name}` apart");
    place
}

/// The DRAM extent check of core's `validate_program`, for a word read as a DRAM access
/// (`Load`, `Store`, `LoadAcc`, `StoreSpad`, `StoreBf16`): whether `dram_addr + ((rows - 1) *
/// row_stride + (len - 1) * stride + 1) * bytes` passes the end of the DRAM (`stride` is
/// `elem_stride` for `Load`, else 1; `bytes` 4 for `Store` and `LoadAcc`, else the scratchpad
/// element's, which is a `StoreBf16`'s 2 wherever it is valid: on BF16 configs).
///
/// It multiplies without a multiplier: one bit of `rows - 1` and of `len - 1` per cycle, most
/// significant first (`acc = 2 acc + row_stride [bit] + stride [bit]`, 16 cycles), so the
/// host link runs it as it queues the word and the FIFO carries the answer to the dispatcher
/// (a multiplier-less FPGA would otherwise spend over a thousand LUTs on the two products). The
/// extent is formed in no more bits than the DRAM size needs: a term or running sum at or above
/// `2^b` (`2^b > dram_bytes`) can only grow, so it sets a sticky `over` and the sum keeps `b`
/// bits.
#[derive(LogicBlock)]
pub struct ExtentCheck {
    pub clock: Signal<In, Clock>,
    /// Held high, with `word` steady, until `done`; low clears the check for the next word.
    pub check: Signal<In, Bit>,
    pub word: Signal<In, Bits<128>>,
    /// The answer is ready (the 18th cycle of `check`).
    pub done: Signal<Out, Bit>,
    /// With `done`: the access would pass the end of the DRAM.
    pub bad: Signal<Out, Bit>,
    /// With `done` and not `bad`: the byte after the access's last (core's
    /// `scoreboard::dram_end`), which the decoupled schedule's scoreboard compares.
    pub end_byte: Optional<Signal<Out, Bits<32>>>,
    busy: DFF<Bit>,
    finished: DFF<Bit>,
    steps: DFF<Bits<5>>,
    /// `rows - 1` and `len - 1`, shifted left a bit per step.
    rows_left: DFF<Bits<16>>,
    len_left: DFF<Bits<16>>,
    acc: DFF<Bits<36>>,
    over: DFF<Bit>,
    /// `2^b - 1` and the bits above it.
    mask: Constant<Bits<36>>,
    above: Constant<Bits<36>>,
    dram_bytes: Constant<Bits<36>>,
    elem_shift: Constant<Bits<2>>,
    load_code: Constant<Bits<5>>,
    store_code: Constant<Bits<5>>,
    load_acc_code: Constant<Bits<5>>,
    addr_at: Constant<Bits<8>>,
    rows_at: Constant<Bits<8>>,
    len_at: Constant<Bits<8>>,
    row_stride_at: Constant<Bits<8>>,
    elem_stride_at: Constant<Bits<8>>,
    opcode: Signal<Local, Bits<5>>,
    addr_word: Signal<Local, Bits<128>>,
    rows_word: Signal<Local, Bits<128>>,
    len_word: Signal<Local, Bits<128>>,
    row_stride_word: Signal<Local, Bits<128>>,
    elem_stride_word: Signal<Local, Bits<128>>,
    addr: Signal<Local, Bits<36>>,
    row_stride: Signal<Local, Bits<36>>,
    stride: Signal<Local, Bits<36>>,
    row_term: Signal<Local, Bits<36>>,
    elem_term: Signal<Local, Bits<36>>,
    term_over: Signal<Local, Bit>,
    sum: Signal<Local, Bits<36>>,
    shift_bytes: Signal<Local, Bits<2>>,
    /// The byte after the access's last.
    limit_end: Signal<Local, Bits<36>>,
}

impl ExtentCheck {
    /// The check for `dram_bytes` (at most 2^32) of DRAM and scratchpad elements of `elem_bytes`
    /// (1 or 2), with the `end_byte` output when `with_end`.
    pub fn new(dram_bytes: u64, elem_bytes: u64, with_end: bool) -> ExtentCheck {
        assert!(elem_bytes == 1 || elem_bytes == 2, "{elem_bytes}-byte elements");
        assert!(dram_bytes <= 1 << 32, "DRAM of {dram_bytes} bytes");
        // The widths the generated logic slices (`get_bits` takes them as constants).
        let fields =
            [("dram_addr", 32), ("rows", 16), ("len", 9), ("row_stride", 24), ("elem_stride", 24)];
        for (name, bits) in fields {
            assert_eq!(dram_field(name).1, bits, "core's `{name}` is no longer {bits} bits");
        }
        let b = 64 - dram_bytes.leading_zeros();
        let mask = (1u64 << b) - 1;
        ExtentCheck {
            clock: Default::default(),
            check: Default::default(),
            word: Default::default(),
            done: Default::default(),
            bad: Default::default(),
            end_byte: Optional::default_when(with_end),
            busy: Default::default(),
            finished: Default::default(),
            steps: Default::default(),
            rows_left: Default::default(),
            len_left: Default::default(),
            acc: Default::default(),
            over: Default::default(),
            mask: constant(mask),
            above: constant(!mask & ((1 << 36) - 1)),
            dram_bytes: constant(dram_bytes),
            elem_shift: constant(elem_bytes / 2),
            load_code: constant(Opcode::Load as u64),
            store_code: constant(Opcode::Store as u64),
            load_acc_code: constant(Opcode::LoadAcc as u64),
            addr_at: constant(dram_field("dram_addr").0 as u64),
            rows_at: constant(dram_field("rows").0 as u64),
            len_at: constant(dram_field("len").0 as u64),
            row_stride_at: constant(dram_field("row_stride").0 as u64),
            elem_stride_at: constant(dram_field("elem_stride").0 as u64),
            opcode: Default::default(),
            addr_word: Default::default(),
            rows_word: Default::default(),
            len_word: Default::default(),
            row_stride_word: Default::default(),
            elem_stride_word: Default::default(),
            addr: Default::default(),
            row_stride: Default::default(),
            stride: Default::default(),
            row_term: Default::default(),
            elem_term: Default::default(),
            term_over: Default::default(),
            sum: Default::default(),
            shift_bytes: Default::default(),
            limit_end: Default::default(),
        }
    }
}

impl Logic for ExtentCheck {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, busy, finished, steps, rows_left, len_left, acc, over);
        // The fields, at their places in the word (constant shifts: wires).
        self.opcode.next = self.word.val().get_bits::<5>(0);
        self.addr_word.next = self.word.val() >> self.addr_at.val();
        self.rows_word.next = self.word.val() >> self.rows_at.val();
        self.len_word.next = self.word.val() >> self.len_at.val();
        self.row_stride_word.next = self.word.val() >> self.row_stride_at.val();
        self.elem_stride_word.next = self.word.val() >> self.elem_stride_at.val();
        self.addr.next = bit_cast::<36, 32>(self.addr_word.val().get_bits::<32>(0));
        self.row_stride.next = bit_cast::<36, 24>(self.row_stride_word.val().get_bits::<24>(0));
        self.stride.next = 1.into();
        if self.opcode.val() == self.load_code.val() {
            self.stride.next = bit_cast::<36, 24>(self.elem_stride_word.val().get_bits::<24>(0));
        }
        // One step: the terms of the current bits of `rows - 1` and `len - 1`.
        self.row_term.next = 0.into();
        self.elem_term.next = 0.into();
        self.term_over.next = false;
        if self.rows_left.q.val().get_bit(15) {
            self.row_term.next = self.row_stride.val() & self.mask.val();
            if (self.row_stride.val() & self.above.val()).any() {
                self.term_over.next = true;
            }
        }
        if self.len_left.q.val().get_bit(15) {
            self.elem_term.next = self.stride.val() & self.mask.val();
            if (self.stride.val() & self.above.val()).any() {
                self.term_over.next = true;
            }
        }
        self.sum.next = (self.acc.q.val() << 1) + self.row_term.val() + self.elem_term.val();
        if !self.check.val() {
            self.busy.d.next = false;
            self.finished.d.next = false;
        } else if self.busy.q.val() {
            self.acc.d.next = self.sum.val() & self.mask.val();
            if self.term_over.val() || (self.sum.val() & self.above.val()).any() {
                self.over.d.next = true;
            }
            self.rows_left.d.next = self.rows_left.q.val() << 1;
            self.len_left.d.next = self.len_left.q.val() << 1;
            self.steps.d.next = self.steps.q.val() - 1;
            if self.steps.q.val() == 1 {
                self.busy.d.next = false;
                self.finished.d.next = true;
            }
        } else if !self.finished.q.val() {
            self.busy.d.next = true;
            self.steps.d.next = 16.into();
            self.rows_left.d.next = self.rows_word.val().get_bits::<16>(0) - 1;
            self.len_left.d.next = bit_cast::<16, 9>(self.len_word.val().get_bits::<9>(0)) - 1;
            self.acc.d.next = 0.into();
            self.over.d.next = false;
        }
        // The end: `addr + (extent + 1) * bytes`, below 2^(b + 3) when neither is over.
        self.shift_bytes.next = self.elem_shift.val();
        if self.opcode.val() == self.store_code.val()
            || self.opcode.val() == self.load_acc_code.val()
        {
            self.shift_bytes.next = 2.into();
        }
        self.limit_end.next = (self.addr.val() & self.mask.val())
            + ((self.acc.q.val() + 1) << self.shift_bytes.val());
        self.done.next = self.finished.q.val();
        for _k in 0..self.end_byte.len() {
            self.end_byte.next = self.limit_end.val().get_bits::<32>(0);
        }
        self.bad.next = self.over.q.val()
            || (self.addr.val() & self.above.val()).any()
            || self.limit_end.val() > self.dram_bytes.val();
    }
}

/// Fault code of the first check `validate_program` would fail for a decoded instruction (0 if
/// none), for one config; the DRAM range comes in as [`ExtentCheck`]'s answer.
#[derive(LogicBlock)]
pub struct Checker {
    /// The instruction, as decoded.
    pub ins: Decoded,
    /// The word's DRAM extent passes the end of the DRAM ([`ExtentCheck`], run as the word was
    /// queued); counts only for the DRAM instructions.
    pub extent_over: Signal<In, Bit>,
    pub fault: Signal<Out, Bits<4>>,
    width: Constant<Bits<16>>,
    array_rows: Constant<Bits<16>>,
    array_cols: Constant<Bits<16>>,
    weight_stationary: Constant<Bit>,
    bf16: Constant<Bit>,
    /// INT8 lanes with their comparator (`ArrayConfig::int8_max`): `Max` is valid.
    int8_max: Constant<Bit>,
    code_dataflow: Constant<Bits<4>>,
    code_dtype: Constant<Bits<4>>,
    code_too_wide: Constant<Bits<4>>,
    code_range: Constant<Bits<4>>,
    /// The scratchpad and accumulator ranges of the instructions' rows.
    spad_range: RangeCheck,
    matmul_a: RangeCheck,
    os_a: RangeCheck,
    os_b: RangeCheck,
    acc_range: RangeCheck,
    dst_range: RangeCheck,
    src_one: RangeCheck,
    src_range: RangeCheck,
    dram_access: Signal<Local, Bit>,
    dram_bad: Signal<Local, Bit>,
    wrong_dataflow: Signal<Local, Bit>,
    wrong_dtype: Signal<Local, Bit>,
    too_wide: Signal<Local, Bit>,
    out_of_range: Signal<Local, Bit>,
}

impl Checker {
    pub fn new(config: &ArrayConfig) -> Checker {
        Checker {
            ins: Default::default(),
            extent_over: Default::default(),
            fault: Default::default(),
            width: constant(config.spad_width() as u64),
            array_rows: constant(config.rows as u64),
            array_cols: constant(config.cols as u64),
            weight_stationary: Constant::new(config.dataflow == Dataflow::WeightStationary),
            bf16: Constant::new(config.dtype == Dtype::Bf16),
            int8_max: Constant::new(config.int8_max),
            code_dataflow: constant(FaultCode::Dataflow as u64),
            code_dtype: constant(FaultCode::Dtype as u64),
            code_too_wide: constant(FaultCode::TooWide as u64),
            code_range: constant(FaultCode::Range as u64),
            spad_range: RangeCheck::new(config.spad_depth as u64),
            matmul_a: RangeCheck::new(config.spad_depth as u64),
            os_a: RangeCheck::new(config.spad_depth as u64),
            os_b: RangeCheck::new(config.spad_depth as u64),
            acc_range: RangeCheck::new(config.acc_depth as u64),
            dst_range: RangeCheck::new(config.acc_depth as u64),
            src_one: RangeCheck::new(config.acc_depth as u64),
            src_range: RangeCheck::new(config.acc_depth as u64),
            dram_access: Default::default(),
            dram_bad: Default::default(),
            wrong_dataflow: Default::default(),
            wrong_dtype: Default::default(),
            too_wide: Default::default(),
            out_of_range: Default::default(),
        }
    }
}

impl Logic for Checker {
    #[hdl_gen]
    fn update(&mut self) {
        // DRAM extent of Load, Store, LoadAcc, StoreSpad, StoreBf16: checked as the word was
        // queued.
        self.dram_access.next = self.ins.load.val()
            || self.ins.store.val()
            || self.ins.load_acc.val()
            || self.ins.store_spad.val()
            || self.ins.store_bf16.val();
        self.dram_bad.next = self.dram_access.val() && self.extent_over.val();

        self.wrong_dataflow.next = ((self.ins.load_weights.val() || self.ins.matmul.val())
            && !self.weight_stationary.val())
            || (self.ins.matmul_os.val() && self.weight_stationary.val());
        self.wrong_dtype.next = ((self.ins.cast_bf16.val() || self.ins.store_bf16.val())
            && !self.bf16.val())
            || (self.ins.requantize.val() && self.bf16.val())
            || (self.ins.vector.val()
                && (self.ins.scale.val()
                    || self.ins.axpy.val()
                    || (self.ins.max.val() && !self.int8_max.val())
                    || self.ins.equal.val())
                && !self.bf16.val());
        self.too_wide.next = ((self.ins.load.val() || self.ins.store_spad.val())
            && self.ins.len.val() > self.width.val())
            || ((self.ins.store.val() || self.ins.load_acc.val() || self.ins.store_bf16.val())
                && self.ins.len.val() > self.array_cols.val())
            || ((self.ins.load_weights.val() || self.ins.matmul_os.val())
                && (self.ins.rows.val() > self.array_rows.val()
                    || self.ins.cols.val() > self.array_cols.val()));

        self.out_of_range.next = self.dram_bad.val();
        // Scratchpad and accumulator ranges.
        self.spad_range.start.next = self.ins.spad_row.val();
        self.spad_range.count.next = self.ins.rows.val();
        self.matmul_a.start.next = self.ins.a_row.val();
        self.matmul_a.count.next = self.ins.rows.val();
        self.os_a.start.next = self.ins.a_row.val();
        self.os_a.count.next = self.ins.k.val();
        self.os_b.start.next = self.ins.b_row.val();
        self.os_b.count.next = self.ins.k.val();
        self.acc_range.start.next = self.ins.acc_row.val();
        self.acc_range.count.next = self.ins.rows.val();
        self.dst_range.start.next = self.ins.dst.val();
        self.dst_range.count.next = self.ins.rows.val();
        self.src_one.start.next = self.ins.src.val();
        self.src_one.count.next = 1.into();
        self.src_range.start.next = self.ins.src.val();
        self.src_range.count.next = self.ins.rows.val();
        if (self.ins.load.val()
            || self.ins.load_weights.val()
            || self.ins.cast_bf16.val()
            || self.ins.requantize.val()
            || self.ins.store_spad.val())
            && self.spad_range.over.val()
        {
            self.out_of_range.next = true;
        }
        if (self.ins.matmul.val() && self.matmul_a.over.val())
            || (self.ins.matmul_os.val() && (self.os_a.over.val() || self.os_b.over.val()))
        {
            self.out_of_range.next = true;
        }
        if (self.ins.store.val()
            || self.ins.matmul.val()
            || self.ins.matmul_os.val()
            || self.ins.cast_bf16.val()
            || self.ins.requantize.val()
            || self.ins.load_acc.val()
            || self.ins.store_bf16.val())
            && self.acc_range.over.val()
        {
            self.out_of_range.next = true;
        }
        if self.ins.vector.val()
            && (self.dst_range.over.val()
                || ((self.ins.bias_add.val() || self.ins.bias_relu.val())
                    && self.src_one.over.val())
                || ((self.ins.relu_grad.val()
                    || self.ins.axpy.val()
                    || self.ins.max.val()
                    || self.ins.equal.val()
                    || self.ins.add.val())
                    && self.src_range.over.val()))
        {
            self.out_of_range.next = true;
        }

        self.fault.next = 0.into();
        if self.out_of_range.val() {
            self.fault.next = self.code_range.val();
        }
        if self.too_wide.val() {
            self.fault.next = self.code_too_wide.val();
        }
        if self.wrong_dtype.val() {
            self.fault.next = self.code_dtype.val();
        }
        if self.wrong_dataflow.val() {
            self.fault.next = self.code_dataflow.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::tests::{decoded, lcg, words};
    use crate::decoded::DecodedOut;
    use crate::testing::{settle, tick, verilog_of};
    use systole_core::isa::{decode, encode, Instruction, Word};
    use systole_core::machine::{validate_program, ProgramErrorKind};

    /// The extent check's answer for a word, and the cycles it took.
    fn extent_over(dram: u64, elem_bytes: u64, word: u128) -> (bool, usize) {
        let (bad, _, cycles) = extent_of(dram, elem_bytes, word);
        (bad, cycles)
    }

    /// The extent check's answer for a word, its end byte, and the cycles it took.
    fn extent_of(dram: u64, elem_bytes: u64, word: u128) -> (bool, u64, usize) {
        let mut e = ExtentCheck::new(dram, elem_bytes, true);
        e.connect_all();
        e.word.next = word.to_bits();
        e.check.next = true;
        for cycle in 1..=40 {
            tick(&mut e, |e| &mut e.clock);
            if e.done.val() {
                return (e.bad.val(), e.end_byte.val().index() as u64, cycle);
            }
        }
        panic!("the extent check of {word:#x} never finished");
    }

    fn checked(config: &ArrayConfig, dram: u64, ins: &Instruction) -> u64 {
        let word = encode(ins).unwrap().0;
        let mut d = decoded(word);
        let mut c = Checker::new(config);
        c.extent_over.next = extent_over(dram, config.dtype.elem_bytes() as u64, word).0;
        c.connect_all();
        DecodedOut::join(&mut d.out, &mut c.ins);
        settle(&mut c);
        c.fault.val().index() as u64
    }

    fn core_fault(config: &ArrayConfig, dram: u64, ins: &Instruction) -> u64 {
        match validate_program(config, &[*ins, Instruction::Halt], dram as usize) {
            Ok(()) => 0,
            Err(e) => match e.kind {
                ProgramErrorKind::Encoding(_) | ProgramErrorKind::NoHalt => panic!("{e:?}"),
                kind => kind.fault_code().expect("one instruction's error") as u64,
            },
        }
    }

    /// Random valid encodings, many near the edges of the memories and the array.
    #[test]
    fn checker_matches_core() {
        let mut seed = 5;
        let configs = [
            (ArrayConfig::new(4, 3, Dtype::Int8), 1000u64),
            // Without the INT8 comparator, `Max` is a dtype fault.
            (ArrayConfig::new(2, 2, Dtype::Int8).with_int8_max(false), 1000u64),
            (
                ArrayConfig { spad_depth: 40, acc_depth: 9, ..ArrayConfig::new(3, 5, Dtype::Bf16) }
                    .with_dataflow(Dataflow::OutputStationary),
                5000,
            ),
        ];
        for (config, dram) in configs {
            let mut checked_any = [0usize; 9];
            for w in words(4000) {
                let Ok(ins) = decode(Word(w)) else { continue };
                // Small values so that the ranges are often just in or just out.
                let ins = shrink(ins, &mut seed);
                let want = core_fault(&config, dram, &ins);
                checked_any[want as usize] += 1;
                assert_eq!(checked(&config, dram, &ins), want, "{ins:?} on {config:?}");
            }
            assert!(checked_any[0] > 50 && checked_any[8] > 50, "{checked_any:?}");
        }
    }

    /// The instruction with its fields scaled down to around the test configs' sizes.
    fn shrink(ins: Instruction, seed: &mut u64) -> Instruction {
        let mut r = |m: u64| (lcg(seed) % m) as u16;
        match ins {
            Instruction::Load { len, .. } => Instruction::Load {
                spad_row: r(45),
                dram_addr: r(1100) as u32,
                rows: r(12) + 1,
                len: len % 7 + 1,
                row_stride: r(120) as u32,
                elem_stride: r(40) as u32,
            },
            Instruction::Store { len, .. } => Instruction::Store {
                acc_row: r(12),
                dram_addr: r(1100) as u32,
                rows: r(6) + 1,
                len: len % 6 + 1,
                row_stride: r(200) as u32,
            },
            Instruction::StoreBf16 { len, .. } => Instruction::StoreBf16 {
                acc_row: r(12),
                dram_addr: r(5100) as u32,
                rows: r(6) + 1,
                len: len % 6 + 1,
                row_stride: r(900) as u32,
            },
            Instruction::LoadAcc { len, .. } => Instruction::LoadAcc {
                acc_row: r(12),
                dram_addr: r(5100) as u32,
                rows: r(6) + 1,
                len: len % 6 + 1,
                row_stride: r(900) as u32,
            },
            Instruction::StoreSpad { len, .. } => Instruction::StoreSpad {
                spad_row: r(45),
                dram_addr: r(5100) as u32,
                rows: r(12) + 1,
                len: len % 7 + 1,
                row_stride: r(900) as u32,
            },
            Instruction::LoadWeights { .. } => {
                Instruction::LoadWeights { spad_row: r(45), rows: r(6) + 1, cols: r(7) + 1 }
            }
            Instruction::Matmul { swap, accumulate, .. } => Instruction::Matmul {
                a_row: r(45),
                acc_row: r(12),
                rows: r(12) + 1,
                swap,
                accumulate,
            },
            Instruction::MatmulOs { accumulate, .. } => Instruction::MatmulOs {
                a_row: r(45),
                b_row: r(45),
                k: r(20) + 1,
                acc_row: r(12),
                rows: r(6) + 1,
                cols: r(7) + 1,
                accumulate,
            },
            Instruction::Vector { op, imm, .. } => Instruction::Vector {
                op,
                dst: r(12),
                src: if op.uses_src() { r(12) } else { 0 },
                rows: r(10) + 1,
                imm,
            },
            Instruction::CastBf16 { .. } => {
                Instruction::CastBf16 { acc_row: r(12), spad_row: r(45), rows: r(10) + 1 }
            }
            Instruction::Requantize { requant, .. } => Instruction::Requantize {
                acc_row: r(12),
                spad_row: r(45),
                rows: r(10) + 1,
                requant,
            },
            other => other,
        }
    }

    #[test]
    fn huge_strides_reach_past_32_bits() {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let ins = Instruction::Load {
            spad_row: 0,
            dram_addr: 0xFFFF_FF00,
            rows: 0xFFFF,
            len: 4,
            row_stride: 0xFF_FFFF,
            elem_stride: 0xFF_FFFF,
        };
        assert_eq!(checked(&config, u32::MAX as u64, &ins), FaultCode::Range as u64);
        let small = Instruction::Load {
            spad_row: 0,
            dram_addr: 0xFFFF_FFFE,
            rows: 1,
            len: 1,
            row_stride: 0xFF_FFFF,
            elem_stride: 0xFF_FFFF,
        };
        assert_eq!(checked(&config, 1 << 32, &small), 0);
        assert_eq!(checked(&config, (1 << 32) - 1, &small), FaultCode::Range as u64);
    }

    /// A DRAM of at most 64 KiB multiplies only the strides' low halves: a high half counts
    /// only where the stride is used (more than one row, or element).
    #[test]
    fn operand_masks_are_below_twice_the_limit() {
        assert_eq!(below_twice(512, 16), 0x7FF, "512 needs 10 bits; 11 are kept");
        assert_eq!(below_twice(511, 16), 0x3FF);
        assert_eq!(below_twice(1, 16), 0b11);
        assert_eq!(below_twice(40_000, 16), 0xFFFF, "no narrower than the operand");
        assert_eq!(below_twice(4096, 32), 0x3FFF);
        assert_eq!(below_twice(u32::MAX as u64, 32), 0xFFFF_FFFF);
    }

    #[test]
    fn small_dram_strides_with_high_halves() {
        let config = ArrayConfig::new(2, 2, Dtype::Int8);
        let mut seen = [0usize; 9];
        for dram in [4096u64, 1 << 16] {
            for rows in [1u16, 2, 3] {
                for len in [1u16, 2] {
                    for row_stride in [0u32, 1, 0xFFFF, 0x1_0000, 0x1_0001, 0xFF_FFFF] {
                        for elem_stride in [0u32, 2, 0x1_0000, 0xFF_FFFF] {
                            for dram_addr in [0u32, 100, 4000, 0xFFFF, 0xFFFF_FFFF] {
                                let ins = Instruction::Load {
                                    spad_row: 0,
                                    dram_addr,
                                    rows,
                                    len,
                                    row_stride,
                                    elem_stride,
                                };
                                let want = core_fault(&config, dram, &ins);
                                seen[want as usize] += 1;
                                assert_eq!(checked(&config, dram, &ins), want, "{ins:?} in {dram}");
                                let store = Instruction::Store {
                                    acc_row: 0,
                                    dram_addr,
                                    rows,
                                    len,
                                    row_stride,
                                };
                                let want = core_fault(&config, dram, &store);
                                assert_eq!(checked(&config, dram, &store), want, "{store:?}");
                            }
                        }
                    }
                }
            }
        }
        assert!(seen[0] > 50 && seen[FaultCode::Range as usize] > 50, "{seen:?}");
    }

    /// The extent check against the arithmetic it stands for, on any fields (encodable or not)
    /// of each DRAM opcode, for DRAM sizes from 1 byte to 4 GiB, always after 17 clock edges.
    #[test]
    fn extent_check_is_the_exact_extent() {
        let mut seed = 11;
        let place = |name: &str| dram_field(name).0;
        for dram in [1u64, 100, 4096, 1 << 16, 1_000_003, 1 << 32] {
            for i in 0..300 {
                let ops = [
                    Opcode::Load,
                    Opcode::Store,
                    Opcode::LoadAcc,
                    Opcode::StoreSpad,
                    Opcode::StoreBf16,
                ];
                let op = ops[i % ops.len()];
                let pick = |seed: &mut u64, bits: u32| -> u64 {
                    let r = lcg(seed);
                    match r % 4 {
                        0 => r >> 8 & ((1 << bits) - 1),
                        1 => r >> 8 & 7,
                        2 => ((r >> 8) % (dram + 2)) & ((1 << bits) - 1),
                        _ => (1 << bits) - 1 - (r >> 8 & 3),
                    }
                };
                let (addr, rows, len) =
                    (pick(&mut seed, 32), pick(&mut seed, 16), pick(&mut seed, 9));
                let (rs, es) = (pick(&mut seed, 24), pick(&mut seed, 24));
                let word = op as u128
                    | (addr as u128) << place("dram_addr")
                    | (rows as u128) << place("rows")
                    | (len as u128) << place("len")
                    | (rs as u128) << place("row_stride")
                    | if op == Opcode::Load { (es as u128) << place("elem_stride") } else { 0 };
                for elem_bytes in [1u64, 2] {
                    // A `StoreBf16` is valid on BF16 configs only, whose elements are its 2.
                    let bytes = match op {
                        Opcode::Store | Opcode::LoadAcc => 4,
                        _ => elem_bytes as u128,
                    };
                    let stride = if op == Opcode::Load { es } else { 1 } as u128;
                    let span = (rows.wrapping_sub(1) & 0xFFFF) as u128 * rs as u128
                        + (len.wrapping_sub(1) & 0xFFFF) as u128 * stride;
                    let end = addr as u128 + (span + 1) * bytes;
                    let want = end > dram as u128;
                    let (got, got_end, cycles) = extent_of(dram, elem_bytes, word);
                    let what =
                        format!("{op:?} addr {addr} rows {rows} len {len} strides {rs} {es}");
                    assert_eq!(got, want, "{what}, DRAM {dram}");
                    if !want && rows > 0 && len > 0 && end < 1 << 32 {
                        // The scoreboard's span end (rows and len of 0 are refused elsewhere;
                        // an emitted DRAM is far below 4 GiB, `top::MAX_DRAM_BYTES`).
                        assert_eq!(got_end as u128, end, "{what}, DRAM {dram}: end");
                    }
                    assert_eq!(cycles, 17, "clock edges to the answer");
                }
            }
        }
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(4, 4, Dtype::Int8);
        yosys_validate("checker", &verilog_of(Checker::new(&config))).unwrap();
        yosys_validate("extent", &verilog_of(ExtentCheck::new(4096, 1, false))).unwrap();
        yosys_validate("extent", &verilog_of(ExtentCheck::new(4096, 1, true))).unwrap();
    }
}
