//! Flags the CLI is given, checked before any work (issue 73): a flag that does not apply is
//! named in one `note:` line, not dropped silently; every array a run will use is checked before
//! the first epoch; a clock the link's baud cannot be divided from is refused before anything is
//! emitted or synthesized; an out-of-range flag names itself and its range; and what a run
//! calls an MLP is one.
//!
//! Like cli.rs, these run the `systole` binary: `cargo build -p systole-host` first.

use std::process::Output;

use systole_tests::{assert_fails_naming, systole, Scratch};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[track_caller]
fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(out));
}

/// `systole train --epochs 1 --dtype f32` with `extra` flags: the f32 reference alone, quickly.
fn train_f32(extra: &[&str]) -> Output {
    let mut args = vec!["train", "--epochs", "1", "--dtype", "f32"];
    args.extend(extra);
    systole(args)
}

/// The note line, if the run printed one.
fn note(out: &Output) -> Option<String> {
    let text = stderr(out);
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note: ")).collect();
    assert!(notes.len() <= 1, "one note line at most: {text}");
    notes.first().map(|l| l.to_string())
}

#[test]
fn flags_that_do_not_apply_are_named_in_one_line() {
    let s = Scratch::new();
    let plain = train_f32(&[]);
    assert_ok(&plain);
    assert_eq!(note(&plain), None, "a run with no stray flag says nothing");

    let out = train_f32(&["--machine", "rtl", "--port", "/dev/null", "--rows", "4"]);
    assert_ok(&out);
    let line = note(&out).expect("a note naming the ignored flags");
    for flag in ["--machine rtl", "--port /dev/null", "the array flags", "--dtype f32"] {
        assert!(line.contains(flag), "{flag}: {line}");
    }

    let model =
        s.write("m.json", r#"{"input": [64], "layers": [{"kind": "dense", "in": 64, "out": 10}]}"#);
    let out = train_f32(&["--hidden", "32", "--model", model.to_str().unwrap()]);
    assert_ok(&out);
    let line = note(&out).expect("a note naming --hidden");
    assert!(line.contains("--hidden 32") && line.contains("has its own layers"), "{line}");

    // The port is the board machine's; the functional machine runs the GEMM without it.
    let a = s.write("a.csv", "");
    let out = systole([
        "gemm",
        "--a",
        a.to_str().unwrap(),
        "--b",
        a.to_str().unwrap(),
        "--dtype",
        "int8",
        "--port",
        "/dev/ttyUSB9",
        "-o",
        s.path("c.npy").to_str().unwrap(),
    ]);
    assert!(note(&out).is_some_and(|l| l.contains("--port /dev/ttyUSB9")), "{}", stderr(&out));
}

/// `train --pe-stages 3 --dtype int8` trained every epoch in bf16 and was refused only when
/// the INT8 array for the inference was built.
#[test]
fn an_int8_array_that_cannot_be_built_is_refused_before_the_first_epoch() {
    // BF16 PEs of three stages train on the blocking schedule; INT8 PEs have none.
    let flags = ["--pe-stages", "3", "--schedule", "blocking", "--dtype", "int8", "--epochs", "30"];
    let out = systole([&["train"][..], &flags].concat());
    assert_fails_naming(&out, &["int8 array", "--dtype int8"]);
}

/// `hdl emit --clock-mhz 0.001` wrote a UART divisor clamped to 4 (250 baud, where 115,200 was
/// promised), and `board build icebreaker --clock-mhz 0.001` started synthesis.
#[test]
fn a_clock_the_links_baud_cannot_be_divided_from_is_refused_before_any_work() {
    let s = Scratch::new();
    let dir = s.path("out");
    let dir = dir.to_str().unwrap();
    let out = systole(["hdl", "emit", "--dtype", "int8", "--clock-mhz", "0.001", "-o", dir]);
    assert_fails_naming(&out, &["--clock-mhz 0.001", "115200 baud", "gives 1000 baud"]);
    let out = systole(["board", "build", "icebreaker", "--clock-mhz", "0.001", "-o", dir]);
    assert_fails_naming(&out, &["--clock-mhz 0.001", "115200 baud"]);
    // 1 MHz: nine cycles a bit, 3.5% slow.
    let out = systole(["hdl", "emit", "--dtype", "int8", "--clock-mhz", "1", "-o", dir]);
    assert_fails_naming(&out, &["--clock-mhz 1", "111111 baud"]);
    assert_eq!(s.listing(), Vec::<String>::new(), "nothing written");
    // An explicit divisor is the user's choice.
    let out = systole([
        "hdl",
        "emit",
        "--dtype",
        "int8",
        "--clock-mhz",
        "0.001",
        "--uart-divisor",
        "4",
        "-o",
        dir,
    ]);
    assert_ok(&out);
}

/// `firmware blob --batch 0` said `batch is out of range`, naming neither the flag nor the range.
#[test]
fn a_blob_batch_of_zero_names_the_flag_and_its_range() {
    let s = Scratch::new();
    let out = systole([
        "firmware",
        "blob",
        "--model",
        "m.safetensors",
        "--batch",
        "0",
        "-o",
        s.path("b.bin").to_str().unwrap(),
    ]);
    assert_fails_naming(&out, &["--batch", "0", "1..=65535"]);
}

/// Dense layers with no ReLU between them were labelled `64-32-10 MLP`: they are one linear map.
#[test]
fn dense_layers_without_relus_between_them_are_not_called_an_mlp() {
    let s = Scratch::new();
    let model = s.write(
        "linear.json",
        r#"{"input": [64], "layers": [{"kind": "dense", "in": 64, "out": 32},
            {"kind": "dense", "in": 32, "out": 10}]}"#,
    );
    let saved = s.path("linear.safetensors");
    let out = train_f32(&["--model", model.to_str().unwrap(), "--save", saved.to_str().unwrap()]);
    assert_ok(&out);
    assert!(!stdout(&out).contains("64-32-10"), "{}", stdout(&out));
    let out = systole([
        "firmware",
        "blob",
        "--model",
        saved.to_str().unwrap(),
        "--dtype",
        "bf16",
        "-o",
        s.path("b.bin").to_str().unwrap(),
    ]);
    assert_ok(&out);
    assert!(!stdout(&out).contains("MLP") && stdout(&out).contains("network"), "{}", stdout(&out));
}
