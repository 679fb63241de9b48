//! The dispatcher: decides, one cycle ahead, whether the FIFO's head dispatches to its unit;
//! freezes the machine on an empty FIFO, counts program cycles and latches faults (the
//! [module docs](super) say when and why).

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::protocol::FaultCode;

use crate::decode::constant;
use crate::optional::Optional;

/// The dispatcher: run state, dispatch decisions one cycle ahead on the FIFO's head (the
/// candidate), the shadow-full flag, the cycle counter and the status the host reads.
#[derive(LogicBlock)]
pub struct Dispatcher {
    pub clock: Signal<In, Clock>,
    /// `Run` from the host: start dispatching (ignored while running).
    pub run: Signal<In, Bit>,
    /// `Reset` from the host (or the reset pin): stop, empty the FIFO, clear the status.
    pub reset: Signal<In, Bit>,
    /// The FIFO's head: the candidate, the oldest word not yet dispatched.
    pub head_valid: Signal<In, Bit>,
    pub head_word: Signal<In, Bits<128>>,
    /// The candidate's fault code (0 if none), formed as the word was queued and stored with it
    /// ([`crate::decode::WordFault`]).
    pub fault_in: Signal<In, Bits<4>>,
    /// The instruction, as decoded.
    pub ins: Decoded,
    pub seq_free: Signal<In, Bit>,
    pub wl_free: Signal<In, Bit>,
    pub wl_finishing: Signal<In, Bit>,
    pub arr_free: Signal<In, Bit>,
    /// On a single-port scratchpad (`ArrayConfig::single_port_spad`) only: the array unit
    /// still holds the scratchpad's one port (`ArrayUnit::reading`), so a `LoadWeights` waits.
    pub arr_reading: Optional<Signal<In, Bit>>,
    /// The candidate word.
    pub word: Signal<Out, Bits<128>>,
    pub pop: Signal<Out, Bit>,
    pub fifo_clear: Signal<Out, Bit>,
    /// Global clock enable: low while frozen.
    pub enable: Signal<Out, Bit>,
    pub abort: Signal<Out, Bit>,
    pub start_seq: Signal<Out, Bit>,
    pub start_wl: Signal<Out, Bit>,
    pub start_arr: Signal<Out, Bit>,
    /// The candidate is a sequencer instruction that dispatches in the next cycle unless the
    /// program checks fault it: the shared memory ports go to the sequencer's reads, which
    /// are addressed before the checks are known.
    pub seq_may_start: Signal<Out, Bit>,
    pub running: Signal<Out, Bit>,
    pub done: Signal<Out, Bit>,
    pub fault: Signal<Out, Bits<4>>,
    pub cycles: Signal<Out, Bits<64>>,
    /// Built for an SDRAM machine only: its port stalls the machine (a frozen cycle); the
    /// machine counts its cycles (it has dispatched since `Run`).
    pub stall: Optional<Signal<In, Bit>>,
    pub counting: Optional<Signal<Out, Bit>>,
    running_q: DFF<Bit>,
    done_q: DFF<Bit>,
    fault_q: DFF<Bits<4>>,
    cycles_q: DFF<Bits<64>>,
    started: DFF<Bit>,
    halting: DFF<Bit>,
    shadow_full: DFF<Bit>,
    code_no_weights: Constant<Bits<4>>,
    all_free: Signal<Local, Bit>,
    shadow_ready: Signal<Local, Bit>,
    deciding: Signal<Local, Bit>,
    go_seq: Signal<Local, Bit>,
    go_wl: Signal<Local, Bit>,
    go_arr: Signal<Local, Bit>,
    go_halt: Signal<Local, Bit>,
    stop: Signal<Local, Bit>,
    stop_code: Signal<Local, Bits<4>>,
    dispatch: Signal<Local, Bit>,
}

impl Default for Dispatcher {
    fn default() -> Self {
        Dispatcher {
            ins: Default::default(),
            clock: Default::default(),
            run: Default::default(),
            reset: Default::default(),
            head_valid: Default::default(),
            head_word: Default::default(),
            fault_in: Default::default(),
            seq_free: Default::default(),
            wl_free: Default::default(),
            wl_finishing: Default::default(),
            arr_free: Default::default(),
            arr_reading: Default::default(),
            word: Default::default(),
            pop: Default::default(),
            fifo_clear: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start_seq: Default::default(),
            start_wl: Default::default(),
            start_arr: Default::default(),
            seq_may_start: Default::default(),
            running: Default::default(),
            done: Default::default(),
            fault: Default::default(),
            cycles: Default::default(),
            stall: Default::default(),
            counting: Default::default(),
            running_q: Default::default(),
            done_q: Default::default(),
            fault_q: Default::default(),
            cycles_q: Default::default(),
            started: Default::default(),
            halting: Default::default(),
            shadow_full: Default::default(),
            code_no_weights: constant(FaultCode::NoWeightsLoaded as u64),
            all_free: Default::default(),
            shadow_ready: Default::default(),
            deciding: Default::default(),
            go_seq: Default::default(),
            go_wl: Default::default(),
            go_arr: Default::default(),
            go_halt: Default::default(),
            stop: Default::default(),
            stop_code: Default::default(),
            dispatch: Default::default(),
        }
    }
}

impl Dispatcher {
    /// The dispatcher of a machine with a single-port scratchpad: `LoadWeights` also waits for
    /// the array's reads (`arr_reading`), `Matmul` for the weight loader.
    pub fn single_port_spad() -> Dispatcher {
        Dispatcher { arr_reading: Optional::default_when(true), ..Default::default() }
    }

    /// The same dispatcher, stalled by an SDRAM port and telling it when the run counts.
    pub fn with_sdram(self) -> Dispatcher {
        Dispatcher {
            stall: Optional::default_when(true),
            counting: Optional::default_when(true),
            ..self
        }
    }
}

impl Logic for Dispatcher {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            running_q,
            done_q,
            fault_q,
            cycles_q,
            started,
            halting,
            shadow_full
        );
        // Frozen: running, the program not over, and no candidate to decide on.
        self.enable.next =
            !(self.running_q.q.val() && !self.head_valid.val() && !self.halting.q.val());
        for _s in 0..self.stall.len() {
            if self.stall.val() {
                self.enable.next = false;
            }
            self.counting.next = self.running_q.q.val() && self.started.q.val();
        }
        self.all_free.next = self.seq_free.val() && self.wl_free.val() && self.arr_free.val();
        self.shadow_ready.next = self.shadow_full.q.val() || self.wl_finishing.val();
        // Decide whether the candidate dispatches in the next cycle (core's rules, cycle.rs).
        self.deciding.next =
            self.running_q.q.val() && self.head_valid.val() && !self.halting.q.val();
        self.go_seq.next = false;
        self.go_wl.next = false;
        self.go_arr.next = false;
        self.go_halt.next = false;
        self.stop.next = false;
        self.stop_code.next = self.fault_in.val();
        if self.deciding.val() {
            if self.fault_in.val().any() {
                self.stop.next = self.all_free.val();
            } else if self.ins.halt.val() {
                self.go_halt.next = self.all_free.val();
            } else if self.ins.load_weights.val() {
                self.go_wl.next = self.seq_free.val() && self.wl_free.val();
                for _s in 0..self.arr_reading.len() {
                    if self.arr_reading.val() {
                        self.go_wl.next = false;
                    }
                }
            } else if self.ins.matmul.val() {
                if self.seq_free.val() && self.arr_free.val() {
                    if !self.ins.swap.val() || self.shadow_ready.val() {
                        self.go_arr.next = true;
                    } else if self.wl_free.val() {
                        self.stop.next = true;
                        self.stop_code.next = self.code_no_weights.val();
                    }
                    for _s in 0..self.arr_reading.len() {
                        if !self.wl_free.val() {
                            self.go_arr.next = false;
                        }
                    }
                }
            } else if self.ins.matmul_os.val() {
                self.go_arr.next = self.seq_free.val() && self.arr_free.val();
            } else {
                self.go_seq.next = self.all_free.val();
            }
        }
        self.dispatch.next =
            self.go_seq.val() || self.go_wl.val() || self.go_arr.val() || self.go_halt.val();
        self.start_seq.next = self.go_seq.val();
        self.start_wl.next = self.go_wl.val();
        self.start_arr.next = self.go_arr.val();
        self.seq_may_start.next = self.deciding.val()
            && self.all_free.val()
            && !(self.ins.halt.val()
                || self.ins.load_weights.val()
                || self.ins.matmul.val()
                || self.ins.matmul_os.val());
        self.abort.next = self.reset.val();
        self.fifo_clear.next = false;
        self.pop.next = false;
        // Units, flags and the counter move only in enabled cycles.
        if self.enable.val() {
            self.shadow_full.d.next = self.shadow_ready.val();
            if self.go_wl.val()
                || (self.go_arr.val() && self.ins.matmul.val() && self.ins.swap.val())
            {
                self.shadow_full.d.next = false;
            }
            if self.dispatch.val() {
                // The candidate leaves the FIFO; its successor is the head in the next cycle.
                self.started.d.next = true;
                self.pop.next = true;
            }
            if self.go_halt.val() {
                self.halting.d.next = true;
            }
            if self.running_q.q.val() && self.started.q.val() {
                self.cycles_q.d.next = self.cycles_q.q.val() + 1;
            }
            if self.halting.q.val() {
                // Halt's own cycle is the last one counted.
                self.halting.d.next = false;
                self.running_q.d.next = false;
                self.done_q.d.next = true;
                self.fifo_clear.next = true;
            }
            if self.stop.val() {
                self.running_q.d.next = false;
                self.fault_q.d.next = self.stop_code.val();
                self.fifo_clear.next = true;
            }
        }
        if self.run.val() && !self.running_q.q.val() {
            self.running_q.d.next = true;
            self.done_q.d.next = false;
            self.fault_q.d.next = 0.into();
            self.cycles_q.d.next = 0.into();
            self.started.d.next = false;
            self.halting.d.next = false;
            // Every program starts with an empty shadow (core's timing model, and its machines).
            self.shadow_full.d.next = false;
        }
        if self.reset.val() {
            self.running_q.d.next = false;
            self.done_q.d.next = false;
            self.fault_q.d.next = 0.into();
            self.cycles_q.d.next = 0.into();
            self.started.d.next = false;
            self.halting.d.next = false;
            self.shadow_full.d.next = false;
            self.fifo_clear.next = true;
            self.pop.next = false;
        }
        self.word.next = self.head_word.val();
        self.running.next = self.running_q.q.val();
        self.done.next = self.done_q.q.val();
        self.fault.next = self.fault_q.q.val();
        self.cycles.next = self.cycles_q.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};

    fn word(v: u128) -> Bits<128> {
        v.to_bits()
    }

    /// Run with an empty FIFO freezes the machine without counting; a `Sync` then `Halt`
    /// count two cycles (`Halt`'s own included), however long the words took to arrive.
    #[test]
    fn the_dispatcher_freezes_on_an_empty_fifo_and_counts_program_cycles() {
        let mut d = Dispatcher::default();
        d.connect_all();
        d.seq_free.next = true;
        d.wl_free.next = true;
        d.arr_free.next = true;
        d.run.next = true;
        tick(&mut d, |d| &mut d.clock);
        d.run.next = false;
        for _ in 0..5 {
            tick(&mut d, |d| &mut d.clock);
            assert!(d.running.val() && !d.enable.val(), "frozen while the FIFO is empty");
        }
        assert_eq!(d.cycles.val().to_u64(), 0);
        // A word arrives (decoded elsewhere; here a sequencer op, then a halt).
        d.head_valid.next = true;
        d.head_word.next = word(9);
        crate::testing::settle(&mut d);
        assert_eq!(d.word.val(), word(9), "the FIFO's head is the candidate");
        assert!(d.enable.val() && d.start_seq.val(), "the sync dispatches into the next cycle");
        assert!(d.pop.val(), "and leaves the FIFO");
        tick(&mut d, |d| &mut d.clock);
        d.head_valid.next = false;
        crate::testing::settle(&mut d);
        assert!(!d.enable.val() && !d.pop.val(), "frozen: the sync's own cycle waits for a word");
        for _ in 0..3 {
            tick(&mut d, |d| &mut d.clock);
            assert!(!d.enable.val(), "frozen again, waiting for the halt");
        }
        assert_eq!(d.cycles.val().to_u64(), 0);
        d.head_valid.next = true;
        d.ins.halt.next = true;
        tick(&mut d, |d| &mut d.clock);
        d.head_valid.next = false;
        for _ in 0..3 {
            tick(&mut d, |d| &mut d.clock);
        }
        assert!(!d.running.val() && d.done.val());
        assert_eq!(d.cycles.val().to_u64(), 2, "sync, halt");
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("dispatcher", &verilog_of(Dispatcher::default())).unwrap();
    }
}
