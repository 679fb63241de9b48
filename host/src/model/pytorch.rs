//! A network's parameters as the state dict of the equivalent PyTorch `nn.Sequential`: entry `i`
//! of the layer list with parameters is `layers.{i}.weight` and `layers.{i}.bias`; a
//! convolution's weight is `[out, in, kh, kw]`, a dense layer's `[out, in]`, its inputs in
//! PyTorch's channels-first order when a flatten of an image feeds it. Core keeps every weight as
//! `fan_in x fan_out` with images channels-last (`conv`), so each converts on the way.

use systole_core::conv::ConvGeometry;
use systole_core::conv::{nchw_to_nhwc, nhwc_to_nchw, weight_from_pytorch, weight_to_pytorch};
use systole_core::exec::transpose;
use systole_core::layers::{Layer, Net, Shape};
use systole_core::params::{LayerParams, Params};

/// How one layer's weight lies in the file.
#[derive(Clone, Copy, Debug)]
enum Weight {
    Conv(ConvGeometry),
    /// `inputs x outputs` in core; with `chw = Some((c, positions))` its inputs are a flattened
    /// image, channels-last in core and channels-first in the file.
    Dense {
        inputs: u32,
        outputs: u32,
        chw: Option<(usize, usize)>,
    },
}

/// Each layer with parameters: its index in the list and its weight's form.
fn param_layers(net: &Net) -> Vec<(usize, Weight)> {
    let mut out = Vec::new();
    let mut shape = net.input;
    // The image a flat input was flattened from (ReLUs keep its order, a dense layer ends it).
    let mut flattened: Option<(usize, usize)> = None;
    for (i, layer) in net.layers.iter().enumerate() {
        match (*layer, shape) {
            (
                Layer::Conv2d { out_channels, kernel, stride, padding, .. },
                Shape::Image { c, h, w },
            ) => {
                if let Ok(g) = ConvGeometry::new((c, h, w), out_channels, kernel, stride, padding) {
                    out.push((i, Weight::Conv(g)));
                }
            }
            (Layer::Flatten, Shape::Image { c, h, w }) => {
                flattened = Some((c as usize, h as usize * w as usize))
            }
            (Layer::Dense { inputs, outputs }, _) => {
                out.push((i, Weight::Dense { inputs, outputs, chw: flattened.take() }))
            }
            _ => {}
        }
        shape = net.shapes[i];
    }
    out
}

/// One tensor of the file: its name, shape and values (row-major).
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub values: Vec<f32>,
}

/// The file's tensors of `params`, layer by layer, weight before bias.
pub fn to_pytorch(net: &Net, params: &Params) -> Vec<Tensor> {
    let mut tensors = Vec::new();
    for ((i, weight), layer) in param_layers(net).into_iter().zip(&params.layers) {
        let (shape, values) = match weight {
            Weight::Conv(g) => {
                let (k, c, o) = (g.kernel as usize, g.c as usize, g.out_c as usize);
                (vec![o, c, k, k], weight_to_pytorch(&g, &layer.weight))
            }
            Weight::Dense { inputs, outputs, chw } => {
                let (i_n, o_n) = (inputs as usize, outputs as usize);
                let mut rows = transpose(&layer.weight, i_n, o_n);
                if let Some((c, positions)) = chw {
                    rows =
                        rows.chunks(i_n).flat_map(|r| nhwc_to_nchw(r, 1, positions, c)).collect();
                }
                (vec![o_n, i_n], rows)
            }
        };
        tensors.push(Tensor { name: format!("layers.{i}.weight"), shape, values });
        let bias = layer.bias.clone();
        tensors.push(Tensor {
            name: format!("layers.{i}.bias"),
            shape: vec![bias.len()],
            values: bias,
        });
    }
    tensors
}

/// The names [`to_pytorch`] gives `net`'s tensors, in its order.
pub fn names(net: &Net) -> Vec<String> {
    param_layers(net)
        .into_iter()
        .flat_map(|(i, _)| [format!("layers.{i}.weight"), format!("layers.{i}.bias")])
        .collect()
}

/// `net`'s parameters from the file's tensors, each read (and its shape checked) by `read`.
pub fn from_pytorch<E>(
    net: &Net,
    mut read: impl FnMut(&str, &[usize]) -> Result<Vec<f32>, E>,
) -> Result<Params, E> {
    let mut params = Params { layers: Vec::new() };
    for (i, weight) in param_layers(net) {
        let (fan_in, fan_out, weight) = match weight {
            Weight::Conv(g) => {
                let (k, c, o) = (g.kernel as usize, g.c as usize, g.out_c as usize);
                let w = read(&format!("layers.{i}.weight"), &[o, c, k, k])?;
                (g.patch() as u32, g.out_c, weight_from_pytorch(&g, &w))
            }
            Weight::Dense { inputs, outputs, chw } => {
                let (i_n, o_n) = (inputs as usize, outputs as usize);
                let mut rows = read(&format!("layers.{i}.weight"), &[o_n, i_n])?;
                if let Some((c, positions)) = chw {
                    rows =
                        rows.chunks(i_n).flat_map(|r| nchw_to_nhwc(r, 1, positions, c)).collect();
                }
                (inputs, outputs, transpose(&rows, o_n, i_n))
            }
        };
        let bias = read(&format!("layers.{i}.bias"), &[fan_out as usize])?;
        params.layers.push(LayerParams { fan_in, fan_out, weight, bias });
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::params::ParamShapes;

    /// A network with a convolution and a dense layer after a flatten of a 3-channel image: its
    /// parameters survive the round trip, the names follow the list's indices, and the dense
    /// weight's columns are PyTorch's channels-first inputs.
    #[test]
    fn parameters_round_trip_in_pytorch_layout() {
        let conv =
            Layer::Conv2d { in_channels: 2, out_channels: 3, kernel: 2, stride: 1, padding: 0 };
        let net = Net::new(
            Shape::Image { c: 2, h: 3, w: 3 },
            &[conv, Layer::Relu, Layer::Flatten, Layer::Dense { inputs: 12, outputs: 4 }],
        )
        .unwrap();
        let params = Params::init(&net, 3);
        let tensors = to_pytorch(&net, &params);
        let got: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(got, names(&net));
        assert_eq!(got, ["layers.0.weight", "layers.0.bias", "layers.3.weight", "layers.3.bias"]);
        assert_eq!(tensors[0].shape, [3, 2, 2, 2]);
        assert_eq!(tensors[2].shape, [4, 12]);
        // Core's dense row for input (h 0, w 1, c 2) is row (0 * 2 + 1) * 3 + 2 = 5; PyTorch's
        // column for (c 2, h 0, w 1) is 2 * 4 + 0 * 2 + 1 = 9.
        let dense = &params.layers[1];
        assert_eq!(tensors[2].values[9], dense.weight[5 * 4]);
        // Conv: core's (kh 1, kw 0, c 1) x out 2 is row (1 * 2 + 0) * 2 + 1 = 5; PyTorch's
        // [2, 1, 1, 0].
        assert_eq!(
            tensors[0].values[((2 * 2 + 1) * 2 + 1) * 2],
            params.layers[0].weight[5 * 3 + 2]
        );
        let back = from_pytorch(&net, |name, shape| -> Result<Vec<f32>, ()> {
            let t = tensors.iter().find(|t| t.name == name).unwrap();
            assert_eq!(t.shape, shape);
            Ok(t.values.clone())
        })
        .unwrap();
        assert_eq!(back, params);
        let shapes: Vec<(u32, u32)> = back.layers.iter().map(|l| (l.fan_in, l.fan_out)).collect();
        assert_eq!(shapes, net.param_shapes());
    }
}
