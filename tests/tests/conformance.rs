//! Conformance: one suite of programs, run on every machine: core's functional and cycle
//! machines and the Verilated RTL (`systole_sim::RtlBuild`, through its UART).
//!
//! For each array (2x2, 4x4, 8x8, 16x16; INT8 and BF16; weight-stationary, and 4x4
//! output-stationary; under the blocking schedule and the decoupled one) the three machines start from the same random memories and run the same
//! programs one after the other: in INT8 first a GEMM of extreme products (each column's
//! largest and smallest partial sums), then tiled GEMMs of awkward shapes (1x1x1, sides one past the
//! array's, K longer than the scratchpad holds, random), every vector-unit op, the cast or
//! requantization to the scratchpad, and a GEMM with a fused epilogue. After every program each
//! memory is compared whole, bit for bit (functional == cycle == RTL), and the RTL's cycle count
//! must equal the cycle machine's. A difference is reported with the first instruction after
//! which the machines part (`systole_sim::compare::localize`).
//!
//! And one training step of the default MLP (64-64-10, batch 32) on the RTL equals the cycle
//! machine's bit for bit under both schedules: loss, predictions, every parameter and the
//! cycle count.

use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::isa::{Instruction, VectorOp};
use systole_core::layers::{Layer, Net, Shape};
use systole_core::machine::{golden, validate_program, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::tiler::{CastTo, Epilogue, GemmLayout, GemmPlan, GemmShape, MatrixView};
use systole_core::train::AccelTrainer;
use systole_core::{
    ArrayConfig, Dataflow, DramPort, Dtype, Machine, MachineError, Requant, Schedule,
};
use systole_hdl::TopConfig;
use systole_sim::compare::{first_difference, localize, Image, Outcome, Pair};
use systole_sim::{rtl_top_config, rtl_top_config_exact, BuildOptions, RtlBuild};

/// The accelerator every conformance program of one array runs on: memories small enough to
/// compare whole after every program (each byte read back is 40 simulated cycles over the
/// UART). The DRAM holds the epilogue's last KiB and the GEMMs below it: 512 bytes for them up
/// to 4 x 4, 3 KiB beyond ([`fitting`] shrinks the few of the 16 x 16's that would not fit;
/// `the_suite_fits_every_array` checks the rest fit whole).
fn conformance_top(n: u16, dtype: Dtype, dataflow: Dataflow) -> TopConfig {
    let array = ArrayConfig {
        spad_depth: 3 * n as u32 + 8,
        acc_depth: 2 * n as u32 + 8,
        ..ArrayConfig::new(n, n, dtype).with_dataflow(dataflow)
    };
    let dram_bytes = if n <= 4 { 1536 } else { 4096 };
    TopConfig { dram_bytes, fifo_depth: 64, uart_divisor: 4, ..TopConfig::new(array) }
}

/// A named program.
struct Case {
    name: String,
    program: Vec<Instruction>,
}

/// On the SDRAM: a long program dense in DRAM traffic, loads (contiguous, strided, repeated
/// elements, odd addresses) and stores of random rows, over several refresh intervals, so that
/// the refreshes' cadence, row misses and every alignment are on the pins.
fn dram_traffic_case(config: &ArrayConfig, dram: usize, rng: &mut SplitMix64) -> Case {
    let (w, es) = (config.spad_width() as u64, config.dtype.elem_bytes() as u64);
    let spad = config.spad_depth as u64;
    let mut program = vec![];
    while program.len() < 160 {
        let rows = 1 + rng.below(spad.min(6));
        let len = 1 + rng.below(w);
        let elem_stride = [0, 1, 1, 2, 3][rng.below(5) as usize];
        let row_stride = len * elem_stride.max(1) + rng.below(5);
        let extent = ((rows - 1) * row_stride + (len - 1) * elem_stride + 1) * es;
        if extent >= dram as u64 {
            continue;
        }
        let spad_row = rng.below(spad - rows + 1) as u16;
        let (rows, len) = (rows as u16, len as u16);
        program.push(Instruction::Load {
            spad_row,
            dram_addr: rng.below(dram as u64 - extent) as u32,
            rows,
            len,
            row_stride: row_stride as u32,
            elem_stride: elem_stride as u32,
        });
        let extent = ((rows as u64 - 1) * row_stride + len as u64) * es;
        program.push(Instruction::StoreSpad {
            spad_row,
            dram_addr: rng.below(dram as u64 - extent) as u32,
            rows,
            len,
            row_stride: row_stride as u32,
        });
    }
    program.push(Instruction::Halt);
    validate_program(config, &program, dram).expect("the DRAM traffic is a valid program");
    Case { name: "dram traffic".into(), program }
}

fn gemm_case(config: &ArrayConfig, dram: usize, shape: GemmShape, epilogue: Epilogue) -> Case {
    let (layout, needed) = GemmLayout::packed(config, &shape).expect("layout");
    assert!(needed <= dram, "{shape:?} needs {needed} bytes of DRAM, the suite has {dram}");
    let plan = GemmPlan::with_epilogue(config, shape, layout, epilogue).expect("plan");
    let mut program = Vec::new();
    plan.emit(&mut |i| program.push(i));
    let name = format!("gemm {}x{}x{} {epilogue:?}", shape.m, shape.k, shape.n);
    Case { name, program }
}

/// INT8: where [`extremes_case`] finds its operands: A (2 x R) at 0, B (R x C) after it, C
/// after that.
fn extremes_layout(config: &ArrayConfig) -> (GemmShape, GemmLayout) {
    let (r, c) = (config.rows as u32, config.cols as u32);
    let shape = GemmShape { m: 2, k: r, n: c };
    let layout = GemmLayout {
        a: MatrixView::row_major(0, r),
        b: MatrixView::row_major(2 * r, c),
        c: (2 * r + r * c).div_ceil(4) * 4,
        a_last_row: None,
    };
    (shape, layout)
}

/// INT8: a GEMM whose products are all extremes and whose K is the array's rows, so that each
/// column of a weight-stationary array carries the largest sums its PEs can form (B's even
/// columns, `-128 * -128` each) or the smallest (odd ones, `-128 * 127`): the PEs build their
/// partial sums no wider than those (`int8::product_sum_bits`). [`extreme_operands`] writes
/// the operands before the suite's first program, which this is.
fn extremes_case(config: &ArrayConfig, dram: usize) -> Case {
    let (shape, layout) = extremes_layout(config);
    let plan = GemmPlan::with_epilogue(config, shape, layout, Epilogue::STORE).expect("plan");
    assert!(layout.c as usize + 8 * config.cols as usize <= dram, "{shape:?} in {dram} bytes");
    let mut program = Vec::new();
    plan.emit(&mut |i| program.push(i));
    Case { name: format!("gemm {}x{}x{} of extreme products", shape.m, shape.k, shape.n), program }
}

fn extreme_operands(config: &ArrayConfig, dram: &mut [u8]) {
    let (shape, layout) = extremes_layout(config);
    let (a, b) = (layout.a.addr as usize, layout.b.addr as usize);
    dram[a..a + (shape.m * shape.k) as usize].fill(i8::MIN as u8);
    for (i, byte) in dram[b..b + (shape.k * shape.n) as usize].iter_mut().enumerate() {
        *byte = if i % shape.n as usize % 2 == 0 { i8::MIN as u8 } else { i8::MAX as u8 };
    }
}

/// The largest GEMM of up to these sides that fits `dram` (shrinking K, then M and N).
fn fitting(config: &ArrayConfig, dram: usize, mut shape: GemmShape) -> GemmShape {
    while GemmLayout::packed(config, &shape).map_or(true, |(_, n)| n > dram) {
        if shape.k > 1 {
            shape.k -= 1;
        } else {
            shape.m = (shape.m - 1).max(1);
            shape.n = (shape.n - 1).max(1);
        }
    }
    shape
}

fn cases(top: &TopConfig, rng: &mut SplitMix64) -> Vec<Case> {
    let config = top.array;
    let dram = top.dram_bytes;
    let n = config.rows as u32;
    let (spad, acc) = (config.spad_depth, config.acc_depth);
    let mut cases = Vec::new();
    if config.dtype == Dtype::Int8 {
        cases.push(extremes_case(&config, dram));
    }
    if config.dram_port == DramPort::Sdram {
        cases.push(dram_traffic_case(&config, dram, rng));
    }
    let mut shapes = vec![
        GemmShape { m: 1, k: 1, n: 1 },
        GemmShape { m: n + 1, k: 2 * n + 3, n: (n - 1).max(1) },
        // K longer than the scratchpad holds: several groups of k-tiles, accumulated.
        GemmShape { m: 2, k: spad + n + 1, n: n + 1 },
    ];
    for _ in 0..2 {
        let mut dim = || 1 + rng.below(2 * n as u64 + 2) as u32;
        shapes.push(GemmShape { m: dim(), k: dim(), n: dim() });
    }
    for (i, shape) in shapes.into_iter().enumerate() {
        let fit = fitting(&config, dram, shape);
        // The suite's DRAM holds every GEMM whole up to 8 x 8.
        assert!(n > 8 || fit == shape, "{shape:?} shrank to {fit:?} in {dram} bytes of DRAM");
        assert!(i != 2 || fit.k > spad, "{fit:?}: K no longer exceeds the scratchpad");
        cases.push(gemm_case(&config, dram, fit, Epilogue::STORE));
    }
    // A fused epilogue: bias and ReLU in the vector unit, the 32-bit store, then the cast (BF16)
    // or requantization (INT8) back to DRAM, all in the last KiB of DRAM.
    let wanted = GemmShape { m: n + 2, k: n + 1, n };
    let shape = fitting(&config, dram - 1024, wanted);
    assert!(n > 8 || shape == wanted, "the epilogue's {wanted:?} shrank to {shape:?}");
    let requant = match config.dtype {
        Dtype::Bf16 => None,
        Dtype::Int8 => Some(Requant::from_scale(0.01, 3).expect("requant")),
    };
    let epilogue = Epilogue {
        bias: Some(dram as u32 - 1024),
        relu: true,
        cast: Some(CastTo { addr: dram as u32 - 960, requant }),
        ..Epilogue::STORE
    };
    cases.push(gemm_case(&config, dram, shape, epilogue));

    // Every vector-unit op the machine runs (INT8 machines reject the BF16 ones, and `Max`
    // without their comparator, as tests/faults.rs checks), over several accumulator rows of
    // whatever the GEMMs left.
    let rows = (acc / 2).min(5) as u16;
    let ops = [
        (VectorOp::BiasAdd, (acc - 1) as u16, 0),
        (VectorOp::Relu, 0, 0),
        (VectorOp::ReluGrad, rows, 0),
        (VectorOp::Scale, 0, (-0.7734375f32).to_bits()),
        (VectorOp::Axpy, rows, 1.5f32.to_bits()),
        (VectorOp::BiasRelu, (acc - 1) as u16, 0),
        (VectorOp::Max, rows, 0),
        (VectorOp::Equal, rows, 0),
        (VectorOp::Add, rows, 0),
    ];
    assert_eq!(ops.len(), VectorOp::ALL.len(), "the suite covers every vector op");
    for (op, src, imm) in ops.into_iter().filter(|&(op, ..)| op.runs_on(&config)) {
        let ins = Instruction::Vector { op, dst: 1, src, rows, imm };
        cases.push(Case {
            name: format!("vector {}", op.name()),
            program: vec![ins, Instruction::Halt],
        });
    }
    let to_spad = match config.dtype {
        Dtype::Bf16 => Instruction::CastBf16 { acc_row: 0, spad_row: 2, rows },
        Dtype::Int8 => Instruction::Requantize {
            acc_row: 0,
            spad_row: 2,
            rows,
            requant: Requant::from_scale(0.0123, -4).expect("requant"),
        },
    };
    cases.push(Case { name: format!("{to_spad:?}"), program: vec![to_spad, Instruction::Halt] });
    // The same on words of every magnitude and sign (the operands' random bytes at the start
    // of DRAM, which no program writes), where what the GEMMs left is small.
    let words = Instruction::LoadAcc {
        acc_row: 0,
        dram_addr: 0,
        rows,
        len: config.cols,
        row_stride: config.cols as u32,
    };
    cases.push(Case {
        name: format!("{words:?}, {to_spad:?}"),
        program: vec![words, to_spad, Instruction::Halt],
    });
    if config.dtype == Dtype::Bf16 {
        // The casting store, into the DRAM's last bytes.
        let row_stride = config.cols as u32 + 1;
        let span = ((rows as u32 - 1) * row_stride + config.cols as u32) * 2;
        let store = Instruction::StoreBf16 {
            acc_row: 0,
            dram_addr: dram as u32 - span,
            rows,
            len: config.cols,
            row_stride,
        };
        cases.push(Case { name: format!("{store:?}"), program: vec![store, Instruction::Halt] });
    }
    for case in &cases {
        validate_program(&config, &case.program, dram)
            .unwrap_or_else(|e| panic!("{}: the suite built an invalid program: {e}", case.name));
    }
    cases
}

/// Runs the suite on one array: every case on the functional machine, the cycle machine and
/// the RTL, from the same memories, compared after each.
fn conformance(top: TopConfig, seed: u64) {
    let config = top.array;
    let what = |case: &str| {
        format!(
            "{}x{} {} {} {} ({} conversion stages, requantize {} cycles a row, Scale and Axpy {}, \
             PEs {}, lane adds {}, read stages {}, DRAM port {:?}, single-port scratchpad {}): \
             {case}",
            config.rows,
            config.cols,
            config.dtype.name(),
            config.dataflow.short_name(),
            config.schedule.name(),
            config.convert_stages,
            config.requant_cycles,
            config.scale_cycles,
            config.pe_stages,
            config.add_stages,
            config.read_stages,
            config.dram_port,
            config.single_port_spad
        )
    };
    let build = RtlBuild::new(&top, &BuildOptions::default())
        .unwrap_or_else(|e| panic!("{}: verilating: {e}", what("")));
    let mut functional = golden(GoldenKind::Functional, config, top.dram_bytes).unwrap();
    let mut cycle = golden(GoldenKind::Cycle, config, top.dram_bytes).unwrap();
    let mut rtl = build.machine().unwrap();
    let mut start = Image::random(&config, &rtl, seed);
    if config.dtype == Dtype::Int8 {
        extreme_operands(&config, &mut start.dram);
    }
    for m in [functional.as_mut(), cycle.as_mut(), &mut rtl as &mut dyn Machine] {
        start.load_into(m).unwrap_or_else(|e| panic!("{}: {e}", what("loading")));
    }
    // Each program starts from what the ones before it left, on every machine alike.
    let mut before = start;
    let mut rng = SplitMix64(seed);
    for case in cases(&top, &mut rng) {
        let run = |m: &mut dyn Machine| -> Outcome {
            let result = m.run(&case.program);
            if let Err(MachineError::Link(e)) = &result {
                panic!("{}: the {} machine's link: {e}", what(&case.name), m.name());
            }
            let memories =
                Image::read_from(m).unwrap_or_else(|e| panic!("{}: {e}", what(&case.name)));
            Outcome { result, memories }
        };
        let f = run(functional.as_mut());
        let c = run(cycle.as_mut());
        let r = run(&mut rtl);
        if let Some(fault) = systole_sim::machine::pins(&mut rtl).sdram_fault() {
            panic!(
                "{}: the SDRAM chip model refused the RTL's commands: {fault}",
                what(&case.name)
            );
        }
        assert!(c.result.is_ok(), "{}: {:?}", what(&case.name), c.result);
        if let Some(d) = first_difference(&config, &f, &c) {
            panic!("{}: functional vs cycle: {d}", what(&case.name));
        }
        if let Some(d) = first_difference(&config, &c, &r) {
            let mut fresh = || -> Result<Pair, MachineError> {
                let rtl = build.machine().expect("instantiating the RTL");
                Ok((golden(GoldenKind::Cycle, config, top.dram_bytes).unwrap(), Box::new(rtl)))
            };
            let at = localize(&config, &before, &case.program, &mut fresh).ok().flatten();
            panic!("{}: cycle vs RTL: {d}; first at {at:?}", what(&case.name));
        }
        before = c.memories;
    }
}

/// `systole sim` with `cli_sim::SMALL_2X2`'s flags builds this suite's 2 x 2 INT8 accelerator,
/// so the command-line tests find its model already built instead of building their own.
#[test]
fn the_clis_small_accelerator_is_the_suites() {
    let flags = crate::cli_sim::SMALL_2X2;
    let flag = |name: &str| -> u32 {
        let at = flags.iter().position(|f| *f == name).unwrap_or_else(|| panic!("{name}"));
        flags[at + 1].parse().unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(flags[flags.iter().position(|f| *f == "--dtype").unwrap() + 1], "int8");
    let (rows, cols) = (flag("--rows") as u16, flag("--cols") as u16);
    let array = ArrayConfig {
        spad_depth: flag("--spad-depth"),
        acc_depth: flag("--acc-depth"),
        ..ArrayConfig::new(rows, cols, Dtype::Int8)
    };
    // As `systole sim` makes it, with `--dram-bytes` taken exactly.
    let cli = rtl_top_config_exact(array, flag("--dram-bytes") as usize);
    assert_eq!(cli, conformance_top(2, Dtype::Int8, Dataflow::WeightStationary));
}

/// The suite's accelerator on the board's SDRAM (`DramPort::Sdram`) at an array clock of
/// `mhz`, the SDRAM at twice it (two commands an array cycle: CAS 2 at 50 MHz, 3 at 55), core's
/// chip model on the RTL's pins.
fn sdram_top(n: u16, dtype: Dtype, mhz: f64) -> TopConfig {
    let top = conformance_top(n, dtype, Dataflow::WeightStationary);
    let array = ArrayConfig { clock_mhz: mhz, ..top.array }.with_dram_port(DramPort::Sdram);
    TopConfig { array: array.with_schedule(Schedule::Blocking), ..top }
}

#[test]
fn conformance_2x2_sdram() {
    conformance(sdram_top(2, Dtype::Int8, 50.0), 21);
    conformance(sdram_top(2, Dtype::Bf16, 50.0), 22);
}

/// With registered memory reads (the 85F's builds), and at the 25F's 55 MHz (CAS 3: a word the
/// chip drives a phase early waits a cycle in the port).
#[test]
fn conformance_4x4_sdram() {
    let int8 = sdram_top(4, Dtype::Int8, 55.0);
    conformance(TopConfig { array: int8.array.with_read_stages(1), ..int8 }, 23);
    let bf16 = sdram_top(4, Dtype::Bf16, 50.0);
    conformance(TopConfig { array: bf16.array.with_read_stages(1), ..bf16 }, 24);
}

#[test]
fn conformance_2x2() {
    conformance(conformance_top(2, Dtype::Int8, Dataflow::WeightStationary), 1);
    conformance(conformance_top(2, Dtype::Bf16, Dataflow::WeightStationary), 2);
}

#[test]
fn conformance_4x4() {
    conformance(conformance_top(4, Dtype::Int8, Dataflow::WeightStationary), 3);
    conformance(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary), 4);
}

#[test]
fn conformance_4x4_output_stationary() {
    conformance(conformance_top(4, Dtype::Int8, Dataflow::OutputStationary), 5);
    conformance(conformance_top(4, Dtype::Bf16, Dataflow::OutputStationary), 6);
}

#[test]
fn conformance_8x8() {
    conformance(conformance_top(8, Dtype::Int8, Dataflow::WeightStationary), 7);
    conformance(conformance_top(8, Dtype::Bf16, Dataflow::WeightStationary), 8);
}

#[test]
fn conformance_16x16_int8() {
    conformance(conformance_top(16, Dtype::Int8, Dataflow::WeightStationary), 9);
}

#[test]
fn conformance_16x16_bf16() {
    conformance(conformance_top(16, Dtype::Bf16, Dataflow::WeightStationary), 10);
}

/// [`conformance_top`] under the decoupled schedule (docs/DECISIONS.md 41).
fn decoupled(n: u16, dtype: Dtype, dataflow: Dataflow) -> TopConfig {
    let top = conformance_top(n, dtype, dataflow);
    TopConfig { array: top.array.with_schedule(Schedule::Decoupled), ..top }
}

#[test]
fn conformance_2x2_decoupled() {
    conformance(decoupled(2, Dtype::Int8, Dataflow::WeightStationary), 11);
    conformance(decoupled(2, Dtype::Bf16, Dataflow::WeightStationary), 12);
}

#[test]
fn conformance_4x4_output_stationary_decoupled() {
    conformance(decoupled(4, Dtype::Int8, Dataflow::OutputStationary), 13);
    conformance(decoupled(4, Dtype::Bf16, Dataflow::OutputStationary), 14);
}

#[test]
fn conformance_8x8_decoupled() {
    conformance(decoupled(8, Dtype::Int8, Dataflow::WeightStationary), 15);
    conformance(decoupled(8, Dtype::Bf16, Dataflow::WeightStationary), 16);
}

/// The conversion lanes pipelined (`ArrayConfig::convert_stages`, as the boards build them):
/// casts, requantizations and casting stores land each row that many cycles late, on every
/// machine, under both schedules.
#[test]
fn conformance_with_pipelined_conversions() {
    let staged =
        |top: TopConfig, stages| TopConfig { array: top.array.with_convert_stages(stages), ..top };
    conformance(staged(conformance_top(4, Dtype::Int8, Dataflow::WeightStationary), 3), 19);
    conformance(staged(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary), 1), 20);
    conformance(staged(decoupled(4, Dtype::Int8, Dataflow::OutputStationary), 2), 21);
    conformance(staged(decoupled(2, Dtype::Bf16, Dataflow::WeightStationary), 3), 22);
}

/// Requantize lanes that make their products over four cycles (`ArrayConfig::requant_cycles`,
/// as the Alchitry Cu builds them): each `Requantize` row takes four cycles, on every machine,
/// under both schedules, pipelined or not.
#[test]
fn conformance_with_serial_requantize() {
    let serial = |top: TopConfig, stages| TopConfig {
        array: top.array.with_convert_stages(stages).with_requant_cycles(4),
        ..top
    };
    let mut tall = conformance_top(4, Dtype::Int8, Dataflow::WeightStationary);
    tall.array.cols = 1;
    conformance(serial(tall, 3), 23);
    conformance(serial(decoupled(2, Dtype::Int8, Dataflow::WeightStationary), 0), 24);
}

/// BF16 lanes that register their product (`ArrayConfig::scale_cycles`): each `Scale` and
/// `Axpy` row takes two cycles, on every machine, under both schedules.
#[test]
fn conformance_with_paced_scale() {
    let paced = |top: TopConfig, stages| TopConfig {
        array: top.array.with_convert_stages(stages).with_scale_cycles(2),
        ..top
    };
    conformance(paced(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary), 0), 25);
    conformance(paced(decoupled(2, Dtype::Bf16, Dataflow::WeightStationary), 1), 26);
}

/// PEs that register their products (`ArrayConfig::pe_stages`): every matmul's results leave
/// the array a cycle later, on every machine, in both dataflows, under both schedules.
#[test]
fn conformance_with_staged_pes() {
    let staged = |top: TopConfig| TopConfig { array: top.array.with_pe_stages(2), ..top };
    conformance(staged(conformance_top(4, Dtype::Int8, Dataflow::WeightStationary)), 27);
    conformance(staged(conformance_top(3, Dtype::Bf16, Dataflow::OutputStationary)), 28);
    conformance(staged(decoupled(4, Dtype::Bf16, Dataflow::WeightStationary)), 29);
    conformance(staged(decoupled(2, Dtype::Int8, Dataflow::OutputStationary)), 30);
}

/// BF16 lanes whose f32 add is staged (`ArrayConfig::add_stages`): every matmul's results
/// land a cycle later and every row that adds takes a cycle more, with paced products too, in
/// both dataflows (the blocking machine: the decoupled one is not built with it); and PEs that
/// stage their f32 add as well (`pe_stages` 3: input rows skewed two cycles a PE row, results
/// `R + 1` cycles later), a weight-stationary array of four rows whose lanes also split their
/// product (`scale_cycles` 3: a `Scale` row three cycles, an `Axpy` row four); and the same
/// array with the normalised sums registered too, in the PEs (`pe_stages` 4: rows skewed three
/// cycles a PE row) and in the lanes (`add_stages` 3: results two cycles later, an adding row
/// two cycles more, an `Axpy` row five), checking words at the FIFO's head, registering the
/// candidate after it and aligning the lanes' sums compactly, as the ULX3S 85F's BF16 build
/// of DECISIONS 102 did.
#[test]
fn conformance_with_staged_adds() {
    let staged = |top: TopConfig| TopConfig { array: top.array.with_add_stages(2), ..top };
    conformance(staged(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary)), 31);
    let paced = |top: TopConfig| TopConfig {
        array: top.array.with_scale_cycles(2).with_pe_stages(2).with_convert_stages(1),
        ..top
    };
    conformance(staged(paced(conformance_top(3, Dtype::Bf16, Dataflow::OutputStationary))), 32);
    let pipelined = |top: TopConfig| TopConfig {
        array: top.array.with_scale_cycles(3).with_pe_stages(3),
        ..top
    };
    conformance(staged(pipelined(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary))), 33);
    // The ULX3S 85F's BF16 build of DECISIONS 102: checked at the FIFO's head, the candidate
    // registered, the lanes' aligner compact (the other machines' lanes align in parallel).
    let deep = |top: TopConfig| TopConfig {
        array: top.array.with_scale_cycles(3).with_pe_stages(4).with_add_stages(3),
        checks_at_queue: false,
        head_register: true,
        parallel_align: false,
        ..top
    };
    conformance(deep(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary)), 34);
}

/// PEs paired two to an iCE40 DSP in its dual 8 x 8 mode (`TopConfig::pe_pairs`, the
/// iCEBreaker's build), each DSP simulated by Yosys' own model of `SB_MAC16`: a square array
/// with one PE alone in a DSP, the iCEBreaker's column of eight, and the decoupled top.
#[test]
fn conformance_with_pe_pairs() {
    let paired =
        |top: TopConfig| TopConfig { array: top.array.with_pe_stages(2), pe_pairs: true, ..top };
    conformance(paired(conformance_top(3, Dtype::Int8, Dataflow::WeightStationary)), 41);
    let square = conformance_top(8, Dtype::Int8, Dataflow::WeightStationary);
    let column = TopConfig { array: ArrayConfig { cols: 1, ..square.array }, ..square };
    conformance(paired(column), 42);
    conformance(paired(decoupled(2, Dtype::Int8, Dataflow::WeightStationary)), 43);
}

/// Each column summed in an adder tree (`TopConfig::adder_tree`): one-stage and two-stage
/// products, and the iCEBreaker's column of eight with its products paired in DSPs.
#[test]
fn conformance_with_adder_trees() {
    let tree = |top: TopConfig| TopConfig { adder_tree: true, ..top };
    conformance(tree(conformance_top(3, Dtype::Int8, Dataflow::WeightStationary)), 51);
    let two_stage = conformance_top(4, Dtype::Int8, Dataflow::WeightStationary);
    conformance(tree(TopConfig { array: two_stage.array.with_pe_stages(2), ..two_stage }), 52);
    let square = conformance_top(8, Dtype::Int8, Dataflow::WeightStationary);
    let column = TopConfig {
        array: ArrayConfig { cols: 1, ..square.array }.with_pe_stages(2),
        pe_pairs: true,
        ..square
    };
    conformance(tree(column), 53);
}

/// The largest decoupled machine, in INT8 only: with its BF16 twin this test took 650 s on a
/// cold model cache (INT8 alone: 77 s once built), and what the twin adds is covered by the
/// 16 x 16 BF16 blocking machine and the 8 x 8 BF16 decoupled one, from the same generators
/// (docs/DECISIONS.md 97).
#[test]
fn conformance_16x16_decoupled() {
    conformance(decoupled(16, Dtype::Int8, Dataflow::WeightStationary), 17);
}

/// One step of the default MLP (`systole train`'s 64-64-10, batch 32), a convolution and a
/// LeNet-shaped CNN (max and average pooling) on a 4x4 BF16 RTL, the accelerator `systole train
/// --machine rtl --rows 4 --cols 4` builds (blocking and decoupled; LeNet also on the blocking
/// machine with paced lanes and two-stage PEs, as the BF16 boards build it, and on both with
/// registered memory reads): loss, predictions,
/// cycles and every parameter equal the cycle machine's, bit for bit.
#[test]
fn a_training_step_on_the_rtl_equals_the_cycle_machine() {
    let sgd = Sgd::DEFAULT;
    let spec =
        MlpSpec { inputs: 64, hidden: heapless::Vec::from_slice(&[64]).unwrap(), classes: 10 };
    let mlp = spec.net().unwrap();
    // A convolution on the digits' 8 x 8 images: its patches made on the machine (im2col).
    let conv = Layer::Conv2d { in_channels: 1, out_channels: 4, kernel: 3, stride: 1, padding: 1 };
    let cnn = Net::new(
        Shape::Image { c: 1, h: 8, w: 8 },
        &[conv, Layer::Relu, Layer::Flatten, Layer::Dense { inputs: 256, outputs: 10 }],
    )
    .unwrap();
    // LeNet's shape on the same images: two convolutions, each with a ReLU and a pooling, max
    // (vector-unit `Max`, `Equal` and the gradient's selects) then average (`Axpy` sums and
    // `Scale`, the ReLU's gradient fused into its gradient), the second's patches made from the
    // first pooling's output and its input gradient added back (col2im).
    let conv2 = Layer::Conv2d { in_channels: 6, out_channels: 8, kernel: 3, stride: 1, padding: 0 };
    let (pool, avg) =
        (Layer::MaxPool2d { kernel: 2, stride: 2 }, Layer::AvgPool2d { kernel: 2, stride: 2 });
    let lenet = Net::new(
        Shape::Image { c: 1, h: 8, w: 8 },
        &[
            Layer::Conv2d { in_channels: 1, out_channels: 6, kernel: 3, stride: 1, padding: 1 },
            Layer::Relu,
            pool,
            conv2,
            Layer::Relu,
            avg,
            Layer::Flatten,
            Layer::Dense { inputs: 8, outputs: 10 },
        ],
    )
    .unwrap();
    let every_net = [&mlp, &cnn, &lenet];
    for (config, nets) in [
        (ArrayConfig::new(4, 4, Dtype::Bf16), &every_net[..]),
        (ArrayConfig::new(4, 4, Dtype::Bf16).with_schedule(Schedule::Decoupled), &every_net[..]),
        // The SGD updates' axpys, col2im and the pooling gradients on paced lanes with a
        // staged add, and every matmul's rows two cycles late: LeNet runs every one of them.
        (
            ArrayConfig::new(4, 4, Dtype::Bf16)
                .with_scale_cycles(2)
                .with_pe_stages(2)
                .with_add_stages(2),
            &every_net[2..],
        ),
        // Memories that register their reads (`read_stages` 1): under the decoupled schedule
        // (the transposing loads of the backward pass, streamed matmuls, frozen cycles), and
        // under the blocking one with the lanes and PEs above.
        (
            ArrayConfig::new(4, 4, Dtype::Bf16)
                .with_schedule(Schedule::Decoupled)
                .with_read_stages(1),
            &every_net[2..],
        ),
        (
            ArrayConfig::new(4, 4, Dtype::Bf16)
                .with_scale_cycles(2)
                .with_pe_stages(2)
                .with_add_stages(2)
                .with_read_stages(1),
            &every_net[2..],
        ),
    ] {
        let graphs: Vec<Graph> =
            nets.iter().map(|net| Graph::network_training(net, sgd).unwrap()).collect();
        let dram = graphs
            .iter()
            .map(|g| AccelTrainer::dram_needed(g, &config, BATCH, BATCH).unwrap())
            .max()
            .unwrap();
        let top = rtl_top_config(config, dram);
        let build = RtlBuild::new(&top, &BuildOptions::default()).expect("verilating");
        for graph in graphs {
            training_step_on_the_rtl(&build, graph, config, top.dram_bytes);
        }
    }
}

const BATCH: u32 = 32;

fn training_step_on_the_rtl(build: &RtlBuild, graph: Graph, config: ArrayConfig, dram: usize) {
    let rtl = build.machine().unwrap();
    let params = Params::init(&graph.net, 0);
    let mut on_rtl = AccelTrainer::new(Box::new(rtl), graph.clone(), &params).unwrap();
    let cycle = golden(GoldenKind::Cycle, config, dram).unwrap();
    let mut on_cycle = AccelTrainer::new(cycle, graph, &params).unwrap();
    let mut rng = SplitMix64(11);
    let x: Vec<f32> = (0..BATCH * 64).map(|_| rng.below(17) as f32 / 16.0).collect();
    let y: Vec<u16> = (0..BATCH).map(|_| rng.below(10) as u16).collect();
    let (want, want_work) = on_cycle.step(&x, &y).unwrap();
    let (got, got_work) = on_rtl.step(&x, &y).unwrap();
    let what = network_kind(&on_cycle.graph.net);
    assert_eq!(got, want, "{config:?}, {what}: loss and predictions");
    assert_eq!(got_work, want_work, "{config:?}, {what}: cycles and MACs");
    let (a, b) = (on_cycle.params().unwrap(), on_rtl.params().unwrap());
    assert!(a != params, "{config:?}, {what}: the step changed the parameters");
    assert!(a == b, "{config:?}, {what}: every parameter after the step");
}

/// `mlp`, `cnn` or `pooled cnn`, for messages.
fn network_kind(net: &Net) -> &'static str {
    if net.mlp_widths().is_some() {
        "mlp"
    } else if net
        .layers
        .iter()
        .any(|l| matches!(l, Layer::MaxPool2d { .. } | Layer::AvgPool2d { .. }))
    {
        "pooled cnn"
    } else {
        "cnn"
    }
}

/// Every array's GEMMs (the epilogue's too) fit its suite's DRAM unshrunk up to 8 x 8, for many
/// seeds (the suite itself runs one seed per array, after Verilating it).
#[test]
fn the_suite_fits_every_array() {
    for n in [2u16, 3, 4, 8, 16] {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            for df in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
                // Square, and one column tall (the paired and serial-requantize machines).
                for cols in [n, 1] {
                    let mut top = conformance_top(n, dtype, df);
                    top.array.cols = cols;
                    for seed in 1..60 {
                        let c = cases(&top, &mut SplitMix64(seed));
                        assert!(c.len() > 6, "{n}x{cols} {}: {} cases", dtype.name(), c.len());
                    }
                }
            }
        }
    }
}

/// A machine built without its program checks, as the iCEBreaker's small machine may be: every
/// program the host validated runs with the checking machine's bits and cycles.
#[test]
fn conformance_without_program_checks() {
    let mut tall = conformance_top(4, Dtype::Int8, Dataflow::WeightStationary);
    tall.array = tall.array.with_pe_stages(2).with_convert_stages(3);
    tall.array.cols = 1;
    let lean = TopConfig { program_checks: false, checks_at_queue: false, pe_pairs: true, ..tall };
    conformance(lean, 58);
}

/// Memories that register their read words once more (`ArrayConfig::read_stages` 1, the ECP5
/// block RAM's output register; docs/DECISIONS.md 106): every instruction starts its work a
/// cycle after dispatch and lands its rows a cycle later, on every machine. The blocking
/// machine with every write stage and the candidate registered; output-stationary with staged
/// PEs, paced products and staged adds; the 85F's BF16 pipelines of DECISIONS 102 and 119;
/// serial requantization on a column; and the decoupled machine as the 85F's INT8 build has
/// it (streamed matmuls, the scratchpad's write stage, pipelined conversions),
/// output-stationary in BF16, and with paired products.
#[test]
fn conformance_with_read_stages() {
    let read = |top: TopConfig| TopConfig { array: top.array.with_read_stages(1), ..top };
    let written = |top: TopConfig| TopConfig {
        array: top.array.with_convert_stages(3),
        spad_write_stage: true,
        acc_write_stage: true,
        dram_write_stage: true,
        head_register: true,
        checks_at_queue: false,
        ..top
    };
    conformance(read(written(conformance_top(4, Dtype::Int8, Dataflow::WeightStationary))), 51);
    let os = |top: TopConfig| TopConfig {
        array: top
            .array
            .with_pe_stages(2)
            .with_convert_stages(1)
            .with_scale_cycles(2)
            .with_add_stages(2),
        ..top
    };
    conformance(read(os(conformance_top(3, Dtype::Bf16, Dataflow::OutputStationary))), 52);
    // Four-stage PEs, on RTL revision 3: its lanes normalise the sum they form themselves
    // (revision 4's sum beside the aligner is the default's, below).
    let deep = |top: TopConfig| TopConfig {
        array: top.array.with_scale_cycles(3).with_pe_stages(4).with_add_stages(3),
        head_register: true,
        rtl_revision: 3,
        ..top
    };
    conformance(read(deep(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary))), 53);
    // The ULX3S 85F's BF16 default (DECISIONS 119): three-stage PEs that sum in their
    // aligner's stage, lanes of three stages that sum beside theirs, words checked at the
    // FIFO's head, on the RTL revision it was built on (4).
    let balanced = |top: TopConfig| TopConfig {
        array: top.array.with_scale_cycles(3).with_pe_stages(3).with_add_stages(3),
        acc_write_stage: true,
        head_register: true,
        checks_at_queue: false,
        rtl_revision: 4,
        ..top
    };
    conformance(read(balanced(conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary))), 59);
    let serial = |top: TopConfig| TopConfig {
        array: top.array.with_convert_stages(2).with_requant_cycles(4).with_pe_stages(2),
        ..top
    };
    let mut tall = conformance_top(4, Dtype::Int8, Dataflow::WeightStationary);
    tall.array.cols = 1;
    conformance(read(serial(tall)), 54);
    // The 85F's INT8 default's shape (DECISIONS 109): tagged weights, two-stage PEs.
    let streamed = |top: TopConfig| TopConfig {
        array: top.array.with_convert_stages(3).with_pe_stages(2),
        spad_write_stage: true,
        ..top
    };
    conformance(read(streamed(decoupled(4, Dtype::Int8, Dataflow::WeightStationary))), 55);
    let staged = |top: TopConfig| TopConfig { array: top.array.with_pe_stages(2), ..top };
    conformance(read(staged(decoupled(3, Dtype::Bf16, Dataflow::OutputStationary))), 56);
    let paired =
        |top: TopConfig| TopConfig { array: top.array.with_pe_stages(2), pe_pairs: true, ..top };
    conformance(read(paired(decoupled(2, Dtype::Int8, Dataflow::WeightStationary))), 57);
}

/// A DRAM that moves a byte a cycle (`ArrayConfig::dram_port`, docs/DECISIONS.md 114): every
/// row of a `Load`, `Store`, `LoadAcc` or `StoreSpad` takes a cycle per byte, on every
/// machine. Both dataflows; the iCEBreaker's column of eight as its byte-port build has it
/// (products paired in DSPs, pipelined conversions, checks left to the host); and with every
/// memory's reads registered.
#[test]
fn conformance_with_a_byte_port() {
    let byte =
        |top: TopConfig| TopConfig { array: top.array.with_dram_port(DramPort::Byte), ..top };
    conformance(byte(conformance_top(4, Dtype::Int8, Dataflow::WeightStationary)), 61);
    conformance(byte(conformance_top(3, Dtype::Int8, Dataflow::OutputStationary)), 62);
    let square = conformance_top(8, Dtype::Int8, Dataflow::WeightStationary);
    let column = TopConfig {
        array: ArrayConfig { cols: 1, ..square.array }.with_pe_stages(2).with_convert_stages(3),
        pe_pairs: true,
        program_checks: false,
        checks_at_queue: false,
        ..square
    };
    conformance(byte(column), 63);
    let read = conformance_top(4, Dtype::Int8, Dataflow::WeightStationary);
    conformance(byte(TopConfig { array: read.array.with_read_stages(1), ..read }), 64);
}

/// A single-port scratchpad (`ArrayConfig::single_port_spad`): `LoadWeights` waits for the
/// array and `Matmul` for the weight loader, each addressing port A in turn, and no read is
/// addressed in the cycle of a write. The iCEBreaker's column of eight as its byte-port build
/// has it, its scratchpad in the UP5K's SPRAMs (Yosys' model of the cell, whose read in the
/// cycle of a write is undefined), and a BF16 machine of two columns with registered reads.
#[test]
fn conformance_with_a_single_port_scratchpad() {
    let single = |top: TopConfig| TopConfig { array: top.array.with_single_port_spad(true), ..top };
    let square = conformance_top(8, Dtype::Int8, Dataflow::WeightStationary);
    let column = TopConfig {
        array: ArrayConfig { cols: 1, ..square.array }
            .with_pe_stages(2)
            .with_convert_stages(3)
            .with_dram_port(DramPort::Byte),
        pe_pairs: true,
        program_checks: false,
        checks_at_queue: false,
        head_register: true,
        spad_spram: true,
        ..square
    };
    conformance(single(column), 68);
    let read = conformance_top(3, Dtype::Bf16, Dataflow::WeightStationary);
    let read =
        TopConfig { array: ArrayConfig { cols: 2, ..read.array }.with_read_stages(1), ..read };
    conformance(single(read), 69);
}

/// A BF16 machine on the byte port: each element two bytes, low first, in `Load`, `StoreSpad`
/// and `StoreBf16` rows (its cast pipelined), both dataflows, and with registered reads.
#[test]
fn conformance_with_a_bf16_byte_port() {
    let byte =
        |top: TopConfig| TopConfig { array: top.array.with_dram_port(DramPort::Byte), ..top };
    let ws = conformance_top(4, Dtype::Bf16, Dataflow::WeightStationary);
    conformance(byte(TopConfig { array: ws.array.with_convert_stages(2), ..ws }), 65);
    conformance(byte(conformance_top(3, Dtype::Bf16, Dataflow::OutputStationary)), 66);
    let read = conformance_top(2, Dtype::Bf16, Dataflow::WeightStationary);
    conformance(byte(TopConfig { array: read.array.with_read_stages(1), ..read }), 67);
}
