//! The CUDA side: a context and a non-default stream on device 0, a cuBLAS handle on that
//! stream (true FP32 math, its own workspace), the kernels compiled by NVRTC, and the
//! interpreter of a [`StepPlan`] that enqueues one cuBLAS call or kernel launch per op. A step
//! is run eagerly the first time and captured into a CUDA graph (stream capture) for every
//! later time, so a training step is one `cuGraphLaunch`. Times come from CUDA events.
//!
//! The cudarc traps this code steps around (../../../../shared/TOOLCHAIN.md): nothing here
//! runs unless [`super::libs`] found every library (cudarc panics otherwise); capture is on
//! a stream made with `new_stream`, never the NULL stream; cudarc's per-buffer event
//! tracking is disabled right after the context is made, before any allocation (it records
//! events a capture cannot contain); nothing is copied from pageable host memory while
//! capturing (inputs are copied before a replay, results after it); timing events are made
//! with `CU_EVENT_DEFAULT` (cudarc's default disables timing).
//!
//! None of this has run in this repository's CI, which has no GPU: docs/GPU.md lists what
//! is and is not verified.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::{result as blas, sys as blas_sys, CudaBlas};
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::CompileError;
use systole_core::graph::Sgd;

use super::image_kernels::{self, conv_args, pool_args};
use super::kernels::{self, Kernel};
use super::plan::{Precision, RowMajorGemm, StepOp};
use super::{GpuAvailability, GpuError};

/// cuBLAS workspace: 32 MiB, NVIDIA's recommendation for Hopper (enough for earlier parts).
const BLAS_WORKSPACE: usize = 32 << 20;

pub(crate) fn driver_error(e: cudarc::driver::DriverError) -> GpuError {
    GpuError::Driver(e.to_string())
}

pub(crate) fn blas_error(e: cudarc::cublas::result::CublasError) -> GpuError {
    GpuError::Blas(e.to_string())
}

fn compile_error(e: CompileError) -> GpuError {
    let text = match &e {
        CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
        other => other.to_string(),
    };
    GpuError::Compile(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The name of device 0, once the libraries are known to load.
pub fn first_device_name() -> Result<String, String> {
    let count =
        CudaContext::device_count().map_err(|e| format!("the driver finds no device ({e})"))?;
    if count < 1 {
        return Err("the driver reports no CUDA device".into());
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("device 0 cannot be opened ({e})"))?;
    ctx.name().map_err(|e| format!("device 0 has no name ({e})"))
}

/// The compiled kernels, one handle each.
struct Kernels {
    cast_bf16: CudaFunction,
    bias_act: CudaFunction,
    relu: CudaFunction,
    softmax_xent: CudaFunction,
    relu_grad: CudaFunction,
    sgd_momentum: CudaFunction,
    sgd: CudaFunction,
    im2col: CudaFunction,
    col2im: CudaFunction,
    max_pool: CudaFunction,
    max_pool_grad: CudaFunction,
    avg_pool: CudaFunction,
    avg_pool_grad: CudaFunction,
}

/// An open GPU: context, stream, cuBLAS and the kernels.
pub struct Gpu {
    pub name: String,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    blas: CudaBlas,
    kernels: Kernels,
    _workspace: CudaSlice<u8>,
}

/// Launches an image kernel ([`image_kernels`]): its buffers, then its geometry, over
/// `threads` threads.
fn image_launch(
    stream: &CudaStream,
    f: &CudaFunction,
    bufs: &[u64],
    dims: &[i32],
    threads: usize,
) -> Result<Option<(CudaEvent, CudaEvent)>, DriverError> {
    let mut l = stream.launch_builder(f);
    for b in bufs {
        l.arg(b);
    }
    for d in dims {
        l.arg(d);
    }
    // SAFETY: `bufs` and `dims` are the kernel's parameters in its order and types (each
    // `image_kernels` kernel takes its buffers, then `conv_args` or `pool_args`, checked against
    // the source by its tests), and every buffer covers the threads its bound check admits.
    unsafe { l.launch(launch_config(threads)) }
}

fn launch_config(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (kernels::blocks(threads), 1, 1),
        block_dim: (kernels::BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Gpu {
    /// Opens device 0, or says (in one line) why there is none.
    pub fn open() -> Result<Gpu, GpuError> {
        let name = GpuAvailability::probe().require()?;
        let ctx = CudaContext::new(0).map_err(driver_error)?;
        // SAFETY: no buffer exists on this context yet, and every buffer will be used from the
        // one stream made below, in order, so cudarc's cross-stream events are not needed; they
        // must be off for stream capture.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(driver_error)?;
        let blas = CudaBlas::new(stream.clone()).map_err(blas_error)?;
        let workspace = stream.alloc_zeros::<u8>(BLAS_WORKSPACE).map_err(driver_error)?;
        {
            let handle = *blas.handle();
            let (ptr, _sync) = workspace.device_ptr(&stream);
            // SAFETY: a live handle, and a workspace that lives as long as the handle (both in
            // `Gpu`); default math keeps sgemm in true FP32 (no TF32 tensor cores).
            unsafe {
                blas_sys::cublasSetMathMode(handle, blas_sys::cublasMath_t::CUBLAS_DEFAULT_MATH)
                    .result()
                    .map_err(blas_error)?;
                blas_sys::cublasSetWorkspace_v2(handle, ptr as *mut c_void, BLAS_WORKSPACE)
                    .result()
                    .map_err(blas_error)?;
            }
        }
        let ptx = kernels::compile(None).map_err(compile_error)?;
        let module = ctx.load_module(ptx).map_err(driver_error)?;
        let load = |k: Kernel| module.load_function(k.name).map_err(driver_error);
        let kernels = Kernels {
            cast_bf16: load(kernels::CAST_BF16)?,
            bias_act: load(kernels::BIAS_ACT)?,
            relu: load(kernels::RELU)?,
            softmax_xent: load(kernels::SOFTMAX_XENT)?,
            relu_grad: load(kernels::RELU_GRAD)?,
            sgd_momentum: load(kernels::SGD_MOMENTUM)?,
            sgd: load(kernels::SGD)?,
            im2col: load(image_kernels::IM2COL)?,
            col2im: load(image_kernels::COL2IM)?,
            max_pool: load(image_kernels::MAX_POOL)?,
            max_pool_grad: load(image_kernels::MAX_POOL_GRAD)?,
            avg_pool: load(image_kernels::AVG_POOL)?,
            avg_pool_grad: load(image_kernels::AVG_POOL_GRAD)?,
        };
        Ok(Gpu { name, ctx, stream, blas, kernels, _workspace: workspace })
    }

    /// `C = op(A) op(B)` on row-major device buffers, through cuBLAS's column-major API (see
    /// [`RowMajorGemm::blas`]): `sgemm`, or `GemmEx` with bf16 operands and f32 compute and
    /// output.
    pub fn gemm(
        &self,
        shape: RowMajorGemm,
        precision: Precision,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<(), GpuError> {
        let p = shape.blas();
        let op = |t: bool| {
            if t {
                blas_sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                blas_sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        let handle = *self.blas.handle();
        // SAFETY: `a`, `b` and `c` are live device buffers of at least the sizes the plan gave
        // them, which are the sizes these arguments describe (checked by the plan's tests on
        // the CPU twin); alpha and beta are host scalars read during the call.
        let result = unsafe {
            match precision {
                Precision::F32 => blas::sgemm(
                    handle,
                    op(p.transa),
                    op(p.transb),
                    p.m,
                    p.n,
                    p.k,
                    &alpha,
                    b as *const f32,
                    p.lda,
                    a as *const f32,
                    p.ldb,
                    &beta,
                    c as *mut f32,
                    p.ldc,
                ),
                Precision::Bf16 => blas::gemm_ex(
                    handle,
                    op(p.transa),
                    op(p.transb),
                    p.m,
                    p.n,
                    p.k,
                    (&alpha) as *const f32 as *const c_void,
                    b as *const c_void,
                    blas_sys::cudaDataType_t::CUDA_R_16BF,
                    p.lda,
                    a as *const c_void,
                    blas_sys::cudaDataType_t::CUDA_R_16BF,
                    p.ldb,
                    (&beta) as *const f32 as *const c_void,
                    c as *mut c_void,
                    blas_sys::cudaDataType_t::CUDA_R_32F,
                    p.ldc,
                    blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                ),
            }
        };
        result.map_err(blas_error)
    }

    /// Enqueues one op of a plan on the stream; `ptr` gives each buffer's device address.
    pub fn enqueue(&self, op: &StepOp, ptr: &[u64], sgd: Option<Sgd>) -> Result<(), GpuError> {
        let k = &self.kernels;
        let stream = &self.stream;
        // SAFETY (every launch below): the arguments are pushed in the order and with the
        // types of the kernel's signature (`kernels::*::params`, checked against the source by
        // the kernels' tests), and every pointer is a live buffer at least as long as the
        // thread count the launch covers.
        let launched = match *op {
            StepOp::CastBf16 { src, dst, n } => {
                let (src, dst, count) = (ptr[src], ptr[dst], n as i32);
                let mut l = stream.launch_builder(&k.cast_bf16);
                l.arg(&src).arg(&dst).arg(&count);
                unsafe { l.launch(launch_config(n)) }
            }
            StepOp::Gemm { a, b, c, shape, precision } => {
                return self.gemm(shape, precision, ptr[a], ptr[b], ptr[c]).map_err(|e| match e {
                    GpuError::Blas(e) => GpuError::Blas(format!("{} {shape:?}: {e}", op.name())),
                    other => other,
                });
            }
            StepOp::BiasAct { x, bias, y, rows, cols, relu } => {
                let (x, bias, y) = (ptr[x], ptr[bias], ptr[y]);
                let (r, c, relu) = (rows as i32, cols as i32, relu as i32);
                let mut l = stream.launch_builder(&k.bias_act);
                l.arg(&x).arg(&bias).arg(&y).arg(&r).arg(&c).arg(&relu);
                unsafe { l.launch(launch_config(rows * cols)) }
            }
            StepOp::Relu { x, y, n } => {
                let (x, y, count) = (ptr[x], ptr[y], n as i32);
                let mut l = stream.launch_builder(&k.relu);
                l.arg(&x).arg(&y).arg(&count);
                unsafe { l.launch(launch_config(n)) }
            }
            StepOp::SoftmaxXent { logits, labels, loss, correct, dlogits, rows, classes } => {
                let (logits, labels, loss) = (ptr[logits], ptr[labels], ptr[loss]);
                let (correct, dlogits) = (ptr[correct], ptr[dlogits]);
                let (r, c) = (rows as i32, classes as i32);
                let mut l = stream.launch_builder(&k.softmax_xent);
                l.arg(&logits).arg(&labels).arg(&loss).arg(&correct).arg(&dlogits).arg(&r).arg(&c);
                unsafe { l.launch(launch_config(rows)) }
            }
            StepOp::ReluGrad { dy, y, dx, n } => {
                let (dy, y, dx, count) = (ptr[dy], ptr[y], ptr[dx], n as i32);
                let mut l = stream.launch_builder(&k.relu_grad);
                l.arg(&dy).arg(&y).arg(&dx).arg(&count);
                unsafe { l.launch(launch_config(n)) }
            }
            StepOp::SgdMomentum { param, grad, velocity, n } => {
                let s = sgd.ok_or_else(|| GpuError::Input("SGD without settings".into()))?;
                let (p, g, v, count) = (ptr[param], ptr[grad], ptr[velocity], n as i32);
                let (lr, m, wd) = (s.lr, s.momentum, s.weight_decay);
                let mut l = stream.launch_builder(&k.sgd_momentum);
                l.arg(&p).arg(&g).arg(&v).arg(&count).arg(&lr).arg(&m).arg(&wd);
                unsafe { l.launch(launch_config(n)) }
            }
            StepOp::Sgd { param, grad, n } => {
                let s = sgd.ok_or_else(|| GpuError::Input("SGD without settings".into()))?;
                let (p, g, count) = (ptr[param], ptr[grad], n as i32);
                let (lr, wd) = (s.lr, s.weight_decay);
                let mut l = stream.launch_builder(&k.sgd);
                l.arg(&p).arg(&g).arg(&count).arg(&lr).arg(&wd);
                unsafe { l.launch(launch_config(n)) }
            }
            StepOp::Im2col { x, cols, n, geom } => {
                let threads = n * geom.positions() * geom.patch();
                image_launch(stream, &k.im2col, &[ptr[x], ptr[cols]], &conv_args(&geom, n), threads)
            }
            StepOp::Col2im { cols, x, n, geom } => {
                let bufs = [ptr[cols], ptr[x]];
                image_launch(stream, &k.col2im, &bufs, &conv_args(&geom, n), n * geom.image())
            }
            StepOp::MaxPool { x, y, n, geom } | StepOp::AvgPool { x, y, n, geom } => {
                let f =
                    if matches!(op, StepOp::MaxPool { .. }) { &k.max_pool } else { &k.avg_pool };
                let threads = n * geom.out_image();
                image_launch(stream, f, &[ptr[x], ptr[y]], &pool_args(&geom, n), threads)
            }
            StepOp::MaxPoolGrad { dy, x, dx, n, geom } => {
                let bufs = [ptr[dy], ptr[x], ptr[dx]];
                let f = &k.max_pool_grad;
                image_launch(stream, f, &bufs, &pool_args(&geom, n), n * geom.image())
            }
            StepOp::AvgPoolGrad { dy, dx, n, geom } => {
                let bufs = [ptr[dy], ptr[dx]];
                let f = &k.avg_pool_grad;
                image_launch(stream, f, &bufs, &pool_args(&geom, n), n * geom.image())
            }
        };
        launched.map(|_| ()).map_err(|e| GpuError::Driver(format!("launching {}: {e}", op.name())))
    }

    /// Enqueues `ops` inside a stream capture and instantiates the graph. The capture is
    /// always ended, even when an op fails to enqueue, so the stream is usable afterwards.
    pub fn capture(
        &self,
        ops: &[StepOp],
        ptr: &[u64],
        sgd: Option<Sgd>,
    ) -> Result<CudaGraph, GpuError> {
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(driver_error)?;
        let enqueued = ops.iter().try_for_each(|op| self.enqueue(op, ptr, sgd));
        let ended = self.stream.end_capture(CUgraphInstantiate_flags(0));
        enqueued?;
        let graph = ended
            .map_err(driver_error)?
            .ok_or_else(|| GpuError::Driver("stream capture recorded nothing".into()))?;
        graph.upload().map_err(driver_error)?;
        Ok(graph)
    }

    /// Runs `work` (which enqueues on the stream) `warmup` times, then `reps` times each
    /// between two CUDA events; returns each timed run in milliseconds.
    pub fn time_ms(
        &self,
        warmup: usize,
        reps: usize,
        mut work: impl FnMut() -> Result<(), GpuError>,
    ) -> Result<Vec<f64>, GpuError> {
        for _ in 0..warmup {
            work()?;
        }
        self.stream.synchronize().map_err(driver_error)?;
        let event =
            || self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(driver_error);
        let (start, end) = (event()?, event()?);
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            start.record(&self.stream).map_err(driver_error)?;
            work()?;
            end.record(&self.stream).map_err(driver_error)?;
            times.push(start.elapsed_ms(&end).map_err(driver_error)? as f64);
        }
        Ok(times)
    }

    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.stream.synchronize().map_err(driver_error)
    }

    /// Copies a buffer back once everything before it on the stream has finished.
    pub fn download<T: DeviceRepr>(&self, s: &CudaSlice<T>) -> Result<Vec<T>, GpuError> {
        let v = self.stream.clone_dtoh(s).map_err(driver_error)?;
        self.synchronize()?;
        Ok(v)
    }
}

/// A device buffer of one of the plan's element types.
pub enum DeviceBuf {
    F32(CudaSlice<f32>),
    Bf16(CudaSlice<u16>),
    I32(CudaSlice<i32>),
}

impl DeviceBuf {
    /// The buffer's device address (event tracking is off, so no synchronisation is recorded).
    pub fn ptr(&self, stream: &Arc<CudaStream>) -> u64 {
        match self {
            DeviceBuf::F32(s) => s.device_ptr(stream).0,
            DeviceBuf::Bf16(s) => s.device_ptr(stream).0,
            DeviceBuf::I32(s) => s.device_ptr(stream).0,
        }
    }
}

/// Index of the median of `times` after sorting (the upper one for an even count).
pub fn median(times: &mut [f64]) -> f64 {
    times.sort_by(|a, b| a.total_cmp(b));
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::plan::{Buf, Role, StepPlan};
    use crate::gpu::GpuDtype;
    use systole_core::graph::{Graph, MlpSpec};

    /// The buffers an op writes.
    fn writes(op: &StepOp) -> Vec<Buf> {
        match *op {
            StepOp::CastBf16 { dst, .. } => vec![dst],
            StepOp::Gemm { c, .. } => vec![c],
            StepOp::BiasAct { y, .. } | StepOp::Relu { y, .. } => vec![y],
            StepOp::SoftmaxXent { loss, correct, dlogits, .. } => vec![loss, correct, dlogits],
            StepOp::ReluGrad { dx, .. } => vec![dx],
            StepOp::SgdMomentum { param, velocity, .. } => vec![param, velocity],
            StepOp::Sgd { param, .. } => vec![param],
            StepOp::Im2col { cols, .. } => vec![cols],
            StepOp::Col2im { x, .. } => vec![x],
            StepOp::MaxPool { y, .. } | StepOp::AvgPool { y, .. } => vec![y],
            StepOp::MaxPoolGrad { dx, .. } | StepOp::AvgPoolGrad { dx, .. } => vec![dx],
        }
    }

    #[test]
    fn median_of_timings() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }

    /// A captured graph is replayed after the host copies a new batch in: so no op may write
    /// the input or the labels, and everything a step reads before writing must be persistent
    /// (parameters), the batch, or the ones vector.
    #[test]
    fn a_step_reads_only_what_is_there_before_it_runs() {
        let spec = MlpSpec { inputs: 8, hidden: [6, 5].iter().copied().collect(), classes: 3 };
        let sgd = Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 };
        let mlp = Graph::training(&spec, sgd).unwrap();
        let (cnn, _) = crate::gpu::twin::tests::cnn(sgd, 1);
        for (graph, dtype) in [
            (&mlp, GpuDtype::F32),
            (&mlp, GpuDtype::Bf16),
            (&cnn, GpuDtype::F32),
            (&cnn, GpuDtype::Bf16),
        ] {
            let plan = StepPlan::training(graph, 4, dtype).unwrap();
            let mut written = vec![false; plan.buffers.len()];
            for op in &plan.ops {
                let reads: Vec<Buf> = match *op {
                    StepOp::CastBf16 { src, .. } => vec![src],
                    StepOp::Gemm { a, b, .. } => vec![a, b],
                    StepOp::BiasAct { x, bias, .. } => vec![x, bias],
                    StepOp::Relu { x, .. } => vec![x],
                    StepOp::SoftmaxXent { logits, labels, .. } => vec![logits, labels],
                    StepOp::ReluGrad { dy, y, .. } => vec![dy, y],
                    StepOp::SgdMomentum { param, grad, velocity, .. } => {
                        vec![param, grad, velocity]
                    }
                    StepOp::Sgd { param, grad, .. } => vec![param, grad],
                    StepOp::Im2col { x, .. }
                    | StepOp::MaxPool { x, .. }
                    | StepOp::AvgPool { x, .. } => vec![x],
                    StepOp::Col2im { cols, .. } => vec![cols],
                    StepOp::MaxPoolGrad { dy, x, .. } => vec![dy, x],
                    StepOp::AvgPoolGrad { dy, .. } => vec![dy],
                };
                for r in reads {
                    let ready = written[r]
                        || matches!(
                            plan.buffers[r].role,
                            Role::Persistent(_) | Role::Input | Role::Labels | Role::Ones
                        );
                    assert!(
                        ready,
                        "{dtype:?}: {} reads {} before anything wrote it",
                        op.name(),
                        plan.buffers[r].name
                    );
                }
                for w in writes(op) {
                    assert!(
                        !matches!(plan.buffers[w].role, Role::Input | Role::Labels | Role::Ones),
                        "{} writes {}",
                        op.name(),
                        plan.buffers[w].name
                    );
                    written[w] = true;
                }
            }
        }
    }
}
