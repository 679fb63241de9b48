//! The BF16 and f32 multipliers.

use rust_hdl::prelude::*;

/// `y = a * b` for two bf16 operands: the product is exact in f32 (8 x 8 significand bits), so
/// only DAZ, FTZ, overflow to Inf and the special values need handling.
#[derive(LogicBlock, Default)]
pub struct Bf16Mul {
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub y: Signal<Out, Bits<32>>,
    ea: Signal<Local, Bits<8>>,
    eb: Signal<Local, Bits<8>>,
    prod: Signal<Local, Bits<32>>,
    e_tmp: Signal<Local, Bits<10>>,
    frac: Signal<Local, Bits<23>>,
    sign: Signal<Local, Bits<32>>,
}

impl Logic for Bf16Mul {
    #[hdl_gen]
    fn update(&mut self) {
        self.ea.next = self.a.val().get_bits::<8>(7);
        self.eb.next = self.b.val().get_bits::<8>(7);
        self.sign.next =
            bit_cast::<32, 1>(self.a.val().get_bits::<1>(15) ^ self.b.val().get_bits::<1>(15))
                << 31;
        self.prod.next =
            bit_cast::<16, 8>(bits::<8>(0x80) | bit_cast::<8, 7>(self.a.val().get_bits::<7>(0)))
                * bit_cast::<16, 8>(
                    bits::<8>(0x80) | bit_cast::<8, 7>(self.b.val().get_bits::<7>(0)),
                );
        // Biased exponent plus 127, one more when the significand product is 2 or more.
        self.e_tmp.next = bit_cast::<10, 8>(self.ea.val())
            + bit_cast::<10, 8>(self.eb.val())
            + self.prod.val().get_bit(15);
        self.frac.next = bit_cast::<23, 14>(self.prod.val().get_bits::<14>(0)) << 9;
        if self.prod.val().get_bit(15) {
            self.frac.next = bit_cast::<23, 15>(self.prod.val().get_bits::<15>(0)) << 8;
        }
        if self.e_tmp.val() <= 127 {
            self.y.next = 0.into();
        } else if self.e_tmp.val() >= 255 + 127 {
            self.y.next = self.sign.val() | 0x7F80_0000;
        } else {
            self.y.next = self.sign.val()
                | (bit_cast::<32, 10>(self.e_tmp.val() - 127) << 23)
                | bit_cast::<32, 23>(self.frac.val());
        }
        // Zeros (DAZ: any zero exponent), infinities, NaN.
        if !self.ea.val().any() || !self.eb.val().any() {
            self.y.next = 0.into();
        }
        if self.ea.val().all() || self.eb.val().all() {
            if (self.ea.val().all() && self.a.val().get_bits::<7>(0).any())
                || (self.eb.val().all() && self.b.val().get_bits::<7>(0).any())
                || !self.ea.val().any()
                || !self.eb.val().any()
            {
                self.y.next = 0x7FC0_0000.into();
            } else {
                self.y.next = self.sign.val() | 0x7F80_0000;
            }
        }
    }
}

/// `y = a * b` in f32 (the vector unit's `scale` and `axpy`): DAZ operands, 24 x 24 significand
/// product from four 16 x 16 multiplies, round to nearest even, FTZ, canonical NaN: an
/// [`F32MulProduct`] into an [`F32MulRound`], in one cycle. A lane built with
/// `ArrayConfig::scale_cycles = 3` registers what the first half hands the second (61 bits)
/// instead.
///
/// FTZ follows IEEE rounding into the subnormal range first, as core does (`ftz(a * b)`): a
/// product just below 2^-126 whose 24-bit significand is all ones rounds (at the subnormal
/// precision, 2^-149) up to 2^-126 and survives the flush.
#[derive(LogicBlock, Default)]
pub struct F32Mul {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    product: F32MulProduct,
    round: F32MulRound,
}

impl Logic for F32Mul {
    #[hdl_gen]
    fn update(&mut self) {
        self.product.a.next = self.a.val();
        self.product.b.next = self.b.val();
        self.round.prod.next = self.product.prod.val();
        self.round.e_sum.next = self.product.e_sum.val();
        self.round.flags.next = self.product.flags.val();
        self.y.next = self.round.y.val();
    }
}

/// The first half of [`F32Mul`]: the significands' exact product and the exponents' sum, and
/// what the special operands (DAZ zeros, infinities, NaNs) make of the result.
#[derive(LogicBlock, Default)]
pub struct F32MulProduct {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    /// The 24 x 24 significand product, in [2^46, 2^48).
    pub prod: Signal<Out, Bits<48>>,
    /// The biased exponents' sum (127 more than the product's biased exponent before its
    /// normalisation).
    pub e_sum: Signal<Out, Bits<10>>,
    /// The product's sign (bit 2), and in bits 1..0 what the special operands make of it: 0
    /// the rounded product, 1 zero (DAZ), 2 infinity, 3 NaN.
    pub flags: Signal<Out, Bits<3>>,
    ea: Signal<Local, Bits<8>>,
    eb: Signal<Local, Bits<8>>,
    ma: Signal<Local, Bits<24>>,
    mb: Signal<Local, Bits<24>>,
    special: Signal<Local, Bits<3>>,
}

impl Logic for F32MulProduct {
    #[hdl_gen]
    fn update(&mut self) {
        self.ea.next = self.a.val().get_bits::<8>(23);
        self.eb.next = self.b.val().get_bits::<8>(23);
        self.ma.next = bit_cast::<24, 23>(self.a.val().get_bits::<23>(0)) | 0x80_0000;
        self.mb.next = bit_cast::<24, 23>(self.b.val().get_bits::<23>(0)) | 0x80_0000;
        // (ah 2^16 + al)(bh 2^16 + bl) with 8-bit high and 16-bit low halves.
        self.prod.next = (bit_cast::<48, 32>(
            bit_cast::<16, 8>(self.ma.val().get_bits::<8>(16))
                * bit_cast::<16, 8>(self.mb.val().get_bits::<8>(16)),
        ) << 32)
            + (bit_cast::<48, 32>(
                bit_cast::<16, 8>(self.ma.val().get_bits::<8>(16))
                    * self.mb.val().get_bits::<16>(0),
            ) << 16)
            + (bit_cast::<48, 32>(
                self.ma.val().get_bits::<16>(0)
                    * bit_cast::<16, 8>(self.mb.val().get_bits::<8>(16)),
            ) << 16)
            + bit_cast::<48, 32>(self.ma.val().get_bits::<16>(0) * self.mb.val().get_bits::<16>(0));
        self.e_sum.next = bit_cast::<10, 8>(self.ea.val()) + bit_cast::<10, 8>(self.eb.val());
        self.special.next = 0.into();
        if !self.ea.val().any() || !self.eb.val().any() {
            self.special.next = 1.into();
        }
        if self.ea.val().all() || self.eb.val().all() {
            if (self.ea.val().all() && self.a.val().get_bits::<23>(0).any())
                || (self.eb.val().all() && self.b.val().get_bits::<23>(0).any())
                || !self.ea.val().any()
                || !self.eb.val().any()
            {
                self.special.next = 3.into();
            } else {
                self.special.next = 2.into();
            }
        }
        self.flags.next =
            (bit_cast::<3, 1>(self.a.val().get_bits::<1>(31) ^ self.b.val().get_bits::<1>(31))
                << 2)
                | self.special.val();
    }
}

/// The second half of [`F32Mul`]: the product normalised and rounded to nearest even, its
/// exponent formed, flushed to zero below 2^-126, and the special operands' results.
#[derive(LogicBlock, Default)]
pub struct F32MulRound {
    pub prod: Signal<In, Bits<48>>,
    pub e_sum: Signal<In, Bits<10>>,
    pub flags: Signal<In, Bits<3>>,
    pub y: Signal<Out, Bits<32>>,
    sign: Signal<Local, Bits<32>>,
    m24: Signal<Local, Bits<24>>,
    round_up: Signal<Local, Bit>,
    mant: Signal<Local, Bits<25>>,
    e_pre: Signal<Local, Bits<10>>,
    e_tmp: Signal<Local, Bits<10>>,
}

impl Logic for F32MulRound {
    #[hdl_gen]
    fn update(&mut self) {
        self.sign.next = bit_cast::<32, 1>(self.flags.val().get_bits::<1>(2)) << 31;
        // The product is in [2^46, 2^48): its top 24 bits, then guard and sticky below.
        self.e_pre.next = self.e_sum.val() + self.prod.val().get_bit(47);
        if self.prod.val().get_bit(47) {
            self.m24.next = self.prod.val().get_bits::<24>(24);
            self.round_up.next = self.prod.val().get_bit(23)
                && (self.prod.val().get_bits::<23>(0).any() || self.prod.val().get_bit(24));
        } else {
            self.m24.next = self.prod.val().get_bits::<24>(23);
            self.round_up.next = self.prod.val().get_bit(22)
                && (self.prod.val().get_bits::<22>(0).any() || self.prod.val().get_bit(23));
        }
        self.mant.next = bit_cast::<25, 24>(self.m24.val()) + self.round_up.val();
        self.e_tmp.next = self.e_pre.val() + self.mant.val().get_bit(24);
        if self.e_tmp.val() <= 127 {
            self.y.next = 0.into();
            if self.e_pre.val() == 127 && self.m24.val().all() {
                // Rounds up to the smallest normal at subnormal precision (see above).
                self.y.next = self.sign.val() | 0x0080_0000;
            }
        } else if self.e_tmp.val() >= 255 + 127 {
            self.y.next = self.sign.val() | 0x7F80_0000;
        } else {
            self.y.next = self.sign.val()
                | (bit_cast::<32, 10>(self.e_tmp.val() - 127) << 23)
                | bit_cast::<32, 23>(self.mant.val().get_bits::<23>(0));
        }
        if self.flags.val().get_bits::<2>(0) == 1 {
            self.y.next = 0.into();
        }
        if self.flags.val().get_bits::<2>(0) == 2 {
            self.y.next = self.sign.val() | 0x7F80_0000;
        }
        if self.flags.val().get_bits::<2>(0) == 3 {
            self.y.next = 0x7FC0_0000.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{f32_operand, settle};
    use proptest::prelude::*;
    use systole_core::numerics::bf16::{f32_to_mem, ftz, mul_f32};
    use systole_core::{Arith, Bf16, BF16};

    #[test]
    fn bf16_mul_and_f32_mul_known_cases() {
        let mut m = Bf16Mul::default();
        let mut f = F32Mul::default();
        for (a, b) in [(0x3F80u16, 0xC000u16), (0x7F80, 0x0000), (0x0080, 0x0080), (0x7F00, 0x7F00)]
        {
            m.a.next = (a as u64).into();
            m.b.next = (b as u64).into();
            settle(&mut m);
            let want = BF16::acc_to_bits(BF16::mul(Bf16(a).to_f32_daz(), Bf16(b).to_f32_daz()));
            assert_eq!(m.y.val().to_u32(), want, "{a:#06x} * {b:#06x}");
            let (a32, b32) = ((a as u32) << 16 | 0x1234, (b as u32) << 16 | 0x8000);
            f.a.next = (a32 as u64).into();
            f.b.next = (b32 as u64).into();
            settle(&mut f);
            let want = f32_to_mem(mul_f32(ftz(f32::from_bits(a32)), ftz(f32::from_bits(b32))));
            assert_eq!(f.y.val().to_u32(), want, "{a32:#010x} * {b32:#010x}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn f32_mul_matches_core(a in f32_operand(), b in f32_operand()) {
            let mut f = F32Mul::default();
            f.a.next = (a as u64).into();
            f.b.next = (b as u64).into();
            settle(&mut f);
            let want = f32_to_mem(mul_f32(ftz(f32::from_bits(a)), ftz(f32::from_bits(b))));
            prop_assert_eq!(f.y.val().to_u32(), want, "{:#010x} * {:#010x}", a, b);
        }
    }
}
