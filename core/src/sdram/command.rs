//! The commands an SDR SDRAM takes on its pins (CS#, RAS#, CAS#, WE#, the bank and address
//! pins, and the data pins for a write), one a cycle.

/// One cycle's command to the chip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Command {
    Nop,
    /// Open `row` in `bank`.
    Active {
        bank: u8,
        row: u16,
    },
    /// Read one word of the open row (burst length 1).
    Read {
        bank: u8,
        col: u16,
    },
    /// Write one word to the open row.
    Write {
        bank: u8,
        col: u16,
        data: u16,
    },
    /// Close the open row of `bank`, or of every bank.
    Precharge {
        bank: Option<u8>,
    },
    /// Refresh one row of every bank (all banks closed).
    Refresh,
    /// Program the mode register: burst length 1, sequential, this CAS latency.
    LoadMode {
        cas: u8,
    },
}

impl Command {
    /// The datasheet's name.
    pub const fn name(&self) -> &'static str {
        match self {
            Command::Nop => "NOP",
            Command::Active { .. } => "ACTIVE",
            Command::Read { .. } => "READ",
            Command::Write { .. } => "WRITE",
            Command::Precharge { bank: Some(_) } => "PRECHARGE",
            Command::Precharge { bank: None } => "PRECHARGE ALL",
            Command::Refresh => "AUTO REFRESH",
            Command::LoadMode { .. } => "LOAD MODE REGISTER",
        }
    }
}
