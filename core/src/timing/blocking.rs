//! [`super::schedule`] under [`Schedule::Blocking`](crate::config::Schedule): the sequencer
//! waits for every unit and blocks them all; the weight loader overlaps the array. On a
//! single-port scratchpad ([`ArrayConfig::single_port_spad`]) they take turns on its port: a
//! `LoadWeights` waits for the matmul's reads ([`matmul_port_cycles`]) and a `Matmul` for the
//! weight load. On the SDRAM the sequencer's transfers, one at a time, take what their words
//! take ([`duration_at`]).

use super::sdram::SdramBus;
use super::{duration, duration_at, matmul_port_cycles};
use crate::config::ArrayConfig;
use crate::fault::ExecErrorKind;
use crate::isa::Instruction;

/// The blocking timing model fed one instruction at a time.
#[derive(Clone)]
pub struct Scheduler {
    config: ArrayConfig,
    /// First cycle the controller may dispatch in.
    next: u64,
    seq_free: u64,
    wl_free: u64,
    arr_free: u64,
    /// First cycle the array's reads leave a single-port scratchpad's port to the weight loader.
    arr_reads_free: u64,
    /// Cycle from which the shadow weights are full; `None` when empty.
    shadow_full_at: Option<u64>,
    /// The SDRAM from the run's first cycle, on an SDRAM machine.
    sdram: Option<SdramBus>,
}

impl Scheduler {
    /// A scheduler for a program that starts on an idle machine with an empty shadow.
    pub fn new(config: &ArrayConfig) -> Scheduler {
        Scheduler {
            config: *config,
            next: 0,
            seq_free: 0,
            wl_free: 0,
            arr_free: 0,
            arr_reads_free: 0,
            shadow_full_at: None,
            sdram: SdramBus::of(config),
        }
    }

    /// Dispatches the next instruction of a valid program; returns its dispatch cycle (for
    /// `Halt`, the program's last cycle), or the fault the cycle machine reports.
    pub fn push(&mut self, ins: &Instruction) -> Result<u64, ExecErrorKind> {
        let config = &self.config;
        let dur = duration(config, ins);
        let at = match *ins {
            Instruction::Halt => {
                return Ok(self.next.max(self.seq_free).max(self.wl_free).max(self.arr_free));
            }
            Instruction::LoadWeights { .. } => {
                let mut at = self.next.max(self.seq_free).max(self.wl_free);
                if config.single_port_spad {
                    at = at.max(self.arr_reads_free);
                }
                self.wl_free = at + dur;
                self.shadow_full_at = Some(at + dur);
                at
            }
            Instruction::Matmul { swap, rows, .. } => {
                let mut at = self.next.max(self.seq_free).max(self.arr_free);
                if config.single_port_spad {
                    at = at.max(self.wl_free);
                }
                if swap {
                    at = at.max(self.shadow_full_at.ok_or(ExecErrorKind::NoWeightsLoaded)?);
                    self.shadow_full_at = None;
                }
                self.arr_free = at + dur;
                self.arr_reads_free = at + matmul_port_cycles(rows);
                at
            }
            Instruction::MatmulOs { .. } => {
                let at = self.next.max(self.seq_free).max(self.arr_free);
                self.arr_free = at + dur;
                at
            }
            _ => {
                let at = self.next.max(self.seq_free).max(self.wl_free).max(self.arr_free);
                self.seq_free = at + duration_at(config, ins, at, self.sdram.as_mut(), |_, _| {});
                at
            }
        };
        self.next = at + 1;
        Ok(at)
    }
}
