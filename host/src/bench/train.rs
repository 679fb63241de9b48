//! The training-step suite: one SGD step of the digits MLP (64-64-10, momentum 0.9) at each
//! batch size, on every machine, each checked against the reference executor before it is
//! timed.

use std::time::Duration;

use anyhow::{anyhow, bail};
use systole_core::check::{first_outside, Tolerance};
use systole_core::compile::compile_training;
use systole_core::exec::{Executor, Plain};
use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::params::{Params, SplitMix64};
use systole_core::{ArrayConfig, Dtype};

use super::{accel_step, gpu_failed, gpu_unavailable, time_runs, Bench, Kind, Row};
use crate::gpu::plan::StepPlan;
use crate::gpu::train::GpuTrainer;
use crate::gpu::twin::TwinTrainer;
use crate::gpu::GpuDtype;

/// The digits MLP: 8x8 pixels in, one hidden layer of 64, ten classes.
pub const WIDTHS: [u32; 3] = [64, 64, 10];
pub(super) const BUDGET: Duration = Duration::from_millis(700);
/// Batches above this are not stepped on the cycle machine (seconds per step).
const CYCLE_MAX_BATCH: u32 = 1024;

pub fn graph() -> Graph {
    let spec = MlpSpec {
        inputs: WIDTHS[0],
        hidden: WIDTHS[1..2].iter().copied().collect(),
        classes: WIDTHS[2],
    };
    Graph::training(&spec, Sgd::DEFAULT).expect("the digits MLP is a valid graph")
}

/// The MLP step's workload name at `batch`.
pub fn workload(batch: u32) -> String {
    format!("mlp 64-64-10 step, batch {batch}")
}

fn row(batch: u32, machine: impl Into<String>, kind: Kind, dtype: &str, macs: u64) -> Row {
    let mut r = Row::new("train", &workload(batch), machine, kind, dtype, macs);
    r.batch = Some(batch);
    r
}

/// A batch of `rows` digits-shaped samples: pixels in [0, 1), labels 0 to 9.
fn batch(rows: usize, seed: u64) -> (Vec<f32>, Vec<u16>) {
    let mut rng = SplitMix64(seed);
    let x = (0..rows * 64).map(|_| rng.next_f64() as f32).collect();
    let y = (0..rows).map(|_| rng.below(10) as u16).collect();
    (x, y)
}

pub fn suite(bench: &Bench, batches: &[u32], rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let graph = graph();
    let params = Params::init(&graph.net, 0);
    for (i, &b) in batches.iter().enumerate() {
        let (x, y) = batch(b as usize, 100 + i as u64);
        let macs = StepPlan::training(&graph, b as usize, GpuDtype::F32)
            .map_err(|e| anyhow!("{e}"))?
            .macs();
        let workload = |machine: &str, kind: Kind, dtype: &str| row(b, machine, kind, dtype, macs);
        accel_step::rows(bench, (&graph, &params), (&x, &y), CYCLE_MAX_BATCH, &workload, rows)?;
        cpu_and_gpu_rows(bench, (&graph, &params), (&x, &y), 50, &workload, rows)?;

        // The projection.
        let projected = ArrayConfig { dtype: Dtype::Bf16, ..bench.projected };
        let pstep = compile_training(&graph, &projected, b)
            .map_err(|e| anyhow!("projected, batch {b}: {e}"))?;
        let mut p =
            accel_step::model_row(&projected, &pstep, Kind::Projected, "timing model", &workload);
        p.machine = format!(
            "projected {}x{} @ {} MHz",
            projected.rows, projected.cols, projected.clock_mhz
        );
        rows.push(p.noted("TPU-class array, timing model"));
    }
    Ok(())
}

/// The step of `graph` from `params` on the batch `(x, y)` on the CPU and the GPU: the f32
/// reference executor, the CPU twin of the GPU's step and the GPU in f32 and bf16 (or
/// "unavailable"), each checked against the reference's first step before it is timed (the
/// CPU rows at least `iterations` times). `row` makes a row of this workload.
pub(super) fn cpu_and_gpu_rows(
    bench: &Bench,
    (graph, params): (&Graph, &Params),
    (x, y): (&[f32], &[u16]),
    iterations: usize,
    row: &dyn Fn(&str, Kind, &str) -> Row,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let batch = y.len();
    let plan = StepPlan::training(graph, batch, GpuDtype::F32).map_err(|e| anyhow!("{e}"))?;
    let mut reference = Executor::new(graph.clone(), Plain::<f32>::new(), params);
    let want = reference.step(x, y);
    let stepped = reference.params();
    let seconds = time_runs(BUDGET, iterations, || {
        std::hint::black_box(reference.step(x, y));
        Ok(())
    })?;
    rows.push(
        row("cpu f32 reference executor (1 thread)", Kind::Measured, "f32")
            .timed(seconds, Some(bench.cpu.peak_macs_per_s))
            .moved(plan.bytes())
            .checked("is the reference"),
    );
    let mut twin = TwinTrainer::new(graph, params, GpuDtype::F32);
    let got = twin.step(x, y).map_err(|e| anyhow!("{e}"))?;
    let check = loss_check("cpu twin", got.loss, want.loss, 1e-5)?;
    params_check("cpu twin", &twin.params(), &stepped, 1e-5)?;
    let seconds =
        time_runs(BUDGET, iterations, || twin.step(x, y).map(|_| ()).map_err(|e| anyhow!("{e}")))?;
    rows.push(
        row("cpu twin of the gpu step (1 thread)", Kind::Measured, "f32")
            .timed(seconds, Some(bench.cpu.peak_macs_per_s))
            .moved(plan.bytes())
            .checked(check),
    );

    // The GPU: the whole step as one CUDA graph.
    let label = "gpu step, one CUDA graph";
    for (dtype, tol) in [(GpuDtype::F32, 1e-4), (GpuDtype::Bf16, 2e-2)] {
        let r = row(label, Kind::Measured, dtype.name());
        if bench.gpu.is_none() {
            rows.push(gpu_unavailable(bench, r));
            continue;
        }
        let mut gpu = GpuTrainer::new(graph, params, dtype).map_err(|e| gpu_failed(label, e))?;
        let got = gpu.step(x, y).map_err(|e| gpu_failed(label, e))?;
        let check = loss_check(label, got.loss, want.loss, tol)?;
        let after = gpu.params().map_err(|e| gpu_failed(label, e))?;
        params_check(label, &after, &stepped, tol as f32)?;
        let (warmup, reps) = (20, 200);
        let (ms, how) = gpu.time_step(x, y, warmup, reps).map_err(|e| gpu_failed(label, e))?;
        let bytes = StepPlan::training(graph, batch, dtype).map_err(|e| anyhow!("{e}"))?.bytes();
        rows.push(
            r.timed(ms / 1e3, None)
                .moved(bytes)
                .checked(check)
                .noted(format!("median of {reps} {how} after {warmup}, CUDA events")),
        );
    }
    Ok(())
}

/// The first step's loss against the f32 reference's, relatively.
pub(super) fn loss_check(what: &str, got: f64, want: f64, tol: f64) -> anyhow::Result<String> {
    let rel = (got - want).abs() / want.abs().max(1e-30);
    let tolerance = Tolerance { abs: 0.0, rel: tol };
    if !tolerance.admits(got, want, want.abs().max(1e-30)) {
        bail!("{what}: first-step loss {got} vs the f32 reference's {want} (relative {rel:.1e} > {tol:.0e})");
    }
    Ok(format!("loss within {tol:.0e} of the f32 reference ({rel:.1e})"))
}

/// The parameters after the first step against the f32 reference's: `|got - want| <= tol (1 +
/// |want|)` for every weight and bias ([`first_outside`]).
pub(super) fn params_check(
    what: &str,
    got: &Params,
    want: &Params,
    tol: f32,
) -> anyhow::Result<()> {
    let tol = Tolerance { abs: tol as f64, rel: tol as f64 };
    for (l, (g, w)) in got.layers.iter().zip(&want.layers).enumerate() {
        let weights = first_outside(&w.weight, &g.weight, tol);
        let biases =
            first_outside(&w.bias, &g.bias, tol).map(|(i, e, v)| (i + w.weight.len(), e, v));
        if let Some((i, b, a)) = weights.or(biases) {
            bail!(
                "{what}: layer {l} parameter {i} is {a} after one step, the f32 reference's is {b}"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_check_accepts_rounding_and_refuses_more() {
        assert!(loss_check("x", 2.50001, 2.5, 1e-5).is_ok());
        assert!(loss_check("x", 2.4, 2.3, 1e-2).is_err());
        assert!(loss_check("x", f64::NAN, 2.3, 1e-2).is_err());
    }

    #[test]
    fn the_parameter_check_names_the_first_difference() {
        let g = graph();
        let p = Params::init(&g.net, 1);
        assert!(params_check("x", &p, &p, 0.0).is_ok());
        let mut q = p.clone();
        q.layers[1].bias[3] += 0.5;
        let e = params_check("x", &q, &p, 1e-3).unwrap_err().to_string();
        assert!(e.contains("layer 1 parameter 643"), "{e}");
    }
}
