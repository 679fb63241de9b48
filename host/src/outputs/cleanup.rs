//! Staged files removed when a signal ends the run.
//!
//! A run stopped by SIGINT (Ctrl-C), SIGTERM, SIGHUP or SIGPIPE (`systole train | head -1`) would
//! otherwise leave its staged `.systole-XXXXXX` files behind: the process dies before any
//! destructor runs. Each staged file's path is registered here; on one of those signals the
//! handler unlinks every registered path (`unlink` is async-signal-safe) and then ends the
//! process as the signal's default action would, so the shell still sees the signal.
//!
//! The handler reads only a fixed table of pointers to leaked, NUL-terminated paths, so it never
//! allocates or takes a lock. A path is leaked once per staged file (a few per run).

use std::ffi::{c_char, CString};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Once;

/// Staged files a run may hold at once; more are staged but not cleaned up after a signal.
const SLOTS: usize = 64;

static STAGED: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(ptr::null_mut()) }; SLOTS];

/// The signals that end a run which the user may reasonably send.
#[cfg(unix)]
const SIGNALS: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE];

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

#[cfg(unix)]
fn on_signal(signal: libc::c_int) {
    for slot in &STAGED {
        let path = slot.swap(ptr::null_mut(), Ordering::SeqCst);
        if !path.is_null() {
            // SAFETY: a registered pointer is a leaked, NUL-terminated path that is never freed.
            unsafe { libc::unlink(path) };
        }
    }
    let _ = signal_hook::low_level::emulate_default_handler(signal);
}
