//! The GEMM tiler: `C = A x B` of any shape as one program for an [`ArrayConfig`], and the
//! cycle count of that program (closed form under the blocking schedule).
//!
//! DRAM holds `A` (M x K, row-major, one element each), `B` (K x N, row-major) and receives `C`
//! (M x N, row-major, 32-bit accumulators). See docs/PERFORMANCE_MODEL.md for the derivation of
//! [`GemmPlan::cycles`] and how it differs from SCALE-Sim's formulas.
//!
//! **Weight-stationary** (R x C array): K is cut into `KT = ceil(K / R)` k-tiles and N into
//! `NT = ceil(N / C)` n-tiles; M into m-blocks of `mb = min(M, acc_depth, spad_depth - R)` rows.
//! The k-tiles are processed in groups of `g = min(KT, spad_depth / (mb + R))`, the most whose
//! B tiles and A chunks fit the scratchpad together. For each m-block, n-tile and group: load the
//! group's B tiles and A chunks, then `LoadWeights` / `Matmul` pairs; the shadow registers load
//! tile `t + 1` while tile `t` streams. The first k-tile overwrites the accumulators, the rest add
//! to them; after the last group the block is stored (`blocking.rs`). Where it costs fewer
//! cycles, an m-block's `KT` A chunks are instead loaded once, before its first n-tile, and stay
//! in the scratchpad for all of them (**resident**, `mb <= (spad_depth - R) / KT` rows; a
//! requantizing epilogue's `mb` rows come after them). Under the decoupled
//! schedule the same tiles are software-pipelined instead, with buffers rotating in the
//! scratchpad and output blocks alternating accumulator banks (`pipeline.rs`).
//!
//! **Output-stationary**: M is cut into m-tiles of R rows, N into n-tiles of C columns, K into
//! chunks of `kc = min(K, (spad_depth - R) / 2, 65535)`. For each tile and chunk: load `A^T` (a
//! strided gather) and `B`, run `MatmulOs`, and finish the tile after the last chunk.
//!
//! Each finished output block goes through an [`Epilogue`] (bias, ReLU or its gradient, store of
//! the 32-bit accumulators, cast to BF16 or INT8 elements) before it leaves the accumulators:
//! this is how the training compiler fuses a layer into one tiled GEMM.

#[cfg(feature = "alloc")]
extern crate alloc;

mod blocking;
mod epilogue;
mod epilogue_emit;
mod pipeline;

use crate::config::{ArrayConfig, ConfigError, Dataflow, Schedule};
use crate::isa::Instruction;
pub use epilogue::{CastTo, Epilogue, Update, UpdateLoads};
use pipeline::Pipeline;

/// Largest value of a 24-bit stride field.
const MAX_STRIDE: u32 = (1 << 24) - 1;

/// Instructions below which a grouped pipeline is timed against an ungrouped one rather than
/// ranked by its estimate: a few milliseconds of the timing model.
const TIME_BOTH_BELOW: u64 = 20_000;

/// `C[M x N] = A[M x K] x B[K x N]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GemmShape {
    pub m: u32,
    pub k: u32,
    pub n: u32,
}

impl GemmShape {
    pub const fn macs(&self) -> u64 {
        self.m as u64 * self.k as u64 * self.n as u64
    }
}

/// A matrix in DRAM: element `(i, j)` at byte `addr + (i * row_stride + j * col_stride) *
/// elem_bytes`, or, in column panels, `addr + ((j / w) * stride + i * row_stride + (j % w) *
/// col_stride) * elem_bytes` ([`Panels`]). A transposed view of a row-major matrix is the same
/// memory with the strides swapped, which the strided `Load` gathers for free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MatrixView {
    pub addr: u32,
    pub row_stride: u32,
    pub col_stride: u32,
    pub panels: Option<Panels>,
}

/// Column panels: a `rows x cols` matrix stored as the row-major matrices of its columns
/// `p w .. (p + 1) w`, one after another, the last `cols - p w` wide where `w` does not divide
/// `cols`. A k-tile of A or an n-tile of B in panels of its width is one contiguous run of
/// DRAM, which an SDRAM streams a word a cycle (docs/DECISIONS.md 145). A view in panels has
/// `row_stride` `w` and `col_stride` 1; its last panel's rows are `cols - p w` apart
/// ([`MatrixView::row_stride_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Panels {
    pub width: u32,
    pub rows: u32,
    pub cols: u32,
}

impl MatrixView {
    /// A row-major matrix with `cols` columns.
    pub const fn row_major(addr: u32, cols: u32) -> MatrixView {
        MatrixView { addr, row_stride: cols, col_stride: 1, panels: None }
    }

    /// A `rows x cols` matrix in [`Panels`] of `width` columns.
    pub const fn in_panels(addr: u32, rows: u32, cols: u32, width: u32) -> MatrixView {
        let panels = Some(Panels { width, rows, cols });
        MatrixView { addr, row_stride: width, col_stride: 1, panels }
    }

    /// Elements between the starts of rows `i` and `i + 1` among columns from `j`: the view's
    /// `row_stride`, or the width of column `j`'s panel.
    pub const fn row_stride_at(&self, j: u32) -> u32 {
        match self.panels {
            Some(p) => {
                let first = j / p.width * p.width;
                let left = p.cols - first;
                if left < p.width {
                    left
                } else {
                    p.width
                }
            }
            None => self.row_stride,
        }
    }

    /// The transpose of a view without panels.
    pub const fn t(self) -> MatrixView {
        assert!(self.panels.is_none(), "the transpose of a view in panels");
        MatrixView {
            addr: self.addr,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            panels: None,
        }
    }

    /// Element `(i, j)`'s offset from `addr`, in elements.
    const fn offset(&self, i: u64, j: u64) -> u64 {
        match self.panels {
            Some(p) => {
                let first = j / p.width as u64 * p.width as u64;
                first * p.rows as u64 + i * self.row_stride_at(j as u32) as u64 + (j - first)
            }
            None => i * self.row_stride as u64 + j * self.col_stride as u64,
        }
    }

    /// Byte address of element `(i, j)` (the plan has checked that every element it reads
    /// lies below 4 GiB).
    fn at(&self, i: u32, j: u32, es: u32) -> u32 {
        (self.addr as u64 + self.offset(i as u64, j as u64) * es as u64) as u32
    }

    /// One past the last byte it can touch for an `rows x cols` matrix (in panels, the last
    /// element is the last byte).
    pub fn end(&self, rows: u32, cols: u32, es: u64) -> u64 {
        self.addr as u64 + (self.offset(rows as u64 - 1, cols as u64 - 1) + 1) * es
    }

    /// The DRAM image of a row-major `rows x cols` matrix of `es`-byte elements laid out as this
    /// view, from its `addr` to its [`MatrixView::end`] (any gaps zero), or `None` where the
    /// view is that row-major matrix itself.
    #[cfg(feature = "alloc")]
    pub fn image(
        &self,
        elems: &[u8],
        rows: u32,
        cols: u32,
        es: usize,
    ) -> Option<alloc::vec::Vec<u8>> {
        if *self == MatrixView::row_major(self.addr, cols) {
            return None;
        }
        let len = (self.end(rows, cols, es as u64) - self.addr as u64) as usize;
        let mut out = alloc::vec![0u8; len];
        for (n, elem) in elems.chunks_exact(es).take(rows as usize * cols as usize).enumerate() {
            let (i, j) = ((n / cols as usize) as u64, (n % cols as usize) as u64);
            let at = self.offset(i, j) as usize * es;
            out[at..at + es].copy_from_slice(elem);
        }
        Some(out)
    }
}

/// Where the operands live and where `C` (row-major, 32-bit words) goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GemmLayout {
    pub a: MatrixView,
    pub b: MatrixView,
    /// Byte address of `C`, row-major `M x N` 32-bit words (used when the epilogue stores).
    pub c: u32,
    /// Byte address of `K` contiguous elements that are A's last row (row `M - 1`) instead of
    /// the view's, which then holds `M - 1` rows. With a ones vector here, a weight gradient's
    /// GEMM gives the bias gradient as its last row: `[X^T; 1^T] dY = [dW; db]`.
    /// Weight-stationary arrays only.
    pub a_last_row: Option<u32>,
}

/// Why a GEMM cannot be tiled.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TileError {
    Config(ConfigError),
    /// A dimension is zero.
    Empty {
        dim: char,
    },
    /// A dimension exceeds what the ISA's 24-bit strides can address.
    TooLarge {
        dim: char,
        value: u32,
        max: u32,
    },
    /// The matrices do not fit the 32-bit DRAM address space.
    Layout {
        needed: u64,
    },
    /// The epilogue asks for something the config lacks (a cast of the other dtype).
    Epilogue {
        why: &'static str,
    },
    /// The accumulator cannot hold an output block with its mask and bias rows.
    AccCapacity {
        needed: u32,
        acc_depth: u32,
    },
    /// The layout asks for what this config's tiler does not do.
    Unsupported {
        why: &'static str,
    },
}

impl core::fmt::Display for TileError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            TileError::Config(e) => write!(f, "{e}"),
            TileError::Empty { dim } => write!(f, "dimension {dim} is zero"),
            TileError::TooLarge { dim, value, max } => {
                write!(f, "dimension {dim} = {value} exceeds the limit {max}")
            }
            TileError::Layout { needed } => write!(
                f,
                "the matrices need {needed} bytes of DRAM, more than the 4 GiB the ISA addresses"
            ),
            TileError::Epilogue { why } => write!(f, "epilogue: {why}"),
            TileError::Unsupported { why } => write!(f, "{why}"),
            TileError::AccCapacity { needed, acc_depth } => write!(
                f,
                "the epilogue needs {needed} accumulator rows (outputs, mask, bias) but \
                 acc_depth is {acc_depth}"
            ),
        }
    }
}

impl GemmLayout {
    /// A, B and C, every row of A in its view.
    pub const fn new(a: MatrixView, b: MatrixView, c: u32) -> GemmLayout {
        GemmLayout { a, b, c, a_last_row: None }
    }

    /// A, then B, then C (row-major, 4-byte aligned), from address 0; and the DRAM bytes they
    /// need. A and B are row-major, except on a weight-stationary array whose DRAM is the SDRAM:
    /// there A is in panels of R columns (a k-tile each) and B in panels of C (an n-tile each),
    /// so that each tile the program loads is one contiguous run ([`Panels`]); the bytes are
    /// the same.
    pub fn packed(
        config: &ArrayConfig,
        shape: &GemmShape,
    ) -> Result<(GemmLayout, usize), TileError> {
        let es = config.dtype.elem_bytes() as u64;
        let GemmShape { m, k, n } = *shape;
        let panels = config.dram_port == crate::config::DramPort::Sdram
            && config.dataflow == Dataflow::WeightStationary;
        let a_bytes = m as u64 * k as u64 * es;
        let b_bytes = k as u64 * n as u64 * es;
        let c_at = (a_bytes + b_bytes).div_ceil(4) * 4;
        let total = c_at + m as u64 * n as u64 * 4;
        if total > u32::MAX as u64 {
            return Err(TileError::Layout { needed: total });
        }
        let (a, b) = match panels {
            true => (
                MatrixView::in_panels(0, m, k, config.rows as u32),
                MatrixView::in_panels(a_bytes as u32, k, n, config.cols as u32),
            ),
            false => (MatrixView::row_major(0, k), MatrixView::row_major(a_bytes as u32, n)),
        };
        Ok((GemmLayout { a, b, c: c_at as u32, a_last_row: None }, total as usize))
    }
}

/// The K extent the array sums from zero before a partial sum joins the accumulator: R for
/// weight-stationary, the K chunk for output-stationary. A reference must sum in chunks of this
/// size to match bit for bit.
pub fn k_chunk(config: &ArrayConfig, k: u32) -> u32 {
    match config.dataflow {
        Dataflow::WeightStationary => config.rows as u32,
        Dataflow::OutputStationary => os_chunk(config, k),
    }
}

/// Output-stationary K chunk: A^T and B chunks share the scratchpad, leaving R rows for a cast.
fn os_chunk(config: &ArrayConfig, k: u32) -> u32 {
    let free = (config.spad_depth - config.rows as u32) / 2;
    k.min(free).min(u16::MAX as u32)
}

/// A tiled GEMM for one config: emits its program and predicts its cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmPlan {
    pub config: ArrayConfig,
    pub shape: GemmShape,
    pub layout: GemmLayout,
    pub epilogue: Epilogue,
    /// WS: rows per m-block. OS: R.
    mb: u32,
    /// WS: k-tiles per group. OS: unused.
    group: u32,
    /// See [`k_chunk`].
    k_chunk: u32,
    /// How the decoupled WS program uses the scratchpad (`pipeline.rs`); `None` for the plain
    /// order.
    pipeline: Option<Pipeline>,
    /// The accumulator bank (0 or 1) of a pipelined program's first block; blocks alternate.
    first_bank: u32,
    /// Blocking WS: each m-block's A chunks are loaded once, for all its n-tiles, and stay in
    /// the scratchpad (`blocking.rs`).
    a_resident: bool,
    /// Where a pipelined program issues an update's loads.
    update_loads: UpdateLoads,
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

impl GemmPlan {
    /// A plain GEMM: `C = A x B`, stored.
    pub fn new(
        config: &ArrayConfig,
        shape: GemmShape,
        layout: GemmLayout,
    ) -> Result<GemmPlan, TileError> {
        GemmPlan::with_epilogue(config, shape, layout, Epilogue::STORE)
    }

    pub fn with_epilogue(
        config: &ArrayConfig,
        shape: GemmShape,
        layout: GemmLayout,
        epilogue: Epilogue,
    ) -> Result<GemmPlan, TileError> {
        config.validate().map_err(TileError::Config)?;
        for (dim, v) in [('M', shape.m), ('K', shape.k), ('N', shape.n)] {
            if v == 0 {
                return Err(TileError::Empty { dim });
            }
            if v > MAX_STRIDE {
                return Err(TileError::TooLarge { dim, value: v, max: MAX_STRIDE });
            }
        }
        epilogue.check().map_err(|why| TileError::Epilogue { why })?;
        if epilogue.update.is_some() && config.dtype != crate::Dtype::Bf16 {
            return Err(TileError::Epilogue { why: "an SGD update needs a bf16 array" });
        }
        if let Some(cast) = epilogue.cast {
            match (config.dtype, cast.requant) {
                (crate::Dtype::Bf16, Some(_)) => {
                    return Err(TileError::Epilogue { why: "requantize needs an int8 array" })
                }
                (crate::Dtype::Int8, None) => {
                    return Err(TileError::Epilogue { why: "a bf16 cast needs a bf16 array" })
                }
                _ => {}
            }
        }
        let es = config.dtype.elem_bytes() as u64;
        let GemmShape { m, k, n } = shape;
        if layout.a_last_row.is_some() && config.dataflow != Dataflow::WeightStationary {
            return Err(TileError::Unsupported {
                why: "a separate last row of A needs a weight-stationary array",
            });
        }
        let view_rows = m - layout.a_last_row.is_some() as u32;
        let panels_fit = |view: &MatrixView, tile: u32, rows: u32, cols: u32| {
            view.panels.is_none_or(|p| {
                config.dataflow == Dataflow::WeightStationary
                    && p.width % tile == 0
                    && (p.rows, p.cols) == (rows, cols)
                    && (view.row_stride, view.col_stride) == (p.width, 1)
            })
        };
        if !panels_fit(&layout.a, config.rows as u32, view_rows, k)
            || !panels_fit(&layout.b, config.cols as u32, k, n)
        {
            return Err(TileError::Unsupported {
                why: "panels need a weight-stationary array, A's a multiple of R columns wide \
                      and B's of C, each the shape of its matrix",
            });
        }
        let ends = [
            if view_rows > 0 { layout.a.end(view_rows, k, es) } else { 0 },
            layout.a_last_row.map_or(0, |at| at as u64 + k as u64 * es),
            layout.b.end(k, n, es),
            if epilogue.store { layout.c as u64 + m as u64 * n as u64 * 4 } else { 0 },
            epilogue.dram_end(m, n, es),
        ];
        let needed = ends.into_iter().max().unwrap_or(0);
        if needed > u32::MAX as u64 + 1 {
            return Err(TileError::Layout { needed });
        }
        let r = config.rows as u32;
        let s = config.spad_depth;
        let (pipeline, ungrouped) = match config.schedule {
            Schedule::Decoupled => match Pipeline::choose(config, &shape, &epilogue) {
                Some((best, ungrouped)) => (Some(best), ungrouped),
                None => (None, None),
            },
            Schedule::Blocking => (None, None),
        };
        let (mb, group, k_chunk) = match config.dataflow {
            Dataflow::WeightStationary if pipeline.is_some() => {
                (pipeline.map_or(0, |p| p.mb), 1, config.rows as u32)
            }
            Dataflow::WeightStationary => {
                let (per_row, bias_row) = epilogue.acc_rows();
                let acc_rows = (config.acc_depth - bias_row) / per_row;
                let mb = m.min(acc_rows).min(s - r).min(u16::MAX as u32);
                let kt = k.div_ceil(r);
                (mb, kt.min(s / (mb + r)), r)
            }
            Dataflow::OutputStationary => (r, 1, os_chunk(config, k)),
        };
        let (per_row, bias_row) = epilogue.acc_rows();
        let needed = mb.max(1) * per_row + bias_row;
        if mb == 0 || needed > config.acc_depth {
            return Err(TileError::AccCapacity { needed, acc_depth: config.acc_depth });
        }
        let plan = GemmPlan {
            config: *config,
            shape,
            layout,
            epilogue,
            mb,
            group,
            k_chunk,
            pipeline,
            first_bank: 0,
            update_loads: UpdateLoads::Late,
            a_resident: false,
        };
        // A grouped pipeline against the best of one n-tile a block, timed, where the program
        // is short enough to time twice.
        if let Some(u) = ungrouped.filter(|_| plan.instruction_count() <= TIME_BOTH_BELOW) {
            let other = GemmPlan { mb: u.mb, pipeline: Some(u), ..plan };
            return Ok(match other.cycles() < plan.cycles() {
                true => other,
                false => plan,
            });
        }
        Ok(match plan.with_a_resident() {
            Some(resident) if resident.body_cycles() < plan.body_cycles() => resident,
            _ => plan,
        })
    }

    /// The blocking weight-stationary plan whose m-blocks keep their A chunks in the scratchpad
    /// for all their n-tiles, if one m-block row fits: `mb` rows of each of the `KT` chunks, a
    /// requantization's `mb` rows, and at least one B tile of `R` rows.
    fn with_a_resident(&self) -> Option<GemmPlan> {
        let config = &self.config;
        if self.pipeline.is_some() || config.dataflow != Dataflow::WeightStationary {
            return None;
        }
        let r = config.rows as u32;
        let kt = self.shape.k.div_ceil(r);
        let cast = self.epilogue.spad_rows_per_row();
        let mb = (config.spad_depth.checked_sub(r)? / (kt + cast)).min(self.mb);
        let free = config.spad_depth - (kt + cast) * mb;
        (mb > 0).then_some(GemmPlan { mb, group: kt.min(free / r), a_resident: true, ..*self })
    }

    /// Whether each m-block's A chunks are loaded once for all its n-tiles.
    fn resident(&self) -> bool {
        self.a_resident || matches!(self.pipeline, Some(p) if p.resident)
    }

    /// The same plan with its first output block in accumulator bank `bank % 2`, so that a
    /// program of several GEMMs keeps alternating banks across them: a GEMM's first block
    /// then never waits for the previous GEMM's last epilogue. Only a decoupled
    /// weight-stationary program alternates banks; any other ignores it.
    pub fn starting_in_bank(self, bank: u32) -> GemmPlan {
        GemmPlan { first_bank: bank % 2, ..self }
    }

    /// The same plan with an [`Update`]'s loads placed as `loads` says (pipelined programs
    /// only).
    pub fn with_update_loads(self, loads: UpdateLoads) -> GemmPlan {
        GemmPlan { update_loads: loads, ..self }
    }

    /// The bank the block after this plan's last would use: what the next GEMM should start in.
    pub fn next_bank(&self) -> u32 {
        let blocks = match self.pipeline {
            Some(p) => p.blocks(&self.shape, self.config.cols as u32),
            None => 0,
        };
        ((self.first_bank as u64 + blocks) % 2) as u32
    }

    /// See [`k_chunk`].
    pub fn k_chunk(&self) -> u32 {
        self.k_chunk
    }

    pub fn macs(&self) -> u64 {
        self.shape.macs()
    }

    fn tiles(extent: u32, step: u32) -> impl Iterator<Item = (u32, u32)> {
        (0..extent.div_ceil(step)).map(move |i| (i * step, step.min(extent - i * step)))
    }

    /// Rows of the m-block `m0..m0 + mb` that come from A's view: all, or all but the last row
    /// of A when [`GemmLayout::a_last_row`] holds it and the block reaches it.
    fn a_view_rows(&self, m0: u32, mb: u32) -> u32 {
        mb - (self.layout.a_last_row.is_some() && m0 + mb == self.shape.m) as u32
    }

    /// The loads of A's chunk for rows `m0..m0 + mb` and k-columns `k0..k0 + kk` into the
    /// scratchpad from `spad_row`: from the view, and A's last row from
    /// [`GemmLayout::a_last_row`] when the block reaches it (one contiguous row).
    fn load_a(
        &self,
        sink: &mut dyn FnMut(Instruction),
        spad_row: u16,
        rows: (u32, u32),
        cols: (u32, u32),
    ) {
        let ((m0, mb), (k0, kk)) = (rows, cols);
        let es = self.config.dtype.elem_bytes() as u32;
        let a = self.layout.a;
        let from_view = self.a_view_rows(m0, mb);
        if from_view > 0 {
            sink(Instruction::Load {
                spad_row,
                dram_addr: a.at(m0, k0, es),
                rows: from_view as u16,
                len: kk as u16,
                row_stride: a.row_stride_at(k0),
                elem_stride: a.col_stride,
            });
        }
        if let (Some(last), true) = (self.layout.a_last_row, from_view < mb) {
            sink(Instruction::Load {
                spad_row: spad_row + from_view as u16,
                dram_addr: last + k0 * es,
                rows: 1,
                len: kk as u16,
                row_stride: 0,
                elem_stride: 1,
            });
        }
    }

    /// Emits the program, `Halt` last, into `sink`.
    pub fn emit(&self, sink: &mut impl FnMut(Instruction)) {
        self.emit_body(sink);
        sink(Instruction::Halt);
    }

    /// Emits the program without its `Halt`, to be part of a larger program.
    pub fn emit_body(&self, sink: &mut impl FnMut(Instruction)) {
        match self.config.dataflow {
            Dataflow::WeightStationary => self.emit_ws(sink),
            Dataflow::OutputStationary => self.emit_os(sink),
        }
    }

    /// `Load`s of A's last row beside its view's: A's last row from `a_last_row` is a load of
    /// its own in the last m-block (each k-tile of each n-tile, or of the block when A is
    /// resident), unless the block is that row alone.
    fn split_loads(&self) -> u64 {
        let GemmShape { m, k, .. } = self.shape;
        let r = self.config.rows as u64;
        let last_mb = m - (m.div_ceil(self.mb) - 1) * self.mb;
        match self.layout.a_last_row {
            Some(_) if last_mb > 1 => ceil_div(k as u64, r) * self.a_loads(),
            _ => 0,
        }
    }

    /// Times an m-block loads each of its A chunks: once when A is resident, once per group
    /// of n-tiles on a grouped pipeline, else once per n-tile.
    fn a_loads(&self) -> u64 {
        let nt = ceil_div(self.shape.n as u64, self.config.cols as u64);
        match self.pipeline {
            _ if self.resident() => 1,
            Some(p) => ceil_div(nt, p.group as u64),
            None => nt,
        }
    }

    /// Instructions [`emit`](Self::emit) produces, `Halt` included.
    pub fn instruction_count(&self) -> u64 {
        if self.config.dram_port == crate::config::DramPort::Sdram && self.pipeline.is_some() {
            // Its A chunks and stores go in pieces whose number depends on each block's rows:
            // counted as emitted.
            let mut count = 0;
            self.emit(&mut |_| count += 1);
            return count;
        }
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u64, self.config.cols as u64);
        let nt = ceil_div(n as u64, c);
        let (_, epilogue) = self.epilogue.cost((0, 0), &self.config);
        let per_tile = match self.config.dataflow {
            // Two loads, a weight load and a matmul per k-tile, then the epilogue.
            Dataflow::WeightStationary => 4 * ceil_div(k as u64, r) + epilogue,
            // Two loads and a matmul per K chunk, then the epilogue.
            Dataflow::OutputStationary => 3 * ceil_div(k as u64, self.k_chunk as u64) + epilogue,
        };
        let mblocks = ceil_div(m as u64, self.mb as u64);
        let kt = ceil_div(k as u64, r);
        // `per_tile` loads an A chunk per k-tile of each n-tile; `a_loads` says how many are.
        self.split_loads() + mblocks * (nt * per_tile - kt * (nt - self.a_loads())) + 1
    }

    /// Closed-form cycle count of the emitted program on the cycle machine (and the RTL).
    ///
    /// WS, per m-block of `mb` rows, with `D = mb + L` (one matmul: stream, fill, drain; `L` is
    /// `timing::ws_latency`, `R + C - 1` on PEs that do not register their products) and
    /// `G = ceil(KT / g)` groups:
    ///
    /// ```text
    /// NT * ( K + KT*mb              loads: every B row and A chunk row, one per cycle (a
    ///                               strided gather row costs one per element instead)
    ///        + G*(R + D)            per group: the exposed first weight load, the last matmul
    ///        + (KT - G)*max(D, R+1) other matmuls, each weight load hidden behind the last one
    ///        + E(mb) )              epilogue: one cycle per row of each of its instructions
    /// ```
    ///
    /// On a single-port scratchpad ([`ArrayConfig::single_port_spad`]) a weight load waits for
    /// the matmul's reads, `(KT - G)*max(D, R + mb + 1)`, and each `Load` and `Requantize` takes
    /// a cycle more.
    ///
    /// OS, per m-tile of `mi` rows, with `KC = ceil(K / kc)` chunks:
    /// `NT * (3K + KC*(L' + mi) + E(mi))`, `L'` being `timing::os_latency` (`R + C - 2`). Plus
    /// one cycle for `Halt`. A plain GEMM's
    /// epilogue is its store, `E(mb) = mb`. On a DRAM that moves a byte a cycle
    /// ([`DramPort::Byte`](crate::config::DramPort)) each load row costs
    /// `timing::load_row_cycles` and each row of an epilogue's transfer
    /// `timing::transfer_row_cycles` instead of one.
    ///
    /// Under [`Schedule::Decoupled`](crate::config::Schedule), and on the SDRAM
    /// ([`DramPort::Sdram`](crate::config::DramPort)), whose transfers' cycles depend on what
    /// the ones before them left open, the count is the timing model's over the emitted
    /// program, one step per instruction.
    pub fn cycles(&self) -> u64 {
        let sdram = self.config.dram_port == crate::config::DramPort::Sdram;
        if self.config.schedule == crate::config::Schedule::Decoupled || sdram {
            return self.scheduled_cycles();
        }
        self.body_cycles() + 1
    }

    /// Useful MACs over peak MACs in [`cycles`](Self::cycles).
    pub fn utilization(&self) -> f64 {
        self.macs() as f64 / (self.config.pe_count() as f64 * self.cycles() as f64)
    }
}

/// SCALE-Sim's published compute-cycle estimate for the same GEMM on the same array, for
/// comparison only: `(2*Sr + Sc + T - 2) * ceil(Sr'/Sr) * ceil(Sc'/Sc)`, where for
/// weight-stationary the array's rows hold K and its columns N and T = M streams past, and for
/// output-stationary the rows hold M, the columns N and T = K. It assumes pre-filled SRAMs (no
/// DRAM traffic), no overlap of one fold's weight fill with the previous fold's compute, and
/// the whole temporal dimension in one pass.
pub fn scalesim_cycles(config: &ArrayConfig, shape: &GemmShape) -> u64 {
    let (sr, sc) = (config.rows as u64, config.cols as u64);
    let (spatial_rows, t) = match config.dataflow {
        Dataflow::WeightStationary => (shape.k as u64, shape.m as u64),
        Dataflow::OutputStationary => (shape.m as u64, shape.k as u64),
    };
    (2 * sr + sc + t - 2) * ceil_div(spatial_rows, sr) * ceil_div(shape.n as u64, sc)
}
