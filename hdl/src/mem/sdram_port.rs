//! The SDRAM port: the chip's power-up, the controller ([`SdramController`], `phases` commands
//! an array cycle) and the registers in the pins' I/O cells, with a read's word handed back
//! `read_arrival` array cycles after the one its READ was given in, as core's
//! `timing::sdram::SdramBus::read_arrival` counts it (docs/DECISIONS.md 146).
//!
//! From power-on the port waits the part's power-up time, then gives PRECHARGE ALL, two AUTO
//! REFRESHes and LOAD MODE REGISTER at the SDRAM cycles of core's `sdram::controller::power_up`
//! (SDRAM cycle `n` is phase `n mod phases` of array cycle `n / phases`), and raises `ready` in
//! the first array cycle after the sequence: the controller's cycle 0. Every phase's command
//! leaves through a register, so it is on the pins in the same phase of the next array cycle.
//! `dq_in[p]` is what the chip drives in phase `p` of the array cycle; a READ's word is handed
//! on as it is on the pins (`read_arrival - 1` array cycles after the READ's), and the reader's
//! register is the input register that makes `read_arrival`. A word the chip drives earlier
//! than the others of its array cycle's READs (CAS latency odd, two phases) waits a cycle in a
//! register here, so that every READ's word comes the same number of array cycles after it.

use rust_hdl::prelude::*;
use systole_core::sdram::controller::{power_up, read_arrival};
use systole_core::sdram::{Command, Geometry, SdramTiming, A10};

use super::{each, SdramController};
use crate::decode::constant;

/// The chip's power-up and its controller behind registered pins. Every port but `clock` and
/// `ready` is one per phase.
#[derive(LogicBlock)]
pub struct SdramPort {
    pub clock: Signal<In, Clock>,
    /// High from the controller's cycle 0 on.
    pub ready: Signal<Out, Bit>,
    /// The controller's `enable`, `close` and `quiet` ([`SdramController`]); `restart` makes
    /// the next cycle the controller's cycle 0 (the chip must be quiet).
    pub enable: Signal<In, Bit>,
    pub close: Signal<In, Bit>,
    pub quiet: Signal<Out, Bit>,
    pub restart: Signal<In, Bit>,
    /// The port needs the machine frozen (from the next cycle) while it refreshes the chip in
    /// the machine's stead (module docs).
    pub stall: Signal<Out, Bit>,
    /// The controller's request side ([`SdramController`]).
    pub request: Vec<Signal<In, Bit>>,
    pub word: Vec<Signal<In, Bits<32>>>,
    pub write: Vec<Signal<In, Bit>>,
    pub write_data: Vec<Signal<In, Bits<16>>>,
    pub write_mask: Vec<Signal<In, Bits<2>>>,
    pub accept: Vec<Signal<Out, Bit>>,
    /// The word of the READ given in phase `p` `read_arrival - 1` array cycles ago: its last
    /// register, which holds it until it lands, is the reader's ([`super::SdramTransfer`]).
    pub read_valid: Vec<Signal<Out, Bit>>,
    pub read_data: Vec<Signal<Out, Bits<16>>>,
    /// The chip's pins in each phase (CS# low, CKE high: the board's top ties them).
    pub ras_n: Vec<Signal<Out, Bit>>,
    pub cas_n: Vec<Signal<Out, Bit>>,
    pub we_n: Vec<Signal<Out, Bit>>,
    pub ba: Vec<Signal<Out, Bits<2>>>,
    pub a: Vec<Signal<Out, Bits<13>>>,
    pub dq_out: Vec<Signal<Out, Bits<16>>>,
    pub dq_drive: Vec<Signal<Out, Bit>>,
    pub dqm: Vec<Signal<Out, Bits<2>>>,
    pub dq_in: Vec<Signal<In, Bits<16>>>,
    controller: SdramController,
    /// Refreshes the chip is owed in real time (one more every `refi` SDRAM cycles, one fewer
    /// for each REFRESH on the pins), and the array cycles to the next.
    debt: DFF<Bits<4>>,
    debt_timer: DFF<Bits<16>>,
    refi_cycles: Constant<Bits<16>>,
    refreshed: Signal<Local, Bit>,
    /// The shadow refresh: stalling, its step (16 array cycles each: wait, PRECHARGE ALL,
    /// REFRESH while owed, ACTIVE the open rows again, wait).
    stalled: DFF<Bit>,
    step: DFF<Bits<4>>,
    step_timer: DFF<Bits<4>>,
    boot: DFF<Bits<16>>,
    booted: DFF<Bit>,
    ras_q: Vec<DFF<Bit>>,
    cas_q: Vec<DFF<Bit>>,
    we_q: Vec<DFF<Bit>>,
    ba_q: Vec<DFF<Bits<2>>>,
    a_q: Vec<DFF<Bits<13>>>,
    dq_q: Vec<DFF<Bits<16>>>,
    drive_q: Vec<DFF<Bit>>,
    dqm_q: Vec<DFF<Bits<2>>>,
    /// Each phase's data pins, registered (for a word the chip drives a phase early).
    dq_in_q: Vec<DFF<Bits<16>>>,
    /// Per phase, bit `i`: a READ was accepted in that phase `i + 1` array cycles ago.
    reads: Vec<DFF<Bits<16>>>,
    /// Per phase: the array cycle and the phase of the boot's commands in it (the phase's
    /// array cycle, or one past the sequence).
    precharge_at: Vec<Constant<Bits<16>>>,
    refresh1_at: Vec<Constant<Bits<16>>>,
    refresh2_at: Vec<Constant<Bits<16>>>,
    mode_at: Vec<Constant<Bits<16>>>,
    last_boot: Constant<Bits<16>>,
    mode: Constant<Bits<13>>,
    a10: Constant<Bits<13>>,
    landing: Constant<Bits<16>>,
    /// Per READ phase: the data phase its word comes in on, and whether it waits a cycle more.
    source: Vec<Constant<Bits<2>>>,
    late: Vec<Constant<Bit>>,
}

impl SdramPort {
    /// The port of an SDRAM with timing `t` (in SDRAM cycles), `phases` of them an array cycle.
    pub fn new(t: &SdramTiming, g: &Geometry, phases: usize) -> SdramPort {
        let (commands, ready) = power_up(t);
        let k = phases as u64;
        let ready = ready.div_ceil(k);
        assert!(ready < 1 << 16, "a power-up of {ready} cycles");
        let arrival = read_arrival(t, k);
        assert!((3..=16).contains(&arrival));
        let Command::LoadMode { .. } = commands[3].1 else { unreachable!() };
        // A boot command at SDRAM cycle n, in phase p: array cycle n / k, else never (past it).
        let at = |n: u64| -> Vec<Constant<Bits<16>>> {
            (0..k).map(|p| constant(if n % k == p { n / k } else { ready })).collect()
        };
        SdramPort {
            clock: Default::default(),
            ready: Default::default(),
            enable: Default::default(),
            close: Default::default(),
            quiet: Default::default(),
            restart: Default::default(),
            stall: Default::default(),
            debt: Default::default(),
            debt_timer: Default::default(),
            stalled: Default::default(),
            step: Default::default(),
            step_timer: Default::default(),
            refi_cycles: constant((t.refi / k).max(1) - 1),
            refreshed: Default::default(),
            request: each(phases),
            word: each(phases),
            write: each(phases),
            write_data: each(phases),
            write_mask: each(phases),
            accept: each(phases),
            read_valid: each(phases),
            read_data: each(phases),
            ras_n: each(phases),
            cas_n: each(phases),
            we_n: each(phases),
            ba: each(phases),
            a: each(phases),
            dq_out: each(phases),
            dq_drive: each(phases),
            dqm: each(phases),
            dq_in: each(phases),
            controller: SdramController::new(t, g, phases),
            boot: Default::default(),
            booted: Default::default(),
            ras_q: each(phases),
            cas_q: each(phases),
            we_q: each(phases),
            ba_q: each(phases),
            a_q: each(phases),
            dq_q: each(phases),
            drive_q: each(phases),
            dqm_q: each(phases),
            dq_in_q: each(phases),
            reads: each(phases),
            precharge_at: at(commands[0].0),
            refresh1_at: at(commands[1].0),
            refresh2_at: at(commands[2].0),
            mode_at: at(commands[3].0),
            last_boot: constant(ready - 1),
            mode: constant(commands[3].1.pins().a as u64),
            a10: constant(A10 as u64),
            landing: constant(1 << (arrival - 2)),
            source: (0..k).map(|p| constant((p + t.cas) % k)).collect(),
            late: (0..k).map(|p| Constant::new((p + t.cas) / k < t.cas.div_ceil(k))).collect(),
        }
    }
}

impl Logic for SdramPort {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, boot, booted, debt, debt_timer, stalled, step, step_timer);
        self.controller.clock.next = self.clock.val();
        self.controller.hold.next = !self.booted.q.val() || self.restart.val();
        self.controller.enable.next = self.enable.val() && !self.stalled.q.val();
        self.controller.close.next = self.close.val();
        self.quiet.next = self.controller.quiet.val() && self.booted.q.val();
        self.ready.next = self.booted.q.val();
        // The power-up's commands, then the controller's.
        if !self.booted.q.val() {
            self.boot.d.next = self.boot.q.val() + 1;
            self.booted.d.next = self.boot.q.val() == self.last_boot.val();
        }
        for p in 0..self.accept.len() {
            self.ras_q[p].clock.next = self.clock.val();
            self.cas_q[p].clock.next = self.clock.val();
            self.we_q[p].clock.next = self.clock.val();
            self.ba_q[p].clock.next = self.clock.val();
            self.a_q[p].clock.next = self.clock.val();
            self.dq_q[p].clock.next = self.clock.val();
            self.drive_q[p].clock.next = self.clock.val();
            self.dqm_q[p].clock.next = self.clock.val();
            self.dq_in_q[p].clock.next = self.clock.val();
            self.reads[p].clock.next = self.clock.val();
            self.controller.request[p].next = self.request[p].val() && self.booted.q.val();
            self.controller.word[p].next = self.word[p].val();
            self.controller.write[p].next = self.write[p].val();
            self.controller.write_data[p].next = self.write_data[p].val();
            self.controller.write_mask[p].next = self.write_mask[p].val();
            self.accept[p].next = self.controller.accept[p].val();
            // The command registers hold RAS, CAS and WE active high, so that their power-on
            // zeros are a NOP.
            self.ras_q[p].d.next = !self.controller.ras_n[p].val();
            self.cas_q[p].d.next = !self.controller.cas_n[p].val();
            self.we_q[p].d.next = !self.controller.we_n[p].val();
            self.ba_q[p].d.next = self.controller.ba[p].val();
            self.a_q[p].d.next = self.controller.a[p].val();
            self.dq_q[p].d.next = self.controller.dq[p].val();
            self.drive_q[p].d.next = self.controller.dq_drive[p].val();
            self.dqm_q[p].d.next = self.controller.dqm[p].val();
            if !self.booted.q.val() {
                if self.boot.q.val() == self.precharge_at[p].val() {
                    self.ras_q[p].d.next = true;
                    self.we_q[p].d.next = true;
                    self.a_q[p].d.next = self.a10.val();
                }
                if self.boot.q.val() == self.refresh1_at[p].val()
                    || self.boot.q.val() == self.refresh2_at[p].val()
                {
                    self.ras_q[p].d.next = true;
                    self.cas_q[p].d.next = true;
                }
                if self.boot.q.val() == self.mode_at[p].val() {
                    self.ras_q[p].d.next = true;
                    self.cas_q[p].d.next = true;
                    self.we_q[p].d.next = true;
                    self.a_q[p].d.next = self.mode.val();
                }
            }
            self.ras_n[p].next = !self.ras_q[p].q.val();
            self.cas_n[p].next = !self.cas_q[p].q.val();
            self.we_n[p].next = !self.we_q[p].q.val();
            self.ba[p].next = self.ba_q[p].q.val();
            self.a[p].next = self.a_q[p].q.val();
            self.dq_out[p].next = self.dq_q[p].q.val();
            self.dq_drive[p].next = self.drive_q[p].q.val();
            self.dqm[p].next = self.dqm_q[p].q.val();

            // A read's word comes from its data phase's pins (through a register if the chip
            // drove it early), `read_arrival - 1` cycles after its READ.
            self.dq_in_q[p].d.next = self.dq_in[p].val();
            self.reads[p].d.next = self.reads[p].q.val() << 1;
            if self.controller.accept[p].val() && !self.write[p].val() {
                self.reads[p].d.next = (self.reads[p].q.val() << 1) | 1;
            }
            self.read_valid[p].next = (self.reads[p].q.val() & self.landing.val()).any();
        }
        // Real time: a refresh is owed every `refi` SDRAM cycles; each REFRESH pays one (`debt`
        // counts from 2, so that a REFRESH a little early is credited).
        self.refreshed.next = false;
        for p in 0..self.accept.len() {
            if self.ras_q[p].q.val() && self.cas_q[p].q.val() && !self.we_q[p].q.val() {
                self.refreshed.next = true;
            }
        }
        self.debt_timer.d.next = self.debt_timer.q.val() + 1;
        if self.debt_timer.q.val() == self.refi_cycles.val() {
            self.debt_timer.d.next = 0.into();
            if !self.refreshed.val() && self.debt.q.val() != 15 {
                self.debt.d.next = self.debt.q.val() + 1;
            }
        } else if self.refreshed.val() && self.debt.q.val().any() {
            self.debt.d.next = self.debt.q.val() - 1;
        }
        if !self.booted.q.val() {
            self.debt.d.next = 2.into();
        }
        // The machine froze too long to keep up (frozen cycles give no refresh): stall it and
        // refresh in its stead, its open rows closed and opened again, each command 16 array
        // cycles after the one before, so that every rule the machine's controller counts on is
        // met when it goes on.
        self.stall.next = self.stalled.q.val();
        if self.booted.q.val() && !self.stalled.q.val() && self.debt.q.val() >= 6 {
            self.stalled.d.next = true;
            self.step.d.next = 0.into();
            self.step_timer.d.next = 0.into();
        }
        if self.stalled.q.val() {
            self.step_timer.d.next = self.step_timer.q.val() + 1;
            if self.step_timer.q.val() == 15 {
                self.step.d.next = self.step.q.val() + 1;
                // REFRESH again while one is owed.
                if self.step.q.val() == 2 && self.debt.q.val() > 3 {
                    self.step.d.next = 2.into();
                }
                if self.step.q.val() == 7 {
                    self.stalled.d.next = false;
                }
            }
            if self.step_timer.q.val() == 0 {
                if self.step.q.val() == 1 {
                    self.ras_q[0].d.next = true;
                    self.we_q[0].d.next = true;
                    self.a_q[0].d.next = self.a10.val();
                }
                if self.step.q.val() == 2 {
                    self.ras_q[0].d.next = true;
                    self.cas_q[0].d.next = true;
                }
                for b in 0..4 {
                    if self.step.q.val() == b.to_bits::<4>() + 3
                        && self.controller.bank_open[b].val()
                    {
                        self.ras_q[0].d.next = true;
                        self.ba_q[0].d.next = b.to_bits::<2>();
                        self.a_q[0].d.next = self.controller.bank_row[b].val();
                    }
                }
            }
        }
        for p in 0..self.accept.len() {
            for d in 0..self.accept.len() {
                if self.source[p].val() == d.to_bits::<2>() {
                    if self.late[p].val() {
                        self.read_data[p].next = self.dq_in_q[d].q.val();
                    } else {
                        self.read_data[p].next = self.dq_in[d].val();
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use super::*;
    use crate::testing::{lcg_step, settle, tick, verilog_of};
    use systole_core::sdram::{kept_bits, Chip, Controller, Pins, Request, ULX3S_SDRAM};

    /// The port from power-on with core's chip model on its pins, `phases` SDRAM cycles an
    /// array cycle, offered random traffic: the chip takes every command, the pins carry core's
    /// controller's command in each phase an array cycle after it decides it, and every read's
    /// word comes back `read_arrival - 1` array cycles after its READ's.
    fn runs_against_the_chip(mhz: f64, phases: usize, seed: u64, cycles: u64) -> u64 {
        let g = ULX3S_SDRAM.geometry;
        let t = SdramTiming::at(&ULX3S_SDRAM, mhz).unwrap();
        let k = phases as u64;
        let ready_at = power_up(&t).1.div_ceil(k);
        let arrival = read_arrival(&t, k);
        let mut chip = Chip::new(ULX3S_SDRAM, mhz);
        let mut model = Controller::new(t, g);
        let mut uut = SdramPort::new(&t, &g, phases);
        uut.connect_all();
        uut.enable.next = true;
        let mut seed = seed;
        let mut rand = |n: u64| (lcg_step(&mut seed) >> 33) % n;
        let mut memory: BTreeMap<u32, u16> = BTreeMap::new();
        let mut landing: VecDeque<(u64, usize, u16)> = VecDeque::new();
        let mut request = None::<Request>;
        let mut decided = vec![Command::Nop; phases];
        let mut reads = 0;
        for c in 0..ready_at + cycles {
            let mut now = vec![Command::Nop; phases];
            for p in 0..phases {
                if c >= ready_at && request.is_none() && rand(4) > 0 {
                    let word = (rand(3 * g.cols as u64) + rand(2) * rand(g.words())) as u32;
                    let write = (rand(2) == 0).then(|| rand(65536) as u16);
                    request = Some(Request { word, write, mask: [0, 0, 1, 2][rand(4) as usize] });
                }
                let r = request.unwrap_or(Request { word: 0, write: None, mask: 0 });
                uut.request[p].next = request.is_some();
                uut.word[p].next = (r.word as u64).into();
                uut.write[p].next = r.write.is_some();
                uut.write_data[p].next = (r.write.unwrap_or(0) as u64).into();
                uut.write_mask[p].next = (r.mask as u64).into();
                if c < ready_at {
                    continue;
                }
                now[p] = model.step(request);
                match now[p] {
                    Command::Read { .. } => {
                        let value = memory.get(&r.word).copied().unwrap_or(0);
                        landing.push_back((c + arrival - 1, p, value));
                        request = None;
                    }
                    Command::Write { .. } => {
                        // The bytes the request asked for: the chip must keep the others.
                        let kept = kept_bits(r.mask);
                        let old = memory.get(&r.word).copied().unwrap_or(0);
                        memory.insert(r.word, old & kept | r.write.unwrap() & !kept);
                        request = None;
                    }
                    _ => {}
                }
            }
            settle(&mut uut);
            assert_eq!(uut.ready.val(), c >= ready_at, "cycle {c}");
            for p in 0..phases {
                let pins = Pins {
                    ras_n: uut.ras_n[p].val(),
                    cas_n: uut.cas_n[p].val(),
                    we_n: uut.we_n[p].val(),
                    ba: uut.ba[p].val().index() as u8,
                    a: uut.a[p].val().index() as u16,
                    dq: uut.dq_drive[p].val().then(|| uut.dq_out[p].val().index() as u16),
                    dqm: uut.dqm[p].val().index() as u8,
                };
                let on_pins = Command::from_pins(&pins).expect("a command");
                if c > ready_at {
                    assert_eq!(on_pins, decided[p], "{mhz} MHz, cycle {c} phase {p}");
                }
                let driven = chip.clock(on_pins).unwrap_or_else(|e| panic!("{mhz} MHz: {e}"));
                uut.dq_in[p].next = (driven.unwrap_or(0xDEAD ^ c as u16) as u64).into();
                let accepted = matches!(now[p], Command::Read { .. } | Command::Write { .. });
                assert_eq!(uut.accept[p].val(), accepted, "cycle {c} phase {p}");
            }
            settle(&mut uut);
            decided = now;
            for p in 0..phases {
                let want = match landing.front() {
                    Some(&(at, q, value)) if at == c && q == p => {
                        landing.pop_front().map(|_| value)
                    }
                    _ => None,
                };
                let got = uut.read_valid[p].val().then(|| uut.read_data[p].val().index() as u16);
                assert_eq!(got, want, "{mhz} MHz, cycle {c} phase {p}: the read's word");
                reads += want.is_some() as u64;
            }
            tick(&mut uut, |u| &mut u.clock);
        }
        reads
    }

    #[test]
    fn powers_the_chip_up_and_reads_back_what_it_wrote() {
        for (mhz, phases, seed) in [(50.0, 1, 1), (55.0, 1, 2), (100.0, 2, 3), (110.0, 2, 4)] {
            let reads = runs_against_the_chip(mhz, phases, seed, 12_000 / phases as u64);
            assert!(reads > 1000, "{mhz} MHz: {reads} reads");
        }
    }

    #[test]
    fn verilog_is_valid() {
        let t = SdramTiming::at(&ULX3S_SDRAM, 110.0).unwrap();
        let v = verilog_of(SdramPort::new(&t, &ULX3S_SDRAM.geometry, 2));
        yosys_validate("sdram_port", &v).unwrap();
    }
}
