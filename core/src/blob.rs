//! Model blobs: a compiled inference pass and everything it needs, as one byte string that a
//! host builds from trained parameters and a firmware embeds and runs without a heap.
//!
//! A blob holds the accelerator it was compiled for (as the [`Identity`] bytes `Identify`
//! returns, with the DRAM the plan needs), the inference program's instruction words, the DRAM
//! image of the parameters (INT8: i8 weights and i32 biases; BF16: bf16 weights and f32 biases),
//! where the input goes and in what format and scale, and where the logits come from and how to
//! dequantize them. [`Blob::parse`] checks all of it (checksum, every field, every instruction
//! against the blob's own target, every write against its DRAM) and borrows the program and the
//! image from the bytes: nothing is copied.
//!
//! # Layout
//!
//! Little-endian throughout; offsets in bytes.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `SYSB` ([`MAGIC`]) |
//! | 4 | 2 | format version ([`FORMAT_VERSION`]) |
//! | 6 | 2 | header bytes ([`HEADER_BYTES`]) |
//! | 8 | 4 | total bytes of the blob, checksum included |
//! | 12 | 24 | target: [`Identity::to_bytes`] (`dram_bytes` = DRAM the plan needs, FIFO depth 0) |
//! | 36 | 8 | the target's clock in MHz (f64), for turning cycles into time |
//! | 44 | 2 | batch: rows per inference |
//! | 46 | 1 | input format ([`Format`] code: i8 or bf16) |
//! | 47 | 1 | logits format ([`Format`] code: i32 or f32) |
//! | 48 | 4 | input DRAM address |
//! | 52 | 4 | input features per row |
//! | 56 | 4 | input scale (f32: `real = scale * q`; 1 for bf16) |
//! | 60 | 4 | feature scale (f32: a raw feature divided by it is the model's input) |
//! | 64 | 4 | logits DRAM address |
//! | 68 | 4 | classes per row |
//! | 72 | 4 | logits scale (f32: `real = scale * word`; 1 for f32) |
//! | 76 | 8 | cycles of the program by the timing model (= the cycle machine's, the RTL's) |
//! | 84 | 4 | program words |
//! | 88 | 4 | DRAM writes |
//! | 92 | 4 | reserved, zero |
//! | 96 | 16 n | the program: 128-bit instruction words, the last one `Halt` |
//! | | | per DRAM write: address (4), length (4), the bytes, zeros to a multiple of 4 |
//! | end - 4 | 4 | CRC-32 (ISO-HDLC, as zlib's `crc32`) of every byte before it |

use crate::config::{ArrayConfig, Dtype};
use crate::isa::{decode, Instruction, Word};
use crate::machine::{check_instruction, ProgramError, ProgramErrorKind};
use crate::protocol::{Identity, ProtocolError, IDENTITY_BYTES};

/// First four bytes of every blob.
pub const MAGIC: [u8; 4] = *b"SYSB";
/// Version of this layout; bumped on any change.
pub const FORMAT_VERSION: u16 = 1;
/// Bytes before the program.
pub const HEADER_BYTES: usize = 96;
/// The CRC-32 at the end.
pub const CHECKSUM_BYTES: usize = 4;
/// Bytes of one instruction word.
pub const WORD_BYTES: usize = crate::isa::WORD_BITS / 8;

/// How a buffer's elements are stored in DRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Format {
    /// Signed 8-bit integers (INT8 inputs).
    I8,
    /// bfloat16 (BF16 inputs).
    Bf16,
    /// Signed 32-bit accumulators (INT8 logits).
    I32,
    /// f32 accumulators (BF16 logits).
    F32,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::I8, Format::Bf16, Format::I32, Format::F32];

    pub const fn code(self) -> u8 {
        match self {
            Format::I8 => 0,
            Format::Bf16 => 1,
            Format::I32 => 2,
            Format::F32 => 3,
        }
    }
    pub fn from_code(code: u8) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.code() == code)
    }
    /// Bytes of one element.
    pub const fn bytes(self) -> usize {
        match self {
            Format::I8 => 1,
            Format::Bf16 => 2,
            Format::I32 | Format::F32 => 4,
        }
    }
    /// The input format of a `dtype` array.
    pub const fn input_of(dtype: Dtype) -> Format {
        match dtype {
            Dtype::Int8 => Format::I8,
            Dtype::Bf16 => Format::Bf16,
        }
    }
    /// The logits (accumulator) format of a `dtype` array.
    pub const fn logits_of(dtype: Dtype) -> Format {
        match dtype {
            Dtype::Int8 => Format::I32,
            Dtype::Bf16 => Format::F32,
        }
    }
}

/// One DRAM buffer of a blob: `batch` rows of `cols` elements at `addr`, worth `scale` each.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Buffer {
    pub addr: u32,
    pub format: Format,
    /// Elements per row (input features, or classes).
    pub cols: u32,
    /// `real = scale * stored` for integer formats; 1 for floating-point ones.
    pub scale: f32,
}

/// One write of the DRAM image, borrowed from the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DramWrite<'a> {
    pub addr: u32,
    pub data: &'a [u8],
}

/// A parsed, checked blob. Borrows the program and the DRAM image from the bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Blob<'a> {
    /// The accelerator the program was compiled for; `dram_bytes` is the DRAM it needs.
    pub target: Identity,
    /// Rows per inference.
    pub batch: u16,
    pub input: Buffer,
    /// What each raw feature is divided by to give the model's input (16 for digits).
    pub feature_scale: f32,
    pub logits: Buffer,
    /// Cycles of the program by the timing model, which the cycle machine and the RTL equal.
    pub expected_cycles: u64,
    program: &'a [u8],
    writes: &'a [u8],
    write_count: u32,
}

/// Why bytes are not a valid blob.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BlobError {
    /// Fewer bytes than the header and checksum, or than the header's total announces.
    Truncated { needed: usize, got: usize },
    /// The first four bytes are not [`MAGIC`].
    Magic,
    /// A layout version this code does not read.
    Version { found: u16 },
    /// More bytes than the header's total announces.
    Length { announced: usize, got: usize },
    /// The CRC-32 does not match the bytes.
    Checksum { expected: u32, got: u32 },
    /// The target is not a buildable accelerator.
    Target(ProtocolError),
    /// A header field is out of range or disagrees with the target; names the field.
    Field { field: &'static str },
    /// An instruction word is invalid, or invalid for the blob's own target.
    Program(ProgramError),
    /// DRAM write `index` runs past the blob's bytes or the target's DRAM.
    Write { index: u32 },
}

impl core::fmt::Display for BlobError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            BlobError::Truncated { needed, got } => {
                write!(f, "blob of {got} bytes is truncated: it needs {needed}")
            }
            BlobError::Magic => write!(f, "not a model blob (no SYSB magic)"),
            BlobError::Version { found } => {
                write!(f, "blob format version {found}; this build reads version {FORMAT_VERSION}")
            }
            BlobError::Length { announced, got } => {
                write!(f, "blob of {got} bytes, its header announces {announced}")
            }
            BlobError::Checksum { expected, got } => {
                write!(f, "blob checksum {got:#010x} does not match its bytes' {expected:#010x}")
            }
            BlobError::Target(e) => write!(f, "blob target: {e}"),
            BlobError::Field { field } => write!(f, "blob header field `{field}` is invalid"),
            BlobError::Program(e) => write!(f, "blob program: {e}"),
            BlobError::Write { index } => {
                write!(f, "blob DRAM write {index} runs past the blob or the target's DRAM")
            }
        }
    }
}

/// CRC-32/ISO-HDLC (reflected polynomial 0xEDB88320, initial value and final xor all ones), as
/// zlib's `crc32` and Python's `zlib.crc32`; check value of "123456789": 0xCBF43926.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = u32::MAX;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Little-endian field reads that cannot go out of bounds (`None` past the end).
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn bytes<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.0.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    fn u8(&self, at: usize) -> Option<u8> {
        self.0.get(at).copied()
    }
    fn u16(&self, at: usize) -> Option<u16> {
        self.bytes(at).map(u16::from_le_bytes)
    }
    fn u32(&self, at: usize) -> Option<u32> {
        self.bytes(at).map(u32::from_le_bytes)
    }
    fn u64(&self, at: usize) -> Option<u64> {
        self.bytes(at).map(u64::from_le_bytes)
    }
    fn f32(&self, at: usize) -> Option<f32> {
        self.u32(at).map(f32::from_bits)
    }
    fn f64(&self, at: usize) -> Option<f64> {
        self.u64(at).map(f64::from_bits)
    }
    fn slice(&self, at: usize, len: usize) -> Option<&'a [u8]> {
        self.0.get(at..at.checked_add(len)?)
    }
}

fn positive(x: f32) -> bool {
    x.is_finite() && x > 0.0
}

/// `count` elements of `bytes` each from `addr` fit in `dram` bytes.
fn fits(addr: u32, count: u64, bytes: usize, dram: u32) -> bool {
    count
        .checked_mul(bytes as u64)
        .and_then(|n| n.checked_add(addr as u64))
        .is_some_and(|end| end <= dram as u64)
}

/// Bytes a DRAM write of `len` takes in the blob: its 8-byte head and the data padded to 4.
fn write_record_bytes(len: usize) -> Option<usize> {
    len.checked_add(3).map(|n| n / 4 * 4)?.checked_add(8)
}

impl<'a> Blob<'a> {
    /// Parses and checks a blob (see the module docs for what is checked).
    pub fn parse(bytes: &'a [u8]) -> Result<Blob<'a>, BlobError> {
        let short =
            BlobError::Truncated { needed: HEADER_BYTES + CHECKSUM_BYTES, got: bytes.len() };
        let r = Reader(bytes);
        let magic: [u8; 4] = r.bytes(0).ok_or(short)?;
        if magic != MAGIC {
            return Err(BlobError::Magic);
        }
        let version = r.u16(4).ok_or(short)?;
        if version != FORMAT_VERSION {
            return Err(BlobError::Version { found: version });
        }
        if bytes.len() < HEADER_BYTES + CHECKSUM_BYTES {
            return Err(short);
        }
        let field = |field| BlobError::Field { field };
        if r.u16(6) != Some(HEADER_BYTES as u16) {
            return Err(field("header bytes"));
        }
        let announced = r.u32(8).ok_or(short)? as usize;
        if announced > bytes.len() {
            return Err(BlobError::Truncated { needed: announced, got: bytes.len() });
        }
        if announced < bytes.len() {
            return Err(BlobError::Length { announced, got: bytes.len() });
        }
        let body = bytes.len() - CHECKSUM_BYTES;
        let stored = r.u32(body).ok_or(short)?;
        let computed = crc32(bytes.get(..body).ok_or(short)?);
        if stored != computed {
            return Err(BlobError::Checksum { expected: computed, got: stored });
        }

        // Every offset below is inside the checked header.
        let clock_mhz = r.f64(36).ok_or(short)?;
        let identity: [u8; IDENTITY_BYTES] = r.bytes(12).ok_or(short)?;
        let target = Identity::from_bytes(&identity, clock_mhz).map_err(BlobError::Target)?;
        let config = target.config;
        let batch = r.u16(44).ok_or(short)?;
        let input_format = r.u8(46).and_then(Format::from_code);
        let logits_format = r.u8(47).and_then(Format::from_code);
        let input = Buffer {
            addr: r.u32(48).ok_or(short)?,
            format: input_format.ok_or(field("input format"))?,
            cols: r.u32(52).ok_or(short)?,
            scale: r.f32(56).ok_or(short)?,
        };
        let feature_scale = r.f32(60).ok_or(short)?;
        let logits = Buffer {
            addr: r.u32(64).ok_or(short)?,
            format: logits_format.ok_or(field("logits format"))?,
            cols: r.u32(68).ok_or(short)?,
            scale: r.f32(72).ok_or(short)?,
        };
        let expected_cycles = r.u64(76).ok_or(short)?;
        let words = r.u32(84).ok_or(short)? as usize;
        let write_count = r.u32(88).ok_or(short)?;

        if batch == 0 {
            return Err(field("batch"));
        }
        if input.format != Format::input_of(config.dtype) {
            return Err(field("input format"));
        }
        if logits.format != Format::logits_of(config.dtype) {
            return Err(field("logits format"));
        }
        let dram = target.dram_bytes;
        if input.cols == 0 {
            return Err(field("input features"));
        }
        if !fits(input.addr, batch as u64 * input.cols as u64, input.format.bytes(), dram) {
            return Err(field("input address"));
        }
        if logits.cols == 0
            || !fits(logits.addr, batch as u64 * logits.cols as u64, logits.format.bytes(), dram)
        {
            return Err(field("logits address"));
        }
        if !positive(input.scale) {
            return Err(field("input scale"));
        }
        if !positive(logits.scale) {
            return Err(field("logits scale"));
        }
        if !positive(feature_scale) {
            return Err(field("feature scale"));
        }
        if r.u32(92) != Some(0) {
            return Err(field("reserved"));
        }

        let program_bytes = words.checked_mul(WORD_BYTES).ok_or(field("program words"))?;
        let writes_at = HEADER_BYTES.checked_add(program_bytes).ok_or(field("program words"))?;
        if words == 0 || writes_at > body {
            return Err(field("program words"));
        }
        let program = r.slice(HEADER_BYTES, program_bytes).ok_or(short)?;
        check_program(&config, program, dram as usize)?;

        let writes = r.slice(writes_at, body - writes_at).ok_or(short)?;
        let blob = Blob {
            target,
            batch,
            input,
            feature_scale,
            logits,
            expected_cycles,
            program,
            writes,
            write_count,
        };
        // Every write inside the blob and the target's DRAM, and nothing after the last one.
        let mut used = 0usize;
        let mut it = blob.writes();
        for index in 0..write_count {
            let w = it.next().ok_or(BlobError::Write { index })?;
            if w.data.is_empty() || !fits(w.addr, w.data.len() as u64, 1, dram) {
                return Err(BlobError::Write { index });
            }
            let record = write_record_bytes(w.data.len()).ok_or(BlobError::Write { index })?;
            // The padding is zeros, so a blob has one byte string (`to_bytes` gives it back).
            let padding = writes.get(used + 8 + w.data.len()..used + record);
            if padding.is_none_or(|p| p.iter().any(|&b| b != 0)) {
                return Err(BlobError::Write { index });
            }
            used += record;
        }
        if used != writes.len() {
            return Err(field("DRAM writes"));
        }
        Ok(blob)
    }

    /// The program as little-endian 128-bit words, `Halt` last: what `WriteInstructions` sends.
    pub fn program(&self) -> &'a [u8] {
        self.program
    }

    /// Instruction words in the program.
    pub fn program_words(&self) -> usize {
        self.program.len() / WORD_BYTES
    }

    /// The DRAM image, in order.
    pub fn writes(&self) -> DramWrites<'a> {
        DramWrites { rest: self.writes, left: self.write_count }
    }

    /// Elements of one inference's input (`batch x features`).
    pub fn input_len(&self) -> usize {
        self.batch as usize * self.input.cols as usize
    }

    /// Values of one inference's logits (`batch x classes`).
    pub fn logits_len(&self) -> usize {
        self.batch as usize * self.logits.cols as usize
    }

    /// The array config the program was compiled for.
    pub fn config(&self) -> &ArrayConfig {
        &self.target.config
    }
}

/// Checks every word: it decodes, it is valid for `config` and `dram`, and only the last is
/// `Halt` (the controller stops at the first one).
fn check_program(config: &ArrayConfig, program: &[u8], dram: usize) -> Result<(), BlobError> {
    let words = program.len() / WORD_BYTES;
    for (index, chunk) in program.chunks_exact(WORD_BYTES).enumerate() {
        let error = |kind| BlobError::Program(ProgramError { index, kind });
        let bytes: [u8; WORD_BYTES] =
            chunk.try_into().map_err(|_| error(ProgramErrorKind::NoHalt))?;
        let ins =
            decode(Word::from_le_bytes(bytes)).map_err(|e| error(ProgramErrorKind::Encoding(e)))?;
        check_instruction(config, &ins, dram).map_err(error)?;
        if (ins == Instruction::Halt) != (index + 1 == words) {
            return Err(error(ProgramErrorKind::NoHalt));
        }
    }
    Ok(())
}

/// Iterator over a blob's DRAM writes (see [`Blob::writes`]).
#[derive(Clone, Debug)]
pub struct DramWrites<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for DramWrites<'a> {
    type Item = DramWrite<'a>;

    fn next(&mut self) -> Option<DramWrite<'a>> {
        if self.left == 0 {
            return None;
        }
        let r = Reader(self.rest);
        let addr = r.u32(0)?;
        let len = r.u32(4)? as usize;
        let data = r.slice(8, len)?;
        let record = write_record_bytes(len)?;
        self.rest = self.rest.get(record..)?;
        self.left -= 1;
        Some(DramWrite { addr, data })
    }
}

#[cfg(feature = "alloc")]
pub use build::{build, BuildError};

#[cfg(feature = "alloc")]
mod build {
    extern crate alloc;
    use alloc::vec::Vec;

    use super::*;
    use crate::compile::{compile_inference, CompileError, Int8Plan};
    use crate::graph::{Graph, GraphError, MlpSpec};
    use crate::isa::{encode, ISA_VERSION};
    use crate::params::Params;
    use crate::train::{bf16_bytes, word_bytes};

    /// Why a blob cannot be built.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum BuildError {
        Graph(GraphError),
        Compile(CompileError),
        /// Layer `layer` of the parameters does not have the spec's shape.
        Params {
            layer: usize,
        },
        /// The INT8 plan does not have one scale per layer.
        Plan,
        /// The batch is 0, or the feature scale not finite and > 0.
        Field {
            field: &'static str,
        },
        /// The memory plan needs more than 4 GiB.
        Dram {
            needed: usize,
        },
    }

    impl core::fmt::Display for BuildError {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            match self {
                BuildError::Graph(e) => write!(f, "model: {e}"),
                BuildError::Compile(e) => write!(f, "compile: {e}"),
                BuildError::Params { layer } => {
                    write!(f, "layer {layer}'s parameters do not match the model's widths")
                }
                BuildError::Plan => write!(f, "the INT8 plan does not match the model's layers"),
                BuildError::Field { field } => write!(f, "{field} is out of range"),
                BuildError::Dram { needed } => {
                    write!(f, "the memory plan needs {needed} bytes of DRAM, over 4 GiB")
                }
            }
        }
    }

    fn push_u16(out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fn push_u32(out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&v.to_le_bytes());
    }

    /// The header fields of a blob, as [`Blob`] holds them.
    struct Header {
        target: Identity,
        batch: u16,
        input: Buffer,
        feature_scale: f32,
        logits: Buffer,
        expected_cycles: u64,
    }

    /// The bytes of a blob: header, program words, DRAM writes, CRC-32 (the module's layout).
    /// [`build`] and [`Blob::to_bytes`] both write through here, so a parsed blob re-serialises
    /// to the bytes it was parsed from.
    fn assemble<'a>(
        h: &Header,
        program: &[u8],
        writes: impl ExactSizeIterator<Item = DramWrite<'a>>,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        push_u16(&mut out, FORMAT_VERSION);
        push_u16(&mut out, HEADER_BYTES as u16);
        push_u32(&mut out, 0); // total, filled in below
        out.extend_from_slice(&h.target.to_bytes());
        out.extend_from_slice(&h.target.config.clock_mhz.to_le_bytes());
        push_u16(&mut out, h.batch);
        out.push(h.input.format.code());
        out.push(h.logits.format.code());
        push_u32(&mut out, h.input.addr);
        push_u32(&mut out, h.input.cols);
        push_u32(&mut out, h.input.scale.to_bits());
        push_u32(&mut out, h.feature_scale.to_bits());
        push_u32(&mut out, h.logits.addr);
        push_u32(&mut out, h.logits.cols);
        push_u32(&mut out, h.logits.scale.to_bits());
        out.extend_from_slice(&h.expected_cycles.to_le_bytes());
        push_u32(&mut out, (program.len() / WORD_BYTES) as u32);
        push_u32(&mut out, writes.len() as u32);
        push_u32(&mut out, 0);
        debug_assert_eq!(out.len(), HEADER_BYTES);
        out.extend_from_slice(program);
        for w in writes {
            push_u32(&mut out, w.addr);
            push_u32(&mut out, w.data.len() as u32);
            out.extend_from_slice(w.data);
            out.resize(out.len().div_ceil(4) * 4, 0);
        }
        let total = (out.len() + CHECKSUM_BYTES) as u32;
        out[8..12].copy_from_slice(&total.to_le_bytes());
        let crc = crc32(&out);
        push_u32(&mut out, crc);
        out
    }

    impl Blob<'_> {
        /// The blob's bytes, written again from its fields: for any `bytes` that
        /// [`Blob::parse`] accepts, `parse(bytes)?.to_bytes() == bytes`.
        pub fn to_bytes(&self) -> Vec<u8> {
            let header = Header {
                target: self.target,
                batch: self.batch,
                input: self.input,
                feature_scale: self.feature_scale,
                logits: self.logits,
                expected_cycles: self.expected_cycles,
            };
            let writes: Vec<DramWrite<'_>> = self.writes().collect();
            assemble(&header, self.program, writes.into_iter())
        }
    }

    /// The blob of one inference pass of `batch` rows of the MLP `spec` with `params` on
    /// `config`: INT8 with `int8` (weights and inputs quantized by the plan), else BF16. The
    /// program is `compile_inference`'s and the DRAM image is exactly what [`Int8Inference`]
    /// (or [`AccelTrainer`]) writes, so the blob's logits equal theirs bit for bit.
    ///
    /// [`Int8Inference`]: crate::train::Int8Inference
    /// [`AccelTrainer`]: crate::train::AccelTrainer
    pub fn build(
        spec: &MlpSpec,
        params: &Params,
        config: &ArrayConfig,
        batch: u16,
        int8: Option<&Int8Plan>,
        feature_scale: f32,
    ) -> Result<Vec<u8>, BuildError> {
        if batch == 0 {
            return Err(BuildError::Field { field: "batch" });
        }
        if !positive(feature_scale) {
            return Err(BuildError::Field { field: "feature scale" });
        }
        let graph = Graph::mlp(spec).map_err(BuildError::Graph)?;
        let widths: Vec<u32> = spec.widths().collect();
        if params.layers.len() != graph.params.len() {
            return Err(BuildError::Params { layer: params.layers.len().min(graph.params.len()) });
        }
        for (layer, (p, pair)) in params.layers.iter().zip(widths.windows(2)).enumerate() {
            let (fan_in, fan_out) = (pair[0], pair[1]);
            let n = fan_in as usize * fan_out as usize;
            if p.fan_in != fan_in
                || p.fan_out != fan_out
                || p.weight.len() != n
                || p.bias.len() != fan_out as usize
            {
                return Err(BuildError::Params { layer });
            }
        }
        if let Some(plan) = int8 {
            let layers = params.layers.len();
            if plan.input_scales.len() != layers
                || plan.weight_scales.len() != layers
                || plan.requant.len() + 1 != layers
            {
                return Err(BuildError::Plan);
            }
        }
        let step =
            compile_inference(&graph, config, batch as u32, int8).map_err(BuildError::Compile)?;
        let dram_bytes = u32::try_from(step.dram_bytes)
            .map_err(|_| BuildError::Dram { needed: step.dram_bytes })?;
        let elems = |t: u8| step.buffers[t as usize].elems.unwrap_or(0);
        let words = |t: u8| step.buffers[t as usize].words.unwrap_or(0);

        let mut writes: Vec<(u32, Vec<u8>)> = Vec::new();
        for (l, &(w, b)) in graph.params.iter().enumerate() {
            let layer = &params.layers[l];
            match int8 {
                Some(plan) => {
                    writes.push((elems(w), plan.weight_bytes(l, params)));
                    writes.push((words(b), word_bytes(plan.bias_words(l, params).into_iter())));
                }
                None => {
                    writes.push((elems(w), bf16_bytes(&layer.weight)));
                    writes.push((words(b), word_bytes(layer.bias.iter().map(|x| x.to_bits()))));
                }
            }
        }
        let target =
            Identity { isa_version: ISA_VERSION, config: *config, dram_bytes, fifo_depth: 0 };
        let input = Buffer {
            addr: elems(graph.input),
            format: Format::input_of(config.dtype),
            cols: spec.inputs,
            scale: int8.map_or(1.0, |p| p.input_scales[0]),
        };
        let logits = Buffer {
            addr: words(graph.logits),
            format: Format::logits_of(config.dtype),
            cols: spec.classes,
            scale: int8.map_or(1.0, |p| p.logits_scale()),
        };

        let mut program = Vec::with_capacity(step.forward.len() * WORD_BYTES);
        for ins in &step.forward {
            // The compiler emits only valid instructions, and a valid instruction encodes.
            let word = encode(ins).map_err(|_| {
                BuildError::Compile(CompileError::Unsupported {
                    op: "an instruction that does not encode",
                })
            })?;
            program.extend_from_slice(&word.to_le_bytes());
        }
        let header = Header {
            target,
            batch,
            input,
            feature_scale,
            logits,
            expected_cycles: step.forward_cycles,
        };
        let writes = writes.iter().map(|(addr, data)| DramWrite { addr: *addr, data });
        let out = assemble(&header, &program, writes);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    extern crate alloc;
    use alloc::vec::Vec;

    use super::*;
    use crate::compile::Int8Plan;
    use crate::graph::MlpSpec;
    use crate::params::Params;

    fn spec() -> MlpSpec {
        MlpSpec { inputs: 12, hidden: heapless::Vec::from_slice(&[9]).unwrap(), classes: 4 }
    }

    fn sample(dtype: Dtype) -> Vec<u8> {
        let spec = spec();
        let params = Params::init(&spec, 7);
        let config = ArrayConfig::new(4, 4, dtype);
        let x: Vec<f32> = (0..24).map(|i| libm::sinf(i as f32 * 0.37)).collect();
        let graph = crate::graph::Graph::mlp(&spec).unwrap();
        let plan = Int8Plan::calibrate(&graph, &params, &x, 2).unwrap();
        let int8 = (dtype == Dtype::Int8).then_some(&plan);
        build(&spec, &params, &config, 2, int8, 16.0).unwrap()
    }

    /// Rewrites the checksum after a deliberate edit, so the field checks behind it are reached.
    fn reseal(b: &mut [u8]) {
        let body = b.len() - CHECKSUM_BYTES;
        let crc = crc32(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn parsed_blobs_reserialise_to_their_bytes() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let bytes = sample(dtype);
            assert_eq!(Blob::parse(&bytes).unwrap().to_bytes(), bytes, "{dtype:?}");
        }
    }

    /// The padding after a DRAM write was not checked, so two byte strings parsed to the same
    /// blob and `to_bytes` did not give back the one that was parsed.
    #[test]
    fn nonzero_write_padding_is_refused() {
        // INT8 weights of a 3 x 3 layer: 9 bytes, 3 of padding.
        let spec =
            MlpSpec { inputs: 3, hidden: heapless::Vec::from_slice(&[3]).unwrap(), classes: 3 };
        let params = Params::init(&spec, 1);
        let graph = crate::graph::Graph::mlp(&spec).unwrap();
        let x = [0.5f32, -0.25, 1.0, 0.1, 0.2, -0.3];
        let plan = Int8Plan::calibrate(&graph, &params, &x, 2).unwrap();
        let config = ArrayConfig::new(4, 4, Dtype::Int8);
        let mut bytes = build(&spec, &params, &config, 1, Some(&plan), 1.0).unwrap();
        let blob = Blob::parse(&bytes).unwrap();
        let at = HEADER_BYTES + blob.program().len();
        let (first, len) = blob
            .writes()
            .enumerate()
            .find(|(_, w)| w.data.len() % 4 != 0)
            .map(|(i, w)| (i, w.data.len()))
            .expect("a write whose length is not a multiple of 4");
        let record_at: usize = at
            + blob
                .writes()
                .take(first)
                .map(|w| write_record_bytes(w.data.len()).unwrap())
                .sum::<usize>();
        bytes[record_at + 8 + len] = 1;
        reseal(&mut bytes);
        assert_eq!(Blob::parse(&bytes), Err(BlobError::Write { index: first as u32 }));
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn built_blobs_parse_with_their_fields() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let bytes = sample(dtype);
            let blob = Blob::parse(&bytes).unwrap();
            assert_eq!(blob.target.config, ArrayConfig::new(4, 4, dtype));
            assert_eq!(blob.batch, 2);
            assert_eq!((blob.input.cols, blob.logits.cols), (12, 4));
            assert_eq!(blob.input.format, Format::input_of(dtype));
            assert_eq!(blob.feature_scale, 16.0);
            assert_eq!(blob.writes().count(), 4);
            assert!(blob.expected_cycles > 0);
            let last = &blob.program()[blob.program().len() - WORD_BYTES..];
            let last = decode(Word::from_le_bytes(last.try_into().unwrap())).unwrap();
            assert_eq!(last, Instruction::Halt);
            // Layer 0's weights: 12 x 9 elements.
            let w0 = blob.writes().next().unwrap();
            assert_eq!(w0.data.len(), 12 * 9 * dtype.elem_bytes());
        }
    }

    /// Every single corrupted byte, every truncation and one extension are rejected.
    #[test]
    fn every_corruption_is_rejected() {
        let mut bytes = sample(Dtype::Int8);
        for at in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xFF] {
                bytes[at] ^= flip;
                assert!(Blob::parse(&bytes).is_err(), "byte {at} ^ {flip:#x} accepted");
                bytes[at] ^= flip;
            }
        }
        for cut in 0..bytes.len() {
            assert!(Blob::parse(&bytes[..cut]).is_err(), "{cut} bytes accepted");
        }
        bytes.push(0);
        assert!(matches!(Blob::parse(&bytes), Err(BlobError::Length { .. })));
    }

    #[test]
    fn bad_fields_are_named() {
        let good = sample(Dtype::Int8);
        let edit = |at: usize, v: &[u8]| {
            let mut b = good.clone();
            b[at..at + v.len()].copy_from_slice(v);
            reseal(&mut b);
            Blob::parse(&b).unwrap_err()
        };
        assert_eq!(edit(0, b"SYSC"), BlobError::Magic);
        assert_eq!(edit(4, &2u16.to_le_bytes()), BlobError::Version { found: 2 });
        assert_eq!(edit(44, &0u16.to_le_bytes()), BlobError::Field { field: "batch" });
        assert_eq!(edit(46, &[1]), BlobError::Field { field: "input format" });
        assert_eq!(edit(47, &[9]), BlobError::Field { field: "logits format" });
        assert_eq!(
            edit(56, &f32::NAN.to_bits().to_le_bytes()),
            BlobError::Field { field: "input scale" }
        );
        assert_eq!(edit(64, &u32::MAX.to_le_bytes()), BlobError::Field { field: "logits address" });
        assert_eq!(edit(92, &[1]), BlobError::Field { field: "reserved" });
        assert!(matches!(edit(12 + 2, &0u16.to_le_bytes()), BlobError::Target(_)));
        // The first instruction word made all-zero: opcode 0.
        assert!(matches!(
            edit(HEADER_BYTES, &[0; 16]),
            BlobError::Program(ProgramError { index: 0, kind: ProgramErrorKind::Encoding(_) })
        ));
        // A target with less DRAM than the image: a write no longer fits.
        let dram = Blob::parse(&good).unwrap().target.dram_bytes;
        let e = edit(12 + 16, &(dram / 2).to_le_bytes());
        assert!(
            matches!(e, BlobError::Program(_) | BlobError::Field { .. } | BlobError::Write { .. }),
            "{e:?}"
        );
        let mut wrong_crc = good.clone();
        let n = wrong_crc.len();
        wrong_crc[n - 1] ^= 1;
        assert!(matches!(Blob::parse(&wrong_crc), Err(BlobError::Checksum { .. })));
    }

    #[test]
    fn build_refuses_mismatched_params() {
        let spec = spec();
        let mut params = Params::init(&spec, 1);
        params.layers[1].bias.pop();
        let config = ArrayConfig::new(4, 4, Dtype::Bf16);
        assert_eq!(
            build(&spec, &params, &config, 1, None, 1.0),
            Err(BuildError::Params { layer: 1 })
        );
        let params = Params::init(&spec, 1);
        assert_eq!(
            build(&spec, &params, &config, 0, None, 1.0),
            Err(BuildError::Field { field: "batch" })
        );
        let int8 = ArrayConfig::new(4, 4, Dtype::Int8);
        assert!(matches!(build(&spec, &params, &int8, 1, None, 1.0), Err(BuildError::Compile(_))));
    }
}
