//! `systole sim`: one program on the Verilated RTL, beside core's cycle and functional machines,
//! from the same random memories; every memory and the cycle count compared. With `--netlist
//! DIR` the machine is a board build's synthesized netlist instead ([`crate::netlist`]), cell by
//! cell; the program goes over the UART or the SPI slave (`--link`).
//!
//! On a mismatch the command finds the first instruction after which the RTL parts from the
//! cycle machine (bisecting over the program's prefixes on fresh machines), prints where (the
//! instruction, its dispatch cycle, the first differing memory element or the cycle counts),
//! writes a VCD of the last `--vcd-cycles` cycles of that prefix's run, prints its path, and
//! exits with status 1. Errors (bad flags, files, a build that fails) exit with status 2.

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use systole_core::check::{random_program, SplitMix};
use systole_core::isa::Instruction;
use systole_core::machine::{golden, validate_program, GoldenKind};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Machine, MachineError};
use systole_hdl::top::MAX_DRAM_BYTES;
use systole_hdl::TopConfig;
use systole_sim::compare::{first_difference, localize, run_from, Image, Outcome, Pair};
use systole_sim::machine::{pins, simulated_cycles};
use systole_sim::{rtl_top_config, rtl_top_config_exact, BuildOptions, RtlBuild};

use crate::cli::SimArgs;
use crate::limits::check_memory;
use crate::netlist::Netlist;
use crate::outputs::{OutputId, Outputs};
use crate::program_file::{read_program, show, write_program};
use crate::progress::Phase;
use crate::sim::{Injected, Mismatch};

/// Programs of this many words or more are long to run on the RTL (each word is sent over its
/// UART, 640 simulated cycles, about half a millisecond): their steps are announced on stderr
/// even when it is not a terminal.
const LONG_PROGRAM: usize = 4096;

/// Where a mismatch's VCD goes without `--vcd`.
const DEFAULT_VCD: &str = "systole-mismatch.vcd";

/// What [`MAX_DRAM_BYTES`] is, for the messages that name it.
const RTL_DRAM: &str = "16 MiB, the most an emitted design holds";

/// Anything that stops a rerun, as `localize` wants it.
struct MachineFailure(anyhow::Error);

impl From<MachineError> for MachineFailure {
    fn from(e: MachineError) -> Self {
        MachineFailure(anyhow!("{e}"))
    }
}

impl From<anyhow::Error> for MachineFailure {
    fn from(e: anyhow::Error) -> Self {
        MachineFailure(e)
    }
}

/// What `--json` writes.
#[derive(Serialize)]
struct Report {
    rows: u16,
    cols: u16,
    dtype: &'static str,
    dataflow: &'static str,
    dram_bytes: usize,
    instructions: usize,
    seed: u64,
    rtl_cycles: Option<u64>,
    cycle_machine_cycles: Option<u64>,
    macs: Option<u64>,
    simulated_cycles: u64,
    rtl_wall_s: f64,
    simulated_cycles_per_s: f64,
    identical: bool,
    mismatch: Option<MismatchJson>,
}

#[derive(Serialize)]
struct MismatchJson {
    instruction_index: usize,
    instruction: String,
    dispatch_cycle: Option<u64>,
    difference: String,
    vcd: String,
}

pub fn run(args: &SimArgs) -> anyhow::Result<()> {
    let netlist = args.netlist.as_deref().map(Netlist::load).transpose()?;
    let config = match (&netlist, args.dtype) {
        (Some(n), _) => n.top.array,
        (None, Some(dtype)) => args.array.config(Dtype::from(dtype)),
        (None, None) => bail!("give --dtype (or --netlist DIR)"),
    };
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    let what = if netlist.is_some() { "netlist" } else { "RTL" };
    // The outputs first, so a path that cannot be written (or is an input) fails before any work.
    let mut outputs = Outputs::new();
    if let Some(path) = &args.program {
        outputs.reads("--program", path)?;
    }
    let saved_program = outputs.writes_opt("--save-program", args.save_program.as_deref())?;
    let json_file = outputs.writes_opt("--json", args.json.as_deref())?;
    let vcd_file = outputs.writes_opt("--vcd", args.vcd.as_deref())?;
    // Every machine here holds as much DRAM as the RTL, which an emitted design bounds.
    if let Some(d) = args.dram_bytes.filter(|&d| d > MAX_DRAM_BYTES) {
        bail!(
            "--dram-bytes {d}: needs {d} bytes of DRAM; the limit is {MAX_DRAM_BYTES} ({RTL_DRAM})"
        );
    }
    let reading = args.program.as_deref().map(|path| {
        let words = std::fs::metadata(path).map_or(0, |m| m.len() / 16);
        let long = words >= LONG_PROGRAM as u64;
        Phase::start(format!("reading and validating {} ({words} words)", show(path)), long)
    });
    let (program, needed) = match (&args.program, args.gemm) {
        (Some(path), _) => (read_program(path)?, 0),
        (None, Some(shape)) => gemm_program(&config, shape)?,
        // Drawn once the DRAM is known, below.
        (None, None) if args.random => (Vec::new(), 0),
        (None, None) => bail!("give --program FILE, --gemm MxKxN or --random"),
    };
    let dram = match args.dram_bytes {
        Some(d) if d < needed => {
            bail!("--dram-bytes {d}: the {}-byte GEMM does not fit", needed)
        }
        Some(d) => d,
        None => needed,
    };
    let top = match (&netlist, args.dram_bytes) {
        (Some(n), _) if n.top.dram_bytes < dram => bail!(
            "the {dram}-byte GEMM does not fit the {} bytes of DRAM {} was built with",
            n.top.dram_bytes,
            show(&n.dir)
        ),
        (Some(n), _) => n.top,
        (None, Some(exact)) => rtl_top_config_exact(config, exact),
        (None, None) => rtl_top_config(config, dram),
    };
    let program = match args.random {
        true => random_program(&config, top.dram_bytes, &mut SplitMix(args.seed)),
        false => program,
    };
    validate_program(&config, &program, top.dram_bytes).map_err(|e| {
        anyhow!("{}: {e}", args.program.as_deref().map_or("the program".into(), show))
    })?;
    drop(reading);
    if let Some(file) = saved_program {
        outputs.write(file, |out| write_program(out, &program))?;
    }

    // Tracing is built in only when a VCD is wanted: it slows building and simulating.
    let verilate = |trace: bool| -> anyhow::Result<RtlBuild> {
        let started = Instant::now();
        let opts = BuildOptions { threads: args.threads, trace, ..Default::default() };
        let tracing = if trace { " with tracing" } else { "" };
        let (rows, cols, dtype) = (config.rows, config.cols, config.dtype.name());
        let build = match &netlist {
            Some(n) => {
                let (board, cells) = (n.board.name, n.cells);
                let phase = Phase::start(
                    format!("Verilating the {board} build's netlist ({cells} cells){tracing}"),
                    false,
                );
                let build = n.build(&opts)?;
                phase.finish();
                build
            }
            None => {
                let phase = Phase::start(
                    format!("Verilating the {rows}x{cols} {dtype} RTL{tracing}"),
                    false,
                );
                let build = RtlBuild::new(&top, &opts)
                    .map_err(|e| anyhow!("the {rows}x{cols} {dtype} RTL: {e}"))?;
                phase.finish();
                build
            }
        };
        let took = started.elapsed().as_secs_f64();
        if took > 2.0 {
            let what = if trace { "with tracing " } else { "" };
            eprintln!("Verilated {what}in {took:.0} s (cached for the next run)");
        }
        Ok(build)
    };
    let build = verilate(args.vcd.is_some())?;
    let fresh_rtl = || -> anyhow::Result<Injected> {
        Ok(Injected { inner: args.link.machine(&build)?, fault: args.inject_fault })
    };
    let mut rtl = fresh_rtl()?;
    let image = Image::random(&config, &rtl, args.seed);
    let golden_of = |kind| golden(kind, config, top.dram_bytes).map_err(|e| anyhow!("{e}"));

    let long = program.len() >= LONG_PROGRAM;
    let running = |on: &str, how: &str| {
        let n = program.len();
        Phase::start(format!("{on}: running {n} instructions{how}"), long)
    };
    let phase = running("functional machine", "");
    let functional = run_from(golden_of(GoldenKind::Functional)?.as_mut(), &image, &program)?;
    phase.finish();
    let phase = running("cycle machine", "");
    let cycle = run_from(golden_of(GoldenKind::Cycle)?.as_mut(), &image, &program)?;
    phase.finish();
    if let Some(d) = first_difference(&config, &functional, &cycle) {
        bail!("core's functional and cycle machines differ on this program ({d}): a core bug");
    }

    // The RTL run, traced when asked.
    image.load_into(&mut rtl).with_context(|| format!("loading the {what}'s memories"))?;
    if let Some(vcd) = vcd_file {
        let now = simulated_cycles(&rtl.inner);
        pins(&mut rtl.inner).trace_from(&outputs.tool_path(vcd), now);
    }
    let before = simulated_cycles(&rtl.inner);
    let over = format!(", each sent over the {}", args.link.name());
    let phase = running(&what.to_lowercase(), &over);
    let t0 = Instant::now();
    let result = rtl.run(&program);
    let wall = t0.elapsed().as_secs_f64();
    phase.finish();
    let simulated = simulated_cycles(&rtl.inner) - before;
    if let Err(MachineError::Link(e)) = &result {
        bail!("the {what}'s link failed: {e}");
    }
    let got = Outcome { result, memories: Image::read_from(&mut rtl)? };
    if let Some(vcd) = vcd_file {
        pins(&mut rtl.inner).model().close_trace();
        if let Some(e) = pins(&mut rtl.inner).trace_error() {
            bail!("{}: {e}", show(outputs.path(vcd)));
        }
    }
    drop(rtl);

    if let Some(n) = &netlist {
        let sha = n.report.bitstream.as_ref().map_or("none", |b| b.sha256.as_str());
        println!(
            "netlist of {} ({} build, {} cells; bitstream sha256 {sha})",
            show(&n.dir),
            n.board.name,
            n.cells
        );
    }
    print_run(&top, &program, &cycle, &got, simulated, wall, what);
    let difference = first_difference(&config, &cycle, &got);
    let mut report = Report {
        rows: config.rows,
        cols: config.cols,
        dtype: config.dtype.name(),
        dataflow: config.dataflow.short_name(),
        dram_bytes: top.dram_bytes,
        instructions: program.len(),
        seed: args.seed,
        rtl_cycles: got.result.as_ref().ok().and_then(|s| s.cycles),
        cycle_machine_cycles: cycle.result.as_ref().ok().and_then(|s| s.cycles),
        macs: got.result.as_ref().ok().map(|s| s.macs),
        simulated_cycles: simulated,
        rtl_wall_s: wall,
        simulated_cycles_per_s: simulated as f64 / wall.max(1e-9),
        identical: difference.is_none(),
        mismatch: None,
    };
    if difference.is_none() {
        println!(
            "identical: every memory ({} DRAM, {} scratchpad, {} accumulator bytes) and the cycle count",
            image.dram.len(),
            image.spad.len(),
            image.acc.len()
        );
        if let Some(vcd) = &args.vcd {
            println!("VCD of the run: {}", show(vcd));
        }
        return commit(outputs, json_file, &report);
    }

    // Where the RTL first parts from the cycle machine.
    let mut fresh = || -> Result<Pair, MachineFailure> {
        let want = golden_of(GoldenKind::Cycle)?;
        Ok((want, Box::new(fresh_rtl()?)))
    };
    let phase = Phase::start(
        format!("finding the first instruction where the {what} differs (rerunning prefixes)"),
        long,
    );
    let found = localize(&config, &image, &program, &mut fresh)
        .map_err(|e| e.0)
        .context("rerunning prefixes of the program")?
        .ok_or_else(|| anyhow!("the {what} differed once but not when rerun: nondeterminism"))?;
    phase.finish();
    println!("MISMATCH: the {what} parts from the cycle machine");
    println!(
        "  first at instruction {} of {}: {:?}",
        found.index,
        program.len(),
        found.instruction
    );
    match found.dispatch_cycle {
        Some(c) => println!("  dispatched in cycle {c} (core's timing model)"),
        None => println!("  (after a fault: no dispatch cycle)"),
    }
    println!("  {}", found.difference);

    // A VCD of the last cycles of that prefix: one run finds where it ends, a second traces.
    let vcd_file = match vcd_file {
        Some(file) => file,
        None => outputs.writes("--vcd (its default)", Path::new(DEFAULT_VCD))?,
    };
    let vcd = outputs.path(vcd_file).to_path_buf();
    let traced_build = if args.vcd.is_some() { build.clone() } else { verilate(true)? };
    let traced_rtl = || -> anyhow::Result<Injected> {
        Ok(Injected { inner: args.link.machine(&traced_build)?, fault: args.inject_fault })
    };
    let mut probe = traced_rtl()?;
    image.load_into(&mut probe)?;
    let _ = probe.run(&found.prefix);
    let end = simulated_cycles(&probe.inner);
    drop(probe);
    let from = end.saturating_sub(args.vcd_cycles);
    let mut traced = traced_rtl()?;
    pins(&mut traced.inner).trace_from(&outputs.tool_path(vcd_file), from);
    image.load_into(&mut traced)?;
    let _ = traced.run(&found.prefix);
    pins(&mut traced.inner).model().close_trace();
    if let Some(e) = pins(&mut traced.inner).trace_error() {
        bail!("{}: {e}", show(&vcd));
    }
    println!(
        "  VCD of the prefix's last {} cycles (simulated cycles {from}..{end}): {}",
        end - from,
        show(&vcd)
    );
    report.mismatch = Some(MismatchJson {
        instruction_index: found.index,
        instruction: format!("{:?}", found.instruction),
        dispatch_cycle: found.dispatch_cycle,
        difference: found.difference.to_string(),
        vcd: show(&vcd),
    });
    commit(outputs, json_file, &report)?;
    Err(Mismatch.into())
}

fn print_run(
    top: &TopConfig,
    program: &[Instruction],
    cycle: &Outcome,
    rtl: &Outcome,
    simulated: u64,
    wall: f64,
    what: &str,
) {
    let config = &top.array;
    let fmt = |o: &Outcome| match &o.result {
        Ok(s) => format!(
            "{} cycles, {} MACs, {} instructions",
            s.cycles.map_or("?".into(), |c| c.to_string()),
            s.macs,
            s.instructions
        ),
        Err(e) => format!("fault: {e}"),
    };
    println!(
        "{}x{} {} {}{} array, {} bytes of DRAM; program of {} instructions",
        config.rows,
        config.cols,
        config.dtype.name(),
        config.dataflow.short_name(),
        crate::report::schedule_word(config),
        top.dram_bytes,
        program.len()
    );
    println!("  cycle machine: {}", fmt(cycle));
    let label = format!("{}:", what.to_lowercase());
    println!("  {label:<14} {}", fmt(rtl));
    println!(
        "  {} simulation: {simulated} cycles with host traffic in {wall:.3} s ({:.0} cycles/s)",
        what.to_lowercase(),
        simulated as f64 / wall.max(1e-9)
    );
}

/// Writes the JSON report (if asked) and puts every output in place.
fn commit(
    mut outputs: Outputs,
    json_file: Option<OutputId>,
    report: &Report,
) -> anyhow::Result<()> {
    if let Some(file) = json_file {
        outputs.write(file, |out| Ok(serde_json::to_writer_pretty(out, report)?))?;
    }
    outputs.commit()?;
    Ok(())
}

/// A GEMM's program over the packed layout, and the DRAM it needs.
///
/// Both are bounded before the program is built: the DRAM by what an emitted design holds (the
/// RTL runs every program here), the program by [`crate::limits::MEMORY_LIMIT`].
fn gemm_program(
    config: &ArrayConfig,
    shape: GemmShape,
) -> anyhow::Result<(Vec<Instruction>, usize)> {
    let what = format!("--gemm {}x{}x{}", shape.m, shape.k, shape.n);
    let (layout, dram) = GemmLayout::packed(config, &shape).map_err(|e| anyhow!("--gemm: {e}"))?;
    if dram > MAX_DRAM_BYTES {
        bail!("{what} needs {dram} bytes of DRAM; the limit is {MAX_DRAM_BYTES} ({RTL_DRAM})");
    }
    let plan = GemmPlan::new(config, shape, layout).map_err(|e| anyhow!("--gemm: {e}"))?;
    let count = plan.instruction_count();
    let bytes = count.saturating_mul(size_of::<Instruction>() as u64);
    check_memory(format_args!("{what}'s program of {count} instructions"), bytes)?;
    let mut program = Vec::with_capacity(count as usize);
    plan.emit(&mut |i| program.push(i));
    Ok((program, dram))
}
