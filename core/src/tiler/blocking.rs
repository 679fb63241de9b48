//! The blocking schedule's GEMM programs (and the output-stationary one under both schedules),
//! and their closed-form cycle count.

use super::{ceil_div, GemmPlan, GemmShape};
use crate::config::Dataflow;
use crate::isa::Instruction;
use crate::timing::load_row_cycles;

impl GemmPlan {
    pub(super) fn emit_ws(&self, sink: &mut impl FnMut(Instruction)) {
        if let Some(p) = self.pipeline {
            return self.emit_ws_pipelined(p, sink);
        }
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u32, self.config.cols as u32);
        let es = self.config.dtype.elem_bytes() as u32;
        let b = self.layout.b;
        let kt = k.div_ceil(r);
        let g = self.group;
        // A chunk `ki` (resident) or the group's `t`-th (streamed) sits after the B tiles; a
        // cast goes after the resident chunks, or over the streamed ones once they are done.
        let a_row = |t: u32, ki: u32| {
            let slot = if self.a_resident { ki } else { t };
            (g * r + slot * self.mb) as u16
        };
        let cast_row = (g * r + if self.a_resident { kt * self.mb } else { 0 }) as u16;
        for (m0, mb) in Self::tiles(m, self.mb) {
            if self.a_resident {
                for ki in 0..kt {
                    let k0 = ki * r;
                    self.load_a(sink, a_row(0, ki), (m0, mb), (k0, r.min(k - k0)));
                }
            }
            for (n0, nj) in Self::tiles(n, c) {
                for g0 in (0..kt).step_by(g as usize) {
                    let tiles = g0..(g0 + g).min(kt);
                    for (t, ki) in tiles.clone().enumerate() {
                        let k0 = ki * r;
                        let kk = r.min(k - k0);
                        sink(Instruction::Load {
                            spad_row: (t as u32 * r) as u16,
                            dram_addr: b.at(k0, n0, es),
                            rows: kk as u16,
                            len: nj as u16,
                            row_stride: b.row_stride_at(n0),
                            elem_stride: b.col_stride,
                        });
                        if !self.a_resident {
                            self.load_a(sink, a_row(t as u32, ki), (m0, mb), (k0, kk));
                        }
                    }
                    for (t, ki) in tiles.enumerate() {
                        let kk = r.min(k - ki * r);
                        sink(Instruction::LoadWeights {
                            spad_row: (t as u32 * r) as u16,
                            rows: kk as u16,
                            cols: nj as u16,
                        });
                        sink(Instruction::Matmul {
                            a_row: a_row(t as u32, ki),
                            acc_row: 0,
                            rows: mb as u16,
                            swap: true,
                            accumulate: ki > 0,
                        });
                    }
                }
                self.emit_epilogue(sink, (m0, mb, n0, nj), cast_row, 0, false);
            }
        }
    }

    pub(super) fn emit_os(&self, sink: &mut impl FnMut(Instruction)) {
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u32, self.config.cols as u32);
        let es = self.config.dtype.elem_bytes() as u32;
        let (a, b) = (self.layout.a, self.layout.b);
        let kc = self.k_chunk;
        let cast_row = (self.config.spad_depth - r) as u16;
        for (m0, mi) in Self::tiles(m, r) {
            for (n0, nj) in Self::tiles(n, c) {
                for (t, (k0, kk)) in Self::tiles(k, kc).enumerate() {
                    sink(Instruction::Load {
                        spad_row: 0,
                        dram_addr: a.at(m0, k0, es),
                        rows: kk as u16,
                        len: mi as u16,
                        row_stride: a.col_stride,
                        elem_stride: a.row_stride,
                    });
                    sink(Instruction::Load {
                        spad_row: kc as u16,
                        dram_addr: b.at(k0, n0, es),
                        rows: kk as u16,
                        len: nj as u16,
                        row_stride: b.row_stride,
                        elem_stride: b.col_stride,
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
                self.emit_epilogue(sink, (m0, mi, n0, nj), cast_row, 0, false);
            }
        }
    }

    /// [`cycles`](Self::cycles) without the `Halt`: what [`emit_body`](Self::emit_body) costs
    /// when it starts with every unit idle.
    pub fn body_cycles(&self) -> u64 {
        let GemmShape { m, k, n } = self.shape;
        let (r, c) = (self.config.rows as u64, self.config.cols as u64);
        let k = k as u64;
        let (a, b) = (self.layout.a, self.layout.b);
        // Cycles every instruction but `Halt` takes more on memories with output registers.
        let late = self.config.read_stages as u64;
        // And each `Load` on a single-port scratchpad (`timing::spad_write_turn`).
        let load_late = late + self.config.single_port_spad as u64;
        // Cycles to load one row of `len` elements from a view whose elements are `stride` apart.
        let row = |len: u64, stride: u32| load_row_cycles(&self.config, len as u16, stride);
        // A chunk rows are k-tile wide: R, and the remainder for the last one.
        let (full, rest) = (k / r, k % r);
        // Cycles to load the rows of all of an m-block's A chunks: `KT` loads of `mb` rows.
        let a_chunks = |mb: u64| {
            mb * (full * row(r, a.col_stride) + if rest > 0 { row(rest, a.col_stride) } else { 0 })
        };
        let kt = ceil_div(k, r);
        // One output block of `mb` rows and `nj` columns, from its first load to its epilogue.
        let block = |mb: u64, nj: u64| -> u64 {
            let (epilogue, _) = self.epilogue.cost((mb, nj), &self.config);
            match self.config.dataflow {
                Dataflow::WeightStationary => {
                    let groups = ceil_div(kt, self.group as u64);
                    let d = mb + crate::timing::ws_latency(&self.config);
                    // A resident A is loaded once per m-block (below), not here.
                    let a_rows = (!self.a_resident as u64) * a_chunks(mb);
                    let b_rows = k * row(nj, b.col_stride);
                    // A `Load` of B and one of A each k-tile; a weight load takes `R + late`.
                    let (loads, weights) =
                        ((2 - self.a_resident as u64) * kt * load_late, r + late);
                    // A group's later weight loads overlap the matmul before them, from the
                    // cycle after it, or on a single-port scratchpad from the end of its reads.
                    let handover = if self.config.single_port_spad {
                        crate::timing::matmul_port_cycles(mb as u16)
                    } else {
                        1
                    };
                    let pair = d.max(weights + handover);
                    b_rows
                        + a_rows
                        + loads
                        + groups * (weights + d)
                        + (kt - groups) * pair
                        + epilogue
                }
                Dataflow::OutputStationary => {
                    let kc = ceil_div(k, self.k_chunk as u64);
                    // A^T rows gather `mb` elements down a column of A; B rows are rows of B.
                    k * (row(mb, a.row_stride) + row(nj, b.col_stride) + 1)
                        + kc * (2 * late + crate::timing::os_latency(&self.config) + mb)
                        + epilogue
                }
            }
        };
        let split = |extent: u64, step: u64| {
            [(extent / step, step), (u64::from(extent % step > 0), extent % step)]
        };
        let mut total = 0;
        for (m_count, mb) in split(m as u64, self.mb as u64) {
            // A resident m-block's A chunks, loaded before its first n-tile.
            if self.a_resident {
                total += m_count * (a_chunks(mb) + kt * load_late);
            }
            for (n_count, nj) in split(n as u64, c) {
                if m_count > 0 && n_count > 0 {
                    total += m_count * n_count * block(mb, nj);
                }
            }
        }
        if self.layout.a_last_row.is_some() {
            // A's last row is one contiguous row a k-tile, in each n-tile of the last m-block,
            // instead of a row of the view.
            let tail = |cost: u64| if rest > 0 { cost } else { 0 };
            let view = full * row(r, a.col_stride) + tail(row(rest, a.col_stride));
            let ones = full * row(r, 1) + tail(row(rest, 1));
            // Once per n-tile, or once for the block when A is resident.
            let times = if self.a_resident { 1 } else { ceil_div(n as u64, c) };
            total = total + times * ones - times * view;
            // Where the row's loads come beside the view's, each is one instruction more.
            total += self.split_loads() * load_late;
        }
        total
    }
}
