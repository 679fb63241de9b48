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
    pub result: Signal<Out, Bits<32>>,
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
            result: Default::default(),
            int8: if dtype == Dtype::Int8 { vec![AccLaneInt8::default()] } else { vec![] },
            bf16: if dtype == Dtype::Bf16 { vec![AccLaneBf16::default()] } else { vec![] },
        }
    }
}

impl Logic for AccLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.result.next = 0.into();
        for k in 0..self.int8.len() {
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

/// `a * b mod 2^32` from three 16 x 16 products (the high halves' product only shifts out).
#[derive(LogicBlock, Default)]
pub struct MulLow32 {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    middle: Signal<Local, Bits<32>>,
}

impl Logic for MulLow32 {
    #[hdl_gen]
    fn update(&mut self) {
        self.middle.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(16)
            + self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(0);
        self.y.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(0)
            + (self.middle.val() << 16);
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
    pub result: Signal<Out, Bits<32>>,
    mul: MulLow32,
    x_le_zero: Signal<Local, Bit>,
    y_le_zero: Signal<Local, Bit>,
}

impl Logic for AccLaneInt8 {
    #[hdl_gen]
    fn update(&mut self) {
        self.mul.a.next = self.imm.val();
        self.mul.b.next = self.y.val();
        if self.op.val() == AccOp::Scale {
            self.mul.b.next = self.x.val();
        }
        self.x_le_zero.next = self.x.val().get_bit(31) || !self.x.val().any();
        self.y_le_zero.next = self.y.val().get_bit(31) || !self.y.val().any();
        match self.op.val() {
            AccOp::Overwrite => self.result.next = self.array.val(),
            AccOp::Accumulate => self.result.next = self.x.val() + self.array.val(),
            AccOp::BiasAdd => self.result.next = self.x.val() + self.y.val(),
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
            AccOp::Scale => self.result.next = self.mul.y.val(),
            AccOp::Axpy => self.result.next = self.x.val() + self.mul.y.val(),
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
        if self.op.val() == AccOp::BiasAdd {
            self.add.b.next = self.y.val();
        }
        if self.op.val() == AccOp::Accumulate {
            self.add.b.next = self.array.val();
        }
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
#[derive(LogicBlock, Default)]
pub struct RequantLane {
    pub x: Signal<In, Bits<32>>,
    /// Q0.31 multiplier, two's complement.
    pub multiplier: Signal<In, Bits<32>>,
    pub shift: Signal<In, Bits<5>>,
    pub zero_point: Signal<In, Bits<8>>,
    pub y: Signal<Out, Bits<16>>,
    /// The 64-bit product of the operands read raw_product, from four 16 x 16 products.
    raw_product: Signal<Local, Bits<64>>,
    /// The signed product: the raw_product one minus `b << 32` if `a < 0` and `a << 32` if `b < 0`.
    product: Signal<Local, Bits<64>>,
    nudged: Signal<Local, Bits<64>>,
    /// `nudged`, biased so that an arithmetic shift truncates toward zero.
    toward_zero: Signal<Local, Bits<64>>,
    high: Signal<Local, Bits<32>>,
    mask: Signal<Local, Bits<32>>,
    threshold: Signal<Local, Bits<32>>,
    shifted: Signal<Local, Bits<32>>,
    rounded: Signal<Local, Bits<32>>,
    wide: Signal<Local, Bits<40>>,
    zp_wide: Signal<Local, Bits<40>>,
    sum: Signal<Local, Bits<40>>,
}

impl Logic for RequantLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.raw_product.next = bit_cast::<64, 32>(
            self.x.val().get_bits::<16>(0) * self.multiplier.val().get_bits::<16>(0),
        ) + (bit_cast::<64, 32>(
            self.x.val().get_bits::<16>(0) * self.multiplier.val().get_bits::<16>(16),
        ) << 16)
            + (bit_cast::<64, 32>(
                self.x.val().get_bits::<16>(16) * self.multiplier.val().get_bits::<16>(0),
            ) << 16)
            + (bit_cast::<64, 32>(
                self.x.val().get_bits::<16>(16) * self.multiplier.val().get_bits::<16>(16),
            ) << 32);
        self.product.next = self.raw_product.val();
        if self.x.val().get_bit(31) && self.multiplier.val().get_bit(31) {
            self.product.next = self.raw_product.val()
                - (bit_cast::<64, 32>(self.multiplier.val()) << 32)
                - (bit_cast::<64, 32>(self.x.val()) << 32);
        } else if self.x.val().get_bit(31) {
            self.product.next =
                self.raw_product.val() - (bit_cast::<64, 32>(self.multiplier.val()) << 32);
        } else if self.multiplier.val().get_bit(31) {
            self.product.next = self.raw_product.val() - (bit_cast::<64, 32>(self.x.val()) << 32);
        }
        // Round half up: + 2^30 for a non-negative product, + (1 - 2^30) for a negative one.
        self.nudged.next = self.product.val() + 0x4000_0000u64;
        if self.product.val().get_bit(63) {
            self.nudged.next = self.product.val() + 0xFFFF_FFFF_C000_0001u64;
        }
        // Divide by 2^31 truncating toward zero: a negative dividend is biased by 2^31 - 1
        // first, so that the arithmetic shift (bits 62..31) rounds it up.
        self.toward_zero.next = self.nudged.val();
        if self.nudged.val().get_bit(63) {
            self.toward_zero.next = self.nudged.val() + 0x7FFF_FFFFu64;
        }
        self.high.next = self.toward_zero.val().get_bits::<32>(31);
        if self.x.val() == 0x8000_0000u64 && self.multiplier.val() == 0x8000_0000u64 {
            self.high.next = 0x7FFF_FFFF.into();
        }
        // rounding_shift_right: halves away from zero.
        self.mask.next = !(bits::<32>(0xFFFF_FFFFu64) << self.shift.val());
        self.threshold.next = (self.mask.val() >> 1) + self.high.val().get_bit(31);
        self.shifted.next = self.high.val() >> self.shift.val();
        if self.high.val().get_bit(31) {
            self.shifted.next = (self.high.val() >> self.shift.val())
                | !(bits::<32>(0xFFFF_FFFFu64) >> self.shift.val());
        }
        self.rounded.next =
            self.shifted.val() + ((self.high.val() & self.mask.val()) > self.threshold.val());
        // Add the zero point in 40 bits (both sign-extended by hand), then saturate to i8.
        self.wide.next = bit_cast::<40, 32>(self.rounded.val());
        if self.rounded.val().get_bit(31) {
            self.wide.next = bit_cast::<40, 32>(self.rounded.val()) | 0xFF_0000_0000u64;
        }
        self.zp_wide.next = bit_cast::<40, 8>(self.zero_point.val());
        if self.zero_point.val().get_bit(7) {
            self.zp_wide.next = bit_cast::<40, 8>(self.zero_point.val()) | 0xFF_FFFF_FF00u64;
        }
        self.sum.next = self.wide.val() + self.zp_wide.val();
        self.y.next = bit_cast::<16, 8>(self.sum.val().get_bits::<8>(0));
        if self.sum.val().get_bit(39) {
            if self.sum.val() < 0xFF_FFFF_FF80u64 {
                self.y.next = 0x80.into();
            }
        } else if self.sum.val() > 0x7Fu64 {
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

    const OPS: [AccOp; 8] = [
        AccOp::Overwrite,
        AccOp::Accumulate,
        AccOp::BiasAdd,
        AccOp::Relu,
        AccOp::ReluGrad,
        AccOp::Scale,
        AccOp::Axpy,
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

    fn requant_lane(x: u32, m: u32, shift: u8, zp: u8) -> u16 {
        let mut uut = RequantLane::default();
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
        let got = yosys_eval(&verilog_of(RequantLane::default()), &requants, "y");
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
