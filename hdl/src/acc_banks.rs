//! The accumulators of the decoupled schedule: two banks, rows `0..split` and `split..depth`
//! (`split = ceil(depth / 2)`, core's `scoreboard::acc_banks`), each with its own ports, so the
//! array can write one bank while the vector unit or the load unit works in the other. Core's
//! scoreboard never lets two units touch one bank at once; this block routes each unit's reads
//! and writes to the bank its row is in.
//!
//! Each bank is two copies written alike (read ports X and Y, as the blocking machine's
//! accumulators). Port X of a bank serves the vector unit's destination word (vector ops,
//! `Store`, casts) when the vector unit reads there, else the array's word to accumulate into,
//! else (no program running) the host. Port Y serves the vector unit's source row. Reads are
//! registered: each read's bank is remembered a cycle to route the word back to its reader (two
//! on memories with a read stage, `ArrayConfig::read_stages`).
//! Writes come from the vector unit, the load unit (`LoadAcc`) and the array, at most one per
//! bank.

use rust_hdl::prelude::*;

use crate::decode::constant;
use crate::mem::RowRam;
use crate::optional::Optional;
use crate::top::TopConfig;

/// Two accumulator banks behind per-unit ports.
#[derive(LogicBlock)]
pub struct AccBanks {
    pub clock: Signal<In, Clock>,
    /// Read enable of every port (the machine's clock enable).
    pub enable: Signal<In, Bit>,
    /// No program runs: the host owns port X and the writes.
    pub host: Signal<In, Bit>,
    pub host_row: Signal<In, Bits<16>>,
    pub host_write: Signal<In, Bit>,
    pub host_lane: Signal<In, Bits<16>>,
    pub host_word: Signal<In, Bits<32>>,
    /// The vector unit reads its destination row `vector_x` and source row `vector_y` next.
    pub vector_reads: Signal<In, Bit>,
    pub vector_x: Signal<In, Bits<16>>,
    pub vector_y: Signal<In, Bits<16>>,
    /// The array's row to accumulate into, read next (ignored where the vector unit reads).
    pub array_x: Signal<In, Bits<16>>,
    /// Writes: the vector unit's, the load unit's and the array's, each a row and C words.
    pub vector_write: Signal<In, Bit>,
    pub vector_row: Signal<In, Bits<16>>,
    pub vector_data: Vec<Signal<In, Bits<32>>>,
    pub load_write: Signal<In, Bit>,
    pub load_row: Signal<In, Bits<16>>,
    pub load_data: Vec<Signal<In, Bits<32>>>,
    pub array_write: Signal<In, Bit>,
    pub array_row: Signal<In, Bits<16>>,
    pub array_data: Vec<Signal<In, Bits<32>>>,
    /// The words read in the last cycle: the vector unit's X and Y, the array's (and the
    /// host's) X.
    pub vector_x_data: Vec<Signal<Out, Bits<32>>>,
    pub vector_y_data: Vec<Signal<Out, Bits<32>>>,
    pub array_x_data: Vec<Signal<Out, Bits<32>>>,
    /// The host's word at lane `host_lane` of the row read in the last cycle (the host holds
    /// `host_lane` while it reads, as the blocking machine's accumulators expect).
    pub host_data: Signal<Out, Bits<32>>,
    x0: RowRam<32>,
    y0: RowRam<32>,
    x1: RowRam<32>,
    y1: RowRam<32>,
    split: Constant<Bits<16>>,
    /// The bank each reader read from in the last cycle (set: the second).
    vector_x_bank: DFF<Bit>,
    vector_y_bank: DFF<Bit>,
    array_x_bank: DFF<Bit>,
    /// Built with read stages: the bank each reader read two cycles ago passes these first.
    vector_x_early: Optional<DFF<Bit>>,
    vector_y_early: Optional<DFF<Bit>>,
    array_x_early: Optional<DFF<Bit>>,
    vx1: Signal<Local, Bit>,
    vy1: Signal<Local, Bit>,
    ax1: Signal<Local, Bit>,
    hx1: Signal<Local, Bit>,
    /// Which writer each bank takes this cycle, and its row.
    w0_vector: Signal<Local, Bit>,
    w0_load: Signal<Local, Bit>,
    w0_array: Signal<Local, Bit>,
    w1_vector: Signal<Local, Bit>,
    w1_load: Signal<Local, Bit>,
    w1_array: Signal<Local, Bit>,
    /// Port X of each bank serves the vector unit (else the array).
    x0_vector: Signal<Local, Bit>,
    x1_vector: Signal<Local, Bit>,
}

impl AccBanks {
    /// The banks of `top`'s accumulators, each copy with the write stage where `top` has one
    /// (`TopConfig::acc_write_stage`).
    pub fn new(top: &TopConfig) -> AccBanks {
        let config = &top.array;
        let c = config.cols as usize;
        let depth = config.acc_depth as usize;
        let split = depth.div_ceil(2);
        AccBanks {
            clock: Default::default(),
            enable: Default::default(),
            host: Default::default(),
            host_row: Default::default(),
            host_write: Default::default(),
            host_lane: Default::default(),
            host_word: Default::default(),
            vector_reads: Default::default(),
            vector_x: Default::default(),
            vector_y: Default::default(),
            array_x: Default::default(),
            vector_write: Default::default(),
            vector_row: Default::default(),
            vector_data: (0..c).map(|_| Default::default()).collect(),
            load_write: Default::default(),
            load_row: Default::default(),
            load_data: (0..c).map(|_| Default::default()).collect(),
            array_write: Default::default(),
            array_row: Default::default(),
            array_data: (0..c).map(|_| Default::default()).collect(),
            vector_x_data: (0..c).map(|_| Default::default()).collect(),
            vector_y_data: (0..c).map(|_| Default::default()).collect(),
            array_x_data: (0..c).map(|_| Default::default()).collect(),
            host_data: Default::default(),
            x0: top.acc(split),
            y0: top.acc(split),
            // A one-row accumulator has an empty second bank; it keeps one unused row.
            x1: top.acc((depth - split).max(1)),
            y1: top.acc((depth - split).max(1)),
            split: constant(split as u64),
            vector_x_bank: Default::default(),
            vector_y_bank: Default::default(),
            array_x_bank: Default::default(),
            vector_x_early: Optional::default_when(config.read_stages > 0),
            vector_y_early: Optional::default_when(config.read_stages > 0),
            array_x_early: Optional::default_when(config.read_stages > 0),
            vx1: Default::default(),
            vy1: Default::default(),
            ax1: Default::default(),
            hx1: Default::default(),
            w0_vector: Default::default(),
            w0_load: Default::default(),
            w0_array: Default::default(),
            w1_vector: Default::default(),
            w1_load: Default::default(),
            w1_array: Default::default(),
            x0_vector: Default::default(),
            x1_vector: Default::default(),
        }
    }
}

impl Logic for AccBanks {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, vector_x_bank, vector_y_bank, array_x_bank);
        self.x0.clock.next = self.clock.val();
        self.y0.clock.next = self.clock.val();
        self.x1.clock.next = self.clock.val();
        self.y1.clock.next = self.clock.val();
        self.x0.read_enable.next = self.enable.val() || self.host.val();
        self.y0.read_enable.next = self.enable.val();
        self.x1.read_enable.next = self.enable.val() || self.host.val();
        self.y1.read_enable.next = self.enable.val();
        // Reads: each address to its bank.
        self.vx1.next = self.vector_x.val() >= self.split.val();
        self.vy1.next = self.vector_y.val() >= self.split.val();
        self.ax1.next = self.array_x.val() >= self.split.val();
        self.hx1.next = self.host_row.val() >= self.split.val();
        self.x0_vector.next = self.vector_reads.val() && !self.vx1.val();
        self.x1_vector.next = self.vector_reads.val() && self.vx1.val();
        self.x0.read_address.next = self.array_x.val();
        if self.x0_vector.val() {
            self.x0.read_address.next = self.vector_x.val();
        }
        self.x1.read_address.next = self.array_x.val() - self.split.val();
        if self.x1_vector.val() {
            self.x1.read_address.next = self.vector_x.val() - self.split.val();
        }
        self.y0.read_address.next = self.vector_y.val();
        self.y1.read_address.next = self.vector_y.val() - self.split.val();
        if self.host.val() {
            self.x0.read_address.next = self.host_row.val();
            self.x1.read_address.next = self.host_row.val() - self.split.val();
        }
        if self.enable.val() {
            self.vector_x_bank.d.next = self.vx1.val();
            self.vector_y_bank.d.next = self.vy1.val();
            self.array_x_bank.d.next = self.ax1.val();
        }
        if self.host.val() {
            self.array_x_bank.d.next = self.hx1.val();
        }
        for _s in 0..self.vector_x_early.len() {
            self.vector_x_early.clock.next = self.clock.val();
            self.vector_y_early.clock.next = self.clock.val();
            self.array_x_early.clock.next = self.clock.val();
            self.vector_x_early.d.next = self.vector_x_early.q.val();
            self.vector_y_early.d.next = self.vector_y_early.q.val();
            self.array_x_early.d.next = self.array_x_early.q.val();
            if self.enable.val() {
                self.vector_x_early.d.next = self.vx1.val();
                self.vector_y_early.d.next = self.vy1.val();
                self.array_x_early.d.next = self.ax1.val();
                self.vector_x_bank.d.next = self.vector_x_early.q.val();
                self.vector_y_bank.d.next = self.vector_y_early.q.val();
                self.array_x_bank.d.next = self.array_x_early.q.val();
            }
            if self.host.val() {
                self.array_x_early.d.next = self.hx1.val();
                self.array_x_bank.d.next = self.array_x_early.q.val();
            }
        }
        // Writes: the writer whose row is in the bank.
        self.w0_vector.next = self.vector_write.val() && (self.vector_row.val() < self.split.val());
        self.w1_vector.next =
            self.vector_write.val() && (self.vector_row.val() >= self.split.val());
        self.w0_load.next = self.load_write.val() && (self.load_row.val() < self.split.val());
        self.w1_load.next = self.load_write.val() && (self.load_row.val() >= self.split.val());
        self.w0_array.next = self.array_write.val() && (self.array_row.val() < self.split.val());
        self.w1_array.next = self.array_write.val() && (self.array_row.val() >= self.split.val());
        self.x0.write_address.next = self.array_row.val();
        if self.w0_load.val() {
            self.x0.write_address.next = self.load_row.val();
        }
        if self.w0_vector.val() {
            self.x0.write_address.next = self.vector_row.val();
        }
        self.x1.write_address.next = self.array_row.val() - self.split.val();
        if self.w1_load.val() {
            self.x1.write_address.next = self.load_row.val() - self.split.val();
        }
        if self.w1_vector.val() {
            self.x1.write_address.next = self.vector_row.val() - self.split.val();
        }
        if self.host.val() {
            self.x0.write_address.next = self.host_row.val();
            self.x1.write_address.next = self.host_row.val() - self.split.val();
        }
        self.y0.write_address.next = self.x0.write_address.val();
        self.y1.write_address.next = self.x1.write_address.val();
        self.host_data.next = 0.into();
        for j in 0..self.vector_data.len() {
            self.x0.write_data[j].next = self.array_data[j].val();
            if self.w0_load.val() {
                self.x0.write_data[j].next = self.load_data[j].val();
            }
            if self.w0_vector.val() {
                self.x0.write_data[j].next = self.vector_data[j].val();
            }
            self.x1.write_data[j].next = self.array_data[j].val();
            if self.w1_load.val() {
                self.x1.write_data[j].next = self.load_data[j].val();
            }
            if self.w1_vector.val() {
                self.x1.write_data[j].next = self.vector_data[j].val();
            }
            self.x0.write_lane[j].next = self.enable.val()
                && (self.w0_vector.val() || self.w0_load.val() || self.w0_array.val());
            self.x1.write_lane[j].next = self.enable.val()
                && (self.w1_vector.val() || self.w1_load.val() || self.w1_array.val());
            if self.host.val() {
                self.x0.write_data[j].next = self.host_word.val();
                self.x1.write_data[j].next = self.host_word.val();
                self.x0.write_lane[j].next = self.host_write.val()
                    && !self.hx1.val()
                    && (self.host_lane.val() == j.to_bits());
                self.x1.write_lane[j].next = self.host_write.val()
                    && self.hx1.val()
                    && (self.host_lane.val() == j.to_bits());
            }
            self.y0.write_data[j].next = self.x0.write_data[j].val();
            self.y1.write_data[j].next = self.x1.write_data[j].val();
            self.y0.write_lane[j].next = self.x0.write_lane[j].val();
            self.y1.write_lane[j].next = self.x1.write_lane[j].val();
            // The words read in the last cycle, from the bank each reader read.
            self.vector_x_data[j].next = self.x0.read_data[j].val();
            if self.vector_x_bank.q.val() {
                self.vector_x_data[j].next = self.x1.read_data[j].val();
            }
            self.vector_y_data[j].next = self.y0.read_data[j].val();
            if self.vector_y_bank.q.val() {
                self.vector_y_data[j].next = self.y1.read_data[j].val();
            }
            self.array_x_data[j].next = self.x0.read_data[j].val();
            if self.array_x_bank.q.val() {
                self.array_x_data[j].next = self.x1.read_data[j].val();
            }
            if self.host_lane.val() == j.to_bits() {
                self.host_data.next = self.array_x_data[j].val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};
    use systole_core::{ArrayConfig, Dtype};

    fn words(v: &[Signal<Out, Bits<32>>]) -> Vec<u64> {
        v.iter().map(|s| s.val().to_u64()).collect()
    }

    fn put(v: &mut [Signal<In, Bits<32>>], words: [u64; 2]) {
        for (s, w) in v.iter_mut().zip(words) {
            s.next = w.into();
        }
    }

    /// Three writers in one cycle land in the bank of their rows; three readers in one cycle
    /// get their rows back from either bank, a row written the cycle before too; the host reads
    /// a word of either bank. The same with the banks' write stage.
    #[test]
    fn every_unit_reaches_both_banks() {
        for acc_write_stage in [false, true] {
            every_unit_reaches_both_banks_on(acc_write_stage);
        }
    }

    fn every_unit_reaches_both_banks_on(acc_write_stage: bool) {
        let config = ArrayConfig { acc_depth: 5, ..ArrayConfig::new(2, 2, Dtype::Int8) };
        let mut b = AccBanks::new(&TopConfig { acc_write_stage, ..TopConfig::new(config) });
        b.connect_all();
        b.enable.next = true;
        // Rows 0..3 are the first bank, 3..5 the second.
        (b.vector_write.next, b.vector_row.next) = (true, 1.into());
        put(&mut b.vector_data, [1, 2]);
        (b.load_write.next, b.load_row.next) = (true, 4.into());
        put(&mut b.load_data, [3, 4]);
        tick(&mut b, |b| &mut b.clock);
        b.load_write.next = false;
        (b.array_write.next, b.array_row.next) = (true, 3.into());
        put(&mut b.array_data, [5, 6]);
        b.vector_row.next = 0.into();
        put(&mut b.vector_data, [7, 8]);
        tick(&mut b, |b| &mut b.clock);
        (b.vector_write.next, b.array_write.next) = (false, false);
        b.vector_reads.next = true;
        (b.vector_x.next, b.vector_y.next, b.array_x.next) = (4.into(), 1.into(), 0.into());
        tick(&mut b, |b| &mut b.clock);
        assert_eq!(words(&b.vector_x_data), [3, 4], "row 4, second bank");
        assert_eq!(words(&b.vector_y_data), [1, 2], "row 1, first bank");
        assert_eq!(words(&b.array_x_data), [7, 8], "row 0, first bank, beside the vector unit");
        // The array reads the second bank while the vector unit reads the first.
        (b.vector_x.next, b.array_x.next) = (0.into(), 3.into());
        tick(&mut b, |b| &mut b.clock);
        assert_eq!(words(&b.vector_x_data), [7, 8]);
        assert_eq!(words(&b.array_x_data), [5, 6]);
        b.vector_reads.next = false;
        (b.host.next, b.host_row.next, b.host_lane.next) = (true, 3.into(), 1.into());
        tick(&mut b, |b| &mut b.clock);
        assert_eq!(b.host_data.val().to_u64(), 6);
        b.host_row.next = 1.into();
        tick(&mut b, |b| &mut b.clock);
        assert_eq!(b.host_data.val().to_u64(), 2);
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig { acc_depth: 7, ..ArrayConfig::new(3, 2, Dtype::Bf16) };
        let top = TopConfig { acc_write_stage: true, ..TopConfig::new(config) };
        yosys_validate("acc_banks", &verilog_of(AccBanks::new(&top))).unwrap();
    }
}
