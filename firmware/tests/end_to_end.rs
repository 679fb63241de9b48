//! The real driver, compiled for the host, drives core's device emulator over a golden cycle
//! machine through the protocol's SPI framing, byte by byte; a whole INT8 and BF16 inference of
//! a blob gives exactly what `Int8Inference` / `AccelTrainer` give on a golden machine directly:
//! the same logits bits and the same cycle count.

use embedded_hal_mock::eh1::delay::NoopDelay;
use systole_core::blob::{self, Blob};
use systole_core::compile::Int8Plan;
use systole_core::conv::nchw_to_nhwc;
use systole_core::graph::{Graph, MlpSpec};
use systole_core::isa::{encode, Instruction};
use systole_core::layers::{Layer, Net, Shape};
use systole_core::link::emulator::{Emulator, FIFO_DEPTH};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::train::{AccelTrainer, Int8Inference};
use systole_core::{ArrayConfig, Dtype};
use systole_firmware::sim::{EmulatedTarget, SimSpi};
use systole_firmware::{
    Error, ErrorCode, FaultCode, IdentityField, Input, Options, Region, Systole,
};

pub type Emulated = Systole<SimSpi<EmulatedTarget>, NoopDelay>;

/// The driver on a simulated SPI bus to an emulated accelerator: `config` with `dram` bytes of
/// DRAM on a golden cycle machine, answering each request `latency` idle bytes late.
pub fn emulated(config: ArrayConfig, dram: usize, latency: u32) -> Emulated {
    let machine = golden(GoldenKind::Cycle, config, dram).unwrap();
    let target = EmulatedTarget::new(Emulator::new(machine), latency);
    let options = Options { clock_mhz: config.clock_mhz, ..Options::DEFAULT };
    Systole::with_options(SimSpi::new(target), NoopDelay::new(), options)
}

fn spec() -> MlpSpec {
    MlpSpec { inputs: 40, hidden: heapless::Vec::from_slice(&[24, 12]).unwrap(), classes: 6 }
}

fn inputs(rows: usize, features: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64(seed);
    (0..rows * features).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect()
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

const BATCH: u16 = 3;

#[test]
fn int8_inference_through_the_driver_equals_int8_inference() {
    let spec = spec();
    let params = Params::init(&spec, 11);
    let graph = Graph::mlp(&spec).unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let x = inputs(BATCH as usize, spec.inputs as usize, 5);
    let plan = Int8Plan::calibrate(&graph, &params, &x, BATCH as usize).unwrap();
    let bytes =
        blob::build(&spec.net().unwrap(), &params, &config, BATCH, Some(&plan), 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    // Longer than the FIFO, so the driver must keep it fed while the program runs.
    assert!(blob.program_words() > FIFO_DEPTH, "{} words", blob.program_words());

    let dram = blob.target.dram_bytes as usize;
    let mut reference =
        Int8Inference::new(golden(GoldenKind::Cycle, config, dram).unwrap(), graph, &params, plan)
            .unwrap();
    let (expected, work) = reference.logits(&x, BATCH as usize).unwrap();

    let mut accel = emulated(config, dram, 3);
    let mut logits = vec![0f32; blob.logits_len()];
    let cycles = accel.run_inference(&blob, Input::F32(&x), &mut logits).unwrap();
    assert_eq!(bits(&logits), bits(&expected));
    assert_eq!(cycles, work.cycles);
    assert_eq!(cycles, blob.expected_cycles);

    // A second inference on the loaded model, new rows.
    let x2 = inputs(BATCH as usize, spec.inputs as usize, 6);
    let (expected, _) = reference.logits(&x2, BATCH as usize).unwrap();
    assert_eq!(accel.infer(&blob, Input::F32(&x2), &mut logits).unwrap(), cycles);
    assert_eq!(bits(&logits), bits(&expected));

    // The same rows already quantized: the same logits.
    let q = reference.plan.input_bytes(&x2);
    accel.infer(&blob, Input::Encoded(&q), &mut logits).unwrap();
    assert_eq!(bits(&logits), bits(&expected));
}

#[test]
fn bf16_inference_through_the_driver_equals_accel_trainer_logits() {
    let spec = spec();
    let params = Params::init(&spec, 12);
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let x = inputs(BATCH as usize, spec.inputs as usize, 8);
    let bytes = blob::build(&spec.net().unwrap(), &params, &config, BATCH, None, 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    assert!(blob.program_words() > FIFO_DEPTH, "{} words", blob.program_words());

    // The trainer needs room for its training buffers as well.
    let graph = Graph::mlp(&spec).unwrap();
    let dram = AccelTrainer::dram_needed(&graph, &config, BATCH as u32, BATCH as u32).unwrap();
    let machine = golden(GoldenKind::Cycle, config, dram).unwrap();
    let mut reference = AccelTrainer::new(machine, graph, &params).unwrap();
    let (expected, work) = reference.logits(&x, BATCH as usize).unwrap();

    let mut accel = emulated(config, blob.target.dram_bytes as usize, 0);
    let mut logits = vec![0f32; blob.logits_len()];
    let cycles = accel.run_inference(&blob, Input::F32(&x), &mut logits).unwrap();
    assert_eq!(bits(&logits), bits(&expected));
    assert_eq!(cycles, work.cycles);
    assert_eq!(cycles, blob.expected_cycles);
}

#[test]
fn a_blob_for_another_accelerator_is_refused() {
    let spec = spec();
    let params = Params::init(&spec, 1);
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let bytes = blob::build(&spec.net().unwrap(), &params, &config, 1, None, 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    let dram = blob.target.dram_bytes as usize;
    let mut logits = vec![0f32; blob.logits_len()];
    let x = vec![0.5f32; blob.input_len()];

    let mut other = emulated(ArrayConfig::new(8, 4, Dtype::Bf16), dram, 1);
    let e = other.run_inference(&blob, Input::F32(&x), &mut logits).unwrap_err();
    assert_eq!(e, Error::Mismatch { field: IdentityField::Rows, expected: 4, found: 8 });

    let mut small = emulated(config, dram - 16, 1);
    let e = small.run_inference(&blob, Input::F32(&x), &mut logits).unwrap_err();
    assert!(matches!(e, Error::Mismatch { field: IdentityField::DramBytes, .. }), "{e:?}");

    let mut right = emulated(config, dram, 1);
    let e = right.run_inference(&blob, Input::F32(&x[1..]), &mut logits).unwrap_err();
    assert_eq!(e, Error::Buffer { what: "input", expected: 40, got: 39 });
    let e = right.infer(&blob, Input::F32(&x), &mut logits[1..]).unwrap_err();
    assert_eq!(e, Error::Buffer { what: "logits", expected: 6, got: 5 });
    let e = right.infer(&blob, Input::Encoded(&[0; 40]), &mut logits).unwrap_err();
    assert_eq!(e, Error::Buffer { what: "input bytes", expected: 80, got: 40 });
}

/// Memory commands through the SPI framing: every region round-trips, and the device's
/// refusals come back as `Device` errors.
#[test]
fn memories_round_trip_and_refusals_come_back() {
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let mut accel = emulated(config, 4096, 2);
    for (region, addr, len) in
        [(Region::Dram, 100, 700), (Region::Spad, 64, 300), (Region::Acc, 16, 520)]
    {
        let data: Vec<u8> = (0..len).map(|i| (i * 31 + addr) as u8).collect();
        accel.write_memory(region, addr as u32, &data).unwrap();
        let mut back = vec![0u8; len];
        accel.read_memory(region, addr as u32, &mut back).unwrap();
        assert_eq!(back, data, "{region:?}");
    }
    assert_eq!(
        accel.write_memory(Region::Acc, 2, &[0; 4]),
        Err(Error::Device(ErrorCode::Misaligned))
    );
    assert_eq!(
        accel.write_memory(Region::Dram, 4090, &[0; 8]),
        Err(Error::Device(ErrorCode::OutOfRange))
    );
    let id = accel.read_identity().unwrap();
    assert_eq!((id.config, id.dram_bytes, id.fifo_depth), (config, 4096, FIFO_DEPTH as u16));
}

/// A program that swaps in weights nobody loaded stops with the controller's fault code.
#[test]
fn a_faulting_program_reports_its_fault_code() {
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let mut accel = emulated(config, 4096, 1);
    let program = [
        Instruction::Matmul { a_row: 0, acc_row: 0, rows: 1, swap: true, accumulate: false },
        Instruction::Halt,
    ]
    .map(|i| encode(&i).unwrap());
    assert_eq!(accel.run_program(&program[..]), Err(Error::Fault(FaultCode::NoWeightsLoaded)));
    // The driver resets before the next program; a good one then runs.
    let ok = [Instruction::Sync, Instruction::Halt].map(|i| encode(&i).unwrap());
    let status = accel.run_program(&ok[..]).unwrap();
    assert!(status.done && status.cycles > 0);
}

fn conv(i: u32, o: u32) -> Layer {
    Layer::Conv2d { in_channels: i, out_channels: o, kernel: 3, stride: 1, padding: 1 }
}

/// A CNN on 2 x 6 x 6 images whose convolutions both pad: the first reads the input the driver
/// writes with its zero border, the second a zero-bordered copy of the array's output, whose
/// zeros the blob's DRAM image holds. `pool` puts a max pooling between them.
fn cnn(pool: bool) -> Net {
    let mut layers = vec![conv(2, 3), Layer::Relu];
    if pool {
        layers.push(Layer::MaxPool2d { kernel: 2, stride: 2 });
    }
    let side: u32 = if pool { 3 } else { 6 };
    layers.extend([conv(3, 4), Layer::Relu, Layer::Flatten]);
    layers.push(Layer::Dense { inputs: 4 * side * side, outputs: 5 });
    Net::new(Shape::Image { c: 2, h: 6, w: 6 }, &layers).unwrap()
}

/// The driver on an accelerator whose DRAM holds garbage before the model is loaded: what the
/// program reads as zeros, the driver and the blob must write.
fn emulated_dirty(config: ArrayConfig, dram: usize) -> Emulated {
    let mut accel = emulated(config, dram, 1);
    for at in (0..dram).step_by(256) {
        let n = 256.min(dram - at);
        accel.write_memory(Region::Dram, at as u32, &vec![0xA5; n]).unwrap();
    }
    accel
}

/// Image models through the driver: the rows given channels first, as data sets hold them, the
/// logits those of `AccelTrainer` (BF16, pooled) and `Int8Inference` (INT8) on the same rows
/// made channels-last, bit for bit, in the blob's cycles.
#[test]
fn image_inference_through_the_driver_equals_the_hosts() {
    let rows = BATCH as usize;
    let x = inputs(rows, 72, 9);
    let channels_last = nchw_to_nhwc(&x, rows, 36, 2);

    let net = cnn(true);
    let params = Params::init(&net, 4);
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let bytes = blob::build(&net, &params, &config, BATCH, None, 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    let graph = Graph::network(&net).unwrap();
    let dram = AccelTrainer::dram_needed(&graph, &config, BATCH as u32, BATCH as u32).unwrap();
    let mut reference =
        AccelTrainer::new(golden(GoldenKind::Cycle, config, dram).unwrap(), graph, &params)
            .unwrap();
    let (expected, work) = reference.logits(&channels_last, rows).unwrap();
    let mut accel = emulated_dirty(config, blob.target.dram_bytes as usize);
    let mut logits = vec![0f32; blob.logits_len()];
    let cycles = accel.run_inference(&blob, Input::F32(&x), &mut logits).unwrap();
    assert_eq!(bits(&logits), bits(&expected), "bf16");
    assert_eq!((cycles, cycles), (work.cycles, blob.expected_cycles));

    let net = cnn(false);
    let params = Params::init(&net, 6);
    let graph = Graph::network(&net).unwrap();
    let plan = Int8Plan::calibrate(&graph, &params, &channels_last, rows).unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let bytes = blob::build(&net, &params, &config, BATCH, Some(&plan), 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    let dram = blob.target.dram_bytes as usize;
    let machine = golden(GoldenKind::Cycle, config, dram).unwrap();
    let mut reference = Int8Inference::new(machine, graph, &params, plan).unwrap();
    let (expected, work) = reference.logits(&channels_last, rows).unwrap();
    let mut accel = emulated_dirty(config, dram);
    let cycles = accel.run_inference(&blob, Input::F32(&x), &mut logits).unwrap();
    assert_eq!(bits(&logits), bits(&expected), "int8");
    assert_eq!((cycles, cycles), (work.cycles, blob.expected_cycles));
    // The input buffer as it is: the same logits.
    let q = reference.plan.input_bytes(&channels_last);
    let compiled = systole_core::compile::compile_inference(
        &reference.graph,
        &config,
        BATCH as u32,
        Some(&reference.plan),
    )
    .unwrap();
    accel.infer(&blob, Input::Encoded(&compiled.padded_input(&q)), &mut logits).unwrap();
    assert_eq!(bits(&logits), bits(&expected), "int8, encoded");
    // A buffer of the unpadded size is refused, naming the input.
    let short = Input::Encoded(&q);
    assert!(matches!(
        accel.infer(&blob, short, &mut logits),
        Err(Error::Buffer { what: "input bytes", .. })
    ));
}
