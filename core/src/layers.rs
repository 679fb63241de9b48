//! A network as a list of layers, in the order of a PyTorch `nn.Sequential`: the input shape
//! and each layer's kind and hyperparameters, checked layer by layer as the shapes flow through.
//! It is what a model file (`systole train --model PATH.json`) and the built-in `lenet` hold;
//! an MLP is the special case of dense layers with ReLUs between them.
//!
//! Shapes are images (`c x h x w`, NCHW per sample) until a `Flatten` makes them flat
//! (`features`); a dense layer takes a flat input, convolutions and pooling take images, ReLU
//! takes either. The network ends flat: its last shape is the class logits.

use heapless::Vec;

use crate::conv::{ConvGeometry, PoolGeometry, ShapeError};

/// Most layers with parameters (dense and convolution) a network may have.
pub const MAX_LAYERS: usize = 8;

pub use crate::limits::MAX_WIDTH;

/// Most layers in one network (ReLUs, pooling and `Flatten` included).
pub const MAX_NET_LAYERS: usize = 24;

/// One entry of the layer list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Layer {
    Conv2d { in_channels: u32, out_channels: u32, kernel: u32, stride: u32, padding: u32 },
    MaxPool2d { kernel: u32, stride: u32 },
    AvgPool2d { kernel: u32, stride: u32 },
    Relu,
    Flatten,
    Dense { inputs: u32, outputs: u32 },
}

impl Layer {
    /// The `kind` a model file names it by (PyTorch's class, lower case).
    pub fn kind(&self) -> &'static str {
        match self {
            Layer::Conv2d { .. } => "conv2d",
            Layer::MaxPool2d { .. } => "maxpool2d",
            Layer::AvgPool2d { .. } => "avgpool2d",
            Layer::Relu => "relu",
            Layer::Flatten => "flatten",
            Layer::Dense { .. } => "dense",
        }
    }

    /// Whether it has a weight and a bias.
    pub fn has_params(&self) -> bool {
        matches!(self, Layer::Conv2d { .. } | Layer::Dense { .. })
    }
}

/// The shape of one sample between layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Shape {
    Image { c: u32, h: u32, w: u32 },
    Flat(u32),
}

impl Shape {
    /// Elements of one sample.
    pub fn elements(&self) -> u64 {
        match *self {
            // Saturated: a count past u64 fails every size check after it (in a checked net
            // each side is at most `MAX_WIDTH`, and the product is exact).
            Shape::Image { c, h, w } => {
                (c as u64).saturating_mul(h as u64).saturating_mul(w as u64)
            }
            Shape::Flat(n) => n as u64,
        }
    }
}

impl core::fmt::Display for Shape {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Shape::Image { c, h, w } => write!(f, "{c} x {h} x {w}"),
            Shape::Flat(n) => write!(f, "{n} features"),
        }
    }
}

/// What is wrong with a layer list: the layer (0-based, as in `layers.{i}`), its field when one
/// is at fault, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NetError {
    /// `None`: the input shape or the list as a whole.
    pub layer: Option<usize>,
    /// The layer's kind ([`Layer::kind`]).
    pub kind: &'static str,
    pub field: Option<&'static str>,
    pub problem: NetProblem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NetProblem {
    /// A field that must match the shape coming in does not.
    Mismatch {
        found: u32,
        expected: u32,
    },
    /// The layer takes an image and gets a flat input, or the reverse.
    NeedsImage(Shape),
    NeedsFlat(Shape),
    Geometry(ShapeError),
    /// A value past its bound (a width past [`MAX_WIDTH`], a sample past it in elements).
    TooLarge {
        value: u64,
        limit: u64,
    },
    Zero,
    TooManyLayers,
    /// More layers with parameters (dense and convolution) than [`MAX_LAYERS`].
    TooManyParamLayers {
        count: usize,
    },
    NoLayers,
    /// The last layer leaves an image or a single class.
    Ends(Shape),
}

impl core::fmt::Display for NetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if let Some(l) = self.layer {
            write!(f, "layer {l} ({})", self.kind)?;
            if let Some(field) = self.field {
                write!(f, ", field {field:?}")?;
            }
            f.write_str(": ")?;
        } else if let Some(field) = self.field {
            write!(f, "field {field:?}: ")?;
        }
        match self.problem {
            NetProblem::Mismatch { found, expected } => {
                write!(f, "{found}, but the layer before gives {expected}")
            }
            NetProblem::NeedsImage(s) => {
                write!(f, "takes an image (channels x height x width) and gets {s}")
            }
            NetProblem::NeedsFlat(s) => {
                write!(f, "takes a flat input and gets {s}: put a flatten layer before it")
            }
            NetProblem::Geometry(e) => write!(f, "{e}"),
            NetProblem::TooLarge { value, limit } => write!(f, "{value} is more than {limit}"),
            NetProblem::Zero => f.write_str("is 0"),
            NetProblem::TooManyLayers => write!(f, "more than {MAX_NET_LAYERS} layers"),
            NetProblem::TooManyParamLayers { count } => write!(
                f,
                "{count} layers with parameters (conv2d, dense); at most {MAX_LAYERS} are supported"
            ),
            NetProblem::NoLayers => f.write_str("the list is empty"),
            NetProblem::Ends(s) => write!(
                f,
                "the last layer gives {s}; a classifier ends with a dense layer of 2 or more \
                 classes"
            ),
        }
    }
}

/// A checked network: the input shape, its layers and the shape after each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Net {
    pub input: Shape,
    pub layers: Vec<Layer, MAX_NET_LAYERS>,
    /// `shapes[i]`: the shape after layer `i`.
    pub shapes: Vec<Shape, MAX_NET_LAYERS>,
}

impl Net {
    /// Checks `layers` on `input`, layer by layer.
    pub fn new(input: Shape, layers: &[Layer]) -> Result<Net, NetError> {
        let at = |layer: Option<usize>, field: Option<&'static str>, problem| NetError {
            layer,
            kind: layer.and_then(|i| layers.get(i)).map_or("", Layer::kind),
            field,
            problem,
        };
        let width = |layer, field, v: u64| {
            if v == 0 {
                Err(at(layer, Some(field), NetProblem::Zero))
            } else if v > MAX_WIDTH as u64 {
                Err(at(
                    layer,
                    Some(field),
                    NetProblem::TooLarge { value: v, limit: MAX_WIDTH as u64 },
                ))
            } else {
                Ok(())
            }
        };
        match input {
            Shape::Image { c, h, w } => {
                for (v, field) in [(c, "channels"), (h, "height"), (w, "width")] {
                    width(None, field, v as u64)?;
                }
            }
            Shape::Flat(n) => width(None, "features", n as u64)?,
        }
        width(None, "input", input.elements())?;
        if layers.is_empty() {
            return Err(at(None, None, NetProblem::NoLayers));
        }
        let count = layers.iter().filter(|l| l.has_params()).count();
        if count > MAX_LAYERS {
            return Err(at(None, None, NetProblem::TooManyParamLayers { count }));
        }
        let mut net = Net { input, layers: Vec::new(), shapes: Vec::new() };
        let mut shape = input;
        for (i, &layer) in layers.iter().enumerate() {
            let l = Some(i);
            let image = |s: Shape| match s {
                Shape::Image { c, h, w } => Ok((c, h, w)),
                flat => Err(at(l, None, NetProblem::NeedsImage(flat))),
            };
            let geometry = |field, e| at(l, Some(field), NetProblem::Geometry(e));
            shape = match layer {
                Layer::Conv2d { in_channels, out_channels, kernel, stride, padding } => {
                    let (c, h, w) = image(shape)?;
                    if in_channels != c {
                        return Err(at(
                            l,
                            Some("in"),
                            NetProblem::Mismatch { found: in_channels, expected: c },
                        ));
                    }
                    width(l, "out", out_channels as u64)?;
                    let g = ConvGeometry::new((c, h, w), out_channels, kernel, stride, padding)
                        .map_err(|e| geometry(e.field(), e))?;
                    Shape::Image { c: out_channels, h: g.out_h(), w: g.out_w() }
                }
                Layer::MaxPool2d { kernel, stride } | Layer::AvgPool2d { kernel, stride } => {
                    let g = PoolGeometry::new(image(shape)?, kernel, stride)
                        .map_err(|e| geometry(e.field(), e))?;
                    Shape::Image { c: g.c, h: g.out_h(), w: g.out_w() }
                }
                Layer::Relu => shape,
                Layer::Flatten => Shape::Flat(shape.elements() as u32),
                Layer::Dense { inputs, outputs } => {
                    let Shape::Flat(n) = shape else {
                        return Err(at(l, None, NetProblem::NeedsFlat(shape)));
                    };
                    if inputs != n {
                        return Err(at(
                            l,
                            Some("in"),
                            NetProblem::Mismatch { found: inputs, expected: n },
                        ));
                    }
                    width(l, "out", outputs as u64)?;
                    Shape::Flat(outputs)
                }
            };
            width(l, "output", shape.elements())?;
            net.layers.push(layer).map_err(|_| at(l, None, NetProblem::TooManyLayers))?;
            net.shapes.push(shape).map_err(|_| at(l, None, NetProblem::TooManyLayers))?;
        }
        match shape {
            Shape::Flat(n) if n >= 2 => Ok(net),
            other => Err(at(Some(layers.len() - 1), None, NetProblem::Ends(other))),
        }
    }

    /// The classic LeNet-5 shape for `1 x 28 x 28` inputs and `classes` outputs, with ReLUs and
    /// max pooling (as PyTorch's tutorials build it).
    pub fn lenet(classes: u32) -> Result<Net, NetError> {
        let conv = |i, o, p| Layer::Conv2d {
            in_channels: i,
            out_channels: o,
            kernel: 5,
            stride: 1,
            padding: p,
        };
        let pool = Layer::MaxPool2d { kernel: 2, stride: 2 };
        let dense = |i, o| Layer::Dense { inputs: i, outputs: o };
        Net::new(
            Shape::Image { c: 1, h: 28, w: 28 },
            &[
                conv(1, 6, 2),
                Layer::Relu,
                pool,
                conv(6, 16, 0),
                Layer::Relu,
                pool,
                Layer::Flatten,
                dense(400, 120),
                Layer::Relu,
                dense(120, 84),
                Layer::Relu,
                dense(84, classes),
            ],
        )
    }

    /// The widths of an MLP (the input features, then each dense layer's outputs): the network
    /// is dense layers with one ReLU between each two and none before the first or after the
    /// last, as [`crate::graph::MlpSpec::net`] builds it. `None` for any other layer list (two
    /// dense layers with no ReLU between them are one linear map, not an MLP), or more than
    /// `MAX_LAYERS + 1` dense layers.
    pub fn mlp_widths(&self) -> Option<Vec<u32, { MAX_LAYERS + 2 }>> {
        let Shape::Flat(n) = self.input else { return None };
        let mut widths = Vec::new();
        widths.push(n).ok()?;
        for (i, layer) in self.layers.iter().enumerate() {
            match (i % 2, *layer) {
                (0, Layer::Dense { outputs, .. }) => widths.push(outputs).ok()?,
                (1, Layer::Relu) => {}
                _ => return None,
            }
        }
        // Dense layers at the even places, so an odd count ends on one.
        (self.layers.len() % 2 == 1).then_some(widths)
    }

    /// The class count: the last shape's features.
    pub fn classes(&self) -> u32 {
        match self.shapes.last() {
            Some(Shape::Flat(n)) => *n,
            _ => unreachable!("Net::new checks the last shape"),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn lenet_flows_to_400_features_and_the_classes() {
        let net = Net::lenet(10).unwrap();
        assert_eq!(net.shapes[2], Shape::Image { c: 6, h: 14, w: 14 });
        assert_eq!(net.shapes[6], Shape::Flat(400));
        assert_eq!(net.classes(), 10);
        assert_eq!(net.layers.iter().filter(|l| l.has_params()).count(), 5);
    }

    /// Issue 73: two dense layers without a ReLU between them were labelled `64-32-10 MLP`.
    #[test]
    fn only_dense_layers_with_one_relu_between_each_two_are_an_mlp() {
        let dense = |i, o| Layer::Dense { inputs: i, outputs: o };
        let net = |layers: &[Layer]| Net::new(Shape::Flat(64), layers).unwrap();
        let mlp = net(&[dense(64, 32), Layer::Relu, dense(32, 10)]);
        assert_eq!(mlp.mlp_widths().unwrap().as_slice(), &[64, 32, 10]);
        assert_eq!(net(&[dense(64, 10)]).mlp_widths().unwrap().as_slice(), &[64, 10]);
        for layers in [
            &[dense(64, 32), dense(32, 10)][..],
            &[Layer::Relu, dense(64, 32), Layer::Relu, dense(32, 10)],
            &[dense(64, 32), Layer::Relu, Layer::Relu, dense(32, 10)],
            &[dense(64, 32), Layer::Relu, dense(32, 10), Layer::Relu],
        ] {
            assert_eq!(net(layers).mlp_widths(), None, "{layers:?}");
        }
    }

    /// Each mistake names the layer and, where one is at fault, the field.
    #[test]
    fn mistakes_name_layer_and_field() {
        let img = Shape::Image { c: 1, h: 8, w: 8 };
        let conv = |i, o, k| Layer::Conv2d {
            in_channels: i,
            out_channels: o,
            kernel: k,
            stride: 1,
            padding: 0,
        };
        let dense = |i, o| Layer::Dense { inputs: i, outputs: o };
        let cases: [(Shape, &[Layer], &str); 9] = [
            (
                img,
                &[conv(2, 4, 3)],
                "layer 0 (conv2d), field \"in\": 2, but the layer before gives 1",
            ),
            (
                img,
                &[conv(1, 4, 9)],
                "layer 0 (conv2d), field \"kernel\": kernel 9 is larger than the input side 8",
            ),
            (img, &[conv(1, 0, 3)], "layer 0 (conv2d), field \"out\": is 0"),
            (
                img,
                &[conv(1, 2, 3), dense(72, 10)],
                "layer 1 (dense): takes a flat input and gets 2 x 6 x 6: put a flatten",
            ),
            (
                img,
                &[Layer::Flatten, dense(60, 10)],
                "layer 1 (dense), field \"in\": 60, but the layer before gives 64",
            ),
            (
                Shape::Flat(64),
                &[Layer::MaxPool2d { kernel: 2, stride: 2 }],
                "layer 0 (maxpool2d): takes an image",
            ),
            (img, &[conv(1, 2, 3)], "layer 0 (conv2d): the last layer gives 2 x 6 x 6"),
            (
                img,
                &[Layer::Flatten, dense(64, 1)],
                "layer 1 (dense): the last layer gives 1 features",
            ),
            (Shape::Image { c: 1, h: 0, w: 8 }, &[Layer::Flatten], "field \"height\": is 0"),
        ];
        for (input, layers, want) in cases {
            let got = Net::new(input, layers).unwrap_err().to_string();
            assert!(got.starts_with(want), "{got:?} does not start {want:?}");
        }
        let many = [Layer::Relu; MAX_NET_LAYERS + 1];
        let e = Net::new(Shape::Flat(4), &many).unwrap_err();
        assert_eq!((e.layer, e.problem), (Some(MAX_NET_LAYERS), NetProblem::TooManyLayers));
        let wide = Net::new(img, &[conv(1, 60000, 1)]).unwrap_err().to_string();
        assert!(
            wide.starts_with("layer 0 (conv2d), field \"output\": 3840000 is more than 65536"),
            "{wide}"
        );
    }

    /// Issue 73: a convolution whose shape does not fit is refused naming its field, never
    /// computed in 32 bits and wrapped (the three: an 8 x 8 input padded by 2^31, whose
    /// PyTorch output side is 4294967302; stride and padding `u32::MAX`, 3 x 3 in PyTorch; a
    /// kernel of 65537, a patch of 65537^2 elements).
    #[test]
    fn huge_convolution_geometry_is_refused_naming_the_field() {
        let img = Shape::Image { c: 1, h: 8, w: 8 };
        let conv = |kernel, stride, padding| Layer::Conv2d {
            in_channels: 1,
            out_channels: 2,
            kernel,
            stride,
            padding,
        };
        let cases = [
            (conv(3, 1, 1 << 31), 72, "padding", "4294967302"),
            (conv(3, u32::MAX, u32::MAX), 2, "padding", ""),
            (conv(65537, 1, 32765), 8, "kernel", "4295098369"),
        ];
        for (layer, flat, field, shown) in cases {
            let layers = [layer, Layer::Flatten, Layer::Dense { inputs: flat, outputs: 10 }];
            let e = Net::new(img, &layers).unwrap_err();
            assert_eq!((e.layer, e.kind, e.field), (Some(0), "conv2d", Some(field)), "{e}");
            assert!(e.to_string().contains(shown), "{e}");
        }
    }

    /// An MLP is dense layers and ReLUs on a flat input.
    #[test]
    fn an_mlp_is_a_net() {
        let net = Net::new(
            Shape::Flat(64),
            &[
                Layer::Dense { inputs: 64, outputs: 32 },
                Layer::Relu,
                Layer::Dense { inputs: 32, outputs: 10 },
            ],
        )
        .unwrap();
        assert_eq!(net.shapes.as_slice(), [Shape::Flat(32), Shape::Flat(32), Shape::Flat(10)]);
    }
}
