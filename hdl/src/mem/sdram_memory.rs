//! The SDRAM as a machine's DRAM: the port ([`SdramPort`]), the transfers of a run
//! ([`SdramTransfer`]), the host's byte accesses between runs, and the start of a run.
//!
//! * **During a run** (`running`) the transfers own the port, in the machine's time
//!   (`enable`, docs/DECISIONS.md 147). A read's rows reach `row_data` `read_stages` cycles after
//!   they land, through the same output registers every other memory's reads pass
//!   (`ArrayConfig::read_stages`); `row_valid` and `last_row` come as they land, for the
//!   sequencer, whose datapath controls pass those registers too.
//! * **Between runs** the host owns it: a byte write (`host_write`) is one masked word WRITE
//!   (`mem_ready` low until it is given), a byte read (`host_read`, held until `mem_ready`) one
//!   READ, its byte on `dram_byte` until the next. The controller runs in real time meanwhile,
//!   refreshing on its own cadence.
//! * **A run starts** (`run_in`) once the chip is as at a run's cycle 0: the controller closes
//!   every row and waits out every rule (`quiet`), then `run_out` starts the machine, and the
//!   controller is held in its cycle-0 state until the machine counts its first cycle
//!   (`counting`), which is the controller's cycle 0 too.
//!
//! `stall` asks the machine to freeze while the port refreshes in its stead.

use rust_hdl::prelude::*;
use systole_core::sdram::controller::read_arrival;
use systole_core::sdram::{Geometry, SdramTiming};

use super::{each, SdramPort, SdramTransfer};
use crate::delay::Delay;

/// The SDRAM behind a machine's DRAM port; see the module docs. Pin ports are one per phase.
#[derive(LogicBlock)]
pub struct SdramMemory {
    pub clock: Signal<In, Clock>,
    /// A program runs; the machine's enable; it counts its cycles (it has dispatched).
    pub running: Signal<In, Bit>,
    pub enable: Signal<In, Bit>,
    pub counting: Signal<In, Bit>,
    pub run_in: Signal<In, Bit>,
    pub run_out: Signal<Out, Bit>,
    pub stall: Signal<Out, Bit>,
    /// The transfers ([`SdramTransfer`]'s ports of the same names).
    pub start: Signal<In, Bit>,
    pub write: Signal<In, Bit>,
    pub addr: Signal<In, Bits<32>>,
    pub rows: Signal<In, Bits<16>>,
    pub len: Signal<In, Bits<16>>,
    pub row_stride: Signal<In, Bits<32>>,
    pub elem_stride: Signal<In, Bits<32>>,
    pub es: Signal<In, Bits<3>>,
    pub row_valid: Signal<Out, Bit>,
    pub last_row: Signal<Out, Bit>,
    pub row_data: Vec<Signal<Out, Bits<8>>>,
    pub room: Signal<Out, Bit>,
    pub issue: Signal<In, Bit>,
    pub push: Signal<In, Bit>,
    pub push_data: Vec<Signal<In, Bits<8>>>,
    /// The host's byte accesses.
    pub host_addr: Signal<In, Bits<32>>,
    pub host_byte: Signal<In, Bits<8>>,
    pub host_write: Signal<In, Bit>,
    pub host_read: Signal<In, Bit>,
    pub mem_ready: Signal<Out, Bit>,
    pub dram_byte: Signal<Out, Bits<8>>,
    /// The chip's pins ([`SdramPort`]).
    pub ras_n: Vec<Signal<Out, Bit>>,
    pub cas_n: Vec<Signal<Out, Bit>>,
    pub we_n: Vec<Signal<Out, Bit>>,
    pub ba: Vec<Signal<Out, Bits<2>>>,
    pub a: Vec<Signal<Out, Bits<13>>>,
    pub dq_out: Vec<Signal<Out, Bits<16>>>,
    pub dq_drive: Vec<Signal<Out, Bit>>,
    pub dqm: Vec<Signal<Out, Bits<2>>>,
    pub dq_in: Vec<Signal<In, Bits<16>>>,
    port: SdramPort,
    transfer: SdramTransfer,
    staged: Vec<Delay<Bits<8>>>,
    /// A run asked for; the cycle it starts in.
    pending: DFF<Bit>,
    starting: Signal<Local, Bit>,
    /// The host's access: a write to give, a read to give, a read given, its byte here.
    host_writing: DFF<Bit>,
    host_reading: DFF<Bit>,
    host_waiting: DFF<Bit>,
    host_have: DFF<Bit>,
    host_word: DFF<Bits<32>>,
    host_odd: DFF<Bit>,
    host_data: DFF<Bits<8>>,
    read_byte: DFF<Bits<8>>,
}

impl SdramMemory {
    /// SDRAM cycles in each array cycle: the pins' phases.
    pub fn phases(&self) -> usize {
        self.ras_n.len()
    }

    /// The SDRAM (timing `t` in SDRAM cycles, `phases` of them an array cycle) behind a DRAM port
    /// of rows up to `row_bytes` bytes, on a machine with `read_stages` output registers.
    pub fn new(
        t: &SdramTiming,
        g: &Geometry,
        phases: usize,
        row_bytes: usize,
        read_stages: usize,
    ) -> SdramMemory {
        let arrival = read_arrival(t, phases as u64) as usize;
        SdramMemory {
            clock: Default::default(),
            running: Default::default(),
            enable: Default::default(),
            counting: Default::default(),
            run_in: Default::default(),
            run_out: Default::default(),
            stall: Default::default(),
            start: Default::default(),
            write: Default::default(),
            addr: Default::default(),
            rows: Default::default(),
            len: Default::default(),
            row_stride: Default::default(),
            elem_stride: Default::default(),
            es: Default::default(),
            row_valid: Default::default(),
            last_row: Default::default(),
            row_data: each(row_bytes),
            room: Default::default(),
            issue: Default::default(),
            push: Default::default(),
            push_data: each(row_bytes),
            host_addr: Default::default(),
            host_byte: Default::default(),
            host_write: Default::default(),
            host_read: Default::default(),
            mem_ready: Default::default(),
            dram_byte: Default::default(),
            ras_n: each(phases),
            cas_n: each(phases),
            we_n: each(phases),
            ba: each(phases),
            a: each(phases),
            dq_out: each(phases),
            dq_drive: each(phases),
            dqm: each(phases),
            dq_in: each(phases),
            port: SdramPort::new(t, g, phases),
            transfer: SdramTransfer::new(row_bytes, phases, arrival),
            staged: (0..row_bytes).map(|_| Delay::new(read_stages)).collect(),
            pending: Default::default(),
            starting: Default::default(),
            host_writing: Default::default(),
            host_reading: Default::default(),
            host_waiting: Default::default(),
            host_have: Default::default(),
            host_word: Default::default(),
            host_odd: Default::default(),
            host_data: Default::default(),
            read_byte: Default::default(),
        }
    }
}

impl Logic for SdramMemory {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            pending,
            host_writing,
            host_reading,
            host_waiting,
            host_have,
            host_word,
            host_odd,
            host_data,
            read_byte
        );
        self.port.clock.next = self.clock.val();
        self.transfer.clock.next = self.clock.val();
        // The transfers, in the machine's time.
        self.transfer.enable.next = self.enable.val() && self.running.val();
        self.transfer.start.next = self.start.val();
        self.transfer.write.next = self.write.val();
        self.transfer.addr.next = self.addr.val();
        self.transfer.rows.next = self.rows.val();
        self.transfer.len.next = self.len.val();
        self.transfer.row_stride.next = self.row_stride.val();
        self.transfer.elem_stride.next = self.elem_stride.val();
        self.transfer.es.next = self.es.val();
        self.transfer.issue.next = self.issue.val();
        self.transfer.push.next = self.push.val();
        self.row_valid.next = self.transfer.row_valid.val();
        self.last_row.next = self.transfer.last_row.val();
        self.room.next = self.transfer.room.val();
        for j in 0..self.row_data.len() {
            self.transfer.push_data[j].next = self.push_data[j].val();
            self.staged[j].clock.next = self.clock.val();
            self.staged[j].enable.next = self.enable.val();
            self.staged[j].d_in.next = self.transfer.row_data[j].val();
            self.row_data[j].next = self.staged[j].d_out.val();
        }
        // The port: the transfers' words during a run, the host's between runs.
        self.port.enable.next = self.enable.val() || !self.running.val();
        self.stall.next = self.port.stall.val();
        for p in 0..self.ras_n.len() {
            self.port.request[p].next = self.transfer.request[p].val() && self.running.val();
            self.port.word[p].next = self.transfer.word[p].val();
            self.port.write[p].next = self.transfer.write_word[p].val();
            self.port.write_data[p].next = self.transfer.write_data[p].val();
            self.port.write_mask[p].next = self.transfer.write_mask[p].val();
            self.transfer.accept[p].next = self.port.accept[p].val() && self.running.val();
            self.transfer.read_valid[p].next = self.port.read_valid[p].val() && self.running.val();
            self.transfer.read_data[p].next = self.port.read_data[p].val();
            self.ras_n[p].next = self.port.ras_n[p].val();
            self.cas_n[p].next = self.port.cas_n[p].val();
            self.we_n[p].next = self.port.we_n[p].val();
            self.ba[p].next = self.port.ba[p].val();
            self.a[p].next = self.port.a[p].val();
            self.dq_out[p].next = self.port.dq_out[p].val();
            self.dq_drive[p].next = self.port.dq_drive[p].val();
            self.dqm[p].next = self.port.dqm[p].val();
            self.port.dq_in[p].next = self.dq_in[p].val();
        }

        // The host's accesses, in phase 0: a byte write is its word's WRITE with the other byte
        // masked, a byte read its word's READ.
        if !self.running.val() && !self.pending.q.val() {
            self.port.request[0].next = self.host_writing.q.val() || self.host_reading.q.val();
            self.port.word[0].next = self.host_word.q.val();
            self.port.write[0].next = self.host_writing.q.val();
            self.port.write_data[0].next = bit_cast::<16, 8>(self.host_data.q.val()) << 8
                | bit_cast::<16, 8>(self.host_data.q.val());
            self.port.write_mask[0].next = 2.into();
            if self.host_odd.q.val() {
                self.port.write_mask[0].next = 1.into();
            }
        }
        if self.host_write.val() && !self.running.val() {
            self.host_writing.d.next = true;
            self.host_word.d.next = self.host_addr.val() >> 1;
            self.host_odd.d.next = self.host_addr.val().get_bit(0);
            self.host_data.d.next = self.host_byte.val();
        }
        if self.host_read.val()
            && !self.running.val()
            && !self.host_have.q.val()
            && !self.host_reading.q.val()
            && !self.host_waiting.q.val()
        {
            self.host_reading.d.next = true;
            self.host_word.d.next = self.host_addr.val() >> 1;
            self.host_odd.d.next = self.host_addr.val().get_bit(0);
        }
        if self.port.accept[0].val() && !self.running.val() {
            self.host_writing.d.next = false;
            if self.host_reading.q.val() {
                self.host_reading.d.next = false;
                self.host_waiting.d.next = true;
            }
        }
        if self.port.read_valid[0].val() && self.host_waiting.q.val() {
            self.host_waiting.d.next = false;
            self.host_have.d.next = true;
            self.read_byte.d.next = self.port.read_data[0].val().get_bits::<8>(0);
            if self.host_odd.q.val() {
                self.read_byte.d.next = self.port.read_data[0].val().get_bits::<8>(8);
            }
        }
        if !self.host_read.val() {
            self.host_have.d.next = false;
        }
        self.dram_byte.next = self.read_byte.q.val();
        self.mem_ready.next =
            !self.host_writing.q.val() && (!self.host_read.val() || self.host_have.q.val());

        // A run starts once the chip is quiet; the controller holds its cycle-0 state until the
        // machine counts its first cycle.
        if self.run_in.val() && !self.running.val() {
            self.pending.d.next = true;
        }
        self.starting.next = self.pending.q.val()
            && self.port.quiet.val()
            && !self.port.stall.val()
            && !self.host_writing.q.val()
            && !self.host_reading.q.val()
            && !self.host_waiting.q.val();
        if self.starting.val() {
            self.pending.d.next = false;
        }
        self.run_out.next = self.starting.val();
        self.port.close.next = self.pending.q.val();
        self.port.restart.next =
            self.starting.val() || (self.running.val() && !self.counting.val());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::testing::{lcg_step, settle, tick, verilog_of};
    use systole_core::sdram::{Chip, Command, Controller, Pins, ULX3S_SDRAM};
    use systole_core::timing::sdram::{SdramBus, Transfer};

    const ROW: usize = 16;

    struct Bench {
        m: SdramMemory,
        chip: Chip,
        phases: usize,
        cycle: u64,
    }

    impl Bench {
        /// One cycle: settle, the chip takes the pins' commands and drives the data pins.
        fn cycle(&mut self) {
            settle(&mut self.m);
            for k in 0..self.phases {
                let m = &self.m;
                let pins = Pins {
                    ras_n: m.ras_n[k].val(),
                    cas_n: m.cas_n[k].val(),
                    we_n: m.we_n[k].val(),
                    ba: m.ba[k].val().index() as u8,
                    a: m.a[k].val().index() as u16,
                    dq: m.dq_drive[k].val().then(|| m.dq_out[k].val().index() as u16),
                    dqm: m.dqm[k].val().index() as u8,
                };
                let command = Command::from_pins(&pins).expect("a command");
                let cycle = self.cycle;
                let driven =
                    self.chip.clock(command).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
                self.m.dq_in[k].next = (driven.unwrap_or(0xBAD) as u64).into();
            }
            settle(&mut self.m);
        }

        fn tick(&mut self) {
            tick(&mut self.m, |m| &mut m.clock);
            self.cycle += 1;
        }
    }

    /// Between runs the host writes bytes and reads them back, the chip refreshed on the
    /// controller's cadence; then a run starts once the chip is quiet, and a read at the
    /// machine's cycle `at` lands in core's cycles counted from its first counted cycle, with
    /// the host's bytes.
    fn hosts_then_runs(mhz: f64, seed: u64) {
        let k = systole_core::sdram::clock_ratio(&ULX3S_SDRAM, mhz);
        let t = SdramTiming::at(&ULX3S_SDRAM, mhz * k as f64).unwrap();
        let g = ULX3S_SDRAM.geometry;
        let mut b = Bench {
            m: SdramMemory::new(&t, &g, k as usize, ROW, 1),
            chip: Chip::new(ULX3S_SDRAM, mhz * k as f64),
            phases: k as usize,
            cycle: 0,
        };
        b.m.connect_all();
        b.m.enable.next = true;
        let mut seed = seed;
        let mut rand = |n: u64| (lcg_step(&mut seed) >> 33) % n;
        let mut memory: BTreeMap<u64, u8> = BTreeMap::new();
        let base = rand(1 << 20);
        // The host: bytes written one at a time (each waiting for the last), then read back.
        let mut bytes = 0;
        while bytes < 300 {
            b.cycle();
            if b.m.mem_ready.val() && rand(3) == 0 {
                let addr = base + rand(64);
                let byte = rand(256);
                b.m.host_addr.next = addr.into();
                b.m.host_byte.next = byte.into();
                b.m.host_write.next = true;
                memory.insert(addr, byte as u8);
                bytes += 1;
            }
            b.tick();
            b.m.host_write.next = false;
        }
        for (&addr, &want) in memory.iter().take(40) {
            b.m.host_addr.next = addr.into();
            b.m.host_read.next = true;
            let mut waited = 0;
            loop {
                b.cycle();
                if b.m.mem_ready.val() {
                    break;
                }
                b.tick();
                waited += 1;
                assert!(waited < 100, "a host read of {addr} never came back");
            }
            b.tick();
            b.cycle();
            assert_eq!(b.m.dram_byte.val().index() as u8, want, "host byte {addr}");
            b.m.host_read.next = false;
            b.tick();
        }
        // Run: the start waits for a quiet chip; the machine counts from a few cycles later.
        b.m.run_in.next = true;
        b.cycle();
        b.tick();
        b.m.run_in.next = false;
        let mut waited = 0;
        loop {
            b.cycle();
            if b.m.run_out.val() {
                break;
            }
            b.tick();
            waited += 1;
            assert!(waited < 100, "the run never started");
        }
        b.tick();
        b.m.running.next = true;
        for _ in 0..rand(5) {
            b.cycle();
            b.tick();
        }
        b.m.counting.next = true;
        let mut bus = SdramBus { controller: Controller::new(t, g), ratio: k };
        // Early, while the run's first refresh (at its cycle 0) still holds the chip.
        let at = 1 + rand(2);
        let x = Transfer {
            addr: base,
            rows: 4,
            row_stride: 16,
            len: 16,
            elem_stride: 1,
            es: 1,
            write: false,
            lead: 0,
        };
        let mut want = vec![];
        bus.time(&x, at, |_, lands| want.push(at + lands));
        let mut got = vec![];
        for now in 0..at + 100 {
            b.m.start.next = now + 1 == at;
            b.m.addr.next = x.addr.into();
            b.m.rows.next = x.rows.into();
            b.m.len.next = x.len.into();
            b.m.row_stride.next = x.row_stride.into();
            b.m.elem_stride.next = 1u64.into();
            b.m.es.next = 1u64.into();
            b.cycle();
            if b.m.row_valid.val() {
                got.push(now);
            }
            // A read stage later, the row's bytes.
            if got.len() == 1 && now == got[0] + 1 {
                for j in 0..ROW {
                    let want = memory.get(&(base + j as u64)).copied().unwrap_or(0);
                    assert_eq!(b.m.row_data[j].val().index() as u8, want, "row 0 byte {j}");
                }
            }
            b.tick();
        }
        assert_eq!(got, want, "{mhz} MHz: the rows' cycles, counted from the first");
    }

    #[test]
    fn hosts_bytes_between_runs_and_starts_a_run_at_the_controllers_cycle_0() {
        hosts_then_runs(50.0, 1);
        hosts_then_runs(55.0, 2);
        hosts_then_runs(100.0, 3);
    }

    #[test]
    fn verilog_is_valid() {
        let t = SdramTiming::at(&ULX3S_SDRAM, 100.0).unwrap();
        let m = SdramMemory::new(&t, &ULX3S_SDRAM.geometry, 2, ROW, 1);
        yosys_validate("sdram_memory", &verilog_of(m)).unwrap();
    }
}
