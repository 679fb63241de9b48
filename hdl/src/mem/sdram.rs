//! The SDRAM controller: core's `sdram::Controller` in logic, command for command and cycle for
//! cycle (its module docs hold the rules), giving `phases` (1 or 2) commands an array cycle: one
//! [`SdramStep`] per SDRAM cycle of the array's (`sdram::clock_ratio`), chained, the last one's
//! state registered (docs/DECISIONS.md 146). Phase `p` of array cycle `c` is SDRAM cycle
//! `phases * c + p`; the refresh timer restarts with the controller: refresh `k` is due from
//! SDRAM cycle `k * refi` after it.
//!
//! The outputs are each phase's pins in the array cycle the command is decided (CS# low); the
//! board's port ([`super::SdramPort`]) registers them in the pins' I/O cells and powers the chip
//! up first, holding the controller (`hold`) until the chip is ready.

use rust_hdl::prelude::*;
use systole_core::sdram::part::MIN_REFI;
use systole_core::sdram::{Geometry, SdramTiming};

use super::each;
use super::sdram_step::{SdramStep, Wait, WAIT_BITS};
use crate::optional::Optional;

/// The controller of a four-bank SDRAM with 16-bit words and up to 8,192 rows, `phases` SDRAM
/// cycles an array cycle. Every port but `clock` and `hold` is one per phase.
#[derive(LogicBlock)]
pub struct SdramController {
    pub clock: Signal<In, Clock>,
    /// While high, NOP and the state of a run's cycle 0: the run starts in the first cycle it is
    /// low (the chip must then be idle, as after its power-up).
    pub hold: Signal<In, Bit>,
    /// Low in a frozen cycle of a run: nothing moves (every phase a NOP, the state kept), so
    /// the controller keeps the machine's time, as every unit does.
    pub enable: Signal<In, Bit>,
    /// Between runs: close the open rows (`SdramStep::close`).
    pub close: Signal<In, Bit>,
    /// No row is open, no rule is running, no refresh is due: the chip is as at a run's cycle 0.
    pub quiet: Signal<Out, Bit>,
    /// Each bank's open row, as the registers hold it.
    pub bank_open: Vec<Signal<Out, Bit>>,
    pub bank_row: Vec<Signal<Out, Bits<13>>>,
    /// A word is offered in the phase: `word`, and `write` with `write_data` but the bytes
    /// `write_mask` holds (bit 0 the low byte), or a read.
    pub request: Vec<Signal<In, Bit>>,
    pub word: Vec<Signal<In, Bits<32>>>,
    pub write: Vec<Signal<In, Bit>>,
    pub write_data: Vec<Signal<In, Bits<16>>>,
    pub write_mask: Vec<Signal<In, Bits<2>>>,
    /// The phase's offered word's READ or WRITE is given in it.
    pub accept: Vec<Signal<Out, Bit>>,
    pub ras_n: Vec<Signal<Out, Bit>>,
    pub cas_n: Vec<Signal<Out, Bit>>,
    pub we_n: Vec<Signal<Out, Bit>>,
    pub ba: Vec<Signal<Out, Bits<2>>>,
    pub a: Vec<Signal<Out, Bits<13>>>,
    pub dq: Vec<Signal<Out, Bits<16>>>,
    pub dq_drive: Vec<Signal<Out, Bit>>,
    /// DQM: a WRITE's mask, low otherwise.
    pub dqm: Vec<Signal<Out, Bits<2>>>,
    /// The steps of phase 0 and (two phases) phase 1.
    first: SdramStep,
    second: Optional<SdramStep>,
    open: Vec<DFF<Bit>>,
    row: Vec<DFF<Bits<13>>>,
    active_wait: Vec<DFF<Wait>>,
    access_wait: Vec<DFF<Wait>>,
    close_wait: Vec<DFF<Wait>>,
    any_active_wait: DFF<Wait>,
    write_wait: DFF<Wait>,
    refresh_wait: DFF<Wait>,
    refresh_timer: DFF<Bits<16>>,
    owed: DFF<Bit>,
}

impl SdramController {
    /// The controller of `phases` SDRAM cycles an array cycle, with timing `t` in SDRAM cycles.
    pub fn new(t: &SdramTiming, g: &Geometry, phases: usize) -> SdramController {
        let rules = [t.rcd, t.rp, t.ras, t.rc, t.rfc, t.rrd, t.wr, t.cas + 1];
        assert!(rules.iter().all(|&r| (1..=1 << WAIT_BITS).contains(&r)), "{t:?}");
        assert!((MIN_REFI..=1 << 16).contains(&t.refi), "refresh every {} cycles", t.refi);
        assert!(g.banks == 4 && g.rows <= 8192 && g.cols.is_power_of_two() && g.cols <= 4096);
        assert!((1..=2).contains(&phases), "{phases} phases");
        SdramController {
            clock: Default::default(),
            hold: Default::default(),
            enable: Default::default(),
            close: Default::default(),
            quiet: Default::default(),
            bank_open: each(4),
            bank_row: each(4),
            request: each(phases),
            word: each(phases),
            write: each(phases),
            write_data: each(phases),
            write_mask: each(phases),
            accept: each(phases),
            ras_n: each(phases),
            cas_n: each(phases),
            we_n: each(phases),
            ba: each(phases),
            a: each(phases),
            dq: each(phases),
            dq_drive: each(phases),
            dqm: each(phases),
            first: SdramStep::new(t, g),
            second: Optional::when(phases == 2, || SdramStep::new(t, g)),
            open: each(4),
            row: each(4),
            active_wait: each(4),
            access_wait: each(4),
            close_wait: each(4),
            any_active_wait: Default::default(),
            write_wait: Default::default(),
            refresh_wait: Default::default(),
            refresh_timer: Default::default(),
            owed: Default::default(),
        }
    }

    /// SDRAM cycles in each array cycle.
    pub fn phases(&self) -> usize {
        1 + self.second.len()
    }
}

impl Logic for SdramController {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, any_active_wait, write_wait, refresh_wait, refresh_timer, owed);
        for k in 0..4 {
            self.open[k].clock.next = self.clock.val();
            self.row[k].clock.next = self.clock.val();
            self.active_wait[k].clock.next = self.clock.val();
            self.access_wait[k].clock.next = self.clock.val();
            self.close_wait[k].clock.next = self.clock.val();
        }
        // Phase 0 starts from the registers, phase 1 from phase 0.
        for k in 0..4 {
            self.first.open[k].next = self.open[k].q.val();
            self.first.row[k].next = self.row[k].q.val();
            self.first.active_wait[k].next = self.active_wait[k].q.val();
            self.first.access_wait[k].next = self.access_wait[k].q.val();
            self.first.close_wait[k].next = self.close_wait[k].q.val();
        }
        self.first.any_active_wait.next = self.any_active_wait.q.val();
        self.first.write_wait.next = self.write_wait.q.val();
        self.first.refresh_wait.next = self.refresh_wait.q.val();
        self.first.refresh_timer.next = self.refresh_timer.q.val();
        self.first.owed.next = self.owed.q.val();
        self.first.close.next = self.close.val();
        self.first.request.next = self.request[0].val() && !self.hold.val();
        self.first.word.next = self.word[0].val();
        self.first.write.next = self.write[0].val();
        self.first.write_data.next = self.write_data[0].val();
        self.first.write_mask.next = self.write_mask[0].val();
        self.accept[0].next = self.first.accept.val() && !self.hold.val();
        self.ras_n[0].next = self.first.ras_n.val() || self.hold.val();
        self.cas_n[0].next = self.first.cas_n.val() || self.hold.val();
        self.we_n[0].next = self.first.we_n.val() || self.hold.val();
        self.ba[0].next = self.first.ba.val();
        self.a[0].next = self.first.a.val();
        self.dq[0].next = self.first.dq.val();
        self.dq_drive[0].next = self.first.dq_drive.val() && !self.hold.val();
        self.dqm[0].next = self.first.dqm.val();
        if self.hold.val() {
            self.dqm[0].next = 0.into();
        }
        // The last phase's state, registered; held, a run's cycle 0.
        for k in 0..4 {
            self.open[k].d.next = self.first.next_open[k].val();
            self.row[k].d.next = self.first.next_row[k].val();
            self.active_wait[k].d.next = self.first.next_active_wait[k].val();
            self.access_wait[k].d.next = self.first.next_access_wait[k].val();
            self.close_wait[k].d.next = self.first.next_close_wait[k].val();
        }
        self.any_active_wait.d.next = self.first.next_any_active_wait.val();
        self.write_wait.d.next = self.first.next_write_wait.val();
        self.refresh_wait.d.next = self.first.next_refresh_wait.val();
        self.refresh_timer.d.next = self.first.next_refresh_timer.val();
        self.owed.d.next = self.first.next_owed.val();
        for _s in 0..self.second.len() {
            for k in 0..4 {
                self.second.open[k].next = self.first.next_open[k].val();
                self.second.row[k].next = self.first.next_row[k].val();
                self.second.active_wait[k].next = self.first.next_active_wait[k].val();
                self.second.access_wait[k].next = self.first.next_access_wait[k].val();
                self.second.close_wait[k].next = self.first.next_close_wait[k].val();
            }
            self.second.any_active_wait.next = self.first.next_any_active_wait.val();
            self.second.write_wait.next = self.first.next_write_wait.val();
            self.second.refresh_wait.next = self.first.next_refresh_wait.val();
            self.second.refresh_timer.next = self.first.next_refresh_timer.val();
            self.second.owed.next = self.first.next_owed.val();
            self.second.close.next = self.close.val();
            self.second.request.next = self.request[1].val() && !self.hold.val();
            self.second.word.next = self.word[1].val();
            self.second.write.next = self.write[1].val();
            self.second.write_data.next = self.write_data[1].val();
            self.second.write_mask.next = self.write_mask[1].val();
            self.accept[1].next = self.second.accept.val() && !self.hold.val();
            self.ras_n[1].next = self.second.ras_n.val() || self.hold.val();
            self.cas_n[1].next = self.second.cas_n.val() || self.hold.val();
            self.we_n[1].next = self.second.we_n.val() || self.hold.val();
            self.ba[1].next = self.second.ba.val();
            self.a[1].next = self.second.a.val();
            self.dq[1].next = self.second.dq.val();
            self.dq_drive[1].next = self.second.dq_drive.val() && !self.hold.val();
            self.dqm[1].next = self.second.dqm.val();
            if self.hold.val() {
                self.dqm[1].next = 0.into();
            }
            for k in 0..4 {
                self.open[k].d.next = self.second.next_open[k].val();
                self.row[k].d.next = self.second.next_row[k].val();
                self.active_wait[k].d.next = self.second.next_active_wait[k].val();
                self.access_wait[k].d.next = self.second.next_access_wait[k].val();
                self.close_wait[k].d.next = self.second.next_close_wait[k].val();
            }
            self.any_active_wait.d.next = self.second.next_any_active_wait.val();
            self.write_wait.d.next = self.second.next_write_wait.val();
            self.refresh_wait.d.next = self.second.next_refresh_wait.val();
            self.refresh_timer.d.next = self.second.next_refresh_timer.val();
            self.owed.d.next = self.second.next_owed.val();
        }
        // A frozen cycle: every phase a NOP, the state kept.
        if !self.enable.val() {
            for k in 0..4 {
                self.open[k].d.next = self.open[k].q.val();
                self.row[k].d.next = self.row[k].q.val();
                self.active_wait[k].d.next = self.active_wait[k].q.val();
                self.access_wait[k].d.next = self.access_wait[k].q.val();
                self.close_wait[k].d.next = self.close_wait[k].q.val();
            }
            self.any_active_wait.d.next = self.any_active_wait.q.val();
            self.write_wait.d.next = self.write_wait.q.val();
            self.refresh_wait.d.next = self.refresh_wait.q.val();
            self.refresh_timer.d.next = self.refresh_timer.q.val();
            self.owed.d.next = self.owed.q.val();
            for p in 0..self.accept.len() {
                self.accept[p].next = false;
                self.ras_n[p].next = true;
                self.cas_n[p].next = true;
                self.we_n[p].next = true;
                self.dq_drive[p].next = false;
                self.dqm[p].next = 0.into();
            }
        }
        self.quiet.next = !self.owed.q.val()
            && self.refresh_timer.q.val().any()
            && !self.any_active_wait.q.val().any()
            && !self.write_wait.q.val().any()
            && !self.refresh_wait.q.val().any();
        for k in 0..4 {
            self.bank_open[k].next = self.open[k].q.val();
            self.bank_row[k].next = self.row[k].q.val();
            if self.open[k].q.val()
                || self.active_wait[k].q.val().any()
                || self.access_wait[k].q.val().any()
                || self.close_wait[k].q.val().any()
            {
                self.quiet.next = false;
            }
        }
        if self.hold.val() {
            self.owed.d.next = false;
            self.refresh_timer.d.next = 0.into();
            self.any_active_wait.d.next = 0.into();
            self.write_wait.d.next = 0.into();
            self.refresh_wait.d.next = 0.into();
            for k in 0..4 {
                self.open[k].d.next = false;
                self.active_wait[k].d.next = 0.into();
                self.access_wait[k].d.next = 0.into();
                self.close_wait[k].d.next = 0.into();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{lcg_step, settle, tick, verilog_of};
    use systole_core::sdram::{Command, Controller, Pins, Request, ULX3S_SDRAM};

    fn pins(c: &SdramController, p: usize) -> Pins {
        Pins {
            ras_n: c.ras_n[p].val(),
            cas_n: c.cas_n[p].val(),
            we_n: c.we_n[p].val(),
            ba: c.ba[p].val().index() as u8,
            a: c.a[p].val().index() as u16,
            dq: c.dq_drive[p].val().then(|| c.dq[p].val().index() as u16),
            dqm: c.dqm[p].val().index() as u8,
        }
    }

    /// Random traffic (runs of reads or writes, here and there, with idle gaps) offered to the
    /// logic and to core's controller alike, `phases` SDRAM cycles an array cycle: the same
    /// command in every SDRAM cycle. A cycle in ten is frozen (`enable` low): every phase a NOP,
    /// and the next enabled cycle goes on as if it had not been.
    fn agrees_with_core(mhz: f64, seed: u64, cycles: u64, phases: usize) {
        let g = ULX3S_SDRAM.geometry;
        let t = SdramTiming::at(&ULX3S_SDRAM, mhz).unwrap();
        let mut model = Controller::new(t, g);
        let mut uut = SdramController::new(&t, &g, phases);
        uut.connect_all();
        let mut seed = seed;
        let mut rand = |n: u64| (lcg_step(&mut seed) >> 33) % n;
        let (mut request, mut left, mut idle) = (None::<Request>, 0u64, 0u64);
        let mut commands = [0u64; 6];
        for cycle in 0..cycles.div_ceil(phases as u64) {
            let frozen = rand(10) == 0;
            uut.enable.next = !frozen;
            if frozen {
                settle(&mut uut);
                for p in 0..phases {
                    assert_eq!(Command::from_pins(&pins(&uut, p)), Some(Command::Nop));
                    assert!(!uut.accept[p].val(), "cycle {cycle}: frozen");
                }
                tick(&mut uut, |c| &mut c.clock);
                continue;
            }
            let mut want = vec![];
            for p in 0..phases {
                if request.is_none() && idle > 0 {
                    idle -= 1;
                } else if request.is_none() {
                    if left == 0 {
                        left = 1 + rand(24);
                        idle = [0, rand(6), rand(300)][rand(3) as usize];
                    }
                    let word = match rand(3) {
                        0 => rand(g.words()) as u32,
                        _ => rand(8 * g.cols as u64) as u32,
                    };
                    let write = (rand(2) == 0).then(|| rand(1 << 16) as u16);
                    request = Some(Request { word, write, mask: rand(4) as u8 });
                    left -= 1;
                }
                uut.request[p].next = request.is_some();
                let r = request.unwrap_or(Request { word: 0, write: None, mask: 0 });
                uut.word[p].next = (r.word as u64).into();
                uut.write[p].next = r.write.is_some();
                uut.write_data[p].next = (r.write.unwrap_or(0) as u64).into();
                uut.write_mask[p].next = (r.mask as u64).into();
                let command = model.step(request);
                if matches!(command, Command::Read { .. } | Command::Write { .. }) {
                    request = None;
                }
                want.push((command, request));
            }
            settle(&mut uut);
            for (p, &(command, offered)) in want.iter().enumerate() {
                let got = Command::from_pins(&pins(&uut, p));
                assert_eq!(got, Some(command), "{mhz} MHz, cycle {cycle} phase {p}, {offered:?}");
                let accepted = matches!(command, Command::Read { .. } | Command::Write { .. });
                assert_eq!(uut.accept[p].val(), accepted, "cycle {cycle} phase {p}");
                let kind = match command {
                    Command::Nop => 0,
                    Command::Active { .. } => 1,
                    Command::Read { .. } | Command::Write { .. } => 2,
                    Command::Precharge { bank: Some(_) } => 3,
                    Command::Precharge { bank: None } => 4,
                    _ => 5,
                };
                commands[kind] += 1;
            }
            tick(&mut uut, |c| &mut c.clock);
        }
        // Every kind of command was compared, many times; every refresh (with its PRECHARGE
        // ALL, when a row was open).
        let refreshes = model.now().div_ceil(t.refi);
        assert!(commands[..4].iter().all(|&n| n >= 100), "{mhz} MHz: {commands:?}");
        assert!(
            commands[4] + 3 >= refreshes && commands[5] == refreshes,
            "{mhz} MHz: {commands:?}"
        );
    }

    #[test]
    fn gives_core_controllers_commands_cycle_for_cycle() {
        agrees_with_core(50.0, 1, 12_000, 1);
        agrees_with_core(55.0, 2, 12_000, 1);
        agrees_with_core(120.0, 3, 12_000, 1);
    }

    /// Two SDRAM cycles an array cycle: each phase's command is core's for its SDRAM cycle.
    #[test]
    fn gives_core_controllers_commands_phase_for_phase() {
        agrees_with_core(100.0, 4, 12_000, 2);
        agrees_with_core(110.0, 5, 12_000, 2);
        agrees_with_core(80.0, 6, 12_000, 2);
    }

    #[test]
    fn verilog_is_valid() {
        let t = SdramTiming::at(&ULX3S_SDRAM, 50.0).unwrap();
        let v = verilog_of(SdramController::new(&t, &ULX3S_SDRAM.geometry, 2));
        yosys_validate("sdram", &v).unwrap();
    }
}
