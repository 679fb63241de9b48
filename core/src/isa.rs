//! The instruction set: coarse-grained, TPU v1 style, one 128-bit word per instruction.
//!
//! Every word starts with a 5-bit opcode in bits 0..5; each opcode's fields follow LSB-first in
//! the order of its layout table ([`Opcode::layout`]), and every bit above the last field is
//! reserved and must be zero. [`decode`] rejects every word that [`encode`] could not have
//! produced, naming the field at fault, so `encode(decode(w)?) == w` for every word it accepts.
//!
//! | opcode | instruction | what it does |
//! |---|---|---|
//! | 1 | `Load` | DRAM -> scratchpad rows, 2-D strided gather, zero fill past `len` |
//! | 2 | `Store` | accumulator rows -> DRAM, 32-bit words |
//! | 3 | `LoadWeights` | scratchpad rows -> shadow weight registers (weight-stationary) |
//! | 4 | `Matmul` | stream scratchpad rows through the weights into accumulator rows (WS) |
//! | 5 | `MatmulOs` | stream A^T and B rows through the array, drain into accumulators (OS) |
//! | 6 | `Vector` | vector-unit op over accumulator rows ([`VectorOp`]) |
//! | 7 | `CastBf16` | accumulator rows (f32) -> scratchpad rows (bf16, RNE) |
//! | 8 | `Requantize` | accumulator rows (i32) -> scratchpad rows (i8, gemmlowp) |
//! | 9 | `Sync` | wait until every unit is idle |
//! | 10 | `Halt` | wait until idle, then stop and raise `done` |
//! | 11 | `LoadAcc` | DRAM 32-bit words -> accumulator rows (master weights, bias rows) |
//! | 12 | `StoreSpad` | scratchpad rows -> DRAM elements (bf16 / i8 activations) |
//! | 13 | `StoreBf16` | accumulator rows (f32) -> DRAM bf16 elements (RNE), one pass |
//!
//! Opcode 0 is reserved so that an all-zero word (an empty FIFO slot, a stuck bus) is an error.

use bitvec::prelude::*;
use fixed::types::I1F31;

use crate::config::{ArrayConfig, Dtype};
use crate::numerics::Requant;

/// Bits in one instruction word.
pub const WORD_BITS: usize = 128;
/// Version of this instruction set; bumped on any change to opcodes, layouts or the configs an
/// instruction is valid on (3: `Scale` and `Axpy` became BF16-only; 4: `Max` and `Equal`; 5:
/// `Add`).
pub const ISA_VERSION: u16 = 5;

/// One encoded instruction.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Word(pub u128);

impl Word {
    pub fn to_le_bytes(self) -> [u8; 16] {
        self.0.to_le_bytes()
    }
    pub fn from_le_bytes(bytes: [u8; 16]) -> Word {
        Word(u128::from_le_bytes(bytes))
    }
}

impl core::fmt::Debug for Word {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Word({:#034x})", self.0)
    }
}

/// Operations of the vector unit. Each processes one accumulator row (C lanes) per cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum VectorOp {
    /// `acc[dst + r] += acc[src]` (one bias row broadcast over `rows` rows).
    BiasAdd,
    /// `acc[dst + r] = max(acc[dst + r], 0)`; NaN stays NaN. `src` and `imm` must be 0.
    Relu,
    /// `acc[dst + r] = acc[src + r] > 0 ? acc[dst + r] : 0` (dst holds the gradient).
    ReluGrad,
    /// `acc[dst + r] *= f32::from_bits(imm)` (BF16 configs only, [`VectorOp::runs_on`]).
    /// `src` must be 0.
    Scale,
    /// `acc[dst + r] += f32::from_bits(imm) * acc[src + r]`, product rounded first (BF16 configs
    /// only).
    Axpy,
    /// `acc[dst + r] = max(acc[dst + r] + acc[src], 0)`: `BiasAdd` then `Relu` in one pass,
    /// with their bits. `imm` must be 0.
    BiasRelu,
    /// `acc[dst + r] = max(acc[dst + r], acc[src + r])`, keeping `dst` on a tie and a NaN in
    /// either (`dst`'s first): a running maximum that remembers the first of equal values, as
    /// PyTorch's max pooling picks them (on INT8, i32 order; BF16 configs, and INT8 ones with
    /// their comparator: [`VectorOp::runs_on`]). `imm` must be 0.
    Max,
    /// `acc[dst + r] = acc[dst + r] == acc[src + r] ? 1.0 : 0.0`, two NaNs equal: a mask that
    /// `ReluGrad` selects by (BF16 configs only). `imm` must be 0.
    Equal,
    /// `acc[dst + r] += acc[src + r]`: `BiasAdd`'s sum (f32, or wrapping i32 on INT8) with a
    /// source row per destination row. Pooling sums its windows' taps with it. `imm` must be 0.
    Add,
}

impl VectorOp {
    pub const ALL: [VectorOp; 9] = [
        VectorOp::BiasAdd,
        VectorOp::Relu,
        VectorOp::ReluGrad,
        VectorOp::Scale,
        VectorOp::Axpy,
        VectorOp::BiasRelu,
        VectorOp::Max,
        VectorOp::Equal,
        VectorOp::Add,
    ];

    pub const fn code(self) -> u8 {
        self as u8
    }
    fn from_code(code: u64) -> Option<VectorOp> {
        VectorOp::ALL.get(code as usize).copied()
    }
    pub const fn uses_src(self) -> bool {
        !matches!(self, VectorOp::Relu | VectorOp::Scale)
    }
    pub const fn uses_imm(self) -> bool {
        matches!(self, VectorOp::Scale | VectorOp::Axpy)
    }
    /// Whether a `config` machine runs this op (else `ProgramErrorKind::Dtype`). A BF16
    /// machine runs every op. An INT8 machine runs no multiplying op, which only SGD needs, so
    /// an INT8 accumulator lane has no multiplier in its path from the accumulators back into
    /// them (docs/DECISIONS.md 52); no `Equal`, which only the pooling gradients need; and
    /// `Max` (max pooling in inference) only where its lanes have their comparator
    /// ([`ArrayConfig::int8_max`], docs/DECISIONS.md 66 and 75).
    pub const fn runs_on(self, config: &ArrayConfig) -> bool {
        match self {
            VectorOp::Scale | VectorOp::Axpy | VectorOp::Equal => {
                matches!(config.dtype, Dtype::Bf16)
            }
            VectorOp::Max => matches!(config.dtype, Dtype::Bf16) || config.int8_max,
            _ => true,
        }
    }
    /// Whether `src` names one row (the bias) rather than a row per destination row.
    pub const fn src_is_one_row(self) -> bool {
        matches!(self, VectorOp::BiasAdd | VectorOp::BiasRelu)
    }
    pub const fn name(self) -> &'static str {
        match self {
            VectorOp::BiasAdd => "bias_add",
            VectorOp::Relu => "relu",
            VectorOp::ReluGrad => "relu_grad",
            VectorOp::Scale => "scale",
            VectorOp::Axpy => "axpy",
            VectorOp::BiasRelu => "bias_relu",
            VectorOp::Max => "max",
            VectorOp::Equal => "equal",
            VectorOp::Add => "add",
        }
    }
}

/// One decoded instruction. Row fields address scratchpad or accumulator rows; DRAM addresses
/// are in bytes and strides in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Instruction {
    /// For `r < rows`, `e < len`: `spad[spad_row + r][e] = dram[dram_addr + (r * row_stride +
    /// e * elem_stride) * elem_bytes]`; elements `len..width` of each row are zeroed.
    Load {
        spad_row: u16,
        dram_addr: u32,
        rows: u16,
        len: u16,
        row_stride: u32,
        elem_stride: u32,
    },
    /// For `r < rows`, `e < len`: the 32-bit word `acc[acc_row + r][e]` goes to
    /// `dram[dram_addr + (r * row_stride + e) * 4]`, little-endian.
    Store {
        acc_row: u16,
        dram_addr: u32,
        rows: u16,
        len: u16,
        row_stride: u32,
    },
    /// Shadow weights `w[i][j] = spad[spad_row + i][j]` for `i < rows`, `j < cols`, zero
    /// elsewhere; the shadow is then full. Weight-stationary only.
    LoadWeights {
        spad_row: u16,
        rows: u16,
        cols: u16,
    },
    /// For each of `rows` scratchpad rows `a`: `out[j] = sum_i a[i] * w[i][j]` (summed top to
    /// bottom from zero), written to (or added into) `acc[acc_row + r]`. With `swap`, the shadow
    /// weights become active first. Weight-stationary only.
    Matmul {
        a_row: u16,
        acc_row: u16,
        rows: u16,
        swap: bool,
        accumulate: bool,
    },
    /// `out[i][j] = sum_k spad[a_row + k][i] * spad[b_row + k][j]` over `k < k`, summed in k
    /// order from zero in each PE, then rows `i < rows` written to (or added into)
    /// `acc[acc_row + i]`, all C columns. `cols` is the number of useful columns.
    /// Output-stationary only.
    MatmulOs {
        a_row: u16,
        b_row: u16,
        k: u16,
        acc_row: u16,
        rows: u16,
        cols: u16,
        accumulate: bool,
    },
    /// A vector-unit op over `rows` accumulator rows.
    Vector {
        op: VectorOp,
        dst: u16,
        src: u16,
        rows: u16,
        imm: u32,
    },
    /// `spad[spad_row + r][j] = bf16(acc[acc_row + r][j])` for `j < cols`, zero beyond.
    CastBf16 {
        acc_row: u16,
        spad_row: u16,
        rows: u16,
    },
    /// `spad[spad_row + r][j] = requant(acc[acc_row + r][j])` for `j < cols`, zero beyond.
    Requantize {
        acc_row: u16,
        spad_row: u16,
        rows: u16,
        requant: Requant,
    },
    Sync,
    Halt,
    /// For `r < rows`: `acc[acc_row + r][e]` = the 32-bit word at
    /// `dram[dram_addr + (r * row_stride + e) * 4]` for `e < len`, zero for `len <= e < cols`.
    LoadAcc {
        acc_row: u16,
        dram_addr: u32,
        rows: u16,
        len: u16,
        row_stride: u32,
    },
    /// For `r < rows`, `e < len`: `spad[spad_row + r][e]` goes to
    /// `dram[dram_addr + (r * row_stride + e) * elem_bytes]`.
    StoreSpad {
        spad_row: u16,
        dram_addr: u32,
        rows: u16,
        len: u16,
        row_stride: u32,
    },
    /// For `r < rows`, `e < len`: `bf16(acc[acc_row + r][e])`, rounded as `CastBf16` rounds, goes
    /// to `dram[dram_addr + (r * row_stride + e) * 2]`, little-endian: a `CastBf16` and a
    /// `StoreSpad` in one pass, without the scratchpad. BF16 configs only.
    StoreBf16 {
        acc_row: u16,
        dram_addr: u32,
        rows: u16,
        len: u16,
        row_stride: u32,
    },
}

/// Instruction kinds, as numbered in the opcode field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Opcode {
    Load = 1,
    Store = 2,
    LoadWeights = 3,
    Matmul = 4,
    MatmulOs = 5,
    Vector = 6,
    CastBf16 = 7,
    Requantize = 8,
    Sync = 9,
    Halt = 10,
    LoadAcc = 11,
    StoreSpad = 12,
    StoreBf16 = 13,
}

/// One field of a layout: its name, width in bits and the values it may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub bits: usize,
    pub min: u64,
    pub max: u64,
}

const fn field(name: &'static str, bits: usize) -> Field {
    Field { name, bits, min: 0, max: (1u64 << bits) - 1 }
}
const fn count(name: &'static str, bits: usize, max: u64) -> Field {
    Field { name, bits, min: 1, max }
}

/// Bits 0..5 of a word hold the opcode; the fields follow, LSB first.
pub const OPCODE_BITS: usize = 5;
const ROWS16: Field = count("rows", 16, 0xFFFF);
const LEN: Field = count("len", 9, 256);
const SIDE_ROWS: Field = count("rows", 9, 256);
const SIDE_COLS: Field = count("cols", 9, 256);

const LOAD: &[Field] = &[
    field("spad_row", 16),
    field("dram_addr", 32),
    ROWS16,
    LEN,
    field("row_stride", 24),
    field("elem_stride", 24),
];
const STORE: &[Field] =
    &[field("acc_row", 16), field("dram_addr", 32), ROWS16, LEN, field("row_stride", 24)];
const LOAD_ACC: &[Field] =
    &[field("acc_row", 16), field("dram_addr", 32), ROWS16, LEN, field("row_stride", 24)];
const STORE_SPAD: &[Field] =
    &[field("spad_row", 16), field("dram_addr", 32), ROWS16, LEN, field("row_stride", 24)];
const LOAD_WEIGHTS: &[Field] = &[field("spad_row", 16), SIDE_ROWS, SIDE_COLS];
const MATMUL: &[Field] =
    &[field("a_row", 16), field("acc_row", 16), ROWS16, field("swap", 1), field("accumulate", 1)];
const MATMUL_OS: &[Field] = &[
    field("a_row", 16),
    field("b_row", 16),
    count("k", 16, 0xFFFF),
    field("acc_row", 16),
    SIDE_ROWS,
    SIDE_COLS,
    field("accumulate", 1),
];
const VECTOR: &[Field] = &[
    Field { name: "op", bits: 4, min: 0, max: VectorOp::ALL.len() as u64 - 1 },
    field("dst", 16),
    field("src", 16),
    ROWS16,
    field("imm", 32),
];
const CAST: &[Field] = &[field("acc_row", 16), field("spad_row", 16), ROWS16];
const REQUANTIZE: &[Field] = &[
    field("acc_row", 16),
    field("spad_row", 16),
    ROWS16,
    field("multiplier", 32),
    Field { name: "shift", bits: 5, min: 0, max: 31 },
    field("zero_point", 8),
];

/// Most fields any layout has.
const MAX_FIELDS: usize = 7;

impl Opcode {
    pub const ALL: [Opcode; 13] = [
        Opcode::Load,
        Opcode::Store,
        Opcode::LoadWeights,
        Opcode::Matmul,
        Opcode::MatmulOs,
        Opcode::Vector,
        Opcode::CastBf16,
        Opcode::Requantize,
        Opcode::Sync,
        Opcode::Halt,
        Opcode::LoadAcc,
        Opcode::StoreSpad,
        Opcode::StoreBf16,
    ];

    pub fn from_code(code: u64) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|op| *op as u64 == code)
    }

    /// The fields after the opcode, LSB first.
    pub const fn layout(self) -> &'static [Field] {
        match self {
            Opcode::Load => LOAD,
            Opcode::Store | Opcode::StoreBf16 => STORE,
            Opcode::LoadWeights => LOAD_WEIGHTS,
            Opcode::Matmul => MATMUL,
            Opcode::MatmulOs => MATMUL_OS,
            Opcode::Vector => VECTOR,
            Opcode::CastBf16 => CAST,
            Opcode::Requantize => REQUANTIZE,
            Opcode::LoadAcc => LOAD_ACC,
            Opcode::StoreSpad => STORE_SPAD,
            Opcode::Sync | Opcode::Halt => &[],
        }
    }

    /// Where the field `name` sits in this opcode's words: its first bit and its width.
    pub fn place(self, name: &str) -> Option<(usize, usize)> {
        let mut at = OPCODE_BITS;
        for f in self.layout() {
            if f.name == name {
                return Some((at, f.bits));
            }
            at += f.bits;
        }
        None
    }

    /// Bits used by the opcode and its fields; all bits above are reserved.
    pub const fn used_bits(self) -> usize {
        let layout = self.layout();
        let mut n = OPCODE_BITS;
        let mut i = 0;
        while i < layout.len() {
            n += layout[i].bits;
            i += 1;
        }
        n
    }

    pub const fn name(self) -> &'static str {
        match self {
            Opcode::Load => "load",
            Opcode::Store => "store",
            Opcode::LoadWeights => "load_weights",
            Opcode::Matmul => "matmul",
            Opcode::MatmulOs => "matmul_os",
            Opcode::Vector => "vector",
            Opcode::CastBf16 => "cast_bf16",
            Opcode::Requantize => "requantize",
            Opcode::Sync => "sync",
            Opcode::Halt => "halt",
            Opcode::LoadAcc => "load_acc",
            Opcode::StoreSpad => "store_spad",
            Opcode::StoreBf16 => "store_bf16",
        }
    }
}

/// Why a word is not a valid instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DecodeError {
    /// The opcode field holds no known opcode.
    Opcode { code: u8 },
    /// A field holds a value outside its range.
    Field { opcode: Opcode, field: &'static str, value: u64, min: u64, max: u64 },
    /// A field this particular operation does not use is not zero.
    UnusedField { opcode: Opcode, field: &'static str, value: u64 },
    /// Bits above the last field are not zero.
    Reserved { opcode: Opcode, first_bit: u8, value: u128 },
}

impl DecodeError {
    /// The fault code a device's decoder gives a word with this error.
    pub fn fault_code(&self) -> crate::fault::FaultCode {
        use crate::fault::FaultCode;
        match self {
            DecodeError::Opcode { .. } => FaultCode::Opcode,
            DecodeError::Field { .. } => FaultCode::Field,
            DecodeError::UnusedField { .. } => FaultCode::UnusedField,
            DecodeError::Reserved { .. } => FaultCode::Reserved,
        }
    }
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            DecodeError::Opcode { code } => write!(
                f,
                "invalid opcode {code} (bits 0..5): valid opcodes are 1 to {}",
                Opcode::ALL.len()
            ),
            DecodeError::Field { opcode, field, value, min, max } => write!(
                f,
                "{}: field `{field}` = {value} is out of range {min}..={max}",
                opcode.name()
            ),
            DecodeError::UnusedField { opcode, field, value } => write!(
                f,
                "{}: field `{field}` = {value} is unused by this operation and must be 0",
                opcode.name()
            ),
            DecodeError::Reserved { opcode, first_bit, value } => write!(
                f,
                "{}: reserved bits {first_bit}..{WORD_BITS} must be zero (hold {value:#x})",
                opcode.name()
            ),
        }
    }
}

/// The word as bitvec sees it: four u32 limbs, least significant first (u32 is a bit store on
/// every target, u64 only on 64-bit ones).
type Bits = BitArray<[u32; 4], Lsb0>;

fn bits_of(word: Word) -> Bits {
    BitArray::new([
        word.0 as u32,
        (word.0 >> 32) as u32,
        (word.0 >> 64) as u32,
        (word.0 >> 96) as u32,
    ])
}

impl Instruction {
    pub const fn opcode(&self) -> Opcode {
        match self {
            Instruction::Load { .. } => Opcode::Load,
            Instruction::Store { .. } => Opcode::Store,
            Instruction::LoadWeights { .. } => Opcode::LoadWeights,
            Instruction::Matmul { .. } => Opcode::Matmul,
            Instruction::MatmulOs { .. } => Opcode::MatmulOs,
            Instruction::Vector { .. } => Opcode::Vector,
            Instruction::CastBf16 { .. } => Opcode::CastBf16,
            Instruction::Requantize { .. } => Opcode::Requantize,
            Instruction::Sync => Opcode::Sync,
            Instruction::Halt => Opcode::Halt,
            Instruction::LoadAcc { .. } => Opcode::LoadAcc,
            Instruction::StoreSpad { .. } => Opcode::StoreSpad,
            Instruction::StoreBf16 { .. } => Opcode::StoreBf16,
        }
    }

    /// The field values in layout order.
    fn field_values(&self) -> heapless::Vec<u64, MAX_FIELDS> {
        let v: &[u64] = match *self {
            Instruction::Load { spad_row, dram_addr, rows, len, row_stride, elem_stride } => &[
                spad_row as u64,
                dram_addr as u64,
                rows as u64,
                len as u64,
                row_stride as u64,
                elem_stride as u64,
            ],
            Instruction::Store { acc_row, dram_addr, rows, len, row_stride }
            | Instruction::StoreBf16 { acc_row, dram_addr, rows, len, row_stride } => {
                &[acc_row as u64, dram_addr as u64, rows as u64, len as u64, row_stride as u64]
            }
            Instruction::LoadWeights { spad_row, rows, cols } => {
                &[spad_row as u64, rows as u64, cols as u64]
            }
            Instruction::Matmul { a_row, acc_row, rows, swap, accumulate } => {
                &[a_row as u64, acc_row as u64, rows as u64, swap as u64, accumulate as u64]
            }
            Instruction::MatmulOs { a_row, b_row, k, acc_row, rows, cols, accumulate } => &[
                a_row as u64,
                b_row as u64,
                k as u64,
                acc_row as u64,
                rows as u64,
                cols as u64,
                accumulate as u64,
            ],
            Instruction::Vector { op, dst, src, rows, imm } => {
                &[op.code() as u64, dst as u64, src as u64, rows as u64, imm as u64]
            }
            Instruction::CastBf16 { acc_row, spad_row, rows } => {
                &[acc_row as u64, spad_row as u64, rows as u64]
            }
            Instruction::Requantize { acc_row, spad_row, rows, requant } => &[
                acc_row as u64,
                spad_row as u64,
                rows as u64,
                requant.multiplier.to_bits() as u32 as u64,
                requant.shift as u64,
                requant.zero_point as u8 as u64,
            ],
            Instruction::LoadAcc { acc_row: row, dram_addr, rows, len, row_stride }
            | Instruction::StoreSpad { spad_row: row, dram_addr, rows, len, row_stride } => {
                &[row as u64, dram_addr as u64, rows as u64, len as u64, row_stride as u64]
            }
            Instruction::Sync | Instruction::Halt => &[],
        };
        heapless::Vec::from_slice(v).unwrap_or_default()
    }

    /// Checks every field against its range (an `Instruction` built by hand can hold values no
    /// word can): what [`decode`] would say of the word this encodes to.
    pub fn check(&self) -> Result<(), DecodeError> {
        decode(encode_unchecked(self)).map(|_| ())
    }
}

fn encode_unchecked(ins: &Instruction) -> Word {
    let op = ins.opcode();
    let mut bits = Bits::ZERO;
    bits[..OPCODE_BITS].store_le(op as u8);
    let mut at = OPCODE_BITS;
    for (f, v) in op.layout().iter().zip(ins.field_values()) {
        // Values wider than the field are truncated here; `encode` rejects them first.
        bits[at..at + f.bits].store_le(v & ((1u64 << f.bits) - 1));
        at += f.bits;
    }
    let limbs = bits.into_inner();
    Word(limbs.iter().rev().fold(0u128, |w, &l| w << 32 | l as u128))
}

/// Encodes one instruction; fails if a field is out of range (see [`Instruction::check`]).
pub fn encode(ins: &Instruction) -> Result<Word, DecodeError> {
    let op = ins.opcode();
    for (f, v) in op.layout().iter().zip(ins.field_values()) {
        if v < f.min || v > f.max {
            return Err(DecodeError::Field {
                opcode: op,
                field: f.name,
                value: v,
                min: f.min,
                max: f.max,
            });
        }
    }
    let word = encode_unchecked(ins);
    decode(word)?; // unused-field rules
    Ok(word)
}

/// Decodes one word, or says which field is wrong.
pub fn decode(word: Word) -> Result<Instruction, DecodeError> {
    let bits = bits_of(word);
    let code: u64 = bits[..OPCODE_BITS].load_le();
    let op = Opcode::from_code(code).ok_or(DecodeError::Opcode { code: code as u8 })?;
    let used = op.used_bits();
    if used < WORD_BITS {
        let reserved = word.0 >> used;
        if reserved != 0 {
            return Err(DecodeError::Reserved {
                opcode: op,
                first_bit: used as u8,
                value: reserved,
            });
        }
    }
    let mut v = [0u64; MAX_FIELDS];
    let mut at = OPCODE_BITS;
    for (i, f) in op.layout().iter().enumerate() {
        let x: u64 = bits[at..at + f.bits].load_le();
        if x < f.min || x > f.max {
            return Err(DecodeError::Field {
                opcode: op,
                field: f.name,
                value: x,
                min: f.min,
                max: f.max,
            });
        }
        v[i] = x;
        at += f.bits;
    }
    Ok(match op {
        Opcode::Load => Instruction::Load {
            spad_row: v[0] as u16,
            dram_addr: v[1] as u32,
            rows: v[2] as u16,
            len: v[3] as u16,
            row_stride: v[4] as u32,
            elem_stride: v[5] as u32,
        },
        Opcode::Store => Instruction::Store {
            acc_row: v[0] as u16,
            dram_addr: v[1] as u32,
            rows: v[2] as u16,
            len: v[3] as u16,
            row_stride: v[4] as u32,
        },
        Opcode::LoadWeights => {
            Instruction::LoadWeights { spad_row: v[0] as u16, rows: v[1] as u16, cols: v[2] as u16 }
        }
        Opcode::Matmul => Instruction::Matmul {
            a_row: v[0] as u16,
            acc_row: v[1] as u16,
            rows: v[2] as u16,
            swap: v[3] == 1,
            accumulate: v[4] == 1,
        },
        Opcode::MatmulOs => Instruction::MatmulOs {
            a_row: v[0] as u16,
            b_row: v[1] as u16,
            k: v[2] as u16,
            acc_row: v[3] as u16,
            rows: v[4] as u16,
            cols: v[5] as u16,
            accumulate: v[6] == 1,
        },
        Opcode::Vector => {
            // In range by the layout check above.
            let vop = VectorOp::from_code(v[0]).unwrap_or(VectorOp::BiasAdd);
            if !vop.uses_src() && v[2] != 0 {
                return Err(DecodeError::UnusedField { opcode: op, field: "src", value: v[2] });
            }
            if !vop.uses_imm() && v[4] != 0 {
                return Err(DecodeError::UnusedField { opcode: op, field: "imm", value: v[4] });
            }
            Instruction::Vector {
                op: vop,
                dst: v[1] as u16,
                src: v[2] as u16,
                rows: v[3] as u16,
                imm: v[4] as u32,
            }
        }
        Opcode::CastBf16 => {
            Instruction::CastBf16 { acc_row: v[0] as u16, spad_row: v[1] as u16, rows: v[2] as u16 }
        }
        Opcode::Requantize => Instruction::Requantize {
            acc_row: v[0] as u16,
            spad_row: v[1] as u16,
            rows: v[2] as u16,
            requant: Requant {
                multiplier: I1F31::from_bits(v[3] as u32 as i32),
                shift: v[4] as u8,
                zero_point: v[5] as u8 as i8,
            },
        },
        Opcode::Sync => Instruction::Sync,
        Opcode::Halt => Instruction::Halt,
        Opcode::LoadAcc => Instruction::LoadAcc {
            acc_row: v[0] as u16,
            dram_addr: v[1] as u32,
            rows: v[2] as u16,
            len: v[3] as u16,
            row_stride: v[4] as u32,
        },
        Opcode::StoreSpad => Instruction::StoreSpad {
            spad_row: v[0] as u16,
            dram_addr: v[1] as u32,
            rows: v[2] as u16,
            len: v[3] as u16,
            row_stride: v[4] as u32,
        },
        Opcode::StoreBf16 => Instruction::StoreBf16 {
            acc_row: v[0] as u16,
            dram_addr: v[1] as u32,
            rows: v[2] as u16,
            len: v[3] as u16,
            row_stride: v[4] as u32,
        },
    })
}

/// Encodes a whole program into `out` (which must be at least as long); returns the words used.
pub fn encode_program<'w>(
    program: &[Instruction],
    out: &'w mut [Word],
) -> Result<&'w [Word], (usize, DecodeError)> {
    for (i, (ins, slot)) in program.iter().zip(out.iter_mut()).enumerate() {
        *slot = encode(ins).map_err(|e| (i, e))?;
    }
    Ok(&out[..program.len().min(out.len())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_fit_the_word() {
        for op in Opcode::ALL {
            assert!(op.used_bits() <= WORD_BITS, "{op:?} uses {} bits", op.used_bits());
            assert!(op.layout().len() <= MAX_FIELDS);
        }
    }

    /// `place` finds each field where `encode` puts it.
    #[test]
    fn places_are_where_encode_puts_the_fields() {
        let load = Instruction::Load {
            spad_row: 0x1234,
            dram_addr: 0xDEAD_BEEF,
            rows: 0xABCD,
            len: 0xA5,
            row_stride: 0x12_3456,
            elem_stride: 0x65_4321,
        };
        let w = encode(&load).unwrap().0;
        let at = |name| {
            let (at, bits) = Opcode::Load.place(name).unwrap();
            (w >> at) as u64 & ((1u64 << bits) - 1)
        };
        assert_eq!(at("spad_row"), 0x1234);
        assert_eq!(at("dram_addr"), 0xDEAD_BEEF);
        assert_eq!(at("rows"), 0xABCD);
        assert_eq!(at("len"), 0xA5);
        assert_eq!(at("row_stride"), 0x12_3456);
        assert_eq!(at("elem_stride"), 0x65_4321);
        assert_eq!(Opcode::Store.place("elem_stride"), None);
        assert_eq!(Opcode::Halt.place("rows"), None);
    }

    #[test]
    fn zero_word_is_rejected() {
        assert_eq!(decode(Word(0)), Err(DecodeError::Opcode { code: 0 }));
    }

    #[test]
    fn round_trip_examples() {
        let prog = [
            Instruction::Load {
                spad_row: 3,
                dram_addr: 0xDEAD_BEEF,
                rows: 7,
                len: 256,
                row_stride: 0xFF_FFFF,
                elem_stride: 1,
            },
            Instruction::Matmul { a_row: 1, acc_row: 2, rows: 3, swap: true, accumulate: false },
            Instruction::Vector { op: VectorOp::Axpy, dst: 1, src: 2, rows: 3, imm: 0xBF80_0000 },
            Instruction::Requantize {
                acc_row: 0,
                spad_row: 1,
                rows: 1,
                requant: Requant { multiplier: I1F31::from_bits(-5), shift: 31, zero_point: -128 },
            },
            Instruction::Halt,
        ];
        for ins in prog {
            let w = encode(&ins).unwrap();
            assert_eq!(decode(w), Ok(ins));
        }
    }

    #[test]
    fn errors_name_the_field() {
        let bad = Instruction::Load {
            spad_row: 0,
            dram_addr: 0,
            rows: 1,
            len: 257,
            row_stride: 0,
            elem_stride: 0,
        };
        assert!(matches!(encode(&bad), Err(DecodeError::Field { field: "len", .. })));
        let relu = Instruction::Vector { op: VectorOp::Relu, dst: 0, src: 5, rows: 1, imm: 0 };
        assert!(matches!(encode(&relu), Err(DecodeError::UnusedField { field: "src", .. })));
        let halt = encode(&Instruction::Halt).unwrap();
        assert!(matches!(decode(Word(halt.0 | 1 << 100)), Err(DecodeError::Reserved { .. })));
    }
}
