//! The transfer logic and the SDRAM port from power-on, with core's chip model on the pins,
//! against core's `timing::sdram::SdramBus` and a byte memory: random reads (contiguous,
//! strided, repeated elements, any alignment) and writes (any alignment, source rows pushed
//! `lead` cycles after they are addressed), each row landing in core's cycle with core's bytes.

use std::collections::BTreeMap;

use super::*;
use crate::mem::SdramPort;
use crate::testing::{lcg_step, settle, tick, verilog_of};
use systole_core::sdram::controller::power_up;
use systole_core::sdram::{Chip, Command, Controller, Pins, SdramTiming, ULX3S_SDRAM};
use systole_core::timing::sdram::{SdramBus, Transfer};

const ROW_BYTES: usize = 24;

/// The two blocks, their combinational paths between them settled.
struct Rig {
    t: SdramTransfer,
    p: SdramPort,
    chip: Chip,
    phases: usize,
}

impl Rig {
    fn settle(&mut self) {
        for _ in 0..8 {
            settle(&mut self.t);
            for k in 0..self.phases {
                self.p.request[k].next = self.t.request[k].val();
                self.p.word[k].next = self.t.word[k].val();
                self.p.write[k].next = self.t.write_word[k].val();
                self.p.write_data[k].next = self.t.write_data[k].val();
                self.p.write_mask[k].next = self.t.write_mask[k].val();
            }
            settle(&mut self.p);
            for k in 0..self.phases {
                self.t.accept[k].next = self.p.accept[k].val();
                self.t.read_valid[k].next = self.p.read_valid[k].val();
                self.t.read_data[k].next = self.p.read_data[k].val();
            }
        }
        settle(&mut self.t);
    }

    /// The chip takes each phase's command on the pins and drives the data pins.
    fn chip(&mut self, cycle: u64) {
        for k in 0..self.phases {
            let p = &self.p;
            let pins = Pins {
                ras_n: p.ras_n[k].val(),
                cas_n: p.cas_n[k].val(),
                we_n: p.we_n[k].val(),
                ba: p.ba[k].val().index() as u8,
                a: p.a[k].val().index() as u16,
                dq: p.dq_drive[k].val().then(|| p.dq_out[k].val().index() as u16),
                dqm: p.dqm[k].val().index() as u8,
            };
            let command = Command::from_pins(&pins).expect("a command");
            let driven = self.chip.clock(command).unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
            self.p.dq_in[k].next = (driven.unwrap_or(0xDEAD ^ cycle as u16) as u64).into();
        }
    }

    fn tick(&mut self) {
        tick(&mut self.t, |t| &mut t.clock);
        tick(&mut self.p, |p| &mut p.clock);
    }
}

/// The bytes row `r` of `x` moves, in the row's order.
fn row_bytes(x: &Transfer, r: u64) -> Vec<u64> {
    let mut bytes = vec![];
    x.spans(r, |lo, n| bytes.extend(lo..lo + n));
    bytes
}

/// Runs `transfers` random transfers at an array clock of `mhz` and returns how many rows
/// landed. With `freezes`, a cycle in five is frozen (the machine's `enable` low): the
/// transfer, the controller and the sequencer stand still while the chip answers, and every
/// figure is counted in enabled cycles.
fn agrees_with_core(mhz: f64, seed: u64, transfers: usize, freezes: bool) -> (u64, u64) {
    let k = systole_core::sdram::clock_ratio(&ULX3S_SDRAM, mhz);
    let t = SdramTiming::at(&ULX3S_SDRAM, mhz * k as f64).unwrap();
    let g = ULX3S_SDRAM.geometry;
    let phases = k as usize;
    let mut bus = SdramBus { controller: Controller::new(t, g), ratio: k };
    let arrival = bus.read_arrival() as usize;
    let mut rig = Rig {
        t: SdramTransfer::new(ROW_BYTES, phases, arrival),
        p: SdramPort::new(&t, &g, phases),
        chip: Chip::new(ULX3S_SDRAM, mhz * k as f64),
        phases,
    };
    rig.t.connect_all();
    rig.p.connect_all();
    let mut seed = seed;
    let mut rand = |n: u64| (lcg_step(&mut seed) >> 33) % n;
    let mut memory: BTreeMap<u64, u8> = BTreeMap::new();
    // Power-up: the array cycle the controller's cycle 0 is.
    let ready = power_up(&t).1.div_ceil(k);
    let mut cycle = 0u64;
    rig.t.enable.next = true;
    rig.p.enable.next = true;
    while cycle < ready {
        rig.settle();
        rig.chip(cycle);
        rig.settle();
        rig.tick();
        cycle += 1;
    }
    let mut now = 0u64; // array cycles since the controller's cycle 0
    let (mut landed, mut stalls) = (0, 0);
    for n in 0..transfers {
        let write = rand(2) == 0;
        let es = [1u64, 2, 4][rand(3) as usize];
        let pick = rand(4);
        let elem_stride = match (write || es == 4, pick) {
            (true, _) | (false, 0 | 1) => 1,
            (false, 2) => 0,
            _ => 2 + rand(4),
        };
        let len = 1 + rand(ROW_BYTES as u64 / es);
        let span = if elem_stride == 1 { len * es } else { es };
        let tall = rand(4) == 0;
        let rows = 1 + rand(if tall { 40 } else { 5 });
        let row_stride = match rand(3) {
            0 => len * elem_stride.max(1),
            1 => rand(4000),
            _ => 256 * rand(64) + rand(3),
        };
        let far = if rand(5) == 0 { rand(g.bytes() / 2) } else { rand(5000) };
        let lead = rand(4);
        // A read's rows as the transfer shows them, before any read stage.
        let lead = if write { lead } else { 0 };
        let x = Transfer { addr: far, rows, row_stride, len, elem_stride, es, write, lead };
        let last_byte = row_bytes(&x, rows - 1).into_iter().max().unwrap();
        if last_byte >= g.bytes() || span == 0 {
            continue;
        }
        let gaps = [0, rand(3), rand(40), rand(2000)];
        let at = now + 1 + gaps[rand(4) as usize];
        let mut want = vec![];
        let duration = bus.time(&x, at, |_, lands| want.push(at + lands));
        // The source rows' bytes, as the write will take them.
        let data: Vec<Vec<u8>> =
            (0..rows).map(|_| (0..ROW_BYTES).map(|_| rand(256) as u8).collect()).collect();
        let mut got = vec![];
        let mut issued = 0u64;
        let mut pushes: Vec<(u64, u64)> = vec![]; // (cycle, row)
        let mut last_issue = 0;
        while now < at + duration + 2 {
            settle(&mut rig.p);
            stalls += rig.p.stall.val() as u64;
            let frozen = freezes && rand(5) == 0 || rig.p.stall.val();
            rig.t.enable.next = !frozen;
            rig.p.enable.next = !frozen;
            if frozen {
                rig.t.start.next = false;
                rig.t.issue.next = false;
                rig.t.push.next = false;
                rig.settle();
                rig.chip(cycle);
                rig.settle();
                assert!(!rig.t.row_valid.val() && !rig.t.last_row.val(), "cycle {cycle}: frozen");
                rig.tick();
                cycle += 1;
                continue;
            }
            let t = &mut rig.t;
            t.start.next = now + 1 == at;
            t.write.next = write;
            t.addr.next = x.addr.into();
            t.rows.next = rows.into();
            t.len.next = len.into();
            t.row_stride.next = row_stride.into();
            t.elem_stride.next = elem_stride.into();
            t.es.next = es.into();
            t.issue.next = false;
            t.push.next = false;
            rig.settle();
            // The sequencer: row 0 addressed as it starts, then one a cycle while there is room.
            if write && issued < rows {
                let first = issued == 0 && now + 1 == at;
                let next = issued > 0 && now > last_issue && rig.t.room.val();
                if first || next {
                    rig.t.issue.next = true;
                    pushes.push((now + 1 + lead, issued));
                    last_issue = now;
                    issued += 1;
                }
            }
            if let Some(&(_, r)) = pushes.iter().find(|&&(c, _)| c == now) {
                rig.t.push.next = true;
                for (j, &b) in data[r as usize].iter().enumerate() {
                    rig.t.push_data[j].next = (b as u64).into();
                }
            }
            rig.settle();
            rig.chip(cycle);
            rig.settle();
            if !write && rig.t.row_valid.val() {
                let r = got.len() as u64;
                let bytes = row_bytes(&x, r);
                for (j, b) in bytes.iter().enumerate() {
                    let want = memory.get(b).copied().unwrap_or(0);
                    assert_eq!(
                        rig.t.row_data[j].val().index() as u8,
                        want,
                        "{mhz} MHz, transfer {n} {x:?}: row {r} byte {j}"
                    );
                }
            }
            if !write && rig.t.row_valid.val() || write && rig.t.last_row.val() {
                got.push(now);
            }
            if rig.t.last_row.val() {
                assert_eq!(now + 1, at + duration, "{mhz} MHz, transfer {n} {x:?}: the end");
            }
            rig.tick();
            cycle += 1;
            now += 1;
        }
        if write {
            assert_eq!(got, [at + duration - 1], "{mhz} MHz, transfer {n} {x:?}");
            for r in 0..rows {
                for (j, b) in row_bytes(&x, r).into_iter().enumerate() {
                    memory.insert(b, data[r as usize][j]);
                }
            }
        } else {
            assert_eq!(got, want, "{mhz} MHz, transfer {n} {x:?}: the rows' cycles");
            landed += rows;
        }
    }
    (landed, stalls)
}

#[test]
fn transfers_land_in_cores_cycles_with_cores_bytes() {
    for (mhz, seed) in [(50.0, 1), (55.0, 2), (100.0, 3)] {
        let (rows, stalls) = agrees_with_core(mhz, seed, 120, false);
        assert!(rows > 200, "{mhz} MHz: {rows} rows read");
        assert_eq!(stalls, 0, "{mhz} MHz: never frozen, never stalled");
    }
}

/// The same with the machine frozen now and then: the chip's words wait in the queue for their
/// landing cycles, the rows land in core's enabled cycles with core's bytes, and the refreshes
/// the frozen cycles withheld are given in stalls of the port's own (the chip model refuses
/// more than eight owed; open rows are closed for them and opened again).
#[test]
fn frozen_cycles_stop_the_transfer_not_the_chip() {
    for (mhz, seed) in [(50.0, 4), (55.0, 5), (100.0, 6)] {
        let (rows, stalls) = agrees_with_core(mhz, seed, 80, true);
        assert!(rows > 100, "{mhz} MHz: {rows} rows read");
        assert!(stalls > 0, "{mhz} MHz: no stall");
    }
}

#[test]
fn verilog_is_valid() {
    yosys_validate("sdram_transfer", &verilog_of(SdramTransfer::new(ROW_BYTES, 2, 3))).unwrap();
}
