//! Whether the user asked for detail (`systole --verbose`): what a run prints beyond its
//! results, such as every place the CUDA search looked. Set once by the command line, read
//! where such detail is written.

use std::sync::atomic::{AtomicBool, Ordering};

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Turns the detail on or off for the rest of the process.
pub fn set(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether the detail was asked for.
pub fn on() -> bool {
    VERBOSE.load(Ordering::Relaxed)
}
