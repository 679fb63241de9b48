//! Where an output path really leads: its symbolic links followed, one by one, to what is there.
//!
//! A regular file (or nothing yet) is replaced whole: staged beside the file the links lead to and
//! renamed over it. Anything else that exists is written in place, as a shell's `>` writes it: a
//! device (`/dev/null`), a FIFO, or one of this process's own descriptors (`/dev/stdout`,
//! `/dev/fd/N`), which is written through the descriptor so a pipe, a terminal or a file opened
//! for appending keeps its position. A directory is refused.

use std::fs::{self, File, Metadata};
use std::io;
use std::path::{Component, Path, PathBuf};

#[cfg(unix)]
use std::os::fd::{BorrowedFd, RawFd};
#[cfg(unix)]
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// How many links a path may pass through before it counts as a loop (Linux's own limit).
const MAX_LINKS: usize = 40;

/// What writing to an output path means.
#[derive(Debug, Clone, PartialEq)]
pub enum Dest {
    /// A regular file, or no file yet, at `path` (absolute, its directory's links resolved):
    /// replaced by renaming a staged file over it.
    Replace { path: PathBuf, exists: bool },
    /// One of this process's open descriptors (`/dev/stdout`, `/dev/fd/N`, `/proc/self/fd/N`).
    #[cfg(unix)]
    Descriptor(RawFd),
    /// An existing file that is not a regular one (a device, a FIFO, a socket, a file under
    /// `/proc`): opened and written in place.
    InPlace(PathBuf),
}

impl std::fmt::Display for Dest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dest::Replace { path, .. } => write!(f, "{}", path.display()),
            #[cfg(unix)]
            Dest::Descriptor(fd) => write!(f, "descriptor {fd}"),
            Dest::InPlace(path) => write!(f, "{}, not a regular file", path.display()),
        }
    }
}

/// Which file a path names, for telling whether two paths are one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// An existing file: its device and inode; `shared` for a character device (`/dev/null`,
    /// a terminal), which any number of outputs and inputs may name.
    Inode { dev: u64, ino: u64, shared: bool },
    /// A file that does not exist yet, by its resolved absolute path.
    Path(PathBuf),
}

impl Identity {
    /// True if both name the same file and that file cannot take two roles at once.
    pub fn clashes(&self, other: &Identity) -> bool {
        match (self, other) {
            (Identity::Inode { shared: true, .. }, _)
            | (_, Identity::Inode { shared: true, .. }) => false,
            _ => self == other,
        }
    }

    /// The identity of an existing input path (links followed), if it exists.
    pub fn of_input(path: &Path) -> Option<Identity> {
        fs::metadata(path).ok().map(|m| of_metadata(&m))
    }
}

/// Resolves `path` for writing.
pub fn resolve(path: &Path) -> io::Result<(Dest, Identity)> {
    if path.as_os_str().is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "an empty path"));
    }
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        #[cfg(unix)]
        if let Some(fd) = own_descriptor(&at) {
            return descriptor(fd);
        }
        let meta = match fs::symlink_metadata(&at) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let path = absolute_in_real_dir(&at)?;
                return Ok((
                    Dest::Replace { path: path.clone(), exists: false },
                    Identity::Path(path),
                ));
            }
            other => other?,
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            if at.starts_with("/proc") {
                // The kernel's own links (`/proc/<pid>/fd/N`, `/proc/self/exe`) name no path.
                let meta = fs::metadata(&at)?;
                return in_place(at, &meta);
            }
            let link = fs::read_link(&at)?;
            at = match at.parent() {
                Some(dir) if link.is_relative() => dir.join(link),
                _ => link,
            };
            continue;
        }
        if kind.is_dir() {
            return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
        }
        if kind.is_file() && !at.starts_with("/proc") {
            let path = absolute_in_real_dir(&at)?;
            return Ok((Dest::Replace { path, exists: true }, of_metadata(&meta)));
        }
        return in_place(at, &meta);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("more than {MAX_LINKS} symbolic links (a loop?)"),
    ))
}

/// Opens a destination that is written in place (not [`Dest::Replace`]).
pub fn open_in_place(dest: &Dest) -> io::Result<File> {
    match dest {
        #[cfg(unix)]
        Dest::Descriptor(fd) => {
            // SAFETY: `descriptor` checked that `fd` is open; the borrow only lives for the dup.
            let fd = unsafe { BorrowedFd::borrow_raw(*fd) };
            Ok(File::from(fd.try_clone_to_owned()?))
        }
        Dest::InPlace(path) => fs::OpenOptions::new().write(true).open(path),
        Dest::Replace { .. } => unreachable!("a replaced file is staged, not opened in place"),
    }
}

fn in_place(path: PathBuf, meta: &Metadata) -> io::Result<(Dest, Identity)> {
    if meta.is_dir() {
        return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
    }
    Ok((Dest::InPlace(path), of_metadata(meta)))
}

/// `dir/name` with `dir` absolute and free of links, so two spellings of one new file compare
/// equal; fails if the directory does not exist.
fn absolute_in_real_dir(path: &Path) -> io::Result<PathBuf> {
    let name = match path.components().next_back() {
        Some(Component::Normal(name)) => name,
        _ => return Err(io::Error::new(io::ErrorKind::InvalidInput, "it names no file")),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let real = fs::canonicalize(dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            io::Error::new(io::ErrorKind::NotFound, format!("no directory {}", dir.display()))
        }
        _ => e,
    })?;
    if !real.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ));
    }
    Ok(real.join(name))
}

#[cfg(unix)]
fn of_metadata(meta: &Metadata) -> Identity {
    Identity::Inode { dev: meta.dev(), ino: meta.ino(), shared: meta.file_type().is_char_device() }
}

#[cfg(not(unix))]
fn of_metadata(_meta: &Metadata) -> Identity {
    Identity::Path(PathBuf::new())
}

/// The descriptor a path names in this process: `/dev/stdin`, `/dev/stdout`, `/dev/stderr`,
/// `/dev/fd/N`, `/proc/self/fd/N`, `/proc/thread-self/fd/N` or `/proc/<this pid>/fd/N`.
#[cfg(unix)]
fn own_descriptor(path: &Path) -> Option<RawFd> {
    let s = path.to_str()?;
    match s {
        "/dev/stdin" => return Some(0),
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let pid = format!("/proc/{}/fd/", std::process::id());
    ["/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", pid.as_str()]
        .iter()
        .find_map(|prefix| s.strip_prefix(prefix))
        .and_then(|n| n.parse().ok())
}

#[cfg(unix)]
fn descriptor(fd: RawFd) -> io::Result<(Dest, Identity)> {
    // SAFETY: `fcntl(F_GETFD)` only asks whether `fd` is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("descriptor {fd} is not open in this process"),
        ));
    }
    // SAFETY: `fd` was just seen open; the borrow only lives for the `fstat`.
    let file = File::from(unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?);
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory"));
    }
    Ok((Dest::Descriptor(fd), of_metadata(&meta)))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn real(dir: &tempfile::TempDir) -> PathBuf {
        fs::canonicalize(dir.path()).unwrap()
    }

    #[test]
    fn a_new_file_resolves_to_its_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        let (dest, id) = resolve(&dir.path().join("sub/../out.json")).unwrap();
        let want = real(&dir).join("out.json");
        assert_eq!(dest, Dest::Replace { path: want.clone(), exists: false });
        assert_eq!(id, Identity::Path(want));
    }

    #[test]
    fn links_are_followed_to_the_file_they_name_relative_to_their_own_directory() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        fs::create_dir(dir.path().join("b")).unwrap();
        fs::write(dir.path().join("b/model.out"), b"x").unwrap();
        symlink("../b/model.out", dir.path().join("a/first")).unwrap();
        symlink(dir.path().join("a/first"), dir.path().join("second")).unwrap();
        let (dest, id) = resolve(&dir.path().join("second")).unwrap();
        assert_eq!(dest, Dest::Replace { path: real(&dir).join("b/model.out"), exists: true });
        assert_eq!(Some(id), Identity::of_input(&dir.path().join("b/model.out")));
        // A dangling link: the file it names is created.
        symlink("b/new.out", dir.path().join("dangling")).unwrap();
        let (dest, _) = resolve(&dir.path().join("dangling")).unwrap();
        assert_eq!(dest, Dest::Replace { path: real(&dir).join("b/new.out"), exists: false });
    }

    #[test]
    fn a_link_loop_a_directory_and_a_missing_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        symlink("two", dir.path().join("one")).unwrap();
        symlink("one", dir.path().join("two")).unwrap();
        let loop_error = resolve(&dir.path().join("one")).unwrap_err().to_string();
        assert!(loop_error.contains("symbolic links"), "{loop_error}");
        let dir_error = resolve(dir.path()).unwrap_err().to_string();
        assert!(dir_error.contains("directory"), "{dir_error}");
        let missing = resolve(&dir.path().join("nowhere/out.json")).unwrap_err().to_string();
        assert!(missing.contains("no directory"), "{missing}");
    }

    #[test]
    fn devices_fifos_and_own_descriptors_are_written_in_place() {
        let (dest, id) = resolve(Path::new("/dev/null")).unwrap();
        assert_eq!(dest, Dest::InPlace(PathBuf::from("/dev/null")));
        assert!(matches!(id, Identity::Inode { shared: true, .. }));
        assert!(!id.clashes(&id.clone()), "a character device takes any number of roles");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (dest, id) = resolve(&fifo).unwrap();
        assert_eq!(dest, Dest::InPlace(fifo));
        assert!(id.clashes(&id.clone()), "a FIFO is one file");
        assert_eq!(resolve(Path::new("/dev/stderr")).unwrap().0, Dest::Descriptor(2));
        assert_eq!(resolve(Path::new("/proc/self/fd/2")).unwrap().0, Dest::Descriptor(2));
        let closed = resolve(Path::new("/dev/fd/987")).unwrap_err().to_string();
        assert!(closed.contains("not open"), "{closed}");
    }
}
