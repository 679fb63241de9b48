//! A convolution's patches, made on the accelerator: strided, gathered `Load`s of the image
//! into the scratchpad and `StoreSpad`s of them into the patches matrix in DRAM, which the
//! convolution's GEMM (and its weight gradient's) then read as any row-major operand.
//!
//! The image is the network's input, written by the host zero-padded
//! ([`CompiledStep::padded_input`](super::CompiledStep::padded_input)), or a convolution's input
//! made on the array (a pooling's or a ReLU's output), which a padded convolution first
//! copies into the interior of a buffer whose borders hold zeros (the host writes them:
//! [`CompiledStep::zeroed`](super::CompiledStep::zeroed)), an image row at a time, so every
//! patch row is in range: for output row `oy` and kernel row `ky`, the `kernel x c` elements
//! each output position `ox` reads are contiguous in the padded HWC image, and the positions of
//! one output
//! row are `stride x c` elements apart. One `Load` (`ow` rows of that segment, at most a
//! scratchpad row wide) and one `StoreSpad` (to column `ky x kernel x c` of those `ow` patch
//! rows) move it. Pieces alternate between two scratchpad regions, so under the decoupled
//! schedule a piece's load overlaps the previous piece's store.

use super::{CompileError, Compiler};
use crate::config::ArrayConfig;
use crate::conv::ConvGeometry;
use crate::graph::TensorId;
use crate::isa::Instruction;

/// Instructions of the copy on `config`'s scratchpad: two per piece, a piece being at most a
/// scratchpad row of a kernel row's elements for at most half the scratchpad's rows of output
/// positions, for every output row of every image; and for a `padded_copy` (a padded
/// convolution of an input the array made), two per piece of its copy, a piece being at most a
/// scratchpad row of an image row for at most half the scratchpad's rows of image rows.
pub fn instructions(g: &ConvGeometry, batch: u32, config: &ArrayConfig, padded_copy: bool) -> u64 {
    let width = config.spad_width() as u32;
    let half = (config.spad_depth / 2).clamp(1, u16::MAX as u32);
    let pieces = (g.kernel * g.c).div_ceil(width) as u64 * g.out_w().div_ceil(half) as u64;
    let copy = match padded_copy && g.padding > 0 {
        true => (g.w * g.c).div_ceil(width) as u64 * g.h.div_ceil(half) as u64,
        false => 0,
    };
    2 * batch as u64 * (g.out_h() as u64 * g.kernel as u64 * pieces + copy)
}

impl Compiler<'_> {
    /// The patches `y` of the input image `x` (padded in DRAM, or copied padded) into
    /// program 0.
    pub(super) fn im2col(
        &mut self,
        x: TensorId,
        y: TensorId,
        g: ConvGeometry,
    ) -> Result<(), CompileError> {
        let es = self.config.dtype.elem_bytes() as u32;
        let width = self.config.spad_width() as u32;
        // Two regions of `half` rows (one on a one-row scratchpad).
        let depth = self.config.spad_depth;
        let half = (depth / 2).clamp(1, u16::MAX as u32);
        let regions = if depth >= 2 { 2 } else { 1 };
        let (c, k, s, p) = (g.c, g.kernel, g.stride, g.padding);
        let (wp, hp) = (g.w + 2 * p, g.h + 2 * p);
        let (oh, ow) = (g.out_h(), g.out_w());
        let (patch, seg) = (g.patch() as u32, k * c);
        let start = self.programs[0].len();
        let mut region = 0;
        let image = match self.padded_copy(x, p) {
            Some(copy) if x != self.graph.input => {
                // Each image row into the copy's interior: `w x c` elements, contiguous in both.
                let (from, line) = (self.elems(x), g.w * c);
                for n in 0..self.batch {
                    for y0 in (0..g.h).step_by(half as usize) {
                        let rows = half.min(g.h - y0);
                        for at in (0..line).step_by(width as usize) {
                            let len = width.min(line - at) as u16;
                            let spad_row = (region * half) as u16;
                            region = (region + 1) % regions;
                            self.programs[0].push(Instruction::Load {
                                spad_row,
                                dram_addr: from + ((n * g.h + y0) * line + at) * es,
                                rows: rows as u16,
                                len,
                                row_stride: line,
                                elem_stride: 1,
                            });
                            self.programs[0].push(Instruction::StoreSpad {
                                spad_row,
                                dram_addr: copy + (((n * hp + y0 + p) * wp + p) * c + at) * es,
                                rows: rows as u16,
                                len,
                                row_stride: wp * c,
                            });
                        }
                    }
                }
                copy
            }
            _ => self.elems(x),
        };
        let patches = self.elems(y);
        for n in 0..self.batch {
            for oy in 0..oh {
                for ky in 0..k {
                    let row = (n * hp + oy * s + ky) * wp * c;
                    for ox0 in (0..ow).step_by(half as usize) {
                        let rows = half.min(ow - ox0);
                        let m0 = (n * oh + oy) * ow + ox0;
                        for at in (0..seg).step_by(width as usize) {
                            let len = width.min(seg - at) as u16;
                            let spad_row = (region * half) as u16;
                            region = (region + 1) % regions;
                            self.programs[0].push(Instruction::Load {
                                spad_row,
                                dram_addr: image + (row + ox0 * s * c + at) * es,
                                rows: rows as u16,
                                len,
                                row_stride: s * c,
                                elem_stride: 1,
                            });
                            self.programs[0].push(Instruction::StoreSpad {
                                spad_row,
                                dram_addr: patches + (m0 * patch + ky * seg + at) * es,
                                rows: rows as u16,
                                len,
                                row_stride: patch,
                            });
                        }
                    }
                }
            }
        }
        let layer = self.layer_of_patches(y);
        self.push_segment(("im2col", layer), 0, start);
        Ok(())
    }

    /// The layer of the convolution that multiplies patches `y`.
    pub(super) fn layer_of_patches(&self, y: TensorId) -> u8 {
        self.graph
            .forward
            .iter()
            .find_map(|op| match *op {
                crate::graph::Op::Dense { x, w, .. } if x == y => Some(self.layer_of(w)),
                _ => None,
            })
            .unwrap_or(0)
    }
}
