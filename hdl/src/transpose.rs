//! The load unit's transpose buffer (decoupled schedule, docs/DECISIONS.md 42 and 59).
//!
//! A `Load` of a transposed view (`systole_core::timing::transposes`) goes through a `W x W`
//! buffer of elements, `W` the scratchpad's width, in blocks of `W` rows: the `len` wide DRAM
//! reads of a block each fill one *column* (read `e` holds element `e` of each of the block's
//! rows), and its rows are then read out one per cycle and written to the scratchpad while the
//! next block fills the other half. The [`crate::controller::Sequencer`] drives every control;
//! its module docs give the cycles.
//!
//! # Banks on a diagonal
//!
//! The buffer is `W` banks of distributed RAM (one element wide, a write port and an
//! asynchronous read port each: LUT RAM on the ECP5), not `W x W` registers: element `(i, e)`
//! of half `h` lives in bank `(i + e) mod W` at address `(h, e)`. A column write puts the DRAM
//! row, rotated by `e`, into every bank at one address; a row read takes bank `k` at address
//! `(h, (k - i) mod W)` and rotates the banks' words back by `i`. Two rotators and `W` small
//! RAMs replace the registers' per-cell write enables and the `2 W`-way row multiplexer
//! (DECISIONS 59 has the LUT counts).
//!
//! # Ports
//!
//! In a cycle with `write`, the `W` elements of the DRAM row on `dram` go into column `column`
//! of half `half` (element `i` into row `i`); while `read` is set, `out` is a row of the other
//! half, else the DRAM row itself, so the buffer sits between the DRAM and the scratchpad lanes
//! as a row source for every `Load`. The row read is the one `next_row` and `next_half` named
//! in the cycle before: the sequencer's next drain row and next filling half, which the buffer
//! registers with each bank's read address (so that the banks' read addresses and the
//! rotation's select leave registers: from `row` combinationally, Yosys maps the two together
//! to more than twice the cells). `column` is below `W` whenever `write` is set, and the row
//! whenever `read` is (the sequencer's counters).
//!
//! # How `systole_top` wires it
//!
//! Add a field `transposer: Transposer` built with [`Transposer::new`]`(&config)` (the
//! decoupled top only: a blocking machine has no transposing loads).
//!
//! * `transposer.clock` = `clock`;
//! * `for k in 0..self.transposer.dram.len()`: `transposer.dram[k]` = `dram.read_data[k]` (the
//!   DRAM row of this cycle, as the lanes get it);
//! * `transposer.write` = `seq.transpose_write`, `transposer.read` = `seq.transpose_read`,
//!   `transposer.half` = `seq.transpose_half`, `transposer.column` = `seq.element`,
//!   `transposer.next_row` = `seq.transpose_next_row`, `transposer.next_half` =
//!   `seq.transpose_next_half` (the sequencer's write is already low in frozen cycles);
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

/// A double-buffered `W x W` buffer of scratchpad elements (an INT8 element is one byte, a
/// BF16 element two), kept in `W` banks on a diagonal: see the module docs. Bytes travel in the
/// DRAM row's layout, element `e` in bytes `e * elem_bytes ..`, little-endian.
#[derive(LogicBlock)]
pub struct Transposer {
    pub clock: Signal<In, Clock>,
    /// The machine's clock enable: the row and half to read move only in enabled cycles, so a
    /// frozen cycle keeps the row named before it (with read stages the names arrive delayed,
    /// and a frozen cycle would otherwise take the one after).
    pub enable: Signal<In, Bit>,
    /// The DRAM row of this cycle.
    pub dram: Vec<Signal<In, Bits<8>>>,
    /// Write the DRAM row into column `column` of half `half`.
    pub write: Signal<In, Bit>,
    pub column: Signal<In, Bits<16>>,
    /// The half that fills; reads come from the other.
    pub half: Signal<In, Bit>,
    /// Put the row named in the cycle before on `out`.
    pub read: Signal<In, Bit>,
    /// The row the next cycle reads, and the half that fills then (it reads the other).
    pub next_row: Signal<In, Bits<16>>,
    pub next_half: Signal<In, Bit>,
    pub out: Vec<Signal<Out, Bits<8>>>,
    /// Bank `k`'s words, the one at address `(h, x)` at `h * slots + x`.
    _banks: Vec<Vec<u16>>,
    /// The registered row and the half it is read from.
    _row: usize,
    _read_half: usize,
    /// `W` and the element's bytes.
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
            enable: Default::default(),
            dram: (0..width * es).map(|_| Default::default()).collect(),
            write: Default::default(),
            column: Default::default(),
            half: Default::default(),
            read: Default::default(),
            next_row: Default::default(),
            next_half: Default::default(),
            out: (0..width * es).map(|_| Default::default()).collect(),
            _banks: vec![vec![0; Transposer::bank_words(width)]; width],
            _row: 0,
            _read_half: 1,
            _w: width,
            _es: es,
        }
    }

    /// `W`: the elements in a row (0 for a blocking machine's empty buffer).
    pub fn width(&self) -> usize {
        self._w
    }

    /// Words in each of a `width`-wide buffer's banks: two halves of [`slots`].
    pub fn bank_words(width: usize) -> usize {
        2 * slots(width)
    }
}

/// A half's addresses in a bank: `W` rounded up to a power of two (at least 2), so that an
/// address is the half's bit above a column's bits.
fn slots(width: usize) -> usize {
    width.next_power_of_two().max(2)
}

impl Logic for Transposer {
    fn update(&mut self) {
        let (w, es) = (self._w, self._es);
        let p = slots(w);
        if self.clock.pos_edge() {
            let (e, h) = (self.column.val().index(), self.half.val() as usize);
            if self.write.val() && e < w {
                for k in 0..w {
                    let i = (k + w - e) % w;
                    let word = (0..es).fold(0u16, |v, b| {
                        v | (self.dram[i * es + b].val().index() as u16) << (8 * b)
                    });
                    self._banks[k][h * p + e] = word;
                }
            }
            if self.enable.val() {
                self._row = self.next_row.val().index();
                self._read_half = !self.next_half.val() as usize;
            }
        }
        for k in 0..self.out.len() {
            self.out[k].next = self.dram[k].val();
        }
        let (i, h) = (self._row, self._read_half);
        if self.read.val() && i < w {
            for e in 0..w {
                let word = self._banks[(i + e) % w][h * p + e];
                for b in 0..es {
                    self.out[e * es + b].next = ((word >> (8 * b)) as u64 & 0xFF).into();
                }
            }
        }
    }

    fn connect(&mut self) {
        for o in &mut self.out {
            o.connect();
        }
    }

    /// One memory per bank (a write port, an asynchronous read port: Yosys maps it to LUT RAM)
    /// and the two rotations, each `ceil(log2 W)` stages of fixed rotations
    /// ([`rotation_stages`]).
    fn hdl(&self) -> Verilog {
        let (w, es) = (self._w, self._es);
        if w == 0 {
            return Verilog::Custom(String::new());
        }
        let (eb, p) = (8 * es, slots(w));
        let ab = p.trailing_zeros() as usize;
        let concat = |names: Vec<String>| names.into_iter().rev().collect::<Vec<_>>().join(", ");
        let mut v = format!(
            "\
wire [{}:0] row_in = {{{}}};
reg [{abm}:0] row_q;
reg read_half_q;
integer n;
initial begin
   row_q = 0;
   read_half_q = 1;
end
always @(posedge clock) if (enable) begin
   row_q <= next_row[{abm}:0];
   read_half_q <= ~next_half;
end
",
            w * eb - 1,
            concat((0..w * es).map(|k| format!("dram${k}")).collect()),
            abm = ab - 1,
        );
        // Bank `k` takes element `(k - column) mod W` of the DRAM row.
        v.push_str(&rotation_stages("skewed", "row_in", "column", w, eb, Turn::Left));
        for k in 0..w {
            v.push_str(&format!(
                "\
reg [{ebm}:0] bank_{k} [0:{last}];
wire [{ab}:0] next_at_{k} = (next_row[{abm}:0] > {ab}'d{k}) ? ({ab1}'d{kw} - {{1'b0, next_row[{abm}:0]}}) : ({ab1}'d{k} - {{1'b0, next_row[{abm}:0]}});
reg [{abm}:0] at_{k};
initial at_{k} = {k};
always @(posedge clock) if (enable) at_{k} <= next_at_{k}[{abm}:0];
wire [{ebm}:0] word_{k} = bank_{k}[{{read_half_q, at_{k}}}];
always @(posedge clock) if (write) bank_{k}[{{half, column[{abm}:0]}}] <= skewed[{hi}:{lo}];
initial for (n = 0; n < {depth}; n = n + 1) bank_{k}[n] = 0;
",
                ebm = eb - 1,
                last = 2 * p - 1,
                depth = 2 * p,
                ab1 = ab + 1,
                abm = ab - 1,
                kw = k + w,
                hi = k * eb + eb - 1,
                lo = k * eb,
            ));
        }
        v.push_str(&format!(
            "wire [{}:0] banked = {{{}}};\n",
            w * eb - 1,
            concat((0..w).map(|k| format!("word_{k}")).collect())
        ));
        // Element `e` of row `row` is in bank `(row + e) mod W`.
        v.push_str(&rotation_stages("unskewed", "banked", "row_q", w, eb, Turn::Right));
        for j in 0..w * es {
            v.push_str(&format!(
                "always @(*) out${j} = read ? unskewed[{}:{}] : dram${j};\n",
                8 * j + 7,
                8 * j
            ));
        }
        Verilog::Custom(v)
    }
}

/// Which way [`rotation_stages`] turns a row of elements.
#[derive(Clone, Copy)]
enum Turn {
    /// `out[k] = in[(k - amount) mod W]`.
    Left,
    /// `out[k] = in[(k + amount) mod W]`.
    Right,
}

/// Verilog for wire `name`: the `w` elements of `eb` bits in wire `input` rotated by
/// `amount` (a port, below `w`), as one stage per amount bit `j` that rotates by `2^j mod w`
/// or passes: rotations compose, so the stages rotate by `amount mod w`. For a `w` off a power
/// of two this is half the cells of a shift of the row concatenated twice (`ceil(log2 w)`
/// stages of `w * eb` multiplexers, where the shift needs one more stage of twice as many).
fn rotation_stages(
    name: &str,
    input: &str,
    amount: &str,
    w: usize,
    eb: usize,
    turn: Turn,
) -> String {
    let bits = (usize::BITS - (w - 1).leading_zeros()) as usize;
    let top = w * eb - 1;
    let mut v = format!("wire [{top}:0] {name}_s0 = {input};\n");
    for j in 0..bits {
        let step = (1usize << j) % w;
        // The row turned by `step` elements, as two slices swapped.
        let turned = match (step, turn) {
            (0, _) => format!("{name}_s{j}"),
            (s, Turn::Right) => {
                format!("{{{name}_s{j}[{}:0], {name}_s{j}[{top}:{}]}}", s * eb - 1, s * eb)
            }
            (s, Turn::Left) => format!(
                "{{{name}_s{j}[{}:0], {name}_s{j}[{top}:{}]}}",
                top - s * eb,
                top + 1 - s * eb
            ),
        };
        v.push_str(&format!(
            "wire [{top}:0] {name}_s{n} = {amount}[{j}] ? {turned} : {name}_s{j};\n",
            n = j + 1
        ));
    }
    v.push_str(&format!("wire [{top}:0] {name} = {name}_s{bits};\n"));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, tick, verilog_of};

    /// Column writes fill one half, row reads of the other half give the rows back, the DRAM
    /// row passes through otherwise: for widths on and off a power of two, both dtypes.
    #[test]
    fn transposer_fills_columns_and_reads_rows() {
        for (w, dtype) in [(3, Dtype::Int8), (3, Dtype::Bf16), (4, Dtype::Int8), (5, Dtype::Bf16)] {
            let es = dtype.elem_bytes();
            let mut t = Transposer::with_width(w, dtype);
            t.connect_all();
            t.enable.next = true;
            // Byte `b` of element (i, e) of half h.
            let byte =
                |h: usize, i: usize, e: usize, b: usize| (h << 7 | i << 4 | e << 1 | b) as u64;
            t.write.next = true;
            for h in 0..2 {
                t.half.next = h == 1;
                for e in 0..w {
                    t.column.next = (e as u64).into();
                    for i in 0..w {
                        for b in 0..es {
                            t.dram[i * es + b].next = byte(h, i, e, b).into();
                        }
                    }
                    tick(&mut t, |t| &mut t.clock);
                }
            }
            // A cycle without `write` changes nothing.
            t.write.next = false;
            for k in 0..w * es {
                t.dram[k].next = (0xF0 | k as u64).into();
            }
            tick(&mut t, |t| &mut t.clock);
            t.read.next = true;
            for h in 0..2 {
                for i in 0..w {
                    // Named a cycle ahead; reads come from the half that is not filling.
                    t.next_row.next = (i as u64).into();
                    t.next_half.next = h == 0;
                    tick(&mut t, |t| &mut t.clock);
                    let row: Vec<u64> = t.out.iter().map(|l| l.val().index() as u64).collect();
                    let want: Vec<u64> = (0..w * es).map(|k| byte(h, i, k / es, k % es)).collect();
                    assert_eq!(row, want, "{w} {dtype:?} half {h} row {i}");
                }
            }
            t.read.next = false;
            settle(&mut t);
            let row: Vec<u64> = t.out.iter().map(|l| l.val().index() as u64).collect();
            assert_eq!(row, (0..(w * es) as u64).map(|k| 0xF0 | k).collect::<Vec<_>>());
        }
    }

    /// A blocking machine's buffer is empty: no memories, no data ports.
    #[test]
    fn transposer_is_empty_when_blocking() {
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        let empty = Transposer::new(&config);
        assert_eq!((empty.width(), empty.dram.len(), empty.out.len()), (0, 0, 0));
        assert!(!verilog_of(empty).contains("bank_"));
        let decoupled = config.with_schedule(Schedule::Decoupled);
        let t = Transposer::new(&decoupled);
        assert_eq!((t.width(), t.dram.len(), t.out.len()), (4, 8, 8));
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("transposer", &verilog_of(Transposer::with_width(4, Dtype::Bf16))).unwrap();
        yosys_validate("transposer_int8", &verilog_of(Transposer::with_width(3, Dtype::Int8)))
            .unwrap();
        yosys_validate("transposer_18", &verilog_of(Transposer::with_width(18, Dtype::Int8)))
            .unwrap();
    }
}
