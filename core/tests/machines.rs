//! Golden machines against each other, the naive reference and the closed form.

use systole_core::check::{
    assert_bit_identical, gemm_on, golden_pair_agree, random_program, SplitMix,
};
use systole_core::machine::GoldenKind;
use systole_core::reference;
use systole_core::tiler::GemmShape;
use systole_core::{ArrayConfig, Bf16, Dataflow, DramPort, Dtype, Int8, Schedule, BF16};

pub(crate) fn reference_gemm(
    config: &ArrayConfig,
    shape: GemmShape,
    a: &[u8],
    b: &[u8],
    chunk: u32,
) -> Vec<u32> {
    let (m, k, n) = (shape.m as usize, shape.k as usize, shape.n as usize);
    match config.dtype {
        Dtype::Int8 => {
            let a: Vec<i8> = a.iter().map(|&x| x as i8).collect();
            let b: Vec<i8> = b.iter().map(|&x| x as i8).collect();
            reference::gemm::<Int8>(&a, &b, m, k, n, chunk as usize)
        }
        Dtype::Bf16 => {
            let conv = |v: &[u8]| -> Vec<Bf16> {
                v.chunks_exact(2).map(|c| Bf16(u16::from_le_bytes([c[0], c[1]]))).collect()
            };
            reference::gemm::<BF16>(&conv(a), &conv(b), m, k, n, chunk as usize)
        }
    }
}

fn check_gemm(config: ArrayConfig, shape: GemmShape, seed: u64) {
    let mut rng = SplitMix(seed);
    let a = rng.matrix((shape.m * shape.k) as usize, config.dtype);
    let b = rng.matrix((shape.k * shape.n) as usize, config.dtype);
    let (cf, sf, plan) = gemm_on(GoldenKind::Functional, &config, shape, &a, &b);
    let (cc, sc, _) = gemm_on(GoldenKind::Cycle, &config, shape, &a, &b);
    let want = reference_gemm(&config, shape, &a, &b, plan.k_chunk());
    let what = format!("{config:?} {shape:?}");
    assert_bit_identical(&format!("functional vs reference, {what}"), &want, &cf, shape.n as usize);
    assert_bit_identical(&format!("cycle vs functional, {what}"), &cf, &cc, shape.n as usize);
    assert_eq!(sf.macs, shape.macs(), "functional MACs, {what}");
    assert_eq!(sc.macs, shape.macs(), "cycle MACs, {what}");
    assert_eq!(sc.instructions, plan.instruction_count(), "instructions, {what}");
    assert_eq!(sc.cycles, Some(plan.cycles()), "closed form vs cycle machine, {what}");
    let mut program = Vec::new();
    plan.emit(&mut |i| program.push(i));
    assert_eq!(
        systole_core::timing::program_cycles(&config, &program),
        Ok(plan.cycles()),
        "timing model, {what}"
    );
}

#[test]
fn small_gemms_agree_everywhere() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
            for (r, c) in [(1, 1), (2, 3), (4, 4), (3, 2)] {
                let cfg =
                    ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(r, c, dtype) }
                        .with_dataflow(dataflow);
                for (m, k, n) in [(1, 1, 1), (5, 7, 3), (17, 9, 11), (40, 70, 5)] {
                    let seed = (m * 1000 + k * 10 + n) as u64;
                    for schedule in Schedule::ALL {
                        check_gemm(cfg.with_schedule(schedule), GemmShape { m, k, n }, seed);
                    }
                    if dataflow == Dataflow::WeightStationary {
                        check_gemm(cfg.with_single_port_spad(true), GemmShape { m, k, n }, seed);
                    }
                }
            }
        }
    }
}

use proptest::prelude::*;
use systole_core::isa::{Instruction, VectorOp};
use systole_core::machine::{golden, Region};
use systole_core::timing;
use systole_core::Requant;

pub(crate) fn config_strategy() -> impl Strategy<Value = ArrayConfig> {
    let shape = (1u16..=8, 1u16..=8, any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>());
    let rest = (
        0u32..48,
        0u32..24,
        any::<bool>(),
        0..=systole_core::MAX_CONVERT_STAGES,
        prop::sample::select(&systole_core::REQUANT_CYCLES[..]),
        prop::sample::select(&systole_core::SCALE_CYCLES[..]),
        prop::sample::select(&systole_core::PE_STAGES[..]),
        prop::sample::select(&systole_core::ADD_STAGES[..]),
        0..=systole_core::MAX_READ_STAGES,
    );
    (shape, rest).prop_map(
        |(
            (r, c, int8, ws, byte, shared),
            (extra_spad, extra_acc, decoupled, stages, p, s, pe, add, read),
        )| {
            let dtype = if int8 { Dtype::Int8 } else { Dtype::Bf16 };
            let mut cfg = ArrayConfig::new(r, c, dtype).with_dataflow(if ws {
                Dataflow::WeightStationary
            } else {
                Dataflow::OutputStationary
            });
            cfg.spad_depth = 3 * cfg.spad_width() as u32 + extra_spad;
            cfg.acc_depth = r as u32 + extra_acc;
            cfg.schedule = if decoupled { Schedule::Decoupled } else { Schedule::Blocking };
            let cfg = cfg
                .with_convert_stages(stages)
                .with_requant_cycles(p)
                .with_scale_cycles(s)
                // An INT8 lane adds in one cycle (`ArrayConfig::add_stages`).
                .with_add_stages(if int8 { 1 } else { add })
                .with_read_stages(read)
                // A DRAM that moves a byte a cycle is built for the blocking schedule only; the
                // SDRAM on either, drawn half as often.
                .with_dram_port(match (byte, decoupled, extra_acc % 2 == 0) {
                    (false, _, _) => DramPort::Row,
                    (true, false, true) => DramPort::Byte,
                    (true, _, _) => DramPort::Sdram,
                })
                // One scratchpad read port for the weight loader and the array: WS blocking.
                .with_single_port_spad(shared && ws && !decoupled);
            // Only some machines may stage their PEs' add; the others draw two stages instead.
            let cfg = cfg.with_pe_stages(if pe >= 3 && !cfg.may_stage_pe_add() { 2 } else { pe });
            // The SDRAM at CAS latency 2 (50 MHz) or 3 (120 MHz).
            let sdram = cfg.dram_port == DramPort::Sdram;
            let clock_mhz = if sdram && shared {
                50.0
            } else if sdram {
                120.0
            } else {
                cfg.clock_mhz
            };
            ArrayConfig { clock_mhz, ..cfg }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn tiled_gemm_is_exact_and_its_cycles_closed_form(
        cfg in config_strategy(),
        m in 1u32..=40, k in 1u32..=60, n in 1u32..=30, seed in any::<u64>(),
    ) {
        check_gemm(cfg, GemmShape { m, k, n }, seed);
    }

    #[test]
    fn functional_equals_cycle_on_random_programs(cfg in config_strategy(), seed in any::<u64>()) {
        let mut rng = SplitMix(seed);
        let dram = 2048usize;
        let program = random_program(&cfg, dram, &mut rng);
        if let Err(e) = golden_pair_agree(&cfg, dram, &program, &mut rng) {
            prop_assert!(false, "{}; program {:?}", e, program);
        }
    }
}

#[test]
fn k_longer_than_the_scratchpad_and_big_arrays() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
            // K = 1500 elements needs 94 k-tiles of 16 rows; the scratchpad has 64 rows.
            let cfg =
                ArrayConfig { spad_depth: 64, acc_depth: 32, ..ArrayConfig::new(16, 16, dtype) }
                    .with_dataflow(dataflow);
            check_gemm(cfg, GemmShape { m: 37, k: 1500, n: 21 }, 7);
            let cfg = ArrayConfig::new(64, 64, dtype).with_dataflow(dataflow);
            check_gemm(cfg, GemmShape { m: 70, k: 130, n: 65 }, 8);
        }
    }
}

#[test]
fn matmul_without_pending_weights_is_an_error_on_both_machines() {
    let cfg = ArrayConfig::new(2, 2, Dtype::Int8);
    let program = [
        Instruction::LoadWeights { spad_row: 0, rows: 2, cols: 2 },
        Instruction::Matmul { a_row: 0, acc_row: 0, rows: 1, swap: true, accumulate: false },
        Instruction::Matmul { a_row: 0, acc_row: 1, rows: 1, swap: true, accumulate: false },
        Instruction::Halt,
    ];
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let mut m = golden(kind, cfg, 16).unwrap();
        let err = m.run(&program).unwrap_err();
        assert_eq!(
            err,
            systole_core::MachineError::Exec {
                index: 2,
                kind: systole_core::machine::ExecErrorKind::NoWeightsLoaded
            },
            "{kind:?}"
        );
    }
}

#[test]
fn invalid_programs_run_nothing() {
    let cfg = ArrayConfig::new(4, 4, Dtype::Bf16);
    let program = [
        Instruction::Vector { op: VectorOp::Relu, dst: 0, src: 0, rows: 1, imm: 0 },
        Instruction::Load {
            spad_row: 0,
            dram_addr: 60,
            rows: 1,
            len: 4,
            row_stride: 0,
            elem_stride: 1,
        },
        Instruction::Halt,
    ];
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let mut m = golden(kind, cfg, 64).unwrap();
        m.write(Region::Acc, 0, &(-1.0f32).to_le_bytes()).unwrap();
        let err = m.run(&program).unwrap_err();
        assert!(
            err.to_string().contains("instruction 1: load: dram 60..68 is outside its 64 bytes"),
            "{err}"
        );
        let mut word = [0u8; 4];
        m.read(Region::Acc, 0, &mut word).unwrap();
        assert_eq!(f32::from_le_bytes(word), -1.0, "{kind:?}: the relu before the bad load ran");
    }
}

/// `Scale`, `Axpy` and `Equal` are BF16 ops, and `Max` needs the INT8 lanes' comparator: an
/// INT8 machine rejects what it lacks before running anything, with an error that names the op;
/// the other vector ops run.
#[test]
fn int8_machines_reject_the_vector_ops_they_lack() {
    for int8_max in [true, false] {
        let cfg = ArrayConfig::new(2, 2, Dtype::Int8).with_int8_max(int8_max);
        for op in VectorOp::ALL {
            let vector = Instruction::Vector {
                op,
                dst: 0,
                src: if op.uses_src() { 1 } else { 0 },
                rows: 1,
                imm: if op.uses_imm() { 2 } else { 0 },
            };
            let lacks = match op {
                VectorOp::Scale | VectorOp::Axpy | VectorOp::Equal => true,
                VectorOp::Max => !int8_max,
                _ => false,
            };
            assert_eq!(op.runs_on(&cfg), !lacks, "{op:?}");
            for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
                let mut m = golden(kind, cfg, 64).unwrap();
                let run = m.run(&[vector, Instruction::Halt]);
                if lacks {
                    let err = run.unwrap_err().to_string();
                    let want = format!("instruction 0: vector {} needs a bf16 array", op.name());
                    assert!(err.contains(&want), "{kind:?}: {err}");
                } else {
                    run.unwrap_or_else(|e| panic!("{kind:?} {op:?}: {e}"));
                }
            }
        }
    }
}

/// An INT8 `Max` is the larger i32 (signed: -5 loses to 2), on both machines.
#[test]
fn int8_max_takes_the_larger_word() {
    let cfg = ArrayConfig::new(2, 2, Dtype::Int8);
    let words = |v: [i32; 4]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let mut m = golden(kind, cfg, 64).unwrap();
        m.write(Region::Acc, 0, &words([-5, 9, 2, 7])).unwrap();
        let max = Instruction::Vector { op: VectorOp::Max, dst: 0, src: 1, rows: 1, imm: 0 };
        m.run(&[max, Instruction::Halt]).unwrap();
        let mut got = [0u8; 16];
        m.read(Region::Acc, 0, &mut got).unwrap();
        assert_eq!(got.to_vec(), words([2, 9, 2, 7]), "{kind:?}");
    }
}

mod epilogues {
    use super::*;
    use systole_core::machine::{golden, GoldenKind, Region};
    use systole_core::numerics::bf16::cast_to_bf16;
    use systole_core::tiler::{CastTo, Epilogue, GemmLayout, GemmPlan, MatrixView};
    use systole_core::{Arith, Instruction};

    /// C = A^T-view x B-view with every epilogue stage, on both machines, against the reference
    /// composed by hand; cycles against the closed form and the timing model.
    fn check(mut cfg: ArrayConfig, shape: GemmShape, seed: u64, transposed: bool, relu_grad: bool) {
        // Room for an output tile, its mask and the bias row.
        cfg.acc_depth = cfg.acc_depth.max(2 * cfg.rows as u32 + 1);
        let GemmShape { m, k, n } = shape;
        let es = cfg.dtype.elem_bytes() as u32;
        let mut rng = SplitMix(seed);
        // A stored as K x M (so the GEMM reads its transpose) or M x K.
        let a_bytes = rng.matrix((m * k) as usize, cfg.dtype);
        let b_bytes = rng.matrix((k * n) as usize, cfg.dtype);
        let bias: Vec<u32> = (0..n)
            .map(|_| match cfg.dtype {
                Dtype::Int8 => (rng.next_u64() % 2001) as u32, // 0..=2000
                Dtype::Bf16 => ((rng.next_u64() % 2001) as f32 / 100.0 - 10.0).to_bits(),
            })
            .collect();
        let mask: Vec<u32> = (0..m * n)
            .map(|_| match cfg.dtype {
                Dtype::Int8 => (rng.next_u64() % 3) as u32,
                Dtype::Bf16 => ((rng.next_u64() % 3) as f32 - 1.0).to_bits(),
            })
            .collect();
        let a_at = 0u32;
        let b_at = m * k * es;
        let bias_at = (b_at + k * n * es).div_ceil(4) * 4;
        let mask_at = bias_at + n * 4;
        let c_at = mask_at + m * n * 4;
        let cast_at = c_at + m * n * 4;
        let dram = (cast_at + m * n * es) as usize;
        let a_view = if transposed {
            MatrixView::row_major(a_at, m).t()
        } else {
            MatrixView::row_major(a_at, k)
        };
        let requant = Requant::from_scale(1.0 / 300.0, 3).unwrap();
        let epilogue = Epilogue {
            bias: Some(bias_at),
            relu_grad_mask: relu_grad.then_some(mask_at),
            relu: !relu_grad,
            store: true,
            cast: Some(CastTo {
                addr: cast_at,
                requant: (cfg.dtype == Dtype::Int8).then_some(requant),
            }),
            update: None,
        };
        let layout = GemmLayout::new(a_view, MatrixView::row_major(b_at, n), c_at);
        let plan = GemmPlan::with_epilogue(&cfg, shape, layout, epilogue).unwrap();
        let mut program = Vec::new();
        plan.emit(&mut |i: Instruction| program.push(i));

        // The reference: A in M x K order for the naive loop.
        let a_mk: Vec<u8> = if transposed {
            let mut v = vec![0u8; a_bytes.len()];
            for i in 0..m as usize {
                for j in 0..k as usize {
                    let (src, dst) =
                        ((j * m as usize + i) * es as usize, (i * k as usize + j) * es as usize);
                    v[dst..dst + es as usize].copy_from_slice(&a_bytes[src..src + es as usize]);
                }
            }
            v
        } else {
            a_bytes.clone()
        };
        let raw = reference_gemm(&cfg, shape, &a_mk, &b_bytes, plan.k_chunk());
        let (want_c, want_cast) =
            finish(&cfg, &raw, &bias, relu_grad.then_some(&mask[..]), n as usize, requant);

        for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
            let mut mach = golden(kind, cfg, dram).unwrap();
            mach.write(Region::Dram, a_at as usize, &a_bytes).unwrap();
            mach.write(Region::Dram, b_at as usize, &b_bytes).unwrap();
            let words = |v: &[u32]| v.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
            mach.write(Region::Dram, bias_at as usize, &words(&bias)).unwrap();
            mach.write(Region::Dram, mask_at as usize, &words(&mask)).unwrap();
            let stats = mach.run(&program).unwrap();
            let mut c = vec![0u8; (m * n * 4) as usize];
            mach.read(Region::Dram, c_at as usize, &mut c).unwrap();
            let c: Vec<u32> =
                c.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
            assert_bit_identical(
                &format!("{kind:?} epilogue C, {cfg:?} {shape:?}"),
                &want_c,
                &c,
                n as usize,
            );
            let mut cast = vec![0u8; (m * n * es) as usize];
            mach.read(Region::Dram, cast_at as usize, &mut cast).unwrap();
            assert!(cast == want_cast, "{kind:?} cast output differs, {cfg:?} {shape:?}");
            if kind == GoldenKind::Cycle {
                assert_eq!(stats.cycles, Some(plan.cycles()), "closed form, {cfg:?} {shape:?}");
                assert_eq!(stats.instructions, plan.instruction_count());
            }
        }
        assert_eq!(timing::program_cycles(&cfg, &program), Ok(plan.cycles()));
    }

    /// Bias add, ReLU gradient or ReLU, then the cast, exactly as the vector unit does them.
    fn finish(
        cfg: &ArrayConfig,
        raw: &[u32],
        bias: &[u32],
        mask: Option<&[u32]>,
        n: usize,
        requant: Requant,
    ) -> (Vec<u32>, Vec<u8>) {
        fn stage<A: Arith>(raw: &[u32], bias: &[u32], mask: Option<&[u32]>, n: usize) -> Vec<u32> {
            raw.iter()
                .enumerate()
                .map(|(i, &w)| {
                    let mut x = A::add(A::acc_from_bits(w), A::acc_from_bits(bias[i % n]));
                    x = A::acc_from_bits(A::acc_to_bits(x));
                    match mask {
                        Some(mask) if A::le_zero(A::acc_from_bits(mask[i])) => x = A::zero(),
                        Some(_) => {}
                        None if A::le_zero(x) => x = A::zero(),
                        None => {}
                    }
                    A::acc_to_bits(x)
                })
                .collect()
        }
        match cfg.dtype {
            Dtype::Int8 => {
                let c = stage::<Int8>(raw, bias, mask, n);
                let cast = c.iter().map(|&w| requant.apply(w as i32) as u8).collect();
                (c, cast)
            }
            Dtype::Bf16 => {
                let c = stage::<BF16>(raw, bias, mask, n);
                let cast = c
                    .iter()
                    .flat_map(|&w| cast_to_bf16(BF16::acc_from_bits(w)).0.to_le_bytes())
                    .collect();
                (c, cast)
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(150))]
        #[test]
        fn fused_epilogues_on_transposed_operands(
            cfg in config_strategy(),
            m in 1u32..=30, k in 1u32..=40, n in 1u32..=20, seed in any::<u64>(),
            transposed in any::<bool>(), relu_grad in any::<bool>(),
        ) {
            check(cfg, GemmShape { m, k, n }, seed, transposed, relu_grad);
        }
    }
}

/// DECISIONS 28: a program's outcome depends on it and the memories alone. Weights one program
/// loaded but never swapped in are not there for the next program's swap; the active weights
/// are (a matmul without swap uses them).
#[test]
fn every_program_starts_with_an_empty_shadow() {
    let cfg = ArrayConfig::new(2, 2, Dtype::Int8);
    let load_only = [Instruction::LoadWeights { spad_row: 0, rows: 2, cols: 2 }, Instruction::Halt];
    let swap = [
        Instruction::Matmul { a_row: 0, acc_row: 0, rows: 1, swap: true, accumulate: false },
        Instruction::Halt,
    ];
    let reuse = [
        Instruction::Matmul { a_row: 2, acc_row: 1, rows: 1, swap: false, accumulate: false },
        Instruction::Halt,
    ];
    let load_and_swap = [
        Instruction::LoadWeights { spad_row: 0, rows: 2, cols: 2 },
        Instruction::Matmul { a_row: 2, acc_row: 0, rows: 1, swap: true, accumulate: false },
        Instruction::Halt,
    ];
    let mut accs = Vec::new();
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let mut m = golden(kind, cfg, 16).unwrap();
        m.write(Region::Spad, 0, &[1, 2, 3, 4, 5, 6]).unwrap();
        m.run(&load_only).unwrap();
        let err = m.run(&swap).unwrap_err();
        assert_eq!(
            err,
            systole_core::MachineError::Exec {
                index: 0,
                kind: systole_core::machine::ExecErrorKind::NoWeightsLoaded
            },
            "{kind:?}: the previous program's load must not carry over"
        );
        m.run(&load_and_swap).unwrap();
        // The active weights do carry over: the next program's plain matmul uses them.
        m.run(&reuse).unwrap();
        let mut acc = [0u8; 16];
        m.read(Region::Acc, 0, &mut acc).unwrap();
        assert_eq!(acc[..8], acc[8..], "{kind:?}: row 1 is row 0 again, from the kept weights");
        assert_ne!(acc[..8], [0; 8], "{kind:?}");
        accs.push(acc);
    }
    assert_eq!(accs[0], accs[1]);
}
