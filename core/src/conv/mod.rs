//! Convolution and pooling over images, as the graph's image ops run them on every machine: a
//! convolution is a GEMM of its input's patches (`im2col`) with its weights, its input gradient
//! the patches' gradients added back into place (`col2im`), pooling a window reduction.
//! Geometry follows PyTorch's `nn.Conv2d` (square kernel, stride, zero padding) and
//! `nn.MaxPool2d` / `nn.AvgPool2d` (square window, stride, no padding, floor mode).
//!
//! Layouts are channels-last (HWC), as the accelerator runs them: an image batch is `n` images
//! of `h x w x c`, each image contiguous (one row of a `batch x features` matrix, or `h x w`
//! rows of `c`); patches are `(n, oh, ow)` rows of `(kh, kw, c)` columns, and a weight is the
//! `patch x out` matrix `W`, so `patches x W` is the output in `(n, oh, ow)` rows of `out`
//! columns: HWC again, with no transpose between layers. PyTorch's NCHW images and `[out, in,
//! kh, kw]` weights convert at the boundaries ([`nhwc_to_nchw`], [`weight_from_pytorch`]).

mod geometry;
#[cfg(feature = "alloc")]
mod ops;

pub use crate::limits::MAX_PADDED_IMAGE;
pub use geometry::{ConvGeometry, PoolGeometry, ShapeError};
#[cfg(feature = "alloc")]
pub use ops::{
    avg_pool, avg_pool_grad, avg_pool_grad_with, avg_pool_with, col2im, col2im_with, im2col,
    max_pool, max_pool_grad, max_pool_grad_with, nchw_to_nhwc, nhwc_to_nchw, weight_from_pytorch,
    weight_to_pytorch,
};

#[cfg(all(test, feature = "alloc"))]
mod tests;
