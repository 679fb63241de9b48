//! Progress of a training run: a bar per epoch on a terminal, one plain line per epoch otherwise;
//! and of the long steps of other commands ([`Phase`]).
//!
//! The bar (indicatif) draws on stderr, only when stderr is a terminal, and is cleared when its
//! epoch ends; the epoch's summary line always goes to stdout, so a log or a pipe gets exactly
//! one line per epoch and no control characters.

use std::io::IsTerminal;
use std::time::Duration;

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

/// A step of a command that is not counted in parts (`systole sim`'s reading of a program and
/// each machine's run of it): on a terminal, a spinner on stderr naming the step, with the time
/// it has taken so far, cleared when the step ends (or fails); elsewhere, one plain line on
/// stderr when a step expected to be `long` starts and nothing for a short one, so a log of an
/// ordinary run stays as it was.
pub struct Phase {
    bar: Option<ProgressBar>,
}

impl Phase {
    pub fn start(what: String, long: bool) -> Phase {
        if !std::io::stderr().is_terminal() {
            if long {
                eprintln!("{what} ...");
            }
            return Phase { bar: None };
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(what);
        bar.enable_steady_tick(Duration::from_millis(250));
        Phase { bar: Some(bar) }
    }

    /// Clears the spinner (as dropping the phase does).
    pub fn finish(self) {}
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
