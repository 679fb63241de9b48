// A DRAM that moves a byte a cycle (`DramPort::Byte`): each row of a DRAM transfer takes a cycle
// per byte it moves and lands in the last of them; nothing else changes. The bits are checked
// by the random-program and GEMM property tests (`machines.rs`), which draw the port with the
// other fields.

use systole_core::isa::{Instruction, VectorOp};
use systole_core::timing::{duration, row_lands};
use systole_core::{ArrayConfig, DramPort, Dtype, Requant};

/// Each instruction with the bytes one of its rows moves on the DRAM (0: none).
fn transfers(rows: u16, dtype: Dtype) -> Vec<(Instruction, u64)> {
    let es = dtype.elem_bytes() as u64;
    let mut all = vec![
        (
            Instruction::Load {
                spad_row: 0,
                dram_addr: 0,
                rows,
                len: 4,
                row_stride: 4,
                elem_stride: 1,
            },
            4 * es,
        ),
        (
            Instruction::Load {
                spad_row: 0,
                dram_addr: 0,
                rows,
                len: 3,
                row_stride: 1,
                elem_stride: 8,
            },
            3 * es,
        ),
        (Instruction::Store { acc_row: 0, dram_addr: 0, rows, len: 2, row_stride: 16 }, 8),
        (Instruction::LoadAcc { acc_row: 0, dram_addr: 0, rows, len: 3, row_stride: 16 }, 12),
        (Instruction::StoreSpad { spad_row: 0, dram_addr: 0, rows, len: 4, row_stride: 4 }, 4 * es),
        (Instruction::Vector { op: VectorOp::Relu, dst: 0, src: 4, rows, imm: 0 }, 0),
        (Instruction::Matmul { a_row: 0, acc_row: 0, rows, swap: true, accumulate: false }, 0),
    ];
    match dtype {
        Dtype::Bf16 => all.push((
            Instruction::StoreBf16 { acc_row: 0, dram_addr: 0, rows, len: 3, row_stride: 8 },
            6,
        )),
        Dtype::Int8 => all.push((
            Instruction::Requantize {
                acc_row: 0,
                spad_row: 0,
                rows,
                requant: Requant::from_scale(0.5, 0).unwrap(),
            },
            0,
        )),
    }
    all
}

#[test]
fn a_transfers_rows_take_a_cycle_per_byte_and_nothing_else_changes() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        for read in [0, 1] {
            let row = ArrayConfig::new(4, 4, dtype).with_convert_stages(2).with_read_stages(read);
            let byte = row.with_dram_port(DramPort::Byte);
            assert_eq!(byte.validate(), Ok(()));
            for (ins, bytes) in transfers(3, dtype) {
                let what = format!("{ins:?} on {dtype:?}, read stages {read}");
                if bytes == 0 {
                    assert_eq!(duration(&byte, &ins), duration(&row, &ins), "{what}");
                    continue;
                }
                // Conversions land their pipeline's stages after their last byte.
                let late = read as u64
                    + match ins {
                        Instruction::StoreBf16 { .. } => 2,
                        _ => 0,
                    };
                for r in 0..3 {
                    assert_eq!(row_lands(&byte, &ins, r), late + (r + 1) * bytes - 1, "{what}");
                }
                assert_eq!(duration(&byte, &ins), late + 3 * bytes, "{what}");
                // A gather already took a cycle per element on the row port.
                assert!(duration(&byte, &ins) >= duration(&row, &ins), "{what}");
            }
        }
    }
}
