//! LeNet-5's training step on MNIST-shaped batches (1 x 28 x 28, ten classes, momentum 0.9):
//! the accelerator (its compiled step's cycles, the golden machines), the f32 CPU reference
//! executor, the CPU twin of the GPU's step and the GPU, each checked before it is timed.

use anyhow::anyhow;
use systole_core::graph::{Graph, Sgd};
use systole_core::layers::Net;
use systole_core::params::{Params, SplitMix64};

use super::train::cpu_and_gpu_rows;
use super::{accel_step, Bench, Kind, Row};
use crate::gpu::plan::StepPlan;
use crate::gpu::GpuDtype;

/// Batches above this are not stepped on the cycle machine (a LeNet step of 32 rows is 2.6
/// million cycles on a 16 x 16 array).
const CYCLE_MAX_BATCH: u32 = 16;

/// LeNet-5 for ten classes.
pub fn network() -> anyhow::Result<Net> {
    Net::lenet(10).map_err(|e| anyhow!("LeNet: {e}"))
}

pub fn workload(batch: u32) -> String {
    format!("lenet step, batch {batch}")
}

pub fn suite(bench: &Bench, batch: u32, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let net = network()?;
    let graph = Graph::network_training(&net, Sgd::DEFAULT).map_err(|e| anyhow!("LeNet: {e}"))?;
    let params = Params::init(&net, 0);
    let mut rng = SplitMix64(200);
    let x: Vec<f32> = (0..batch as usize * 784).map(|_| rng.next_f64() as f32).collect();
    let y: Vec<u16> = (0..batch).map(|_| rng.below(10) as u16).collect();
    let macs = StepPlan::training(&graph, batch as usize, GpuDtype::F32)
        .map_err(|e| anyhow!("{e}"))?
        .macs();
    let name = workload(batch);
    let workload = |machine: &str, kind: Kind, dtype: &str| {
        let mut r = Row::new("train", &name, machine, kind, dtype, macs);
        r.batch = Some(batch);
        r
    };
    accel_step::rows(bench, (&graph, &params), (&x, &y), CYCLE_MAX_BATCH, &workload, rows)?;
    cpu_and_gpu_rows(bench, (&graph, &params), (&x, &y), 10, &workload, rows)
}
