//! The cycle machine under [`Schedule::Blocking`](crate::config::Schedule): the timing rules in
//! the module docs of `machine::cycle`.

use super::{unreachable_halt, CycleMachine, RowOp, WeightLoad};
use crate::fault::ExecErrorKind;
use crate::isa::Instruction;
use crate::machine::{MachineError, Stats};
use crate::numerics::Arith;
use crate::timing::sdram::SdramBus;

impl<A: Arith> CycleMachine<A> {
    pub(super) fn run_blocking(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        let mut stats = Stats { cycles: Some(0), array_cycles: Some(0), ..Stats::default() };
        let mut seq: Option<RowOp> = None;
        let mut wl: Option<WeightLoad> = None;
        let mut fault: Option<MachineError> = None;
        let mut pc = 0usize;
        let mut t: u64 = 0;
        // The SDRAM from the run's first cycle (`timing::sdram`), on an SDRAM machine.
        let config = self.mem.config;
        let mut sdram = SdramBus::of(&config);
        loop {
            let array_idle = self.array_ops.is_empty();
            let idle = seq.is_none() && wl.is_none() && array_idle;
            // On a single-port scratchpad the weight loader and the array take turns on its
            // port: the loader waits for the array's reads, the array for the loader.
            let single = self.mem.config.single_port_spad;
            let array_reading = single && self.array_ops.iter().any(|op| op.reads_port_at(t));
            // Dispatch at most one instruction.
            match (fault, program.get(pc)) {
                (Some(e), _) => {
                    if idle {
                        return Err(e);
                    }
                }
                (None, None) => unreachable_halt(),
                (None, Some(&ins)) => {
                    let mut go = false;
                    match ins {
                        Instruction::Halt => {
                            if idle {
                                stats.instructions += 1;
                                stats.cycles = Some(t + 1);
                                return Ok(stats);
                            }
                        }
                        Instruction::LoadWeights { .. } => {
                            if seq.is_none() && wl.is_none() && !array_reading {
                                wl = Some(self.start_weight_load(ins));
                                go = true;
                            }
                        }
                        Instruction::Matmul { swap, .. } => {
                            if seq.is_none() && array_idle && (wl.is_none() || !single) {
                                if !swap || self.shadow_full {
                                    stats.macs += self.start_array_op(ins, t);
                                    go = true;
                                } else if wl.is_none() {
                                    fault = Some(MachineError::Exec {
                                        index: pc,
                                        kind: ExecErrorKind::NoWeightsLoaded,
                                    });
                                }
                            }
                        }
                        Instruction::MatmulOs { .. } => {
                            if seq.is_none() && array_idle {
                                stats.macs += self.start_array_op(ins, t);
                                go = true;
                            }
                        }
                        _ => {
                            if idle {
                                seq = Some(RowOp::new(&config, ins, sdram.as_mut(), t));
                                go = true;
                            }
                        }
                    }
                    if go {
                        stats.instructions += 1;
                        pc += 1;
                    }
                }
            }
            // Every unit does one cycle of work.
            if seq.as_mut().is_some_and(|op| op.step::<A>(&mut self.mem)) {
                seq = None;
            }
            self.step_loader_and_array(&mut wl, &mut stats, t);
            t += 1;
        }
    }
}
