//! Where `systole`'s outputs go (host/src/outputs): a link is followed and its target replaced; a
//! FIFO, a device or `/dev/stdout` is written into, never replaced; two flags naming one file
//! (after links) are refused before any work; a run's outputs are committed together or not at
//! all; and a run stopped by a signal leaves no temporary file behind.
//!
//! Like cli.rs, these run the `systole` binary: `cargo build -p systole-host` first.

use std::ffi::CString;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use npyz::WriterBuilder;
use systole_tests::{assert_fails_naming, systole, systole_binary, Scratch};

/// A previous output that a refused or failed run must leave as it is.
const OLD: &[u8] = b"an earlier output";

/// `systole train` for one epoch, with `extra` flags.
fn train(extra: &[&Path]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["train".as_ref(), "--epochs".as_ref(), "1".as_ref()];
    args.extend(extra.iter().map(|p| p.as_os_str()));
    systole(args)
}

fn temporaries(s: &Scratch) -> Vec<String> {
    s.listing().into_iter().filter(|f| f.starts_with(".systole-")).collect()
}

#[track_caller]
fn assert_success(out: &Output) {
    assert!(out.status.success(), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// A 2 x 2 INT8 `.npy` matrix.
fn npy(s: &Scratch, name: &str) -> PathBuf {
    let path = s.path(name);
    let mut writer = npyz::WriteOptions::new()
        .dtype(npyz::DType::Plain("|i1".parse().unwrap()))
        .shape(&[2, 2])
        .writer(fs::File::create(&path).unwrap())
        .begin_nd()
        .unwrap();
    writer.extend([1i8, 2, 3, 4]).unwrap();
    writer.finish().unwrap();
    path
}

#[test]
fn an_output_through_a_link_replaces_the_file_the_link_names_and_keeps_the_link() {
    let s = Scratch::new();
    fs::create_dir(s.path("runs")).unwrap();
    let target = s.write("runs/run.json", OLD);
    fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
    symlink("runs/run.json", s.path("latest.json")).unwrap();
    symlink("runs/model.safetensors", s.path("dangling.safetensors")).unwrap();
    let out = train(&[
        "--json".as_ref(),
        &s.path("latest.json"),
        "--save".as_ref(),
        &s.path("dangling.safetensors"),
    ]);
    assert_success(&out);
    assert!(fs::symlink_metadata(s.path("latest.json")).unwrap().file_type().is_symlink());
    assert!(fs::symlink_metadata(s.path("dangling.safetensors")).unwrap().file_type().is_symlink());
    let json = fs::read_to_string(&target).unwrap();
    assert!(json.contains("\"test_accuracy_f32\""), "{json}");
    let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "a replaced file keeps its permission bits");
    assert!(fs::metadata(s.path("runs/model.safetensors")).unwrap().len() > 0);
    assert_eq!(temporaries(&s), Vec::<String>::new());
    let runs: Vec<_> =
        fs::read_dir(s.path("runs")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(runs.len(), 2, "no temporary file beside the targets: {runs:?}");
}

#[test]
fn a_fifo_output_is_written_into_and_stays_a_fifo() {
    let s = Scratch::new();
    let fifo = s.path("run.fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    let out = train(&["--json".as_ref(), &fifo]);
    assert_success(&out);
    let json = String::from_utf8(reader.join().unwrap()).unwrap();
    assert!(json.contains("\"test_accuracy_f32\""), "{json}");
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(temporaries(&s), Vec::<String>::new());
}

#[test]
fn dev_stdout_is_written_to_the_runs_own_stdout() {
    let out = train(&["--json".as_ref(), "/dev/stdout".as_ref()]);
    assert_success(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"test_accuracy_f32\""), "{stdout}");
    assert!(stdout.contains("wrote /dev/stdout"), "{stdout}");
    // The same through /dev/fd/1, from gemm, into a file the shell opened for appending.
    let s = Scratch::new();
    let (a, b) = (npy(&s, "A.npy"), npy(&s, "B.npy"));
    let log = s.write("log", b"kept\n");
    let appended = fs::OpenOptions::new().append(true).open(&log).unwrap();
    let status = Command::new(systole_binary())
        .args(["gemm", "--dtype", "int8", "--rows", "2", "--cols", "2"])
        .args(["--a".as_ref(), a.as_os_str(), "--b".as_ref(), b.as_os_str()])
        .args(["-o", "/dev/fd/1"])
        .stdout(appended)
        .status()
        .unwrap();
    assert!(status.success());
    let logged = fs::read(&log).unwrap();
    assert!(logged.starts_with(b"kept\n\x93NUMPY"), "appended, not truncated: {logged:?}");
}

#[test]
fn a_character_device_output_is_written_into_and_stays_a_device() {
    // SAFETY: `geteuid` has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: not root, so no character device can be made with mknod: not run");
        return;
    }
    let s = Scratch::new();
    let null = s.path("null");
    let c = CString::new(null.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path; 1:3 is Linux's null device, made inside the scratch directory.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(made, 0, "mknod as root");
    let out = train(&["--json".as_ref(), &null, "--save".as_ref(), &null]);
    assert_success(&out);
    assert!(fs::symlink_metadata(&null).unwrap().file_type().is_char_device());
    assert_eq!(temporaries(&s), Vec::<String>::new());
}

#[test]
fn two_flags_naming_one_file_are_refused_before_any_work() {
    let s = Scratch::new();
    let (a, b) = (npy(&s, "A.npy"), npy(&s, "B.npy"));
    let data = s.write("X.csv", "a,b,label\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n1,1,0\n2,2,1\n");
    let same = s.write("same.out", OLD);
    symlink("same.out", s.path("alias.out")).unwrap();
    fs::hard_link(&same, s.path("hard.out")).unwrap();
    symlink("X.csv", s.path("data-link.csv")).unwrap();
    let gemm = |extra: &[&Path]| {
        let mut args: Vec<&std::ffi::OsStr> =
            ["gemm", "--dtype", "int8", "--rows", "2", "--cols", "2", "--b"]
                .map(|a| a.as_ref())
                .to_vec();
        args.push(b.as_os_str());
        args.extend(extra.iter().map(|p| p.as_os_str()));
        systole(args)
    };
    let p = |name: &str| s.path(name);
    let cases: Vec<(&str, Output, [&str; 2])> = vec![
        (
            "train --json and --save, one string",
            train(&["--json".as_ref(), &same, "--save".as_ref(), &same]),
            ["--json", "--save"],
        ),
        (
            "train --json and --save, through a link",
            train(&["--json".as_ref(), &p("alias.out"), "--save".as_ref(), &same]),
            ["--json", "--save"],
        ),
        (
            "train --json and --save, hard links",
            train(&["--json".as_ref(), &p("hard.out"), "--save".as_ref(), &same]),
            ["--json", "--save"],
        ),
        (
            "train --dataset and --json",
            train(&["--dataset".as_ref(), &data, "--json".as_ref(), &p("data-link.csv")]),
            ["--json", "--dataset"],
        ),
        (
            "gemm -o and --stats",
            gemm(&["--a".as_ref(), &a, "-o".as_ref(), &same, "--stats".as_ref(), &p("alias.out")]),
            ["-o", "--stats"],
        ),
        ("gemm --a and -o", gemm(&["--a".as_ref(), &a, "-o".as_ref(), &a]), ["-o", "--a"]),
    ];
    for (case, out, flags) in cases {
        assert_fails_naming(&out, &flags);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("one file") || stderr.contains("its own input"),
            "{case}: {stderr}"
        );
    }
    assert_eq!(fs::read(&same).unwrap(), OLD);
    assert!(fs::read_to_string(&data).unwrap().starts_with("a,b,label"));
    assert!(fs::read(&a).unwrap().starts_with(b"\x93NUMPY"));
    assert_eq!(temporaries(&s), Vec::<String>::new());
    // Two outputs into the null device are fine: a character device takes any number.
    let out =
        train(&["--json".as_ref(), "/dev/null".as_ref(), "--save".as_ref(), "/dev/null".as_ref()]);
    assert_success(&out);
}

/// `systole train --dataset FIFO` with `flags`, stopped inside the data set's read: this returns
/// once the child has opened the FIFO, so its outputs are already staged; `feed` is the FIFO's
/// write end, which the caller fills and closes to let the run go on.
fn train_paused_at_its_data_set(s: &Scratch, flags: &[&Path]) -> (Child, fs::File) {
    let fifo = s.path("data.fifo");
    mkfifo(&fifo);
    let mut command = Command::new(systole_binary());
    command
        .args(["train", "--epochs", "1", "--dataset"])
        .arg(&fifo)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    no_core_dumps(&mut command);
    let mut child = command.spawn().unwrap();
    // Non-blocking, so a child that never opens the FIFO fails the test instead of hanging it.
    let started = Instant::now();
    loop {
        use std::os::unix::fs::OpenOptionsExt;
        match fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo) {
            Ok(feed) => {
                // Blocking again for the writes.
                use std::os::fd::AsRawFd;
                // SAFETY: `feed` is an open descriptor; clearing O_NONBLOCK is always valid.
                unsafe { libc::fcntl(feed.as_raw_fd(), libc::F_SETFL, 0) };
                return (child, feed);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => panic!("opening {}: {e}", fifo.display()),
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
            panic!("the run ended before reading its data set: {status:?}: {stderr}");
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the run never opened its data set");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// SIGQUIT's default action dumps core: not into the test's directories.
fn no_core_dumps(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `setrlimit` is async-signal-safe, as `pre_exec` requires.
    unsafe {
        command.pre_exec(|| {
            let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
}

const DIGITS: &str = include_str!("../../data/digits.csv");

#[test]
fn a_destination_that_becomes_a_directory_during_the_run_fails_the_whole_commit() {
    let s = Scratch::new();
    let json = s.write("run.json", OLD);
    let model = s.path("model.out");
    let (child, mut feed) =
        train_paused_at_its_data_set(&s, &["--json".as_ref(), &json, "--save".as_ref(), &model]);
    fs::create_dir(&model).unwrap();
    feed.write_all(DIGITS.as_bytes()).unwrap();
    drop(feed);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--save") && stderr.contains("directory"), "{stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert_eq!(fs::read(&json).unwrap(), OLD, "--json was replaced by a run that failed");
    assert_eq!(temporaries(&s), Vec::<String>::new());
}

#[test]
fn a_run_stopped_by_a_signal_leaves_no_temporary_file() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
        let s = Scratch::new();
        let (json, model) = (s.path("run.json"), s.path("model.safetensors"));
        let (child, feed) = train_paused_at_its_data_set(
            &s,
            &["--json".as_ref(), &json, "--save".as_ref(), &model],
        );
        assert_eq!(
            temporaries(&s).len(),
            2,
            "signal {signal}: both outputs staged: {:?}",
            s.listing()
        );
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let out = child.wait_with_output().unwrap();
        drop(feed);
        assert_eq!(
            out.status.signal(),
            Some(signal),
            "ended by the signal itself: {:?}",
            out.status
        );
        assert_eq!(s.listing(), vec!["data.fifo".to_string()], "signal {signal}: left behind");
    }
    // SIGPIPE as `systole train ... | head -1` raises it.
    let s = Scratch::new();
    let mut child = Command::new(systole_binary())
        .args(["train", "--epochs", "5", "--json"])
        .arg(s.path("run.json"))
        .arg("--save")
        .arg(s.path("model.safetensors"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("digits:"), "{first}");
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}");
    assert_eq!(s.listing(), Vec::<String>::new());
}

/// Issue 73: a signal sent while `train` put its outputs in place ended it between the FIFO's
/// write and `--json`'s rename: the model went out, the old run.json stayed. The FIFO's reader
/// holds the commit inside its first output (a 150 KB model does not fit a 64 KB pipe) while the
/// signal is sent; the run must finish putting every output in place, say so, and only then end
/// by the signal.
#[test]
fn a_signal_during_the_commit_takes_effect_after_every_output_is_in_place() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let s = Scratch::new();
        let json = s.write("run.json", OLD);
        let fifo = s.path("model.fifo");
        mkfifo(&fifo);
        let mut reader =
            fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).unwrap();
        let mut command = Command::new(systole_binary());
        command
            .args(["train", "--epochs", "1", "--dtype", "f32", "--hidden", "512", "--json"])
            .arg(&json)
            .arg("--save")
            .arg(&fifo)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = command.spawn().unwrap();
        // The commit has begun once the model's first bytes are in the pipe.
        let mut model = vec![0u8; 4096];
        let started = Instant::now();
        let first = loop {
            match reader.read(&mut model) {
                Ok(n) if n > 0 => break n,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("reading the FIFO: {e}"),
            }
            assert!(started.elapsed() < Duration::from_secs(120), "the run never wrote its model");
            std::thread::sleep(Duration::from_millis(2));
        };
        model.truncate(first);
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        // SAFETY: `reader` is an open descriptor; clearing O_NONBLOCK is always valid.
        unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETFL, 0) };
        reader.read_to_end(&mut model).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(signal), "{:?}: {stderr}", out.status);
        assert!(stderr.contains("arrived while the outputs were committed"), "{stderr}");
        assert!(model.len() > 150_000, "the whole model: {} bytes", model.len());
        let run = fs::read_to_string(&json).unwrap();
        assert!(run.starts_with('{'), "signal {signal}: run.json is the old one: {run}");
        assert_eq!(temporaries(&s), Vec::<String>::new());
    }
}
