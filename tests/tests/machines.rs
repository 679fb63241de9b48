//! Golden machines against each other, the naive reference and the closed form.

use systole_core::machine::GoldenKind;
use systole_core::reference;
use systole_core::tiler::GemmShape;
use systole_core::{ArrayConfig, Bf16, Dataflow, Dtype, BF16, Int8};
use systole_tests::{assert_bit_identical, gemm_on, SplitMix};

fn reference_gemm(config: &ArrayConfig, shape: GemmShape, a: &[u8], b: &[u8], chunk: u32) -> Vec<u32> {
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
}

#[test]
fn small_gemms_agree_everywhere() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
            for (r, c) in [(1, 1), (2, 3), (4, 4), (3, 2)] {
                let cfg = ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(r, c, dtype) }
                    .with_dataflow(dataflow);
                for (m, k, n) in [(1, 1, 1), (5, 7, 3), (17, 9, 11), (40, 70, 5)] {
                    check_gemm(cfg, GemmShape { m, k, n }, (m * 1000 + k * 10 + n) as u64);
                }
            }
        }
    }
}
