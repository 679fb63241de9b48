//! The image ops on buffers: patches, their adjoint, layout changes and pooling.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use super::{ConvGeometry, PoolGeometry};
use crate::numerics::Float;

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
    col2im_with(g, cols, n, |a, b| a + b)
}

/// [`col2im`] with the sums made by `add(sum, value)`, from zero (a machine's adder).
pub fn col2im_with<T: Float>(
    g: &ConvGeometry,
    cols: &[T],
    n: usize,
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
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
                    x[at] = add(x[at], v);
                }
            }
        }
    }
    x
}

/// A convolution's weight from PyTorch's `[out, in, kh, kw]` to the `(kh, kw, in) x out`
/// matrix the patches multiply.
pub fn weight_from_pytorch<T: Copy>(g: &ConvGeometry, w: &[T]) -> Vec<T> {
    let (taps, c, out) = (g.taps(), g.c as usize, g.out_c as usize);
    assert_eq!(w.len(), out * c * taps);
    let mut m = Vec::with_capacity(w.len());
    for tap in 0..taps {
        for ch in 0..c {
            m.extend((0..out).map(|o| w[(o * c + ch) * taps + tap]));
        }
    }
    m
}

/// The inverse of [`weight_from_pytorch`].
pub fn weight_to_pytorch<T: Copy>(g: &ConvGeometry, m: &[T]) -> Vec<T> {
    let (taps, c, out) = (g.taps(), g.c as usize, g.out_c as usize);
    assert_eq!(m.len(), out * c * taps);
    let mut w = Vec::with_capacity(m.len());
    for o in 0..out {
        for ch in 0..c {
            w.extend((0..taps).map(|tap| m[(tap * c + ch) * out + o]));
        }
    }
    w
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
    max_pool_grad_with(g, dy, at, n, |a, b| a + b)
}

/// [`max_pool_grad`] with the sums (of overlapping windows' gradients) made by `add`, from zero.
pub fn max_pool_grad_with<T: Float>(
    g: &PoolGeometry,
    dy: &[T],
    at: &[u32],
    n: usize,
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
    assert_eq!((dy.len(), at.len()), (n * g.out_image(), n * g.out_image()));
    let mut dx = vec![T::default(); n * g.image()];
    for b in 0..n {
        for o in 0..g.out_image() {
            let i = b * g.image() + at[b * g.out_image() + o] as usize;
            dx[i] = add(dx[i], dy[b * g.out_image() + o]);
        }
    }
    dx
}

/// Average pooling of `n` images: each window's sum in window order, divided by its size.
pub fn avg_pool<T: Float>(g: &PoolGeometry, x: &[T], n: usize) -> Vec<T> {
    avg_pool_with(g, x, n, |a, b| a + b, |s| s / T::from_f64(g.size() as f64))
}

/// [`avg_pool`] with each window's sum made by `add`, from zero in window order, and turned
/// into the mean by `mean`.
pub fn avg_pool_with<T: Float>(
    g: &PoolGeometry,
    x: &[T],
    n: usize,
    add: impl Fn(T, T) -> T,
    mean: impl Fn(T) -> T,
) -> Vec<T> {
    assert_eq!(x.len(), n * g.image());
    let mut y = Vec::with_capacity(n * g.out_image());
    for b in 0..n {
        let image = &x[b * g.image()..][..g.image()];
        for o in 0..g.out_image() {
            y.push(mean(g.window(o).fold(T::default(), |s, i| add(s, image[i]))));
        }
    }
    y
}

/// The input gradient of [`avg_pool`]: each output's gradient, divided by the window's size,
/// added to every element of its window.
pub fn avg_pool_grad<T: Float>(g: &PoolGeometry, dy: &[T], n: usize) -> Vec<T> {
    avg_pool_grad_with(g, dy, n, |a, b| a + b, |d| d / T::from_f64(g.size() as f64))
}

/// [`avg_pool_grad`] with each output's share made by `mean` and the shares added to the
/// elements (from zero, outputs in order) by `add`.
pub fn avg_pool_grad_with<T: Float>(
    g: &PoolGeometry,
    dy: &[T],
    n: usize,
    add: impl Fn(T, T) -> T,
    mean: impl Fn(T) -> T,
) -> Vec<T> {
    assert_eq!(dy.len(), n * g.out_image());
    let mut dx = vec![T::default(); n * g.image()];
    for b in 0..n {
        for o in 0..g.out_image() {
            let share = mean(dy[b * g.out_image() + o]);
            for i in g.window(o) {
                dx[b * g.image() + i] = add(dx[b * g.image() + i], share);
            }
        }
    }
    dx
}
