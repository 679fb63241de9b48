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

/// INT8 inference of `net` on the functional and cycle machines of a 4 x 4 INT8 array (blocking
/// and decoupled) whose DRAM starts full of `fill` bytes: the same logits bits, in the compiled
/// cycles, near the f32 reference's. Returns them.
pub fn int8_inference_runs_on_every_golden_machine(net: &Net, fill: u8) -> Vec<f32> {
    use systole_core::compile::{compile_inference, Int8Plan};
    use systole_core::exec::Plain;
    use systole_core::machine::Region;
    use systole_core::train::Int8Inference;
    let graph = Graph::network(net).unwrap();
    let params = Params::init(net, 5);
    let (x, _) = batch(&mut SplitMix64(8), 6, graph.inputs() as usize, graph.classes());
    let plan = Int8Plan::calibrate(&graph, &params, &x, 6).unwrap();
    let mut logits = Vec::new();
    for (kind, schedule) in [
        (GoldenKind::Functional, Schedule::Blocking),
        (GoldenKind::Cycle, Schedule::Blocking),
        (GoldenKind::Cycle, Schedule::Decoupled),
    ] {
        let config = ArrayConfig::new(4, 4, Dtype::Int8).with_schedule(schedule);
        let dram = Int8Inference::dram_needed(&graph, &config, &plan, 6).unwrap();
        let mut machine = golden(kind, config, dram).unwrap();
        machine.write(Region::Dram, 0, &vec![fill; dram]).unwrap();
        let mut int8 = Int8Inference::new(machine, graph.clone(), &params, plan.clone()).unwrap();
        let (l, work) = int8.logits(&x, 6).unwrap();
        let step = compile_inference(&graph, &config, 6, Some(&plan)).unwrap();
        assert_eq!(work.cycles, step.forward_cycles, "{kind:?}");
        logits.push(l);
    }
    assert_eq!(logits[0], logits[1], "functional and cycle machines");
    assert_eq!(logits[0], logits[2], "blocking and decoupled");
    let mut reference = Executor::new(graph.clone(), Plain::<f32>::new(), &params);
    let want = reference.logits(&x, 6);
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in logits[0].iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 0.05 * scale, "logit {i}: int8 {g} vs f32 {w} (scale {scale})");
    }
    logits.swap_remove(0)
}
