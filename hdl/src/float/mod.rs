//! Floating point from `Bits` (rust-hdl has no float type): the BF16 multiplier and the f32
//! multiplier of the BF16 datapath (`mul.rs`) and its f32 adder (`add.rs`, its first stage in
//! `align.rs`), each one combinational block.
//!
//! All three follow core's datapath rules (docs/NUMERICS.md): operands with a zero exponent field
//! (subnormals, zeros of either sign) are read as `+0` (DAZ), results below 2^-126 are written as
//! `+0` (FTZ), sums and products round to nearest even, and every NaN result is the canonical
//! `0x7FC0_0000`. Inside core a NaN keeps its payload until it leaves the datapath, where it is
//! canonicalised; no result of core depends on a payload, so producing the canonical NaN at every
//! step gives the same bits everywhere a NaN can be seen.

/// The canonical quiet NaN every NaN result is written as.
pub const CANONICAL_NAN: u64 = 0x7FC0_0000;

mod add;
mod align;
mod mul;

pub use add::{F32Add, F32Normalize, F32Round, F32SigAdd};
pub use align::F32Align;
pub use mul::{Bf16Mul, F32Mul, F32MulProduct, F32MulRound};

#[cfg(test)]
mod tests {
    use super::*;
    use rust_hdl::prelude::yosys_validate;

    #[test]
    fn verilog_is_valid() {
        for (name, v) in [
            ("f32_add", crate::testing::verilog_of(F32Add::default())),
            ("f32_add_parallel", crate::testing::verilog_of(F32Add::parallel())),
            ("f32_add_lean", crate::testing::verilog_of(F32Add::default().lean())),
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
        let parallel_sums = yosys_eval(&verilog_of(F32Add::parallel()), &vectors, "y");
        assert_eq!(sums, parallel_sums, "the compact and parallel aligners");
        for lean in [F32Add::default().lean(), F32Add::parallel().lean()] {
            assert_eq!(yosys_eval(&verilog_of(lean), &vectors, "y"), sums, "the lean adders");
        }
        let products = yosys_eval(&verilog_of(F32Mul::default()), &vectors, "y");
        for (&(a, b), (&s, &p)) in pairs.iter().zip(sums.iter().zip(&products)) {
            let (fa, fb) = (ftz(f32::from_bits(a)), ftz(f32::from_bits(b)));
            assert_eq!(s as u32, f32_to_mem(add_f32(fa, fb)), "{a:#010x} + {b:#010x}");
            assert_eq!(p as u32, f32_to_mem(mul_f32(fa, fb)), "{a:#010x} * {b:#010x}");
        }
    }
}
