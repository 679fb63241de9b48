//! What the convolutional networks' tests share: their layers, random batches, and training
//! on a machine beside `Executor<Accel>`.

use systole_core::exec::{Accel, Executor};
use systole_core::graph::{Graph, Sgd};
use systole_core::layers::{Layer, Net};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::train::AccelTrainer;
use systole_core::{ArrayConfig, Dataflow, Dtype, Schedule};

pub fn conv(i: u32, o: u32, kernel: u32, stride: u32, padding: u32) -> Layer {
    Layer::Conv2d { in_channels: i, out_channels: o, kernel, stride, padding }
}

pub fn batch(
    rng: &mut SplitMix64,
    rows: usize,
    inputs: usize,
    classes: u32,
) -> (Vec<f32>, Vec<u16>) {
    let x = (0..rows * inputs).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
    let y = (0..rows).map(|_| rng.below(classes as u64) as u16).collect();
    (x, y)
}

/// Steps on a machine and on `Executor<Accel>` from the same weights: every loss, hit count
/// and parameter bit agrees; returns the machine's total cycles.
pub fn trains_as_the_reference(
    net: &Net,
    config: ArrayConfig,
    kind: GoldenKind,
    rows: &[usize],
) -> u64 {
    let sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 };
    let graph = Graph::network_training(net, sgd).unwrap();
    let params = Params::init(net, 3);
    let max = *rows.iter().max().unwrap() as u32;
    let dram = AccelTrainer::dram_needed(&graph, &config, max, max).unwrap();
    let mut accel =
        AccelTrainer::new(golden(kind, config, dram).unwrap(), graph.clone(), &params).unwrap();
    let mut reference = Executor::new(graph.clone(), Accel { config }, &params);
    let mut rng = SplitMix64(7);
    let mut cycles = 0;
    for (step, &n) in rows.iter().enumerate() {
        let (x, y) = batch(&mut rng, n, graph.inputs() as usize, graph.classes());
        let (got, work) = accel.step(&x, &y).unwrap();
        assert_eq!(got, reference.step(&x, &y), "{config:?} {kind:?} step {step}");
        cycles += work.cycles;
        let (p, q) = (accel.params().unwrap(), reference.params());
        for (l, (a, b)) in p.layers.iter().zip(&q.layers).enumerate() {
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a.weight), bits(&b.weight), "step {step} layer {l} weight");
            assert_eq!(bits(&a.bias), bits(&b.bias), "step {step} layer {l} bias");
        }
        // Evaluation between steps: the same logits bits as the reference's forward pass.
        let (x, y) = batch(&mut rng, 3, graph.inputs() as usize, graph.classes());
        let (logits, _) = accel.logits(&x, 3).unwrap();
        reference.forward(&x, &y);
        let want = &reference.values[graph.logits as usize];
        assert_eq!(
            logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    cycles
}

/// One step on `rows` rows of the given inputs on a machine and on `Executor<Accel>`: the same
/// loss and parameter bits.
pub fn trains_with_inputs(
    net: &Net,
    config: ArrayConfig,
    kind: GoldenKind,
    x: &[f32],
    rows: usize,
) {
    let sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 };
    let graph = Graph::network_training(net, sgd).unwrap();
    let params = Params::init(net, 3);
    let dram = AccelTrainer::dram_needed(&graph, &config, rows as u32, rows as u32).unwrap();
    let mut accel =
        AccelTrainer::new(golden(kind, config, dram).unwrap(), graph.clone(), &params).unwrap();
    let mut reference = Executor::new(graph.clone(), Accel { config }, &params);
    let y: Vec<u16> = (0..rows).map(|i| (i as u32 % graph.classes()) as u16).collect();
    let (got, _) = accel.step(x, &y).unwrap();
    assert_eq!(got, reference.step(x, &y));
    let (p, q) = (accel.params().unwrap(), reference.params());
    for (l, (a, b)) in p.layers.iter().zip(&q.layers).enumerate() {
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a.weight), bits(&b.weight), "layer {l} weight");
        assert_eq!(bits(&a.bias), bits(&b.bias), "layer {l} bias");
    }
}

/// Three steps of `net` on the functional machine of a small 4 x 3 BF16 array (three columns
/// split wide channels; 48 accumulator rows split long runs), every dataflow and schedule,
/// each equal to `Executor<Accel>` bit for bit.
pub fn trains_on_small_arrays(net: &Net) {
    for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
        for schedule in Schedule::ALL {
            let config = ArrayConfig {
                spad_depth: 64,
                acc_depth: 48,
                ..ArrayConfig::new(4, 3, Dtype::Bf16)
            }
            .with_dataflow(dataflow)
            .with_schedule(schedule);
            trains_as_the_reference(net, config, GoldenKind::Functional, &[5, 5, 2]);
        }
    }
}
