//! A bounded graph IR for multilayer perceptrons, and autodiff over it.
//!
//! A [`Graph`] holds tensors and three op lists: `forward` (dense, bias add, ReLU, softmax
//! cross-entropy), `backward` (built from `forward` by [`Graph::differentiate`], in reverse
//! order) and `update` (one SGD op per parameter, by [`Graph::optimize`]). Every machine runs
//! the same graph: the CPU reference executor interprets it op by op, the compiler lowers it to
//! programs, the GPU backend to kernels. Rows of activations are the batch dimension, fixed only
//! when a step is compiled or run.

use heapless::Vec;

/// Most dense layers an MLP may have.
pub const MAX_LAYERS: usize = 8;
/// Most tensors and ops in one graph.
pub const MAX_TENSORS: usize = 96;
pub const MAX_OPS: usize = 48;
/// Widest layer.
pub const MAX_WIDTH: u32 = 1 << 16;

/// Index of a tensor in [`Graph::tensors`].
pub type TensorId = u8;

/// What a tensor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TensorKind {
    /// The input batch, `batch x inputs`.
    Input,
    /// Class labels, one per row of the batch.
    Labels,
    /// Layer `l`'s weight matrix, `fan_in x fan_out`, f32 master copy.
    Weight(u8),
    /// Layer `l`'s bias, `1 x fan_out`, f32.
    Bias(u8),
    /// An intermediate, `batch x cols`.
    Activation,
    /// The mean loss over the batch, `1 x 1`.
    Loss,
    /// The gradient of the loss with respect to another tensor.
    Grad(TensorId),
    /// SGD momentum buffer of a parameter.
    Velocity(TensorId),
}

/// Shape and kind of one tensor. `rows: None` means "the batch size".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorInfo {
    pub kind: TensorKind,
    pub rows: Option<u32>,
    pub cols: u32,
}

impl TensorInfo {
    pub fn rows(&self, batch: u32) -> u32 {
        self.rows.unwrap_or(batch)
    }
    pub fn is_param(&self) -> bool {
        matches!(self.kind, TensorKind::Weight(_) | TensorKind::Bias(_))
    }
}

/// One operation. Outputs are always new tensors (no in-place ops) except SGD's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// `y = x w`.
    Dense { x: TensorId, w: TensorId, y: TensorId },
    /// `y = x + b` (b broadcast over rows).
    BiasAdd { x: TensorId, b: TensorId, y: TensorId },
    /// `y = max(x, 0)`.
    Relu { x: TensorId, y: TensorId },
    /// `loss = mean over rows of -log softmax(logits)[label]`.
    SoftmaxCrossEntropy { logits: TensorId, labels: TensorId, loss: TensorId },
    /// `dlogits = (softmax(logits) - onehot(labels)) / batch`.
    SoftmaxCrossEntropyGrad { logits: TensorId, labels: TensorId, dlogits: TensorId },
    /// `dx = dy w^T`.
    DenseGradInput { dy: TensorId, w: TensorId, dx: TensorId },
    /// `dw = x^T dy`.
    DenseGradWeight { x: TensorId, dy: TensorId, dw: TensorId },
    /// `db = sum over rows of dy`.
    BiasGrad { dy: TensorId, db: TensorId },
    /// `dx = y > 0 ? dy : 0`, with `y` the ReLU's output (as PyTorch's threshold_backward).
    ReluGrad { dy: TensorId, y: TensorId, dx: TensorId },
    /// `g' = g + wd * p; v = momentum * v + g'; p -= lr * v` (without momentum: `p -= lr * g'`).
    Sgd { param: TensorId, grad: TensorId, velocity: Option<TensorId> },
}

/// The layer widths of an MLP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlpSpec {
    pub inputs: u32,
    pub hidden: Vec<u32, MAX_LAYERS>,
    pub classes: u32,
}

impl MlpSpec {
    /// Widths from the input to the output: `inputs, hidden..., classes`.
    pub fn widths(&self) -> impl Iterator<Item = u32> + '_ {
        core::iter::once(self.inputs).chain(self.hidden.iter().copied()).chain([self.classes])
    }
    pub fn layers(&self) -> usize {
        self.hidden.len() + 1
    }
    /// Parameters (weights and biases) in all layers.
    pub fn parameter_count(&self) -> u64 {
        let w: Vec<u32, { MAX_LAYERS + 2 }> = self.widths().collect();
        w.windows(2).map(|p| p[0] as u64 * p[1] as u64 + p[1] as u64).sum()
    }
}

/// Stochastic gradient descent settings.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sgd {
    pub lr: f32,
    /// 0 for plain SGD.
    pub momentum: f32,
    /// L2 penalty added to the gradient: `g + weight_decay * p`. 0 for none.
    pub weight_decay: f32,
}

/// Why a graph cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GraphError {
    /// More hidden layers than [`MAX_LAYERS`] allows.
    TooManyLayers { layers: usize, max: usize },
    /// A layer of width 0 or wider than [`MAX_WIDTH`]; layer 0 is the input.
    Width { layer: usize, width: u32 },
    /// Fewer than two classes.
    Classes { classes: u32 },
    /// The graph's bounded storage is full.
    Capacity,
    /// Learning rate, momentum or weight decay not finite, or out of range.
    Hyper { name: &'static str },
    /// `differentiate` before a loss, or twice.
    NotDifferentiable,
}

impl core::fmt::Display for GraphError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            GraphError::TooManyLayers { layers, max } => {
                write!(f, "{layers} hidden layers: at most {max} are supported")
            }
            GraphError::Width { layer, width } => {
                write!(f, "layer {layer} has width {width}: widths must be 1 to {MAX_WIDTH}")
            }
            GraphError::Classes { classes } => {
                write!(f, "{classes} classes: a classifier needs at least 2")
            }
            GraphError::Capacity => write!(f, "the graph exceeds its bounded storage"),
            GraphError::Hyper { name } => write!(f, "{name} must be finite and in range"),
            GraphError::NotDifferentiable => {
                write!(f, "the graph has no loss to differentiate, or is already differentiated")
            }
        }
    }
}

/// A training graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    pub spec: MlpSpec,
    pub tensors: Vec<TensorInfo, MAX_TENSORS>,
    pub forward: Vec<Op, MAX_OPS>,
    pub backward: Vec<Op, MAX_OPS>,
    pub update: Vec<Op, MAX_OPS>,
    pub input: TensorId,
    pub labels: TensorId,
    pub logits: TensorId,
    pub loss: TensorId,
    /// `(weight, bias)` of each layer, input side first.
    pub params: Vec<(TensorId, TensorId), MAX_LAYERS>,
    pub sgd: Option<Sgd>,
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
        let mut g = Graph {
            spec: spec.clone(),
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
        g.input = g.tensor(TensorKind::Input, None, spec.inputs)?;
        g.labels = g.tensor(TensorKind::Labels, None, 1)?;
        let widths: Vec<u32, { MAX_LAYERS + 2 }> = spec.widths().collect();
        let mut x = g.input;
        for (l, pair) in widths.windows(2).enumerate() {
            let (fan_in, fan_out) = (pair[0], pair[1]);
            let w = g.tensor(TensorKind::Weight(l as u8), Some(fan_in), fan_out)?;
            let b = g.tensor(TensorKind::Bias(l as u8), Some(1), fan_out)?;
            g.params.push((w, b)).map_err(|_| GraphError::Capacity)?;
            let z = g.tensor(TensorKind::Activation, None, fan_out)?;
            g.push_forward(Op::Dense { x, w, y: z })?;
            let zb = g.tensor(TensorKind::Activation, None, fan_out)?;
            g.push_forward(Op::BiasAdd { x: z, b, y: zb })?;
            x = zb;
            if l + 2 < widths.len() {
                let h = g.tensor(TensorKind::Activation, None, fan_out)?;
                g.push_forward(Op::Relu { x: zb, y: h })?;
                x = h;
            }
        }
        g.logits = x;
        g.loss = g.tensor(TensorKind::Loss, Some(1), 1)?;
        g.push_forward(Op::SoftmaxCrossEntropy { logits: x, labels: g.labels, loss: g.loss })?;
        Ok(g)
    }

    /// A full training graph: forward, backward, SGD update.
    pub fn training(spec: &MlpSpec, sgd: Sgd) -> Result<Graph, GraphError> {
        let mut g = Graph::mlp(spec)?;
        g.differentiate()?;
        g.optimize(sgd)?;
        Ok(g)
    }

    fn tensor(
        &mut self,
        kind: TensorKind,
        rows: Option<u32>,
        cols: u32,
    ) -> Result<TensorId, GraphError> {
        let id = self.tensors.len() as TensorId;
        self.tensors.push(TensorInfo { kind, rows, cols }).map_err(|_| GraphError::Capacity)?;
        Ok(id)
    }

    fn push_forward(&mut self, op: Op) -> Result<(), GraphError> {
        self.forward.push(op).map_err(|_| GraphError::Capacity)
    }

    fn push_backward(&mut self, op: Op) -> Result<(), GraphError> {
        self.backward.push(op).map_err(|_| GraphError::Capacity)
    }

    fn grad_of(&mut self, of: TensorId) -> Result<TensorId, GraphError> {
        let info = self.tensors[of as usize];
        self.tensor(TensorKind::Grad(of), info.rows, info.cols)
    }

    /// Autodiff: appends to `backward` the gradient of the loss with respect to every parameter,
    /// walking `forward` in reverse. Gradients of the input are not computed.
    pub fn differentiate(&mut self) -> Result<(), GraphError> {
        if !self.backward.is_empty()
            || !matches!(self.forward.last(), Some(Op::SoftmaxCrossEntropy { .. }))
        {
            return Err(GraphError::NotDifferentiable);
        }
        // grad[t]: the tensor holding dloss/dt, once known.
        let mut grad = [None::<TensorId>; MAX_TENSORS];
        let forward = self.forward.clone();
        for op in forward.iter().rev() {
            match *op {
                Op::SoftmaxCrossEntropy { logits, labels, .. } => {
                    let dlogits = self.grad_of(logits)?;
                    self.push_backward(Op::SoftmaxCrossEntropyGrad { logits, labels, dlogits })?;
                    grad[logits as usize] = Some(dlogits);
                }
                Op::BiasAdd { x, b, y } => {
                    let dy = grad[y as usize].ok_or(GraphError::NotDifferentiable)?;
                    let db = self.grad_of(b)?;
                    self.push_backward(Op::BiasGrad { dy, db })?;
                    grad[b as usize] = Some(db);
                    grad[x as usize] = Some(dy); // identity: the same tensor
                }
                Op::Relu { x, y } => {
                    let dy = grad[y as usize].ok_or(GraphError::NotDifferentiable)?;
                    let dx = self.grad_of(x)?;
                    self.push_backward(Op::ReluGrad { dy, y, dx })?;
                    grad[x as usize] = Some(dx);
                }
                Op::Dense { x, w, y } => {
                    let dy = grad[y as usize].ok_or(GraphError::NotDifferentiable)?;
                    let dw = self.grad_of(w)?;
                    self.push_backward(Op::DenseGradWeight { x, dy, dw })?;
                    grad[w as usize] = Some(dw);
                    if x != self.input {
                        let dx = self.grad_of(x)?;
                        self.push_backward(Op::DenseGradInput { dy, w, dx })?;
                        grad[x as usize] = Some(dx);
                    }
                }
                _ => return Err(GraphError::NotDifferentiable),
            }
        }
        Ok(())
    }

    /// Appends one SGD op per parameter (with a velocity buffer when `momentum > 0`).
    pub fn optimize(&mut self, sgd: Sgd) -> Result<(), GraphError> {
        if !sgd.lr.is_finite() || sgd.lr <= 0.0 {
            return Err(GraphError::Hyper { name: "learning rate (> 0)" });
        }
        if !sgd.momentum.is_finite() || !(0.0..1.0).contains(&sgd.momentum) {
            return Err(GraphError::Hyper { name: "momentum (0 <= m < 1)" });
        }
        if !sgd.weight_decay.is_finite() || sgd.weight_decay < 0.0 {
            return Err(GraphError::Hyper { name: "weight decay (>= 0)" });
        }
        let params = self.params.clone();
        for (w, b) in params {
            for param in [w, b] {
                let grad = self.gradient(param).ok_or(GraphError::NotDifferentiable)?;
                let velocity = if sgd.momentum > 0.0 {
                    let info = self.tensors[param as usize];
                    Some(self.tensor(TensorKind::Velocity(param), info.rows, info.cols)?)
                } else {
                    None
                };
                self.update
                    .push(Op::Sgd { param, grad, velocity })
                    .map_err(|_| GraphError::Capacity)?;
            }
        }
        self.sgd = Some(sgd);
        Ok(())
    }

    /// The tensor holding the gradient of `of`, if `differentiate` made one.
    pub fn gradient(&self, of: TensorId) -> Option<TensorId> {
        self.tensors.iter().position(|t| t.kind == TensorKind::Grad(of)).map(|i| i as TensorId)
    }

    pub fn info(&self, t: TensorId) -> &TensorInfo {
        &self.tensors[t as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hidden: &[u32]) -> MlpSpec {
        MlpSpec { inputs: 64, hidden: Vec::from_slice(hidden).unwrap(), classes: 10 }
    }

    #[test]
    fn autodiff_of_a_two_layer_mlp() {
        let g = Graph::training(&spec(&[32]), Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 })
            .unwrap();
        assert_eq!(g.forward.len(), 6); // dense, bias, relu, dense, bias, loss
        let kinds: Vec<&str, 16> = g
            .backward
            .iter()
            .map(|op| match op {
                Op::SoftmaxCrossEntropyGrad { .. } => "xent",
                Op::BiasGrad { .. } => "db",
                Op::DenseGradWeight { .. } => "dw",
                Op::DenseGradInput { .. } => "dx",
                Op::ReluGrad { .. } => "relu'",
                _ => "?",
            })
            .collect();
        assert_eq!(&kinds[..], &["xent", "db", "dw", "dx", "relu'", "db", "dw"]);
        assert_eq!(g.update.len(), 4);
        assert!(g.update.iter().all(|op| matches!(op, Op::Sgd { velocity: Some(_), .. })));
        assert_eq!(spec(&[32]).parameter_count(), 64 * 32 + 32 + 32 * 10 + 10);
    }

    #[test]
    fn bad_specs_are_named() {
        assert_eq!(Graph::mlp(&spec(&[0])).unwrap_err(), GraphError::Width { layer: 1, width: 0 });
        let one = MlpSpec { classes: 1, ..spec(&[]) };
        assert_eq!(Graph::mlp(&one).unwrap_err(), GraphError::Classes { classes: 1 });
        let sgd = Sgd { lr: f32::NAN, momentum: 0.0, weight_decay: 0.0 };
        assert!(matches!(Graph::training(&spec(&[8]), sgd), Err(GraphError::Hyper { .. })));
    }
}
