//! The GPU's image kernels (patches, their adjoint, max and average pooling and their
//! gradients) over channels-last (HWC) image batches, as the graph's image ops define them
//! ([`systole_core::conv`]), each beside its **CPU twin** as in [`super::kernels`].
//!
//! Every kernel gathers: one thread per element it writes, so nothing is added atomically and
//! every sum has one fixed order, the reference's. `col2im` sums the patch elements that read an
//! input element in patch-row order, the pooling gradients the windows that hold it in output
//! order, as `conv::col2im`, `conv::max_pool_grad` and `conv::avg_pool_grad` add them: the
//! kernels equal the f32 reference bit for bit. The max-pooling gradient finds each window's
//! maximum again in the pool's input (the first of equal maxima; a NaN wins), as the graph's
//! `MaxPoolGrad` does, so no index buffer is kept.

use systole_core::conv::{ConvGeometry, PoolGeometry};

use super::kernels::Kernel;

/// A parameter list: `bufs`, then a convolution's geometry (`n, c, h, w, oh, ow, k, s, p`).
macro_rules! conv_params {
    ($($buf:literal),*) => {
        &[$($buf,)* "int n", "int c", "int h", "int w", "int oh", "int ow", "int k", "int s", "int p"]
    };
}
/// A parameter list: `bufs`, then a pooling window's geometry (`n, c, h, w, oh, ow, k, s`).
macro_rules! pool_params {
    ($($buf:literal),*) => {
        &[$($buf,)* "int n", "int c", "int h", "int w", "int oh", "int ow", "int k", "int s"]
    };
}

pub const IM2COL: Kernel =
    Kernel { name: "systole_im2col", params: conv_params!("const float* x", "float* cols") };
pub const COL2IM: Kernel =
    Kernel { name: "systole_col2im", params: conv_params!("const float* cols", "float* x") };
pub const MAX_POOL: Kernel =
    Kernel { name: "systole_max_pool", params: pool_params!("const float* x", "float* y") };
pub const MAX_POOL_GRAD: Kernel = Kernel {
    name: "systole_max_pool_grad",
    params: pool_params!("const float* dy", "const float* x", "float* dx"),
};
pub const AVG_POOL: Kernel =
    Kernel { name: "systole_avg_pool", params: pool_params!("const float* x", "float* y") };
pub const AVG_POOL_GRAD: Kernel =
    Kernel { name: "systole_avg_pool_grad", params: pool_params!("const float* dy", "float* dx") };

/// Every kernel in [`SOURCE`], in its order.
pub const ALL: [Kernel; 6] = [IM2COL, COL2IM, MAX_POOL, MAX_POOL_GRAD, AVG_POOL, AVG_POOL_GRAD];

/// A convolution's geometry as its kernels take it: `n, c, h, w, oh, ow, k, s, p`.
pub fn conv_args(g: &ConvGeometry, n: usize) -> [i32; 9] {
    let [c, h, w, oh, ow] = [g.c, g.h, g.w, g.out_h(), g.out_w()].map(|v| v as i32);
    [n as i32, c, h, w, oh, ow, g.kernel as i32, g.stride as i32, g.padding as i32]
}

/// A pooling window's geometry as its kernels take it: `n, c, h, w, oh, ow, k, s`.
pub fn pool_args(g: &PoolGeometry, n: usize) -> [i32; 8] {
    let [c, h, w, oh, ow] = [g.c, g.h, g.w, g.out_h(), g.out_w()].map(|v| v as i32);
    [n as i32, c, h, w, oh, ow, g.kernel as i32, g.stride as i32]
}

/// The kernels' CUDA C source, appended to [`super::kernels::SOURCE`] when compiled. Each
/// kernel's twin below follows it statement for statement: change both together.
pub const SOURCE: &str = r#"
// Systole's image kernels over channels-last (HWC) batches. Every kernel has a CPU twin in
// host/src/gpu/image_kernels.rs that follows it statement for statement; change both together.
// One thread per element written; every sum in the reference's order.

// Element i of an n x h x w x c batch: its image, row, column and channel.
__device__ void systole_hwc(int i, int c, int w, int h, int* b, int* y, int* x, int* ch) {
    *ch = i % c;
    *x = (i / c) % w;
    *y = (i / c / w) % h;
    *b = i / c / w / h;
}

extern "C" __global__ void systole_im2col(const float* x, float* cols, int n, int c, int h, int w, int oh, int ow, int k, int s, int p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int patch = k * k * c;
    if (i >= n * oh * ow * patch) return;
    int col = i % patch;
    int row = i / patch;
    int ch = col % c;
    int kx = (col / c) % k;
    int ky = (col / c) / k;
    int ox = row % ow;
    int oy = (row / ow) % oh;
    int b = row / (ow * oh);
    int y = oy * s + ky - p;
    int xx = ox * s + kx - p;
    float v = 0.0f;
    if (y >= 0 && y < h && xx >= 0 && xx < w) v = x[((b * h + y) * w + xx) * c + ch];
    cols[i] = v;
}

extern "C" __global__ void systole_col2im(const float* cols, float* x, int n, int c, int h, int w, int oh, int ow, int k, int s, int p) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * h * w * c) return;
    int patch = k * k * c;
    int b, y, xx, ch;
    systole_hwc(i, c, w, h, &b, &y, &xx, &ch);
    float sum = 0.0f;
    for (int oy = 0; oy < oh; ++oy) {
        int ky = y + p - oy * s;
        if (ky < 0 || ky >= k) continue;
        for (int ox = 0; ox < ow; ++ox) {
            int kx = xx + p - ox * s;
            if (kx < 0 || kx >= k) continue;
            sum = sum + cols[((b * oh + oy) * ow + ox) * patch + (ky * k + kx) * c + ch];
        }
    }
    x[i] = sum;
}

// The input index (within the batch) of the first maximum of output (b, oy, ox, ch)'s window;
// a NaN wins.
__device__ int systole_window_max(const float* x, int b, int oy, int ox, int ch, int c, int h, int w, int k, int s) {
    int best = ((b * h + oy * s) * w + ox * s) * c + ch;
    for (int t = 0; t < k * k; ++t) {
        int at = ((b * h + oy * s + t / k) * w + ox * s + t % k) * c + ch;
        float v = x[at];
        float m = x[best];
        if (!(m != m) && ((v != v) || v > m)) best = at;
    }
    return best;
}

extern "C" __global__ void systole_max_pool(const float* x, float* y, int n, int c, int h, int w, int oh, int ow, int k, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * oh * ow * c) return;
    int b, oy, ox, ch;
    systole_hwc(i, c, ow, oh, &b, &oy, &ox, &ch);
    y[i] = x[systole_window_max(x, b, oy, ox, ch, c, h, w, k, s)];
}

extern "C" __global__ void systole_max_pool_grad(const float* dy, const float* x, float* dx, int n, int c, int h, int w, int oh, int ow, int k, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * h * w * c) return;
    int b, y, xx, ch;
    systole_hwc(i, c, w, h, &b, &y, &xx, &ch);
    float sum = 0.0f;
    for (int oy = 0; oy < oh; ++oy) {
        if (y < oy * s || y >= oy * s + k) continue;
        for (int ox = 0; ox < ow; ++ox) {
            if (xx < ox * s || xx >= ox * s + k) continue;
            if (systole_window_max(x, b, oy, ox, ch, c, h, w, k, s) == i) sum = sum + dy[((b * oh + oy) * ow + ox) * c + ch];
        }
    }
    dx[i] = sum;
}

extern "C" __global__ void systole_avg_pool(const float* x, float* y, int n, int c, int h, int w, int oh, int ow, int k, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * oh * ow * c) return;
    int b, oy, ox, ch;
    systole_hwc(i, c, ow, oh, &b, &oy, &ox, &ch);
    float sum = 0.0f;
    for (int t = 0; t < k * k; ++t) sum = sum + x[((b * h + oy * s + t / k) * w + ox * s + t % k) * c + ch];
    y[i] = sum / (float)(k * k);
}

extern "C" __global__ void systole_avg_pool_grad(const float* dy, float* dx, int n, int c, int h, int w, int oh, int ow, int k, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * h * w * c) return;
    int b, y, xx, ch;
    systole_hwc(i, c, w, h, &b, &y, &xx, &ch);
    float sum = 0.0f;
    for (int oy = 0; oy < oh; ++oy) {
        if (y < oy * s || y >= oy * s + k) continue;
        for (int ox = 0; ox < ow; ++ox) {
            if (xx < ox * s || xx >= ox * s + k) continue;
            sum = sum + dy[((b * oh + oy) * ow + ox) * c + ch] / (float)(k * k);
        }
    }
    dx[i] = sum;
}
"#;

// ---------------------------------------------------------------------------------------------
// The CPU twins: `for i in 0..threads` is the grid, `continue` the kernel's early `return`, and
// the arithmetic is the kernel's, in i32 where it is int.

/// Twin of `systole_im2col`: `n` images' patches, `(n, oh, ow)` rows of `(ky, kx, c)`.
pub fn im2col(g: &ConvGeometry, n: usize, x: &[f32], cols: &mut [f32]) {
    let [n, c, h, w, oh, ow, k, s, p] = conv_args(g, n);
    let patch = k * k * c;
    for i in 0..n * oh * ow * patch {
        let col = i % patch;
        let row = i / patch;
        let ch = col % c;
        let kx = (col / c) % k;
        let ky = (col / c) / k;
        let ox = row % ow;
        let oy = (row / ow) % oh;
        let b = row / (ow * oh);
        let y = oy * s + ky - p;
        let xx = ox * s + kx - p;
        let mut v = 0.0f32;
        if y >= 0 && y < h && xx >= 0 && xx < w {
            v = x[(((b * h + y) * w + xx) * c + ch) as usize];
        }
        cols[i as usize] = v;
    }
}

/// Twin of `systole_col2im`: each input element the sum of the patch elements that read it.
pub fn col2im(g: &ConvGeometry, n: usize, cols: &[f32], x: &mut [f32]) {
    let [n, c, h, w, oh, ow, k, s, p] = conv_args(g, n);
    let patch = k * k * c;
    for i in 0..n * h * w * c {
        let (b, y, xx, ch) = hwc(i, c, w, h);
        let mut sum = 0.0f32;
        for oy in 0..oh {
            let ky = y + p - oy * s;
            if !(0..k).contains(&ky) {
                continue;
            }
            for ox in 0..ow {
                let kx = xx + p - ox * s;
                if !(0..k).contains(&kx) {
                    continue;
                }
                sum += cols[(((b * oh + oy) * ow + ox) * patch + (ky * k + kx) * c + ch) as usize];
            }
        }
        x[i as usize] = sum;
    }
}

/// Twin of `systole_hwc`: element `i` of an `n x h x w x c` batch as (image, row, column,
/// channel).
fn hwc(i: i32, c: i32, w: i32, h: i32) -> (i32, i32, i32, i32) {
    (i / c / w / h, (i / c / w) % h, (i / c) % w, i % c)
}

/// Twin of `systole_window_max`.
#[allow(clippy::eq_op)]
fn window_max(x: &[f32], (b, oy, ox, ch): (i32, i32, i32, i32), [c, h, w, k, s]: [i32; 5]) -> i32 {
    let mut best = ((b * h + oy * s) * w + ox * s) * c + ch;
    for t in 0..k * k {
        let at = ((b * h + oy * s + t / k) * w + ox * s + t % k) * c + ch;
        let v = x[at as usize];
        let m = x[best as usize];
        if !(m != m) && ((v != v) || v > m) {
            best = at;
        }
    }
    best
}

/// Twin of `systole_max_pool`.
pub fn max_pool(g: &PoolGeometry, n: usize, x: &[f32], y: &mut [f32]) {
    let [n, c, h, w, oh, ow, k, s] = pool_args(g, n);
    for i in 0..n * oh * ow * c {
        let (b, oy, ox, ch) = hwc(i, c, ow, oh);
        y[i as usize] = x[window_max(x, (b, oy, ox, ch), [c, h, w, k, s]) as usize];
    }
}

/// Twin of `systole_max_pool_grad`: each input element the sum of the gradients of the
/// windows whose maximum it is.
pub fn max_pool_grad(g: &PoolGeometry, n: usize, dy: &[f32], x: &[f32], dx: &mut [f32]) {
    let [n, c, h, w, oh, ow, k, s] = pool_args(g, n);
    for i in 0..n * h * w * c {
        let (b, y, xx, ch) = hwc(i, c, w, h);
        let mut sum = 0.0f32;
        for (oy, ox) in windows_over((y, xx), [oh, ow, k, s]) {
            if window_max(x, (b, oy, ox, ch), [c, h, w, k, s]) == i {
                sum += dy[(((b * oh + oy) * ow + ox) * c + ch) as usize];
            }
        }
        dx[i as usize] = sum;
    }
}

/// Twin of `systole_avg_pool`.
pub fn avg_pool(g: &PoolGeometry, n: usize, x: &[f32], y: &mut [f32]) {
    let [n, c, h, w, oh, ow, k, s] = pool_args(g, n);
    for i in 0..n * oh * ow * c {
        let (b, oy, ox, ch) = hwc(i, c, ow, oh);
        let mut sum = 0.0f32;
        for t in 0..k * k {
            sum += x[(((b * h + oy * s + t / k) * w + ox * s + t % k) * c + ch) as usize];
        }
        y[i as usize] = sum / (k * k) as f32;
    }
}

/// Twin of `systole_avg_pool_grad`.
pub fn avg_pool_grad(g: &PoolGeometry, n: usize, dy: &[f32], dx: &mut [f32]) {
    let [n, c, h, w, oh, ow, k, s] = pool_args(g, n);
    for i in 0..n * h * w * c {
        let (b, y, xx, ch) = hwc(i, c, w, h);
        let mut sum = 0.0f32;
        for (oy, ox) in windows_over((y, xx), [oh, ow, k, s]) {
            sum += dy[(((b * oh + oy) * ow + ox) * c + ch) as usize] / (k * k) as f32;
        }
        dx[i as usize] = sum;
    }
}

/// The windows `(oy, ox)` that hold input position `(y, x)`, in the kernels' loop order.
fn windows_over((y, x): (i32, i32), [oh, ow, k, s]: [i32; 4]) -> impl Iterator<Item = (i32, i32)> {
    let holds = move |at: i32, o: i32| at >= o * s && at < o * s + k;
    (0..oh)
        .filter(move |&oy| holds(y, oy))
        .flat_map(move |oy| (0..ow).filter(move |&ox| holds(x, ox)).map(move |ox| (oy, ox)))
}

#[cfg(test)]
#[path = "image_kernels_tests.rs"]
mod tests;
