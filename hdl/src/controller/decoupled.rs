//! The dispatcher of the decoupled schedule: in-order issue to four units that overlap unless
//! core's scoreboard finds a hazard (core/src/timing/decoupled.rs, module docs, has the rules;
//! this is them in registers). Run state, freezing, the cycle counter and faults are the
//! blocking [`super::Dispatcher`]'s.
//!
//! Like it, it decides one cycle ahead: in cycle `t - 1` whether the candidate dispatches in
//! `t`. What is in flight at `t` is known in `t - 1`: the load, weight and vector units say so
//! (`*_free`: idle at the start of the next cycle), and the array's matmuls, whose durations
//! are fixed at dispatch, count down in their slots (a count `n` in `t - 1` means in flight
//! until the end of `t - 2 + n`, so at `t` when `n >= 2`). Each unit's instruction in flight and
//! each slot keep their [`Footprint`], and the candidate's seven conflicts with them are
//! registered: formed in the cycle before, from the word the head register takes and what will
//! be in flight (the candidate itself where it dispatches), so the decision starts at flip-flops.
//!
//! The array's rules: a weight-stationary `Matmul` enters once the one before it has fed its
//! rows (`feed` counts them down) into a free slot of [`ARRAY_SLOTS`]; with `swap`, once a
//! weight load dispatched since the last swap (`pending`) has finished. A `LoadWeights` waits
//! until the last matmul of the bank it fills has left the array (one count per weight bank). A
//! `MatmulOs` waits for an empty array. `Sync` and `Halt` wait for nothing in flight.

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::protocol::FaultCode;
use systole_core::scoreboard::{ARRAY_SLOTS, WEIGHT_BANKS};
use systole_core::{ArrayConfig, Dataflow};

use super::footprint::{Conflict, Footprint};
use crate::decode::constant;
use crate::optional::Optional;

// The ring pointer and the bank numbers are two bits.
const _: () = assert!(ARRAY_SLOTS == 4 && WEIGHT_BANKS <= 4, "slots and banks outgrew two bits");

/// The decoupled dispatcher.
#[derive(LogicBlock)]
pub struct DecoupledDispatcher {
    pub clock: Signal<In, Clock>,
    pub run: Signal<In, Bit>,
    pub reset: Signal<In, Bit>,
    pub head_valid: Signal<In, Bit>,
    pub head_word: Signal<In, Bits<128>>,
    pub fault_in: Signal<In, Bits<4>>,
    /// The instruction, as decoded.
    pub ins: Decoded,
    pub fp: Signal<In, Footprint>,
    /// The footprint of the word the head register takes in this cycle (the FIFO's head), and
    /// whether it takes it: the candidate's conflicts are formed from them a cycle ahead.
    pub next_fp: Signal<In, Footprint>,
    pub take: Signal<In, Bit>,
    /// The weight bank the newest matmul uses (the stream unit's; 0 output-stationary).
    pub active: Signal<In, Bits<2>>,
    pub load_free: Signal<In, Bit>,
    pub vector_free: Signal<In, Bit>,
    pub wl_free: Signal<In, Bit>,
    pub word: Signal<Out, Bits<128>>,
    pub pop: Signal<Out, Bit>,
    pub fifo_clear: Signal<Out, Bit>,
    /// Global clock enable: low while frozen.
    pub enable: Signal<Out, Bit>,
    pub abort: Signal<Out, Bit>,
    pub start_load: Signal<Out, Bit>,
    pub start_vector: Signal<Out, Bit>,
    pub start_wl: Signal<Out, Bit>,
    pub start_arr: Signal<Out, Bit>,
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
    /// A weight load dispatched since the last swap.
    pending: DFF<Bit>,
    fp_load: DFF<Footprint>,
    fp_wl: DFF<Footprint>,
    fp_vector: DFF<Footprint>,
    /// The array's matmuls: footprint and cycles left in flight, a ring.
    slot_fp: Vec<DFF<Footprint>>,
    slot_left: Vec<DFF<Bits<18>>>,
    slot_next: DFF<Bits<2>>,
    /// Cycles left until the next matmul may enter, and until each bank's last matmul has left.
    feed: DFF<Bits<18>>,
    bank_left: Vec<DFF<Bits<18>>>,
    /// The next candidate (`next_fp`) against the load, weight and vector units' and each
    /// slot's footprint, and against the candidate, which is in flight once it dispatches.
    checks: Vec<Conflict>,
    ahead: Conflict,
    /// The candidate's conflict with each footprint in `checks`' order, registered: always
    /// `Conflict(fp, ...)` of the registers as they are while the candidate is valid, so the
    /// dispatch decision starts at flip-flops, not at the comparators (docs/DECISIONS.md 105).
    conflict_q: Vec<DFF<Bit>>,
    weight_stationary: Constant<Bit>,
    /// `timing::ws_latency`: `R + C - 1`, one more on two-stage PEs.
    skew: Constant<Bits<18>>,
    code_no_weights: Constant<Bits<4>>,
    last_bank: Constant<Bits<2>>,
    is_load: Signal<Local, Bit>,
    is_vector: Signal<Local, Bit>,
    is_array: Signal<Local, Bit>,
    load_busy: Signal<Local, Bit>,
    vector_busy: Signal<Local, Bit>,
    wl_busy: Signal<Local, Bit>,
    array_busy: Signal<Local, Bit>,
    all_idle: Signal<Local, Bit>,
    hazard: Signal<Local, Bit>,
    slot_free: Signal<Local, Bit>,
    shadow_bank_free: Signal<Local, Bit>,
    duration: Signal<Local, Bits<18>>,
    /// The bank a dispatching matmul uses, and the one a weight load fills.
    bank: Signal<Local, Bits<2>>,
    shadow: Signal<Local, Bits<2>>,
    deciding: Signal<Local, Bit>,
    go_load: Signal<Local, Bit>,
    go_vector: Signal<Local, Bit>,
    go_wl: Signal<Local, Bit>,
    go_arr: Signal<Local, Bit>,
    go_sync: Signal<Local, Bit>,
    go_halt: Signal<Local, Bit>,
    stop: Signal<Local, Bit>,
    stop_code: Signal<Local, Bits<4>>,
    dispatch: Signal<Local, Bit>,
}

impl DecoupledDispatcher {
    pub fn new(config: &ArrayConfig) -> DecoupledDispatcher {
        DecoupledDispatcher {
            ins: Default::default(),
            clock: Default::default(),
            run: Default::default(),
            reset: Default::default(),
            head_valid: Default::default(),
            head_word: Default::default(),
            fault_in: Default::default(),
            fp: Default::default(),
            next_fp: Default::default(),
            take: Default::default(),
            active: Default::default(),
            load_free: Default::default(),
            vector_free: Default::default(),
            wl_free: Default::default(),
            word: Default::default(),
            pop: Default::default(),
            fifo_clear: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start_load: Default::default(),
            start_vector: Default::default(),
            start_wl: Default::default(),
            start_arr: Default::default(),
            running: Default::default(),
            done: Default::default(),
            fault: Default::default(),
            cycles: Default::default(),
            stall: Optional::default_when(config.dram_port == systole_core::DramPort::Sdram),
            counting: Optional::default_when(config.dram_port == systole_core::DramPort::Sdram),
            running_q: Default::default(),
            done_q: Default::default(),
            fault_q: Default::default(),
            cycles_q: Default::default(),
            started: Default::default(),
            halting: Default::default(),
            pending: Default::default(),
            fp_load: Default::default(),
            fp_wl: Default::default(),
            fp_vector: Default::default(),
            slot_fp: (0..ARRAY_SLOTS).map(|_| Default::default()).collect(),
            slot_left: (0..ARRAY_SLOTS).map(|_| Default::default()).collect(),
            slot_next: Default::default(),
            feed: Default::default(),
            bank_left: (0..WEIGHT_BANKS).map(|_| Default::default()).collect(),
            checks: (0..3 + ARRAY_SLOTS).map(|_| Conflict::new(config)).collect(),
            ahead: Conflict::new(config),
            conflict_q: (0..3 + ARRAY_SLOTS).map(|_| Default::default()).collect(),
            weight_stationary: Constant::new(config.dataflow == Dataflow::WeightStationary),
            skew: constant(systole_core::timing::ws_latency(config)),
            code_no_weights: constant(FaultCode::NoWeightsLoaded as u64),
            last_bank: constant(WEIGHT_BANKS as u64 - 1),
            is_load: Default::default(),
            is_vector: Default::default(),
            is_array: Default::default(),
            load_busy: Default::default(),
            vector_busy: Default::default(),
            wl_busy: Default::default(),
            array_busy: Default::default(),
            all_idle: Default::default(),
            hazard: Default::default(),
            slot_free: Default::default(),
            shadow_bank_free: Default::default(),
            duration: Default::default(),
            bank: Default::default(),
            shadow: Default::default(),
            deciding: Default::default(),
            go_load: Default::default(),
            go_vector: Default::default(),
            go_wl: Default::default(),
            go_arr: Default::default(),
            go_sync: Default::default(),
            go_halt: Default::default(),
            stop: Default::default(),
            stop_code: Default::default(),
            dispatch: Default::default(),
        }
    }
}

impl Logic for DecoupledDispatcher {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, running_q, done_q, fault_q, cycles_q, started, halting, pending, fp_load,
            fp_wl, fp_vector, slot_next, feed
        );
        for s in 0..self.slot_fp.len() {
            self.slot_fp[s].clock.next = self.clock.val();
            self.slot_fp[s].d.next = self.slot_fp[s].q.val();
            self.slot_left[s].clock.next = self.clock.val();
            self.slot_left[s].d.next = self.slot_left[s].q.val();
        }
        for b in 0..self.bank_left.len() {
            self.bank_left[b].clock.next = self.clock.val();
            self.bank_left[b].d.next = self.bank_left[b].q.val();
        }
        self.enable.next =
            !(self.running_q.q.val() && !self.head_valid.val() && !self.halting.q.val());
        for _s in 0..self.stall.len() {
            if self.stall.val() {
                self.enable.next = false;
            }
            self.counting.next = self.running_q.q.val() && self.started.q.val();
        }
        // The candidate's unit, and what is in flight in the next cycle.
        self.is_load.next = self.ins.load.val() || self.ins.load_acc.val();
        self.is_vector.next = self.ins.vector.val()
            || self.ins.cast_bf16.val()
            || self.ins.requantize.val()
            || self.ins.store.val()
            || self.ins.store_spad.val()
            || self.ins.store_bf16.val();
        self.is_array.next = self.ins.matmul.val() || self.ins.matmul_os.val();
        self.load_busy.next = !self.load_free.val();
        self.vector_busy.next = !self.vector_free.val();
        self.wl_busy.next = !self.wl_free.val();
        self.checks[0].b.next = self.fp_load.q.val();
        self.checks[1].b.next = self.fp_wl.q.val();
        self.checks[2].b.next = self.fp_vector.q.val();
        self.hazard.next = (!self.is_load.val()
            && self.load_busy.val()
            && self.conflict_q[0].q.val())
            || (!self.ins.load_weights.val() && self.wl_busy.val() && self.conflict_q[1].q.val())
            || (!self.is_vector.val() && self.vector_busy.val() && self.conflict_q[2].q.val());
        self.array_busy.next = false;
        self.slot_free.next = false;
        for s in 0..self.slot_fp.len() {
            self.checks[s + 3].b.next = self.slot_fp[s].q.val();
            if self.slot_left[s].q.val() > 1 {
                self.array_busy.next = true;
                if !self.is_array.val() && self.conflict_q[s + 3].q.val() {
                    self.hazard.next = true;
                }
            } else if self.slot_next.q.val() == s.to_bits() {
                self.slot_free.next = true;
            }
        }
        // The conflicts of the next cycle's candidate: the word taken against what will be in
        // flight (a footprint the candidate replaces if it dispatches, else the one there), or
        // held while no word is taken. After a dispatch with no word taken the register holds
        // no valid candidate, and the word that comes is taken first.
        self.ahead.a.next = self.next_fp.val();
        self.ahead.b.next = self.fp.val();
        for c in 0..self.checks.len() {
            self.checks[c].a.next = self.next_fp.val();
            self.conflict_q[c].clock.next = self.clock.val();
            self.conflict_q[c].d.next = self.conflict_q[c].q.val();
            if self.take.val() {
                self.conflict_q[c].d.next = self.checks[c].conflict.val();
            }
        }
        self.all_idle.next = !self.load_busy.val()
            && !self.vector_busy.val()
            && !self.wl_busy.val()
            && !self.array_busy.val();
        // The bank a swap makes active, and the one after the active bank (the shadow).
        self.shadow.next = self.active.val() + 1;
        if self.active.val() == self.last_bank.val() {
            self.shadow.next = 0.into();
        }
        self.bank.next = self.active.val();
        if self.ins.swap.val() {
            self.bank.next = self.shadow.val();
        }
        self.shadow_bank_free.next = true;
        for b in 0..self.bank_left.len() {
            if (self.shadow.val() == b.to_bits()) && (self.bank_left[b].q.val() > 1) {
                self.shadow_bank_free.next = false;
            }
        }
        self.duration.next = bit_cast::<18, 16>(self.ins.rows.val()) + self.skew.val();
        if self.ins.matmul_os.val() {
            self.duration.next = bit_cast::<18, 16>(self.ins.rows.val())
                + bit_cast::<18, 16>(self.ins.k.val())
                + self.skew.val()
                - 1;
        }
        // Decide whether the candidate dispatches in the next cycle.
        self.deciding.next =
            self.running_q.q.val() && self.head_valid.val() && !self.halting.q.val();
        self.go_load.next = false;
        self.go_vector.next = false;
        self.go_wl.next = false;
        self.go_arr.next = false;
        self.go_sync.next = false;
        self.go_halt.next = false;
        self.stop.next = false;
        self.stop_code.next = self.fault_in.val();
        if self.deciding.val() {
            if self.fault_in.val().any() {
                self.stop.next = self.all_idle.val();
            } else if self.ins.halt.val() {
                self.go_halt.next = self.all_idle.val();
            } else if self.is_load.val() {
                self.go_load.next = !self.hazard.val() && !self.load_busy.val();
            } else if self.is_vector.val() {
                self.go_vector.next = !self.hazard.val() && !self.vector_busy.val();
            } else if self.ins.load_weights.val() {
                self.go_wl.next =
                    !self.hazard.val() && !self.wl_busy.val() && self.shadow_bank_free.val();
            } else if self.ins.matmul.val() {
                if !self.hazard.val() && (self.feed.q.val() < 2) && self.slot_free.val() {
                    if !self.ins.swap.val() || (self.pending.q.val() && !self.wl_busy.val()) {
                        self.go_arr.next = true;
                    } else if !self.pending.q.val() {
                        // Swapping with no weight load since the last swap: core's fault, once
                        // every unit is idle.
                        self.stop_code.next = self.code_no_weights.val();
                        self.stop.next = self.all_idle.val();
                    }
                }
            } else if self.ins.matmul_os.val() {
                self.go_arr.next = !self.hazard.val() && !self.array_busy.val();
            } else {
                self.go_sync.next = self.all_idle.val();
            }
        }
        self.dispatch.next = self.go_load.val()
            || self.go_vector.val()
            || self.go_wl.val()
            || self.go_arr.val()
            || self.go_sync.val()
            || self.go_halt.val();
        self.start_load.next = self.go_load.val();
        self.start_vector.next = self.go_vector.val();
        self.start_wl.next = self.go_wl.val();
        self.start_arr.next = self.go_arr.val();
        self.abort.next = self.reset.val();
        self.fifo_clear.next = false;
        self.pop.next = false;
        if self.enable.val() {
            // Counts move down a cycle.
            for s in 0..self.slot_left.len() {
                if self.slot_left[s].q.val().any() {
                    self.slot_left[s].d.next = self.slot_left[s].q.val() - 1;
                }
            }
            for b in 0..self.bank_left.len() {
                if self.bank_left[b].q.val().any() {
                    self.bank_left[b].d.next = self.bank_left[b].q.val() - 1;
                }
            }
            if self.feed.q.val().any() {
                self.feed.d.next = self.feed.q.val() - 1;
            }
            if self.go_load.val() {
                self.fp_load.d.next = self.fp.val();
                self.conflict_q[0].d.next = self.ahead.conflict.val();
            }
            if self.go_wl.val() {
                self.fp_wl.d.next = self.fp.val();
                self.conflict_q[1].d.next = self.ahead.conflict.val();
                self.pending.d.next = true;
            }
            if self.go_vector.val() {
                self.fp_vector.d.next = self.fp.val();
                self.conflict_q[2].d.next = self.ahead.conflict.val();
            }
            if self.go_arr.val() {
                for s in 0..self.slot_fp.len() {
                    if self.slot_next.q.val() == s.to_bits() {
                        self.slot_fp[s].d.next = self.fp.val();
                        self.conflict_q[s + 3].d.next = self.ahead.conflict.val();
                        self.slot_left[s].d.next = self.duration.val();
                    }
                }
                self.slot_next.d.next = self.slot_next.q.val() + 1;
                self.feed.d.next = self.duration.val();
                if self.weight_stationary.val() {
                    self.feed.d.next = bit_cast::<18, 16>(self.ins.rows.val());
                    for b in 0..self.bank_left.len() {
                        if self.bank.val() == b.to_bits() {
                            self.bank_left[b].d.next = self.duration.val();
                        }
                    }
                    if self.ins.swap.val() {
                        self.pending.d.next = false;
                    }
                }
            }
            if self.dispatch.val() {
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
            // Every program starts with an empty shadow.
            self.pending.d.next = false;
        }
        if self.reset.val() {
            self.running_q.d.next = false;
            self.done_q.d.next = false;
            self.fault_q.d.next = 0.into();
            self.cycles_q.d.next = 0.into();
            self.started.d.next = false;
            self.halting.d.next = false;
            self.pending.d.next = false;
            self.feed.d.next = 0.into();
            for s in 0..self.slot_left.len() {
                self.slot_left[s].d.next = 0.into();
            }
            for b in 0..self.bank_left.len() {
                self.bank_left[b].d.next = 0.into();
            }
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
    use crate::controller::footprint::tests::end_of;
    use crate::controller::FootprintOf;
    use crate::decode::Decoder;
    use crate::decoded::DecodedOut;
    use crate::testing::{settle, tick, verilog_of};
    use systole_core::check::{random_program, SplitMix};
    use systole_core::isa::{encode, Instruction};
    use systole_core::scoreboard::{next_bank, unit, Unit};
    use systole_core::timing::{duration, schedule};
    use systole_core::{Dtype, Schedule};

    /// The dispatcher with the decoder and footprint of its candidate, and three units that are
    /// busy exactly core's duration: what it decides, apart from the datapath.
    struct Bench {
        config: ArrayConfig,
        d: DecoupledDispatcher,
        /// Cycles each unit (load, weights, vector) is still busy, counting the current one.
        left: [u64; 3],
        active: usize,
    }

    fn slot(u: Unit) -> usize {
        match u {
            Unit::Load => 0,
            Unit::Weights => 1,
            _ => 2,
        }
    }

    impl Bench {
        fn new(config: &ArrayConfig) -> Bench {
            let mut d = DecoupledDispatcher::new(config);
            d.connect_all();
            Bench { config: *config, d, left: [0; 3], active: 0 }
        }

        /// `ins` (or nothing) decoded.
        fn decoded(ins: Option<&Instruction>) -> Decoder {
            let mut dec = Decoder::default();
            dec.connect_all();
            dec.word.next = ins.map_or(0, |i| encode(i).unwrap().0).to_bits();
            settle(&mut dec);
            dec
        }

        /// The footprint of `ins` (or of nothing).
        fn footprint(&self, ins: Option<&Instruction>) -> Footprint {
            let mut dec = Bench::decoded(ins);
            let mut f = FootprintOf::new(&self.config);
            f.connect_all();
            DecodedOut::join(&mut dec.out, &mut f.ins);
            f.dram_end.next = ins.map_or(0, |i| end_of(&self.config, i)).into();
            settle(&mut f);
            f.fp.val()
        }

        /// Presents `ins` as the head register's word (or nothing) and `next` as the FIFO's
        /// head behind it, and settles the candidate's signals; the head register takes `next`
        /// when the candidate leaves.
        fn present(&mut self, ins: Option<&Instruction>, next: Option<&Instruction>) {
            let (fp, next_fp) = (self.footprint(ins), self.footprint(next));
            let d = &mut self.d;
            d.head_valid.next = ins.is_some();
            let mut dec = Bench::decoded(ins);
            DecodedOut::join(&mut dec.out, &mut d.ins);
            d.head_word.next = dec.word.val();
            d.fp.next = fp;
            d.next_fp.next = next_fp;
            d.take.next = false;
            d.active.next = (self.active as u64).into();
            d.load_free.next = self.left[0] <= 1;
            d.wl_free.next = self.left[1] <= 1;
            d.vector_free.next = self.left[2] <= 1;
            settle(d);
            d.take.next = d.pop.val() && next.is_some();
            settle(d);
        }

        /// Runs a valid program: each instruction's dispatch cycle, counted from the first, or
        /// the index of the faulting one; and the cycles the dispatcher counted.
        fn run(&mut self, program: &[Instruction]) -> (Result<Vec<u64>, usize>, u64) {
            // The first word enters the head register as the program starts.
            self.d.run.next = true;
            self.d.next_fp.next = self.footprint(program.first());
            self.d.take.next = true;
            tick(&mut self.d, |d| &mut d.clock);
            self.d.run.next = false;
            let (mut pc, mut at, mut t) = (0usize, vec![], 0u64);
            let mut first = None;
            while self.d.running.val() {
                self.present(program.get(pc), program.get(pc + 1));
                if self.d.pop.val() {
                    let ins = program[pc];
                    let start = *first.get_or_insert(t + 1);
                    at.push(t + 1 - start);
                    if let Some(u) = unit(&ins).filter(|&u| u != Unit::Array) {
                        self.left[slot(u)] = duration(&self.config, &ins) + 1;
                    }
                    if let Instruction::Matmul { swap: true, .. } = ins {
                        self.active = next_bank(self.active);
                    }
                    pc += 1;
                }
                tick(&mut self.d, |d| &mut d.clock);
                for l in &mut self.left {
                    *l = l.saturating_sub(1);
                }
                t += 1;
                assert!(t < 100_000, "the program never finished");
            }
            let cycles = self.d.cycles.val().to_u64();
            if self.d.fault.val().any() {
                assert_eq!(self.d.fault.val().index() as u8, FaultCode::NoWeightsLoaded as u8);
                return (Err(pc), cycles);
            }
            (Ok(at), cycles)
        }
    }

    /// Random valid programs dispatch in the cycles core's decoupled timing model gives, count
    /// its cycles, and fault where it faults (a swap with no weights loaded).
    #[test]
    fn dispatches_are_cores() {
        let mut rng = SplitMix(17);
        let mut faults = 0;
        for (r, c, dtype, dataflow, acc) in [
            (2, 3, Dtype::Int8, Dataflow::WeightStationary, 9),
            (3, 2, Dtype::Bf16, Dataflow::WeightStationary, 12),
            (2, 6, Dtype::Int8, Dataflow::WeightStationary, 10),
            (2, 2, Dtype::Bf16, Dataflow::OutputStationary, 11),
        ] {
            let config =
                ArrayConfig { spad_depth: 24, acc_depth: acc, ..ArrayConfig::new(r, c, dtype) }
                    .with_dataflow(dataflow)
                    .with_schedule(Schedule::Decoupled);
            let mut bench = Bench::new(&config);
            // Weight loads into every bank while the matmuls of the others stream.
            let mut rotation = vec![];
            if dataflow == Dataflow::WeightStationary {
                for i in 0..5u16 {
                    let lw = Instruction::LoadWeights { spad_row: i, rows: r, cols: c };
                    let (a_row, acc_row) = (8 + i, 2 * (i % 2));
                    let swap = true;
                    let mm =
                        Instruction::Matmul { a_row, acc_row, rows: 1, swap, accumulate: false };
                    rotation.extend([lw, mm]);
                }
                rotation.push(Instruction::Halt);
            }
            let programs = (0..25).map(|_| random_program(&config, 256, &mut rng));
            for program in std::iter::once(rotation).filter(|p| !p.is_empty()).chain(programs) {
                let mut want = vec![];
                let total = schedule(&config, &program, |_, at| want.push(at));
                let (got, cycles) = bench.run(&program);
                match total {
                    Ok(total) => {
                        assert_eq!(got, Ok(want), "{program:?} on {config:?}");
                        assert_eq!(cycles, total, "{program:?}");
                    }
                    Err((index, _)) => {
                        assert_eq!(got, Err(index), "{program:?} on {config:?}");
                        faults += 1;
                    }
                }
            }
        }
        assert!(faults > 0, "no program faulted");
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(3, 2, Dtype::Int8).with_schedule(Schedule::Decoupled);
        yosys_validate("decoupled", &verilog_of(DecoupledDispatcher::new(&config))).unwrap();
    }
}
