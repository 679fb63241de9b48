//! Progress of a training run: a bar per epoch on a terminal, one plain line per epoch otherwise.
//!
//! The bar (indicatif) draws on stderr, only when stderr is a terminal, and is cleared when its
//! epoch ends; the epoch's summary line always goes to stdout, so a log or a pipe gets exactly
//! one line per epoch and no control characters.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

pub struct EpochProgress {
    bar: Option<ProgressBar>,
}

impl EpochProgress {
    /// Starts epoch `epoch` of `epochs`, `steps` batches long.
    pub fn start(epoch: u32, epochs: u32, steps: usize) -> EpochProgress {
        if !std::io::stderr().is_terminal() {
            return EpochProgress { bar: None };
        }
        let bar = ProgressBar::new(steps as u64);
        if let Ok(style) =
            ProgressStyle::with_template("epoch {msg} [{bar:40}] {pos}/{len} batches {elapsed}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(format!("{epoch:>width$}/{epochs}", width = digits(epochs)));
        EpochProgress { bar: Some(bar) }
    }

    pub fn step(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    /// Clears the bar and prints the epoch's line.
    pub fn finish(self, line: &str) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
        println!("{line}");
    }
}

/// Decimal digits of `n`, for aligning `epoch 7/30` under `epoch 12/30`.
pub fn digits(n: u32) -> usize {
    n.max(1).ilog10() as usize + 1
}
