// Memories with output registers (`ArrayConfig::read_stages`): every instruction that reads a
// memory starts its work that many cycles after its dispatch, so it takes as many cycles more,
// and its rows still follow each other every cycle. The bits are checked by the random-program
// and GEMM property tests (`machines.rs`), which draw `read_stages` with the other fields.

use systole_core::isa::{Instruction, VectorOp};
use systole_core::timing::{duration, row_lands};
use systole_core::{ArrayConfig, Dtype, Requant, Schedule, MAX_READ_STAGES};

fn one_of_each(rows: u16) -> Vec<Instruction> {
    vec![
        Instruction::Load {
            spad_row: 0,
            dram_addr: 0,
            rows,
            len: 4,
            row_stride: 4,
            elem_stride: 1,
        },
        Instruction::Load {
            spad_row: 0,
            dram_addr: 0,
            rows,
            len: 4,
            row_stride: 1,
            elem_stride: 8,
        },
        Instruction::Store { acc_row: 0, dram_addr: 0, rows, len: 4, row_stride: 16 },
        Instruction::LoadAcc { acc_row: 0, dram_addr: 0, rows, len: 4, row_stride: 16 },
        Instruction::StoreSpad { spad_row: 0, dram_addr: 0, rows, len: 4, row_stride: 4 },
        Instruction::StoreBf16 { acc_row: 0, dram_addr: 0, rows, len: 4, row_stride: 8 },
        Instruction::CastBf16 { acc_row: 0, spad_row: 0, rows },
        Instruction::Requantize {
            acc_row: 0,
            spad_row: 0,
            rows,
            requant: Requant::from_scale(0.5, 0).unwrap(),
        },
        Instruction::Vector { op: VectorOp::Axpy, dst: 0, src: 4, rows, imm: 0 },
        Instruction::Vector { op: VectorOp::Relu, dst: 0, src: 4, rows, imm: 0 },
        Instruction::LoadWeights { spad_row: 0, rows: 4, cols: 4 },
        Instruction::Matmul { a_row: 0, acc_row: 0, rows, swap: true, accumulate: false },
        Instruction::MatmulOs {
            a_row: 0,
            b_row: 8,
            k: 5,
            acc_row: 0,
            rows: 4,
            cols: 4,
            accumulate: true,
        },
    ]
}

#[test]
fn each_instruction_takes_its_read_stages_more_and_its_rows_stay_back_to_back() {
    let bases = [
        ArrayConfig::new(4, 4, Dtype::Int8).with_convert_stages(3).with_requant_cycles(4),
        ArrayConfig::new(4, 4, Dtype::Int8).with_schedule(Schedule::Decoupled),
        ArrayConfig::new(4, 4, Dtype::Bf16)
            .with_scale_cycles(3)
            .with_add_stages(2)
            .with_pe_stages(3),
    ];
    for base in bases {
        let read = base.with_read_stages(MAX_READ_STAGES);
        assert_eq!(read.validate(), Ok(()));
        let more = MAX_READ_STAGES as u64;
        for rows in [1, 3, 7] {
            for ins in one_of_each(rows) {
                assert_eq!(
                    duration(&read, &ins),
                    duration(&base, &ins) + more,
                    "{ins:?} on {base:?}"
                );
                if matches!(
                    ins,
                    Instruction::LoadWeights { .. }
                        | Instruction::Matmul { .. }
                        | Instruction::MatmulOs { .. }
                ) {
                    continue;
                }
                for r in 0..rows as u64 {
                    assert_eq!(
                        row_lands(&read, &ins, r),
                        row_lands(&base, &ins, r) + more,
                        "{ins:?} row {r}"
                    );
                }
            }
        }
        for ins in [Instruction::Sync, Instruction::Halt] {
            assert_eq!(duration(&read, &ins), duration(&base, &ins), "{ins:?}");
        }
    }
}
