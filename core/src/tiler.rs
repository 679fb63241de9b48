//! The GEMM tiler: `C = A x B` of any shape as one program for an [`ArrayConfig`], and the
//! closed-form cycle count of that program.
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
//! to them; after the last group the block is stored.
//!
//! **Output-stationary**: M is cut into m-tiles of R rows, N into n-tiles of C columns, K into
//! chunks of `kc = min(K, spad_depth / 2, 65535)`. For each tile and chunk: load `A^T` (a strided
//! gather) and `B`, run `MatmulOs`, and store the tile after the last chunk.

use crate::config::{ArrayConfig, ConfigError, Dataflow};
use crate::isa::Instruction;

/// Largest value of a 24-bit stride field.
const MAX_STRIDE: u32 = (1 << 24) - 1;

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

/// Byte addresses of the three matrices in DRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GemmLayout {
    pub a: u32,
    pub b: u32,
    pub c: u32,
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
    /// The matrices do not fit the 32-bit DRAM address space, or overlap.
    Layout {
        needed: u64,
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
                "A, B and C need {needed} bytes of DRAM, more than the 4 GiB the ISA addresses"
            ),
        }
    }
}

impl GemmLayout {
    /// A, then B, then C (4-byte aligned), from address 0; and the DRAM bytes they need.
    pub fn packed(
        config: &ArrayConfig,
        shape: &GemmShape,
    ) -> Result<(GemmLayout, usize), TileError> {
        let es = config.dtype.elem_bytes() as u64;
        let a_bytes = shape.m as u64 * shape.k as u64 * es;
        let b_bytes = shape.k as u64 * shape.n as u64 * es;
        let c_at = (a_bytes + b_bytes).div_ceil(4) * 4;
        let total = c_at + shape.m as u64 * shape.n as u64 * 4;
        if total > u32::MAX as u64 {
            return Err(TileError::Layout { needed: total });
        }
        Ok((GemmLayout { a: 0, b: a_bytes as u32, c: c_at as u32 }, total as usize))
    }
}

/// A tiled GEMM for one config: emits its program and predicts its cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmPlan {
    pub config: ArrayConfig,
    pub shape: GemmShape,
    pub layout: GemmLayout,
    /// WS: rows per m-block. OS: R.
    mb: u32,
    /// WS: k-tiles per group. OS: unused.
    group: u32,
    /// The K extent summed from zero inside the array before joining the accumulator:
    /// R (WS) or the K chunk (OS).
    k_chunk: u32,
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

impl GemmPlan {
    pub fn new(
        config: &ArrayConfig,
        shape: GemmShape,
        layout: GemmLayout,
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
        let es = config.dtype.elem_bytes() as u64;
        let end = [
            layout.a as u64 + shape.m as u64 * shape.k as u64 * es,
            layout.b as u64 + shape.k as u64 * shape.n as u64 * es,
            layout.c as u64 + shape.m as u64 * shape.n as u64 * 4,
        ];
        if let Some(&needed) = end.iter().find(|&&e| e > u32::MAX as u64 + 1) {
            return Err(TileError::Layout { needed });
        }
        let r = config.rows as u32;
        let s = config.spad_depth;
        let (mb, group, k_chunk) = match config.dataflow {
            Dataflow::WeightStationary => {
                let mb = shape.m.min(config.acc_depth).min(s - r).min(u16::MAX as u32);
                let kt = shape.k.div_ceil(r);
                (mb, kt.min(s / (mb + r)), r)
            }
            Dataflow::OutputStationary => (r, 1, shape.k.min(s / 2).min(u16::MAX as u32)),
        };
        Ok(GemmPlan { config: *config, shape, layout, mb, group, k_chunk })
    }

    /// The K extent that the array sums from zero before it is added to the accumulator: the
    /// reference must sum in chunks of this size to match bit for bit.
    pub fn k_chunk(&self) -> u32 {
        self.k_chunk
    }

    pub fn macs(&self) -> u64 {
        self.shape.macs()
    }

    /// The m-blocks (WS) or m-tiles (OS) as `(first row, rows)`.
    fn m_blocks(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let step = self.mb;
        (0..self.shape.m.div_ceil(step)).map(move |i| (i * step, step.min(self.shape.m - i * step)))
    }

    fn tiles(extent: u32, step: u32) -> impl Iterator<Item = (u32, u32)> {
        (0..extent.div_ceil(step)).map(move |i| (i * step, step.min(extent - i * step)))
    }

    /// Emits the program, `Halt` last, into `sink`.
    pub fn emit(&self, sink: &mut impl FnMut(Instruction)) {
        match self.config.dataflow {
            Dataflow::WeightStationary => self.emit_ws(sink),
            Dataflow::OutputStationary => self.emit_os(sink),
        }
        sink(Instruction::Halt);
    }

    fn emit_ws(&self, sink: &mut impl FnMut(Instruction)) {
        let GemmShape { k, n, .. } = self.shape;
        let (r, c) = (self.config.rows as u32, self.config.cols as u32);
        let es = self.config.dtype.elem_bytes() as u32;
        let kt = k.div_ceil(r);
        let g = self.group;
        for (m0, mb) in self.m_blocks() {
            for (n0, nj) in Self::tiles(n, c) {
                for g0 in (0..kt).step_by(g as usize) {
                    let tiles = g0..(g0 + g).min(kt);
                    for (t, ki) in tiles.clone().enumerate() {
                        let k0 = ki * r;
                        let kk = r.min(k - k0);
                        sink(Instruction::Load {
                            spad_row: (t as u32 * r) as u16,
                            dram_addr: self.layout.b + (k0 * n + n0) * es,
                            rows: kk as u16,
                            len: nj as u16,
                            row_stride: n,
                            elem_stride: 1,
                        });
                        sink(Instruction::Load {
                            spad_row: (g * r + t as u32 * self.mb) as u16,
                            dram_addr: self.layout.a + (m0 * k + k0) * es,
                            rows: mb as u16,
                            len: kk as u16,
                            row_stride: k,
                            elem_stride: 1,
                        });
                    }
                    for (t, ki) in tiles.enumerate() {
                        let kk = r.min(k - ki * r);
                        sink(Instruction::LoadWeights {
                            spad_row: (t as u32 * r) as u16,
                            rows: kk as u16,
                            cols: nj as u16,
                        });
                        sink(Instruction::Matmul {
                            a_row: (g * r + t as u32 * self.mb) as u16,
                            acc_row: 0,
                            rows: mb as u16,
                            swap: true,
                            accumulate: ki > 0,
                        });
                    }
                }
                sink(Instruction::Store {
                    acc_row: 0,
                    dram_addr: self.layout.c + (m0 * n + n0) * 4,
                    rows: mb as u16,
                    len: nj as u16,
                    row_stride: n,
                });
            }
        }
    }

    fn emit_os(&self, sink: &mut impl FnMut(Instruction)) {
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u32, self.config.cols as u32);
        let es = self.config.dtype.elem_bytes() as u32;
        let kc = self.k_chunk;
        for (m0, mi) in Self::tiles(m, r) {
            for (n0, nj) in Self::tiles(n, c) {
                for (t, (k0, kk)) in Self::tiles(k, kc).enumerate() {
                    sink(Instruction::Load {
                        spad_row: 0,
                        dram_addr: self.layout.a + (m0 * k + k0) * es,
                        rows: kk as u16,
                        len: mi as u16,
                        row_stride: 1,
                        elem_stride: k,
                    });
                    sink(Instruction::Load {
                        spad_row: kc as u16,
                        dram_addr: self.layout.b + (k0 * n + n0) * es,
                        rows: kk as u16,
                        len: nj as u16,
                        row_stride: n,
                        elem_stride: 1,
                    });
                    sink(Instruction::MatmulOs {
                        a_row: 0,
                        b_row: kc as u16,
                        k: kk as u16,
                        acc_row: 0,
                        rows: mi as u16,
                        cols: nj as u16,
                        accumulate: t > 0,
                    });
                }
                sink(Instruction::Store {
                    acc_row: 0,
                    dram_addr: self.layout.c + (m0 * n + n0) * 4,
                    rows: mi as u16,
                    len: nj as u16,
                    row_stride: n,
                });
            }
        }
    }

    /// Instructions [`emit`](Self::emit) produces, `Halt` included.
    pub fn instruction_count(&self) -> u64 {
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u64, self.config.cols as u64);
        let nt = ceil_div(n as u64, c);
        let per_tile = match self.config.dataflow {
            // Two loads, a weight load and a matmul per k-tile, then a store.
            Dataflow::WeightStationary => 4 * ceil_div(k as u64, r) + 1,
            // Two loads and a matmul per K chunk, then a store.
            Dataflow::OutputStationary => 3 * ceil_div(k as u64, self.k_chunk as u64) + 1,
        };
        ceil_div(m as u64, self.mb as u64) * nt * per_tile + 1
    }

    /// Closed-form cycle count of the emitted program on the cycle machine (and the RTL).
    ///
    /// WS, per m-block of `mb` rows, with `D = mb + R + C - 1` (one matmul: stream, fill, drain)
    /// and `G = ceil(KT / g)` groups:
    ///
    /// ```text
    /// NT * ( K + KT*mb              loads: every B row and A chunk row, one per cycle
    ///        + G*(R + D)            per group: the exposed first weight load, the last matmul
    ///        + (KT - G)*max(D, R+1) other matmuls, each weight load hidden behind the last one
    ///        + mb )                 store
    /// ```
    ///
    /// OS, per m-tile of `mi` rows, with `KC = ceil(K / kc)` chunks:
    /// `NT * (3K + KC*(R + C - 2 + mi) + mi)`. Plus one cycle for `Halt`.
    pub fn cycles(&self) -> u64 {
        let GemmShape { k, n, .. } = self.shape;
        let (r, c) = (self.config.rows as u64, self.config.cols as u64);
        let (k, nt) = (k as u64, ceil_div(n as u64, c));
        let per_block = |mb: u64| -> u64 {
            match self.config.dataflow {
                Dataflow::WeightStationary => {
                    let kt = ceil_div(k, r);
                    let groups = ceil_div(kt, self.group as u64);
                    let d = mb + r + c - 1;
                    k + kt * mb + groups * (r + d) + (kt - groups) * d.max(r + 1) + mb
                }
                Dataflow::OutputStationary => {
                    let kc = ceil_div(k, self.k_chunk as u64);
                    3 * k + kc * (r + c - 2 + mb) + mb
                }
            }
        };
        let step = self.mb as u64;
        let m = self.shape.m as u64;
        let (full, rest) = (m / step, m % step);
        let mut total = full * nt * per_block(step);
        if rest > 0 {
            total += nt * per_block(rest);
        }
        total + 1
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
