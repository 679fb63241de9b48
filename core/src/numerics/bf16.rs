//! bfloat16 storage and the f32 datapath rules every Systole machine shares.
//!
//! # The contract
//!
//! * **Conversion** f32 -> bf16 rounds to nearest, ties to even, on every non-NaN bit pattern,
//!   exactly like PyTorch's `tensor.to(torch.bfloat16)` and ml_dtypes: subnormal f32 inputs give
//!   subnormal (or zero) bf16 values, overflow gives ±Inf. A NaN stays a NaN: its sign is kept,
//!   the quiet bit is set and the payload truncated.
//! * **Datapath** (multiplier and adders in the array and the vector unit): subnormals are
//!   flushed. An operand whose exponent field is zero is read as `+0.0` (denormals-are-zero), and
//!   a result whose magnitude is below 2^-126 is written as `+0.0` (flush-to-zero). Otherwise
//!   products are exact (8-bit x 8-bit significands fit in f32's 24) and sums round to nearest,
//!   ties to even, as IEEE 754 binary32.
//! * **NaN** results leave the datapath (accumulator writes, casts) as the canonical quiet NaN
//!   `0x7FC0_0000`; payloads are not propagated.
//!
//! Flushing to `+0.0` rather than a signed zero is deliberate: a partial sum then can never be
//! `-0.0`, so the zero padding of a partial tile is an exact identity and the hardware needs no
//! sign logic for underflow. See docs/NUMERICS.md.

/// A bfloat16 value, held as its 16 bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Bf16(pub u16);

/// The canonical quiet NaN of the f32 datapath.
pub const CANONICAL_NAN_F32: u32 = 0x7FC0_0000;

impl Bf16 {
    pub const ZERO: Bf16 = Bf16(0);
    pub const ONE: Bf16 = Bf16(0x3F80);

    /// f32 -> bf16, round to nearest even (PyTorch's conversion); NaN stays NaN.
    #[inline]
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            // Keep the sign, force the quiet bit so truncation cannot make it an infinity.
            return Bf16(((bits >> 16) as u16) | 0x0040);
        }
        let lsb = (bits >> 16) & 1;
        let rounded = bits.wrapping_add(0x7FFF + lsb);
        Bf16((rounded >> 16) as u16)
    }

    /// bf16 -> f32, exact (subnormals included).
    #[inline]
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    /// The value the datapath's multiplier sees: subnormals read as `+0.0`.
    #[inline]
    pub fn to_f32_daz(self) -> f32 {
        let bits = (self.0 as u32) << 16;
        let bits = if bits & 0x7F80_0000 == 0 { 0 } else { bits };
        f32::from_bits(bits)
    }

    pub fn is_nan(self) -> bool {
        self.0 & 0x7FFF > 0x7F80
    }
}

impl core::fmt::Debug for Bf16 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Bf16({:#06x} = {:?})", self.0, self.to_f32())
    }
}

/// Flush a subnormal f32 to `+0.0`; everything else unchanged.
#[inline(always)]
pub fn ftz(x: f32) -> f32 {
    // Branch-free so that loops over lanes vectorise: keep all bits unless the exponent is 0.
    let bits = x.to_bits();
    let keep = ((bits & 0x7F80_0000 != 0) as u32).wrapping_neg();
    f32::from_bits(bits & keep)
}

/// Product of two datapath operands (already DAZ-read): exact, or flushed, or ±Inf, or NaN.
#[inline(always)]
pub fn mul_f32(a: f32, b: f32) -> f32 {
    ftz(a * b)
}

/// Sum on the f32 datapath: IEEE binary32 round-to-nearest-even, then flush-to-zero.
#[inline(always)]
pub fn add_f32(a: f32, b: f32) -> f32 {
    ftz(a + b)
}

/// The bits an f32 datapath value is written to memory with: NaN canonicalised.
#[inline(always)]
pub fn f32_to_mem(x: f32) -> u32 {
    if x.is_nan() {
        CANONICAL_NAN_F32
    } else {
        x.to_bits()
    }
}

/// f32 datapath value -> bf16 as the vector unit's cast writes it (NaN canonical, then RNE).
#[inline]
pub fn cast_to_bf16(x: f32) -> Bf16 {
    Bf16::from_f32(f32::from_bits(f32_to_mem(x)))
}

/// The bf16 a stored f32 word becomes when cast for the array: read through the datapath
/// (subnormals as `+0`), then `CastBf16`'s rule. Hosts and firmware use it when they write
/// inputs, gradients and weight copies, so what they write equals what the array would cast.
#[inline]
pub fn to_operand(x: f32) -> Bf16 {
    cast_to_bf16(ftz(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_conversions() {
        // (f32 bits, bf16 bits) pairs worked out by hand from the RNE rule.
        let cases: &[(u32, u16)] = &[
            (0x3F80_0000, 0x3F80), // 1.0
            (0x3F80_8000, 0x3F80), // tie, even stays
            (0x3F81_8000, 0x3F82), // tie, odd rounds up
            (0x3F80_8001, 0x3F81), // above tie
            (0x3F80_7FFF, 0x3F80), // below tie
            (0x7F7F_FFFF, 0x7F80), // f32::MAX overflows to +Inf
            (0xFF7F_FFFF, 0xFF80), // f32::MIN overflows to -Inf
            (0x7F80_0000, 0x7F80), // +Inf
            (0x0000_0001, 0x0000), // smallest subnormal rounds to zero
            (0x0000_8000, 0x0000), // tie at zero, even
            (0x0001_8000, 0x0002), // subnormal tie, odd rounds up
            (0x8000_0000, 0x8000), // -0
        ];
        for &(f, b) in cases {
            assert_eq!(Bf16::from_f32(f32::from_bits(f)).0, b, "f32 {f:#010x}");
        }
        assert_eq!(Bf16::from_f32(f32::from_bits(0x7F80_0001)).0, 0x7FC0);
        assert_eq!(Bf16::from_f32(f32::from_bits(0xFFC1_2345)).0, 0xFFC1);
        assert!(Bf16::from_f32(f32::NAN).is_nan());
    }

    #[test]
    fn datapath_flushes_to_positive_zero() {
        let tiny = f32::from_bits(0x0080_0000); // 2^-126, smallest normal
        assert_eq!(mul_f32(tiny, 0.5).to_bits(), 0);
        assert_eq!(mul_f32(-tiny, 0.5).to_bits(), 0);
        assert_eq!(add_f32(tiny, -f32::from_bits(0x0080_0001)).to_bits(), 0);
        assert_eq!(Bf16(0x8001).to_f32_daz().to_bits(), 0);
        assert_eq!(f32_to_mem(f32::INFINITY - f32::INFINITY), CANONICAL_NAN_F32);
    }
}
