//! [`super::schedule`] under [`Schedule::Decoupled`](crate::config::Schedule): in-order issue to
//! four units that overlap under the hazard rules of [`crate::scoreboard`].
//!
//! An instruction dispatches in the first cycle, after the one before it dispatched, in which
//!
//! * its unit is free: the load, weight and vector units run one instruction at a time; a
//!   weight-stationary `Matmul` enters the array once the one before it has entered (its rows fed),
//!   while that one drains, with at most [`ARRAY_SLOTS`] in the array; a `MatmulOs` waits for an
//!   empty array;
//! * no instruction in flight on another unit [`conflicts`] with it (an instruction is in flight
//!   from its dispatch to its last cycle, `duration` cycles);
//! * for `LoadWeights`: the shadow bank's last matmul has left the array (the weight banks,
//!   `WEIGHT_BANKS` of them, take turns at each swap, and a matmul's rows carry their bank down
//!   the array); for `Matmul { swap }`: the shadow is full;
//! * for `Sync` and `Halt`: nothing is in flight.
//!
//! A DRAM transfer on an SDRAM machine is in flight for the cycles its words take from its
//! dispatch (`super::sdram`); every other instruction for its `duration`.

use crate::config::{ArrayConfig, Dataflow};
use crate::fault::ExecErrorKind;
use crate::isa::Instruction;
use crate::scoreboard::{
    conflicts, footprint, next_bank, unit, Footprint, Unit, ARRAY_SLOTS, WEIGHT_BANKS,
};

use super::sdram::SdramBus;
use super::{duration, duration_at};

#[derive(Clone, Copy)]
struct InFlight {
    fp: Footprint,
    /// First cycle it is no longer in flight.
    done: u64,
}

/// The decoupled timing model fed one instruction at a time, so a program need not be stored.
#[derive(Clone)]
pub struct Scheduler {
    config: ArrayConfig,
    streams: bool,
    /// First cycle the next instruction may dispatch in.
    next: u64,
    /// First cycle nothing dispatched so far is in flight.
    all_done: u64,
    /// The latest instruction of the load, weight and vector units; earlier ones finished
    /// before it started.
    last: [Option<InFlight>; 3],
    /// The array's latest matmuls, a ring: the one `ARRAY_SLOTS` back left before the newest
    /// entered.
    array: [Option<InFlight>; ARRAY_SLOTS],
    array_next: usize,
    /// First cycle a new matmul's rows may enter the array.
    feed_free: u64,
    shadow_full_at: Option<u64>,
    /// First cycle the last matmul of each weight bank has left the array.
    bank_done: [u64; WEIGHT_BANKS],
    active: usize,
    /// The SDRAM that times DRAM transfers on an SDRAM machine (`super::sdram`).
    sdram: Option<SdramBus>,
}

const fn slot(u: Unit) -> usize {
    match u {
        Unit::Load => 0,
        Unit::Weights => 1,
        _ => 2,
    }
}

impl Scheduler {
    /// A scheduler for a program that starts with every unit idle and an empty shadow.
    pub fn new(config: &ArrayConfig) -> Scheduler {
        Scheduler {
            config: *config,
            streams: config.dataflow == Dataflow::WeightStationary,
            next: 0,
            all_done: 0,
            last: [None; 3],
            array: [None; ARRAY_SLOTS],
            array_next: 0,
            feed_free: 0,
            shadow_full_at: None,
            bank_done: [0; WEIGHT_BANKS],
            active: 0,
            sdram: SdramBus::of(config),
        }
    }

    /// Dispatches the next instruction of a valid program; returns its dispatch cycle (for
    /// `Halt`, the program's last cycle), or the fault the cycle machine reports.
    pub fn push(&mut self, ins: &Instruction) -> Result<u64, ExecErrorKind> {
        let Some(my_unit) = unit(ins) else {
            let at = self.next.max(self.all_done);
            self.next = at + 1;
            return Ok(at);
        };
        let fp = footprint(&self.config, ins);
        // Earliest cycle for the hazards with other units.
        let mut at = self.next;
        for (u, entry) in [Unit::Load, Unit::Weights, Unit::Vector].into_iter().zip(self.last) {
            if let Some(e) = entry.filter(|e| u != my_unit && conflicts(&fp, &e.fp)) {
                at = at.max(e.done);
            }
        }
        if my_unit != Unit::Array {
            for e in self.array.iter().flatten().filter(|e| conflicts(&fp, &e.fp)) {
                at = at.max(e.done);
            }
        }
        let dur = duration(&self.config, ins);
        match (my_unit, *ins) {
            (Unit::Array, Instruction::Matmul { rows, swap, .. }) if self.streams => {
                at = at.max(self.feed_free);
                if let Some(old) = self.array[self.array_next] {
                    at = at.max(old.done);
                }
                if swap {
                    at = at.max(self.shadow_full_at.ok_or(ExecErrorKind::NoWeightsLoaded)?);
                    self.shadow_full_at = None;
                    self.active = next_bank(self.active);
                }
                self.feed_free = at + rows as u64;
                self.bank_done[self.active] = at + dur;
            }
            (Unit::Array, _) => {
                for e in self.array.iter().flatten() {
                    at = at.max(e.done);
                }
                self.feed_free = at + dur;
            }
            (Unit::Weights, _) => {
                let free = self.last[slot(Unit::Weights)].map_or(0, |e| e.done);
                at = at.max(free).max(self.bank_done[next_bank(self.active)]);
                self.shadow_full_at = Some(at + dur);
            }
            (u, _) => at = at.max(self.last[slot(u)].map_or(0, |e| e.done)),
        }
        // A transfer on the SDRAM takes what its words take from the cycle it dispatches.
        let dur = match self.sdram.as_mut() {
            Some(bus) => duration_at(&self.config, ins, at, Some(bus), |_, _| {}),
            None => dur,
        };
        let entry = Some(InFlight { fp, done: at + dur });
        if my_unit == Unit::Array {
            self.array[self.array_next] = entry;
            self.array_next = (self.array_next + 1) % ARRAY_SLOTS;
        } else {
            self.last[slot(my_unit)] = entry;
        }
        self.all_done = self.all_done.max(at + dur);
        self.next = at + 1;
        Ok(at)
    }
}
