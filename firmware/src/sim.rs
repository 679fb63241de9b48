//! Simulated SPI: the driver, unchanged, against a model of the accelerator's SPI slave.
//!
//! [`SimSpi`] is an [`SpiDevice`] that plays each transaction byte by byte into an
//! [`SpiTarget`]: chip select, then one call per byte clocked (mode 0, MSB first: the byte on
//! MOSI in, the byte on MISO out), then chip select released. A target is whatever answers at
//! that level: [`EmulatedTarget`] (feature `emulator`) feeds `systole_core::link::emulator`'s
//! golden-machine device model through the protocol's SPI framing; a Verilated RTL target
//! toggles the SPI pins bit by bit and ticks the clock in between. The driver cannot tell them
//! apart.

use core::convert::Infallible;

use embedded_hal::spi::{ErrorType, Operation, SpiDevice};
use systole_core::protocol::SPI_FILLER;

/// The device end of an SPI link, one byte at a time.
pub trait SpiTarget {
    /// Chip select asserted (`true`, CS_n low) or released.
    fn select(&mut self, selected: bool);
    /// One byte clocked: `mosi` goes in, the returned byte is what MISO carried meanwhile.
    fn transfer_byte(&mut self, mosi: u8) -> u8;
    /// The bus master waits `ns` with chip select held (an `Operation::DelayNs`).
    fn delay_ns(&mut self, ns: u32) {
        let _ = ns;
    }
}

/// An [`SpiDevice`] over an [`SpiTarget`]. Bytes the master does not specify (a plain read,
/// the tail of an uneven transfer) are [`SPI_FILLER`].
#[derive(Debug, Default)]
pub struct SimSpi<T> {
    /// The device end.
    pub target: T,
    /// Transactions played so far.
    pub transactions: u64,
    /// Bytes clocked so far (for link-time estimates: 8 SCK periods each).
    pub bytes: u64,
}

impl<T: SpiTarget> SimSpi<T> {
    /// A bus with one device, `target`.
    pub fn new(target: T) -> Self {
        SimSpi { target, transactions: 0, bytes: 0 }
    }

    fn byte(&mut self, mosi: u8) -> u8 {
        self.bytes = self.bytes.wrapping_add(1);
        self.target.transfer_byte(mosi)
    }
}

impl<T> ErrorType for SimSpi<T> {
    type Error = Infallible;
}

impl<T: SpiTarget> SpiDevice for SimSpi<T> {
    fn transaction(&mut self, operations: &mut [Operation<'_, u8>]) -> Result<(), Infallible> {
        self.transactions = self.transactions.wrapping_add(1);
        self.target.select(true);
        for op in operations {
            match op {
                Operation::Read(buf) => {
                    for b in buf.iter_mut() {
                        *b = self.byte(SPI_FILLER);
                    }
                }
                Operation::Write(buf) => {
                    for &b in buf.iter() {
                        self.byte(b);
                    }
                }
                Operation::Transfer(read, write) => {
                    for i in 0..read.len().max(write.len()) {
                        let miso = self.byte(write.get(i).copied().unwrap_or(SPI_FILLER));
                        if let Some(r) = read.get_mut(i) {
                            *r = miso;
                        }
                    }
                }
                Operation::TransferInPlace(buf) => {
                    for b in buf.iter_mut() {
                        *b = self.byte(*b);
                    }
                }
                Operation::DelayNs(ns) => self.target.delay_ns(*ns),
            }
        }
        self.target.select(false);
        Ok(())
    }
}

#[cfg(feature = "emulator")]
pub use emulated::EmulatedTarget;

#[cfg(feature = "emulator")]
mod emulated {
    extern crate alloc;
    use alloc::collections::VecDeque;
    use alloc::vec::Vec;

    use systole_core::link::emulator::Emulator;
    use systole_core::protocol::{frame_len, HEADER_BYTES, MAX_PAYLOAD, REQUEST_SYNC, SPI_IDLE};

    use super::SpiTarget;

    /// The protocol's SPI framing in front of `systole_core::link::emulator::Emulator`, as the
    /// hardware's SPI slave is specified (core's `protocol` module docs):
    ///
    /// * While no response is pending MISO carries [`SPI_IDLE`]; bytes on MOSI are ignored
    ///   until a [`REQUEST_SYNC`] (so the master's [`SPI_FILLER`](super::SPI_FILLER) polls are
    ///   never taken for a request).
    /// * From a sync byte on, MOSI bytes are collected until the frame its header announces is
    ///   complete (a length over `MAX_PAYLOAD` ends it at the header: the device answers
    ///   `Length`). Releasing chip select mid-request drops the partial request.
    /// * The complete request is served; after [`latency`](Self::latency) more bytes of
    ///   [`SPI_IDLE`] (the device's processing time) the response goes out on MISO one byte per
    ///   byte clocked, across as many transactions as the master uses, then [`SPI_IDLE`] again.
    ///   A new request drops whatever is left of an old response.
    pub struct EmulatedTarget {
        /// The device model behind the framing.
        pub emulator: Emulator,
        /// [`SPI_IDLE`] bytes between a request's last byte and its response's first.
        pub latency: u32,
        /// Requests served so far.
        pub served: u32,
        request: Vec<u8>,
        response: VecDeque<u8>,
        wait: u32,
    }

    impl EmulatedTarget {
        /// `emulator` behind the SPI framing, answering `latency` idle bytes late.
        pub fn new(emulator: Emulator, latency: u32) -> Self {
            EmulatedTarget {
                emulator,
                latency,
                served: 0,
                request: Vec::new(),
                response: VecDeque::new(),
                wait: 0,
            }
        }

        fn collect(&mut self, mosi: u8) {
            if self.request.is_empty() {
                if mosi != REQUEST_SYNC {
                    return;
                }
                self.response.clear();
            }
            self.request.push(mosi);
            let Some(&[_, _, lo, hi]) = self.request.get(..HEADER_BYTES) else { return };
            let len = u16::from_le_bytes([lo, hi]) as usize;
            if len > MAX_PAYLOAD || self.request.len() == frame_len(len) {
                let answer = self.emulator.serve(&self.request);
                self.request.clear();
                self.response = answer.into();
                self.wait = self.latency;
                self.served = self.served.wrapping_add(1);
            }
        }
    }

    impl SpiTarget for EmulatedTarget {
        fn select(&mut self, selected: bool) {
            if !selected {
                self.request.clear();
            }
        }

        fn transfer_byte(&mut self, mosi: u8) -> u8 {
            // MISO's byte is decided before this byte's clocks start; MOSI's lands after.
            let miso = if self.response.is_empty() {
                SPI_IDLE
            } else if self.wait > 0 {
                self.wait = self.wait.saturating_sub(1);
                SPI_IDLE
            } else {
                self.response.pop_front().unwrap_or(SPI_IDLE)
            };
            self.collect(mosi);
            miso
        }
    }
}
