//! A run's output files: checked before any work, written whole, committed together.
//!
//! Every subcommand declares what it reads ([`Outputs::reads`]) and what it writes
//! ([`Outputs::writes`]) before it starts working. Two declared paths that are one file after
//! their links are resolved (an output given twice, or an output that is an input) are refused
//! at once, naming both flags. Each output is resolved by [`target`]: a regular file (or a new
//! one) is staged in a temporary file beside the file its links lead to, with the user's umask;
//! a device, a FIFO or `/dev/stdout` is written in place, from an unnamed temporary file, when
//! the run commits. [`Outputs::commit`] first checks every destination again (a path that has
//! become a directory during the run fails the whole commit), then writes the in-place ones,
//! then renames the staged ones over their files. A run that fails before the commit, or is
//! stopped by a signal ([`cleanup`]), leaves every file as it was and no temporary file behind; a
//! signal that arrives once the outputs are being put in place takes effect after the last one.

mod cleanup;
mod target;

use std::fs::File;
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use tempfile::NamedTempFile;

use target::{Dest, Identity};

/// One declared output; index into [`Outputs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputId(usize);

/// The files one run reads and writes.
#[derive(Default)]
pub struct Outputs {
    inputs: Vec<Declared>,
    outputs: Vec<Output>,
}

/// A path as the user gave it, with the flag that gave it.
struct Declared {
    flag: String,
    path: PathBuf,
    identity: Option<Identity>,
}

struct Output {
    declared: Declared,
    dest: Dest,
    staging: Staging,
}

enum Staging {
    /// A temporary file beside the destination, renamed over it on commit.
    Beside(NamedTempFile, cleanup::Registered),
    /// An unnamed temporary file, copied into the destination on commit.
    Unnamed(File),
}

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    /// Declares a file the run reads: no output may be that file.
    pub fn reads(&mut self, flag: &str, path: &Path) -> anyhow::Result<()> {
        let input = Declared {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            identity: Identity::of_input(path),
        };
        for output in &self.outputs {
            check_not_input(&output.declared, &input)?;
        }
        self.inputs.push(input);
        Ok(())
    }

    /// Declares a file the run writes, and stages it: fails at once if the path is a directory,
    /// its directory does not exist or is not writable, or it is a path already declared.
    pub fn writes(&mut self, flag: &str, path: &Path) -> anyhow::Result<OutputId> {
        let (dest, identity) =
            target::resolve(path).with_context(|| format!("{flag} {}", path.display()))?;
        let declared =
            Declared { flag: flag.to_string(), path: path.to_path_buf(), identity: Some(identity) };
        for input in &self.inputs {
            check_not_input(&declared, input)?;
        }
        for other in &self.outputs {
            if clash(&declared, &other.declared) {
                bail!(
                    "{} {} and {} {} are one file: each output needs a file of its own",
                    other.declared.flag,
                    other.declared.path.display(),
                    declared.flag,
                    declared.path.display()
                );
            }
        }
        let staging = Staging::for_dest(&dest).with_context(|| {
            format!("{flag} {}: cannot create a file beside it", path.display())
        })?;
        self.outputs.push(Output { declared, dest, staging });
        Ok(OutputId(self.outputs.len() - 1))
    }

    /// [`Outputs::writes`] for an optional flag.
    pub fn writes_opt(
        &mut self,
        flag: &str,
        path: Option<&Path>,
    ) -> anyhow::Result<Option<OutputId>> {
        path.map(|p| self.writes(flag, p)).transpose()
    }

    /// The path `id` was declared with.
    pub fn path(&self, id: OutputId) -> &Path {
        &self.outputs[id.0].declared.path
    }

    /// A path at which a tool that opens files by name (Verilator's VCD writer) writes `id`'s
    /// contents: the staged file, or the unnamed one through `/proc/self/fd`.
    pub fn tool_path(&self, id: OutputId) -> PathBuf {
        match &self.outputs[id.0].staging {
            Staging::Beside(temp, _) => temp.path().to_path_buf(),
            #[cfg(unix)]
            Staging::Unnamed(file) => {
                use std::os::fd::AsRawFd;
                PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
            }
            #[cfg(not(unix))]
            Staging::Unnamed(_) => PathBuf::from(&self.outputs[id.0].declared.path),
        }
    }

    /// Writes `id`'s contents (buffered, flushed after `write`); errors name the path.
    pub fn write(
        &mut self,
        id: OutputId,
        write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> anyhow::Result<()> {
        let output = &mut self.outputs[id.0];
        let mut out = BufWriter::new(output.staging.file());
        write(&mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("writing {}", output.declared.path.display()))
    }

    /// Puts every output in place, or none if any destination cannot take its file. Returns
    /// the paths written, in declaration order.
    pub fn commit(self) -> anyhow::Result<Vec<PathBuf>> {
        // 1. Every staged byte on disk, and every destination still what it was when declared.
        for output in &self.outputs {
            let path = &output.declared.path;
            output.staging.sync().with_context(|| format!("writing {}", path.display()))?;
            let now = target::resolve(path)
                .with_context(|| {
                    format!("{} {}: nothing was written", output.declared.flag, path.display())
                })?
                .0;
            let moved = match (&output.dest, &now) {
                (Dest::Replace { path: was, .. }, Dest::Replace { path: is, .. }) => was != is,
                (was, is) => was != is,
            };
            if moved {
                bail!(
                    "{} {}: it changed during the run (it now leads to {}); nothing was written",
                    output.declared.flag,
                    path.display(),
                    now
                );
            }
        }
        // 2. From here a signal is held back until every output is in place (`cleanup`).
        let committing = cleanup::committing();
        let mut written = Vec::new();
        match Outputs::put_in_place(self.outputs, &mut written) {
            Ok(()) => {
                committing.end(&written, None);
                Ok(written)
            }
            Err(e) => {
                committing.end(&written, Some(&e));
                Err(e)
            }
        }
    }

    /// Steps 2 and 3 of [`Outputs::commit`]; `written` gathers the paths put in place.
    fn put_in_place(outputs: Vec<Output>, written: &mut Vec<PathBuf>) -> anyhow::Result<()> {
        // What is written in place cannot be taken back, so it goes before any rename.
        let _ = io::stdout().flush();
        let mut staged = Vec::new();
        for output in outputs {
            let path = output.declared.path;
            match output.staging {
                Staging::Unnamed(mut file) => {
                    let done = target::open_in_place(&output.dest).and_then(|mut to| {
                        file.rewind()?;
                        io::copy(&mut file, &mut to)?;
                        to.flush()
                    });
                    done.with_context(|| {
                        format!("writing {}{}", path.display(), already(written))
                    })?;
                    written.push(path);
                }
                Staging::Beside(temp, registered) => {
                    staged.push((path, output.dest, temp, registered))
                }
            }
        }
        // The staged files, renamed over their destinations.
        for (path, dest, temp, registered) in staged {
            let Dest::Replace { path: to, .. } = dest else { unreachable!("staged beside a file") };
            keep_mode(temp.path(), &to);
            temp.persist(&to)
                .map_err(|e| e.error)
                .with_context(|| format!("cannot write {}{}", path.display(), already(written)))?;
            registered.release();
            written.push(path);
        }
        Ok(())
    }
}

impl Staging {
    fn for_dest(dest: &Dest) -> io::Result<Staging> {
        match dest {
            Dest::Replace { path, .. } => {
                let dir = path.parent().unwrap_or(Path::new("/"));
                let temp = temp_builder().tempfile_in(dir)?;
                let registered = cleanup::register(temp.path());
                Ok(Staging::Beside(temp, registered))
            }
            _ => Ok(Staging::Unnamed(tempfile::tempfile()?)),
        }
    }

    fn file(&mut self) -> &mut File {
        match self {
            Staging::Beside(temp, _) => temp.as_file_mut(),
            Staging::Unnamed(file) => file,
        }
    }

    fn sync(&self) -> io::Result<()> {
        match self {
            Staging::Beside(temp, _) => temp.as_file().sync_all(),
            Staging::Unnamed(_) => Ok(()),
        }
    }
}

fn clash(a: &Declared, b: &Declared) -> bool {
    matches!((&a.identity, &b.identity), (Some(x), Some(y)) if x.clashes(y))
}

fn check_not_input(output: &Declared, input: &Declared) -> anyhow::Result<()> {
    if clash(output, input) {
        bail!(
            "{} {} is the file {} {} reads: the run would overwrite its own input",
            output.flag,
            output.path.display(),
            input.flag,
            input.path.display()
        );
    }
    Ok(())
}

/// `"; a.json was already written"` when a commit fails part way.
fn already(written: &[PathBuf]) -> String {
    if written.is_empty() {
        return String::new();
    }
    let names: Vec<_> = written.iter().map(|p| p.display().to_string()).collect();
    format!(" ({} already written)", names.join(", "))
}

/// A replaced file keeps its permission bits, as it would if it had been rewritten in place.
fn keep_mode(temp: &Path, dest: &Path) {
    if let Ok(meta) = std::fs::metadata(dest) {
        let _ = std::fs::set_permissions(temp, meta.permissions());
    }
}

/// Temporary files are created 0600; ask for 0666 so the output gets the user's umask, as a file
/// created directly would.
fn temp_builder() -> tempfile::Builder<'static, 'static> {
    let mut builder = tempfile::Builder::new();
    builder.prefix(".systole-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    builder
}
