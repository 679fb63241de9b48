//! `systole bench` and the GPU paths of `systole train`, end to end.
//!
//! Where there is no CUDA GPU (this project's CI), the tests of GPU *execution* print one loud
//! `SKIPPED: no CUDA GPU (...)` line, with what was searched, and pass; everything else (the
//! bench's rows, cycles, checks, JSON and SVG, the one-line refusal of `--device gpu`, the
//! `--compare` fallback to the CPU) always runs. The CPU twins of the GPU kernels are tested in
//! the host crate (`cargo test -p systole-host gpu::`), which always runs them.

use std::fs;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use systole_core::compile::{compile_training, CompiledStep};
use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::layers::Net;
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Schedule};
use systole_tests::{assert_fails_naming, systole};

#[track_caller]
fn assert_ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systole failed ({:?}): {stderr}", out.status);
    String::from_utf8(out.stdout.clone()).expect("utf-8 stdout")
}

/// `systole bench ARGS --json DIR/bench.json`, parsed.
fn bench_json(dir: &Path, args: &[&str]) -> (Value, String) {
    let json = dir.join("bench.json");
    let mut all = vec!["bench"];
    all.extend(args);
    all.extend(["--json", json.to_str().unwrap()]);
    let stdout = assert_ok(&systole(&all));
    let text = fs::read_to_string(&json).expect("bench.json written");
    (serde_json::from_str(&text).expect("valid JSON"), stdout)
}

fn rows<'v>(report: &'v Value, workload: &str) -> Vec<&'v Value> {
    report["rows"].as_array().expect("rows").iter().filter(|r| r["workload"] == workload).collect()
}

fn machine<'v>(rows: &[&'v Value], prefix: &str, dtype: &str) -> &'v Value {
    rows.iter()
        .find(|r| r["machine"].as_str().unwrap().starts_with(prefix) && r["dtype"] == dtype)
        .unwrap_or_else(|| panic!("no {prefix} ({dtype}) row in {rows:#?}"))
}

/// Whether the bench found a GPU; prints the loud skip line when not.
fn gpu_present(report: &Value, what: &str) -> bool {
    if report["gpu"]["available"] == true {
        return true;
    }
    let reason = report["gpu"]["reason"].as_str().expect("a reason when there is no GPU");
    assert!(reason.contains("searched") || reason.contains("device"), "{reason}");
    println!("SKIPPED: no CUDA GPU ({reason}): {what} not run");
    false
}

#[test]
fn bench_gemm_suite_writes_rows_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("bench.svg");
    let args = [
        "--suite",
        "gemm",
        "--sizes",
        "64,128",
        "--rows",
        "8",
        "--cols",
        "8",
        "--clock-mhz",
        "200",
        "--plot",
    ];
    let mut all = args.to_vec();
    all.push(svg.to_str().unwrap());
    let (report, stdout) = bench_json(dir.path(), &all);

    // Squares 64 and 128, skinny 64x128x128: seven machines each.
    let all_rows = report["rows"].as_array().unwrap();
    assert_eq!(all_rows.len(), 3 * 7, "{stdout}");
    assert!(all_rows.iter().all(|r| r["suite"] == "gemm"));
    // The bench's default array: the decoupled machine, its cycles the timing model's.
    let config = ArrayConfig { clock_mhz: 200.0, ..ArrayConfig::new(8, 8, Dtype::Bf16) }
        .with_schedule(Schedule::Decoupled);
    for (m, k, n) in [(64, 64, 64), (128, 128, 128), (64, 128, 128)] {
        let shape = GemmShape { m, k, n };
        let (layout, _) = GemmLayout::packed(&config, &shape).unwrap();
        let cycles = GemmPlan::new(&config, shape, layout).unwrap().cycles();
        let rs = rows(&report, &format!("{m}x{k}x{n}"));
        assert_eq!(rs.len(), 7);
        let model = machine(&rs, "accelerator 8x8 ws decoupled @ 200 MHz", "bf16");
        assert_eq!(model["kind"], "model");
        assert_eq!(model["cycles"].as_u64(), Some(cycles), "the timing model's cycles");
        assert_eq!(
            model["check"], "cycles = cycle machine",
            "small shapes are checked on the cycle machine"
        );
        let seconds = model["seconds"].as_f64().unwrap();
        assert!((seconds - cycles as f64 / 200e6).abs() < 1e-12);
        let macs = shape.macs() as f64;
        let utilization = macs / (64.0 * cycles as f64);
        assert!((model["fraction_of_peak"].as_f64().unwrap() - utilization).abs() < 1e-9);
        assert!(model["macs_per_byte"].as_f64().unwrap() > 0.0);
        for sim in ["functional machine", "cycle machine"] {
            let r = machine(&rs, sim, "bf16");
            assert_eq!(r["kind"], "simulator");
            assert!(r["check"].as_str().unwrap().contains("exact"), "{r}");
            assert!(r["macs_per_s"].as_f64().unwrap() > 0.0);
        }
        let cpu = machine(&rs, "cpu f32 loop", "f32");
        assert_eq!(cpu["kind"], "measured");
        assert!(cpu["check"].as_str().unwrap().contains("within 1e-5"));
        assert!(cpu["fraction_of_peak"].as_f64().unwrap() > 0.0);
        let projected = machine(&rs, "projected 128x128 @ 940 MHz", "bf16");
        assert_eq!(projected["kind"], "projected");
        for (prefix, dtype) in [("gpu cuBLAS sgemm", "f32"), ("gpu cuBLAS gemm", "bf16")] {
            let g = machine(&rs, prefix, dtype);
            if report["gpu"]["available"] == true {
                assert_eq!(g["kind"], "measured");
                assert!(g["check"].as_str().unwrap().contains("within"), "{g}");
            } else {
                assert_eq!(g["kind"], "unavailable");
                assert!(g["seconds"].is_null());
            }
        }
    }
    assert_eq!(report["config"]["peak_macs_per_s"].as_f64(), Some(64.0 * 200e6));
    assert!(report["cpu_peak"]["assumption"].as_str().unwrap().contains("one thread"));
    // The table names every machine, aligned in one block per workload.
    assert!(stdout.contains("64x128x128") && stdout.contains("projected"), "{stdout}");

    let svg = fs::read_to_string(&svg).expect("SVG written");
    assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for text in ["throughput", "Roofline", "cpu f32 loop", "roof of accelerator 8x8"] {
        assert!(svg.contains(text), "the SVG should mention {text:?}");
    }
    assert!(svg.contains("<polyline") || svg.contains("<path"), "no lines drawn");
    // Only the two outputs, nothing left behind.
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["bench.json", "bench.svg"]);
}

/// A step's accelerator rows: the model's cycles and MACs are the compiled step's, checked on
/// the cycle machine, and both golden machines matched the reference executor.
#[track_caller]
fn assert_accelerator_rows(rs: &[&Value], step: &CompiledStep) {
    let model = machine(rs, "accelerator 16x16", "bf16");
    assert_eq!(model["cycles"].as_u64(), Some(step.cycles()));
    assert_eq!(model["macs"].as_u64(), Some(step.macs()));
    assert_eq!(model["check"], "cycles = cycle machine");
    for sim in ["functional machine", "cycle machine"] {
        assert_eq!(machine(rs, sim, "bf16")["check"], "bit-exact with the reference executor");
    }
}

#[test]
fn bench_train_suite_checks_every_machine_against_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let (report, stdout) = bench_json(dir.path(), &["--suite", "train", "--batches", "8,20"]);
    let spec = MlpSpec { inputs: 64, hidden: [64].iter().copied().collect(), classes: 10 };
    let graph = Graph::training(&spec, Sgd::DEFAULT).unwrap();
    let config = ArrayConfig::new(16, 16, Dtype::Bf16).with_schedule(Schedule::Decoupled);
    for batch in [8u32, 20] {
        let step = compile_training(&graph, &config, batch).unwrap();
        let rs = rows(&report, &format!("mlp 64-64-10 step, batch {batch}"));
        assert_eq!(rs.len(), 8, "{stdout}");
        assert_accelerator_rows(&rs, &step);
        let twin = machine(&rs, "cpu twin of the gpu step", "f32");
        assert!(twin["check"].as_str().unwrap().starts_with("loss within 1e-5"), "{twin}");
        assert_eq!(
            twin["macs"].as_u64(),
            Some(step.macs()),
            "the GPU plan does the compiled step's MACs"
        );
        for dtype in ["f32", "bf16"] {
            let g = machine(&rs, "gpu step, one CUDA graph", dtype);
            let want = if report["gpu"]["available"] == true { "measured" } else { "unavailable" };
            assert_eq!(g["kind"], want);
        }
        assert_eq!(machine(&rs, "projected 128x128", "bf16")["kind"], "projected");
    }
    // LeNet-5 at the smallest batch: the accelerator (model and golden machines), the CPU
    // reference, the twin checked against it, the GPU.
    let rs = rows(&report, "lenet step, batch 8");
    assert_eq!(rs.len(), 7, "{stdout}");
    let lenet = Graph::network_training(&Net::lenet(10).unwrap(), graph.sgd.unwrap()).unwrap();
    let step = compile_training(&lenet, &config, 8).unwrap();
    assert_accelerator_rows(&rs, &step);
    let twin = machine(&rs, "cpu twin of the gpu step", "f32");
    assert!(twin["check"].as_str().unwrap().starts_with("loss within 1e-5"), "{twin}");
    let reference = machine(&rs, "cpu f32 reference executor", "f32");
    assert_eq!(twin["macs"], reference["macs"]);
    // Forward: 8 x (784 x 25 x 6 + 100 x 150 x 16 + 400 x 120 + 120 x 84 + 84 x 10) MACs.
    let forward = 8 * (784 * 25 * 6 + 100 * 150 * 16 + 400 * 120 + 120 * 84 + 84 * 10);
    assert!(twin["macs"].as_u64().unwrap() > 2 * forward, "{twin}");
    for dtype in ["f32", "bf16"] {
        let g = machine(&rs, "gpu step, one CUDA graph", dtype);
        let want = if report["gpu"]["available"] == true { "measured" } else { "unavailable" };
        assert_eq!(g["kind"], want);
    }
}

#[test]
fn gpu_rows_are_measured_and_checked_when_there_is_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = bench_json(dir.path(), &["--sizes", "64,256", "--batches", "64"]);
    if !gpu_present(&report, "GEMMs and the training step on the GPU") {
        return;
    }
    for r in report["rows"].as_array().unwrap() {
        let name = r["machine"].as_str().unwrap();
        if name.starts_with("gpu") {
            assert_eq!(r["kind"], "measured", "{r}");
            assert!(r["seconds"].as_f64().unwrap() > 0.0);
            assert!(r["check"].as_str().unwrap().contains("within"), "{r}");
        }
    }
}

#[test]
fn bench_refuses_bad_flags_in_one_line() {
    assert_fails_naming(&systole(["bench", "--sizes", "0"]), &["--sizes"]);
    assert_fails_naming(&systole(["bench", "--batches", "70000"]), &["--batches"]);
    assert_fails_naming(&systole(["bench", "--rows", "0"]), &["rows"]);
    assert_fails_naming(&systole(["bench", "--fmax-mhz", "0"]), &["--fmax-mhz"]);
}

#[test]
fn bench_pytorch_rows_or_a_loud_skip() {
    let dir = tempfile::tempdir().unwrap();
    let (report, stdout) =
        bench_json(dir.path(), &["--suite", "train", "--batches", "8", "--pytorch"]);
    assert_eq!(report["pytorch"]["asked"], true);
    if report["pytorch"]["ran"] == true {
        for workload in ["mlp 64-64-10 step, batch 8", "lenet step, batch 8"] {
            let rs = rows(&report, workload);
            let torch = rs.iter().find(|r| r["machine"].as_str().unwrap().starts_with("pytorch"));
            let torch = torch.unwrap_or_else(|| panic!("no PyTorch row for {workload}: {rs:#?}"));
            assert!(torch["seconds"].as_f64().unwrap() > 0.0, "{torch}");
            assert_eq!(torch["macs"], rs[0]["macs"], "the same step's MACs");
        }
    } else {
        let reason = report["pytorch"]["reason"].as_str().unwrap();
        assert!(stdout.contains(&format!("SKIPPED: PyTorch rows: {reason}")), "{stdout}");
        println!("SKIPPED: PyTorch rows ({reason})");
    }
}

/// `systole train --device gpu` with `args` (`--json` added): the run's report where there is
/// a GPU; elsewhere the one-line refusal naming what was searched is checked, no output is
/// left behind, and the test says SKIPPED for `what`.
fn train_on_the_gpu(args: &[&str], what: &str) -> Option<Value> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut all = vec!["train", "--device", "gpu"];
    all.extend(args);
    all.extend(["--json", json.to_str().unwrap()]);
    let out = systole(all);
    if out.status.success() {
        return Some(serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap());
    }
    assert_fails_naming(&out, &["GPU unavailable", "searched"]);
    assert!(!json.exists(), "no half-written output");
    let reason = String::from_utf8_lossy(&out.stderr).trim().to_string();
    println!("SKIPPED: no CUDA GPU ({reason}): {what} not run");
    None
}

#[test]
fn train_on_the_gpu_or_one_line_saying_why_not() {
    // A GPU: its f32 curve against the f32 CPU reference's.
    let args = ["--dtype", "f32", "--epochs", "3"];
    if let Some(report) = train_on_the_gpu(&args, "training on the GPU") {
        assert_eq!(report["mode"], "gpu");
        assert!(report["max_loss_gap"].as_f64().unwrap() < 1e-3, "{report}");
    }
}

/// A network with convolutions and pooling trains on the GPU (im2col, cuBLAS, the image
/// kernels) beside the f32 CPU reference, or fails in one line because there is no GPU; never
/// with "dense layers only".
#[test]
fn train_a_cnn_on_the_gpu_or_one_line_saying_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("cnn.json");
    fs::write(
        &model,
        r#"{"input": [1, 8, 8], "layers": [
            {"kind": "conv2d", "in": 1, "out": 8, "kernel": 3, "stride": 1, "padding": 1},
            {"kind": "relu"}, {"kind": "maxpool2d", "kernel": 2, "stride": 2},
            {"kind": "conv2d", "in": 8, "out": 8, "kernel": 3, "padding": 1}, {"kind": "relu"},
            {"kind": "avgpool2d", "kernel": 2},
            {"kind": "flatten"}, {"kind": "dense", "in": 32, "out": 10}]}"#,
    )
    .unwrap();
    let args = ["--model", model.to_str().unwrap(), "--dtype", "bf16", "--epochs", "3"];
    if let Some(report) = train_on_the_gpu(&args, "training a CNN on the GPU") {
        assert_eq!(report["mode"], "gpu");
        assert!(report["model"].as_str().unwrap().contains("conv2d"), "{report}");
        // BF16 products against the f32 reference: close, not equal.
        assert!(report["max_loss_gap"].as_f64().unwrap() < 0.05, "{report}");
    }
}

#[test]
fn train_on_the_gpu_refuses_int8_before_looking_for_a_gpu() {
    assert_fails_naming(
        &systole(["train", "--device", "gpu", "--dtype", "int8"]),
        &["--device gpu", "int8"],
    );
}

#[test]
fn compare_trains_the_accelerator_beside_the_gpu_or_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("compare.json");
    let out = systole(["train", "--compare", "--epochs", "4", "--json", json.to_str().unwrap()]);
    let stdout = assert_ok(&out);
    let report: Value = serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["mode"], "compare");
    let curves = report["curves"].as_array().unwrap();
    assert_eq!(curves.len(), 2);
    assert!(curves[0]["machine"].as_str().unwrap().starts_with("accelerator bf16"));
    let other = curves[1]["machine"].as_str().unwrap();
    if other == "cpu f32 reference" {
        assert!(
            stdout.contains("no GPU, comparing with the f32 CPU reference instead"),
            "{stdout}"
        );
    } else {
        assert!(other.starts_with("gpu f32"), "{other}");
    }
    for c in curves {
        let points = c["points"].as_array().unwrap();
        assert_eq!(points.len(), 4);
        let first = points[0]["loss"].as_f64().unwrap();
        let last = points[3]["loss"].as_f64().unwrap();
        assert!(last < first / 2.0, "{c}");
        assert!(points[3]["test_accuracy"].as_f64().unwrap() > 0.9, "{c}");
    }
    // The issue's target: the accelerator's BF16 curve within 2% of the f32 curve per epoch.
    assert!(report["max_loss_gap"].as_f64().unwrap() < 0.02, "{report}");
    assert!(stdout.contains("loss gap"), "{stdout}");
}
