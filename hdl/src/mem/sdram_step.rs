//! One SDRAM cycle of the controller, as logic without registers: from the controller's state
//! and the word offered, the command (core's `Controller::decide`) and the state after it
//! (`Controller::apply`). [`super::SdramController`] chains one step per SDRAM cycle of an array
//! cycle and registers the last one's state.
//!
//! Each rule is a countdown per bank or for the chip, zero when the command it guards may be
//! given: a command that starts a rule of `x` cycles sets its countdown to at least `x - 1` for
//! the next cycle, as core raises the rule's first allowed cycle to `t + x`. Refresh `k` is due
//! from cycle `k * refi`: the timer is zero in those cycles, and `owed` holds a refresh due and
//! not yet given.

use rust_hdl::prelude::*;

use systole_core::sdram::{Geometry, SdramTiming, A10};

use crate::decode::constant;

/// Bits of a rule's countdown: every rule of a part the controller takes is at most 16 cycles.
pub(crate) const WAIT_BITS: usize = 4;

pub(crate) type Wait = Bits<WAIT_BITS>;

/// One SDRAM cycle of the controller (module docs): the state before it (`open` .. `owed`), the
/// word offered, the command on the pins (CS# low), and the state after it (`next_*`).
#[derive(LogicBlock)]
pub struct SdramStep {
    pub open: Vec<Signal<In, Bit>>,
    pub row: Vec<Signal<In, Bits<13>>>,
    pub active_wait: Vec<Signal<In, Wait>>,
    pub access_wait: Vec<Signal<In, Wait>>,
    pub close_wait: Vec<Signal<In, Wait>>,
    pub any_active_wait: Signal<In, Wait>,
    pub write_wait: Signal<In, Wait>,
    pub refresh_wait: Signal<In, Wait>,
    pub refresh_timer: Signal<In, Bits<16>>,
    /// A refresh is due and not yet given.
    pub owed: Signal<In, Bit>,
    /// Between runs: close every open row (PRECHARGE ALL once they may close) instead of
    /// serving a request; a refresh due still comes first.
    pub close: Signal<In, Bit>,
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
    pub next_open: Vec<Signal<Out, Bit>>,
    pub next_row: Vec<Signal<Out, Bits<13>>>,
    pub next_active_wait: Vec<Signal<Out, Wait>>,
    pub next_access_wait: Vec<Signal<Out, Wait>>,
    pub next_close_wait: Vec<Signal<Out, Wait>>,
    pub next_any_active_wait: Signal<Out, Wait>,
    pub next_write_wait: Signal<Out, Wait>,
    pub next_refresh_wait: Signal<Out, Wait>,
    pub next_refresh_timer: Signal<Out, Bits<16>>,
    pub next_owed: Signal<Out, Bit>,
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

impl SdramStep {
    pub fn new(t: &SdramTiming, g: &Geometry) -> SdramStep {
        SdramStep {
            open: (0..4).map(|_| Default::default()).collect(),
            row: (0..4).map(|_| Default::default()).collect(),
            active_wait: (0..4).map(|_| Default::default()).collect(),
            access_wait: (0..4).map(|_| Default::default()).collect(),
            close_wait: (0..4).map(|_| Default::default()).collect(),
            any_active_wait: Default::default(),
            write_wait: Default::default(),
            refresh_wait: Default::default(),
            refresh_timer: Default::default(),
            owed: Default::default(),
            close: Default::default(),
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
            next_open: (0..4).map(|_| Default::default()).collect(),
            next_row: (0..4).map(|_| Default::default()).collect(),
            next_active_wait: (0..4).map(|_| Default::default()).collect(),
            next_access_wait: (0..4).map(|_| Default::default()).collect(),
            next_close_wait: (0..4).map(|_| Default::default()).collect(),
            next_any_active_wait: Default::default(),
            next_write_wait: Default::default(),
            next_refresh_wait: Default::default(),
            next_refresh_timer: Default::default(),
            next_owed: Default::default(),
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

impl Logic for SdramStep {
    #[hdl_gen]
    fn update(&mut self) {
        // The state counts down one cycle unless a command raises it below.
        for k in 0..4 {
            self.next_open[k].next = self.open[k].val();
            self.next_row[k].next = self.row[k].val();
            self.next_active_wait[k].next = self.active_wait[k].val();
            if self.active_wait[k].val().any() {
                self.next_active_wait[k].next = self.active_wait[k].val() - 1;
            }
            self.next_access_wait[k].next = self.access_wait[k].val();
            if self.access_wait[k].val().any() {
                self.next_access_wait[k].next = self.access_wait[k].val() - 1;
            }
            self.next_close_wait[k].next = self.close_wait[k].val();
            if self.close_wait[k].val().any() {
                self.next_close_wait[k].next = self.close_wait[k].val() - 1;
            }
        }
        self.next_any_active_wait.next = self.any_active_wait.val();
        if self.any_active_wait.val().any() {
            self.next_any_active_wait.next = self.any_active_wait.val() - 1;
        }
        self.next_write_wait.next = self.write_wait.val();
        if self.write_wait.val().any() {
            self.next_write_wait.next = self.write_wait.val() - 1;
        }
        self.next_refresh_wait.next = self.refresh_wait.val();
        if self.refresh_wait.val().any() {
            self.next_refresh_wait.next = self.refresh_wait.val() - 1;
        }
        // Refresh k is due from cycle k * refi: the timer is zero in those cycles.
        self.next_refresh_timer.next = self.refresh_timer.val() - 1;
        if !self.refresh_timer.val().any() {
            self.next_refresh_timer.next = self.refi_m1.val();
        }
        self.due.next = self.owed.val() || !self.refresh_timer.val().any();

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
            if self.open[k].val() {
                self.any_open.next = true;
                if self.close_wait[k].val().any() {
                    self.all_close_ok.next = false;
                }
            }
            if self.req_bank.val() == k.to_bits::<2>() {
                self.is_open.next = self.open[k].val();
                self.hit.next = self.open[k].val() && self.row[k].val() == self.req_row.val();
                self.access_ok.next = !self.access_wait[k].val().any();
                self.close_ok.next = !self.close_wait[k].val().any();
                self.active_ok.next = !self.active_wait[k].val().any();
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
                self.do_refresh.next = !self.refresh_wait.val().any();
            }
        } else if self.close.val() {
            if self.any_open.val() {
                self.do_precharge_all.next = self.all_close_ok.val();
            }
        } else if self.request.val() {
            if self.hit.val() {
                self.do_access.next =
                    self.access_ok.val() && (!self.write.val() || !self.write_wait.val().any());
            } else if self.is_open.val() {
                self.do_precharge.next = self.close_ok.val();
            } else {
                self.do_active.next = self.active_ok.val() && !self.any_active_wait.val().any();
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
        self.next_owed.next = self.due.val() && !self.do_refresh.val();
        if self.do_refresh.val() && self.rfc_m1.val() >= self.refresh_wait.val() {
            self.next_refresh_wait.next = self.rfc_m1.val();
        }
        if self.do_access.val() && !self.write.val() && self.cas.val() >= self.write_wait.val() {
            self.next_write_wait.next = self.cas.val();
        }
        if self.do_active.val() {
            if self.rrd_m1.val() >= self.any_active_wait.val() {
                self.next_any_active_wait.next = self.rrd_m1.val();
            }
            if self.rc_m1.val() >= self.refresh_wait.val() {
                self.next_refresh_wait.next = self.rc_m1.val();
            }
        }
        if (self.do_precharge.val() || self.do_precharge_all.val())
            && self.rp_m1.val() >= self.refresh_wait.val()
        {
            self.next_refresh_wait.next = self.rp_m1.val();
        }
        for k in 0..4 {
            if self.do_refresh.val() && self.rfc_m1.val() >= self.active_wait[k].val() {
                self.next_active_wait[k].next = self.rfc_m1.val();
            }
            if self.req_bank.val() == k.to_bits::<2>() {
                if self.do_active.val() {
                    self.next_open[k].next = true;
                    self.next_row[k].next = self.req_row.val();
                    if self.rcd_m1.val() >= self.access_wait[k].val() {
                        self.next_access_wait[k].next = self.rcd_m1.val();
                    }
                    if self.ras_m1.val() >= self.close_wait[k].val() {
                        self.next_close_wait[k].next = self.ras_m1.val();
                    }
                    if self.rc_m1.val() >= self.active_wait[k].val() {
                        self.next_active_wait[k].next = self.rc_m1.val();
                    }
                }
                if self.do_access.val()
                    && self.write.val()
                    && self.wr_m1.val() >= self.close_wait[k].val()
                {
                    self.next_close_wait[k].next = self.wr_m1.val();
                }
            }
            if (self.do_precharge_all.val()
                || self.do_precharge.val() && self.req_bank.val() == k.to_bits::<2>())
                && self.open[k].val()
            {
                self.next_open[k].next = false;
                if self.rp_m1.val() >= self.active_wait[k].val() {
                    self.next_active_wait[k].next = self.rp_m1.val();
                }
            }
        }
    }
}
