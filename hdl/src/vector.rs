//! The vector unit: one accumulator row per cycle, one lane per column, each lane combinational
//! (read data arrives registered, the result is written at the end of the same cycle).
//!
//! * [`AccLane`]: everything that writes an accumulator word: the array's output row (written, or
//!   added to the word there), every [`VectorOp`](systole_core::isa::VectorOp), and a word
//!   from DRAM or the host. INT8 and BF16 lanes share nothing but the interface, and a lane holds
//!   the datapath of its dtype only (the other is an empty `Vec`, as in [`crate::pe::Mac`]). One
//!   adder and one multiplier per lane serve every op.
//! * [`CastLane`]: f32 accumulator word -> bf16 scratchpad element (`CastBf16`).
//! * [`RequantLane`]: i32 accumulator word -> i8 scratchpad element (`Requantize`), gemmlowp's
//!   pipeline with the 32 x 32 multiply built from 16 x 16 pieces (rust-hdl multiplies only
//!   16-bit values).
//!
//! Every lane computes exactly core's `Memories::row_step` (core/src/machine/memories.rs) and
//! `write_acc` for one word; the tests check the Rust model against core on random and special
//! operands, and the emitted Verilog (evaluated by Yosys) on a sample.

use rust_hdl::prelude::*;
use systole_core::Dtype;

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
    /// `word` as it is (`LoadAcc`, the host).
    Word,
}

/// One accumulator lane of either dtype.
#[derive(LogicBlock)]
pub struct AccLane {
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
    /// INT8: the sequencer runs `Requantize`, whose lane borrows this lane's multiplier for
    /// `x * multiplier` (the two never run in the same cycle).
    pub requantize: Signal<In, Bit>,
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

impl AccLane {
    pub fn new(dtype: Dtype) -> AccLane {
        AccLane {
            op: Default::default(),
            x: Default::default(),
            y: Default::default(),
            array: Default::default(),
            imm: Default::default(),
            word: Default::default(),
            requantize: Default::default(),
            multiplier: Default::default(),
            result: Default::default(),
            ll: Default::default(),
            lh: Default::default(),
            hl: Default::default(),
            hh: Default::default(),
            int8: if dtype == Dtype::Int8 { vec![AccLaneInt8::default()] } else { vec![] },
            bf16: if dtype == Dtype::Bf16 { vec![AccLaneBf16::default()] } else { vec![] },
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
            self.int8[k].requantize.next = self.requantize.val();
            self.int8[k].multiplier.next = self.multiplier.val();
            self.ll.next = self.int8[k].ll.val();
            self.lh.next = self.int8[k].lh.val();
            self.hl.next = self.int8[k].hl.val();
            self.hh.next = self.int8[k].hh.val();
            self.int8[k].op.next = self.op.val();
            self.int8[k].x.next = self.x.val();
            self.int8[k].y.next = self.y.val();
            self.int8[k].array.next = self.array.val();
            self.int8[k].imm.next = self.imm.val();
            self.int8[k].word.next = self.word.val();
            self.result.next = self.int8[k].result.val();
        }
        for k in 0..self.bf16.len() {
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

/// `a * b` for two 32-bit words: the four unsigned 16 x 16 products (`ll = a_lo * b_lo`,
/// `lh = a_lo * b_hi`, `hl = a_hi * b_lo`, `hh = a_hi * b_hi`) and `a * b mod 2^32`.
#[derive(LogicBlock, Default)]
pub struct Mul32 {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
    pub low: Signal<Out, Bits<32>>,
}

impl Logic for Mul32 {
    #[hdl_gen]
    fn update(&mut self) {
        self.ll.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(0);
        self.lh.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(16);
        self.hl.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(0);
        self.hh.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(16);
        self.low.next = self.ll.val() + ((self.lh.val() + self.hl.val()) << 16);
    }
}

/// The INT8 accumulator lane: i32 words, wrapping arithmetic.
#[derive(LogicBlock, Default)]
pub struct AccLaneInt8 {
    pub op: Signal<In, AccOp>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub array: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    pub requantize: Signal<In, Bit>,
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
        // `y * imm` (Axpy), `x * imm` (Scale), `x * multiplier` (Requantize).
        self.mul.a.next = self.y.val();
        self.mul.b.next = self.imm.val();
        if self.op.val() == AccOp::Scale {
            self.mul.a.next = self.x.val();
        }
        if self.requantize.val() {
            self.mul.a.next = self.x.val();
            self.mul.b.next = self.multiplier.val();
        }
        self.ll.next = self.mul.ll.val();
        self.lh.next = self.mul.lh.val();
        self.hl.next = self.mul.hl.val();
        self.hh.next = self.mul.hh.val();
        self.x_le_zero.next = self.x.val().get_bit(31) || !self.x.val().any();
        self.y_le_zero.next = self.y.val().get_bit(31) || !self.y.val().any();
        self.addend.next = self.mul.low.val();
        if self.op.val() == AccOp::Accumulate {
            self.addend.next = self.array.val();
        }
        if self.op.val() == AccOp::BiasAdd || self.op.val() == AccOp::BiasRelu {
            self.addend.next = self.y.val();
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
            AccOp::Scale => self.result.next = self.mul.low.val(),
            AccOp::Axpy => self.result.next = self.sum.val(),
            AccOp::BiasRelu => {
                self.result.next = self.sum.val();
                if self.sum_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            _ => self.result.next = self.word.val(),
        }
    }
}

/// The BF16 accumulator lane: f32 words read DAZ, written with canonical NaN.
#[derive(LogicBlock, Default)]
pub struct AccLaneBf16 {
    pub op: Signal<In, AccOp>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub array: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    add: F32Add,
    mul: F32Mul,
    /// `x` as the datapath reads and writes it: DAZ, canonical NaN.
    x_clean: Signal<Local, Bits<32>>,
    x_le_zero: Signal<Local, Bit>,
    y_le_zero: Signal<Local, Bit>,
    sum_le_zero: Signal<Local, Bit>,
}

impl Logic for AccLaneBf16 {
    #[hdl_gen]
    fn update(&mut self) {
        self.mul.a.next = self.imm.val();
        self.mul.b.next = self.y.val();
        if self.op.val() == AccOp::Scale {
            self.mul.b.next = self.x.val();
        }
        self.add.a.next = self.x.val();
        self.add.b.next = self.mul.y.val();
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
        if self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any() {
            self.x_clean.next = 0x7FC0_0000.into();
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
            AccOp::Scale => self.result.next = self.mul.y.val(),
            AccOp::Word => self.result.next = self.word.val(),
            AccOp::BiasRelu => {
                self.result.next = self.add.y.val();
                if self.sum_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            _ => self.result.next = self.add.y.val(),
        }
    }
}

/// f32 accumulator word -> bf16: DAZ (a subnormal or -0 gives +0), canonical NaN, then round to
/// nearest even (core's `cast_to_bf16(BF16::acc_from_bits(x))`).
#[derive(LogicBlock, Default)]
pub struct CastLane {
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<16>>,
    rounded: Signal<Local, Bits<32>>,
}

impl Logic for CastLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.rounded.next = self.x.val() + 0x7FFF + self.x.val().get_bit(16);
        self.y.next = self.rounded.val().get_bits::<16>(16);
        if !self.x.val().get_bits::<8>(23).any() {
            self.y.next = 0.into();
        }
        if self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any() {
            self.y.next = 0x7FC0.into();
        }
    }
}

/// i32 accumulator word -> i8 (in the low byte of a 16-bit element), gemmlowp's requantization
/// exactly as core's `Requant::apply`:
/// `clamp(zero_point + rounding_shift_right(sat_rounding_doubling_high_mul(x, m), shift))`.
///
/// Only what the result depends on is computed, in the narrowest widths that hold it:
///
/// * The high multiply rounds `x * m / 2^31` half up for either sign: gemmlowp's nudge
///   (`2^30`, or `1 - 2^30` for a negative product) followed by a division truncating toward
///   zero equals `(p + 2^30) >> 31` (arithmetic) for every product `p`. Adding `2^30` leaves
///   bits 0..29 alone, so `high = (p[63:30] + 1) >> 1`.
/// * `p[63:30]` comes from four unsigned 16 x 16 products; the signed product differs from the
///   unsigned one only above bit 31 (`- m` when `x < 0`, `- x` when `m < 0`, mod `2^32`).
/// * The rounding shift (halves away from zero) is `(high + 2^(s-1) - [high < 0]) >> s`
///   (arithmetic) for `s >= 1`, in 33 bits, and `high` for `s = 0`.
/// * The zero point is added in 33 bits and the sum saturated to i8.
#[derive(LogicBlock, Default)]
pub struct RequantLane {
    pub x: Signal<In, Bits<32>>,
    /// Q0.31 multiplier, two's complement.
    pub multiplier: Signal<In, Bits<32>>,
    pub shift: Signal<In, Bits<5>>,
    pub zero_point: Signal<In, Bits<8>>,
    /// The 16 x 16 products of `x` and `multiplier` (the accumulator lane's [`Mul32`]).
    pub ll: Signal<In, Bits<32>>,
    pub lh: Signal<In, Bits<32>>,
    pub hl: Signal<In, Bits<32>>,
    pub hh: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<16>>,
    /// `(x_lo * m_hi + x_hi * m_lo) + (x_lo * m_lo >> 16)`: the unsigned product's bits 16..49
    /// without the high halves' product.
    upper: Signal<Local, Bits<34>>,
    /// Bits 32..63 of the unsigned product.
    raw_hi: Signal<Local, Bits<32>>,
    /// What the signed product lacks above bit 31: `m` if `x < 0`, plus `x` if `m < 0`.
    correction: Signal<Local, Bits<32>>,
    /// Bits 32..63 of the signed product.
    product_hi: Signal<Local, Bits<32>>,
    /// Bits 30..63 of the signed product, plus one.
    nudged: Signal<Local, Bits<34>>,
    high: Signal<Local, Bits<32>>,
    /// `2^(s-1) - [high < 0]` for `s >= 1`, else 0.
    half: Signal<Local, Bits<33>>,
    biased: Signal<Local, Bits<33>>,
    /// Ones above bit `32 - s`: the sign fill of an arithmetic shift right by `s`.
    fill: Signal<Local, Bits<33>>,
    shifted: Signal<Local, Bits<33>>,
    zp_wide: Signal<Local, Bits<33>>,
    sum: Signal<Local, Bits<33>>,
}

impl Logic for RequantLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.upper.next = bit_cast::<34, 32>(self.lh.val())
            + bit_cast::<34, 32>(self.hl.val())
            + bit_cast::<34, 16>(self.ll.val().get_bits::<16>(16));
        self.raw_hi.next = self.hh.val() + bit_cast::<32, 18>(self.upper.val().get_bits::<18>(16));
        self.correction.next = 0.into();
        if self.x.val().get_bit(31) && self.multiplier.val().get_bit(31) {
            self.correction.next = self.multiplier.val() + self.x.val();
        } else if self.x.val().get_bit(31) {
            self.correction.next = self.multiplier.val();
        } else if self.multiplier.val().get_bit(31) {
            self.correction.next = self.x.val();
        }
        self.product_hi.next = self.raw_hi.val() - self.correction.val();
        self.nudged.next = ((bit_cast::<34, 32>(self.product_hi.val()) << 2)
            | bit_cast::<34, 2>(self.upper.val().get_bits::<2>(14)))
            + 1;
        self.high.next = self.nudged.val().get_bits::<32>(1);
        if self.x.val() == 0x8000_0000u64 && self.multiplier.val() == 0x8000_0000u64 {
            self.high.next = 0x7FFF_FFFF.into();
        }
        // rounding_shift_right: halves away from zero.
        self.half.next = 0.into();
        if self.shift.val().any() {
            // 2^(s-1), less one for a negative value: a bit, or the s - 1 bits below it.
            self.half.next = bits::<33>(1) << (self.shift.val() - 1);
            if self.high.val().get_bit(31) {
                self.half.next = !(bits::<33>(0x1_FFFF_FFFFu64) << (self.shift.val() - 1));
            }
        }
        self.biased.next = bit_cast::<33, 32>(self.high.val()) + self.half.val();
        if self.high.val().get_bit(31) {
            self.biased.next =
                (bit_cast::<33, 32>(self.high.val()) | 0x1_0000_0000u64) + self.half.val();
        }
        self.fill.next = 0.into();
        if self.biased.val().get_bit(32) {
            self.fill.next = !(bits::<33>(0x1_FFFF_FFFFu64) >> self.shift.val());
        }
        self.shifted.next = (self.biased.val() >> self.shift.val()) | self.fill.val();
        // Add the zero point (both sign-extended to 33 bits), then saturate to i8.
        self.zp_wide.next = bit_cast::<33, 8>(self.zero_point.val());
        if self.zero_point.val().get_bit(7) {
            self.zp_wide.next = bit_cast::<33, 8>(self.zero_point.val()) | 0x1_FFFF_FF00u64;
        }
        self.sum.next = self.shifted.val() + self.zp_wide.val();
        self.y.next = bit_cast::<16, 8>(self.sum.val().get_bits::<8>(0));
        if self.sum.val().get_bit(32) {
            if !self.sum.val().get_bits::<25>(7).all() {
                self.y.next = 0x80.into();
            }
        } else if self.sum.val().get_bits::<25>(7).any() {
            self.y.next = 0x7F.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{f32_operand, settle, verilog_of, yosys_eval};
    use fixed_free::requant;
    use proptest::prelude::*;
    use systole_core::numerics::bf16::cast_to_bf16;
    use systole_core::{Arith, Int8, BF16};

    /// Core's requantization, from the raw multiplier bits.
    mod fixed_free {
        pub fn requant(x: u32, m: u32, shift: u8, zp: u8) -> u16 {
            use systole_core::numerics::int8::{
                rounding_shift_right, sat_rounding_doubling_high_mul,
            };
            let v = sat_rounding_doubling_high_mul(x as i32, m as i32);
            let v = rounding_shift_right(v, shift) as i64 + zp as i8 as i64;
            v.clamp(-128, 127) as i8 as u8 as u16
        }
    }

    const OPS: [AccOp; 9] = [
        AccOp::Overwrite,
        AccOp::Accumulate,
        AccOp::BiasAdd,
        AccOp::Relu,
        AccOp::ReluGrad,
        AccOp::Scale,
        AccOp::Axpy,
        AccOp::BiasRelu,
        AccOp::Word,
    ];

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
            AccOp::Word => return word,
        };
        A::acc_to_bits(v)
    }

    fn lane(dtype: Dtype, op: AccOp, x: u32, y: u32, array: u32, imm: u32, word: u32) -> u32 {
        let mut uut = AccLane::new(dtype);
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

    /// The array's output words are datapath values: never subnormal, NaN canonical.
    fn array_word(w: u32) -> u32 {
        BF16::acc_to_bits(BF16::acc_from_bits(w))
    }

    fn int_word() -> impl Strategy<Value = u32> {
        prop_oneof![
            any::<u32>(),
            prop::sample::select(vec![0u32, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF])
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn int8_lane_matches_core(
            op in prop::sample::select(OPS.to_vec()),
            x in int_word(), y in int_word(), a in int_word(), imm in int_word(), w in int_word()
        ) {
            prop_assert_eq!(
                lane(Dtype::Int8, op, x, y, a, imm, w),
                core_lane::<Int8>(op, x, y, a, imm, w)
            );
        }

        #[test]
        fn bf16_lane_matches_core(
            op in prop::sample::select(OPS.to_vec()),
            x in f32_operand(), y in f32_operand(), a in f32_operand(), imm in f32_operand(),
            w in any::<u32>()
        ) {
            let a = array_word(a);
            prop_assert_eq!(
                lane(Dtype::Bf16, op, x, y, a, imm, w),
                core_lane::<BF16>(op, x, y, a, imm, w),
                "{:?} x {:#010x} y {:#010x} array {:#010x} imm {:#010x}", op, x, y, a, imm
            );
        }

        #[test]
        fn cast_matches_core(x in f32_operand()) {
            let mut uut = CastLane::default();
            uut.x.next = (x as u64).into();
            settle(&mut uut);
            let want = cast_to_bf16(BF16::acc_from_bits(x)).0;
            prop_assert_eq!(uut.y.val().index() as u16, want, "{:#010x}", x);
        }

        #[test]
        fn requant_matches_core(
            x in int_word(), m in int_word(), shift in 0u8..32, zp in any::<u8>()
        ) {
            prop_assert_eq!(requant_lane(x, m, shift, zp), requant(x, m, shift, zp));
        }
    }

    /// The requantize lane with the INT8 accumulator lane that lends it its multiplier, as the
    /// top wires them; the accumulator lane's own op (Axpy, whose operands differ) must yield.
    #[derive(LogicBlock)]
    struct RequantPath {
        x: Signal<In, Bits<32>>,
        multiplier: Signal<In, Bits<32>>,
        shift: Signal<In, Bits<5>>,
        zero_point: Signal<In, Bits<8>>,
        y: Signal<Out, Bits<16>>,
        lane: AccLane,
        requant: RequantLane,
    }

    impl Default for RequantPath {
        fn default() -> Self {
            RequantPath {
                x: Default::default(),
                multiplier: Default::default(),
                shift: Default::default(),
                zero_point: Default::default(),
                y: Default::default(),
                lane: AccLane::new(Dtype::Int8),
                requant: Default::default(),
            }
        }
    }

    impl Logic for RequantPath {
        #[hdl_gen]
        fn update(&mut self) {
            self.lane.op.next = AccOp::Axpy;
            self.lane.x.next = self.x.val();
            self.lane.y.next = !self.x.val();
            self.lane.array.next = 0.into();
            self.lane.imm.next = self.multiplier.val() ^ 1;
            self.lane.word.next = 0.into();
            self.lane.requantize.next = true;
            self.lane.multiplier.next = self.multiplier.val();
            self.requant.x.next = self.x.val();
            self.requant.multiplier.next = self.multiplier.val();
            self.requant.shift.next = self.shift.val();
            self.requant.zero_point.next = self.zero_point.val();
            self.requant.ll.next = self.lane.ll.val();
            self.requant.lh.next = self.lane.lh.val();
            self.requant.hl.next = self.lane.hl.val();
            self.requant.hh.next = self.lane.hh.val();
            self.y.next = self.requant.y.val();
        }
    }

    fn requant_lane(x: u32, m: u32, shift: u8, zp: u8) -> u16 {
        let mut uut = RequantPath::default();
        uut.x.next = (x as u64).into();
        uut.multiplier.next = (m as u64).into();
        uut.shift.next = (shift as u64).into();
        uut.zero_point.next = (zp as u64).into();
        settle(&mut uut);
        uut.y.val().index() as u16
    }

    #[test]
    fn requant_edge_cases() {
        let half = 1u32 << 30;
        for (x, m, shift, zp) in [
            (5u32, half, 0u8, 0u8),
            ((-5i32) as u32, half, 0, 0),
            ((-10i32) as u32, half, 1, 0),
            (1000, half, 0, 0),
            ((-1000i32) as u32, half, 0, 0),
            (4, half, 0, (-10i8) as u8),
            (0x8000_0000, 0x8000_0000, 0, 0),
            (0x8000_0000, 0x8000_0000, 31, 0x7F),
            (0x8000_0000, 0x7FFF_FFFF, 31, 0x80),
            (0x7FFF_FFFF, 0x7FFF_FFFF, 24, 0),
            (0xFFFF_FFFF, 0x8000_0000, 0, 0),
        ] {
            assert_eq!(requant_lane(x, m, shift, zp), requant(x, m, shift, zp), "{x:#x} {m:#x}");
        }
    }

    /// The emitted Verilog of the lanes, evaluated by Yosys, against core.
    #[test]
    fn verilog_matches_core() {
        let mut seed = 0x5EED_u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 32) as u32
        };
        let mut cases = vec![];
        for i in 0..64 {
            let (x, y, a, imm) = (next(), next(), next(), next());
            cases.push((OPS[i % OPS.len()], x, y, a, imm, (i as u32 * 7) % 32));
        }
        // NaN with a payload, subnormals, -0, infinities, i32::MIN.
        let specials = [0x7F80_0001u32, 0x8000_0001, 0x8000_0000, 0xFF80_0000, 0x0000_0000];
        for (i, &x) in specials.iter().enumerate() {
            for (j, op) in OPS.iter().enumerate() {
                let y = specials[(i + j) % specials.len()];
                cases.push((*op, x, y, 0x7F80_0000, 0x3F80_0001, 31));
            }
        }
        let inputs: Vec<Vec<(&str, u64)>> = cases
            .iter()
            .map(|&(op, x, y, a, imm, _)| {
                vec![
                    ("op", op as u64),
                    ("x", x as u64),
                    ("y", y as u64),
                    ("array", array_word(a) as u64),
                    ("imm", imm as u64),
                    ("word", (x ^ y) as u64),
                    ("requantize", 0),
                    ("multiplier", (imm ^ 0x5A5A) as u64),
                ]
            })
            .collect();
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let got = yosys_eval(&verilog_of(AccLane::new(dtype)), &inputs, "result");
            for (&(op, x, y, a, imm, _), &g) in cases.iter().zip(&got) {
                let a = array_word(a);
                let want = match dtype {
                    Dtype::Int8 => core_lane::<Int8>(op, x, y, a, imm, x ^ y),
                    Dtype::Bf16 => core_lane::<BF16>(op, x, y, a, imm, x ^ y),
                };
                assert_eq!(g as u32, want, "{dtype:?} {op:?} {x:#x} {y:#x} {a:#x} {imm:#x}");
            }
        }
        let requants: Vec<Vec<(&str, u64)>> = cases
            .iter()
            .map(|&(_, x, m, _, zp, shift)| {
                vec![
                    ("x", x as u64),
                    ("multiplier", m as u64),
                    ("shift", shift as u64),
                    ("zero_point", (zp & 0xFF) as u64),
                ]
            })
            .collect();
        let got = yosys_eval(&verilog_of(RequantPath::default()), &requants, "y");
        for (&(_, x, m, _, zp, shift), &g) in cases.iter().zip(&got) {
            assert_eq!(g as u16, requant(x, m, shift as u8, zp as u8), "{x:#x} {m:#x} {shift}");
        }
        let casts: Vec<Vec<(&str, u64)>> =
            cases.iter().map(|&(_, x, ..)| vec![("x", x as u64)]).collect();
        let got = yosys_eval(&verilog_of(CastLane::default()), &casts, "y");
        for (&(_, x, ..), &g) in cases.iter().zip(&got) {
            assert_eq!(g as u16, cast_to_bf16(BF16::acc_from_bits(x)).0, "{x:#010x}");
        }
    }

    #[test]
    fn verilog_is_valid() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            yosys_validate("acc_lane", &verilog_of(AccLane::new(dtype))).unwrap();
        }
        yosys_validate("cast_lane", &verilog_of(CastLane::default())).unwrap();
        yosys_validate("requant_lane", &verilog_of(RequantLane::default())).unwrap();
    }
}
