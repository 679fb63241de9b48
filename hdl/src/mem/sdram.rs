//! The SDRAM controller: core's `sdram::Controller` in logic, command for command and cycle for
//! cycle (its module docs hold the rules). Each rule is a countdown per bank or for the chip,
//! zero when the command it guards may be given: a command that starts a rule of `x` cycles
//! sets its countdown to at least `x - 1` for the next cycle, as core raises the rule's first
//! allowed cycle to `t + x`. The refresh timer restarts with the controller: refresh `k` is
//! due from cycle `k * refi` after it.
//!
//! The outputs are the chip's pins in the cycle the command is decided (CS# low); the board's
//! port ([`super::SdramPort`]) registers them in the pins' I/O cells and powers the chip up
//! first, holding the controller (`hold`) until the chip is ready.

use rust_hdl::prelude::*;
use systole_core::sdram::part::MIN_REFI;
use systole_core::sdram::{Geometry, SdramTiming, A10};

use crate::decode::constant;

/// Bits of a rule's countdown: every rule of a part the controller takes is at most 16 cycles.
const WAIT_BITS: usize = 4;

type Wait = Bits<WAIT_BITS>;

/// The controller of a four-bank SDRAM with 16-bit words and up to 8,192 rows.
#[derive(LogicBlock)]
pub struct SdramController {
    pub clock: Signal<In, Clock>,
    /// While high, NOP and the state of a run's cycle 0: the run starts in the first cycle it is
    /// low (the chip must then be idle, as after its power-up).
    pub hold: Signal<In, Bit>,
    /// A word is offered: `word`, and `write` with `write_data` but the bytes `write_mask`
    /// holds (bit 0 the low byte), or a read.
    pub request: Signal<In, Bit>,
    pub word: Signal<In, Bits<32>>,
    pub write: Signal<In, Bit>,
    pub write_data: Signal<In, Bits<16>>,
    pub write_mask: Signal<In, Bits<2>>,
    /// The offered word's READ or WRITE is given in this cycle.
    pub accept: Signal<Out, Bit>,
    pub ras_n: Signal<Out, Bit>,
    pub cas_n: Signal<Out, Bit>,
    pub we_n: Signal<Out, Bit>,
    pub ba: Signal<Out, Bits<2>>,
    pub a: Signal<Out, Bits<13>>,
    pub dq: Signal<Out, Bits<16>>,
    pub dq_drive: Signal<Out, Bit>,
    /// DQM: a WRITE's mask, low otherwise.
    pub dqm: Signal<Out, Bits<2>>,
    open: Vec<DFF<Bit>>,
    row: Vec<DFF<Bits<13>>>,
    active_wait: Vec<DFF<Wait>>,
    access_wait: Vec<DFF<Wait>>,
    close_wait: Vec<DFF<Wait>>,
    any_active_wait: DFF<Wait>,
    write_wait: DFF<Wait>,
    refresh_wait: DFF<Wait>,
    refresh_timer: DFF<Bits<16>>,
    /// A refresh is due and not yet given.
    owed: DFF<Bit>,
    due: Signal<Local, Bit>,
    col_word: Signal<Local, Bits<32>>,
    bank_word: Signal<Local, Bits<32>>,
    row_word: Signal<Local, Bits<32>>,
    req_bank: Signal<Local, Bits<2>>,
    req_row: Signal<Local, Bits<13>>,
    req_col: Signal<Local, Bits<13>>,
    /// The offered word's bank: has a row open, has its row open, may be accessed, closed,
    /// activated.
    is_open: Signal<Local, Bit>,
    hit: Signal<Local, Bit>,
    access_ok: Signal<Local, Bit>,
    close_ok: Signal<Local, Bit>,
    active_ok: Signal<Local, Bit>,
    any_open: Signal<Local, Bit>,
    all_close_ok: Signal<Local, Bit>,
    /// The command decided: ACTIVE, READ or WRITE, PRECHARGE (one bank or all), REFRESH.
    do_active: Signal<Local, Bit>,
    do_access: Signal<Local, Bit>,
    do_precharge: Signal<Local, Bit>,
    do_precharge_all: Signal<Local, Bit>,
    do_refresh: Signal<Local, Bit>,
    col_bits: Constant<Bits<32>>,
    row_shift: Constant<Bits<32>>,
    row_mask: Constant<Bits<32>>,
    col_mask: Constant<Bits<32>>,
    rcd_m1: Constant<Wait>,
    rp_m1: Constant<Wait>,
    ras_m1: Constant<Wait>,
    rc_m1: Constant<Wait>,
    rfc_m1: Constant<Wait>,
    rrd_m1: Constant<Wait>,
    wr_m1: Constant<Wait>,
    /// A WRITE waits `cas + 1` cycles after a READ.
    cas: Constant<Wait>,
    refi_m1: Constant<Bits<16>>,
    a10: Constant<Bits<13>>,
}

impl SdramController {
    pub fn new(t: &SdramTiming, g: &Geometry) -> SdramController {
        let rules = [t.rcd, t.rp, t.ras, t.rc, t.rfc, t.rrd, t.wr, t.cas + 1];
        assert!(rules.iter().all(|&r| (1..=1 << WAIT_BITS).contains(&r)), "{t:?}");
        assert!((MIN_REFI..=1 << 16).contains(&t.refi), "refresh every {} cycles", t.refi);
        assert!(g.banks == 4 && g.rows <= 8192 && g.cols.is_power_of_two() && g.cols <= 4096);
        let per_bank = || (0..4).map(|_| Default::default()).collect::<Vec<_>>();
        SdramController {
            clock: Default::default(),
            hold: Default::default(),
            request: Default::default(),
            word: Default::default(),
            write: Default::default(),
            write_data: Default::default(),
            write_mask: Default::default(),
            accept: Default::default(),
            ras_n: Default::default(),
            cas_n: Default::default(),
            we_n: Default::default(),
            ba: Default::default(),
            a: Default::default(),
            dq: Default::default(),
            dq_drive: Default::default(),
            dqm: Default::default(),
            open: per_bank(),
            row: (0..4).map(|_| Default::default()).collect(),
            active_wait: (0..4).map(|_| Default::default()).collect(),
            access_wait: (0..4).map(|_| Default::default()).collect(),
            close_wait: (0..4).map(|_| Default::default()).collect(),
            any_active_wait: Default::default(),
            write_wait: Default::default(),
            refresh_wait: Default::default(),
            refresh_timer: Default::default(),
            owed: Default::default(),
            due: Default::default(),
            col_word: Default::default(),
            bank_word: Default::default(),
            row_word: Default::default(),
            req_bank: Default::default(),
            req_row: Default::default(),
            req_col: Default::default(),
            is_open: Default::default(),
            hit: Default::default(),
            access_ok: Default::default(),
            close_ok: Default::default(),
            active_ok: Default::default(),
            any_open: Default::default(),
            all_close_ok: Default::default(),
            do_active: Default::default(),
            do_access: Default::default(),
            do_precharge: Default::default(),
            do_precharge_all: Default::default(),
            do_refresh: Default::default(),
            col_bits: constant(g.cols.trailing_zeros() as u64),
            row_shift: constant(g.cols.trailing_zeros() as u64 + 2),
            row_mask: constant(g.rows as u64 - 1),
            col_mask: constant(g.cols as u64 - 1),
            rcd_m1: constant(t.rcd - 1),
            rp_m1: constant(t.rp - 1),
            ras_m1: constant(t.ras - 1),
            rc_m1: constant(t.rc - 1),
            rfc_m1: constant(t.rfc - 1),
            rrd_m1: constant(t.rrd - 1),
            wr_m1: constant(t.wr - 1),
            cas: constant(t.cas),
            refi_m1: constant(t.refi - 1),
            a10: constant(A10 as u64),
        }
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
            self.open[k].d.next = self.open[k].q.val();
            self.row[k].d.next = self.row[k].q.val();
            self.active_wait[k].d.next = self.active_wait[k].q.val();
            if self.active_wait[k].q.val().any() {
                self.active_wait[k].d.next = self.active_wait[k].q.val() - 1;
            }
            self.access_wait[k].d.next = self.access_wait[k].q.val();
            if self.access_wait[k].q.val().any() {
                self.access_wait[k].d.next = self.access_wait[k].q.val() - 1;
            }
            self.close_wait[k].d.next = self.close_wait[k].q.val();
            if self.close_wait[k].q.val().any() {
                self.close_wait[k].d.next = self.close_wait[k].q.val() - 1;
            }
        }
        if self.any_active_wait.q.val().any() {
            self.any_active_wait.d.next = self.any_active_wait.q.val() - 1;
        }
        if self.write_wait.q.val().any() {
            self.write_wait.d.next = self.write_wait.q.val() - 1;
        }
        if self.refresh_wait.q.val().any() {
            self.refresh_wait.d.next = self.refresh_wait.q.val() - 1;
        }
        // Refresh k is due from cycle k * refi: the timer is zero in those cycles.
        self.refresh_timer.d.next = self.refresh_timer.q.val() - 1;
        if !self.refresh_timer.q.val().any() {
            self.refresh_timer.d.next = self.refi_m1.val();
        }
        self.due.next = self.owed.q.val() || !self.refresh_timer.q.val().any();

        // The offered word: column in the low bits, then bank, then row.
        // (A bit-select of an expression emits invalid Verilog: each is a local first.)
        self.col_word.next = self.word.val() & self.col_mask.val();
        self.bank_word.next = self.word.val() >> self.col_bits.val();
        self.row_word.next = (self.word.val() >> self.row_shift.val()) & self.row_mask.val();
        self.req_col.next = self.col_word.val().get_bits::<13>(0);
        self.req_bank.next = self.bank_word.val().get_bits::<2>(0);
        self.req_row.next = self.row_word.val().get_bits::<13>(0);
        self.is_open.next = false;
        self.hit.next = false;
        self.access_ok.next = false;
        self.close_ok.next = false;
        self.active_ok.next = false;
        self.any_open.next = false;
        self.all_close_ok.next = true;
        for k in 0..4 {
            if self.open[k].q.val() {
                self.any_open.next = true;
                if self.close_wait[k].q.val().any() {
                    self.all_close_ok.next = false;
                }
            }
            if self.req_bank.val() == k.to_bits::<2>() {
                self.is_open.next = self.open[k].q.val();
                self.hit.next = self.open[k].q.val() && self.row[k].q.val() == self.req_row.val();
                self.access_ok.next = !self.access_wait[k].q.val().any();
                self.close_ok.next = !self.close_wait[k].q.val().any();
                self.active_ok.next = !self.active_wait[k].q.val().any();
            }
        }

        // The command (core's `Controller::decide`).
        self.do_active.next = false;
        self.do_access.next = false;
        self.do_precharge.next = false;
        self.do_precharge_all.next = false;
        self.do_refresh.next = false;
        if self.due.val() {
            if self.any_open.val() {
                self.do_precharge_all.next = self.all_close_ok.val();
            } else {
                self.do_refresh.next = !self.refresh_wait.q.val().any();
            }
        } else if self.request.val() {
            if self.hit.val() {
                self.do_access.next =
                    self.access_ok.val() && (!self.write.val() || !self.write_wait.q.val().any());
            } else if self.is_open.val() {
                self.do_precharge.next = self.close_ok.val();
            } else {
                self.do_active.next = self.active_ok.val() && !self.any_active_wait.q.val().any();
            }
        }

        // Its pins (core's `Command::pins`).
        self.ras_n.next = !(self.do_active.val()
            || self.do_precharge.val()
            || self.do_precharge_all.val()
            || self.do_refresh.val());
        self.cas_n.next = !(self.do_access.val() || self.do_refresh.val());
        self.we_n.next = !(self.do_access.val() && self.write.val()
            || self.do_precharge.val()
            || self.do_precharge_all.val());
        self.ba.next = 0.into();
        self.a.next = 0.into();
        if self.do_active.val() || self.do_access.val() || self.do_precharge.val() {
            self.ba.next = self.req_bank.val();
        }
        if self.do_active.val() {
            self.a.next = self.req_row.val();
        }
        if self.do_access.val() {
            self.a.next = self.req_col.val();
        }
        if self.do_precharge_all.val() {
            self.a.next = self.a10.val();
        }
        self.dq.next = self.write_data.val();
        self.dq_drive.next = self.do_access.val() && self.write.val();
        self.dqm.next = 0.into();
        if self.do_access.val() && self.write.val() {
            self.dqm.next = self.write_mask.val();
        }
        self.accept.next = self.do_access.val();

        // What the command starts (core's `Controller::apply`): a rule of `x` cycles sets
        // its countdown to `x - 1` unless the countdown, one lower, is already as high (one
        // command a cycle, so at most one rule raises a countdown in a cycle).
        self.owed.d.next = self.due.val() && !self.do_refresh.val();
        if self.do_refresh.val() && self.rfc_m1.val() >= self.refresh_wait.q.val() {
            self.refresh_wait.d.next = self.rfc_m1.val();
        }
        if self.do_access.val() && !self.write.val() && self.cas.val() >= self.write_wait.q.val() {
            self.write_wait.d.next = self.cas.val();
        }
        if self.do_active.val() {
            if self.rrd_m1.val() >= self.any_active_wait.q.val() {
                self.any_active_wait.d.next = self.rrd_m1.val();
            }
            if self.rc_m1.val() >= self.refresh_wait.q.val() {
                self.refresh_wait.d.next = self.rc_m1.val();
            }
        }
        if (self.do_precharge.val() || self.do_precharge_all.val())
            && self.rp_m1.val() >= self.refresh_wait.q.val()
        {
            self.refresh_wait.d.next = self.rp_m1.val();
        }
        for k in 0..4 {
            if self.do_refresh.val() && self.rfc_m1.val() >= self.active_wait[k].q.val() {
                self.active_wait[k].d.next = self.rfc_m1.val();
            }
            if self.req_bank.val() == k.to_bits::<2>() {
                if self.do_active.val() {
                    self.open[k].d.next = true;
                    self.row[k].d.next = self.req_row.val();
                    if self.rcd_m1.val() >= self.access_wait[k].q.val() {
                        self.access_wait[k].d.next = self.rcd_m1.val();
                    }
                    if self.ras_m1.val() >= self.close_wait[k].q.val() {
                        self.close_wait[k].d.next = self.ras_m1.val();
                    }
                    if self.rc_m1.val() >= self.active_wait[k].q.val() {
                        self.active_wait[k].d.next = self.rc_m1.val();
                    }
                }
                if self.do_access.val()
                    && self.write.val()
                    && self.wr_m1.val() >= self.close_wait[k].q.val()
                {
                    self.close_wait[k].d.next = self.wr_m1.val();
                }
            }
            if (self.do_precharge_all.val()
                || self.do_precharge.val() && self.req_bank.val() == k.to_bits::<2>())
                && self.open[k].q.val()
            {
                self.open[k].d.next = false;
                if self.rp_m1.val() >= self.active_wait[k].q.val() {
                    self.active_wait[k].d.next = self.rp_m1.val();
                }
            }
        }
        if self.hold.val() {
            self.ras_n.next = true;
            self.cas_n.next = true;
            self.we_n.next = true;
            self.dq_drive.next = false;
            self.dqm.next = 0.into();
            self.accept.next = false;
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

    fn pins(c: &SdramController) -> Pins {
        Pins {
            ras_n: c.ras_n.val(),
            cas_n: c.cas_n.val(),
            we_n: c.we_n.val(),
            ba: c.ba.val().index() as u8,
            a: c.a.val().index() as u16,
            dq: c.dq_drive.val().then(|| c.dq.val().index() as u16),
            dqm: c.dqm.val().index() as u8,
        }
    }

    /// Random traffic (runs of reads or writes, here and there, with idle gaps) offered to the
    /// logic and to core's controller alike: the same command in every cycle.
    fn agrees_with_core(mhz: f64, seed: u64, cycles: u64) {
        let g = ULX3S_SDRAM.geometry;
        let t = SdramTiming::at(&ULX3S_SDRAM, mhz).unwrap();
        let mut model = Controller::new(t, g);
        let mut uut = SdramController::new(&t, &g);
        uut.connect_all();
        let mut seed = seed;
        let mut rand = |n: u64| (lcg_step(&mut seed) >> 33) % n;
        let (mut request, mut left, mut idle) = (None::<Request>, 0u64, 0u64);
        let mut commands = [0u64; 6];
        for cycle in 0..cycles {
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
            uut.request.next = request.is_some();
            let r = request.unwrap_or(Request { word: 0, write: None, mask: 0 });
            uut.word.next = (r.word as u64).into();
            uut.write.next = r.write.is_some();
            uut.write_data.next = (r.write.unwrap_or(0) as u64).into();
            uut.write_mask.next = (r.mask as u64).into();
            settle(&mut uut);
            let want = model.step(request);
            let got = Command::from_pins(&pins(&uut));
            assert_eq!(got, Some(want), "{mhz} MHz, cycle {cycle}, offered {request:?}");
            let accepted = matches!(want, Command::Read { .. } | Command::Write { .. });
            assert_eq!(uut.accept.val(), accepted, "cycle {cycle}");
            if accepted {
                request = None;
            }
            let kind = match want {
                Command::Nop => 0,
                Command::Active { .. } => 1,
                Command::Read { .. } | Command::Write { .. } => 2,
                Command::Precharge { bank: Some(_) } => 3,
                Command::Precharge { bank: None } => 4,
                _ => 5,
            };
            commands[kind] += 1;
            tick(&mut uut, |c| &mut c.clock);
        }
        // Every kind of command was compared, many times; every refresh (with its PRECHARGE
        // ALL, when a row was open).
        let refreshes = cycles.div_ceil(t.refi);
        assert!(commands[..4].iter().all(|&n| n >= 100), "{mhz} MHz: {commands:?}");
        assert!(
            commands[4] + 3 >= refreshes && commands[5] == refreshes,
            "{mhz} MHz: {commands:?}"
        );
    }

    #[test]
    fn gives_core_controllers_commands_cycle_for_cycle() {
        agrees_with_core(50.0, 1, 12_000);
        agrees_with_core(55.0, 2, 12_000);
        agrees_with_core(120.0, 3, 12_000);
    }

    #[test]
    fn verilog_is_valid() {
        let t = SdramTiming::at(&ULX3S_SDRAM, 50.0).unwrap();
        yosys_validate("sdram", &verilog_of(SdramController::new(&t, &ULX3S_SDRAM.geometry)))
            .unwrap();
    }
}
