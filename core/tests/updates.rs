//! The SGD update fused into a gradient GEMM's epilogue (`tiler::Update`): on both golden
//! machines against the update composed by hand from the vector unit's ops, and its cycles
//! against the closed form and the timing model.

use proptest::prelude::*;
use systole_core::check::{assert_bit_identical, SplitMix};
use systole_core::machine::{golden, GoldenKind, Region};
use systole_core::numerics::bf16::cast_to_bf16;
use systole_core::tiler::{
    Epilogue, GemmLayout, GemmPlan, GemmShape, MatrixView, TileError, Update, UpdateLoads,
};
use systole_core::{timing, Arith, ArrayConfig, Dtype, Instruction, BF16};

use crate::machines::{config_strategy, reference_gemm};

/// Which parts of the update run.
#[derive(Clone, Copy, Debug)]
struct Parts {
    velocity: bool,
    decay: bool,
    copy: bool,
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn read_words(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect()
}

/// `(p, v)` after the update of gradient `g`, op for op as the epilogue runs it: every value
/// written to an accumulator is read back as it was stored.
fn reference(g: u32, p: u32, v: u32, parts: Parts, (neg_lr, m, wd): (f32, f32, f32)) -> (u32, u32) {
    let acc = |x: f32| BF16::acc_from_bits(BF16::acc_to_bits(x));
    let (mut g, p, v) = (BF16::acc_from_bits(g), BF16::acc_from_bits(p), BF16::acc_from_bits(v));
    if parts.decay {
        g = acc(BF16::add(g, BF16::mul_acc(wd, p)));
    }
    if parts.velocity {
        g = acc(BF16::add(g, BF16::mul_acc(m, v)));
    }
    let p = acc(BF16::add(p, BF16::mul_acc(neg_lr, g)));
    (BF16::acc_to_bits(p), BF16::acc_to_bits(g))
}

/// Where the program runs: the bank of its first block and where its update loads go.
#[derive(Clone, Copy, Debug)]
struct Placement {
    bank: u32,
    loads: UpdateLoads,
}

fn check(mut cfg: ArrayConfig, shape: GemmShape, seed: u64, parts: Parts, at: Placement) {
    cfg.dtype = Dtype::Bf16;
    // Room for an output tile with its parameter and velocity rows.
    cfg.acc_depth = cfg.acc_depth.max(3 * cfg.rows as u32);
    let GemmShape { m, k, n } = shape;
    let mut rng = SplitMix(seed);
    let a = rng.matrix((m * k) as usize, cfg.dtype);
    let b = rng.matrix((k * n) as usize, cfg.dtype);
    let mut random_words = |count: u32| -> Vec<u32> {
        (0..count).map(|_| ((rng.next_u64() % 8001) as f32 / 1000.0 - 4.0).to_bits()).collect()
    };
    let (p0, v0) = (random_words(m * n), random_words(m * n));
    let hyper = (-0.05f32, 0.9f32, if parts.decay { 0.01f32 } else { 0.0 });
    let (a_at, b_at) = (0, m * k * 2);
    let p_at = (b_at + k * n * 2).div_ceil(4) * 4;
    let v_at = p_at + m * n * 4;
    let copy_at = v_at + m * n * 4;
    let dram = (copy_at + m * n * 2) as usize;
    let update = Update {
        param: p_at,
        velocity: parts.velocity.then_some(v_at),
        copy: parts.copy.then_some(copy_at),
        neg_lr: hyper.0.to_bits(),
        momentum: hyper.1.to_bits(),
        weight_decay: hyper.2.to_bits(),
    };
    let layout = GemmLayout::new(MatrixView::row_major(a_at, k), MatrixView::row_major(b_at, n), 0);
    let plan = GemmPlan::with_epilogue(&cfg, shape, layout, Epilogue::update(update))
        .unwrap()
        .starting_in_bank(at.bank)
        .with_update_loads(at.loads);
    let mut program = Vec::new();
    plan.emit(&mut |i: Instruction| program.push(i));

    let g = reference_gemm(&cfg, shape, &a, &b, plan.k_chunk());
    let (mut want_p, mut want_v) = (Vec::new(), Vec::new());
    for i in 0..(m * n) as usize {
        let (p, v) = reference(g[i], p0[i], v0[i], parts, hyper);
        want_p.push(p);
        want_v.push(if parts.velocity { v } else { v0[i] });
    }
    let want_copy: Vec<u8> =
        want_p.iter().flat_map(|&w| cast_to_bf16(BF16::acc_from_bits(w)).0.to_le_bytes()).collect();

    let what = format!("{cfg:?} {shape:?} {parts:?} {at:?}");
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let mut mach = golden(kind, cfg, dram).unwrap();
        mach.write(Region::Dram, a_at as usize, &a).unwrap();
        mach.write(Region::Dram, b_at as usize, &b).unwrap();
        mach.write(Region::Dram, p_at as usize, &words(&p0)).unwrap();
        mach.write(Region::Dram, v_at as usize, &words(&v0)).unwrap();
        let stats = mach.run(&program).unwrap();
        let mut out = vec![0u8; dram];
        mach.read(Region::Dram, 0, &mut out).unwrap();
        let at = |addr: u32, bytes: u32| &out[addr as usize..(addr + bytes) as usize];
        let n = n as usize;
        assert_bit_identical(
            &format!("{kind:?} p, {what}"),
            &want_p,
            &read_words(at(p_at, m * n as u32 * 4)),
            n,
        );
        assert_bit_identical(
            &format!("{kind:?} v, {what}"),
            &want_v,
            &read_words(at(v_at, m * n as u32 * 4)),
            n,
        );
        if parts.copy {
            assert!(at(copy_at, m * n as u32 * 2) == want_copy, "{kind:?} bf16 copy, {what}");
        } else {
            assert!(
                at(copy_at, m * n as u32 * 2).iter().all(|&b| b == 0),
                "{kind:?} copy written, {what}"
            );
        }
        if kind == GoldenKind::Cycle {
            assert_eq!(stats.cycles, Some(plan.cycles()), "closed form, {what}");
            assert_eq!(stats.instructions, plan.instruction_count(), "instructions, {what}");
        }
    }
    assert_eq!(timing::program_cycles(&cfg, &program), Ok(plan.cycles()), "timing, {what}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn fused_sgd_updates_equal_the_vector_ops_composed_by_hand(
        cfg in config_strategy(),
        m in 1u32..=30, k in 1u32..=40, n in 1u32..=20, seed in any::<u64>(),
        velocity in any::<bool>(), decay in any::<bool>(), copy in any::<bool>(),
        bank in 0u32..2, loads in 0usize..UpdateLoads::ALL.len(),
    ) {
        let at = Placement { bank, loads: UpdateLoads::ALL[loads] };
        check(cfg, GemmShape { m, k, n }, seed, Parts { velocity, decay, copy }, at);
    }
}

#[test]
fn an_update_runs_alone_and_on_bf16_arrays() {
    let cfg = ArrayConfig::new(4, 4, Dtype::Bf16);
    let shape = GemmShape { m: 4, k: 4, n: 4 };
    let layout = GemmLayout::new(MatrixView::row_major(0, 4), MatrixView::row_major(32, 4), 64);
    let update = Update {
        param: 128,
        velocity: None,
        copy: None,
        neg_lr: (-0.1f32).to_bits(),
        momentum: 0,
        weight_decay: 0,
    };
    let with_bias = Epilogue { bias: Some(256), ..Epilogue::update(update) };
    let err = GemmPlan::with_epilogue(&cfg, shape, layout, with_bias).unwrap_err();
    assert!(matches!(err, TileError::Epilogue { .. }), "{err:?}");
    assert!(err.to_string().contains("SGD update"), "{err}");
    let int8 = ArrayConfig::new(4, 4, Dtype::Int8);
    let err = GemmPlan::with_epilogue(&int8, shape, layout, Epilogue::update(update)).unwrap_err();
    assert!(err.to_string().contains("bf16"), "{err}");
    // The parameter's end is checked like every other buffer's.
    let far = Update { param: u32::MAX - 8, ..update };
    let err = GemmPlan::with_epilogue(&cfg, shape, layout, Epilogue::update(far)).unwrap_err();
    assert!(matches!(err, TileError::Layout { .. }), "{err:?}");
}
