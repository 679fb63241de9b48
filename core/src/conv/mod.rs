//! Convolution and pooling over NCHW images, as the graph's image ops will run them on every
//! machine: a convolution is a GEMM of its input's patches (`im2col`) with its weights, its
//! input gradient the patches' gradients added back into place (`col2im`), pooling a window
//! reduction. Geometry follows PyTorch's `nn.Conv2d` (square kernel, stride, zero padding) and
//! `nn.MaxPool2d` / `nn.AvgPool2d` (square window, stride, no padding, floor mode).
//!
//! Layouts: an image batch is `n` images of `c x h x w`, each image contiguous (one row of a
//! `batch x features` matrix); patches are `(n, oh, ow)` rows of `(c, kh, kw)` columns, so with
//! PyTorch's weight `[out, in, kh, kw]` as an `out x patch` matrix `W`, `patches x W^T` is the
//! output in `(n, oh, ow)` rows of `out` columns (NHWC; [`nhwc_to_nchw`] puts it back).

mod geometry;
#[cfg(feature = "alloc")]
mod ops;

pub use geometry::{ConvGeometry, PoolGeometry, ShapeError};
#[cfg(feature = "alloc")]
pub use ops::{
    avg_pool, avg_pool_grad, col2im, im2col, max_pool, max_pool_grad, nchw_to_nhwc, nhwc_to_nchw,
};

#[cfg(all(test, feature = "alloc"))]
mod tests;
