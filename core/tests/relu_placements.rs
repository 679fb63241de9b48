//! ReLUs where the compiler cannot fuse them into the GEMM before them: two in a row, one after
//! a flatten or a max pooling, one last. Each compiles for training and inference and every
//! machine gives `Executor<Accel>`'s bits; a ReLU of the input or after an average pooling is
//! refused naming its layer (DECISIONS 131).

use crate::cnn_common::{conv, trains_on_small_arrays};
use systole_core::compile::{check_lowered, compile_inference, CompileError};
use systole_core::graph::Graph;
use systole_core::layers::{Layer, Net, Shape};
use systole_core::{ArrayConfig, Dtype};

const IMAGE: Shape = Shape::Image { c: 1, h: 6, w: 6 };

fn dense(inputs: u32) -> Layer {
    Layer::Dense { inputs, outputs: 5 }
}

#[test]
fn relus_in_unfused_positions_train_as_the_reference_bit_for_bit() {
    let (relu, flatten) = (Layer::Relu, Layer::Flatten);
    let max = Layer::MaxPool2d { kernel: 2, stride: 2 };
    let nets: [&[Layer]; 5] = [
        &[conv(1, 3, 3, 1, 1), relu, relu, flatten, dense(108)],
        &[conv(1, 3, 3, 1, 1), max, relu, flatten, dense(27)],
        &[conv(1, 3, 3, 1, 1), relu, max, flatten, relu, relu, dense(27)],
        &[conv(1, 3, 3, 1, 1), flatten, relu, dense(108)],
        &[flatten, dense(36), relu],
    ];
    for layers in nets {
        let net = Net::new(IMAGE, layers).unwrap();
        trains_on_small_arrays(&net);
        let graph = Graph::network(&net).unwrap();
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        compile_inference(&graph, &config, 3, None).unwrap();
    }
}

#[test]
fn a_relu_of_the_input_or_after_an_average_pooling_is_refused_naming_it() {
    let (relu, flatten) = (Layer::Relu, Layer::Flatten);
    let avg = Layer::AvgPool2d { kernel: 2, stride: 2 };
    let cases: [(&[Layer], usize); 3] = [
        (&[relu, flatten, dense(36)], 0),
        (&[flatten, relu, dense(36)], 1),
        (&[conv(1, 3, 3, 1, 1), avg, relu, flatten, dense(27)], 2),
    ];
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    for (layers, layer) in cases {
        let graph = Graph::network(&Net::new(IMAGE, layers).unwrap()).unwrap();
        let e = check_lowered(&graph, &config).unwrap_err();
        assert!(matches!(e, CompileError::Relu { layer: l, .. } if l == layer), "{layers:?}: {e}");
        assert!(e.to_string().starts_with(&format!("layer {layer} (relu): ")), "{e}");
    }
}
