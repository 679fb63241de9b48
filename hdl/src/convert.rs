//! The conversion lanes, one per column: an accumulator word to a scratchpad element
//! (`CastBf16`, `Requantize`) or to a bf16 DRAM element (`StoreBf16`).
//!
//! `ArrayConfig::convert_stages` pipeline registers split each lane: a row's result leaves the
//! lane that many enabled cycles after its word was read, and the sequencer delays the write
//! that takes it as much (core's `timing::row_lands`). The requantize lane's registers sit after
//! the 16 x 16 products, after the high multiply's signed product and after the rounding bias
//! (stages 1, 2 and 3); the cast lane's, a short path, all sit at its output. Every lane computes
//! exactly core's conversion of one word; the tests check the Rust model against core at every
//! depth, and the emitted Verilog (evaluated by Yosys) on a sample.

use rust_hdl::prelude::*;

use crate::delay::Delay;
use crate::optional::Optional;

mod products;
pub use products::{serial_requant, SerialProducts};

// The requantize lane has one boundary per stage core allows.
const _: () = assert!(systole_core::MAX_CONVERT_STAGES == 3);

/// Registers at boundary `k` (1-based) of a lane built with `stages` of them: one or none.
fn at(stages: u8, k: u8) -> usize {
    (stages >= k) as usize
}

/// f32 accumulator word -> bf16: DAZ (a subnormal or -0 gives +0), canonical NaN, then round to
/// nearest even (core's `cast_to_bf16(BF16::acc_from_bits(x))`), `stages` cycles later.
#[derive(LogicBlock)]
pub struct CastLane {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<16>>,
    rounded: Signal<Local, Bits<32>>,
    cast: Signal<Local, Bits<16>>,
    out: Delay<Bits<16>>,
}

impl CastLane {
    pub fn new(stages: u8) -> CastLane {
        CastLane {
            clock: Default::default(),
            enable: Default::default(),
            x: Default::default(),
            y: Default::default(),
            rounded: Default::default(),
            cast: Default::default(),
            out: Delay::new(stages as usize),
        }
    }
}

impl Logic for CastLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.out.clock.next = self.clock.val();
        self.out.enable.next = self.enable.val();
        self.rounded.next = self.x.val() + 0x7FFF + self.x.val().get_bit(16);
        self.cast.next = self.rounded.val().get_bits::<16>(16);
        if !self.x.val().get_bits::<8>(23).any() {
            self.cast.next = 0.into();
        }
        if self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any() {
            self.cast.next = 0x7FC0.into();
        }
        self.out.d_in.next = self.cast.val();
        self.y.next = self.out.d_out.val();
    }
}

/// i32 accumulator word -> i8 (in the low byte of a 16-bit element), gemmlowp's requantization
/// exactly as core's `Requant::apply`:
/// `clamp(zero_point + rounding_shift_right(sat_rounding_doubling_high_mul(x, m), shift))`.
/// `multiplier`, `shift` and `zero_point` hold still while an instruction's rows pass through.
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
/// * The zero point is added in 33 bits and the sum saturated to i8; or, built
///   [`RequantLane::narrowed`], in 11 bits: a shifted value outside ten signed bits saturates
///   whatever the zero point, so only its low eleven bits are added (docs/DECISIONS.md 118).
#[derive(LogicBlock)]
pub struct RequantLane {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub x: Signal<In, Bits<32>>,
    /// Q0.31 multiplier, two's complement.
    pub multiplier: Signal<In, Bits<32>>,
    pub shift: Signal<In, Bits<5>>,
    pub zero_point: Signal<In, Bits<8>>,
    /// The 16 x 16 products of `x` and `multiplier` (the accumulator lane's `Mul32`).
    pub ll: Signal<In, Bits<32>>,
    pub lh: Signal<In, Bits<32>>,
    pub hl: Signal<In, Bits<32>>,
    pub hh: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<16>>,
    /// What the signed product lacks above bit 31: `m` if `x < 0`, plus `x` if `m < 0`.
    correction: Signal<Local, Bits<32>>,
    /// `x = m = i32::MIN`, the one product the high multiply saturates.
    special: Signal<Local, Bit>,
    /// `(x_lo * m_hi + x_hi * m_lo) + (x_lo * m_lo >> 16)`: the unsigned product's bits 16..49
    /// without the high halves' product.
    upper: Signal<Local, Bits<34>>,
    /// Bits 32..63 of the unsigned product.
    raw_hi: Signal<Local, Bits<32>>,
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
    /// Built [`RequantLane::narrowed`] only: the shifted value lies in ten signed bits.
    in_range: Optional<Signal<Local, Bit>>,
    /// Built [`RequantLane::narrowed`] only: the shifted value's low eleven bits plus the zero
    /// point's, the sum when `in_range`.
    small_sum: Optional<Signal<Local, Bits<11>>>,
    // Boundary 1: the products, the correction, the saturating case.
    s1_ll_hi: Delay<Bits<16>>,
    s1_lh: Delay<Bits<32>>,
    s1_hl: Delay<Bits<32>>,
    s1_hh: Delay<Bits<32>>,
    s1_correction: Delay<Bits<32>>,
    s1_special: Delay<Bit>,
    // Boundary 2: the signed product's bits 30..63.
    s2_product_hi: Delay<Bits<32>>,
    s2_low: Delay<Bits<2>>,
    s2_special: Delay<Bit>,
    // Boundary 3: the biased high product.
    s3_biased: Delay<Bits<33>>,
}

impl RequantLane {
    pub fn new(stages: u8) -> RequantLane {
        RequantLane {
            clock: Default::default(),
            enable: Default::default(),
            x: Default::default(),
            multiplier: Default::default(),
            shift: Default::default(),
            zero_point: Default::default(),
            ll: Default::default(),
            lh: Default::default(),
            hl: Default::default(),
            hh: Default::default(),
            y: Default::default(),
            correction: Default::default(),
            special: Default::default(),
            upper: Default::default(),
            raw_hi: Default::default(),
            product_hi: Default::default(),
            nudged: Default::default(),
            high: Default::default(),
            half: Default::default(),
            biased: Default::default(),
            fill: Default::default(),
            shifted: Default::default(),
            zp_wide: Default::default(),
            sum: Default::default(),
            in_range: Optional::none(),
            small_sum: Optional::none(),
            s1_ll_hi: Delay::new(at(stages, 1)),
            s1_lh: Delay::new(at(stages, 1)),
            s1_hl: Delay::new(at(stages, 1)),
            s1_hh: Delay::new(at(stages, 1)),
            s1_correction: Delay::new(at(stages, 1)),
            s1_special: Delay::new(at(stages, 1)),
            s2_product_hi: Delay::new(at(stages, 2)),
            s2_low: Delay::new(at(stages, 2)),
            s2_special: Delay::new(at(stages, 2)),
            s3_biased: Delay::new(at(stages, 3)),
        }
    }

    /// The lane adding its zero point in 11 bits rather than 33: the same bits, a shorter
    /// carry chain and clamp in its last stage. Unbuilt, it leaves no trace in the Verilog.
    pub fn narrowed(self) -> RequantLane {
        RequantLane {
            in_range: Optional::default_when(true),
            small_sum: Optional::default_when(true),
            ..self
        }
    }
}

impl Logic for RequantLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.s1_ll_hi.clock.next = self.clock.val();
        self.s1_lh.clock.next = self.clock.val();
        self.s1_hl.clock.next = self.clock.val();
        self.s1_hh.clock.next = self.clock.val();
        self.s1_correction.clock.next = self.clock.val();
        self.s1_special.clock.next = self.clock.val();
        self.s2_product_hi.clock.next = self.clock.val();
        self.s2_low.clock.next = self.clock.val();
        self.s2_special.clock.next = self.clock.val();
        self.s3_biased.clock.next = self.clock.val();
        self.s1_ll_hi.enable.next = self.enable.val();
        self.s1_lh.enable.next = self.enable.val();
        self.s1_hl.enable.next = self.enable.val();
        self.s1_hh.enable.next = self.enable.val();
        self.s1_correction.enable.next = self.enable.val();
        self.s1_special.enable.next = self.enable.val();
        self.s2_product_hi.enable.next = self.enable.val();
        self.s2_low.enable.next = self.enable.val();
        self.s2_special.enable.next = self.enable.val();
        self.s3_biased.enable.next = self.enable.val();
        // Stage 0: the products come from the multipliers; the correction and the saturating case
        // from the operands.
        self.correction.next = 0.into();
        if self.x.val().get_bit(31) && self.multiplier.val().get_bit(31) {
            self.correction.next = self.multiplier.val() + self.x.val();
        } else if self.x.val().get_bit(31) {
            self.correction.next = self.multiplier.val();
        } else if self.multiplier.val().get_bit(31) {
            self.correction.next = self.x.val();
        }
        self.special.next =
            self.x.val() == 0x8000_0000u64 && self.multiplier.val() == 0x8000_0000u64;
        self.s1_ll_hi.d_in.next = self.ll.val().get_bits::<16>(16);
        self.s1_lh.d_in.next = self.lh.val();
        self.s1_hl.d_in.next = self.hl.val();
        self.s1_hh.d_in.next = self.hh.val();
        self.s1_correction.d_in.next = self.correction.val();
        self.s1_special.d_in.next = self.special.val();
        // Stage 1: the signed product's high word.
        self.upper.next = bit_cast::<34, 32>(self.s1_lh.d_out.val())
            + bit_cast::<34, 32>(self.s1_hl.d_out.val())
            + bit_cast::<34, 16>(self.s1_ll_hi.d_out.val());
        self.raw_hi.next =
            self.s1_hh.d_out.val() + bit_cast::<32, 18>(self.upper.val().get_bits::<18>(16));
        self.product_hi.next = self.raw_hi.val() - self.s1_correction.d_out.val();
        self.s2_product_hi.d_in.next = self.product_hi.val();
        self.s2_low.d_in.next = self.upper.val().get_bits::<2>(14);
        self.s2_special.d_in.next = self.s1_special.d_out.val();
        // Stage 2: the high multiply, and the rounding shift's bias.
        self.nudged.next = ((bit_cast::<34, 32>(self.s2_product_hi.d_out.val()) << 2)
            | bit_cast::<34, 2>(self.s2_low.d_out.val()))
            + 1;
        self.high.next = self.nudged.val().get_bits::<32>(1);
        if self.s2_special.d_out.val() {
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
        self.s3_biased.d_in.next = self.biased.val();
        // Stage 3: the shift, the zero point, the clamp.
        self.fill.next = 0.into();
        if self.s3_biased.d_out.val().get_bit(32) {
            self.fill.next = !(bits::<33>(0x1_FFFF_FFFFu64) >> self.shift.val());
        }
        self.shifted.next = (self.s3_biased.d_out.val() >> self.shift.val()) | self.fill.val();
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
        // Narrowed: within ten signed bits the sum fits eleven, and its low byte is `sum`'s.
        for _k in 0..self.in_range.len() {
            self.in_range.next = self.shifted.val().get_bits::<24>(9).all()
                || !self.shifted.val().get_bits::<24>(9).any();
            self.small_sum.next =
                self.shifted.val().get_bits::<11>(0) + self.zp_wide.val().get_bits::<11>(0);
            self.y.next = bit_cast::<16, 8>(self.sum.val().get_bits::<8>(0));
            if !self.in_range.val() {
                self.y.next = 0x7F.into();
                if self.shifted.val().get_bit(32) {
                    self.y.next = 0x80.into();
                }
            } else if self.small_sum.val().get_bit(10) {
                if !self.small_sum.val().get_bits::<3>(7).all() {
                    self.y.next = 0x80.into();
                }
            } else if self.small_sum.val().get_bits::<3>(7).any() {
                self.y.next = 0x7F.into();
            }
        }
    }
}

#[cfg(test)]
mod tests;
