//! The whole accelerator, Verilated, driven through its pins: its UART and its SPI slave as
//! `core::link::ByteStream`s, so `core::link::LinkMachine` (over `core::link::Framed`) drives
//! the RTL exactly as it drives a board, one clock cycle at a time.
//!
//! [`RtlTop`] owns a model of `systole_top` (see `systole_hdl::emit`) and steps its clock;
//! [`UartLink`] and [`SpiLink`] toggle the host-side pins cycle by cycle and decode what the
//! device sends back:
//!
//! * UART: 8N1, `divisor` clock cycles per bit, the host's receiver sampling the middle of each
//!   bit, as the device's does.
//! * SPI: mode 0, MSB first, `half_period` clock cycles per SCK phase (at least 4: the device
//!   synchronises its pins). Each request is one transaction (CS falls before it, and MISO,
//!   which carries `SPI_IDLE` meanwhile, is discarded); the response is read by clocking
//!   `SPI_FILLER` bytes, in one transaction or, like the firmware driver's polls, in
//!   transactions of a few bytes each.

use std::collections::VecDeque;

use systole_core::link::{ByteStream, TransportError};
use systole_core::protocol::SPI_FILLER;

use crate::model::Model;
use crate::toolchain::SimError;
use systole_core::sdram::{Chip, Command, Pins, ULX3S_SDRAM};

/// A Verilated `systole_top` and its pins.
pub struct RtlTop {
    model: Model,
    reset: usize,
    uart_rx: usize,
    uart_tx: usize,
    spi_sck: usize,
    spi_cs_n: usize,
    spi_mosi: usize,
    spi_miso: usize,
    busy: Option<usize>,
    /// Clock cycles stepped since the model was made.
    pub cycles: u64,
    /// A VCD to open when `cycles` reaches the given count (see [`RtlTop::trace_from`]).
    pending_trace: Option<(u64, std::path::PathBuf)>,
    trace_failed: Option<String>,
    /// On an SDRAM machine, core's chip model on its pins ([`RtlTop::with_sdram`]).
    sdram: Option<SdramPins>,
}

/// A Verilated top's SDRAM pins, one set a phase, with core's datasheet model of the chip on
/// them: each phase's command is the chip's in turn, and what the chip drives comes back on
/// `sdram_dq_in_<phase>` in the same cycle.
struct SdramPins {
    chip: Chip,
    /// Per phase: ras_n, cas_n, we_n, ba, a, dq_out, dq_drive, dqm, dq_in.
    phases: Vec<[usize; 9]>,
    /// The first rule the commands broke, with its cycle.
    fault: Option<String>,
}

impl RtlTop {
    /// Takes a model of `systole_top` (with its host-interface ports); drives the idle levels
    /// (UART line high, SPI deselected) and holds reset for a few cycles.
    pub fn new(model: Model) -> Result<RtlTop, SimError> {
        let mut top = RtlTop {
            reset: model.port("reset")?,
            uart_rx: model.port("uart_rx")?,
            uart_tx: model.port("uart_tx")?,
            spi_sck: model.port("spi_sck")?,
            spi_cs_n: model.port("spi_cs_n")?,
            spi_mosi: model.port("spi_mosi")?,
            spi_miso: model.port("spi_miso")?,
            busy: model.port("busy").ok(),
            model,
            cycles: 0,
            pending_trace: None,
            trace_failed: None,
            sdram: None,
        };
        top.set(top.uart_rx, true);
        top.set(top.spi_cs_n, true);
        top.set(top.spi_sck, false);
        top.set(top.reset, true);
        for _ in 0..4 {
            top.step();
        }
        top.set(top.reset, false);
        for _ in 0..4 {
            top.step();
        }
        Ok(top)
    }

    fn set(&mut self, port: usize, v: bool) {
        // The ports were found by name on this model; a 1-bit input takes one word.
        let _ = self.model.set(port, &[v as u32]);
    }

    fn get(&self, port: usize) -> bool {
        self.model.get_u64(port).is_ok_and(|v| v & 1 == 1)
    }

    /// Core's model of the board's SDRAM chip on the top's SDRAM pins, clocked at
    /// `sdram_mhz`; a top without them is left as it is.
    pub fn with_sdram(mut self, sdram_mhz: f64) -> RtlTop {
        let names = ["ras_n", "cas_n", "we_n", "ba", "a", "dq_out", "dq_drive", "dqm", "dq_in"];
        let mut phases = vec![];
        while let Ok(first) = self.model.port(&format!("sdram_ras_n_{}", phases.len())) {
            let p = phases.len();
            let mut ports = [first; 9];
            for (k, name) in names.iter().enumerate().skip(1) {
                match self.model.port(&format!("sdram_{name}_{p}")) {
                    Ok(port) => ports[k] = port,
                    Err(_) => return self,
                }
            }
            phases.push(ports);
        }
        if !phases.is_empty() {
            // Powered with the design: the cycles already stepped (reset) carried NOPs, as the
            // port waits out the power-up then.
            let mut chip = Chip::new(ULX3S_SDRAM, sdram_mhz);
            for _ in 0..self.cycles * phases.len() as u64 {
                let _ = chip.clock(Command::Nop);
            }
            self.sdram = Some(SdramPins { chip, phases, fault: None });
        }
        self
    }

    /// The first SDRAM timing rule the design broke (core's chip model), if it broke one.
    pub fn sdram_fault(&self) -> Option<&str> {
        self.sdram.as_ref().and_then(|s| s.fault.as_deref())
    }

    /// The chip takes each phase's command and drives the data pins for this cycle.
    fn clock_sdram(&mut self) {
        let Some(sdram) = self.sdram.as_mut() else { return };
        for p in 0..sdram.phases.len() {
            let [ras, cas, we, ba, a, dq, drive, dqm, dq_in] = sdram.phases[p];
            let get = |port| self.model.get_u64(port).unwrap_or(0);
            let pins = Pins {
                ras_n: get(ras) & 1 == 1,
                cas_n: get(cas) & 1 == 1,
                we_n: get(we) & 1 == 1,
                ba: get(ba) as u8,
                a: get(a) as u16,
                dq: (get(drive) & 1 == 1).then(|| get(dq) as u16),
                dqm: get(dqm) as u8,
            };
            let driven = match Command::from_pins(&pins) {
                Some(command) => sdram.chip.clock(command).unwrap_or_else(|e| {
                    sdram.fault.get_or_insert(format!("cycle {}: {e}", self.cycles));
                    None
                }),
                None => {
                    sdram.fault.get_or_insert(format!("cycle {}: pins {pins:?}", self.cycles));
                    sdram.chip.clock(Command::Nop).unwrap_or(None)
                }
            };
            let _ = self.model.set(dq_in, &[driven.unwrap_or(0) as u32]);
        }
    }

    /// One clock cycle.
    pub fn step(&mut self) {
        self.clock_sdram();
        if let Some((at, _)) = &self.pending_trace {
            if self.cycles >= *at {
                if let Some((_, path)) = self.pending_trace.take() {
                    // A trace that cannot be opened is reported by `trace_error` below.
                    self.trace_failed = self.model.trace(&path).err().map(|e| e.to_string());
                }
            }
        }
        self.model.tick(1);
        self.cycles += 1;
    }

    /// Starts a VCD of every signal at `path` once `cycles` reaches `from` (at once if it has),
    /// so a long run's last cycles can be traced without its whole history. Rerunning the same
    /// host traffic on a fresh model steps the same cycles, so the window is found by a first
    /// run and traced by a second.
    pub fn trace_from(&mut self, path: &std::path::Path, from: u64) {
        self.pending_trace = Some((from, path.to_path_buf()));
        self.trace_failed = None;
    }

    /// Why the trace asked for by [`RtlTop::trace_from`] could not be opened, if it could not.
    pub fn trace_error(&self) -> Option<&str> {
        self.trace_failed.as_deref()
    }

    /// The `busy` status pin, where the top has one (a board build's netlist, whose board
    /// shows only `done` and `error`, has none).
    pub fn busy(&self) -> Option<bool> {
        self.busy.map(|port| self.get(port))
    }

    /// The model, for traces.
    pub fn model(&mut self) -> &mut Model {
        &mut self.model
    }
}

/// The host's UART receiver: samples the device's `uart_tx` once a cycle.
#[derive(Debug)]
/// The host's receiver: samples each bit's middle, `bit` cycles a bit (a fraction where the
/// host's rate is not the device's).
struct UartDecoder {
    bit: f64,
    /// Cycles since the start bit's edge; `None` while the line is idle.
    since: Option<u64>,
    /// Bits sampled of this frame.
    taken: u32,
    byte: u8,
}

impl UartDecoder {
    fn sample(&mut self, line: bool) -> Option<u8> {
        let Some(since) = self.since else {
            if !line {
                self.since = Some(0);
                self.taken = 0;
                self.byte = 0;
            }
            return None;
        };
        self.since = Some(since + 1);
        if since != (self.bit * (self.taken as f64 + 0.5)).round() as u64 {
            return None;
        }
        self.taken += 1;
        match self.taken {
            1 if line => self.since = None, // a glitch, not a start bit
            1 => {}
            2..=9 => self.byte |= (line as u8) << (self.taken - 2),
            _ => {
                self.since = None;
                return line.then_some(self.byte);
            }
        }
        None
    }
}

/// The UART host link: bytes out on `uart_rx`, bytes in from `uart_tx`.
pub struct UartLink {
    pub top: RtlTop,
    divisor: u32,
    /// The host's bit in clock cycles: `divisor`, or a fraction off it for a host whose rate
    /// is not quite the device's ([`UartLink::with_host_rate`]).
    host_bit: f64,
    /// What the host's bits so far have left owed or ahead of whole cycles.
    owed: f64,
    decoder: UartDecoder,
    received: VecDeque<u8>,
    /// Byte times `read_byte` waits before reporting a time-out.
    pub patience_bytes: u64,
    /// Bytes driven onto `uart_rx`, whole frames.
    pub sent: u64,
    /// Bytes decoded from `uart_tx`.
    pub heard: u64,
}

impl UartLink {
    /// A link at `divisor` clock cycles per bit (the design's `uart_divisor`).
    pub fn new(top: RtlTop, divisor: u32) -> UartLink {
        UartLink {
            top,
            divisor,
            host_bit: divisor as f64,
            owed: 0.0,
            decoder: UartDecoder { bit: divisor as f64, since: None, taken: 0, byte: 0 },
            received: VecDeque::new(),
            patience_bytes: 64,
            sent: 0,
            heard: 0,
        }
    }

    /// The same link with the host (a USB bridge) sending and receiving at `rate` times the
    /// device's rate: its bits `divisor / rate` cycles long, each edge on the nearest cycle.
    pub fn with_host_rate(mut self, rate: f64) -> UartLink {
        self.set_host_rate(rate);
        self
    }

    /// From here on, the host sends and receives at `rate` times the device's rate.
    pub fn set_host_rate(&mut self, rate: f64) {
        self.host_bit = self.divisor as f64 / rate;
        self.decoder.bit = self.host_bit;
    }

    fn step(&mut self) {
        self.top.step();
        let line = self.top.get(self.top.uart_tx);
        if let Some(b) = self.decoder.sample(line) {
            self.heard += 1;
            self.received.push_back(b);
        }
    }
}

impl ByteStream for UartLink {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        for &b in bytes {
            let bits = std::iter::once(false)
                .chain((0..8).map(|i| b >> i & 1 == 1))
                .chain(std::iter::once(true));
            for bit in bits {
                let port = self.top.uart_rx;
                self.top.set(port, bit);
                self.owed += self.host_bit;
                let cycles = self.owed.round();
                self.owed -= cycles;
                for _ in 0..cycles as u64 {
                    self.step();
                }
            }
            self.sent += 1;
        }
        Ok(())
    }

    fn read_byte(&mut self) -> Result<u8, TransportError> {
        let limit = self.patience_bytes * 10 * self.divisor as u64;
        for _ in 0..limit {
            if let Some(b) = self.received.pop_front() {
                return Ok(b);
            }
            self.step();
        }
        self.received.pop_front().ok_or(TransportError::Timeout)
    }

    fn discard_input(&mut self) {
        self.received.clear();
    }
}

/// The SPI host link: a mode-0 master on `spi_sck`, `spi_cs_n`, `spi_mosi`, `spi_miso`.
pub struct SpiLink {
    pub top: RtlTop,
    half_period: u32,
    /// Response bytes per transaction (`None`: the whole response in the request's one).
    read_transaction: Option<usize>,
    read_in_transaction: usize,
}

impl SpiLink {
    /// A master with SCK phases of `half_period` clock cycles (at least 4) that reads each
    /// response in the request's transaction.
    pub fn new(top: RtlTop, half_period: u32) -> SpiLink {
        assert!(half_period >= 4, "SCK must stay at or below an eighth of the clock");
        SpiLink { top, half_period, read_transaction: None, read_in_transaction: 0 }
    }

    /// A master that reads responses in transactions of `bytes` bytes, raising CS between them
    /// (as the firmware driver polls).
    pub fn polling(top: RtlTop, half_period: u32, bytes: usize) -> SpiLink {
        SpiLink { read_transaction: Some(bytes.max(1)), ..SpiLink::new(top, half_period) }
    }

    /// Chip select: asserted (CS_n low) or released, with a phase of setup either way.
    pub fn select(&mut self, selected: bool) {
        let cs = self.top.spi_cs_n;
        self.top.set(cs, !selected);
        self.wait(self.half_period * 2);
    }

    /// Ends the current transaction and starts another.
    fn reselect(&mut self) {
        let cs = self.top.spi_cs_n;
        self.top.set(cs, true);
        self.wait(self.half_period * 2);
        self.top.set(cs, false);
        self.wait(self.half_period * 2);
        self.read_in_transaction = 0;
    }

    /// `cycles` clock cycles with the pins as they are.
    pub fn wait(&mut self, cycles: u32) {
        for _ in 0..cycles {
            self.top.step();
        }
    }

    /// One byte each way (chip select must be asserted); MISO is sampled at each rising edge
    /// of SCK.
    pub fn transfer(&mut self, out: u8) -> u8 {
        let mut got = 0u8;
        for i in (0..8).rev() {
            let (mosi, sck, miso) = (self.top.spi_mosi, self.top.spi_sck, self.top.spi_miso);
            self.top.set(mosi, out >> i & 1 == 1);
            self.wait(self.half_period);
            got = got << 1 | self.top.get(miso) as u8;
            self.top.set(sck, true);
            self.wait(self.half_period);
            self.top.set(sck, false);
        }
        got
    }
}

impl ByteStream for SpiLink {
    /// One transaction: CS is raised and lowered again, then the bytes go out.
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        self.reselect();
        for &b in bytes {
            self.transfer(b);
        }
        // The response starts in a transaction of its own when reading in transactions.
        self.read_in_transaction = self.read_transaction.unwrap_or(0);
        Ok(())
    }

    fn read_byte(&mut self) -> Result<u8, TransportError> {
        if let Some(n) = self.read_transaction {
            if self.read_in_transaction >= n {
                self.reselect();
            }
            self.read_in_transaction += 1;
        }
        Ok(self.transfer(SPI_FILLER))
    }
}

/// Either host link, as one byte stream: the machine's link to its host is chosen per run.
pub enum HostLink {
    Uart(UartLink),
    Spi(SpiLink),
}

impl HostLink {
    /// The pins under the link.
    pub fn top(&self) -> &RtlTop {
        match self {
            HostLink::Uart(l) => &l.top,
            HostLink::Spi(l) => &l.top,
        }
    }

    pub fn top_mut(&mut self) -> &mut RtlTop {
        match self {
            HostLink::Uart(l) => &mut l.top,
            HostLink::Spi(l) => &mut l.top,
        }
    }
}

impl ByteStream for HostLink {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        match self {
            HostLink::Uart(l) => l.write_all(bytes),
            HostLink::Spi(l) => l.write_all(bytes),
        }
    }

    fn read_byte(&mut self) -> Result<u8, TransportError> {
        match self {
            HostLink::Uart(l) => l.read_byte(),
            HostLink::Spi(l) => l.read_byte(),
        }
    }

    fn discard_input(&mut self) {
        match self {
            HostLink::Uart(l) => l.discard_input(),
            HostLink::Spi(l) => l.discard_input(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uart_decoder_reads_a_frame_and_skips_glitches() {
        let mut d = UartDecoder { bit: 4.0, since: None, taken: 0, byte: 0 };
        let mut line = vec![true; 3];
        line.extend([false, true, true, true]); // a one-cycle glitch
        for bit in std::iter::once(false)
            .chain((0..8).map(|i| 0xA6u8 >> i & 1 == 1))
            .chain(std::iter::once(true))
        {
            line.extend([bit; 4]);
        }
        line.extend([true; 8]);
        let got: Vec<u8> = line.into_iter().filter_map(|l| d.sample(l)).collect();
        assert_eq!(got, [0xA6]);
    }
}
