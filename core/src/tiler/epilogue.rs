//! The epilogue of an output block: what happens to its accumulators before they leave, and
//! what it costs (its instructions are `epilogue_emit.rs`'s).

use crate::config::ArrayConfig;
use crate::isa::VectorOp;
use crate::numerics::Requant;
use crate::timing::{transfer_row_cycles, vector_row_cycles};

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
    /// Scratchpad rows the epilogue needs per output row: one for a requantization, which
    /// passes through the scratchpad on its way to DRAM, else none.
    pub(super) fn spad_rows_per_row(&self) -> u32 {
        self.cast.is_some_and(|c| c.requant.is_some()) as u32
    }

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

    /// Sequencer cycles (one per row, `requant_cycles` per requantized row,
    /// `timing::vector_row_cycles` per row of a bias add and of an update's axpys,
    /// `timing::transfer_row_cycles` per row of a DRAM transfer, and `convert_stages` more per
    /// conversion: `timing::row_lands`, and `read_stages` more per instruction) and instructions
    /// spent on one output block of `mb` rows and `nj` columns.
    pub(super) fn cost(&self, (mb, nj): (u64, u64), config: &ArrayConfig) -> (u64, u64) {
        let mut cycles = 0;
        let mut count = 0;
        let mut add = |passes: u64, rows: u64| {
            cycles += passes * rows;
            count += passes;
        };
        // Cycles a row of `bytes`-byte elements spends on the DRAM.
        let transfer = |bytes: u64| transfer_row_cycles(config, nj as u16, bytes);
        let (words, elems) = (transfer(4), transfer(config.dtype.elem_bytes() as u64));
        // Conversions (`Requantize`, `StoreBf16`) each drain the lanes' pipeline.
        let mut conversions = 0;
        // A `Requantize` writes the scratchpad, a cycle more on a single-port one.
        let mut spad_writes = 0;
        if self.bias.is_some() {
            add(1, words);
            add(1, mb * vector_row_cycles(config, VectorOp::BiasAdd));
        }
        if self.relu_grad_mask.is_some() {
            add(1, mb * words);
            add(1, mb);
        }
        // A ReLU after a bias add is the same pass (`BiasRelu`).
        if self.relu && self.bias.is_none() {
            add(1, mb);
        }
        if self.store {
            add(1, mb * words);
        }
        match self.cast {
            Some(CastTo { requant: Some(_), .. }) => {
                // `Requantize` (`requant_cycles` a row), then `StoreSpad`.
                add(1, mb * config.requant_cycles as u64);
                add(1, mb * elems);
                conversions += 1;
                spad_writes += 1;
            }
            Some(CastTo { requant: None, .. }) => {
                add(1, mb * transfer(2));
                conversions += 1;
            }
            None => {}
        }
        if let Some(u) = self.update {
            let momentum = u.velocity.is_some() as u64;
            // Loads of p (and v); the decay and momentum axpys; p's axpy; stores; the bf16 copy.
            add(1 + momentum, mb * words);
            let axpys = (f32::from_bits(u.weight_decay) != 0.0) as u64 + momentum + 1;
            add(axpys, mb * vector_row_cycles(config, VectorOp::Axpy));
            add(1 + momentum, mb * words);
            add(u.copy.is_some() as u64, mb * transfer(2));
            conversions += u.copy.is_some() as u64;
        }
        let late = config.read_stages as u64;
        let turn = spad_writes * config.single_port_spad as u64;
        (cycles + conversions * config.convert_stages as u64 + count * late + turn, count)
    }
}

/// Where a pipelined (decoupled weight-stationary) program issues an [`Update`]'s loads of the
/// parameter and velocity rows. Early, they go before the block's first matmul, while the bank
/// waits for the array anyway, so the vector unit finds them in; but the load unit, which runs
/// in program order, then holds the loads behind them. Which is faster depends on what runs
/// around the GEMM, so the compiler tries each (`compile::Compiler::place_update_loads`).
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

    /// Whether block `block` issues the loads ahead of its matmuls.
    pub(super) const fn early(self, block: u32) -> bool {
        match self {
            UpdateLoads::Late => false,
            UpdateLoads::Early => true,
            UpdateLoads::EarlyAfterFirst => block > 0,
        }
    }
}
