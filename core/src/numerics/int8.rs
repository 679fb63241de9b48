//! INT8 arithmetic and requantization in the TFLite / gemmlowp convention.
//!
//! The array multiplies i8 x i8 and accumulates in i32 with two's-complement wrap-around (the
//! hardware adder has 32 bits, like numpy's int32 matmul). Requantization takes an i32
//! accumulator back to i8:
//!
//! ```text
//! q = saturate_i8(zero_point + rounding_shift_right(sat_rounding_doubling_high_mul(acc, m), shift))
//! ```
//!
//! where `m` is a Q0.31 multiplier in [-1, 1) (held as [`fixed::types::I1F31`]). Exactly as
//! gemmlowp (and so TFLite) computes it: the doubling high multiply rounds halves up (toward
//! +inf: 2.5 -> 3, -2.5 -> -2) and saturates its one overflow case (`i32::MIN * i32::MIN`); the
//! right shift rounds halves away from zero (2.5 -> 3, -2.5 -> -3).

use fixed::types::I1F31;

/// Parameters of one requantization: `real_scale ~= multiplier * 2^-shift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requant {
    /// Q0.31 multiplier, usually normalised into [0.5, 1).
    pub multiplier: I1F31,
    /// Right shift applied after the multiply, 0..=31.
    pub shift: u8,
    /// Output zero point.
    pub zero_point: i8,
}

#[cfg(feature = "defmt")]
impl defmt::Format for Requant {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Requant {{ multiplier: {=i32}, shift: {=u8}, zero_point: {=i8} }}",
            self.multiplier.to_bits(),
            self.shift,
            self.zero_point
        )
    }
}

/// Why a real scale cannot be expressed as a [`Requant`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RequantError {
    /// Scale not finite or not strictly positive.
    NotPositive,
    /// Scale is 1.0 or more: it would need a left shift, which the vector unit does not have.
    TooLarge,
    /// Scale below 2^-32: every accumulator would requantize to the zero point.
    TooSmall,
}

impl core::fmt::Display for RequantError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RequantError::NotPositive => write!(f, "requantization scale must be finite and > 0"),
            RequantError::TooLarge => write!(f, "requantization scale must be < 1.0"),
            RequantError::TooSmall => write!(f, "requantization scale must be >= 2^-32"),
        }
    }
}

impl Requant {
    /// The multiplier and shift that best represent `scale` (0 < scale < 1).
    pub fn from_scale(scale: f64, zero_point: i8) -> Result<Requant, RequantError> {
        if !scale.is_finite() || scale <= 0.0 {
            return Err(RequantError::NotPositive);
        }
        if scale >= 1.0 {
            return Err(RequantError::TooLarge);
        }
        // Normalise scale = q * 2^-shift with q in [0.5, 1).
        let mut q = scale;
        let mut shift = 0u8;
        while q < 0.5 {
            q *= 2.0;
            shift += 1;
            if shift > 31 {
                return Err(RequantError::TooSmall);
            }
        }
        let mut bits = libm_round(q * 2147483648.0) as i64;
        if bits == 1 << 31 {
            // q rounded up to 1.0: halve it and shift one less.
            if shift == 0 {
                return Err(RequantError::TooLarge);
            }
            bits /= 2;
            shift -= 1;
        }
        Ok(Requant { multiplier: I1F31::from_bits(bits as i32), shift, zero_point })
    }

    /// Apply to one accumulator.
    #[inline]
    pub fn apply(&self, acc: i32) -> i8 {
        let x = sat_rounding_doubling_high_mul(acc, self.multiplier.to_bits());
        let x = rounding_shift_right(x, self.shift);
        let q = x as i64 + self.zero_point as i64;
        q.clamp(i8::MIN as i64, i8::MAX as i64) as i8
    }
}

/// The largest INT8 product, `-128 * -128`; the smallest is `-128 * 127`.
const PRODUCT_MAX: u64 = 1 << 14;

/// Bits of two's complement that hold every sum of `n` INT8 products (`n >= 1`), at most 32.
///
/// Each product lies in `[-16256, 16384]`, so a sum of `n` lies in `[-16256 n, 16384 n]`. A
/// weight-stationary column's partial sum leaving PE row `i` is such a sum of `i + 1`, zero
/// entering the top: the hardware builds that register and its adder in these bits and
/// sign-extends them to the i32 the model adds in, the same bits with no wrap-around.
pub const fn product_sum_bits(n: u32) -> u32 {
    let max = PRODUCT_MAX * n as u64;
    // `2^(b-1) - 1 >= max` for the smallest such `b`: the bits below `max`'s top bit, its top
    // bit, and the sign.
    let bits = 64 - max.leading_zeros() + 1;
    if bits < 32 {
        bits
    } else {
        32
    }
}

/// Symmetric per-tensor quantization (zero point 0) of a real value: `round(x / scale)`, halves
/// away from zero, saturated to i8 (NaN gives 0). The host quantizes weights and the host or the
/// firmware quantizes inputs with it, so every side writes the same bytes.
#[inline]
pub fn quantize(x: f32, scale: f32) -> i8 {
    libm::roundf(x / scale).clamp(i8::MIN as f32, i8::MAX as f32) as i8
}

fn libm_round(x: f64) -> f64 {
    // Round half away from zero without std (x is positive here).
    let t = x as i64 as f64;
    if x - t >= 0.5 {
        t + 1.0
    } else {
        t
    }
}

/// gemmlowp's SaturatingRoundingDoublingHighMul: round(a * b / 2^31), halves toward +inf.
#[inline]
pub fn sat_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp's RoundingDivideByPOT: x / 2^shift, halves away from zero.
#[inline]
pub fn rounding_shift_right(x: i32, shift: u8) -> i32 {
    debug_assert!(shift <= 31);
    let shift = shift as u32;
    let mask = ((1i64 << shift) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> shift) + i32::from(remainder > threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn product_sums_fit_their_bits_and_no_fewer() {
        let fits = |v: i64, bits: u32| v >= -(1i64 << (bits - 1)) && v < (1i64 << (bits - 1));
        for n in 1..=4096u32 {
            let bits = product_sum_bits(n);
            let (lo, hi) = (-128 * 127 * n as i64, 128 * 128 * n as i64);
            assert!(fits(lo, bits) && fits(hi, bits), "{n} products in {bits} bits");
            assert!(bits == 32 || !fits(hi, bits - 1), "{n} products fit {} bits", bits - 1);
        }
        assert_eq!(product_sum_bits(1), 16);
        assert_eq!(product_sum_bits(8), 19);
        assert_eq!(product_sum_bits(1 << 17), 32);
        assert_eq!(product_sum_bits(u32::MAX), 32);
    }

    #[test]
    fn known_values() {
        let half = Requant { multiplier: I1F31::from_bits(1 << 30), shift: 0, zero_point: 0 };
        assert_eq!(half.apply(5), 3); // 2.5 -> 3, away from zero
        assert_eq!(half.apply(-5), -2); // -2.5 -> -2: gemmlowp's high multiply rounds halves up
        let quarter = Requant { shift: 1, ..half };
        assert_eq!(quarter.apply(-10), -3); // -5 / 2 = -2.5 -> -3: the shift rounds away
        assert_eq!(half.apply(1000), 127);
        assert_eq!(half.apply(-1000), -128);
        let zp = Requant { zero_point: -10, ..half };
        assert_eq!(zp.apply(4), -8);
        assert_eq!(sat_rounding_doubling_high_mul(i32::MIN, i32::MIN), i32::MAX);
        assert_eq!(rounding_shift_right(-6, 2), -2); // -1.5 -> -2
        assert_eq!(rounding_shift_right(6, 2), 2);
        assert_eq!(rounding_shift_right(5, 2), 1);
        assert_eq!(rounding_shift_right(i32::MIN, 31), -1);
    }

    #[test]
    fn from_scale_normalises() {
        let r = Requant::from_scale(0.25, 0).unwrap();
        assert_eq!((r.multiplier.to_bits(), r.shift), (1 << 30, 1));
        assert_eq!(Requant::from_scale(1.0, 0), Err(RequantError::TooLarge));
        assert_eq!(Requant::from_scale(-1.0, 0), Err(RequantError::NotPositive));
        assert_eq!(Requant::from_scale(1e-12, 0), Err(RequantError::TooSmall));
    }
}
