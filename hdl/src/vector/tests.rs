//! The lanes against core, in rust-hdl's simulation and as Verilog evaluated by Yosys.

use super::*;
use crate::testing::{f32_operand, int_word, settle, verilog_of, yosys_eval};
use proptest::prelude::*;
use systole_core::{Arith, Int8, BF16};

const OPS: [AccOp; 11] = [
    AccOp::Overwrite,
    AccOp::Accumulate,
    AccOp::BiasAdd,
    AccOp::Relu,
    AccOp::ReluGrad,
    AccOp::Scale,
    AccOp::Axpy,
    AccOp::BiasRelu,
    AccOp::Max,
    AccOp::Equal,
    AccOp::Word,
];

/// The ops a lane of `dtype` runs (core's `VectorOp::runs_on`; INT8 lanes with their
/// comparator, as `ArrayConfig::new` builds them).
fn ops(dtype: Dtype) -> Vec<AccOp> {
    use systole_core::isa::VectorOp;
    let config = systole_core::ArrayConfig::new(1, 1, dtype);
    let runs = |op: &AccOp| match op {
        AccOp::Scale => VectorOp::Scale.runs_on(&config),
        AccOp::Axpy => VectorOp::Axpy.runs_on(&config),
        AccOp::Max => VectorOp::Max.runs_on(&config),
        AccOp::Equal => VectorOp::Equal.runs_on(&config),
        _ => true,
    };
    OPS.into_iter().filter(runs).collect()
}

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
        AccOp::BiasRelu => {
            let sum = A::add(xa, ya);
            if A::le_zero(sum) {
                A::zero()
            } else {
                sum
            }
        }
        AccOp::Max => A::max_first(xa, ya),
        AccOp::Equal => A::equal(xa, ya),
        AccOp::Word => return word,
    };
    A::acc_to_bits(v)
}

fn lane(dtype: Dtype, op: AccOp, x: u32, y: u32, array: u32, imm: u32, word: u32) -> u32 {
    let mut uut = AccLane::new(dtype, LaneBuild { int8_max: true, ..LaneBuild::default() });
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

/// Registered steps a BF16 lane built as `build` takes before it writes a row of `op`: the
/// product's (`Scale`, `Axpy` on paced lanes, two on split ones) and the staged add's (one or
/// two, for every op that adds and the array's overwriting rows, which pass beside the adder).
fn steps(build: LaneBuild, op: AccOp) -> usize {
    use AccOp::*;
    let products =
        matches!(op, Scale | Axpy) as usize * (build.paced as usize + build.split as usize);
    let sums = matches!(op, BiasAdd | BiasRelu | Axpy | Accumulate | Overwrite) as usize
        * build.add_registers as usize;
    products + sums
}

/// A BF16 lane's result in the cycle it writes a row: an enabled clock edge for each of its
/// [`steps`] with the row's inputs held, a frozen edge with other inputs, then the row's inputs
/// again; but an array row's staged result is read with the next row's inputs, as the array
/// moves on while the lane adds.
fn written(build: LaneBuild, op: AccOp, x: u32, y: u32, array: u32, imm: u32, word: u32) -> u32 {
    let mut uut = AccLane::new(Dtype::Bf16, build);
    uut.connect_all();
    let set = |uut: &mut AccLane, x: u32, y: u32, array: u32, imm: u32| {
        uut.op.next = op;
        uut.x.next = (x as u64).into();
        uut.y.next = (y as u64).into();
        uut.array.next = (array as u64).into();
        uut.imm.next = (imm as u64).into();
        uut.word.next = (word as u64).into();
    };
    set(&mut uut, x, y, array, imm);
    uut.enable.next = true;
    for _ in 0..steps(build, op) {
        crate::testing::tick(&mut uut, |u| &mut u.clock);
    }
    set(&mut uut, !x, !y, !array, !imm);
    uut.enable.next = false;
    crate::testing::tick(&mut uut, |u| &mut u.clock);
    let array_row = matches!(op, AccOp::Accumulate | AccOp::Overwrite) && build.add_registers > 0;
    if !array_row {
        set(&mut uut, x, y, array, imm);
    }
    settle(&mut uut);
    uut.result.val().to_u32()
}

/// The array's output words are datapath values: never subnormal, NaN canonical.
fn array_word(w: u32) -> u32 {
    BF16::acc_to_bits(BF16::acc_from_bits(w))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn int8_lane_matches_core(
        op in prop::sample::select(ops(Dtype::Int8)),
        x in int_word(), y in int_word(), a in int_word(), imm in int_word(), w in int_word()
    ) {
        prop_assert_eq!(
            lane(Dtype::Int8, op, x, y, a, imm, w),
            core_lane::<Int8>(op, x, y, a, imm, w)
        );
    }

    /// `Max` and `Equal` on near and equal operands, which random words rarely give.
    #[test]
    fn bf16_comparisons_match_core(
        op in prop::sample::select(vec![AccOp::Max, AccOp::Equal]),
        x in f32_operand(), flip in 0u32..4, ulp in 0u32..3
    ) {
        let y = match flip {
            0 => x,
            1 => x ^ 0x8000_0000,
            2 => x.wrapping_add(ulp),
            _ => x.wrapping_sub(ulp),
        };
        for (x, y) in [(x, y), (y, x)] {
            prop_assert_eq!(
                lane(Dtype::Bf16, op, x, y, 0, 0, 0),
                core_lane::<BF16>(op, x, y, 0, 0, 0),
                "{:?} x {:#010x} y {:#010x}", op, x, y
            );
        }
    }

    #[test]
    fn bf16_lane_matches_core(
        op in prop::sample::select(OPS.to_vec()),
        x in f32_operand(), y in f32_operand(), a in f32_operand(), imm in f32_operand(),
        w in any::<u32>()
    ) {
        let a = array_word(a);
        let want = core_lane::<BF16>(op, x, y, a, imm, w);
        prop_assert_eq!(
            lane(Dtype::Bf16, op, x, y, a, imm, w), want,
            "{:?} x {:#010x} y {:#010x} array {:#010x} imm {:#010x}", op, x, y, a, imm
        );
        // The lanes with a registered product, a staged add, or both, in the cycle they write.
        for (paced, split, add_registers) in
            [(true, false, 0), (false, false, 1), (true, false, 1), (true, true, 0),
             (true, true, 1), (false, false, 2), (true, true, 2)]
        {
            let parallel_align = add_registers != 1;
            for (lean_add, early_sum) in [(false, false), (true, false), (true, true)] {
                let build = LaneBuild {
                    paced, split, add_registers, int8_max: true, parallel_align, lean_add,
                    early_sum,
                };
                prop_assert_eq!(
                    written(build, op, x, y, a, imm, w), want,
                    "{:?}: {:?} x {:#010x} y {:#010x} array {:#010x} imm {:#010x}",
                    build, op, x, y, a, imm
                );
            }
        }
    }
}

/// The emitted Verilog of the lanes, evaluated by Yosys, against core.
#[test]
fn verilog_matches_core() {
    let mut seed = 0x5EED_u64;
    let mut next = || (crate::testing::lcg_step(&mut seed) >> 32) as u32;
    let mut cases = vec![];
    for i in 0..64 {
        let (x, y, a, imm) = (next(), next(), next(), next());
        cases.push((OPS[i % OPS.len()], x, y, a, imm));
    }
    // NaN with a payload, subnormals, -0, infinities, i32::MIN.
    let specials = [
        0x7F80_0001u32,
        0x8000_0001,
        0x8000_0000,
        0xFF80_0000,
        0x0000_0000,
        0x3FC0_0000,
        0xBFC0_0000,
    ];
    for (i, &x) in specials.iter().enumerate() {
        for (j, op) in OPS.iter().enumerate() {
            let y = specials[(i + j) % specials.len()];
            cases.push((*op, x, y, 0x7F80_0000, 0x3F80_0001));
        }
    }
    let inputs: Vec<Vec<(&str, u64)>> = cases
        .iter()
        .map(|&(op, x, y, a, imm)| {
            vec![
                ("op", op as u64),
                ("x", x as u64),
                ("y", y as u64),
                ("array", array_word(a) as u64),
                ("imm", imm as u64),
                ("word", (x ^ y) as u64),
                ("multiplier", (imm ^ 0x5A5A) as u64),
            ]
        })
        .collect();
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        let build = LaneBuild { int8_max: true, ..LaneBuild::default() };
        let got = yosys_eval(&verilog_of(AccLane::new(dtype, build)), &inputs, "result");
        let runs = ops(dtype);
        for (&(op, x, y, a, imm), &g) in cases.iter().zip(&got) {
            if !runs.contains(&op) {
                continue;
            }
            let a = array_word(a);
            let want = match dtype {
                Dtype::Int8 => core_lane::<Int8>(op, x, y, a, imm, x ^ y),
                Dtype::Bf16 => core_lane::<BF16>(op, x, y, a, imm, x ^ y),
            };
            assert_eq!(g as u32, want, "{dtype:?} {op:?} {x:#x} {y:#x} {a:#x} {imm:#x}");
        }
    }
}

#[test]
fn verilog_is_valid() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        for (paced, split, add_registers, int8_max) in [
            (false, false, 0, true),
            (true, false, 0, true),
            (false, false, 0, false),
            (true, false, 1, true),
            (true, true, 1, true),
            (true, true, 2, true),
        ] {
            let (parallel_align, lean_add, early_sum) = (paced, split, split);
            let build = LaneBuild {
                paced,
                split,
                add_registers,
                int8_max,
                parallel_align,
                lean_add,
                early_sum,
            };
            let verilog = verilog_of(AccLane::new(dtype, build));
            yosys_validate("acc_lane", &verilog).unwrap();
        }
    }
}

/// An INT8 lane built without its comparator has none: `Max` falls to the word input, as the
/// ops an INT8 machine never runs do, and the lane is smaller.
#[test]
fn an_int8_lane_without_its_comparator_has_none() {
    let run = |int8_max| {
        let mut uut = AccLane::new(Dtype::Int8, LaneBuild { int8_max, ..LaneBuild::default() });
        uut.connect_all();
        uut.op.next = AccOp::Max;
        uut.x.next = 1.into();
        uut.y.next = 5.into();
        uut.word.next = 9.into();
        settle(&mut uut);
        uut.result.val().to_u32()
    };
    assert_eq!((run(true), run(false)), (5, 9));
    let with =
        verilog_of(AccLane::new(Dtype::Int8, LaneBuild { int8_max: true, ..Default::default() }));
    let without = verilog_of(AccLane::new(Dtype::Int8, LaneBuild::default()));
    // `y_above` is the comparator's own signal.
    assert!(with.contains("y_above"), "the comparator is emitted");
    assert!(!without.contains("y_above"), "no comparator is emitted");
    assert!(without.len() < with.len(), "the lane without a comparator is smaller");
}
