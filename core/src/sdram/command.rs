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
    /// Write one word to the open row, but the bytes `mask` holds: bit 0 the low byte, bit 1 the
    /// high byte (the DQM pins, high to mask).
    Write {
        bank: u8,
        col: u16,
        data: u16,
        mask: u8,
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

/// The chip's command pins in one cycle (CS# held low): RAS#, CAS#, WE#, the bank and address
/// pins, and the data pins when the controller drives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pins {
    pub ras_n: bool,
    pub cas_n: bool,
    pub we_n: bool,
    pub ba: u8,
    pub a: u16,
    /// The word on the data pins, when the controller drives them (a WRITE).
    pub dq: Option<u16>,
    /// DQM: bit 0 masks the low byte of a WRITE, bit 1 the high byte (low otherwise).
    pub dqm: u8,
}

/// The bits of a word that a WRITE with DQM `mask` leaves as they were.
pub const fn kept_bits(mask: u8) -> u16 {
    ((mask & 1) as u16 * 0x00ff) | ((mask >> 1 & 1) as u16 * 0xff00)
}

/// Address pin A10: on PRECHARGE, every bank; on READ and WRITE, auto precharge (never used).
pub const A10: u16 = 1 << 10;

impl Command {
    /// The pins that give this command (the datasheet's truth table). LOAD MODE REGISTER's
    /// address is the mode: burst length 1 (A2..A0 = 0), sequential, the CAS latency in A6..A4,
    /// single-word writes (A9).
    pub const fn pins(&self) -> Pins {
        let dqm = match *self {
            Command::Write { mask, .. } => mask,
            _ => 0,
        };
        let (ras_n, cas_n, we_n, ba, a, dq) = match *self {
            Command::Nop => (true, true, true, 0, 0, None),
            Command::Active { bank, row } => (false, true, true, bank, row, None),
            Command::Read { bank, col } => (true, false, true, bank, col, None),
            Command::Write { bank, col, data, .. } => (true, false, false, bank, col, Some(data)),
            Command::Precharge { bank: Some(bank) } => (false, true, false, bank, 0, None),
            Command::Precharge { bank: None } => (false, true, false, 0, A10, None),
            Command::Refresh => (false, false, true, 0, 0, None),
            Command::LoadMode { cas } => (false, false, false, 0, (cas as u16) << 4 | 1 << 9, None),
        };
        Pins { ras_n, cas_n, we_n, ba, a, dq, dqm }
    }

    /// The command the pins give, read as the chip reads them: `None` for a pin pattern the
    /// controller never drives (BURST TERMINATE, a READ or WRITE with auto precharge, a
    /// WRITE without its word, a mode this controller does not set).
    pub const fn from_pins(p: &Pins) -> Option<Command> {
        let bank = p.ba;
        let all = p.a & A10 != 0;
        let col = p.a & !A10;
        Some(match (p.ras_n, p.cas_n, p.we_n) {
            (true, true, true) => Command::Nop,
            (false, true, true) => Command::Active { bank, row: p.a },
            (true, false, true) if !all => Command::Read { bank, col },
            (true, false, false) if !all => match p.dq {
                Some(data) => Command::Write { bank, col, data, mask: p.dqm },
                None => return None,
            },
            (false, true, false) if all => Command::Precharge { bank: None },
            (false, true, false) => Command::Precharge { bank: Some(bank) },
            (false, false, true) => Command::Refresh,
            (false, false, false) if p.a & !(7 << 4) == 1 << 9 => {
                Command::LoadMode { cas: ((p.a >> 4) & 7) as u8 }
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_reads_back_from_its_pins() {
        let commands = [
            Command::Nop,
            Command::Active { bank: 3, row: 8191 },
            Command::Read { bank: 1, col: 511 },
            Command::Write { bank: 2, col: 7, data: 0xBEEF, mask: 0 },
            Command::Write { bank: 0, col: 8, data: 0x00EF, mask: 2 },
            Command::Precharge { bank: Some(3) },
            Command::Precharge { bank: None },
            Command::Refresh,
            Command::LoadMode { cas: 2 },
            Command::LoadMode { cas: 3 },
        ];
        for c in commands {
            assert_eq!(Command::from_pins(&c.pins()), Some(c), "{c:?}");
        }
        let burst_terminate =
            Pins { ras_n: true, cas_n: true, we_n: false, ba: 0, a: 0, dq: None, dqm: 0 };
        assert_eq!(Command::from_pins(&burst_terminate), None);
        let auto_precharge = Pins { a: A10, ..Command::Read { bank: 0, col: 0 }.pins() };
        assert_eq!(Command::from_pins(&auto_precharge), None);
    }
}
