//! Staged files removed when a signal ends the run, and signals held back while a run commits.
//!
//! A run stopped by SIGINT (Ctrl-C), SIGTERM, SIGHUP, SIGQUIT (Ctrl-\\) or SIGPIPE (`systole
//! train | head -1`) would otherwise leave its staged `.systole-XXXXXX` files behind: the process
//! dies before any destructor runs. Each staged file's path is registered here; on one of those
//! signals the handler unlinks every registered path (`unlink` is async-signal-safe) and then ends
//! the process as the signal's default action would, so the shell still sees the signal.
//!
//! Once a run has begun to put its outputs in place ([`committing`]), a signal no longer ends it
//! there: dying between two renames would leave one output new and another old. The handler only
//! records the signal; when the commit is over, [`Committing::end`] says on stderr what was
//! written and then ends the process by that signal, so the exit status still says the run was
//! stopped, and every output is the new one (or, if the commit itself failed, none was renamed).
//!
//! The handler reads only a fixed table of pointers to leaked, NUL-terminated paths, so it never
//! allocates or takes a lock. A path is leaked once per staged file (a few per run).

use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
use std::sync::Once;

/// Staged files a run may hold at once; more are staged but not cleaned up after a signal.
const SLOTS: usize = 64;

static STAGED: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];

/// The signals that end a run which the user may reasonably send.
#[cfg(unix)]
const SIGNALS: [libc::c_int; 5] =
    [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE];

/// Set while the outputs are put in place: a signal is then recorded, not acted on.
static COMMITTING: AtomicBool = AtomicBool::new(false);

/// The first signal that arrived while [`COMMITTING`]; 0 if none.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// Held while a run puts its outputs in place; see the module documentation.
pub struct Committing(());

/// Holds back the handled signals until [`Committing::end`] (or the guard's drop).
pub fn committing() -> Committing {
    install();
    PENDING.store(0, Ordering::SeqCst);
    COMMITTING.store(true, Ordering::SeqCst);
    Committing(())
}

impl Committing {
    /// The commit is over: `written` are the outputs now in place, `failed` why the rest are
    /// not. If a signal arrived during it, says so on stderr and ends the process by that signal.
    pub fn end(self, written: &[std::path::PathBuf], failed: Option<&anyhow::Error>) {
        COMMITTING.store(false, Ordering::SeqCst);
        let signal = PENDING.swap(0, Ordering::SeqCst);
        if signal == 0 {
            return;
        }
        let names: Vec<_> = written.iter().map(|p| p.display().to_string()).collect();
        let what = match (failed, names.len()) {
            (None, _) => format!("every output was written first ({})", names.join(", ")),
            (Some(e), 0) => format!("the commit failed, no output was written: {e:#}"),
            (Some(e), _) => format!("the commit failed after {}: {e:#}", names.join(", ")),
        };
        let what = what.lines().map(str::trim).collect::<Vec<_>>().join(" ");
        eprintln!("systole: {} arrived while the outputs were committed: {what}", name(signal));
        stop(signal);
    }
}

impl Drop for Committing {
    /// A commit left by a panic: a held-back signal now ends the run (the staged files still
    /// registered are removed).
    fn drop(&mut self) {
        COMMITTING.store(false, Ordering::SeqCst);
        let signal = PENDING.swap(0, Ordering::SeqCst);
        if signal != 0 {
            stop(signal);
        }
    }
}

#[cfg(unix)]
fn name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGPIPE => "SIGPIPE",
        _ => "a signal",
    }
}

#[cfg(not(unix))]
fn name(_signal: i32) -> &'static str {
    "a signal"
}

/// A registered path; [`Registered::release`] (after the file is renamed or deleted) unregisters it.
pub struct Registered(Option<usize>);

/// Registers `path` for removal on a signal, installing the handlers the first time.
pub fn register(path: &Path) -> Registered {
    install();
    let Some(c) = c_path(path) else { return Registered(None) };
    let raw = c.into_raw();
    for (i, slot) in STAGED.iter().enumerate() {
        if slot.compare_exchange(ptr::null_mut(), raw, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            return Registered(Some(i));
        }
    }
    // SAFETY: `raw` came from `into_raw` just above and was stored nowhere.
    drop(unsafe { CString::from_raw(raw) });
    Registered(None)
}

impl Registered {
    /// Stops removing the path on a signal. The string stays allocated: a handler running on
    /// another thread may still be reading it.
    pub fn release(mut self) {
        self.clear();
    }

    fn clear(&mut self) {
        if let Some(i) = self.0.take() {
            STAGED[i].store(ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(unix)]
fn c_path(path: &Path) -> Option<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes()).ok()
}

#[cfg(not(unix))]
fn c_path(_path: &Path) -> Option<CString> {
    None
}

#[cfg(unix)]
fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        for signal in SIGNALS {
            // SAFETY: the action only loads atomics, calls `unlink` and re-raises the signal
            // with its default action, all async-signal-safe.
            let installed =
                unsafe { signal_hook::low_level::register(signal, move || on_signal(signal)) };
            // Registering one of these four signals cannot fail; if it ever did, the run goes
            // on and only the clean-up after that signal is lost.
            let _ = installed;
        }
    });
}

#[cfg(not(unix))]
fn install() {}

#[cfg(not(unix))]
fn stop(_signal: i32) {
    std::process::exit(130);
}

#[cfg(unix)]
fn on_signal(signal: libc::c_int) {
    if COMMITTING.load(Ordering::SeqCst) {
        let _ = PENDING.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
        return;
    }
    stop(signal);
}

/// Removes every registered staged file and ends the process as `signal`'s default would.
#[cfg(unix)]
fn stop(signal: libc::c_int) {
    for slot in &STAGED {
        let path = slot.swap(ptr::null_mut(), Ordering::SeqCst);
        if !path.is_null() {
            // SAFETY: a registered pointer is a leaked, NUL-terminated path that is never freed.
            unsafe { libc::unlink(path) };
        }
    }
    let _ = signal_hook::low_level::emulate_default_handler(signal);
}
