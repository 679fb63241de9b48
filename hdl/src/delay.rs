//! A delay line: the skew and de-skew lines of the array, the conversion lanes' pipeline
//! registers and the sequencer's write side behind them.

use rust_hdl::prelude::*;

/// `depth` registers in a row, shifting while `enable`; depth 0 is a wire.
#[derive(LogicBlock)]
pub struct Delay<T: Synth> {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub d_in: Signal<In, T>,
    pub d_out: Signal<Out, T>,
    regs: Vec<DFF<T>>,
}

impl<T: Synth> Delay<T> {
    pub fn new(depth: usize) -> Self {
        Delay {
            clock: Default::default(),
            enable: Default::default(),
            d_in: Default::default(),
            d_out: Default::default(),
            regs: (0..depth).map(|_| DFF::default()).collect(),
        }
    }
}

impl<T: Synth> Logic for Delay<T> {
    #[hdl_gen]
    fn update(&mut self) {
        self.d_out.next = self.d_in.val();
        for s in 0..self.regs.len() {
            self.regs[s].clock.next = self.clock.val();
            self.regs[s].d.next = self.regs[s].q.val();
            if self.enable.val() {
                self.regs[s].d.next = self.d_in.val();
            }
            self.d_out.next = self.regs[s].q.val();
        }
        if self.enable.val() {
            for s in 1..self.regs.len() {
                self.regs[s].d.next = self.regs[s - 1].q.val();
            }
        }
    }
}
