//! The epilogue of an output block: what happens to its accumulators before they leave.

use super::GemmPlan;
use crate::isa::{Instruction, VectorOp};
use crate::numerics::Requant;

/// Cast of the finished accumulators to scratchpad elements, stored row-major `M x N` at
/// `addr` (one element each): BF16 when `requant` is `None`, INT8 requantized otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CastTo {
    pub addr: u32,
    pub requant: Option<Requant>,
}

/// SGD applied to a block that holds a parameter's gradient, while the gradient is still in the
/// accumulators: the parameter's own tile is loaded beside it, updated and stored back, so the
/// gradient never goes through DRAM. Every buffer is row-major `M x N`, as the gradient is.
/// Per element, in the vector unit's rounding (BF16 configs, each product rounded first):
/// `g += wd * p` (when `weight_decay` is not 0), `g += momentum * v` and `v = g` (with a
/// velocity), `p += -lr * g`; then `p` (and `v`) are stored and `p` cast to its bf16 `copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Update {
    /// Byte address of the f32 master parameter words.
    pub param: u32,
    /// Byte address of the f32 velocity words (momentum SGD).
    pub velocity: Option<u32>,
    /// Byte address of the parameter's bf16 copy, refreshed after the update.
    pub copy: Option<u32>,
    /// `f32` bits of `-lr`, `momentum` and `weight_decay`, the vector unit's immediates.
    pub neg_lr: u32,
    pub momentum: u32,
    pub weight_decay: u32,
}

impl Update {
    /// Accumulator rows it needs beside each gradient row: the parameter and the velocity.
    pub const fn rows_per_row(&self) -> u32 {
        1 + self.velocity.is_some() as u32
    }
}

/// What happens to each finished output block before it leaves the accumulators, in this
/// order: bias add, ReLU gradient, ReLU, store of the 32-bit words to `layout.c`, cast; or,
/// alone, an SGD [`Update`] of the parameter whose gradient the block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Epilogue {
    /// Byte address of `N` 32-bit bias words added to every row.
    pub bias: Option<u32>,
    /// Byte address of a row-major `M x N` 32-bit mask: outputs are zeroed where it is `<= 0`.
    pub relu_grad_mask: Option<u32>,
    pub relu: bool,
    /// Store the 32-bit accumulators to `layout.c`.
    pub store: bool,
    pub cast: Option<CastTo>,
    pub update: Option<Update>,
}

impl Epilogue {
    /// Just store C: what a plain GEMM needs.
    pub const STORE: Epilogue = Epilogue {
        bias: None,
        relu_grad_mask: None,
        relu: false,
        store: true,
        cast: None,
        update: None,
    };

    /// Only an SGD update of the parameter whose gradient the GEMM computes.
    pub const fn update(update: Update) -> Epilogue {
        Epilogue { store: false, update: Some(update), ..Epilogue::STORE }
    }

    /// Accumulator rows each output row needs (itself, its mask or its update's), and rows
    /// each block needs once (the bias row).
    pub(super) const fn acc_rows(&self) -> (u32, u32) {
        let per_row = 1
            + self.relu_grad_mask.is_some() as u32
            + match self.update {
                Some(u) => u.rows_per_row(),
                None => 0,
            };
        (per_row, self.bias.is_some() as u32)
    }

    /// Why this epilogue cannot run, if it cannot: an update runs alone.
    pub(super) fn check(&self) -> Result<(), &'static str> {
        let others = self.bias.is_some()
            || self.relu_grad_mask.is_some()
            || self.relu
            || self.store
            || self.cast.is_some();
        if self.update.is_some() && others {
            return Err("an SGD update cannot share its epilogue with a bias, ReLU, store or cast");
        }
        Ok(())
    }

    /// The highest DRAM byte (exclusive) the epilogue's own buffers reach for an `M x N` output
    /// of `elem_bytes` elements.
    pub(super) fn dram_end(&self, m: u32, n: u32, elem_bytes: u64) -> u64 {
        let mn = m as u64 * n as u64;
        let end = |addr: Option<u32>, bytes: u64| addr.map_or(0, |a| a as u64 + bytes);
        let u = self.update;
        [
            end(self.bias, n as u64 * 4),
            end(self.relu_grad_mask, mn * 4),
            end(self.cast.map(|c| c.addr), mn * elem_bytes),
            end(u.map(|u| u.param), mn * 4),
            end(u.and_then(|u| u.velocity), mn * 4),
            end(u.and_then(|u| u.copy), mn * elem_bytes),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    /// Sequencer cycles (one per row) and instructions spent on one output block of `mb` rows.
    pub(super) fn cost(&self, mb: u64) -> (u64, u64) {
        let mut cycles = 0;
        let mut count = 0;
        let mut add = |passes: u64, rows: u64| {
            cycles += passes * rows;
            count += passes;
        };
        if self.bias.is_some() {
            add(1, 1);
            add(1, mb);
        }
        if self.relu_grad_mask.is_some() {
            add(2, mb);
        }
        // A ReLU after a bias add is the same pass (`BiasRelu`).
        if self.relu && self.bias.is_none() {
            add(1, mb);
        }
        if self.store {
            add(1, mb);
        }
        match self.cast {
            Some(CastTo { requant: Some(_), .. }) => add(2, mb),
            Some(CastTo { requant: None, .. }) => add(1, mb),
            None => {}
        }
        if let Some(u) = self.update {
            let momentum = u.velocity.is_some() as u64;
            // Loads of p (and v); the decay and momentum axpys; p's axpy; stores; the bf16 copy.
            add(1 + momentum, mb);
            add((f32::from_bits(u.weight_decay) != 0.0) as u64 + momentum + 1, mb);
            add(1 + momentum, mb);
            add(u.copy.is_some() as u64, mb);
        }
        (cycles, count)
    }
}

impl GemmPlan {
    /// The epilogue of the output block in accumulator rows `0..mb`: rows `m0..m0 + mb`,
    /// columns `n0..n0 + nj` of C. Mask rows follow the outputs; the bias row follows those.
    pub(super) fn emit_epilogue(
        &self,
        sink: &mut impl FnMut(Instruction),
        tile: (u32, u32, u32, u32),
        cast_row: u16,
        acc_base: u16,
    ) {
        self.emit_epilogue_ops(sink, tile, cast_row, acc_base, Loads::NONE);
    }

    /// Where the epilogue's loaded rows go: the mask rows, the bias row, and an update's
    /// parameter and velocity rows.
    fn epilogue_rows(&self, acc_base: u16) -> EpilogueRows {
        let mb = self.mb as u16;
        let e = &self.epilogue;
        EpilogueRows {
            mask: acc_base + mb,
            bias: acc_base + mb * (1 + e.relu_grad_mask.is_some() as u16),
            param: acc_base + mb,
            velocity: acc_base + 2 * mb,
        }
    }

    /// The epilogue's loads into the accumulators (the bias row, the mask rows, an update's
    /// parameter and velocity), none of which touches the block's own rows: a pipelined program
    /// issues them before the block's first matmul, while its bank waits for the array anyway.
    pub(super) fn emit_epilogue_loads(
        &self,
        sink: &mut impl FnMut(Instruction),
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        acc_base: u16,
        which: Loads,
    ) {
        let n = self.shape.n;
        let e = &self.epilogue;
        let at = self.epilogue_rows(acc_base);
        let block = |acc_row, base: u32| Instruction::LoadAcc {
            acc_row,
            dram_addr: base + (m0 * n + n0) * 4,
            rows: mb as u16,
            len: nj as u16,
            row_stride: n,
        };
        if let (Some(bias), true) = (e.bias, which.bias) {
            sink(Instruction::LoadAcc {
                acc_row: at.bias,
                dram_addr: bias + n0 * 4,
                rows: 1,
                len: nj as u16,
                row_stride: 0,
            });
        }
        if let (Some(mask), true) = (e.relu_grad_mask, which.mask) {
            sink(block(at.mask, mask));
        }
        if let (Some(u), true) = (e.update, which.update) {
            sink(block(at.param, u.param));
            if let Some(vel) = u.velocity {
                sink(block(at.velocity, vel));
            }
        }
    }

    /// The epilogue but the loads in `loaded`, which were issued ahead
    /// ([`emit_epilogue_loads`](Self::emit_epilogue_loads)); each other load goes right before the
    /// op that reads it.
    pub(super) fn emit_epilogue_ops(
        &self,
        sink: &mut impl FnMut(Instruction),
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        cast_row: u16,
        acc_base: u16,
        loaded: Loads,
    ) {
        let n = self.shape.n;
        let e = &self.epilogue;
        let rows = mb as u16;
        let at = self.epilogue_rows(acc_base);
        let tile = (m0, mb, n0, nj);
        self.emit_epilogue_loads(sink, tile, acc_base, Loads::BIAS.without(loaded));
        if e.bias.is_some() {
            // With a ReLU after it, both are one pass.
            let op = if e.relu { VectorOp::BiasRelu } else { VectorOp::BiasAdd };
            sink(Instruction::Vector { op, dst: acc_base, src: at.bias, rows, imm: 0 });
        }
        self.emit_epilogue_loads(sink, tile, acc_base, Loads::MASK.without(loaded));
        if e.relu_grad_mask.is_some() {
            sink(Instruction::Vector {
                op: VectorOp::ReluGrad,
                dst: acc_base,
                src: at.mask,
                rows,
                imm: 0,
            });
        }
        if e.relu && e.bias.is_none() {
            sink(Instruction::Vector { op: VectorOp::Relu, dst: acc_base, src: 0, rows, imm: 0 });
        }
        if e.store {
            sink(Instruction::Store {
                acc_row: acc_base,
                dram_addr: self.layout.c + (m0 * n + n0) * 4,
                rows,
                len: nj as u16,
                row_stride: n,
            });
        }
        self.emit_epilogue_loads(sink, tile, acc_base, Loads::UPDATE.without(loaded));
        if let Some(u) = e.update {
            self.emit_update(sink, &u, tile, acc_base);
        }
        match e.cast {
            // BF16 goes straight from the accumulators to DRAM.
            Some(CastTo { addr, requant: None }) => sink(Instruction::StoreBf16 {
                acc_row: acc_base,
                dram_addr: addr + (m0 * n + n0) * 2,
                rows,
                len: nj as u16,
                row_stride: n,
            }),
            // INT8 is requantized into the scratchpad, then stored.
            Some(CastTo { addr, requant: Some(requant) }) => {
                sink(Instruction::Requantize {
                    acc_row: acc_base,
                    spad_row: cast_row,
                    rows,
                    requant,
                });
                sink(Instruction::StoreSpad {
                    spad_row: cast_row,
                    dram_addr: addr + (m0 * n + n0),
                    rows,
                    len: nj as u16,
                    row_stride: n,
                });
            }
            None => {}
        }
    }

    /// [`Update`]'s vector ops and stores for one block: the gradient in rows `acc_base..`, the
    /// parameter and the velocity, already loaded, in the next two runs of `self.mb` rows.
    fn emit_update(
        &self,
        sink: &mut impl FnMut(Instruction),
        u: &Update,
        (m0, mb, n0, nj): (u32, u32, u32, u32),
        acc_base: u16,
    ) {
        let n = self.shape.n;
        let rows = mb as u16;
        let EpilogueRows { param: p, velocity: v, .. } = self.epilogue_rows(acc_base);
        let g = acc_base;
        let at = |base: u32| base + (m0 * n + n0) * 4;
        let store = |acc_row, base| Instruction::Store {
            acc_row,
            dram_addr: at(base),
            rows,
            len: nj as u16,
            row_stride: n,
        };
        let axpy = |dst, src, imm| Instruction::Vector { op: VectorOp::Axpy, dst, src, rows, imm };
        if f32::from_bits(u.weight_decay) != 0.0 {
            sink(axpy(g, p, u.weight_decay));
        }
        if u.velocity.is_some() {
            sink(axpy(g, v, u.momentum));
        }
        sink(axpy(p, g, u.neg_lr));
        if let Some(vel) = u.velocity {
            sink(store(g, vel));
        }
        sink(store(p, u.param));
        if let Some(copy) = u.copy {
            sink(Instruction::StoreBf16 {
                acc_row: p,
                dram_addr: copy + (m0 * n + n0) * 2,
                rows,
                len: nj as u16,
                row_stride: n,
            });
        }
    }
}

/// First accumulator rows of what an epilogue loads beside its block.
struct EpilogueRows {
    mask: u16,
    bias: u16,
    param: u16,
    velocity: u16,
}

/// Where a pipelined (decoupled weight-stationary) program issues an [`Update`]'s loads of the
/// parameter and velocity rows. Early, they go before the block's first matmul, while the bank
/// waits for the array anyway, so the vector unit finds them in; but the load unit, which runs
/// in program order, then holds the loads behind them. Which is faster depends on what runs
/// around the GEMM, so the compiler tries each (`compile::Compiler::gemm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UpdateLoads {
    /// In the epilogue, after the block's last matmul.
    #[default]
    Late,
    /// Before each block's first matmul.
    Early,
    /// Before each block's first matmul but the GEMM's first block's.
    EarlyAfterFirst,
}

impl UpdateLoads {
    pub const ALL: [UpdateLoads; 3] =
        [UpdateLoads::Late, UpdateLoads::Early, UpdateLoads::EarlyAfterFirst];

    /// The loads block `block` issues ahead of its matmuls.
    pub(super) const fn loads(self, block: u32) -> Loads {
        let update = match self {
            UpdateLoads::Late => false,
            UpdateLoads::Early => true,
            UpdateLoads::EarlyAfterFirst => block > 0,
        };
        Loads { bias: false, mask: false, update }
    }
}

/// Which of an epilogue's loads: the bias row, the mask rows, an update's rows.
#[derive(Clone, Copy)]
pub(super) struct Loads {
    pub bias: bool,
    pub mask: bool,
    pub update: bool,
}

impl Loads {
    const NONE: Loads = Loads { bias: false, mask: false, update: false };
    const BIAS: Loads = Loads { bias: true, ..Loads::NONE };
    const MASK: Loads = Loads { mask: true, ..Loads::NONE };
    const UPDATE: Loads = Loads { update: true, ..Loads::NONE };
    const fn without(self, other: Loads) -> Loads {
        Loads {
            bias: self.bias && !other.bias,
            mask: self.mask && !other.mask,
            update: self.update && !other.update,
        }
    }
}
