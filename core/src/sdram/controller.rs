//! The SDRAM controller, cycle by cycle: the one definition of when each command goes to the
//! chip, which the cycle machine steps and the RTL's controller meets cycle for cycle.
//!
//! # The rules (the contract)
//!
//! Cycle 0 is the first cycle of a run. The chip is then initialized, every bank is closed, and
//! every rule is met for any command. In each cycle the controller gives one command:
//!
//! 1. **Refresh first.** Refresh `k` is due from cycle `k * refi` (`k` = 0, 1, ...), a fixed
//!    cadence from the run's start whatever the traffic. While one is due: if a row is open,
//!    PRECHARGE ALL once every open bank may close (tRAS since its ACTIVE, tWR since its last
//!    WRITE, and a cycle after its last READ); then AUTO REFRESH once every bank has been
//!    closed for tRP, tRC has passed since the last ACTIVE and tRFC since the last REFRESH.
//!    The request waits meanwhile.
//! 2. **Else the word offered**, in bank `b`, row `r` (open page: a row stays open until a miss
//!    or a refresh closes it):
//!    * `r` open in `b` (a hit): READ, or WRITE with its word and byte mask (the DQM pins),
//!      once tRCD has passed since the ACTIVE; a WRITE also waits until the data pins are free
//!      of the last READ's word (`cas + 1` cycles after it). The request is accepted in that
//!      cycle.
//!    * another row open in `b` (a miss): PRECHARGE `b` when it may close (as in 1).
//!    * `b` closed: ACTIVE `b` `r` once tRP has passed since its PRECHARGE, tRC since its last
//!      ACTIVE, tRRD since any bank's ACTIVE and tRFC since the last REFRESH.
//! 3. **Else** NOP.
//!
//! A READ's word reaches the controller [`IO_STAGES`] `+ cas` cycles after the cycle it gave
//! the READ in ([`Controller::read_latency`]): the command leaves through a register in the
//! pin's I/O cell, the chip drives the word `cas` cycles after it samples the command, and the
//! word comes in through a register in the data pin's I/O cell.

use super::{Command, Geometry, SdramTiming};

/// Registers between the controller and the chip's pins: one on the way out (command, address,
/// write data), one on the way in (read data).
pub const IO_STAGES: u64 = 2;

/// Array cycles from the one a READ is given in to the one its word lands in, on a port giving
/// `ratio` commands an array cycle: the registers out and in ([`IO_STAGES`]) and the CAS
/// latency rounded up to array cycles (`timing::sdram`'s contract, docs/DECISIONS.md 146).
pub const fn read_arrival(t: &SdramTiming, ratio: u64) -> u64 {
    IO_STAGES + t.cas.div_ceil(ratio)
}

/// A word offered to the controller: a read, or a write of `data` but the bytes `mask` holds
/// (as [`Command::Write`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Request {
    pub word: u32,
    pub write: Option<u16>,
    pub mask: u8,
}

/// The controller's state: the open rows and the first cycle each rule allows each command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Controller {
    pub timing: SdramTiming,
    pub geometry: Geometry,
    now: u64,
    open: [Option<u16>; 4],
    /// First cycle of an ACTIVE, READ or WRITE, and PRECHARGE, in each bank.
    active_ok: [u64; 4],
    access_ok: [u64; 4],
    close_ok: [u64; 4],
    /// First cycle of an ACTIVE in any bank (tRRD), a WRITE (the data pins), a REFRESH.
    any_active_ok: u64,
    write_ok: u64,
    refresh_ok: u64,
    refreshes: u64,
}

impl Controller {
    /// The controller at the start of a run (module docs).
    pub fn new(timing: SdramTiming, geometry: Geometry) -> Controller {
        assert!(geometry.banks as usize <= 4, "{} banks", geometry.banks);
        Controller {
            timing,
            geometry,
            now: 0,
            open: [None; 4],
            active_ok: [0; 4],
            access_ok: [0; 4],
            close_ok: [0; 4],
            any_active_ok: 0,
            write_ok: 0,
            refresh_ok: 0,
            refreshes: 0,
        }
    }

    /// The cycle the next [`Controller::step`] gives its command in.
    pub const fn now(&self) -> u64 {
        self.now
    }

    /// Refreshes given so far.
    pub const fn refreshes(&self) -> u64 {
        self.refreshes
    }

    /// Cycles from a READ to its word at the controller.
    pub const fn read_latency(&self) -> u64 {
        self.timing.cas + IO_STAGES
    }

    /// The first cycle a refresh is due from that has not been given.
    fn refresh_due(&self) -> u64 {
        self.refreshes * self.timing.refi
    }

    /// One cycle: the command given while `request` is offered (module docs). The request is
    /// accepted when the command is its READ or WRITE.
    pub fn step(&mut self, request: Option<Request>) -> Command {
        let t = self.now;
        let command = self.decide(t, request);
        self.apply(t, command);
        self.now += 1;
        command
    }

    fn decide(&self, t: u64, request: Option<Request>) -> Command {
        let banks = self.geometry.banks as usize;
        if self.refresh_due() <= t {
            let open = (0..banks).filter(|&b| self.open[b].is_some());
            if open.clone().next().is_some() {
                return match open.clone().all(|b| self.close_ok[b] <= t) {
                    true => Command::Precharge { bank: None },
                    false => Command::Nop,
                };
            }
            return match self.refresh_ok <= t {
                true => Command::Refresh,
                false => Command::Nop,
            };
        }
        let Some(req) = request else { return Command::Nop };
        let at = self.geometry.locate(req.word);
        let b = at.bank as usize;
        match self.open[b] {
            Some(row) if row == at.row => {
                let ready = self.access_ok[b] <= t;
                match req.write {
                    None if ready => Command::Read { bank: at.bank, col: at.col },
                    Some(data) if ready && self.write_ok <= t => {
                        Command::Write { bank: at.bank, col: at.col, data, mask: req.mask }
                    }
                    _ => Command::Nop,
                }
            }
            Some(_) if self.close_ok[b] <= t => Command::Precharge { bank: Some(at.bank) },
            Some(_) => Command::Nop,
            None if self.active_ok[b] <= t && self.any_active_ok <= t => {
                Command::Active { bank: at.bank, row: at.row }
            }
            None => Command::Nop,
        }
    }

    fn apply(&mut self, t: u64, command: Command) {
        let tm = self.timing;
        let raise = |slot: &mut u64, at: u64| *slot = (*slot).max(at);
        match command {
            Command::Nop | Command::LoadMode { .. } => {}
            Command::Active { bank, row } => {
                let b = bank as usize;
                self.open[b] = Some(row);
                raise(&mut self.access_ok[b], t + tm.rcd);
                raise(&mut self.close_ok[b], t + tm.ras);
                raise(&mut self.active_ok[b], t + tm.rc);
                raise(&mut self.any_active_ok, t + tm.rrd);
                raise(&mut self.refresh_ok, t + tm.rc);
            }
            Command::Read { bank, .. } => {
                raise(&mut self.close_ok[bank as usize], t + 1);
                raise(&mut self.write_ok, t + tm.cas + 1);
            }
            Command::Write { bank, .. } => raise(&mut self.close_ok[bank as usize], t + tm.wr),
            Command::Precharge { bank } => {
                for b in 0..self.geometry.banks as usize {
                    if bank.is_none_or(|one| one as usize == b) && self.open[b].take().is_some() {
                        raise(&mut self.active_ok[b], t + tm.rp);
                        raise(&mut self.refresh_ok, t + tm.rp);
                    }
                }
            }
            Command::Refresh => {
                self.refreshes += 1;
                for slot in &mut self.active_ok {
                    raise(slot, t + tm.rfc);
                }
                raise(&mut self.refresh_ok, t + tm.rfc);
            }
        }
    }

    /// Steps with nothing offered until cycle `cycle`, skipping the cycles in which nothing
    /// can happen (no refresh due). Returns the commands given to `each`.
    pub fn idle_until(&mut self, cycle: u64, mut each: impl FnMut(u64, Command)) {
        while self.now < cycle {
            let due = self.refresh_due();
            if due > self.now {
                self.now = due.min(cycle);
                continue;
            }
            let t = self.now;
            let command = self.step(None);
            if command != Command::Nop {
                each(t, command);
            }
        }
    }

    /// A stream of `words` words from `first`, reads or writes of `data(i)`: word `i` is offered
    /// from the cycle after word `i - 1` was accepted, word 0 from cycle `start` (idle before
    /// it). `done(i, cycle)` gets the cycle each word is done in: a read's word reaches the
    /// controller, a write's WRITE is given. Returns the cycle after the last word's.
    pub fn stream(
        &mut self,
        start: u64,
        first: u32,
        words: u32,
        mut data: Option<&mut dyn FnMut(u32) -> u16>,
        mut done: impl FnMut(u32, u64),
    ) -> u64 {
        self.idle_until(start, |_, _| {});
        let mut end = self.now;
        for i in 0..words {
            let write = data.as_mut().map(|d| d(i));
            let request = Request { word: first.wrapping_add(i), write, mask: 0 };
            loop {
                let t = self.now;
                match self.step(Some(request)) {
                    Command::Read { .. } => {
                        end = t + self.read_latency();
                        break;
                    }
                    Command::Write { .. } => {
                        end = t;
                        break;
                    }
                    _ => {}
                }
            }
            done(i, end);
        }
        end + 1
    }
}

/// The power-up sequence of the chip before the first run: NOP for `init` cycles, PRECHARGE
/// ALL, two AUTO REFRESHes tRP and tRFC apart, LOAD MODE REGISTER (burst length 1, the CAS
/// latency) tRFC later; the chip takes any command `mrd` cycles after that. The cycles of the
/// four commands, and the first cycle after the sequence.
pub fn power_up(t: &SdramTiming) -> ([(u64, Command); 4], u64) {
    let precharge = t.init;
    let refresh1 = precharge + t.rp;
    let refresh2 = refresh1 + t.rfc;
    let mode = refresh2 + t.rfc;
    let commands = [
        (precharge, Command::Precharge { bank: None }),
        (refresh1, Command::Refresh),
        (refresh2, Command::Refresh),
        (mode, Command::LoadMode { cas: t.cas as u8 }),
    ];
    (commands, mode + t.mrd)
}
