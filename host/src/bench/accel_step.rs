//! The accelerator's rows of one training step, for any network: the compiled step's exact
//! cycles at the clock (and at a board's fmax), and the golden machines' own speed, each machine
//! checked bit for bit against the reference executor and its cycles against the compiled
//! step's before it is timed.

use anyhow::{anyhow, bail};
use systole_core::compile::{compile_training, CompiledStep};
use systole_core::exec::{Accel, Executor};
use systole_core::graph::Graph;
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::Params;
use systole_core::train::AccelTrainer;
use systole_core::{ArrayConfig, Dtype};

use super::train::BUDGET;
use super::{dram_traffic, peak_of, time_runs, Bench, Kind, Row};

/// The row of the compiled `step` on `config`: its cycles over the clock, its DRAM traffic.
pub fn model_row(
    config: &ArrayConfig,
    step: &CompiledStep,
    kind: Kind,
    check: &str,
    workload: &dyn Fn(&str, Kind, &str) -> Row,
) -> Row {
    let bytes = dram_traffic(config, |sink| {
        step.forward.iter().chain(&step.backward).for_each(|&i| sink(i));
    });
    let mut r = workload(&super::accel_label(config), kind, "bf16");
    r.macs = step.macs();
    let mut r = r
        .timed(step.cycles() as f64 / (config.clock_mhz * 1e6), Some(peak_of(config)))
        .moved(bytes)
        .checked(check);
    r.cycles = Some(step.cycles());
    r
}

/// The step of `graph` from `params` on the batch `(x, y)` on the bench's array in BF16
/// (training is mixed precision whatever the GEMM suite's dtype): the model's row, then the
/// functional and cycle machines' (the cycle machine only up to `cycle_max_batch` rows, above
/// which a step takes it seconds). `workload` makes a row of this workload.
pub fn rows(
    bench: &Bench,
    (graph, params): (&Graph, &Params),
    (x, y): (&[f32], &[u16]),
    cycle_max_batch: u32,
    workload: &dyn Fn(&str, Kind, &str) -> Row,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let config = ArrayConfig { dtype: Dtype::Bf16, ..bench.config };
    let b = y.len() as u32;
    let step = compile_training(graph, &config, b).map_err(|e| anyhow!("batch {b}: {e}"))?;
    // The accelerator's reference executor gives the exact outcome the machines must match.
    let mut accel_ref = Executor::new(graph.clone(), Accel { config }, params);
    let want = accel_ref.step(x, y);
    let dram = AccelTrainer::dram_needed(graph, &config, b, b).map_err(|e| anyhow!("{e}"))?;
    let mut machine_rows = Vec::new();
    let mut cycles_checked = false;
    for (kind, label) in [
        (GoldenKind::Functional, "functional machine (wall clock)"),
        (GoldenKind::Cycle, "cycle machine (wall clock)"),
    ] {
        if kind == GoldenKind::Cycle && b > cycle_max_batch {
            machine_rows.push(
                workload(label, Kind::Skipped, "bf16")
                    .checked("-")
                    .noted("batch too large for the cycle machine here"),
            );
            continue;
        }
        let machine = golden(kind, config, dram).map_err(|e| anyhow!("{e}"))?;
        let mut t = AccelTrainer::new(machine, graph.clone(), params)
            .map_err(|e| anyhow!("{label}: {e}"))?;
        let (got, work) = t.step(x, y).map_err(|e| anyhow!("{label}: {e}"))?;
        if got != want || t.params().map_err(|e| anyhow!("{e}"))? != accel_ref.params() {
            bail!("{label}, batch {b}: the step differs from the reference executor (accelerator numerics)");
        }
        if work.cycles != step.cycles() {
            bail!(
                "{label}, batch {b}: {} cycles, the compiled step says {}",
                work.cycles,
                step.cycles()
            );
        }
        cycles_checked |= kind == GoldenKind::Cycle;
        let seconds =
            time_runs(BUDGET, 20, || t.step(x, y).map(|_| ()).map_err(|e| anyhow!("{e}")))?;
        let mut r = workload(label, Kind::Simulator, "bf16");
        r.macs = step.macs();
        machine_rows.push(r.timed(seconds, None).checked("bit-exact with the reference executor"));
    }
    let model_check = if cycles_checked { "cycles = cycle machine" } else { "timing model" };
    rows.push(model_row(&config, &step, Kind::Model, model_check, workload));
    if let Some(f) = bench.fmax_mhz {
        let at_fmax = ArrayConfig { clock_mhz: f, ..config };
        rows.push(
            model_row(&at_fmax, &step, Kind::Model, model_check, workload)
                .noted("at the board's fmax"),
        );
    }
    rows.append(&mut machine_rows);
    Ok(())
}
