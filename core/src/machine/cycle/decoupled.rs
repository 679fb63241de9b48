//! The cycle machine under [`Schedule::Decoupled`](crate::config::Schedule): one instruction
//! considered per cycle, in program order, dispatched by the rules in `timing::decoupled`'s docs.
//! Each unit holds its own instructions in flight; the hazards are `scoreboard::conflicts`.

use super::{unreachable_halt, CycleMachine, RowOp, WeightLoad};
use crate::config::Dataflow;
use crate::fault::ExecErrorKind;
use crate::isa::Instruction;
use crate::machine::{MachineError, Stats};
use crate::numerics::Arith;
use crate::scoreboard::{conflicts, footprint, next_bank, unit, Footprint, Unit, ARRAY_SLOTS};
use crate::timing::sdram::SdramBus;

impl<A: Arith> CycleMachine<A> {
    pub(super) fn run_decoupled(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        let config = self.mem.config;
        let mut stats = Stats { cycles: Some(0), array_cycles: Some(0), ..Stats::default() };
        let mut load: Option<RowOp> = None;
        let mut vector: Option<RowOp> = None;
        let mut wl: Option<WeightLoad> = None;
        let mut fault: Option<MachineError> = None;
        let mut pc = 0usize;
        let mut t: u64 = 0;
        // The SDRAM from the run's first cycle (`timing::sdram`), on an SDRAM machine.
        let mut sdram = SdramBus::of(&config);
        loop {
            let idle =
                load.is_none() && vector.is_none() && wl.is_none() && self.array_ops.is_empty();
            match (fault, program.get(pc)) {
                (Some(e), _) => {
                    if idle {
                        return Err(e);
                    }
                }
                (None, None) => unreachable_halt(),
                (None, Some(&ins)) => {
                    let go = match unit(&ins) {
                        None if ins == Instruction::Halt => {
                            if idle {
                                stats.instructions += 1;
                                stats.cycles = Some(t + 1);
                                return Ok(stats);
                            }
                            false
                        }
                        None => idle,
                        Some(my_unit) => {
                            let fp = footprint(&config, &ins);
                            // Hazards with what other units have in flight.
                            let others: [(Unit, Option<&Footprint>); 3] = [
                                (Unit::Load, load.as_ref().map(|op| &op.fp)),
                                (Unit::Vector, vector.as_ref().map(|op| &op.fp)),
                                (Unit::Weights, wl.as_ref().map(|op| &op.fp)),
                            ];
                            let blocked = others.iter().any(|(u, other)| {
                                *u != my_unit && other.is_some_and(|o| conflicts(&fp, o))
                            }) || (my_unit != Unit::Array
                                && self.array_ops.iter().any(|op| conflicts(&fp, &op.fp)));
                            if blocked {
                                false
                            } else {
                                match my_unit {
                                    Unit::Load => load.is_none(),
                                    Unit::Vector => vector.is_none(),
                                    Unit::Weights => {
                                        let shadow = next_bank(self.active) as u8;
                                        wl.is_none()
                                            && !self.array_ops.iter().any(|op| op.bank == shadow)
                                    }
                                    Unit::Array => {
                                        match self.array_accepts(&ins, t, wl.is_none(), pc) {
                                            Ok(go) => go,
                                            Err(e) => {
                                                fault = Some(e);
                                                false
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    };
                    if go {
                        match unit(&ins) {
                            Some(Unit::Load) => {
                                load = Some(RowOp::new(&config, ins, sdram.as_mut(), t))
                            }
                            Some(Unit::Vector) => {
                                vector = Some(RowOp::new(&config, ins, sdram.as_mut(), t))
                            }
                            Some(Unit::Weights) => wl = Some(self.start_weight_load(ins)),
                            Some(Unit::Array) => stats.macs += self.start_array_op(ins, t),
                            None => {} // Sync: everything is idle already.
                        }
                        stats.instructions += 1;
                        pc += 1;
                    }
                }
            }
            // Every unit does one cycle of work.
            if load.as_mut().is_some_and(|op| op.step::<A>(&mut self.mem)) {
                load = None;
            }
            if vector.as_mut().is_some_and(|op| op.step::<A>(&mut self.mem)) {
                vector = None;
            }
            self.step_loader_and_array(&mut wl, &mut stats, t);
            t += 1;
        }
    }

    /// Whether the array takes `ins` in cycle `t`: a weight-stationary matmul enters once the
    /// one before it has fed its rows, with a free slot and (for a swap) a full shadow; an
    /// output-stationary one needs an empty array. A swap with no load pending or running is
    /// the fault it returns.
    fn array_accepts(
        &self,
        ins: &Instruction,
        t: u64,
        loader_idle: bool,
        pc: usize,
    ) -> Result<bool, MachineError> {
        if self.mem.config.dataflow == Dataflow::OutputStationary {
            return Ok(self.array_ops.is_empty());
        }
        let feeding = self.array_ops.iter().any(|op| op.row_at(t).is_some());
        if feeding || self.array_ops.len() >= ARRAY_SLOTS {
            return Ok(false);
        }
        match *ins {
            Instruction::Matmul { swap: true, .. } if !self.shadow_full => {
                if loader_idle {
                    return Err(MachineError::Exec {
                        index: pc,
                        kind: ExecErrorKind::NoWeightsLoaded,
                    });
                }
                Ok(false)
            }
            _ => Ok(true),
        }
    }
}
