//! The three memories of a golden machine and the row-level semantics of the instructions that
//! move data (`Load`, `Store`, vector ops, casts). Both golden machines share these, so they
//! cannot disagree on them; the array dataflow is where they differ, and is tested.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use crate::config::ArrayConfig;
use crate::isa::{Instruction, VectorOp};
use crate::machine::{MachineError, Region};
use crate::numerics::bf16::cast_to_bf16;
use crate::numerics::Arith;

/// DRAM bytes, scratchpad element bits, accumulator word bits.
pub struct Memories {
    pub config: ArrayConfig,
    pub dram: Vec<u8>,
    /// `spad_depth * spad_width` elements; INT8 elements in the low byte.
    pub spad: Vec<u16>,
    /// `acc_depth * cols` words, as stored (NaN canonical).
    pub acc: Vec<u32>,
}

impl Memories {
    /// Zeroed memories for a validated config.
    pub fn new(config: ArrayConfig, dram_bytes: usize) -> Memories {
        Memories {
            config,
            dram: vec![0; dram_bytes],
            spad: vec![0; config.spad_depth as usize * config.spad_width()],
            acc: vec![0; config.acc_depth as usize * config.cols as usize],
        }
    }

    pub fn region_size(&self, region: Region) -> usize {
        match region {
            Region::Dram => self.dram.len(),
            Region::Spad => self.spad.len() * self.config.dtype.elem_bytes(),
            Region::Acc => self.acc.len() * 4,
        }
    }

    fn check(&self, region: Region, offset: usize, len: usize) -> Result<(), MachineError> {
        let size = self.region_size(region);
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(MachineError::OutOfRange { region, offset, len, size });
        }
        let align = match region {
            Region::Dram => 1,
            Region::Spad => self.config.dtype.elem_bytes(),
            Region::Acc => 4,
        };
        if offset % align != 0 || len % align != 0 {
            return Err(MachineError::Misaligned { region, offset, len, align });
        }
        Ok(())
    }

    pub fn write(
        &mut self,
        region: Region,
        offset: usize,
        bytes: &[u8],
    ) -> Result<(), MachineError> {
        self.check(region, offset, bytes.len())?;
        match region {
            Region::Dram => self.dram[offset..offset + bytes.len()].copy_from_slice(bytes),
            Region::Spad => {
                let es = self.config.dtype.elem_bytes();
                for (i, chunk) in bytes.chunks_exact(es).enumerate() {
                    self.spad[offset / es + i] = elem_bits(chunk);
                }
            }
            Region::Acc => {
                for (i, chunk) in bytes.chunks_exact(4).enumerate() {
                    self.acc[offset / 4 + i] =
                        u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
                }
            }
        }
        Ok(())
    }

    pub fn read(&self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError> {
        self.check(region, offset, out.len())?;
        match region {
            Region::Dram => out.copy_from_slice(&self.dram[offset..offset + out.len()]),
            Region::Spad => {
                let es = self.config.dtype.elem_bytes();
                for (i, chunk) in out.chunks_exact_mut(es).enumerate() {
                    let bits = self.spad[offset / es + i].to_le_bytes();
                    chunk.copy_from_slice(&bits[..es]);
                }
            }
            Region::Acc => {
                for (i, chunk) in out.chunks_exact_mut(4).enumerate() {
                    chunk.copy_from_slice(&self.acc[offset / 4 + i].to_le_bytes());
                }
            }
        }
        Ok(())
    }

    /// One scratchpad row.
    #[inline]
    pub fn spad_row(&self, row: usize) -> &[u16] {
        let w = self.config.spad_width();
        &self.spad[row * w..(row + 1) * w]
    }

    /// One accumulator row.
    #[inline]
    pub fn acc_row_mut(&mut self, row: usize) -> &mut [u32] {
        let c = self.config.cols as usize;
        &mut self.acc[row * c..(row + 1) * c]
    }

    /// Row `r` of a data-movement instruction (`Load`, `Store`, `Vector`, casts); the cycle
    /// machine calls this one row per cycle, the functional machine for all rows at once.
    pub fn row_step<A: Arith>(&mut self, ins: &Instruction, r: usize) {
        match *ins {
            Instruction::Load { spad_row, dram_addr, len, row_stride, elem_stride, .. } => {
                let es = self.config.dtype.elem_bytes();
                let w = self.config.spad_width();
                let base = (spad_row as usize + r) * w;
                let (row, len) = (&mut self.spad[base..base + w], (len as usize).min(w));
                let start = dram_addr as usize + r * row_stride as usize * es;
                let step = elem_stride as usize * es;
                // The row's elements, then zeros to its width; contiguous rows (the common case)
                // as one slice, so the copy is a straight loop.
                let (filled, rest) = row.split_at_mut(len);
                match (es, step == es) {
                    (1, true) => {
                        let src = &self.dram[start..start + len];
                        filled.iter_mut().zip(src).for_each(|(out, &b)| *out = b as u16);
                    }
                    (_, true) => {
                        let src = &self.dram[start..start + len * es];
                        for (out, b) in filled.iter_mut().zip(src.chunks_exact(es)) {
                            *out = elem_bits(b);
                        }
                    }
                    _ => {
                        for (e, out) in filled.iter_mut().enumerate() {
                            let at = start + e * step;
                            *out = elem_bits(&self.dram[at..at + es]);
                        }
                    }
                }
                rest.fill(0);
            }
            Instruction::Store { acc_row, dram_addr, len, row_stride, .. } => {
                let c = self.config.cols as usize;
                let src = (acc_row as usize + r) * c;
                let dst = dram_addr as usize + r * row_stride as usize * 4;
                for e in 0..len as usize {
                    let word = self.acc[src + e].to_le_bytes();
                    self.dram[dst + e * 4..dst + e * 4 + 4].copy_from_slice(&word);
                }
            }
            Instruction::LoadAcc { acc_row, dram_addr, len, row_stride, .. } => {
                let c = self.config.cols as usize;
                let dst = (acc_row as usize + r) * c;
                let src = dram_addr as usize + r * row_stride as usize * 4;
                for e in 0..c {
                    self.acc[dst + e] = if e < len as usize {
                        let b = &self.dram[src + e * 4..src + e * 4 + 4];
                        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
                    } else {
                        0
                    };
                }
            }
            Instruction::StoreSpad { spad_row, dram_addr, len, row_stride, .. } => {
                let es = self.config.dtype.elem_bytes();
                let w = self.config.spad_width();
                let src = (spad_row as usize + r) * w;
                let dst = dram_addr as usize + r * row_stride as usize * es;
                for e in 0..len as usize {
                    let bits = self.spad[src + e].to_le_bytes();
                    self.dram[dst + e * es..dst + (e + 1) * es].copy_from_slice(&bits[..es]);
                }
            }
            Instruction::Vector { op, dst, src, imm, .. } => {
                let c = self.config.cols as usize;
                let d = (dst as usize + r) * c;
                let s = match op.src_is_one_row() {
                    true => src as usize * c,
                    false => (src as usize + r) * c,
                };
                let k = A::acc_from_bits(imm);
                for j in 0..c {
                    let x = A::acc_from_bits(self.acc[d + j]);
                    let y = match op {
                        VectorOp::BiasAdd | VectorOp::Add => {
                            A::add(x, A::acc_from_bits(self.acc[s + j]))
                        }
                        VectorOp::Relu => {
                            if A::le_zero(x) {
                                A::zero()
                            } else {
                                x
                            }
                        }
                        VectorOp::ReluGrad => {
                            if A::le_zero(A::acc_from_bits(self.acc[s + j])) {
                                A::zero()
                            } else {
                                x
                            }
                        }
                        VectorOp::Scale => A::mul_acc(x, k),
                        VectorOp::Axpy => {
                            A::add(x, A::mul_acc(k, A::acc_from_bits(self.acc[s + j])))
                        }
                        VectorOp::BiasRelu => {
                            let y = A::add(x, A::acc_from_bits(self.acc[s + j]));
                            if A::le_zero(y) {
                                A::zero()
                            } else {
                                y
                            }
                        }
                        VectorOp::Max => A::max_first(x, A::acc_from_bits(self.acc[s + j])),
                        VectorOp::Equal => A::equal(x, A::acc_from_bits(self.acc[s + j])),
                    };
                    self.acc[d + j] = A::acc_to_bits(y);
                }
            }
            Instruction::StoreBf16 { acc_row, dram_addr, len, row_stride, .. } => {
                let c = self.config.cols as usize;
                let src = (acc_row as usize + r) * c;
                let dst = dram_addr as usize + r * row_stride as usize * 2;
                for e in 0..len as usize {
                    let bits = self.acc[src + e];
                    let elem = cast_to_bf16(crate::numerics::BF16::acc_from_bits(bits)).0;
                    self.dram[dst + e * 2..dst + e * 2 + 2].copy_from_slice(&elem.to_le_bytes());
                }
            }
            Instruction::CastBf16 { acc_row, spad_row, .. } => {
                self.cast_row(acc_row as usize + r, spad_row as usize + r, |bits| {
                    cast_to_bf16(crate::numerics::BF16::acc_from_bits(bits)).0
                })
            }
            Instruction::Requantize { acc_row, spad_row, requant, .. } => {
                self.cast_row(acc_row as usize + r, spad_row as usize + r, |bits| {
                    requant.apply(bits as i32) as u8 as u16
                })
            }
            _ => {}
        }
    }

    fn cast_row(&mut self, acc_row: usize, spad_row: usize, f: impl Fn(u32) -> u16) {
        let c = self.config.cols as usize;
        let w = self.config.spad_width();
        for e in 0..w {
            self.spad[spad_row * w + e] = if e < c { f(self.acc[acc_row * c + e]) } else { 0 };
        }
    }
}

/// Element bits from 1 or 2 little-endian bytes.
#[inline]
fn elem_bits(bytes: &[u8]) -> u16 {
    match bytes {
        [b] => *b as u16,
        [lo, hi] => u16::from_le_bytes([*lo, *hi]),
        _ => 0,
    }
}
