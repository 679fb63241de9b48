//! The cycle machine: steps the controller, its units and every PE once per clock. Each
//! [`Schedule`] has its own dispatch rules (`blocking.rs`, `decoupled.rs`); the array, the
//! weight loader and the row-per-cycle units below are the same under both.
//!
//! # Timing rules of the blocking schedule (the contract the RTL meets cycle for cycle)
//!
//! The controller looks at one instruction per cycle, in program order, and dispatches it when
//! its units are free at the start of that cycle; the unit does its first cycle of work in the
//! dispatch cycle. Three units:
//!
//! * the **sequencer** runs `Load`, `Store`, `Vector`, `CastBf16`, `Requantize`, `LoadAcc`,
//!   `StoreSpad`, `StoreBf16` one row per cycle (`rows` cycles; a strided `Load` gather takes
//!   `len` cycles per row, see `timing::load_row_cycles`; a `Requantize` `requant_cycles` per
//!   row; a conversion `convert_stages` more, see `timing::row_lands`) and `Sync` (1 cycle).
//!   It dispatches only when all three units are idle, and nothing dispatches while it is busy.
//! * the **weight loader** runs `LoadWeights`: R cycles shifting tile rows down the shadow
//!   registers, bottom row first. It dispatches when the sequencer and the loader are idle, so
//!   it overlaps a running matmul: this is what the shadow registers are for. On a machine
//!   whose scratchpad has a single port ([`ArrayConfig::single_port_spad`]) it also waits for
//!   the running matmul's reads (`rows + 1` cycles from its dispatch,
//!   `timing::matmul_port_cycles`), and a `Matmul` for the weight loader.
//! * the **array** runs `Matmul` (WS): `rows + R + C - 1` cycles, and `MatmulOs` (OS):
//!   `k + R + C - 2` cycles of compute plus one cycle per drained row; on PEs that register their
//!   products (`pe_stages` 2) one cycle more each, on PEs that stage their f32 add too
//!   (`pe_stages` 3 or 4, WS) `(pe_stages - 2) R + 1` more, and on lanes whose f32 add is
//!   staged (`add_stages` 2 or 3) `add_stages - 1` more again (`timing::ws_latency`,
//!   `timing::os_latency`).
//!   It dispatches when the
//!   sequencer and the array are idle; with `swap` it also waits for the shadow to be full, and
//!   swaps it in at dispatch.
//!
//! `Halt` dispatches when every unit is idle; its cycle is the last one counted.
//!
//! On memories with output registers ([`ArrayConfig::read_stages`] 1) every unit's work starts
//! that many cycles after its dispatch: each row lands later (`timing::row_lands`), the weight
//! loader shifts its first row later, and a matmul's rows enter the array later
//! (`timing::ws_latency`, `timing::os_latency`); each instruction takes as many cycles more.
//! A row still has the bits it had: nothing writes what a unit reads while it is in flight.
//!
//! The decoupled schedule's rules are in `timing::decoupled`'s docs.
//!
//! # The array
//!
//! Weight-stationary: input row `m` enters PE row `i` at cycle `m + i` (skew), partial sums flow
//! down, column `j` of row `m` leaves the bottom at cycle `m + R - 1 + j`, and the de-skewed row is
//! written to the accumulator at cycle `m + R + C - 1`. Rows of consecutive matmuls may follow
//! each other with no gap: each row carries its matmul's weight bank (`scoreboard::WEIGHT_BANKS`
//! of them, taking turns as active and shadow) down its diagonal, so every PE uses the weights of
//! the row it holds.
//!
//! Output-stationary: `A^T` row `k` enters PE row `i` at cycle `k + i`, `B` row `k` enters PE
//! column `j` at cycle `k + j`; PE `(i, j)` multiplies the pair for `k` at cycle `k + i + j`.
//! From cycle `k + R + C - 2`, PE row `i` is written to the accumulator at one row per cycle.
//!
//! PEs that register their products (`pe_stages = P > 1`) hold, in every cycle, the sum an
//! unregistered PE held `P - 1` cycles before: the product of a cycle's operands is the same
//! exact value, added one cycle later to a sum that is itself one cycle late. So the array is
//! stepped as unregistered PEs and only its results are late: a WS row is written
//! `timing::ws_latency` cycles after it entered (the de-skew buffer holds `C + P - 1` rows), and
//! an OS drain starts `P - 1` cycles after the compute, the PEs holding still meanwhile. A
//! WS PE that stages its f32 add as well (`pe_stages = 3`, or 4 with its normalised sum
//! registered too) takes `S = pe_stages - 1` cycles per partial sum, and its input rows are
//! skewed `S` cycles a PE row (row `m` enters PE row `i` at `m + S i`): every PE still adds the
//! same product to the same partial sum, in the same order down its column, only later, so the
//! results are the same and leave `(S - 1) R` cycles later again (`ws_latency`). A staged lane
//! add (`add_stages` 2 or 3) makes every result row `add_stages - 1` cycles later again, in the
//! same way: the row is what it was, and it is written later.

extern crate alloc;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use crate::config::{ArrayConfig, Schedule};
use crate::isa::Instruction;
use crate::machine::functional::WeightTile;
use crate::machine::{validate_program, Machine, MachineError, Memories, Region, Stats};
use crate::numerics::Arith;
use crate::scoreboard::{next_bank, Footprint, WEIGHT_BANKS};
use crate::timing::sdram::SdramBus;

mod blocking;
mod decoupled;

/// A row-by-row instruction (loads, stores, vector ops, casts; `Sync`) in flight.
struct RowOp {
    ins: Instruction,
    fp: Footprint,
    /// Cycles spent so far, and in all.
    tau: u64,
    len: u64,
    /// Rows done, and in all; the cycle the next one lands in (`timing::row_lands`).
    row: u64,
    rows: u64,
    lands: u64,
    /// Each row's cycle where the SDRAM times it (`timing::sdram`), else empty.
    timed: Vec<u64>,
}

impl RowOp {
    /// `ins` dispatched in cycle `t`; a DRAM transfer of an SDRAM machine is timed on `sdram`.
    fn new(config: &ArrayConfig, ins: Instruction, sdram: Option<&mut SdramBus>, t: u64) -> RowOp {
        let rows = crate::machine::functional::seq_rows(&ins) as u64;
        let fp = crate::scoreboard::footprint(config, &ins);
        let mut timed = Vec::new();
        let len = crate::timing::duration_at(config, &ins, t, sdram, |_, at| timed.push(at));
        let mut op = RowOp { ins, fp, tau: 0, len, row: 0, rows, lands: 0, timed };
        op.lands = op.row_lands(config);
        op
    }

    /// The cycle, from its dispatch, the next row lands in.
    fn row_lands(&self, config: &ArrayConfig) -> u64 {
        match self.timed.get(self.row as usize) {
            Some(&at) => at,
            None => crate::timing::row_lands(config, &self.ins, self.row),
        }
    }

    /// One cycle: the rows that land in it take effect. Whether it finished.
    fn step<A: Arith>(&mut self, mem: &mut Memories) -> bool {
        while self.row < self.rows && self.lands == self.tau {
            mem.row_step::<A>(&self.ins, self.row as usize);
            self.row += 1;
            self.lands = self.row_lands(&mem.config);
        }
        self.tau += 1;
        self.tau == self.len
    }
}

struct WeightLoad {
    spad_row: usize,
    k: u16,
    n: u16,
    /// The bank it fills: the shadow when it dispatched.
    bank: usize,
    fp: Footprint,
    tau: usize,
}

/// A matmul in the array.
struct ArrayOp {
    ins: Instruction,
    fp: Footprint,
    /// Dispatch cycle: (WS) row `m` enters the array's left edge at `at + m`.
    at: u64,
    /// Weight bank its rows use (WS).
    bank: u8,
    duration: u64,
}

impl ArrayOp {
    /// Whether a weight-stationary matmul still holds a single-port scratchpad's port in cycle
    /// `t` ([`timing::matmul_port_cycles`](crate::timing::matmul_port_cycles)).
    fn reads_port_at(&self, t: u64) -> bool {
        let Instruction::Matmul { rows, .. } = self.ins else { return false };
        t < self.at + crate::timing::matmul_port_cycles(rows)
    }

    /// The row of this matmul that enters the left edge at cycle `slot`, if any.
    fn row_at(&self, slot: u64) -> Option<usize> {
        let Instruction::Matmul { rows, .. } = self.ins else { return None };
        slot.checked_sub(self.at).filter(|&m| m < rows as u64).map(|m| m as usize)
    }
}

/// The cycle-accurate golden machine for datapath `A`.
pub struct CycleMachine<A: Arith> {
    pub mem: Memories,
    /// The weight banks; `active` is the one the newest matmul uses, the next one the shadow.
    banks: [WeightTile<A>; WEIGHT_BANKS],
    active: usize,
    shadow_full: bool,
    /// Matmuls in the array, oldest first.
    array_ops: VecDeque<ArrayOp>,
    /// Activation (WS) or A (OS) registers passing right, one per PE.
    a_reg: Vec<A::Operand>,
    /// The weight bank of the row each WS activation register holds; kept only while matmuls of
    /// different banks share the array (`tags_live`), since otherwise every row has the one bank.
    bank_reg: Vec<u8>,
    tags_live: bool,
    /// B registers passing down (OS), one per PE.
    b_reg: Vec<A::Operand>,
    /// Partial sums passing down (WS) or held (OS), one per PE.
    p_reg: Vec<A::Acc>,
    /// WS de-skew buffer: [`deskew_rows`] rows in flight, C columns each.
    deskew: Vec<A::Acc>,
    left: Vec<A::Operand>,
    left_bank: Vec<u8>,
    /// One PE row's weights when its PEs hold rows of different banks.
    mixed: Vec<A::Operand>,
    top: Vec<A::Operand>,
    /// PE-cycles stepped since the machine was made (a benchmark figure).
    pub pe_updates: u64,
}

impl<A: Arith> CycleMachine<A> {
    /// A machine with zeroed memories; `config` must already be valid.
    pub fn new(config: ArrayConfig, dram_bytes: usize) -> Self {
        let pes = config.pe_count() as usize;
        let zero_op = A::operand(A::Elem::default());
        CycleMachine {
            mem: Memories::new(config, dram_bytes),
            banks: core::array::from_fn(|_| WeightTile::zero(&config)),
            active: 0,
            shadow_full: false,
            array_ops: VecDeque::new(),
            a_reg: vec![zero_op; pes],
            bank_reg: vec![0; pes],
            tags_live: false,
            b_reg: vec![zero_op; pes],
            p_reg: vec![A::zero(); pes],
            deskew: vec![A::zero(); deskew_rows(&config) * config.cols as usize],
            left: vec![zero_op; config.rows as usize],
            left_bank: vec![0; config.rows as usize],
            mixed: vec![zero_op; config.cols as usize],
            top: vec![zero_op; config.cols as usize],
            pe_updates: 0,
        }
    }

    fn dims(&self) -> (usize, usize) {
        (self.mem.config.rows as usize, self.mem.config.cols as usize)
    }

    fn start_weight_load(&mut self, ins: Instruction) -> WeightLoad {
        let Instruction::LoadWeights { spad_row, rows, cols } = ins else {
            unreachable!("start_weight_load takes LoadWeights")
        };
        self.shadow_full = false;
        WeightLoad {
            spad_row: spad_row as usize,
            k: rows,
            n: cols,
            bank: next_bank(self.active),
            fp: crate::scoreboard::footprint(&self.mem.config, &ins),
            tau: 0,
        }
    }

    /// One cycle of the weight loader: after its first `read_stages` cycles (its first row's
    /// reads passing the memory's output registers), its bank shifts down a row each cycle;
    /// the top row takes tile row `R - 1 - step` (zero past the tile's `k` rows and `n`
    /// columns). Whether it finished.
    fn step_weight_load(&mut self, wl: &mut WeightLoad) -> bool {
        let (r, c) = self.dims();
        let filling = self.mem.config.read_stages as usize;
        wl.tau += 1;
        let Some(step) = (wl.tau - 1).checked_sub(filling) else { return false };
        let bank = &mut self.banks[wl.bank];
        bank.w.copy_within(0..(r - 1) * c, c);
        let tile_row = r - 1 - step;
        let zero = A::operand(A::Elem::default());
        for j in 0..c {
            bank.w[j] = if tile_row < wl.k as usize && j < wl.n as usize {
                A::operand(A::elem_from_bits(self.mem.spad_row(wl.spad_row + tile_row)[j]))
            } else {
                zero
            };
        }
        if step + 1 == r {
            bank.k = wl.k;
            bank.n = wl.n;
            self.shadow_full = true;
        }
        step + 1 == r
    }

    /// Starts a matmul in cycle `t` (swapping the shadow in first when asked); returns its
    /// useful MACs.
    fn start_array_op(&mut self, ins: Instruction, t: u64) -> u64 {
        let config = self.mem.config;
        let duration = crate::timing::duration(&config, &ins);
        let macs = match ins {
            Instruction::Matmul { rows, swap, .. } => {
                if swap {
                    self.active = next_bank(self.active);
                    self.shadow_full = false;
                }
                let w = &self.banks[self.active];
                rows as u64 * w.k as u64 * w.n as u64
            }
            Instruction::MatmulOs { k, rows, cols, .. } => {
                // Each PE accumulates in place from zero.
                let zero = A::operand(A::Elem::default());
                self.a_reg.fill(zero);
                self.b_reg.fill(zero);
                self.p_reg.fill(A::zero());
                k as u64 * rows as u64 * cols as u64
            }
            _ => unreachable!("start_array_op takes matmuls"),
        };
        let fp = crate::scoreboard::footprint(&config, &ins);
        self.array_ops.push_back(ArrayOp { ins, fp, at: t, bank: self.active as u8, duration });
        macs
    }

    /// One cycle `t` of the weight loader and the array, the same under both schedules; a
    /// finished load leaves `wl`, and a busy array cycle is counted.
    fn step_loader_and_array(&mut self, wl: &mut Option<WeightLoad>, stats: &mut Stats, t: u64) {
        if let Some(mut op) = wl.take() {
            if !self.step_weight_load(&mut op) {
                *wl = Some(op);
            }
        }
        if self.step_array(t) {
            if let Some(a) = stats.array_cycles.as_mut() {
                *a += 1;
            }
        }
    }

    /// One cycle `t` of the array, if it holds a matmul; whether it did.
    fn step_array(&mut self, t: u64) -> bool {
        let Some(first) = self.array_ops.front() else { return false };
        if matches!(first.ins, Instruction::MatmulOs { .. }) {
            // Its pairs enter `read_stages` cycles after the cycle they are read for.
            let filling = self.mem.config.read_stages as u64;
            if let Some(tau) = (t - first.at).checked_sub(filling) {
                self.step_os(tau as usize);
            }
        } else {
            self.step_ws(t);
        }
        while self.array_ops.front().is_some_and(|op| t + 1 >= op.at + op.duration) {
            self.array_ops.pop_front();
        }
        true
    }

    /// The matmul whose row enters the left edge at cycle `slot`, and that row.
    fn fed_at(&self, slot: u64) -> Option<(&ArrayOp, usize)> {
        self.array_ops.iter().find_map(|op| op.row_at(slot).map(|m| (op, m)))
    }

    /// One cycle `t` of the weight-stationary array: every row in flight moves one step.
    fn step_ws(&mut self, t: u64) {
        let (r, c) = (self.dims().0, self.dims().1);
        let ring = deskew_rows(&self.mem.config) as u64;
        // Cycles a result spends after the array's last column: registered products, and a
        // staged lane's add.
        let late = crate::timing::ws_latency(&self.mem.config) - (r + c - 1) as u64;
        // The de-skewed row that entered at `t - ws_latency` leaves for the accumulator.
        if let Some(slot) = t.checked_sub(crate::timing::ws_latency(&self.mem.config)) {
            if let Some((op, m)) = self.fed_at(slot) {
                let Instruction::Matmul { acc_row, accumulate, .. } = op.ins else { return };
                let at = (slot % ring) as usize * c;
                let out = &self.deskew[at..at + c];
                crate::machine::functional::write_acc::<A>(
                    self.mem.acc_row_mut(acc_row as usize + m),
                    out,
                    accumulate,
                );
            }
        }
        // The PEs step while a row is still inside (not in a matmul's last cycles, when only
        // its de-skewed or late results are left).
        if !self.array_ops.iter().any(|op| t + 1 + late < op.at + op.duration) {
            return;
        }
        // Skewed inputs at the left edge, each with its matmul's weight bank: PE row `i` takes
        // the row that entered at `t - i`, so a matmul feeds the rows `i` in `t - at - rows <
        // i <= t - at`; the others take zero.
        self.left.fill(A::operand(A::Elem::default()));
        for op in &self.array_ops {
            let Instruction::Matmul { a_row, rows, .. } = op.ins else { continue };
            let Some(newest) = t.checked_sub(op.at) else { continue };
            let first = (newest + 1).saturating_sub(rows as u64) as usize;
            for i in first..r.min(newest as usize + 1) {
                let bits = self.mem.spad_row(a_row as usize + (newest as usize - i))[i];
                self.left[i] = A::operand(A::elem_from_bits(bits));
                self.left_bank[i] = op.bank;
            }
        }
        // When every matmul in the array uses one bank, so does every PE (a bubble's result is
        // never kept, whatever weights it met).
        let first_bank = self.array_ops.front().map_or(0, |op| op.bank);
        let one_bank = self.array_ops.iter().all(|op| op.bank == first_bank);
        if one_bank {
            self.tags_live = false;
        } else if !self.tags_live {
            // The first cycle with two banks: every row inside came from the oldest matmuls,
            // which until now shared one bank; the newest's rows enter with their tags below.
            self.bank_reg.fill(first_bank);
            self.tags_live = true;
        }
        // Every PE, bottom row first so each reads its neighbours' previous values.
        for i in (0..r).rev() {
            let row = i * c;
            self.a_reg.copy_within(row..row + c - 1, row + 1);
            self.a_reg[row] = self.left[i];
            if self.tags_live {
                self.bank_reg.copy_within(row..row + c - 1, row + 1);
                self.bank_reg[row] = self.left_bank[i];
            }
            let a = &self.a_reg[row..row + c];
            let tags = &self.bank_reg[row..row + c];
            // One bank across the row (always, but where two matmuls meet): its weights as they
            // lie; else each PE's own bank's, gathered.
            let w: &[A::Operand] = if one_bank {
                &self.banks[first_bank as usize].w[row..row + c]
            } else if tags.iter().fold(0, |diff, &b| diff | (b ^ tags[0])) == 0 {
                &self.banks[tags[0] as usize].w[row..row + c]
            } else {
                for (j, (w, &b)) in self.mixed.iter_mut().zip(tags).enumerate() {
                    *w = self.banks[b as usize].w[row + j];
                }
                &self.mixed
            };
            if i == 0 {
                for ((p, &a), &w) in self.p_reg[..c].iter_mut().zip(a).zip(w) {
                    *p = A::mac(A::zero(), a, w);
                }
            } else {
                let (above, here) = self.p_reg.split_at_mut(row);
                let above = &above[row - c..];
                for (((p, &up), &a), &w) in here[..c].iter_mut().zip(above).zip(a).zip(w) {
                    *p = A::mac(up, a, w);
                }
            }
        }
        self.pe_updates += (r * c) as u64;
        // Bottom edge into the de-skew buffer: column `j` holds the row that entered at
        // `t - (R - 1) - j`, kept where some matmul fed that row.
        for op in &self.array_ops {
            let Instruction::Matmul { rows, .. } = op.ins else { continue };
            let Some(newest) = t.checked_sub(op.at + (r - 1) as u64) else { continue };
            let first = (newest + 1).saturating_sub(rows as u64) as usize;
            for j in first..c.min(newest as usize + 1) {
                let slot = t - (r - 1 + j) as u64;
                self.deskew[(slot % ring) as usize * c + j] = self.p_reg[(r - 1) * c + j];
            }
        }
    }

    /// One cycle of an output-stationary matmul.
    fn step_os(&mut self, tau: usize) {
        let Instruction::MatmulOs { a_row, b_row, k, acc_row, rows, accumulate, .. } =
            self.array_ops[0].ins
        else {
            return;
        };
        let (r, c) = self.dims();
        let k = k as usize;
        let compute = k + r + c - 2;
        // Registered products: the sums are final `pe_stages - 1` cycles later (`tau` counts
        // from the pairs' entry, `os_latency` from their reads).
        let config = &self.mem.config;
        let drain = k + (crate::timing::os_latency(config) - config.read_stages as u64) as usize;
        if tau >= compute {
            let Some(i) = tau.checked_sub(drain) else { return };
            if i < rows as usize {
                let out = &self.p_reg[i * c..(i + 1) * c];
                let dst = (acc_row as usize + i) * c;
                crate::machine::functional::write_acc::<A>(
                    &mut self.mem.acc[dst..dst + c],
                    out,
                    accumulate,
                );
            }
            return;
        }
        let zero = A::operand(A::Elem::default());
        for i in 0..r {
            self.left[i] = match tau.checked_sub(i).filter(|&kk| kk < k) {
                Some(kk) => {
                    A::operand(A::elem_from_bits(self.mem.spad_row(a_row as usize + kk)[i]))
                }
                None => zero,
            };
        }
        for j in 0..c {
            self.top[j] = match tau.checked_sub(j).filter(|&kk| kk < k) {
                Some(kk) => {
                    A::operand(A::elem_from_bits(self.mem.spad_row(b_row as usize + kk)[j]))
                }
                None => zero,
            };
        }
        for i in (0..r).rev() {
            let row = i * c;
            self.a_reg.copy_within(row..row + c - 1, row + 1);
            self.a_reg[row] = self.left[i];
            if i == 0 {
                self.b_reg[..c].copy_from_slice(&self.top);
            } else {
                self.b_reg.copy_within(row - c..row, row);
            }
            let a = &self.a_reg[row..row + c];
            let b = &self.b_reg[row..row + c];
            for ((p, &a), &b) in self.p_reg[row..row + c].iter_mut().zip(a).zip(b) {
                *p = A::mac(*p, a, b);
            }
        }
        self.pe_updates += (r * c) as u64;
    }
}

impl<A: Arith> Machine for CycleMachine<A> {
    fn config(&self) -> &ArrayConfig {
        &self.mem.config
    }
    fn name(&self) -> &'static str {
        "cycle"
    }
    fn region_size(&self, region: Region) -> usize {
        self.mem.region_size(region)
    }
    fn write(&mut self, region: Region, offset: usize, bytes: &[u8]) -> Result<(), MachineError> {
        self.mem.write(region, offset, bytes)
    }
    fn read(&mut self, region: Region, offset: usize, out: &mut [u8]) -> Result<(), MachineError> {
        self.mem.read(region, offset, out)
    }

    fn run(&mut self, program: &[Instruction]) -> Result<Stats, MachineError> {
        validate_program(&self.mem.config, program, self.mem.dram.len())?;
        // Every program starts with an empty shadow: a swap needs a load of its own program.
        self.shadow_full = false;
        match self.mem.config.schedule {
            Schedule::Blocking => self.run_blocking(program),
            Schedule::Decoupled => self.run_decoupled(program),
        }
    }
}

/// Rows of the WS de-skew buffer: a row's column 0 leaves the (unregistered) array
/// `ws_latency - (R - 1)` cycles before the row is written (`C`, plus the cycles its registered
/// products, staged PE adds and staged lane adds make it late).
fn deskew_rows(config: &ArrayConfig) -> usize {
    (crate::timing::ws_latency(config) - (config.rows as u64 - 1)) as usize
}

/// `validate_program` guarantees a `Halt`, and the dispatcher never passes one.
#[cold]
fn unreachable_halt() -> ! {
    panic!("program ran past its end: validate_program let a program without halt through")
}
