//! `systole bench`: the flags checked, the accelerator's array chosen (the model's, or a
//! board's measured build), the GPU opened if there is one, then each suite's rows
//! ([`crate::bench`]), printed as a table and written as JSON and SVG.

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail};
use systole_core::{ArrayConfig, Dtype};

use crate::bench::saved::Saved;
use crate::bench::{
    board_build, dram_bandwidth, gemm, gpu_peak, peak_of, plot, pytorch, si, table, train,
    train_cnn, Bench, BoardBuild, BoardLink, ConfigReport, CpuPeak, GpuReport, Report, Suite,
    PROJECTED, PROJECTED_DEPTHS,
};
use crate::cli::{BenchArgs, BenchMachine};
use crate::gpu::device::Gpu;
use crate::gpu::GpuAvailability;
use crate::outputs::Outputs;

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.show {
        return show(path);
    }
    let started = Instant::now();
    let board = match (args.machine, &args.board) {
        (BenchMachine::Board, Some(name)) => {
            Some(board_build(name, args.dtype.map(Dtype::from), args.report.as_deref())?)
        }
        (BenchMachine::Board, None) => bail!("--machine board needs --board NAME"),
        (BenchMachine::Model, Some(_)) => bail!("--board needs --machine board"),
        (BenchMachine::Model, None) if args.report.is_some() => {
            bail!("--report needs --machine board")
        }
        (BenchMachine::Model, None) => None,
    };
    if args.port.is_some() && board.is_none() {
        bail!("--port needs --machine board --board NAME (the build on that board)");
    }
    let mut suite = args.suite;
    let (config, fmax_mhz) = match &board {
        Some(build) => {
            if args.fmax_mhz.is_some() {
                bail!("--fmax-mhz comes from the board's report with --machine board");
            }
            println!(
                "board {}: {}x{} {} as built ({}), fmax {:.2} MHz achieved for {} MHz",
                build.report.board,
                build.config.rows,
                build.config.cols,
                build.config.dtype.name(),
                build.source,
                build.fmax_mhz,
                crate::table::mhz(build.report.target_mhz)
            );
            if build.config.dtype != Dtype::Bf16 && suite != Suite::Gemm {
                if suite == Suite::Train {
                    bail!(
                        "the training step runs in bf16 and this board's build is {}: build it \
                         with --dtype bf16 (systole board build) to time training on it",
                        build.config.dtype.name()
                    );
                }
                println!(
                    "training suite left out: it runs in bf16 and this board's build is {}",
                    build.config.dtype.name()
                );
                suite = Suite::Gemm;
            }
            (build.config, Some(build.fmax_mhz))
        }
        None => {
            let dtype = args.dtype.map_or(Dtype::Bf16, Dtype::from);
            (args.array.config(dtype), args.fmax_mhz)
        }
    };
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    let mut link = match (&board, &args.port) {
        (Some(build), Some(port)) => {
            let built = build.memory().map(|m| m.baud.round() as u32);
            let baud = args.baud.or(built).unwrap_or(systole_boards::serial::DEFAULT_BAUD);
            Some(open_board(build, port, baud)?)
        }
        _ => None,
    };
    if let Some(f) = fmax_mhz {
        ArrayConfig { clock_mhz: f, ..config }
            .validate()
            .map_err(|e| anyhow!("--fmax-mhz: {e}"))?;
    }
    if args.sizes.is_empty() || args.sizes.iter().any(|&s| s == 0 || s > 65536) {
        bail!("--sizes: every size must be 1 to 65536");
    }
    if args.batches.is_empty() || args.batches.iter().any(|&b| b == 0 || b > 65535) {
        bail!("--batches: every batch size must be 1 to 65535");
    }
    // The outputs first, so a path that cannot be written fails before minutes of work.
    let mut outputs = Outputs::new();
    if let Some(report) = &args.report {
        outputs.reads("--report", report)?;
    }
    let json_file = outputs.writes_opt("--json", args.json.as_deref())?;
    let plot_file = outputs.writes_opt("--plot", args.plot.as_deref())?;

    let (projected_rows, projected_cols, projected_mhz) = PROJECTED;
    let projected = ArrayConfig {
        rows: projected_rows,
        cols: projected_cols,
        clock_mhz: projected_mhz,
        spad_depth: PROJECTED_DEPTHS.0,
        acc_depth: PROJECTED_DEPTHS.1,
        ..ArrayConfig::new(projected_rows, projected_cols, config.dtype)
            .with_schedule(config.schedule)
    };
    let (gpu, gpu_report) = open_gpu();
    match &gpu_report {
        GpuReport { available: true, device: Some(d), .. } => println!("GPU: {d}"),
        GpuReport { reason: Some(r), .. } => {
            println!("{}", crate::table::paragraph(&format!("GPU rows unavailable: {r}")))
        }
        _ => {}
    }
    let bench = Bench {
        config,
        fmax_mhz,
        board: board.as_ref().and_then(BoardBuild::memory),
        projected,
        cpu: CpuPeak::of_this_machine(),
        gpu,
        gpu_report,
    };
    let about = format!(
        "accelerator: {}x{} {}{} {} array{} at {} MHz (peak {}MAC/s); projection: {}x{} at {} \
         MHz\nCPU: {} at {:.0} MHz, peak assumed {}MAC/s ({})",
        config.rows,
        config.cols,
        config.dataflow.short_name(),
        crate::report::schedule_word(&config),
        config.dtype.name(),
        crate::report::dram_port_words(config.dram_port),
        config.clock_mhz,
        si(peak_of(&config)),
        projected_rows,
        projected_cols,
        projected_mhz,
        bench.cpu.model,
        bench.cpu.mhz,
        si(bench.cpu.peak_macs_per_s),
        bench.cpu.assumption
    );
    println!("{}", crate::table::paragraph(&about));

    let mut rows = Vec::new();
    if matches!(suite, Suite::Gemm | Suite::All) {
        gemm::suite(&bench, &args.sizes, link.as_mut(), &mut rows)?;
    }
    if matches!(suite, Suite::Train | Suite::All) {
        train::suite(&bench, &args.batches, &mut rows)?;
        if let Some(&smallest) = args.batches.iter().min() {
            train_cnn::suite(&bench, smallest, &mut rows)?;
        }
    }
    let pytorch = if args.pytorch {
        pytorch::run(suite, &args.sizes, &args.batches, &mut rows)
    } else {
        pytorch::PytorchReport::not_asked()
    };

    println!("{}", table(&rows));
    println!(
        "{}",
        crate::table::paragraph(
            "MAC/s: multiply-accumulates per second; % peak: of that machine's peak (accelerator: \
             rows x cols x clock; CPU: the assumption above; GPU: datasheet dense peak); MAC/B: \
             MACs per byte moved (accelerator: its DRAM loads and stores; CPU, GPU: every operand \
             once)."
        )
    );

    let report = Report {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        host: host_line(),
        config: ConfigReport {
            rows: config.rows,
            cols: config.cols,
            dtype: config.dtype.name(),
            dataflow: config.dataflow.short_name(),
            schedule: config.schedule.name(),
            spad_depth: config.spad_depth,
            acc_depth: config.acc_depth,
            clock_mhz: config.clock_mhz,
            fmax_mhz,
            board: board.as_ref().map(|b| format!("{} ({})", b.report.board, b.source)),
            peak_macs_per_s: peak_of(&config),
            dram_bytes_per_s: dram_bandwidth(&config),
            projected: format!("{projected_rows}x{projected_cols} at {projected_mhz} MHz"),
        },
        cpu_peak: bench.cpu.clone(),
        gpu: bench.gpu_report.clone(),
        pytorch,
        seconds: started.elapsed().as_secs_f64(),
        rows,
    };
    if let Some(file) = json_file {
        outputs.write(file, |out| {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            out.write_all(b"\n")
        })?;
    }
    if let Some(file) = plot_file {
        let path = outputs.path(file).display().to_string();
        let svg = plot::svg(&report, &bench).map_err(|e| anyhow!("drawing {path}: {e}"))?;
        outputs.write(file, |out| out.write_all(svg.as_bytes()))?;
    }
    for path in outputs.commit()? {
        println!("wrote {}", path.display());
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Opens the board on `port`: it must identify as the accelerator `build` describes, with at
/// least the DRAM the build has.
fn open_board(build: &BoardBuild, port: &str, baud: u32) -> anyhow::Result<BoardLink> {
    let dram = build.report.built.as_ref().map_or(0, |b| b.dram_bytes);
    let link = crate::machines::Link { port: Some(port.to_string()), baud, threads: None };
    let machine =
        crate::machines::open(crate::machines::MachineKind::Board, &link, build.config, dram)?;
    println!(
        "board on {port} at {baud} baud: {}x{} {} with {dram} bytes of DRAM; GEMMs that fit run there",
        build.config.rows,
        build.config.cols,
        build.config.dtype.name()
    );
    Ok(BoardLink { machine, dram, port: port.to_string(), baud })
}

fn open_gpu() -> (Option<Gpu>, GpuReport) {
    match GpuAvailability::probe() {
        GpuAvailability::Unavailable { reason } => (
            None,
            GpuReport {
                available: false,
                device: None,
                libraries: None,
                reason: Some(reason),
                peak: None,
            },
        ),
        GpuAvailability::Available { device, libraries } => match Gpu::open() {
            Ok(gpu) => {
                let peak = gpu_peak(&device);
                (
                    Some(gpu),
                    GpuReport {
                        available: true,
                        device: Some(device),
                        libraries: Some(libraries),
                        reason: None,
                        peak,
                    },
                )
            }
            Err(e) => (
                None,
                GpuReport {
                    available: false,
                    device: Some(device),
                    libraries: Some(libraries),
                    reason: Some(e.to_string()),
                    peak: None,
                },
            ),
        },
    }
}

/// The machine the bench ran on, for the report.
fn host_line() -> String {
    let cpu = CpuPeak::of_this_machine().model;
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{cpu}, {threads} logical CPUs, {} {}", std::env::consts::OS, std::env::consts::ARCH)
}

/// `--show`: a saved report's rows as the bench prints them, under the command and host that
/// made them.
fn show(path: &Path) -> anyhow::Result<()> {
    let saved = Saved::read(path)?;
    println!("{}", crate::table::paragraph(&format!("{}: `{}`", path.display(), saved.command)));
    println!("{}", crate::table::paragraph(&format!("host: {}", saved.host)));
    println!("{}", table(&saved.rows));
    Ok(())
}
