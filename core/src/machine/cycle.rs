//! The cycle machine: steps the controller, the weight loader and every PE once per clock.
//!
//! # Timing rules (the contract the RTL meets cycle for cycle)
//!
//! The controller looks at one instruction per cycle, in program order, and dispatches it when
//! its units are free at the start of that cycle; the unit does its first cycle of work in the
//! dispatch cycle. Three units:
//!
//! * the **sequencer** runs `Load`, `Store`, `Vector`, `CastBf16`, `Requantize`, `LoadAcc`,
//!   `StoreSpad` one row per cycle (`rows` cycles; a strided `Load` gather takes `len` cycles
//!   per row, see `timing::load_row_cycles`) and `Sync` (1 cycle). It dispatches only when all three units are
//!   idle, and nothing dispatches while it is busy.
//! * the **weight loader** runs `LoadWeights`: R cycles shifting tile rows down the shadow
//!   registers, bottom row first. It dispatches when the sequencer and the loader are idle, so
//!   it overlaps a running matmul: this is what the shadow registers are for.
//! * the **array** runs `Matmul` (WS): `rows + R + C - 1` cycles, and `MatmulOs` (OS):
//!   `k + R + C - 2` cycles of compute plus one cycle per drained row. It dispatches when the
//!   sequencer and the array are idle; with `swap` it also waits for the shadow to be full, and
//!   swaps it in at dispatch.
//!
//! `Halt` dispatches when every unit is idle; its cycle is the last one counted.
//!
//! Weight-stationary: input row `m` enters PE row `i` at cycle `m + i` (skew), partial sums flow
//! down, column `j` of row `m` leaves the bottom at cycle `m + R - 1 + j`, and the de-skewed row is
//! written to the accumulator at cycle `m + R + C - 1`.
//!
//! Output-stationary: `A^T` row `k` enters PE row `i` at cycle `k + i`, `B` row `k` enters PE
//! column `j` at cycle `k + j`; PE `(i, j)` multiplies the pair for `k` at cycle `k + i + j`.
//! From cycle `k + R + C - 2`, PE row `i` is written to the accumulator at one row per cycle.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use crate::config::ArrayConfig;
use crate::isa::Instruction;
use crate::machine::functional::{seq_rows, write_acc, WeightTile};
use crate::machine::{
    validate_program, ExecErrorKind, Machine, MachineError, Memories, Region, Stats,
};
use crate::numerics::Arith;

struct SeqOp {
    ins: Instruction,
    /// Cycles spent so far, and in all.
    tau: usize,
    len: usize,
    /// Cycles per row (`Load` gathers take one per element).
    per_row: usize,
}

struct WeightLoad {
    spad_row: usize,
    k: u16,
    n: u16,
    tau: usize,
}

struct ArrayOp {
    ins: Instruction,
    tau: usize,
    duration: usize,
}

/// The cycle-accurate golden machine for datapath `A`.
pub struct CycleMachine<A: Arith> {
    pub mem: Memories,
    active: WeightTile<A>,
    shadow: WeightTile<A>,
    shadow_full: bool,
    /// Activation (WS) or A (OS) registers passing right, one per PE.
    a_reg: Vec<A::Operand>,
    /// B registers passing down (OS), one per PE.
    b_reg: Vec<A::Operand>,
    /// Partial sums passing down (WS) or held (OS), one per PE.
    p_reg: Vec<A::Acc>,
    /// WS de-skew buffer: C rows in flight, C columns each.
    deskew: Vec<A::Acc>,
    left: Vec<A::Operand>,
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
            active: WeightTile::zero(&config),
            shadow: WeightTile::zero(&config),
            shadow_full: false,
            a_reg: vec![zero_op; pes],
            b_reg: vec![zero_op; pes],
            p_reg: vec![A::zero(); pes],
            deskew: vec![A::zero(); config.cols as usize * config.cols as usize],
            left: vec![zero_op; config.rows as usize],
            top: vec![zero_op; config.cols as usize],
            pe_updates: 0,
        }
    }

    fn dims(&self) -> (usize, usize) {
        (self.mem.config.rows as usize, self.mem.config.cols as usize)
    }

    /// One cycle of the weight loader: the shadow shifts down a row; the top row takes tile
    /// row `R - 1 - tau` (zero past the tile's `k` rows and `n` columns).
    fn step_weight_load(&mut self, wl: &WeightLoad) {
        let (r, c) = self.dims();
        self.shadow.w.copy_within(0..(r - 1) * c, c);
        let tile_row = r - 1 - wl.tau;
        let zero = A::operand(A::Elem::default());
        for j in 0..c {
            self.shadow.w[j] = if tile_row < wl.k as usize && j < wl.n as usize {
                A::operand(A::elem_from_bits(self.mem.spad_row(wl.spad_row + tile_row)[j]))
            } else {
                zero
            };
        }
    }

    /// One cycle of a weight-stationary matmul.
    fn step_ws(&mut self, op: &ArrayOp) {
        let Instruction::Matmul { a_row, acc_row, rows, accumulate, .. } = op.ins else {
            return;
        };
        let (r, c) = self.dims();
        let (tau, rows) = (op.tau, rows as usize);
        // De-skewed row leaves for the accumulator.
        if let Some(m) = tau.checked_sub(r + c - 1).filter(|&m| m < rows) {
            let out = &self.deskew[(m % c) * c..(m % c + 1) * c];
            write_acc::<A>(self.mem.acc_row_mut(acc_row as usize + m), out, accumulate);
        }
        if tau + 1 >= op.duration {
            return; // the last cycle only writes
        }
        // Skewed inputs at the left edge.
        let zero = A::operand(A::Elem::default());
        for i in 0..r {
            self.left[i] = match tau.checked_sub(i).filter(|&m| m < rows) {
                Some(m) => A::operand(A::elem_from_bits(self.mem.spad_row(a_row as usize + m)[i])),
                None => zero,
            };
        }
        // Every PE, bottom row first so each reads its neighbours' previous values.
        for i in (0..r).rev() {
            let row = i * c;
            self.a_reg.copy_within(row..row + c - 1, row + 1);
            self.a_reg[row] = self.left[i];
            let a = &self.a_reg[row..row + c];
            let w = &self.active.w[row..row + c];
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
        // Bottom edge into the de-skew buffer.
        for j in 0..c {
            if let Some(m) = tau.checked_sub(r - 1 + j).filter(|&m| m < rows) {
                self.deskew[(m % c) * c + j] = self.p_reg[(r - 1) * c + j];
            }
        }
    }

    /// One cycle of an output-stationary matmul.
    fn step_os(&mut self, op: &ArrayOp) {
        let Instruction::MatmulOs { a_row, b_row, k, acc_row, rows, accumulate, .. } = op.ins
        else {
            return;
        };
        let (r, c) = self.dims();
        let (tau, k) = (op.tau, k as usize);
        let compute = k + r + c - 2;
        if tau >= compute {
            let i = tau - compute;
            if i < rows as usize {
                let out = &self.p_reg[i * c..(i + 1) * c];
                let dst = (acc_row as usize + i) * c;
                write_acc::<A>(&mut self.mem.acc[dst..dst + c], out, accumulate);
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

    fn start_array_op(&mut self, ins: Instruction) -> ArrayOp {
        let (r, c) = self.dims();
        let zero = A::operand(A::Elem::default());
        self.a_reg.fill(zero);
        self.b_reg.fill(zero);
        self.p_reg.fill(A::zero());
        let duration = match ins {
            Instruction::Matmul { rows, .. } => rows as usize + r + c - 1,
            Instruction::MatmulOs { k, rows, .. } => k as usize + r + c - 2 + rows as usize,
            _ => 0,
        };
        ArrayOp { ins, tau: 0, duration }
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
        let r = self.mem.config.rows as usize;
        let mut stats = Stats { cycles: Some(0), array_cycles: Some(0), ..Stats::default() };
        let mut seq: Option<SeqOp> = None;
        let mut wl: Option<WeightLoad> = None;
        let mut arr: Option<ArrayOp> = None;
        let mut fault: Option<MachineError> = None;
        let mut pc = 0usize;
        let mut t: u64 = 0;
        loop {
            let idle = seq.is_none() && wl.is_none() && arr.is_none();
            // Dispatch at most one instruction.
            match (fault, program.get(pc)) {
                (Some(e), _) => {
                    if idle {
                        return Err(e);
                    }
                }
                (None, None) => unreachable_halt(),
                (None, Some(&ins)) => {
                    let mut go = false;
                    match ins {
                        Instruction::Halt => {
                            if idle {
                                stats.instructions += 1;
                                stats.cycles = Some(t + 1);
                                return Ok(stats);
                            }
                        }
                        Instruction::LoadWeights { spad_row, rows, cols } => {
                            if seq.is_none() && wl.is_none() {
                                self.shadow_full = false;
                                wl = Some(WeightLoad {
                                    spad_row: spad_row as usize,
                                    k: rows,
                                    n: cols,
                                    tau: 0,
                                });
                                go = true;
                            }
                        }
                        Instruction::Matmul { swap, rows, .. } => {
                            if seq.is_none() && arr.is_none() {
                                if !swap || self.shadow_full {
                                    if swap {
                                        core::mem::swap(&mut self.active, &mut self.shadow);
                                        self.shadow_full = false;
                                    }
                                    stats.macs +=
                                        rows as u64 * self.active.k as u64 * self.active.n as u64;
                                    arr = Some(self.start_array_op(ins));
                                    go = true;
                                } else if wl.is_none() {
                                    fault = Some(MachineError::Exec {
                                        index: pc,
                                        kind: ExecErrorKind::NoWeightsLoaded,
                                    });
                                }
                            }
                        }
                        Instruction::MatmulOs { k, rows, cols, .. } => {
                            if seq.is_none() && arr.is_none() {
                                stats.macs += k as u64 * rows as u64 * cols as u64;
                                arr = Some(self.start_array_op(ins));
                                go = true;
                            }
                        }
                        _ => {
                            if idle {
                                let per_row = match ins {
                                    Instruction::Load { len, elem_stride, .. } => {
                                        crate::timing::load_row_cycles(len, elem_stride) as usize
                                    }
                                    _ => 1,
                                };
                                let len = seq_rows(&ins).max(1) * per_row;
                                seq = Some(SeqOp { ins, tau: 0, len, per_row });
                                go = true;
                            }
                        }
                    }
                    if go {
                        stats.instructions += 1;
                        pc += 1;
                    }
                }
            }
            // Every unit does one cycle of work.
            if let Some(op) = seq.as_mut() {
                // A row's effect lands in the last of its cycles.
                op.tau += 1;
                if op.tau % op.per_row == 0 && !matches!(op.ins, Instruction::Sync) {
                    self.mem.row_step::<A>(&op.ins, op.tau / op.per_row - 1);
                }
                if op.tau == op.len {
                    seq = None;
                }
            }
            if let Some(mut op) = wl.take() {
                self.step_weight_load(&op);
                op.tau += 1;
                if op.tau == r {
                    self.shadow.k = op.k;
                    self.shadow.n = op.n;
                    self.shadow_full = true;
                } else {
                    wl = Some(op);
                }
            }
            if let Some(mut op) = arr.take() {
                match op.ins {
                    Instruction::Matmul { .. } => self.step_ws(&op),
                    _ => self.step_os(&op),
                }
                op.tau += 1;
                if let Some(a) = stats.array_cycles.as_mut() {
                    *a += 1;
                }
                if op.tau < op.duration {
                    arr = Some(op);
                }
            }
            t += 1;
        }
    }
}

/// `validate_program` guarantees a `Halt`, and the dispatcher never passes one.
#[cold]
fn unreachable_halt() -> ! {
    panic!("program ran past its end: validate_program let a program without halt through")
}
