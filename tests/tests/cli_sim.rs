//! The RTL from the command line: `systole sim` (the comparison, the mismatch report and its
//! VCD, bad program files, random programs over either link, a board build's netlist refused
//! where it cannot run) and `--machine rtl` for `gemm` and `train`, against the cycle machine.
//! A board build's netlist itself runs in `scripts/check`, after CI builds the boards.
//!
//! The accelerators here are the ones the conformance suite and the training-step test build
//! (same Verilog, so the same cached models).

use std::fs;
use std::path::Path;

use npyz::WriterBuilder;
use serde_json::Value;
use systole_core::isa::{encode, Instruction};
use systole_tests::{assert_fails_naming, systole};

/// `conformance_top(2, Int8, ws)`'s accelerator as flags (`conformance::
/// the_clis_small_accelerator_is_the_suites` keeps the two in step).
pub const SMALL_2X2: [&str; 12] = [
    "--rows",
    "2",
    "--cols",
    "2",
    "--dtype",
    "int8",
    "--spad-depth",
    "14",
    "--acc-depth",
    "12",
    "--dram-bytes",
    "1536",
];

fn run_sim(extra: &[&str]) -> std::process::Output {
    let mut args = vec!["sim"];
    args.extend(SMALL_2X2);
    args.extend(extra);
    systole(args)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn sim_runs_a_gemm_on_the_rtl_and_finds_it_identical() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sim.json");
    let program = dir.path().join("gemm.bin");
    let out = run_sim(&[
        "--gemm",
        "5x7x3",
        "--json",
        json.to_str().unwrap(),
        "--save-program",
        program.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("identical: every memory"), "{stdout}");
    let report: Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["identical"], true);
    assert_eq!(report["dram_bytes"], 1536);
    let cycles = report["rtl_cycles"].as_u64().expect("RTL cycles");
    assert_eq!(Some(cycles), report["cycle_machine_cycles"].as_u64());
    assert!(cycles > 20, "{cycles}");
    assert_eq!(report["macs"], 5 * 7 * 3);
    // The saved program is the GEMM's: whole words, and it runs again from the file.
    let words = fs::metadata(&program).unwrap().len();
    assert_eq!(words % 16, 0);
    assert_eq!(report["instructions"].as_u64().unwrap() * 16, words);
    let again = run_sim(&["--program", program.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(text(&again.stdout).contains(&format!("rtl:           {cycles} cycles")));
}

/// `systole sim` builds the decoupled machine when asked for it and finds it identical to the
/// decoupled cycle machine, in fewer cycles than the blocking one (both the 2 x 2 accelerators
/// the conformance suite builds).
#[test]
fn sim_runs_the_decoupled_schedule_in_fewer_cycles() {
    let cycles = |schedule: &str| {
        let out = run_sim(&["--gemm", "6x9x5", "--schedule", schedule]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{schedule}: {stdout}{}", text(&out.stderr));
        assert!(stdout.contains("identical: every memory"), "{schedule}: {stdout}");
        let line =
            stdout.lines().find(|l| l.trim_start().starts_with("rtl:")).expect("the RTL line");
        let count = line.trim_start().trim_start_matches("rtl:").split(" cycles").next();
        count.and_then(|c| c.trim().parse::<u64>().ok()).unwrap_or_else(|| panic!("{line}"))
    };
    let (blocking, decoupled) = (cycles("blocking"), cycles("decoupled"));
    assert!(decoupled < blocking, "decoupled {decoupled} cycles, blocking {blocking}");
}

#[test]
fn a_mismatch_is_located_at_its_instruction_with_a_vcd() {
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("p.bin");
    // Six stores of accumulator rows, then Halt: the fault is injected after any run of more
    // than three instructions, so the fourth (index 3) is where the RTL first differs.
    let mut bytes = Vec::new();
    for i in 0..6u32 {
        let ins = Instruction::Store {
            acc_row: i as u16,
            dram_addr: 64 * i,
            rows: 1,
            len: 2,
            row_stride: 0,
        };
        bytes.extend(encode(&ins).unwrap().0.to_le_bytes());
    }
    bytes.extend(encode(&Instruction::Halt).unwrap().0.to_le_bytes());
    fs::write(&program, bytes).unwrap();
    let vcd = dir.path().join("mismatch.vcd");
    let json = dir.path().join("sim.json");
    let out = run_sim(&[
        "--program",
        program.to_str().unwrap(),
        "--inject-fault",
        "3:dram:0x5f0",
        "--vcd",
        vcd.to_str().unwrap(),
        "--vcd-cycles",
        "300",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("MISMATCH"), "{stdout}");
    assert!(stdout.contains("first at instruction 3 of 7: Store { acc_row: 3"), "{stdout}");
    assert!(stdout.contains("DRAM byte 0x5f0"), "{stdout}");
    assert!(stdout.contains(&vcd.display().to_string()), "the VCD's path: {stdout}");
    let trace = fs::read_to_string(&vcd).expect("the VCD");
    assert!(trace.contains("$enddefinitions") && trace.contains("uart_rx"), "a VCD of the top");
    let report: Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["identical"], false);
    assert_eq!(report["mismatch"]["instruction_index"], 3);
}

#[test]
fn bad_program_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let ragged = dir.path().join("ragged.bin");
    fs::write(&ragged, [0u8; 17]).unwrap();
    assert_fails_naming(
        &run_sim(&["--program", ragged.to_str().unwrap()]),
        &["ragged.bin", "17 bytes", "16-byte"],
    );
    let bad = dir.path().join("bad.bin");
    let mut bytes = encode(&Instruction::Sync).unwrap().0.to_le_bytes().to_vec();
    bytes.extend([0xffu8; 16]);
    fs::write(&bad, bytes).unwrap();
    assert_fails_naming(
        &run_sim(&["--program", bad.to_str().unwrap()]),
        &["bad.bin", "word 1", "byte 16"],
    );
    let no_halt = dir.path().join("nohalt.bin");
    fs::write(&no_halt, encode(&Instruction::Sync).unwrap().0.to_le_bytes()).unwrap();
    assert_fails_naming(
        &run_sim(&["--program", no_halt.to_str().unwrap()]),
        &["nohalt.bin", "no halt"],
    );
    assert_fails_naming(&run_sim(&["--gemm", "4x0x2"]), &["4x0x2", "MxKxN"]);
    assert_fails_naming(&run_sim(&["--gemm", "64x64x64"]), &["--dram-bytes 1536", "does not fit"]);
}

/// `--random` runs core's random program from the seed; either link carries it, and the
/// machines agree.
#[test]
fn sim_runs_a_random_program_over_either_link() {
    for link in ["uart", "spi"] {
        let out = run_sim(&["--random", "--seed", "3", "--link", link]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{link}: {stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("identical: every memory"), "{link}: {stdout}");
        assert!(stdout.contains("program of 23 instructions"), "{link}: {stdout}");
    }
    let out = run_sim(&["--random", "--gemm", "2x2x2"]);
    assert_eq!(out.status.code(), Some(2), "--random and --gemm are one or the other");
}

/// `--netlist DIR` takes a board build's directory: one that is missing and one without its
/// netlist (an iCE40 or an ECP5 build's report alone) are refused, naming what is wrong; array
/// options do not go with it.
#[test]
fn netlists_are_refused_naming_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let netlist = |d: &Path, extra: &[&str]| {
        let mut args = vec!["sim", "--netlist", d.to_str().unwrap(), "--gemm", "2x2x2"];
        args.extend(extra);
        systole(args)
    };
    assert_fails_naming(&netlist(&missing, &[]), &["nowhere/report.json", "board build"]);
    // Issue 73: a directory without its report was "No such file or directory" about the
    // directory.
    assert_fails_naming(&netlist(dir.path(), &[]), &["report.json", "board build"]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (report, needles) in [
        ("boards/ulx3s/report-ulx3s-25f.json", ["netlist.json is missing", "board build"]),
        ("boards/icebreaker/report-icebreaker.json", ["netlist.json is missing", "board build"]),
    ] {
        fs::copy(root.join(report), dir.path().join("report.json")).unwrap();
        assert_fails_naming(&netlist(dir.path(), &[]), &needles);
    }
    // Issue 73: a damaged netlist got Yosys' message about its own copy, without the file.
    fs::write(dir.path().join("netlist.json"), "{\"creator\": \"Yosys\", \"modu").unwrap();
    let damaged = dir.path().join("netlist.json");
    let damaged = damaged.to_str().unwrap();
    assert_fails_naming(&netlist(dir.path(), &[]), &[damaged, "not a Yosys JSON netlist"]);
    fs::remove_file(dir.path().join("netlist.json")).unwrap();
    let out = netlist(dir.path(), &["--dtype", "int8"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--dtype"), "{}", text(&out.stderr));
    let out = netlist(dir.path(), &["--rows", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--rows"), "{}", text(&out.stderr));
}

fn npy_i8(path: &Path, rows: u64, cols: u64, seed: u64) {
    let mut rng = systole_core::params::SplitMix64(seed);
    let data: Vec<i8> = (0..rows * cols).map(|_| rng.next_u64() as i8).collect();
    let mut w = npyz::WriteOptions::new()
        .dtype(npyz::DType::Plain("|i1".parse().unwrap()))
        .shape(&[rows, cols])
        .writer(fs::File::create(path).unwrap())
        .begin_nd()
        .unwrap();
    w.extend(data).unwrap();
    w.finish().unwrap();
}

/// `gemm --machine rtl` under both schedules: C and the cycle count of the cycle machine.
#[test]
fn gemm_on_the_rtl_equals_the_cycle_machine() {
    for schedule in ["blocking", "decoupled"] {
        gemm_on_the_rtl_under(schedule);
    }
}

fn gemm_on_the_rtl_under(schedule: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.npy"), dir.path().join("b.npy"));
    npy_i8(&a, 9, 21, 1);
    npy_i8(&b, 21, 7, 2);
    let run = |machine: &str| {
        let c = dir.path().join(format!("c_{machine}_{schedule}.npy"));
        let stats = dir.path().join(format!("{machine}_{schedule}.json"));
        let out = systole([
            "gemm",
            "--a",
            a.to_str().unwrap(),
            "--b",
            b.to_str().unwrap(),
            "--dtype",
            "int8",
            "--rows",
            "4",
            "--cols",
            "4",
            "--machine",
            machine,
            "--schedule",
            schedule,
            "-o",
            c.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{machine} {schedule}: {}", text(&out.stderr));
        let stats: Value = serde_json::from_slice(&fs::read(&stats).unwrap()).unwrap();
        (fs::read(&c).unwrap(), stats)
    };
    let (c_rtl, s_rtl) = run("rtl");
    let (c_cycle, s_cycle) = run("cycle");
    assert_eq!(c_rtl, c_cycle, "C from the RTL, {schedule}");
    assert_eq!(s_rtl["machine"], "rtl");
    assert_eq!(s_rtl["cycles_source"], "the accelerator's cycle counter");
    assert_eq!(s_rtl["cycles"], s_cycle["cycles"], "{schedule}");
    // The RTL is reached over its UART, 4 clock cycles a bit: what crossed it is counted; the
    // cycle machine has no link.
    let link = &s_rtl["link"];
    assert_eq!(link["baud"], 100e6 / 4.0, "{link}");
    assert!(link["bytes_out"].as_u64().unwrap() > 0 && link["bytes_in"].as_u64().unwrap() > 0);
    assert!(s_cycle["link"].is_null(), "{}", s_cycle["link"]);
}

#[test]
fn train_on_the_rtl_equals_the_cycle_machine() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("blobs.csv");
    let mut rows = String::new();
    for i in 0..24 {
        let class = i % 3;
        rows += &format!("{},{},{class}\n", class as f32 + i as f32 * 0.01, 2.0 - class as f32);
    }
    fs::write(&csv, rows).unwrap();
    let run = |machine: &str| {
        let json = dir.path().join(format!("{machine}.json"));
        let out = systole([
            "train",
            "--dataset",
            csv.to_str().unwrap(),
            "--hidden",
            "6",
            "--epochs",
            "1",
            "--batch",
            "8",
            "--rows",
            "4",
            "--cols",
            "4",
            "--machine",
            machine,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{machine}: {}", text(&out.stderr));
        let run: Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
        run
    };
    let mut rtl = run("rtl");
    let cycle = run("cycle");
    assert_eq!(rtl["config"]["machine"], "rtl");
    // The RTL's epoch says what its steps moved over the UART (at its divisor of 4: 25 Mbaud
    // at 100 MHz), at least the three batches' features; the cycle machine has no link.
    let link = rtl["epochs"][0].as_object_mut().unwrap().remove("link").expect("a link object");
    assert_eq!(link["baud"], 25e6);
    assert!(link["bytes_out"].as_u64().unwrap() > 24 * 2 * 2, "{link}");
    assert!(cycle["epochs"][0].get("link").is_none());
    assert_eq!(rtl["epochs"], cycle["epochs"], "loss, accuracy and cycles of every epoch");
    assert!(rtl["epochs"][0]["cycles"].as_u64().unwrap() > 0);
}

/// `hdl emit --schedule decoupled` writes the decoupled machine: the manifest names the
/// schedule and its memories (two accumulator banks, the FIFO's end bytes); the default is the
/// blocking machine, as before.
#[test]
fn hdl_emit_writes_the_decoupled_machine_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let emit = |schedule: &str| {
        let out = dir.path().join(schedule);
        let args = ["hdl", "emit", "--rows", "2", "--cols", "2", "--dtype", "int8", "--schedule"];
        let run = systole(args.iter().copied().chain([schedule, "-o", out.to_str().unwrap()]));
        assert!(run.status.success(), "{schedule}: {}", text(&run.stderr));
        let manifest: Value =
            serde_json::from_slice(&fs::read(out.join("manifest.json")).unwrap()).unwrap();
        let names: Vec<String> = manifest["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(manifest["config"]["schedule"], schedule);
        assert!(fs::metadata(out.join("systole_top.v")).unwrap().len() > 10_000);
        (text(&run.stdout), names)
    };
    let (line, names) = emit("decoupled");
    assert!(line.contains("int8 ws decoupled"), "{line}");
    for name in
        ["accumulator_bank_0", "accumulator_bank_1", "instruction_footprints", "transpose_buffer"]
    {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let (line, names) = emit("blocking");
    assert!(!line.contains("decoupled"), "{line}");
    assert!(names.iter().any(|n| n == "accumulators"), "{names:?}");
}

/// `hdl emit --rtl-revision N` writes that revision's netlist (revision 3's PEs sum in their
/// aligner's stage; revision 2's do not), and refuses a revision that does not exist, naming
/// the range.
#[test]
fn hdl_emit_writes_the_revision_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let emit = |revision: &str| {
        let out = dir.path().join(revision);
        let args = ["hdl", "emit", "--rows", "2", "--cols", "2", "--dtype", "bf16"];
        let rest = ["--pe-stages", "3", "--schedule", "blocking", "--rtl-revision", revision];
        let rest = rest.into_iter().chain(["-o", out.to_str().unwrap()]);
        let run = systole(args.iter().copied().chain(rest));
        (run, out.join("systole_top.v"))
    };
    let verilog = |revision: &str| {
        let (run, file) = emit(revision);
        assert!(run.status.success(), "{revision}: {}", text(&run.stderr));
        fs::read_to_string(file).unwrap()
    };
    let latest = systole_hdl::RTL_REVISION.to_string();
    assert!(verilog(&latest).contains("mac_bf16_pipelined_sum"));
    assert!(!verilog("2").contains("mac_bf16_pipelined_sum"));
    for bad in ["0", &(systole_hdl::RTL_REVISION + 1).to_string()] {
        let (run, file) = emit(bad);
        let err = text(&run.stderr);
        assert!(!run.status.success() && err.contains("rtl_revision"), "{bad}: {err}");
        assert!(err.contains(&format!("1 to {latest}")), "{bad}: {err}");
        assert!(!file.exists(), "{bad}: nothing written");
    }
}
