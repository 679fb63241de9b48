//! The SDRAM controller against the datasheet model of the chip: every command it gives meets
//! the chip's rules in nanoseconds, every word read back is the word written, the refreshes keep
//! up, and a controller planted with an off-by-one in its CAS latency, its refresh cadence or
//! its tRCD is caught.

use std::collections::{BTreeMap, VecDeque};

use systole_core::check::SplitMix;
use systole_core::sdram::controller::power_up;
use systole_core::sdram::{
    kept_bits, Chip, Command, Controller, Request, SdramPart, SdramTiming, ULX3S_SDRAM,
};

/// A chip driven by a controller, cycle for cycle, the controller's cycle 0 the chip's first
/// after its power-up; checks each read's word at the cycle the controller expects it.
struct Bench {
    chip: Chip,
    ctl: Controller,
    base: u64,
    /// The words written so far, by word address.
    memory: BTreeMap<u32, u16>,
    /// Reads in flight: the chip's cycle their word is on its pins, and the word.
    expect: VecDeque<(u64, u16)>,
    reads: u64,
}

impl Bench {
    fn new(part: SdramPart, mhz: f64, timing: SdramTiming) -> Result<Bench, String> {
        let mut chip = Chip::new(part, mhz);
        // The chip is powered up at the part's own CAS latency; `timing` may be planted.
        let (commands, ready) = power_up(&SdramTiming::at(&part, mhz).unwrap());
        for (at, command) in commands {
            chip.idle_until(at).map_err(|e| e.to_string())?;
            chip.clock(command).map_err(|e| e.to_string())?;
        }
        chip.idle_until(ready).map_err(|e| e.to_string())?;
        let ctl = Controller::new(timing, part.geometry);
        Ok(Bench {
            chip,
            ctl,
            base: ready,
            memory: BTreeMap::new(),
            expect: VecDeque::new(),
            reads: 0,
        })
    }

    /// One chip cycle with `command`, checking the word on the data pins.
    fn clock(&mut self, command: Command) -> Result<(), String> {
        let t = self.chip.now();
        let driven = self.chip.clock(command).map_err(|e| e.to_string())?;
        let expected = match self.expect.front() {
            Some(&(due, word)) if due == t => {
                self.expect.pop_front();
                Some(word)
            }
            _ => None,
        };
        match (driven, expected) {
            (a, b) if a == b => Ok(()),
            (a, b) => Err(format!(
                "chip cycle {t}: the data pins carry {a:?}, the controller takes {b:?}"
            )),
        }
    }

    /// NOPs to the chip until the controller's cycle `t`, clocking each cycle a word is due in.
    fn chip_to(&mut self, t: u64) -> Result<(), String> {
        let target = self.base + t;
        while let Some(due) = self.expect.front().map(|e| e.0).or(self.chip.next_word_at()) {
            if due >= target {
                break;
            }
            self.chip.idle_until(due).map_err(|e| e.to_string())?;
            self.clock(Command::Nop)?;
        }
        self.chip.idle_until(target).map_err(|e| e.to_string())
    }

    /// Gives `command`, of the controller's cycle `t`, to the chip; `word` is the word offered.
    fn give(&mut self, t: u64, command: Command, word: u32) -> Result<(), String> {
        self.chip_to(t)?;
        if let Command::Read { .. } = command {
            let value = self.memory.get(&word).copied().unwrap_or(0);
            // The controller takes the word `cas` cycles on at the chip's pins; the I/O
            // registers add the same delay to every read, so the bench leaves them out.
            self.expect.push_back((self.base + t + self.ctl.timing.cas, value));
            self.reads += 1;
        }
        self.clock(command)
    }

    /// Offers `request` until the controller takes it; the cycle of its READ or WRITE.
    fn offer(&mut self, request: Request) -> Result<u64, String> {
        loop {
            let t = self.ctl.now();
            let command = self.ctl.step(Some(request));
            self.give(t, command, request.word)?;
            if let (Command::Write { .. }, Some(data)) = (command, request.write) {
                // The bytes the request asked for, whatever the command carried.
                let kept = kept_bits(request.mask);
                let old = self.memory.get(&request.word).copied().unwrap_or(0);
                self.memory.insert(request.word, old & kept | data & !kept);
            }
            if matches!(command, Command::Read { .. } | Command::Write { .. }) {
                return Ok(t);
            }
        }
    }

    /// Nothing offered until the controller's cycle `t`.
    fn idle_until(&mut self, t: u64) -> Result<(), String> {
        let mut given = Vec::new();
        self.ctl.idle_until(t, |at, command| given.push((at, command)));
        for (at, command) in given {
            self.give(at, command, 0)?;
        }
        self.chip_to(t)
    }

    /// Idles long enough for every read in flight to land, and checks the refreshes.
    fn finish(&mut self) -> Result<(), String> {
        let t = self.ctl.now() + self.ctl.read_latency() + 1;
        self.idle_until(t)?;
        if let Some(e) = self.expect.front() {
            return Err(format!("a read's word due at chip cycle {} never came", e.0));
        }
        Ok(())
    }
}

fn timing(mhz: f64) -> SdramTiming {
    SdramTiming::at(&ULX3S_SDRAM, mhz).unwrap()
}

/// Random traffic: runs of reads and writes at random places (row hits and misses in every
/// bank), with idle gaps long and short, for `cycles` cycles.
fn traffic(bench: &mut Bench, seed: u64, cycles: u64) -> Result<(), String> {
    let mut rng = SplitMix(seed);
    let words = ULX3S_SDRAM.geometry.words() as u32;
    let mut written: Vec<u32> = Vec::new();
    while bench.ctl.now() < cycles {
        let run = 1 + rng.next_u64() % 40;
        let write = rng.next_u64() % 2 == 0 || written.is_empty();
        // A fresh place, or one written before (so reads check real words), or near the last.
        let start = match rng.next_u64() % 3 {
            0 => (rng.next_u64() % words as u64) as u32,
            1 if !written.is_empty() => written[(rng.next_u64() % written.len() as u64) as usize],
            _ => written.last().copied().unwrap_or(0).wrapping_add(509) % words,
        };
        for i in 0..run as u32 {
            let word = (start + i) % words;
            let data = write.then_some(rng.next_u64() as u16);
            // A partial word now and then: one byte masked.
            let mask = [0, 0, 1, 2][(rng.next_u64() % 4) as usize];
            if write {
                written.push(word);
            }
            bench.offer(Request { word, write: data, mask })?;
        }
        let gap = match rng.next_u64() % 4 {
            0 => 0,
            1 => rng.next_u64() % 8,
            2 => rng.next_u64() % 500,
            _ => rng.next_u64() % 5000,
        };
        bench.idle_until(bench.ctl.now() + gap)?;
    }
    bench.finish()
}

#[test]
fn random_traffic_meets_the_datasheet_and_reads_what_was_written() {
    for (mhz, seed) in [(50.0, 1), (40.0, 2), (55.0, 3), (120.0, 4), (25.0, 5)] {
        let mut bench = Bench::new(ULX3S_SDRAM, mhz, timing(mhz)).unwrap();
        traffic(&mut bench, seed, 400_000).unwrap_or_else(|e| panic!("{mhz} MHz: {e}"));
        assert!(bench.reads > 1000, "{mhz} MHz: {} reads", bench.reads);
        // Refresh k is due at cycle k * refi: all of them given, none more.
        let due = bench.ctl.now().div_ceil(bench.ctl.timing.refi);
        assert!(bench.ctl.refreshes().abs_diff(due) <= 1, "{} of {due}", bench.ctl.refreshes());
    }
}

#[test]
fn a_sequential_stream_moves_a_word_a_cycle_between_refreshes() {
    let t = timing(50.0);
    let mut ctl = Controller::new(t, ULX3S_SDRAM.geometry);
    let mut last = 0;
    let end = ctl.stream(0, 0, 65_536, None, |i, at| {
        assert!(at > last || i == 0);
        last = at;
    });
    // 65,536 words: 168 refreshes (each closing the rows: PRECHARGE ALL, tRP, REFRESH, tRFC,
    // ACTIVE, tRCD) and a new row every 512 words.
    let per_word = end as f64 / 65_536.0;
    assert!(per_word < 1.04, "{end} cycles for 65,536 words");
    let mut writes = Controller::new(t, ULX3S_SDRAM.geometry);
    let mut data = |i: u32| i as u16;
    let end_w = writes.stream(0, 0, 65_536, Some(&mut data), |_, _| {});
    assert!(end_w as f64 / 65_536.0 < 1.04, "{end_w} cycles to write 65,536 words");
}

#[test]
fn a_stream_through_the_chip_reads_back_what_it_wrote() {
    let mut bench = Bench::new(ULX3S_SDRAM, 50.0, timing(50.0)).unwrap();
    for i in 0..3000u32 {
        bench
            .offer(Request { word: 100_000 + i, write: Some(i as u16 ^ 0x5a5a), mask: 0 })
            .unwrap();
    }
    for i in 0..3000u32 {
        bench.offer(Request { word: 100_000 + i, write: None, mask: 0 }).unwrap();
    }
    bench.finish().unwrap();
    assert_eq!(bench.reads, 3000);
}

/// Runs planted timing through the chip: the error the bench reports.
fn planted(plant: impl Fn(&mut SdramTiming), mhz: f64, cycles: u64) -> String {
    let mut t = timing(mhz);
    plant(&mut t);
    let mut bench = Bench::new(ULX3S_SDRAM, mhz, t).unwrap();
    match traffic(&mut bench, 7, cycles) {
        Ok(()) => String::new(),
        Err(e) => e,
    }
}

#[test]
fn a_cas_latency_off_by_one_reads_the_wrong_cycle() {
    assert_eq!(planted(|_| {}, 50.0, 50_000), "");
    let e = planted(|t| t.cas += 1, 50.0, 50_000);
    assert!(e.contains("the data pins carry"), "{e}");
    let e = planted(|t| t.cas -= 1, 50.0, 50_000);
    assert!(e.contains("the data pins carry"), "{e}");
}

#[test]
fn a_trcd_off_by_one_is_refused_by_the_chip() {
    // At 55 MHz tRCD (20 ns) is two cycles of 18.2 ns.
    assert_eq!(planted(|_| {}, 55.0, 50_000), "");
    let e = planted(|t| t.rcd -= 1, 55.0, 50_000);
    assert!(e.contains("breaks tRCD: 18.2 ns, the datasheet's minimum 20.0 ns"), "{e}");
}

#[test]
fn a_refresh_cadence_off_by_one_falls_behind_the_chip() {
    // 7,812.5 ns is 390.6 cycles at 50 MHz: a refresh due every 391 falls a refresh behind
    // every 1,000 or so, and the chip may postpone 8.
    let idle = |plant: fn(&mut SdramTiming)| {
        let mut t = timing(50.0);
        plant(&mut t);
        let mut bench = Bench::new(ULX3S_SDRAM, 50.0, t).unwrap();
        bench.idle_until(4_000_000).err().unwrap_or_default()
    };
    assert_eq!(idle(|_| {}), "");
    let e = idle(|t| t.refi += 1);
    assert!(e.contains("refreshes given where") && e.contains("were owed"), "{e}");
}
