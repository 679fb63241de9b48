//! `systole gemm`: `C = A x B` from `.npy` files on any machine, with its statistics.

use std::io::Write;

use anyhow::{anyhow, bail};
use serde::Serialize;
use systole_core::isa::Instruction;
use systole_core::link::Traffic;
use systole_core::machine::run_gemm;
use systole_core::tiler::{scalesim_cycles, GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, DramPort, Dtype, Schedule, Stats};

use crate::cli::GemmArgs;
use crate::limits::check_memory;
use crate::npy::{self, Matrix};
use crate::outputs::Outputs;
use crate::report::LinkReport;

pub fn run(args: &GemmArgs) -> anyhow::Result<()> {
    let dtype = Dtype::from(args.dtype);
    let config = args.array.config(dtype);
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    if let Some(line) = crate::cli::note(&args.ignored()) {
        eprintln!("{line}");
    }
    // The outputs first, so a path that cannot be written (or is an input) fails before any work.
    let mut outputs = Outputs::new();
    outputs.reads("--a", &args.a)?;
    outputs.reads("--b", &args.b)?;
    let c_file = outputs.writes("-o", &args.out)?;
    let stats_file = outputs.writes_opt("--stats", args.stats.as_deref())?;
    let a = npy::read_matrix(&args.a, dtype)?;
    let b = npy::read_matrix(&args.b, dtype)?;
    let shape = gemm_shape(args, &a, &b)?;
    let (plan, dram_bytes) = plan(&config, shape)?;
    check_memory(
        format_args!(
            "{} x {}: the {}x{}x{} GEMM (its DRAM, C and program)",
            args.a.display(),
            args.b.display(),
            shape.m,
            shape.k,
            shape.n
        ),
        run_bytes(&plan, dram_bytes),
    )?;

    let run = run_on(args, &plan, dram_bytes, &a, &b)?;
    let report = GemmReport::new(&plan, &run);

    outputs.write(c_file, |out| npy::write_accumulators(out, shape.m, shape.n, &run.c, dtype))?;
    if let Some(file) = stats_file {
        outputs.write(file, |out| write_json(out, &report))?;
    }
    outputs.commit()?;
    println!("{}", report.summary());
    Ok(())
}

/// `M x K` times `K x N`, or an error naming both shapes.
fn gemm_shape(args: &GemmArgs, a: &Matrix, b: &Matrix) -> anyhow::Result<GemmShape> {
    if a.cols != b.rows {
        bail!(
            "shape mismatch: {} is {}x{} (M x K) and {} is {}x{}, but B must be K x N with K = {}",
            args.a.display(),
            a.rows,
            a.cols,
            args.b.display(),
            b.rows,
            b.cols,
            a.cols
        );
    }
    Ok(GemmShape { m: a.rows, k: a.cols, n: b.cols })
}

/// The tiled program, and the DRAM bytes its packed A, B and C need.
fn plan(config: &ArrayConfig, shape: GemmShape) -> anyhow::Result<(GemmPlan, usize)> {
    let what = || format!("cannot tile a {}x{}x{} GEMM", shape.m, shape.k, shape.n);
    let (layout, dram_bytes) =
        GemmLayout::packed(config, &shape).map_err(|e| anyhow!("{}: {e}", what()))?;
    let plan = GemmPlan::new(config, shape, layout).map_err(|e| anyhow!("{}: {e}", what()))?;
    Ok((plan, dram_bytes))
}

/// Bytes a run of `plan` allocates besides A and B (read already): the machine's DRAM, C twice
/// (read back as bytes, then as words) and the program (twice, while its vector grows).
fn run_bytes(plan: &GemmPlan, dram_bytes: usize) -> u64 {
    let c = plan.shape.m as u64 * plan.shape.n as u64 * 4;
    let program = plan.instruction_count().saturating_mul(size_of::<Instruction>() as u64);
    (dram_bytes as u64).saturating_add(2 * c).saturating_add(program.saturating_mul(2))
}

/// One finished run: C's accumulator words (row-major), and what the machine counted.
struct GemmRun {
    machine: &'static str,
    c: Vec<u32>,
    stats: Stats,
    /// What crossed the host link, and its baud rate, on a machine reached over one.
    link: Option<(Traffic, f64)>,
}

/// Runs the plan on a fresh golden machine of `kind` with `dram_bytes` of DRAM.
fn run_on(
    args: &GemmArgs,
    plan: &GemmPlan,
    dram_bytes: usize,
    a: &Matrix,
    b: &Matrix,
) -> anyhow::Result<GemmRun> {
    let link = args.link.link();
    let mut machine = crate::machines::open(args.machine, &link, plan.config, dram_bytes)?;
    let name = machine.name();
    // Identifying a board crossed the link already: only the GEMM's own traffic counts.
    let before = machine.link_traffic().unwrap_or_default();
    let (c, stats) = run_gemm(machine.as_mut(), plan, &a.elems, &b.elems)
        .map_err(|e| anyhow!("{name} machine: {e}"))?;
    let baud = crate::machines::link_baud(args.machine, &link, &plan.config);
    let link = machine.link_traffic().zip(baud).map(|(t, baud)| (t - before, baud));
    Ok(GemmRun { machine: name, c, stats, link })
}

fn write_json(out: &mut dyn Write, report: &GemmReport) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    out.write_all(b"\n")
}

/// Where the functional machine's cycle count comes from: [`GemmPlan::cycles`], a closed form
/// under the blocking schedule and the timing model over the program under the decoupled one.
const CLOSED_FORM: &str = "closed form";
const TIMING_MODEL: &str = "timing model";

/// What `--stats` writes: the run's shape, the array, and its performance.
#[derive(Debug, Serialize)]
struct GemmReport {
    machine: &'static str,
    dtype: &'static str,
    dataflow: &'static str,
    /// "blocking" or "decoupled" (`--schedule`).
    schedule: &'static str,
    /// How the DRAM moves bytes: `row`, `byte` or `sdram`.
    dram_port: &'static str,
    #[serde(skip)]
    port: DramPort,
    rows: u16,
    cols: u16,
    spad_depth: u32,
    acc_depth: u32,
    clock_mhz: f64,
    m: u32,
    k: u32,
    n: u32,
    macs: u64,
    instructions: u64,
    cycles: u64,
    /// "cycle machine" when counted; on the functional one "closed form" or "timing model"
    /// ([`GemmPlan::cycles`]).
    cycles_source: &'static str,
    /// Cycles the array was busy; counted on the cycle machine only.
    array_cycles: Option<u64>,
    /// Useful MACs over the peak `rows * cols * cycles`.
    utilization: f64,
    /// `cycles / clock_mhz`.
    time_us: f64,
    /// SCALE-Sim's published compute-only estimate for the same GEMM and array, for comparison
    /// (see docs/PERFORMANCE_MODEL.md for where its assumptions differ).
    scalesim_cycles: u64,
    /// What crossed the host link (the RTL's UART, a board's serial port); absent on the golden
    /// machines, which have none.
    link: Option<LinkReport>,
}

impl GemmReport {
    fn new(plan: &GemmPlan, run: &GemmRun) -> GemmReport {
        let (config, stats) = (&plan.config, &run.stats);
        let (cycles, cycles_source) = match (stats.cycles, run.machine) {
            (Some(c), "cycle") => (c, "cycle machine"),
            (Some(c), _) => (c, "the accelerator's cycle counter"),
            (None, _) if config.schedule == Schedule::Decoupled => (plan.cycles(), TIMING_MODEL),
            (None, _) => (plan.cycles(), CLOSED_FORM),
        };
        GemmReport {
            machine: run.machine,
            dtype: config.dtype.name(),
            dataflow: config.dataflow.short_name(),
            schedule: config.schedule.name(),
            dram_port: config.dram_port.name(),
            port: config.dram_port,
            rows: config.rows,
            cols: config.cols,
            spad_depth: config.spad_depth,
            acc_depth: config.acc_depth,
            clock_mhz: config.clock_mhz,
            m: plan.shape.m,
            k: plan.shape.k,
            n: plan.shape.n,
            macs: stats.macs,
            instructions: stats.instructions,
            cycles,
            cycles_source,
            array_cycles: stats.array_cycles,
            utilization: stats.macs as f64 / (config.pe_count() as f64 * cycles as f64),
            time_us: cycles as f64 / config.clock_mhz,
            scalesim_cycles: scalesim_cycles(config, &plan.shape),
            // A, B, the program and C, with the protocol's framing and polls.
            link: run.link.map(|(traffic, baud)| {
                LinkReport::new(traffic, baud, cycles as f64 / (config.clock_mhz * 1e6))
            }),
        }
    }

    /// One line for the terminal (two over a link: the compute, then the link and the whole).
    fn summary(&self) -> String {
        let note = match self.cycles_source {
            CLOSED_FORM | TIMING_MODEL => format!(" ({})", self.cycles_source),
            _ => String::new(),
        };
        let link = match &self.link {
            None => String::new(),
            Some(l) => format!(
                "\nhost link: {} bytes out and {} in over {} requests, {} at {:.0} baud; end to end \
                 {} (compute only {})",
                l.bytes_out,
                l.bytes_in,
                l.requests,
                crate::bench::duration(l.seconds),
                l.baud,
                crate::bench::duration(l.end_to_end_seconds),
                crate::bench::duration(self.time_us / 1e6)
            ),
        };
        let compute = format!(
            "gemm {}x{}x{} {} on a {}x{} {} {} array{}, {} machine: {} cycles{}, {:.1}% utilization, \
             {:.3} us at {} MHz",
            self.m,
            self.k,
            self.n,
            self.dtype,
            self.rows,
            self.cols,
            self.dataflow,
            self.schedule,
            crate::report::dram_port_words(self.port),
            self.machine,
            self.cycles,
            note,
            100.0 * self.utilization,
            self.time_us,
            self.clock_mhz
        );
        compute + &link
    }
}
