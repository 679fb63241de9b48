//! The GPU's own kernels: CUDA C compiled at run time by NVRTC, for what cuBLAS does not do
//! (bias and ReLU, softmax cross-entropy and its gradient, the ReLU gradient, SGD, the f32 to
//! bf16 cast), and beside each one its **CPU twin**: the same formula in Rust, written
//! statement for statement in the kernel's order, one loop iteration per CUDA thread.
//!
//! The twins are what make the kernels checkable without a GPU. They are tested against the
//! core's reference executor ([`systole_core::exec::Plain`]) and its softmax cross-entropy; the
//! CUDA source itself is compiled as C++ on the CPU (a few lines of shim stand in for the CUDA
//! built-ins), run thread by thread, and compared with the twins bit for bit; and the
//! parameter lists the launches push are checked against the source's signatures.
//!
//! The source is compiled with `--fmad=false`, so `a * b + c` rounds twice, as Rust does:
//! SGD then equals `Plain<f32>`'s bit for bit. `expf` and `logf` differ from the CPU's by an ulp
//! or two; everything that uses them is compared by tolerance.

/// Threads per block for every elementwise launch.
pub const BLOCK: u32 = 256;

/// One kernel: its entry point and its parameters, in the order a launch pushes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub name: &'static str,
    pub params: &'static [&'static str],
}

pub const CAST_BF16: Kernel = Kernel {
    name: "systole_cast_bf16",
    params: &["const float* src", "unsigned short* dst", "int n"],
};
pub const BIAS_ACT: Kernel = Kernel {
    name: "systole_bias_act",
    params: &[
        "const float* x",
        "const float* bias",
        "float* y",
        "int rows",
        "int cols",
        "int relu",
    ],
};
pub const RELU: Kernel =
    Kernel { name: "systole_relu", params: &["const float* x", "float* y", "int n"] };
pub const SOFTMAX_XENT: Kernel = Kernel {
    name: "systole_softmax_xent",
    params: &[
        "const float* logits",
        "const int* labels",
        "float* loss",
        "int* correct",
        "float* dlogits",
        "int rows",
        "int classes",
    ],
};
pub const RELU_GRAD: Kernel = Kernel {
    name: "systole_relu_grad",
    params: &["const float* dy", "const float* y", "float* dx", "int n"],
};
pub const SGD_MOMENTUM: Kernel = Kernel {
    name: "systole_sgd_momentum",
    params: &[
        "float* p",
        "const float* g",
        "float* v",
        "int n",
        "float lr",
        "float momentum",
        "float weight_decay",
    ],
};
pub const SGD: Kernel = Kernel {
    name: "systole_sgd",
    params: &["float* p", "const float* g", "int n", "float lr", "float weight_decay"],
};

/// NVRTC options: no contraction of `a * b + c` into an FMA (see the module docs).
pub const NVRTC_FMAD: bool = false;

/// Every kernel in [`SOURCE`], in its order.
pub const ALL: [Kernel; 7] =
    [CAST_BF16, BIAS_ACT, RELU, SOFTMAX_XENT, RELU_GRAD, SGD_MOMENTUM, SGD];

/// Every kernel the GPU run loads: these and the image kernels ([`super::image_kernels`]).
pub fn all() -> impl Iterator<Item = Kernel> {
    ALL.into_iter().chain(super::image_kernels::ALL)
}

/// The source NVRTC compiles: [`SOURCE`], then the image kernels' source.
pub fn full_source() -> String {
    format!("{SOURCE}{}", super::image_kernels::SOURCE)
}

/// [`full_source`] compiled to PTX by NVRTC with the GPU run's options (for the device's default
/// architecture, or `arch` such as `sm_90`). It needs NVRTC (`libs::ensure_loaded` finds it,
/// from a CUDA install or PyPI's `nvidia-cuda-nvrtc-cu12`) but no GPU and no driver, so the
/// tests compile the kernels wherever NVRTC is installed, CI included.
pub fn compile(
    arch: Option<&'static str>,
) -> Result<cudarc::nvrtc::Ptx, cudarc::nvrtc::CompileError> {
    let options = cudarc::nvrtc::CompileOptions {
        fmad: Some(NVRTC_FMAD),
        name: Some("systole_kernels.cu".into()),
        arch,
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(full_source(), options)
}

/// The kernels' CUDA C source. Each kernel's twin below follows it statement for statement:
/// change both together.
pub const SOURCE: &str = r#"
// Systole's GPU kernels. Every kernel has a CPU twin in host/src/gpu/kernels.rs that follows it
// statement for statement; change both together. One thread per element (per row for the
// softmax); compiled with --fmad=false.

extern "C" __global__ void systole_cast_bf16(const float* src, unsigned short* dst, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int bits = __float_as_uint(src[i]);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        dst[i] = (unsigned short)((bits >> 16) | 0x0040u);
        return;
    }
    unsigned int lsb = (bits >> 16) & 1u;
    dst[i] = (unsigned short)((bits + 0x7fffu + lsb) >> 16);
}

extern "C" __global__ void systole_bias_act(const float* x, const float* bias, float* y, int rows, int cols, int relu) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float v = x[i] + bias[i % cols];
    if (relu != 0 && v <= 0.0f) v = 0.0f;
    y[i] = v;
}

extern "C" __global__ void systole_relu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    y[i] = v <= 0.0f ? 0.0f : v;
}

extern "C" __global__ void systole_softmax_xent(const float* logits, const int* labels, float* loss, int* correct, float* dlogits, int rows, int classes) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* row = logits + (long long)r * classes;
    float* grad = dlogits + (long long)r * classes;
    int label = labels[r];
    float max = __int_as_float(0xff800000);
    int arg = 0;
    for (int j = 0; j < classes; ++j) {
        max = fmaxf(max, row[j]);
        if (row[j] > row[arg] || row[arg] != row[arg]) arg = j;
    }
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) sum += expf(row[j] - max);
    for (int j = 0; j < classes; ++j) {
        float p = expf(row[j] - max) / sum;
        float target = j == label ? 1.0f : 0.0f;
        grad[j] = (p - target) / (float)rows;
    }
    loss[r] = -(row[label] - max - logf(sum));
    correct[r] = arg == label ? 1 : 0;
}

extern "C" __global__ void systole_relu_grad(const float* dy, const float* y, float* dx, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dx[i] = y[i] <= 0.0f ? 0.0f : dy[i];
}

extern "C" __global__ void systole_sgd_momentum(float* p, const float* g, float* v, int n, float lr, float momentum, float weight_decay) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float grad = g[i] + weight_decay * p[i];
    float vel = momentum * v[i] + grad;
    v[i] = vel;
    p[i] = p[i] - lr * vel;
}

extern "C" __global__ void systole_sgd(float* p, const float* g, int n, float lr, float weight_decay) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float grad = g[i] + weight_decay * p[i];
    p[i] = p[i] - lr * grad;
}
"#;

/// Blocks for `threads` threads of [`BLOCK`].
pub fn blocks(threads: usize) -> u32 {
    (threads as u32).div_ceil(BLOCK)
}

// ---------------------------------------------------------------------------------------------
// The CPU twins. `for i in 0..n` is the grid; `continue` is the kernel's early `return`. They
// index and assign as the CUDA does (`p[i] = p[i] - lr * v`), not as idiomatic Rust would, so
// the two read side by side: hence the clippy allowances on each.

/// Twin of `systole_cast_bf16`: round to nearest even; NaN keeps its sign and turns quiet.
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn cast_bf16(src: &[f32], dst: &mut [u16]) {
    let n = src.len();
    for i in 0..n {
        let bits = src[i].to_bits();
        if bits & 0x7fff_ffff > 0x7f80_0000 {
            dst[i] = ((bits >> 16) | 0x0040) as u16;
            continue;
        }
        let lsb = (bits >> 16) & 1;
        dst[i] = (bits.wrapping_add(0x7fff).wrapping_add(lsb) >> 16) as u16;
    }
}

/// Twin of `systole_bias_act`: `y = x + bias` (bias broadcast over rows), then ReLU if asked.
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn bias_act(x: &[f32], bias: &[f32], y: &mut [f32], rows: usize, cols: usize, relu: bool) {
    for i in 0..rows * cols {
        let mut v = x[i] + bias[i % cols];
        if relu && v <= 0.0 {
            v = 0.0;
        }
        y[i] = v;
    }
}

/// Twin of `systole_relu`.
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn relu(x: &[f32], y: &mut [f32]) {
    let n = x.len();
    for i in 0..n {
        let v = x[i];
        y[i] = if v <= 0.0 { 0.0 } else { v };
    }
}

/// Twin of `systole_softmax_xent`: per row, the loss `-log softmax[label]`, whether the arg-max
/// (first on ties, NaN never wins) is the label, and the gradient `(softmax - onehot) / rows`.
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn softmax_xent(
    logits: &[f32],
    labels: &[i32],
    loss: &mut [f32],
    correct: &mut [i32],
    dlogits: &mut [f32],
    rows: usize,
    classes: usize,
) {
    for r in 0..rows {
        let row = &logits[r * classes..(r + 1) * classes];
        let grad = &mut dlogits[r * classes..(r + 1) * classes];
        let label = labels[r] as usize;
        let mut max = f32::NEG_INFINITY;
        let mut arg = 0;
        for j in 0..classes {
            max = max.max(row[j]);
            if row[j] > row[arg] || row[arg].is_nan() {
                arg = j;
            }
        }
        let mut sum = 0.0f32;
        for j in 0..classes {
            sum += (row[j] - max).exp();
        }
        for j in 0..classes {
            let p = (row[j] - max).exp() / sum;
            let target = if j == label { 1.0f32 } else { 0.0 };
            grad[j] = (p - target) / rows as f32;
        }
        loss[r] = -(row[label] - max - sum.ln());
        correct[r] = if arg == label { 1 } else { 0 };
    }
}

/// Twin of `systole_relu_grad`: `dx = y <= 0 ? 0 : dy` (a NaN `y` passes the gradient).
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn relu_grad(dy: &[f32], y: &[f32], dx: &mut [f32]) {
    let n = dy.len();
    for i in 0..n {
        dx[i] = if y[i] <= 0.0 { 0.0 } else { dy[i] };
    }
}

/// Twin of `systole_sgd_momentum`: `g' = g + wd p; v = m v + g'; p -= lr v`.
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn sgd_momentum(
    p: &mut [f32],
    g: &[f32],
    v: &mut [f32],
    lr: f32,
    momentum: f32,
    weight_decay: f32,
) {
    let n = p.len();
    for i in 0..n {
        let grad = g[i] + weight_decay * p[i];
        let vel = momentum * v[i] + grad;
        v[i] = vel;
        p[i] = p[i] - lr * vel;
    }
}

/// Twin of `systole_sgd`: `p -= lr (g + wd p)`.
#[allow(clippy::needless_range_loop, clippy::assign_op_pattern)]
pub fn sgd(p: &mut [f32], g: &[f32], lr: f32, weight_decay: f32) {
    let n = p.len();
    for i in 0..n {
        let grad = g[i] + weight_decay * p[i];
        p[i] = p[i] - lr * grad;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use systole_core::exec::{softmax_cross_entropy, Numerics, Plain};
    use systole_core::graph::Sgd as SgdHyper;
    use systole_core::params::SplitMix64;
    use systole_core::Bf16;

    /// The parameter list of `name` as `source` declares it, one entry per parameter with its
    /// whitespace normalised; `None` when there is no such kernel.
    pub(crate) fn declared_params(source: &str, name: &str) -> Option<Vec<String>> {
        let head = format!("extern \"C\" __global__ void {name}(");
        let start = source.find(&head)? + head.len();
        let end = start + source[start..].find(')')?;
        Some(
            source[start..end]
                .split(',')
                .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|p| !p.is_empty())
                .collect(),
        )
    }

    /// Names of every `__global__` function in `source`.
    pub(crate) fn declared_kernels(source: &str) -> Vec<String> {
        source
            .match_indices("__global__ void ")
            .map(|(at, m)| {
                let rest = &source[at + m.len()..];
                rest[..rest.find('(').unwrap_or(rest.len())].trim().to_string()
            })
            .collect()
    }

    fn random(rng: &mut SplitMix64, n: usize, scale: f64) -> Vec<f32> {
        (0..n).map(|_| ((rng.next_f64() * 2.0 - 1.0) * scale) as f32).collect()
    }

    /// Values that catch sign, zero, NaN and rounding-boundary mistakes.
    fn awkward() -> Vec<f32> {
        vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001), // signalling NaN
            f32::from_bits(0x0000_0001), // smallest subnormal
            f32::from_bits(0x807f_ffff), // largest negative subnormal
            f32::MAX,
            f32::MIN,
            f32::from_bits(0x3f80_8000), // exactly halfway, even below: rounds down
            f32::from_bits(0x3f81_8000), // exactly halfway, odd below: rounds up
            f32::from_bits(0x7f7f_ffff), // rounds to infinity
        ]
    }

    #[test]
    fn every_kernel_in_the_source_has_a_signature_and_the_launches_match_it() {
        let declared = declared_kernels(SOURCE);
        let named: Vec<String> = ALL.iter().map(|k| k.name.to_string()).collect();
        assert_eq!(declared, named, "kernels in SOURCE vs the table ALL");
        for k in ALL {
            let params = declared_params(SOURCE, k.name).expect("declared");
            assert_eq!(params, k.params, "{}: the source's parameters vs the launch's", k.name);
        }
        assert_eq!(declared_params(SOURCE, "systole_nothing"), None);
    }

    #[test]
    fn the_source_is_balanced_and_every_kernel_checks_its_bound() {
        for (open, close) in [('{', '}'), ('(', ')'), ('[', ']')] {
            assert_eq!(
                SOURCE.matches(open).count(),
                SOURCE.matches(close).count(),
                "{open}{close}"
            );
        }
        for k in ALL {
            let body = &SOURCE[SOURCE.find(k.name).unwrap()..];
            let body = &body[..body.find("\n}\n").unwrap()];
            assert!(body.contains(") return;"), "{} has no bounds check", k.name);
        }
    }

    #[test]
    fn cast_twin_equals_pytorch_rounding_on_every_kind_of_f32() {
        let mut values = awkward();
        // Every sign and exponent with the mantissas around the rounding point, and random bits.
        for sign_exp in 0..512u32 {
            for low in [0u32, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1_7fff, 0x1_8000, 0x7f_ffff] {
                values.push(f32::from_bits((sign_exp << 23) | low));
            }
        }
        let mut rng = SplitMix64(1);
        values.extend((0..200_000).map(|_| f32::from_bits(rng.next_u64() as u32)));
        let mut got = vec![0u16; values.len()];
        cast_bf16(&values, &mut got);
        for (x, g) in values.iter().zip(&got) {
            assert_eq!(*g, Bf16::from_f32(*x).0, "cast of {:#010x}", x.to_bits());
        }
    }

    #[test]
    fn bias_act_and_relu_twins_equal_the_reference_numerics() {
        let p = Plain::<f32>::new();
        let mut rng = SplitMix64(2);
        let (rows, cols) = (7, 5);
        let mut x = random(&mut rng, rows * cols, 2.0);
        x[..awkward().len().min(rows * cols)]
            .copy_from_slice(&awkward()[..awkward().len().min(rows * cols)]);
        let bias = random(&mut rng, cols, 1.0);
        for relu_on in [false, true] {
            let mut y = vec![0.0; rows * cols];
            bias_act(&x, &bias, &mut y, rows, cols, relu_on);
            for i in 0..rows * cols {
                let mut want = p.bias_add(x[i], bias[i % cols]);
                if relu_on {
                    want = p.relu(want);
                }
                assert_eq!(y[i].to_bits(), want.to_bits(), "element {i}, relu {relu_on}");
            }
        }
        let mut y = vec![0.0; x.len()];
        relu(&x, &mut y);
        for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
            assert_eq!(yi.to_bits(), p.relu(xi).to_bits(), "relu of element {i}");
        }
    }

    #[test]
    fn relu_grad_twin_equals_the_reference_numerics() {
        let p = Plain::<f32>::new();
        let mut rng = SplitMix64(3);
        let mut y = random(&mut rng, 64, 1.0);
        y[..awkward().len()].copy_from_slice(&awkward());
        let dy = random(&mut rng, 64, 1.0);
        let mut dx = vec![0.0; 64];
        relu_grad(&dy, &y, &mut dx);
        for i in 0..64 {
            assert_eq!(dx[i].to_bits(), p.relu_grad(dy[i], y[i]).to_bits(), "element {i}");
        }
    }

    #[test]
    fn sgd_twins_equal_the_reference_numerics_bit_for_bit() {
        let p = Plain::<f32>::new();
        let mut rng = SplitMix64(4);
        for (momentum, weight_decay) in [(0.9, 0.0), (0.9, 1e-3), (0.5, 0.1)] {
            let hyper = SgdHyper { lr: 0.05, momentum, weight_decay };
            let mut params = random(&mut rng, 100, 1.0);
            let mut velocity = random(&mut rng, 100, 0.1);
            let grads = random(&mut rng, 100, 0.3);
            let (mut want_p, mut want_v) = (params.clone(), velocity.clone());
            for i in 0..100 {
                want_p[i] = p.sgd(want_p[i], grads[i], Some(&mut want_v[i]), &hyper);
            }
            sgd_momentum(&mut params, &grads, &mut velocity, 0.05, momentum, weight_decay);
            assert_eq!(params, want_p, "momentum {momentum}, wd {weight_decay}");
            assert_eq!(velocity, want_v);
        }
        let hyper = SgdHyper { lr: 0.1, momentum: 0.0, weight_decay: 0.01 };
        let mut params = random(&mut rng, 50, 1.0);
        let grads = random(&mut rng, 50, 1.0);
        let want: Vec<f32> =
            params.iter().zip(&grads).map(|(&w, &g)| p.sgd(w, g, None, &hyper)).collect();
        sgd(&mut params, &grads, 0.1, 0.01);
        assert_eq!(params, want);
    }

    #[test]
    fn softmax_xent_twin_equals_the_reference_within_f32_rounding() {
        let mut rng = SplitMix64(5);
        for (rows, classes, scale) in [(1, 2, 1.0), (33, 10, 4.0), (64, 10, 30.0), (5, 3, 0.01)] {
            let logits = random(&mut rng, rows * classes, scale);
            let labels: Vec<u16> = (0..rows).map(|_| rng.below(classes as u64) as u16).collect();
            let (want, want_grad) = softmax_cross_entropy(&logits, &labels, classes);
            let labels_i32: Vec<i32> = labels.iter().map(|&l| l as i32).collect();
            let (mut loss, mut correct) = (vec![0.0; rows], vec![0; rows]);
            let mut grad = vec![0.0; rows * classes];
            softmax_xent(&logits, &labels_i32, &mut loss, &mut correct, &mut grad, rows, classes);
            let mean = loss.iter().map(|&l| l as f64).sum::<f64>() / rows as f64;
            assert!(
                (mean - want.loss).abs() <= 1e-5 * (1.0 + want.loss.abs()),
                "{mean} vs {}",
                want.loss
            );
            assert_eq!(correct.iter().sum::<i32>() as u32, want.correct);
            for (i, (&g, &w)) in grad.iter().zip(&want_grad).enumerate() {
                assert!((g - w).abs() <= 1e-7 + 1e-5 * w.abs(), "grad {i}: {g} vs {w}");
            }
        }
        // Ties go to the first class, and a NaN never wins the arg-max.
        let logits = [1.0, 3.0, 3.0, f32::NAN, 2.0, 0.5];
        let (mut loss, mut correct, mut grad) = (vec![0.0; 2], vec![0; 2], vec![0.0; 6]);
        softmax_xent(&logits, &[1, 1], &mut loss, &mut correct, &mut grad, 2, 3);
        let (want, _) = softmax_cross_entropy(&logits, &[1, 1], 3);
        assert_eq!(correct, vec![1, 1]);
        assert_eq!(want.correct, 2);
    }

    /// NVRTC compiles the source to PTX through [`compile`], the GPU run's own call, for the
    /// default architecture and for the H100's `sm_90`, with every kernel an entry point. NVRTC
    /// needs no GPU: CI installs PyPI's `nvidia-cuda-nvrtc-cu12` and sets `SYSTOLE_REQUIRE_NVRTC`,
    /// so there a missing NVRTC fails instead of skipping.
    #[test]
    fn nvrtc_compiles_every_kernel_to_ptx() {
        let found = super::super::libs::ensure_loaded();
        if found.missing().contains(&super::super::libs::CudaLib::Nvrtc) {
            let why = format!(
                "NVRTC not found ({}); `python3 -m pip install --user nvidia-cuda-nvrtc-cu12` \
                 installs it",
                found.missing_line()
            );
            assert!(std::env::var_os("SYSTOLE_REQUIRE_NVRTC").is_none(), "{why}");
            println!("SKIPPED: {why}");
            return;
        }
        for arch in [None, Some("sm_90")] {
            let ptx = compile(arch).unwrap_or_else(|e| panic!("{arch:?}: {e:?}")).to_src();
            for k in all() {
                assert!(
                    ptx.contains(&format!(".entry {}(", k.name)),
                    "{arch:?}: no entry {}",
                    k.name
                );
            }
            if let Some(a) = arch {
                assert!(ptx.contains(&format!(".target {a}")), "not built for {a}");
            }
        }
    }

    /// The CUDA source itself, compiled as C++ for the CPU with a shim for the CUDA built-ins
    /// and run thread by thread (blocks of [`BLOCK`], sizes that leave partial blocks), must
    /// give the twins' results bit for bit.
    #[test]
    fn cuda_source_compiled_for_the_cpu_equals_the_twins() {
        // Inputs: sizes, hyper-parameters, then arrays, all little-endian 32-bit.
        let mut rng = SplitMix64(6);
        let (n, rows, cols, xrows, classes) = (1000usize, 37usize, 11usize, 300usize, 10usize);
        let (lr, momentum, wd) = (0.05f32, 0.9f32, 0.001f32);
        let mut cast_in: Vec<f32> = (0..n).map(|_| f32::from_bits(rng.next_u64() as u32)).collect();
        cast_in[..awkward().len()].copy_from_slice(&awkward());
        let mut x = random(&mut rng, rows * cols, 2.0);
        x[..awkward().len()].copy_from_slice(&awkward());
        let bias = random(&mut rng, cols, 1.0);
        let logits = random(&mut rng, xrows * classes, 5.0);
        let labels: Vec<i32> = (0..xrows).map(|_| rng.below(classes as u64) as i32).collect();
        let dy = random(&mut rng, n, 1.0);
        let mut y = random(&mut rng, n, 1.0);
        y[..awkward().len()].copy_from_slice(&awkward());
        let p = random(&mut rng, n, 1.0);
        let g = random(&mut rng, n, 0.2);
        let v = random(&mut rng, n, 0.1);
        let mut input = Vec::new();
        for s in [n, rows, cols, xrows, classes] {
            input.extend((s as i32).to_le_bytes());
        }
        for h in [lr, momentum, wd] {
            input.extend(h.to_le_bytes());
        }
        for arr in [&cast_in, &x, &bias, &logits, &dy, &y, &p, &g, &v] {
            input.extend(arr.iter().flat_map(|f| f.to_le_bytes()));
        }
        input.extend(labels.iter().flat_map(|l| l.to_le_bytes()));
        let Some(out) = run_on_cpu(&format!("{SOURCE}\n{CPU_DRIVER}"), &input) else { return };
        let mut words = out.into_iter();
        let mut take = |len: usize| -> Vec<u32> { words.by_ref().take(len).collect() };
        let bits = |v: &[f32]| -> Vec<u32> { v.iter().map(|f| f.to_bits()).collect() };

        let mut cast_out = vec![0u16; n];
        cast_bf16(&cast_in, &mut cast_out);
        assert_eq!(take(n), cast_out.iter().map(|&b| b as u32).collect::<Vec<_>>(), "cast_bf16");
        for relu_on in [false, true] {
            let mut yb = vec![0.0; rows * cols];
            bias_act(&x, &bias, &mut yb, rows, cols, relu_on);
            assert_eq!(take(rows * cols), bits(&yb), "bias_act relu={relu_on}");
        }
        let mut yr = vec![0.0; rows * cols];
        relu(&x, &mut yr);
        assert_eq!(take(rows * cols), bits(&yr), "relu");
        let (mut loss, mut correct) = (vec![0.0; xrows], vec![0; xrows]);
        let mut dlogits = vec![0.0; xrows * classes];
        softmax_xent(&logits, &labels, &mut loss, &mut correct, &mut dlogits, xrows, classes);
        assert_eq!(take(xrows), bits(&loss), "softmax_xent loss");
        assert_eq!(take(xrows), correct.iter().map(|&c| c as u32).collect::<Vec<_>>(), "correct");
        assert_eq!(take(xrows * classes), bits(&dlogits), "softmax_xent gradient");
        let mut dx = vec![0.0; n];
        relu_grad(&dy, &y, &mut dx);
        assert_eq!(take(n), bits(&dx), "relu_grad");
        let (mut pm, mut vm) = (p.clone(), v.clone());
        sgd_momentum(&mut pm, &g, &mut vm, lr, momentum, wd);
        assert_eq!(take(n), bits(&pm), "sgd_momentum p");
        assert_eq!(take(n), bits(&vm), "sgd_momentum v");
        let mut ps = p.clone();
        sgd(&mut ps, &g, lr, wd);
        assert_eq!(take(n), bits(&ps), "sgd");
        assert!(take(1).is_empty(), "the driver wrote more than expected");
    }

    /// CUDA C `source` (kernels and a `main` that reads its first argument and writes its
    /// second), compiled as C++ for the CPU behind [`CPU_SHIM`] and run on `input`: the
    /// little-endian 32-bit words it wrote. `None`, after saying SKIPPED, without a C++
    /// compiler.
    pub(crate) fn run_on_cpu(source: &str, input: &[u8]) -> Option<Vec<u32>> {
        let Some(cxx) = cxx() else {
            println!(
                "SKIPPED: no C++ compiler (c++, g++ or clang++) to compile the kernels for the CPU"
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let (src, exe) = (dir.path().join("kernels.cpp"), dir.path().join("kernels"));
        std::fs::write(&src, format!("{CPU_SHIM}\n{source}")).unwrap();
        let out = std::process::Command::new(&cxx)
            .args(["-std=c++17", "-O1", "-ffp-contract=off", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .unwrap();
        assert!(out.status.success(), "{cxx} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let (inp, outp) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
        std::fs::write(&inp, input).unwrap();
        let run = std::process::Command::new(&exe).arg(&inp).arg(&outp).output().unwrap();
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let out = std::fs::read(&outp).unwrap();
        Some(out.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect())
    }

    fn cxx() -> Option<String> {
        ["c++", "g++", "clang++"].into_iter().map(String::from).find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    }

    /// Stand-ins for the CUDA built-ins the kernels use.
    pub(crate) const CPU_SHIM: &str = r#"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
struct Dim3 { unsigned int x, y, z; };
static Dim3 blockIdx, blockDim, threadIdx;
#define __global__
#define __device__
static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
// Runs `body` once per thread of a grid of 256-thread blocks covering `threads`.
template <typename F> static void launch(int threads, F body) {
    blockDim = {256, 1, 1};
    unsigned int grid = (threads + 255) / 256;
    for (unsigned int b = 0; b < grid; ++b)
        for (unsigned int t = 0; t < 256; ++t) { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; body(); }
}
"#;

    /// Runs each kernel over a grid of BLOCK-thread blocks (the shim's `launch`), reading in.bin,
    /// writing out.bin.
    const CPU_DRIVER: &str = r#"
int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* in = std::fopen(argv[1], "rb");
    if (!in) return 3;
    int s[5]; float h[3];
    if (std::fread(s, 4, 5, in) != 5 || std::fread(h, 4, 3, in) != 3) return 4;
    int n = s[0], rows = s[1], cols = s[2], xrows = s[3], classes = s[4];
    auto read = [&](size_t len) { std::vector<float> v(len); if (std::fread(v.data(), 4, len, in) != len) std::exit(5); return v; };
    std::vector<float> cast_in = read(n), x = read(rows * cols), bias = read(cols), logits = read(xrows * classes);
    std::vector<float> dy = read(n), y = read(n), p = read(n), g = read(n), v = read(n);
    std::vector<int> labels(xrows);
    if (std::fread(labels.data(), 4, xrows, in) != (size_t)xrows) return 6;
    FILE* out = std::fopen(argv[2], "wb");
    if (!out) return 7;
    auto write = [&](const void* data, size_t len) { std::fwrite(data, 4, len, out); };
    std::vector<unsigned short> c16(n);
    launch(n, [&] { systole_cast_bf16(cast_in.data(), c16.data(), n); });
    std::vector<unsigned int> c32(c16.begin(), c16.end());
    write(c32.data(), n);
    for (int r = 0; r < 2; ++r) {
        std::vector<float> yb(rows * cols);
        launch(rows * cols, [&] { systole_bias_act(x.data(), bias.data(), yb.data(), rows, cols, r); });
        write(yb.data(), rows * cols);
    }
    std::vector<float> yr(rows * cols);
    launch(rows * cols, [&] { systole_relu(x.data(), yr.data(), rows * cols); });
    write(yr.data(), rows * cols);
    std::vector<float> loss(xrows), dl(xrows * classes);
    std::vector<int> correct(xrows);
    launch(xrows, [&] { systole_softmax_xent(logits.data(), labels.data(), loss.data(), correct.data(), dl.data(), xrows, classes); });
    write(loss.data(), xrows); write(correct.data(), xrows); write(dl.data(), xrows * classes);
    std::vector<float> dx(n);
    launch(n, [&] { systole_relu_grad(dy.data(), y.data(), dx.data(), n); });
    write(dx.data(), n);
    std::vector<float> pm = p, vm = v;
    launch(n, [&] { systole_sgd_momentum(pm.data(), g.data(), vm.data(), n, h[0], h[1], h[2]); });
    write(pm.data(), n); write(vm.data(), n);
    std::vector<float> ps = p;
    launch(n, [&] { systole_sgd(ps.data(), g.data(), n, h[0], h[2]); });
    write(ps.data(), n);
    std::fclose(out);
    return 0;
}
"#;
}
