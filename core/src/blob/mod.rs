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
//! | 92 | 8 | input image: channels, height, width, zero padding (u16 each; all zero for a vector input) |
//! | 100 | 4 | reserved, zero |
//! | 104 | 16 n | the program: 128-bit instruction words, the last one `Halt` |
//! | | | per DRAM write: address (4), length (4), the bytes, zeros to a multiple of 4 |
//! | end - 4 | 4 | CRC-32 (ISO-HDLC, as zlib's `crc32`) of every byte before it |

mod image;

pub use image::Image;

use crate::config::{ArrayConfig, Dtype};
use crate::isa::{decode, Instruction, Word};
use crate::machine::{check_instruction, ProgramError, ProgramErrorKind};
use crate::protocol::{Identity, ProtocolError, IDENTITY_BYTES};

/// First four bytes of every blob.
pub const MAGIC: [u8; 4] = *b"SYSB";
/// Version of this layout; bumped on any change (2: the input image).
pub const FORMAT_VERSION: u16 = 2;
/// Bytes before the program.
pub const HEADER_BYTES: usize = 104;
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
    /// The input's image shape and padding, for an image model ([`Image`]).
    pub image: Option<Image>,
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
        let [c, h, w, padding] = [92, 94, 96, 98].map(|at| r.u16(at).unwrap_or(0));
        let image = Image::from_fields(c, h, w, padding, input.cols).map_err(field)?;

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
        let input_elements = batch as u64 * image.map_or(input.cols as u64, |i| i.elements());
        if !fits(input.addr, input_elements, input.format.bytes(), dram) {
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
        if r.u32(100) != Some(0) {
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
            image,
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

    /// Values of one inference's input (`batch x features`; an image's channels first).
    pub fn input_len(&self) -> usize {
        self.batch as usize * self.input.cols as usize
    }

    /// Elements of the input buffer in DRAM: [`input_len`](Self::input_len), or for an image
    /// model the batch's images channels-last with their zero borders ([`Image`]).
    pub fn input_elements(&self) -> usize {
        let per_row = self.image.map_or(self.input.cols as u64, |i| i.elements());
        (self.batch as u64 * per_row) as usize
    }

    /// Which input value DRAM element `element` of the input buffer holds (an index into the
    /// `batch x features` input), or `None` for a zero of an image's border.
    pub fn input_source(&self, element: usize) -> Option<usize> {
        let Some(image) = self.image else { return Some(element) };
        let per_row = image.elements() as usize;
        let (row, at) = (element / per_row, element % per_row);
        image.feature_at(at).map(|f| row * self.input.cols as usize + f)
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
mod build;
#[cfg(feature = "alloc")]
pub use build::{build, BuildError};

#[cfg(test)]
mod tests;
