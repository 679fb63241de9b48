//! Static checks of a program against an `ArrayConfig` and a DRAM size.

use crate::config::{ArrayConfig, Dataflow, Dtype};
use crate::fault::{FaultCode, Region};
use crate::isa::{DecodeError, Instruction, Opcode, VectorOp};
use crate::scoreboard::dram_end;

/// What is wrong with one instruction of a program.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ProgramErrorKind {
    /// A field no encoding could hold.
    Encoding(DecodeError),
    /// The instruction needs the other dataflow.
    Dataflow { opcode: Opcode, needs: Dataflow },
    /// The instruction (or, for `Vector`, its op) needs the other dtype.
    Dtype { opcode: Opcode, op: Option<VectorOp>, needs: Dtype },
    /// A count exceeds what the array has (`len` > row width, `rows` > R, `cols` > C).
    TooWide { opcode: Opcode, field: &'static str, value: u32, max: u32 },
    /// Rows `start..end` run past the memory's `depth` rows (or bytes, for DRAM).
    Range { opcode: Opcode, region: Region, start: u64, end: u64, size: u64 },
    /// The program has no `Halt`.
    NoHalt,
}

impl ProgramErrorKind {
    /// The fault code a device that checks its words gives a word with this error
    /// (`protocol::Identity::program_checks`); `None` for [`ProgramErrorKind::NoHalt`], which
    /// is a program's error, not a word's.
    pub fn fault_code(&self) -> Option<FaultCode> {
        Some(match self {
            ProgramErrorKind::Encoding(e) => e.fault_code(),
            ProgramErrorKind::Dataflow { .. } => FaultCode::Dataflow,
            ProgramErrorKind::Dtype { .. } => FaultCode::Dtype,
            ProgramErrorKind::TooWide { .. } => FaultCode::TooWide,
            ProgramErrorKind::Range { .. } => FaultCode::Range,
            ProgramErrorKind::NoHalt => return None,
        })
    }
}

/// A rejected program: the first bad instruction and why.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ProgramError {
    pub index: usize,
    pub kind: ProgramErrorKind,
}

impl core::fmt::Display for ProgramError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "instruction {}: ", self.index)?;
        match self.kind {
            ProgramErrorKind::Encoding(e) => write!(f, "{e}"),
            ProgramErrorKind::Dataflow { opcode, needs } => write!(
                f,
                "{} needs a {} array",
                opcode.name(),
                match needs {
                    Dataflow::WeightStationary => "weight-stationary",
                    Dataflow::OutputStationary => "output-stationary",
                }
            ),
            ProgramErrorKind::Dtype { opcode, op: vector_op, needs } => {
                let op = vector_op.map(VectorOp::name).unwrap_or_default();
                let space = if op.is_empty() { "" } else { " " };
                write!(f, "{}{space}{op} needs a {} array", opcode.name(), needs.name())?;
                if vector_op == Some(VectorOp::Max) {
                    write!(f, ", or INT8 lanes built with their comparator (int8_max)")?;
                }
                Ok(())
            }
            ProgramErrorKind::TooWide { opcode, field, value, max } => {
                write!(f, "{}: `{field}` = {value} exceeds the array's {max}", opcode.name())
            }
            ProgramErrorKind::Range { opcode, region, start, end, size } => write!(
                f,
                "{}: {} {start}..{end} is outside its {size} {}",
                opcode.name(),
                region.name(),
                if region == Region::Dram { "bytes" } else { "rows" }
            ),
            ProgramErrorKind::NoHalt => write!(f, "the program has no halt"),
        }
    }
}

/// Checks every instruction (fields, dataflow, dtype, widths, every memory range) and that a
/// `Halt` ends the program. Instructions after the first `Halt` are checked too.
pub fn validate_program(
    config: &ArrayConfig,
    program: &[Instruction],
    dram_bytes: usize,
) -> Result<(), ProgramError> {
    for (index, ins) in program.iter().enumerate() {
        check(config, ins, dram_bytes as u64).map_err(|kind| ProgramError { index, kind })?;
    }
    if !program.contains(&Instruction::Halt) {
        return Err(ProgramError { index: program.len(), kind: ProgramErrorKind::NoHalt });
    }
    Ok(())
}

/// The checks of [`validate_program`] on one instruction, for programs held as encoded words
/// (a model blob) rather than in a slice of [`Instruction`]s.
pub fn check_instruction(
    config: &ArrayConfig,
    ins: &Instruction,
    dram_bytes: usize,
) -> Result<(), ProgramErrorKind> {
    check(config, ins, dram_bytes as u64)
}

fn check(cfg: &ArrayConfig, ins: &Instruction, dram: u64) -> Result<(), ProgramErrorKind> {
    ins.check().map_err(ProgramErrorKind::Encoding)?;
    let opcode = ins.opcode();
    let spad = cfg.spad_depth as u64;
    let acc = cfg.acc_depth as u64;
    let width = cfg.spad_width() as u32;
    let r = cfg.rows as u32;
    let c = cfg.cols as u32;
    let esize = cfg.dtype.elem_bytes() as u64;
    let range = |region: Region, start: u64, n: u64, size: u64| {
        if start + n > size {
            Err(ProgramErrorKind::Range { opcode, region, start, end: start + n, size })
        } else {
            Ok(())
        }
    };
    let wide = |field: &'static str, value: u16, max: u32| {
        if value as u32 > max {
            Err(ProgramErrorKind::TooWide { opcode, field, value: value as u32, max })
        } else {
            Ok(())
        }
    };
    let dataflow = |needs: Dataflow| {
        if cfg.dataflow != needs {
            Err(ProgramErrorKind::Dataflow { opcode, needs })
        } else {
            Ok(())
        }
    };
    let vector_op = match *ins {
        Instruction::Vector { op, .. } => Some(op),
        _ => None,
    };
    let dtype = |needs: Dtype| {
        if cfg.dtype != needs {
            Err(ProgramErrorKind::Dtype { opcode, op: vector_op, needs })
        } else {
            Ok(())
        }
    };
    match *ins {
        Instruction::Load { spad_row, dram_addr, rows, len, row_stride, elem_stride } => {
            wide("len", len, width)?;
            range(Region::Spad, spad_row as u64, rows as u64, spad)?;
            let end = dram_end(dram_addr, rows, row_stride, len, elem_stride as u64, esize);
            range(Region::Dram, dram_addr as u64, end - dram_addr as u64, dram)
        }
        Instruction::Store { acc_row, dram_addr, rows, len, row_stride } => {
            wide("len", len, c)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)?;
            let end = dram_end(dram_addr, rows, row_stride, len, 1, 4);
            range(Region::Dram, dram_addr as u64, end - dram_addr as u64, dram)
        }
        Instruction::LoadWeights { spad_row, rows, cols } => {
            dataflow(Dataflow::WeightStationary)?;
            wide("rows", rows, r)?;
            wide("cols", cols, c)?;
            range(Region::Spad, spad_row as u64, rows as u64, spad)
        }
        Instruction::Matmul { a_row, acc_row, rows, .. } => {
            dataflow(Dataflow::WeightStationary)?;
            range(Region::Spad, a_row as u64, rows as u64, spad)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)
        }
        Instruction::MatmulOs { a_row, b_row, k, acc_row, rows, cols, .. } => {
            dataflow(Dataflow::OutputStationary)?;
            wide("rows", rows, r)?;
            wide("cols", cols, c)?;
            range(Region::Spad, a_row as u64, k as u64, spad)?;
            range(Region::Spad, b_row as u64, k as u64, spad)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)
        }
        Instruction::Vector { op, dst, src, rows, .. } => {
            if !op.runs_on(cfg) {
                dtype(Dtype::Bf16)?;
            }
            range(Region::Acc, dst as u64, rows as u64, acc)?;
            match (op.uses_src(), op.src_is_one_row()) {
                (true, true) => range(Region::Acc, src as u64, 1, acc),
                (true, false) => range(Region::Acc, src as u64, rows as u64, acc),
                (false, _) => Ok(()),
            }
        }
        Instruction::CastBf16 { acc_row, spad_row, rows } => {
            dtype(Dtype::Bf16)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)?;
            range(Region::Spad, spad_row as u64, rows as u64, spad)
        }
        Instruction::Requantize { acc_row, spad_row, rows, .. } => {
            dtype(Dtype::Int8)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)?;
            range(Region::Spad, spad_row as u64, rows as u64, spad)
        }
        Instruction::LoadAcc { acc_row, dram_addr, rows, len, row_stride } => {
            wide("len", len, c)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)?;
            let end = dram_end(dram_addr, rows, row_stride, len, 1, 4);
            range(Region::Dram, dram_addr as u64, end - dram_addr as u64, dram)
        }
        Instruction::StoreBf16 { acc_row, dram_addr, rows, len, row_stride } => {
            dtype(Dtype::Bf16)?;
            wide("len", len, c)?;
            range(Region::Acc, acc_row as u64, rows as u64, acc)?;
            let end = dram_end(dram_addr, rows, row_stride, len, 1, 2);
            range(Region::Dram, dram_addr as u64, end - dram_addr as u64, dram)
        }
        Instruction::StoreSpad { spad_row, dram_addr, rows, len, row_stride } => {
            wide("len", len, width)?;
            range(Region::Spad, spad_row as u64, rows as u64, spad)?;
            let end = dram_end(dram_addr, rows, row_stride, len, 1, esize);
            range(Region::Dram, dram_addr as u64, end - dram_addr as u64, dram)
        }
        Instruction::Sync | Instruction::Halt => Ok(()),
    }
}
