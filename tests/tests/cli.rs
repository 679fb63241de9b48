//! The `systole` binary, end to end: real `.npy` files in a temporary directory, results checked
//! against loops written here and the core's reference, errors checked for their one line.
//!
//! They run the binary `systole_tests::systole_binary` finds: run `cargo build -p systole-host`
//! (same profile) first.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Output;

use npyz::{Order, WriterBuilder};
use serde_json::Value;
use systole_core::reference;
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Bf16, Dataflow, Dtype, Schedule, BF16};
use systole_tests::{assert_bit_identical, assert_fails_naming, systole, SplitMix};

#[track_caller]
fn assert_success(out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systole failed ({:?}): {stderr}", out.status);
    assert!(stderr.is_empty(), "stderr not empty on success: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "one summary line expected: {stdout}");
    assert!(stdout.contains("cycles") && stdout.contains("utilization"), "summary: {stdout}");
}

// ---------------------------------------------------------------------------------------------
// .npy files in a scratch directory.

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch { dir: tempfile::tempdir().expect("temporary directory") }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `elems` (in `order`) with the dtype `type_str`; returns the path.
    fn npy<T: npyz::Serialize + Copy>(
        &self,
        name: &str,
        type_str: &str,
        shape: &[u64],
        order: Order,
        elems: &[T],
    ) -> PathBuf {
        let path = self.path(name);
        let dtype = npyz::DType::Plain(type_str.parse().expect("type string"));
        let file = File::create(&path).expect("create npy");
        let mut writer = npyz::WriteOptions::new()
            .dtype(dtype)
            .shape(shape)
            .order(order)
            .writer(file)
            .begin_nd()
            .expect("header");
        writer.extend(elems.iter().copied()).expect("data");
        writer.finish().expect("finish");
        path
    }

    fn i8_matrix(&self, name: &str, rows: u64, cols: u64, elems: &[i8]) -> PathBuf {
        self.npy(name, "|i1", &[rows, cols], Order::C, elems)
    }

    fn f32_matrix(&self, name: &str, rows: u64, cols: u64, elems: &[f32]) -> PathBuf {
        self.npy(name, "<f4", &[rows, cols], Order::C, elems)
    }

    /// Every file in the directory, by name, so stray temporaries show.
    fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.dir.path())
            .expect("read scratch dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// A `.npy` file read back: its type string, shape and elements.
fn read_npy<T: npyz::Deserialize>(path: &Path) -> (String, Vec<u64>, Vec<T>) {
    let file =
        BufReader::new(File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let npy = npyz::NpyFile::new(file).expect("valid npy");
    assert_eq!(npy.order(), Order::C, "outputs are C order");
    let (dtype, shape) = (npy.dtype().descr(), npy.shape().to_vec());
    (dtype, shape, npy.into_vec().expect("npy data"))
}

fn random_i8(rng: &mut SplitMix, len: usize) -> Vec<i8> {
    (0..len).map(|_| rng.next_u64() as i8).collect()
}

/// Uniform in [-4, 4), not rounded to bf16: the binary must round on load.
fn random_f32(rng: &mut SplitMix, len: usize) -> Vec<f32> {
    (0..len).map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0).collect()
}

/// The independent oracle for INT8: a plain i32 triple loop.
fn i32_gemm(a: &[i8], b: &[i8], m: usize, k: usize, n: usize) -> Vec<i32> {
    let mut c = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            for kk in 0..k {
                c[i * n + j] =
                    c[i * n + j].wrapping_add(a[i * k + kk] as i32 * b[kk * n + j] as i32);
            }
        }
    }
    c
}

/// A time in seconds read back from the CLI's JSON equals `want`: serde_json's float parsing
/// may land one unit in the last place away from the number the binary wrote.
fn assert_seconds(got: Option<f64>, want: f64) {
    let got = got.expect("a number of seconds");
    assert!((got - want).abs() <= want.abs() * 1e-14, "{got} s, want {want} s");
}

fn plan_for(config: &ArrayConfig, shape: GemmShape) -> GemmPlan {
    let (layout, _) = GemmLayout::packed(config, &shape).expect("layout");
    GemmPlan::new(config, shape, layout).expect("plan")
}

/// Runs an INT8 GEMM through the binary and checks C against the triple loop.
fn check_int8_gemm(machine: &str, (m, k, n): (usize, usize, usize), array: &[&str], seed: u64) {
    let s = Scratch::new();
    let mut rng = SplitMix(seed);
    let (a, b) = (random_i8(&mut rng, m * k), random_i8(&mut rng, k * n));
    let pa = s.i8_matrix("A.npy", m as u64, k as u64, &a);
    let pb = s.i8_matrix("B.npy", k as u64, n as u64, &b);
    let pc = s.path("C.npy");
    let mut args: Vec<&OsStr> = vec!["gemm".as_ref(), "--dtype".as_ref(), "int8".as_ref()];
    args.extend(["--machine", machine].map(OsStr::new));
    args.extend([
        "--a".as_ref(),
        pa.as_os_str(),
        "--b".as_ref(),
        pb.as_os_str(),
        "-o".as_ref(),
        pc.as_os_str(),
    ]);
    args.extend(array.iter().map(OsStr::new));
    assert_success(&systole(&args));
    let (dtype, shape, c) = read_npy::<i32>(&pc);
    assert_eq!((dtype.as_str(), shape.as_slice()), ("'<i4'", &[m as u64, n as u64][..]));
    let want = i32_gemm(&a, &b, m, k, n);
    if let Some(at) = want.iter().zip(&c).position(|(w, g)| w != g) {
        panic!(
            "{machine} machine, {m}x{k}x{n}: C[{}][{}] = {}, expected {}",
            at / n,
            at % n,
            c[at],
            want[at]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Results.

#[test]
fn int8_gemm_on_functional_machine_equals_triple_loop() {
    check_int8_gemm("functional", (37, 29, 23), &["--rows", "8", "--cols", "4"], 1);
    check_int8_gemm("functional", (5, 40, 3), &["--dataflow", "os"], 2);
}

#[test]
fn int8_gemm_on_cycle_machine_equals_triple_loop() {
    check_int8_gemm("cycle", (37, 29, 23), &["--rows", "8", "--cols", "4"], 3);
    check_int8_gemm("cycle", (5, 40, 3), &["--dataflow", "os", "--rows", "4", "--cols", "4"], 4);
}

#[test]
fn int8_gemm_on_decoupled_machines_equals_triple_loop() {
    for machine in ["functional", "cycle"] {
        let array = ["--rows", "8", "--cols", "4", "--schedule", "decoupled"];
        check_int8_gemm(machine, (37, 29, 23), &array, 6);
        let array = ["--dataflow", "os", "--rows", "4", "--cols", "4", "--schedule", "decoupled"];
        check_int8_gemm(machine, (5, 40, 3), &array, 7);
    }
}

#[test]
fn int8_gemm_300x70x45_on_8x8_cycle_machine() {
    check_int8_gemm("cycle", (300, 70, 45), &["--rows", "8", "--cols", "8"], 5);
}

/// Runs a BF16 GEMM through the binary and checks C bit for bit against the core's reference,
/// summed in the plan's K chunks.
fn check_bf16_gemm(dataflow: Dataflow, machine: &str, (m, k, n): (u32, u32, u32), seed: u64) {
    let s = Scratch::new();
    let mut rng = SplitMix(seed);
    let a = random_f32(&mut rng, (m * k) as usize);
    let b = random_f32(&mut rng, (k * n) as usize);
    let pa = s.f32_matrix("A.npy", m as u64, k as u64, &a);
    let pb = s.f32_matrix("B.npy", k as u64, n as u64, &b);
    let pc = s.path("C.npy");
    let flow = dataflow.short_name();
    let out = systole([
        "gemm".as_ref(),
        "--dtype".as_ref(),
        "bf16".as_ref(),
        "--machine".as_ref(),
        OsStr::new(machine),
        "--dataflow".as_ref(),
        OsStr::new(flow),
        "--rows".as_ref(),
        "4".as_ref(),
        "--cols".as_ref(),
        "8".as_ref(),
        "--a".as_ref(),
        pa.as_os_str(),
        "--b".as_ref(),
        pb.as_os_str(),
        "-o".as_ref(),
        pc.as_os_str(),
    ]);
    assert_success(&out);
    let (dtype, shape, c) = read_npy::<f32>(&pc);
    assert_eq!((dtype.as_str(), shape.as_slice()), ("'<f4'", &[m as u64, n as u64][..]));

    let config = ArrayConfig::new(4, 8, Dtype::Bf16).with_dataflow(dataflow);
    let chunk = plan_for(&config, GemmShape { m, k, n }).k_chunk();
    if dataflow == Dataflow::WeightStationary {
        assert_eq!(chunk, 4, "weight-stationary sums K in chunks of R");
    }
    let to_bf16 = |v: &[f32]| -> Vec<Bf16> { v.iter().map(|&x| Bf16::from_f32(x)).collect() };
    let want = reference::gemm::<BF16>(
        &to_bf16(&a),
        &to_bf16(&b),
        m as usize,
        k as usize,
        n as usize,
        chunk as usize,
    );
    let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
    assert_bit_identical(&format!("bf16 {flow} {machine} {m}x{k}x{n}"), &want, &got, n as usize);
}

#[test]
fn bf16_gemm_ws_equals_reference() {
    check_bf16_gemm(Dataflow::WeightStationary, "functional", (19, 23, 17), 6);
    check_bf16_gemm(Dataflow::WeightStationary, "cycle", (19, 23, 17), 7);
}

#[test]
fn bf16_gemm_os_equals_reference() {
    check_bf16_gemm(Dataflow::OutputStationary, "functional", (19, 23, 17), 8);
    check_bf16_gemm(Dataflow::OutputStationary, "cycle", (9, 30, 5), 9);
}

#[test]
fn fortran_order_input_gives_the_same_product() {
    let s = Scratch::new();
    let mut rng = SplitMix(10);
    let (m, k, n) = (6usize, 5usize, 4usize);
    let (a, b) = (random_i8(&mut rng, m * k), random_i8(&mut rng, k * n));
    let a_fortran: Vec<i8> = (0..m * k).map(|f| a[(f % m) * k + f / m]).collect();
    let pa = s.npy("A.npy", "|i1", &[m as u64, k as u64], Order::Fortran, &a_fortran);
    let pb = s.i8_matrix("B.npy", k as u64, n as u64, &b);
    let pc = s.path("C.npy");
    let args =
        [OsStr::new("gemm"), "--dtype".as_ref(), "int8".as_ref(), "--a".as_ref(), pa.as_os_str()];
    let out = systole(args.into_iter().chain([
        "--b".as_ref(),
        pb.as_os_str(),
        "-o".as_ref(),
        pc.as_os_str(),
    ]));
    assert_success(&out);
    assert_eq!(read_npy::<i32>(&pc).2, i32_gemm(&a, &b, m, k, n));
}

// ---------------------------------------------------------------------------------------------
// Statistics.

fn check_stats(machine: &str, dataflow: Dataflow, schedule: Schedule) {
    let s = Scratch::new();
    let mut rng = SplitMix(11);
    let (m, k, n) = (33u32, 21u32, 13u32);
    let pa = s.i8_matrix("A.npy", m as u64, k as u64, &random_i8(&mut rng, (m * k) as usize));
    let pb = s.i8_matrix("B.npy", k as u64, n as u64, &random_i8(&mut rng, (k * n) as usize));
    let (pc, ps) = (s.path("C.npy"), s.path("stats.json"));
    let flow = dataflow.short_name();
    let out = systole([
        OsStr::new("gemm"),
        "--dtype".as_ref(),
        "int8".as_ref(),
        "--machine".as_ref(),
        machine.as_ref(),
        "--dataflow".as_ref(),
        flow.as_ref(),
        "--rows".as_ref(),
        "8".as_ref(),
        "--cols".as_ref(),
        "4".as_ref(),
        "--clock-mhz".as_ref(),
        "250".as_ref(),
        "--schedule".as_ref(),
        schedule.name().as_ref(),
        "--a".as_ref(),
        pa.as_os_str(),
        "--b".as_ref(),
        pb.as_os_str(),
        "-o".as_ref(),
        pc.as_os_str(),
        "--stats".as_ref(),
        ps.as_os_str(),
    ]);
    assert_success(&out);
    let stats: Value =
        serde_json::from_slice(&fs::read(&ps).expect("stats written")).expect("stats are JSON");

    let config = ArrayConfig { clock_mhz: 250.0, ..ArrayConfig::new(8, 4, Dtype::Int8) }
        .with_dataflow(dataflow)
        .with_schedule(schedule);
    let plan = plan_for(&config, GemmShape { m, k, n });
    let source = match (machine, schedule) {
        ("cycle", _) => "cycle machine",
        (_, Schedule::Blocking) => "closed form",
        (_, Schedule::Decoupled) => "timing model",
    };
    let what = format!("{machine} {flow}: {stats}");
    assert_eq!(stats["cycles"], plan.cycles(), "{what}");
    assert_eq!(stats["cycles_source"], source, "{what}");
    assert_eq!(stats["macs"], (m * k * n) as u64, "{what}");
    assert_eq!(stats["instructions"], plan.instruction_count(), "{what}");
    for (field, want) in [("rows", 8), ("cols", 4), ("m", m), ("k", k), ("n", n)] {
        assert_eq!(stats[field], want, "{field}, {what}");
    }
    let fields = [
        ("dataflow", flow),
        ("dtype", "int8"),
        ("machine", machine),
        ("schedule", schedule.name()),
    ];
    for (field, want) in fields {
        assert_eq!(stats[field], want, "{field}, {what}");
    }
    let float = |field: &str| {
        stats[field].as_f64().unwrap_or_else(|| panic!("{field} is a number, {what}"))
    };
    assert_eq!(float("clock_mhz"), 250.0, "{what}");
    assert!((float("time_us") - plan.cycles() as f64 / 250.0).abs() < 1e-9, "{what}");
    assert!((float("utilization") - plan.utilization()).abs() < 1e-12, "{what}");
}

#[test]
fn stats_on_functional_machine_are_the_closed_form() {
    check_stats("functional", Dataflow::WeightStationary, Schedule::Blocking);
    check_stats("functional", Dataflow::OutputStationary, Schedule::Blocking);
}

#[test]
fn stats_on_cycle_machine_equal_the_closed_form() {
    check_stats("cycle", Dataflow::WeightStationary, Schedule::Blocking);
    check_stats("cycle", Dataflow::OutputStationary, Schedule::Blocking);
}

#[test]
fn stats_under_the_decoupled_schedule_are_the_timing_models_and_fewer() {
    for machine in ["functional", "cycle"] {
        check_stats(machine, Dataflow::WeightStationary, Schedule::Decoupled);
        check_stats(machine, Dataflow::OutputStationary, Schedule::Decoupled);
    }
    // The overlap is real: the same GEMM in a quarter fewer cycles than the blocking machine's
    // at least (27,349 against 38,248, docs/PERF.md).
    let shape = GemmShape { m: 200, k: 300, n: 100 };
    let blocking = ArrayConfig::new(16, 16, Dtype::Int8);
    let decoupled = blocking.with_schedule(Schedule::Decoupled);
    let (slow, fast) = (plan_for(&blocking, shape).cycles(), plan_for(&decoupled, shape).cycles());
    assert!(4 * fast < 3 * slow, "decoupled {fast} cycles against blocking {slow}");
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit status 2, one line naming the problem, no output file.

/// A scratch directory with a valid 3x4 `A.npy` and 4x2 `B.npy` of `dtype`.
fn valid_inputs(dtype: Dtype) -> Scratch {
    let s = Scratch::new();
    match dtype {
        Dtype::Int8 => {
            s.i8_matrix("A.npy", 3, 4, &[1; 12]);
            s.i8_matrix("B.npy", 4, 2, &[2; 8]);
        }
        Dtype::Bf16 => {
            s.f32_matrix("A.npy", 3, 4, &[1.0; 12]);
            s.f32_matrix("B.npy", 4, 2, &[2.0; 8]);
        }
    }
    s
}

/// Runs `gemm` on `A.npy` and `B.npy` of the scratch directory, to `C.npy`, with `extra` flags.
fn gemm_in(s: &Scratch, dtype: &str, extra: &[&str]) -> Output {
    let mut args = vec![OsStr::new("gemm"), "--dtype".as_ref(), dtype.as_ref()];
    let (pa, pb, pc) = (s.path("A.npy"), s.path("B.npy"), s.path("C.npy"));
    args.extend([
        "--a".as_ref(),
        pa.as_os_str(),
        "--b".as_ref(),
        pb.as_os_str(),
        "-o".as_ref(),
        pc.as_os_str(),
    ]);
    args.extend(extra.iter().map(OsStr::new));
    systole(&args)
}

#[track_caller]
fn assert_no_output(s: &Scratch) {
    let listing = s.listing();
    assert!(!listing.iter().any(|f| f != "A.npy" && f != "B.npy"), "stray files: {listing:?}");
}

#[test]
fn valid_inputs_succeed() {
    // The baseline the error tests below perturb.
    let s = valid_inputs(Dtype::Int8);
    assert_success(&gemm_in(&s, "int8", &[]));
    assert_eq!(read_npy::<i32>(&s.path("C.npy")).2, vec![8; 6]);
    let s = valid_inputs(Dtype::Bf16);
    assert_success(&gemm_in(&s, "bf16", &[]));
    assert_eq!(read_npy::<f32>(&s.path("C.npy")).2, vec![8.0; 6]);
}

#[test]
fn missing_input_is_named() {
    let s = valid_inputs(Dtype::Int8);
    fs::remove_file(s.path("B.npy")).unwrap();
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["B.npy"]);
    assert_eq!(s.listing(), ["A.npy"]);
}

#[test]
fn file_that_is_not_npy_is_named() {
    let s = valid_inputs(Dtype::Int8);
    fs::write(s.path("A.npy"), "m,k\n1,2\n").unwrap();
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["A.npy", "not a valid .npy"]);
    assert_no_output(&s);
}

#[test]
fn truncated_npy_is_named() {
    let s = valid_inputs(Dtype::Bf16);
    let bytes = fs::read(s.path("B.npy")).unwrap();
    fs::write(s.path("B.npy"), &bytes[..bytes.len() - 5]).unwrap();
    assert_fails_naming(&gemm_in(&s, "bf16", &[]), &["B.npy", "truncated", "(4, 2)"]);
    // Cut inside the header, too.
    fs::write(s.path("B.npy"), &bytes[..20]).unwrap();
    assert_fails_naming(&gemm_in(&s, "bf16", &[]), &["B.npy"]);
    assert_no_output(&s);
}

#[test]
fn float64_input_is_named_with_its_dtype() {
    let s = valid_inputs(Dtype::Bf16);
    s.npy("A.npy", "<f8", &[3, 4], Order::C, &[1.0f64; 12]);
    assert_fails_naming(&gemm_in(&s, "bf16", &[]), &["A.npy", "float64", "float32"]);
    assert_no_output(&s);
}

/// Big-endian float32 (`>f4`), which NumPy reads, was refused; its values are now read.
#[test]
fn big_endian_float32_is_read_as_its_values() {
    let s = valid_inputs(Dtype::Bf16);
    s.npy("B.npy", ">f4", &[4, 2], Order::C, &[2.0f32; 8]);
    assert_success(&gemm_in(&s, "bf16", &[]));
    assert_eq!(read_npy::<f32>(&s.path("C.npy")).2, vec![8.0; 6]);
}

#[test]
fn float32_input_with_dtype_int8_is_named() {
    let s = valid_inputs(Dtype::Bf16);
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["A.npy", "float32", "int8"]);
    assert_no_output(&s);
}

#[test]
fn three_dimensional_input_is_named() {
    let s = valid_inputs(Dtype::Int8);
    s.npy("B.npy", "|i1", &[2, 3, 4], Order::C, &[0i8; 24]);
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["B.npy", "(2, 3, 4)", "2-D"]);
    assert_no_output(&s);
}

#[test]
fn shape_mismatch_names_both_shapes() {
    let s = valid_inputs(Dtype::Int8);
    s.i8_matrix("B.npy", 5, 6, &[0; 30]);
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["A.npy", "3x4", "B.npy", "5x6"]);
    assert_no_output(&s);
}

#[test]
fn zero_size_dimension_is_named() {
    let s = valid_inputs(Dtype::Int8);
    s.i8_matrix("A.npy", 0, 4, &[]);
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["A.npy", "(0, 4)", "zero"]);
    assert_no_output(&s);
}

#[test]
fn invalid_array_gets_the_core_message() {
    let s = valid_inputs(Dtype::Int8);
    let core_message = |config: ArrayConfig| config.validate().expect_err("invalid").to_string();
    let base = ArrayConfig::new(16, 16, Dtype::Int8);
    let cases: [(&[&str], ArrayConfig); 4] = [
        (&["--rows", "0"], ArrayConfig { rows: 0, ..base }),
        (&["--rows", "300"], ArrayConfig { rows: 300, ..base }),
        (&["--spad-depth", "8"], ArrayConfig { spad_depth: 8, ..base }),
        (&["--clock-mhz", "0"], ArrayConfig { clock_mhz: 0.0, ..base }),
    ];
    for (flags, config) in cases {
        assert_fails_naming(&gemm_in(&s, "int8", flags), &[&core_message(config)]);
    }
    assert_no_output(&s);
}

#[test]
fn flag_parse_errors_exit_2() {
    let s = valid_inputs(Dtype::Int8);
    for (flags, needle) in [
        (&["--dataflow", "diagonal"][..], "diagonal"),
        (&["--rows", "-1"], "-1"),
        (&["--machine", "tpu"], "tpu"),
    ] {
        assert_fails_naming(&gemm_in(&s, "int8", flags), &[needle]);
    }
    assert_no_output(&s);
}

#[test]
fn failed_run_leaves_existing_output_byte_identical() {
    let s = valid_inputs(Dtype::Int8);
    let old = b"an earlier result that must survive".to_vec();
    fs::write(s.path("C.npy"), &old).unwrap();
    // Fails on the inputs, before anything is written.
    s.i8_matrix("B.npy", 5, 2, &[0; 10]);
    assert_fails_naming(&gemm_in(&s, "int8", &[]), &["B.npy"]);
    assert_eq!(fs::read(s.path("C.npy")).unwrap(), old);
    // Fails after C's temporary file exists: the stats file cannot be created.
    s.i8_matrix("B.npy", 4, 2, &[0; 8]);
    let stats = s.path("no-such-dir").join("stats.json");
    assert_fails_naming(
        &gemm_in(&s, "int8", &["--stats", stats.to_str().unwrap()]),
        &["stats.json"],
    );
    assert_eq!(fs::read(s.path("C.npy")).unwrap(), old);
    assert_eq!(s.listing(), ["A.npy", "B.npy", "C.npy"], "no temporary file left behind");
}

#[test]
fn successful_run_replaces_existing_output() {
    let s = valid_inputs(Dtype::Int8);
    fs::write(s.path("C.npy"), b"stale").unwrap();
    assert_success(&gemm_in(&s, "int8", &[]));
    assert_eq!(read_npy::<i32>(&s.path("C.npy")).2, vec![8; 6]);
    assert_eq!(s.listing(), ["A.npy", "B.npy", "C.npy"]);
}

// ---------------------------------------------------------------------------------------------
// --machine board: a board emulated on the far end of a pseudo-terminal.

/// Serves the host protocol on the device end of a pseudo-terminal with a golden cycle machine
/// built for `config`, until the host closes its end; returns the host end's path.
fn emulated_board(config: ArrayConfig, dram: usize) -> (String, std::thread::JoinHandle<()>) {
    emulated_board_of(config, dram, true)
}

/// As [`emulated_board`], a board whose memory commands move `MAX_DATA` bytes
/// (`large_requests`) or only `BASE_DATA`, as one built before RTL revision 5.
fn emulated_board_of(
    config: ArrayConfig,
    dram: usize,
    large_requests: bool,
) -> (String, std::thread::JoinHandle<()>) {
    use serialport::SerialPort;
    // The master end plays the board; the CLI opens the slave end by its /dev/pts path.
    let (device, slave) = serialport::TTYPort::pair().expect("a pseudo-terminal pair");
    let path = slave.name().expect("the pty's slave end has a name");
    let server = std::thread::spawn(move || {
        let _keep_open = slave; // keeps the pty alive between the CLI's opens
        let machine =
            systole_core::machine::golden(systole_core::machine::GoldenKind::Cycle, config, dram)
                .unwrap();
        let mut emulator = systole_core::link::emulator::Emulator::new(machine)
            .with_large_requests(large_requests);
        systole_boards::serial::serve(device, &mut emulator, &[]);
    });
    (path, server)
}

/// A GEMM on the SDRAM port: the same C, more cycles than on block RAM, and its line and stats
/// say which DRAM; the Verilated RTL runs it on the blocking schedule in the cycle machine's
/// cycles, and refuses the decoupled one by name.
#[test]
fn a_gemm_on_the_sdram_port_says_so_and_takes_longer() {
    let s = valid_inputs(Dtype::Int8);
    let stats = |name: &str, extra: &[&str]| -> (Value, String) {
        let json = s.path(name);
        let mut args = vec!["--machine", "cycle", "--clock-mhz", "50", "--stats"];
        args.push(json.to_str().unwrap());
        args.extend(extra);
        let out = gemm_in(&s, "int8", &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(read_npy::<i32>(&s.path("C.npy")).2, vec![8; 6]);
        let v = serde_json::from_reader(File::open(json).unwrap()).unwrap();
        (v, String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (row, row_line) = stats("row.json", &[]);
    let (sdram, sdram_line) = stats("sdram.json", &["--dram-port", "sdram"]);
    assert_eq!(
        (row["dram_port"].as_str(), sdram["dram_port"].as_str()),
        (Some("row"), Some("sdram"))
    );
    assert!(sdram["cycles"].as_u64() > row["cycles"].as_u64(), "{sdram} against {row}");
    assert!(sdram_line.contains("array, its DRAM the SDRAM, cycle machine"), "{sdram_line}");
    assert!(!row_line.contains("SDRAM"), "{row_line}");
    let rtl = ["--machine", "rtl", "--dram-port", "sdram", "--clock-mhz", "50"];
    let out = gemm_in(&s, "int8", &[&rtl[..], &["--schedule", "decoupled"]].concat());
    assert_fails_naming(&out, &["dram_port = sdram on the decoupled schedule", "blocking"]);
    let (cycle, _) = stats("blocking.json", &["--dram-port", "sdram", "--schedule", "blocking"]);
    let json = s.path("rtl.json");
    let mut args = [&rtl[..], &["--schedule", "blocking", "--stats"]].concat();
    args.push(json.to_str().unwrap());
    let out = gemm_in(&s, "int8", &args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(read_npy::<i32>(&s.path("C.npy")).2, vec![8; 6]);
    let rtl: Value = serde_json::from_reader(File::open(json).unwrap()).unwrap();
    assert_eq!(rtl["cycles"], cycle["cycles"], "{rtl} against {cycle}");
}

/// A board built before large requests says so in its identity, and the host moves each
/// operand in requests it takes: a 40 x 40 A (1,600 bytes) in seven, not one it refuses.
#[test]
fn a_board_from_before_large_requests_gets_requests_it_takes() {
    let config = ArrayConfig::new(16, 16, Dtype::Int8);
    let s = Scratch::new();
    s.i8_matrix("A.npy", 40, 40, &[1; 1600]);
    s.i8_matrix("B.npy", 40, 8, &[2; 320]);
    let (path, _server) = emulated_board_of(config, 1 << 16, false);
    let out =
        gemm_in(&s, "int8", &["--machine", "board", "--port", &path, "--schedule", "blocking"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(read_npy::<i32>(&s.path("C.npy")).2, vec![80; 320]);
}

#[test]
fn gemm_on_a_board_over_serial_equals_the_cycle_machine() {
    let config = ArrayConfig::new(16, 16, Dtype::Int8);
    let s = valid_inputs(Dtype::Int8);
    let (path, _server) = emulated_board(config, 1 << 16);
    let out = gemm_in(
        &s,
        "int8",
        &[
            "--machine",
            "board",
            "--port",
            &path,
            "--schedule",
            "blocking",
            "--stats",
            s.path("s.json").to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, shape, c) = read_npy::<i32>(&s.path("C.npy"));
    assert_eq!(shape, [3, 2]);
    assert_eq!(c, vec![8; 6]);
    let stats: Value = serde_json::from_reader(File::open(s.path("s.json")).unwrap()).unwrap();
    let plan = plan_for(&config, GemmShape { m: 3, k: 4, n: 2 });
    assert_eq!(stats["cycles"], plan.cycles(), "the cycle counter read back");
    assert_eq!(stats["cycles_source"], "the accelerator's cycle counter");
    // What crossed the link, at the link's baud rate, beside the compute: the run end to end.
    let link = &stats["link"];
    let (bytes_out, bytes_in) =
        (link["bytes_out"].as_u64().unwrap(), link["bytes_in"].as_u64().unwrap());
    assert!(bytes_out > 3 * 4 + 4 * 2 && bytes_in > 3 * 2 * 4, "{link}");
    assert_eq!(link["baud"], 115_200.0);
    let seconds = ((bytes_out + bytes_in) * 10) as f64 / 115_200.0;
    assert_seconds(link["seconds"].as_f64(), seconds);
    let compute = stats["time_us"].as_f64().unwrap() / 1e6;
    assert_seconds(link["end_to_end_seconds"].as_f64(), seconds + compute);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "the compute, then the link: {stdout}");
    assert!(lines[1].starts_with(&format!("host link: {bytes_out} bytes out and {bytes_in} in")));
}

#[test]
fn a_board_built_for_another_array_is_refused() {
    let s = valid_inputs(Dtype::Int8);
    let (path, _server) = emulated_board(ArrayConfig::new(4, 4, Dtype::Int8), 1 << 16);
    let out = gemm_in(&s, "int8", &["--machine", "board", "--port", &path]);
    assert_fails_naming(&out, &["has array 4x4", "needs 16x16", "pass --rows 4 --cols 4"]);
    // A board of the array asked for, built for the other schedule: the flag that matches it.
    let (path, _server) = emulated_board(ArrayConfig::new(16, 16, Dtype::Int8), 1 << 16);
    let out = gemm_in(&s, "int8", &["--machine", "board", "--port", &path]);
    assert_fails_naming(
        &out,
        &["has schedule blocking", "needs decoupled", "pass --schedule blocking"],
    );
    let out = gemm_in(&s, "int8", &["--machine", "board"]);
    assert_fails_naming(&out, &["--port"]);
}

#[test]
fn training_on_a_board_over_serial_equals_the_cycle_machine() {
    let (path, _server) = emulated_board(ArrayConfig::new(16, 16, Dtype::Bf16), 1 << 20);
    let s = Scratch::new();
    let run = |machine: &[&str], json: &Path| -> Value {
        let mut args = vec!["train", "--epochs", "2", "--hidden", "12", "--json"];
        args.push(json.to_str().unwrap());
        args.extend(machine);
        let out = systole(&args);
        assert!(out.status.success(), "{:?}: {}", machine, String::from_utf8_lossy(&out.stderr));
        serde_json::from_reader(File::open(json).unwrap()).unwrap()
    };
    let cycle = run(&["--machine", "cycle", "--schedule", "blocking"], &s.path("cycle.json"));
    let board = run(
        &["--machine", "board", "--port", &path, "--schedule", "blocking"],
        &s.path("board.json"),
    );
    assert_eq!(board["config"]["machine"], "board");
    assert_eq!(cycle["epochs"].as_array().unwrap().len(), 2);
    // Each board epoch says what its steps sent and received over the link, at its baud rate,
    // and the steps end to end; the cycle machine has no link.
    let mut board_epochs = board["epochs"].clone();
    for epoch in board_epochs.as_array_mut().unwrap() {
        let link = epoch.as_object_mut().unwrap().remove("link").expect("a link object");
        let bytes = link["bytes_out"].as_u64().unwrap() + link["bytes_in"].as_u64().unwrap();
        // At least every training row's 64 BF16 features, once an epoch.
        assert!(link["bytes_out"].as_u64().unwrap() > 1438 * 64 * 2, "the batches: {link}");
        assert_eq!(link["baud"], 115_200.0);
        assert_seconds(link["seconds"].as_f64(), (bytes * 10) as f64 / 115_200.0);
        let compute = epoch["cycles"].as_u64().unwrap() as f64 / 100e6;
        let link_seconds = link["seconds"].as_f64().unwrap();
        assert_seconds(link["end_to_end_seconds"].as_f64(), link_seconds + compute);
    }
    assert!(cycle["epochs"][0].get("link").is_none());
    // Every epoch's loss, accuracies and cycles, bit for bit: one semantics on both machines.
    assert_eq!(board_epochs, cycle["epochs"]);
    assert_eq!(board["step"], cycle["step"]);
    assert_eq!(board["test_accuracy_bf16"], cycle["test_accuracy_bf16"]);
    assert!(board["test_accuracy_bf16"].as_f64().unwrap() > 0.3, "it learns: {}", board);
}

#[test]
fn bench_runs_the_gemms_that_fit_an_attached_board_there() {
    // A board running the iCEBreaker's default build (its committed report describes it).
    let board = systole_boards::board::ICEBREAKER;
    let (config, dram) = (board.default_config(), board.memories.dram_bytes);
    let (path, _server) = emulated_board(config, dram);
    let s = Scratch::new();
    let json = s.path("bench.json");
    let out = systole([
        "bench",
        "--machine",
        "board",
        "--board",
        "icebreaker",
        "--port",
        &path,
        "--suite",
        "gemm",
        "--sizes",
        "4,8,40",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_reader(File::open(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let board_rows = |workload: &str| -> Vec<&Value> {
        rows.iter()
            .filter(|r| {
                let machine = r["machine"].as_str().unwrap();
                r["workload"] == workload
                    && machine.starts_with("board")
                    && !machine.starts_with("board end to end")
            })
            .collect()
    };
    for n in [4u32, 8] {
        let found = board_rows(&format!("{n}x{n}x{n}"));
        assert_eq!(found.len(), 2, "a counted and a wall-clock row for {n}: {found:?}");
        for r in &found {
            assert_eq!(r["kind"], "measured", "{r}");
            assert!(r["check"].as_str().unwrap().contains("exact"), "{r}");
            assert!(r["seconds"].as_f64().unwrap() > 0.0, "{r}");
        }
        let plan = plan_for(&config, GemmShape { m: n, k: n, n });
        assert_eq!(found[0]["cycles"], plan.cycles(), "the counter read back");
        let at_clock = plan.cycles() as f64 / (config.clock_mhz * 1e6);
        assert_seconds(found[0]["seconds"].as_f64(), at_clock);
    }
    // 40 x 40 x 40 needs more DRAM than the board has (A, B and the int32 C): said so.
    let (_, need) = GemmLayout::packed(&config, &GemmShape { m: 40, k: 40, n: 40 }).unwrap();
    assert!(need > dram, "{need} bytes");
    let big = board_rows("40x40x40");
    assert_eq!(big.len(), 2);
    for r in big {
        assert_eq!(r["kind"], "skipped", "{r}");
        let want = format!("needs {need} bytes of DRAM, the board has {dram}");
        assert!(r["note"].as_str().unwrap().contains(&want), "{r}");
    }
}

/// `bench --show` refuses a missing file and a JSON file of another kind, each by its path.
#[test]
fn bench_show_names_what_it_cannot_show() {
    let s = Scratch::new();
    let missing = s.path("missing.json");
    let out = systole(["bench", "--show", missing.to_str().unwrap()]);
    assert_fails_naming(&out, &["missing.json"]);
    let other = s.path("other.json");
    std::fs::write(&other, "{\"epochs\": []}").unwrap();
    let out = systole(["bench", "--show", other.to_str().unwrap()]);
    assert_fails_naming(&out, &["other.json: not a report of `systole bench --json`"]);
}

#[test]
fn bench_port_needs_a_board_build() {
    let out = systole(["bench", "--port", "/dev/null", "--suite", "gemm", "--sizes", "4"]);
    assert_fails_naming(&out, &["--port needs --machine board"]);
}

/// Each board has a default build per dtype, each with its committed measured report: `bench
/// --machine board --dtype D` times that build's exact cycles at the fmax its report records, a
/// board no BF16 array fits says so (for `bench` and for `board build`, before synthesis), and a
/// `--report` in another dtype than asked is refused.
#[test]
fn each_dtype_has_its_own_measured_board_build() {
    let s = Scratch::new();
    let mut seen = 0;
    for board in systole_boards::board::BOARDS {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let (name, d) = (board.name, dtype.name());
            let Some(config) = board.preset_config(dtype) else {
                let out = systole(["bench", "--machine", "board", "--board", name, "--dtype", d]);
                assert_fails_naming(&out, &[&format!("no {d} array fits board {name}")]);
                let dir = s.path(&format!("{name}-{d}"));
                let out =
                    systole(["board", "build", name, "--dtype", d, "-o", dir.to_str().unwrap()]);
                assert_fails_naming(&out, &["pass both --rows and --cols"]);
                assert!(!dir.exists(), "nothing written for {name} {d}");
                continue;
            };
            let json = s.path(&format!("{name}-{d}.json"));
            let args = ["bench", "--machine", "board", "--board", name, "--dtype", d];
            let more = ["--suite", "gemm", "--sizes", "8", "--json", json.to_str().unwrap()];
            let out = systole(args.iter().chain(&more));
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let report: Value = serde_json::from_reader(File::open(&json).unwrap()).unwrap();
            let c = &report["config"];
            assert_eq!(
                (c["rows"].as_u64(), c["cols"].as_u64()),
                (Some(config.rows.into()), Some(config.cols.into()))
            );
            assert_eq!(
                (c["dtype"].as_str(), c["clock_mhz"].as_f64()),
                (Some(d), Some(config.clock_mhz))
            );
            let measured = board.preset(dtype).unwrap().measured.unwrap();
            let fmax = systole_boards::Report::from_json(measured).unwrap().fmax_mhz;
            assert_eq!(c["fmax_mhz"].as_f64(), Some(fmax), "{name} {d}");
            let cycles = plan_for(&config, GemmShape { m: 8, k: 8, n: 8 }).cycles();
            let at_fmax = report["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| {
                    r["workload"] == "8x8x8" && r["note"] == "at the board's fmax; compute only"
                })
                .unwrap_or_else(|| panic!("{name} {d}: no row at the fmax"));
            assert_eq!(at_fmax["cycles"], cycles, "{name} {d}");
            assert_seconds(at_fmax["seconds"].as_f64(), cycles as f64 / (fmax * 1e6));
            // And end to end over the board's UART, at the baud its build runs it.
            let built = systole_boards::Report::from_json(measured).unwrap().built.unwrap();
            let baud = built.knobs.clock_mhz * 1e6 / built.uart_divisor as f64;
            let label = format!("board end to end, UART at {baud:.0} baud");
            let end_to_end = report["rows"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["workload"] == "8x8x8" && r["machine"] == label.as_str())
                .unwrap_or_else(|| panic!("{name} {d}: no row {label}"));
            let link = (end_to_end["bytes"].as_u64().unwrap() * 10) as f64 / baud;
            assert_seconds(
                end_to_end["seconds"].as_f64(),
                link + cycles as f64 / (config.clock_mhz * 1e6),
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 8, "four INT8 builds and four BF16");
    // The ULX3S 85F's INT8 report is not a BF16 build.
    let int8 = s.path("ulx3s-int8.json");
    fs::write(&int8, systole_boards::board::ULX3S_85F.int8.measured.unwrap()).unwrap();
    let args = ["bench", "--machine", "board", "--board", "ulx3s", "--dtype", "bf16", "--report"];
    let out = systole(args.iter().copied().chain([int8.to_str().unwrap()]));
    assert_fails_naming(&out, &["is a build in int8, not bf16"]);
}

/// A board's figures are priced on the memory and link it has: a GEMM larger than the board's
/// DRAM is marked as not running, with both sizes, instead of timed on a memory it lacks; one
/// that fits is timed compute only and end to end over the board's UART.
#[test]
fn bench_prices_a_board_on_its_own_memory_and_link() {
    let s = Scratch::new();
    let svg = s.path("bench.svg");
    let args = ["bench", "--machine", "board", "--board", "ulx3s", "--suite", "gemm"];
    let plot = ["--sizes", "64,256", "--plot", svg.to_str().unwrap()];
    let out = systole(args.iter().copied().chain(plot));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dram = systole_boards::board::ULX3S_85F.memories.dram_bytes;
    let needs =
        format!("needs 393216 bytes of DRAM; the board has {dram}: does not run in one piece");
    assert!(stdout.contains(&needs), "{stdout}");
    let big = stdout.lines().find(|l| l.starts_with("256x256x256  accelerator")).unwrap();
    assert!(big.contains("skipped"), "{big}");
    assert!(stdout.contains("64x64x64     board end to end, UART at 115207 baud"), "{stdout}");
    assert!(stdout.contains("square; compute only"), "{stdout}");
    // What the block RAM cannot hold runs on the board's SDRAM, rebuilt, and end to end.
    let on_sdram = stdout
        .lines()
        .find(|l| l.starts_with("256x256x256  accelerator 18x8 ws decoupled @ 50 MHz, SDRAM"));
    assert!(on_sdram.is_some_and(|l| l.contains(" model ")), "{stdout}");
    assert!(stdout.contains("256x256x256  board end to end, on its SDRAM: UART at 2000000 baud"));
    // The roofline has the SDRAM's roof and the link's, as built and on the fast link.
    let svg = std::fs::read_to_string(svg).unwrap();
    for roof in [
        "roof of accelerator 18x8 ws decoupled @ 50 MHz, SDRAM (int8)",
        "roof of board end to end, UART at 115207 baud (int8)",
        "roof of board end to end, on its SDRAM: UART at 2000000 baud (int8)",
    ] {
        assert!(svg.contains(roof), "{roof}");
    }
}

/// The ULX3S's PLL makes 12.5 MHz when asked for 12 (its 25 MHz input cannot give 12 within the
/// PLL's limits): the build is refused before synthesis, naming the frequency it can make, and
/// writes no bitstream, rather than run the board 4% faster than its UART divisor and timing
/// report assume.
#[test]
fn board_build_refuses_a_clock_its_pll_cannot_make() {
    let s = Scratch::new();
    let out_dir = s.path("ulx3s");
    let dir = out_dir.to_str().unwrap();
    let out = systole(["board", "build", "ulx3s", "--clock-mhz", "12", "-o", dir]);
    assert_fails_naming(&out, &["cannot make 12 MHz", "--clock-mhz 12.5"]);
    assert!(!out_dir.join("systole.bit").exists() && !out_dir.join("report.json").exists());
}

/// Each board forms the PEs' products only where its flow can: the iCEBreaker's Yosys has no
/// Booth pass, the Alchitry Cu has no multipliers and only the UP5K's DSPs have the dual 8 x 8
/// mode, so asking otherwise is refused before synthesis, and nothing is written.
#[test]
fn board_build_refuses_pe_products_the_board_cannot_make() {
    let s = Scratch::new();
    for (board, asked, only) in [
        ("icebreaker", "logic", "only as dsp or dsp-pairs"),
        ("alchitry-cu", "dsp", "no multipliers"),
        ("ulx3s", "dsp-pairs", "dual 8 x 8 mode"),
    ] {
        let out_dir = s.path(board);
        let dir = out_dir.to_str().unwrap();
        let out = systole(["board", "build", board, "--pe-products", asked, "-o", dir]);
        assert_fails_naming(&out, &[&format!("--pe-products {asked}: {board}"), only]);
        assert!(!out_dir.exists(), "{board}: nothing written");
    }
}

/// PEs stage their f32 add (`--pe-stages 3`) only in BF16 weight-stationary blocking builds:
/// the 85F's INT8 default (decoupled) is refused before synthesis, naming why, and nothing is
/// written.
#[test]
fn board_build_refuses_staged_pe_adds_outside_bf16() {
    let s = Scratch::new();
    let out_dir = s.path("ulx3s");
    let dir = out_dir.to_str().unwrap();
    let out = systole(["board", "build", "ulx3s", "--pe-stages", "3", "-o", dir]);
    assert_fails_naming(
        &out,
        &["pe_stages = 3", "only BF16 weight-stationary PEs of the blocking schedule", "int8"],
    );
    assert!(!out_dir.exists(), "nothing written");
}

/// `board blocks` counts the cells of the netlist a build wrote by block; a directory without
/// one, or a file that is not Yosys' JSON, is refused naming the file. (scripts/check runs it on
/// the small boards' real builds.)
#[test]
fn board_blocks_counts_a_netlist_and_refuses_what_is_not_one() {
    let s = Scratch::new();
    let dir = s.path("build");
    fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap();
    assert_fails_naming(&systole(["board", "blocks", d]), &["netlist.json", "board build"]);
    let netlist = dir.join("netlist.json");
    fs::write(&netlist, "{ not json").unwrap();
    assert_fails_naming(&systole(["board", "blocks", d]), &["netlist.json", "not Yosys JSON"]);
    let cells = r#"{"top.seq.a": {"type": "SB_LUT4"}, "top.seq.b": {"type": "SB_CARRY"},
        "top.fifo.c": {"type": "SB_DFFE"}, "top.fifo.d": {"type": "SB_LUT4"},
        "top.fifo.e": {"type": "SB_LUT4"}, "led": {"type": "SB_LUT4"}}"#;
    let json = format!(
        r#"{{"modules": {{"board_top": {{"attributes": {{"top": "1"}}, "cells": {cells}}}}}}}"#
    );
    fs::write(&netlist, json).unwrap();
    let out = systole(["board", "blocks", d]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[1], ["fifo", "2", "0", "1", "0", "0", "0"], "{text}");
    // Equal in LUTs: by name.
    assert_eq!(rows[2], ["(wrapper)", "1", "0", "0", "0", "0", "0"], "{text}");
    assert_eq!(rows[3], ["seq", "1", "1", "0", "0", "0", "0"], "{text}");
    assert_eq!(rows[4], ["total", "4", "1", "1", "0", "0", "0"], "{text}");
}

/// `board program` loads a bitstream only beside the report of the build that wrote it: a build
/// that missed timing needs `--force`, and a bitstream that is not the one its report describes
/// is never loaded. A stand-in `iceprog` on PATH records what it was asked to load.
#[test]
fn board_program_loads_only_the_bitstream_its_report_vouches_for() {
    use systole_boards::report::{Bitstream, Report};
    let s = Scratch::new();
    let bin_dir = s.path("bin");
    fs::create_dir(&bin_dir).unwrap();
    let loaded = s.path("loaded.txt");
    let iceprog = bin_dir.join("iceprog");
    fs::write(&iceprog, format!("#!/bin/sh\necho \"$@\" >> '{}'\n", loaded.display())).unwrap();
    fs::set_permissions(&iceprog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let program = |dir: &Path, force: bool| {
        let mut args = vec!["board", "program", "icebreaker", dir.to_str().unwrap()];
        if force {
            args.push("--force");
        }
        std::process::Command::new(systole_tests::systole_binary())
            .args(&args)
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let build_dir = |name: &str, timing_met: bool| {
        let dir = s.path(name);
        fs::create_dir(&dir).unwrap();
        let bits = format!("bitstream of {name}").into_bytes();
        fs::write(dir.join("systole.bin"), &bits).unwrap();
        let report = serde_json::json!({
            "board": "icebreaker", "device": "--up5k --package sg48",
            "luts": 4920, "luts_available": 5280, "flip_flops": 1097, "bram": 24,
            "bram_available": 30, "spram": 4, "dsps": 5, "dsps_available": 8,
            "fmax_mhz": if timing_met { 8.97 } else { 5.5 }, "target_mhz": 6.0,
            "timing_met": timing_met,
            "bitstream": Bitstream::of("systole.bin", &bits),
        });
        let report: Report = serde_json::from_value(report).unwrap();
        fs::write(dir.join("report.json"), serde_json::to_string_pretty(&report).unwrap()).unwrap();
        dir
    };
    let loads = || fs::read_to_string(&loaded).unwrap_or_default();

    let good = build_dir("good", true);
    let out = program(&good, false);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(loads(), format!("{}\n", good.join("systole.bin").display()));

    let slow = build_dir("slow", false);
    assert_fails_naming(
        &program(&slow, false),
        &["missed timing (5.50 MHz achieved for 6 MHz)", "--force"],
    );
    assert_eq!(loads().lines().count(), 1, "a build that missed timing was loaded unforced");
    assert!(program(&slow, true).status.success());
    assert_eq!(loads().lines().last(), Some(slow.join("systole.bin").to_str().unwrap()));

    fs::write(good.join("systole.bin"), b"another bitstream").unwrap();
    for force in [false, true] {
        assert_fails_naming(&program(&good, force), &["is not the bitstream", "report.json"]);
    }
    assert_fails_naming(
        &program(&s.path("nothing"), false),
        &["is not the output of `systole board build`"],
    );
    assert_eq!(loads().lines().count(), 2);
}

// ---------------------------------------------------------------------------------------------
// systole firmware blob

#[test]
fn firmware_blob_from_a_saved_model_parses_for_its_array() {
    let s = Scratch::new();
    let model = s.path("m.safetensors");
    let trained =
        systole(["train", "--epochs", "1", "--hidden", "16", "--save", model.to_str().unwrap()]);
    assert!(trained.status.success(), "{}", String::from_utf8_lossy(&trained.stderr));
    for (dtype, want) in [("int8", Dtype::Int8), ("bf16", Dtype::Bf16)] {
        let blob = s.path(&format!("m-{dtype}.blob"));
        let out = systole([
            "firmware",
            "blob",
            "--model",
            model.to_str().unwrap(),
            "--dtype",
            dtype,
            "--rows",
            "4",
            "--cols",
            "8",
            "-o",
            blob.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("inference of a 64-16-10 MLP"));
        let bytes = fs::read(&blob).unwrap();
        let parsed = systole_core::blob::Blob::parse(&bytes).expect("the written blob parses");
        let c = parsed.config();
        assert_eq!((c.rows, c.cols, c.dtype), (4, 8, want));
        assert_eq!(parsed.input_len(), 64, "one digit of 64 pixels");
        assert_eq!(parsed.logits_len(), 10);
        assert!(parsed.program_words() > 0);
    }
    let out = systole([
        "firmware",
        "blob",
        "--model",
        s.path("missing.safetensors").to_str().unwrap(),
        "-o",
        s.path("x.blob").to_str().unwrap(),
    ]);
    assert_fails_naming(&out, &["missing.safetensors"]);
    assert!(!s.path("x.blob").exists(), "no blob from a failed run");
}

/// An image model's blob: the image and its padding in the header, the input buffer the padded
/// images; a pooled model's INT8 blob for lanes without their comparator is refused naming what
/// the array lacks.
#[test]
fn firmware_blob_of_an_image_model() {
    let s = Scratch::new();
    let net = s.path("cnn.json");
    fs::write(
        &net,
        r#"{"input": [1, 8, 8], "layers": [
            {"kind": "conv2d", "in": 1, "out": 4, "kernel": 3, "padding": 1}, {"kind": "relu"},
            {"kind": "conv2d", "in": 4, "out": 4, "kernel": 3, "padding": 1}, {"kind": "relu"},
            {"kind": "flatten"}, {"kind": "dense", "in": 256, "out": 10}]}"#,
    )
    .unwrap();
    let pooled = s.path("pooled.json");
    fs::write(
        &pooled,
        r#"{"input": [1, 8, 8], "layers": [
            {"kind": "conv2d", "in": 1, "out": 4, "kernel": 3, "padding": 1}, {"kind": "relu"},
            {"kind": "maxpool2d", "kernel": 2},
            {"kind": "flatten"}, {"kind": "dense", "in": 64, "out": 10}]}"#,
    )
    .unwrap();
    for (json, name) in [(&net, "cnn"), (&pooled, "pooled")] {
        let model = s.path(&format!("{name}.safetensors"));
        let (json, model) = (json.to_str().unwrap(), model.to_str().unwrap());
        let trained = systole(["train", "--model", json, "--epochs", "1", "--save", model]);
        assert!(trained.status.success(), "{}", String::from_utf8_lossy(&trained.stderr));
    }
    let blob = |model: &str, dtype: &str, more: &[&str]| {
        let out = s.path(&format!("{model}-{dtype}.blob"));
        let model = s.path(&format!("{model}.safetensors"));
        let (model, path) = (model.to_str().unwrap(), out.to_str().unwrap());
        let args = ["firmware", "blob", "--model", model, "--dtype", dtype, "--batch", "2"];
        let run = systole(args.iter().chain(more).chain(&["-o", path]));
        (run, out)
    };
    for (model, dtype) in [("cnn", "int8"), ("cnn", "bf16"), ("pooled", "bf16"), ("pooled", "int8")]
    {
        let (run, path) = blob(model, dtype, &[]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(stdout.contains("inference of a 1 x 8 x 8 conv2d relu"), "{stdout}");
        let bytes = fs::read(&path).unwrap();
        let parsed = systole_core::blob::Blob::parse(&bytes).expect("the written blob parses");
        let image = systole_core::blob::Image { c: 1, h: 8, w: 8, padding: 1 };
        assert_eq!(parsed.image, Some(image), "{model} {dtype}");
        assert_eq!((parsed.input_len(), parsed.input_elements()), (2 * 64, 2 * 100));
    }
    // For a board's default build: its array, memories and clock; refused where the board
    // has no such build or too little DRAM.
    let (run, path) = blob("pooled", "bf16", &["--board", "ulx3s"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let bytes = fs::read(&path).unwrap();
    let target = systole_core::blob::Blob::parse(&bytes).unwrap().target;
    let ulx3s = systole_boards::board::by_name("ulx3s").unwrap();
    assert_eq!(target.config, ulx3s.preset_config(Dtype::Bf16).unwrap());
    assert!(target.dram_bytes as usize <= ulx3s.memories.dram_bytes);
    let (run, _) = blob("pooled", "bf16", &["--board", "ulx3s-25f"]);
    assert_fails_naming(&run, &["--board ulx3s-25f", "bytes of DRAM", "has 4096"]);
    fs::remove_file(s.path("pooled-int8.blob")).unwrap();
    let (run, path) = blob("pooled", "int8", &["--int8-max", "false"]);
    let why = "max pooling on an INT8 array whose accumulator lanes have no comparator";
    assert_fails_naming(&run, &["pooled.safetensors", why, "--dtype bf16"]);
    assert!(!path.exists(), "no blob from a refused model");
}
