//! What the compiler hands over: a compiled step's programs, its DRAM plan by tensor, its
//! segments for per-op reports, and how the host writes its input.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use crate::config::ArrayConfig;
use crate::isa::Instruction;

/// DRAM buffers of one tensor: its f32 words and/or its elements (bf16 or i8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    pub words: Option<u32>,
    pub elems: Option<u32>,
}

/// One operation of a compiled step, for per-op cycle and utilisation reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// "dense", "dense_grad_input", and "dense_grad_weight" and "bias_grad" (or both in one
    /// GEMM, "dense_grad_weight+bias"), each with "+sgd" when the update is fused in; "conv",
    /// "conv_grad_input" and "conv_grad_weight..." for a convolution's GEMMs on its patches;
    /// "im2col" for the copy that makes them and "col2im" for the sum that undoes it;
    /// "max_pool", "avg_pool" and their "_grad"s on the vector unit.
    pub op: &'static str,
    pub layer: u8,
    /// 0: forward program, 1: backward-and-update program.
    pub program: u8,
    /// Instructions `start..end` of that program.
    pub start: usize,
    pub end: usize,
    /// Useful MACs on the array.
    pub macs: u64,
    /// Cycles from this segment's first dispatch to the next one's (timing model); approximate
    /// for a reordered program, whose segments' instructions mix.
    pub cycles: u64,
}

/// A compiled training step (or inference pass) for one batch size.
#[derive(Clone, Debug)]
pub struct CompiledStep {
    pub config: ArrayConfig,
    pub batch: u32,
    pub forward: Vec<Instruction>,
    /// Backward and update; empty for inference.
    pub backward: Vec<Instruction>,
    pub segments: Vec<Segment>,
    /// Per tensor of the graph.
    pub buffers: Vec<Buffers>,
    /// DRAM this step touches: every address is below it.
    pub dram_bytes: usize,
    /// Cycles of each program (timing model, equal to the cycle machine's).
    pub forward_cycles: u64,
    pub backward_cycles: u64,
    /// The bf16 ones vector for bias gradients ([`CompiledStep::ones_len`] elements), which
    /// the host must fill.
    pub ones: Option<u32>,
    /// Elements of the ones vector: the most rows a bias gradient sums (the batch, or a
    /// convolution's output positions over the batch).
    pub ones_len: u32,
    /// The zero padding of the input images in DRAM: a network whose first layer is a padded
    /// convolution reads its input padded ([`super::im2col`]); 0 otherwise.
    pub input_padding: u32,
    /// DRAM regions `(address, bytes)` that must hold zeros when the step runs: the zero-padded
    /// copies of later convolutions' inputs ([`super::im2col`]), whose borders nothing in the
    /// step writes. Another step's buffers may overlap them, so a host writes them before a
    /// step whenever another step ran since.
    pub zeroed: Vec<(u32, u32)>,
    /// The input's shape `(c, h, w)` for an image network.
    pub input_image: Option<(u32, u32, u32)>,
}

impl CompiledStep {
    /// The batch `x` (channels-last rows of the input's features) as the step's input buffer
    /// holds it: each image zero-padded by [`CompiledStep::input_padding`].
    pub fn padded_input<T: Copy + Default>(&self, x: &[T]) -> Vec<T> {
        let (Some((c, h, w)), p) = (self.input_image, self.input_padding as usize) else {
            return x.to_vec();
        };
        if p == 0 {
            return x.to_vec();
        }
        let (c, h, w) = (c as usize, h as usize, w as usize);
        let (hp, wp) = (h + 2 * p, w + 2 * p);
        let images = x.len() / (c * h * w).max(1);
        let mut out = vec![T::default(); images * hp * wp * c];
        for (n, image) in x.chunks_exact(c * h * w).enumerate() {
            for (y, row) in image.chunks_exact(w * c).enumerate() {
                let at = ((n * hp + y + p) * wp + p) * c;
                out[at..at + w * c].copy_from_slice(row);
            }
        }
        out
    }

    pub fn macs(&self) -> u64 {
        self.segments.iter().map(|s| s.macs).sum()
    }
    pub fn cycles(&self) -> u64 {
        self.forward_cycles + self.backward_cycles
    }
}
