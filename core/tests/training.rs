//! Training: autodiff against finite differences, the compiled step against the reference
//! executor bit for bit, and the cycle machine against the functional one.

use systole_core::exec::{Accel, Executor, Plain};
use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::train::AccelTrainer;
use systole_core::{ArrayConfig, Dataflow, Dtype, Schedule};

fn spec(inputs: u32, hidden: &[u32], classes: u32) -> MlpSpec {
    MlpSpec { inputs, hidden: heapless::Vec::from_slice(hidden).unwrap(), classes }
}

/// A random batch: features in [-1, 1), labels below `classes`.
fn batch(rng: &mut SplitMix64, rows: usize, inputs: usize, classes: u32) -> (Vec<f32>, Vec<u16>) {
    let x = (0..rows * inputs).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
    let y = (0..rows).map(|_| rng.below(classes as u64) as u16).collect();
    (x, y)
}

#[test]
fn gradients_match_finite_differences() {
    let spec = spec(5, &[7, 4], 3);
    let graph = Graph::training(&spec, Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0 }).unwrap();
    let params = Params::init(&spec, 3);
    let mut rng = SplitMix64(9);
    let (x, y) = batch(&mut rng, 6, 5, 3);
    let x: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let checked = crate::finite_differences::check_gradients(&graph, &params, &x, &y);
    assert_eq!(checked, spec.parameter_count());
}

/// Trains `steps` steps on the compiled machine and on the reference executor with the
/// accelerator's numerics; every loss and every parameter bit must agree.
fn compiled_equals_reference(
    config: ArrayConfig,
    kind: GoldenKind,
    sgd: Sgd,
    spec: &MlpSpec,
    batch_rows: &[usize],
) {
    let graph = Graph::training(spec, sgd).unwrap();
    let params = Params::init(spec, 11);
    let max = *batch_rows.iter().max().unwrap() as u32;
    let dram = AccelTrainer::dram_needed(&graph, &config, max, max).unwrap();
    let machine = golden(kind, config, dram).unwrap();
    let mut accel = AccelTrainer::new(machine, graph.clone(), &params).unwrap();
    let mut reference = Executor::new(graph, Accel { config }, &params);
    let mut rng = SplitMix64(5);
    for (step, &rows) in batch_rows.iter().enumerate() {
        let (x, y) = batch(&mut rng, rows, spec.inputs as usize, spec.classes);
        let (got, work) = accel.step(&x, &y).unwrap();
        // The reference reads its input as the host writes it: through the bf16 cast.
        let want = reference.step(&x, &y);
        assert_eq!(got, want, "{kind:?} step {step}: loss and accuracy");
        assert!(work.cycles > 0 && work.macs > 0);
        let (p, q) = (accel.params().unwrap(), reference.params());
        for (l, (a, b)) in p.layers.iter().zip(&q.layers).enumerate() {
            for (i, (u, v)) in
                a.weight.iter().zip(&b.weight).chain(a.bias.iter().zip(&b.bias)).enumerate()
            {
                assert_eq!(
                    u.to_bits(),
                    v.to_bits(),
                    "{kind:?} step {step} layer {l} param {i}: {u} vs {v}"
                );
            }
        }
    }
}

#[test]
fn compiled_step_equals_the_reference_bit_for_bit() {
    let sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 };
    let plain = Sgd { lr: 0.2, momentum: 0.0, weight_decay: 0.0 };
    let spec = spec(13, &[9, 6], 4);
    for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
        for schedule in Schedule::ALL {
            let config = ArrayConfig {
                spad_depth: 64,
                acc_depth: 24,
                ..ArrayConfig::new(4, 3, Dtype::Bf16)
            }
            .with_dataflow(dataflow)
            .with_schedule(schedule);
            compiled_equals_reference(config, GoldenKind::Functional, sgd, &spec, &[7, 7, 5, 7]);
            compiled_equals_reference(config, GoldenKind::Functional, plain, &spec, &[7, 3]);
        }
    }
}

#[test]
fn one_training_step_on_the_cycle_machine_equals_the_functional_machine() {
    for schedule in Schedule::ALL {
        cycle_step_equals_functional(ArrayConfig::new(8, 8, Dtype::Bf16).with_schedule(schedule));
    }
}

fn cycle_step_equals_functional(config: ArrayConfig) {
    let spec = spec(64, &[32], 10);
    let sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 0.0 };
    compiled_equals_reference(config, GoldenKind::Cycle, sgd, &spec, &[16]);
    // And the cycle counts: the machine's equals the compiler's timing model.
    let graph = Graph::training(&spec, sgd).unwrap();
    let params = Params::init(&spec, 1);
    let dram = AccelTrainer::dram_needed(&graph, &config, 16, 16).unwrap();
    let mut cycle =
        AccelTrainer::new(golden(GoldenKind::Cycle, config, dram).unwrap(), graph.clone(), &params)
            .unwrap();
    let mut functional =
        AccelTrainer::new(golden(GoldenKind::Functional, config, dram).unwrap(), graph, &params)
            .unwrap();
    let (x, y) = batch(&mut SplitMix64(2), 16, 64, 10);
    let (a, wa) = cycle.step(&x, &y).unwrap();
    let (b, wb) = functional.step(&x, &y).unwrap();
    assert_eq!(a, b);
    assert_eq!(wa, wb, "{:?}: the cycle machine's count and the timing model's", config.schedule);
    let compiled = cycle.compiled(16).unwrap();
    assert_eq!(compiled.segments.iter().map(|s| s.cycles).sum::<u64>() + 2, compiled.cycles());
}

#[test]
fn bf16_loss_tracks_the_f32_reference() {
    let spec = spec(16, &[24], 5);
    let sgd = Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 };
    let graph = Graph::training(&spec, sgd).unwrap();
    let params = Params::init(&spec, 4);
    let mut f32_ref = Executor::new(graph.clone(), Plain::<f32>::new(), &params);
    let mut accel =
        Executor::new(graph, Accel { config: ArrayConfig::new(16, 16, Dtype::Bf16) }, &params);
    let mut rng = SplitMix64(8);
    // A learnable task: the label is the arg-max of the first five features. Compare mean
    // losses over windows of 25 steps (single batches are noisy).
    let (mut sum_f32, mut sum_bf16) = (0.0, 0.0);
    for step in 0..200 {
        let (x, _) = batch(&mut rng, 32, 16, 5);
        let y: Vec<u16> =
            x.chunks(16).map(|r| systole_core::exec::argmax(&r[..5]) as u16).collect();
        sum_f32 += f32_ref.step(&x, &y).loss;
        sum_bf16 += accel.step(&x, &y).loss;
        if step % 25 == 24 {
            let (a, b) = (sum_f32 / 25.0, sum_bf16 / 25.0);
            assert!((a - b).abs() <= 0.05 * a, "steps to {step}: mean loss f32 {a} vs bf16 {b}");
            (sum_f32, sum_bf16) = (0.0, 0.0);
        }
    }
}

/// Regression: an inference pass of a training graph (`AccelTrainer::logits`, as `systole train`
/// runs on the test split after every epoch) used to place its activations over the gradients and
/// velocities, so momentum was corrupted and BF16 training drifted far from the f32 reference.
#[test]
fn evaluating_between_steps_leaves_the_momentum_intact() {
    let spec = spec(12, &[10], 4);
    let sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 0.0 };
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let graph = Graph::training(&spec, sgd).unwrap();
    let params = Params::init(&spec, 6);
    // The evaluation's input alone (100 x 12 bf16) is larger than all gradients and velocities.
    let dram = AccelTrainer::dram_needed(&graph, &config, 8, 100).unwrap();
    let trainer = || {
        let machine = golden(GoldenKind::Functional, config, dram).unwrap();
        AccelTrainer::new(machine, graph.clone(), &params).unwrap()
    };
    let (mut evaluated, mut plain) = (trainer(), trainer());
    let mut rng = SplitMix64(3);
    let (eval_x, _) = batch(&mut rng, 100, 12, 4);
    for step in 0..4 {
        let (x, y) = batch(&mut rng, 8, 12, 4);
        assert_eq!(evaluated.step(&x, &y).unwrap(), plain.step(&x, &y).unwrap(), "step {step}");
        evaluated.logits(&eval_x, 100).unwrap();
    }
    assert_eq!(evaluated.params().unwrap(), plain.params().unwrap());
}
