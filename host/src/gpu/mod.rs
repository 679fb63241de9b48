//! The GPU reference: the same training graphs and GEMMs on an NVIDIA GPU, through cudarc with
//! dynamic loading, so the binary builds and runs where there is no CUDA at all.
//!
//! * [`libs`]: finding CUDA's libraries (the loader's path, CUDA toolkits, Python environments'
//!   `nvidia-*` wheels) and preloading them; nothing touches cudarc before this says they are
//!   all there, because cudarc panics on a missing library.
//! * [`kernels`]: the NVRTC source of the GPU's own kernels and a CPU twin of each.
//! * [`plan`]: a training step (or forward pass) of a graph as GEMMs and launches over buffers.
//! * [`twin`]: the CPU interpreter of a plan: kernel twins plus a BLAS loop.
//! * [`device`]: the CUDA interpreter of the same plan: context, stream, cuBLAS, NVRTC module,
//!   one CUDA graph per step, timing with CUDA events.
//! * [`gemm`]: FP32 and BF16 GEMMs on the GPU, checked then timed, for `systole bench`.
//! * [`train`]: [`train::GpuTrainer`] (the step, evaluation and parameters on the GPU) and
//!   the loss curves `systole train --device gpu` and `--compare` print.
//!
//! docs/GPU.md explains the design and what has and has not been run on a GPU.

pub mod device;
pub mod gemm;
pub mod image_kernels;
pub mod kernels;
pub mod libs;
pub mod plan;
pub mod train;
pub mod twin;

use std::fmt;

use systole_core::exec::BatchOutcome;
use systole_core::graph::Graph;

/// Precision of the GPU's matrix products. Everything else (bias, activations, loss, SGD,
/// master weights) is f32 in both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuDtype {
    /// cuBLAS `sgemm`: true FP32 (never TF32).
    F32,
    /// bf16 operands, f32 accumulation and output (cuBLAS `GemmEx`, compute type 32F).
    Bf16,
}

impl GpuDtype {
    pub const fn name(self) -> &'static str {
        match self {
            GpuDtype::F32 => "f32",
            GpuDtype::Bf16 => "bf16",
        }
    }
}

/// Everything the GPU path can refuse or hit.
#[derive(Debug)]
pub enum GpuError {
    /// No usable GPU: the one line says why (and, for missing libraries, where they were
    /// searched).
    Unavailable(String),
    /// A CUDA driver call failed.
    Driver(String),
    /// A cuBLAS call failed.
    Blas(String),
    /// NVRTC could not compile the kernels (its log, folded onto one line).
    Compile(String),
    /// The graph cannot be lowered.
    Plan(plan::PlanError),
    /// The host gave something the step cannot take (a label out of range, a wrong length).
    Input(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::Unavailable(why) => write!(f, "GPU unavailable: {why}"),
            GpuError::Driver(e) => write!(f, "CUDA driver: {e}"),
            GpuError::Blas(e) => write!(f, "cuBLAS: {e}"),
            GpuError::Compile(log) => write!(f, "NVRTC could not compile the kernels: {log}"),
            GpuError::Plan(e) => write!(f, "{e}"),
            GpuError::Input(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for GpuError {}

impl From<plan::PlanError> for GpuError {
    fn from(e: plan::PlanError) -> Self {
        GpuError::Plan(e)
    }
}

/// Whether this machine can run the GPU path, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuAvailability {
    /// A device, by name, and where its libraries came from.
    Available { device: String, libraries: String },
    /// One line: what is missing and what was searched.
    Unavailable { reason: String },
}

impl GpuAvailability {
    /// Looks for the libraries (once per process) and a device. Never panics.
    pub fn probe() -> GpuAvailability {
        let found = libs::ensure_loaded();
        if !found.complete() {
            return GpuAvailability::Unavailable { reason: found.missing_line() };
        }
        match device::first_device_name() {
            Ok(device) => GpuAvailability::Available { device, libraries: found.found_line() },
            Err(why) => GpuAvailability::Unavailable {
                reason: format!("the CUDA libraries load ({}) but {why}", found.found_line()),
            },
        }
    }

    /// The error to return when the GPU was required.
    pub fn require(self) -> Result<String, GpuError> {
        match self {
            GpuAvailability::Available { device, .. } => Ok(device),
            GpuAvailability::Unavailable { reason } => Err(GpuError::Unavailable(reason)),
        }
    }
}

/// The features and labels of a batch, checked: `x` is `labels.len()` rows of the graph's
/// inputs, and every label is a class.
pub fn check_batch(graph: &Graph, x: &[f32], labels: &[u16]) -> Result<Vec<i32>, GpuError> {
    let inputs = graph.inputs() as usize;
    if labels.is_empty() || x.len() != labels.len() * inputs {
        return Err(GpuError::Input(format!(
            "a batch of {} labels needs {} features, got {}",
            labels.len(),
            labels.len() * inputs,
            x.len()
        )));
    }
    labels_for_device(labels, graph.classes() as usize)
}

/// Labels as the kernels read them (i32), each checked to be a class.
pub fn labels_for_device(labels: &[u16], classes: usize) -> Result<Vec<i32>, GpuError> {
    labels
        .iter()
        .map(|&l| {
            if (l as usize) < classes {
                Ok(l as i32)
            } else {
                Err(GpuError::Input(format!("label {l} is not one of the {classes} classes")))
            }
        })
        .collect()
}

/// A batch's outcome from the per-row losses and hits the softmax kernel writes: the mean loss
/// (summed in f64, row order) and the count of correct rows.
pub fn outcome(loss: &[f32], correct: &[i32]) -> BatchOutcome {
    let sum: f64 = loss.iter().map(|&l| l as f64).sum();
    BatchOutcome {
        loss: sum / loss.len().max(1) as f64,
        correct: correct.iter().filter(|&&c| c != 0).count() as u32,
    }
}
