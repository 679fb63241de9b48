//! Throughput of the golden machines.
//!
//! * functional: MAC/s of a 256 x 256 x 256 GEMM on a 16 x 16 array (target: 2 G MAC/s, one
//!   thread), beside the naive reference loop for scale;
//! * cycle: PE-updates per second (one PE stepped one clock) on 16 x 16 and 64 x 64 arrays
//!   (target: 100 M/s).
//!
//! Every benchmark checks its result against the reference before it is timed.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use systole_core::machine::cycle::CycleMachine;
use systole_core::machine::functional::FunctionalMachine;
use systole_core::machine::{run_gemm, Machine};
use systole_core::reference;
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{Arith, ArrayConfig, Bf16, Dtype, Instruction, Int8, BF16};

fn operands(elems: usize, dtype: Dtype, seed: u64) -> Vec<u8> {
    let mut rng = systole_core::params::SplitMix64(seed);
    let mut next = move || (rng.next_u64() >> 32) as u32;
    match dtype {
        Dtype::Int8 => (0..elems).map(|_| next() as u8).collect(),
        Dtype::Bf16 => (0..elems)
            .flat_map(|_| {
                Bf16::from_f32(next() as f32 / u32::MAX as f32 * 2.0 - 1.0).0.to_le_bytes()
            })
            .collect(),
    }
}

fn elems<A: Arith>(bytes: &[u8]) -> Vec<A::Elem> {
    bytes
        .chunks_exact(A::ELEM_BYTES)
        .map(|c| {
            A::elem_from_bits(if c.len() == 1 {
                c[0] as u16
            } else {
                u16::from_le_bytes([c[0], c[1]])
            })
        })
        .collect()
}

struct Setup {
    plan: GemmPlan,
    program: Vec<Instruction>,
    dram: usize,
    a: Vec<u8>,
    b: Vec<u8>,
}

fn setup(config: ArrayConfig, shape: GemmShape) -> Setup {
    let (layout, dram) = GemmLayout::packed(&config, &shape).unwrap();
    let plan = GemmPlan::new(&config, shape, layout).unwrap();
    let mut program = Vec::new();
    plan.emit(&mut |i| program.push(i));
    let a = operands((shape.m * shape.k) as usize, config.dtype, 1);
    let b = operands((shape.k * shape.n) as usize, config.dtype, 2);
    Setup { plan, program, dram, a, b }
}

/// Runs once, checks against the reference, and returns the machine ready to be timed.
fn checked<A: Arith, M: Machine>(s: &Setup, mut m: M) -> M {
    let (c, _) = run_gemm(&mut m, &s.plan, &s.a, &s.b).unwrap();
    let GemmShape { m: mm, k, n } = s.plan.shape;
    let want = reference::gemm::<A>(
        &elems::<A>(&s.a),
        &elems::<A>(&s.b),
        mm as usize,
        k as usize,
        n as usize,
        s.plan.k_chunk() as usize,
    );
    assert!(c == want, "{} disagrees with the reference", m.name());
    m
}

fn functional<A: Arith>(c: &mut Criterion, dtype: Dtype) {
    let config = ArrayConfig::new(16, 16, dtype);
    let shape = GemmShape { m: 256, k: 256, n: 256 };
    let s = setup(config, shape);
    let mut group = c.benchmark_group("functional_gemm_256");
    group.throughput(Throughput::Elements(shape.macs()));
    let mut m = checked::<A, _>(&s, FunctionalMachine::<A>::new(config, s.dram));
    group.bench_function(BenchmarkId::new("16x16", dtype.name()), |bench| {
        bench.iter(|| black_box(m.run(&s.program).unwrap()))
    });
    let (a, b) = (elems::<A>(&s.a), elems::<A>(&s.b));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("naive_reference", dtype.name()), |bench| {
        bench.iter(|| black_box(reference::gemm::<A>(&a, &b, 256, 256, 256, 16)))
    });
    group.finish();
}

fn cycle<A: Arith>(c: &mut Criterion, dtype: Dtype, side: u16) {
    let config = ArrayConfig::new(side, side, dtype);
    let shape = GemmShape { m: 256, k: 2 * side as u32, n: 2 * side as u32 };
    let s = setup(config, shape);
    let mut m = checked::<A, _>(&s, CycleMachine::<A>::new(config, s.dram));
    let before = m.pe_updates;
    m.run(&s.program).unwrap();
    let per_run = m.pe_updates - before;
    let mut group = c.benchmark_group("cycle_pe_updates");
    group.throughput(Throughput::Elements(per_run));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new(format!("{side}x{side}"), dtype.name()), |bench| {
        bench.iter(|| black_box(m.run(&s.program).unwrap()))
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    functional::<Int8>(c, Dtype::Int8);
    functional::<BF16>(c, Dtype::Bf16);
    for side in [16, 64] {
        cycle::<Int8>(c, Dtype::Int8, side);
        cycle::<BF16>(c, Dtype::Bf16, side);
    }
}

criterion_group!(machines, benches);
criterion_main!(machines);
