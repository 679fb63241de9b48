//! Floating point from `Bits` (rust-hdl has no float type): the BF16 multiplier, the f32 adder
//! and the f32 multiplier of the BF16 datapath, each one combinational block.
//!
//! All three follow core's datapath rules (docs/NUMERICS.md): operands with a zero exponent field
//! (subnormals, zeros of either sign) are read as `+0` (DAZ), results below 2^-126 are written as
//! `+0` (FTZ), sums and products round to nearest even, and every NaN result is the canonical
//! `0x7FC0_0000`. Inside core a NaN keeps its payload until it leaves the datapath, where it is
//! canonicalised; no result of core depends on a payload, so producing the canonical NaN at every
//! step gives the same bits everywhere a NaN can be seen.

use rust_hdl::prelude::*;

/// The canonical quiet NaN every NaN result is written as.
pub const CANONICAL_NAN: u64 = 0x7FC0_0000;

/// `y = a + b` in f32, round to nearest even, DAZ operands, FTZ result, canonical NaN.
///
/// The smaller operand is aligned to the larger one in a 56-bit field (the larger's hidden bit at
/// bit 54, one carry bit above): for alignments up to 31 the sum is exact there; beyond that the
/// smaller one is below 2^-8 ulp and only its stickiness counts, kept as bit 0. The sum is
/// normalised with a leading-one search and rounded on the guard bit and the sticky bits.
///
/// Every local is assigned in one place (a default, then overrides) and never read in its own
/// assignment, so the Rust simulation and the Verilog `always @(*)` agree.
#[derive(LogicBlock, Default)]
pub struct F32Add {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    a_d: Signal<Local, Bits<32>>,
    b_d: Signal<Local, Bits<32>>,
    x: Signal<Local, Bits<32>>,
    z: Signal<Local, Bits<32>>,
    ex: Signal<Local, Bits<8>>,
    ez: Signal<Local, Bits<8>>,
    d: Signal<Local, Bits<8>>,
    mx: Signal<Local, Bits<56>>,
    mz0: Signal<Local, Bits<56>>,
    mz: Signal<Local, Bits<56>>,
    s: Signal<Local, Bits<56>>,
    p: Signal<Local, Bits<6>>,
    norm: Signal<Local, Bits<56>>,
    mant: Signal<Local, Bits<25>>,
    e_tmp: Signal<Local, Bits<10>>,
}

impl Logic for F32Add {
    #[hdl_gen]
    fn update(&mut self) {
        // Denormals (and -0) are zero.
        self.a_d.next = self.a.val();
        if !self.a.val().get_bits::<8>(23).any() {
            self.a_d.next = 0.into();
        }
        self.b_d.next = self.b.val();
        if !self.b.val().get_bits::<8>(23).any() {
            self.b_d.next = 0.into();
        }
        // x: the operand of larger magnitude.
        self.x.next = self.a_d.val();
        self.z.next = self.b_d.val();
        if self.a_d.val().get_bits::<31>(0) < self.b_d.val().get_bits::<31>(0) {
            self.x.next = self.b_d.val();
            self.z.next = self.a_d.val();
        }
        self.ex.next = self.x.val().get_bits::<8>(23);
        self.ez.next = self.z.val().get_bits::<8>(23);
        self.d.next = self.ex.val() - self.ez.val();
        // Significands with their hidden bits (none for zero), the larger at bits 54..31.
        self.mx.next = (bit_cast::<56, 23>(self.x.val().get_bits::<23>(0)) << 31)
            | (bit_cast::<56, 1>(self.ex.val().any().into()) << 54);
        self.mz0.next = (bit_cast::<56, 23>(self.z.val().get_bits::<23>(0)) << 31)
            | (bit_cast::<56, 1>(self.ez.val().any().into()) << 54);
        self.mz.next = bit_cast::<56, 1>(self.mz0.val().any().into());
        if self.d.val() < 32 {
            self.mz.next = self.mz0.val() >> self.d.val();
        }
        if self.x.val().get_bit(31) == self.z.val().get_bit(31) {
            self.s.next = self.mx.val() + self.mz.val();
        } else {
            self.s.next = self.mx.val() - self.mz.val();
        }
        // Leading one: the last assignment (the highest set bit) wins.
        self.p.next = 0.into();
        for i in 0..56 {
            if self.s.val().get_bit(i) {
                self.p.next = i.to_bits();
            }
        }
        self.norm.next = self.s.val() << (bits::<6>(55) - self.p.val());
        // Round to nearest even on the guard bit (31) and the sticky bits (30..0).
        self.mant.next = bit_cast::<25, 24>(self.norm.val().get_bits::<24>(32))
            + (self.norm.val().get_bit(31)
                && (self.norm.val().get_bits::<31>(0).any() || self.norm.val().get_bit(32)));
        // Biased exponent plus 54: the leading one at bit p means 2^(ex - 127 + p - 54); a
        // rounding carry (significand 2.0) adds one and leaves the fraction zero.
        self.e_tmp.next = bit_cast::<10, 8>(self.ex.val())
            + bit_cast::<10, 6>(self.p.val())
            + self.mant.val().get_bit(24);
        if !self.s.val().any() || self.e_tmp.val() <= 54 {
            // Exact cancellation gives +0 (round to nearest); anything below 2^-126 is flushed.
            self.y.next = 0.into();
        } else if self.e_tmp.val() >= 255 + 54 {
            self.y.next = (bit_cast::<32, 1>(self.x.val().get_bits::<1>(31)) << 31) | 0x7F80_0000;
        } else {
            self.y.next = (bit_cast::<32, 1>(self.x.val().get_bits::<1>(31)) << 31)
                | (bit_cast::<32, 10>(self.e_tmp.val() - 54) << 23)
                | bit_cast::<32, 23>(self.mant.val().get_bits::<23>(0));
        }
        // Infinities and NaN.
        if self.ex.val() == 255 {
            if self.x.val().get_bits::<23>(0).any() {
                self.y.next = 0x7FC0_0000.into();
            } else if self.ez.val() == 255 {
                if self.z.val().get_bits::<23>(0).any()
                    || self.x.val().get_bit(31) != self.z.val().get_bit(31)
                {
                    self.y.next = 0x7FC0_0000.into();
                } else {
                    self.y.next = self.x.val();
                }
            } else {
                self.y.next = self.x.val();
            }
        }
    }
}

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
/// product from four 16 x 16 multiplies, round to nearest even, FTZ, canonical NaN.
///
/// FTZ follows IEEE rounding into the subnormal range first, as core does (`ftz(a * b)`): a
/// product just below 2^-126 whose 24-bit significand is all ones rounds (at the subnormal
/// precision, 2^-149) up to 2^-126 and survives the flush.
#[derive(LogicBlock, Default)]
pub struct F32Mul {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    ea: Signal<Local, Bits<8>>,
    eb: Signal<Local, Bits<8>>,
    sign: Signal<Local, Bits<32>>,
    ma: Signal<Local, Bits<24>>,
    mb: Signal<Local, Bits<24>>,
    prod: Signal<Local, Bits<48>>,
    m24: Signal<Local, Bits<24>>,
    round_up: Signal<Local, Bit>,
    mant: Signal<Local, Bits<25>>,
    e_pre: Signal<Local, Bits<10>>,
    e_tmp: Signal<Local, Bits<10>>,
}

impl Logic for F32Mul {
    #[hdl_gen]
    fn update(&mut self) {
        self.ea.next = self.a.val().get_bits::<8>(23);
        self.eb.next = self.b.val().get_bits::<8>(23);
        self.sign.next =
            bit_cast::<32, 1>(self.a.val().get_bits::<1>(31) ^ self.b.val().get_bits::<1>(31))
                << 31;
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
        // The product is in [2^46, 2^48): its top 24 bits, then guard and sticky below.
        self.e_pre.next = bit_cast::<10, 8>(self.ea.val())
            + bit_cast::<10, 8>(self.eb.val())
            + self.prod.val().get_bit(47);
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
        if !self.ea.val().any() || !self.eb.val().any() {
            self.y.next = 0.into();
        }
        if self.ea.val().all() || self.eb.val().all() {
            if (self.ea.val().all() && self.a.val().get_bits::<23>(0).any())
                || (self.eb.val().all() && self.b.val().get_bits::<23>(0).any())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{f32_operand, settle};
    use proptest::prelude::*;
    use systole_core::numerics::bf16::{add_f32, f32_to_mem, ftz, mul_f32};
    use systole_core::{Arith, Bf16, BF16};

    fn add(a: u32, b: u32) -> u32 {
        let mut uut = F32Add::default();
        uut.a.next = (a as u64).into();
        uut.b.next = (b as u64).into();
        settle(&mut uut);
        uut.y.val().to_u32()
    }

    fn expected_add(a: u32, b: u32) -> u32 {
        f32_to_mem(add_f32(ftz(f32::from_bits(a)), ftz(f32::from_bits(b))))
    }

    #[test]
    fn f32_add_known_cases() {
        let cases = [
            (0x3F80_0000, 0x3F80_0000),
            (0x3F80_0000, 0xBF80_0000),
            (0x3F80_0000, 0x3380_0000), // 1 + 2^-24: a tie, stays 1
            (0x3F80_0001, 0x3380_0000), // odd: rounds up
            (0x3F80_0000, 0xB380_0001), // 1 - just over half an ulp below
            (0x7F7F_FFFF, 0x7F7F_FFFF), // overflow
            (0x0080_0000, 0x8080_0001), // cancels below 2^-126: flushed
            (0x7F80_0000, 0xFF80_0000), // Inf - Inf
            (0x7F80_0000, 0x3F80_0000),
            (0x7FC0_1234, 0x3F80_0000),
            (0x8000_0000, 0x8000_0000), // -0 + -0 reads as +0 + +0
            (0x0000_0001, 0x3F80_0000),
        ];
        for (a, b) in cases {
            assert_eq!(add(a, b), expected_add(a, b), "{a:#010x} + {b:#010x}");
            assert_eq!(add(b, a), expected_add(b, a), "{b:#010x} + {a:#010x}");
        }
    }

    /// Every alignment from 0 to 40 places, both effective operations, around the exponents
    /// where results overflow or flush, with significands whose low bits make ties, near ties,
    /// carries and long cancellations.
    #[test]
    fn f32_add_is_exact_at_every_alignment() {
        let fracs =
            [0u32, 1, 2, 3, 0x40_0000, 0x40_0001, 0x7F_FFFF, 0x7F_FFFE, 0x55_5555, 0x00_8001];
        for ea in [1u32, 2, 25, 26, 27, 127, 253, 254] {
            for d in 0..=40u32 {
                let Some(eb) = ea.checked_sub(d).filter(|&e| e >= 1) else { continue };
                for &fa in &fracs {
                    for &fb in &fracs {
                        for (sa, sb) in [(0u32, 0u32), (0, 1), (1, 0), (1, 1)] {
                            let a = sa << 31 | ea << 23 | fa;
                            let b = sb << 31 | eb << 23 | fb;
                            assert_eq!(add(a, b), expected_add(a, b), "{a:#010x} + {b:#010x}");
                        }
                    }
                }
            }
        }
    }

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
        fn f32_add_matches_core(a in f32_operand(), b in f32_operand()) {
            prop_assert_eq!(add(a, b), expected_add(a, b), "{:#010x} + {:#010x}", a, b);
        }

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

    #[test]
    fn verilog_is_valid() {
        for (name, v) in [
            ("f32_add", crate::testing::verilog_of(F32Add::default())),
            ("bf16_mul", crate::testing::verilog_of(Bf16Mul::default())),
            ("f32_mul", crate::testing::verilog_of(F32Mul::default())),
        ] {
            yosys_validate(name, &v).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
    }
}

#[cfg(test)]
mod verilog_tests {
    use super::*;
    use crate::testing::{f32_operand, verilog_of, yosys_eval};
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    use systole_core::numerics::bf16::{add_f32, f32_to_mem, ftz, mul_f32};

    /// The emitted Verilog (evaluated by Yosys), not only the Rust model, computes core's bits.
    #[test]
    fn verilog_matches_core() {
        let mut runner = TestRunner::deterministic();
        let pairs: Vec<(u32, u32)> = (0..300)
            .map(|_| {
                let a = f32_operand().new_tree(&mut runner).unwrap().current();
                let b = f32_operand().new_tree(&mut runner).unwrap().current();
                (a, b)
            })
            .collect();
        let vectors: Vec<Vec<(&str, u64)>> =
            pairs.iter().map(|&(a, b)| vec![("a", a as u64), ("b", b as u64)]).collect();
        let sums = yosys_eval(&verilog_of(F32Add::default()), &vectors, "y");
        let products = yosys_eval(&verilog_of(F32Mul::default()), &vectors, "y");
        for (&(a, b), (&s, &p)) in pairs.iter().zip(sums.iter().zip(&products)) {
            let (fa, fb) = (ftz(f32::from_bits(a)), ftz(f32::from_bits(b)));
            assert_eq!(s as u32, f32_to_mem(add_f32(fa, fb)), "{a:#010x} + {b:#010x}");
            assert_eq!(p as u32, f32_to_mem(mul_f32(fa, fb)), "{a:#010x} * {b:#010x}");
        }
    }
}
