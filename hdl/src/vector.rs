//! The vector unit: one accumulator row per cycle, one lane per column, each lane combinational
//! (read data arrives registered, the result is written at the end of the same cycle). The
//! conversion lanes beside it are `crate::convert`'s.
//!
//! * [`AccLane`]: everything that writes an accumulator word: the array's output row (written, or
//!   added to the word there), every [`VectorOp`](systole_core::isa::VectorOp), and a word
//!   from DRAM or the host. INT8 and BF16 lanes share nothing but the interface, and a lane holds
//!   the datapath of its dtype only (the other is an empty `Vec`, as in [`crate::pe::Mac`]). One
//!   adder per lane serves every op; a BF16 lane's multiplier serves `Scale` and `Axpy`, and its
//!   comparator `Max` and `Equal`, which INT8 machines reject (core's `VectorOp::bf16_only`), so
//!   an INT8 word never passes a multiplier on its way from the accumulators back into them.
//! * [`Mul32`]: an INT8 lane's 32 x 32 multiplier in 16 x 16 pieces (rust-hdl multiplies only
//!   16-bit values), which only the requantize lane uses.
//!
//! Every lane computes exactly core's `Memories::row_step` (core/src/machine/memories.rs) and
//! `write_acc` for one word; the tests check the Rust model against core on random and special
//! operands, and the emitted Verilog (evaluated by Yosys) on a sample.

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dtype};

use crate::float::{F32Add, F32Mul};

/// What an accumulator lane writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum AccOp {
    /// The array's output word (a matmul without `accumulate`).
    Overwrite,
    /// The word there plus the array's output word.
    Accumulate,
    /// `x + y`: `y` is the bias row's word.
    BiasAdd,
    /// `x`, or zero where `x <= 0`.
    Relu,
    /// `x`, or zero where `y <= 0`.
    ReluGrad,
    /// `x * imm`.
    Scale,
    /// `x + imm * y`, the product rounded first.
    Axpy,
    /// `x + y`, or zero where that is `<= 0`: `BiasAdd` then `Relu` in one pass.
    BiasRelu,
    /// `y` where it is larger than `x` or a NaN where `x` is not, else `x`.
    Max,
    /// One where `x == y` (two NaNs too), else zero.
    Equal,
    /// `word` as it is (`LoadAcc`, the host).
    Word,
}

/// One accumulator lane of either dtype.
#[derive(LogicBlock)]
pub struct AccLane {
    /// Clock and clock enable of a BF16 lane's product register ([`paced_scale`]); unused
    /// elsewhere.
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub op: Signal<In, AccOp>,
    /// The word at the destination (accumulator read port A).
    pub x: Signal<In, Bits<32>>,
    /// The source word (read port B).
    pub y: Signal<In, Bits<32>>,
    /// The array's de-skewed output word.
    pub array: Signal<In, Bits<32>>,
    /// The vector op's immediate.
    pub imm: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    /// INT8: the requantize lane's multiplier, which this lane's [`Mul32`] multiplies `x` by
    /// (the lane's own ops never multiply: `Scale` and `Axpy` are BF16 ops).
    pub multiplier: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    /// INT8: the multiplier's four 16 x 16 products ([`Mul32`]), for the requantize lane
    /// (zero for BF16).
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
    int8: Vec<AccLaneInt8>,
    bf16: Vec<AccLaneBf16>,
}

/// Whether a machine's BF16 lanes register their product before the sum: built with
/// `scale_cycles = 2`, a `Scale` or `Axpy` row holds the lanes two cycles (core's
/// `timing::row_lands`), the product made in the first and added in the second.
pub fn paced_scale(config: &ArrayConfig) -> bool {
    config.dtype == Dtype::Bf16 && config.scale_cycles == 2
}

impl AccLane {
    /// A lane of `dtype`; `paced` registers a BF16 lane's product ([`paced_scale`]).
    pub fn new(dtype: Dtype, paced: bool) -> AccLane {
        AccLane {
            clock: Default::default(),
            enable: Default::default(),
            op: Default::default(),
            x: Default::default(),
            y: Default::default(),
            array: Default::default(),
            imm: Default::default(),
            word: Default::default(),
            multiplier: Default::default(),
            result: Default::default(),
            ll: Default::default(),
            lh: Default::default(),
            hl: Default::default(),
            hh: Default::default(),
            int8: if dtype == Dtype::Int8 { vec![AccLaneInt8::default()] } else { vec![] },
            bf16: if dtype == Dtype::Bf16 { vec![AccLaneBf16::new(paced)] } else { vec![] },
        }
    }
}

impl Logic for AccLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.result.next = 0.into();
        self.ll.next = 0.into();
        self.lh.next = 0.into();
        self.hl.next = 0.into();
        self.hh.next = 0.into();
        for k in 0..self.int8.len() {
            self.int8[k].multiplier.next = self.multiplier.val();
            self.ll.next = self.int8[k].ll.val();
            self.lh.next = self.int8[k].lh.val();
            self.hl.next = self.int8[k].hl.val();
            self.hh.next = self.int8[k].hh.val();
            self.int8[k].op.next = self.op.val();
            self.int8[k].x.next = self.x.val();
            self.int8[k].y.next = self.y.val();
            self.int8[k].array.next = self.array.val();
            self.int8[k].word.next = self.word.val();
            self.result.next = self.int8[k].result.val();
        }
        for k in 0..self.bf16.len() {
            self.bf16[k].clock.next = self.clock.val();
            self.bf16[k].enable.next = self.enable.val();
            self.bf16[k].op.next = self.op.val();
            self.bf16[k].x.next = self.x.val();
            self.bf16[k].y.next = self.y.val();
            self.bf16[k].array.next = self.array.val();
            self.bf16[k].imm.next = self.imm.val();
            self.bf16[k].word.next = self.word.val();
            self.result.next = self.bf16[k].result.val();
        }
    }
}

/// `a * b` for two 32-bit words as the four unsigned 16 x 16 products (`ll = a_lo * b_lo`,
/// `lh = a_lo * b_hi`, `hl = a_hi * b_lo`, `hh = a_hi * b_hi`), which the requantize lane sums.
#[derive(LogicBlock, Default)]
pub struct Mul32 {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
}

impl Logic for Mul32 {
    #[hdl_gen]
    fn update(&mut self) {
        self.ll.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(0);
        self.lh.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(16);
        self.hl.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(0);
        self.hh.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(16);
    }
}

/// The INT8 accumulator lane: i32 words, wrapping arithmetic.
#[derive(LogicBlock, Default)]
pub struct AccLaneInt8 {
    pub op: Signal<In, AccOp>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub array: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    pub multiplier: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
    mul: Mul32,
    x_le_zero: Signal<Local, Bit>,
    y_le_zero: Signal<Local, Bit>,
    /// What `x` is added to: the array's word, the bias word or the product (one adder).
    addend: Signal<Local, Bits<32>>,
    sum: Signal<Local, Bits<32>>,
    sum_le_zero: Signal<Local, Bit>,
}

impl Logic for AccLaneInt8 {
    #[hdl_gen]
    fn update(&mut self) {
        // `x * multiplier` for the requantize lane only: `Scale` and `Axpy` are BF16 ops
        // (core's `VectorOp::bf16_only`), so no accumulator word goes through the multiplier
        // on its way back into the accumulators.
        self.mul.a.next = self.x.val();
        self.mul.b.next = self.multiplier.val();
        self.ll.next = self.mul.ll.val();
        self.lh.next = self.mul.lh.val();
        self.hl.next = self.mul.hl.val();
        self.hh.next = self.mul.hh.val();
        self.x_le_zero.next = self.x.val().get_bit(31) || !self.x.val().any();
        self.y_le_zero.next = self.y.val().get_bit(31) || !self.y.val().any();
        self.addend.next = self.y.val();
        if self.op.val() == AccOp::Accumulate {
            self.addend.next = self.array.val();
        }
        self.sum.next = self.x.val() + self.addend.val();
        self.sum_le_zero.next = self.sum.val().get_bit(31) || !self.sum.val().any();
        match self.op.val() {
            AccOp::Overwrite => self.result.next = self.array.val(),
            AccOp::Accumulate => self.result.next = self.sum.val(),
            AccOp::BiasAdd => self.result.next = self.sum.val(),
            AccOp::Relu => {
                self.result.next = self.x.val();
                if self.x_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::ReluGrad => {
                self.result.next = self.x.val();
                if self.y_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::BiasRelu => {
                self.result.next = self.sum.val();
                if self.sum_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            // `Word`, and the BF16 ops (`Scale`, `Axpy`, `Max`, `Equal`), which an INT8 machine
            // never runs.
            _ => self.result.next = self.word.val(),
        }
    }
}

/// The BF16 accumulator lane: f32 words read DAZ, written with canonical NaN. Built paced
/// ([`paced_scale`]), its product passes a register before the sum and the result: the
/// sequencer holds a `Scale` or `Axpy` row for two cycles and writes it in the second, so no
/// path runs from an accumulator read through both the multiplier and the adder.
#[derive(LogicBlock, Default)]
pub struct AccLaneBf16 {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub op: Signal<In, AccOp>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub array: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    add: F32Add,
    mul: F32Mul,
    /// The product register of a paced lane (one; else none), and the product the sum and
    /// `Scale` take: the register's, or the multiplier's own.
    product_q: Vec<DFF<Bits<32>>>,
    product: Signal<Local, Bits<32>>,
    /// `x` and `y` as the datapath reads and writes them: DAZ, canonical NaN.
    x_clean: Signal<Local, Bits<32>>,
    y_clean: Signal<Local, Bits<32>>,
    x_nan: Signal<Local, Bit>,
    y_nan: Signal<Local, Bit>,
    /// `y > x` for the clean values, NaNs aside.
    y_above: Signal<Local, Bit>,
    x_le_zero: Signal<Local, Bit>,
    y_le_zero: Signal<Local, Bit>,
    sum_le_zero: Signal<Local, Bit>,
}

impl AccLaneBf16 {
    fn new(paced: bool) -> AccLaneBf16 {
        AccLaneBf16 {
            product_q: if paced { vec![DFF::default()] } else { vec![] },
            ..Default::default()
        }
    }
}

impl Logic for AccLaneBf16 {
    #[hdl_gen]
    fn update(&mut self) {
        self.mul.a.next = self.imm.val();
        self.mul.b.next = self.y.val();
        if self.op.val() == AccOp::Scale {
            self.mul.b.next = self.x.val();
        }
        self.product.next = self.mul.y.val();
        for k in 0..self.product_q.len() {
            self.product_q[k].clock.next = self.clock.val();
            self.product_q[k].d.next = self.product_q[k].q.val();
            if self.enable.val() {
                self.product_q[k].d.next = self.mul.y.val();
            }
            self.product.next = self.product_q[k].q.val();
        }
        self.add.a.next = self.x.val();
        self.add.b.next = self.product.val();
        if self.op.val() == AccOp::BiasAdd || self.op.val() == AccOp::BiasRelu {
            self.add.b.next = self.y.val();
        }
        if self.op.val() == AccOp::Accumulate {
            self.add.b.next = self.array.val();
        }
        // The sum as written: flushed and canonical, so `<= 0` is its sign or a zero exponent,
        // NaN excepted.
        self.sum_le_zero.next = !self.add.y.val().get_bits::<8>(23).any()
            || (self.add.y.val().get_bit(31)
                && !(self.add.y.val().get_bits::<8>(23).all()
                    && self.add.y.val().get_bits::<23>(0).any()));
        self.x_clean.next = self.x.val();
        if !self.x.val().get_bits::<8>(23).any() {
            self.x_clean.next = 0.into();
        }
        self.x_nan.next =
            self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any();
        if self.x_nan.val() {
            self.x_clean.next = 0x7FC0_0000.into();
        }
        self.y_clean.next = self.y.val();
        if !self.y.val().get_bits::<8>(23).any() {
            self.y_clean.next = 0.into();
        }
        self.y_nan.next =
            self.y.val().get_bits::<8>(23).all() && self.y.val().get_bits::<23>(0).any();
        if self.y_nan.val() {
            self.y_clean.next = 0x7FC0_0000.into();
        }
        // Sign and magnitude: a clean zero is +0, so different signs order by sign alone.
        self.y_above.next =
            self.y_clean.val().get_bits::<31>(0) > self.x_clean.val().get_bits::<31>(0);
        if self.x_clean.val().get_bit(31) && self.y_clean.val().get_bit(31) {
            self.y_above.next =
                self.y_clean.val().get_bits::<31>(0) < self.x_clean.val().get_bits::<31>(0);
        }
        if self.x_clean.val().get_bit(31) != self.y_clean.val().get_bit(31) {
            self.y_above.next = self.x_clean.val().get_bit(31);
        }
        // `v <= 0` after DAZ: zero exponent, or negative and not NaN.
        self.x_le_zero.next = !self.x.val().get_bits::<8>(23).any()
            || (self.x.val().get_bit(31)
                && !(self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any()));
        self.y_le_zero.next = !self.y.val().get_bits::<8>(23).any()
            || (self.y.val().get_bit(31)
                && !(self.y.val().get_bits::<8>(23).all() && self.y.val().get_bits::<23>(0).any()));
        match self.op.val() {
            AccOp::Overwrite => self.result.next = self.array.val(),
            AccOp::Relu => {
                self.result.next = self.x_clean.val();
                if self.x_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::ReluGrad => {
                self.result.next = self.x_clean.val();
                if self.y_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::Scale => self.result.next = self.product.val(),
            AccOp::Word => self.result.next = self.word.val(),
            AccOp::BiasRelu => {
                self.result.next = self.add.y.val();
                if self.sum_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::Max => {
                self.result.next = self.x_clean.val();
                if !self.x_nan.val() && (self.y_nan.val() || self.y_above.val()) {
                    self.result.next = self.y_clean.val();
                }
            }
            AccOp::Equal => {
                self.result.next = 0.into();
                if self.x_clean.val() == self.y_clean.val() {
                    self.result.next = 0x3F80_0000.into();
                }
            }
            _ => self.result.next = self.add.y.val(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{f32_operand, int_word, settle, verilog_of, yosys_eval};
    use proptest::prelude::*;
    use systole_core::{Arith, Int8, BF16};

    const OPS: [AccOp; 11] = [
        AccOp::Overwrite,
        AccOp::Accumulate,
        AccOp::BiasAdd,
        AccOp::Relu,
        AccOp::ReluGrad,
        AccOp::Scale,
        AccOp::Axpy,
        AccOp::BiasRelu,
        AccOp::Max,
        AccOp::Equal,
        AccOp::Word,
    ];

    /// The ops a lane of `dtype` runs: an INT8 lane has none of `VectorOp::bf16_only`.
    fn ops(dtype: Dtype) -> Vec<AccOp> {
        use systole_core::isa::VectorOp;
        let bf16_only = |op: &AccOp| match op {
            AccOp::Scale => VectorOp::Scale.bf16_only(),
            AccOp::Axpy => VectorOp::Axpy.bf16_only(),
            AccOp::Max => VectorOp::Max.bf16_only(),
            AccOp::Equal => VectorOp::Equal.bf16_only(),
            _ => false,
        };
        OPS.into_iter().filter(|op| dtype == Dtype::Bf16 || !bf16_only(op)).collect()
    }

    /// Core's word for one lane: `write_acc` for the array ops, `row_step` for the vector ops.
    fn core_lane<A: Arith>(op: AccOp, x: u32, y: u32, array: u32, imm: u32, word: u32) -> u32 {
        let (xa, ya, k) = (A::acc_from_bits(x), A::acc_from_bits(y), A::acc_from_bits(imm));
        let out = A::acc_from_bits(array);
        let v = match op {
            AccOp::Overwrite => out,
            AccOp::Accumulate => A::add(xa, out),
            AccOp::BiasAdd => A::add(xa, ya),
            AccOp::Relu => {
                if A::le_zero(xa) {
                    A::zero()
                } else {
                    xa
                }
            }
            AccOp::ReluGrad => {
                if A::le_zero(ya) {
                    A::zero()
                } else {
                    xa
                }
            }
            AccOp::Scale => A::mul_acc(xa, k),
            AccOp::Axpy => A::add(xa, A::mul_acc(k, ya)),
            AccOp::BiasRelu => {
                let sum = A::add(xa, ya);
                if A::le_zero(sum) {
                    A::zero()
                } else {
                    sum
                }
            }
            AccOp::Max => A::max_first(xa, ya),
            AccOp::Equal => A::equal(xa, ya),
            AccOp::Word => return word,
        };
        A::acc_to_bits(v)
    }

    fn lane(dtype: Dtype, op: AccOp, x: u32, y: u32, array: u32, imm: u32, word: u32) -> u32 {
        let mut uut = AccLane::new(dtype, false);
        uut.connect_all();
        uut.op.next = op;
        uut.x.next = (x as u64).into();
        uut.y.next = (y as u64).into();
        uut.array.next = (array as u64).into();
        uut.imm.next = (imm as u64).into();
        uut.word.next = (word as u64).into();
        settle(&mut uut);
        uut.result.val().to_u32()
    }

    /// A paced BF16 lane's result in the second cycle of a row: its inputs held through an
    /// enabled clock edge (the product registered), then a frozen edge with other inputs.
    fn paced_lane(op: AccOp, x: u32, y: u32, array: u32, imm: u32, word: u32) -> u32 {
        let mut uut = AccLane::new(Dtype::Bf16, true);
        uut.connect_all();
        let set = |uut: &mut AccLane, x: u32, y: u32, imm: u32| {
            uut.op.next = op;
            uut.x.next = (x as u64).into();
            uut.y.next = (y as u64).into();
            uut.array.next = (array as u64).into();
            uut.imm.next = (imm as u64).into();
            uut.word.next = (word as u64).into();
        };
        set(&mut uut, x, y, imm);
        uut.enable.next = true;
        crate::testing::tick(&mut uut, |u| &mut u.clock);
        set(&mut uut, !x, !y, !imm);
        uut.enable.next = false;
        crate::testing::tick(&mut uut, |u| &mut u.clock);
        set(&mut uut, x, y, imm);
        settle(&mut uut);
        uut.result.val().to_u32()
    }

    /// The array's output words are datapath values: never subnormal, NaN canonical.
    fn array_word(w: u32) -> u32 {
        BF16::acc_to_bits(BF16::acc_from_bits(w))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn int8_lane_matches_core(
            op in prop::sample::select(ops(Dtype::Int8)),
            x in int_word(), y in int_word(), a in int_word(), imm in int_word(), w in int_word()
        ) {
            prop_assert_eq!(
                lane(Dtype::Int8, op, x, y, a, imm, w),
                core_lane::<Int8>(op, x, y, a, imm, w)
            );
        }

        /// `Max` and `Equal` on near and equal operands, which random words rarely give.
        #[test]
        fn bf16_comparisons_match_core(
            op in prop::sample::select(vec![AccOp::Max, AccOp::Equal]),
            x in f32_operand(), flip in 0u32..4, ulp in 0u32..3
        ) {
            let y = match flip {
                0 => x,
                1 => x ^ 0x8000_0000,
                2 => x.wrapping_add(ulp),
                _ => x.wrapping_sub(ulp),
            };
            for (x, y) in [(x, y), (y, x)] {
                prop_assert_eq!(
                    lane(Dtype::Bf16, op, x, y, 0, 0, 0),
                    core_lane::<BF16>(op, x, y, 0, 0, 0),
                    "{:?} x {:#010x} y {:#010x}", op, x, y
                );
            }
        }

        #[test]
        fn bf16_lane_matches_core(
            op in prop::sample::select(OPS.to_vec()),
            x in f32_operand(), y in f32_operand(), a in f32_operand(), imm in f32_operand(),
            w in any::<u32>()
        ) {
            let a = array_word(a);
            let want = core_lane::<BF16>(op, x, y, a, imm, w);
            prop_assert_eq!(
                lane(Dtype::Bf16, op, x, y, a, imm, w), want,
                "{:?} x {:#010x} y {:#010x} array {:#010x} imm {:#010x}", op, x, y, a, imm
            );
            // The paced lane (its product registered) in a row's second cycle.
            prop_assert_eq!(
                paced_lane(op, x, y, a, imm, w), want,
                "paced {:?} x {:#010x} y {:#010x} array {:#010x} imm {:#010x}", op, x, y, a, imm
            );
        }
    }

    /// The emitted Verilog of the lanes, evaluated by Yosys, against core.
    #[test]
    fn verilog_matches_core() {
        let mut seed = 0x5EED_u64;
        let mut next = || (crate::testing::lcg_step(&mut seed) >> 32) as u32;
        let mut cases = vec![];
        for i in 0..64 {
            let (x, y, a, imm) = (next(), next(), next(), next());
            cases.push((OPS[i % OPS.len()], x, y, a, imm));
        }
        // NaN with a payload, subnormals, -0, infinities, i32::MIN.
        let specials = [
            0x7F80_0001u32,
            0x8000_0001,
            0x8000_0000,
            0xFF80_0000,
            0x0000_0000,
            0x3FC0_0000,
            0xBFC0_0000,
        ];
        for (i, &x) in specials.iter().enumerate() {
            for (j, op) in OPS.iter().enumerate() {
                let y = specials[(i + j) % specials.len()];
                cases.push((*op, x, y, 0x7F80_0000, 0x3F80_0001));
            }
        }
        let inputs: Vec<Vec<(&str, u64)>> = cases
            .iter()
            .map(|&(op, x, y, a, imm)| {
                vec![
                    ("op", op as u64),
                    ("x", x as u64),
                    ("y", y as u64),
                    ("array", array_word(a) as u64),
                    ("imm", imm as u64),
                    ("word", (x ^ y) as u64),
                    ("multiplier", (imm ^ 0x5A5A) as u64),
                ]
            })
            .collect();
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let got = yosys_eval(&verilog_of(AccLane::new(dtype, false)), &inputs, "result");
            let runs = ops(dtype);
            for (&(op, x, y, a, imm), &g) in cases.iter().zip(&got) {
                if !runs.contains(&op) {
                    continue;
                }
                let a = array_word(a);
                let want = match dtype {
                    Dtype::Int8 => core_lane::<Int8>(op, x, y, a, imm, x ^ y),
                    Dtype::Bf16 => core_lane::<BF16>(op, x, y, a, imm, x ^ y),
                };
                assert_eq!(g as u32, want, "{dtype:?} {op:?} {x:#x} {y:#x} {a:#x} {imm:#x}");
            }
        }
    }

    #[test]
    fn verilog_is_valid() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            yosys_validate("acc_lane", &verilog_of(AccLane::new(dtype, false))).unwrap();
            yosys_validate("acc_lane", &verilog_of(AccLane::new(dtype, true))).unwrap();
        }
    }
}
