//! Reordering for the decoupled machine (`reorder::reorder`): the order it picks leaves every
//! memory as program order does, and takes no more cycles; on random programs dense in hazards
//! between the units.

use systole_core::check::{golden_pair_agree, random_program, SplitMix};
use systole_core::machine::{golden, GoldenKind, Region};
use systole_core::reorder::reorder;
use systole_core::{timing, ArrayConfig, Dataflow, Dtype, Instruction, Schedule};

/// Every memory of a fresh functional machine after `program`, from `seed`'s random bytes, and
/// the outcome.
fn run(
    cfg: &ArrayConfig,
    dram: usize,
    program: &[Instruction],
    seed: u64,
) -> (Vec<Vec<u8>>, String) {
    let mut m = golden(GoldenKind::Functional, *cfg, dram).unwrap();
    let mut rng = SplitMix(seed);
    let regions = [Region::Dram, Region::Spad, Region::Acc];
    for region in regions {
        let bytes: Vec<u8> = (0..m.region_size(region)).map(|_| rng.next_u64() as u8).collect();
        m.write(region, 0, &bytes).unwrap();
    }
    let outcome = match m.run(program) {
        Ok(stats) => format!("ok, {} MACs", stats.macs),
        Err(e) => format!("{e}"),
    };
    let memories = regions
        .iter()
        .map(|&r| {
            let mut bytes = vec![0u8; m.region_size(r)];
            m.read(r, 0, &mut bytes).unwrap();
            bytes
        })
        .collect();
    (memories, outcome)
}

#[test]
fn reordered_random_programs_end_as_program_order_does() {
    let mut rng = SplitMix(2024);
    let mut moved = 0;
    for trial in 0..400 {
        let dtype = if trial % 2 == 0 { Dtype::Bf16 } else { Dtype::Int8 };
        let dataflow =
            if trial % 3 == 0 { Dataflow::OutputStationary } else { Dataflow::WeightStationary };
        let (r, c) = (2 + (trial % 3) as u16, 2 + (trial % 2) as u16);
        let mut cfg = ArrayConfig::new(r, c, dtype).with_dataflow(dataflow);
        cfg.schedule = Schedule::Decoupled;
        cfg.spad_depth = 3 * cfg.spad_width() as u32 + 8;
        cfg.acc_depth = 2 * r as u32 + 8;
        let dram = 512;
        let program = random_program(&cfg, dram, &mut rng);
        let order = reorder(&cfg, &program);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..program.len()).collect::<Vec<_>>(), "a permutation");
        let reordered: Vec<Instruction> = order.iter().map(|&i| program[i]).collect();
        if reordered != program {
            moved += 1;
        }
        let what = format!("trial {trial}: {program:?} as {order:?}");
        assert_eq!(run(&cfg, dram, &program, trial), run(&cfg, dram, &reordered, trial), "{what}");
        if let (Ok(before), Ok(after)) =
            (timing::program_cycles(&cfg, &program), timing::program_cycles(&cfg, &reordered))
        {
            assert!(after <= before, "{what}: {after} cycles after, {before} before");
        }
        golden_pair_agree(&cfg, dram, &reordered, &mut rng)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    assert!(moved > 40, "only {moved} of 400 random programs were reordered");
}

#[test]
fn blocking_programs_keep_their_order() {
    let cfg = ArrayConfig::new(4, 4, Dtype::Bf16);
    let mut rng = SplitMix(7);
    for _ in 0..50 {
        let program = random_program(&cfg, 512, &mut rng);
        assert_eq!(reorder(&cfg, &program), (0..program.len()).collect::<Vec<_>>());
    }
}
