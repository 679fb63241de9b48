//! The host link: one packet protocol, spoken over SPI (an MCU) and over a UART (a PC), shared by
//! the hardware's host interface, the firmware driver and the host.
//!
//! # Framing
//!
//! A request (host -> accelerator) and a response (accelerator -> host) have the same frame:
//!
//! ```text
//! sync  kind  len_lo len_hi  payload[len]  crc_hi crc_lo
//! ```
//!
//! * `sync` is [`REQUEST_SYNC`] (`0xA5`) on requests and [`RESPONSE_SYNC`] (`0x5A`) on responses.
//! * `kind` is a [`Command`] code on requests and a response code on responses (0 = OK, else an
//!   [`ErrorCode`]).
//! * `len` is the payload length in bytes, little-endian, at most [`MAX_PAYLOAD`].
//! * The checksum is CRC-16/CCITT-FALSE ([`crc16`]: polynomial 0x1021, initial value 0xFFFF, no
//!   reflection, no final xor) over `kind`, `len` and the payload, sent most significant byte
//!   first. It detects every error burst up to 16 bits long, so every single corrupted byte.
//!
//! A request whose frame, checksum or fields are wrong is answered with an error response and
//! never executed: the accelerator buffers the whole packet and checks the CRC before acting.
//!
//! # Commands
//!
//! | code | command | request payload | response payload |
//! |---|---|---|---|
//! | 1 | `WriteInstructions` | n x 16-byte instruction words (LE), 1 <= n <= 16 | none |
//! | 2 | `WriteMemory` | region (1), byte address (4, LE), data (1..=[`MAX_DATA`] bytes) | none |
//! | 3 | `ReadMemory` | region (1), byte address (4, LE), length (2, LE, 1..=[`MAX_DATA`]) | the bytes |
//! | 4 | `ReadStatus` | none | [`Status`], [`STATUS_BYTES`] bytes |
//! | 5 | `Run` | none | none |
//! | 6 | `Reset` | none | none |
//! | 7 | `Identify` | none | [`Identity`], [`IDENTITY_BYTES`] bytes |
//!
//! Instruction words go into the controller's FIFO; `Run` starts dispatching them (the cycle
//! counter restarts at the first dispatch) until `Halt`, which raises `done`. `Reset` empties the
//! FIFO and clears the status; memories keep their contents. Memory commands are refused with
//! [`ErrorCode::Busy`] while a program runs. Spad addresses must be aligned to the element size
//! and accumulator addresses to 4 bytes, lengths likewise ([`ErrorCode::Misaligned`]).
//! `Identify` says what the accelerator is (ISA version, array, memories), so a host or a
//! firmware refuses to drive an accelerator built for another config, and how much data one
//! memory command may move on it ([`Identity::max_data`]): [`MAX_DATA`], or [`BASE_DATA`] on a
//! device built before large requests (RTL revisions 1 to 4), which refuses a longer one with
//! [`ErrorCode::Length`]. A host moves large transfers in requests of the device's size.
//!
//! # Over a UART
//!
//! 8N1 at the baud rate in the manifest. The host sends a request frame; the device answers each
//! request frame with exactly one response frame. A receiver discards bytes until a sync byte.
//!
//! # Over SPI
//!
//! Mode 0 (CPOL = 0, CPHA = 0), MSB first, chip select active low. The host sends a request
//! frame in one transaction (MISO carries [`SPI_IDLE`] meanwhile). It then reads the response by
//! polling: each poll clocks out [`SPI_FILLER`] bytes and reads MISO, where the device sends
//! [`SPI_IDLE`] until its response is ready, then [`RESPONSE_SYNC`] and the rest of the frame,
//! one byte per byte clocked, continuing across as many transactions as the host uses. The
//! host gives up after a bounded number of polls.

use crate::fault::Region;
pub use crate::fault::{ErrorCode, FaultCode, ProtocolError};

/// First byte of every request.
pub const REQUEST_SYNC: u8 = 0xA5;
/// First byte of every response.
pub const RESPONSE_SYNC: u8 = 0x5A;
/// Sync, kind, two length bytes.
pub const HEADER_BYTES: usize = 4;
/// The CRC at the end of a frame.
pub const CRC_BYTES: usize = 2;
/// Most data bytes one memory command moves: a `WriteMemory`'s payload (5 bytes and the data)
/// fills the hardware's 2 KiB request buffer but for three bytes, and the data is a multiple of
/// 8 bytes, so every region's alignment (docs/DECISIONS.md 140). A device says whether it takes
/// this many ([`Identity::max_data`]).
pub const MAX_DATA: usize = 2048 - 8;
/// Most data bytes one memory command moves on every device: those built before large requests
/// take no more, and the firmware's driver, whose buffers must stay small, moves this many.
pub const BASE_DATA: usize = 256;
/// Most instruction words in one `WriteInstructions`.
pub const MAX_WORDS: usize = 16;
/// Largest payload: a `WriteMemory` of [`MAX_DATA`] bytes (region, address, data).
pub const MAX_PAYLOAD: usize = 5 + MAX_DATA;
/// Largest frame.
pub const MAX_FRAME: usize = HEADER_BYTES + MAX_PAYLOAD + CRC_BYTES;
/// Largest payload on every device: a `WriteMemory` of [`BASE_DATA`] bytes.
pub const BASE_PAYLOAD: usize = 5 + BASE_DATA;
/// Largest frame on every device.
pub const BASE_FRAME: usize = HEADER_BYTES + BASE_PAYLOAD + CRC_BYTES;
/// Bytes of an encoded [`Status`].
pub const STATUS_BYTES: usize = 12;
/// Bytes of an encoded [`Identity`].
pub const IDENTITY_BYTES: usize = 24;
/// What the device drives on MISO when it has nothing to send.
pub const SPI_IDLE: u8 = 0xFF;
/// What the host drives on MOSI while it reads.
pub const SPI_FILLER: u8 = 0x00;

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Command {
    WriteInstructions = 1,
    WriteMemory = 2,
    ReadMemory = 3,
    ReadStatus = 4,
    Run = 5,
    Reset = 6,
    Identify = 7,
}

impl Command {
    pub const ALL: [Command; 7] = [
        Command::WriteInstructions,
        Command::WriteMemory,
        Command::ReadMemory,
        Command::ReadStatus,
        Command::Run,
        Command::Reset,
        Command::Identify,
    ];

    pub fn from_code(code: u8) -> Option<Command> {
        Command::ALL.iter().copied().find(|c| *c as u8 == code)
    }
}

/// The region code of a memory command.
pub const fn region_code(region: Region) -> u8 {
    match region {
        Region::Dram => 0,
        Region::Spad => 1,
        Region::Acc => 2,
    }
}

pub fn region_from_code(code: u8) -> Option<Region> {
    match code {
        0 => Some(Region::Dram),
        1 => Some(Region::Spad),
        2 => Some(Region::Acc),
        _ => None,
    }
}

/// The status register as `ReadStatus` returns it.
///
/// Bytes: flags (bit 0 busy, bit 1 done, bit 2 error), fault code (0 or a [`FaultCode`]), FIFO
/// free slots (2, LE), cycles (8, LE: from the first dispatch through `Halt`, inclusive, not counting cycles the
/// machine spent frozen because its instruction FIFO ran dry: so they equal the golden model's
/// count however slowly the host feeds the FIFO).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Status {
    pub busy: bool,
    pub done: bool,
    pub fault: Option<FaultCode>,
    pub fifo_free: u16,
    pub cycles: u64,
}

impl Status {
    pub fn to_bytes(&self) -> [u8; STATUS_BYTES] {
        let mut b = [0u8; STATUS_BYTES];
        b[0] = self.busy as u8 | (self.done as u8) << 1 | (self.fault.is_some() as u8) << 2;
        b[1] = self.fault.map_or(0, |f| f as u8);
        b[2..4].copy_from_slice(&self.fifo_free.to_le_bytes());
        b[4..12].copy_from_slice(&self.cycles.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Result<Status, ProtocolError> {
        if b.len() != STATUS_BYTES || b[0] & !0b111 != 0 {
            return Err(ProtocolError::Field);
        }
        let fault = match (b[0] & 0b100 != 0, b[1]) {
            (false, 0) => None,
            (true, code) => Some(FaultCode::from_code(code).ok_or(ProtocolError::Field)?),
            (false, _) => return Err(ProtocolError::Field),
        };
        let mut cycles = [0u8; 8];
        cycles.copy_from_slice(&b[4..12]);
        Ok(Status {
            busy: b[0] & 1 != 0,
            done: b[0] & 2 != 0,
            fault,
            fifo_free: u16::from_le_bytes([b[2], b[3]]),
            cycles: u64::from_le_bytes(cycles),
        })
    }
}

/// What the accelerator is, as `Identify` returns it: everything a host needs to drive it.
///
/// Bytes (little-endian): ISA version (2), rows (2), cols (2), dtype (1: 0 INT8, 1 BF16, in
/// bit 0; bit 1 set on a device built without its program checks; bit 2 set on one whose DRAM
/// moves a byte a cycle, [`DramPort::Byte`](crate::config::DramPort); bit 3 set on one whose
/// scratchpad has a single port,
/// [`ArrayConfig::single_port_spad`](crate::config::ArrayConfig)), dataflow (1: 0 WS, 1 OS, in
/// bit 0; bit 1 set on a device that takes memory commands of [`MAX_DATA`] bytes),
/// scratchpad depth (4), accumulator depth (4), DRAM bytes (4), FIFO depth (2), schedule (1: 0
/// blocking, 1 decoupled, in bit 0; `pe_stages - 1` in bits 1..2; `int8_max` in bit 3;
/// `add_stages - 1` in bits 4..5; `read_stages` in bit 6), conversion lanes (1: pipeline stages in
/// bits 0..3, 0 to `MAX_CONVERT_STAGES`; log2 of `requant_cycles` in bits 4..5; `scale_cycles
/// - 1` in bits 6..7, which for 1 and 2 is the log2 these bits held before 3 existed).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Identity {
    pub isa_version: u16,
    pub config: crate::config::ArrayConfig,
    pub dram_bytes: u32,
    pub fifo_depth: u16,
    /// Whether the device checks each instruction word against its build (the checks of
    /// [`crate::machine::validate_program`] past the word's encoding: dataflow, dtype, widths,
    /// memory ranges, the DRAM extent) and faults on one that fails. A device built without
    /// them (a part too small to hold the checker) still faults on a word its decoder cannot
    /// read and on `NoWeightsLoaded`, but runs a word that fails another check with undefined
    /// results: its host validates every program before it sends a word of it, as
    /// `LinkMachine::run` and the firmware's driver do.
    pub program_checks: bool,
    /// Whether one memory command may move [`MAX_DATA`] bytes on the device (else
    /// [`BASE_DATA`]: a device from before large requests, whose identity has the bit clear).
    pub large_requests: bool,
}

impl Identity {
    pub fn to_bytes(&self) -> [u8; IDENTITY_BYTES] {
        use crate::config::{Dataflow, DramPort, Dtype};
        let c = &self.config;
        let mut b = [0u8; IDENTITY_BYTES];
        b[0..2].copy_from_slice(&self.isa_version.to_le_bytes());
        b[2..4].copy_from_slice(&c.rows.to_le_bytes());
        b[4..6].copy_from_slice(&c.cols.to_le_bytes());
        b[6] = (c.dtype == Dtype::Bf16) as u8
            | (!self.program_checks as u8) << 1
            | ((c.dram_port == DramPort::Byte) as u8) << 2
            | (c.single_port_spad as u8) << 3;
        b[7] = (c.dataflow == Dataflow::OutputStationary) as u8 | (self.large_requests as u8) << 1;
        b[8..12].copy_from_slice(&c.spad_depth.to_le_bytes());
        b[12..16].copy_from_slice(&c.acc_depth.to_le_bytes());
        b[16..20].copy_from_slice(&self.dram_bytes.to_le_bytes());
        b[20..22].copy_from_slice(&self.fifo_depth.to_le_bytes());
        b[22] = c.schedule.code()
            | (c.pe_stages - 1) << 1
            | (c.int8_max as u8) << 3
            | (c.add_stages - 1) << 4
            | c.read_stages << 6;
        b[23] = c.convert_stages
            | (c.requant_cycles.trailing_zeros() as u8) << 4
            | (c.scale_cycles - 1) << 6;
        b
    }

    /// Parses an `Identify` payload; `clock_mhz` is the host's to know (the board's clock).
    pub fn from_bytes(b: &[u8], clock_mhz: f64) -> Result<Identity, ProtocolError> {
        use crate::config::{ArrayConfig, Dataflow, DramPort, Dtype, Schedule};
        if b.len() != IDENTITY_BYTES || b[6] > 15 || b[7] > 3 || b[22] >> 7 != 0 {
            return Err(ProtocolError::Field);
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let config = ArrayConfig {
            rows: u16_at(2),
            cols: u16_at(4),
            dtype: if b[6] & 1 == 1 { Dtype::Bf16 } else { Dtype::Int8 },
            dataflow: if b[7] & 1 == 1 {
                Dataflow::OutputStationary
            } else {
                Dataflow::WeightStationary
            },
            spad_depth: u32_at(8),
            acc_depth: u32_at(12),
            clock_mhz,
            schedule: Schedule::from_code(b[22] & 1).ok_or(ProtocolError::Field)?,
            convert_stages: b[23] & 0xF,
            requant_cycles: 1u8.checked_shl(((b[23] >> 4) & 3) as u32).unwrap_or(0),
            scale_cycles: 1 + (b[23] >> 6),
            pe_stages: 1 + ((b[22] >> 1) & 3),
            int8_max: b[22] >> 3 & 1 == 1,
            add_stages: 1 + (b[22] >> 4 & 3),
            read_stages: b[22] >> 6 & 1,
            dram_port: if b[6] & 4 == 4 { DramPort::Byte } else { DramPort::Row },
            single_port_spad: b[6] & 8 == 8,
        };
        config.validate().map_err(|_| ProtocolError::Field)?;
        Ok(Identity {
            isa_version: u16_at(0),
            config,
            dram_bytes: u32_at(16),
            fifo_depth: u16_at(20),
            program_checks: b[6] & 2 == 0,
            large_requests: b[7] & 2 == 2,
        })
    }

    /// Most data bytes one memory command moves on this device.
    pub fn max_data(&self) -> usize {
        if self.large_requests {
            MAX_DATA
        } else {
            BASE_DATA
        }
    }
}

/// One request, borrowing its data from the frame (or the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Request<'a> {
    /// Instruction words, 16 bytes each, little-endian.
    WriteInstructions(&'a [u8]),
    WriteMemory {
        region: Region,
        addr: u32,
        data: &'a [u8],
    },
    ReadMemory {
        region: Region,
        addr: u32,
        len: u16,
    },
    ReadStatus,
    Run,
    Reset,
    Identify,
}

impl Request<'_> {
    pub fn command(&self) -> Command {
        match self {
            Request::WriteInstructions(_) => Command::WriteInstructions,
            Request::WriteMemory { .. } => Command::WriteMemory,
            Request::ReadMemory { .. } => Command::ReadMemory,
            Request::ReadStatus => Command::ReadStatus,
            Request::Run => Command::Run,
            Request::Reset => Command::Reset,
            Request::Identify => Command::Identify,
        }
    }
}

/// A parsed response: OK with its payload, or the accelerator's error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Response<'a> {
    Ok(&'a [u8]),
    Err(ErrorCode),
}

/// One byte into a CRC-16/CCITT-FALSE (the hardware computes exactly this per byte).
#[inline]
pub const fn crc16_update(crc: u16, byte: u8) -> u16 {
    let mut crc = crc ^ (byte as u16) << 8;
    let mut i = 0;
    while i < 8 {
        crc = if crc & 0x8000 != 0 { crc << 1 ^ 0x1021 } else { crc << 1 };
        i += 1;
    }
    crc
}

/// CRC-16/CCITT-FALSE of `bytes` (check value of "123456789": 0x29B1).
pub const fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0xFFFF;
    let mut i = 0;
    while i < bytes.len() {
        crc = crc16_update(crc, bytes[i]);
        i += 1;
    }
    crc
}

/// Writes one frame; returns its length.
fn frame(sync: u8, kind: u8, parts: &[&[u8]], out: &mut [u8]) -> Result<usize, ProtocolError> {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > MAX_PAYLOAD {
        return Err(ProtocolError::TooLong { len, max: MAX_PAYLOAD });
    }
    let total = HEADER_BYTES + len + CRC_BYTES;
    if out.len() < total {
        return Err(ProtocolError::Buffer { needed: total });
    }
    out[0] = sync;
    out[1] = kind;
    out[2..4].copy_from_slice(&(len as u16).to_le_bytes());
    let mut at = HEADER_BYTES;
    for p in parts {
        out[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    let crc = crc16(&out[1..at]);
    out[at..at + 2].copy_from_slice(&crc.to_be_bytes());
    Ok(total)
}

/// Checks sync, length and CRC; returns the kind byte and the payload.
fn unframe(sync: u8, bytes: &[u8]) -> Result<(u8, &[u8]), ProtocolError> {
    let Some(&first) = bytes.first() else {
        return Err(ProtocolError::Frame { expected: HEADER_BYTES + CRC_BYTES, got: 0 });
    };
    if first != sync {
        return Err(ProtocolError::Sync { got: first });
    }
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err(ProtocolError::Frame { expected: HEADER_BYTES + CRC_BYTES, got: bytes.len() });
    }
    let len = u16::from_le_bytes([bytes[2], bytes[3]]) as usize;
    let expected = frame_len(len);
    if bytes.len() != expected {
        return Err(ProtocolError::Frame { expected, got: bytes.len() });
    }
    let body = &bytes[1..HEADER_BYTES + len];
    let got = u16::from_be_bytes([bytes[HEADER_BYTES + len], bytes[HEADER_BYTES + len + 1]]);
    let expected = crc16(body);
    if got != expected {
        return Err(ProtocolError::Checksum { expected, got });
    }
    if len > MAX_PAYLOAD {
        return Err(ProtocolError::TooLong { len, max: MAX_PAYLOAD });
    }
    Ok((bytes[1], &bytes[HEADER_BYTES..HEADER_BYTES + len]))
}

/// Bytes of a whole frame whose header announces `payload_len`: what a receiver reads after the
/// four header bytes is `frame_len(len) - HEADER_BYTES`.
pub const fn frame_len(payload_len: usize) -> usize {
    HEADER_BYTES + payload_len + CRC_BYTES
}

/// The longest payload an answer to the request frame `request` carries: a `ReadMemory`'s
/// length, a status's or an identity's bytes, and none to anything else (nor in an error
/// response). A host that reads a longer length has read a corrupted one, and need not wait for
/// bytes that will never come.
pub fn response_max_payload(request: &[u8]) -> usize {
    match request.get(1).and_then(|&kind| Command::from_code(kind)) {
        Some(Command::ReadMemory) => {
            request.get(9..11).map_or(0, |l| u16::from_le_bytes([l[0], l[1]]) as usize)
        }
        Some(Command::ReadStatus) => STATUS_BYTES,
        Some(Command::Identify) => IDENTITY_BYTES,
        _ => 0,
    }
}

/// Encodes a request into `out`; returns the frame length.
pub fn encode_request(req: &Request<'_>, out: &mut [u8]) -> Result<usize, ProtocolError> {
    let cmd = req.command() as u8;
    match *req {
        Request::WriteInstructions(words) => {
            if words.is_empty() || words.len() % 16 != 0 || words.len() > 16 * MAX_WORDS {
                return Err(ProtocolError::Refused(ErrorCode::Length));
            }
            frame(REQUEST_SYNC, cmd, &[words], out)
        }
        Request::WriteMemory { region, addr, data } => {
            if data.is_empty() || data.len() > MAX_DATA {
                return Err(ProtocolError::Refused(ErrorCode::Length));
            }
            frame(REQUEST_SYNC, cmd, &[&[region_code(region)], &addr.to_le_bytes(), data], out)
        }
        Request::ReadMemory { region, addr, len } => {
            if len == 0 || len as usize > MAX_DATA {
                return Err(ProtocolError::Refused(ErrorCode::Length));
            }
            let head = [region_code(region)];
            frame(REQUEST_SYNC, cmd, &[&head, &addr.to_le_bytes(), &len.to_le_bytes()], out)
        }
        Request::ReadStatus | Request::Run | Request::Reset | Request::Identify => {
            frame(REQUEST_SYNC, cmd, &[], out)
        }
    }
}

/// Parses one whole request frame. Every error but [`ProtocolError::Sync`] and a short frame is
/// what the accelerator answers with ([`parse_error_code`]).
pub fn parse_request(bytes: &[u8]) -> Result<Request<'_>, ProtocolError> {
    let (kind, payload) = unframe(REQUEST_SYNC, bytes)?;
    let refuse = |code| Err(ProtocolError::Refused(code));
    let Some(cmd) = Command::from_code(kind) else {
        return refuse(ErrorCode::Command);
    };
    let addr = |p: &[u8]| u32::from_le_bytes([p[1], p[2], p[3], p[4]]);
    match cmd {
        Command::WriteInstructions => {
            if payload.is_empty() || payload.len() % 16 != 0 || payload.len() > 16 * MAX_WORDS {
                return refuse(ErrorCode::Length);
            }
            Ok(Request::WriteInstructions(payload))
        }
        Command::WriteMemory => {
            if payload.len() < 6 || payload.len() > 5 + MAX_DATA {
                return refuse(ErrorCode::Length);
            }
            let Some(region) = region_from_code(payload[0]) else {
                return refuse(ErrorCode::Region);
            };
            Ok(Request::WriteMemory { region, addr: addr(payload), data: &payload[5..] })
        }
        Command::ReadMemory => {
            if payload.len() != 7 {
                return refuse(ErrorCode::Length);
            }
            let len = u16::from_le_bytes([payload[5], payload[6]]);
            if len == 0 || len as usize > MAX_DATA {
                return refuse(ErrorCode::Length);
            }
            let Some(region) = region_from_code(payload[0]) else {
                return refuse(ErrorCode::Region);
            };
            Ok(Request::ReadMemory { region, addr: addr(payload), len })
        }
        Command::ReadStatus | Command::Run | Command::Reset | Command::Identify => {
            if !payload.is_empty() {
                return refuse(ErrorCode::Length);
            }
            Ok(match cmd {
                Command::ReadStatus => Request::ReadStatus,
                Command::Run => Request::Run,
                Command::Identify => Request::Identify,
                _ => Request::Reset,
            })
        }
    }
}

/// The response code the accelerator sends for a frame `parse_request` rejected; `None` for a
/// frame it cannot answer (no sync byte: it keeps hunting for one).
pub fn parse_error_code(e: &ProtocolError) -> Option<ErrorCode> {
    match *e {
        ProtocolError::Refused(code) => Some(code),
        ProtocolError::Checksum { .. } => Some(ErrorCode::Checksum),
        ProtocolError::TooLong { .. } | ProtocolError::Frame { .. } => Some(ErrorCode::Length),
        _ => None,
    }
}

/// Encodes a response: OK with a payload, or an error code with none.
pub fn encode_response(resp: &Response<'_>, out: &mut [u8]) -> Result<usize, ProtocolError> {
    match *resp {
        Response::Ok(payload) => frame(RESPONSE_SYNC, 0, &[payload], out),
        Response::Err(code) => frame(RESPONSE_SYNC, code as u8, &[], out),
    }
}

/// Parses one whole response frame.
pub fn parse_response(bytes: &[u8]) -> Result<Response<'_>, ProtocolError> {
    let (kind, payload) = unframe(RESPONSE_SYNC, bytes)?;
    match kind {
        0 => Ok(Response::Ok(payload)),
        code => match ErrorCode::from_code(code) {
            Some(e) if payload.is_empty() => Ok(Response::Err(e)),
            _ => Err(ProtocolError::Field),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests<'a>(words: &'a [u8], data: &'a [u8]) -> [Request<'a>; 9] {
        [
            Request::WriteInstructions(&words[..16]),
            Request::WriteInstructions(words),
            Request::WriteMemory { region: Region::Dram, addr: 0x0102_0304, data: &data[..1] },
            Request::WriteMemory { region: Region::Acc, addr: 8, data },
            Request::ReadMemory { region: Region::Spad, addr: 2, len: 256 },
            Request::ReadStatus,
            Request::Run,
            Request::Reset,
            Request::Identify,
        ]
    }

    fn sample() -> ([u8; 16 * MAX_WORDS], [u8; MAX_DATA]) {
        let mut words = [0u8; 16 * MAX_WORDS];
        let mut data = [0u8; MAX_DATA];
        for (i, b) in words.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i * 13 + 1) as u8;
        }
        (words, data)
    }

    #[test]
    fn crc_check_value() {
        assert_eq!(crc16(b"123456789"), 0x29B1);
        assert_eq!(crc16(b""), 0xFFFF);
    }

    #[test]
    fn requests_round_trip() {
        let (words, data) = sample();
        let mut buf = [0u8; MAX_FRAME];
        for req in requests(&words, &data) {
            let n = encode_request(&req, &mut buf).unwrap();
            assert_eq!(parse_request(&buf[..n]), Ok(req));
        }
    }

    #[test]
    fn responses_round_trip() {
        let mut buf = [0u8; MAX_FRAME];
        let status = Status {
            busy: true,
            done: false,
            fault: Some(FaultCode::Range),
            fifo_free: 300,
            cycles: 0x0123_4567_89AB,
        };
        let bytes = status.to_bytes();
        let n = encode_response(&Response::Ok(&bytes), &mut buf).unwrap();
        let Ok(Response::Ok(p)) = parse_response(&buf[..n]) else { panic!("not ok") };
        assert_eq!(Status::from_bytes(p), Ok(status));
        for code in ErrorCode::ALL {
            let n = encode_response(&Response::Err(code), &mut buf).unwrap();
            assert_eq!(parse_response(&buf[..n]), Ok(Response::Err(code)));
        }
    }

    /// A device built without its program checks says so in bit 1 of byte 6, beside its dtype;
    /// an identity from before that bit (clear) is a checking device's.
    #[test]
    fn identities_say_whether_the_device_checks_its_words() {
        let checked = Identity {
            isa_version: crate::isa::ISA_VERSION,
            config: crate::ArrayConfig::new(4, 1, crate::Dtype::Bf16),
            dram_bytes: 4096,
            fifo_depth: 16,
            program_checks: true,
            large_requests: false,
        };
        let lean = Identity { program_checks: false, ..checked };
        let (a, b) = (checked.to_bytes(), lean.to_bytes());
        assert_eq!((a[6], b[6]), (1, 3));
        assert_eq!(Identity::from_bytes(&a, 100.0), Ok(checked));
        assert_eq!(Identity::from_bytes(&b, 100.0), Ok(lean));
        let mut unknown = b;
        unknown[6] = 16;
        assert_eq!(Identity::from_bytes(&unknown, 100.0), Err(ProtocolError::Field));
    }

    /// A device that takes memory commands of MAX_DATA bytes says so in bit 1 of byte 7,
    /// beside its dataflow; an identity from before that bit (clear) is a device of BASE_DATA.
    #[test]
    fn identities_say_how_much_one_memory_command_moves() {
        let base = Identity {
            isa_version: crate::isa::ISA_VERSION,
            config: crate::ArrayConfig::new(4, 4, crate::Dtype::Int8),
            dram_bytes: 4096,
            fifo_depth: 16,
            program_checks: true,
            large_requests: false,
        };
        let large = Identity { large_requests: true, ..base };
        let (a, b) = (base.to_bytes(), large.to_bytes());
        assert_eq!((a[7], b[7]), (0, 2));
        assert_eq!(Identity::from_bytes(&a, 100.0).map(|i| i.max_data()), Ok(BASE_DATA));
        assert_eq!(Identity::from_bytes(&b, 100.0).map(|i| i.max_data()), Ok(MAX_DATA));
        let mut unknown = b;
        unknown[7] = 4;
        assert_eq!(Identity::from_bytes(&unknown, 100.0), Err(ProtocolError::Field));
    }

    /// A device whose scratchpad has a single port says so in bit 3 of byte 6; an identity
    /// from before that bit (clear) is a two-port device's, and a single port on an
    /// output-stationary machine, which no device is built as, is refused.
    #[test]
    fn identities_say_whether_the_scratchpad_has_one_port() {
        use crate::config::{Dataflow, DramPort};
        let config = crate::ArrayConfig::new(8, 1, crate::Dtype::Int8);
        let two = Identity {
            isa_version: crate::isa::ISA_VERSION,
            config: config.with_dram_port(DramPort::Byte),
            dram_bytes: 4096,
            fifo_depth: 16,
            program_checks: false,
            large_requests: false,
        };
        let one = Identity { config: two.config.with_single_port_spad(true), ..two };
        let (a, b) = (two.to_bytes(), one.to_bytes());
        assert_eq!((a[6], b[6]), (6, 14));
        assert_eq!(Identity::from_bytes(&a, 100.0), Ok(two));
        assert_eq!(Identity::from_bytes(&b, 100.0), Ok(one));
        let os = Identity { config: one.config.with_dataflow(Dataflow::OutputStationary), ..one };
        assert_eq!(Identity::from_bytes(&os.to_bytes(), 100.0), Err(ProtocolError::Field));
    }

    /// A device whose DRAM moves a byte a cycle says so in bit 2 of byte 6; an identity from
    /// before that bit (clear) is a row port's, and a byte port on the decoupled schedule, which
    /// no device is built as, is refused.
    #[test]
    fn identities_say_how_the_dram_moves_bytes() {
        use crate::config::{DramPort, Schedule};
        let config = crate::ArrayConfig::new(8, 1, crate::Dtype::Int8);
        let row = Identity {
            isa_version: crate::isa::ISA_VERSION,
            config,
            dram_bytes: 4096,
            fifo_depth: 16,
            program_checks: false,
            large_requests: false,
        };
        let byte = Identity { config: config.with_dram_port(DramPort::Byte), ..row };
        let (a, b) = (row.to_bytes(), byte.to_bytes());
        assert_eq!((a[6], b[6]), (2, 6));
        assert_eq!(Identity::from_bytes(&a, 100.0), Ok(row));
        assert_eq!(Identity::from_bytes(&b, 100.0), Ok(byte));
        let decoupled = Identity { config: byte.config.with_schedule(Schedule::Decoupled), ..byte };
        let bytes = decoupled.to_bytes();
        assert_eq!(Identity::from_bytes(&bytes, 100.0), Err(ProtocolError::Field));
    }

    /// Every single corrupted byte, every truncation and every extension of every sample frame
    /// is rejected.
    #[test]
    fn every_corruption_is_rejected() {
        let (words, data) = sample();
        let mut buf = [0u8; MAX_FRAME + 1];
        // Every byte of a frame is flipped 255 ways: a frame of BASE_DATA keeps that quick.
        for req in requests(&words, &data[..BASE_DATA]) {
            let n = encode_request(&req, &mut buf).unwrap();
            for at in 0..n {
                for flip in 1..=255u8 {
                    buf[at] ^= flip;
                    assert!(parse_request(&buf[..n]).is_err(), "byte {at} ^ {flip:#x} accepted");
                    buf[at] ^= flip;
                }
            }
            for cut in 0..n {
                assert!(parse_request(&buf[..cut]).is_err(), "{cut} of {n} bytes accepted");
            }
            assert!(parse_request(&buf[..n + 1]).is_err());
            assert_eq!(parse_request(&buf[..n]), Ok(req));
        }
    }

    #[test]
    fn bad_fields_are_refused_with_their_code() {
        let mut buf = [0u8; MAX_FRAME];
        let n = frame(REQUEST_SYNC, 9, &[], &mut buf).unwrap();
        let e = parse_request(&buf[..n]).unwrap_err();
        assert_eq!(parse_error_code(&e), Some(ErrorCode::Command));
        let n = frame(REQUEST_SYNC, 3, &[&[7, 0, 0, 0, 0, 1, 0]], &mut buf).unwrap();
        assert_eq!(parse_request(&buf[..n]), Err(ProtocolError::Refused(ErrorCode::Region)));
        let n = frame(REQUEST_SYNC, 1, &[&[0; 15]], &mut buf).unwrap();
        assert_eq!(parse_request(&buf[..n]), Err(ProtocolError::Refused(ErrorCode::Length)));
        let n = frame(REQUEST_SYNC, 4, &[&[0]], &mut buf).unwrap();
        assert_eq!(parse_request(&buf[..n]), Err(ProtocolError::Refused(ErrorCode::Length)));
        let n = frame(REQUEST_SYNC, 3, &[&[0, 0, 0, 0, 0, 0, 0]], &mut buf).unwrap();
        assert_eq!(parse_request(&buf[..n]), Err(ProtocolError::Refused(ErrorCode::Length)));
        buf[n - 1] ^= 1;
        assert_eq!(
            parse_error_code(&parse_request(&buf[..n]).unwrap_err()),
            Some(ErrorCode::Checksum)
        );
        assert!(encode_request(&Request::WriteInstructions(&[]), &mut buf).is_err());
        assert!(Status::from_bytes(&[8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
