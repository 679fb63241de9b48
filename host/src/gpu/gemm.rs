//! One GEMM on the GPU for `systole bench`: FP32 (cuBLAS `sgemm`, true FP32) or BF16 (bf16
//! operands, f32 accumulation and output, cuBLAS `GemmEx`), row-major like the rest of the
//! host. The caller checks sampled outputs against its CPU reference before it asks for
//! timings.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::device::{driver_error, median, Gpu};
use super::kernels;
use super::plan::{Precision, RowMajorGemm};
use super::GpuError;

/// Operands on the device and a place for `C`.
pub struct DeviceGemm<'g> {
    gpu: &'g Gpu,
    shape: RowMajorGemm,
    precision: Precision,
    a: Operand,
    b: Operand,
    c: CudaSlice<f32>,
}

enum Operand {
    F32(CudaSlice<f32>),
    Bf16(CudaSlice<u16>),
}

impl Operand {
    fn upload(gpu: &Gpu, values: &[f32], precision: Precision) -> Result<Operand, GpuError> {
        Ok(match precision {
            Precision::F32 => Operand::F32(gpu.stream.clone_htod(values).map_err(driver_error)?),
            Precision::Bf16 => {
                let mut bits = vec![0u16; values.len()];
                kernels::cast_bf16(values, &mut bits);
                Operand::Bf16(gpu.stream.clone_htod(&bits).map_err(driver_error)?)
            }
        })
    }

    fn ptr(&self, gpu: &Gpu) -> u64 {
        match self {
            Operand::F32(s) => s.device_ptr(&gpu.stream).0,
            Operand::Bf16(s) => s.device_ptr(&gpu.stream).0,
        }
    }
}

impl<'g> DeviceGemm<'g> {
    /// Uploads `a` (`m x k`) and `b` (`k x n`), row-major f32; for BF16 they are rounded to
    /// bf16 on the host, with the cast kernel's twin (PyTorch's rounding).
    pub fn new(
        gpu: &'g Gpu,
        (m, k, n): (usize, usize, usize),
        a: &[f32],
        b: &[f32],
        precision: Precision,
    ) -> Result<DeviceGemm<'g>, GpuError> {
        if a.len() != m * k || b.len() != k * n {
            return Err(GpuError::Input(format!("operands are not {m}x{k} and {k}x{n}")));
        }
        let shape = RowMajorGemm { m, n, k, trans_a: false, trans_b: false };
        Ok(DeviceGemm {
            gpu,
            shape,
            precision,
            a: Operand::upload(gpu, a, precision)?,
            b: Operand::upload(gpu, b, precision)?,
            c: gpu.stream.alloc_zeros(m * n).map_err(driver_error)?,
        })
    }

    fn enqueue(&self) -> Result<(), GpuError> {
        let c = self.c.device_ptr(&self.gpu.stream).0;
        self.gpu.gemm(self.shape, self.precision, self.a.ptr(self.gpu), self.b.ptr(self.gpu), c)
    }

    /// Runs the product once and reads `C` back (row-major `m x n`).
    pub fn run(&self) -> Result<Vec<f32>, GpuError> {
        self.enqueue()?;
        self.gpu.download(&self.c)
    }

    /// Median milliseconds of `reps` products after `warmup`, each between two CUDA events.
    pub fn time_ms(&self, warmup: usize, reps: usize) -> Result<f64, GpuError> {
        let mut times = self.gpu.time_ms(warmup, reps, || self.enqueue())?;
        Ok(median(&mut times))
    }
}
