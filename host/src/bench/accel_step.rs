//! The accelerator's rows of one training step, for any network: the compiled step's exact
//! cycles at the clock (and at a board's fmax), and the golden machines' own speed, each machine
//! checked bit for bit against the reference executor and its cycles against the compiled
//! step's before it is timed.

use anyhow::{anyhow, bail};
use systole_core::compile::{compile_training, CompiledStep};
use systole_core::exec::{Accel, Executor};
use systole_core::graph::Graph;
use systole_core::link::emulator::Emulator;
use systole_core::link::LinkMachine;
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::Params;
use systole_core::train::AccelTrainer;
use systole_core::{ArrayConfig, Dtype};

use super::train::BUDGET;
use super::{dram_traffic, peak_of, time_runs, Bench, BoardMemory, Kind, Row};

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
    let compute = model_row(&config, &step, Kind::Model, model_check, workload);
    match bench.board {
        Some(memory) if dram > memory.dram_bytes => rows.push(
            workload(&super::accel_label(&config), Kind::Skipped, "bf16").checked("-").noted(
                format!(
                    "needs {dram} bytes of DRAM; the board has {}: does not run in one piece",
                    memory.dram_bytes
                ),
            ),
        ),
        Some(memory) => {
            let end_to_end = link_row(graph, params, (x, y), (&config, dram), memory, &compute)?;
            rows.push(compute.noted("compute only"));
            if let Some(f) = bench.fmax_mhz {
                let at_fmax = ArrayConfig { clock_mhz: f, ..config };
                rows.push(
                    model_row(&at_fmax, &step, Kind::Model, model_check, workload)
                        .noted("at the board's fmax; compute only"),
                );
            }
            rows.push(end_to_end);
        }
        None => {
            rows.push(compute);
            if let Some(f) = bench.fmax_mhz {
                let at_fmax = ArrayConfig { clock_mhz: f, ..config };
                rows.push(
                    model_row(&at_fmax, &step, Kind::Model, model_check, workload)
                        .noted("at the board's fmax"),
                );
            }
        }
    }
    if let Some(sdram) = bench.board.and_then(|m| m.on_sdram()) {
        let on = (graph, params, x, y);
        rows.extend(sdram_rows(&config, on, b <= cycle_max_batch, sdram, workload)?);
    }
    rows.append(&mut machine_rows);
    Ok(())
}

/// The step on the build rebuilt with its board's SDRAM as its DRAM (`memory`, from
/// `BoardMemory::on_sdram`): compute only, on core's machines (the RTL's SDRAM port is not built
/// yet: docs/DECISIONS.md 141), its cycles checked on the cycle machine where `cycle` allows;
/// and end to end over the fast link.
fn sdram_rows(
    config: &ArrayConfig,
    (graph, params, x, y): (&Graph, &Params, &[f32], &[u16]),
    cycle: bool,
    memory: BoardMemory,
    workload: &dyn Fn(&str, Kind, &str) -> Row,
) -> anyhow::Result<Vec<Row>> {
    let config = config.with_dram_port(systole_core::DramPort::Sdram);
    config.validate().map_err(|e| anyhow!("the board on its SDRAM: {e}"))?;
    let b = y.len() as u32;
    let step = compile_training(graph, &config, b).map_err(|e| anyhow!("batch {b}: {e}"))?;
    let dram = AccelTrainer::dram_needed(graph, &config, b, b).map_err(|e| anyhow!("{e}"))?;
    let label = super::accel_label(&config);
    if dram > memory.dram_bytes {
        let note = format!("needs {dram} bytes of DRAM; its SDRAM has {}", memory.dram_bytes);
        return Ok(vec![workload(&label, Kind::Skipped, "bf16").checked("-").noted(note)]);
    }
    let mut check = "timing model";
    if cycle {
        let machine = golden(GoldenKind::Cycle, config, dram).map_err(|e| anyhow!("{e}"))?;
        let mut t = AccelTrainer::new(machine, graph.clone(), params)
            .map_err(|e| anyhow!("cycle machine on the SDRAM: {e}"))?;
        let (_, work) = t.step(x, y).map_err(|e| anyhow!("cycle machine on the SDRAM: {e}"))?;
        if work.cycles != step.cycles() {
            bail!(
                "cycle machine on the SDRAM, batch {b}: {} cycles, the compiled step says {}",
                work.cycles,
                step.cycles()
            );
        }
        check = "cycles = cycle machine";
    }
    let compute = model_row(&config, &step, Kind::Model, check, workload);
    let end_to_end = link_row(graph, params, (x, y), (&config, dram), memory, &compute)?;
    let note = "on its SDRAM, core's machines (no board build has it yet); compute only";
    Ok(vec![compute.noted(note), end_to_end])
}

/// One step on a board end to end, as the host sees it: the step's batch, programs and
/// results over the board's UART at the build's baud rate, then its exact cycles (`compute`'s
/// time). The bytes are the link's own count for the second step on an emulated board (a
/// golden machine behind the host protocol; the first step's uploads of the weights left out).
fn link_row(
    graph: &Graph,
    params: &Params,
    (x, y): (&[f32], &[u16]),
    (config, dram): (&ArrayConfig, usize),
    memory: BoardMemory,
    compute: &Row,
) -> anyhow::Result<Row> {
    let machine = golden(GoldenKind::Functional, *config, dram).map_err(|e| anyhow!("{e}"))?;
    let device = Emulator::new(machine).with_large_requests(memory.large_requests);
    let board = LinkMachine::new(device, *config, dram).with_max_data(memory.max_data());
    let mut t = AccelTrainer::new(Box::new(board), graph.clone(), params)
        .map_err(|e| anyhow!("emulated board: {e}"))?;
    t.step(x, y).map_err(|e| anyhow!("emulated board: {e}"))?;
    let before = t.machine.link_traffic().unwrap_or_default();
    t.step(x, y).map_err(|e| anyhow!("emulated board: {e}"))?;
    let traffic = t.machine.link_traffic().unwrap_or_default() - before;
    Ok(memory.end_to_end(compute, traffic, " a step"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A board with an SDRAM prices the step on it, rebuilt: its cycles the cycle machine's,
    /// more than on block RAM, and end to end on the fast link.
    #[test]
    fn a_board_with_an_sdram_prices_a_step_on_it() {
        let graph = super::super::train::graph();
        let params = Params::init(&graph.net, 0);
        let build = crate::bench::board_build("ulx3s", Some(Dtype::Bf16), None).unwrap();
        let sdram = build.memory().unwrap().on_sdram().unwrap();
        let (x, y) = (vec![0.25f32; 4 * 64], vec![1u16, 2, 3, 4]);
        let row = |machine: &str, kind: Kind, dtype: &str| {
            Row::new("train", "test", machine, kind, dtype, 1)
        };
        let on = (&graph, &params, x.as_slice(), y.as_slice());
        let rows = sdram_rows(&build.config, on, true, sdram, &row).unwrap();
        let (compute, end_to_end) = (&rows[0], &rows[1]);
        assert_eq!(compute.check, "cycles = cycle machine");
        let block_ram = compile_training(&graph, &build.config, 4).unwrap();
        assert!(compute.cycles.unwrap() > block_ram.cycles(), "{:?}", compute.cycles);
        assert!(end_to_end.machine.contains("on its SDRAM: UART at 2000000 baud"));
    }

    /// A training step on a board end to end: the second step's bytes (the batch, its
    /// programs, the loss and hits read back, with the protocol's framing) at the baud rate,
    /// and the compute; the weights written before the first step are not a step's.
    #[test]
    fn a_board_step_end_to_end_counts_one_steps_link_bytes() {
        let graph = super::super::train::graph();
        let params = Params::init(&graph.net, 0);
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let (x, y) = (vec![0.25f32; 4 * 64], vec![1u16, 2, 3, 4]);
        let step = compile_training(&graph, &config, 4).unwrap();
        let dram = AccelTrainer::dram_needed(&graph, &config, 4, 4).unwrap();
        let memory = BoardMemory {
            dram_bytes: dram,
            baud: 1_000_000.0,
            large_requests: true,
            rebuilt_baud: None,
            rebuild: crate::bench::Rebuild::AsBuilt,
            sdram_bytes: None,
        };
        let row = |machine: &str, kind: Kind, dtype: &str| {
            Row::new("train", "test", machine, kind, dtype, step.macs())
        };
        let compute = model_row(&config, &step, Kind::Model, "test", &row);
        let r = link_row(&graph, &params, (&x, &y), (&config, dram), memory, &compute).unwrap();
        let bytes = r.bytes.unwrap();
        // The step's programs go over every step, 16 bytes a word, and the batch's features
        // (BF16 at least); with the framing, less than twice those.
        let program = 16 * (step.forward.len() + step.backward.len()) as u64;
        let least = program + 4 * 64 * 2;
        assert!(bytes > least && bytes < 2 * least, "{bytes} bytes a step, {program} of program");
        let want = (bytes * 10) as f64 / 1e6 + compute.seconds.unwrap();
        assert!((r.seconds.unwrap() - want).abs() < 1e-12, "{:?} against {want}", r.seconds);
    }
}
