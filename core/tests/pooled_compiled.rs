//! Max and average pooling, a convolution after the first layer and its input gradient
//! (col2im) compiled for the array: LeNet's shape in small. Every machine must give `Executor<Accel>`'s bits.

use crate::cnn_common::{
    batch, conv, int8_inference_runs_on_every_golden_machine, trains_as_the_reference,
    trains_on_small_arrays,
};
use systole_core::compile::{check_lowered, compile_training, pool, CompileError};
use systole_core::graph::{Graph, Sgd};
use systole_core::layers::{Layer, Net, Shape};
use systole_core::machine::GoldenKind;
use systole_core::params::SplitMix64;
use systole_core::{ArrayConfig, Dtype, Schedule};

const SGD: Sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 };

fn max_pool(kernel: u32, stride: u32) -> Layer {
    Layer::MaxPool2d { kernel, stride }
}

/// LeNet in small: a padded convolution, ReLU and pooling, then an unpadded one (whose input
/// gradient is col2im into the first pooling's gradient), ReLU, pooling, flatten, dense.
fn lenet_like() -> Net {
    Net::new(
        Shape::Image { c: 1, h: 8, w: 8 },
        &[
            conv(1, 5, 3, 1, 1),
            Layer::Relu,
            max_pool(2, 2),
            conv(5, 4, 3, 1, 0),
            Layer::Relu,
            max_pool(2, 2),
            Layer::Flatten,
            Layer::Dense { inputs: 4, outputs: 3 },
        ],
    )
    .unwrap()
}

/// Two convolutions, each with its ReLU, then a dense layer of `classes` outputs.
fn conv_pair(input: Shape, first: Layer, second: Layer, flat: u32, classes: u32) -> Net {
    Net::new(
        input,
        &[
            first,
            Layer::Relu,
            second,
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: flat, outputs: classes },
        ],
    )
    .unwrap()
}

/// Two strided convolutions with a ReLU between: col2im with two residue classes per row and
/// the ReLU's gradient fused in.
fn strided_pair() -> Net {
    conv_pair(Shape::Image { c: 2, h: 9, w: 9 }, conv(2, 3, 3, 2, 0), conv(3, 4, 2, 2, 0), 16, 4)
}

/// Two unstrided convolutions: col2im sums up to nine patch elements into a pixel, in the
/// order the reference fixes (twelve output channels make the patch gradients round).
fn overlapping_pair() -> Net {
    conv_pair(Shape::Image { c: 1, h: 8, w: 8 }, conv(1, 2, 3, 1, 0), conv(2, 12, 3, 1, 0), 192, 3)
}

fn avg_pool(kernel: u32, stride: u32) -> Layer {
    Layer::AvgPool2d { kernel, stride }
}

/// LeNet in small with average pooling: after a ReLU (its gradient fused into the pooling's)
/// with a 2 x 2 window (a reciprocal that is exact), and straight after a convolution with a
/// 3 x 3 window (1/9 rounded), whose output a padded convolution then reads.
fn avg_pooled() -> Net {
    Net::new(
        Shape::Image { c: 1, h: 8, w: 8 },
        &[
            conv(1, 5, 3, 1, 1),
            Layer::Relu,
            avg_pool(2, 2),
            conv(5, 4, 3, 1, 1),
            avg_pool(2, 2),
            conv(4, 4, 1, 1, 1),
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 64, outputs: 3 },
        ],
    )
    .unwrap()
}

/// A 3 x 3 average pooling (its mean a product by 1/9 rounded) between two convolutions, and a
/// max pooling of the average's output.
fn avg_then_max() -> Net {
    Net::new(
        Shape::Image { c: 2, h: 12, w: 12 },
        &[
            conv(2, 4, 3, 1, 1),
            Layer::Relu,
            avg_pool(3, 3),
            max_pool(2, 2),
            Layer::Flatten,
            Layer::Dense { inputs: 16, outputs: 3 },
        ],
    )
    .unwrap()
}

#[test]
fn average_pooling_trains_on_the_array_as_the_reference_bit_for_bit() {
    for net in [avg_pooled(), avg_then_max()] {
        trains_on_small_arrays(&net);
    }
}

/// The cycle machine gives the same bits in the compiled cycles, the poolings named per op.
#[test]
fn an_average_pooled_step_on_the_cycle_machine_takes_the_compiled_cycles() {
    for schedule in Schedule::ALL {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16).with_schedule(schedule);
        let cycles = trains_as_the_reference(&avg_then_max(), config, GoldenKind::Cycle, &[3]);
        let graph = Graph::network_training(&avg_then_max(), SGD).unwrap();
        let step = compile_training(&graph, &config, 3).unwrap();
        assert_eq!(cycles, step.cycles(), "{schedule:?}");
        let ops: Vec<(&str, u8, u8)> =
            step.segments.iter().map(|s| (s.op, s.layer, s.program)).collect();
        let want = [("avg_pool", 0, 0), ("max_pool", 0, 0), ("max_pool_grad", 0, 1)];
        for op in want.into_iter().chain([("avg_pool_grad", 0, 1)]) {
            assert!(ops.contains(&op), "{op:?} in {ops:?}");
        }
    }
}

/// The accelerator's mean is a product by the rounded reciprocal: on a window whose sum is
/// not a multiple of 9 it can differ from the f32 reference's division, and `Executor<Accel>`
/// (which the machines equal) takes the product.
#[test]
fn the_accelerators_mean_is_a_product_by_the_reciprocal() {
    use systole_core::conv::{avg_pool_with, PoolGeometry};
    use systole_core::exec::{Accel, Numerics};
    let g = PoolGeometry::new((1, 3, 3), 3, 3).unwrap();
    let accel = Accel { config: ArrayConfig::new(4, 4, Dtype::Bf16) };
    let mut differs = 0;
    for i in 1..2000 {
        let x = [i as f32 * 0.37; 9];
        let sum = x.iter().fold(0.0f32, |s, &v| accel.add(s, v));
        let got = avg_pool_with(&g, &x, 1, |a, b| accel.add(a, b), |s| accel.mean(s, &g))[0];
        assert_eq!(got.to_bits(), (sum * (1.0f32 / 9.0)).to_bits(), "{sum}");
        differs += (got != sum / 9.0) as u32;
    }
    assert!(differs > 0, "1/9 rounded never showed");
}

#[test]
fn pooled_and_stacked_convolutions_train_on_the_array_as_the_reference_bit_for_bit() {
    // Five channels take two chunks of the three columns.
    for net in [lenet_like(), strided_pair(), overlapping_pair()] {
        trains_on_small_arrays(&net);
    }
}

/// Ties in a window: the gradient goes to the first of equal maxima only, as PyTorch's. On
/// constant images the convolution's output is the same at every interior position, so the
/// interior pooling windows tie (positive where the ReLU passes them).
#[test]
fn tied_maxima_route_the_gradient_as_the_reference() {
    let net = lenet_like();
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let graph = Graph::network_training(&net, SGD).unwrap();
    let (x, _) = batch(&mut SplitMix64(11), 4, 1, graph.classes());
    let constant: Vec<f32> = x.iter().flat_map(|&v| [v; 64]).collect();
    crate::cnn_common::trains_with_inputs(&net, config, GoldenKind::Functional, &constant, 4);
}

/// The cycle machine gives the same bits, in the cycles the compiler's timing model predicts.
#[test]
fn a_pooled_step_on_the_cycle_machine_takes_the_compiled_cycles() {
    for schedule in Schedule::ALL {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16).with_schedule(schedule);
        let net = lenet_like();
        let cycles = trains_as_the_reference(&net, config, GoldenKind::Cycle, &[3]);
        let graph = Graph::network_training(&net, SGD).unwrap();
        let step = compile_training(&graph, &config, 3).unwrap();
        assert_eq!(cycles, step.cycles(), "{schedule:?}");
        let ops: Vec<(&str, u8, u8)> =
            step.segments.iter().map(|s| (s.op, s.layer, s.program)).collect();
        for op in [("max_pool", 0, 0), ("max_pool", 1, 0), ("im2col", 1, 0)] {
            assert!(ops.contains(&op), "{op:?} in {ops:?}");
        }
        for op in [("max_pool_grad", 1, 1), ("col2im", 1, 1), ("max_pool_grad", 0, 1)] {
            assert!(ops.contains(&op), "{op:?} in {ops:?}");
        }
    }
}

#[test]
fn what_the_array_does_not_pool_is_refused_by_name() {
    let graph = |layers: &[Layer]| {
        let net = Net::new(Shape::Image { c: 1, h: 6, w: 6 }, layers).unwrap();
        Graph::network_training(&net, SGD).unwrap()
    };
    let flat = |n| [Layer::Flatten, Layer::Dense { inputs: n, outputs: 2 }];
    let cases: [(Vec<Layer>, &str); 6] = [
        ([vec![max_pool(2, 2)], flat(9).to_vec()].concat(), pool::OF_INPUT),
        ([vec![avg_pool(2, 2)], flat(9).to_vec()].concat(), pool::OF_INPUT),
        ([vec![conv(1, 1, 3, 1, 0), max_pool(3, 1)], flat(4).to_vec()].concat(), pool::UNTILED),
        ([vec![conv(1, 1, 2, 1, 0), max_pool(2, 2)], flat(4).to_vec()].concat(), pool::UNTILED),
        ([vec![conv(1, 1, 3, 1, 0), avg_pool(3, 1)], flat(4).to_vec()].concat(), pool::UNTILED),
        ([vec![conv(1, 1, 2, 1, 0), avg_pool(2, 2)], flat(4).to_vec()].concat(), pool::UNTILED),
    ];
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    for (layers, what) in cases {
        let e = compile_training(&graph(&layers), &config, 2).unwrap_err();
        assert_eq!(e, CompileError::NotLowered { what }, "{layers:?}");
    }
    // Average pooling runs on every array (its sum is `Add`; an INT8 requantization divides).
    let avg = graph(&[conv(1, 1, 2, 1, 0), avg_pool(5, 5), flat(1)[0], flat(1)[1]]);
    let [bf16, int8] = [Dtype::Bf16, Dtype::Int8].map(|d| ArrayConfig::new(4, 4, d));
    assert_eq!(check_lowered(&avg, &bf16), Ok(()));
    assert_eq!(check_lowered(&avg, &int8.with_int8_max(false)), Ok(()));
    // Max pooling runs on INT8 arrays with their lanes' comparator, and only there.
    let lenet = Graph::network(&Net::lenet(10).unwrap()).unwrap();
    assert_eq!(check_lowered(&lenet, &bf16), Ok(()));
    assert_eq!(check_lowered(&lenet, &int8), Ok(()));
    assert_eq!(
        check_lowered(&lenet, &int8.with_int8_max(false)),
        Err(CompileError::NotLowered { what: pool::INT8 })
    );
    assert_eq!(check_lowered(&lenet, &bf16.with_int8_max(false)), Ok(()));
}

/// An array too small for the vector-unit lowerings' row regions is refused, not given an
/// invalid program.
#[test]
fn pooling_needs_four_accumulator_rows() {
    let graph = Graph::network_training(&lenet_like(), SGD).unwrap();
    let tiny = ArrayConfig { acc_depth: 3, ..ArrayConfig::new(2, 2, Dtype::Bf16) };
    let e = compile_training(&graph, &tiny, 2).unwrap_err();
    assert!(matches!(e, CompileError::NotLowered { .. }), "{e}");
    assert!(e.to_string().contains("fewer than 4 accumulator rows"), "{e}");
    let four = ArrayConfig { acc_depth: 4, ..tiny };
    trains_as_the_reference(&lenet_like(), four, GoldenKind::Functional, &[3]);
}

/// INT8 inference of LeNet's shape in small, max pooling on the INT8 lanes' comparator: every
/// golden machine gives the same logits, in the compiled cycles, near the f32 reference's, from
/// a DRAM full of stale bytes.
#[test]
fn int8_max_pooling_runs_on_every_golden_machine() {
    int8_inference_runs_on_every_golden_machine(&lenet_like(), 0x5A);
}

/// INT8 average pooling: each window's i32 sum by `Add`, divided by the requantization that
/// follows (after a ReLU with a 2 x 2 window; straight after a convolution with a 3 x 3 one,
/// then a max pooling of the sums), on every golden machine, near the f32 reference.
#[test]
fn int8_average_pooling_runs_on_every_golden_machine() {
    int8_inference_runs_on_every_golden_machine(&avg_pooled(), 0x5A);
    int8_inference_runs_on_every_golden_machine(&avg_then_max(), 0xA5);
}

/// The pooled words are requantized after the maximum, which equals pooling the requantized
/// elements because a requantization never reorders two words: a 1 x 1 pooling (the maximum
/// of one tap, or its mean) gives the unpooled network's logits, bit for bit, through the
/// pooling's own requantize and store.
#[test]
fn int8_pooling_requantizes_as_the_layer_does() {
    for one in [max_pool(1, 1), avg_pool(1, 1)] {
        int8_one_tap_pooling_is_the_identity(one);
    }
}

fn int8_one_tap_pooling_is_the_identity(one: Layer) {
    let net = |pool: bool| {
        let mut layers = vec![conv(1, 3, 3, 1, 1), Layer::Relu];
        if pool {
            layers.push(one);
        }
        layers.extend([Layer::Flatten, Layer::Dense { inputs: 3 * 36, outputs: 4 }]);
        Net::new(Shape::Image { c: 1, h: 6, w: 6 }, &layers).unwrap()
    };
    let [pooled, plain] =
        [net(true), net(false)].map(|n| int8_inference_runs_on_every_golden_machine(&n, 0));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&pooled), bits(&plain));
    let graph = Graph::network(&net(true)).unwrap();
    let plan = systole_core::compile::Int8Plan::calibrate(
        &graph,
        &systole_core::params::Params::init(&net(true), 5),
        &[0.25; 72],
        2,
    )
    .unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let step = systole_core::compile::compile_inference(&graph, &config, 2, Some(&plan)).unwrap();
    assert!(step.segments.iter().any(|s| s.op.ends_with("_pool")), "the pooling ran on the array");
}

/// Requantization is monotone: the larger of two words never requantizes below the smaller.
#[test]
fn requantization_never_reorders_two_words() {
    use systole_core::numerics::Requant;
    let mut rng = SplitMix64(3);
    for _ in 0..200 {
        let scale = 1e-6 + rng.next_f64() * 0.9;
        let Ok(r) = Requant::from_scale(scale, rng.below(5) as i8 - 2) else { continue };
        for _ in 0..200 {
            let a = rng.next_u64() as i32 >> rng.below(31);
            let b = rng.next_u64() as i32 >> rng.below(31);
            let (lo, hi) = (a.min(b), a.max(b));
            assert!(
                r.apply(lo) <= r.apply(hi),
                "{r:?}: {lo} -> {}, {hi} -> {}",
                r.apply(lo),
                r.apply(hi)
            );
        }
    }
}

/// A network whose logits are a pooling's output, flattened: every pass stores them (inference
/// left them unwritten, and INT8 indexed a requantization the last layer has not).
#[test]
fn logits_that_are_a_pooling_are_stored() {
    for pool in [max_pool(2, 2), avg_pool(2, 2)] {
        let net = Net::new(
            Shape::Image { c: 1, h: 6, w: 6 },
            &[conv(1, 3, 3, 1, 1), Layer::Relu, pool, Layer::Flatten],
        )
        .unwrap();
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        trains_as_the_reference(&net, config, GoldenKind::Functional, &[3, 3]);
        // INT8: an average pooling's logits are window sums, their scale divided by its size.
        int8_inference_runs_on_every_golden_machine(&net, 0x33);
    }
}
