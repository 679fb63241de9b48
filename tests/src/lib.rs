//! Shared helpers of the cross-crate tests: one comparison for every machine (STYLE point 1, from
//! [`systole_core::check`]), and the `systole` binary for the CLI tests.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::SystemTime;

// The one comparison and its generator live in core, so core's own tests (core/tests) use them
// without building the hardware; every cross-crate test takes them from here.
pub use systole_core::check::{
    assert_bit_identical, first_difference, gemm_on, random_program, SplitMix,
};

// ---------------------------------------------------------------------------------------------
// Finding and running the binary.
//
// Cargo builds a package's binaries only for that package's own tests, so the CLI tests find
// `systole` beside their own executable (`target/<profile>/`) and refuse to run a missing or stale
// one: run `cargo build -p systole-host` (same profile) first.

/// `target/<profile>/systole`, checked once to exist and to be newer than the sources it is
/// built from.
pub fn systole_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let exe = std::env::current_exe().expect("path of the test executable");
        // target/<profile>/deps/systole-<hash> -> target/<profile>/systole
        let dir =
            exe.parent().and_then(Path::parent).expect("test executable in target/<profile>/deps");
        let binary = dir.join(format!("systole{}", std::env::consts::EXE_SUFFIX));
        let built = fs::metadata(&binary).and_then(|m| m.modified()).unwrap_or_else(|_| {
            panic!(
                "{} not found: run `cargo build -p systole-host` (same profile) before these tests",
                binary.display()
            )
        });
        if let Some(newer) = newest_source().filter(|(t, _)| *t > built) {
            panic!(
                "{} is older than {}: run `cargo build -p systole-host` before these tests",
                binary.display(),
                newer.1.display()
            );
        }
        binary
    })
}

/// The most recently modified source the binary is built from (the built-in data sets in
/// `data/` are compiled in).
fn newest_source() -> Option<(SystemTime, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let mut newest = None;
    for path in ["host/src", "core/src", "host/Cargo.toml", "data"] {
        newest_in(&root.join(path), &mut newest);
    }
    newest
}

fn newest_in(path: &Path, newest: &mut Option<(SystemTime, PathBuf)>) {
    let Ok(meta) = fs::metadata(path) else { return };
    if meta.is_dir() {
        for entry in fs::read_dir(path).into_iter().flatten().flatten() {
            newest_in(&entry.path(), newest);
        }
    } else if let Ok(t) = meta.modified() {
        if newest.as_ref().is_none_or(|(n, _)| t > *n) {
            *newest = Some((t, path.to_path_buf()));
        }
    }
}

/// Runs `systole` with `args` and waits for it.
pub fn systole<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    Command::new(systole_binary()).args(args).output().expect("spawn systole")
}

/// Exit status 2, stdout empty, exactly one `error: ` line on stderr that contains every needle.
#[track_caller]
pub fn assert_fails_naming(out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {stderr}");
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stderr.lines().count(), 1, "exactly one line on stderr: {stderr:?}");
    assert!(stderr.starts_with("error: "), "{stderr:?}");
    for needle in needles {
        assert!(stderr.contains(needle), "stderr should name {needle:?}: {stderr:?}");
    }
}

/// A scratch directory for one test's files, removed when dropped.
pub struct Scratch(tempfile::TempDir);

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch(tempfile::tempdir().expect("temporary directory"))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Writes `contents` to `name` in the directory; returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, contents).expect("write scratch file");
        path
    }

    /// The names of the files in the directory, sorted.
    pub fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.0.path())
            .expect("read scratch dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}
