//! LeNet-5's training step on MNIST-shaped batches (1 x 28 x 28, ten classes, momentum 0.9):
//! the f32 CPU reference executor, the CPU twin of the GPU's step and the GPU, each checked
//! against the reference before it is timed. The accelerator's rows join when its compiler
//! lowers pooling.

use anyhow::anyhow;
use systole_core::graph::Graph;
use systole_core::layers::Net;
use systole_core::params::{Params, SplitMix64};

use super::train::{cpu_and_gpu_rows, SGD};
use super::{Bench, Kind, Row};
use crate::gpu::plan::StepPlan;
use crate::gpu::GpuDtype;

pub fn suite(bench: &Bench, batch: u32, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let net = Net::lenet(10).map_err(|e| anyhow!("LeNet: {e}"))?;
    let graph = Graph::network_training(&net, SGD).map_err(|e| anyhow!("LeNet: {e}"))?;
    let params = Params::init(&net, 0);
    let mut rng = SplitMix64(200);
    let x: Vec<f32> = (0..batch as usize * 784).map(|_| rng.next_f64() as f32).collect();
    let y: Vec<u16> = (0..batch).map(|_| rng.below(10) as u16).collect();
    let macs = StepPlan::training(&graph, batch as usize, GpuDtype::F32)
        .map_err(|e| anyhow!("{e}"))?
        .macs();
    let name = format!("lenet step, batch {batch}");
    let workload = |machine: &str, kind: Kind, dtype: &str| {
        let mut r = Row::new("train", &name, machine, kind, dtype, macs);
        r.batch = Some(batch);
        r
    };
    cpu_and_gpu_rows(bench, (&graph, &params), (&x, &y), 10, &workload, rows)
}
