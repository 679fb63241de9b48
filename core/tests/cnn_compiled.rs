//! Convolutional networks compiled for the array: the patches made on the machine (strided,
//! gathered loads of the padded input), the convolution a GEMM over them, its weight and bias
//! gradients GEMMs with the SGD update fused, a flatten no code. Every machine must give the
//! accelerator reference executor's bits, as for MLPs.

use crate::cnn_common::{
    batch, conv, int8_inference_runs_on_every_golden_machine, trains_as_the_reference,
    trains_on_small_arrays,
};
use systole_core::compile::compile_training;
use systole_core::conv::ConvGeometry;
use systole_core::exec::Executor;
use systole_core::graph::{Graph, Sgd};
use systole_core::layers::{Layer, Net, Shape};
use systole_core::machine::{golden, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::{ArrayConfig, Dtype, Schedule};

/// A padded convolution on 1 x 6 x 6 images, and a strided, unpadded one on 2 x 7 x 7, each
/// with a ReLU, a flatten and a dense layer.
fn nets() -> Vec<Net> {
    let padded = Net::new(
        Shape::Image { c: 1, h: 6, w: 6 },
        &[
            conv(1, 4, 3, 1, 1),
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 144, outputs: 5 },
        ],
    );
    let strided = Net::new(
        Shape::Image { c: 2, h: 7, w: 7 },
        &[
            conv(2, 3, 3, 2, 0),
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 27, outputs: 4 },
        ],
    );
    vec![padded.unwrap(), strided.unwrap()]
}

#[test]
fn a_convolution_trains_on_the_array_as_the_reference_bit_for_bit() {
    for net in nets() {
        trains_on_small_arrays(&net);
    }
}

/// The cycle machine gives the same bits, in the cycles the compiler's timing model predicts.
#[test]
fn a_convolution_step_on_the_cycle_machine_takes_the_compiled_cycles() {
    for schedule in Schedule::ALL {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16).with_schedule(schedule);
        let net = &nets()[0];
        let cycles = trains_as_the_reference(net, config, GoldenKind::Cycle, &[4]);
        let graph =
            Graph::network_training(net, Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 })
                .unwrap();
        let step = compile_training(&graph, &config, 4).unwrap();
        assert_eq!(cycles, step.cycles(), "{schedule:?}");
        let im2col = step.segments.iter().find(|s| s.op == "im2col").expect("an im2col segment");
        assert_eq!((im2col.program, im2col.layer, im2col.macs), (0, 0, 0));
        // 4 images x 6 output rows x 3 kernel rows, one piece each: a load and a store.
        assert_eq!(im2col.end - im2col.start, 2 * 4 * 6 * 3);
        let geom = ConvGeometry::new((1, 6, 6), 4, 3, 1, 1).unwrap();
        assert_eq!(
            systole_core::compile::im2col::instructions(&geom, 4, &config, false),
            2 * 4 * 6 * 3
        );
        // With two scratchpad rows, each output row's 6 positions take 6 pieces.
        let tiny = ArrayConfig { spad_depth: 2, ..config };
        assert_eq!(
            systole_core::compile::im2col::instructions(&geom, 4, &tiny, false),
            6 * 2 * 4 * 6 * 3
        );
    }
}

#[test]
fn the_input_is_written_padded_when_the_first_convolution_pads() {
    let graph =
        Graph::network_training(&nets()[0], Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0 })
            .unwrap();
    let step = compile_training(&graph, &ArrayConfig::new(4, 4, Dtype::Bf16), 2).unwrap();
    assert_eq!((step.input_padding, step.input_image), (1, Some((1, 6, 6))));
    let x: Vec<u32> = (1..=72).collect();
    let padded = step.padded_input(&x);
    assert_eq!(padded.len(), 2 * 8 * 8);
    assert_eq!(&padded[..9], &[0; 9], "the top row and the left edge");
    assert_eq!(&padded[9..15], &[1, 2, 3, 4, 5, 6]);
    assert_eq!(padded[64 + 9], 37, "the second image's first pixel");
    assert_eq!(padded.iter().filter(|&&v| v != 0).count(), 72);
    // The ones vector sums the convolution's 36 positions of both images.
    assert_eq!(step.ones_len, 72);
}

/// INT8 inference of a trained-shape convolutional network: the patches copied as i8, the
/// convolution requantized into the dense layer's scale. The cycle machine gives the
/// functional machine's logits bits in the compiled cycles, and the dequantized logits stay
/// near the f32 reference's.
#[test]
fn int8_inference_of_a_convolution_runs_on_every_golden_machine() {
    int8_inference_runs_on_every_golden_machine(&nets()[0], 0);
}

/// A network whose logits are a convolution's output, flattened: inference must store them
/// (they were left unwritten, and INT8 asked for a requantization the last layer has not).
#[test]
fn logits_that_are_a_flattened_convolution_are_stored() {
    let net = Net::new(Shape::Image { c: 1, h: 4, w: 4 }, &[conv(1, 1, 3, 1, 0), Layer::Flatten])
        .unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    trains_as_the_reference(&net, config, GoldenKind::Functional, &[3, 3]);
    use systole_core::compile::Int8Plan;
    use systole_core::train::Int8Inference;
    let graph = Graph::network(&net).unwrap();
    let params = Params::init(&net, 2);
    let (x, _) = batch(&mut SplitMix64(4), 3, 16, 4);
    let plan = Int8Plan::calibrate(&graph, &params, &x, 3).unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let dram = Int8Inference::dram_needed(&graph, &config, &plan, 3).unwrap();
    let machine = golden(GoldenKind::Functional, config, dram).unwrap();
    let mut int8 = Int8Inference::new(machine, graph, &params, plan).unwrap();
    let (logits, _) = int8.logits(&x, 3).unwrap();
    assert_eq!(logits.len(), 12);
}

/// Padded convolutions of inputs the array made: a ReLU's output (6 x 6 images), and a max
/// pooling's (8 x 8 images pooled to 4 x 4), each read through a zero-padded copy.
fn padded_later() -> Vec<Net> {
    let after_relu = Net::new(
        Shape::Image { c: 1, h: 6, w: 6 },
        &[
            conv(1, 2, 3, 1, 0),
            Layer::Relu,
            conv(2, 3, 3, 1, 1),
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 48, outputs: 4 },
        ],
    );
    let after_pool = Net::new(
        Shape::Image { c: 1, h: 8, w: 8 },
        &[
            conv(1, 4, 3, 1, 1),
            Layer::Relu,
            Layer::MaxPool2d { kernel: 2, stride: 2 },
            conv(4, 3, 3, 1, 1),
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 48, outputs: 5 },
        ],
    );
    vec![after_relu.unwrap(), after_pool.unwrap()]
}

#[test]
fn a_padded_convolution_of_an_array_made_input_trains_as_the_reference() {
    for net in padded_later() {
        trains_on_small_arrays(&net);
        for schedule in Schedule::ALL {
            let config = ArrayConfig::new(4, 4, Dtype::Bf16).with_schedule(schedule);
            let cycles = trains_as_the_reference(&net, config, GoldenKind::Cycle, &[4]);
            let graph =
                Graph::network_training(&net, Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 })
                    .unwrap();
            let step = compile_training(&graph, &config, 4).unwrap();
            assert_eq!(cycles, step.cycles(), "{schedule:?}");
            // One copy, of the second convolution's input: 4 images, padded by one.
            assert_eq!(step.zeroed.len(), 1);
            let (h, w, c) = match net.layers.len() {
                6 => (4u32, 4u32, 2u32),
                _ => (4, 4, 4),
            };
            assert_eq!(step.zeroed[0].1, 2 * 4 * (h + 2) * (w + 2) * c, "bf16 bytes of the copy");
        }
    }
}

/// The copy's borders are the host's to zero: from a DRAM full of stale values, and with
/// evaluation passes (another step, whose buffers overlap the copy) between training steps,
/// every step and every evaluation still gives the reference's bits.
#[test]
fn a_padded_copy_is_zeroed_whatever_the_dram_held() {
    use systole_core::exec::Accel;
    use systole_core::machine::Region;
    use systole_core::train::AccelTrainer;
    let sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 };
    for net in padded_later() {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let graph = Graph::network_training(&net, sgd).unwrap();
        let params = Params::init(&net, 3);
        let dram = AccelTrainer::dram_needed(&graph, &config, 4, 4).unwrap();
        let mut machine = golden(GoldenKind::Functional, config, dram).unwrap();
        // bf16 0x3F3F (0.75) everywhere: a border read as it is would show.
        machine.write(Region::Dram, 0, &vec![0x3F; dram]).unwrap();
        let mut accel = AccelTrainer::new(machine, graph.clone(), &params).unwrap();
        let mut reference = Executor::new(graph.clone(), Accel { config }, &params);
        let mut rng = SplitMix64(9);
        for step in 0..3 {
            let (x, y) = batch(&mut rng, 4, graph.inputs() as usize, graph.classes());
            let (got, _) = accel.step(&x, &y).unwrap();
            assert_eq!(got, reference.step(&x, &y), "step {step}");
            let (x, y) = batch(&mut rng, 4, graph.inputs() as usize, graph.classes());
            let (logits, _) = accel.logits(&x, 4).unwrap();
            reference.forward(&x, &y);
            let want = &reference.values[graph.logits as usize];
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&logits), bits(want), "evaluation after step {step}");
        }
    }
}

/// INT8 inference through a padded copy (i8 elements), from a DRAM full of stale values.
#[test]
fn int8_inference_reads_a_padded_copy() {
    use systole_core::compile::{compile_inference, Int8Plan};
    let net = &padded_later()[0];
    let graph = Graph::network(net).unwrap();
    let plan = Int8Plan::calibrate(&graph, &Params::init(net, 5), &[0.5; 36], 1).unwrap();
    let step = compile_inference(&graph, &ArrayConfig::new(4, 4, Dtype::Int8), 6, Some(&plan));
    assert_eq!(step.unwrap().zeroed.len(), 1, "one copy");
    int8_inference_runs_on_every_golden_machine(net, 0x55);
}
