//! The digits model blobs that `firmware/pico-digits` embeds: a quickly trained MLP (core's f32
//! reference executor on `data/digits.csv`, deterministic from its seed), quantized to INT8 and
//! built into one blob per board default array. The committed files must be exactly what this
//! builds (`SYSTOLE_BLESS=1 cargo test -p systole-firmware --test firmware committed_blobs`
//! rewrites them), and the blob the Pico runs classifies its sample right through the driver.

use std::path::{Path, PathBuf};

use systole_boards::board::{Board, BOARDS};
use systole_core::blob::{self, Blob};
use systole_core::compile::Int8Plan;
use systole_core::exec::{argmax, Executor, Plain};
use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::train::Int8Inference;
use systole_core::ArrayConfig;
use systole_firmware::Input;

use crate::end_to_end::emulated;

const SEED: u64 = 0;
const EPOCHS: usize = 12;
const BATCH: usize = 32;
const FEATURES: usize = 64;
const CLASSES: u32 = 10;
/// Digits' features are pixel counts 0..=16.
const FEATURE_SCALE: f32 = 16.0;

fn pico_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("pico-digits/blobs")
}

/// Raw features (row-major, 64 a row) and labels of `data/digits.csv`.
fn digits() -> (Vec<f32>, Vec<u16>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/digits.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let (mut x, mut labels) = (Vec::new(), Vec::new());
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        let cells: Vec<f32> = line.split(',').map(|c| c.trim().parse().unwrap()).collect();
        assert_eq!(cells.len(), FEATURES + 1, "{line}");
        x.extend_from_slice(&cells[..FEATURES]);
        labels.push(cells[FEATURES] as u16);
    }
    (x, labels)
}

fn rows(x: &[f32], idx: &[usize]) -> Vec<f32> {
    idx.iter().flat_map(|&i| x[i * FEATURES..(i + 1) * FEATURES].iter().copied()).collect()
}

struct Trained {
    spec: MlpSpec,
    params: Params,
    plan: Int8Plan,
    /// Raw features and labels of the held-out rows.
    test_x: Vec<f32>,
    test_labels: Vec<u16>,
}

/// 64-32-10, trained with SGD (lr 0.05, momentum 0.9) for 12 epochs of batch 32 on a seeded
/// 80% of the rows; INT8 scales calibrated on 512 training rows.
fn train() -> Trained {
    let (x, labels) = digits();
    let x: Vec<f32> = x.iter().map(|v| v / FEATURE_SCALE).collect();
    let mut rng = SplitMix64(SEED);
    let mut order: Vec<usize> = (0..labels.len()).collect();
    rng.shuffle(&mut order);
    let (train, test) = order.split_at(labels.len() * 4 / 5);
    let spec = MlpSpec {
        inputs: FEATURES as u32,
        hidden: heapless::Vec::from_slice(&[32]).unwrap(),
        classes: CLASSES,
    };
    let sgd = Sgd::DEFAULT;
    let graph = Graph::training(&spec, sgd).unwrap();
    let mut ex = Executor::new(graph, Plain::<f32>::new(), &Params::init(&spec, SEED));
    let mut epoch_order = train.to_vec();
    for _ in 0..EPOCHS {
        rng.shuffle(&mut epoch_order);
        for batch in epoch_order.chunks(BATCH) {
            let batch_labels: Vec<u16> = batch.iter().map(|&i| labels[i]).collect();
            ex.step(&rows(&x, batch), &batch_labels);
        }
    }
    let params = ex.params();
    let calibration = &train[..512];
    let plan = Int8Plan::calibrate(
        &Graph::mlp(&spec).unwrap(),
        &params,
        &rows(&x, calibration),
        calibration.len(),
    )
    .unwrap();
    let (raw, _) = digits();
    Trained {
        spec,
        params,
        plan,
        test_x: rows(&raw, test),
        test_labels: test.iter().map(|&i| labels[i]).collect(),
    }
}

/// The board default arrays, once each (the clock is not part of what a blob must match), each
/// with the first board that builds it.
fn targets() -> Vec<(Board, ArrayConfig)> {
    let mut out: Vec<(Board, ArrayConfig)> = Vec::new();
    for board in BOARDS {
        let c = board.default_config();
        if !out.iter().any(|(_, o)| ArrayConfig { clock_mhz: c.clock_mhz, ..*o } == c) {
            out.push((board, c));
        }
    }
    out
}

/// A blob's file, named for its board: two boards' arrays may share a shape (the iCEBreaker's
/// and the Alchitry Cu's 4 x 1) and differ in their timing.
fn blob_name(board: &str) -> String {
    format!("digits-{board}-int8.blob")
}

/// What the builder makes: each blob, and the sample (64 raw features and the label).
fn build_all(t: &Trained) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = targets()
        .iter()
        .map(|(board, c)| {
            let bytes =
                blob::build(&t.spec.net().unwrap(), &t.params, c, 1, Some(&t.plan), FEATURE_SCALE);
            (blob_name(board.name), bytes.unwrap())
        })
        .collect();
    // The first held-out row of a 7 that the INT8 model gets right on every target.
    let config = targets()[0].1;
    let (sample, label) = (0..t.test_labels.len())
        .filter(|&i| t.test_labels[i] == 7)
        .map(|i| (&t.test_x[i * FEATURES..(i + 1) * FEATURES], t.test_labels[i]))
        .find(|(x, label)| int8_logits(t, config, x).1 == *label as usize)
        .unwrap();
    let mut bytes: Vec<u8> = sample.iter().map(|&v| v as u8).collect();
    bytes.push(label as u8);
    files.push(("sample.bin".into(), bytes));
    files
}

/// INT8 logits and the predicted class of one row of raw features, on a golden machine.
fn int8_logits(t: &Trained, config: ArrayConfig, raw: &[f32]) -> (Vec<f32>, usize) {
    let graph = Graph::mlp(&t.spec).unwrap();
    let dram = Int8Inference::dram_needed(&graph, &config, &t.plan, 1).unwrap();
    let machine = golden(GoldenKind::Functional, config, dram).unwrap();
    let mut m = Int8Inference::new(machine, graph, &t.params, t.plan.clone()).unwrap();
    let x: Vec<f32> = raw.iter().map(|v| v / FEATURE_SCALE).collect();
    let (logits, _) = m.logits(&x, 1).unwrap();
    let class = argmax(&logits);
    (logits, class)
}

#[test]
fn committed_blobs_are_what_the_builder_makes() {
    let t = train();
    let bless = std::env::var_os("SYSTOLE_BLESS").is_some();
    for (name, bytes) in build_all(&t) {
        let path = pico_dir().join(&name);
        if bless {
            std::fs::create_dir_all(pico_dir()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == bytes,
            "{} differs from what the builder makes: rerun with SYSTOLE_BLESS=1",
            path.display()
        );
    }
}

/// The trained model is a real digit classifier: INT8 on the accelerator's numerics classifies
/// the held-out rows about as well as the f32 model.
#[test]
fn the_int8_digits_model_classifies_held_out_rows() {
    let t = train();
    let config = targets()[0].1;
    let n = t.test_labels.len();
    let graph = Graph::mlp(&t.spec).unwrap();
    let dram = Int8Inference::dram_needed(&graph, &config, &t.plan, n as u32).unwrap();
    let machine = golden(GoldenKind::Functional, config, dram).unwrap();
    let mut m = Int8Inference::new(machine, graph.clone(), &t.params, t.plan.clone()).unwrap();
    let x: Vec<f32> = t.test_x.iter().map(|v| v / FEATURE_SCALE).collect();
    let (logits, _) = m.logits(&x, n).unwrap();
    let classes = CLASSES as usize;
    let correct = |logits: &[f32]| {
        let row = |i: usize| &logits[i * classes..(i + 1) * classes];
        (0..n).filter(|&i| argmax(row(i)) == t.test_labels[i] as usize).count()
    };
    let int8 = correct(&logits);
    let f32_logits = Executor::new(graph, Plain::<f32>::new(), &t.params).logits(&x, n);
    let f32_correct = correct(&f32_logits);
    eprintln!("held-out accuracy: int8 {int8}/{n}, f32 {f32_correct}/{n}");
    assert!(int8 * 100 >= n * 93, "int8 {int8}/{n}");
    assert!(int8 + 5 >= f32_correct, "int8 {int8}, f32 {f32_correct} of {n}");
}

/// What the Pico does, with the committed files: for each blob, wake, identify, load, infer the
/// sample through the driver on an emulated accelerator of its board's default build (a golden
/// cycle machine behind the SPI framing) with the DRAM that build has, which the blob must fit;
/// the digit is the sample's label, the logits are `Int8Inference`'s and the cycles the blob's.
#[test]
fn the_pico_blobs_classify_their_sample_through_the_driver() {
    let sample = std::fs::read(pico_dir().join("sample.bin")).unwrap();
    let (pixels, label) = sample.split_at(FEATURES);
    let features: Vec<f32> = pixels.iter().map(|&p| p as f32).collect();
    let t = train();
    for (board, config) in targets() {
        let name = blob_name(board.name);
        let bytes = std::fs::read(pico_dir().join(&name)).unwrap();
        let blob = Blob::parse(&bytes).unwrap();
        let (needs, has) = (blob.target.dram_bytes as usize, board.memories.dram_bytes);
        assert!(needs <= has, "{name} needs {needs} bytes of DRAM, {} has {has}", board.name);
        assert_eq!(blob.feature_scale, FEATURE_SCALE);
        let x: Vec<f32> = features.iter().map(|v| v / blob.feature_scale).collect();
        let mut accel = emulated(config, has, 2);
        accel.reset().unwrap();
        let mut logits = [0f32; CLASSES as usize];
        let cycles = accel.run_inference(&blob, Input::F32(&x), &mut logits).unwrap();
        let (expected, class) = int8_logits(&t, config, &features);
        assert_eq!(argmax(&logits), label[0] as usize, "{name}");
        assert_eq!(class, label[0] as usize);
        assert_eq!(logits.to_vec(), expected);
        assert_eq!(cycles, blob.expected_cycles);
        let spi = &accel.release().0;
        eprintln!(
            "{name}: {} bytes, {} program words, {} cycles, {needs} of {has} DRAM bytes; {} SPI \
             bytes in {} transactions",
            bytes.len(),
            blob.program_words(),
            cycles,
            spi.bytes,
            spi.transactions
        );
    }
}
