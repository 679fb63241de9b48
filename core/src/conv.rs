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

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use crate::exec::Float;

/// Why a convolution or pooling geometry cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// A channel count, side, kernel or stride of 0.
    Zero(&'static str),
    /// The kernel is larger than the (padded) input: no output position.
    KernelTooLarge { kernel: u32, side: u32 },
}

impl core::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ShapeError::Zero(field) => write!(f, "{field} is 0"),
            ShapeError::KernelTooLarge { kernel, side } => {
                write!(f, "kernel {kernel} is larger than the input side {side} (with padding)")
            }
        }
    }
}

/// The first of `fields` that is 0, as an error naming it.
fn nonzero(fields: &[(u32, &'static str)]) -> Result<(), ShapeError> {
    match fields.iter().find(|(v, _)| *v == 0) {
        Some(&(_, field)) => Err(ShapeError::Zero(field)),
        None => Ok(()),
    }
}

/// A 2-D convolution of `c x h x w` images to `out_c` channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    pub c: u32,
    pub h: u32,
    pub w: u32,
    pub out_c: u32,
    pub kernel: u32,
    pub stride: u32,
    pub padding: u32,
}

impl ConvGeometry {
    pub fn new(
        (c, h, w): (u32, u32, u32),
        out_c: u32,
        kernel: u32,
        stride: u32,
        padding: u32,
    ) -> Result<ConvGeometry, ShapeError> {
        nonzero(&[
            (c, "in channels"),
            (h, "height"),
            (w, "width"),
            (out_c, "out channels"),
            (kernel, "kernel"),
            (stride, "stride"),
        ])?;
        for side in [h, w] {
            if kernel > side + 2 * padding {
                return Err(ShapeError::KernelTooLarge { kernel, side: side + 2 * padding });
            }
        }
        Ok(ConvGeometry { c, h, w, out_c, kernel, stride, padding })
    }

    pub fn out_h(&self) -> u32 {
        (self.h + 2 * self.padding - self.kernel) / self.stride + 1
    }

    pub fn out_w(&self) -> u32 {
        (self.w + 2 * self.padding - self.kernel) / self.stride + 1
    }

    /// Elements of one patch: `c x kernel x kernel` (a row of the patches, a row of `W`).
    pub fn patch(&self) -> usize {
        (self.c * self.kernel * self.kernel) as usize
    }

    /// Output positions of one image: `out_h x out_w`.
    pub fn positions(&self) -> usize {
        (self.out_h() * self.out_w()) as usize
    }

    /// Elements of one input image.
    pub fn image(&self) -> usize {
        (self.c * self.h * self.w) as usize
    }

    /// The input element (index within its image) at patch column `col` of output position
    /// `(oy, ox)`, or `None` in the zero padding.
    fn source(&self, oy: u32, ox: u32, col: usize) -> Option<usize> {
        let kk = (self.kernel * self.kernel) as usize;
        let (ch, r) = (col / kk, col % kk);
        let (ky, kx) = ((r / self.kernel as usize) as u32, (r % self.kernel as usize) as u32);
        let y = (oy * self.stride + ky).checked_sub(self.padding)?;
        let x = (ox * self.stride + kx).checked_sub(self.padding)?;
        (y < self.h && x < self.w).then(|| ((ch as u32 * self.h + y) * self.w + x) as usize)
    }
}

/// The patches of `n` images: `(n x positions) x patch`, zeros in the padding.
pub fn im2col<T: Copy + Default>(g: &ConvGeometry, x: &[T], n: usize) -> Vec<T> {
    assert_eq!(x.len(), n * g.image(), "not {n} images of {} elements", g.image());
    let (p, ow) = (g.patch(), g.out_w());
    let mut cols = vec![T::default(); n * g.positions() * p];
    for b in 0..n {
        let image = &x[b * g.image()..(b + 1) * g.image()];
        for pos in 0..g.positions() {
            let (oy, ox) = (pos as u32 / ow, pos as u32 % ow);
            let row = &mut cols[(b * g.positions() + pos) * p..][..p];
            for (col, v) in row.iter_mut().enumerate() {
                if let Some(i) = g.source(oy, ox, col) {
                    *v = image[i];
                }
            }
        }
    }
    cols
}

/// The patches' gradients added back into `n` images (the input gradient of a convolution):
/// each input element is the sum of the patch elements that read it, in patch-row order.
pub fn col2im<T: Float>(g: &ConvGeometry, cols: &[T], n: usize) -> Vec<T> {
    let (p, ow) = (g.patch(), g.out_w());
    assert_eq!(cols.len(), n * g.positions() * p, "not the patches of {n} images");
    let mut x = vec![T::default(); n * g.image()];
    for b in 0..n {
        for pos in 0..g.positions() {
            let (oy, ox) = (pos as u32 / ow, pos as u32 % ow);
            let row = &cols[(b * g.positions() + pos) * p..][..p];
            for (col, &v) in row.iter().enumerate() {
                if let Some(i) = g.source(oy, ox, col) {
                    let at = b * g.image() + i;
                    x[at] = x[at] + v;
                }
            }
        }
    }
    x
}

/// `n x positions x channels` (rows of channels) to `n x channels x positions`.
pub fn nhwc_to_nchw<T: Copy>(x: &[T], n: usize, positions: usize, channels: usize) -> Vec<T> {
    assert_eq!(x.len(), n * positions * channels);
    let mut out = Vec::with_capacity(x.len());
    for b in 0..n {
        for ch in 0..channels {
            out.extend((0..positions).map(|pos| x[(b * positions + pos) * channels + ch]));
        }
    }
    out
}

/// The inverse of [`nhwc_to_nchw`].
pub fn nchw_to_nhwc<T: Copy>(x: &[T], n: usize, positions: usize, channels: usize) -> Vec<T> {
    assert_eq!(x.len(), n * positions * channels);
    let mut out = Vec::with_capacity(x.len());
    for b in 0..n {
        for pos in 0..positions {
            out.extend((0..channels).map(|ch| x[(b * channels + ch) * positions + pos]));
        }
    }
    out
}

/// A pooling window over `c x h x w` images (no padding; floor mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolGeometry {
    pub c: u32,
    pub h: u32,
    pub w: u32,
    pub kernel: u32,
    pub stride: u32,
}

impl PoolGeometry {
    pub fn new((c, h, w): (u32, u32, u32), kernel: u32, stride: u32) -> Result<Self, ShapeError> {
        nonzero(&[
            (c, "channels"),
            (h, "height"),
            (w, "width"),
            (kernel, "kernel"),
            (stride, "stride"),
        ])?;
        for side in [h, w] {
            if kernel > side {
                return Err(ShapeError::KernelTooLarge { kernel, side });
            }
        }
        Ok(PoolGeometry { c, h, w, kernel, stride })
    }

    pub fn out_h(&self) -> u32 {
        (self.h - self.kernel) / self.stride + 1
    }

    pub fn out_w(&self) -> u32 {
        (self.w - self.kernel) / self.stride + 1
    }

    pub fn image(&self) -> usize {
        (self.c * self.h * self.w) as usize
    }

    pub fn out_image(&self) -> usize {
        (self.c * self.out_h() * self.out_w()) as usize
    }

    /// The input elements (within the image) of output element `o`'s window, row by row.
    fn window(&self, o: usize) -> impl Iterator<Item = usize> + '_ {
        let (oh, ow) = (self.out_h() as usize, self.out_w() as usize);
        let (ch, oy, ox) = (o / (oh * ow), o / ow % oh, o % ow);
        let k = self.kernel as usize;
        let (y0, x0) = (oy * self.stride as usize, ox * self.stride as usize);
        (0..k * k).map(move |i| (ch * self.h as usize + y0 + i / k) * self.w as usize + x0 + i % k)
    }
}

/// Max pooling of `n` images: the outputs, and for each the index within its image of the
/// element it took (the first of equal maxima, in window order; a NaN wins, as in PyTorch).
pub fn max_pool<T: Float>(g: &PoolGeometry, x: &[T], n: usize) -> (Vec<T>, Vec<u32>) {
    assert_eq!(x.len(), n * g.image());
    let mut y = Vec::with_capacity(n * g.out_image());
    let mut at = Vec::with_capacity(n * g.out_image());
    for b in 0..n {
        let image = &x[b * g.image()..][..g.image()];
        for o in 0..g.out_image() {
            let mut best = g.window(o).next().expect("a window is never empty");
            for i in g.window(o) {
                let (v, m) = (image[i], image[best]);
                #[allow(clippy::eq_op)]
                let nan = v != v;
                #[allow(clippy::eq_op)]
                let best_nan = m != m;
                if !best_nan && (nan || v > m) {
                    best = i;
                }
            }
            y.push(image[best]);
            at.push(best as u32);
        }
    }
    (y, at)
}

/// The input gradient of [`max_pool`]: each output's gradient goes to the element it took.
pub fn max_pool_grad<T: Float>(g: &PoolGeometry, dy: &[T], at: &[u32], n: usize) -> Vec<T> {
    assert_eq!((dy.len(), at.len()), (n * g.out_image(), n * g.out_image()));
    let mut dx = vec![T::default(); n * g.image()];
    for b in 0..n {
        for o in 0..g.out_image() {
            let i = b * g.image() + at[b * g.out_image() + o] as usize;
            dx[i] = dx[i] + dy[b * g.out_image() + o];
        }
    }
    dx
}

/// Average pooling of `n` images: each window's sum in window order, divided by its size.
pub fn avg_pool<T: Float>(g: &PoolGeometry, x: &[T], n: usize) -> Vec<T> {
    assert_eq!(x.len(), n * g.image());
    let size = T::from_f64((g.kernel * g.kernel) as f64);
    let mut y = Vec::with_capacity(n * g.out_image());
    for b in 0..n {
        let image = &x[b * g.image()..][..g.image()];
        for o in 0..g.out_image() {
            y.push(g.window(o).fold(T::default(), |s, i| s + image[i]) / size);
        }
    }
    y
}

/// The input gradient of [`avg_pool`]: each output's gradient, divided by the window's size,
/// added to every element of its window.
pub fn avg_pool_grad<T: Float>(g: &PoolGeometry, dy: &[T], n: usize) -> Vec<T> {
    assert_eq!(dy.len(), n * g.out_image());
    let size = T::from_f64((g.kernel * g.kernel) as f64);
    let mut dx = vec![T::default(); n * g.image()];
    for b in 0..n {
        for o in 0..g.out_image() {
            let share = dy[b * g.out_image() + o] / size;
            for i in g.window(o) {
                dx[b * g.image() + i] = dx[b * g.image() + i] + share;
            }
        }
    }
    dx
}

#[cfg(test)]
mod tests;
