//! The external tools: Verilator and a C++ compiler. Every failure carries the tool's own
//! output, so a user sees what Verilator or g++ said, not a summary of it.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Everything that can go wrong building or running a Verilated model.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{tool} not found ({why}); install it with `apt-get install {package}`")]
    Missing { tool: &'static str, package: &'static str, why: String },
    #[error("{step} failed (exit {code}):\n{output}")]
    Tool { step: String, code: String, output: String },
    #[error("cannot load the built model {path}: {why}")]
    Load { path: PathBuf, why: String },
    #[error("I/O error at {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("port {name:?}: {why}")]
    Port { name: String, why: String },
    #[error("this accelerator cannot be built: {0}")]
    Config(String),
}

impl SimError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> SimError {
        let path = path.into();
        move |source| SimError::Io { path, source }
    }
}

/// Runs a command to completion; a non-zero exit is an error carrying stdout and stderr.
pub(crate) fn run(step: impl Into<String>, cmd: &mut Command) -> Result<Output, SimError> {
    let step = step.into();
    let out = cmd.output().map_err(|e| SimError::Tool {
        step: step.clone(),
        code: "none".into(),
        output: format!("could not start {:?}: {e}", cmd.get_program()),
    })?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let code = out.status.code().map_or("signal".into(), |c| c.to_string());
        return Err(SimError::Tool { step, code, output: text.trim_end().to_string() });
    }
    Ok(out)
}

/// Verilator's version line, e.g. "Verilator 5.006 2023-01-22 rev (Debian 5.006-3)".
pub fn verilator_version() -> Result<String, SimError> {
    let out = Command::new("verilator").arg("--version").output().map_err(|e| {
        SimError::Missing { tool: "verilator", package: "verilator", why: e.to_string() }
    })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Verilator's include directory (`verilated.h`, `verilated.cpp`, ...).
pub fn verilator_include() -> Result<PathBuf, SimError> {
    let out = run(
        "verilator --getenv VERILATOR_ROOT",
        Command::new("verilator").args(["--getenv", "VERILATOR_ROOT"]),
    )?;
    let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let include = root.join("include");
    if include.join("verilated.h").is_file() {
        Ok(include)
    } else {
        Err(SimError::Missing {
            tool: "verilator include files",
            package: "verilator",
            why: format!("no verilated.h under {}", include.display()),
        })
    }
}

/// The C++ compiler: `$CXX` or `g++`.
pub fn cxx() -> Result<String, SimError> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    Command::new(&cxx).arg("--version").output().map_err(|e| SimError::Missing {
        tool: "a C++ compiler",
        package: "g++",
        why: format!("{cxx}: {e}"),
    })?;
    Ok(cxx)
}
