//! The load unit's transpose buffer (decoupled schedule, docs/DECISIONS.md 42).
//!
//! A `Load` of a transposed view (`systole_core::timing::transposes`) goes through a `W x W`
//! buffer of elements, `W` the scratchpad's width, in blocks of `W` rows: the `len` wide DRAM
//! reads of a block each fill one *column* (read `e` holds element `e` of each of the block's
//! rows), and its rows are then read out one per cycle and written to the scratchpad while the
//! next block fills the other half. The [`crate::controller::Sequencer`] drives every control;
//! its module docs give the cycles.
//!
//! The buffer has word lines, decoded by the sequencer: `write[h * W + e]` puts the DRAM row
//! of this cycle into column `e` of half `h`, `read[h * W + i]` puts row `i` of half `h` on
//! `out`. With no read line high, `out` is the DRAM row itself, so the buffer sits between the
//! DRAM and the scratchpad lanes as a row source for every `Load`.
//!
//! # How `systole_top` wires it
//!
//! Add a field `transposer: Transposer` built with [`Transposer::new`]`(&config)`. Built for
//! the blocking schedule it has no lanes and no ports but its clock, and the sequencer has no
//! word lines, so every loop below is empty and a blocking machine is what it was (Verilator
//! sees the empty module's clock unused, a warning `tests/tests/hardware.rs` already explains).
//!
//! * `transposer.clock` = `clock`;
//! * `for k in 0..self.transposer.dram.len()`: `transposer.dram[k]` = `dram.read_data[k]` (the
//!   DRAM row of this cycle, as the lanes get it);
//! * `for k in 0..self.transposer.write.len()`: `transposer.write[k]` = `seq.transpose_write[k]`
//!   and `transposer.read[k]` = `seq.transpose_read[k]` (the sequencer's write lines are
//!   already low in frozen cycles);
//! * after the scratchpad lanes' `lo` / `hi` assignments, in the same `for es` loop,
//!   `for e in 0..self.transposer.width()`: `spad_lanes[e].lo` = `transposer.out[e * es]`,
//!   `spad_lanes[e].hi` = `transposer.out[e * es + es - 1]`.
//!
//! Nothing else changes: while transposing, the sequencer holds `gather` and `broadcast` low,
//! so a lane's data is its `lo` / `hi` element, zero at and past `seq.length` (which clears the
//! buffer's stale columns at and past `len`), written by the existing `seq.spad_write` at
//! `seq.spad_write_row` in the cycle the row is read. `SpadLane`'s `lo0` / `hi0` (broadcasts
//! and gathers) keep the DRAM row.

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dtype, Schedule};

/// A double-buffered `W x W` buffer of scratchpad elements, kept as their `elem_bytes` bytes
/// (an INT8 element is one byte, a BF16 element two), with word lines: in a cycle with
/// `write[h * W + e]`, the `W` elements of the DRAM row on `dram` go into column `e` of half
/// `h` (element `i` into row `i`); `out` is row `i` of half `h` while `read[h * W + i]` (at most
/// one line high), else the DRAM row; either way in the DRAM row's byte layout.
#[derive(LogicBlock)]
pub struct Transposer {
    pub clock: Signal<In, Clock>,
    /// The DRAM row of this cycle: element `i` in bytes `i * elem_bytes ..`, little-endian.
    pub dram: Vec<Signal<In, Bits<8>>>,
    pub write: Vec<Signal<In, Bit>>,
    pub read: Vec<Signal<In, Bit>>,
    /// Element `e` in bytes `e * elem_bytes ..`.
    pub out: Vec<Signal<Out, Bits<8>>>,
    /// Byte `b` of element `(i, e)` of half `h` at `((h * W + i) * W + e) * elem_bytes + b`.
    cells: Vec<DFF<Bits<8>>>,
    /// `W` and the element's bytes, bound as loop variables for the index arithmetic.
    _w: usize,
    _es: usize,
}

impl Transposer {
    /// The machine's buffer: `spad_width` wide under the decoupled schedule; under the
    /// blocking one (no transposing loads) an empty block.
    pub fn new(config: &ArrayConfig) -> Transposer {
        let width = match config.schedule {
            Schedule::Decoupled => config.spad_width(),
            Schedule::Blocking => 0,
        };
        Transposer::with_width(width, config.dtype)
    }

    /// A buffer `width` elements square.
    pub fn with_width(width: usize, dtype: Dtype) -> Transposer {
        let es = dtype.elem_bytes();
        Transposer {
            clock: Default::default(),
            dram: (0..width * es).map(|_| Default::default()).collect(),
            write: (0..2 * width).map(|_| Default::default()).collect(),
            read: (0..2 * width).map(|_| Default::default()).collect(),
            out: (0..width * es).map(|_| Default::default()).collect(),
            cells: (0..2 * width * width * es).map(|_| Default::default()).collect(),
            _w: width,
            _es: es,
        }
    }

    /// `W`: the elements in a row (0 for a blocking machine's empty buffer).
    pub fn width(&self) -> usize {
        self._w
    }
}

impl Logic for Transposer {
    #[hdl_gen]
    fn update(&mut self) {
        for k in 0..self.out.len() {
            self.out[k].next = self.dram[k].val();
        }
        for w in self._w..(self._w + 1) {
            for es in self._es..(self._es + 1) {
                for h in 0..2 {
                    for i in 0..self._w {
                        for e in 0..self._w {
                            for b in 0..self._es {
                                self.cells[((h * w + i) * w + e) * es + b].clock.next =
                                    self.clock.val();
                                self.cells[((h * w + i) * w + e) * es + b].d.next =
                                    self.cells[((h * w + i) * w + e) * es + b].q.val();
                                if self.write[h * w + e].val() {
                                    self.cells[((h * w + i) * w + e) * es + b].d.next =
                                        self.dram[i * es + b].val();
                                }
                                if self.read[h * w + i].val() {
                                    self.out[e * es + b].next =
                                        self.cells[((h * w + i) * w + e) * es + b].q.val();
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, tick, verilog_of};

    /// Write lines fill a column of one half, read lines put a row on `out`, the DRAM row
    /// passes through otherwise.
    #[test]
    fn transposer_fills_columns_and_reads_rows() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let (w, es) = (3usize, dtype.elem_bytes());
            let mut t = Transposer::with_width(w, dtype);
            t.connect_all();
            // Byte `b` of element (i, e) of half h.
            let byte =
                |h: usize, i: usize, e: usize, b: usize| (h << 7 | i << 5 | e << 2 | b) as u64;
            for h in 0..2 {
                for e in 0..w {
                    for (line, lines) in t.write.iter_mut().enumerate() {
                        lines.next = line == h * w + e;
                    }
                    for i in 0..w {
                        for b in 0..es {
                            t.dram[i * es + b].next = byte(h, i, e, b).into();
                        }
                    }
                    tick(&mut t, |t| &mut t.clock);
                }
            }
            for line in &mut t.write {
                line.next = false;
            }
            for k in 0..w * es {
                t.dram[k].next = (0xF0 | k as u64).into();
            }
            for h in 0..2 {
                for i in 0..w {
                    for (line, lines) in t.read.iter_mut().enumerate() {
                        lines.next = line == h * w + i;
                    }
                    settle(&mut t);
                    let row: Vec<u64> = t.out.iter().map(|l| l.val().index() as u64).collect();
                    let want: Vec<u64> = (0..w * es).map(|k| byte(h, i, k / es, k % es)).collect();
                    assert_eq!(row, want, "{dtype:?} half {h} row {i}");
                }
            }
            for line in &mut t.read {
                line.next = false;
            }
            settle(&mut t);
            let row: Vec<u64> = t.out.iter().map(|l| l.val().index() as u64).collect();
            assert_eq!(row, (0..(w * es) as u64).map(|k| 0xF0 | k).collect::<Vec<_>>());
        }
    }

    /// A blocking machine's buffer is empty: no registers, no ports but its clock.
    #[test]
    fn transposer_is_empty_when_blocking() {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let empty = Transposer::new(&config);
        assert_eq!((empty.width(), empty.write.len(), empty.out.len()), (0, 0, 0));
        assert!(!verilog_of(empty).contains("cells"));
        let decoupled = config.with_schedule(Schedule::Decoupled);
        let t = Transposer::new(&decoupled);
        assert_eq!((t.width(), t.write.len(), t.out.len()), (4, 8, 8));
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("transposer", &verilog_of(Transposer::with_width(4, Dtype::Bf16))).unwrap();
        yosys_validate("transposer_int8", &verilog_of(Transposer::with_width(3, Dtype::Int8)))
            .unwrap();
    }
}
