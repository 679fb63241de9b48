//! The CLI on bad input, kind by kind: every `.npy`, CSV and safetensors file that the readers
//! refuse, given to every subcommand that reads it, exits with status 2 and one line on stderr
//! naming the file; nothing panics; and output files that existed before are left byte for byte
//! as they were, with no temporary file beside them.
//!
//! Like cli.rs, these run the `systole` binary: `cargo build -p systole-host` first.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use systole_core::graph::MlpSpec;
use systole_core::params::Params;
use systole_host::model::Model;
use systole_tests::{systole, Scratch};

/// What an output file holds before a failing run; it must still hold it after.
const OLD: &[u8] = b"an earlier output that a failed run must not touch";

/// Exit status 2, nothing on stdout, one line on stderr that starts `error: ` and names
/// `file` (and `needle`), no panic; every file in `outputs` still holds [`OLD`].
#[track_caller]
fn assert_refused(case: &str, out: &Output, file: &Path, needle: &str, outputs: &[PathBuf]) {
    assert_error_line(case, out, &[&file.display().to_string(), needle]);
    for output in outputs {
        assert_eq!(fs::read(output).unwrap(), OLD, "{case}: {} was touched", output.display());
    }
}

// ---------------------------------------------------------------------------------------------
// Bad files of each kind: (case, bytes, what the message must say besides the file's name).

fn npy_header(dict: &str) -> Vec<u8> {
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

fn bad_npys() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let dict = |descr: &str, shape: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
    };
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    v2.extend_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    vec![
        ("empty file", vec![], "not a valid .npy"),
        ("text", b"m,k\n1,2\n".to_vec(), "not a valid .npy"),
        ("magic only", b"\x93NUMPY".to_vec(), "not a valid .npy"),
        ("header cut", npy_header(&dict("|i1", "(2, 2)"))[..20].to_vec(), "not a valid .npy"),
        ("version 2 header of 4 GiB", v2, "not a valid .npy"),
        ("bad dict", npy_header("{'descr': '|i1', 'shape': (2, 2)"), "not a valid .npy"),
        ("unknown dtype", npy_header(&dict("|q9", "(2, 2)")), "not a valid .npy"),
        ("data cut", [npy_header(&dict("|i1", "(2, 2)")), vec![1, 2]].concat(), "truncated"),
        ("data left over", [npy_header(&dict("|i1", "(1, 2)")), vec![1; 5]].concat(), "(1, 2)"),
        ("one dimension", [npy_header(&dict("|i1", "(4,)")), vec![1; 4]].concat(), "2-D"),
        ("zero rows", npy_header(&dict("|i1", "(0, 3)")), "zero"),
        ("overflowing shape", npy_header(&dict("|i1", "(4294967296, 4294967296)")), "overflows"),
        ("rows past 32 bits", npy_header(&dict("|i1", "(4294967296, 1)")), "(4294967296, 1)"),
        ("float64", [npy_header(&dict("<f8", "(1, 1)")), vec![0; 8]].concat(), "float64"),
        ("non-UTF-8 header", npy_header("{'descr': '\u{ff}'}"), "not a valid .npy"),
        (
            "brackets nested 22 deep",
            npy_header(&format!("{}{}", "[".repeat(22), "]".repeat(22))),
            "nests",
        ),
    ]
}

fn bad_csvs() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        ("empty file", vec![], "empty"),
        ("header only", b"a,b,label\n".to_vec(), "empty"),
        ("one column", b"1\n2\n".to_vec(), "line 1"),
        ("ragged", b"1,2,0\n3,1\n".to_vec(), "line 2"),
        ("not a number", b"a,b,label\n1,x,0\n".to_vec(), "column 2 (b)"),
        ("infinite", b"1,2,0\n1e39,2,1\n".to_vec(), "finite"),
        ("label 256", b"1,2,0\n1,2,256\n".to_vec(), "label 256"),
        ("fractional label", b"1,2,0\n1,2,0.5\n".to_vec(), "label 0.5"),
        ("one class", b"1,2,3\n4,5,3\n".to_vec(), "2 classes"),
        ("non-UTF-8 cell", b"1,2,0\n\xff\xfe,2,1\n".to_vec(), "line 2"),
        ("newline in a header cell", b"\"a\nb\",c,label\n1,x,0\n".to_vec(), "column 2 (c)"),
        ("newline in a named column", b"\"a\nb\",c,label\nx,1,0\n".to_vec(), "column 1"),
        ("unterminated quote", b"1,2,0\n\"1,2,1\n".to_vec(), "line"),
    ]
}

/// A safetensors file: `header` (JSON) and `data`.
fn safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The metadata of a model of dense layers of `widths` (inputs, hidden..., classes; ReLUs
/// between), each width written as it is given, so `x` is a width that is not a number.
fn meta(widths: &str) -> String {
    let widths: Vec<&str> = widths.split(',').collect();
    let layers: Vec<String> = widths
        .windows(2)
        .map(|p| format!("{{\\\"kind\\\":\\\"dense\\\",\\\"in\\\":{},\\\"out\\\":{}}}", p[0], p[1]))
        .collect();
    let relu = ",{\\\"kind\\\":\\\"relu\\\"},";
    format!(
        "\"__metadata__\":{{\"format\":\"systole-net\",\"input\":\"[{}]\",\"layers\":\"[{}]\",\
         \"seed\":\"0\",\"feature_scale\":\"16\"}}",
        widths[0],
        layers.join(relu)
    )
}

fn bad_models() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let tensor = |name: &str, dtype: &str, shape: &str, from: usize, to: usize| {
        format!(
            "\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape},\"data_offsets\":[{from},{to}]}}"
        )
    };
    let w = tensor("layers.0.weight", "F32", "[2,2]", 0, 16);
    let b = tensor("layers.0.bias", "F32", "[2]", 16, 24);
    let good = |m: &str| safetensors(&format!("{{{m},{w},{b}}}"), &[0; 24]);
    vec![
        ("empty file", vec![], "not a valid safetensors"),
        ("header length past the file", u64::MAX.to_le_bytes().to_vec(), "not a valid safetensors"),
        ("bad JSON", safetensors("{\"a\":", &[]), "not a valid safetensors"),
        ("no metadata", safetensors(&format!("{{{w},{b}}}"), &[0; 24]), "metadata"),
        ("another format", good(&meta("2,2").replace("systole-net", "gguf")), "format"),
        ("widths not numbers", good(&meta("2,x")), "layers"),
        ("no layers", good(&meta("2")), "layers"),
        ("width past the maximum", good(&meta("2,70000")), "layers"),
        ("huge widths, small tensors", good(&meta("65536,65536")), "layers.0.weight"),
        ("huge widths, three layers", good(&meta("65535,65535,65535")), "layers.0.weight"),
        (
            "F16 weights",
            safetensors(
                &format!(
                    "{{{},{},{b}}}",
                    meta("2,2"),
                    tensor("layers.0.weight", "F16", "[2,4]", 0, 16)
                ),
                &[0; 24],
            ),
            "dtype",
        ),
        ("wrong shape", good(&meta("2,3")), "shape"),
        (
            "offsets past the data",
            safetensors(
                &format!(
                    "{{{},{w},{}}}",
                    meta("2,2"),
                    tensor("layers.0.bias", "F32", "[2]", 16, 40)
                ),
                &[0; 24],
            ),
            // Issue 73: the crate's message named no tensor.
            "tensor `layers.0.bias`: shape [2] of F32 needs 8 bytes",
        ),
        (
            "a shape its bytes do not fill",
            safetensors(
                &format!(
                    "{{{},{},{b}}}",
                    meta("2,2"),
                    tensor("layers.0.weight", "F32", "[2,3]", 0, 16)
                ),
                &[0; 24],
            ),
            "tensor `layers.0.weight`: shape [2, 3] of F32 needs 24 bytes",
        ),
        (
            "an extra tensor",
            safetensors(
                &format!("{{{},{w},{b},{}}}", meta("2,2"), tensor("extra", "F32", "[2]", 24, 32)),
                &[0; 32],
            ),
            "extra",
        ),
        (
            "missing bias",
            safetensors(&format!("{{{},{w}}}", meta("2,2")), &[0; 16]),
            "layers.0.bias",
        ),
        ("seed not a number", good(&meta("2,2").replace("\"0\"", "\"-1\"")), "seed"),
        ("feature scale zero", good(&meta("2,2").replace("\"16\"", "\"0\"")), "feature_scale"),
    ]
}

// ---------------------------------------------------------------------------------------------

#[test]
fn bad_npy_inputs_to_gemm_exit_2_naming_the_file() {
    for (case, bytes, needle) in bad_npys() {
        let s = Scratch::new();
        let a = s.write("A.npy", &bytes);
        let b = s.write(
            "B.npy",
            [npy_header("{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), }"), vec![1; 4]]
                .concat(),
        );
        let c = s.write("C.npy", OLD);
        let stats = s.write("stats.json", OLD);
        let out = systole([
            "gemm".as_ref(),
            "--dtype".as_ref(),
            "int8".as_ref(),
            "--a".as_ref(),
            a.as_os_str(),
            "--b".as_ref(),
            b.as_os_str(),
            "-o".as_ref(),
            c.as_os_str(),
            "--stats".as_ref(),
            stats.as_os_str(),
        ] as [&std::ffi::OsStr; 11]);
        assert_refused(case, &out, &a, needle, &[c, stats]);
        assert_eq!(s.listing(), ["A.npy", "B.npy", "C.npy", "stats.json"], "{case}");
    }
}

#[test]
fn bad_csvs_to_train_and_predict_exit_2_naming_the_file() {
    for (case, bytes, needle) in bad_csvs() {
        let s = Scratch::new();
        let csv = s.write("data.csv", &bytes);
        let (json, saved) = (s.write("run.json", OLD), s.write("model.safetensors", OLD));
        let out = systole([
            "train".as_ref(),
            "--dataset".as_ref(),
            csv.as_os_str(),
            "--epochs".as_ref(),
            "1".as_ref(),
            "--json".as_ref(),
            json.as_os_str(),
            "--save".as_ref(),
            saved.as_os_str(),
        ] as [&std::ffi::OsStr; 9]);
        assert_refused(&format!("train: {case}"), &out, &csv, needle, &[json.clone(), saved]);

        // predict reads the data set after a valid model of the data set's width (2 features).
        let model = Model {
            net: MlpSpec { inputs: 2, hidden: heapless::Vec::new(), classes: 2 }.net().unwrap(),
            params: Params::init(
                &MlpSpec { inputs: 2, hidden: heapless::Vec::new(), classes: 2 },
                1,
            ),
            dtype: "f32".into(),
            seed: 0,
            feature_scale: 1.0,
            dataset: "data.csv".into(),
            accuracies: vec![],
        };
        let model_path = s.write("good.safetensors", model.to_safetensors().unwrap());
        let out = systole([
            "predict".as_ref(),
            "--model".as_ref(),
            model_path.as_os_str(),
            "--dataset".as_ref(),
            csv.as_os_str(),
            "--json".as_ref(),
            json.as_os_str(),
        ] as [&std::ffi::OsStr; 7]);
        assert_refused(&format!("predict: {case}"), &out, &csv, needle, &[json]);
        assert_eq!(
            s.listing(),
            ["data.csv", "good.safetensors", "model.safetensors", "run.json"],
            "{case}"
        );
    }
}

#[test]
fn bad_model_files_to_predict_and_firmware_blob_exit_2_naming_the_file() {
    for (case, bytes, needle) in bad_models() {
        let s = Scratch::new();
        let model = s.write("model.safetensors", &bytes);
        let json = s.write("out.json", OLD);
        let out = systole([
            "predict".as_ref(),
            "--model".as_ref(),
            model.as_os_str(),
            "--json".as_ref(),
            json.as_os_str(),
        ] as [&std::ffi::OsStr; 5]);
        assert_refused(&format!("predict: {case}"), &out, &model, needle, &[json]);
        let blob = s.write("model.blob", OLD);
        let out = systole([
            "firmware".as_ref(),
            "blob".as_ref(),
            "--model".as_ref(),
            model.as_os_str(),
            "-o".as_ref(),
            blob.as_os_str(),
        ] as [&std::ffi::OsStr; 6]);
        assert_refused(&format!("firmware blob: {case}"), &out, &model, needle, &[blob]);
        assert_eq!(s.listing(), ["model.blob", "model.safetensors", "out.json"], "{case}");
    }
}

// ---------------------------------------------------------------------------------------------
// Flags and files that were taken without complaint, or refused in the wrong words.

/// Runs `systole` with `args` (strings and paths alike).
fn run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    systole(args.iter().map(AsRef::as_ref))
}

/// `systole gemm --dtype DTYPE --a A --b B -o C` with `extra` flags.
fn gemm(dtype: &str, a: &Path, b: &Path, c: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["gemm".as_ref(), "--dtype".as_ref(), dtype.as_ref()];
    args.extend(["--a".as_ref(), a.as_os_str(), "--b".as_ref(), b.as_os_str()]);
    args.extend(["-o".as_ref(), c.as_os_str()]);
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    systole(args)
}

/// Exit status 2, nothing on stdout, one `error: ` line on stderr holding every needle.
#[track_caller]
fn assert_error_line(case: &str, out: &Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{case}: exit status; stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{case}: panic: {stderr}");
    assert!(out.stdout.is_empty(), "{case}: stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stderr.lines().count(), 1, "{case}: one line on stderr: {stderr:?}");
    assert!(stderr.starts_with("error: "), "{case}: {stderr:?}");
    for needle in needles {
        assert!(stderr.contains(needle), "{case}: stderr should say {needle:?}: {stderr:?}");
    }
}

/// `--clock-mhz 1e-320` was taken and printed `inf us`; `1e-300` printed a time of 300 digits.
#[test]
fn clock_flags_outside_cores_range_exit_2_naming_the_flag_and_the_range() {
    let s = Scratch::new();
    let a = s.write(
        "A.npy",
        [npy_header("{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), }"), vec![1; 4]]
            .concat(),
    );
    let c = s.write("C.npy", OLD);
    let gemm_at = |mhz: &str| gemm("int8", &a, &a, &c, &["--clock-mhz", mhz]);
    let range = "must be 0.001 to 10000 MHz";
    for mhz in ["1e-320", "1e-300", "0", "-1", "0.0009", "20000", "inf", "NaN"] {
        assert_error_line(
            &format!("gemm --clock-mhz {mhz}"),
            &gemm_at(mhz),
            &["--clock-mhz", range],
        );
        assert_eq!(fs::read(&c).unwrap(), OLD, "--clock-mhz {mhz}");
    }
    assert_error_line("gemm --clock-mhz fast", &gemm_at("fast"), &["--clock-mhz", "not a number"]);
    // The slowest clock allowed still prints a time of a few digits.
    let slowest = gemm_at("0.001");
    let stdout = String::from_utf8_lossy(&slowest.stdout);
    assert!(slowest.status.success(), "{}", String::from_utf8_lossy(&slowest.stderr));
    assert!(stdout.contains(" us at 0.001 MHz") && !stdout.contains("inf"), "{stdout}");

    let out = s.path("out");
    let out = out.to_str().unwrap();
    for (case, args) in [
        ("bench --fmax-mhz", vec!["bench", "--fmax-mhz", "1e-320"]),
        ("bench --clock-mhz", vec!["bench", "--clock-mhz", "-3"]),
        ("train", vec!["train", "--clock-mhz", "1e-300"]),
        ("hdl emit", vec!["hdl", "emit", "--dtype", "int8", "--clock-mhz", "0", "-o", out]),
        ("board build", vec!["board", "build", "icebreaker", "--clock-mhz", "1e9", "-o", out]),
        ("sim", vec!["sim", "--dtype", "int8", "--gemm", "2x2x2", "--clock-mhz", "1e-320"]),
    ] {
        let flag = args.iter().find(|a| a.ends_with("-mhz")).unwrap();
        assert_error_line(case, &run(&args), &[flag, range]);
    }
    assert_eq!(s.listing(), ["A.npy", "C.npy"]);
}

/// `=f4` and `=i1` (native byte order, which NumPy reads) were refused as "invalid type string".
#[test]
fn native_byte_order_npys_read_as_their_explicit_twins() {
    let dict =
        |descr: &str| format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 3), }}");
    let floats: Vec<u8> =
        [1.5f32, -2.0, 0.25, 3.0, 8.0, -0.5].iter().flat_map(|x| x.to_le_bytes()).collect();
    let ints = vec![1u8, 0xff, 3, 0x80, 5, 6];
    for (dtype, native, explicit, data) in
        [("bf16", "=f4", "<f4", &floats), ("int8", "=i1", "|i1", &ints)]
    {
        let s = Scratch::new();
        let mut outputs = Vec::new();
        for descr in [native, explicit] {
            let a = s.write("A.npy", [npy_header(&dict(descr)), data.clone()].concat());
            let b_dict = dict(descr).replace("(2, 3)", "(3, 2)");
            let b = s.write("B.npy", [npy_header(&b_dict), data.clone()].concat());
            let c = s.path("C.npy");
            let out = gemm(dtype, &a, &b, &c, &[]);
            assert!(out.status.success(), "{descr}: {}", String::from_utf8_lossy(&out.stderr));
            outputs.push(fs::read(&c).unwrap());
        }
        assert_eq!(outputs[0], outputs[1], "{native} and {explicit} give different products");
    }
}

/// A header with a key NumPy refuses was read as if it were not there; a missing key was
/// npyz's "dict is missing key".
#[test]
fn npy_headers_with_a_key_numpy_refuses_or_without_one_it_needs_exit_2_naming_the_key() {
    for (case, dict, key) in [
        (
            "an extra key",
            "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), 'extra': 1, }",
            "has a key 'extra' that NumPy refuses",
        ),
        ("no shape", "{'descr': '|i1', 'fortran_order': False, }", "has no 'shape' key"),
        ("no descr", "{'fortran_order': False, 'shape': (2, 2), }", "has no 'descr' key"),
    ] {
        let s = Scratch::new();
        let a = s.write("A.npy", [npy_header(dict), vec![1; 4]].concat());
        let c = s.write("C.npy", OLD);
        let out = gemm("int8", &a, &a, &c, &[]);
        assert_refused(case, &out, &a, key, &[c]);
    }
}

/// A model "trained in fp64", or holding NaN or infinite parameters, was taken by `predict`
/// and `firmware blob`.
#[test]
fn models_of_unknown_dtypes_or_with_non_finite_parameters_exit_2_naming_them() {
    let spec = MlpSpec { inputs: 64, hidden: heapless::Vec::new(), classes: 10 };
    let model = |dtype: &str| Model {
        net: spec.net().unwrap(),
        params: Params::init(&spec, 0),
        dtype: dtype.into(),
        seed: 0,
        feature_scale: 16.0,
        dataset: "digits".into(),
        accuracies: vec![],
    };
    let mut nan_weight = model("bf16");
    // Core's (fan_in 5, fan_out 3) is the file's [3, 5].
    nan_weight.params.layers[0].weight[5 * 10 + 3] = f32::NAN;
    let mut inf_bias = model("int8");
    inf_bias.params.layers[0].bias[7] = f32::INFINITY;
    for (case, m, needles) in [
        ("dtype fp64", model("fp64"), &["`dtype`", "\"fp64\"", "bf16, int8, f32"][..]),
        ("NaN weight", nan_weight, &["`layers.0.weight`", "element [3, 5] is NaN"][..]),
        ("infinite bias", inf_bias, &["`layers.0.bias`", "element [7] is inf"][..]),
    ] {
        let s = Scratch::new();
        let path = s.write("model.safetensors", m.to_safetensors().unwrap());
        let json = s.write("out.json", OLD);
        let blob = s.write("model.blob", OLD);
        let predict = run(&[
            "predict".as_ref(),
            "--model".as_ref(),
            path.as_os_str(),
            "--json".as_ref(),
            json.as_os_str(),
        ] as &[&std::ffi::OsStr]);
        let firmware = run(&[
            "firmware".as_ref(),
            "blob".as_ref(),
            "--model".as_ref(),
            path.as_os_str(),
            "-o".as_ref(),
            blob.as_os_str(),
        ] as &[&std::ffi::OsStr]);
        for (command, out, output) in [("predict", predict, &json), ("blob", firmware, &blob)] {
            let case = format!("{command}: {case}");
            assert_refused(&case, &out, &path, needles[0], std::slice::from_ref(output));
            assert_error_line(&case, &out, needles);
        }
    }
}

/// A run diverging from `--weight-decay` (lr x wd past 2 x (1 + momentum)) advised a lower
/// `--lr` alone.
#[test]
fn a_divergence_from_weight_decay_names_weight_decay() {
    let s = Scratch::new();
    let json = s.write("run.json", OLD);
    let out = run(&[
        "train".as_ref(),
        "--dtype".as_ref(),
        "f32".as_ref(),
        "--epochs".as_ref(),
        "5".as_ref(),
        "--lr".as_ref(),
        "0.5".as_ref(),
        "--weight-decay".as_ref(),
        "10".as_ref(),
        "--json".as_ref(),
        json.as_os_str(),
    ] as &[&std::ffi::OsStr]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    for needle in [
        "training diverged",
        "--lr 0.5 x --weight-decay 10 = 5 is at least 2 x (1 + --momentum 0.9) = 3.8",
        "lower --weight-decay below 7.6 (at this --lr) or --lr below 0.38",
    ] {
        assert!(stderr.contains(needle), "{needle:?}: {stderr}");
    }
    assert_eq!(fs::read(&json).unwrap(), OLD);
}

/// A 6.7 MB program ran for minutes with nothing on the screen. A program of 4096 words or more
/// now says, on stderr, what each step is doing, and the run still prints what it did.
#[test]
fn sim_of_a_long_program_file_says_what_it_is_doing() {
    let s = Scratch::new();
    // `conformance_top(2, Int8, ws)`'s accelerator, as cli_sim's tests build it.
    let array: Vec<&str> = ["sim"].into_iter().chain(crate::cli_sim::SMALL_2X2).collect();
    let gemm = s.path("gemm.bin");
    let mut args: Vec<&str> = array.clone();
    args.extend(["--gemm", "4x4x4", "--save-program", gemm.to_str().unwrap()]);
    let out = run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A short run says nothing of its steps (a first build of the model says how long it took).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("running"), "{stderr}");
    // The GEMM's body again and again, then its `Halt`.
    let words = fs::read(&gemm).unwrap();
    let (body, halt) = words.split_at(words.len() - 16);
    let repeats = 4096 / (body.len() / 16) + 1;
    let long = s.write("long.bin", [body.repeat(repeats), halt.to_vec()].concat());
    let instructions = repeats * body.len() / 16 + 1;
    let mut args: Vec<&str> = array.clone();
    args.extend(["--program", long.to_str().unwrap()]);
    let out = run(&args);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(&format!("program of {instructions} instructions")), "{stdout}");
    assert!(stdout.contains("identical: every memory"), "{stdout}");
    for step in [
        format!("reading and validating {} ({instructions} words)", long.display()),
        format!("cycle machine: running {instructions} instructions"),
        format!("rtl: running {instructions} instructions, each sent over the UART"),
    ] {
        assert!(stderr.contains(&step), "{step:?}: {stderr}");
    }
}

/// `train --dataset IMAGES,LABELS` of a small pair: 20 images of 2 x 2, two classes.
fn small_idx_pair() -> (Vec<u8>, Vec<u8>) {
    let mut images = vec![0, 0, 8, 3, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 2];
    images.extend((0..80u8).map(|p| p.wrapping_mul(37)));
    let mut labels = vec![0, 0, 8, 1, 0, 0, 0, 20];
    labels.extend((0..20u8).map(|i| i % 2));
    (images, labels)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// An IDX file of several gzip members (`cat a.gz b.gz`, read whole by gunzip and Python) was
/// refused as ending early: only the first member was read; bytes after the last member that
/// are not one were ignored. It now reads as the members' concatenation, and bytes after the
/// elements are refused alike, plain or gzipped, in a member or after the last.
#[test]
fn idx_files_of_several_gzip_members_read_whole_and_extra_bytes_are_refused_alike() {
    let s = Scratch::new();
    let (images, labels) = small_idx_pair();
    let l = s.write("l-labels-idx1-ubyte.gz", [gzip(&labels[..10]), gzip(&labels[10..])].concat());
    let train = |images: &Path| {
        let pair = format!("{},{}", images.display(), l.display());
        run(&["train", "--dtype", "f32", "--epochs", "1", "--hidden", "4", "--dataset", &pair])
    };
    let members = [gzip(&images[..7]), gzip(&images[7..50]), gzip(&images[50..])].concat();
    let out = train(&s.write("i-images-idx3-ubyte.gz", members));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let past = "elements: the file goes on past the 80 its header [20, 2, 2] gives";
    for (case, file) in [
        ("plain, a byte more", [&images[..], &[0]].concat()),
        ("a byte more inside the gzip", gzip(&[&images[..], &[0]].concat())),
        ("a member of one byte more", [gzip(&images), gzip(&[0])].concat()),
        ("a byte after the last member", [gzip(&images), vec![0]].concat()),
        ("text after the last member", [gzip(&images), b"trailing".to_vec()].concat()),
    ] {
        let path = s.write("i-images-idx3-ubyte.gz", file);
        assert_error_line(case, &train(&path), &[&path.display().to_string(), past]);
    }
}

/// `.npy` type strings without a byte order (`i1`, `f4`) and NumPy's other spellings of int8
/// and float32 (`b`, `int8`, `f`, `float32`, big-endian `>f4`) were refused as "invalid type
/// string" or as big-endian; NumPy reads each. Each now gives the product its usual spelling
/// (`|i1`, `<f4`) gives.
#[test]
fn npy_type_strings_numpy_reads_give_the_product_of_their_usual_spelling() {
    let dict =
        |descr: &str| format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 3), }}");
    let values = [1.5f32, -2.0, 0.25, 3.0, 8.0, -0.5];
    let le: Vec<u8> = values.iter().flat_map(|x| x.to_le_bytes()).collect();
    let be: Vec<u8> = values.iter().flat_map(|x| x.to_be_bytes()).collect();
    let ints = [1u8, 0xff, 3, 0x80, 5, 6];
    /// Type strings, each with its file's data.
    type Spellings<'a> = Vec<(&'a str, &'a [u8])>;
    let int8: Spellings = ["|i1", "i1", "<i1", "b", "int8"].map(|d| (d, &ints[..])).to_vec();
    let mut bf16: Spellings = ["<f4", "f4", "|f4", "f", "float32"].map(|d| (d, &le[..])).to_vec();
    bf16.push((">f4", &be));
    for (dtype, spellings) in [("int8", int8), ("bf16", bf16)] {
        let s = Scratch::new();
        let mut products = Vec::new();
        for (descr, data) in spellings {
            let a = s.write("A.npy", [npy_header(&dict(descr)), data.to_vec()].concat());
            let b_dict = dict(descr).replace("(2, 3)", "(3, 2)");
            let b = s.write("B.npy", [npy_header(&b_dict), data.to_vec()].concat());
            let c = s.path("C.npy");
            let out = gemm(dtype, &a, &b, &c, &[]);
            assert!(out.status.success(), "{descr}: {}", String::from_utf8_lossy(&out.stderr));
            products.push((descr, fs::read(&c).unwrap()));
        }
        for (descr, product) in &products[1..] {
            assert_eq!(product, &products[0].1, "{descr} and {} differ", products[0].0);
        }
    }
}

/// `--dataset 'my,data.csv'` was read as the IDX pair `my` and `data.csv`: `cannot read my`.
/// An existing file's name is now that file; when neither reading names files, both are named.
#[test]
fn a_dataset_file_with_a_comma_in_its_name_is_read_as_that_file() {
    let s = Scratch::new();
    let rows: Vec<String> = (0..20).map(|i| format!("{},{},{}", i % 3, i % 5, i % 2)).collect();
    let csv = s.write("my,data.csv", rows.join("\n") + "\n");
    let name = csv.to_str().unwrap();
    let out =
        run(&["train", "--dtype", "f32", "--epochs", "1", "--hidden", "4", "--dataset", name]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let missing = s.path("no,such.csv");
    let missing = missing.to_str().unwrap();
    let out = run(&["train", "--dataset", missing]);
    let images = format!("its images file {:?} does not exist", &missing[..missing.len() - 9]);
    assert_error_line("no such file or pair", &out, &["names no file", "IMAGES,LABELS", &images]);
}
