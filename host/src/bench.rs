//! `systole bench`: the accelerator against a CPU and a CUDA GPU on the same work.
//!
//! Two suites: GEMMs (square `N x N x N` and skinny `64 x N x N`, N from 64 to 8192) and one
//! training step of the digits MLP (64-64-10) at a few batch sizes, and of LeNet-5 at the
//! smallest of them (CPU and GPU rows so far). For each workload, one row per machine:
//!
//! * **accelerator (model)**: the exact cycle count at the config's clock (and at `--fmax-mhz`):
//!   [`GemmPlan::cycles`] or the compiled step's cycles, which equal the cycle machine's count
//!   (tested in core; where the cycle machine runs here, checked again);
//! * **functional / cycle machine**: the simulators' own wall-clock speed, up to sizes they
//!   finish in about a second; results checked exactly against `core::reference` first;
//! * **cpu**: a plain f32 loop (GEMM) or the f32 reference executor (training), one thread;
//! * **gpu fp32 / bf16**: cuBLAS, and the CUDA-graph training step, or "unavailable";
//! * **projected**: the same work on a TPU-class 128 x 128 array at 940 MHz, from the closed
//!   form, labelled as a projection;
//! * **pytorch** (with `--pytorch`): `bench/pytorch_mlp.py`'s figures on the same shapes.
//!
//! With `--machine board --board NAME`, the accelerator is that board's measured build: its
//! array, dtype and memories, and the fmax nextpnr achieved, from the build's `report.json`
//! (the board's committed report of its default build in `--dtype`, INT8 unless asked, or
//! `--report FILE`). No board need be attached: the exact cycle counts become time at the
//! measured clock.
//!
//! Every result is checked before it is timed. Outputs: an aligned table, `--json`, and
//! `--plot` (an SVG of throughput against size and a roofline), each written whole or not at
//! all.

mod accel_step;
pub mod gemm;
pub mod plot;
pub mod pytorch;
pub mod saved;
pub mod train;
pub mod train_cnn;

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use systole_core::isa::Instruction;
use systole_core::link::Traffic;
use systole_core::{ArrayConfig, DramPort, Dtype};

use crate::gpu::device::Gpu;
use crate::gpu::GpuError;

/// A board attached over its serial port (`--port`), opened for the build's accelerator.
pub struct BoardLink {
    pub machine: Box<dyn systole_core::Machine>,
    /// The board's DRAM, from the build's report (checked against what the board says).
    pub dram: usize,
    pub port: String,
    pub baud: u32,
}

/// The array and achieved clock of a board's measured build.
#[derive(Clone, Debug)]
pub struct BoardBuild {
    pub config: ArrayConfig,
    pub fmax_mhz: f64,
    pub report: systole_boards::Report,
    /// Where the report came from.
    pub source: String,
}

/// The measured build `--machine board` uses: `report` if given, else the board's committed
/// report of its default build in `dtype` (INT8 if none). A report must describe a
/// `systole_top` build that met timing, in `dtype` if one is given.
pub fn board_build(
    board: &str,
    dtype: Option<Dtype>,
    report: Option<&Path>,
) -> anyhow::Result<BoardBuild> {
    let b = systole_boards::board::named(board)?;
    let (json, source) = match report {
        Some(path) => (
            crate::limits::read_file(path)
                .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
                .with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        ),
        None => {
            let want = dtype.unwrap_or(Dtype::Int8);
            let Some(preset) = b.preset(want) else {
                bail!("no {} array fits board {} (docs/BOARDS.md)", want.name(), b.name)
            };
            match preset.measured {
                Some(json) => (
                    json.to_string(),
                    format!("{}'s committed measured {} build", b.name, want.name()),
                ),
                None => bail!(
                    "board {} has no measured {} build: run `systole board build {} --dtype {} \
                     -o DIR` and pass --report DIR/report.json",
                    b.name,
                    want.name(),
                    b.name,
                    want.name()
                ),
            }
        }
    };
    let report = systole_boards::Report::from_json(&json).map_err(|e| anyhow!("{source}: {e}"))?;
    if report.board != b.name {
        bail!("{source} is a build for {}, not {}", report.board, b.name);
    }
    let Some(built) = report.built.clone() else {
        bail!("{source} does not say which accelerator was built (not a `systole board build` report)")
    };
    if !report.timing_met {
        bail!(
            "{source}: timing was not met ({:.2} MHz achieved for {} MHz): that bitstream is not \
             usable",
            report.fmax_mhz,
            crate::table::mhz(report.target_mhz)
        );
    }
    let config = built.array_config().map_err(|e| anyhow!("{source}: {e}"))?;
    if let Some(want) = dtype.filter(|&want| want != config.dtype) {
        bail!("{source} is a build in {}, not {}", config.dtype.name(), want.name());
    }
    Ok(BoardBuild { config, fmax_mhz: report.fmax_mhz, report, source })
}

/// Which workloads a bench runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    Gemm,
    Train,
    All,
}

impl Suite {
    pub const ALL: [Suite; 3] = [Suite::Gemm, Suite::Train, Suite::All];

    pub fn name(self) -> &'static str {
        match self {
            Suite::Gemm => "gemm",
            Suite::Train => "train",
            Suite::All => "all",
        }
    }
}

/// The TPU-class array the projection rows describe: rows, columns, MHz.
pub const PROJECTED: (u16, u16, f64) = (128, 128, 940.0);
/// Its memories, TPU v1's in kind (a unified buffer of megabytes, 4,096 accumulator rows): the
/// most scratchpad rows the ISA addresses (16 MiB of BF16 rows 128 wide) and 4,096 accumulator
/// rows (2 MiB).
pub const PROJECTED_DEPTHS: (u32, u32) = (65_536, 4_096);

/// What a row's figure is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Exact cycles of the modelled hardware at a clock.
    Model,
    /// Wall-clock speed of a simulator on this machine.
    Simulator,
    /// Wall-clock (or CUDA-event) time of real hardware.
    Measured,
    /// The closed form on a configuration nobody built.
    Projected,
    /// The machine is not here (no GPU, no PyTorch).
    Unavailable,
    /// Too big for this machine in the bench's time budget.
    Skipped,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Simulator => "simulator",
            Kind::Measured => "measured",
            Kind::Projected => "projected",
            Kind::Unavailable => "unavailable",
            Kind::Skipped => "skipped",
        }
    }
}

/// One machine on one workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub suite: String,
    /// `256x256x256`, or `mlp 64-64-10 batch 64`.
    pub workload: String,
    /// GEMM shape (m, k, n); batch size for training.
    pub m: Option<u32>,
    pub k: Option<u32>,
    pub n: Option<u32>,
    pub batch: Option<u32>,
    pub machine: String,
    pub kind: Kind,
    pub dtype: String,
    pub macs: u64,
    pub seconds: Option<f64>,
    pub macs_per_s: Option<f64>,
    pub peak_macs_per_s: Option<f64>,
    pub fraction_of_peak: Option<f64>,
    pub cycles: Option<u64>,
    /// Bytes moved: the accelerator's DRAM traffic, or every operand once for CPU and GPU.
    pub bytes: Option<u64>,
    pub macs_per_byte: Option<f64>,
    /// How the result was checked before it was timed.
    pub check: String,
    pub note: String,
}

impl Row {
    fn new(
        suite: &'static str,
        workload: &str,
        machine: impl Into<String>,
        kind: Kind,
        dtype: &str,
        macs: u64,
    ) -> Row {
        Row {
            suite: suite.to_string(),
            workload: workload.to_string(),
            m: None,
            k: None,
            n: None,
            batch: None,
            machine: machine.into(),
            kind,
            dtype: dtype.to_string(),
            macs,
            seconds: None,
            macs_per_s: None,
            peak_macs_per_s: None,
            fraction_of_peak: None,
            cycles: None,
            bytes: None,
            macs_per_byte: None,
            check: String::new(),
            note: String::new(),
        }
    }

    /// Sets the time and what follows from it.
    fn timed(mut self, seconds: f64, peak: Option<f64>) -> Row {
        self.seconds = Some(seconds);
        let rate = self.macs as f64 / seconds;
        self.macs_per_s = Some(rate);
        self.peak_macs_per_s = peak;
        self.fraction_of_peak = peak.map(|p| rate / p);
        self
    }

    fn moved(mut self, bytes: u64) -> Row {
        self.bytes = Some(bytes);
        self.macs_per_byte = Some(self.macs as f64 / bytes.max(1) as f64);
        self
    }

    fn checked(mut self, check: impl Into<String>) -> Row {
        self.check = check.into();
        self
    }

    fn noted(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

/// The CPU's peak for the fraction-of-peak column: an assumption, stated.
#[derive(Clone, Debug, Serialize)]
pub struct CpuPeak {
    pub model: String,
    pub mhz: f64,
    pub mhz_source: &'static str,
    pub macs_per_cycle: u32,
    pub threads: u32,
    pub peak_macs_per_s: f64,
    pub assumption: &'static str,
}

impl CpuPeak {
    pub fn of_this_machine() -> CpuPeak {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            info.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        };
        let model = field("model name").unwrap_or_else(|| "unknown CPU".into());
        let (mhz, mhz_source) = match field("cpu MHz").and_then(|v| v.parse::<f64>().ok()) {
            Some(mhz) if mhz > 0.0 => (mhz, "/proc/cpuinfo"),
            _ => (3000.0, "assumed (no /proc/cpuinfo)"),
        };
        // The binary is built for the x86-64 baseline (SSE2, 4 f32 lanes, no FMA), so a
        // multiply-add is a multiply and an add. AMD Zen cores issue two vector multiplies and
        // two vector adds per cycle; most others two vector operations of either kind.
        let (macs_per_cycle, assumption) = if model.contains("AMD") {
            (
                8,
                "one thread; 8 f32 multiply-adds per cycle: two 4-wide SSE multiplies and two \
                 4-wide adds per cycle (AMD Zen's four FP pipes), SSE2 being the x86-64 baseline \
                 this binary is built for",
            )
        } else {
            (
                4,
                "one thread; 4 f32 multiply-adds per cycle: two 4-wide SSE operations per cycle, \
                 SSE2 being the x86-64 baseline this binary is built for",
            )
        };
        CpuPeak {
            model,
            mhz,
            mhz_source,
            macs_per_cycle,
            threads: 1,
            peak_macs_per_s: mhz * 1e6 * macs_per_cycle as f64,
            assumption,
        }
    }
}

/// Datasheet figures of known GPUs: dense FP32 and BF16 multiply-accumulates per second (half
/// the FLOP/s) and memory bandwidth in bytes per second.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct GpuPeak {
    pub fp32_macs_per_s: f64,
    pub bf16_macs_per_s: f64,
    pub bytes_per_s: f64,
    pub source: &'static str,
}

pub fn gpu_peak(name: &str) -> Option<GpuPeak> {
    let table: [(&str, f64, f64, f64, &str); 4] = [
        ("H100 PCIe", 51.2e12, 756.0e12, 2.0e12, "NVIDIA H100 PCIe datasheet"),
        ("H100", 66.9e12, 989.4e12, 3.35e12, "NVIDIA H100 SXM datasheet"),
        ("H200", 66.9e12, 989.4e12, 4.8e12, "NVIDIA H200 SXM datasheet"),
        ("A100", 19.5e12, 312.0e12, 2.0e12, "NVIDIA A100 80GB SXM datasheet"),
    ];
    table.iter().find(|(key, ..)| name.contains(key)).map(|&(_, fp32, bf16, bw, source)| GpuPeak {
        fp32_macs_per_s: fp32 / 2.0,
        bf16_macs_per_s: bf16 / 2.0,
        bytes_per_s: bw,
        source,
    })
}

/// Whether there is a GPU, as the JSON says it.
#[derive(Clone, Debug, Serialize)]
pub struct GpuReport {
    pub available: bool,
    pub device: Option<String>,
    pub libraries: Option<String>,
    pub reason: Option<String>,
    pub peak: Option<GpuPeak>,
}

/// What a board's build has around its array: the DRAM a workload must fit, and the UART every
/// byte of it crosses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoardMemory {
    pub dram_bytes: usize,
    /// The UART's rate as built: the build's clock over its divisor.
    pub baud: f64,
    /// Whether its memory commands move `MAX_DATA` bytes (else `BASE_DATA`: built before large
    /// requests, `systole_hdl::top::FAST_LINK_REVISION`).
    pub large_requests: bool,
    /// For a build from before the fast link: the same build's UART rate on it (its board's
    /// bridge's, `systole_boards::bridge`), priced beside the rate as built.
    pub rebuilt_baud: Option<f64>,
    /// Whether this is the build as built, or as one of its rebuilds prices it.
    pub rebuild: Rebuild,
    /// The bytes of the board's SDRAM, where it carries one (`systole_boards::board::Board::
    /// sdram`): the DRAM of the build rebuilt on it ([`BoardMemory::on_sdram`]).
    pub sdram_bytes: Option<usize>,
}

/// Which build a [`BoardMemory`] describes: the one measured, or how it would be rebuilt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rebuild {
    AsBuilt,
    /// On the fast link ([`BoardMemory::rebuilt`]).
    FastLink,
    /// On its board's SDRAM, and the fast link ([`BoardMemory::on_sdram`]).
    OnSdram,
}

impl BoardMemory {
    /// The same build on the fast link, if it was built before it.
    pub fn rebuilt(&self) -> Option<BoardMemory> {
        let baud = self.rebuilt_baud?;
        Some(BoardMemory {
            baud,
            large_requests: true,
            rebuilt_baud: None,
            rebuild: Rebuild::FastLink,
            ..*self
        })
    }

    /// The same build rebuilt with its board's SDRAM as its DRAM (`DramPort::Sdram`), on the
    /// fast link, if the board carries one.
    pub fn on_sdram(&self) -> Option<BoardMemory> {
        let dram_bytes = self.sdram_bytes?;
        let fast = self.rebuilt().unwrap_or(*self);
        Some(BoardMemory { dram_bytes, sdram_bytes: None, rebuild: Rebuild::OnSdram, ..fast })
    }

    /// The machine column of this build's end-to-end rows.
    pub fn label(&self) -> String {
        let how = match self.rebuild {
            Rebuild::AsBuilt => "",
            Rebuild::FastLink => " rebuilt:",
            Rebuild::OnSdram => " on its SDRAM:",
        };
        format!("board end to end,{how} UART at {:.0} baud", self.baud)
    }

    /// Data bytes one memory request moves on this build.
    pub fn max_data(&self) -> usize {
        match self.large_requests {
            true => systole_core::protocol::MAX_DATA,
            false => systole_core::protocol::BASE_DATA,
        }
    }

    /// `compute` (a compute-only row) as its run on the board end to end: `traffic`, the bytes
    /// that crossed the link for it (`per` says for what, e.g. " a step"), at the baud rate, 10
    /// bits each, then the compute.
    pub fn end_to_end(&self, compute: &Row, traffic: Traffic, per: &str) -> Row {
        let (link, work) = (traffic.seconds_at(self.baud), compute.seconds.unwrap_or(0.0));
        let r = Row { machine: self.label(), kind: Kind::Model, cycles: None, ..compute.clone() };
        r.timed(link + work, compute.peak_macs_per_s)
            .moved(traffic.bytes())
            .checked("link bytes counted on an emulated board")
            .noted(format!(
                "{} bytes over the link{per} in {} requests of up to {} bytes: {} of link, {} of \
                 compute",
                traffic.bytes(),
                traffic.requests,
                self.max_data(),
                duration(link),
                duration(work)
            ))
    }
}

impl BoardBuild {
    /// The board's memory and link, from its report; `None` for a report from before they were
    /// recorded.
    pub fn memory(&self) -> Option<BoardMemory> {
        let built = self.report.built.as_ref()?;
        let revision = built.knobs.rtl_revision;
        let large_requests = revision >= systole_hdl::top::FAST_LINK_REVISION;
        let board = systole_boards::board::by_name(&self.report.board);
        let bridge = board.map(|b| b.bridge);
        let rebuilt = bridge.filter(|_| !large_requests);
        Some(BoardMemory {
            dram_bytes: built.dram_bytes,
            baud: built.knobs.clock_mhz * 1e6 / built.uart_divisor as f64,
            large_requests,
            rebuilt_baud: rebuilt
                .and_then(|b| b.link_rate(built.knobs.clock_mhz).ok())
                .map(|r| r.baud),
            rebuild: Rebuild::AsBuilt,
            sdram_bytes: board.and_then(|b| b.sdram).map(|p| p.geometry.bytes() as usize),
        })
    }
}

/// Everything a suite needs.
pub struct Bench {
    pub config: ArrayConfig,
    pub fmax_mhz: Option<f64>,
    /// With `--machine board`: the board's memory and link, which its rows are priced on.
    pub board: Option<BoardMemory>,
    pub projected: ArrayConfig,
    pub cpu: CpuPeak,
    pub gpu: Option<Gpu>,
    pub gpu_report: GpuReport,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub command: String,
    pub host: String,
    pub config: ConfigReport,
    pub cpu_peak: CpuPeak,
    pub gpu: GpuReport,
    pub pytorch: pytorch::PytorchReport,
    pub seconds: f64,
    pub rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
pub struct ConfigReport {
    pub rows: u16,
    pub cols: u16,
    pub dtype: &'static str,
    pub dataflow: &'static str,
    /// "blocking" or "decoupled".
    pub schedule: &'static str,
    pub spad_depth: u32,
    pub acc_depth: u32,
    pub clock_mhz: f64,
    pub fmax_mhz: Option<f64>,
    /// With --machine board: the board and the report its fmax came from.
    pub board: Option<String>,
    pub peak_macs_per_s: f64,
    /// DRAM bandwidth of the model: one scratchpad row per cycle.
    pub dram_bytes_per_s: f64,
    pub projected: String,
}

/// `accelerator 16x16 ws @ 100 MHz`.
pub fn accel_label(config: &ArrayConfig) -> String {
    format!(
        "accelerator {}x{} {}{} @ {} MHz{}",
        config.rows,
        config.cols,
        config.dataflow.short_name(),
        crate::report::schedule_word(config),
        crate::table::mhz(config.clock_mhz),
        match config.dram_port {
            DramPort::Sdram => ", SDRAM",
            _ => "",
        }
    )
}

/// `rows * cols * clock`.
pub fn peak_of(config: &ArrayConfig) -> f64 {
    config.pe_count() as f64 * config.clock_mhz * 1e6
}

/// The model's DRAM bandwidth: on the row port `Load` moves one scratchpad row, `max(R, C)`
/// elements, per cycle (docs/PERFORMANCE_MODEL.md); the byte port a byte, the SDRAM a 16-bit
/// word.
pub fn dram_bandwidth(config: &ArrayConfig) -> f64 {
    let bytes_a_cycle = match config.dram_port {
        DramPort::Row => (config.spad_width() * config.dtype.elem_bytes()) as f64,
        DramPort::Byte => 1.0,
        DramPort::Sdram => systole_core::sdram::WORD_BYTES as f64,
    };
    bytes_a_cycle * config.clock_mhz * 1e6
}

/// Bytes a program moves between DRAM and the on-chip memories.
pub fn dram_traffic(
    config: &ArrayConfig,
    program: impl FnOnce(&mut dyn FnMut(Instruction)),
) -> u64 {
    let es = config.dtype.elem_bytes() as u64;
    let mut bytes = 0u64;
    program(&mut |ins| {
        bytes += match ins {
            Instruction::Load { rows, len, .. } | Instruction::StoreSpad { rows, len, .. } => {
                rows as u64 * len as u64 * es
            }
            Instruction::Store { rows, len, .. } | Instruction::LoadAcc { rows, len, .. } => {
                rows as u64 * len as u64 * 4
            }
            Instruction::StoreBf16 { rows, len, .. } => rows as u64 * len as u64 * 2,
            _ => 0,
        }
    });
    bytes
}

/// Runs `f` until `budget` has passed (at least once, at most `max` times) and returns the
/// median seconds per run.
pub fn time_runs(
    budget: Duration,
    max: usize,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < max.max(1) && (times.is_empty() || start.elapsed() < budget) {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(times[times.len() / 2])
}

/// A GPU row that could not run: unavailable, with the reason.
pub fn gpu_unavailable(bench: &Bench, mut row: Row) -> Row {
    row.kind = Kind::Unavailable;
    row.check = "-".into();
    row.note = match &bench.gpu_report.device {
        Some(device) => format!("{device} failed to open (see the GPU line above)"),
        None => "no CUDA GPU (see the GPU line above)".into(),
    };
    row
}

/// A GPU error in the middle of a bench is fatal: the figures would be incomplete.
pub fn gpu_failed(what: &str, e: GpuError) -> anyhow::Error {
    anyhow!("{what}: {e}")
}

/// `3.36 G`, `940 M`, `12.0 k`.
pub fn si(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    for (scale, unit) in [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if x.abs() >= scale {
            let v = x / scale;
            return if v >= 100.0 {
                format!("{v:.0} {unit}")
            } else if v >= 10.0 {
                format!("{v:.1} {unit}")
            } else {
                format!("{v:.2} {unit}")
            };
        }
    }
    format!("{x:.3} ")
}

/// `5.00 ms`, `326 us`, `1.25 s`.
pub fn duration(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else if seconds >= 1e-6 {
        format!("{:.2} us", seconds * 1e6)
    } else {
        format!("{:.0} ns", seconds * 1e9)
    }
}

/// The aligned terminal table, one block per workload.
pub fn table(rows: &[Row]) -> String {
    let header =
        ["workload", "machine", "dtype", "kind", "time", "MAC/s", "% peak", "MAC/B", "check; note"];
    let cells: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            [
                r.workload.clone(),
                r.machine.clone(),
                r.dtype.clone(),
                r.kind.name().to_string(),
                r.seconds.map(duration).unwrap_or_else(|| "-".into()),
                r.macs_per_s.map(|x| si(x).trim_end().to_string()).unwrap_or_else(|| "-".into()),
                r.fraction_of_peak
                    .map(|f| format!("{:.1}", 100.0 * f))
                    .unwrap_or_else(|| "-".into()),
                r.macs_per_byte.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into()),
                match (r.check.is_empty(), r.note.is_empty()) {
                    (true, true) => "-".into(),
                    (false, true) => r.check.clone(),
                    (true, false) => r.note.clone(),
                    (false, false) => format!("{}; {}", r.check, r.note),
                },
            ]
        })
        .collect();
    use crate::table::Align::{Free, Left, Right};
    // The check and the note are last and free-running (wrapped under the row).
    let align = [Left, Left, Left, Left, Right, Right, Right, Right, Free];
    let table = crate::table::lines(
        &std::iter::once(header.map(String::from)).chain(cells).collect::<Vec<_>>(),
        &align,
    );
    let mut out = String::new();
    let _ = writeln!(out, "{}", table[0]);
    let mut last = None;
    for (row, line) in rows.iter().zip(&table[1..]) {
        if last.is_some() && last != Some(&row.workload) {
            out.push('\n');
        }
        last = Some(&row.workload);
        let _ = writeln!(out, "{line}");
    }
    out
}

/// `|got - want| <= tol + eps * sum |a_i b_i|`, the GEMM check for machines that round
/// differently from the reference (CPU f32 loop, GPU): f32 rounding of a length-k dot product
/// stays well inside `1e-5` of the sum of the magnitudes of its products.
pub fn close(got: f64, want: f64, magnitude: f64) -> bool {
    systole_core::check::Tolerance { abs: 1e-6, rel: 1e-5 }.admits(got, want, magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_with_three_figures() {
        assert_eq!(si(3.36e9), "3.36 G");
        assert_eq!(si(940e6), "940 M");
        assert_eq!(si(12.04e3), "12.0 k");
        assert_eq!(si(0.5), "0.500 ");
        assert_eq!(duration(5.0e-3), "5.00 ms");
        assert_eq!(duration(326e-6), "326.00 us");
        assert_eq!(duration(1.25), "1.25 s");
    }

    #[test]
    fn gpu_peaks_from_the_device_name() {
        let h100 = gpu_peak("NVIDIA H100 80GB HBM3").unwrap();
        assert_eq!(h100.bf16_macs_per_s, 989.4e12 / 2.0);
        assert_eq!(gpu_peak("NVIDIA H100 PCIe").unwrap().source, "NVIDIA H100 PCIe datasheet");
        assert!(gpu_peak("NVIDIA H200").is_some());
        assert!(gpu_peak("GeForce GTX 1080").is_none());
    }

    #[test]
    fn the_table_is_aligned() {
        let rows = vec![
            Row::new("gemm", "64x64x64", "accelerator", Kind::Model, "bf16", 262144)
                .timed(1e-4, Some(1e10)),
            Row::new("gemm", "64x64x64", "gpu fp32", Kind::Unavailable, "f32", 262144)
                .noted("no GPU"),
            Row::new("gemm", "128x128x128", "accelerator", Kind::Model, "bf16", 1 << 21)
                .timed(1e-3, None),
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}"); // header, two rows, a blank line, one row
        let col = |l: &str| l.find("model").or_else(|| l.find("unavailable")).unwrap();
        assert_eq!(col(lines[1]), col(lines[2]));
        assert!(lines[1].contains("2.62 G") && lines[1].contains("26.2"), "{t}");
        assert!(lines[3].is_empty());
    }

    #[test]
    fn timing_runs_at_least_once_and_stops_at_the_budget() {
        let mut n = 0;
        let t = time_runs(Duration::ZERO, 10, || {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
        assert!(t >= 0.0);
        let mut n = 0;
        time_runs(Duration::from_secs(60), 3, || {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 3);
    }
}
