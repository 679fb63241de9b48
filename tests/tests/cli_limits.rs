//! Sizes that flags and files imply: each is bounded before it is allocated. The `systole`
//! binary runs here under an address-space limit of 2 GiB (`setrlimit(RLIMIT_AS)`), so an
//! allocation the command should have refused ends in an abort (status 134) rather than in a
//! slow machine: every case must exit with status 2 and one `error: ` line naming the limit.
//!
//! Like cli.rs, these run the `systole` binary: `cargo build -p systole-host` first.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use systole_core::graph::MlpSpec;
use systole_core::params::Params;
use systole_host::model::Model;
use systole_tests::{systole_binary, Scratch};

/// The address space each run gets: far below what the refused cases would allocate (1.6 GB
/// to 100 GB), far above what a refusal takes (tens of MB).
const ADDRESS_SPACE: u64 = 2 << 30;

/// What `host::limits::MEMORY_LIMIT` and `systole_hdl::top::MAX_DRAM_BYTES` say in messages.
const MEMORY_LIMIT: &str = "the limit is 4294967296";
const DRAM_LIMIT: &str = "16777216";
/// `dataset::MAX_ROW_BYTES`.
const ROW_LIMIT: &str = "the limit is 4194368 bytes a row";

/// Runs `systole` with `args` under [`ADDRESS_SPACE`].
fn systole_limited<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    limited(args, ADDRESS_SPACE).output().expect("spawn systole")
}

/// `systole` with `args`, to run under an address space of `bytes`.
fn limited<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>, bytes: u64) -> Command {
    let mut command = Command::new(systole_binary());
    command.args(args);
    // SAFETY: the closure runs in the child between fork and exec and calls only setrlimit,
    // which is async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// Status 2 (not an abort's 134), one line on stderr starting `error: ` with every needle in
/// it, no panic.
#[track_caller]
fn assert_refused(case: &str, out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{case}: exit status {:?}; stderr: {stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{case}: panic: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{case}: one line on stderr: {stderr:?}");
    assert!(stderr.starts_with("error: "), "{case}: {stderr:?}");
    for needle in needles {
        assert!(stderr.contains(needle), "{case}: stderr should say {needle:?}: {stderr:?}");
    }
}

/// A C-order `.npy` of int8 elements, its header padded to 64 bytes as NumPy writes it.
fn npy_int8(rows: usize, cols: usize, fill: u8) -> Vec<u8> {
    let dict = format!("{{'descr': '|i1', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    let padded = (10 + dict.len() + 1).div_ceil(64) * 64 - 10;
    let mut header = format!("{dict:<width$}", width = padded - 1);
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + rows * cols, fill);
    out
}

/// A 1.6 GB DRAM image for a 20000x1x20000 GEMM, and the RTL's 2 GiB DRAM emitted at 8 bytes a
/// byte, grew `systole sim` to 17 GB.
#[test]
fn sim_gemm_needing_more_dram_than_an_emitted_design_holds_is_refused() {
    let array = "--dtype int8 --rows 8 --cols 8 --spad-depth 32 --acc-depth 24";
    let out = systole_limited(words(&format!("sim {array} --gemm 20000x1x20000"), &[]));
    assert_refused("sim --gemm", &out, &["--gemm 20000x1x20000", "1600040000", DRAM_LIMIT]);
    let out =
        systole_limited(words(&format!("sim {array} --gemm 2x2x2 --dram-bytes 4294967295"), &[]));
    assert_refused("sim --dram-bytes", &out, &["--dram-bytes 4294967295", DRAM_LIMIT]);
}

/// rust-hdl holds 8 bytes per DRAM byte while emitting: `--dram-bytes 4294967295` asked for 32
/// GiB.
#[test]
fn hdl_emit_with_a_huge_dram_is_refused() {
    let s = Scratch::new();
    let dir = s.path("out");
    let line = "hdl emit --rows 2 --cols 2 --dtype int8 --dram-bytes 4294967295 -o";
    let out = systole_limited(words(line, &[dir.as_os_str()]));
    assert_refused("hdl emit", &out, &["dram_bytes = 4294967295", DRAM_LIMIT]);
    assert!(!dir.exists(), "nothing written");
}

/// `--dtype f32` had no size check: 64-65536-65536-10 asked for 17 GB of weights alone.
#[test]
fn train_f32_with_huge_hidden_widths_is_refused() {
    let out = systole_limited(words("train --dtype f32 --hidden 65536,65536", &[]));
    assert_refused("train f32", &out, &["model 64-65536-65536-10", MEMORY_LIMIT]);
    assert!(out.stdout.is_empty(), "refused before any work");
}

/// BF16 checked only the ISA's 4 GiB of DRAM: a 2.2 GB DRAM passed, and the f32 reference
/// beside it took as much again; and on a 1 x 1 array a 4096-wide layer compiled to 400
/// million instructions (13 GB) before anything was checked.
#[test]
fn train_bf16_whose_dram_reference_and_programs_pass_the_limit_is_refused() {
    let out = systole_limited(words("train --hidden 12000,12000", &[]));
    assert_refused("train bf16", &out, &["model 64-12000-12000-10", "DRAM", MEMORY_LIMIT]);
    let out = systole_limited(words("train --rows 1 --cols 1 --hidden 4096,4096", &[]));
    assert_refused("train on 1x1", &out, &["model 64-4096-4096-10", "instructions", MEMORY_LIMIT]);
    assert!(out.stdout.is_empty(), "refused before any work");
}

/// The CSV reader held about 23 times a wide row (a 32 MB one-row file peaked at 775 MB, a
/// 256 MB one aborted); a file with no line break never ended its row.
#[test]
fn csv_rows_past_the_row_limit_are_refused_while_reading() {
    let s = Scratch::new();
    let wide = s.write("wide.csv", "1,".repeat(16 << 20) + "0\n");
    let model = s.write("model.safetensors", two_class_model(&[2]));
    for file in [wide.as_path(), Path::new("/dev/zero")] {
        let name = file.display().to_string();
        let out = systole_limited(words("train --dtype f32 --dataset", &[file.as_os_str()]));
        assert_refused(&format!("train: {name}"), &out, &[&name, "line 1", ROW_LIMIT]);
        let out = systole_limited(words(
            "predict --model",
            &[model.as_os_str(), "--dataset".as_ref(), file.as_os_str()],
        ));
        assert_refused(&format!("predict: {name}"), &out, &[&name, "line 1", ROW_LIMIT]);
    }
    // Within the bytes, past the columns: 70,000 one-digit cells.
    let many = s.write("many.csv", ["1"; 70_000].join(",") + "\n");
    let out = systole_limited(words("train --dataset", &[many.as_os_str()]));
    let name = many.display().to_string();
    assert_refused("train: 70,000 columns", &out, &[&name, "70000 columns", "the limit is 65537"]);
}

/// A 60 KB pair of `.npy` files implied a 3.6 GB C, read back twice, on a 3.6 GB DRAM.
#[test]
fn gemm_whose_result_passes_the_limit_is_refused() {
    let s = Scratch::new();
    let a = s.write("A.npy", npy_int8(30_000, 1, 1));
    let b = s.write("B.npy", npy_int8(1, 30_000, 1));
    let c = s.path("C.npy");
    let out = systole_limited(words(
        "gemm --dtype int8 --a",
        &[a.as_os_str(), "--b".as_ref(), b.as_os_str(), "-o".as_ref(), c.as_os_str()],
    ));
    assert_refused("gemm", &out, &["A.npy", "30000x1x30000", MEMORY_LIMIT]);
    assert!(!c.exists(), "no C written");
}

/// `.npy` files, models and board reports are read whole: a stream with no end stops at
/// `host::limits::INPUT_LIMIT`, and a regular file past it is refused from its size.
#[test]
fn whole_file_inputs_with_no_end_stop_at_the_input_limit() {
    let s = Scratch::new();
    let npy = s.write("B.npy", npy_int8(2, 2, 1));
    let zero = OsStr::new("/dev/zero");
    let cases = [
        (
            "gemm --a /dev/zero",
            words(
                "gemm --dtype int8 --a",
                &[
                    zero,
                    "--b".as_ref(),
                    npy.as_os_str(),
                    "-o".as_ref(),
                    s.path("C.npy").as_os_str(),
                ],
            ),
        ),
        ("predict --model /dev/zero", words("predict --model", &[zero])),
        (
            "firmware blob --model /dev/zero",
            words("firmware blob --model", &[zero, "-o".as_ref(), s.path("m.blob").as_os_str()]),
        ),
        (
            "bench --report /dev/zero",
            words("bench --machine board --board ulx3s --suite gemm --sizes 64 --report", &[zero]),
        ),
    ];
    for (case, args) in cases {
        let out = systole_limited(&args);
        assert_refused(case, &out, &["/dev/zero", "more than 1073741824 bytes"]);
    }
    let big = s.path("big.npy");
    std::fs::File::create(&big).unwrap().set_len((1 << 30) + 1).unwrap();
    let out = systole_limited(words(
        "gemm --dtype int8 --a",
        &[
            big.as_os_str(),
            "--b".as_ref(),
            npy.as_os_str(),
            "-o".as_ref(),
            s.path("C.npy").as_os_str(),
        ],
    ));
    assert_refused(
        "a sparse 1 GiB + 1 byte .npy",
        &out,
        &["big.npy", "more than 1073741824 bytes"],
    );
}

/// `std::fs::read` of `--program /dev/zero` never ended; the words are now decoded as they come.
#[test]
fn sim_program_with_no_end_is_read_word_by_word() {
    let line =
        "sim --dtype int8 --rows 2 --cols 2 --spad-depth 8 --acc-depth 4 --program /dev/zero";
    let out = systole_limited(words(line, &[]));
    assert_refused("sim --program /dev/zero", &out, &["/dev/zero: word 0", "invalid opcode"]);
}

/// `predict` ran the whole test split in one pass, holding every row's activations: a
/// 2-65536-2 model on 2,800 test rows asked for 2.2 GB. It now predicts in passes of 512 rows.
#[test]
fn predict_of_a_wide_model_on_many_rows_runs_in_bounded_passes() {
    let s = Scratch::new();
    let model = s.write("wide.safetensors", two_class_model(&[65536]));
    let rows: Vec<String> = (0..14_000).map(|i| format!("{},{},{}", i % 7, i % 5, i % 2)).collect();
    let csv = s.write("rows.csv", rows.join("\n") + "\n");
    let out = systole_limited(words(
        "predict --model",
        &[model.as_os_str(), "--dataset".as_ref(), csv.as_os_str()],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "exit status {:?}; stderr: {stderr}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("test accuracy") && stdout.contains("/2800)"), "{stdout}");
}

/// A 1 MB gzip whose header says 16,384 images of 256 x 256 (1 GiB of pixels, the input limit)
/// had its pixels read and then copied to f32: an abort asking for 4 GiB. Its header alone is
/// now refused, before a pixel is read: the f32 features and the test side's copy need 4.8 GiB.
#[test]
fn a_gzipped_idx_whose_header_implies_more_than_the_memory_limit_is_refused_before_reading() {
    let s = Scratch::new();
    let pair = idx_pair(&s, [16384, 256, 256], 1 << 30);
    let out = systole_limited(words("train --dtype f32 --dataset", &[pair.as_os_str()]));
    let need = "16384 rows of 65536 features (as f32, with the test side's copy) needs \
                5187633152 bytes of memory";
    assert_refused("1 GiB of pixels", &out, &["images-idx3-ubyte.gz: ", need, MEMORY_LIMIT]);
}

/// 256 MiB of pixels (4,096 images of 256 x 256, within the memory limit) were held as bytes
/// and as f32 at once, then copied again by the split: an abort under this 2 GiB address space
/// (2.4 GB at its peak without one). The pixels are never held as bytes now, and the training
/// side takes over the data set's features in place (1.4 GB at the peak), so it trains.
#[test]
fn an_idx_of_256_mib_pixels_trains_within_a_2_gib_address_space() {
    let s = Scratch::new();
    let pair = idx_pair(&s, [4096, 256, 256], 256 << 20);
    let out = systole_limited(words(
        "train --dtype f32 --hidden 1 --epochs 1 --dataset",
        &[pair.as_os_str()],
    ));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("test accuracy"), "{stderr}");
}

/// A header within the memory limit (8,191 images of 256 x 256: 2.6 GB as f32 with the test side) had
/// its f32 features reserved before a pixel came, past this 2 GiB address space; a 16-byte
/// file justifies none of it. Room now grows with the pixels read, so the file is refused for
/// what it is: short.
#[test]
fn an_idx_header_within_the_limit_is_not_reserved_before_its_pixels_are_read() {
    let s = Scratch::new();
    let pair = idx_pair(&s, [8191, 256, 256], 0);
    let out = systole_limited(words("train --dtype f32 --dataset", &[pair.as_os_str()]));
    let short = "elements: the file ends after 0 of its 536805376 bytes";
    assert_refused("a header alone", &out, &["images-idx3-ubyte.gz: ", short]);
}

/// A CSV grew its features as it was read until an allocation failed: an abort. Each row is
/// now counted against the memory limit, and an allocation the system refuses (here, under a
/// 512 MiB address space, from a pipe with no end) is an error.
#[test]
fn a_csv_that_outgrows_the_address_space_is_refused_not_aborted() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = limited(words("train --dtype f32 --dataset /dev/stdin", &[]), 512 << 20)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn systole");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let row = |label: u8| "0,".repeat(65536) + &format!("{label}\n");
        let rows = [row(0), row(1)];
        // Until the run ends and the pipe with it.
        for i in 0..1_000_000 {
            if stdin.write_all(rows[i % 2].as_bytes()).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_refused("an endless wide CSV", &out, &["/dev/stdin: ", "bytes of memory"]);
}

/// An IDX pair, `IMAGES,LABELS`: gzipped images of `dims` (`pixels` of them, all 0, which may
/// be fewer than the header says) and labels alternating 0 and 1.
fn idx_pair(s: &Scratch, dims: [u32; 3], pixels: u64) -> OsString {
    use flate2::{write::GzEncoder, Compression};
    use std::io::Write;
    let mut images = GzEncoder::new(Vec::new(), Compression::fast());
    images.write_all(&[0, 0, 8, 3]).unwrap();
    for d in dims {
        images.write_all(&d.to_be_bytes()).unwrap();
    }
    let chunk = vec![0u8; 1 << 20];
    let mut left = pixels;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        images.write_all(&chunk[..n]).unwrap();
        left -= n as u64;
    }
    let images = s.write("t-images-idx3-ubyte.gz", images.finish().unwrap());
    let labels: Vec<u8> = (0..dims[0]).map(|i| (i % 2) as u8).collect();
    let labels = s.write(
        "t-labels-idx1-ubyte",
        [&[0, 0, 8, 1][..], &dims[0].to_be_bytes(), &labels].concat(),
    );
    let mut pair = images.into_os_string();
    pair.push(",");
    pair.push(labels);
    pair
}

/// The words of `line`, then `more` (paths, kept whole).
fn words(line: &str, more: &[&OsStr]) -> Vec<OsString> {
    let mut out: Vec<OsString> = line.split_whitespace().map(OsString::from).collect();
    out.extend(more.iter().map(|m| m.to_os_string()));
    out
}

/// A saved 2-feature, 2-class model with `hidden` layers, as `train --save` writes one.
fn two_class_model(hidden: &[u32]) -> Vec<u8> {
    let spec = MlpSpec { inputs: 2, hidden: hidden.iter().copied().collect(), classes: 2 };
    let model = Model {
        params: Params::init(&spec, 1),
        net: spec.net().unwrap(),
        dtype: "f32".into(),
        seed: 0,
        feature_scale: 1.0,
        dataset: "rows.csv".into(),
        accuracies: vec![],
    };
    model.to_safetensors().expect("serialise the model")
}
