//! The host interface: core's packet protocol (core/src/protocol.rs) over a UART and an SPI
//! slave, sharing one frame parser, CRC engine and request executor ([`PacketEngine`]).
//!
//! The engine buffers a whole request (payload up to 5 + `max_data` bytes in block RAM, the CRC
//! computed as bytes arrive), checks it in core's order (checksum, length, command, fields, then
//! busy, range, alignment, FIFO room) and only then executes it; a bad request is answered with
//! its error code and never executed. Its answers are those of `core::link::emulator::Emulator`
//! (docs/HARDWARE.md lists the two places where a real FIFO differs).
//!
//! * [`UartRx`] / [`UartTx`]: 8N1, `divisor` clock cycles per bit, LSB first.
//! * [`SpiSlave`]: mode 0 (SCK idles low, MOSI sampled on the rising edge, MISO changes after the
//!   falling edge), MSB first, its pins synchronised to the system clock, so SCK must stay at or
//!   below an eighth of it. Core's framing rules (core/src/protocol.rs, "Over SPI"): a request
//!   in one transaction (raising CS part-way abandons it), MISO `SPI_IDLE` until the response is
//!   ready, then the response one byte per byte clocked, across as many transactions as the
//!   master likes. A request sync byte on MOSI while a response is still pending abandons that
//!   response and starts the new request (the master gave up on the old one).

mod crc;
mod engine;
mod host_map;
mod row_divider;
mod spi;
mod uart;

pub use crc::Crc16Step;
pub use engine::{LinkState, PacketEngine, Payload};
pub use host_map::{request_buffer_bytes, HostMap};
pub use row_divider::RowDivider;
pub use spi::SpiSlave;
pub use uart::{rate_error_limit, sampling_margin, UartRx, UartTx};
