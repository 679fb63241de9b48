//! One BF16 training step of the digits MLP (64-64-10, batch 32) on a 16 x 16 array, on each
//! golden machine and on the f32 CPU reference, for scale. The step is checked against the
//! reference executor with the accelerator's numerics before it is timed.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use systole_core::exec::{Accel, Executor, Plain};
use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::train::AccelTrainer;
use systole_core::{ArrayConfig, Dtype};

fn setup() -> (Graph, Params, Vec<f32>, Vec<u16>, ArrayConfig) {
    let spec =
        MlpSpec { inputs: 64, hidden: heapless::Vec::from_slice(&[64]).unwrap(), classes: 10 };
    let graph = Graph::training(&spec, Sgd { lr: 0.05, momentum: 0.9, weight_decay: 0.0 }).unwrap();
    let params = Params::init(&spec, 0);
    let mut rng = SplitMix64(1);
    let x = (0..32 * 64).map(|_| rng.next_f64() as f32).collect();
    let y = (0..32).map(|_| rng.below(10) as u16).collect();
    (graph, params, x, y, ArrayConfig::new(16, 16, Dtype::Bf16))
}

fn bench(c: &mut Criterion) {
    let (graph, params, x, y, config) = setup();
    let macs = systole_core::compile::compile_training(&graph, &config, 32).unwrap().macs();
    let mut group = c.benchmark_group("train_step_digits_mlp");
    group.throughput(Throughput::Elements(macs));
    for kind in [GoldenKind::Functional, GoldenKind::Cycle] {
        let dram = AccelTrainer::dram_needed(&graph, &config, 32, 32).unwrap();
        let mut t =
            AccelTrainer::new(golden(kind, config, dram).unwrap(), graph.clone(), &params).unwrap();
        let mut reference = Executor::new(graph.clone(), Accel { config }, &params);
        assert_eq!(t.step(&x, &y).unwrap().0, reference.step(&x, &y), "{kind:?} vs reference");
        group.bench_function(format!("{kind:?}").to_lowercase(), |b| {
            b.iter(|| black_box(t.step(&x, &y).unwrap()))
        });
    }
    let mut f32_ref = Executor::new(graph.clone(), Plain::<f32>::new(), &params);
    group.bench_function("cpu_f32_reference", |b| b.iter(|| black_box(f32_ref.step(&x, &y))));
    group.finish();
}

criterion_group!(training, bench);
criterion_main!(training);
