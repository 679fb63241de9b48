//! The GEMM suite: each shape on every machine, checked, then timed.

use std::time::Duration;

use anyhow::{anyhow, bail};
use systole_core::link::emulator::Emulator;
use systole_core::link::LinkMachine;
use systole_core::machine::{golden, run_gemm, GoldenKind};
use systole_core::params::SplitMix64;
use systole_core::reference;
use systole_core::tiler::{k_chunk, GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Bf16, DramPort, Dtype, Int8, BF16};

use super::{
    close, dram_traffic, gpu_failed, gpu_unavailable, peak_of, time_runs, Bench, BoardLink,
    BoardMemory, Kind, Row,
};
use crate::gpu::gemm::DeviceGemm;
use crate::gpu::plan::Precision;
use crate::limits::MEMORY_LIMIT;

/// Largest GEMM (in MACs) each simulator and the CPU loop run: about a second each on one
/// core of the development machine (docs/PERF.md), so the default bench stays under a minute.
pub const FUNCTIONAL_MAX_MACS: u64 = 1 << 30;
pub const CYCLE_MAX_MACS: u64 = 1 << 24;
pub const CPU_MAX_MACS: u64 = 1 << 30;
/// Outputs checked exactly (all of them) up to this many MACs; above, a sample.
const FULL_CHECK_MACS: u64 = 1 << 24;
/// Sampled outputs per check.
const SAMPLES: usize = 256;
/// Wall-clock budget per timed row.
const BUDGET: Duration = Duration::from_millis(700);

/// The shapes of `sizes`: every `N x N x N`, then every skinny `64 x N x N` (N > 64).
pub fn shapes(sizes: &[u32]) -> Vec<(&'static str, GemmShape)> {
    let mut out: Vec<(&'static str, GemmShape)> =
        sizes.iter().map(|&s| ("square", GemmShape { m: s, k: s, n: s })).collect();
    out.extend(
        sizes.iter().filter(|&&s| s > 64).map(|&s| ("skinny", GemmShape { m: 64, k: s, n: s })),
    );
    out
}

fn workload(shape: &GemmShape) -> String {
    format!("{}x{}x{}", shape.m, shape.k, shape.n)
}

fn row(shape: &GemmShape, machine: impl Into<String>, kind: Kind, dtype: &str) -> Row {
    let mut r = Row::new("gemm", &workload(shape), machine, kind, dtype, shape.macs());
    (r.m, r.k, r.n) = (Some(shape.m), Some(shape.k), Some(shape.n));
    r
}

/// Operands: A and B as f32 in [-1, 1), and as the accelerator's elements (bf16 rounded, or
/// int8 from the same draws scaled to [-127, 127]).
struct Operands {
    a: Vec<f32>,
    b: Vec<f32>,
    /// Raw little-endian elements for the machines.
    a_elems: Vec<u8>,
    b_elems: Vec<u8>,
}

fn operands(shape: &GemmShape, dtype: Dtype, seed: u64) -> Operands {
    let mut rng = SplitMix64(seed);
    let mut draw =
        |n: usize| -> Vec<f32> { (0..n).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect() };
    let (m, k, n) = (shape.m as usize, shape.k as usize, shape.n as usize);
    let (a, b) = (draw(m * k), draw(k * n));
    let elems = |v: &[f32]| -> Vec<u8> {
        match dtype {
            Dtype::Bf16 => v.iter().flat_map(|&x| Bf16::from_f32(x).0.to_le_bytes()).collect(),
            Dtype::Int8 => v.iter().map(|&x| (x * 127.0).round() as i8 as u8).collect(),
        }
    };
    Operands { a_elems: elems(&a), b_elems: elems(&b), a, b }
}

/// Output positions to check: every one for small products, else corners plus a sample.
fn positions(shape: &GemmShape, seed: u64) -> Vec<(usize, usize)> {
    let (m, n) = (shape.m as usize, shape.n as usize);
    if shape.macs() <= FULL_CHECK_MACS {
        return (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect();
    }
    let mut rng = SplitMix64(seed ^ 0xC0FFEE);
    let mut out = vec![(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)];
    out.extend((0..SAMPLES).map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize)));
    out
}

/// The accelerator's exact output at each position: `core::reference::gemm` on row `i` of A
/// and column `j` of B, summed in the array's order (every output is independent, so this
/// equals the full product's element bit for bit).
fn reference_words(
    config: &ArrayConfig,
    shape: &GemmShape,
    ops: &Operands,
    at: &[(usize, usize)],
) -> Vec<u32> {
    let (k, n) = (shape.k as usize, shape.n as usize);
    let chunk = k_chunk(config, shape.k) as usize;
    match config.dtype {
        Dtype::Bf16 => {
            let a: Vec<Bf16> = ops
                .a_elems
                .chunks_exact(2)
                .map(|b| Bf16(u16::from_le_bytes([b[0], b[1]])))
                .collect();
            let b: Vec<Bf16> = ops
                .b_elems
                .chunks_exact(2)
                .map(|b| Bf16(u16::from_le_bytes([b[0], b[1]])))
                .collect();
            at.iter()
                .map(|&(i, j)| {
                    let col: Vec<Bf16> = (0..k).map(|l| b[l * n + j]).collect();
                    reference::gemm::<BF16>(&a[i * k..(i + 1) * k], &col, 1, k, 1, chunk)[0]
                })
                .collect()
        }
        Dtype::Int8 => {
            let a: Vec<i8> = ops.a_elems.iter().map(|&x| x as i8).collect();
            let b: Vec<i8> = ops.b_elems.iter().map(|&x| x as i8).collect();
            at.iter()
                .map(|&(i, j)| {
                    let col: Vec<i8> = (0..k).map(|l| b[l * n + j]).collect();
                    reference::gemm::<Int8>(&a[i * k..(i + 1) * k], &col, 1, k, 1, chunk)[0]
                })
                .collect()
        }
    }
}

/// The f64 product at each position, and the sum of its products' magnitudes (for the
/// tolerance), from f32 operands.
fn f64_reference(
    a: &[f32],
    b: &[f32],
    shape: &GemmShape,
    at: &[(usize, usize)],
) -> Vec<(f64, f64)> {
    let (k, n) = (shape.k as usize, shape.n as usize);
    at.iter()
        .map(|&(i, j)| {
            (0..k).fold((0.0, 0.0), |(s, mag), l| {
                let p = a[i * k + l] as f64 * b[l * n + j] as f64;
                (s + p, mag + p.abs())
            })
        })
        .collect()
}

/// Checks `c` (row-major f32) against the f64 reference; returns the check's description.
fn check_close(
    what: &str,
    c: &[f32],
    shape: &GemmShape,
    a: &[f32],
    b: &[f32],
    at: &[(usize, usize)],
) -> anyhow::Result<String> {
    let n = shape.n as usize;
    let want = f64_reference(a, b, shape, at);
    let mut worst = 0.0f64;
    for (&(i, j), &(w, mag)) in at.iter().zip(&want) {
        let got = c[i * n + j] as f64;
        if !close(got, w, mag) {
            bail!("{what} {}: C[{i}][{j}] = {got}, the f64 reference gives {w}", workload(shape));
        }
        worst = worst.max((got - w).abs() / mag.max(1e-30));
    }
    Ok(format!("{} outputs within 1e-5 (worst {:.1e})", at.len(), worst))
}

/// The plan of `shape` on `config`, and the DRAM it needs.
fn plan_of(config: &ArrayConfig, shape: GemmShape) -> anyhow::Result<(GemmPlan, usize)> {
    let (layout, dram) =
        GemmLayout::packed(config, &shape).map_err(|e| anyhow!("{}: {e}", workload(&shape)))?;
    let plan =
        GemmPlan::new(config, shape, layout).map_err(|e| anyhow!("{}: {e}", workload(&shape)))?;
    Ok((plan, dram))
}

/// The GEMM on a board end to end, as the host sees it: A and B written over the board's UART,
/// the program sent, the run, C read back, each byte 10 bits at the build's baud rate, and the
/// compute's exact cycles (`compute`'s time). The bytes are the link's own count
/// (`LinkMachine::traffic`, framing, retries and status polls included) for the run on an
/// emulated board: a golden machine behind the host protocol, which polls no more than once
/// while it computes, so a real board's polls add a little to this.
fn link_row(
    config: &ArrayConfig,
    plan: &GemmPlan,
    dram: usize,
    memory: BoardMemory,
    compute: &Row,
) -> anyhow::Result<Row> {
    let machine = golden(GoldenKind::Functional, *config, dram).map_err(|e| anyhow!("{e}"))?;
    let device = Emulator::new(machine).with_large_requests(memory.large_requests);
    let mut board = LinkMachine::new(device, *config, dram).with_max_data(memory.max_data());
    let shape = &plan.shape;
    let elem = config.dtype.elem_bytes();
    let a = vec![0u8; (shape.m * shape.k) as usize * elem];
    let b = vec![0u8; (shape.k * shape.n) as usize * elem];
    run_gemm(&mut board, plan, &a, &b).map_err(|e| anyhow!("emulated board: {e}"))?;
    Ok(memory.end_to_end(compute, board.traffic, ""))
}

/// The GEMM on the build rebuilt with its board's SDRAM as its DRAM (`memory`, from
/// `BoardMemory::on_sdram`): compute only, on core's machines (the RTL's SDRAM port is not built
/// yet: docs/DECISIONS.md 141), its cycles checked on the cycle machine where it runs; and end
/// to end over the fast link.
fn sdram_rows(
    config: &ArrayConfig,
    shape: GemmShape,
    memory: BoardMemory,
    family: &str,
) -> anyhow::Result<Vec<Row>> {
    let config = config.with_dram_port(DramPort::Sdram);
    config.validate().map_err(|e| anyhow!("the board on its SDRAM: {e}"))?;
    let (plan, dram) = plan_of(&config, shape)?;
    let label = super::accel_label(&config);
    let dtype = config.dtype.name();
    if dram > memory.dram_bytes {
        let note = format!("needs {dram} bytes of DRAM; its SDRAM has {}", memory.dram_bytes);
        return Ok(vec![row(&shape, label, Kind::Skipped, dtype).checked("-").noted(note)]);
    }
    let mut check = model(&config);
    if shape.macs() <= CYCLE_MAX_MACS {
        let mut machine = golden(GoldenKind::Cycle, config, dram).map_err(|e| anyhow!("{e}"))?;
        let elem = config.dtype.elem_bytes();
        let a = vec![0u8; shape.m as usize * shape.k as usize * elem];
        let b = vec![0u8; shape.k as usize * shape.n as usize * elem];
        let (_, stats) = run_gemm(machine.as_mut(), &plan, &a, &b)
            .map_err(|e| anyhow!("cycle machine on the SDRAM: {e}"))?;
        if stats.cycles != Some(plan.cycles()) {
            bail!(
                "cycle machine on the SDRAM {}: {:?} cycles, the {check} says {}",
                workload(&shape),
                stats.cycles,
                plan.cycles()
            );
        }
        check = "cycles = cycle machine";
    }
    let compute = model_row(&config, &plan, Kind::Model, check);
    let end_to_end = link_row(&config, &plan, dram, memory, &compute)?;
    let note = format!(
        "{family}; on its SDRAM, core's machines (no board build has it yet); compute only"
    );
    Ok(vec![compute.noted(note), end_to_end])
}

/// A model row: exact cycles at the config's clock.
fn model_row(config: &ArrayConfig, plan: &GemmPlan, kind: Kind, check: &str) -> Row {
    let cycles = plan.cycles();
    let bytes = dram_traffic(config, |sink| plan.emit(&mut |i| sink(i)));
    let mut r = row(&plan.shape, super::accel_label(config), kind, config.dtype.name())
        .timed(cycles as f64 / (config.clock_mhz * 1e6), Some(peak_of(config)))
        .moved(bytes)
        .checked(check);
    r.cycles = Some(cycles);
    r
}

pub fn suite(
    bench: &Bench,
    sizes: &[u32],
    mut board: Option<&mut BoardLink>,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let config = bench.config;
    let dtype = config.dtype.name();
    for (i, (family, shape)) in shapes(sizes).into_iter().enumerate() {
        let macs = shape.macs();
        let (plan, dram) = plan_of(&config, shape)?;
        let on_board = board.as_ref().is_some_and(|b| dram <= b.dram);
        // Only the GPU rows take operands of any size: past the memory limit they are skipped.
        let host_bytes = gpu_host_bytes(&shape, config.dtype);
        let gpu_fits = host_bytes <= MEMORY_LIMIT;
        let ops_needed = macs <= FUNCTIONAL_MAX_MACS
            || macs <= CPU_MAX_MACS
            || (bench.gpu.is_some() && gpu_fits)
            || on_board;
        let ops = ops_needed.then(|| operands(&shape, config.dtype, 1 + i as u64));
        let at = positions(&shape, i as u64);

        // The cycle machine first: where it runs, the model row's cycles are checked against it.
        let mut cycle_row = None;
        if macs <= CYCLE_MAX_MACS {
            let ops = ops.as_ref().expect("operands");
            let want = reference_words(&config, &shape, ops, &at);
            let mut machine =
                golden(GoldenKind::Cycle, config, dram).map_err(|e| anyhow!("{e}"))?;
            let (c, stats) = run_gemm(machine.as_mut(), &plan, &ops.a_elems, &ops.b_elems)
                .map_err(|e| anyhow!("cycle machine: {e}"))?;
            check_exact("cycle machine", &shape, &c, &want, &at)?;
            let model_cycles = plan.cycles();
            if stats.cycles != Some(model_cycles) {
                bail!(
                    "cycle machine {}: {:?} cycles, the {} says {model_cycles}",
                    workload(&shape),
                    stats.cycles,
                    model(&config)
                );
            }
            let seconds = time_runs(BUDGET, 5, || {
                run_gemm(machine.as_mut(), &plan, &ops.a_elems, &ops.b_elems)
                    .map(|_| ())
                    .map_err(|e| anyhow!("{e}"))
            })?;
            let pe_rate = config.pe_count() as f64 * model_cycles as f64 / seconds;
            cycle_row = Some(
                row(&shape, "cycle machine (wall clock)", Kind::Simulator, dtype)
                    .timed(seconds, None)
                    .checked(format!("{} exact; cycles = {}", count(&at, &shape), model(&config)))
                    .noted(format!("{} PE-cycles/s simulated", super::si(pe_rate).trim_end())),
            );
        }
        let model_check =
            if cycle_row.is_some() { "cycles = cycle machine" } else { model(&config) };
        match bench.board {
            // A board's memory bounds what runs on it: a GEMM larger than its DRAM is not
            // priced on a memory it does not have.
            Some(memory) if dram > memory.dram_bytes => rows.push(
                row(&shape, super::accel_label(&config), Kind::Skipped, dtype).checked("-").noted(
                    format!(
                        "needs {dram} bytes of DRAM; the board has {}: does not run in one piece",
                        memory.dram_bytes
                    ),
                ),
            ),
            Some(memory) => {
                let compute = model_row(&config, &plan, Kind::Model, model_check);
                let end_to_end = link_row(&config, &plan, dram, memory, &compute)?;
                let rebuilt = match memory.rebuilt() {
                    Some(faster) => Some(link_row(&config, &plan, dram, faster, &compute)?),
                    None => None,
                };
                rows.push(compute.noted(format!("{family}; compute only")));
                if let Some(f) = bench.fmax_mhz {
                    let at_fmax = ArrayConfig { clock_mhz: f, ..config };
                    rows.push(
                        model_row(&at_fmax, &plan, Kind::Model, model_check)
                            .noted("at the board's fmax; compute only"),
                    );
                }
                rows.push(end_to_end);
                rows.extend(rebuilt);
            }
            None => {
                rows.push(model_row(&config, &plan, Kind::Model, model_check).noted(family));
                if let Some(f) = bench.fmax_mhz {
                    let at_fmax = ArrayConfig { clock_mhz: f, ..config };
                    rows.push(
                        model_row(&at_fmax, &plan, Kind::Model, model_check)
                            .noted("at the board's fmax"),
                    );
                }
            }
        }

        // The board rebuilt with its SDRAM as its DRAM, where it carries one.
        if let Some(sdram) = bench.board.and_then(|m| m.on_sdram()) {
            rows.extend(sdram_rows(&config, shape, sdram, family)?);
        }

        // The board, over its serial port.
        if let Some(link) = board.as_deref_mut() {
            rows.extend(board_rows(link, &config, &plan, dram, ops.as_ref())?);
        }

        // The functional machine.
        if macs <= FUNCTIONAL_MAX_MACS {
            let ops = ops.as_ref().expect("operands");
            let want = reference_words(&config, &shape, ops, &at);
            let mut machine =
                golden(GoldenKind::Functional, config, dram).map_err(|e| anyhow!("{e}"))?;
            let (c, _) = run_gemm(machine.as_mut(), &plan, &ops.a_elems, &ops.b_elems)
                .map_err(|e| anyhow!("functional machine: {e}"))?;
            check_exact("functional machine", &shape, &c, &want, &at)?;
            let seconds = time_runs(BUDGET, 5, || {
                run_gemm(machine.as_mut(), &plan, &ops.a_elems, &ops.b_elems)
                    .map(|_| ())
                    .map_err(|e| anyhow!("{e}"))
            })?;
            rows.push(
                row(&shape, "functional machine (wall clock)", Kind::Simulator, dtype)
                    .timed(seconds, None)
                    .checked(format!("{} exact", count(&at, &shape))),
            );
        } else {
            rows.push(skipped(
                &shape,
                "functional machine (wall clock)",
                dtype,
                FUNCTIONAL_MAX_MACS,
            ));
        }
        rows.push(cycle_row.unwrap_or_else(|| {
            skipped(&shape, "cycle machine (wall clock)", dtype, CYCLE_MAX_MACS)
        }));

        // The CPU: a plain f32 loop.
        let cpu_label = "cpu f32 loop (1 thread)";
        if macs <= CPU_MAX_MACS {
            let ops = ops.as_ref().expect("operands");
            let (m, k, n) = (shape.m as usize, shape.k as usize, shape.n as usize);
            let c = cpu_gemm(&ops.a, &ops.b, m, k, n);
            let check = check_close("cpu f32 loop", &c, &shape, &ops.a, &ops.b, &at)?;
            let seconds = time_runs(BUDGET, 5, || {
                std::hint::black_box(cpu_gemm(&ops.a, &ops.b, m, k, n));
                Ok(())
            })?;
            rows.push(
                row(&shape, cpu_label, Kind::Measured, "f32")
                    .timed(seconds, Some(bench.cpu.peak_macs_per_s))
                    .moved(4 * (m * k + k * n + m * n) as u64)
                    .checked(check),
            );
        } else {
            rows.push(skipped(&shape, cpu_label, "f32", CPU_MAX_MACS));
        }

        // The GPU.
        for (precision, label, dt) in [
            (Precision::F32, "gpu cuBLAS sgemm", "f32"),
            (Precision::Bf16, "gpu cuBLAS gemm", "bf16"),
        ] {
            let r = row(&shape, label, Kind::Measured, dt);
            let Some(gpu) = bench.gpu.as_ref() else {
                rows.push(gpu_unavailable(bench, r));
                continue;
            };
            let Some(ops) = ops.as_ref().filter(|_| gpu_fits) else {
                rows.push(row(&shape, label, Kind::Skipped, dt).checked("-").noted(format!(
                    "needs {host_bytes} bytes of host memory; the limit is {MEMORY_LIMIT}"
                )));
                continue;
            };
            let dims = (shape.m as usize, shape.k as usize, shape.n as usize);
            let g = DeviceGemm::new(gpu, dims, &ops.a, &ops.b, precision)
                .map_err(|e| gpu_failed(label, e))?;
            let c = g.run().map_err(|e| gpu_failed(label, e))?;
            // BF16 is checked against the f64 product of the bf16-rounded operands.
            let round =
                |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| Bf16::from_f32(x).to_f32()).collect() };
            let check = match precision {
                Precision::F32 => check_close(label, &c, &shape, &ops.a, &ops.b, &at)?,
                Precision::Bf16 => {
                    check_close(label, &c, &shape, &round(&ops.a), &round(&ops.b), &at)?
                }
            };
            let reps = if macs > 1 << 36 { 10 } else { 50 };
            let ms = g.time_ms(5, reps).map_err(|e| gpu_failed(label, e))?;
            let peak = bench.gpu_report.peak.map(|p| match precision {
                Precision::F32 => p.fp32_macs_per_s,
                Precision::Bf16 => p.bf16_macs_per_s,
            });
            let es = if precision == Precision::F32 { 4 } else { 2 };
            let (m, k, n) = dims;
            rows.push(
                r.timed(ms / 1e3, peak)
                    .moved((es * (m * k + k * n) + 4 * m * n) as u64)
                    .checked(check)
                    .noted(format!("median of {reps} after 5 warm-up, CUDA events")),
            );
        }

        // The projection.
        let projected = bench.projected;
        let (pplan, _) = plan_of(&projected, shape)?;
        let mut p = model_row(&projected, &pplan, Kind::Projected, model(&projected));
        p.machine = format!(
            "projected {}x{} @ {} MHz",
            projected.rows, projected.cols, projected.clock_mhz
        );
        rows.push(p.noted(format!("TPU-class array, {}", model(&projected))));
    }
    Ok(())
}

/// The GEMM of `plan` on the attached board: every output checked against core's reference,
/// and the cycle counter it reads back against the closed form. Two rows: the time the array
/// took (counted cycles at the build's clock), and the whole run over the serial link.
fn board_rows(
    link: &mut BoardLink,
    config: &ArrayConfig,
    plan: &GemmPlan,
    dram: usize,
    ops: Option<&Operands>,
) -> anyhow::Result<Vec<Row>> {
    let shape = plan.shape;
    let dtype = config.dtype.name();
    let array = format!("board {} (cycle counter)", link.port);
    let wire = format!("board {} over serial (wall clock)", link.port);
    let (Some(ops), true) = (ops, dram <= link.dram) else {
        let why = format!("needs {dram} bytes of DRAM, the board has {}", link.dram);
        return Ok([array, wire]
            .into_iter()
            .map(|m| row(&shape, m, Kind::Skipped, dtype).checked("-").noted(why.clone()))
            .collect());
    };
    let at: Vec<(usize, usize)> =
        (0..shape.m as usize).flat_map(|i| (0..shape.n as usize).map(move |j| (i, j))).collect();
    let want = reference_words(config, &shape, ops, &at);
    let started = std::time::Instant::now();
    let (c, stats) = run_gemm(link.machine.as_mut(), plan, &ops.a_elems, &ops.b_elems)
        .map_err(|e| anyhow!("board on {}, {}: {e}", link.port, workload(&shape)))?;
    let seconds = started.elapsed().as_secs_f64();
    check_exact("board", &shape, &c, &want, &at)?;
    let Some(cycles) = stats.cycles else {
        bail!("board on {}, {}: no cycle count came back", link.port, workload(&shape));
    };
    let model_cycles = plan.cycles();
    if cycles != model_cycles {
        bail!(
            "board on {}, {}: its counter says {cycles} cycles, the {} {model_cycles}",
            link.port,
            workload(&shape),
            model(config)
        );
    }
    let check = format!("{} exact; counter = closed form", count(&at, &shape));
    let mut counted = row(&shape, array, Kind::Measured, dtype)
        .timed(cycles as f64 / (config.clock_mhz * 1e6), Some(peak_of(config)))
        .checked(check.clone())
        .noted(format!("{cycles} cycles counted at the build's {} MHz", config.clock_mhz));
    counted.cycles = Some(cycles);
    let over_link = row(&shape, wire, Kind::Measured, dtype)
        .timed(seconds, None)
        .checked(check)
        .noted(format!("writes, program, run and read-back at {} baud", link.baud));
    Ok(vec![counted, over_link])
}

fn count(at: &[(usize, usize)], shape: &GemmShape) -> String {
    if at.len() as u64 == shape.m as u64 * shape.n as u64 {
        format!("all {} outputs", at.len())
    } else {
        format!("{} sampled outputs", at.len())
    }
}

fn check_exact(
    machine: &str,
    shape: &GemmShape,
    c: &[u32],
    want: &[u32],
    at: &[(usize, usize)],
) -> anyhow::Result<()> {
    let n = shape.n as usize;
    for (&(i, j), &w) in at.iter().zip(want) {
        if c[i * n + j] != w {
            bail!(
                "{machine} {}: C[{i}][{j}] = {:#010x}, core::reference::gemm gives {w:#010x}",
                workload(shape),
                c[i * n + j]
            );
        }
    }
    Ok(())
}

/// Host bytes a GPU row of `shape` holds: the f32 operands and the machines' raw elements (made
/// for every row), the bf16-rounded copies its check makes, and C read back.
fn gpu_host_bytes(shape: &GemmShape, dtype: Dtype) -> u64 {
    let (m, k, n) = (shape.m as u64, shape.k as u64, shape.n as u64);
    let operands = m * k + k * n;
    operands * (4 + dtype.elem_bytes() as u64 + 4) + m * n * 4
}

fn skipped(shape: &GemmShape, machine: &str, dtype: &str, limit: u64) -> Row {
    row(shape, machine, Kind::Skipped, dtype)
        .checked("-")
        .noted(format!("more than {} MACs: too slow here", super::si(limit as f64).trim_end()))
}

/// `C = A B` in f32, row-major, i-k-j order so the inner loop runs along rows of B and C and
/// vectorises; one thread. The CPU baseline.
pub fn cpu_gemm(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for i in 0..m {
        let row = &mut c[i * n..(i + 1) * n];
        for l in 0..k {
            let x = a[i * k + l];
            let b_row = &b[l * n..(l + 1) * n];
            for (cj, bj) in row.iter_mut().zip(b_row) {
                *cj += x * bj;
            }
        }
    }
    c
}

/// Where a model row's cycles come from ([`GemmPlan::cycles`](systole_core::tiler::GemmPlan)):
/// a closed form under the blocking schedule, the timing model over the program under the
/// decoupled one.
fn model(config: &ArrayConfig) -> &'static str {
    match config.schedule {
        // The tiler counts an SDRAM plan with the timing model (docs/DECISIONS.md 141).
        _ if config.dram_port == DramPort::Sdram => "timing model",
        systole_core::Schedule::Blocking => "closed form",
        systole_core::Schedule::Decoupled => "timing model",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GEMM on a board end to end: its time is the link's bytes at the baud rate (10 bits
    /// each) and the compute's; the bytes are A, B, C and the program, and the protocol's
    /// framing on top of them.
    #[test]
    fn a_board_gemm_end_to_end_adds_its_link_time_to_its_compute() {
        let config = ArrayConfig::new(4, 4, Dtype::Int8);
        let shape = GemmShape { m: 12, k: 9, n: 10 };
        let (plan, dram) = plan_of(&config, shape).unwrap();
        let memory = BoardMemory {
            dram_bytes: dram,
            baud: 115_200.0,
            large_requests: false,
            rebuilt_baud: None,
            rebuild: crate::bench::Rebuild::AsBuilt,
            sdram_bytes: None,
        };
        let compute = model_row(&config, &plan, Kind::Model, "test");
        let r = link_row(&config, &plan, dram, memory, &compute).unwrap();
        let bytes = r.bytes.unwrap();
        let payload = 12 * 9 + 9 * 10 + 12 * 10 * 4 + 16 * plan.instruction_count();
        assert!(bytes > payload && bytes < 2 * payload, "{bytes} bytes for {payload} of payload");
        let link = (bytes * 10) as f64 / 115_200.0;
        let want = link + compute.seconds.unwrap();
        assert!((r.seconds.unwrap() - want).abs() < 1e-12, "{:?} against {want}", r.seconds);
        assert!(r.machine.contains("115200 baud"), "{}", r.machine);
    }

    /// The 85F's INT8 build prices its 64^3 GEMM as built (115,207 baud, 256-byte requests)
    /// and once rebuilt on the fast link (2 Mbaud, 2 KB requests): there the link's bytes, A, B,
    /// C and the program with the framing and polls, are within 5% of the data's own, as built
    /// they are not; and its time is those bytes at 10 bits each.
    #[test]
    fn on_the_fast_link_the_framing_costs_under_five_percent() {
        let build = crate::bench::board_build("ulx3s", Some(Dtype::Int8), None).unwrap();
        let as_built = build.memory().unwrap();
        let rebuilt = as_built.rebuilt().unwrap();
        assert_eq!((as_built.max_data(), rebuilt.max_data(), rebuilt.baud), (256, 2040, 2e6));
        let config = build.config;
        let (plan, dram) = plan_of(&config, GemmShape { m: 64, k: 64, n: 64 }).unwrap();
        let compute = model_row(&config, &plan, Kind::Model, "test");
        let data = (64 * 64 * 2 + 64 * 64 * 4 + 16 * plan.instruction_count()) as f64;
        let old = link_row(&config, &plan, dram, as_built, &compute).unwrap();
        let new = link_row(&config, &plan, dram, rebuilt, &compute).unwrap();
        let (old_bytes, new_bytes) = (old.bytes.unwrap() as f64, new.bytes.unwrap() as f64);
        assert!(old_bytes > 1.05 * data, "{old_bytes} bytes for {data}");
        assert!(new_bytes > data && new_bytes <= 1.05 * data, "{new_bytes} bytes for {data}");
        let link = new_bytes * 10.0 / 2e6;
        assert!((new.seconds.unwrap() - link - compute.seconds.unwrap()).abs() < 1e-12);
        assert!(new.machine.contains("rebuilt") && new.note.contains("2040"), "{}", new.note);
    }

    /// The 85F prices a GEMM larger than its 64 KiB of block RAM on its SDRAM, rebuilt on it:
    /// compute on the cycle machine, slower than on block RAM, and end to end at the fast link's
    /// rate; a board without an SDRAM has no such rows.
    #[test]
    fn a_board_with_an_sdram_prices_what_its_block_ram_cannot_hold_on_it() {
        let build = crate::bench::board_build("ulx3s", Some(Dtype::Int8), None).unwrap();
        let memory = build.memory().unwrap();
        let sdram = memory.on_sdram().unwrap();
        assert_eq!((sdram.dram_bytes, sdram.baud, sdram.max_data()), (32 << 20, 2e6, 2040));
        let shape = GemmShape { m: 128, k: 128, n: 128 };
        let (plan, dram) = plan_of(&build.config, shape).unwrap();
        assert!(dram > memory.dram_bytes, "{dram} bytes fit the block RAM");
        let rows = sdram_rows(&build.config, shape, sdram, "square").unwrap();
        let (compute, end_to_end) = (&rows[0], &rows[1]);
        assert!(compute.machine.ends_with(", SDRAM"), "{}", compute.machine);
        assert!(compute.check.contains("cycles = cycle machine"), "{}", compute.check);
        assert!(compute.cycles.unwrap() > plan.cycles(), "{:?}", compute.cycles);
        assert!(end_to_end.machine.contains("on its SDRAM: UART at 2000000 baud"));
        let link = end_to_end.bytes.unwrap() as f64 * 10.0 / 2e6;
        let want = link + compute.seconds.unwrap();
        assert!((end_to_end.seconds.unwrap() - want).abs() < 1e-12);
        let ice = crate::bench::board_build("icebreaker", Some(Dtype::Int8), None).unwrap();
        assert_eq!(ice.memory().unwrap().on_sdram(), None);
    }

    #[test]
    fn shapes_are_squares_then_skinny() {
        let s = shapes(&[64, 256]);
        assert_eq!(s.len(), 3);
        assert_eq!(s[2], ("skinny", GemmShape { m: 64, k: 256, n: 256 }));
    }

    #[test]
    fn cpu_loop_and_sampled_checks_agree_with_f64() {
        let shape = GemmShape { m: 9, k: 13, n: 7 };
        let ops = operands(&shape, Dtype::Bf16, 3);
        let c = cpu_gemm(&ops.a, &ops.b, 9, 13, 7);
        let at = positions(&shape, 0);
        assert_eq!(at.len(), 63);
        assert!(check_close("cpu", &c, &shape, &ops.a, &ops.b, &at).is_ok());
        let mut wrong = c.clone();
        wrong[8 * 7 + 6] += 1e-3;
        assert!(check_close("cpu", &wrong, &shape, &ops.a, &ops.b, &at).is_err());
    }

    #[test]
    fn sampled_reference_words_equal_the_full_reference() {
        for dtype in [Dtype::Bf16, Dtype::Int8] {
            let config = ArrayConfig::new(4, 4, dtype);
            let shape = GemmShape { m: 6, k: 11, n: 5 };
            let ops = operands(&shape, dtype, 9);
            let at = positions(&shape, 0);
            let sampled = reference_words(&config, &shape, &ops, &at);
            let (plan, dram) = plan_of(&config, shape).unwrap();
            let mut m = golden(GoldenKind::Functional, config, dram).unwrap();
            let (c, _) = run_gemm(m.as_mut(), &plan, &ops.a_elems, &ops.b_elems).unwrap();
            assert_eq!(sampled, c, "{dtype:?}");
            assert!(check_exact("f", &shape, &c, &sampled, &at).is_ok());
        }
    }
}
