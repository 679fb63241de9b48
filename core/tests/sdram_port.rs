// The SDRAM as the machines' DRAM (`DramPort::Sdram`): each transfer's words go through core's
// controller (`timing::sdram`), and the functional machine, the cycle machine and the timing
// model still agree on every bit and cycle. The random-program and GEMM property tests
// (`machines.rs`) draw the port too, on DRAMs of one SDRAM row or two; these reach row misses,
// bank changes and refreshes.

use systole_core::check::{gemm_on, golden_pair_agree, random_program, SplitMix};
use systole_core::isa::Instruction;
use systole_core::machine::{golden, GoldenKind};
use systole_core::sdram::SDRAM_PART;
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape, MatrixView};
use systole_core::timing::program_cycles;
use systole_core::timing::sdram::{SdramBus, Transfer};
use systole_core::{ArrayConfig, Dataflow, DramPort, Dtype, Schedule};

fn sdram(rows: u16, dtype: Dtype, clock_mhz: f64, schedule: Schedule) -> ArrayConfig {
    let c =
        ArrayConfig::new(rows, rows, dtype).with_schedule(schedule).with_dram_port(DramPort::Sdram);
    ArrayConfig { clock_mhz, spad_depth: 1024, acc_depth: 256, ..c }
}

/// Random programs over 256 KiB of SDRAM (64 of its rows, 16 in each bank): their transfers
/// land in rows all over it, so misses and precharges are common.
#[test]
fn random_programs_over_many_sdram_rows_agree_everywhere() {
    let mut rng = SplitMix(75);
    let mut slower = 0;
    for case in 0..60 {
        let dtype = if case % 2 == 0 { Dtype::Int8 } else { Dtype::Bf16 };
        let clock = [25.0, 50.0, 100.0, 133.0][case % 4];
        let schedule = if case % 3 == 1 { Schedule::Blocking } else { Schedule::Decoupled };
        let cfg = sdram(4, dtype, clock, schedule).with_read_stages((case % 3 == 0) as u8);
        let dram = 256 << 10;
        let program = random_program(&cfg, dram, &mut rng);
        if let Err(e) = golden_pair_agree(&cfg, dram, &program, &mut rng) {
            panic!("case {case} ({clock} MHz): {e}; program {program:?}");
        }
        let on = |cfg: &ArrayConfig| program_cycles(cfg, &program).unwrap_or(0);
        slower += (on(&cfg) > on(&cfg.with_dram_port(DramPort::Row))) as u32;
    }
    // The SDRAM's timing is in the programs' cycles (a valid program may fault early).
    assert!(slower >= 30, "{slower} of 60 programs slower on the SDRAM");
}

/// A GEMM whose operands span several SDRAM rows: the same bits as on block RAM, the cycles
/// the timing model's, and more of them than the row port's, since the SDRAM moves 2 bytes a
/// cycle where the row port moves a row.
#[test]
fn a_gemm_on_the_sdram_is_exact_and_slower_than_on_block_ram() {
    for (dtype, schedule) in [
        (Dtype::Int8, Schedule::Decoupled),
        (Dtype::Bf16, Schedule::Decoupled),
        (Dtype::Bf16, Schedule::Blocking),
    ] {
        let cfg = sdram(8, dtype, 50.0, schedule);
        let shape = GemmShape { m: 40, k: 72, n: 48 };
        let mut rng = SplitMix(7);
        let a = rng.matrix((shape.m * shape.k) as usize, dtype);
        let b = rng.matrix((shape.k * shape.n) as usize, dtype);
        let (c_sdram, s_sdram, plan) = gemm_on(GoldenKind::Cycle, &cfg, shape, &a, &b);
        let (c_func, _, _) = gemm_on(GoldenKind::Functional, &cfg, shape, &a, &b);
        let row = cfg.with_dram_port(DramPort::Row);
        let (c_row, s_row, _) = gemm_on(GoldenKind::Cycle, &row, shape, &a, &b);
        assert_eq!(c_sdram, c_row, "{dtype:?}: the bits do not depend on the DRAM");
        assert_eq!(c_func, c_row, "{dtype:?}");
        let cycles = s_sdram.cycles.unwrap();
        assert_eq!(cycles, plan.cycles(), "{dtype:?}: the plan's count is the timing model's");
        let mut program = Vec::new();
        plan.emit(&mut |i| program.push(i));
        assert_eq!(program_cycles(&cfg, &program), Ok(cycles), "{dtype:?}");
        assert!(cycles > s_row.cycles.unwrap(), "{dtype:?}: {cycles} vs {:?}", s_row.cycles);
    }
}

/// Two rows of a `Load` in different rows of the same bank: the second pays a PRECHARGE and an
/// ACTIVE (tRAS from the first ACTIVE, then tRP, then tRCD), and a refresh due in the middle of
/// a transfer closes the row first, on its cadence from the run's start. A 50 MHz array's SDRAM
/// runs at 100 MHz (two SDRAM cycles an array cycle): CAS 2, tRCD 2, tRP 2, tRAS 5, tRC 7, tRFC
/// 7, a refresh every 781 SDRAM cycles; a row lands 3 array cycles after its last READ's.
#[test]
fn a_row_miss_and_a_refresh_cost_their_datasheet_cycles() {
    let cfg = sdram(4, Dtype::Int8, 50.0, Schedule::Decoupled);
    let row_bytes = SDRAM_PART.geometry.cols * 2 * SDRAM_PART.geometry.banks;
    let load = |dram_addr, row_stride| Instruction::Load {
        spad_row: 0,
        dram_addr,
        rows: 2,
        len: 2,
        row_stride,
        elem_stride: 1,
    };
    let time = |bus: &mut SdramBus, ins: &Instruction, at: u64| {
        let mut lands = Vec::new();
        let d = bus.time(&Transfer::of(&cfg, ins).unwrap(), at, |_, l| lands.push(l));
        (lands, d)
    };
    let mut bus = SdramBus::new(&cfg);
    let t = bus.controller.timing;
    assert_eq!(
        (bus.ratio, t.cas, t.rcd, t.rp, t.ras, t.rc, t.rfc, t.refi),
        (2, 2, 2, 2, 5, 7, 7, 781)
    );
    // SDRAM cycles: REFRESH at 0; ACTIVE at 7, READ at 9 (array cycle 4: the word lands in 7);
    // the next row of bank 0: PRECHARGE at 12 (tRAS: 7 + 5), ACTIVE at 14, READ at 16 (array
    // cycle 8, landing in 11).
    assert_eq!(time(&mut bus, &load(0, row_bytes), 0), (vec![7, 11], 12));
    // Refresh 1 is due at SDRAM cycle 781. A load from array cycle 388 (SDRAM 776) reads its two
    // one-word rows from the open row before it: READs at 776 and 778 (the second row's word
    // waits out the array cycle the first ended in), landing in array cycles 391 and 392. One
    // from array cycle 390 (SDRAM 780) reads its first word (READ at 780); then the refresh:
    // PRECHARGE ALL at 781, REFRESH at 783, ACTIVE at 790, READ at 792 (array cycle 396,
    // landing in 399).
    let mut late = bus.clone();
    assert_eq!(time(&mut bus, &load(row_bytes, 2), 388), (vec![3, 4], 5));
    assert_eq!(time(&mut late, &load(row_bytes, 2), 390), (vec![3, 9], 10));
    assert_eq!(late.controller.refreshes(), 2);
}

/// What the SDRAM port refuses, each naming why.
#[test]
fn the_sdram_port_refuses_what_it_cannot_time() {
    let ok = sdram(4, Dtype::Int8, 50.0, Schedule::Blocking);
    assert_eq!(ok.validate(), Ok(()));
    let fast = ArrayConfig { clock_mhz: 150.0, ..ok }.validate().unwrap_err();
    assert_eq!(
        fast.to_string(),
        "dram_port = sdram: the MT48LC16M16A2-75 runs at 133 MHz at most, not 150 MHz"
    );
    let chip = SDRAM_PART.geometry.bytes() as usize;
    assert!(golden(GoldenKind::Cycle, ok, chip).is_ok());
    let err = golden(GoldenKind::Functional, ok, chip + 1).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "dram_port = sdram: {} bytes of DRAM do not fit the MT48LC16M16A2-75 ({chip} bytes)",
            chip + 1
        )
    );
}

/// On the SDRAM a weight-stationary GEMM's A is in panels of R columns and B in panels of C
/// (`GemmLayout::packed`), so each tile a `Load` moves is one run of DRAM: its rows a tile's
/// width apart, every element contiguous. Shapes that fill no tile exactly (padded last panels,
/// uneven A and store pieces) give block RAM's row-major bits, and the cycles and instruction
/// count the plan predicts.
#[test]
fn on_the_sdram_each_tile_is_one_contiguous_run() {
    for (dtype, schedule) in [(Dtype::Int8, Schedule::Decoupled), (Dtype::Bf16, Schedule::Blocking)]
    {
        let cfg = sdram(8, dtype, 50.0, schedule);
        let es = dtype.elem_bytes() as u32;
        for (m, k, n) in [(37, 50, 29), (1, 9, 70), (70, 17, 130)] {
            let shape = GemmShape { m, k, n };
            let (layout, _) = GemmLayout::packed(&cfg, &shape).unwrap();
            assert_eq!(layout.a, MatrixView::in_panels(0, m, k, 8));
            assert_eq!(layout.b, MatrixView::in_panels(m * k * es, k, n, 8));
            let plan = GemmPlan::new(&cfg, shape, layout).unwrap();
            let mut program = Vec::new();
            plan.emit(&mut |i| program.push(i));
            for ins in &program {
                if let Instruction::Load { row_stride, elem_stride, rows, len, .. } = *ins {
                    assert!(
                        elem_stride == 1 && (rows == 1 || row_stride == len as u32),
                        "{shape:?}: {ins:?} is not one run"
                    );
                }
            }
            assert_eq!(program.len() as u64, plan.instruction_count(), "{shape:?}");
            let mut rng = SplitMix(m as u64);
            let a = rng.matrix((m * k) as usize, dtype);
            let b = rng.matrix((k * n) as usize, dtype);
            let (c_sdram, stats, _) = gemm_on(GoldenKind::Cycle, &cfg, shape, &a, &b);
            let (c_func, _, _) = gemm_on(GoldenKind::Functional, &cfg, shape, &a, &b);
            let (c_row, _, _) =
                gemm_on(GoldenKind::Cycle, &cfg.with_dram_port(DramPort::Row), shape, &a, &b);
            assert_eq!(c_sdram, c_row, "{dtype:?} {shape:?}");
            assert_eq!(c_func, c_row, "{dtype:?} {shape:?}");
            assert_eq!(stats.cycles, Some(plan.cycles()), "{dtype:?} {shape:?}");
        }
    }
}

/// Panels: element `(i, j)` of a 3 x 5 matrix in panels of 2 columns lies in panel `j / 2`, the
/// last panel one column wide; the image places each element there, in the matrix's own bytes,
/// and a plan refuses panels whose width is not a multiple of its tile's, or that are not its
/// matrix's shape, or an output-stationary array.
#[test]
fn panels_place_each_element_in_its_tile_and_plans_refuse_what_they_cannot_read() {
    let view = MatrixView::in_panels(100, 3, 5, 2);
    let elems: Vec<u8> = (0..15).collect();
    let image = view.image(&elems, 3, 5, 1).unwrap();
    // Panels [0 1; 5 6; 10 11], [2 3; 7 8; 12 13], [4; 9; 14].
    assert_eq!(image, [0, 1, 5, 6, 10, 11, 2, 3, 7, 8, 12, 13, 4, 9, 14]);
    assert_eq!((view.row_stride_at(3), view.row_stride_at(4)), (2, 1));
    assert_eq!(view.end(3, 5, 1), 100 + 15);
    assert_eq!(view.end(3, 5, 4), 100 + 60);
    assert_eq!(MatrixView::row_major(0, 5).image(&elems, 3, 5, 1), None);

    let cfg = sdram(4, Dtype::Int8, 50.0, Schedule::Decoupled);
    let shape = GemmShape { m: 8, k: 8, n: 8 };
    let (layout, _) = GemmLayout::packed(&cfg, &shape).unwrap();
    let narrow = GemmLayout { a: MatrixView::in_panels(0, 8, 8, 2), ..layout };
    let short = GemmLayout { b: MatrixView::in_panels(layout.b.addr, 7, 8, 4), ..layout };
    let os = ArrayConfig { dataflow: Dataflow::OutputStationary, ..cfg };
    for (cfg, layout) in [(cfg, narrow), (cfg, short), (os, layout)] {
        let err = GemmPlan::new(&cfg, shape, layout).unwrap_err();
        assert_eq!(
            err.to_string(),
            "panels need a weight-stationary array, A's a multiple of R columns wide and B's of \
             C, each the shape of its matrix"
        );
    }
    assert_eq!(GemmLayout::packed(&os, &shape).unwrap().0.a.panels, None);
}

/// A tall array on an SDRAM no faster than its clock moves few rows of A in a matmul's time:
/// its streamed A chunk (K too deep to stay resident) still goes in a bounded number of pieces
/// (unbounded, the step's loads overflowed their buffer and the tiler panicked), and the GEMM
/// is exact.
#[test]
fn a_tall_array_on_a_slow_sdram_splits_its_a_chunks_within_bounds() {
    let cfg = ArrayConfig {
        spad_depth: 2048,
        acc_depth: 1024,
        ..sdram(64, Dtype::Bf16, 100.0, Schedule::Decoupled)
    };
    let shape = GemmShape { m: 300, k: 2048, n: 64 };
    let mut rng = SplitMix(64);
    let a = rng.matrix((shape.m * shape.k) as usize, Dtype::Bf16);
    let b = rng.matrix((shape.k * shape.n) as usize, Dtype::Bf16);
    let (c_sdram, stats, plan) = gemm_on(GoldenKind::Functional, &cfg, shape, &a, &b);
    let (c_row, _, _) =
        gemm_on(GoldenKind::Functional, &cfg.with_dram_port(DramPort::Row), shape, &a, &b);
    assert_eq!(c_sdram, c_row);
    assert_eq!(stats.instructions, plan.instruction_count());
}
