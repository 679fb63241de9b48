//! The decoupled schedule keeps program order: random programs packed into tiny memories, so
//! that loads, matmuls, weight loads and vector ops on different units read and write the same
//! scratchpad rows, accumulator banks and DRAM bytes, run on the functional machine (program
//! order, by definition) and the decoupled cycle machine, which must end with every byte equal;
//! the timing model must predict the cycle machine's count. The test also counts the hazards the
//! programs hold and the instructions that really overlapped, so a generator that stopped making
//! either would fail it.

use systole_core::check::{golden_pair_agree, random_program, SplitMix};
use systole_core::isa::Instruction;
use systole_core::scoreboard::{footprint, unit, Span};
use systole_core::timing;
use systole_core::{ArrayConfig, Dataflow, Dtype, Schedule};

const DRAM: usize = 256;

/// A tiny decoupled machine for a seed: 1 to 4 rows and columns, both dtypes and dataflows,
/// memories of the least depth a config allows plus a few rows.
fn tiny(rng: &mut SplitMix) -> ArrayConfig {
    let side = |rng: &mut SplitMix| 1 + (rng.next_u64() % 4) as u16;
    let (r, c) = (side(rng), side(rng));
    let dtype = if rng.next_u64() % 2 == 0 { Dtype::Int8 } else { Dtype::Bf16 };
    let dataflow = if rng.next_u64() % 3 == 0 {
        Dataflow::OutputStationary
    } else {
        Dataflow::WeightStationary
    };
    let mut cfg =
        ArrayConfig::new(r, c, dtype).with_dataflow(dataflow).with_schedule(Schedule::Decoupled);
    cfg.spad_depth = 3 * cfg.spad_width() as u32 + (rng.next_u64() % 4) as u32;
    cfg.acc_depth = r as u32 + (rng.next_u64() % 6) as u32;
    cfg
}

/// Three random programs back to back, one `Halt` at the end: long enough for every unit to be
/// busy at once.
fn long_program(cfg: &ArrayConfig, rng: &mut SplitMix) -> Vec<Instruction> {
    let mut program: Vec<Instruction> = (0..3)
        .flat_map(|_| random_program(cfg, DRAM, rng))
        .filter(|ins| *ins != Instruction::Halt)
        .collect();
    program.push(Instruction::Halt);
    program
}

#[derive(Default, Debug)]
struct Counts {
    raw: u64,
    war: u64,
    waw: u64,
    overlapped: u64,
}

/// Read-after-write, write-after-read and write-after-write pairs between instructions on
/// different units at most four apart, on scratchpad rows and DRAM bytes.
fn count_hazards(cfg: &ArrayConfig, program: &[Instruction], counts: &mut Counts) {
    let reads = |f: &systole_core::scoreboard::Footprint| [f.spad_reads[0], f.spad_reads[1]];
    for (i, a) in program.iter().enumerate() {
        for b in program.iter().skip(i + 1).take(4) {
            let (Some(ua), Some(ub)) = (unit(a), unit(b)) else { continue };
            if ua == ub {
                continue;
            }
            let (fa, fb) = (footprint(cfg, a), footprint(cfg, b));
            let hits = |w: Span, r: &[Span]| r.iter().any(|s| w.overlaps(*s));
            counts.raw +=
                (hits(fa.spad_write, &reads(&fb)) || fa.dram_write.overlaps(fb.dram_read)) as u64;
            counts.war +=
                (hits(fb.spad_write, &reads(&fa)) || fb.dram_write.overlaps(fa.dram_read)) as u64;
            counts.waw += (fa.spad_write.overlaps(fb.spad_write)
                || fa.dram_write.overlaps(fb.dram_write)) as u64;
        }
    }
}

/// Pairs of instructions on different units that were in flight in the same cycle.
fn count_overlaps(cfg: &ArrayConfig, program: &[Instruction]) -> u64 {
    let mut at = vec![u64::MAX; program.len()];
    if timing::schedule(cfg, program, |i, t| at[i] = t).is_err() {
        return 0;
    }
    let mut overlapped = 0;
    for (i, a) in program.iter().enumerate() {
        let end = at[i].saturating_add(timing::duration(cfg, a));
        for (j, b) in program.iter().enumerate().skip(i + 1).take(8) {
            if unit(a).is_some() && unit(b).is_some() && unit(a) != unit(b) && at[j] < end {
                overlapped += 1;
            }
        }
    }
    overlapped
}

#[test]
fn decoupled_machines_keep_program_order_under_dense_hazards() {
    let mut counts = Counts::default();
    for seed in 0..600u64 {
        let mut rng = SplitMix(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED);
        let cfg = tiny(&mut rng);
        let program = long_program(&cfg, &mut rng);
        count_hazards(&cfg, &program, &mut counts);
        counts.overlapped += count_overlaps(&cfg, &program);
        if let Err(e) = golden_pair_agree(&cfg, DRAM, &program, &mut rng) {
            panic!("seed {seed}: {e}; {cfg:?}, program {program:?}");
        }
    }
    // The programs are what the test claims: dense in hazards, and overlapping.
    assert!(counts.raw > 500 && counts.war > 500 && counts.waw > 200, "{counts:?}");
    assert!(counts.overlapped > 1000, "{counts:?}");
    println!("{counts:?}");
}
