//! The array unit: the unit that runs a matmul through the systolic array, feeding its edges
//! and writing its output rows to the accumulators (`Matmul` or `MatmulOs`).

use rust_hdl::prelude::*;

use crate::decoded::Decoded;
use systole_core::{timing, ArrayConfig};

use crate::decode::{constant, holding};
use crate::delay::Delay;
use crate::optional::Optional;
use crate::vector::AccOp;

/// The array unit: a weight-stationary `Matmul` (`rows + R + C - 1` cycles) or an
/// output-stationary `MatmulOs` (`k + R + C - 2 + rows`), feeding the array and writing its
/// output rows to the accumulators; one cycle more each on PEs that register their products
/// (core's `timing::duration`).
///
/// Built with read stages (`ArrayConfig::read_stages`), the rows it reads enter the array as
/// many cycles later, and its output rows leave as many cycles later (`timing::ws_latency` and
/// `timing::os_latency` count them): the feed, swap and restart controls pass as many
/// registers, and the accumulator row an accumulating write reads is addressed a cycle
/// earlier again.
#[derive(LogicBlock)]
pub struct ArrayUnit {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    /// The instruction, as decoded.
    pub ins: Decoded,
    pub free: Signal<Out, Bit>,
    /// Input rows enter this cycle (else the array's edges take zeros).
    pub feed: Signal<Out, Bit>,
    /// Weight-stationary: the shadow becomes active this cycle.
    pub swap_now: Signal<Out, Bit>,
    /// Output-stationary: the first pair enters (each PE restarts its sum), the sums drain.
    pub first: Signal<Out, Bit>,
    pub drain: Signal<Out, Bit>,
    pub acc_write: Signal<Out, Bit>,
    pub acc_write_row: Signal<Out, Bits<16>>,
    pub acc_op: Signal<Out, AccOp>,
    pub spad_read_a: Signal<Out, Bits<16>>,
    pub spad_read_b: Signal<Out, Bits<16>>,
    pub acc_read: Signal<Out, Bits<16>>,
    /// On a single-port scratchpad (`ArrayConfig::single_port_spad`) only: the unit holds the
    /// scratchpad's port, from the cycle after its dispatch through the cycle after its last
    /// read (its feed register: `timing::matmul_port_cycles`).
    pub reading: Optional<Signal<Out, Bit>>,
    busy: DFF<Bit>,
    tau: DFF<Bits<18>>,
    /// Cycle of the first output row, and the op's last cycle.
    out_from: DFF<Bits<18>>,
    last_tau: DFF<Bits<18>>,
    feed_rows: DFF<Bits<18>>,
    a_ptr: DFF<Bits<16>>,
    b_ptr: DFF<Bits<16>>,
    acc_ptr: DFF<Bits<16>>,
    swapping: DFF<Bit>,
    accumulating: DFF<Bit>,
    // The array's controls, registered: each is loaded with its function of the unit's next
    // state, so it holds in a cycle what it would compute from the state of that cycle, from a
    // flip-flop rather than through the comparisons (they fan out to every PE).
    feed_q: DFF<Bit>,
    swap_q: DFF<Bit>,
    first_q: DFF<Bit>,
    writing_q: DFF<Bit>,
    weight_stationary: Constant<Bit>,
    /// `timing::ws_latency` (weight-stationary, `R + C - 1` on one-stage PEs) or
    /// `timing::os_latency` (output-stationary, `R + C - 2`), less `timing::lane_latency`:
    /// the cycle a result row leaves the array.
    skew: Constant<Bits<18>>,
    /// The bits the cycle counts can have: an op's last cycle is below `skew` plus its rows and
    /// its `k`, each within a memory (docs/DECISIONS.md 94).
    tau_bits: Constant<Bits<18>>,
    /// Lanes with a staged add (`timing::lane_latency` 1 or 2) write each row that many cycles
    /// after it leaves the array: the writes pass these delays, and the unit is free when its
    /// last row is written, `lane_latency` cycles after its last cycle (else they are wires):
    /// `tail` counts the cycles between (`tail_cycles`, `lane_latency - 1`).
    staged: Constant<Bit>,
    tail_cycles: Constant<Bits<2>>,
    tail: DFF<Bits<2>>,
    late_write: Delay<Bit>,
    late_row: Delay<Bits<16>>,
    late_op: Delay<AccOp>,
    op_now: Signal<Local, AccOp>,
    last: Signal<Local, Bit>,
    writing: Signal<Local, Bit>,
    /// Built with read stages: the array's input controls on their way to meet the rows.
    late_feed: Optional<Delay<Bit>>,
    late_swap: Optional<Delay<Bit>>,
    late_first: Optional<Delay<Bit>>,
}

impl ArrayUnit {
    pub fn new(config: &ArrayConfig) -> ArrayUnit {
        let ws = config.dataflow == systole_core::Dataflow::WeightStationary;
        let latency = if ws { timing::ws_latency(config) } else { timing::os_latency(config) };
        let late = timing::lane_latency(config);
        let staged = config.read_stages > 0;
        ArrayUnit {
            ins: Default::default(),
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            free: Default::default(),
            feed: Default::default(),
            swap_now: Default::default(),
            first: Default::default(),
            drain: Default::default(),
            acc_write: Default::default(),
            acc_write_row: Default::default(),
            acc_op: Default::default(),
            spad_read_a: Default::default(),
            spad_read_b: Default::default(),
            acc_read: Default::default(),
            reading: Optional::default_when(config.single_port_spad),
            busy: Default::default(),
            tau: Default::default(),
            out_from: Default::default(),
            last_tau: Default::default(),
            feed_rows: Default::default(),
            a_ptr: Default::default(),
            b_ptr: Default::default(),
            acc_ptr: Default::default(),
            swapping: Default::default(),
            accumulating: Default::default(),
            feed_q: Default::default(),
            swap_q: Default::default(),
            first_q: Default::default(),
            writing_q: Default::default(),
            weight_stationary: Constant::new(ws),
            skew: constant(latency - late),
            tau_bits: constant(holding(
                latency + config.spad_depth as u64 + config.spad_depth.max(config.acc_depth) as u64,
            )),
            staged: Constant::new(late > 0),
            tail_cycles: constant(late.saturating_sub(1)),
            tail: Default::default(),
            late_write: Delay::new(late as usize),
            late_row: Delay::new(late as usize),
            late_op: Delay::new(late as usize),
            op_now: Default::default(),
            last: Default::default(),
            writing: Default::default(),
            late_feed: Optional::when(staged, || Delay::new(config.read_stages as usize)),
            late_swap: Optional::when(staged, || Delay::new(config.read_stages as usize)),
            late_first: Optional::when(staged, || Delay::new(config.read_stages as usize)),
        }
    }
}

impl Logic for ArrayUnit {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            busy,
            tau,
            out_from,
            last_tau,
            feed_rows,
            a_ptr,
            b_ptr,
            acc_ptr,
            swapping,
            accumulating,
            feed_q,
            swap_q,
            first_q,
            writing_q,
            tail
        );
        self.last.next = self.tau.q.val() == self.last_tau.q.val();
        self.writing.next = self.writing_q.q.val();
        self.free.next = (!self.busy.q.val() && !self.tail.q.val().any())
            || (self.last.val() && !self.staged.val());
        self.late_write.clock.next = self.clock.val();
        self.late_row.clock.next = self.clock.val();
        self.late_op.clock.next = self.clock.val();
        self.late_write.enable.next = self.enable.val();
        self.late_row.enable.next = self.enable.val();
        self.late_op.enable.next = self.enable.val();
        if self.enable.val() {
            if self.busy.q.val() {
                self.tau.d.next = (self.tau.q.val() + 1) & self.tau_bits.val();
                self.a_ptr.d.next = self.a_ptr.q.val() + 1;
                self.b_ptr.d.next = self.b_ptr.q.val() + 1;
                if self.writing.val() {
                    self.acc_ptr.d.next = self.acc_ptr.q.val() + 1;
                }
                if self.last.val() {
                    self.busy.d.next = false;
                    self.tail.d.next = self.tail_cycles.val();
                }
            } else if self.tail.q.val().any() {
                self.tail.d.next = self.tail.q.val() - 1;
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.tau.d.next = 0.into();
                self.a_ptr.d.next = self.ins.a_row.val();
                self.b_ptr.d.next = self.ins.b_row.val();
                self.acc_ptr.d.next = self.ins.acc_row.val();
                self.swapping.d.next = self.ins.swap.val() && self.weight_stationary.val();
                self.accumulating.d.next = self.ins.accumulate.val();
                if self.weight_stationary.val() {
                    // rows + R + C - 1 cycles; row m is written in cycle m + R + C - 1 (one
                    // more on two-stage PEs, as in the OS drain below).
                    self.out_from.d.next = self.skew.val();
                    self.last_tau.d.next =
                        (self.skew.val() + bit_cast::<18, 16>(self.ins.rows.val()) - 1)
                            & self.tau_bits.val();
                    self.feed_rows.d.next =
                        bit_cast::<18, 16>(self.ins.rows.val()) & self.tau_bits.val();
                } else {
                    // k + R + C - 2 cycles of compute, then one per drained row.
                    self.out_from.d.next = (self.skew.val() + bit_cast::<18, 16>(self.ins.k.val()))
                        & self.tau_bits.val();
                    self.last_tau.d.next = (self.skew.val()
                        + bit_cast::<18, 16>(self.ins.k.val())
                        + bit_cast::<18, 16>(self.ins.rows.val())
                        - 1)
                        & self.tau_bits.val();
                    self.feed_rows.d.next =
                        bit_cast::<18, 16>(self.ins.k.val()) & self.tau_bits.val();
                }
            }
            if self.abort.val() {
                self.busy.d.next = false;
                self.tail.d.next = 0.into();
            }
        }
        self.writing_q.d.next = self.busy.d.val() && (self.tau.d.val() >= self.out_from.d.val());
        // A weight-stationary op's first row leaves at `skew` (its `out_from`, a constant there).
        if self.weight_stationary.val() {
            self.writing_q.d.next = self.busy.d.val() && (self.tau.d.val() >= self.skew.val());
        }
        self.feed_q.d.next = self.busy.d.val() && (self.tau.d.val() < self.feed_rows.d.val());
        self.swap_q.d.next = self.busy.d.val() && self.swapping.d.val() && !self.tau.d.val().any();
        self.first_q.d.next = self.busy.d.val() && !self.tau.d.val().any();
        self.feed.next = self.feed_q.q.val();
        for _s in 0..self.reading.len() {
            self.reading.next = self.feed_q.q.val();
        }
        self.swap_now.next = self.swap_q.q.val();
        self.first.next = self.first_q.q.val();
        self.drain.next = self.writing.val();
        for _s in 0..self.late_feed.len() {
            self.late_feed.clock.next = self.clock.val();
            self.late_swap.clock.next = self.clock.val();
            self.late_first.clock.next = self.clock.val();
            self.late_feed.enable.next = self.enable.val();
            self.late_swap.enable.next = self.enable.val();
            self.late_first.enable.next = self.enable.val();
            self.late_feed.d_in.next = self.feed_q.q.val();
            self.late_swap.d_in.next = self.swap_q.q.val();
            self.late_first.d_in.next = self.first_q.q.val();
            self.feed.next = self.late_feed.d_out.val();
            self.swap_now.next = self.late_swap.d_out.val();
            self.first.next = self.late_first.d_out.val();
        }
        self.op_now.next = AccOp::Overwrite;
        if self.accumulating.q.val() {
            self.op_now.next = AccOp::Accumulate;
        }
        self.late_write.d_in.next = self.writing.val();
        self.late_row.d_in.next = self.acc_ptr.q.val();
        self.late_op.d_in.next = self.op_now.val();
        self.acc_write.next = self.late_write.d_out.val();
        self.acc_write_row.next = self.late_row.d_out.val();
        self.acc_op.next = self.late_op.d_out.val();
        // The reads for the next cycle: a continuing matmul's, else (free) the candidate's
        // first, whether or not it dispatches, so the program checks that decide `start` stay
        // off the address pins (a read for a matmul that does not dispatch is never used).
        self.spad_read_a.next = self.a_ptr.q.val() + 1;
        self.spad_read_b.next = self.b_ptr.q.val() + 1;
        self.acc_read.next = self.acc_ptr.q.val();
        if self.writing.val() {
            self.acc_read.next = self.acc_ptr.q.val() + 1;
        }
        // Built with read stages, the read is for the row that leaves two cycles on: one
        // further for each of this cycle's and the next's writes.
        for _s in 0..self.late_feed.len() {
            self.acc_read.next = self.acc_ptr.q.val()
                + bit_cast::<16, 1>(self.writing.val().into())
                + bit_cast::<16, 1>(self.writing_q.d.val().into());
        }
        if self.free.val() {
            self.spad_read_a.next = self.ins.a_row.val();
            self.spad_read_b.next = self.ins.b_row.val();
            self.acc_read.next = self.ins.acc_row.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, tick, verilog_of};
    use systole_core::{timing, Dataflow, Dtype, Instruction};

    /// Runs one op from dispatch through its last cycle: per cycle, whether input rows enter,
    /// whether the shadow swaps in, whether the sums restart, and the accumulator row written.
    fn run(config: &ArrayConfig, rows: u64, k: u64) -> Vec<(bool, bool, bool, Option<usize>)> {
        let mut u = ArrayUnit::new(config);
        u.connect_all();
        u.enable.next = true;
        u.start.next = true;
        u.ins.a_row.next = 3u64.into();
        u.ins.acc_row.next = 20u64.into();
        u.ins.rows.next = rows.into();
        u.ins.k.next = k.into();
        u.ins.swap.next = true;
        settle(&mut u);
        assert_eq!(u.spad_read_a.val().index(), 3, "addressed before dispatch");
        tick(&mut u, |u| &mut u.clock);
        u.start.next = false;
        let mut seen = vec![];
        loop {
            settle(&mut u);
            seen.push((
                u.feed.val(),
                u.swap_now.val(),
                u.first.val(),
                u.acc_write.val().then(|| u.acc_write_row.val().index()),
            ));
            let free = u.free.val();
            tick(&mut u, |u| &mut u.clock);
            if free {
                settle(&mut u);
                assert!(!u.feed.val() && !u.acc_write.val(), "idle after its last cycle");
                return seen;
            }
        }
    }

    /// A `Matmul` and a `MatmulOs` take core's cycles, feed their input rows first and write
    /// their output rows, one per cycle, in the last ones.
    #[test]
    fn array_unit_takes_cores_cycles_in_both_dataflows() {
        for stages in [1, 2] {
            takes_cores_cycles(ArrayConfig::new(2, 3, Dtype::Int8).with_pe_stages(stages));
            // Lanes with a staged add write every row a cycle later.
            let bf16 = ArrayConfig::new(2, 3, Dtype::Bf16).with_pe_stages(stages);
            takes_cores_cycles(bf16.with_add_stages(2));
        }
        // PEs that stage their f32 add: weight-stationary only; lanes whose add has three
        // stages write every row two cycles later.
        for pe_stages in [3, 4] {
            let staged = ArrayConfig::new(2, 3, Dtype::Bf16).with_pe_stages(pe_stages);
            for add_stages in systole_core::ADD_STAGES {
                takes_cores_cycles(staged.with_add_stages(add_stages));
            }
        }
        takes_cores_cycles(ArrayConfig::new(2, 3, Dtype::Bf16).with_add_stages(3));
    }

    fn takes_cores_cycles(ws: ArrayConfig) {
        let matmul =
            Instruction::Matmul { a_row: 3, acc_row: 20, rows: 3, swap: true, accumulate: false };
        let seen = run(&ws, 3, 0);
        assert_eq!(seen.len() as u64, timing::duration(&ws, &matmul));
        let n = seen.len();
        assert!(seen.iter().enumerate().all(|(t, s)| s.0 == (t < 3) && s.1 == (t == 0)));
        assert!(seen[..n - 3].iter().all(|s| s.3.is_none()));
        let written: Vec<_> = seen[n - 3..].iter().map(|s| s.3).collect();
        assert_eq!(written, [Some(20), Some(21), Some(22)]);

        let os = ws.with_dataflow(Dataflow::OutputStationary);
        if os.validate().is_err() {
            assert!(ws.pe_add_staged(), "{ws:?}");
            return;
        }
        let matmul_os = Instruction::MatmulOs {
            a_row: 3,
            b_row: 0,
            k: 4,
            acc_row: 20,
            rows: 2,
            cols: 3,
            accumulate: false,
        };
        let seen = run(&os, 2, 4);
        assert_eq!(seen.len() as u64, timing::duration(&os, &matmul_os));
        let n = seen.len();
        assert!(seen.iter().enumerate().all(|(t, s)| s.0 == (t < 4) && s.2 == (t == 0)));
        assert!(seen.iter().all(|s| !s.1), "no swap in output-stationary");
        assert!(seen[..n - 2].iter().all(|s| s.3.is_none()));
        let written: Vec<_> = seen[n - 2..].iter().map(|s| s.3).collect();
        assert_eq!(written, [Some(20), Some(21)]);
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(3, 4, Dtype::Bf16);
        yosys_validate("array_unit", &verilog_of(ArrayUnit::new(&config))).unwrap();
    }
}
