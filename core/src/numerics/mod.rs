//! Numerics: the arithmetic every machine shares, written once behind [`Arith`].

pub mod bf16;
mod float;
pub mod int8;

pub use bf16::Bf16;
pub use float::Float;
pub use int8::Requant;

/// The arithmetic of one datapath: what a PE multiplies, what it accumulates, and how.
///
/// Arrays, tilers and references are generic over it, so INT8 and BF16 share every line of
/// dataflow code. `Elem` is what the scratchpad holds and the array multiplies; `Acc` is what the
/// partial sums and the accumulator memory hold.
pub trait Arith: Copy + 'static {
    type Elem: Copy + PartialEq + core::fmt::Debug + Default;
    type Acc: Copy + PartialEq + core::fmt::Debug;
    /// Bytes of one element in the scratchpad and in DRAM.
    const ELEM_BYTES: usize;
    /// A multiplier operand prepared for the datapath (DAZ-read for BF16).
    type Operand: Copy;

    fn operand(e: Self::Elem) -> Self::Operand;
    /// The additive identity partial sums start from.
    fn zero() -> Self::Acc;
    /// One product, as the PE's multiplier produces it.
    fn mul(a: Self::Operand, b: Self::Operand) -> Self::Acc;
    /// One sum, as the PE's (or the accumulator's) adder produces it.
    fn add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// Multiply-accumulate: `acc + a * b` with the product rounded first (never fused).
    #[inline(always)]
    fn mac(acc: Self::Acc, a: Self::Operand, b: Self::Operand) -> Self::Acc {
        Self::add(acc, Self::mul(a, b))
    }
    /// Product of two accumulator-domain values (the vector unit's `scale` and `axpy`).
    fn mul_acc(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// `x <= 0`, false for NaN (so ReLU and its gradient treat NaN as PyTorch does).
    fn le_zero(x: Self::Acc) -> bool;
    /// `y` where it is larger than `x`, or a NaN where `x` is not; `x` otherwise (the vector
    /// unit's `max`: a running maximum keeps the first of equal values and of NaNs).
    fn max_first(x: Self::Acc, y: Self::Acc) -> Self::Acc;
    /// One where `x == y` (two NaNs too), zero elsewhere (the vector unit's `equal`).
    fn equal(x: Self::Acc, y: Self::Acc) -> Self::Acc;
    fn elem_from_bits(bits: u16) -> Self::Elem;
    fn elem_to_bits(e: Self::Elem) -> u16;
    /// The 32 bits an accumulator value is stored with (NaN canonicalised for f32).
    fn acc_to_bits(a: Self::Acc) -> u32;
    /// An accumulator word as the datapath reads it (DAZ for f32).
    fn acc_from_bits(bits: u32) -> Self::Acc;
}

/// INT8 datapath: i8 x i8 -> i32, wrapping i32 accumulation.
#[derive(Clone, Copy, Debug)]
pub struct Int8;

impl Arith for Int8 {
    type Elem = i8;
    type Acc = i32;
    type Operand = i32;
    const ELEM_BYTES: usize = 1;

    #[inline(always)]
    fn operand(e: i8) -> i32 {
        e as i32
    }
    #[inline(always)]
    fn zero() -> i32 {
        0
    }
    #[inline(always)]
    fn mul(a: i32, b: i32) -> i32 {
        a * b
    }
    #[inline(always)]
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn mul_acc(a: i32, b: i32) -> i32 {
        a.wrapping_mul(b)
    }
    #[inline(always)]
    fn le_zero(x: i32) -> bool {
        x <= 0
    }
    fn max_first(x: i32, y: i32) -> i32 {
        x.max(y)
    }
    fn equal(x: i32, y: i32) -> i32 {
        (x == y) as i32
    }
    #[inline(always)]
    fn elem_from_bits(bits: u16) -> i8 {
        bits as u8 as i8
    }
    #[inline(always)]
    fn elem_to_bits(e: i8) -> u16 {
        e as u8 as u16
    }
    #[inline(always)]
    fn acc_to_bits(a: i32) -> u32 {
        a as u32
    }
    #[inline(always)]
    fn acc_from_bits(bits: u32) -> i32 {
        bits as i32
    }
}

/// BF16 datapath: bf16 x bf16 exact in f32, f32 accumulation, subnormals flushed.
#[derive(Clone, Copy, Debug)]
pub struct BF16;

impl Arith for BF16 {
    type Elem = Bf16;
    type Acc = f32;
    type Operand = f32;
    const ELEM_BYTES: usize = 2;

    #[inline(always)]
    fn operand(e: Bf16) -> f32 {
        e.to_f32_daz()
    }
    #[inline(always)]
    fn zero() -> f32 {
        0.0
    }
    #[inline(always)]
    fn mul(a: f32, b: f32) -> f32 {
        bf16::mul_f32(a, b)
    }
    #[inline(always)]
    fn add(a: f32, b: f32) -> f32 {
        bf16::add_f32(a, b)
    }
    #[inline(always)]
    fn mul_acc(a: f32, b: f32) -> f32 {
        bf16::mul_f32(a, b)
    }
    #[inline(always)]
    fn le_zero(x: f32) -> bool {
        x <= 0.0
    }
    fn max_first(x: f32, y: f32) -> f32 {
        if !x.is_nan() && (y.is_nan() || y > x) {
            y
        } else {
            x
        }
    }
    fn equal(x: f32, y: f32) -> f32 {
        if x == y || (x.is_nan() && y.is_nan()) {
            1.0
        } else {
            0.0
        }
    }
    #[inline(always)]
    fn elem_from_bits(bits: u16) -> Bf16 {
        Bf16(bits)
    }
    #[inline(always)]
    fn elem_to_bits(e: Bf16) -> u16 {
        e.0
    }
    #[inline(always)]
    fn acc_to_bits(a: f32) -> u32 {
        bf16::f32_to_mem(a)
    }
    /// Reads through the datapath: a subnormal (or -0) in memory is read as `+0.0`.
    #[inline(always)]
    fn acc_from_bits(bits: u32) -> f32 {
        bf16::ftz(f32::from_bits(bits))
    }
}
