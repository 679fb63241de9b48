extern crate alloc;
use super::*;
use alloc::string::ToString;
use alloc::vec;
use alloc::vec::Vec;

/// A few hundred pseudo-random values in [-1, 1).
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// The convolution by its definition: seven loops over NCHW, PyTorch's weight layout.
fn direct(g: &ConvGeometry, x: &[f64], w: &[f64], n: usize) -> Vec<f64> {
    let (oh, ow, k) = (g.out_h() as i64, g.out_w() as i64, g.kernel as i64);
    let mut y = vec![];
    for b in 0..n {
        for o in 0..g.out_c as usize {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut s = 0.0;
                    for c in 0..g.c as usize {
                        for ky in 0..k {
                            for kx in 0..k {
                                let yy = oy * g.stride as i64 + ky - g.padding as i64;
                                let xx = ox * g.stride as i64 + kx - g.padding as i64;
                                if yy < 0 || xx < 0 || yy >= g.h as i64 || xx >= g.w as i64 {
                                    continue;
                                }
                                let xi = ((b * g.c as usize + c) * g.h as usize + yy as usize)
                                    * g.w as usize
                                    + xx as usize;
                                let wi = ((o * g.c as usize + c) * k as usize + ky as usize)
                                    * k as usize
                                    + kx as usize;
                                s += x[xi] * w[wi];
                            }
                        }
                    }
                    y.push(s);
                }
            }
        }
    }
    y
}

/// `a (m x k) x b (k x n)`, row-major, in f64.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|kk| a[i * k + kk] * b[kk * n + j]).sum();
        }
    }
    c
}

fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..cols).flat_map(|j| (0..rows).map(move |i| a[i * cols + j])).collect()
}

/// The NCHW images of an HWC batch, and the reverse.
fn to_nchw(g: &ConvGeometry, x: &[f64], n: usize) -> Vec<f64> {
    nhwc_to_nchw(x, n, (g.h * g.w) as usize, g.c as usize)
}
fn to_nhwc(g: &ConvGeometry, x: &[f64], n: usize) -> Vec<f64> {
    nchw_to_nhwc(x, n, (g.h * g.w) as usize, g.c as usize)
}

/// `y = nchw(im2col(nhwc(x)) W)` for NCHW `x` and the `patch x out` weight `w`: the GEMM form
/// every machine runs, between PyTorch's layouts.
fn by_gemm(g: &ConvGeometry, x: &[f64], w: &[f64], n: usize) -> Vec<f64> {
    let cols = im2col(g, &to_nhwc(g, x, n), n);
    let y = matmul(&cols, w, n * g.positions(), g.patch(), g.out_c as usize);
    nhwc_to_nchw(&y, n, g.positions(), g.out_c as usize)
}

fn geometries() -> Vec<(ConvGeometry, usize)> {
    [
        ((1, 5, 5), 2, 3, 1, 0, 2),
        ((2, 6, 5), 3, 3, 2, 1, 2),
        ((3, 4, 4), 2, 2, 1, 2, 1),
        ((1, 7, 7), 1, 5, 1, 2, 3),
        ((2, 3, 8), 4, 3, 3, 1, 1),
    ]
    .into_iter()
    .map(|(shape, out, k, s, p, n)| (ConvGeometry::new(shape, out, k, s, p).unwrap(), n))
    .collect()
}

/// The GEMM of the patches is the convolution's definition, at several strides and paddings.
#[test]
fn im2col_gemm_is_the_convolution() {
    for (i, (g, n)) in geometries().into_iter().enumerate() {
        let x = values(i as u64, n * g.image());
        let w = values(100 + i as u64, g.out_c as usize * g.patch());
        let (a, b) = (by_gemm(&g, &x, &weight_from_pytorch(&g, &w), n), direct(&g, &x, &w, n));
        assert_eq!(weight_to_pytorch(&g, &weight_from_pytorch(&g, &w)), w);
        assert_eq!(a.len(), n * g.out_c as usize * g.positions());
        for (u, v) in a.iter().zip(&b) {
            assert!((u - v).abs() < 1e-12, "{g:?}: {u} vs {v}");
        }
    }
}

/// LeNet-5's shapes for 28 x 28 inputs, as PyTorch computes them.
#[test]
fn lenet_shapes_follow_pytorch() {
    let c1 = ConvGeometry::new((1, 28, 28), 6, 5, 1, 2).unwrap();
    assert_eq!((c1.out_h(), c1.out_w()), (28, 28));
    let p1 = PoolGeometry::new((6, 28, 28), 2, 2).unwrap();
    assert_eq!((p1.out_h(), p1.out_w()), (14, 14));
    let c2 = ConvGeometry::new((6, 14, 14), 16, 5, 1, 0).unwrap();
    assert_eq!((c2.out_h(), c2.out_w()), (10, 10));
    let p2 = PoolGeometry::new((16, 10, 10), 2, 2).unwrap();
    assert_eq!(p2.out_image(), 400);
    // Floor mode: a 7-wide input pooled 2 by 2 gives 3.
    assert_eq!(PoolGeometry::new((1, 7, 7), 2, 2).unwrap().out_w(), 3);
    assert_eq!(ConvGeometry::new((1, 7, 7), 1, 3, 2, 0).unwrap().out_w(), 3);
}

#[test]
fn bad_geometries_are_named() {
    assert_eq!(ConvGeometry::new((0, 4, 4), 1, 3, 1, 0), Err(ShapeError::Zero("in channels")));
    assert_eq!(ConvGeometry::new((1, 4, 4), 1, 3, 0, 0), Err(ShapeError::Zero("stride")));
    assert_eq!(
        ConvGeometry::new((1, 4, 2), 1, 5, 1, 1),
        Err(ShapeError::KernelTooLarge { kernel: 5, side: 4 })
    );
    assert_eq!(
        PoolGeometry::new((1, 4, 4), 5, 1),
        Err(ShapeError::KernelTooLarge { kernel: 5, side: 4 })
    );
    assert_eq!(ShapeError::Zero("kernel").to_string(), "kernel is 0");
}

/// `col2im` is the adjoint of `im2col`: `<im2col(x), c> = <x, col2im(c)>`.
#[test]
fn col2im_is_the_adjoint_of_im2col() {
    for (i, (g, n)) in geometries().into_iter().enumerate() {
        let x = values(200 + i as u64, n * g.image());
        let c = values(300 + i as u64, n * g.positions() * g.patch());
        let lhs: f64 = im2col(&g, &x, n).iter().zip(&c).map(|(a, b)| a * b).sum();
        let rhs: f64 = x.iter().zip(&col2im(&g, &c, n)).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-10, "{g:?}: {lhs} vs {rhs}");
    }
}

/// Central differences of `L = sum(y * r)`.
fn numeric(f: impl Fn(&[f64]) -> Vec<f64>, at: &[f64], r: &[f64], i: usize) -> f64 {
    let eps = 1e-6;
    let loss = |d: f64| {
        let mut v = at.to_vec();
        v[i] += d;
        f(&v).iter().zip(r).map(|(a, b)| a * b).sum::<f64>()
    };
    (loss(eps) - loss(-eps)) / (2.0 * eps)
}

#[track_caller]
fn close(analytic: f64, numeric: f64, what: &str) {
    assert!(
        (analytic - numeric).abs() < 1e-6 * (1.0 + numeric.abs()),
        "{what}: {analytic} vs {numeric}"
    );
}

/// The convolution's gradients as GEMMs (the weight gradient `patches^T dY`, the input
/// gradient `col2im(dY W^T)`) match finite differences.
#[test]
fn convolution_gradients_match_finite_differences() {
    for (i, (g, n)) in geometries().into_iter().enumerate() {
        let (oc, p) = (g.out_c as usize, g.patch());
        let x = values(400 + i as u64, n * g.image());
        let w = values(500 + i as u64, oc * p);
        let r = values(600 + i as u64, n * oc * g.positions());
        let dy = nchw_to_nhwc(&r, n, g.positions(), oc);
        let rows = n * g.positions();
        let patches = im2col(&g, &to_nhwc(&g, &x, n), n);
        let dw = matmul(&transpose(&patches, rows, p), &dy, p, rows, oc);
        let dx = to_nchw(&g, &col2im(&g, &matmul(&dy, &transpose(&w, p, oc), rows, oc, p), n), n);
        for j in (0..w.len()).step_by(3) {
            close(dw[j], numeric(|w| by_gemm(&g, &x, w, n), &w, &r, j), "dW");
        }
        for j in (0..x.len()).step_by(2) {
            close(dx[j], numeric(|x| by_gemm(&g, x, &w, n), &x, &r, j), "dX");
        }
    }
}

/// Pooling against its definition and its gradients against finite differences (max pooling
/// on distinct values, where it is differentiable).
#[test]
fn pooling_and_its_gradients() {
    let g = PoolGeometry::new((2, 5, 6), 2, 2).unwrap();
    let n = 2;
    let x = values(700, n * g.image());
    let r = values(800, n * g.out_image());
    let (y, at) = max_pool(&g, &x, n);
    let mean = avg_pool(&g, &x, n);
    // HWC: output (b 1, row 1, col 2, ch 1) reads rows 2-3, columns 4-5 of channel 1.
    let o = g.out_image() + (g.out_w() as usize + 2) * 2 + 1;
    let base = g.image() + (2 * 6 + 4) * 2 + 1;
    let window = [base, base + 2, base + 12, base + 14];
    let want_max = window.iter().map(|&i| x[i]).fold(f64::MIN, f64::max);
    assert_eq!(y[o], want_max);
    close(mean[o], window.iter().map(|&i| x[i]).sum::<f64>() / 4.0, "avg");
    let dmax = max_pool_grad(&g, &r, &at, n);
    let davg = avg_pool_grad(&g, &r, n);
    for j in 0..x.len() {
        close(dmax[j], numeric(|x| max_pool(&g, x, n).0, &x, &r, j), "max pool dX");
        close(davg[j], numeric(|x| avg_pool(&g, x, n), &x, &r, j), "avg pool dX");
    }
    // Floor mode leaves the last row (row 4 of 5) out of every window: no gradient reaches it.
    assert!((4 * 6 * 2..g.image()).all(|i| dmax[i] == 0.0 && davg[i] == 0.0));
}

/// A NaN in a window is the max (PyTorch's propagation); ties take the first.
#[test]
fn max_pool_takes_nan_and_the_first_of_ties() {
    let g = PoolGeometry::new((1, 2, 2), 2, 2).unwrap();
    let (y, at) = max_pool(&g, &[1.0f32, f32::NAN, 3.0, 3.0], 1);
    assert!(y[0].is_nan() && at == [1]);
    let (y, at) = max_pool(&g, &[3.0f32, 1.0, 3.0, 2.0], 1);
    assert_eq!((y[0], at[0]), (3.0, 0));
}

/// Issue 73 (found by `boundaries::geometry`): fields near `u32::MAX` are refused, their sizes
/// computed with checked 64-bit operations (`2 x (2^32 - 2)^2` elements is past `u64::MAX`).
#[test]
fn fields_near_u32_max_are_refused_without_overflow() {
    let big = u32::MAX - 1;
    let e = ConvGeometry::new((2, big, big), 1, 1, 1, 0).unwrap_err();
    assert_eq!(e.field(), "in");
    assert!(e.to_string().contains("more than 2^64"), "{e}");
    assert!(ConvGeometry::new((u32::MAX, 1, 1), 1, 1, 1, u32::MAX).is_err());
    assert!(ConvGeometry::new((1, 1, 1), 1, u32::MAX, u32::MAX, u32::MAX).is_err());
    assert_eq!(PoolGeometry::new((2, big, big), 1, 1).unwrap_err().field(), "in");
}
