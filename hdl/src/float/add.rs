//! The f32 adder.

use rust_hdl::prelude::*;

use super::F32Align;
use crate::optional::Optional;

/// `y = a + b` in f32, round to nearest even, DAZ operands, FTZ result, canonical NaN: an
/// [`F32Align`] into an [`F32Normalize`] into an [`F32Round`], in one cycle. A staged lane
/// (`ArrayConfig::add_stages` 2) registers what the first hands the second (63 bits) instead,
/// and a lane of three stages what the second hands the third (41 bits) too; so do the PEs
/// (`ArrayConfig::pe_stages` 3 and 4).
///
/// The smaller operand's significand is aligned to the larger one's in 27 bits: 24 of
/// significand and three below it, guard, round and sticky, the sticky bit holding whether any
/// bit shifted past it was set. That is enough for a sum or difference rounded to nearest: a
/// difference that cancels more than one leading bit comes from operands at most one place
/// apart, whose alignment lost no bit. The sum, one carry bit wider, is normalised by a carry
/// (a right shift keeping the sticky bit) or by a leading-zero search made as five halving
/// steps (16, 8, 4, 2 and 1 places), each shifting the value when its top bits are zero, so the
/// search and the shift are one log-depth structure, and rounded on the guard and sticky bits.
///
/// Every local is assigned in one place (a default, then overrides) and never read in its own
/// assignment, so the Rust simulation and the Verilog `always @(*)` agree.
#[derive(LogicBlock, Default)]
pub struct F32Add {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    align: F32Align,
    normalize: F32Normalize,
    round: F32Round,
}

impl F32Add {
    /// The adder with the [`F32Align::parallel`] aligner.
    pub fn parallel() -> F32Add {
        F32Add { align: F32Align::parallel(), ..Default::default() }
    }

    /// The adder with revision 3's rounding ([`F32Round::early_exponent`]): the same bits.
    pub fn lean(self) -> F32Add {
        F32Add { round: F32Round::early_exponent(), ..self }
    }
}

impl Logic for F32Add {
    #[hdl_gen]
    fn update(&mut self) {
        self.align.a.next = self.a.val();
        self.align.b.next = self.b.val();
        self.normalize.x.next = self.align.x.val();
        self.normalize.mz.next = self.align.mz.val();
        self.normalize.z_flags.next = self.align.z_flags.val();
        self.round.norm.next = self.normalize.norm.val();
        self.round.e_pre.next = self.normalize.e_pre.val();
        self.round.flags.next = self.normalize.flags.val();
        self.y.next = self.round.y.val();
    }
}

/// The middle of [`F32Add`]: the aligned significands added or subtracted and normalised, the
/// exponent the normalisation leaves, and what the infinities and NaNs make of the result.
#[derive(LogicBlock, Default)]
pub struct F32Normalize {
    pub x: Signal<In, Bits<32>>,
    pub mz: Signal<In, Bits<28>>,
    pub z_flags: Signal<In, Bits<3>>,
    /// The sum normalised (hidden bit at 26) with guard at 2, round at 1, sticky at 0.
    pub norm: Signal<Out, Bits<27>>,
    /// The biased exponent plus 32 before rounding: `ex`, one more after a carry, less the
    /// places moved left.
    pub e_pre: Signal<Out, Bits<10>>,
    /// Bit 3: the sum is exactly zero; bit 2: its sign (the larger operand's); bits 1..0: the
    /// special result: 0 none, 1 infinite (of that sign), 2 NaN.
    pub flags: Signal<Out, Bits<4>>,
    ex: Signal<Local, Bits<8>>,
    /// The larger significand, hidden bit at 26, guard, round and sticky zero.
    mx: Signal<Local, Bits<28>>,
    s: Signal<Local, Bits<28>>,
    /// The halving steps of the leading-zero search: each one's input shifted when its top 16,
    /// 8, 4, 2 or 1 bits are zero.
    n16: Signal<Local, Bits<27>>,
    n8: Signal<Local, Bits<27>>,
    n4: Signal<Local, Bits<27>>,
    n2: Signal<Local, Bits<27>>,
    n1: Signal<Local, Bits<27>>,
    z16: Signal<Local, Bit>,
    z8: Signal<Local, Bit>,
    z4: Signal<Local, Bit>,
    z2: Signal<Local, Bit>,
    z1: Signal<Local, Bit>,
    /// The places the sum moved left (0 after a carry).
    lz: Signal<Local, Bits<10>>,
    special: Signal<Local, Bits<2>>,
    zero: Signal<Local, Bit>,
    /// Built [`F32Normalize::given_sum`] only: the sum of the aligned significands, formed
    /// outside (by an [`F32SigAdd`], a stage earlier); `mz` is then not read.
    pub sum: Optional<Signal<In, Bits<28>>>,
}

impl F32Normalize {
    /// The normalisation of a sum formed outside ([`F32SigAdd`]), so that a pipeline can put the
    /// significands' addition in the stage before it (docs/DECISIONS.md 119).
    pub fn given_sum() -> F32Normalize {
        F32Normalize { sum: Optional::default_when(true), ..Default::default() }
    }
}

impl Logic for F32Normalize {
    #[hdl_gen]
    fn update(&mut self) {
        self.ex.next = self.x.val().get_bits::<8>(23);
        // The larger significand with its hidden bit (none for zero).
        self.mx.next = (bit_cast::<28, 23>(self.x.val().get_bits::<23>(0)) << 3)
            | (bit_cast::<28, 1>(self.ex.val().any().into()) << 26);
        if self.x.val().get_bit(31) == self.z_flags.val().get_bit(2) {
            self.s.next = self.mx.val() + self.mz.val();
        } else {
            self.s.next = self.mx.val() - self.mz.val();
        }
        for _k in 0..self.sum.len() {
            self.s.next = self.sum.val();
        }
        // The leading-zero search, in halving steps.
        self.z16.next = !self.s.val().get_bits::<16>(11).any();
        self.n16.next = self.s.val().get_bits::<27>(0);
        if self.z16.val() {
            self.n16.next = self.s.val().get_bits::<27>(0) << 16;
        }
        self.z8.next = !self.n16.val().get_bits::<8>(19).any();
        self.n8.next = self.n16.val();
        if self.z8.val() {
            self.n8.next = self.n16.val() << 8;
        }
        self.z4.next = !self.n8.val().get_bits::<4>(23).any();
        self.n4.next = self.n8.val();
        if self.z4.val() {
            self.n4.next = self.n8.val() << 4;
        }
        self.z2.next = !self.n4.val().get_bits::<2>(25).any();
        self.n2.next = self.n4.val();
        if self.z2.val() {
            self.n2.next = self.n4.val() << 2;
        }
        self.z1.next = !self.n2.val().get_bit(26);
        self.n1.next = self.n2.val();
        if self.z1.val() {
            self.n1.next = self.n2.val() << 1;
        }
        self.lz.next = (bit_cast::<10, 1>(self.z16.val().into()) << 4)
            | (bit_cast::<10, 1>(self.z8.val().into()) << 3)
            | (bit_cast::<10, 1>(self.z4.val().into()) << 2)
            | (bit_cast::<10, 1>(self.z2.val().into()) << 1)
            | bit_cast::<10, 1>(self.z1.val().into());
        self.norm.next = self.n1.val();
        if self.s.val().get_bit(27) {
            // A carry: one place right, the bit shifted out kept in the sticky bit.
            self.lz.next = 0.into();
            self.norm.next =
                self.s.val().get_bits::<27>(1) | bit_cast::<27, 1>(self.s.val().get_bit(0).into());
        }
        self.e_pre.next =
            bit_cast::<10, 8>(self.ex.val()) + 32 + self.s.val().get_bit(27) - self.lz.val();
        // Infinities and NaN: a NaN operand, or infinities of opposite signs, make NaN; an
        // infinite larger operand otherwise makes itself.
        self.special.next = 0.into();
        if self.ex.val() == 255 {
            self.special.next = 1.into();
            if self.x.val().get_bits::<23>(0).any()
                || (self.z_flags.val().get_bit(1)
                    && (self.z_flags.val().get_bit(0)
                        || self.x.val().get_bit(31) != self.z_flags.val().get_bit(2)))
            {
                self.special.next = 2.into();
            }
        }
        self.zero.next = !self.s.val().any();
        self.flags.next = (bit_cast::<4, 1>(self.zero.val().into()) << 3)
            | (bit_cast::<4, 1>(self.x.val().get_bits::<1>(31)) << 2)
            | bit_cast::<4, 2>(self.special.val());
    }
}

/// The significands' sum of [`F32Normalize`] alone (its `s`, carry at 27, guard, round and
/// sticky at 2, 1, 0), for a pipeline that registers it before the normalisation
/// ([`F32Normalize::given_sum`]). `F32Normalize` keeps its own copy of these lines rather than
/// instancing this block, so that the RTL revisions before 3 emit, byte for byte, the netlists
/// their boards' reports measured (DECISIONS 118).
#[derive(LogicBlock, Default)]
pub struct F32SigAdd {
    pub x: Signal<In, Bits<32>>,
    pub mz: Signal<In, Bits<28>>,
    pub z_flags: Signal<In, Bits<3>>,
    pub s: Signal<Out, Bits<28>>,
    mx: Signal<Local, Bits<28>>,
}

impl Logic for F32SigAdd {
    #[hdl_gen]
    fn update(&mut self) {
        self.mx.next = (bit_cast::<28, 23>(self.x.val().get_bits::<23>(0)) << 3)
            | (bit_cast::<28, 1>(self.x.val().get_bits::<8>(23).any().into()) << 26);
        if self.x.val().get_bit(31) == self.z_flags.val().get_bit(2) {
            self.s.next = self.mx.val() + self.mz.val();
        } else {
            self.s.next = self.mx.val() - self.mz.val();
        }
    }
}

/// The last of [`F32Add`]: the normalised sum rounded to nearest even, flushed below 2^-126,
/// infinite past the largest finite value, and the specials.
#[derive(LogicBlock, Default)]
pub struct F32Round {
    pub norm: Signal<In, Bits<27>>,
    pub e_pre: Signal<In, Bits<10>>,
    pub flags: Signal<In, Bits<4>>,
    pub y: Signal<Out, Bits<32>>,
    mant: Signal<Local, Bits<25>>,
    e_tmp: Signal<Local, Bits<10>>,
    sign: Signal<Local, Bits<32>>,
    /// Built [`F32Round::early_exponent`] only: the carry out of the significand's increment,
    /// and the result's exponent field and range tests formed from `e_pre` both ways, the
    /// carry choosing between them.
    carry: Optional<Signal<Local, Bit>>,
    exp: Optional<Signal<Local, Bits<32>>>,
    under: Optional<Signal<Local, Bit>>,
    over: Optional<Signal<Local, Bit>>,
}

impl F32Round {
    /// The rounding whose exponent does not wait for the significand's increment: the
    /// exponent field and the overflow and flush tests are formed from `e_pre` for both
    /// outcomes beside it, and the increment's carry only selects, where the plain rounding
    /// adds it to the exponent and then compares (docs/DECISIONS.md 119). The same bits.
    pub fn early_exponent() -> F32Round {
        F32Round {
            carry: Optional::default_when(true),
            exp: Optional::default_when(true),
            under: Optional::default_when(true),
            over: Optional::default_when(true),
            ..Default::default()
        }
    }
}

impl Logic for F32Round {
    #[hdl_gen]
    fn update(&mut self) {
        // Round to nearest even on the guard bit (2) and the sticky bits (1, 0).
        self.mant.next = bit_cast::<25, 24>(self.norm.val().get_bits::<24>(3))
            + (self.norm.val().get_bit(2)
                && (self.norm.val().get_bits::<2>(0).any() || self.norm.val().get_bit(3)));
        // One more after a rounding carry (significand 2.0, fraction zero).
        self.e_tmp.next = self.e_pre.val() + self.mant.val().get_bit(24);
        self.sign.next = bit_cast::<32, 1>(self.flags.val().get_bits::<1>(2)) << 31;
        if self.flags.val().get_bit(3) || self.e_tmp.val() <= 32 {
            // Exact cancellation gives +0 (round to nearest); anything below 2^-126 is flushed.
            self.y.next = 0.into();
        } else if self.e_tmp.val() >= 255 + 32 {
            self.y.next = self.sign.val() | 0x7F80_0000;
        } else {
            self.y.next = self.sign.val()
                | (bit_cast::<32, 10>(self.e_tmp.val() - 32) << 23)
                | bit_cast::<32, 23>(self.mant.val().get_bits::<23>(0));
        }
        for _k in 0..self.carry.len() {
            self.carry.next = self.mant.val().get_bit(24);
            // The exponent field's bits above 30 are only ever read in range (1 to 254).
            self.exp.next = (bit_cast::<32, 10>(self.e_pre.val()) - 32) << 23;
            self.under.next = self.e_pre.val() <= 32;
            self.over.next = self.e_pre.val() >= 255 + 32;
            if self.carry.val() {
                self.exp.next = (bit_cast::<32, 10>(self.e_pre.val()) - 31) << 23;
                self.under.next = self.e_pre.val() <= 31;
                self.over.next = self.e_pre.val() >= 254 + 32;
            }
            if self.flags.val().get_bit(3) || self.under.val() {
                self.y.next = 0.into();
            } else if self.over.val() {
                self.y.next = self.sign.val() | 0x7F80_0000;
            } else {
                self.y.next = self.sign.val()
                    | self.exp.val()
                    | bit_cast::<32, 23>(self.mant.val().get_bits::<23>(0));
            }
        }
        if self.flags.val().get_bits::<2>(0) == 1 {
            self.y.next = self.sign.val() | 0x7F80_0000;
        }
        if self.flags.val().get_bits::<2>(0) == 2 {
            self.y.next = 0x7FC0_0000.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{f32_operand, settle};
    use proptest::prelude::*;
    use systole_core::numerics::bf16::{add_f32, f32_to_mem, ftz};

    /// `a + b` by the adder with either aligner, which must agree.
    fn add(a: u32, b: u32) -> u32 {
        let sum = |mut uut: F32Add| {
            uut.a.next = (a as u64).into();
            uut.b.next = (b as u64).into();
            settle(&mut uut);
            uut.y.val().to_u32()
        };
        let (compact, parallel) = (sum(F32Add::default()), sum(F32Add::parallel()));
        assert_eq!(compact, parallel, "the aligners differ on {a:#010x} + {b:#010x}");
        let lean = [sum(F32Add::default().lean()), sum(F32Add::parallel().lean())];
        assert_eq!(lean, [compact; 2], "the lean adders differ on {a:#010x} + {b:#010x}");
        compact
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn f32_add_matches_core(a in f32_operand(), b in f32_operand()) {
            prop_assert_eq!(add(a, b), expected_add(a, b), "{:#010x} + {:#010x}", a, b);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Operands close in exponent (the cancelling differences, the carries) and far apart
        /// (the sticky bit), of either sign, with random significands: every path of the
        /// normalisation and rounding.
        #[test]
        fn f32_add_matches_core_near_and_far(
            ea in 1u32..255,
            d in prop_oneof![0u32..4, 0u32..40],
            fa in any::<u32>(),
            fb in any::<u32>(),
            sa in any::<bool>(),
            sb in any::<bool>(),
        ) {
            let eb = ea.saturating_sub(d).max(1);
            let a = (sa as u32) << 31 | ea << 23 | (fa & 0x7F_FFFF);
            let b = (sb as u32) << 31 | eb << 23 | (fb & 0x7F_FFFF);
            prop_assert_eq!(add(a, b), expected_add(a, b), "{:#010x} + {:#010x}", a, b);
            prop_assert_eq!(add(b, a), expected_add(b, a), "{:#010x} + {:#010x}", b, a);
        }
    }
}
