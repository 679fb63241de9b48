//! LeNet-5's training step on MNIST-shaped batches (1 x 28 x 28, ten classes, momentum 0.9):
//! the f32 CPU reference executor, the CPU twin of the GPU's step and the GPU, each checked
//! against the reference before it is timed. The accelerator's rows join when its compiler
//! lowers convolutions.

use anyhow::anyhow;
use systole_core::exec::{Executor, Plain};
use systole_core::graph::Graph;
use systole_core::layers::Net;
use systole_core::params::{Params, SplitMix64};

use super::train::{loss_check, params_check, BUDGET, SGD};
use super::{gpu_failed, gpu_unavailable, time_runs, Bench, Kind, Row};
use crate::gpu::plan::StepPlan;
use crate::gpu::train::GpuTrainer;
use crate::gpu::twin::TwinTrainer;
use crate::gpu::GpuDtype;

fn row(batch: u32, machine: impl Into<String>, kind: Kind, dtype: &str, macs: u64) -> Row {
    let mut r =
        Row::new("train", &format!("lenet step, batch {batch}"), machine, kind, dtype, macs);
    r.batch = Some(batch);
    r
}

pub fn suite(bench: &Bench, batch: u32, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let net = Net::lenet(10).map_err(|e| anyhow!("LeNet: {e}"))?;
    let graph = Graph::network_training(&net, SGD).map_err(|e| anyhow!("LeNet: {e}"))?;
    let params = Params::init(&net, 0);
    let mut rng = SplitMix64(200);
    let x: Vec<f32> = (0..batch as usize * 784).map(|_| rng.next_f64() as f32).collect();
    let y: Vec<u16> = (0..batch).map(|_| rng.below(10) as u16).collect();
    let plan =
        StepPlan::training(&graph, batch as usize, GpuDtype::F32).map_err(|e| anyhow!("{e}"))?;
    let macs = plan.macs();

    let mut reference = Executor::new(graph.clone(), Plain::<f32>::new(), &params);
    let want = reference.step(&x, &y);
    let stepped = reference.params();
    let seconds = time_runs(BUDGET, 10, || {
        std::hint::black_box(reference.step(&x, &y));
        Ok(())
    })?;
    rows.push(
        row(batch, "cpu f32 reference executor (1 thread)", Kind::Measured, "f32", macs)
            .timed(seconds, Some(bench.cpu.peak_macs_per_s))
            .moved(plan.bytes())
            .checked("is the reference"),
    );
    let mut twin = TwinTrainer::new(&graph, &params, GpuDtype::F32);
    let got = twin.step(&x, &y).map_err(|e| anyhow!("{e}"))?;
    let check = loss_check("cpu twin", got.loss, want.loss, 1e-5)?;
    params_check("cpu twin", &twin.params(), &stepped, 1e-5)?;
    let seconds =
        time_runs(BUDGET, 10, || twin.step(&x, &y).map(|_| ()).map_err(|e| anyhow!("{e}")))?;
    rows.push(
        row(batch, "cpu twin of the gpu step (1 thread)", Kind::Measured, "f32", macs)
            .timed(seconds, Some(bench.cpu.peak_macs_per_s))
            .moved(plan.bytes())
            .checked(check),
    );

    for (dtype, tol) in [(GpuDtype::F32, 1e-4), (GpuDtype::Bf16, 2e-2)] {
        let label = "gpu step, one CUDA graph";
        let r = row(batch, label, Kind::Measured, dtype.name(), macs);
        if bench.gpu.is_none() {
            rows.push(gpu_unavailable(bench, r));
            continue;
        }
        let mut gpu = GpuTrainer::new(&graph, &params, dtype).map_err(|e| gpu_failed(label, e))?;
        let got = gpu.step(&x, &y).map_err(|e| gpu_failed(label, e))?;
        let check = loss_check(label, got.loss, want.loss, tol)?;
        let after = gpu.params().map_err(|e| gpu_failed(label, e))?;
        params_check(label, &after, &stepped, tol as f32)?;
        let (warmup, reps) = (20, 200);
        let (ms, how) = gpu.time_step(&x, &y, warmup, reps).map_err(|e| gpu_failed(label, e))?;
        let plan = StepPlan::training(&graph, batch as usize, dtype).map_err(|e| anyhow!("{e}"))?;
        rows.push(
            r.timed(ms / 1e3, None)
                .moved(plan.bytes())
                .checked(check)
                .noted(format!("median of {reps} {how} after {warmup}, CUDA events")),
        );
    }
    Ok(())
}
