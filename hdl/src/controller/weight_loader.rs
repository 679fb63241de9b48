//! The weight loader: the unit that shifts a weight tile from the scratchpad into the array's
//! shadow weights (`LoadWeights`, weight-stationary only).

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::ArrayConfig;

use crate::decode::constant;
use crate::delay::Delay;
use crate::optional::Optional;

/// The weight loader: `LoadWeights` in R cycles, tile row `R - 1 - tau` entering the shadow's
/// top row in cycle `tau` (zero past the tile's rows and columns). Built with read stages
/// (`ArrayConfig::read_stages`) it takes as many cycles more: its reads are addressed as
/// before, and the shift and its row's controls pass as many registers, to meet the rows.
#[derive(LogicBlock)]
pub struct WeightLoader {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    /// The instruction, as decoded.
    pub ins: Decoded,
    pub free: Signal<Out, Bit>,
    /// In its last cycle: the shadow is full from the next one.
    pub finishing: Signal<Out, Bit>,
    pub shift: Signal<Out, Bit>,
    /// The row entering now is a tile row (not zero fill).
    pub row_valid: Signal<Out, Bit>,
    /// The tile's columns: lanes at or past this are zero.
    pub columns: Signal<Out, Bits<16>>,
    /// Scratchpad row for the next cycle (read port B).
    pub spad_read: Signal<Out, Bits<16>>,
    busy: DFF<Bit>,
    tau: DFF<Bits<16>>,
    base: DFF<Bits<16>>,
    k: DFF<Bits<16>>,
    n: DFF<Bits<16>>,
    last_row: Constant<Bits<16>>,
    last: Signal<Local, Bit>,
    /// Built with read stages: the last cycle (`R - 1 + read_stages`), and the shift, the row's
    /// validity and the columns on their way to the array.
    last_tau: Optional<Constant<Bits<16>>>,
    late_shift: Optional<Delay<Bit>>,
    late_valid: Optional<Delay<Bit>>,
    late_columns: Optional<Delay<Bits<16>>>,
}

impl WeightLoader {
    pub fn new(config: &ArrayConfig) -> WeightLoader {
        let staged = config.read_stages > 0;
        WeightLoader {
            ins: Default::default(),
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            free: Default::default(),
            finishing: Default::default(),
            shift: Default::default(),
            row_valid: Default::default(),
            columns: Default::default(),
            spad_read: Default::default(),
            busy: Default::default(),
            tau: Default::default(),
            base: Default::default(),
            k: Default::default(),
            n: Default::default(),
            last_row: constant(config.rows as u64 - 1),
            last: Default::default(),
            last_tau: Optional::when(staged, || {
                constant(config.rows as u64 - 1 + config.read_stages as u64)
            }),
            late_shift: Optional::when(staged, || Delay::new(config.read_stages as usize)),
            late_valid: Optional::when(staged, || Delay::new(config.read_stages as usize)),
            late_columns: Optional::when(staged, || Delay::new(config.read_stages as usize)),
        }
    }
}

impl Logic for WeightLoader {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, busy, tau, base, k, n);
        self.last.next = self.tau.q.val() == self.last_row.val();
        for _s in 0..self.last_tau.len() {
            self.last.next = self.tau.q.val() == self.last_tau.val();
        }
        self.free.next = !self.busy.q.val() || self.last.val();
        self.finishing.next = self.busy.q.val() && self.last.val();
        if self.enable.val() {
            if self.busy.q.val() {
                self.tau.d.next = self.tau.q.val() + 1;
                if self.last.val() {
                    self.busy.d.next = false;
                }
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.tau.d.next = 0.into();
                self.base.d.next = self.ins.spad_row.val();
                self.k.d.next = self.ins.rows.val();
                self.n.d.next = self.ins.cols.val();
            }
            if self.abort.val() {
                self.busy.d.next = false;
            }
        }
        self.shift.next = self.busy.q.val();
        self.row_valid.next = (self.last_row.val() - self.tau.q.val()) < self.k.q.val();
        self.columns.next = self.n.q.val();
        // Built with read stages, each row's controls wait for its registered read; the
        // read-stage tail's cycles shift nothing.
        for _s in 0..self.late_shift.len() {
            self.late_shift.clock.next = self.clock.val();
            self.late_valid.clock.next = self.clock.val();
            self.late_columns.clock.next = self.clock.val();
            self.late_shift.enable.next = self.enable.val();
            self.late_valid.enable.next = self.enable.val();
            self.late_columns.enable.next = self.enable.val();
            self.late_shift.d_in.next =
                self.busy.q.val() && (self.tau.q.val() <= self.last_row.val());
            self.late_valid.d_in.next = (self.last_row.val() - self.tau.q.val()) < self.k.q.val();
            self.late_columns.d_in.next = self.n.q.val();
            self.shift.next = self.late_shift.d_out.val();
            self.row_valid.next = self.late_valid.d_out.val();
            self.columns.next = self.late_columns.d_out.val();
        }
        // The next cycle's read: a continuing load's row, else (free) the candidate's first,
        // whether or not it dispatches (the program checks stay off the address pins).
        self.spad_read.next = self.base.q.val() + (self.last_row.val() - (self.tau.q.val() + 1));
        if self.free.val() {
            self.spad_read.next = self.ins.spad_row.val() + self.last_row.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};
    use systole_core::Dtype;

    /// A weight load takes R cycles, bottom tile row first, and reports its last one.
    #[test]
    fn weight_loader_walks_the_tile_bottom_up() {
        let config = ArrayConfig::new(3, 2, Dtype::Int8);
        let mut wl = WeightLoader::new(&config);
        wl.connect_all();
        wl.enable.next = true;
        wl.start.next = true;
        wl.ins.spad_row.next = 10u64.into();
        wl.ins.rows.next = 2u64.into();
        wl.ins.cols.next = 1u64.into();
        crate::testing::settle(&mut wl);
        assert_eq!(wl.spad_read.val().index(), 12, "the first read is addressed before dispatch");
        tick(&mut wl, |w| &mut w.clock);
        wl.start.next = false;
        let mut seen = vec![];
        for _ in 0..3 {
            crate::testing::settle(&mut wl);
            seen.push((wl.shift.val(), wl.row_valid.val(), wl.finishing.val(), wl.free.val()));
            tick(&mut wl, |w| &mut w.clock);
        }
        // Tile row 2 (past its 2 rows) is zero fill; rows 1 and 0 are real.
        assert_eq!(
            seen,
            vec![(true, false, false, false), (true, true, false, false), (true, true, true, true)]
        );
        crate::testing::settle(&mut wl);
        assert!(!wl.shift.val() && wl.free.val());
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(3, 4, Dtype::Bf16);
        yosys_validate("weight_loader", &verilog_of(WeightLoader::new(&config))).unwrap();
    }
}
