//! Finding CUDA's shared libraries before cudarc looks for them.
//!
//! cudarc (with `dynamic-loading`) opens each library by its bare name (`libcublas.so.12`, ...)
//! the first time one of its functions is called, and panics when none of its candidate names
//! loads. So the GPU path never calls into cudarc before [`ensure_loaded`] has said that every
//! library it needs is there: for each one, first the loader's own search (`LD_LIBRARY_PATH`,
//! `ld.so.cache`, the system directories), then the places CUDA is usually unpacked where the
//! loader does not look: CUDA toolkits under `/usr/local/cuda*`, and the `nvidia-*` wheels that
//! PyTorch installs into a Python environment (`site-packages/nvidia/*/lib`). A library found
//! there is preloaded by its full path with `RTLD_GLOBAL`; the dynamic loader then answers
//! cudarc's later `dlopen` of the same soname with the copy already in the process.
//!
//! The search itself ([`locate`]) only lists directories, so it is tested on a fake tree of
//! empty files named like the libraries.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One CUDA library the GPU path needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CudaLib {
    /// The driver API (`libcuda.so.1`), installed with the NVIDIA driver.
    Driver,
    /// cuBLASLt, which cuBLAS itself links against: preloaded before it.
    CublasLt,
    Cublas,
    /// The runtime compiler for the kernels in `gpu::kernels`.
    Nvrtc,
}

impl CudaLib {
    /// In preload order: a library's dependencies before it.
    pub const ALL: [CudaLib; 4] =
        [CudaLib::Driver, CudaLib::CublasLt, CudaLib::Cublas, CudaLib::Nvrtc];

    /// File name stem: the library is `<stem>.so` or `<stem>.so.<version>`.
    pub const fn stem(self) -> &'static str {
        match self {
            CudaLib::Driver => "libcuda",
            CudaLib::CublasLt => "libcublasLt",
            CudaLib::Cublas => "libcublas",
            CudaLib::Nvrtc => "libnvrtc",
        }
    }

    /// Whether cudarc's own lookup (the loader's search, by its candidate names) finds it.
    fn loadable_by_name(self) -> bool {
        // SAFETY: each check only dlopens the library by name and closes it again; running a
        // CUDA library's initialisers is what any CUDA program does.
        unsafe {
            match self {
                CudaLib::Driver => cudarc::driver::sys::is_culib_present(),
                CudaLib::CublasLt => cudarc::cublaslt::sys::is_culib_present(),
                CudaLib::Cublas => cudarc::cublas::sys::is_culib_present(),
                CudaLib::Nvrtc => cudarc::nvrtc::sys::is_culib_present(),
            }
        }
    }
}

impl fmt::Display for CudaLib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.stem())
    }
}

/// Where the search looks. [`SearchEnv::from_process`] reads this process's environment; tests
/// build one rooted in a temporary directory.
#[derive(Clone, Debug, Default)]
pub struct SearchEnv {
    /// Prefix of every absolute pattern below (`/` for the real system).
    pub root: PathBuf,
    /// `LD_LIBRARY_PATH`, as set.
    pub ld_library_path: Option<OsString>,
    /// `$HOME`, for `~/.local/lib/python3*/site-packages`.
    pub home: Option<PathBuf>,
    /// `$VIRTUAL_ENV` and `$CONDA_PREFIX`, when set.
    pub python_prefixes: Vec<PathBuf>,
    /// Site directories `python3` itself reports (`site.getsitepackages()` and the user site).
    pub python_sites: Vec<PathBuf>,
}

/// Directory patterns the loader does not search by default, relative to [`SearchEnv::root`]:
/// CUDA toolkits, then the system's library directories (a driver installed outside
/// `ld.so.cache`), then Python environments' site directories.
const TOOLKIT_DIRS: [&str; 4] = [
    "usr/local/cuda/lib64",
    "usr/local/cuda*/lib64",
    "usr/local/cuda*/targets/*/lib",
    "opt/cuda/lib64",
];
const SYSTEM_DIRS: [&str; 3] = ["usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/wsl/lib"];
const SITE_DIRS: [&str; 6] = [
    "usr/lib/python3*/site-packages",
    "usr/lib/python3*/dist-packages",
    "usr/local/lib/python3*/site-packages",
    "usr/local/lib/python3*/dist-packages",
    "root/.pyenv/versions/*/lib/python3*/site-packages",
    "opt/conda/lib/python3*/site-packages",
];

impl SearchEnv {
    /// This process's environment, with `python3`'s own site directories when it runs.
    pub fn from_process() -> SearchEnv {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let python_prefixes = ["VIRTUAL_ENV", "CONDA_PREFIX"]
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from)
            .collect();
        SearchEnv {
            root: PathBuf::from("/"),
            ld_library_path: std::env::var_os("LD_LIBRARY_PATH"),
            home,
            python_prefixes,
            python_sites: python_site_dirs(),
        }
    }

    /// Every directory the search visits, in order, with the pattern that produced it; a
    /// pattern that matched nothing is listed with no directories.
    pub fn directories(&self) -> Vec<(String, Vec<PathBuf>)> {
        let mut out = Vec::new();
        if let Some(path) = &self.ld_library_path {
            for dir in std::env::split_paths(path).filter(|d| !d.as_os_str().is_empty()) {
                let found = if dir.is_dir() { vec![dir.clone()] } else { Vec::new() };
                out.push((dir.display().to_string(), found));
            }
        }
        for pattern in TOOLKIT_DIRS.iter().chain(&SYSTEM_DIRS) {
            out.push((format!("/{pattern}"), expand(&self.root, pattern)));
        }
        // Python site directories, each searched for the nvidia wheels' `nvidia/*/lib`.
        let mut sites: Vec<(String, Vec<PathBuf>)> = Vec::new();
        for pattern in SITE_DIRS {
            sites.push((format!("/{pattern}"), expand(&self.root, pattern)));
        }
        if let Some(home) = &self.home {
            let pattern = ".local/lib/python3*/site-packages";
            sites.push((format!("{}/{pattern}", home.display()), expand(home, pattern)));
        }
        for prefix in &self.python_prefixes {
            let pattern = "lib/python3*/site-packages";
            sites.push((format!("{}/{pattern}", prefix.display()), expand(prefix, pattern)));
        }
        for site in &self.python_sites {
            let found = if site.is_dir() { vec![site.clone()] } else { Vec::new() };
            sites.push((site.display().to_string(), found));
        }
        let mut seen = BTreeSet::new();
        for (pattern, dirs) in sites {
            let mut libs = Vec::new();
            for site in dirs {
                for lib in expand(&site, "nvidia/*/lib") {
                    if seen.insert(lib.clone()) {
                        libs.push(lib);
                    }
                }
            }
            out.push((format!("{pattern}/nvidia/*/lib"), libs));
        }
        out
    }
}

/// `python3`'s site directories, or none when there is no `python3` (or it fails).
fn python_site_dirs() -> Vec<PathBuf> {
    let script = "import site\n\
                  for d in site.getsitepackages() + [site.getusersitepackages()]: print(d)";
    match Command::new("python3").arg("-c").arg(script).output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect(),
        _ => Vec::new(),
    }
}

/// The existing directories under `base` matching `pattern`: `/`-separated components, each
/// either a literal name or a name with `*` wildcards. Sorted at each level, so the result is
/// deterministic (and `cuda-12.4` comes before `cuda-12.6`).
pub fn expand(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut level = vec![base.to_path_buf()];
    for component in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for dir in &level {
            if component.contains('*') {
                let Ok(entries) = std::fs::read_dir(dir) else { continue };
                let mut names: Vec<OsString> = entries.flatten().map(|e| e.file_name()).collect();
                names.sort();
                for name in names {
                    if name.to_str().is_some_and(|n| wildcard_match(component, n)) {
                        let path = dir.join(&name);
                        if path.is_dir() {
                            next.push(path);
                        }
                    }
                }
            } else {
                let path = dir.join(component);
                if path.is_dir() {
                    next.push(path);
                }
            }
        }
        level = next;
    }
    level
}

/// Shell-style match of `name` against `pattern`, where `*` matches any run of characters.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The best file for `lib` in `dir`: `<stem>.so.<major>` (the soname cudarc asks for) first,
/// then a fully versioned `<stem>.so.<x.y.z>`, then the bare development link `<stem>.so`.
pub fn best_in(dir: &Path, lib: CudaLib) -> Option<PathBuf> {
    let stem = lib.stem();
    let bare = format!("{stem}.so");
    let mut best: Option<(u8, String)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let rank = if name == bare {
            2
        } else if let Some(version) = name.strip_prefix(&bare).and_then(|v| v.strip_prefix('.')) {
            if version.is_empty() || !version.chars().all(|c| c.is_ascii_digit() || c == '.') {
                continue;
            }
            if version.contains('.') {
                1
            } else {
                0
            }
        } else {
            continue;
        };
        let candidate = (rank, name.to_string());
        if best.as_ref().is_none_or(|b| candidate < *b) {
            best = Some(candidate);
        }
    }
    best.map(|(_, name)| dir.join(name))
}

/// The first file for `lib` in the search's directories, in their order.
pub fn locate(env: &SearchEnv, lib: CudaLib) -> Option<PathBuf> {
    env.directories().iter().flat_map(|(_, dirs)| dirs).find_map(|dir| best_in(dir, lib))
}

/// How one library was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// The loader found it by name.
    Loader,
    /// Found at this path and preloaded.
    Preloaded(PathBuf),
    /// Not found, or found but it would not load (the loader's message).
    Missing(Option<String>),
}

/// The outcome of the search for every library.
#[derive(Clone, Debug)]
pub struct Discovery {
    pub libs: Vec<(CudaLib, Found)>,
    /// What was searched, for the message when something is missing.
    pub searched: String,
}

impl Discovery {
    pub fn missing(&self) -> Vec<CudaLib> {
        self.libs.iter().filter(|(_, f)| matches!(f, Found::Missing(_))).map(|(l, _)| *l).collect()
    }

    pub fn complete(&self) -> bool {
        self.missing().is_empty()
    }

    /// One line: which libraries are missing, and with `--verbose` everything that was
    /// searched.
    pub fn missing_line(&self) -> String {
        self.missing_line_with(crate::verbose::on())
    }

    /// One line: which libraries are missing, and everything that was searched or how to see it.
    pub fn missing_line_with(&self, searched: bool) -> String {
        let mut names: Vec<String> = Vec::new();
        for (lib, found) in &self.libs {
            if let Found::Missing(why) = found {
                names.push(match why {
                    Some(why) => format!("{lib} (found but failed to load: {why})"),
                    None => lib.to_string(),
                });
            }
        }
        let searched = match searched {
            true => format!("searched {}", self.searched),
            false => "`systole --verbose` lists the places searched".to_string(),
        };
        format!("no CUDA: {} not found ({searched})", names.join(", "))
    }

    /// One line: where each library came from.
    pub fn found_line(&self) -> String {
        let parts: Vec<String> = self
            .libs
            .iter()
            .map(|(lib, found)| match found {
                Found::Loader => format!("{lib}: loader path"),
                Found::Preloaded(p) => format!("{lib}: {}", p.display()),
                Found::Missing(_) => format!("{lib}: missing"),
            })
            .collect();
        parts.join("; ")
    }
}

/// A compact account of the search: the loader's path, then every pattern with how many
/// directories it matched.
pub fn describe_search(env: &SearchEnv) -> String {
    let ld = match &env.ld_library_path {
        Some(p) if !p.is_empty() => format!("LD_LIBRARY_PATH={}", p.to_string_lossy()),
        _ => "LD_LIBRARY_PATH (unset)".to_string(),
    };
    let mut parts = vec![format!("the loader's default path and {ld}")];
    let mut empty = Vec::new();
    for (pattern, dirs) in env.directories() {
        if env
            .ld_library_path
            .as_ref()
            .is_some_and(|p| std::env::split_paths(p).any(|d| d.display().to_string() == pattern))
        {
            continue; // already named with LD_LIBRARY_PATH
        }
        if dirs.is_empty() {
            empty.push(pattern);
        } else {
            let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            parts.push(list.join(", "));
        }
    }
    if !empty.is_empty() {
        parts.push(format!("and, matching no directory, {}", empty.join(", ")));
    }
    parts.join("; ")
}

/// Looks for every library once per process, preloading what the loader alone would not find.
/// Never panics; what is missing is in the result.
pub fn ensure_loaded() -> &'static Discovery {
    static DISCOVERY: OnceLock<Discovery> = OnceLock::new();
    DISCOVERY.get_or_init(|| {
        let env = SearchEnv::from_process();
        let mut libs = Vec::new();
        for lib in CudaLib::ALL {
            if lib.loadable_by_name() {
                libs.push((lib, Found::Loader));
                continue;
            }
            let found = match locate(&env, lib) {
                None => Found::Missing(None),
                Some(path) => match preload(&path) {
                    Ok(()) if lib.loadable_by_name() => Found::Preloaded(path),
                    Ok(()) => Found::Missing(Some(format!(
                        "{} loaded, but not under a name cudarc asks for",
                        path.display()
                    ))),
                    Err(e) => Found::Missing(Some(e)),
                },
            };
            if lib == CudaLib::Nvrtc {
                if let Found::Preloaded(path) = &found {
                    // NVRTC opens its builtins library by name at compile time.
                    preload_builtins(path);
                }
            }
            libs.push((lib, found));
        }
        Discovery { libs, searched: describe_search(&env) }
    })
}

/// dlopen by full path with `RTLD_GLOBAL`, kept open for the life of the process.
#[cfg(unix)]
fn preload(path: &Path) -> Result<(), String> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    let name = path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()))?;
    // SAFETY: loading a CUDA library runs its initialisers, as any CUDA program does; it is
    // never unloaded (forgotten), so its symbols stay valid for cudarc.
    let lib =
        unsafe { Library::open(Some(name), RTLD_NOW | RTLD_GLOBAL) }.map_err(|e| e.to_string())?;
    std::mem::forget(lib);
    Ok(())
}

#[cfg(not(unix))]
fn preload(path: &Path) -> Result<(), String> {
    Err(format!("preloading {} is only supported on unix", path.display()))
}

/// Preloads `libnvrtc-builtins.so*` from NVRTC's directory, if it is there.
fn preload_builtins(nvrtc: &Path) {
    let Some(dir) = nvrtc.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|n| n.starts_with("libnvrtc-builtins.so"))
        .collect();
    names.sort();
    if let Some(name) = names.first() {
        // Best effort: NVRTC reports a missing builtins library itself, in its compile log.
        let _ = preload(&dir.join(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(root: &Path, rel: &str) -> PathBuf {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"not a real library").unwrap();
        path
    }

    fn env_at(root: &Path) -> SearchEnv {
        SearchEnv { root: root.to_path_buf(), ..SearchEnv::default() }
    }

    #[test]
    fn wildcards() {
        assert!(wildcard_match("cuda*", "cuda-12.4"));
        assert!(wildcard_match("cuda*", "cuda"));
        assert!(wildcard_match("python3*", "python3.11"));
        assert!(!wildcard_match("python3*", "python2.7"));
        assert!(wildcard_match("*", "anything"));
        assert!(wildcard_match("a*b*c", "axxbyyc"));
        assert!(!wildcard_match("a*b*c", "axxcyyb"));
        assert!(!wildcard_match("ab*ba", "aba"));
        assert!(wildcard_match("lib", "lib"));
        assert!(!wildcard_match("lib", "lib64"));
    }

    #[test]
    fn best_file_prefers_the_soname_and_never_confuses_cublas_with_cublaslt() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        touch(dir, "libcublasLt.so.12");
        assert_eq!(best_in(dir, CudaLib::Cublas), None, "libcublasLt is not libcublas");
        touch(dir, "libcublas.so");
        assert_eq!(best_in(dir, CudaLib::Cublas), Some(dir.join("libcublas.so")));
        touch(dir, "libcublas.so.12.4.5.8");
        assert_eq!(best_in(dir, CudaLib::Cublas), Some(dir.join("libcublas.so.12.4.5.8")));
        touch(dir, "libcublas.so.12");
        assert_eq!(best_in(dir, CudaLib::Cublas), Some(dir.join("libcublas.so.12")));
        assert_eq!(best_in(dir, CudaLib::CublasLt), Some(dir.join("libcublasLt.so.12")));
        touch(dir, "libnvrtc-builtins.so.12.4");
        assert_eq!(best_in(dir, CudaLib::Nvrtc), None, "the builtins are not NVRTC");
        touch(dir, "libcuda.so.1.bak");
        assert_eq!(best_in(dir, CudaLib::Driver), None, "a suffix that is not a version");
    }

    #[test]
    fn finds_libraries_in_a_python_environment_and_a_toolkit() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let site = "root/.pyenv/versions/3.11.7/lib/python3.11/site-packages";
        let cublas = touch(root, &format!("{site}/nvidia/cublas/lib/libcublas.so.12"));
        let lt = touch(root, &format!("{site}/nvidia/cublas/lib/libcublasLt.so.12"));
        let nvrtc = touch(root, &format!("{site}/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"));
        let driver = touch(root, "usr/lib/x86_64-linux-gnu/libcuda.so.1");
        let env = env_at(root);
        assert_eq!(locate(&env, CudaLib::Cublas), Some(cublas.clone()));
        assert_eq!(locate(&env, CudaLib::CublasLt), Some(lt));
        assert_eq!(locate(&env, CudaLib::Nvrtc), Some(nvrtc));
        assert_eq!(locate(&env, CudaLib::Driver), Some(driver));

        // A CUDA toolkit comes before the Python environment.
        let toolkit = touch(root, "usr/local/cuda-12.6/lib64/libcublas.so.12");
        assert_eq!(locate(&env, CudaLib::Cublas), Some(toolkit));
        // LD_LIBRARY_PATH comes before everything.
        let custom = touch(root, "opt/mine/libcublas.so.13");
        let env = SearchEnv {
            ld_library_path: Some(
                std::env::join_paths([root.join("nowhere"), root.join("opt/mine")]).unwrap(),
            ),
            ..env
        };
        assert_eq!(locate(&env, CudaLib::Cublas), Some(custom));
    }

    #[test]
    fn finds_libraries_in_home_virtualenv_and_reported_sites() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let home = root.join("home/me");
        let user =
            touch(&home, ".local/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12");
        let venv = root.join("venv");
        let nvrtc = touch(&venv, "lib/python3.10/site-packages/nvidia/cu13/lib/libnvrtc.so.13");
        let reported = root.join("elsewhere/site-packages");
        let lt = touch(&reported, "nvidia/cublas/lib/libcublasLt.so.12");
        let env = SearchEnv {
            root: root.to_path_buf(),
            ld_library_path: None,
            home: Some(home),
            python_prefixes: vec![venv],
            python_sites: vec![reported],
        };
        assert_eq!(locate(&env, CudaLib::Cublas), Some(user));
        assert_eq!(locate(&env, CudaLib::Nvrtc), Some(nvrtc));
        assert_eq!(locate(&env, CudaLib::CublasLt), Some(lt));
        assert_eq!(locate(&env, CudaLib::Driver), None);
    }

    #[test]
    fn the_search_is_described_in_one_line_naming_every_place() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        fs::create_dir_all(root.join("usr/lib/x86_64-linux-gnu")).unwrap();
        let line = describe_search(&env_at(root));
        assert!(!line.contains('\n'));
        assert!(line.contains("LD_LIBRARY_PATH (unset)"), "{line}");
        assert!(line.contains(&root.join("usr/lib/x86_64-linux-gnu").display().to_string()));
        for pattern in ["/usr/local/cuda*/lib64", "/usr/lib64", "site-packages/nvidia/*/lib"] {
            assert!(line.contains(pattern), "{pattern} missing from: {line}");
        }
    }

    #[test]
    fn a_missing_library_is_named_with_the_search() {
        let d = Discovery {
            libs: vec![
                (CudaLib::Driver, Found::Missing(None)),
                (CudaLib::Cublas, Found::Preloaded(PathBuf::from("/x/libcublas.so.12"))),
                (CudaLib::Nvrtc, Found::Missing(Some("bad ELF".into()))),
            ],
            searched: "the loader's default path".into(),
        };
        assert_eq!(d.missing(), vec![CudaLib::Driver, CudaLib::Nvrtc]);
        let line = d.missing_line_with(true);
        assert!(line.starts_with("no CUDA: libcuda, libnvrtc (found but failed to load: bad ELF)"));
        assert!(line.ends_with("(searched the loader's default path)"), "{line}");
        let short = d.missing_line_with(false);
        assert!(short.ends_with("(`systole --verbose` lists the places searched)"), "{short}");
        assert!(!short.contains("loader's default path"), "{short}");
    }
}
