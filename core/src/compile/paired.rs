//! Emitting the vector-unit lowerings' runs two at a time, interleaved.

extern crate alloc;
use alloc::vec::Vec;

use super::acc_rows::Regions;
use crate::isa::Instruction;

/// Runs' code, emitted two runs at a time with their steps interleaved (a step: a tap's load and
/// the ops that read it). Consecutive runs sit in different accumulator banks ([`Regions`]),
/// and a unit holds the ports of the banks it touches, so within one run a tap's load waits for
/// the previous tap's op; interleaved, under the decoupled schedule each run's loads fill one
/// bank while the other run's ops work in the other. On the blocking schedule the order costs
/// nothing.
pub(super) struct Paired {
    /// Whether runs pair: only where they use different rows ([`Regions::alternate`]).
    pairs: bool,
    pending: Option<Vec<Vec<Instruction>>>,
}

impl Paired {
    pub(super) fn new(regions: &Regions) -> Paired {
        Paired { pairs: regions.alternate(), pending: None }
    }

    /// One run's steps: held until the next run's arrive, then both appended to `out`.
    pub(super) fn push(&mut self, steps: Vec<Vec<Instruction>>, out: &mut Vec<Instruction>) {
        if !self.pairs {
            out.extend(steps.into_iter().flatten());
            return;
        }
        let Some(first) = self.pending.take() else {
            self.pending = Some(steps);
            return;
        };
        let mut a = first.into_iter();
        let mut b = steps.into_iter();
        loop {
            let (x, y) = (a.next(), b.next());
            if x.is_none() && y.is_none() {
                break;
            }
            out.extend(x.into_iter().flatten().chain(y.into_iter().flatten()));
        }
    }

    /// Appends a run left without a partner.
    pub(super) fn finish(self, out: &mut Vec<Instruction>) {
        out.extend(self.pending.into_iter().flatten().flatten());
    }
}
