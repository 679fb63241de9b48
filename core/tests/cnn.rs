//! Convolutional graphs: autodiff of every image op against finite differences through whole
//! networks, and a convolution layer's forward pass against a direct convolution.

use systole_core::exec::{Executor, Plain};
use systole_core::graph::{Graph, Op, Sgd};
use systole_core::layers::{Layer, Net, Shape};
use systole_core::params::{ParamShapes, Params, SplitMix64};

const SGD: Sgd = Sgd { lr: 0.1, momentum: 0.0, weight_decay: 0.0 };

fn conv(i: u32, o: u32, kernel: u32, stride: u32, padding: u32) -> Layer {
    Layer::Conv2d { in_channels: i, out_channels: o, kernel, stride, padding }
}

/// Features in [-1, 1) and labels below `classes`, in f64.
fn batch(seed: u64, rows: usize, inputs: usize, classes: u32) -> (Vec<f64>, Vec<u16>) {
    let mut rng = SplitMix64(seed);
    let x = (0..rows * inputs).map(|_| rng.next_f64() * 2.0 - 1.0).collect();
    let y = (0..rows).map(|_| rng.below(classes as u64) as u16).collect();
    (x, y)
}

/// Every parameter's gradient of `net` on a random batch against central differences; returns
/// how many were checked.
fn check_gradients(net: &Net, seed: u64, rows: usize) -> u64 {
    let graph = Graph::network_training(net, SGD).unwrap();
    let params = Params::init(net, seed);
    let (x, y) = batch(seed + 1, rows, graph.inputs() as usize, graph.classes());
    crate::finite_differences::check_gradients(&graph, &params, &x, &y)
}

/// Two convolutions (padded and strided), both poolings, a ReLU between each and flatten into
/// two dense layers: every parameter, so every image op's gradient on the way down.
#[test]
fn cnn_gradients_match_finite_differences() {
    let net = Net::new(
        Shape::Image { c: 2, h: 9, w: 9 },
        &[
            conv(2, 3, 3, 1, 1),
            Layer::Relu,
            Layer::MaxPool2d { kernel: 2, stride: 2 },
            conv(3, 4, 2, 2, 1),
            Layer::Relu,
            Layer::AvgPool2d { kernel: 2, stride: 1 },
            Layer::Flatten,
            Layer::Dense { inputs: 16, outputs: 5 },
            Layer::Relu,
            Layer::Dense { inputs: 5, outputs: 3 },
        ],
    )
    .unwrap();
    assert_eq!(check_gradients(&net, 11, 3), net.parameter_count());
}

/// The first layer's patches are of the input: no gradient flows there, so neither its
/// patches' gradient nor a `Col2im` is formed; the second convolution's are.
#[test]
fn lenet_differentiates_without_input_gradients() {
    let net = Net::lenet(10).unwrap();
    let g = Graph::network_training(&net, Sgd { momentum: 0.9, ..SGD }).unwrap();
    let count = |ops: &[Op], f: fn(&Op) -> bool| ops.iter().filter(|op| f(op)).count();
    assert_eq!(count(&g.forward, |op| matches!(op, Op::Im2col { .. })), 2);
    assert_eq!(count(&g.backward, |op| matches!(op, Op::Col2im { .. })), 1);
    assert_eq!(count(&g.backward, |op| matches!(op, Op::DenseGradInput { .. })), 4);
    assert_eq!(count(&g.backward, |op| matches!(op, Op::MaxPoolGrad { .. })), 2);
    assert_eq!(g.params.len(), 5);
    assert_eq!(g.update.len(), 10);
    assert_eq!(net.parameter_count(), 61_706, "LeNet-5 as PyTorch counts it");
    let first_patches = g.forward.iter().find_map(|op| match *op {
        Op::Im2col { y, .. } => Some(y),
        _ => None,
    });
    for t in [Some(g.input), first_patches] {
        assert_eq!(g.gradient(t.unwrap()), None, "no gradient of the input or its patches");
    }
}

/// A convolution layer's output (its `BiasAdd`, HWC) against a direct seven-loop convolution
/// plus bias, in f64, at a stride and padding where the patches cross the border.
#[test]
fn conv_layer_forward_equals_direct_convolution() {
    let (c, h, w, oc, k, s, p) = (2usize, 7usize, 6usize, 3usize, 3usize, 2usize, 1usize);
    let net = Net::new(
        Shape::Image { c: c as u32, h: h as u32, w: w as u32 },
        &[
            conv(c as u32, oc as u32, k as u32, s as u32, p as u32),
            Layer::Flatten,
            Layer::Dense { inputs: (oc * 4 * 3) as u32, outputs: 2 },
        ],
    )
    .unwrap();
    let graph = Graph::network(&net).unwrap();
    let params = Params::init(&net, 5);
    let n = 2;
    let (x, y) = batch(6, n, c * h * w, 2);
    let mut ex = Executor::new(graph.clone(), Plain::<f64>::new(), &params);
    ex.forward(&x, &y);
    let out = graph
        .forward
        .iter()
        .find_map(|op| match *op {
            Op::BiasAdd { y, .. } => Some(y),
            _ => None,
        })
        .unwrap();
    let got = &ex.values[out as usize];
    let (oh, ow) = ((h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1);
    assert_eq!((oh, ow), (4, 3));
    // Images are HWC; the graph's weight is `patch x out`, patch columns `(ky, kx, c)`.
    let layer = &params.layers[0];
    let weight = |o: usize, ch: usize, ky: usize, kx: usize| {
        layer.weight[((ky * k + kx) * c + ch) * oc + o] as f64
    };
    for b in 0..n {
        for o in 0..oc {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut sum = layer.bias[o] as f64;
                    for ch in 0..c {
                        for ky in 0..k {
                            for kx in 0..k {
                                let (iy, ix) = (
                                    (oy * s + ky) as i64 - p as i64,
                                    (ox * s + kx) as i64 - p as i64,
                                );
                                if (0..h as i64).contains(&iy) && (0..w as i64).contains(&ix) {
                                    let v = x[((b * h + iy as usize) * w + ix as usize) * c + ch];
                                    sum += v * weight(o, ch, ky, kx);
                                }
                            }
                        }
                    }
                    let at = ((b * oh + oy) * ow + ox) * oc + o;
                    assert!(
                        (got[at] - sum).abs() < 1e-12,
                        "({b}, {o}, {oy}, {ox}): {} vs {sum}",
                        got[at]
                    );
                }
            }
        }
    }
}

/// An MLP built as a layer list is the graph `Graph::mlp` builds: the same tensors and ops.
#[test]
fn an_mlp_spec_and_its_layer_list_build_one_graph() {
    let spec = systole_core::graph::MlpSpec {
        inputs: 6,
        hidden: heapless::Vec::from_slice(&[5, 4]).unwrap(),
        classes: 3,
    };
    let net = spec.net().unwrap();
    assert_eq!(Graph::mlp(&spec).unwrap(), Graph::network(&net).unwrap());
    assert_eq!(net.param_shapes(), spec.param_shapes());
    let g = Graph::mlp(&spec).unwrap();
    assert_eq!(g.mlp_widths().unwrap().as_slice(), &[6, 5, 4, 3]);
    assert_eq!(Graph::network(&Net::lenet(10).unwrap()).unwrap().mlp_widths(), None);
}
