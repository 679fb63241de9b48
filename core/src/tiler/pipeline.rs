//! The decoupled schedule's weight-stationary GEMM program, software-pipelined.
//!
//! Step `j` is one k-tile of one output block (an m-block of `mb` rows by one n-tile; blocks in m,
//! then n order). Each block sits in one accumulator bank, blocks alternating, so the vector unit
//! drains block `b` while the array computes block `b + 1`. The B tile of step `j` goes into
//! scratchpad buffer `j % buffers`; its A chunk either shares that buffer (**streamed**: reloaded
//! for every n-tile) or stays for the whole m-block in one of two regions of `KT * mb` rows that
//! alternate between m-blocks (**resident**: loaded with the m-block's first n-tile only). A
//! plain GEMM's block may span a **group** of n-tiles: each step loads its A chunk once and the
//! group's B tiles beside it, and runs a weight load and a matmul per n-tile, each matmul into
//! its own `mb` rows of the block's bank, so A crosses the DRAM once per group. In
//! program order a step is its `LoadWeights` and `Matmul`, then the loads of step
//! `j + buffers - 1` (which reuse step `j - 1`'s buffer), then at most one instruction of a
//! finished block's epilogue. A block's epilogue is complete before the block two on (its bank's
//! next user) starts. The hardware's scoreboard makes every reuse wait for its last reader.

use super::{GemmPlan, GemmShape};
use crate::config::{ArrayConfig, Dataflow, DramPort};
use crate::isa::Instruction;
use crate::sdram::{clock_ratio, SDRAM_PART, WORD_BYTES};
use crate::tiler::Epilogue;

/// How a decoupled WS GEMM uses the scratchpad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pipeline {
    /// Rows of an m-block.
    pub mb: u32,
    /// B tile buffers; the loads run `buffers - 1` steps ahead.
    pub buffers: u32,
    /// Whether the A chunks stay for the whole m-block.
    pub resident: bool,
    /// N-tiles in each output block (**grouped**, more than one: a plain GEMM's streamed
    /// steps load their A chunk once for that many B tiles, each matmul into its own `mb` rows
    /// of the block's bank).
    pub group: u32,
}

impl Pipeline {
    /// The layout with the fewest estimated cycles, and the best of those of one n-tile a
    /// block where that is another (the estimate misses what grouping costs a GEMM of few
    /// blocks: the last block's stores, exposed; `GemmPlan::new` times both where it is cheap);
    /// `None` when not even two streamed buffers fit (the plain order is used then). Each
    /// output block needs its mask and bias rows in half the accumulator, and a cast needs `mb`
    /// scratchpad rows of its own.
    pub fn choose(
        config: &ArrayConfig,
        shape: &GemmShape,
        epilogue: &Epilogue,
    ) -> Option<(Pipeline, Option<Pipeline>)> {
        if config.dataflow != Dataflow::WeightStationary {
            return None;
        }
        let r = config.rows as u32;
        let kt = shape.k.div_ceil(r);
        let (per_row, bias_row) = epilogue.acc_rows();
        let acc_mb = (config.acc_depth / 2).saturating_sub(bias_row) / per_row;
        // Only a requantization goes through the scratchpad.
        let cast = epilogue.spad_rows_per_row();
        // Only a plain GEMM's block (its stores alone) spreads over several n-tiles.
        let nt = shape.n.div_ceil(config.cols as u32);
        let groups: &[u32] = if *epilogue == Epilogue::STORE { &GROUPS } else { &[1] };
        let layouts = [(3, false), (2, false), (3, true), (2, true)].into_iter();
        let candidates = layouts.flat_map(|(buffers, resident)| {
            let groups = groups.iter().filter(move |&&g| g == 1 || (!resident && g <= nt));
            groups.map(move |&group| {
                // Scratchpad rows per block row: an A row per buffer (streamed) or per k-tile in
                // each of two regions (resident), and the cast's; each buffer's B tiles besides.
                let per_mb = if resident { 2 * kt } else { buffers } + cast;
                let spad_mb = config.spad_depth.saturating_sub(buffers * group * r) / per_mb;
                let mb = shape.m.min(acc_mb / group).min(spad_mb).min(u16::MAX as u32);
                Pipeline { mb, buffers, resident, group }
            })
        });
        let estimate = |p: &Pipeline| p.estimate(config, shape);
        let best = candidates.clone().filter(|p| p.mb > 0).min_by_key(estimate)?;
        let ungrouped = candidates.filter(|p| p.mb > 0 && p.group == 1).min_by_key(estimate);
        Some((best, ungrouped.filter(|u| *u != best)))
    }

    /// Napkin cycles: steps times the slowest of what a step needs (its rows streamed, the
    /// loads into the scratchpad, a weight load, and on the SDRAM the bytes its loads and its
    /// share of the block's store move), plus one fill and drain. The exact count is the timing
    /// model's; this only ranks layouts.
    fn estimate(&self, config: &ArrayConfig, shape: &GemmShape) -> u64 {
        let (r, c) = (config.rows as u64, config.cols as u64);
        let (kt, nt) = (shape.k.div_ceil(r as u32) as u64, shape.n.div_ceil(c as u32) as u64);
        let (mb, g) = (self.mb as u64, self.group as u64);
        let a_rows = if self.resident { mb.div_ceil(nt) } else { mb };
        let steps = (shape.m as u64).div_ceil(mb) * nt.div_ceil(g) * kt;
        let step = (g * mb).max(g * r + a_rows);
        let step = match config.dram_port {
            DramPort::Sdram => {
                let es = config.dtype.elem_bytes() as u64;
                let bytes = (g * r * c + a_rows * r) * es + (g * mb * c * 4).div_ceil(kt);
                let per_cycle = WORD_BYTES * clock_ratio(&SDRAM_PART, config.clock_mhz);
                step.max(bytes.div_ceil(per_cycle))
            }
            _ => step,
        };
        steps * step + r + c
    }

    /// First scratchpad row of step `j`'s B tiles (the group's, `R` rows apart), and of its A
    /// chunk for k-tile `ki` of m-block `mblock`.
    fn rows(&self, r: u32, kt: u32, j: usize, mblock: u32, ki: u32) -> (u16, u16) {
        let buffer = j as u32 % self.buffers;
        if self.resident {
            let b_at = 2 * kt * self.mb + buffer * r;
            (b_at as u16, ((mblock % 2 * kt + ki) * self.mb) as u16)
        } else {
            let base = buffer * (self.group * r + self.mb);
            (base as u16, (base + self.group * r) as u16)
        }
    }

    /// The cast's scratchpad rows: after everything else.
    fn cast_row(&self, r: u32, kt: u32) -> u16 {
        let used = if self.resident {
            2 * kt * self.mb + self.buffers * r
        } else {
            self.buffers * (self.group * r + self.mb)
        };
        used as u16
    }

    /// Output blocks of a GEMM of `shape` on `cols` columns.
    pub fn blocks(&self, shape: &GemmShape, cols: u32) -> u64 {
        let groups = shape.n.div_ceil(cols).div_ceil(self.group);
        shape.m.div_ceil(self.mb) as u64 * groups as u64
    }
}

/// `ins`, or where it is a `Store` of more than `piece` rows, its first `piece` rows and the
/// rest.
fn split_store(ins: Instruction, piece: u32) -> (Instruction, Option<Instruction>) {
    match ins {
        Instruction::Store { acc_row, dram_addr, rows, len, row_stride } if rows as u32 > piece => {
            let head =
                Instruction::Store { acc_row, dram_addr, rows: piece as u16, len, row_stride };
            let rest = Instruction::Store {
                acc_row: acc_row + piece as u16,
                dram_addr: dram_addr + piece * row_stride * 4,
                rows: rows - piece as u16,
                len,
                row_stride,
            };
            (head, Some(rest))
        }
        _ => (ins, None),
    }
}

/// The n-tiles an output block of a plain GEMM may span.
const GROUPS: [u32; 5] = [1, 2, 4, 8, 16];

/// Most pieces an A chunk goes in on the SDRAM.
const A_PIECES: u32 = 16;

/// Most loads a step issues: a B tile per n-tile of the largest group, its A chunk in
/// [`A_PIECES`], and A's separate last row.
const AHEAD: usize = (GROUPS[GROUPS.len() - 1] + A_PIECES) as usize + 1;

/// One step: its block (index, m-block index, n-group index, and `(m0, mb, n0, ncols)`: its
/// n-tiles' columns) and k-tile.
#[derive(Clone, Copy)]
struct Step {
    block: u32,
    mblock: u32,
    ntile: u32,
    tile: (u32, u32, u32, u32),
    ki: u32,
}

impl GemmPlan {
    /// See the module docs.
    pub(super) fn emit_ws_pipelined(&self, p: Pipeline, sink: &mut impl FnMut(Instruction)) {
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u32, self.config.cols as u32);
        let es = self.config.dtype.elem_bytes() as u32;
        let b = self.layout.b;
        let kt = k.div_ceil(r);
        let cast_row = p.cast_row(r, kt);
        let half = self.config.acc_depth.div_ceil(2);
        let bank_base = |block: u32| ((block + self.first_bank) % 2 * half) as u16;
        let groups = n.div_ceil(c).div_ceil(p.group);
        // The group's n-tiles: `(t, n0, nj)` each.
        let sub_tiles = move |n0: u32, ncols: u32| {
            Self::tiles(ncols, c).enumerate().map(move |(t, (d, nj))| (t as u32, n0 + d, nj))
        };
        let steps = move || {
            Self::tiles(m, p.mb).enumerate().flat_map(move |(mblock, (m0, mb))| {
                Self::tiles(n, p.group * c).enumerate().flat_map(move |(ntile, (n0, nj))| {
                    (0..kt).map(move |ki| Step {
                        block: mblock as u32 * groups + ntile as u32,
                        mblock: mblock as u32,
                        ntile: ntile as u32,
                        tile: (m0, mb, n0, nj),
                        ki,
                    })
                })
            })
        };
        // On the SDRAM a step's loads and a block's epilogue spread over the step's matmuls,
        // and a streamed A chunk and a store go in pieces of the rows the SDRAM moves in about
        // the time a matmul streams (`mb` array cycles), so that no transfer holds the in-order
        // issue, and the array behind it, for long (docs/DECISIONS.md 145). Elsewhere the
        // loads and an epilogue instruction follow a step's last matmul, each transfer whole.
        let sdram = self.config.dram_port == DramPort::Sdram;
        let piece = |row_bytes: u64| match sdram {
            true => {
                let per_cycle = WORD_BYTES * clock_ratio(&SDRAM_PART, self.config.clock_mhz);
                (p.mb as u64 * per_cycle / row_bytes).max(1) as u32
            }
            false => u32::MAX,
        };
        let a_piece = match p.resident {
            false => piece(r as u64 * es as u64).max(p.mb.div_ceil(A_PIECES)),
            true => u32::MAX,
        };
        let store_piece = piece(c as u64 * 4);
        let loads = |sink: &mut dyn FnMut(Instruction), j: usize, s: Step| {
            let (m0, mb, n0, ncols) = s.tile;
            let (b_row, a_row) = p.rows(r, kt, j, s.mblock, s.ki);
            let k0 = s.ki * r;
            let kk = r.min(k - k0);
            for (t, n0, nj) in sub_tiles(n0, ncols) {
                sink(Instruction::Load {
                    spad_row: b_row + (t * r) as u16,
                    dram_addr: b.at(k0, n0, es),
                    rows: kk as u16,
                    len: nj as u16,
                    row_stride: b.row_stride_at(n0),
                    elem_stride: b.col_stride,
                });
            }
            if !p.resident || s.ntile == 0 {
                for (d, rows) in Self::tiles(mb, a_piece.min(mb)) {
                    self.load_a(sink, a_row + d as u16, (m0 + d, rows), (k0, kk));
                }
            }
        };
        let mut later = steps().enumerate();
        for (j, step) in later.by_ref().take(p.buffers as usize - 1) {
            loads(&mut *sink, j, step);
        }
        // The epilogues of finished blocks, oldest first, each with its block.
        let mut pending: heapless::Deque<(u32, Instruction), 32> = heapless::Deque::new();
        for (j, s) in steps().enumerate() {
            let (m0, mb, n0, ncols) = s.tile;
            if s.ki == 0 {
                while let Some((_, ins)) = pending.pop_front_if(|(b, _)| *b + 2 <= s.block) {
                    sink(ins);
                }
                if self.update_loads.early(s.block) {
                    self.emit_update_loads(sink, s.tile, bank_base(s.block));
                }
            }
            // The loads of a later step, spread over this step's n-tiles: its B tiles first
            // (their buffer's weights were read long ago), its A chunk after (its buffer's last
            // matmul, the step before this one's, leaves the array meanwhile).
            let mut ahead: heapless::Vec<Instruction, AHEAD> = heapless::Vec::new();
            if let Some((later_j, later_step)) = later.next() {
                loads(&mut |ins| ahead.push(ins).expect("loads of a step"), later_j, later_step);
            }
            let (b_row, a_row) = p.rows(r, kt, j, s.mblock, s.ki);
            let kk = r.min(k - s.ki * r);
            let tiles = ncols.div_ceil(c) as usize;
            let mut left = ahead.len();
            let mut ahead = ahead.into_iter();
            for (t, _, nj) in sub_tiles(n0, ncols) {
                let spad_row = b_row + (t * r) as u16;
                sink(Instruction::LoadWeights { spad_row, rows: kk as u16, cols: nj as u16 });
                sink(Instruction::Matmul {
                    a_row,
                    acc_row: bank_base(s.block) + (t * mb) as u16,
                    rows: mb as u16,
                    swap: true,
                    accumulate: s.ki > 0,
                });
                let last = t as usize + 1 == tiles;
                let share = match (last, sdram) {
                    (true, _) => left,
                    (false, true) => left.div_ceil(tiles - t as usize),
                    (false, false) => 0,
                };
                ahead.by_ref().take(share).for_each(&mut *sink);
                left -= share;
                // A finished block's epilogue, an instruction after the step's last matmul (on
                // the SDRAM, a store's piece after each).
                if last || sdram {
                    if let Some((block, ins)) = pending.pop_front_if(|(b, _)| *b < s.block) {
                        let (now, rest) = split_store(ins, store_piece);
                        sink(now);
                        if let Some(rest) = rest {
                            pending.push_front((block, rest)).expect("room for the rest");
                        }
                    }
                }
            }
            if s.ki + 1 == kt {
                let mut queue = |ins| {
                    if let Err((b, ins)) = pending.push_back((s.block, ins)) {
                        // Full: the oldest goes now (program order is kept either way).
                        if let Some((_, first)) = pending.pop_front() {
                            sink(first);
                        }
                        let _ = pending.push_back((b, ins));
                    }
                };
                for (t, n0, nj) in sub_tiles(n0, ncols) {
                    self.emit_epilogue(
                        &mut queue,
                        (m0, mb, n0, nj),
                        cast_row,
                        bank_base(s.block) + (t * mb) as u16,
                        self.update_loads.early(s.block),
                    );
                }
            }
        }
        while let Some((_, ins)) = pending.pop_front() {
            sink(ins);
        }
    }

    /// The timing model over the emitted program, instruction by instruction, without storing it.
    pub(super) fn scheduled_cycles(&self) -> u64 {
        let mut scheduler = crate::timing::Scheduler::new(&self.config);
        let mut total = 0;
        // A tiled program's swaps each follow their weight load: it cannot fault.
        self.emit(&mut |ins| total = scheduler.push(&ins).map_or(u64::MAX, |at| at + 1));
        total
    }
}
