//! The one comparison every machine is checked with, and what its tests feed it.
//!
//! The golden machines are the truth (STYLE point 1): core's own tests, the RTL's, the board's and
//! the CLI's all compare accumulator dumps with [`assert_bit_identical`], so a failure reads the
//! same wherever it happens. It lives here, not in a test crate, so that core's tests run without
//! building the hardware, and `systole-tests` re-exports it for everything else.
//!
//! What is compared comes from [`gemm_on`] (a planned GEMM on a fresh golden machine) or from
//! [`random_program`] (any valid program, run on the two golden machines from the same memories
//! by [`golden_pair_agree`]), both fed by the seeded [`SplitMix`].
//!
//! Where agreement is by tolerance instead (the GPU and its CPU twin against the f32 reference,
//! the bench's checks before it times), the one comparison is [`Tolerance`]: [`assert_close`]
//! in tests, [`first_outside`] where a difference is reported rather than a stop.
//!
//! These are test helpers: [`assert_bit_identical`], [`assert_close`] and [`gemm_on`] panic on
//! failure, as assertions do. Machines and tools that report a difference rather than stop use
//! [`first_difference`] and [`first_outside`].

extern crate alloc;
use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::isa::{Instruction, VectorOp};
use crate::machine::{golden, run_gemm, GoldenKind};
use crate::params::SplitMix64;
use crate::tiler::{GemmLayout, GemmPlan, GemmShape};
use crate::{ArrayConfig, Bf16, Dataflow, Dtype, Machine, Requant, Stats};

/// First index where two accumulator dumps differ, with both words; `None` if bit-identical.
///
/// Dumps of different lengths differ at the shorter one's end (reported with both words 0).
pub fn first_difference(expected: &[u32], got: &[u32]) -> Option<(usize, u32, u32)> {
    if expected.len() != got.len() {
        return Some((expected.len().min(got.len()), 0, 0));
    }
    expected.iter().zip(got).enumerate().find(|(_, (e, g))| e != g).map(|(i, (e, g))| (i, *e, *g))
}

/// Asserts two row-major dumps with `cols` columns are bit-identical; the panic names `what`
/// and the first differing element as (row, col).
#[track_caller]
pub fn assert_bit_identical(what: &str, expected: &[u32], got: &[u32], cols: usize) {
    if let Some((i, e, g)) = first_difference(expected, got) {
        panic!(
            "{what}: first difference at element {i} (row {}, col {}): expected {e:#010x}, got {g:#010x} \
             (lengths {} and {})",
            i / cols.max(1),
            i % cols.max(1),
            expected.len(),
            got.len()
        );
    }
}

/// How far a value may be from its reference where agreement is by tolerance (the GPU, the CPU
/// twin, an f32 loop), not bit for bit: `|got - want| <= abs + rel * scale`, `scale` being
/// `|want|` or a magnitude the caller knows better (a dot product's `sum |a_i b_i|`). A NaN on
/// either side is outside any tolerance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    pub abs: f64,
    pub rel: f64,
}

impl Tolerance {
    /// Whether `got` is within the tolerance of `want`, relative to `scale`.
    pub fn admits(&self, got: f64, want: f64, scale: f64) -> bool {
        (got - want).abs() <= self.abs + self.rel * scale
    }
}

/// First index where `got` is outside `tol` of `expected` (relative to `|expected|`), with both
/// values; `None` if every element is within it. Slices of different lengths differ at the
/// shorter one's end (reported as two NaNs).
pub fn first_outside(expected: &[f32], got: &[f32], tol: Tolerance) -> Option<(usize, f32, f32)> {
    if expected.len() != got.len() {
        return Some((expected.len().min(got.len()), f32::NAN, f32::NAN));
    }
    let outside = |(_, (e, g)): &(usize, (&f32, &f32))| {
        !tol.admits(**g as f64, **e as f64, (**e as f64).abs())
    };
    expected.iter().zip(got).enumerate().find(outside).map(|(i, (e, g))| (i, *e, *g))
}

/// Asserts every element of `got` is within `tol` of `expected` ([`first_outside`]); the panic
/// names `what` and the first element outside.
#[track_caller]
pub fn assert_close(what: &str, expected: &[f32], got: &[f32], tol: Tolerance) {
    if let Some((i, e, g)) = first_outside(expected, got, tol) {
        panic!(
            "{what}: element {i} is {g}, expected {e} within {} + {} x |expected| (lengths {} and \
             {})",
            tol.abs,
            tol.rel,
            expected.len(),
            got.len()
        );
    }
}

/// Runs one GEMM of raw little-endian operands on a fresh golden machine of `kind`, its DRAM
/// packed by [`GemmLayout::packed`]; returns C's accumulator words, the statistics and the plan.
///
/// Panics if the shape does not fit or the machine fails: in a test, either is the bug.
#[track_caller]
pub fn gemm_on(
    kind: GoldenKind,
    config: &ArrayConfig,
    shape: GemmShape,
    a: &[u8],
    b: &[u8],
) -> (Vec<u32>, Stats, GemmPlan) {
    let (layout, dram) = GemmLayout::packed(config, &shape).expect("layout");
    let plan = GemmPlan::new(config, shape, layout).expect("plan");
    let mut m: Box<dyn Machine> = golden(kind, *config, dram).expect("config");
    let (c, stats) = run_gemm(m.as_mut(), &plan, a, b).expect("run");
    (c, stats, plan)
}

/// A small deterministic generator, so failures reproduce without proptest: [`SplitMix64`]
/// with a random-matrix helper.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        let mut g = SplitMix64(self.0);
        let r = g.next_u64();
        self.0 = g.0;
        r
    }

    /// Random raw matrix bytes: INT8 any byte; BF16 a normal-range value in [-4, 4).
    pub fn matrix(&mut self, elems: usize, dtype: Dtype) -> Vec<u8> {
        let mut out = Vec::with_capacity(elems * dtype.elem_bytes());
        for _ in 0..elems {
            let r = self.next_u64();
            match dtype {
                Dtype::Int8 => out.push(r as u8),
                Dtype::Bf16 => {
                    let x = ((r >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0;
                    out.extend_from_slice(&Bf16::from_f32(x as f32).0.to_le_bytes());
                }
            }
        }
        out
    }
}

/// A random valid program for `cfg` with `dram` bytes of DRAM, ending in `Halt`: every
/// instruction kind the config allows, every range in bounds. Two machines given the same program
/// and the same memories must end in the same state, or fail at the same instruction.
pub fn random_program(cfg: &ArrayConfig, dram: usize, rng: &mut SplitMix) -> Vec<Instruction> {
    let (r, c, w) = (cfg.rows as u64, cfg.cols as u64, cfg.spad_width() as u64);
    let (spad, acc) = (cfg.spad_depth as u64, cfg.acc_depth as u64);
    let es = cfg.dtype.elem_bytes() as u64;
    let mut pick = |lo: u64, hi: u64| lo + rng.next_u64() % (hi - lo + 1);
    let mut program = Vec::new();
    let len = pick(1, 24);
    for _ in 0..len {
        let kind = pick(0, 10);
        let ins = match kind {
            0 => {
                let rows = pick(1, spad.min(6));
                let len = pick(1, w);
                let (rs, el) = (pick(0, 9), pick(0, 3));
                let span = ((rows - 1) * rs + (len - 1) * el + 1) * es;
                Instruction::Load {
                    spad_row: pick(0, spad - rows) as u16,
                    dram_addr: pick(0, dram as u64 - span) as u32,
                    rows: rows as u16,
                    len: len as u16,
                    row_stride: rs as u32,
                    elem_stride: el as u32,
                }
            }
            1 => {
                let rows = pick(1, acc.min(6));
                let len = pick(1, c);
                let rs = pick(0, 9);
                let span = ((rows - 1) * rs + len) * 4;
                Instruction::Store {
                    acc_row: pick(0, acc - rows) as u16,
                    dram_addr: pick(0, dram as u64 - span) as u32,
                    rows: rows as u16,
                    len: len as u16,
                    row_stride: rs as u32,
                }
            }
            2 | 3 if cfg.dataflow == Dataflow::WeightStationary => {
                if kind == 2 {
                    let rows = pick(1, r);
                    Instruction::LoadWeights {
                        spad_row: pick(0, spad - rows) as u16,
                        rows: rows as u16,
                        cols: pick(1, c) as u16,
                    }
                } else {
                    let rows = pick(1, acc.min(spad).min(12));
                    Instruction::Matmul {
                        a_row: pick(0, spad - rows) as u16,
                        acc_row: pick(0, acc - rows) as u16,
                        rows: rows as u16,
                        swap: pick(0, 3) != 0,
                        accumulate: pick(0, 1) == 1,
                    }
                }
            }
            2 | 3 => {
                let k = pick(1, spad.min(12));
                let rows = pick(1, r);
                Instruction::MatmulOs {
                    a_row: pick(0, spad - k) as u16,
                    b_row: pick(0, spad - k) as u16,
                    k: k as u16,
                    acc_row: pick(0, acc - rows) as u16,
                    rows: rows as u16,
                    cols: pick(1, c) as u16,
                    accumulate: pick(0, 1) == 1,
                }
            }
            4 | 5 => {
                let rows = pick(1, acc.min(6));
                let mut op = VectorOp::ALL[pick(0, VectorOp::ALL.len() as u64 - 1) as usize];
                if !op.runs_on(cfg) {
                    op = VectorOp::Relu;
                }
                let src = match (op.uses_src(), op.src_is_one_row()) {
                    (true, true) => pick(0, acc - 1),
                    (true, false) => pick(0, acc - rows),
                    (false, _) => 0,
                };
                // Only BF16 ops take an immediate.
                let imm = if op.uses_imm() {
                    (pick(0, 1 << 20) as f32 / 4096.0 - 100.0).to_bits()
                } else {
                    0
                };
                Instruction::Vector {
                    op,
                    dst: pick(0, acc - rows) as u16,
                    src: src as u16,
                    rows: rows as u16,
                    imm,
                }
            }
            6 => {
                let rows = pick(1, acc.min(spad).min(6));
                let (acc_row, spad_row) = (pick(0, acc - rows) as u16, pick(0, spad - rows) as u16);
                match cfg.dtype {
                    Dtype::Bf16 => Instruction::CastBf16 { acc_row, spad_row, rows: rows as u16 },
                    Dtype::Int8 => Instruction::Requantize {
                        acc_row,
                        spad_row,
                        rows: rows as u16,
                        requant: Requant::from_scale(
                            pick(1, 1000) as f64 / 4096.0,
                            pick(0, 20) as i8 - 10,
                        )
                        .expect("scales of 1/4096 to 1000/4096 are representable"),
                    },
                }
            }
            7 => {
                let rows = pick(1, acc.min(6));
                let len = pick(1, c);
                let rs = pick(0, 9);
                let span = ((rows - 1) * rs + len) * 4;
                Instruction::LoadAcc {
                    acc_row: pick(0, acc - rows) as u16,
                    dram_addr: pick(0, dram as u64 - span) as u32,
                    rows: rows as u16,
                    len: len as u16,
                    row_stride: rs as u32,
                }
            }
            8 => {
                let rows = pick(1, spad.min(6));
                let len = pick(1, w);
                let rs = pick(0, 9);
                let span = ((rows - 1) * rs + len) * es;
                Instruction::StoreSpad {
                    spad_row: pick(0, spad - rows) as u16,
                    dram_addr: pick(0, dram as u64 - span) as u32,
                    rows: rows as u16,
                    len: len as u16,
                    row_stride: rs as u32,
                }
            }
            9 if cfg.dtype == Dtype::Bf16 => {
                let rows = pick(1, acc.min(6));
                let len = pick(1, c);
                let rs = pick(0, 9);
                let span = ((rows - 1) * rs + len) * 2;
                Instruction::StoreBf16 {
                    acc_row: pick(0, acc - rows) as u16,
                    dram_addr: pick(0, dram as u64 - span) as u32,
                    rows: rows as u16,
                    len: len as u16,
                    row_stride: rs as u32,
                }
            }
            _ => Instruction::Sync,
        };
        program.push(ins);
    }
    program.push(Instruction::Halt);
    program
}

/// Runs `program` on a fresh functional and a fresh cycle machine for `cfg` whose memories start
/// with the same random bytes, and checks what every valid program must give both: the same
/// outcome (MACs and instructions, or the same fault), every byte of every memory equal after,
/// and the timing model's count (or fault) equal to the cycle machine's. Returns the first
/// disagreement in words.
pub fn golden_pair_agree(
    cfg: &ArrayConfig,
    dram: usize,
    program: &[Instruction],
    rng: &mut SplitMix,
) -> Result<(), alloc::string::String> {
    use crate::{MachineError, Region};
    use alloc::format;
    let machine = |kind| golden(kind, *cfg, dram).map_err(|e| format!("{e}"));
    let (mut f, mut c) = (machine(GoldenKind::Functional)?, machine(GoldenKind::Cycle)?);
    let regions = [Region::Dram, Region::Spad, Region::Acc];
    for region in regions {
        let bytes: Vec<u8> = (0..f.region_size(region)).map(|_| rng.next_u64() as u8).collect();
        f.write(region, 0, &bytes).map_err(|e| format!("{e}"))?;
        c.write(region, 0, &bytes).map_err(|e| format!("{e}"))?;
    }
    let timing = crate::timing::program_cycles(cfg, program);
    match (f.run(program), c.run(program)) {
        (Ok(sf), Ok(sc)) => {
            if (sf.macs, sf.instructions) != (sc.macs, sc.instructions) {
                return Err(format!("functional {sf:?} but cycle {sc:?}"));
            }
            let cycles = sc.cycles.unwrap_or(0);
            if cycles < sc.instructions || timing != Ok(cycles) {
                return Err(format!("cycle machine {cycles} cycles, timing model {timing:?}"));
            }
        }
        (Err(ef), Err(ec)) => {
            if ef != ec {
                return Err(format!("functional faults with {ef:?} but cycle with {ec:?}"));
            }
            if let MachineError::Exec { index, kind } = ef {
                if timing != Err((index, kind)) {
                    return Err(format!("both fault with {ef:?}, the timing model {timing:?}"));
                }
            }
        }
        (rf, rc) => return Err(format!("functional {rf:?} but cycle {rc:?}")),
    }
    for region in regions {
        let size = f.region_size(region);
        let (mut bf, mut bc) = (alloc::vec![0u8; size], alloc::vec![0u8; size]);
        f.read(region, 0, &mut bf).map_err(|e| format!("{e}"))?;
        c.read(region, 0, &mut bc).map_err(|e| format!("{e}"))?;
        if let Some(at) = bf.iter().zip(&bc).position(|(x, y)| x != y) {
            return Err(format!(
                "{} differs at byte {at}: functional {:#04x}, cycle {:#04x}",
                region.name(),
                bf[at],
                bc[at]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_the_earliest_and_lengths_count() {
        assert_eq!(first_difference(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(first_difference(&[1, 2, 3], &[1, 9, 8]), Some((1, 2, 9)));
        assert_eq!(first_difference(&[1, 2], &[1, 2, 3]), Some((2, 0, 0)));
    }

    #[test]
    fn a_tolerance_admits_rounding_and_refuses_more_and_nan() {
        let tol = Tolerance { abs: 1e-6, rel: 1e-3 };
        assert!(tol.admits(1.0005, 1.0, 1.0));
        assert!(!tol.admits(1.002, 1.0, 1.0));
        assert!(tol.admits(1.002, 1.0, 3.0), "a larger scale admits more");
        assert!(!tol.admits(f64::NAN, 1.0, 1.0) && !tol.admits(1.0, f64::NAN, 1.0));
        assert_eq!(first_outside(&[1.0, 2.0], &[1.0005, 2.001], tol), None);
        assert_eq!(first_outside(&[1.0, 2.0, 3.0], &[1.0, 2.01, 9.0], tol), Some((1, 2.0, 2.01)));
        let (i, e, g) = first_outside(&[1.0, 2.0], &[1.0], tol).unwrap();
        assert_eq!(i, 1);
        assert!(e.is_nan() && g.is_nan());
        assert!(first_outside(&[1.0], &[f32::NAN], tol).is_some());
    }

    #[test]
    #[should_panic(expected = "logits: element 1 is 3, expected 2 within 0 + 0.01 x |expected|")]
    fn a_value_outside_the_tolerance_is_named() {
        assert_close("logits", &[1.0, 2.0], &[1.0, 3.0], Tolerance { abs: 0.0, rel: 0.01 });
    }

    #[test]
    #[should_panic(expected = "ws: first difference at element 4 (row 1, col 1)")]
    fn a_difference_is_named_by_row_and_column() {
        assert_bit_identical("ws", &[0, 0, 0, 0, 1], &[0, 0, 0, 0, 2], 3);
    }
}
