//! A row of RAM lanes sharing their addresses.

use rust_hdl::prelude::*;

use super::{Ram, SpramRows};
use crate::optional::Optional;

/// `lanes` RAM lanes addressed by one row: a row of a scratchpad or accumulator per cycle.
/// Lane `j` is written where `write_lane[j]` is set (a whole row, or one host element). Built
/// [`RowRam::in_spram`], the lanes are the UP5K's single-port SPRAMs instead of block RAMs,
/// cleared while `clear` is set.
#[derive(LogicBlock)]
pub struct RowRam<const W: usize> {
    pub clock: Signal<In, Clock>,
    pub read_enable: Signal<In, Bit>,
    pub read_address: Signal<In, Bits<16>>,
    pub read_data: Vec<Signal<Out, Bits<W>>>,
    pub write_address: Signal<In, Bits<16>>,
    pub write_data: Vec<Signal<In, Bits<W>>>,
    pub write_lane: Vec<Signal<In, Bit>>,
    /// Built in SPRAMs only: zeros written over every row while set (the machine's reset).
    pub clear: Optional<Signal<In, Bit>>,
    lanes: Vec<Ram<W, 16>>,
    spram: Optional<SpramRows<W>>,
}

impl<const W: usize> RowRam<W> {
    pub fn new(lanes: usize, depth: usize) -> Self {
        RowRam::with_bits(lanes, depth, W)
    }

    /// Lanes that keep the low `bits` of each word.
    pub fn with_bits(lanes: usize, depth: usize, bits: usize) -> Self {
        RowRam {
            clock: Default::default(),
            read_enable: Default::default(),
            read_address: Default::default(),
            read_data: (0..lanes).map(|_| Default::default()).collect(),
            write_address: Default::default(),
            write_data: (0..lanes).map(|_| Default::default()).collect(),
            write_lane: (0..lanes).map(|_| Default::default()).collect(),
            clear: Optional::none(),
            lanes: (0..lanes).map(|_| Ram::with_bits(depth, bits)).collect(),
            spram: Optional::none(),
        }
    }

    /// `lanes` 8-bit lanes of up to 16,384 rows in the UP5K's SPRAMs ([`SpramRows`]): one
    /// port, so no read that is used may be addressed in the cycle of a write.
    pub fn in_spram(lanes: usize) -> Self {
        RowRam {
            clear: Optional::some(Default::default()),
            lanes: Vec::new(),
            spram: Optional::some(SpramRows::new(lanes)),
            ..RowRam::with_bits(lanes, 1, 8)
        }
    }

    /// The same memory with its lanes' writes registered ([`Ram::with_write_stage`]).
    pub fn with_write_stage(self) -> Self {
        assert!(self.spram.is_empty(), "an SPRAM row has no write stage");
        RowRam { lanes: self.lanes.into_iter().map(Ram::with_write_stage).collect(), ..self }
    }

    /// The same memory with its lanes' reads passing one more register ([`Ram::with_read_stage`]).
    pub fn with_read_stage(self) -> Self {
        assert!(self.spram.is_empty(), "an SPRAM row has no read stage");
        RowRam { lanes: self.lanes.into_iter().map(Ram::with_read_stage).collect(), ..self }
    }
}

impl<const W: usize> Logic for RowRam<W> {
    #[hdl_gen]
    fn update(&mut self) {
        for j in 0..self.lanes.len() {
            self.lanes[j].clock.next = self.clock.val();
            self.lanes[j].read_enable.next = self.read_enable.val();
            self.lanes[j].read_address.next = self.read_address.val();
            self.lanes[j].write_address.next = self.write_address.val();
            self.lanes[j].write_data.next = self.write_data[j].val();
            self.lanes[j].write_enable.next = self.write_lane[j].val();
            self.read_data[j].next = self.lanes[j].read_data.val();
        }
        for _k in 0..self.spram.len() {
            self.spram.clock.next = self.clock.val();
            self.spram.clear.next = self.clear.val();
            self.spram.read_enable.next = self.read_enable.val();
            self.spram.read_address.next = self.read_address.val();
            self.spram.write_address.next = self.write_address.val();
            for j in 0..self.read_data.len() {
                self.spram.write_data[j].next = self.write_data[j].val();
                self.spram.write_lane[j].next = self.write_lane[j].val();
                self.read_data[j].next = self.spram.read_data[j].val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::verilog_of;

    #[test]
    fn verilog_is_valid() {
        yosys_validate("row_ram", &verilog_of(RowRam::<16>::with_bits(3, 64, 8))).unwrap();
        let read_stage = RowRam::<16>::with_bits(3, 64, 8).with_read_stage();
        yosys_validate("row_ram_read_stage", &verilog_of(read_stage)).unwrap();
    }
}
