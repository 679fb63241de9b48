//! What `systole train` reports: the run as JSON (`--json`), and its lines on the terminal.
//!
//! The JSON holds only what the seed determines, so two runs with the same flags write the same
//! bytes; wall-clock time is printed on the terminal and never written to it. Accuracies are
//! fractions from 0 to 1; cycles are the accelerator's (counted by the cycle machine, or the
//! timing model's equal count on the functional one).

use serde::Serialize;
use systole_core::compile::CompiledStep;
use systole_core::link::Traffic;
use systole_core::train::Work;
use systole_core::ArrayConfig;

use crate::progress::digits;

#[derive(Debug, Serialize)]
pub struct RunReport {
    pub config: RunConfig,
    pub epochs: Vec<EpochReport>,
    /// Training steps of all epochs on the accelerator (no evaluation passes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub totals: Option<Totals>,
    /// The compiled training step of the main batch size, op by op.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<StepReport>,
    /// The trained f32 weights (the accelerator's master copy, or the reference's with
    /// `--dtype f32`) run by the f32 CPU reference forward pass.
    pub test_accuracy_f32: f64,
    /// The accelerator's BF16 forward pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_accuracy_bf16: Option<f64>,
    /// INT8 inference after post-training quantization (`--dtype int8`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_accuracy_int8: Option<f64>,
    /// The f32 CPU reference model trained beside the accelerator from the same seed, split,
    /// initial weights and batches.
    pub reference_test_accuracy_f32: f64,
}

#[derive(Debug, Serialize)]
pub struct RunConfig {
    pub dataset: DatasetReport,
    /// The network: an MLP's widths (`64-64-10`), else its input, layer kinds and classes.
    pub model: String,
    /// An MLP's `inputs, hidden..., classes` (empty for a network with other layers).
    pub widths: Vec<u32>,
    pub hidden: Vec<u32>,
    pub parameters: u64,
    pub dtype: &'static str,
    /// The golden machine; absent with `--dtype f32` (no accelerator).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array: Option<ArrayReport>,
    pub epochs: u32,
    pub batch: u32,
    pub lr: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    pub seed: u64,
}

#[derive(Debug, Serialize)]
pub struct DatasetReport {
    pub name: String,
    pub rows: usize,
    pub features: usize,
    pub classes: u32,
    pub train_rows: usize,
    pub test_rows: usize,
    /// Every feature is divided by this: the training split's largest absolute feature.
    pub feature_scale: f32,
}

#[derive(Debug, Serialize)]
pub struct ArrayReport {
    pub rows: u16,
    pub cols: u16,
    pub dataflow: &'static str,
    /// "blocking" or "decoupled".
    pub schedule: &'static str,
    pub spad_depth: u32,
    pub acc_depth: u32,
    pub clock_mhz: f64,
}

/// What a line of text adds after an array for a DRAM that moves a byte a cycle or is the
/// SDRAM; nothing for
/// the row port, so the default's lines stay as they were.
pub fn dram_port_words(port: systole_core::DramPort) -> &'static str {
    match port {
        systole_core::DramPort::Row => "",
        systole_core::DramPort::Byte => ", its DRAM a byte a cycle",
        systole_core::DramPort::Sdram => ", its DRAM the SDRAM",
    }
}

/// The schedule after an array's dataflow in a line of text: " decoupled" or " blocking"
/// (either may be the default of one command or another, so each is always named).
pub fn schedule_word(config: &ArrayConfig) -> &'static str {
    match config.schedule {
        systole_core::Schedule::Blocking => " blocking",
        systole_core::Schedule::Decoupled => " decoupled",
    }
}

impl From<&ArrayConfig> for ArrayReport {
    fn from(c: &ArrayConfig) -> ArrayReport {
        ArrayReport {
            rows: c.rows,
            cols: c.cols,
            dataflow: c.dataflow.short_name(),
            schedule: c.schedule.name(),
            spad_depth: c.spad_depth,
            acc_depth: c.acc_depth,
            clock_mhz: c.clock_mhz,
        }
    }
}

/// One epoch. `loss`, `train_accuracy` and `test_accuracy` are the trained model's: the
/// accelerator's, or with `--dtype f32` the reference's (and then the `reference_*` fields and
/// the accelerator's figures are absent).
#[derive(Debug, Serialize)]
pub struct EpochReport {
    pub epoch: u32,
    /// Mean softmax cross-entropy over the epoch's training samples, as each step saw them.
    pub loss: f64,
    /// Correct predictions of the training steps (before each step's update), over the samples.
    pub train_accuracy: f64,
    /// The test split after the epoch (the accelerator's BF16 forward pass).
    pub test_accuracy: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_loss: Option<f64>,
    /// `(loss - reference_loss) / reference_loss`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_gap: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_train_accuracy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_test_accuracy: Option<f64>,
    /// Accelerator cycles and useful MACs of the epoch's training steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub macs: Option<u64>,
    /// `macs / (rows * cols * cycles)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utilization: Option<f64>,
    /// What the epoch's training steps sent and received over the host link, on a machine
    /// reached over one (`rtl`, `board`), and the steps end to end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkReport>,
}

/// What crossed the host link for a run (a GEMM, an epoch's training steps), at the link's
/// baud rate, and the run end to end beside its compute.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LinkReport {
    pub requests: u64,
    pub bytes_out: u64,
    pub bytes_in: u64,
    pub baud: f64,
    /// The bytes at `baud`, 10 bits each.
    pub seconds: f64,
    /// The link's seconds and the compute's: the run end to end, as the host sees it.
    pub end_to_end_seconds: f64,
}

impl LinkReport {
    /// `traffic` at `baud`, beside `compute_seconds` of the accelerator's.
    pub fn new(traffic: Traffic, baud: f64, compute_seconds: f64) -> LinkReport {
        let seconds = traffic.seconds_at(baud);
        LinkReport {
            requests: traffic.requests,
            bytes_out: traffic.bytes_out,
            bytes_in: traffic.bytes_in,
            baud,
            seconds,
            end_to_end_seconds: seconds + compute_seconds,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Totals {
    pub steps: u64,
    pub cycles: u64,
    pub macs: u64,
    pub utilization: f64,
    /// `cycles` at the config's clock, in milliseconds.
    pub time_ms: f64,
}

impl Totals {
    pub fn new(config: &ArrayConfig, steps: u64, work: Work) -> Totals {
        Totals {
            steps,
            cycles: work.cycles,
            macs: work.macs,
            utilization: utilization(config, work),
            time_ms: work.cycles as f64 / config.clock_mhz / 1000.0,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct StepReport {
    pub batch: u32,
    pub forward_cycles: u64,
    pub backward_cycles: u64,
    pub cycles: u64,
    pub macs: u64,
    pub utilization: f64,
    /// `cycles` at the config's clock, in microseconds.
    pub time_us: f64,
    pub ops: Vec<OpReport>,
}

/// One op of the compiled step (a [`systole_core::compile::Segment`]).
#[derive(Debug, Serialize)]
pub struct OpReport {
    pub op: &'static str,
    pub layer: u8,
    /// `forward`, or `backward` (backward and SGD update).
    pub program: &'static str,
    pub cycles: u64,
    pub macs: u64,
    pub utilization: f64,
}

impl StepReport {
    pub fn new(step: &CompiledStep) -> StepReport {
        let config = &step.config;
        let ops = step
            .segments
            .iter()
            .map(|s| OpReport {
                op: s.op,
                layer: s.layer,
                program: if s.program == 0 { "forward" } else { "backward" },
                cycles: s.cycles,
                macs: s.macs,
                utilization: utilization(config, Work { cycles: s.cycles, macs: s.macs }),
            })
            .collect();
        let work = Work { cycles: step.cycles(), macs: step.macs() };
        StepReport {
            batch: step.batch,
            forward_cycles: step.forward_cycles,
            backward_cycles: step.backward_cycles,
            cycles: work.cycles,
            macs: work.macs,
            utilization: utilization(config, work),
            time_us: work.cycles as f64 / config.clock_mhz,
            ops,
        }
    }
}

/// Useful MACs over the peak `rows * cols * cycles`.
pub fn utilization(config: &ArrayConfig, work: Work) -> f64 {
    if work.cycles == 0 {
        return 0.0;
    }
    work.macs as f64 / (config.pe_count() as f64 * work.cycles as f64)
}

/// `1234567` as `1,234,567`.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(x: f64) -> String {
    format!("{:5.1}%", 100.0 * x)
}

impl EpochReport {
    /// `epoch  3/30  loss 0.1234  ref 0.1230 (+0.33%)  train  96.1%  test  95.8%  ...`.
    pub fn line(&self, epochs: u32) -> String {
        let mut line =
            format!("epoch {:>w$}/{epochs}  loss {:.4}", self.epoch, self.loss, w = digits(epochs));
        if let (Some(r), Some(gap)) = (self.reference_loss, self.loss_gap) {
            line += &format!("  ref {r:.4} ({:+.2}%)", 100.0 * gap);
        }
        line += &format!(
            "  train {}  test {}",
            percent(self.train_accuracy),
            percent(self.test_accuracy)
        );
        if let (Some(cycles), Some(util)) = (self.cycles, self.utilization) {
            line += &format!("  {} cycles  util {}", grouped(cycles), percent(util).trim_start());
        }
        line
    }
}

/// The per-op table of the training step, then the step, epoch and run totals with their time
/// at the config's clock.
pub fn step_table(
    step: &StepReport,
    config: &ArrayConfig,
    epoch: (usize, u64),
    totals: &Totals,
) -> String {
    let mut rows: Vec<[String; 6]> = vec![[
        "op".into(),
        "layer".into(),
        "program".into(),
        "cycles".into(),
        "MACs".into(),
        "util".into(),
    ]];
    for op in &step.ops {
        rows.push([
            op.op.into(),
            op.layer.to_string(),
            op.program.into(),
            grouped(op.cycles),
            grouped(op.macs),
            percent(op.utilization),
        ]);
    }
    rows.push([
        "step".into(),
        String::new(),
        "both".into(),
        grouped(step.cycles),
        grouped(step.macs),
        percent(step.utilization),
    ]);
    let mut out = format!(
        "training step, batch {} ({}x{} {}{} array, {} MHz):\n",
        step.batch,
        config.rows,
        config.cols,
        config.dataflow.short_name(),
        schedule_word(config),
        config.clock_mhz
    );
    use crate::table::Align::{Left, Right};
    for line in crate::table::lines(&rows, &[Left, Right, Left, Right, Right, Right]) {
        out += &format!("  {line}\n");
    }
    let clock = config.clock_mhz;
    out += &format!(
        "per step: {} cycles = {}; per epoch ({} steps): {} cycles = {}; {} steps: {} cycles = {}",
        grouped(step.cycles),
        time(step.cycles, clock),
        epoch.0,
        grouped(epoch.1),
        time(epoch.1, clock),
        totals.steps,
        grouped(totals.cycles),
        time(totals.cycles, clock),
    );
    out
}

/// Cycles as time at `clock_mhz`, in the unit that reads best.
fn time(cycles: u64, clock_mhz: f64) -> String {
    let us = cycles as f64 / clock_mhz;
    if us < 1000.0 {
        format!("{us:.1} us")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.3} s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1234567), "1,234,567");
    }
}
