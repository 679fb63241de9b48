//! Reordering a program for the decoupled machine: the same memories at the end, fewer cycles.
//!
//! The decoupled machine issues in program order, so an instruction that must wait (a vector op
//! behind the vector unit's work, a load behind a bank still in use) holds back every one after
//! it, even those that touch nothing it touches. Between two GEMMs of a training step that is
//! the next GEMM's whole ramp waiting behind the last epilogue of the one before. [`reorder`]
//! list-schedules the program instead: at each step it takes, of the first instruction left of
//! each class (loads; weight loads and matmuls; vector-unit work), the one the timing model
//! dispatches earliest, if it conflicts with no instruction left before it (core's
//! `scoreboard::conflicts`: a shared scratchpad row, DRAM byte, accumulator bank or port), else
//! the first instruction left. Moving an instruction past ones it does not conflict with swaps
//! instructions that touch disjoint data, so every memory ends as program order leaves it.
//! Weight loads and matmuls are one class because the weight banks tie them together in ways
//! footprints do not show; `Sync` and `Halt` are never passed.

extern crate alloc;
use alloc::vec::Vec;

use crate::config::{ArrayConfig, Schedule};
use crate::isa::Instruction;
use crate::scoreboard::{conflicts, footprint, unit, Unit};
use crate::timing::{program_cycles, DecoupledScheduler};

/// The order to run `program` in (a permutation of its indices), under the rules of the module
/// docs; the identity unless the config is decoupled and the new order takes fewer cycles.
pub fn reorder(config: &ArrayConfig, program: &[Instruction]) -> Vec<usize> {
    let identity: Vec<usize> = (0..program.len()).collect();
    if config.schedule != Schedule::Decoupled {
        return identity;
    }
    let Some(order) = list_schedule(config, program) else { return identity };
    let reordered: Vec<Instruction> = order.iter().map(|&i| program[i]).collect();
    match (program_cycles(config, program), program_cycles(config, &reordered)) {
        (Ok(before), Ok(after)) if after < before => order,
        _ => identity,
    }
}

/// The class an instruction keeps its order within; `None` for the barriers.
fn class(ins: &Instruction) -> Option<usize> {
    match unit(ins)? {
        Unit::Load => Some(0),
        Unit::Weights | Unit::Array => Some(1),
        Unit::Vector => Some(2),
    }
}

fn list_schedule(config: &ArrayConfig, program: &[Instruction]) -> Option<Vec<usize>> {
    let n = program.len();
    let fps: Vec<_> = program.iter().map(|ins| footprint(config, ins)).collect();
    let classes: Vec<Option<usize>> = program.iter().map(class).collect();
    let mut done = alloc::vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut scheduler = DecoupledScheduler::new(config);
    let mut first = 0; // the first instruction left
    let mut heads = [0usize; 3]; // where each class's search for its first left starts
    while order.len() < n {
        while done[first] {
            first += 1;
        }
        // Candidates: the first left, and each class's first left that may pass those before it.
        let mut best: Option<(u64, usize, DecoupledScheduler)> = None;
        let consider = |i: usize, best: &mut Option<(u64, usize, DecoupledScheduler)>| {
            let mut trial = scheduler.clone();
            if let Ok(at) = trial.push(&program[i]) {
                if best.as_ref().is_none_or(|(b, j, _)| at < *b || (at == *b && i < *j)) {
                    *best = Some((at, i, trial));
                }
            }
        };
        consider(first, &mut best);
        for (c, head) in heads.iter_mut().enumerate() {
            while *head < n && (done[*head] || classes[*head] != Some(c)) {
                *head += 1;
            }
            let i = *head;
            if i >= n || i == first {
                continue;
            }
            let passes = (first..i).filter(|&j| !done[j]).all(|j| {
                classes[j].is_some() && classes[j] != Some(c) && !conflicts(&fps[i], &fps[j])
            });
            if passes {
                consider(i, &mut best);
            }
        }
        let (_, i, trial) = best?;
        scheduler = trial;
        done[i] = true;
        order.push(i);
    }
    Some(order)
}
