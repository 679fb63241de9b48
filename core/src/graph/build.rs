//! Forward graphs from layer lists.

use heapless::Vec;

use super::{Graph, GraphError, MlpSpec, Op, Rows, Sgd, TensorId, TensorKind, MAX_LAYERS};
use super::{MAX_NET_LAYERS_OF_MLP, MAX_WIDTH};
use crate::conv::{ConvGeometry, PoolGeometry, ShapeError};
use crate::layers::{Layer, Net, NetError, NetProblem, Shape, MAX_NET_LAYERS};

impl MlpSpec {
    /// The MLP as a layer list: dense layers with a ReLU after each but the last.
    pub fn net(&self) -> Result<Net, NetError> {
        let widths: Vec<u32, { MAX_LAYERS + 2 }> = self.widths().collect();
        let mut layers: Vec<Layer, MAX_NET_LAYERS_OF_MLP> = Vec::new();
        let full = |layer| NetError {
            layer: Some(layer),
            kind: "",
            field: None,
            problem: NetProblem::TooManyLayers,
        };
        for (l, pair) in widths.windows(2).enumerate() {
            let dense = Layer::Dense { inputs: pair[0], outputs: pair[1] };
            let at = layers.len();
            layers.push(dense).map_err(|_| full(at))?;
            if l + 2 < widths.len() {
                layers.push(Layer::Relu).map_err(|_| full(at + 1))?;
            }
        }
        Net::new(Shape::Flat(self.inputs), &layers)
    }
}

/// The layers a graph is built of, each with its index in `net` and its input shape: `net`'s,
/// but each ReLU runs before the flattens and max poolings before it, and one that then follows
/// another ReLU is dropped. Both are exact: a ReLU is elementwise and idempotent, and a max
/// pooling keeps its window's first largest, which a ReLU leaves first and largest (or makes 0,
/// where the window's largest was at most 0); the gradients agree the same way. The compiler
/// fuses a ReLU into the GEMM before it, so this puts every ReLU it can there (DECISIONS 131).
pub(crate) fn lowered_layers(net: &Net) -> Vec<(usize, Layer, Shape), MAX_NET_LAYERS> {
    let mut out: Vec<(usize, Layer, Shape), MAX_NET_LAYERS> = Vec::new();
    let mut shape = net.input;
    for (i, &layer) in net.layers.iter().enumerate() {
        if layer == Layer::Relu {
            let mut at = out.len();
            while at > 0 && matches!(out[at - 1].1, Layer::Flatten | Layer::MaxPool2d { .. }) {
                at -= 1;
            }
            if at == 0 || out[at - 1].1 != Layer::Relu {
                // Where it moves, its input is that of the layer it moves before.
                let input = out.get(at).map_or(shape, |&(_, _, s)| s);
                // `out` holds at most as many layers as `net`.
                let _ = out.insert(at, (i, layer, input));
            }
        } else {
            let _ = out.push((i, layer, shape));
        }
        shape = net.shapes[i];
    }
    out
}

impl Graph {
    /// The forward graph of an MLP: dense, bias, ReLU per hidden layer; dense, bias and softmax
    /// cross-entropy at the end.
    pub fn mlp(spec: &MlpSpec) -> Result<Graph, GraphError> {
        if spec.hidden.len() >= MAX_LAYERS {
            return Err(GraphError::TooManyLayers {
                layers: spec.hidden.len(),
                max: MAX_LAYERS - 1,
            });
        }
        if spec.classes < 2 {
            return Err(GraphError::Classes { classes: spec.classes });
        }
        for (layer, width) in spec.widths().enumerate() {
            if width == 0 || width > MAX_WIDTH {
                return Err(GraphError::Width { layer, width });
            }
        }
        Graph::network(&spec.net().map_err(GraphError::Net)?)
    }

    /// A full training graph of an MLP: forward, backward, SGD update.
    pub fn training(spec: &MlpSpec, sgd: Sgd) -> Result<Graph, GraphError> {
        let mut g = Graph::mlp(spec)?;
        g.differentiate()?;
        g.optimize(sgd)?;
        Ok(g)
    }

    /// A full training graph of any network: forward, backward, SGD update.
    pub fn network_training(net: &Net, sgd: Sgd) -> Result<Graph, GraphError> {
        let mut g = Graph::network(net)?;
        g.differentiate()?;
        g.optimize(sgd)?;
        Ok(g)
    }

    /// The forward graph of a checked layer list, ending in softmax cross-entropy on its
    /// logits. Each layer with parameters is `Weight(l)` and `Bias(l)`, `l` counting them.
    pub fn network(net: &Net) -> Result<Graph, GraphError> {
        let with_params = net.layers.iter().filter(|l| l.has_params()).count();
        if with_params > MAX_LAYERS {
            return Err(GraphError::TooManyLayers { layers: with_params, max: MAX_LAYERS });
        }
        let mut g = Graph {
            net: net.clone(),
            tensors: Vec::new(),
            forward: Vec::new(),
            backward: Vec::new(),
            update: Vec::new(),
            input: 0,
            labels: 0,
            logits: 0,
            loss: 0,
            params: Vec::new(),
            sgd: None,
        };
        g.input = g.tensor(TensorKind::Input, Rows::PerSample(1), g.inputs())?;
        g.labels = g.tensor(TensorKind::Labels, Rows::PerSample(1), 1)?;
        let mut x = g.input;
        for (i, layer, shape) in lowered_layers(net) {
            x = g.layer(i, layer, shape, x)?;
        }
        g.logits = x;
        g.loss = g.tensor(TensorKind::Loss, Rows::Fixed(1), 1)?;
        g.push_forward(Op::SoftmaxCrossEntropy { logits: x, labels: g.labels, loss: g.loss })?;
        Ok(g)
    }

    /// Appends layer `i`'s ops on `x` (of shape `shape`); returns its output.
    fn layer(
        &mut self,
        i: usize,
        layer: Layer,
        shape: Shape,
        x: TensorId,
    ) -> Result<TensorId, GraphError> {
        let geometry = |e: ShapeError| {
            GraphError::Net(NetError {
                layer: Some(i),
                kind: layer.kind(),
                field: None,
                problem: NetProblem::Geometry(e),
            })
        };
        let image = || match shape {
            Shape::Image { c, h, w } => Ok((c, h, w)),
            flat => Err(GraphError::Net(NetError {
                layer: Some(i),
                kind: layer.kind(),
                field: None,
                problem: NetProblem::NeedsImage(flat),
            })),
        };
        let act = |g: &mut Graph, per_sample: u32, cols: u32| {
            g.tensor(TensorKind::Activation, Rows::PerSample(per_sample), cols)
        };
        Ok(match layer {
            Layer::Dense { inputs, outputs } => {
                let (w, b) = self.params_of(inputs, outputs)?;
                let z = act(self, 1, outputs)?;
                self.push_forward(Op::Dense { x, w, y: z })?;
                let zb = act(self, 1, outputs)?;
                self.push_forward(Op::BiasAdd { x: z, b, y: zb })?;
                zb
            }
            Layer::Relu => {
                let info = *self.info(x);
                let h = self.tensor(TensorKind::Activation, info.rows, info.cols)?;
                self.push_forward(Op::Relu { x, y: h })?;
                h
            }
            Layer::Flatten => {
                let info = *self.info(x);
                if info.rows == Rows::PerSample(1) {
                    x
                } else {
                    let per_sample = info.rows(1) * info.cols;
                    let y = act(self, 1, per_sample)?;
                    self.push_forward(Op::Reshape { x, y })?;
                    y
                }
            }
            Layer::Conv2d { out_channels, kernel, stride, padding, .. } => {
                let geom = ConvGeometry::new(image()?, out_channels, kernel, stride, padding)
                    .map_err(geometry)?;
                let (patch, positions) = (geom.patch() as u32, geom.positions() as u32);
                let (w, b) = self.params_of(patch, out_channels)?;
                let patches = act(self, positions, patch)?;
                self.push_forward(Op::Im2col { x, y: patches, geom })?;
                let z = act(self, positions, out_channels)?;
                self.push_forward(Op::Dense { x: patches, w, y: z })?;
                let zb = act(self, positions, out_channels)?;
                self.push_forward(Op::BiasAdd { x: z, b, y: zb })?;
                zb
            }
            Layer::MaxPool2d { kernel, stride } | Layer::AvgPool2d { kernel, stride } => {
                let geom = PoolGeometry::new(image()?, kernel, stride).map_err(geometry)?;
                let y = act(self, geom.out_h() * geom.out_w(), geom.c)?;
                self.push_forward(match layer {
                    Layer::MaxPool2d { .. } => Op::MaxPool { x, y, geom },
                    _ => Op::AvgPool { x, y, geom },
                })?;
                y
            }
        })
    }

    /// A new layer's `fan_in x fan_out` weight and its bias.
    fn params_of(&mut self, fan_in: u32, fan_out: u32) -> Result<(TensorId, TensorId), GraphError> {
        let l = self.params.len() as u8;
        let w = self.tensor(TensorKind::Weight(l), Rows::Fixed(fan_in), fan_out)?;
        let b = self.tensor(TensorKind::Bias(l), Rows::Fixed(1), fan_out)?;
        self.params.push((w, b)).map_err(|_| GraphError::Capacity)?;
        Ok((w, b))
    }
}
