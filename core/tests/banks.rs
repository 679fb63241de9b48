//! Accumulator banks across GEMMs (`GemmPlan::starting_in_bank`, `GemmPlan::next_bank`): a
//! decoupled weight-stationary program alternates its output blocks between the two banks, and
//! a GEMM started in the bank its predecessor left free never puts its first block in the bank
//! of the predecessor's last, whose epilogue may still be running.

use proptest::prelude::*;
use systole_core::scoreboard::{acc_banks, Span};
use systole_core::tiler::{Epilogue, GemmLayout, GemmPlan, GemmShape, MatrixView};
use systole_core::{ArrayConfig, Dataflow, Dtype, Instruction, Schedule};

/// The banks of each matmul's accumulator rows, in program order.
fn matmul_banks(config: &ArrayConfig, plan: &GemmPlan) -> Vec<u8> {
    let mut banks = Vec::new();
    plan.emit_body(&mut |ins| {
        if let Instruction::Matmul { acc_row, rows, .. } = ins {
            banks.push(acc_banks(config, Span::new(acc_row as u64, rows as u64)));
        }
    });
    banks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn consecutive_gemms_keep_alternating_banks(
        m1 in 1u32..=70, k1 in 1u32..=40, n1 in 1u32..=40,
        m2 in 1u32..=70, k2 in 1u32..=40, n2 in 1u32..=40,
        first in 0u32..2,
    ) {
        let config = ArrayConfig { acc_depth: 64, ..ArrayConfig::new(4, 4, Dtype::Bf16) }
            .with_dataflow(Dataflow::WeightStationary)
            .with_schedule(Schedule::Decoupled);
        let plan = |m, k, n, bank| {
            let shape = GemmShape { m, k, n };
            let layout = GemmLayout::new(
                MatrixView::row_major(0, k),
                MatrixView::row_major(1 << 16, n),
                1 << 18,
            );
            GemmPlan::with_epilogue(&config, shape, layout, Epilogue::STORE)
                .unwrap()
                .starting_in_bank(bank)
        };
        let one = plan(m1, k1, n1, first);
        let two = plan(m2, k2, n2, one.next_bank());
        let (a, b) = (matmul_banks(&config, &one), matmul_banks(&config, &two));
        // Each block sits in one bank: bank 0 is bit 0, bank 1 bit 1.
        prop_assert!(a.iter().chain(&b).all(|&bits| bits == 1 || bits == 2), "{a:?} {b:?}");
        prop_assert_eq!(a[0], 1 << first, "the first block's bank");
        prop_assert_ne!(a.last(), b.first(), "a GEMM starts in the bank its predecessor left free");
        // next_bank names the bank a further block would take.
        prop_assert_eq!(b[0], 1 << one.next_bank());
    }
}

/// Bank alternation is the decoupled weight-stationary program's; the others ignore the request.
#[test]
fn only_pipelined_programs_alternate() {
    for (dataflow, schedule) in [
        (Dataflow::WeightStationary, Schedule::Blocking),
        (Dataflow::OutputStationary, Schedule::Decoupled),
    ] {
        let config =
            ArrayConfig::new(4, 4, Dtype::Bf16).with_dataflow(dataflow).with_schedule(schedule);
        let shape = GemmShape { m: 9, k: 9, n: 9 };
        let layout =
            GemmLayout::new(MatrixView::row_major(0, 9), MatrixView::row_major(512, 9), 1024);
        let plain = GemmPlan::new(&config, shape, layout).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        plain.emit(&mut |i| a.push(i));
        plain.starting_in_bank(1).emit(&mut |i| b.push(i));
        assert_eq!(a, b, "{dataflow:?} {schedule:?}");
        assert_eq!(plain.next_bank(), 0);
    }
}
