//! [`Systole`]: the accelerator on an SPI bus, spoken to in `systole_core::protocol`'s packets.
//!
//! Every call is one request frame sent in one SPI transaction, then polls for the response
//! frame (see the protocol's "Over SPI" rules): each poll clocks [`HEADER_BYTES`] filler bytes
//! and reads MISO; while the device sends [`SPI_IDLE`] the driver waits
//! [`Options::response_poll_delay_us`] and polls again, at most [`Options::response_polls`]
//! times. Once the sync byte appears, the rest of the header and then the announced payload and
//! CRC are read in one transaction each.
//!
//! Link faults are handled as `systole_core::link::LinkMachine` handles them: a request the
//! device refuses as corrupted ([`ErrorCode::Checksum`]) was not executed and is sent again; a
//! lost or corrupted response to an idempotent request (memory reads and writes, status,
//! identify, reset) is retried; one to `WriteInstructions` or `Run` is reported, except where
//! [`Systole::run_program`] can tell what happened (before `Run` it resets and uploads again;
//! after a lost `Run` answer it reads the status).

use embedded_hal::delay::DelayNs;
use embedded_hal::spi::SpiDevice;
use systole_core::isa::{decode, Word};
use systole_core::machine::check_instruction;
use systole_core::machine::Region;
use systole_core::protocol::{
    encode_request, frame_len, parse_response, ErrorCode, FaultCode, Identity, ProtocolError,
    Request, Response, Status, BASE_DATA, BASE_FRAME, BASE_PAYLOAD, HEADER_BYTES, IDENTITY_BYTES,
    MAX_WORDS, RESPONSE_SYNC, SPI_FILLER, SPI_IDLE, STATUS_BYTES,
};
use systole_core::{Dataflow, Dtype};

use crate::error::{Error, IdentityField};

pub use systole_core::blob::WORD_BYTES;

/// Poll limits and delays, and the board's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Options {
    /// The accelerator's clock in MHz (the `Identify` answer does not carry it).
    pub clock_mhz: f64,
    /// Polls for one response before [`Error::Timeout`].
    pub response_polls: u32,
    /// Microseconds between two response polls that found the device idle.
    pub response_poll_delay_us: u32,
    /// Status reads while waiting for a program to finish before [`Error::Timeout`].
    pub status_polls: u32,
    /// Microseconds between two status reads while a program runs.
    pub status_poll_delay_us: u32,
    /// Tries per request (at least one); `systole_core::link::RETRIES` by default.
    pub tries: u32,
}

impl Options {
    /// 100 MHz; 1,000 response polls 10 us apart; 100,000 status polls 100 us apart (10 s);
    /// three tries.
    pub const DEFAULT: Options = Options {
        clock_mhz: 100.0,
        response_polls: 1_000,
        response_poll_delay_us: 10,
        status_polls: 100_000,
        status_poll_delay_us: 100,
        tries: systole_core::link::RETRIES,
    };
}

impl Default for Options {
    fn default() -> Self {
        Options::DEFAULT
    }
}

/// A program as the controller's FIFO takes it: encoded instruction words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Program<'a> {
    /// Words already encoded, [`WORD_BYTES`] little-endian bytes each (a blob's program).
    Bytes(&'a [u8]),
    /// Words from `systole_core::isa::encode`.
    Words(&'a [Word]),
}

impl<'a> From<&'a [u8]> for Program<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Program::Bytes(bytes)
    }
}

impl<'a> From<&'a [Word]> for Program<'a> {
    fn from(words: &'a [Word]) -> Self {
        Program::Words(words)
    }
}

impl Program<'_> {
    /// Instruction words (a trailing partial word of `Bytes` is not one).
    pub fn len(&self) -> usize {
        match self {
            Program::Bytes(b) => b.len() / WORD_BYTES,
            Program::Words(w) => w.len(),
        }
    }

    /// No words at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Word `i`, little-endian.
    fn word(&self, i: usize) -> Option<[u8; WORD_BYTES]> {
        match self {
            Program::Bytes(b) => {
                let start = i.checked_mul(WORD_BYTES)?;
                b.get(start..start.checked_add(WORD_BYTES)?)?.try_into().ok()
            }
            Program::Words(w) => w.get(i).map(|w| w.to_le_bytes()),
        }
    }

    fn check<E>(&self) -> Result<(), E> {
        let whole = match self {
            Program::Bytes(b) => b.len() % WORD_BYTES == 0,
            Program::Words(_) => true,
        };
        if self.is_empty() || !whole {
            let got = match self {
                Program::Bytes(b) => b.len(),
                Program::Words(w) => w.len().saturating_mul(WORD_BYTES),
            };
            let expected = got.div_ceil(WORD_BYTES).max(1).saturating_mul(WORD_BYTES);
            return Err(Error::Buffer { what: "program bytes", expected, got });
        }
        Ok(())
    }
}

/// The accelerator on an SPI bus.
///
/// `SPI` is an [`SpiDevice`]: the bus with this device's chip select, which the driver asserts
/// for one transaction per request and per poll (embedded-hal-bus's `ExclusiveDevice` makes one
/// from a bus and a pin). `D` times the polls.
pub struct Systole<SPI, D> {
    spi: SPI,
    delay: D,
    options: Options,
    /// The accelerator read last, where it was built without its program checks: the driver
    /// then makes them before it sends a program ([`Error::Invalid`]).
    unchecked: Option<Identity>,
}

/// What one driver call returns.
pub type Result<T, E> = core::result::Result<T, Error<E>>;

/// A lost or garbled response: retried for idempotent requests.
fn lost<E>(e: &Error<E>) -> bool {
    matches!(e, Error::Timeout | Error::Checksum | Error::Protocol(_))
}

impl<SPI, D> Systole<SPI, D> {
    /// The poll limits and clock in use.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Gives the bus and the delay back.
    pub fn release(self) -> (SPI, D) {
        (self.spi, self.delay)
    }
}

impl<SPI: SpiDevice, D: DelayNs> Systole<SPI, D> {
    /// A driver with [`Options::DEFAULT`]. Sends nothing.
    pub fn new(spi: SPI, delay: D) -> Self {
        Systole::with_options(spi, delay, Options::DEFAULT)
    }

    /// A driver with its own poll limits and clock. Sends nothing.
    pub fn with_options(spi: SPI, delay: D, options: Options) -> Self {
        Systole { spi, delay, options, unchecked: None }
    }

    /// One request, and its OK payload copied into `out` (as much as fits); returns the
    /// payload's length.
    fn call(&mut self, req: &Request<'_>, out: &mut [u8]) -> Result<usize, SPI::Error> {
        // Writing the same bytes twice, reading twice or resetting twice changes nothing; an
        // instruction upload appends to the FIFO, and a second `Run` may restart a finished one.
        let idempotent = !matches!(req, Request::WriteInstructions(_) | Request::Run);
        let mut request = [0u8; BASE_FRAME];
        let n = encode_request(req, &mut request)?;
        let request = request.get(..n).ok_or(ProtocolError::Buffer { needed: n })?;
        let mut last = Error::Timeout;
        for attempt in 0..self.options.tries.max(1) {
            if attempt > 0 {
                warn!("retrying {} (try {})", req.command(), attempt.saturating_add(1));
            }
            self.spi.write(request).map_err(Error::Spi)?;
            let mut frame = [0u8; BASE_FRAME];
            let parsed = self.receive(&mut frame).and_then(|got| {
                parse_response(frame.get(..got).unwrap_or(&[])).map_err(Error::from)
            });
            let e = match parsed {
                Ok(Response::Ok(payload)) => {
                    for (o, p) in out.iter_mut().zip(payload) {
                        *o = *p;
                    }
                    return Ok(payload.len());
                }
                // Our request arrived corrupted and was not executed: send it again.
                Ok(Response::Err(ErrorCode::Checksum)) => Error::Device(ErrorCode::Checksum),
                Ok(Response::Err(code)) => return Err(Error::Device(code)),
                Err(e) => {
                    let e = match e {
                        Error::Protocol(ProtocolError::Checksum { .. }) => Error::Checksum,
                        e => e,
                    };
                    // A lost or garbled answer: whether the request ran is unknown.
                    if !(lost(&e) && idempotent) {
                        return Err(e);
                    }
                    e
                }
            };
            last = e;
        }
        Err(last)
    }

    /// Clocks filler bytes into `buf`, reading MISO.
    fn clock_in(&mut self, buf: &mut [u8]) -> Result<(), SPI::Error> {
        buf.fill(SPI_FILLER);
        self.spi.transfer_in_place(buf).map_err(Error::Spi)
    }

    /// Polls for one response frame; returns its length in `frame`.
    fn receive(&mut self, frame: &mut [u8; BASE_FRAME]) -> Result<usize, SPI::Error> {
        let mut have = 0;
        for poll in 0..self.options.response_polls {
            if poll > 0 {
                self.delay.delay_us(self.options.response_poll_delay_us);
            }
            let mut chunk = [SPI_FILLER; HEADER_BYTES];
            self.clock_in(&mut chunk)?;
            let Some(start) = chunk.iter().position(|&b| b != SPI_IDLE) else { continue };
            let head = chunk.get(start..).unwrap_or(&[]);
            if let Some(&got) = head.first().filter(|&&b| b != RESPONSE_SYNC) {
                self.drain()?;
                return Err(Error::Protocol(ProtocolError::Sync { got }));
            }
            for (f, b) in frame.iter_mut().zip(head) {
                *f = *b;
            }
            have = head.len();
            break;
        }
        if have == 0 {
            return Err(Error::Timeout);
        }
        if have < HEADER_BYTES {
            let rest = frame.get_mut(have..HEADER_BYTES).ok_or(ProtocolError::Field)?;
            self.clock_in(rest)?;
        }
        let len = match frame.get(2..HEADER_BYTES) {
            Some(&[lo, hi]) => u16::from_le_bytes([lo, hi]) as usize,
            _ => return Err(Error::Protocol(ProtocolError::Field)),
        };
        if len > BASE_PAYLOAD {
            self.drain()?;
            return Err(Error::Protocol(ProtocolError::TooLong { len, max: BASE_PAYLOAD }));
        }
        let total = frame_len(len);
        let rest = frame
            .get_mut(HEADER_BYTES..total)
            .ok_or(ProtocolError::TooLong { len, max: BASE_PAYLOAD })?;
        self.clock_in(rest)?;
        trace!("response of {} bytes after polling", total);
        Ok(total)
    }

    /// Clocks out a whole frame's worth of filler, so whatever is left of a garbled response
    /// is gone before the next request.
    fn drain(&mut self) -> Result<(), SPI::Error> {
        let mut sink = [SPI_FILLER; BASE_FRAME];
        self.clock_in(&mut sink)
    }

    /// Empties the instruction FIFO and clears the status; memories keep their contents.
    pub fn reset(&mut self) -> Result<(), SPI::Error> {
        self.call(&Request::Reset, &mut []).map(|_| ())
    }

    /// The status register.
    pub fn read_status(&mut self) -> Result<Status, SPI::Error> {
        let mut buf = [0u8; STATUS_BYTES];
        let n = self.call(&Request::ReadStatus, &mut buf)?;
        if n != STATUS_BYTES {
            return Err(Error::Protocol(ProtocolError::Field));
        }
        Ok(Status::from_bytes(&buf)?)
    }

    /// The cycle counter: cycles of the last program from its first dispatch through `Halt`.
    pub fn read_cycles(&mut self) -> Result<u64, SPI::Error> {
        self.read_status().map(|s| s.cycles)
    }

    /// What the accelerator says it is (its clock is [`Options::clock_mhz`]). An accelerator
    /// built without its program checks (`Identity::program_checks`) is remembered: from then
    /// on [`write_program`](Self::write_program) and [`run_program`](Self::run_program) check
    /// every word against it before they send one. Read it (or [`identify`](Self::identify)
    /// it) before the first program on such a part.
    pub fn read_identity(&mut self) -> Result<Identity, SPI::Error> {
        let mut buf = [0u8; IDENTITY_BYTES];
        let n = self.call(&Request::Identify, &mut buf)?;
        if n != IDENTITY_BYTES {
            return Err(Error::Protocol(ProtocolError::Field));
        }
        let identity = Identity::from_bytes(&buf, self.options.clock_mhz)?;
        self.unchecked = (!identity.program_checks).then_some(identity);
        Ok(identity)
    }

    /// The program checks an accelerator built without them leaves to its driver: every word
    /// decodes and passes core's `check_instruction` against the accelerator read last.
    fn check_words(&self, program: &Program<'_>) -> Result<(), SPI::Error> {
        let Some(id) = self.unchecked else { return Ok(()) };
        for index in 0..program.len() {
            let bytes = program.word(index).ok_or(ProtocolError::Field)?;
            let word = Word(u128::from_le_bytes(bytes));
            let checked = decode(word).map_err(|e| e.fault_code()).and_then(|ins| {
                check_instruction(&id.config, &ins, id.dram_bytes as usize)
                    .map_err(|k| k.fault_code().unwrap_or(FaultCode::Field))
            });
            if let Err(code) = checked {
                return Err(Error::Invalid { index, code });
            }
        }
        Ok(())
    }

    /// Reads the identity and refuses an accelerator that is not `expected`: the same ISA
    /// version, array (rows, cols, dtype, dataflow) and memory depths, and at least
    /// `expected.dram_bytes` of DRAM. The clock and the FIFO depth are not compared.
    pub fn identify(&mut self, expected: &Identity) -> Result<Identity, SPI::Error> {
        let found = self.read_identity()?;
        debug!("identify: {}", found);
        if let Some((field, expected, found)) = first_mismatch(expected, &found) {
            error!("accelerator mismatch: {} is {}, expected {}", field, found, expected);
            return Err(Error::Mismatch { field, expected, found });
        }
        Ok(found)
    }

    /// Writes `data` at byte `addr` of `region`, [`BASE_DATA`] bytes per request.
    pub fn write_memory(
        &mut self,
        region: Region,
        addr: u32,
        data: &[u8],
    ) -> Result<(), SPI::Error> {
        check_span(addr, data.len())?;
        let mut at = addr;
        for chunk in data.chunks(BASE_DATA) {
            self.call(&Request::WriteMemory { region, addr: at, data: chunk }, &mut [])?;
            // Inside the span checked above.
            at = at.wrapping_add(chunk.len() as u32);
        }
        Ok(())
    }

    /// Reads `out.len()` bytes from byte `addr` of `region`, [`BASE_DATA`] bytes per request.
    pub fn read_memory(
        &mut self,
        region: Region,
        addr: u32,
        out: &mut [u8],
    ) -> Result<(), SPI::Error> {
        check_span(addr, out.len())?;
        let mut at = addr;
        for chunk in out.chunks_mut(BASE_DATA) {
            // `chunks_mut` gives 1..=BASE_DATA bytes, which a u16 holds.
            let len = chunk.len() as u16;
            let n = self.call(&Request::ReadMemory { region, addr: at, len }, chunk)?;
            if n != chunk.len() {
                return Err(Error::Protocol(ProtocolError::Field));
            }
            at = at.wrapping_add(chunk.len() as u32);
        }
        Ok(())
    }

    /// One `WriteInstructions` of `words` (1 to [`MAX_WORDS`] encoded words).
    pub fn write_instructions(&mut self, words: &[u8]) -> Result<(), SPI::Error> {
        self.call(&Request::WriteInstructions(words), &mut []).map(|_| ())
    }

    /// Queues words `from..` of `program` into the FIFO, as many as its free slots (read from
    /// the status) take, [`MAX_WORDS`] per request; returns the index of the first word not
    /// queued. The controller dispatches them once [`run`](Self::run) starts it.
    pub fn write_program<'p>(
        &mut self,
        program: impl Into<Program<'p>>,
        from: usize,
    ) -> Result<usize, SPI::Error> {
        let program = program.into();
        program.check()?;
        self.check_words(&program)?;
        let free = self.read_status()?.fifo_free;
        self.upload(&program, from, free)
    }

    /// Uploads words `from..` while `free` slots last; returns the next word to send.
    fn upload(
        &mut self,
        program: &Program<'_>,
        from: usize,
        free: u16,
    ) -> Result<usize, SPI::Error> {
        let mut sent = from;
        let mut free = free as usize;
        while sent < program.len() && free > 0 {
            let n = program.len().saturating_sub(sent).min(free).min(MAX_WORDS);
            let mut bytes = [0u8; WORD_BYTES * MAX_WORDS];
            for (i, slot) in bytes.chunks_exact_mut(WORD_BYTES).take(n).enumerate() {
                let word = program.word(sent.saturating_add(i)).ok_or(ProtocolError::Field)?;
                slot.copy_from_slice(&word);
            }
            let len = n.saturating_mul(WORD_BYTES);
            self.write_instructions(bytes.get(..len).ok_or(ProtocolError::Field)?)?;
            sent = sent.saturating_add(n);
            free = free.saturating_sub(n);
        }
        Ok(sent)
    }

    /// Starts dispatching the FIFO (the cycle counter restarts at the first dispatch).
    pub fn run(&mut self) -> Result<(), SPI::Error> {
        self.call(&Request::Run, &mut []).map(|_| ())
    }

    /// Reads the status every [`Options::status_poll_delay_us`] until the program is done
    /// (returns its status, cycles included) or faulted ([`Error::Fault`]), at most
    /// [`Options::status_polls`] times ([`Error::Timeout`]).
    pub fn wait_done(&mut self) -> Result<Status, SPI::Error> {
        self.poll_done(None).map(|(status, _)| status)
    }

    /// `wait_done`, topping the FIFO up with `program`'s words from `sent` on while it waits.
    fn poll_done(
        &mut self,
        mut feed: Option<(&Program<'_>, usize)>,
    ) -> Result<(Status, usize), SPI::Error> {
        for poll in 0..self.options.status_polls {
            if poll > 0 {
                self.delay.delay_us(self.options.status_poll_delay_us);
            }
            let status = self.read_status()?;
            if let Some(fault) = status.fault {
                error!("fault {} after {} cycles", fault, status.cycles);
                return Err(Error::Fault(fault));
            }
            if status.done {
                return Ok((status, feed.map_or(0, |(_, sent)| sent)));
            }
            if let Some((program, sent)) = feed.as_mut() {
                *sent = self.upload(program, *sent, status.fifo_free)?;
            }
        }
        Err(Error::Timeout)
    }

    /// Runs a whole program to its `Halt`: resets the controller, fills the FIFO, starts it,
    /// and keeps the FIFO topped up while polling for done. Returns the final status (its
    /// `cycles` are the program's, stalls on an empty FIFO excluded).
    ///
    /// Before `Run` nothing has executed, so an upload whose answer was lost is recovered by
    /// resetting (which empties the FIFO) and uploading again; a lost answer to `Run` itself is
    /// resolved by reading the status (busy, done or faulted means it started).
    pub fn run_program<'p>(
        &mut self,
        program: impl Into<Program<'p>>,
    ) -> Result<Status, SPI::Error> {
        let program = program.into();
        program.check()?;
        self.check_words(&program)?;
        let tries = self.options.tries.max(1);
        let mut attempt = 1;
        let sent = loop {
            self.reset()?;
            let free = self.read_status()?.fifo_free;
            match self.upload(&program, 0, free) {
                Ok(sent) => break sent,
                Err(e) if lost(&e) && attempt < tries => {
                    warn!("an upload's answer was lost: resetting and uploading again");
                    attempt = attempt.saturating_add(1);
                }
                Err(e) => return Err(e),
            }
        };
        self.start(tries)?;
        let (status, _) = self.poll_done(Some((&program, sent)))?;
        debug!("program of {} words done in {} cycles", program.len(), status.cycles);
        Ok(status)
    }

    /// `Run`, resolving a lost answer through the status.
    fn start(&mut self, tries: u32) -> Result<(), SPI::Error> {
        let mut attempt = 1;
        loop {
            match self.run() {
                Ok(()) => return Ok(()),
                Err(e) if lost(&e) => {
                    let s = self.read_status()?;
                    if s.busy || s.done || s.fault.is_some() {
                        return Ok(());
                    }
                    if attempt >= tries {
                        return Err(e);
                    }
                    attempt = attempt.saturating_add(1);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Bytes a 32-bit byte address reaches.
const ADDRESS_SPACE: u64 = 1 << 32;

/// An access of `len` bytes from `addr` that would run past 4 GiB is refused before anything is
/// sent, as the device would refuse it ([`ErrorCode::OutOfRange`]).
fn check_span<E>(addr: u32, len: usize) -> Result<(), E> {
    let end = u64::from(addr).checked_add(len as u64);
    match end {
        Some(end) if end <= ADDRESS_SPACE => Ok(()),
        _ => Err(Error::Device(ErrorCode::OutOfRange)),
    }
}

fn dtype_code(d: Dtype) -> u32 {
    match d {
        Dtype::Int8 => 0,
        Dtype::Bf16 => 1,
    }
}

fn dataflow_code(d: Dataflow) -> u32 {
    match d {
        Dataflow::WeightStationary => 0,
        Dataflow::OutputStationary => 1,
    }
}

/// The first field in which `found` is not `expected` (see [`Systole::identify`]).
pub fn first_mismatch(expected: &Identity, found: &Identity) -> Option<(IdentityField, u32, u32)> {
    let (e, f) = (&expected.config, &found.config);
    let fields = [
        (IdentityField::IsaVersion, expected.isa_version as u32, found.isa_version as u32),
        (IdentityField::Rows, e.rows as u32, f.rows as u32),
        (IdentityField::Cols, e.cols as u32, f.cols as u32),
        (IdentityField::Dtype, dtype_code(e.dtype), dtype_code(f.dtype)),
        (IdentityField::Dataflow, dataflow_code(e.dataflow), dataflow_code(f.dataflow)),
        (IdentityField::SpadDepth, e.spad_depth, f.spad_depth),
        (IdentityField::AccDepth, e.acc_depth, f.acc_depth),
        (IdentityField::Schedule, e.schedule.code() as u32, f.schedule.code() as u32),
    ];
    // What the accelerator must have at least: the DRAM, and the comparator where the program
    // uses it (a blob's target asks for it only then).
    let dram = (IdentityField::DramBytes, expected.dram_bytes, found.dram_bytes);
    let max = (IdentityField::Int8Max, e.int8_max as u32, f.int8_max as u32);
    let at_least = [dram, max];
    let short = at_least.into_iter().find(|(_, e, f)| f < e);
    fields.into_iter().find(|(_, e, f)| e != f).or(short)
}
