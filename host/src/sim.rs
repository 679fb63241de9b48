//! `systole sim`: one program on the Verilated RTL, beside core's cycle and functional machines,
//! from the same random memories; every memory and the cycle count compared.
//!
//! On a mismatch the command finds the first instruction after which the RTL parts from the
//! cycle machine (bisecting over the program's prefixes on fresh machines), prints where (the
//! instruction, its dispatch cycle, the first differing memory element or the cycle counts),
//! writes a VCD of the last `--vcd-cycles` cycles of that prefix's run, prints its path, and
//! exits with status 1. Errors (bad flags, files, a build that fails) exit with status 2.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::Serialize;
use systole_core::isa::{decode, encode, Instruction, Word};
use systole_core::machine::{golden, validate_program, GoldenKind, Region, Stats};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Machine, MachineError};
use systole_hdl::TopConfig;
use systole_sim::compare::{first_difference, localize, run_from, Image, Outcome, Pair};
use systole_sim::machine::{pins, simulated_cycles};
use systole_sim::{rtl_top_config, BuildOptions, RtlBuild, RtlMachine};

use crate::cli::{ArrayArgs, DtypeArg};
use crate::staged::StagedFile;

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Datapath.
    #[arg(long, value_enum)]
    pub dtype: DtypeArg,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// A program file: 16-byte little-endian instruction words (`--save-program` writes one).
    #[arg(long, value_name = "FILE", required_unless_present = "gemm", conflicts_with = "gemm")]
    pub program: Option<PathBuf>,
    /// A tiled GEMM, M x K x N, on the random operands DRAM starts with.
    #[arg(long, value_name = "MxKxN", value_parser = parse_shape)]
    pub gemm: Option<GemmShape>,
    /// Seeds the memories every machine starts from.
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
        f.write_str("the RTL differs from the cycle machine (see above)")
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
    let config = args.array.config(Dtype::from(args.dtype));
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    let (program, needed) = match (&args.program, args.gemm) {
        (Some(path), _) => (read_program(path)?, 0),
        (None, Some(shape)) => gemm_program(&config, shape)?,
        (None, None) => bail!("give --program FILE or --gemm MxKxN"),
    };
    let dram = match args.dram_bytes {
        Some(d) if d < needed => {
            bail!("--dram-bytes {d}: the {}-byte GEMM does not fit", needed)
        }
        Some(d) => d,
        None => needed,
    };
    let top = match args.dram_bytes {
        Some(exact) => TopConfig { dram_bytes: exact, ..rtl_top_config(config, exact) },
        None => rtl_top_config(config, dram),
    };
    validate_program(&config, &program, top.dram_bytes).map_err(|e| {
        anyhow!("{}: {e}", args.program.as_deref().map_or("the program".into(), show))
    })?;
    if let Some(path) = &args.save_program {
        write_program(path, &program)?;
    }

    // Tracing is built in only when a VCD is wanted: it slows building and simulating.
    let verilate = |trace: bool| -> anyhow::Result<RtlBuild> {
        let started = Instant::now();
        let opts = BuildOptions { threads: args.threads, trace, ..Default::default() };
        let build = RtlBuild::new(&top, &opts).map_err(|e| {
            anyhow!("the {}x{} {} RTL: {e}", config.rows, config.cols, config.dtype.name())
        })?;
        let took = started.elapsed().as_secs_f64();
        if took > 2.0 {
            let what = if trace { "with tracing " } else { "" };
            eprintln!("Verilated {what}in {took:.0} s (cached for the next run)");
        }
        Ok(build)
    };
    let build = verilate(args.vcd.is_some())?;
    let fresh_rtl = || -> anyhow::Result<Injected> {
        Ok(Injected { inner: build.machine()?, fault: args.inject_fault })
    };
    let mut rtl = fresh_rtl()?;
    let image = Image::random(&config, &rtl, args.seed);
    let golden_of = |kind| golden(kind, config, top.dram_bytes).map_err(|e| anyhow!("{e}"));

    let functional = run_from(golden_of(GoldenKind::Functional)?.as_mut(), &image, &program)?;
    let cycle = run_from(golden_of(GoldenKind::Cycle)?.as_mut(), &image, &program)?;
    if let Some(d) = first_difference(&config, &functional, &cycle) {
        bail!("core's functional and cycle machines differ on this program ({d}): a core bug");
    }

    // The RTL run, traced when asked.
    image.load_into(&mut rtl).context("loading the RTL's memories")?;
    if let Some(vcd) = &args.vcd {
        let now = simulated_cycles(&rtl.inner);
        pins(&mut rtl.inner).trace_from(vcd, now);
    }
    let before = simulated_cycles(&rtl.inner);
    let t0 = Instant::now();
    let result = rtl.run(&program);
    let wall = t0.elapsed().as_secs_f64();
    let simulated = simulated_cycles(&rtl.inner) - before;
    if let Err(MachineError::Link(e)) = &result {
        bail!("the RTL's link failed: {e}");
    }
    let got = Outcome { result, memories: Image::read_from(&mut rtl)? };
    if let Some(vcd) = &args.vcd {
        pins(&mut rtl.inner).model().close_trace();
        if let Some(e) = pins(&mut rtl.inner).trace_error() {
            bail!("{}: {e}", show(vcd));
        }
    }
    drop(rtl);

    print_run(&config, &top, &program, &cycle, &got, simulated, wall);
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
        return write_json(args, &report);
    }

    // Where the RTL first parts from the cycle machine.
    let mut fresh = || -> Result<Pair, MachineFailure> {
        let want = golden_of(GoldenKind::Cycle)?;
        Ok((want, Box::new(fresh_rtl()?)))
    };
    let found = localize(&config, &image, &program, &mut fresh)
        .map_err(|e| e.0)
        .context("rerunning prefixes of the program")?
        .ok_or_else(|| anyhow!("the RTL differed once but not when rerun: nondeterminism"))?;
    println!("MISMATCH: the RTL parts from the cycle machine");
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
    let vcd = args.vcd.clone().unwrap_or_else(|| PathBuf::from("systole-mismatch.vcd"));
    let traced_build = if args.vcd.is_some() { build.clone() } else { verilate(true)? };
    let traced_rtl = || -> anyhow::Result<Injected> {
        Ok(Injected { inner: traced_build.machine()?, fault: args.inject_fault })
    };
    let mut probe = traced_rtl()?;
    image.load_into(&mut probe)?;
    let _ = probe.run(&found.prefix);
    let end = simulated_cycles(&probe.inner);
    drop(probe);
    let from = end.saturating_sub(args.vcd_cycles);
    let mut traced = traced_rtl()?;
    pins(&mut traced.inner).trace_from(&vcd, from);
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
    write_json(args, &report)?;
    Err(Mismatch.into())
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

fn print_run(
    config: &ArrayConfig,
    top: &TopConfig,
    program: &[Instruction],
    cycle: &Outcome,
    rtl: &Outcome,
    simulated: u64,
    wall: f64,
) {
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
        "{}x{} {} {} array, {} bytes of DRAM; program of {} instructions",
        config.rows,
        config.cols,
        config.dtype.name(),
        config.dataflow.short_name(),
        top.dram_bytes,
        program.len()
    );
    println!("  cycle machine: {}", fmt(cycle));
    println!("  rtl:           {}", fmt(rtl));
    println!(
        "  rtl simulation: {simulated} cycles with host traffic in {wall:.3} s ({:.0} cycles/s)",
        simulated as f64 / wall.max(1e-9)
    );
}

fn write_json(args: &SimArgs, report: &Report) -> anyhow::Result<()> {
    let Some(path) = &args.json else { return Ok(()) };
    let mut out = StagedFile::beside(path).with_context(|| show(path))?;
    serde_json::to_writer_pretty(out.file(), report).with_context(|| show(path))?;
    out.commit().with_context(|| show(path))
}

/// A GEMM's program over the packed layout, and the DRAM it needs.
fn gemm_program(
    config: &ArrayConfig,
    shape: GemmShape,
) -> anyhow::Result<(Vec<Instruction>, usize)> {
    let (layout, dram) = GemmLayout::packed(config, &shape).map_err(|e| anyhow!("--gemm: {e}"))?;
    let plan = GemmPlan::new(config, shape, layout).map_err(|e| anyhow!("--gemm: {e}"))?;
    let mut program = Vec::new();
    plan.emit(&mut |i| program.push(i));
    Ok((program, dram))
}

/// Reads a program file: whole 16-byte words, each one that decodes.
pub fn read_program(path: &Path) -> anyhow::Result<Vec<Instruction>> {
    let bytes = std::fs::read(path).with_context(|| show(path))?;
    if bytes.is_empty() || bytes.len() % 16 != 0 {
        bail!(
            "{}: {} bytes is not a whole number of 16-byte instruction words",
            show(path),
            bytes.len()
        );
    }
    bytes
        .chunks_exact(16)
        .enumerate()
        .map(|(i, w)| {
            let mut word = [0u8; 16];
            word.copy_from_slice(w);
            decode(Word::from_le_bytes(word))
                .map_err(|e| anyhow!("{}: word {i} (byte {}): {e}", show(path), i * 16))
        })
        .collect()
}

/// Writes `program` as a program file, atomically.
pub fn write_program(path: &Path, program: &[Instruction]) -> anyhow::Result<()> {
    let mut out = StagedFile::beside(path).with_context(|| show(path))?;
    for (i, ins) in program.iter().enumerate() {
        let word = encode(ins).map_err(|e| anyhow!("instruction {i}: {e}"))?;
        std::io::Write::write_all(out.file(), &word.0.to_le_bytes()).with_context(|| show(path))?;
    }
    out.commit().with_context(|| show(path))
}
