//! A GEMM whose A has its last row at an address of its own (`GemmLayout::a_last_row`, how a
//! bias gradient rides on its weight gradient): both golden machines against the reference on
//! the assembled A, and its cycles and instruction count against the closed form and the timing
//! model.

use proptest::prelude::*;
use systole_core::check::{assert_bit_identical, SplitMix};
use systole_core::machine::{golden, GoldenKind, Region};
use systole_core::tiler::{Epilogue, GemmLayout, GemmPlan, GemmShape, MatrixView, TileError};
use systole_core::{timing, ArrayConfig, Dataflow, Dtype, Instruction};

use crate::machines::{config_strategy, reference_gemm};

fn check(cfg: ArrayConfig, shape: GemmShape, seed: u64, transposed: bool) {
    let GemmShape { m, k, n } = shape;
    let es = cfg.dtype.elem_bytes() as u32;
    let mut rng = SplitMix(seed);
    // The view's m - 1 rows, stored K x (m - 1) when the GEMM reads their transpose; the last row.
    let view = rng.matrix(((m - 1) * k) as usize, cfg.dtype);
    let last = rng.matrix(k as usize, cfg.dtype);
    let b = rng.matrix((k * n) as usize, cfg.dtype);
    let (view_at, last_at) = (0, (m - 1) * k * es);
    let b_at = last_at + k * es;
    let c_at = (b_at + k * n * es).div_ceil(4) * 4;
    let dram = (c_at + m * n * 4) as usize;
    let a = if transposed {
        MatrixView::row_major(view_at, m - 1).t()
    } else {
        MatrixView::row_major(view_at, k)
    };
    let layout = GemmLayout {
        a_last_row: Some(last_at),
        ..GemmLayout::new(a, MatrixView::row_major(b_at, n), c_at)
    };
    let plan = GemmPlan::with_epilogue(&cfg, shape, layout, Epilogue::STORE).unwrap();
    let mut program = Vec::new();
    plan.emit(&mut |i: Instruction| program.push(i));

    // A in M x K order: the view's rows, then the last row.
    let e = es as usize;
    let mut a_mk = vec![0u8; (m * k) as usize * e];
    for i in 0..(m - 1) as usize {
        for j in 0..k as usize {
            let src = if transposed { j * (m - 1) as usize + i } else { i * k as usize + j };
            a_mk[(i * k as usize + j) * e..][..e].copy_from_slice(&view[src * e..][..e]);
        }
    }
    a_mk[((m - 1) * k) as usize * e..].copy_from_slice(&last);
    let want = reference_gemm(&cfg, shape, &a_mk, &b, plan.k_chunk());

    let what = format!("{cfg:?} {shape:?} transposed {transposed}");
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let mut mach = golden(kind, cfg, dram).unwrap();
        mach.write(Region::Dram, view_at as usize, &view).unwrap();
        mach.write(Region::Dram, last_at as usize, &last).unwrap();
        mach.write(Region::Dram, b_at as usize, &b).unwrap();
        let stats = mach.run(&program).unwrap();
        let mut c = vec![0u8; (m * n * 4) as usize];
        mach.read(Region::Dram, c_at as usize, &mut c).unwrap();
        let c: Vec<u32> =
            c.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
        assert_bit_identical(&format!("{kind:?} C, {what}"), &want, &c, n as usize);
        if kind == GoldenKind::Cycle {
            assert_eq!(stats.cycles, Some(plan.cycles()), "closed form, {what}");
            assert_eq!(stats.instructions, plan.instruction_count(), "instructions, {what}");
            assert_eq!(stats.macs, shape.macs(), "MACs, {what}");
        }
    }
    assert_eq!(timing::program_cycles(&cfg, &program), Ok(plan.cycles()), "timing, {what}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn a_last_row_of_its_own_equals_the_assembled_gemm(
        cfg in config_strategy().prop_filter("weight-stationary", |c| {
            c.dataflow == Dataflow::WeightStationary
        }),
        m in 1u32..=30, k in 1u32..=40, n in 1u32..=20, seed in any::<u64>(),
        transposed in any::<bool>(),
    ) {
        check(cfg, GemmShape { m, k, n }, seed, transposed);
    }
}

#[test]
fn a_last_row_of_its_own_needs_a_weight_stationary_array() {
    let cfg = ArrayConfig::new(4, 4, Dtype::Bf16).with_dataflow(Dataflow::OutputStationary);
    let layout = GemmLayout {
        a_last_row: Some(64),
        ..GemmLayout::new(MatrixView::row_major(0, 4), MatrixView::row_major(128, 4), 256)
    };
    let shape = GemmShape { m: 4, k: 4, n: 4 };
    let err = GemmPlan::with_epilogue(&cfg, shape, layout, Epilogue::STORE).unwrap_err();
    assert!(matches!(err, TileError::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("weight-stationary"), "{err}");
}
