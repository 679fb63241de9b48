//! Output files that appear whole or not at all.
//!
//! A [`StagedFile`] is a temporary file in the destination's directory; [`StagedFile::commit`]
//! flushes it to disk and renames it over the destination, which is atomic on one file system.
//! Dropped uncommitted (a failed run), it is deleted and the destination is left untouched.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

pub struct StagedFile {
    temp: NamedTempFile,
    dest: PathBuf,
}

impl StagedFile {
    /// Creates the temporary file beside `dest`; fails early if that directory is not writable.
    pub fn beside(dest: &Path) -> io::Result<StagedFile> {
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if dest.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
        }
        if !dir.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no directory {}", dir.display()),
            ));
        }
        let temp = temp_builder().tempfile_in(dir)?;
        Ok(StagedFile { temp, dest: dest.to_path_buf() })
    }

    pub fn file(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    /// Flushes the contents to disk and renames the file to its destination.
    pub fn commit(self) -> io::Result<()> {
        self.temp.as_file().sync_all()?;
        self.temp.persist(&self.dest).map_err(|e| e.error)?;
        Ok(())
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
