//! What can go wrong driving the accelerator, generic over the SPI bus's own error.

use systole_core::protocol::{ErrorCode, FaultCode, ProtocolError};

/// Why a driver call failed.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error<E> {
    /// The SPI bus (or its chip select) failed; nothing is retried over a failing bus.
    Spi(E),
    /// No response within the poll limit ([`Options::response_polls`]), or the program did not
    /// finish within [`Options::status_polls`], after every retry the request allows.
    ///
    /// [`Options::response_polls`]: crate::Options::response_polls
    /// [`Options::status_polls`]: crate::Options::status_polls
    Timeout,
    /// A response whose CRC does not match, after every retry the request allows.
    Checksum,
    /// The accelerator refused the request with this code (a [`ErrorCode::Checksum`] refusal is
    /// one of our request arriving corrupted, and is only reported once the retries are spent).
    Device(ErrorCode),
    /// The controller stopped the program with this fault code.
    Fault(FaultCode),
    /// Word `index` of a program fails the program checks of an accelerator built without
    /// them (`Identity::program_checks`), which its driver makes in their place: `code` is the
    /// fault a checking device would have stopped on. Nothing of the program was sent.
    Invalid {
        /// The word's index in the program.
        index: usize,
        /// The fault code of its first failing check.
        code: FaultCode,
    },
    /// The accelerator is not the one the caller expects (a blob's target, say): `field` is the
    /// first that differs.
    Mismatch {
        /// The first field that differs.
        field: IdentityField,
        /// The caller's value.
        expected: u32,
        /// The accelerator's value.
        found: u32,
    },
    /// A response that is not a valid frame, or whose payload is not what the command returns.
    Protocol(ProtocolError),
    /// A caller's buffer has the wrong length: `what` names it.
    Buffer {
        /// Which buffer: "input", "logits", "program bytes", ...
        what: &'static str,
        /// Its length the request needs.
        expected: usize,
        /// Its length as given.
        got: usize,
    },
}

/// A field of the accelerator's identity (what `Identify` returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IdentityField {
    /// `systole_core::isa::ISA_VERSION` the hardware decodes.
    IsaVersion,
    /// PE rows.
    Rows,
    /// PE columns.
    Cols,
    /// 0 INT8, 1 BF16 (the `Identify` encoding).
    Dtype,
    /// 0 weight-stationary, 1 output-stationary (the `Identify` encoding).
    Dataflow,
    /// Scratchpad rows.
    SpadDepth,
    /// Accumulator rows.
    AccDepth,
    /// 0 blocking, 1 decoupled (`systole_core::Schedule::code`): a program's cycles differ.
    Schedule,
    /// The accelerator has fewer DRAM bytes than expected (found < expected).
    DramBytes,
    /// The program needs the INT8 lanes' comparator (`ArrayConfig::int8_max`) and the
    /// accelerator was built without it (1 with, 0 without).
    Int8Max,
}

impl IdentityField {
    /// The field's name in messages.
    pub const fn name(self) -> &'static str {
        match self {
            IdentityField::IsaVersion => "ISA version",
            IdentityField::Rows => "rows",
            IdentityField::Cols => "cols",
            IdentityField::Dtype => "dtype",
            IdentityField::Dataflow => "dataflow",
            IdentityField::SpadDepth => "scratchpad depth",
            IdentityField::AccDepth => "accumulator depth",
            IdentityField::Schedule => "schedule",
            IdentityField::DramBytes => "DRAM bytes",
            IdentityField::Int8Max => "INT8 comparator",
        }
    }
}

impl<E> From<ProtocolError> for Error<E> {
    fn from(e: ProtocolError) -> Self {
        Error::Protocol(e)
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for Error<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Spi(e) => write!(f, "SPI bus error: {e:?}"),
            Error::Timeout => write!(f, "the accelerator did not answer within the poll limit"),
            Error::Checksum => write!(f, "corrupted response (CRC mismatch) after every retry"),
            Error::Device(code) => write!(f, "the accelerator refused the request: {code:?}"),
            Error::Fault(code) => write!(f, "the controller stopped the program: fault {code:?}"),
            Error::Invalid { index, code } => write!(
                f,
                "program word {index} fails the accelerator's program checks (fault {code:?}); \
                 the accelerator leaves them to its driver, so nothing was sent"
            ),
            Error::Mismatch { field, expected, found } => {
                write!(f, "the accelerator's {} is {found}, expected {expected}", field.name())
            }
            Error::Protocol(e) => write!(f, "bad response: {e}"),
            Error::Buffer { what, expected, got } => {
                write!(f, "{what} has {got} elements, expected {expected}")
            }
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for Error<E> {}
