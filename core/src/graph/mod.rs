//! A bounded graph IR for the networks of a layer list, and autodiff over it.
//!
//! A [`Graph`] holds tensors and three op lists: `forward` (built from a [`Net`] by
//! [`Graph::network`]), `backward` (built from `forward` by [`Graph::differentiate`], in reverse
//! order) and `update` (one SGD op per parameter, by [`Graph::optimize`]). Every machine runs
//! the same graph: the CPU reference executor interprets it op by op, the compiler lowers it to
//! programs, the GPU backend to kernels.
//!
//! Every tensor is a row-major matrix. Images are channels-last (`conv`'s HWC): one row per
//! output position of `channels` columns, so a convolution is three ops, its patches
//! (`Im2col`, `positions` rows per sample), a `Dense` with its `patch x out` weight and a
//! `BiasAdd` of its per-channel bias, and its output is the next layer's image as it stands;
//! its backward pass is the dense one's plus `Col2im`. `Flatten` is a `Reshape` to one row per
//! sample, which moves no data. Row counts are fixed only when a step is compiled or run.

use heapless::Vec;

use crate::conv::{ConvGeometry, PoolGeometry};
use crate::layers::{Net, NetError};

mod autodiff;
mod build;
#[cfg(feature = "alloc")]
pub(crate) use build::lowered_layers;
#[cfg(test)]
mod tests;

/// Most tensors and ops in one graph.
pub const MAX_TENSORS: usize = 128;
pub const MAX_OPS: usize = 64;
pub use crate::layers::{MAX_LAYERS, MAX_WIDTH};
/// Layers of the longest list an [`MlpSpec`] can give: `MAX_LAYERS + 1` dense layers and the
/// ReLUs between them.
const MAX_NET_LAYERS_OF_MLP: usize = 2 * MAX_LAYERS + 1;

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
    /// Layer `l`'s weight matrix, `fan_in x fan_out`, f32 master copy (a convolution's
    /// `fan_in` is its patch, `in x kernel x kernel`).
    Weight(u8),
    /// Layer `l`'s bias, `1 x fan_out`, f32.
    Bias(u8),
    /// An intermediate.
    Activation,
    /// The mean loss over the batch, `1 x 1`.
    Loss,
    /// The gradient of the loss with respect to another tensor.
    Grad(TensorId),
    /// SGD momentum buffer of a parameter.
    Velocity(TensorId),
}

/// How many rows a tensor has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rows {
    /// This many rows per sample of the batch (an activation 1, a convolution's patches and
    /// its NHWC output one per output position).
    PerSample(u32),
    /// A fixed count (parameters, the loss).
    Fixed(u32),
}

/// Shape and kind of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorInfo {
    pub kind: TensorKind,
    pub rows: Rows,
    pub cols: u32,
}

impl TensorInfo {
    /// Rows for a batch of `batch` samples.
    pub fn rows(&self, batch: u32) -> u32 {
        match self.rows {
            // Saturated: a count past u32 fails every size check after it.
            Rows::PerSample(k) => batch.saturating_mul(k),
            Rows::Fixed(n) => n,
        }
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
    /// The patches of images `x`: `positions` rows per sample of `patch` columns, zeros in the
    /// padding (`conv::im2col`).
    Im2col { x: TensorId, y: TensorId, geom: ConvGeometry },
    /// Patch gradients added back into place (`conv::col2im`, the adjoint of `Im2col`).
    Col2im { dy: TensorId, dx: TensorId, geom: ConvGeometry },
    /// The same elements in `y`'s rows and columns (a flatten, and its gradient).
    Reshape { x: TensorId, y: TensorId },
    /// Each window's largest element (`conv::max_pool`; `y` one row per output position).
    MaxPool { x: TensorId, y: TensorId, geom: PoolGeometry },
    /// Each window's gradient to the element it took, found again in the pool's input `x`.
    MaxPoolGrad { dy: TensorId, x: TensorId, dx: TensorId, geom: PoolGeometry },
    /// Each window's mean (`conv::avg_pool`).
    AvgPool { x: TensorId, y: TensorId, geom: PoolGeometry },
    /// Each window's gradient over the window's size, to every element of it.
    AvgPoolGrad { dy: TensorId, dx: TensorId, geom: PoolGeometry },
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

impl Sgd {
    /// The settings a run uses when it names none (`systole train`'s defaults for an MLP):
    /// momentum SGD at a step the digits MLP trains smoothly with, no weight decay.
    pub const DEFAULT: Sgd = Sgd { lr: 0.05, momentum: 0.9, weight_decay: 0.0 };
}

/// Why a graph cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GraphError {
    /// More layers with parameters than [`MAX_LAYERS`] allows (for an MLP: hidden layers, at
    /// most `MAX_LAYERS - 1`).
    TooManyLayers { layers: usize, max: usize },
    /// A layer of width 0 or wider than [`MAX_WIDTH`]; layer 0 is the input.
    Width { layer: usize, width: u32 },
    /// Fewer than two classes.
    Classes { classes: u32 },
    /// The layer list does not make a network.
    Net(NetError),
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
                write!(f, "{layers} layers: at most {max} are supported")
            }
            GraphError::Width { layer, width } => {
                write!(f, "layer {layer} has width {width}: widths must be 1 to {MAX_WIDTH}")
            }
            GraphError::Classes { classes } => {
                write!(f, "{classes} classes: a classifier needs at least 2")
            }
            GraphError::Net(e) => write!(f, "{e}"),
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
    /// The network it was built from.
    pub net: Net,
    pub tensors: Vec<TensorInfo, MAX_TENSORS>,
    pub forward: Vec<Op, MAX_OPS>,
    pub backward: Vec<Op, MAX_OPS>,
    pub update: Vec<Op, MAX_OPS>,
    pub input: TensorId,
    pub labels: TensorId,
    pub logits: TensorId,
    pub loss: TensorId,
    /// `(weight, bias)` of each layer with parameters, input side first.
    pub params: Vec<(TensorId, TensorId), MAX_LAYERS>,
    pub sgd: Option<Sgd>,
}

impl Graph {
    /// Features of one input sample.
    pub fn inputs(&self) -> u32 {
        self.net.input.elements() as u32
    }

    /// Logits of one sample.
    pub fn classes(&self) -> u32 {
        self.net.classes()
    }

    /// The widths of an MLP ([`Net::mlp_widths`]).
    pub fn mlp_widths(&self) -> Option<Vec<u32, { MAX_LAYERS + 2 }>> {
        self.net.mlp_widths()
    }

    /// The tensor holding the gradient of `of`, if `differentiate` made one.
    pub fn gradient(&self, of: TensorId) -> Option<TensorId> {
        self.tensors.iter().position(|t| t.kind == TensorKind::Grad(of)).map(|i| i as TensorId)
    }

    pub fn info(&self, t: TensorId) -> &TensorInfo {
        &self.tensors[t as usize]
    }

    /// The most rows a bias gradient sums for a batch of `batch` (the batch, or a
    /// convolution's output positions over it): how long the ones vector of a `1^T dY` product
    /// must be. `batch` for a graph without bias gradients.
    pub fn bias_sum_rows(&self, batch: u32) -> u32 {
        let rows = self.backward.iter().filter_map(|op| match *op {
            Op::BiasGrad { dy, .. } => Some(self.info(dy).rows(batch)),
            _ => None,
        });
        rows.max().unwrap_or(batch)
    }

    fn tensor(&mut self, kind: TensorKind, rows: Rows, cols: u32) -> Result<TensorId, GraphError> {
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
}
