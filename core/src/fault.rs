//! The vocabulary that machines, the host link, the protocol and the timing model share: the
//! memories a host addresses and every way a run can fail. It imports nothing of core, so those
//! modules depend on it and never on each other in a circle.

/// One of a machine's memories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Region {
    Dram,
    Spad,
    Acc,
}

impl Region {
    pub const fn name(self) -> &'static str {
        match self {
            Region::Dram => "dram",
            Region::Spad => "spad",
            Region::Acc => "acc",
        }
    }
}

/// A fault found while executing a valid program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ExecErrorKind {
    /// `Matmul { swap: true }` with no `LoadWeights` since the last swap: it would wait forever.
    NoWeightsLoaded,
}

/// Why the accelerator refused a request: the response code (never 0, which is OK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum ErrorCode {
    /// The CRC does not match the frame.
    Checksum = 1,
    /// The command code is unknown.
    Command = 2,
    /// The payload length does not fit the command.
    Length = 3,
    /// The region code is not 0 (DRAM), 1 (scratchpad) or 2 (accumulators).
    Region = 4,
    /// The access runs past the end of the memory.
    OutOfRange = 5,
    /// A memory command while a program runs.
    Busy = 6,
    /// More instruction words than the FIFO has room for.
    FifoFull = 7,
    /// A scratchpad or accumulator access not aligned to its element size.
    Misaligned = 8,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::Checksum,
        ErrorCode::Command,
        ErrorCode::Length,
        ErrorCode::Region,
        ErrorCode::OutOfRange,
        ErrorCode::Busy,
        ErrorCode::FifoFull,
        ErrorCode::Misaligned,
    ];

    pub fn from_code(code: u8) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| *c as u8 == code)
    }
}

/// Why the controller stopped a program: the error code of the status register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum FaultCode {
    /// The opcode field holds no known opcode.
    Opcode = 1,
    /// A field is out of its range.
    Field = 2,
    /// A field the operation does not use is not zero.
    UnusedField = 3,
    /// Reserved bits above the last field are not zero.
    Reserved = 4,
    /// The instruction needs the other dataflow.
    Dataflow = 5,
    /// The instruction needs the other dtype.
    Dtype = 6,
    /// A count exceeds the array (`len`, `rows` or `cols`).
    TooWide = 7,
    /// Rows or bytes run past the end of a memory.
    Range = 8,
    /// `Matmul { swap }` with no `LoadWeights` pending.
    NoWeightsLoaded = 9,
}

impl FaultCode {
    pub const ALL: [FaultCode; 9] = [
        FaultCode::Opcode,
        FaultCode::Field,
        FaultCode::UnusedField,
        FaultCode::Reserved,
        FaultCode::Dataflow,
        FaultCode::Dtype,
        FaultCode::TooWide,
        FaultCode::Range,
        FaultCode::NoWeightsLoaded,
    ];

    pub fn from_code(code: u8) -> Option<FaultCode> {
        FaultCode::ALL.iter().copied().find(|c| *c as u8 == code)
    }
}

/// Why bytes are not a valid frame (on either side of the link).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ProtocolError {
    /// The first byte is not the expected sync byte.
    Sync { got: u8 },
    /// Fewer bytes than the header announces, or more.
    Frame { expected: usize, got: usize },
    /// The CRC does not match.
    Checksum { expected: u16, got: u16 },
    /// The payload is longer than the protocol's `MAX_PAYLOAD`, `max`.
    TooLong { len: usize, max: usize },
    /// What the accelerator answers this frame with.
    Refused(ErrorCode),
    /// A response payload that is not what the command returns.
    Field,
    /// The output buffer is too small.
    Buffer { needed: usize },
}

impl core::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ProtocolError::Sync { got } => {
                write!(f, "frame starts with {got:#04x}, not a sync byte")
            }
            ProtocolError::Frame { expected, got } => {
                write!(f, "frame of {got} bytes, its header announces {expected}")
            }
            ProtocolError::Checksum { expected, got } => {
                write!(f, "checksum {got:#06x} does not match the frame's {expected:#06x}")
            }
            ProtocolError::TooLong { len, max } => {
                write!(f, "payload of {len} bytes exceeds {max}")
            }
            ProtocolError::Refused(code) => write!(f, "refused: {code:?}"),
            ProtocolError::Field => write!(f, "malformed response payload"),
            ProtocolError::Buffer { needed } => write!(f, "output buffer needs {needed} bytes"),
        }
    }
}

/// Why one exchange failed below the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TransportError {
    /// No complete response within the transport's time limit.
    Timeout,
    /// The transport itself failed (a closed port, an SPI bus error).
    Io,
}

/// What went wrong on the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LinkFault {
    Transport(TransportError),
    /// A response that is not a valid frame, after every retry.
    Protocol(ProtocolError),
    /// The accelerator refused a request.
    Refused(ErrorCode),
    /// The response to a non-idempotent request was lost: whether it took effect is unknown.
    Unknown {
        command: &'static str,
    },
    /// The program never finished within the poll limit.
    Hung {
        polls: u32,
    },
    /// The accelerator was reset while the program ran.
    Reset,
    /// The controller stopped on a fault code no valid program can cause.
    Fault(FaultCode),
    /// The accelerator finished a program that must fault.
    Missed(ExecErrorKind),
}

impl core::fmt::Display for LinkFault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LinkFault::Transport(TransportError::Timeout) => write!(f, "no response (time-out)"),
            LinkFault::Transport(TransportError::Io) => write!(f, "the transport failed"),
            LinkFault::Protocol(e) => write!(f, "bad response: {e}"),
            LinkFault::Refused(code) => write!(f, "the accelerator refused the request: {code:?}"),
            LinkFault::Unknown { command } => write!(
                f,
                "the response to {command} was lost, so whether it ran is unknown; reset and retry"
            ),
            LinkFault::Hung { polls } => {
                write!(f, "the program did not finish in {polls} status polls")
            }
            LinkFault::Reset => write!(f, "the accelerator was reset during the run"),
            LinkFault::Fault(code) => write!(f, "the controller stopped with fault {code:?}"),
            LinkFault::Missed(kind) => write!(f, "the accelerator did not detect {kind:?}"),
        }
    }
}
