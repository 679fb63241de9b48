//! The stream unit: weight-stationary `Matmul`s under the decoupled schedule, entering the
//! tagged array back to back (core's `machine/cycle/decoupled.rs` and `timing::decoupled`).
//!
//! A matmul dispatched in cycle `d` feeds row `m` on the array's left edge in cycle `d + m`
//! (scratchpad port A addressed a cycle ahead, since reads are registered: the first row from the
//! candidate whether or not it dispatches, the next ones from the row pointer)
//! with the tag of its weight bank: the active bank, which a swapping matmul advances with
//! `next_bank` as it dispatches. The next matmul may start feeding in the cycle after this one's
//! last row, while this one drains. Each fed row's metadata (valid, accumulator row, accumulate,
//! bank, last row of its matmul) walks a delay line of `L = timing::ws_latency` registers
//! beside the array (`R + C - 1`, one more on PEs that register their products), so it reaches
//! the end as the row's de-skewed result is on the array's `out`, in cycle `d + m + L`, and is
//! written (or added) to accumulator row `acc_row + m` then; the accumulator read that an add
//! needs is issued the cycle before, from the line's next state.
//! The unit never needs to know where one matmul ends inside the array: every row carries its own.
//!
//! Built with read stages (`ArrayConfig::read_stages`), a row read for cycle `d + m` arrives
//! that many cycles later: `feed` and `tag` pass as many registers to meet it, the line (whose
//! `L` counts the stages) still starts from the undelayed feed, and the accumulator read is
//! issued two cycles ahead, from the next state of the line's second-to-last stage.
//!
//! # Wiring in `top.rs` (weight-stationary, decoupled; in place of [`super::ArrayUnit`])
//!
//! * `enable` is the machine's `en`, `abort` the dispatcher's (a reset empties the feed and the
//!   line: nothing more is written); `start` is the dispatcher's `start_arr` for a `Matmul`
//!   (asserted the cycle before dispatch); `ins`, the decoded instruction, is joined to the
//!   candidate's (it reads `a_row`, `acc_row`, `rows`, `swap`, `accumulate`), as ArrayUnit's.
//! * Array (`Array::new` of the config is tagged, `crate::array::tagged`): `left[i]` =
//!   `feed ? spad_a.read_data[i] : 0`, `tag` = `tag`, `load_bank` = `load_bank`, `shift` = the
//!   weight loader's `shift`, `top` as today from the loader (it fills bank `load_bank`, which
//!   no swap can change while it runs: a swap waits for the load to finish). The tagged array
//!   has no `swap`; its `tag` and `load_bank` exist only in tagged configs, so an `hdl_gen`
//!   kernel serving both drives them inside `for k in 0..self.array.tag.len()` (and `swap`
//!   inside `for k in 0..self.array.swap.len()`), see `crate::optional`.
//! * Scratchpad port A's read address is `spad_read_a`.
//! * Accumulators: port X's read address `acc_read`; on `acc_write`, write address
//!   `acc_write_row` with `acc_lanes[j].op` = `acc_op` and `acc_lanes[j].array` = `out[j]`, as
//!   ArrayUnit's outputs are wired today (under the decoupled schedule, in the accumulator bank
//!   the matmul's rows lie in).
//! * Dispatcher (core's rules, `timing::decoupled`), all from registers, none from `start`: a
//!   `Matmul` may dispatch next cycle when `free` (its rows would follow the current feed with
//!   fewer than `ARRAY_SLOTS` matmuls in the array), a swapping one also only with full shadow
//!   weights (the weight loader's `finishing`, as today); a `LoadWeights` only while not
//!   `load_bank_busy` (no row of the bank it fills is still in the array next cycle); `Sync`
//!   and `Halt` when `idle`. `retire` says the oldest matmul leaves the array this cycle, for a
//!   scoreboard that keeps the footprints of the matmuls in flight (their scratchpad rows and
//!   accumulator banks, against other units' instructions) in dispatch order.
//!   `NoWeightsLoaded` is detected as today.

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::scoreboard::{ARRAY_SLOTS, WEIGHT_BANKS};
use systole_core::ArrayConfig;

use crate::decode::constant;
use crate::delay::Delay;
use crate::optional::Optional;
use crate::pe::TAG_BITS;
use crate::vector::AccOp;

// `in_flight` counts up to `ARRAY_SLOTS` in three bits.
const _: () = assert!(ARRAY_SLOTS < 8);

/// The stream unit; see the module docs.
#[derive(LogicBlock)]
pub struct StreamUnit {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    /// A `Matmul` dispatches in the next cycle.
    pub start: Signal<In, Bit>,
    /// The instruction, as decoded.
    pub ins: Decoded,
    /// A matmul may dispatch in the next cycle: no row of the current one is left to feed then,
    /// and fewer than `ARRAY_SLOTS` matmuls are in the array.
    pub free: Signal<Out, Bit>,
    /// No matmul is in the array in the next cycle.
    pub idle: Signal<Out, Bit>,
    /// A row of bank `load_bank` is in the array in the next cycle.
    pub load_bank_busy: Signal<Out, Bit>,
    /// The oldest matmul writes its last row now and leaves the array.
    pub retire: Signal<Out, Bit>,
    /// A row enters the array's left edge now (else the edge takes zeros).
    pub feed: Signal<Out, Bit>,
    /// The weight bank of the row entering now: the active bank.
    pub tag: Signal<Out, Bits<TAG_BITS>>,
    /// The active bank: the one the newest matmul's rows use.
    pub active: Signal<Out, Bits<TAG_BITS>>,
    /// The shadow bank, `next_bank(active)`: the one a `LoadWeights` fills.
    pub load_bank: Signal<Out, Bits<TAG_BITS>>,
    pub acc_write: Signal<Out, Bit>,
    pub acc_write_row: Signal<Out, Bits<16>>,
    pub acc_op: Signal<Out, AccOp>,
    /// Scratchpad row for the next cycle (read port A): the row fed then, if any. It never
    /// depends on `start`.
    pub spad_read_a: Signal<Out, Bits<16>>,
    /// Accumulator row for the next cycle: the row written then (read port X).
    pub acc_read: Signal<Out, Bits<16>>,
    feeding: DFF<Bit>,
    a_ptr: DFF<Bits<16>>,
    acc_ptr: DFF<Bits<16>>,
    /// Rows left to feed after the current one.
    remaining: DFF<Bits<16>>,
    accumulating: DFF<Bit>,
    bank: DFF<Bits<TAG_BITS>>,
    /// Matmuls dispatched and not yet retired.
    in_flight: DFF<Bits<3>>,
    /// The metadata line: stage `s` holds the row fed `s + 1` cycles ago.
    valid: Vec<DFF<Bit>>,
    row: Vec<DFF<Bits<16>>>,
    add: Vec<DFF<Bit>>,
    tags: Vec<DFF<Bits<TAG_BITS>>>,
    last: Vec<DFF<Bit>>,
    last_bank: Constant<Bits<TAG_BITS>>,
    slots: Constant<Bits<3>>,
    next_bank: Signal<Local, Bits<TAG_BITS>>,
    last_feed: Signal<Local, Bit>,
    staying: Signal<Local, Bits<3>>,
    /// Built with read stages: the feed and its tag on their way to meet the rows.
    late_feed: Optional<Delay<Bit>>,
    late_tag: Optional<Delay<Bits<TAG_BITS>>>,
    /// `timing::ws_latency` (`R + C - 1` on one-stage PEs): stages of the metadata line.
    _stages: usize,
    /// The line's second-to-last stage (built with read stages, the line has two or more).
    _second_last: usize,
}

impl StreamUnit {
    pub fn new(config: &ArrayConfig) -> StreamUnit {
        fn line<T: Synth>(stages: usize) -> Vec<DFF<T>> {
            (0..stages).map(|_| DFF::default()).collect()
        }
        let stages = systole_core::timing::ws_latency(config) as usize;
        let late = config.read_stages > 0;
        StreamUnit {
            ins: Default::default(),
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            free: Default::default(),
            idle: Default::default(),
            load_bank_busy: Default::default(),
            retire: Default::default(),
            feed: Default::default(),
            tag: Default::default(),
            active: Default::default(),
            load_bank: Default::default(),
            acc_write: Default::default(),
            acc_write_row: Default::default(),
            acc_op: Default::default(),
            spad_read_a: Default::default(),
            acc_read: Default::default(),
            feeding: Default::default(),
            a_ptr: Default::default(),
            acc_ptr: Default::default(),
            remaining: Default::default(),
            accumulating: Default::default(),
            bank: Default::default(),
            in_flight: Default::default(),
            valid: line(stages),
            row: line(stages),
            add: line(stages),
            tags: line(stages),
            last: line(stages),
            last_bank: constant(WEIGHT_BANKS as u64 - 1),
            slots: constant(ARRAY_SLOTS as u64),
            next_bank: Default::default(),
            last_feed: Default::default(),
            staying: Default::default(),
            late_feed: Optional::when(late, || Delay::new(config.read_stages as usize)),
            late_tag: Optional::when(late, || Delay::new(config.read_stages as usize)),
            _stages: stages,
            _second_last: stages.saturating_sub(2),
        }
    }
}

impl Logic for StreamUnit {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, feeding, a_ptr, acc_ptr, remaining, accumulating, bank, in_flight);
        for s in 0..self._stages {
            self.valid[s].clock.next = self.clock.val();
            self.row[s].clock.next = self.clock.val();
            self.add[s].clock.next = self.clock.val();
            self.tags[s].clock.next = self.clock.val();
            self.last[s].clock.next = self.clock.val();
            self.valid[s].d.next = self.valid[s].q.val();
            self.row[s].d.next = self.row[s].q.val();
            self.add[s].d.next = self.add[s].q.val();
            self.tags[s].d.next = self.tags[s].q.val();
            self.last[s].d.next = self.last[s].q.val();
        }
        self.next_bank.next = self.bank.q.val() + 1;
        if self.bank.q.val() == self.last_bank.val() {
            self.next_bank.next = 0.into();
        }
        self.last_feed.next = self.feeding.q.val() && !self.remaining.q.val().any();
        // The end of the line: the row whose result is on the array's `out` now.
        self.retire.next = false;
        self.acc_write.next = false;
        self.acc_write_row.next = 0.into();
        self.acc_op.next = AccOp::Overwrite;
        for s in (self._stages - 1)..self._stages {
            self.retire.next = self.valid[s].q.val() && self.last[s].q.val();
            self.acc_write.next = self.valid[s].q.val();
            self.acc_write_row.next = self.row[s].q.val();
            if self.add[s].q.val() {
                self.acc_op.next = AccOp::Accumulate;
            }
        }
        if self.enable.val() {
            if self.feeding.q.val() {
                self.a_ptr.d.next = self.a_ptr.q.val() + 1;
                self.acc_ptr.d.next = self.acc_ptr.q.val() + 1;
                self.remaining.d.next = self.remaining.q.val() - 1;
                if self.last_feed.val() {
                    self.feeding.d.next = false;
                }
            }
            self.valid[0].d.next = self.feeding.q.val();
            self.row[0].d.next = self.acc_ptr.q.val();
            self.add[0].d.next = self.accumulating.q.val();
            self.tags[0].d.next = self.bank.q.val();
            self.last[0].d.next = self.last_feed.val();
            for s in 1..self._stages {
                self.valid[s].d.next = self.valid[s - 1].q.val();
                self.row[s].d.next = self.row[s - 1].q.val();
                self.add[s].d.next = self.add[s - 1].q.val();
                self.tags[s].d.next = self.tags[s - 1].q.val();
                self.last[s].d.next = self.last[s - 1].q.val();
            }
            if self.retire.val() && !self.start.val() {
                self.in_flight.d.next = self.in_flight.q.val() - 1;
            }
            if self.start.val() && !self.retire.val() {
                self.in_flight.d.next = self.in_flight.q.val() + 1;
            }
            if self.start.val() {
                self.feeding.d.next = true;
                self.a_ptr.d.next = self.ins.a_row.val();
                self.acc_ptr.d.next = self.ins.acc_row.val();
                self.remaining.d.next = self.ins.rows.val() - 1;
                self.accumulating.d.next = self.ins.accumulate.val();
                if self.ins.swap.val() {
                    self.bank.d.next = self.next_bank.val();
                }
            }
            if self.abort.val() {
                self.feeding.d.next = false;
                self.in_flight.d.next = 0.into();
                for s in 0..self._stages {
                    self.valid[s].d.next = false;
                }
            }
        }
        // Dispatch conditions for the next cycle, from registers only.
        self.staying.next = self.in_flight.q.val();
        if self.retire.val() {
            self.staying.next = self.in_flight.q.val() - 1;
        }
        self.free.next = (!self.feeding.q.val() || self.last_feed.val())
            && (self.staying.val() < self.slots.val());
        self.idle.next = !self.staying.val().any();
        // Rows in the array next cycle: every stage but the last, and the row fed now, whose
        // bank is the active one, never the one a load fills.
        self.load_bank_busy.next = false;
        for s in 0..(self._stages - 1) {
            if self.valid[s].q.val() && (self.tags[s].q.val() == self.next_bank.val()) {
                self.load_bank_busy.next = true;
            }
        }
        self.feed.next = self.feeding.q.val();
        self.tag.next = self.bank.q.val();
        self.active.next = self.bank.q.val();
        self.load_bank.next = self.next_bank.val();
        // The next cycle's row: the current matmul's next while it goes on feeding, else the
        // candidate's first, whether or not it dispatches (a matmul starts only when `free`,
        // that is, when the current one feeds no further). So `start`, which the program checks
        // and the scoreboard decide late in the cycle, stays off the scratchpad's address pins;
        // a read that no matmul dispatched for is never fed, and in a frozen cycle none is made.
        self.spad_read_a.next = self.ins.a_row.val();
        if self.feeding.q.val() && !self.last_feed.val() {
            self.spad_read_a.next = self.a_ptr.q.val() + 1;
        }
        for s in (self._stages - 1)..self._stages {
            self.acc_read.next = self.row[s].d.val();
        }
        for _k in 0..self.late_feed.len() {
            self.late_feed.clock.next = self.clock.val();
            self.late_tag.clock.next = self.clock.val();
            self.late_feed.enable.next = self.enable.val();
            self.late_tag.enable.next = self.enable.val();
            self.late_feed.d_in.next = self.feeding.q.val();
            self.late_tag.d_in.next = self.bank.q.val();
            self.feed.next = self.late_feed.d_out.val();
            self.tag.next = self.late_tag.d_out.val();
            for s in self._second_last..(self._second_last + 1) {
                self.acc_read.next = self.row[s].d.val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::Array;
    use crate::controller::WeightLoader;
    use crate::testing::{settle, tick, verilog_of};
    use crate::vector::AccLane;
    use systole_core::machine::cycle::CycleMachine;
    use systole_core::machine::functional::FunctionalMachine;
    use systole_core::scoreboard::next_bank;
    use systole_core::{timing, Arith, Dtype, Instruction, Int8, Machine, Region, Schedule, BF16};

    /// The stream unit, the weight loader and the tagged array, wired as `top.rs` will wire them,
    /// with the scratchpad and the accumulators modelled as the RTL's memories behave (registered
    /// reads, write-first) and the real accumulator lanes.
    struct Bench {
        unit: StreamUnit,
        wl: WeightLoader,
        array: Array,
        lanes: Vec<AccLane>,
        spad: Vec<Vec<u16>>,
        acc: Vec<Vec<u32>>,
        /// Read registers: scratchpad ports A and B, accumulator port X.
        spad_a: Vec<u16>,
        spad_b: Vec<u16>,
        acc_x: Vec<u32>,
    }

    /// The unit's dispatch conditions, decided the cycle before: may a `Matmul`, a
    /// `LoadWeights`, a `Halt` dispatch in cycle `x` (index `x`) as far as the array goes.
    #[derive(Default)]
    struct Conditions {
        matmul: Vec<bool>,
        load_weights: Vec<bool>,
        halt: Vec<bool>,
    }

    impl Bench {
        fn new(config: &ArrayConfig, spad: Vec<Vec<u16>>, acc: Vec<Vec<u32>>) -> Bench {
            let mut b = Bench {
                unit: StreamUnit::new(config),
                wl: WeightLoader::new(config),
                array: Array::new(config),
                lanes: (0..config.cols)
                    .map(|_| AccLane::new(config.dtype, crate::vector::LaneBuild::default()))
                    .collect(),
                spad_a: vec![0; config.spad_width()],
                spad_b: vec![0; config.spad_width()],
                acc_x: vec![0; config.cols as usize],
                spad,
                acc,
            };
            b.unit.connect_all();
            b.wl.connect_all();
            b.array.connect_all();
            b.lanes.iter_mut().for_each(|l| l.connect_all());
            b
        }

        /// One clock cycle, enabled or frozen, in which `next` (dispatching in the next cycle)
        /// starts its unit; the accumulator row written in it, if any.
        fn cycle(&mut self, next: Option<&Instruction>, enabled: bool) -> Option<usize> {
            let (u, wl, array) = (&mut self.unit, &mut self.wl, &mut self.array);
            u.enable.next = enabled;
            wl.enable.next = enabled;
            array.enable.next = enabled;
            u.start.next = false;
            wl.start.next = false;
            match next {
                Some(&Instruction::Matmul { a_row, acc_row, rows, swap, accumulate }) => {
                    u.start.next = true;
                    u.ins.a_row.next = (a_row as u64).into();
                    u.ins.acc_row.next = (acc_row as u64).into();
                    u.ins.rows.next = (rows as u64).into();
                    u.ins.swap.next = swap;
                    u.ins.accumulate.next = accumulate;
                }
                Some(&Instruction::LoadWeights { spad_row, rows, cols }) => {
                    wl.start.next = true;
                    wl.ins.spad_row.next = (spad_row as u64).into();
                    wl.ins.rows.next = (rows as u64).into();
                    wl.ins.cols.next = (cols as u64).into();
                }
                _ => {}
            }
            settle(u);
            settle(wl);
            array.shift.next = wl.shift.val();
            array.tag.next = u.tag.val();
            array.load_bank.next = u.load_bank.val();
            for (i, left) in array.left.iter_mut().enumerate() {
                left.next = (if u.feed.val() { self.spad_a[i] as u64 } else { 0 }).into();
            }
            for (j, top) in array.top.iter_mut().enumerate() {
                let lane = wl.row_valid.val() && wl.columns.val().index() > j;
                top.next = (if lane { self.spad_b[j] as u64 } else { 0 }).into();
            }
            settle(array);
            let mut written = None;
            if enabled {
                if u.acc_write.val() {
                    let row = u.acc_write_row.val().index();
                    for (j, lane) in self.lanes.iter_mut().enumerate() {
                        lane.op.next = u.acc_op.val();
                        lane.x.next = (self.acc_x[j] as u64).into();
                        lane.array.next = array.out[j].val();
                        settle(lane);
                        self.acc[row][j] = lane.result.val().to_u32();
                    }
                    written = Some(row);
                }
                // Registered reads, issued after this cycle's write (write-first).
                let row_of = |rows: &[Vec<u16>], r: usize| rows.get(r).cloned();
                self.spad_a = row_of(&self.spad, u.spad_read_a.val().index()).unwrap_or_default();
                self.spad_a.resize(self.spad_b.len(), 0);
                self.spad_b = row_of(&self.spad, wl.spad_read.val().index()).unwrap_or_default();
                self.spad_b.resize(self.spad_a.len(), 0);
                self.acc_x = self.acc.get(u.acc_read.val().index()).cloned().unwrap_or_default();
                self.acc_x.resize(self.lanes.len(), 0);
            }
            tick(u, |u| &mut u.clock);
            tick(wl, |w| &mut w.clock);
            tick(array, |a| &mut a.clock);
            written
        }
    }

    /// Runs `program` with each instruction started the cycle before core's dispatch cycle for
    /// it, freezing the machine for one cycle before each cycle `x` with `frozen(x)`; the
    /// accumulators, the rows written with their (enabled) cycles, and the unit's conditions.
    fn run_rtl(
        config: &ArrayConfig,
        program: &[Instruction],
        dispatch: &[u64],
        spad: &[Vec<u16>],
        acc: &[Vec<u32>],
        frozen: impl Fn(u64) -> bool,
    ) -> (Vec<Vec<u32>>, Vec<(usize, u64)>, Conditions) {
        let mut bench = Bench::new(config, spad.to_vec(), acc.to_vec());
        let (mut writes, mut seen) = (vec![], Conditions::default());
        let halt = *dispatch.last().expect("a program ends with Halt");
        // Cycle `x - 1` decides the dispatch in cycle `x`.
        for x in 0..=halt + 1 {
            let next = dispatch.iter().position(|&d| d == x).map(|i| &program[i]);
            if frozen(x) {
                assert_eq!(bench.cycle(next, false), None, "a frozen cycle writes nothing");
            }
            settle(&mut bench.unit);
            seen.matmul.push(bench.unit.free.val());
            seen.load_weights.push(!bench.unit.load_bank_busy.val());
            seen.halt.push(bench.unit.idle.val());
            if let Some(row) = bench.cycle(next, true) {
                writes.push((row, x - 1));
            }
        }
        (bench.acc, writes, seen)
    }

    fn core_acc<A: Arith>(
        config: &ArrayConfig,
        program: &[Instruction],
        spad: &[u8],
        acc: &[u8],
    ) -> Vec<u8> {
        let mut functional = FunctionalMachine::<A>::new(*config, 64);
        let mut cycle = CycleMachine::<A>::new(*config, 64);
        let mut out = [vec![0; acc.len()], vec![0; acc.len()]];
        let machines: [&mut dyn Machine; 2] = [&mut functional, &mut cycle];
        for (m, out) in machines.into_iter().zip(&mut out) {
            m.write(Region::Spad, 0, spad).unwrap();
            m.write(Region::Acc, 0, acc).unwrap();
            m.run(program).unwrap();
            m.read(Region::Acc, 0, out).unwrap();
        }
        assert!(out[0] == out[1], "core's cycle machine agrees with its functional one");
        out[0].clone()
    }

    fn lcg(seed: &mut u64) -> u64 {
        crate::testing::lcg_step(seed) >> 24
    }

    /// Weight tiles at scratchpad rows 0, R and 2R; activations from row 3 max(R, C). Three
    /// swaps make all three banks live at once (when C > 2: with C <= 2 the last of them leaves
    /// before a third load can finish), two matmuls add onto the row the one before them
    /// writes in the cycle before, a load waits for its bank's matmul to leave, and five
    /// one-row matmuls meet the `ARRAY_SLOTS` limit, each adding onto the row written the cycle
    /// before.
    fn program(r: u16, c: u16) -> Vec<Instruction> {
        let a = 3 * r.max(c);
        let lw =
            |tile: u16, rows, cols| Instruction::LoadWeights { spad_row: tile * r, rows, cols };
        let mm = |a_off: u16, acc_row, rows, swap, accumulate| Instruction::Matmul {
            a_row: a + a_off,
            acc_row,
            rows,
            swap,
            accumulate,
        };
        let long = r + c + 3;
        let mut p = vec![
            lw(0, r, c),
            mm(0, 0, long, true, false),
            lw(1, r - (r > 1) as u16, c),
            mm(2, long - 1, 3, true, true),
            lw(2, r, c - (c > 1) as u16),
            mm(5, long + 2, 2, true, false),
            mm(1, long + 3, 2, false, true),
            lw(0, r, c),
        ];
        p.extend((0..5).map(|k| mm(7 + k, 20, 1, false, k > 0)));
        p.extend([mm(3, 22, 2, true, false), Instruction::Halt]);
        p
    }

    fn check(config: ArrayConfig, frozen: impl Fn(u64) -> bool) {
        let config = ArrayConfig { spad_depth: 64, acc_depth: 32, ..config }
            .with_schedule(Schedule::Decoupled);
        let (r, c, w) = (config.rows as usize, config.cols as usize, config.spad_width());
        let program = program(config.rows, config.cols);
        let mut dispatch = vec![];
        let cycles = timing::schedule(&config, &program, |_, at| dispatch.push(at)).unwrap();
        assert_eq!(cycles, dispatch.last().unwrap() + 1);
        let mut seed = (r * 10 + c) as u64;
        let bf16 = config.dtype == Dtype::Bf16;
        let elem = |s: &mut u64| match bf16 {
            false => (lcg(s) & 0xFF) as u16,
            // [1/4, 4) of either sign: sums that round, and cancel now and then.
            true => (0x3E80 + lcg(s) % 0x200) as u16 | (lcg(s) & 0x8000) as u16,
        };
        let word = |s: &mut u64| match bf16 {
            false => lcg(s) as u32,
            true => ((120 + lcg(s) % 16) << 23 | lcg(s) & 0x807F_FFFF) as u32,
        };
        let spad: Vec<Vec<u16>> =
            (0..64).map(|_| (0..w).map(|_| elem(&mut seed)).collect()).collect();
        let acc: Vec<Vec<u32>> =
            (0..32).map(|_| (0..c).map(|_| word(&mut seed)).collect()).collect();

        let (got, writes, seen) = run_rtl(&config, &program, &dispatch, &spad, &acc, frozen);

        let es = config.dtype.elem_bytes();
        let spad_bytes: Vec<u8> =
            spad.iter().flatten().flat_map(|e| e.to_le_bytes()[..es].to_vec()).collect();
        let acc_bytes: Vec<u8> = acc.iter().flatten().flat_map(|w| w.to_le_bytes()).collect();
        let want = match config.dtype {
            Dtype::Int8 => core_acc::<Int8>(&config, &program, &spad_bytes, &acc_bytes),
            Dtype::Bf16 => core_acc::<BF16>(&config, &program, &spad_bytes, &acc_bytes),
        };
        let got: Vec<u8> = got.iter().flatten().flat_map(|w| w.to_le_bytes()).collect();
        for (k, (g, w)) in got.chunks(4).zip(want.chunks(4)).enumerate() {
            assert_eq!(
                g,
                w,
                "{r}x{c} {:?}: accumulator row {} word {}",
                config.dtype,
                k / c,
                k % c
            );
        }

        // Every row written in core's cycle: row m of a matmul dispatched at d in d + m + L.
        let mut rows_at = vec![];
        let (mut in_flight, mut bank) = (vec![], 0);
        for (ins, &d) in program.iter().zip(&dispatch) {
            if let Instruction::Matmul { acc_row, rows, swap, .. } = *ins {
                let skew = timing::ws_latency(&config);
                rows_at.extend(
                    (0..rows as u64).map(|m| (acc_row as usize + m as usize, d + m + skew)),
                );
                bank = if swap { next_bank(bank) } else { bank };
                in_flight.push((d, d + rows as u64 + skew, bank));
            }
        }
        rows_at.sort_by_key(|&(_, t)| t);
        assert_eq!(writes, rows_at, "{r}x{c}: rows written, and when");

        // The unit's conditions let each instruction go exactly when core's scheduler does
        // (nothing else here holds one back: loads and matmuls touch no common port or row).
        let (mut prev, mut loaded) = (None, 0u64);
        for (ins, &d) in program.iter().zip(&dispatch) {
            let after = prev.map_or(0, |p: u64| p + 1);
            let (from, ok) = match *ins {
                Instruction::Matmul { swap: true, .. } => (after.max(loaded), &seen.matmul),
                Instruction::Matmul { .. } => (after, &seen.matmul),
                Instruction::LoadWeights { .. } => (after.max(loaded), &seen.load_weights),
                _ => (after.max(loaded), &seen.halt),
            };
            assert_eq!((from..=d).find(|&x| ok[x as usize]), Some(d), "{r}x{c}: {ins:?}");
            if let Instruction::LoadWeights { .. } = ins {
                loaded = d + r as u64;
            }
            prev = Some(d);
        }

        // The program does what it is for.
        let live = |t: u64| in_flight.iter().filter(move |&&(d, e, _)| d <= t && t < e);
        let most = (0..cycles).map(|t| live(t).count()).max().unwrap();
        assert_eq!(most, ARRAY_SLOTS, "{r}x{c}: the slots fill up");
        let banks = (0..cycles)
            .map(|t| live(t).fold(0u8, |seen, &(_, _, b)| seen | 1 << b).count_ones())
            .max()
            .unwrap();
        assert_eq!(banks as usize, if c > 2 { WEIGHT_BANKS } else { 2 }, "{r}x{c}: banks live");
        let added_on_the_fly = writes.windows(2).filter(|p| p[0].0 == p[1].0).count();
        assert!(added_on_the_fly >= 5, "{r}x{c}: adds onto the row written the cycle before");
    }

    /// Back-to-back matmuls with swaps, three weight banks live at once, adds onto rows still
    /// being written, the slot limit and freezes: core's accumulator bits, written in core's
    /// cycles, each instruction dispatched when core dispatches it.
    #[test]
    fn streamed_matmuls_match_core() {
        check(ArrayConfig::new(2, 3, Dtype::Int8), |_| false);
        check(ArrayConfig::new(3, 2, Dtype::Bf16), |x| x % 5 == 2);
        check(ArrayConfig::new(4, 4, Dtype::Int8), |x| x % 7 == 0);
        check(ArrayConfig::new(4, 4, Dtype::Bf16), |_| false);
        // Two-stage PEs: every row a cycle later.
        check(ArrayConfig::new(2, 3, Dtype::Int8).with_pe_stages(2), |x| x % 6 == 3);
        check(ArrayConfig::new(3, 3, Dtype::Bf16).with_pe_stages(2), |_| false);
    }

    #[test]
    fn verilog_is_valid() {
        for (r, c) in [(3, 4), (1, 1)] {
            let config = ArrayConfig::new(r, c, Dtype::Bf16).with_schedule(Schedule::Decoupled);
            yosys_validate("stream_unit", &verilog_of(StreamUnit::new(&config))).unwrap();
        }
    }
}
