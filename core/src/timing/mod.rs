//! The timing model of any program, in closed form per instruction: the dispatch rules of the
//! cycle machine (`machine::cycle`, module docs) applied to each instruction's fixed duration,
//! without moving any data. Equal to the cycle machine's count on every valid program (tested),
//! and cheap enough to run on every training step to split cycles by operation. Each
//! [`Schedule`] has its own rules: the blocking ones below, the decoupled ones in
//! `decoupled.rs` ([`DecoupledScheduler`]).

mod blocking;
mod decoupled;
pub mod sdram;
pub use blocking::Scheduler as BlockingScheduler;
pub use decoupled::Scheduler as DecoupledScheduler;

use crate::config::{ArrayConfig, DramPort, Schedule};
use crate::fault::ExecErrorKind;
use crate::isa::{Instruction, VectorOp};

/// Cycles `Load` spends on one row of `len` elements: on the row port one when its elements are
/// contiguous in DRAM (or it has a single element, or repeats one), else one per element; a
/// contiguous row is one wide read of byte-banked DRAM, a strided gather (a transposed operand)
/// touches arbitrary banks. On the byte port ([`DramPort::Byte`]) one per byte, whatever the
/// stride. On the SDRAM ([`DramPort::Sdram`]) this is the fewest its words can take, one a
/// cycle in an open row, aligned ([`sdram`] times each transfer).
pub const fn load_row_cycles(config: &ArrayConfig, len: u16, elem_stride: u32) -> u64 {
    let es = config.dtype.elem_bytes() as u64;
    match config.dram_port {
        DramPort::Byte => len as u64 * es,
        DramPort::Sdram if elem_stride <= 1 => (len as u64 * es).div_ceil(crate::sdram::WORD_BYTES),
        DramPort::Sdram => len as u64,
        DramPort::Row if elem_stride <= 1 || len == 1 => 1,
        DramPort::Row => len as u64,
    }
}

/// Cycles the DRAM side of a `Store`, `LoadAcc`, `StoreSpad` or `StoreBf16` spends on one row of
/// `len` elements of `bytes` bytes: one on the row port, `len * bytes` on the byte port, and
/// on the SDRAM the fewest its words can take, as [`load_row_cycles`].
pub const fn transfer_row_cycles(config: &ArrayConfig, len: u16, bytes: u64) -> u64 {
    match config.dram_port {
        DramPort::Row => 1,
        DramPort::Byte => len as u64 * bytes,
        DramPort::Sdram => (len as u64 * bytes).div_ceil(crate::sdram::WORD_BYTES),
    }
}

/// A decoupled machine's `Load` of a transposed view: consecutive scratchpad rows are
/// consecutive DRAM elements (`row_stride` 1) and a row's elements are `elem_stride > 1` apart.
/// It goes through the load unit's transpose buffer in blocks of `W = spad_width` rows: `len`
/// wide DRAM reads fill a block (read `e` holds element `e` of each of its rows), and its rows
/// are written one a cycle while the next block is read. Block `b` starts at cycle
/// `b * max(len, W)`; its row `i` lands at `b * max(len, W) + len + i`.
pub const fn transposes(config: &ArrayConfig, ins: &Instruction) -> bool {
    match *ins {
        Instruction::Load { rows, len, row_stride, elem_stride, .. } => {
            matches!(config.schedule, Schedule::Decoupled)
                && matches!(config.dram_port, DramPort::Row)
                && row_stride == 1
                && elem_stride > 1
                && len > 1
                && rows > 1
        }
        _ => false,
    }
}

/// Whether `ins` goes through the conversion lanes, whose rows land
/// [`ArrayConfig::convert_stages`] cycles after they are read.
pub const fn converts(ins: &Instruction) -> bool {
    matches!(
        ins,
        Instruction::Requantize { .. }
            | Instruction::CastBf16 { .. }
            | Instruction::StoreBf16 { .. }
    )
}

/// The cycle, counted from its dispatch, in which row `r` of a row-by-row instruction (loads,
/// stores, vector ops, casts) takes effect: the last of the row's cycles, or for a transposing
/// `Load` the cycle its block writes it (see [`transposes`]), or for a conversion ([`converts`])
/// the cycle its row leaves the lanes' pipeline: `r + convert_stages`, and for a `Requantize`
/// on lanes that take [`ArrayConfig::requant_cycles`] `P > 1` a row, `P * (r + 1) - 1 +
/// convert_stages` (the row is read for `P` cycles, one partial product each). A conversion
/// reads one memory and writes another, and nothing else touches its source while it runs, so
/// reading the row when it lands gives the same bits as reading it when the lanes did. A
/// vector row takes [`vector_row_cycles`] `P`: it is read for `P` cycles (the lanes' product
/// or aligned operands registered in the first) and lands in the last, `P * (r + 1) - 1`.
/// On the byte port a DRAM transfer's row takes [`load_row_cycles`] or
/// [`transfer_row_cycles`] `P` and lands in its last, `P * (r + 1) - 1`, and a `StoreBf16`'s
/// `convert_stages` after that (its row is held in the lanes while its bytes are written).
/// Every row lands [`ArrayConfig::read_stages`] cycles later again: its reads pass the
/// memories' output registers first.
pub fn row_lands(config: &ArrayConfig, ins: &Instruction, r: u64) -> u64 {
    config.read_stages as u64 + row_lands_unregistered(config, ins, r)
}

/// [`row_lands`] on memories without output registers.
fn row_lands_unregistered(config: &ArrayConfig, ins: &Instruction, r: u64) -> u64 {
    match *ins {
        Instruction::Vector { op, .. } => vector_row_cycles(config, op) * (r + 1) - 1,
        Instruction::Requantize { .. } => {
            let p = config.requant_cycles as u64;
            p * (r + 1) - 1 + config.convert_stages as u64
        }
        Instruction::StoreBf16 { len, .. } => {
            (r + 1) * transfer_row_cycles(config, len, 2) - 1 + config.convert_stages as u64
        }
        _ if converts(ins) => r + config.convert_stages as u64,
        Instruction::Load { len, .. } if transposes(config, ins) => {
            let w = config.spad_width() as u64;
            let len = len as u64;
            (r / w) * len.max(w) + len + r % w
        }
        Instruction::Load { len, elem_stride, .. } => {
            (r + 1) * load_row_cycles(config, len, elem_stride) - 1
        }
        Instruction::Store { len, .. } | Instruction::LoadAcc { len, .. } => {
            (r + 1) * transfer_row_cycles(config, len, 4) - 1
        }
        Instruction::StoreSpad { len, .. } => {
            (r + 1) * transfer_row_cycles(config, len, config.dtype.elem_bytes() as u64) - 1
        }
        _ => r,
    }
}

/// Cycles one row of a vector op holds the accumulator lanes: one, plus
/// [`ArrayConfig::scale_cycles`]` - 1` for a product (`Scale`, `Axpy`) and
/// [`ArrayConfig::add_stages`]` - 1` for a sum (`BiasAdd`, `BiasRelu`, `Add`, `Axpy`); each
/// registered step of the lane takes one cycle of the row's reads, and the row is written in
/// its last. The other ops pass no multiplier or adder.
pub const fn vector_row_cycles(config: &ArrayConfig, op: VectorOp) -> u64 {
    let product = matches!(op, VectorOp::Scale | VectorOp::Axpy);
    let sum = matches!(op, VectorOp::BiasAdd | VectorOp::BiasRelu | VectorOp::Add | VectorOp::Axpy);
    1 + product as u64 * (config.scale_cycles as u64 - 1)
        + sum as u64 * (config.add_stages as u64 - 1)
}

/// Cycles the accumulator lanes add to a result row of the array: `add_stages - 1`, the
/// registers inside a staged lane's f32 add, which every result row passes (an accumulating
/// one through the adder, an overwriting one beside it) so that all land alike.
pub const fn lane_latency(config: &ArrayConfig) -> u64 {
    config.add_stages as u64 - 1
}

/// Cycles a partial sum takes through one weight-stationary PE, and so the skew between the
/// input rows of neighbouring PE rows: one, or `pe_stages - 1` on PEs that stage their f32 add
/// ([`ArrayConfig::pe_add_staged`]: two with its aligned operands registered, three with its
/// normalised sum too).
pub const fn pe_row_cycles(config: &ArrayConfig) -> u64 {
    if config.pe_add_staged() {
        config.pe_stages as u64 - 1
    } else {
        1
    }
}

/// Weight-stationary: cycles from the cycle an input row is read for to its result row written
/// to the accumulators. The row enters the array's left edge [`ArrayConfig::read_stages`]
/// cycles after that and reaches PE row `i` after `S i` cycles more ([`S =
/// pe_row_cycles`](pe_row_cycles)), so column `j` of the bottom PE row makes its sum
/// `S (R - 1) + j` cycles after the row entered, plus one for each register inside a PE (the
/// product's on `pe_stages` 2 to 4, the aligned operands' on 3 and 4, the normalised sum's on
/// 4; all but the product's are in `S`), and the de-skewed row is written the cycle after
/// column `C - 1`'s sum: `S R + C - 1`, plus one for PEs that register their products, plus
/// [`lane_latency`], plus the read stages.
pub const fn ws_latency(config: &ArrayConfig) -> u64 {
    let product = (config.pe_stages > 1) as u64;
    pe_row_cycles(config) * config.rows as u64 + config.cols as u64 - 1
        + product
        + lane_latency(config)
        + config.read_stages as u64
}

/// Output-stationary: cycles of a `MatmulOs` before its first result row is drained, less its
/// `k`: PE `(i, j)` takes pair `k` in cycle `k + i + j`, so PE `(R - 1, C - 1)`'s last sum is
/// made in cycle `k + R + C - 3` and the drain starts after it, `pe_stages - 1` cycles later
/// for PEs that register their products: `R + C - 2 + pe_stages - 1`, plus [`lane_latency`]
/// (the drained rows pass the lanes as the weight-stationary ones do), plus
/// [`ArrayConfig::read_stages`]: the pairs are read that many cycles before they enter.
pub const fn os_latency(config: &ArrayConfig) -> u64 {
    config.rows as u64 + config.cols as u64 - 2 + config.pe_stages as u64 - 1
        + lane_latency(config)
        + config.read_stages as u64
}

/// Cycles each unit stays busy for one instruction: on a single-port scratchpad
/// ([`ArrayConfig::single_port_spad`]) one more for an instruction that writes it
/// ([`spad_write_turn`]).
pub fn duration(config: &ArrayConfig, ins: &Instruction) -> u64 {
    work_cycles(config, ins) + spad_write_turn(config, ins)
}

/// [`duration`] of `ins` dispatched in cycle `at`: on the SDRAM (`sdram` given) a DRAM
/// transfer's words' cycles ([`sdram::SdramBus::time`], which passes each row's landing cycle
/// to `row`) and its [`spad_write_turn`]; any other instruction's [`duration`].
pub fn duration_at(
    config: &ArrayConfig,
    ins: &Instruction,
    at: u64,
    sdram: Option<&mut sdram::SdramBus>,
    row: impl FnMut(u64, u64),
) -> u64 {
    let transfer = sdram.and_then(|bus| Some((bus, sdram::Transfer::of(config, ins)?)));
    match transfer {
        Some((bus, transfer)) => bus.time(&transfer, at, row) + spad_write_turn(config, ins),
        None => duration(config, ins),
    }
}

/// The cycle a single-port scratchpad's writer holds the sequencer after its last row lands
/// (1), so that the next instruction's first read is not addressed in the cycle of that write;
/// 0 for every other instruction and machine.
pub fn spad_write_turn(config: &ArrayConfig, ins: &Instruction) -> u64 {
    let writes =
        crate::scoreboard::footprint(config, ins).spad_ports & crate::scoreboard::SPAD_WRITE;
    (config.single_port_spad && writes != 0) as u64
}

/// Cycles from a `Matmul`'s dispatch until a single-port scratchpad's port is free for a
/// `LoadWeights` ([`ArrayConfig::single_port_spad`]): its `rows` reads, and one cycle more, since
/// the array unit reports its reads over from the register that feeds its rows to the array (a
/// flip-flop, so no dispatch decision waits on its row count). The rest of the matmul, its rows
/// crossing the array and draining, reads nothing and overlaps the weight load.
pub const fn matmul_port_cycles(rows: u16) -> u64 {
    rows as u64 + 1
}

/// [`duration`] on a scratchpad with a write port of its own.
fn work_cycles(config: &ArrayConfig, ins: &Instruction) -> u64 {
    let r = config.rows as u64;
    match *ins {
        Instruction::Load { rows, .. } => row_lands(config, ins, rows as u64 - 1) + 1,
        Instruction::CastBf16 { rows, .. }
        | Instruction::Requantize { rows, .. }
        | Instruction::StoreBf16 { rows, .. } => row_lands(config, ins, rows as u64 - 1) + 1,
        Instruction::Vector { rows, .. } => row_lands(config, ins, rows as u64 - 1) + 1,
        Instruction::Store { rows, .. }
        | Instruction::LoadAcc { rows, .. }
        | Instruction::StoreSpad { rows, .. } => row_lands(config, ins, rows as u64 - 1) + 1,
        Instruction::Sync | Instruction::Halt => 1,
        Instruction::LoadWeights { .. } => r + config.read_stages as u64,
        Instruction::Matmul { rows, .. } => rows as u64 + ws_latency(config),
        Instruction::MatmulOs { k, rows, .. } => k as u64 + os_latency(config) + rows as u64,
    }
}

/// Dispatch cycle of every instruction up to the first `Halt`, through `on_dispatch(index,
/// cycle)`; returns the total cycle count (the `Halt`'s cycle plus one), or the fault the cycle
/// machine would report. The program must already be valid (`validate_program`).
pub fn schedule(
    config: &ArrayConfig,
    program: &[Instruction],
    mut on_dispatch: impl FnMut(usize, u64),
) -> Result<u64, (usize, ExecErrorKind)> {
    let mut scheduler = Scheduler::new(config);
    for (index, ins) in program.iter().enumerate() {
        let at = scheduler.push(ins).map_err(|kind| (index, kind))?;
        on_dispatch(index, at);
        if *ins == Instruction::Halt {
            return Ok(at + 1);
        }
    }
    // validate_program guarantees a Halt; a program without one never finishes.
    Ok(u64::MAX)
}

/// The timing model of a config's schedule fed one instruction at a time, so a program need
/// not be stored. One lives on the stack per program timed (no heap: the tiler uses it), so the
/// variants' sizes may differ.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Scheduler {
    Blocking(BlockingScheduler),
    Decoupled(DecoupledScheduler),
}

impl Scheduler {
    /// A scheduler for a program that starts on an idle machine.
    pub fn new(config: &ArrayConfig) -> Scheduler {
        match config.schedule {
            Schedule::Blocking => Scheduler::Blocking(BlockingScheduler::new(config)),
            Schedule::Decoupled => Scheduler::Decoupled(DecoupledScheduler::new(config)),
        }
    }

    /// Dispatches the next instruction of a valid program; returns its dispatch cycle (for
    /// `Halt`, the program's last cycle), or the fault the cycle machine reports.
    pub fn push(&mut self, ins: &Instruction) -> Result<u64, ExecErrorKind> {
        match self {
            Scheduler::Blocking(s) => s.push(ins),
            Scheduler::Decoupled(s) => s.push(ins),
        }
    }
}

/// Total cycles of a valid program (see [`schedule`]).
pub fn program_cycles(
    config: &ArrayConfig,
    program: &[Instruction],
) -> Result<u64, (usize, ExecErrorKind)> {
    schedule(config, program, |_, _| {})
}

/// Useful MACs of a valid program up to its first `Halt`, counted as the golden machines count
/// them: a weight-stationary matmul does `rows x k x n` of the weights it uses (their tile's
/// rows and columns), an output-stationary one `k x rows x cols`. The array starts with no
/// weights (a fresh machine); see [`program_macs_from`] for one that ran programs before.
pub fn program_macs(program: &[Instruction]) -> u64 {
    program_macs_from(program, (0, 0)).0
}

/// [`program_macs`] on an array whose active weights are a `(rows, cols)` tile left by earlier
/// programs (they survive from one program to the next; DECISIONS 28); also returns the
/// active tile's shape after the program, or after its last instruction when it has no `Halt`.
pub fn program_macs_from(program: &[Instruction], active: (u64, u64)) -> (u64, (u64, u64)) {
    let (mut shadow, mut active) = ((0u64, 0u64), active);
    let mut macs = 0;
    for ins in program {
        match *ins {
            Instruction::LoadWeights { rows, cols, .. } => shadow = (rows as u64, cols as u64),
            Instruction::Matmul { rows, swap, .. } => {
                if swap {
                    active = shadow;
                }
                macs += rows as u64 * active.0 * active.1;
            }
            Instruction::MatmulOs { k, rows, cols, .. } => {
                macs += k as u64 * rows as u64 * cols as u64
            }
            Instruction::Halt => break,
            _ => {}
        }
    }
    (macs, active)
}
