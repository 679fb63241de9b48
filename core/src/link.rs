//! A [`Machine`] at the far end of the host link: the Verilated RTL, a board over USB serial, an
//! accelerator on an MCU's SPI bus. Anything that can exchange one request frame for one
//! response frame ([`Transport`]) becomes a machine that the golden models can be diffed
//! against, speaking exactly the packets of [`crate::protocol`].
//!
//! Link faults are never turned into wrong results: a corrupted request is refused by the
//! accelerator ([`ErrorCode::Checksum`]) and resent; a corrupted or missing response to an
//! idempotent request (memory reads and writes, status) is retried; everything else is an
//! error naming the fault.

use crate::config::ArrayConfig;
use crate::fault::{ExecErrorKind, Region};
pub use crate::fault::{LinkFault, TransportError};
use crate::isa::{encode, Instruction};
pub use crate::machine::traffic::{Traffic, UART_BITS_PER_BYTE};
use crate::machine::{validate_program, Machine, MachineError, Stats};
use crate::protocol::{
    encode_request, parse_response, ErrorCode, FaultCode, ProtocolError, Request, Response, Status,
    MAX_DATA, MAX_FRAME, MAX_WORDS,
};

/// Exchanges whole frames with the accelerator.
pub trait Transport {
    /// Sends one request frame; receives one response frame into `response`, returning its
    /// length. Byte-level framing (sync hunting, length, time-outs) is the transport's.
    fn exchange(&mut self, request: &[u8], response: &mut [u8]) -> Result<usize, TransportError>;
    /// The accelerator has been reset from the outside (a board's button, a power cycle): its
    /// state is gone. Transports that can tell say so; the default cannot.
    fn was_reset(&mut self) -> bool {
        false
    }
}

/// Tries per request before a fault is reported.
pub const RETRIES: u32 = 3;

/// A machine reached over a [`Transport`].
pub struct LinkMachine<T: Transport> {
    pub transport: T,
    config: ArrayConfig,
    dram_bytes: usize,
    /// Status polls a run may take before it is declared hung.
    pub max_polls: u32,
    request: [u8; MAX_FRAME],
    response: [u8; MAX_FRAME],
    /// Retries spent on link faults so far (for tests and logs).
    pub retries: u32,
    /// Everything sent and received so far.
    pub traffic: Traffic,
    /// A run failed part-way: the device may still be running it, so the next access resets
    /// it first (memories keep their contents; the FIFO and status are cleared).
    resync: bool,
    /// What [`Machine::name`] says: "link" unless the owner knows better ("rtl", "board").
    pub name: &'static str,
    /// The shape of the weight tile active in the array, which survives from one program to
    /// the next and counts in a non-swapping matmul's MACs; `None` after a run the link lost
    /// track of (its MACs are then counted as if no weights were active).
    active: Option<(u64, u64)>,
    /// Data bytes one memory request moves: [`MAX_DATA`] unless the device says it takes fewer
    /// ([`LinkMachine::identify`], [`LinkMachine::with_max_data`]). A transfer goes in as few
    /// requests of this size as it can.
    max_data: usize,
}

fn words_of(ins: &Instruction) -> [u8; 16] {
    // Programs are validated before upload, and a valid instruction always encodes.
    encode(ins).map(|w| w.to_le_bytes()).unwrap_or([0; 16])
}

impl<T: Transport> LinkMachine<T> {
    /// A machine for an accelerator built for `config` with `dram_bytes` of DRAM (from its
    /// manifest).
    pub fn new(transport: T, config: ArrayConfig, dram_bytes: usize) -> Self {
        LinkMachine {
            transport,
            config,
            dram_bytes,
            max_polls: 1_000_000,
            request: [0; MAX_FRAME],
            response: [0; MAX_FRAME],
            retries: 0,
            traffic: Traffic::default(),
            resync: false,
            name: "link",
            active: Some((0, 0)),
            max_data: MAX_DATA,
        }
    }

    /// The same machine, moving at most `max_data` bytes a memory request (a device from
    /// before large requests takes [`crate::protocol::BASE_DATA`]); clamped to 8 to
    /// [`MAX_DATA`], a multiple of 8 so that every chunk keeps its region's alignment.
    pub fn with_max_data(mut self, max_data: usize) -> Self {
        self.max_data = (max_data.clamp(8, MAX_DATA)) & !7;
        self
    }

    /// Data bytes one memory request moves.
    pub fn max_data(&self) -> usize {
        self.max_data
    }

    /// The same machine, named for what is at the other end of the link.
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// One request and its OK payload (copied into `out`), with retries for idempotent ones.
    fn call(&mut self, req: &Request<'_>, out: &mut [u8]) -> Result<usize, LinkFault> {
        // Writing the same bytes twice, reading twice or resetting twice changes nothing; an
        // instruction upload appends to the FIFO, and a second `Run` may restart a finished one.
        let idempotent = !matches!(req, Request::WriteInstructions(_) | Request::Run);
        let n = encode_request(req, &mut self.request).map_err(LinkFault::Protocol)?;
        let mut last = LinkFault::Transport(TransportError::Timeout);
        for attempt in 0..RETRIES {
            if attempt > 0 {
                self.retries += 1;
            }
            self.traffic.requests += 1;
            self.traffic.bytes_out += n as u64;
            let got = match self.transport.exchange(&self.request[..n], &mut self.response) {
                Ok(got) => {
                    self.traffic.bytes_in += got as u64;
                    got
                }
                Err(e) => {
                    last = LinkFault::Transport(e);
                    if idempotent {
                        continue;
                    }
                    return Err(LinkFault::Unknown { command: command_name(req) });
                }
            };
            match parse_response(&self.response[..got]) {
                Ok(Response::Ok(payload)) => {
                    let len = payload.len().min(out.len());
                    out[..len].copy_from_slice(&payload[..len]);
                    return Ok(payload.len());
                }
                // The request arrived corrupted and was not executed: send it again.
                Ok(Response::Err(ErrorCode::Checksum)) => {
                    last = LinkFault::Refused(ErrorCode::Checksum)
                }
                Ok(Response::Err(code)) => return Err(LinkFault::Refused(code)),
                Err(e) => {
                    last = LinkFault::Protocol(e);
                    if !idempotent {
                        return Err(LinkFault::Unknown { command: command_name(req) });
                    }
                }
            }
        }
        Err(last)
    }

    /// Resets the device if a run failed part-way (see `resync`).
    fn resynchronise(&mut self) -> Result<(), MachineError> {
        if self.resync {
            self.reset().map_err(MachineError::Link)?;
            self.resync = false;
        }
        Ok(())
    }

    /// The status register.
    pub fn status(&mut self) -> Result<Status, LinkFault> {
        let mut buf = [0u8; crate::protocol::STATUS_BYTES];
        let n = self.call(&Request::ReadStatus, &mut buf)?;
        if n != buf.len() {
            return Err(LinkFault::Protocol(ProtocolError::Field));
        }
        Status::from_bytes(&buf).map_err(LinkFault::Protocol)
    }

    /// What the device is; `clock_mhz` is the host's knowledge of its clock. Memory requests
    /// from here on move as many bytes as the device takes ([`Identity::max_data`]).
    ///
    /// [`Identity::max_data`]: crate::protocol::Identity::max_data
    pub fn identify(&mut self, clock_mhz: f64) -> Result<crate::protocol::Identity, LinkFault> {
        let mut buf = [0u8; crate::protocol::IDENTITY_BYTES];
        let n = self.call(&Request::Identify, &mut buf)?;
        if n != buf.len() {
            return Err(LinkFault::Protocol(ProtocolError::Field));
        }
        let id =
            crate::protocol::Identity::from_bytes(&buf, clock_mhz).map_err(LinkFault::Protocol)?;
        self.max_data = id.max_data();
        Ok(id)
    }

    /// Empties the instruction FIFO and clears the status; memories keep their contents.
    pub fn reset(&mut self) -> Result<(), LinkFault> {
        self.call(&Request::Reset, &mut []).map(|_| ())
    }

    fn upload(&mut self, program: &[Instruction], free: &mut u16) -> Result<usize, LinkFault> {
        let n = program.len().min(*free as usize).min(MAX_WORDS);
        if n == 0 {
            return Ok(0);
        }
        let mut bytes = [0u8; 16 * MAX_WORDS];
        for (slot, ins) in bytes.chunks_exact_mut(16).zip(&program[..n]) {
            slot.copy_from_slice(&words_of(ins));
        }
        self.call(&Request::WriteInstructions(&bytes[..16 * n]), &mut [])?;
        *free -= n as u16;
        Ok(n)
    }

    fn run_linked(&mut self, program: &[Instruction]) -> Result<Stats, LinkFault> {
        let end =
            program.iter().position(|i| *i == Instruction::Halt).map_or(program.len(), |h| h + 1);
        let program = &program[..end];
        self.transport.was_reset();
        // Fill the FIFO before starting, then keep it topped up while the program runs. Before
        // `Run` nothing has executed, so an upload whose answer was lost is recovered by
        // resetting (which empties the FIFO) and uploading again.
        let mut attempt = 0;
        let mut sent = loop {
            self.reset()?;
            let mut free = self.status()?.fifo_free;
            let mut sent = 0;
            let filled = loop {
                if sent == program.len() || free == 0 {
                    break Ok(());
                }
                match self.upload(&program[sent..], &mut free) {
                    Ok(n) => sent += n,
                    Err(e) => break Err(e),
                }
            };
            match filled {
                Ok(()) => break sent,
                Err(LinkFault::Unknown { .. }) if attempt + 1 < RETRIES => {
                    attempt += 1;
                    self.retries += 1;
                }
                Err(e) => return Err(e),
            }
        };
        self.call(&Request::Run, &mut [])?;
        for _ in 0..self.max_polls {
            if self.transport.was_reset() {
                return Err(LinkFault::Reset);
            }
            let status = self.status()?;
            if let Some(fault) = status.fault {
                return Err(LinkFault::Fault(fault));
            }
            if status.done {
                return Ok(Stats {
                    cycles: Some(status.cycles),
                    macs: 0, // counted by `run`, which knows the weights the program starts with
                    instructions: program.len() as u64,
                    array_cycles: None,
                });
            }
            let mut free = status.fifo_free;
            while sent < program.len() && free > 0 {
                sent += self.upload(&program[sent..], &mut free)?;
            }
        }
        Err(LinkFault::Hung { polls: self.max_polls })
    }
}

fn command_name(req: &Request<'_>) -> &'static str {
    match req {
        Request::WriteInstructions(_) => "write_instructions",
        Request::WriteMemory { .. } => "write_memory",
        Request::ReadMemory { .. } => "read_memory",
        Request::ReadStatus => "read_status",
        Request::Run => "run",
        Request::Reset => "reset",
        Request::Identify => "identify",
    }
}

impl<T: Transport> Machine for LinkMachine<T> {
    fn config(&self) -> &ArrayConfig {
        &self.config
    }
    fn link_traffic(&self) -> Option<Traffic> {
        Some(self.traffic)
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn region_size(&self, region: Region) -> usize {
        match region {
            Region::Dram => self.dram_bytes,
            Region::Spad => {
                self.config.spad_depth as usize
                    * self.config.spad_width()
                    * self.config.dtype.elem_bytes()
            }
            Region::Acc => self.config.acc_depth as usize * self.config.cols as usize * 4,
        }
    }

    fn write(&mut self, region: Region, offset: usize, bytes: &[u8]) -> Result<(), MachineError> {
        check_range(self, region, offset, bytes.len())?;
        self.resynchronise()?;
        let max = self.max_data;
        for (i, chunk) in bytes.chunks(max).enumerate() {
            let addr = (offset + i * max) as u32;
            self.call(&Request::WriteMemory { region, addr, data: chunk }, &mut [])
                .map_err(MachineError::Link)?;
        }
        Ok(())
    }

    fn read(&mut self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError> {
        check_range(self, region, offset, out.len())?;
        self.resynchronise()?;
        let max = self.max_data;
        for (i, chunk) in out.chunks_mut(max).enumerate() {
            let addr = (offset + i * max) as u32;
            let len = chunk.len() as u16;
            let n = self
                .call(&Request::ReadMemory { region, addr, len }, chunk)
                .map_err(MachineError::Link)?;
            if n != chunk.len() {
                return Err(MachineError::Link(LinkFault::Protocol(ProtocolError::Field)));
            }
        }
        Ok(())
    }

    fn run(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        validate_program(&self.config, program, self.dram_bytes)?;
        // A valid program can fault only by swapping in weights nobody loaded; the timing model
        // says which instruction, as the golden machines do.
        let expected = crate::timing::program_cycles(&self.config, program).err();
        let result = self.run_linked(program);
        self.resync = result.is_err();
        let start = self.active.take().unwrap_or((0, 0));
        match (result, expected) {
            (Ok(mut stats), None) => {
                let (macs, active) = crate::timing::program_macs_from(program, start);
                stats.macs = macs;
                self.active = Some(active);
                Ok(stats)
            }
            (Err(LinkFault::Fault(FaultCode::NoWeightsLoaded)), Some((index, kind))) => {
                // Everything before the faulting swap ran.
                let before = program.get(..index).unwrap_or(program);
                self.active = Some(crate::timing::program_macs_from(before, start).1);
                Err(MachineError::Exec { index, kind })
            }
            (Ok(_), Some(_)) => {
                Err(MachineError::Link(LinkFault::Missed(ExecErrorKind::NoWeightsLoaded)))
            }
            (Err(e), _) => Err(MachineError::Link(e)),
        }
    }
}

fn check_range<T: Transport>(
    m: &LinkMachine<T>,
    region: Region,
    offset: usize,
    len: usize,
) -> Result<(), MachineError> {
    let size = m.region_size(region);
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(MachineError::OutOfRange { region, offset, len, size });
    }
    Ok(())
}

/// The device side of the host link over a golden machine: an executable model of the
/// hardware's host interface (FIFO, status register, refusals), for testing hosts and links
/// without the RTL.
#[cfg(feature = "alloc")]
pub mod emulator {
    extern crate alloc;
    use alloc::boxed::Box;
    use alloc::vec::Vec;

    use super::{Transport, TransportError};
    use crate::isa::{decode, Instruction, Word};
    use crate::machine::{Machine, MachineError};
    use crate::protocol::{
        encode_response, parse_error_code, parse_request, ErrorCode, FaultCode, Identity, Request,
        Response, Status, BASE_DATA, MAX_DATA,
    };

    /// Instruction words the emulated FIFO holds.
    pub const FIFO_DEPTH: usize = 64;

    /// A golden machine behind the host protocol.
    ///
    /// The golden machines run whole programs, so the emulator collects the program and runs
    /// it when its `Halt` arrives. Before `Run` the words wait in a FIFO of [`FIFO_DEPTH`];
    /// once running, the FIFO drains as fast as the host fills it, as a controller that never
    /// starves does (the cycle count is the program's own, stalls on the host excluded).
    pub struct Emulator {
        pub machine: Box<dyn Machine>,
        fifo: Vec<Instruction>,
        running: bool,
        status: Status,
        /// Whether a memory command may move [`MAX_DATA`] bytes (else [`BASE_DATA`], as a
        /// device from before large requests).
        large_requests: bool,
    }

    impl Emulator {
        /// A device of today's RTL, which takes memory commands of [`MAX_DATA`] bytes.
        pub fn new(machine: Box<dyn Machine>) -> Self {
            Emulator {
                machine,
                fifo: Vec::new(),
                running: false,
                status: Self::idle(),
                large_requests: true,
            }
        }

        /// The same device as one built with `large_requests` or without (RTL revisions 1 to 4,
        /// which refuse a memory command of more than [`BASE_DATA`] bytes).
        pub fn with_large_requests(mut self, large_requests: bool) -> Self {
            self.large_requests = large_requests;
            self
        }

        fn max_data(&self) -> usize {
            if self.large_requests {
                MAX_DATA
            } else {
                BASE_DATA
            }
        }

        fn idle() -> Status {
            Status {
                busy: false,
                done: false,
                fault: None,
                fifo_free: FIFO_DEPTH as u16,
                cycles: 0,
            }
        }

        /// Serves one request frame; returns the response frame.
        pub fn serve(&mut self, request: &[u8]) -> Vec<u8> {
            let mut out = [0u8; crate::protocol::MAX_FRAME];
            // A payload longer than this device's buffer, its checksum right, is refused for its
            // length before its fields are read, as the hardware refuses it.
            let len = request.get(2..4).map_or(0, |l| u16::from_le_bytes([l[0], l[1]]) as usize);
            let too_long = len > 5 + self.max_data();
            let resp = match parse_request(request) {
                Err(e) => match parse_error_code(&e) {
                    Some(ErrorCode::Checksum) => {
                        self.respond(Response::Err(ErrorCode::Checksum), &mut out)
                    }
                    Some(_) if too_long => self.respond(Response::Err(ErrorCode::Length), &mut out),
                    Some(code) => self.respond(Response::Err(code), &mut out),
                    None => return Vec::new(), // no sync byte: nothing to answer
                },
                Ok(_) if too_long => self.respond(Response::Err(ErrorCode::Length), &mut out),
                Ok(req) => {
                    let mut payload = [0u8; crate::protocol::MAX_DATA];
                    match self.execute(req, &mut payload) {
                        Ok(n) => self.respond(Response::Ok(&payload[..n]), &mut out),
                        Err(code) => self.respond(Response::Err(code), &mut out),
                    }
                }
            };
            resp
        }

        fn respond(&self, r: Response<'_>, out: &mut [u8]) -> Vec<u8> {
            let n = encode_response(&r, out).unwrap_or(0);
            out[..n].to_vec()
        }

        fn execute(&mut self, req: Request<'_>, payload: &mut [u8]) -> Result<usize, ErrorCode> {
            let memory = |e: MachineError| match e {
                MachineError::Misaligned { .. } => ErrorCode::Misaligned,
                _ => ErrorCode::OutOfRange,
            };
            match req {
                Request::WriteInstructions(bytes) => {
                    let words = bytes.len() / 16;
                    if !self.running && self.fifo.len() + words > FIFO_DEPTH {
                        return Err(ErrorCode::FifoFull);
                    }
                    for w in bytes.chunks_exact(16) {
                        let mut b = [0u8; 16];
                        b.copy_from_slice(w);
                        match decode(Word::from_le_bytes(b)) {
                            Ok(ins) => self.fifo.push(ins),
                            // An invalid word is accepted into the FIFO and faults at dispatch.
                            Err(_) => self.fifo.push(Instruction::Sync),
                        }
                    }
                    self.refresh_free();
                    self.try_run();
                    Ok(0)
                }
                Request::WriteMemory { region, addr, data } => {
                    if self.running {
                        return Err(ErrorCode::Busy);
                    }
                    self.machine.write(region, addr as usize, data).map_err(memory)?;
                    Ok(0)
                }
                Request::ReadMemory { region, addr, len } => {
                    if len as usize > self.max_data() {
                        return Err(ErrorCode::Length);
                    }
                    if self.running {
                        return Err(ErrorCode::Busy);
                    }
                    let out = &mut payload[..len as usize];
                    self.machine.read(region, addr as usize, out).map_err(memory)?;
                    Ok(len as usize)
                }
                Request::ReadStatus => {
                    let b = self.status.to_bytes();
                    payload[..b.len()].copy_from_slice(&b);
                    Ok(b.len())
                }
                Request::Run => {
                    self.running = true;
                    self.status.busy = true;
                    self.refresh_free();
                    self.try_run();
                    Ok(0)
                }
                Request::Reset => {
                    self.fifo.clear();
                    self.running = false;
                    self.status = Self::idle();
                    Ok(0)
                }
                Request::Identify => {
                    let id = Identity {
                        isa_version: crate::isa::ISA_VERSION,
                        config: *self.machine.config(),
                        dram_bytes: self.machine.region_size(crate::machine::Region::Dram) as u32,
                        fifo_depth: FIFO_DEPTH as u16,
                        program_checks: true,
                        large_requests: self.large_requests,
                    };
                    let b = id.to_bytes();
                    payload[..b.len()].copy_from_slice(&b);
                    Ok(b.len())
                }
            }
        }

        fn refresh_free(&mut self) {
            let queued = if self.running { 0 } else { self.fifo.len() };
            self.status.fifo_free = (FIFO_DEPTH - queued) as u16;
        }

        /// Runs the FIFO's program once it holds a `Halt` (the golden machines run whole
        /// programs; the hardware would have been executing all along).
        fn try_run(&mut self) {
            if !self.running || !self.fifo.contains(&Instruction::Halt) {
                return;
            }
            let result = self.machine.run(&self.fifo);
            self.fifo.clear();
            self.running = false;
            self.status = Self::idle();
            match result {
                Ok(stats) => {
                    self.status.done = true;
                    self.status.cycles = stats.cycles.unwrap_or(0);
                }
                Err(MachineError::Exec { .. }) => {
                    self.status.fault = Some(FaultCode::NoWeightsLoaded)
                }
                Err(_) => self.status.fault = Some(FaultCode::Range),
            }
        }
    }

    impl Transport for Emulator {
        fn exchange(
            &mut self,
            request: &[u8],
            response: &mut [u8],
        ) -> Result<usize, TransportError> {
            let r = self.serve(request);
            if r.is_empty() {
                return Err(TransportError::Timeout);
            }
            let n = r.len().min(response.len());
            response[..n].copy_from_slice(&r[..n]);
            Ok(n)
        }
    }
}

/// A byte stream to the accelerator: a UART, a serial port, a simulated pin-level link.
pub trait ByteStream {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TransportError>;
    /// The next byte, or [`TransportError::Timeout`] when none comes in the stream's time limit.
    fn read_byte(&mut self) -> Result<u8, TransportError>;
    /// Discards whatever is waiting to be read (after a fault, to resynchronise).
    fn discard_input(&mut self) {}
    /// See [`Transport::was_reset`].
    fn was_reset(&mut self) -> bool {
        false
    }
}

/// Frames over a byte stream: sends a request, then hunts for the response's sync byte (skipping
/// at most one frame's worth of noise), reads its header and exactly the bytes it announces.
pub struct Framed<S: ByteStream> {
    pub stream: S,
}

impl<S: ByteStream> Transport for Framed<S> {
    fn exchange(&mut self, request: &[u8], response: &mut [u8]) -> Result<usize, TransportError> {
        use crate::protocol::{frame_len, response_max_payload, HEADER_BYTES, RESPONSE_SYNC};
        // Request and response alternate: anything waiting now is the tail of an earlier fault.
        self.stream.discard_input();
        self.stream.write_all(request)?;
        let mut skipped = 0;
        loop {
            let b = self.stream.read_byte()?;
            if b == RESPONSE_SYNC {
                break;
            }
            skipped += 1;
            if skipped > MAX_FRAME {
                return Err(TransportError::Timeout);
            }
        }
        response[0] = RESPONSE_SYNC;
        for slot in response.iter_mut().take(HEADER_BYTES).skip(1) {
            *slot = self.stream.read_byte()?;
        }
        let len = u16::from_le_bytes([response[2], response[3]]) as usize;
        if len > response_max_payload(request) {
            // A corrupted length (longer than any answer to this request): drop the rest and
            // let the caller retry, rather than wait for bytes that will not come.
            self.stream.discard_input();
            return Ok(HEADER_BYTES);
        }
        let total = frame_len(len);
        for slot in response.iter_mut().take(total).skip(HEADER_BYTES) {
            *slot = self.stream.read_byte()?;
        }
        Ok(total)
    }
    fn was_reset(&mut self) -> bool {
        self.stream.was_reset()
    }
}
