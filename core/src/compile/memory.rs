//! The training compiler's DRAM plan: a bump allocator, and the parameter-side buffers.

use super::Buffers;
use crate::config::Dtype;
use crate::graph::{Graph, TensorId, TensorKind};

/// A bump allocator of DRAM bytes, each buffer 16-byte aligned.
pub(super) struct Dram {
    pub(super) next: u64,
}

impl Dram {
    pub(super) fn alloc(&mut self, bytes: u64) -> u32 {
        let at = self.next;
        self.next = (self.next + bytes).div_ceil(16) * 16;
        at as u32
    }
}

/// The parameter-side buffers: f32 masters, element copies, gradients, velocities. They come
/// first in DRAM and depend only on the graph, not on the batch nor on whether the program
/// trains: an inference pass of a training graph keeps clear of the gradients and velocities, so
/// evaluating between training steps on one machine leaves the optimizer's state intact.
///
/// INT8 is inference only (DECISIONS 132): it has no masters to keep and no update to fuse, so a
/// layer is its i8 weights and its i32 bias words, and nothing else.
pub(super) fn plan_params(graph: &Graph, dram: &mut Dram, buffers: &mut [Buffers], dtype: Dtype) {
    let size = |t: TensorId| graph.info(t).rows(1) as u64 * graph.info(t).cols as u64;
    let of_kind = |kind: TensorKind| graph.tensors.iter().position(|i| i.kind == kind);
    let elem_bytes = dtype.elem_bytes() as u64;
    for &(w, b) in &graph.params {
        let (nw, nb) = (size(w), size(b));
        if dtype == Dtype::Int8 {
            buffers[w as usize].elems = Some(dram.alloc(elem_bytes * nw));
            buffers[b as usize].words = Some(dram.alloc(4 * nb));
            continue;
        }
        // A bias's buffers follow its weight's: `[W; b]` is one `(in + 1) x out` matrix, so a
        // weight gradient's GEMM can carry the bias gradient as its last row
        // (`Compiler::fused_gradients`).
        buffers[w as usize].words = Some(dram.alloc(4 * (nw + nb)));
        buffers[b as usize].words = buffers[w as usize].words.map(|at| at + 4 * nw as u32);
        // The element copy has room for the bias row that a fused update casts with it.
        buffers[w as usize].elems = Some(dram.alloc(elem_bytes * (nw + nb)));
        for kind in [TensorKind::Grad as fn(TensorId) -> TensorKind, TensorKind::Velocity] {
            let (Some(tw), Some(tb)) = (of_kind(kind(w)), of_kind(kind(b))) else { continue };
            buffers[tw].words = Some(dram.alloc(4 * (nw + nb)));
            buffers[tb].words = buffers[tw].words.map(|at| at + 4 * nw as u32);
        }
    }
}
