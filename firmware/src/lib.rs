#![doc = include_str!("../README.md")]
#![no_std]
#![forbid(unsafe_code)]
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
#![warn(missing_docs)]

// The logging shim goes first so that every module below sees its macros.
mod fmt;

mod driver;
mod error;
mod inference;
#[cfg(feature = "sim")]
pub mod sim;

pub use driver::{first_mismatch, Options, Program, Result, Systole, WORD_BYTES};
pub use error::{Error, IdentityField};
pub use inference::Input;

/// The core types a driver's user needs, re-exported so one dependency suffices.
pub use systole_core::blob::{Blob, BlobError};
pub use systole_core::machine::Region;
pub use systole_core::protocol::{ErrorCode, FaultCode, Identity, ProtocolError, Status};

/// docs/FIRMWARE.md, whose examples `cargo test --doc` compiles with the crate's.
#[cfg(doctest)]
#[doc = include_str!("../../docs/FIRMWARE.md")]
pub struct FirmwareGuide;
