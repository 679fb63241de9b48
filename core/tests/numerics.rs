//! Numerics against independent references: the `half` crate and an f64 nearest-value search
//! for BF16 conversion; exact i128 arithmetic for INT8 requantization.

use fixed::types::I1F31;
use proptest::prelude::*;
use systole_core::numerics::bf16::{add_f32, mul_f32, CANONICAL_NAN_F32};
use systole_core::numerics::int8::Requant;
use systole_core::Bf16;

/// Round-to-nearest-even by value: the bf16 neighbours of `x`, picked by distance in f64, ties
/// to the even significand, overflow to infinity past the largest finite value plus half an ulp.
fn bf16_by_value(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = (bits >> 16) as u16 & 0x8000;
    let mag = f32::from_bits(bits & 0x7FFF_FFFF) as f64;
    if mag.is_infinite() {
        return sign | 0x7F80;
    }
    let lo = ((bits & 0x7FFF_FFFF) >> 16) as u16; // truncation: below or equal
    let hi = lo + 1;
    let val = |h: u16| -> f64 {
        if h >= 0x7F80 {
            // Halfway point past bf16::MAX behaves like the next binade's value 2^128.
            2f64.powi(128)
        } else {
            f32::from_bits((h as u32) << 16) as f64
        }
    };
    let (dlo, dhi) = (mag - val(lo), val(hi) - mag);
    let pick = if dlo < dhi {
        lo
    } else if dhi < dlo {
        hi
    } else if lo & 1 == 0 {
        lo
    } else {
        hi
    };
    sign | pick.min(0x7F80)
}

fn check_conversion(bits: u32) -> Result<(), TestCaseError> {
    let x = f32::from_bits(bits);
    let got = Bf16::from_f32(x);
    if x.is_nan() {
        prop_assert!(got.is_nan(), "{bits:#010x} -> {:#06x} is not NaN", got.0);
        prop_assert_eq!(got.0 & 0x8000, (bits >> 16) as u16 & 0x8000, "NaN sign lost");
        return Ok(());
    }
    let by_half = half::bf16::from_f32(x).to_bits();
    prop_assert_eq!(got.0, by_half, "vs half for {:#010x}", bits);
    prop_assert_eq!(got.0, bf16_by_value(x), "vs nearest-by-value for {:#010x}", bits);
    Ok(())
}

/// f32 bit patterns that stress rounding: ties, just-off ties, subnormals, near overflow.
fn tricky_bits() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>(),
        (
            any::<u16>(),
            prop_oneof![Just(0x8000u32), Just(0x7FFF), Just(0x8001), Just(0), Just(0xFFFF)]
        )
            .prop_map(|(hi, lo)| ((hi as u32) << 16) | lo),
        (0u32..0x0080_0000).prop_map(|m| m | if m & 1 == 0 { 0 } else { 0x8000_0000 }),
        (0x7F7F_0000u32..=0x7FFF_FFFF),
        (0xFF7F_0000u32..=0xFFFF_FFFF),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn bf16_conversion_matches_references(bits in tricky_bits()) {
        check_conversion(bits)?;
    }

    #[test]
    fn bf16_products_are_exact_or_flushed(a in any::<u16>(), b in any::<u16>()) {
        let (x, y) = (Bf16(a).to_f32_daz(), Bf16(b).to_f32_daz());
        let p = mul_f32(x, y);
        let exact = x as f64 * y as f64;
        if exact.is_nan() {
            prop_assert!(p.is_nan());
        } else if exact.abs() < 2f64.powi(-126) {
            prop_assert_eq!(p.to_bits(), 0, "{} * {} must flush to +0", x, y);
        } else if exact.abs() >= 2f64.powi(128) {
            prop_assert!(p.is_infinite());
        } else {
            prop_assert_eq!(p as f64, exact, "product of {:#06x} and {:#06x} not exact", a, b);
        }
    }

    #[test]
    fn f32_sums_round_to_nearest_even_then_flush(a in any::<u32>(), b in any::<u32>()) {
        let (x, y) = (f32::from_bits(a), f32::from_bits(b));
        let s = add_f32(x, y);
        // f64 has more than 2 * 24 + 2 bits: rounding the sum to f64 and then to f32 is the
        // same as rounding it to f32 once (no double-rounding error for +).
        let wide = x as f64 + y as f64;
        if wide.is_nan() {
            prop_assert!(s.is_nan());
        } else if wide.abs() < 2f64.powi(-126) && wide != 0.0 {
            prop_assert_eq!(s.to_bits(), 0);
        } else {
            // f64 -> f32 conversion is round-to-nearest-even.
            prop_assert_eq!(s.to_bits(), if (wide as f32).to_bits() & 0x7F80_0000 == 0 { 0 } else { (wide as f32).to_bits() });
        }
    }

    #[test]
    fn requantize_matches_i128_reference(
        acc in prop_oneof![any::<i32>(), -70_000i32..70_000, Just(i32::MIN), Just(i32::MAX)],
        // Multipliers of few bits make exact ties in the high multiply common.
        mult in prop_oneof![any::<i32>(), (1i32 << 30)..i32::MAX, Just(i32::MIN), Just(1 << 30),
                            Just(-(1 << 30)), Just(3 << 29), Just(-(3 << 28))],
        shift in 0u8..=31,
        zp in any::<i8>(),
    ) {
        let r = Requant { multiplier: I1F31::from_bits(mult), shift, zero_point: zp };
        prop_assert_eq!(r.apply(acc), requant_reference(acc, mult, shift, zp));
    }
}

/// Round `num / 2^bits` to nearest, halves away from zero, in i128.
fn div_pow2_round_away(num: i128, bits: u32) -> i128 {
    if bits == 0 {
        return num;
    }
    let d = 1i128 << bits;
    let q = num.abs() / d;
    let r = num.abs() % d;
    let q = if 2 * r >= d { q + 1 } else { q };
    if num < 0 {
        -q
    } else {
        q
    }
}

/// The gemmlowp convention computed exactly: `floor(acc * m / 2^31 + 1/2)` (halves up,
/// saturated to i32), then `round(x / 2^shift)` (halves away from zero), plus the zero point,
/// clamped to i8.
fn requant_reference(acc: i32, mult: i32, shift: u8, zp: i8) -> i8 {
    let product = acc as i128 * mult as i128;
    let high = (product + (1 << 30)).div_euclid(1 << 31).clamp(i32::MIN as i128, i32::MAX as i128);
    let x = div_pow2_round_away(high, shift as u32);
    (x + zp as i128).clamp(-128, 127) as i8
}

#[test]
fn bf16_conversion_on_known_edges() {
    for bits in [
        0x0000_0000u32,
        0x8000_0000,
        0x0000_0001,
        0x007F_FFFF,
        0x0080_0000,
        0x3F80_8000,
        0x3F81_8000,
        0x7F7F_7FFF,
        0x7F7F_8000,
        0x7F7F_FFFF,
        0x7F80_0000,
        0xFF80_0000,
        0x7F80_0001,
        0x7FC0_0000,
        0xFFFF_FFFF,
    ] {
        check_conversion(bits).unwrap();
    }
    assert_eq!(Bf16::from_f32(f32::from_bits(0x7F7F_8000)).0, 0x7F80, "tie past MAX overflows");
    assert_eq!(Bf16::from_f32(f32::from_bits(0x7F7F_7FFF)).0, 0x7F7F);
}

#[test]
fn nan_leaves_the_datapath_canonical() {
    use systole_core::{Arith, BF16};
    let nan = BF16::add(f32::INFINITY, f32::NEG_INFINITY);
    assert_eq!(BF16::acc_to_bits(nan), CANONICAL_NAN_F32);
    assert_eq!(BF16::acc_to_bits(BF16::mul(0.0, f32::INFINITY)), CANONICAL_NAN_F32);
}

/// `Plain`'s GEMM, however its loops run, sums each element's products in the order of k from
/// zero: the bits of the plain dot products, signed zeros and infinities included (a NaN is any
/// NaN: neither Rust nor the CPU promises its sign and payload).
fn bits(x: f32) -> u32 {
    if x.is_nan() {
        f32::NAN.to_bits()
    } else {
        x.to_bits()
    }
}

fn dot_products(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<u32> {
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0f32;
            for kk in 0..k {
                s += a[i * k + kk] * b[kk * n + j];
            }
            c.push(bits(s));
        }
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn plain_matmul_sums_in_dot_product_order(
        (m, k, n) in (0usize..6, 0usize..7, 0usize..6),
        values in prop::collection::vec(prop_oneof![
            8 => -4.0f32..4.0,
            1 => Just(-0.0f32),
            1 => prop::sample::select(vec![f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e30, -1e-30]),
        ], 72),
    ) {
        use systole_core::exec::{Numerics, Plain};
        let (a, b) = (&values[..m * k], &values[36..36 + k * n]);
        let got: Vec<u32> =
            Plain::<f32>::new().matmul(a, b, m, k, n).iter().map(|&x| bits(x)).collect();
        prop_assert_eq!(got, dot_products(a, b, m, k, n));
    }
}
