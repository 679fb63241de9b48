//! The chip as its datasheet describes it: it keeps the words written, drives a READ's word
//! `cas` cycles after the command, and refuses a command that breaks a rule, judged in
//! nanoseconds at the clock's period, independently of the cycle counts the controller derives
//! ([`SdramTiming`](super::SdramTiming)). A test's stand-in for the board's chip.

extern crate alloc;
use alloc::collections::{BTreeMap, VecDeque};

use super::{kept_bits, Command, Location, SdramPart};

/// A command the chip refuses.
#[derive(Clone, Debug, PartialEq)]
pub enum ChipError {
    /// Too soon after an earlier command.
    Timing { cycle: u64, command: &'static str, rule: &'static str, had_ns: f64, need_ns: f64 },
    /// Not allowed in the chip's state.
    State { cycle: u64, command: &'static str, why: &'static str },
    /// More refreshes owed than the chip may postpone.
    RefreshOverdue { cycle: u64, given: u64, owed: u64 },
}

impl core::fmt::Display for ChipError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ChipError::Timing { cycle, command, rule, had_ns, need_ns } => write!(
                f,
                "cycle {cycle}: {command} breaks {rule}: {had_ns:.1} ns, the datasheet's minimum \
                 {need_ns:.1} ns"
            ),
            ChipError::State { cycle, command, why } => {
                write!(f, "cycle {cycle}: {command}: {why}")
            }
            ChipError::RefreshOverdue { cycle, given, owed } => write!(
                f,
                "cycle {cycle}: {given} refreshes given where {owed} were owed: more than the \
                 chip may postpone"
            ),
        }
    }
}

/// The chip's state and memory.
pub struct Chip {
    part: SdramPart,
    period_ns: f64,
    now: u64,
    words: BTreeMap<u32, u16>,
    open: [Option<u16>; 4],
    active: [Option<u64>; 4],
    precharge: [Option<u64>; 4],
    write: [Option<u64>; 4],
    any_active: Option<u64>,
    refresh: Option<u64>,
    /// Power-up progress: PRECHARGE ALL seen, refreshes seen, the cycle of LOAD MODE REGISTER.
    precharged: bool,
    refreshes: u64,
    mode: Option<(u64, u8)>,
    /// The words READs will drive, with their cycles.
    out: VecDeque<(u64, u16)>,
}

impl Chip {
    /// A chip just powered, clocked at `clock_mhz`.
    pub fn new(part: SdramPart, clock_mhz: f64) -> Chip {
        Chip {
            part,
            period_ns: 1000.0 / clock_mhz,
            now: 0,
            words: BTreeMap::new(),
            open: [None; 4],
            active: [None; 4],
            precharge: [None; 4],
            write: [None; 4],
            any_active: None,
            refresh: None,
            precharged: false,
            refreshes: 0,
            mode: None,
            out: VecDeque::new(),
        }
    }

    /// The cycle the next command is given in.
    pub const fn now(&self) -> u64 {
        self.now
    }

    /// One cycle with `command` on the pins: the word the chip drives on its data pins in it.
    pub fn clock(&mut self, command: Command) -> Result<Option<u16>, ChipError> {
        self.check(command)?;
        self.apply(command);
        let t = self.now;
        self.now += 1;
        let word = match self.out.front() {
            Some(&(due, word)) if due == t => {
                self.out.pop_front();
                Some(word)
            }
            _ => None,
        };
        Ok(word)
    }

    /// The cycle of the next word a READ will drive, if any.
    pub fn next_word_at(&self) -> Option<u64> {
        self.out.front().map(|&(due, _)| due)
    }

    /// Cycles with nothing but NOP until `cycle` (a NOP breaks no rule but the refresh's); the
    /// caller clocks the cycles a READ's word is driven in.
    pub fn idle_until(&mut self, cycle: u64) -> Result<(), ChipError> {
        if let Some(due) = self.next_word_at() {
            assert!(due >= cycle, "a READ's word at {due} would be skipped");
        }
        self.now = self.now.max(cycle);
        self.check_refreshes()
    }

    fn since(&self, at: Option<u64>) -> f64 {
        at.map_or(f64::INFINITY, |at| (self.now - at) as f64 * self.period_ns)
    }

    fn rule(
        &self,
        command: Command,
        rule: &'static str,
        at: Option<u64>,
        need_ns: f64,
    ) -> Result<(), ChipError> {
        let had_ns = self.since(at);
        match had_ns >= need_ns - 1e-6 {
            true => Ok(()),
            false => Err(ChipError::Timing {
                cycle: self.now,
                command: command.name(),
                rule,
                had_ns,
                need_ns,
            }),
        }
    }

    fn state(&self, command: Command, why: &'static str) -> ChipError {
        ChipError::State { cycle: self.now, command: command.name(), why }
    }

    /// Refreshes owed by now since the chip was ready, less the ones it may postpone.
    fn check_refreshes(&self) -> Result<(), ChipError> {
        let Some((mode, _)) = self.mode else { return Ok(()) };
        let elapsed = (self.now - mode) as f64 * self.period_ns;
        let owed = (elapsed / self.part.t_refi) as u64;
        // The two refreshes of the power-up are not counted.
        let given = self.refreshes.saturating_sub(2);
        match owed > given + self.part.postponed_refreshes {
            true => Err(ChipError::RefreshOverdue { cycle: self.now, given, owed }),
            false => Ok(()),
        }
    }

    fn check(&self, command: Command) -> Result<(), ChipError> {
        let p = &self.part;
        let powered = self.now as f64 * self.period_ns;
        if command != Command::Nop && powered < p.t_init - 1e-6 {
            return Err(self.state(command, "before the power-up wait"));
        }
        if let Some((at, _)) = self.mode {
            if command != Command::Nop {
                self.rule(command, "tMRD", Some(at), p.mrd_clocks as f64 * self.period_ns)?;
            }
        }
        self.check_refreshes()?;
        let ready = self.mode.is_some();
        let all_closed = self.open.iter().all(Option::is_none);
        match command {
            Command::Nop => {}
            Command::Active { bank, .. } => {
                let b = bank as usize;
                if !ready {
                    return Err(self.state(command, "before the mode register is loaded"));
                }
                if self.open[b].is_some() {
                    return Err(self.state(command, "the bank has a row open"));
                }
                self.rule(command, "tRP", self.precharge[b], p.t_rp)?;
                self.rule(command, "tRC", self.active[b], p.t_rc)?;
                self.rule(command, "tRRD", self.any_active, p.t_rrd)?;
                self.rule(command, "tRFC", self.refresh, p.t_rfc)?;
            }
            Command::Read { bank, .. } | Command::Write { bank, .. } => {
                let b = bank as usize;
                if self.open[b].is_none() {
                    return Err(self.state(command, "the bank has no row open"));
                }
                self.rule(command, "tRCD", self.active[b], p.t_rcd)?;
                if matches!(command, Command::Write { .. })
                    && self.out.iter().any(|&(due, _)| due >= self.now)
                {
                    return Err(
                        self.state(command, "the chip drives a READ's word on the data pins")
                    );
                }
            }
            Command::Precharge { bank } => {
                for b in 0..p.geometry.banks as usize {
                    if bank.is_none_or(|one| one as usize == b) && self.open[b].is_some() {
                        self.rule(command, "tRAS", self.active[b], p.t_ras)?;
                        self.rule(command, "tWR", self.write[b], p.t_wr)?;
                    }
                }
            }
            Command::Refresh => {
                if !self.precharged {
                    return Err(self.state(command, "before the power-up's PRECHARGE ALL"));
                }
                if !all_closed {
                    return Err(self.state(command, "a bank has a row open"));
                }
                for b in 0..p.geometry.banks as usize {
                    self.rule(command, "tRP", self.precharge[b], p.t_rp)?;
                    self.rule(command, "tRC", self.active[b], p.t_rc)?;
                }
                self.rule(command, "tRFC", self.refresh, p.t_rfc)?;
            }
            Command::LoadMode { cas } => {
                if self.refreshes < 2 || !all_closed {
                    return Err(self.state(command, "before the power-up's two refreshes"));
                }
                let max_mhz = match cas {
                    2 => p.cl2_max_mhz,
                    3 => p.cl3_max_mhz,
                    _ => 0.0,
                };
                if self.period_ns < 1000.0 / max_mhz - 1e-6 {
                    return Err(self.state(command, "a CAS latency the clock does not allow"));
                }
                self.rule(command, "tRFC", self.refresh, p.t_rfc)?;
            }
        }
        Ok(())
    }

    fn apply(&mut self, command: Command) {
        let t = self.now;
        let g = self.part.geometry;
        match command {
            Command::Nop => {}
            Command::Active { bank, row } => {
                self.open[bank as usize] = Some(row);
                self.active[bank as usize] = Some(t);
                self.any_active = Some(t);
            }
            Command::Read { bank, col } => {
                let row = self.open[bank as usize].unwrap_or(0);
                let word = g.word(Location { bank, row, col });
                let cas = self.mode.map_or(0, |(_, cas)| cas as u64);
                self.out.push_back((t + cas, self.words.get(&word).copied().unwrap_or(0)));
            }
            Command::Write { bank, col, data, mask } => {
                let row = self.open[bank as usize].unwrap_or(0);
                let word = g.word(Location { bank, row, col });
                let kept = kept_bits(mask);
                let old = self.words.get(&word).copied().unwrap_or(0);
                self.words.insert(word, old & kept | data & !kept);
                self.write[bank as usize] = Some(t);
            }
            Command::Precharge { bank } => {
                self.precharged = true;
                for b in 0..g.banks as usize {
                    if bank.is_none_or(|one| one as usize == b) && self.open[b].take().is_some() {
                        self.precharge[b] = Some(t);
                    }
                }
            }
            Command::Refresh => {
                self.refresh = Some(t);
                self.refreshes += 1;
            }
            Command::LoadMode { cas } => self.mode = Some((t, cas)),
        }
    }
}
