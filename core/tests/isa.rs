//! The ISA encoding: round trips, and every invalid word rejected with the field named.

use fixed::types::I1F31;
use proptest::prelude::*;
use systole_core::isa::{
    decode, encode, DecodeError, Instruction, Opcode, VectorOp, Word, WORD_BITS,
};
use systole_core::Requant;

fn vector_op() -> impl Strategy<Value = VectorOp> {
    proptest::sample::select(VectorOp::ALL.to_vec())
}

/// Every valid instruction, fields anywhere in their ranges.
pub fn instruction() -> impl Strategy<Value = Instruction> {
    let rows = 1u16..=u16::MAX;
    let side = 1u16..=256;
    let stride = 0u32..(1 << 24);
    prop_oneof![
        (any::<u16>(), any::<u32>(), rows.clone(), side.clone(), stride.clone(), stride.clone())
            .prop_map(|(spad_row, dram_addr, rows, len, row_stride, elem_stride)| {
                Instruction::Load { spad_row, dram_addr, rows, len, row_stride, elem_stride }
            }),
        (any::<u16>(), any::<u32>(), rows.clone(), side.clone(), stride).prop_map(
            |(acc_row, dram_addr, rows, len, row_stride)| Instruction::Store {
                acc_row,
                dram_addr,
                rows,
                len,
                row_stride
            }
        ),
        (any::<u16>(), side.clone(), side.clone())
            .prop_map(|(spad_row, rows, cols)| Instruction::LoadWeights { spad_row, rows, cols }),
        (any::<u16>(), any::<u16>(), rows.clone(), any::<bool>(), any::<bool>()).prop_map(
            |(a_row, acc_row, rows, swap, accumulate)| Instruction::Matmul {
                a_row,
                acc_row,
                rows,
                swap,
                accumulate
            }
        ),
        (any::<u16>(), any::<u16>(), rows.clone(), any::<u16>(), side.clone(), side, any::<bool>())
            .prop_map(|(a_row, b_row, k, acc_row, rows, cols, accumulate)| Instruction::MatmulOs {
                a_row,
                b_row,
                k,
                acc_row,
                rows,
                cols,
                accumulate
            }),
        (vector_op(), any::<u16>(), any::<u16>(), rows.clone(), any::<u32>()).prop_map(
            |(op, dst, src, rows, imm)| Instruction::Vector {
                op,
                dst,
                src: if op.uses_src() { src } else { 0 },
                rows,
                imm: if op.uses_imm() { imm } else { 0 },
            }
        ),
        (any::<u16>(), any::<u16>(), rows.clone()).prop_map(|(acc_row, spad_row, rows)| {
            Instruction::CastBf16 { acc_row, spad_row, rows }
        }),
        (any::<u16>(), any::<u16>(), rows, any::<i32>(), 0u8..=31, any::<i8>()).prop_map(
            |(acc_row, spad_row, rows, m, shift, zero_point)| Instruction::Requantize {
                acc_row,
                spad_row,
                rows,
                requant: Requant { multiplier: I1F31::from_bits(m), shift, zero_point },
            }
        ),
        (any::<u16>(), any::<u32>(), 1u16..=u16::MAX, 1u16..=256, 0u32..(1 << 24)).prop_map(
            |(acc_row, dram_addr, rows, len, row_stride)| Instruction::LoadAcc {
                acc_row,
                dram_addr,
                rows,
                len,
                row_stride
            }
        ),
        (any::<u16>(), any::<u32>(), 1u16..=u16::MAX, 1u16..=256, 0u32..(1 << 24)).prop_map(
            |(spad_row, dram_addr, rows, len, row_stride)| Instruction::StoreSpad {
                spad_row,
                dram_addr,
                rows,
                len,
                row_stride
            }
        ),
        (any::<u16>(), any::<u32>(), 1u16..=u16::MAX, 1u16..=256, 0u32..(1 << 24)).prop_map(
            |(acc_row, dram_addr, rows, len, row_stride)| Instruction::StoreBf16 {
                acc_row,
                dram_addr,
                rows,
                len,
                row_stride
            }
        ),
        Just(Instruction::Sync),
        Just(Instruction::Halt),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    #[test]
    fn decode_inverts_encode(ins in instruction()) {
        let w = encode(&ins).map_err(|e| TestCaseError::fail(format!("{e}")))?;
        prop_assert_eq!(decode(w), Ok(ins));
    }

    #[test]
    fn every_accepted_word_reencodes_to_itself(hi in any::<u64>(), lo in any::<u64>(), op in 0u64..16) {
        // Random bits under a mostly-valid opcode, so many words get past the opcode check.
        let w = Word(((hi as u128) << 64 | lo as u128) & !0x1F | op as u128);
        match decode(w) {
            Ok(ins) => prop_assert_eq!(encode(&ins), Ok(w)),
            Err(e) => {
                // A rejection must say something specific about this word.
                let msg = format!("{e}");
                prop_assert!(!msg.is_empty());
            }
        }
    }

    #[test]
    fn a_reserved_bit_is_rejected(ins in instruction(), pick in any::<usize>()) {
        let used = ins.opcode().used_bits();
        prop_assume!(used < WORD_BITS);
        let bit = used + pick % (WORD_BITS - used);
        let w = encode(&ins).unwrap();
        let bad = Word(w.0 | 1u128 << bit);
        prop_assert!(matches!(decode(bad), Err(DecodeError::Reserved { .. })), "{:?}", decode(bad));
    }
}

#[test]
fn opcodes_outside_the_table_are_rejected() {
    for code in [0u128, 14, 15, 20, 31] {
        assert_eq!(decode(Word(code)), Err(DecodeError::Opcode { code: code as u8 }));
    }
}

#[test]
fn out_of_range_fields_name_the_field() {
    // Load with rows = 0: rows sit after opcode (5) + spad_row (16) + dram_addr (32) = bit 53.
    let load = encode(&Instruction::Load {
        spad_row: 0,
        dram_addr: 0,
        rows: 1,
        len: 1,
        row_stride: 0,
        elem_stride: 0,
    })
    .unwrap();
    let zero_rows = Word(load.0 & !(0xFFFFu128 << 53));
    assert_eq!(
        decode(zero_rows),
        Err(DecodeError::Field {
            opcode: Opcode::Load,
            field: "rows",
            value: 0,
            min: 1,
            max: 0xFFFF
        })
    );
    // len = 300 (> 256): len sits at bit 69, 9 bits.
    let wide = Word((load.0 & !(0x1FFu128 << 69)) | 300u128 << 69);
    assert!(matches!(decode(wide), Err(DecodeError::Field { field: "len", value: 300, .. })));
    // Vector op code 9 does not exist.
    let v = encode(&Instruction::Vector { op: VectorOp::Relu, dst: 0, src: 0, rows: 1, imm: 0 })
        .unwrap();
    let bad_op = Word(v.0 | 9u128 << 5);
    assert!(matches!(decode(bad_op), Err(DecodeError::Field { field: "op", .. })));
    // Relu with a nonzero imm.
    let imm = Word(v.0 | 1u128 << (5 + 4 + 16 + 16 + 16));
    assert!(matches!(decode(imm), Err(DecodeError::UnusedField { field: "imm", .. })));
    // The message names the instruction and the field.
    let msg = decode(zero_rows).unwrap_err().to_string();
    assert!(msg.contains("load") && msg.contains("`rows`"), "{msg}");
}
