//! The SDRAM port: the chip's power-up, the controller ([`SdramController`]) and the registers
//! in the pins' I/O cells, with a read's word handed back [`Controller::read_latency`] cycles
//! after its READ was accepted, as core's controller counts it.
//!
//! From power-on the port waits the part's power-up time, then gives PRECHARGE ALL, two AUTO
//! REFRESHes and LOAD MODE REGISTER at the cycles of core's `sdram::controller::power_up`,
//! and raises `ready` in the cycle after the sequence: the controller's cycle 0. Every command
//! leaves through a register, and the chip's data pins come in through one.
//!
//! [`Controller::read_latency`]: systole_core::sdram::Controller::read_latency

use rust_hdl::prelude::*;
use systole_core::sdram::controller::power_up;
use systole_core::sdram::{Command, Geometry, SdramTiming, A10};

use super::SdramController;
use crate::decode::constant;

/// The chip's power-up and its controller behind registered pins.
#[derive(LogicBlock)]
pub struct SdramPort {
    pub clock: Signal<In, Clock>,
    /// High from the controller's cycle 0 on.
    pub ready: Signal<Out, Bit>,
    /// The controller's request side ([`SdramController`]).
    pub request: Signal<In, Bit>,
    pub word: Signal<In, Bits<32>>,
    pub write: Signal<In, Bit>,
    pub write_data: Signal<In, Bits<16>>,
    pub write_mask: Signal<In, Bits<2>>,
    pub accept: Signal<Out, Bit>,
    /// A read's word, `read_latency` cycles after its READ was accepted.
    pub read_valid: Signal<Out, Bit>,
    pub read_data: Signal<Out, Bits<16>>,
    /// The chip's pins (CS# low, CKE high: the board's top ties them).
    pub ras_n: Signal<Out, Bit>,
    pub cas_n: Signal<Out, Bit>,
    pub we_n: Signal<Out, Bit>,
    pub ba: Signal<Out, Bits<2>>,
    pub a: Signal<Out, Bits<13>>,
    pub dq_out: Signal<Out, Bits<16>>,
    pub dq_drive: Signal<Out, Bit>,
    pub dqm: Signal<Out, Bits<2>>,
    pub dq_in: Signal<In, Bits<16>>,
    controller: SdramController,
    boot: DFF<Bits<16>>,
    booted: DFF<Bit>,
    ras_q: DFF<Bit>,
    cas_q: DFF<Bit>,
    we_q: DFF<Bit>,
    ba_q: DFF<Bits<2>>,
    a_q: DFF<Bits<13>>,
    dq_q: DFF<Bits<16>>,
    drive_q: DFF<Bit>,
    dqm_q: DFF<Bits<2>>,
    dq_in_q: DFF<Bits<16>>,
    /// Bit `i`: a READ was accepted `i + 1` cycles ago.
    reads: DFF<Bits<16>>,
    precharge_at: Constant<Bits<16>>,
    refresh1_at: Constant<Bits<16>>,
    refresh2_at: Constant<Bits<16>>,
    mode_at: Constant<Bits<16>>,
    last_boot: Constant<Bits<16>>,
    mode: Constant<Bits<13>>,
    a10: Constant<Bits<13>>,
    landing: Constant<Bits<16>>,
}

impl SdramPort {
    pub fn new(t: &SdramTiming, g: &Geometry) -> SdramPort {
        let (commands, ready) = power_up(t);
        assert!(ready < 1 << 16, "a power-up of {ready} cycles");
        let latency = t.cas + systole_core::sdram::controller::IO_STAGES;
        assert!(latency <= 16);
        let Command::LoadMode { .. } = commands[3].1 else { unreachable!() };
        SdramPort {
            clock: Default::default(),
            ready: Default::default(),
            request: Default::default(),
            word: Default::default(),
            write: Default::default(),
            write_data: Default::default(),
            write_mask: Default::default(),
            accept: Default::default(),
            read_valid: Default::default(),
            read_data: Default::default(),
            ras_n: Default::default(),
            cas_n: Default::default(),
            we_n: Default::default(),
            ba: Default::default(),
            a: Default::default(),
            dq_out: Default::default(),
            dq_drive: Default::default(),
            dqm: Default::default(),
            dq_in: Default::default(),
            controller: SdramController::new(t, g),
            boot: Default::default(),
            booted: Default::default(),
            ras_q: Default::default(),
            cas_q: Default::default(),
            we_q: Default::default(),
            ba_q: Default::default(),
            a_q: Default::default(),
            dq_q: Default::default(),
            drive_q: Default::default(),
            dqm_q: Default::default(),
            dq_in_q: Default::default(),
            reads: Default::default(),
            precharge_at: constant(commands[0].0),
            refresh1_at: constant(commands[1].0),
            refresh2_at: constant(commands[2].0),
            mode_at: constant(commands[3].0),
            last_boot: constant(ready - 1),
            mode: constant(commands[3].1.pins().a as u64),
            a10: constant(A10 as u64),
            landing: constant(1 << (latency - 1)),
        }
    }
}

impl Logic for SdramPort {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, boot, booted, ras_q, cas_q, we_q, ba_q, a_q, dq_q, drive_q, dqm_q,
            dq_in_q, reads
        );
        self.controller.clock.next = self.clock.val();
        self.controller.hold.next = !self.booted.q.val();
        self.controller.request.next = self.request.val() && self.booted.q.val();
        self.controller.word.next = self.word.val();
        self.controller.write.next = self.write.val();
        self.controller.write_data.next = self.write_data.val();
        self.controller.write_mask.next = self.write_mask.val();
        self.accept.next = self.controller.accept.val();
        self.ready.next = self.booted.q.val();

        // The power-up's commands, then the controller's.
        if !self.booted.q.val() {
            self.boot.d.next = self.boot.q.val() + 1;
            self.booted.d.next = self.boot.q.val() == self.last_boot.val();
        }
        // The command registers hold RAS, CAS and WE active high, so that their power-on zeros
        // are a NOP.
        self.ras_q.d.next = !self.controller.ras_n.val();
        self.cas_q.d.next = !self.controller.cas_n.val();
        self.we_q.d.next = !self.controller.we_n.val();
        self.ba_q.d.next = self.controller.ba.val();
        self.a_q.d.next = self.controller.a.val();
        self.dq_q.d.next = self.controller.dq.val();
        self.drive_q.d.next = self.controller.dq_drive.val();
        self.dqm_q.d.next = self.controller.dqm.val();
        if !self.booted.q.val() {
            if self.boot.q.val() == self.precharge_at.val() {
                self.ras_q.d.next = true;
                self.we_q.d.next = true;
                self.a_q.d.next = self.a10.val();
            }
            if self.boot.q.val() == self.refresh1_at.val()
                || self.boot.q.val() == self.refresh2_at.val()
            {
                self.ras_q.d.next = true;
                self.cas_q.d.next = true;
            }
            if self.boot.q.val() == self.mode_at.val() {
                self.ras_q.d.next = true;
                self.cas_q.d.next = true;
                self.we_q.d.next = true;
                self.a_q.d.next = self.mode.val();
            }
        }
        self.ras_n.next = !self.ras_q.q.val();
        self.cas_n.next = !self.cas_q.q.val();
        self.we_n.next = !self.we_q.q.val();
        self.ba.next = self.ba_q.q.val();
        self.a.next = self.a_q.q.val();
        self.dq_out.next = self.dq_q.q.val();
        self.dq_drive.next = self.drive_q.q.val();
        self.dqm.next = self.dqm_q.q.val();

        // A read's word comes in through the data pins' register.
        self.dq_in_q.d.next = self.dq_in.val();
        self.reads.d.next = self.reads.q.val() << 1;
        if self.controller.accept.val() && !self.write.val() {
            self.reads.d.next = (self.reads.q.val() << 1) | 1;
        }
        self.read_valid.next = (self.reads.q.val() & self.landing.val()).any();
        self.read_data.next = self.dq_in_q.q.val();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use super::*;
    use crate::testing::{lcg_step, settle, tick, verilog_of};
    use systole_core::sdram::{kept_bits, Chip, Controller, Pins, Request, ULX3S_SDRAM};

    /// The port from power-on with core's chip model on its pins, offered random traffic: the
    /// chip takes every command, the pins carry core's controller's command one cycle after it
    /// decides it, and every read's word comes back `read_latency` cycles after its READ.
    fn runs_against_the_chip(mhz: f64, seed: u64, cycles: u64) -> u64 {
        let g = ULX3S_SDRAM.geometry;
        let t = SdramTiming::at(&ULX3S_SDRAM, mhz).unwrap();
        let (_, ready_at) = power_up(&t);
        let mut chip = Chip::new(ULX3S_SDRAM, mhz);
        let mut model = Controller::new(t, g);
        let mut uut = SdramPort::new(&t, &g);
        uut.connect_all();
        let mut seed = seed;
        let mut rand = |n: u64| (lcg_step(&mut seed) >> 33) % n;
        let mut memory: BTreeMap<u32, u16> = BTreeMap::new();
        let mut landing: VecDeque<(u64, u16)> = VecDeque::new();
        let (mut request, mut decided, mut reads) = (None::<Request>, Command::Nop, 0);
        for p in 0..ready_at + cycles {
            if p >= ready_at && request.is_none() && rand(4) > 0 {
                let word = (rand(3 * g.cols as u64) + rand(2) * rand(g.words())) as u32;
                let write = (rand(2) == 0).then(|| rand(65536) as u16);
                request = Some(Request { word, write, mask: [0, 0, 1, 2][rand(4) as usize] });
            }
            let r = request.unwrap_or(Request { word: 0, write: None, mask: 0 });
            uut.request.next = request.is_some();
            uut.word.next = (r.word as u64).into();
            uut.write.next = r.write.is_some();
            uut.write_data.next = (r.write.unwrap_or(0) as u64).into();
            uut.write_mask.next = (r.mask as u64).into();
            settle(&mut uut);
            assert_eq!(uut.ready.val(), p >= ready_at, "cycle {p}");
            let pins = Pins {
                ras_n: uut.ras_n.val(),
                cas_n: uut.cas_n.val(),
                we_n: uut.we_n.val(),
                ba: uut.ba.val().index() as u8,
                a: uut.a.val().index() as u16,
                dq: uut.dq_drive.val().then(|| uut.dq_out.val().index() as u16),
                dqm: uut.dqm.val().index() as u8,
            };
            let on_pins = Command::from_pins(&pins).expect("a command");
            if p > ready_at {
                assert_eq!(on_pins, decided, "{mhz} MHz, cycle {p}");
            }
            let driven = chip.clock(on_pins).unwrap_or_else(|e| panic!("{mhz} MHz: {e}"));
            uut.dq_in.next = (driven.unwrap_or(0xDEAD ^ p as u16) as u64).into();
            settle(&mut uut);
            if p >= ready_at {
                decided = model.step(request);
                let accepted = matches!(decided, Command::Read { .. } | Command::Write { .. });
                assert_eq!(uut.accept.val(), accepted, "cycle {p}");
                match decided {
                    Command::Read { .. } => {
                        let word = request.unwrap().word;
                        let value = memory.get(&word).copied().unwrap_or(0);
                        landing.push_back((p + model.read_latency(), value));
                        request = None;
                    }
                    Command::Write { .. } => {
                        // The bytes the request asked for: the chip must keep the others.
                        let Request { word, write, mask } = request.unwrap();
                        let kept = kept_bits(mask);
                        let old = memory.get(&word).copied().unwrap_or(0);
                        memory.insert(word, old & kept | write.unwrap() & !kept);
                        request = None;
                    }
                    _ => {}
                }
            }
            let want = match landing.front() {
                Some(&(at, value)) if at == p => landing.pop_front().map(|_| value),
                _ => None,
            };
            let got = uut.read_valid.val().then(|| uut.read_data.val().index() as u16);
            assert_eq!(got, want, "{mhz} MHz, cycle {p}: the read's word");
            reads += want.is_some() as u64;
            tick(&mut uut, |u| &mut u.clock);
        }
        reads
    }

    #[test]
    fn powers_the_chip_up_and_reads_back_what_it_wrote() {
        for (mhz, seed) in [(50.0, 1), (55.0, 2)] {
            let reads = runs_against_the_chip(mhz, seed, 12_000);
            assert!(reads > 1000, "{mhz} MHz: {reads} reads");
        }
    }

    #[test]
    fn verilog_is_valid() {
        let t = SdramTiming::at(&ULX3S_SDRAM, 50.0).unwrap();
        yosys_validate("sdram_port", &verilog_of(SdramPort::new(&t, &ULX3S_SDRAM.geometry)))
            .unwrap();
    }
}
