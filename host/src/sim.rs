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

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::Serialize;
use systole_core::check::{random_program, SplitMix};
use systole_core::isa::{decode, encode, Instruction, Word};
use systole_core::machine::{golden, validate_program, GoldenKind, Region, Stats};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Machine, MachineError};
use systole_hdl::top::MAX_DRAM_BYTES;
use systole_hdl::TopConfig;
use systole_sim::compare::{first_difference, localize, run_from, Image, Outcome, Pair};
use systole_sim::machine::{pins, simulated_cycles};
use systole_sim::{rtl_top_config, rtl_top_config_exact, BuildOptions, RtlBuild, RtlMachine};

use crate::cli::{ArrayArgs, DtypeArg};
use crate::limits::check_memory;
use crate::netlist::Netlist;
use crate::outputs::{OutputId, Outputs};
use crate::progress::Phase;

/// Programs of this many words or more are long to run on the RTL (each word is sent over its
/// UART, 640 simulated cycles, about half a millisecond): their steps are announced on stderr
/// even when it is not a terminal.
const LONG_PROGRAM: usize = 4096;

/// Where a mismatch's VCD goes without `--vcd`.
const DEFAULT_VCD: &str = "systole-mismatch.vcd";

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Datapath.
    #[arg(long, value_enum, required_unless_present = "netlist")]
    pub dtype: Option<DtypeArg>,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Run on a board build's synthesized netlist instead of the emitted RTL: DIR is what
    /// `systole board build` wrote, and the machine is the one its report.json records (the
    /// array options do not apply). Each cell takes Yosys' model of it (the ECP5's block RAM,
    /// multiplier and PLL, which Yosys only declares, this simulator's); the link is the
    /// board's UART at its divisor.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["dtype", "ArrayArgs", "dram_bytes"])]
    pub netlist: Option<PathBuf>,
    /// The host link that carries the program and the memories: the UART (what a board's USB
    /// serial port drives), or the SPI slave at an eighth of the machine's clock, a byte in 64
    /// cycles (a board's UART takes 1,760 and more: the faster way through a netlist).
    #[arg(long, value_enum, default_value_t = HostLinkArg::Uart)]
    pub link: HostLinkArg,
    /// A program file: 16-byte little-endian instruction words (`--save-program` writes one).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["gemm", "random"],
        conflicts_with_all = ["gemm", "random"]
    )]
    pub program: Option<PathBuf>,
    /// A tiled GEMM, M x K x N, on the random operands DRAM starts with.
    #[arg(long, value_name = "MxKxN", value_parser = parse_shape, conflicts_with = "random")]
    pub gemm: Option<GemmShape>,
    /// A random valid program from --seed (core's `check::random_program`, what the
    /// conformance tests run): up to 24 instructions of every kind the machine has, on random
    /// memories.
    #[arg(long)]
    pub random: bool,
    /// Seeds the memories every machine starts from (and a --random program).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// DRAM bytes of the simulated accelerator (default: enough for the GEMM, at least 64 KiB,
    /// rounded up to a power of two). Every memory is loaded and compared whole, so small
    /// memories (this, --spad-depth, --acc-depth) make a run quicker.
    #[arg(long, value_name = "BYTES")]
    pub dram_bytes: Option<usize>,
    /// Write a VCD: of the whole run, or on a mismatch of the last cycles of the first
    /// differing prefix (default there: systole-mismatch.vcd).
    #[arg(long, value_name = "out.vcd")]
    pub vcd: Option<PathBuf>,
    /// Cycles a mismatch's VCD covers, ending where the differing prefix ends.
    #[arg(long, default_value_t = 4000, value_name = "N")]
    pub vcd_cycles: u64,
    /// Verilator threads of the model (default: one).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: Option<u32>,
    /// Write the program that runs (e.g. a GEMM's) as a program file.
    #[arg(long, value_name = "FILE")]
    pub save_program: Option<PathBuf>,
    /// Write the run's figures and the comparison as JSON.
    #[arg(long, value_name = "sim.json")]
    pub json: Option<PathBuf>,
    /// Self-test of the mismatch report: flip bit 0 of this byte of the RTL's memory, REGION
    /// (dram, spad, acc) at OFFSET, after any run of more than K instructions.
    #[arg(long, value_name = "K:REGION:OFFSET", value_parser = parse_injection, hide = true)]
    pub inject_fault: Option<Injection>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HostLinkArg {
    Uart,
    Spi,
}

impl HostLinkArg {
    fn name(self) -> &'static str {
        match self {
            HostLinkArg::Uart => "UART",
            HostLinkArg::Spi => "SPI",
        }
    }

    /// A fresh machine of `build` over this link.
    fn machine(self, build: &RtlBuild) -> Result<RtlMachine, systole_sim::SimError> {
        match self {
            HostLinkArg::Uart => build.machine(),
            HostLinkArg::Spi => build.machine_over_spi(),
        }
    }
}

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

/// A mismatch found: reported, then the command exits with status 1.
#[derive(Debug)]
pub struct Mismatch;

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the simulated machine differs from the cycle machine (see above)")
    }
}

impl std::error::Error for Mismatch {}

fn parse_shape(s: &str) -> Result<GemmShape, String> {
    let dims: Vec<&str> = s.split(['x', 'X']).collect();
    let bad = || format!("{s:?}: expected MxKxN with each dimension 1 to 65535, e.g. 64x96x32");
    let [m, k, n] = dims.as_slice() else { return Err(bad()) };
    let dim = |d: &str| d.trim().parse::<u32>().ok().filter(|v| (1..=65535).contains(v));
    match (dim(m), dim(k), dim(n)) {
        (Some(m), Some(k), Some(n)) => Ok(GemmShape { m, k, n }),
        _ => Err(bad()),
    }
}

/// A fault injected into the RTL machine's results (the hidden `--inject-fault`).
#[derive(Clone, Copy, Debug)]
pub struct Injection {
    after: usize,
    region: Region,
    offset: usize,
}

fn parse_injection(s: &str) -> Result<Injection, String> {
    let bad = || format!("{s:?}: expected K:REGION:OFFSET, e.g. 3:dram:0x40");
    let parts: Vec<&str> = s.split(':').collect();
    let [k, region, offset] = parts.as_slice() else { return Err(bad()) };
    let region = match *region {
        "dram" => Region::Dram,
        "spad" => Region::Spad,
        "acc" => Region::Acc,
        _ => return Err(bad()),
    };
    let offset = match offset.strip_prefix("0x") {
        Some(hex) => usize::from_str_radix(hex, 16).ok(),
        None => offset.parse().ok(),
    };
    Ok(Injection { after: k.parse().map_err(|_| bad())?, region, offset: offset.ok_or_else(bad)? })
}

/// The RTL machine, with a fault injected into what it leaves when asked to.
struct Injected {
    inner: RtlMachine,
    fault: Option<Injection>,
}

impl Machine for Injected {
    fn config(&self) -> &ArrayConfig {
        self.inner.config()
    }
    fn name(&self) -> &'static str {
        "rtl"
    }
    fn region_size(&self, region: Region) -> usize {
        self.inner.region_size(region)
    }
    fn write(&mut self, region: Region, offset: usize, bytes: &[u8]) -> Result<(), MachineError> {
        self.inner.write(region, offset, bytes)
    }
    fn read(&mut self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError> {
        self.inner.read(region, offset, out)
    }
    fn run(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        let result = self.inner.run(program);
        let body = program.iter().take_while(|i| **i != Instruction::Halt).count();
        if let Some(f) = self.fault.filter(|f| body > f.after) {
            // The whole aligned element around the byte: accumulator words, scratchpad elements.
            let width = match f.region {
                Region::Dram => 1,
                Region::Spad => self.inner.config().dtype.elem_bytes(),
                Region::Acc => 4,
            };
            let at = f.offset / width * width;
            let mut element = vec![0u8; width];
            self.inner.read(f.region, at, &mut element)?;
            element[f.offset - at] ^= 1;
            self.inner.write(f.region, at, &element)?;
        }
        result
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

fn show(p: &Path) -> String {
    p.display().to_string()
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

/// What [`MAX_DRAM_BYTES`] is, for the messages that name it.
const RTL_DRAM: &str = "16 MiB, the most an emitted design holds";

/// Reads a program file: whole 16-byte words, each one that decodes, no more of them than
/// [`crate::limits::MEMORY_LIMIT`] holds decoded. A regular file's length is checked before it
/// is read; any other file (a pipe, `/dev/zero`) is decoded word by word as it is read.
pub fn read_program(path: &Path) -> anyhow::Result<Vec<Instruction>> {
    let ragged = |len: u64| {
        anyhow!("{}: {len} bytes is not a whole number of 16-byte instruction words", show(path))
    };
    let memory = |words: u64| {
        let bytes = words.saturating_mul(size_of::<Instruction>() as u64);
        check_memory(format_args!("{}: a program of {words} words", show(path)), bytes)
    };
    let file = std::fs::File::open(path).with_context(|| show(path))?;
    let metadata = file.metadata().with_context(|| show(path))?;
    if metadata.is_file() {
        if metadata.len() == 0 || metadata.len() % 16 != 0 {
            return Err(ragged(metadata.len()));
        }
        memory(metadata.len() / 16)?;
    }
    let mut reader = std::io::BufReader::new(file);
    let mut program = Vec::new();
    loop {
        let mut word = [0u8; 16];
        let got = read_word(&mut reader, &mut word).with_context(|| show(path))?;
        let i = program.len();
        if got < 16 {
            if got > 0 || i == 0 {
                return Err(ragged(i as u64 * 16 + got as u64));
            }
            return Ok(program);
        }
        memory(i as u64 + 1)?;
        program.push(
            decode(Word::from_le_bytes(word))
                .map_err(|e| anyhow!("{}: word {i} (byte {}): {e}", show(path), i * 16))?,
        );
    }
}

/// Fills `word` from `reader`; fewer bytes than its length only at the end of the file.
fn read_word(reader: &mut impl std::io::Read, word: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < word.len() {
        match reader.read(&mut word[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Writes `program` as a program file.
pub fn write_program(out: &mut dyn Write, program: &[Instruction]) -> std::io::Result<()> {
    for (i, ins) in program.iter().enumerate() {
        let word = encode(ins).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("instruction {i}: {e}"))
        })?;
        out.write_all(&word.0.to_le_bytes())?;
    }
    Ok(())
}
