use super::*;
use crate::testing::{f32_operand, int_word, lcg_step, settle, tick, verilog_of, yosys_eval};
use crate::vector::{AccLane, AccOp, LaneBuild};
use proptest::prelude::*;
use systole_core::numerics::bf16::cast_to_bf16;
use systole_core::numerics::int8::{rounding_shift_right, sat_rounding_doubling_high_mul};
use systole_core::{Arith, Dtype, BF16, MAX_CONVERT_STAGES};

/// Core's requantization, from the raw multiplier bits.
fn requant(x: u32, m: u32, shift: u8, zp: u8) -> u16 {
    let v = sat_rounding_doubling_high_mul(x as i32, m as i32);
    let v = rounding_shift_right(v, shift) as i64 + zp as i8 as i64;
    v.clamp(-128, 127) as i8 as u8 as u16
}

fn cast(x: u32) -> u16 {
    cast_to_bf16(BF16::acc_from_bits(x)).0
}

/// The requantize lane with the INT8 accumulator lane that lends it its multiplier, as the
/// top wires them. The cast lane reads the same word.
#[derive(LogicBlock)]
struct ConvertPath {
    clock: Signal<In, Clock>,
    enable: Signal<In, Bit>,
    x: Signal<In, Bits<32>>,
    multiplier: Signal<In, Bits<32>>,
    shift: Signal<In, Bits<5>>,
    zero_point: Signal<In, Bits<8>>,
    y: Signal<Out, Bits<16>>,
    cast_y: Signal<Out, Bits<16>>,
    lane: AccLane,
    requant: RequantLane,
    cast: CastLane,
}

impl ConvertPath {
    /// Built with `stages` registers, the requantize lane [`RequantLane::narrowed`] if `narrow`.
    fn new(stages: u8, narrow: bool) -> Self {
        let requant = RequantLane::new(stages);
        ConvertPath {
            clock: Default::default(),
            enable: Default::default(),
            x: Default::default(),
            multiplier: Default::default(),
            shift: Default::default(),
            zero_point: Default::default(),
            y: Default::default(),
            cast_y: Default::default(),
            lane: AccLane::new(Dtype::Int8, LaneBuild::default()),
            requant: if narrow { requant.narrowed() } else { requant },
            cast: CastLane::new(stages),
        }
    }
}

impl Logic for ConvertPath {
    #[hdl_gen]
    fn update(&mut self) {
        self.requant.clock.next = self.clock.val();
        self.requant.enable.next = self.enable.val();
        self.cast.clock.next = self.clock.val();
        self.cast.enable.next = self.enable.val();
        self.lane.clock.next = self.clock.val();
        self.lane.enable.next = self.enable.val();
        self.lane.op.next = AccOp::Relu;
        self.lane.x.next = self.x.val();
        self.lane.y.next = !self.x.val();
        self.lane.array.next = 0.into();
        self.lane.imm.next = self.multiplier.val() ^ 1;
        self.lane.word.next = 0.into();
        self.lane.multiplier.next = self.multiplier.val();
        self.requant.x.next = self.x.val();
        self.requant.multiplier.next = self.multiplier.val();
        self.requant.shift.next = self.shift.val();
        self.requant.zero_point.next = self.zero_point.val();
        self.requant.ll.next = self.lane.ll.val();
        self.requant.lh.next = self.lane.lh.val();
        self.requant.hl.next = self.lane.hl.val();
        self.requant.hh.next = self.lane.hh.val();
        self.y.next = self.requant.y.val();
        self.cast.x.next = self.x.val();
        self.cast_y.next = self.cast.y.val();
    }
}

fn set(uut: &mut ConvertPath, x: u32, m: u32, shift: u8, zp: u8) {
    uut.x.next = (x as u64).into();
    uut.multiplier.next = (m as u64).into();
    uut.shift.next = (shift as u64).into();
    uut.zero_point.next = (zp as u64).into();
}

/// Both lanes without registers: the converted word in the cycle it is read. The requantize
/// lane is built both ways, which must agree.
fn convert_now(x: u32, m: u32, shift: u8, zp: u8) -> (u16, u16) {
    let [wide, narrow] = [false, true].map(|narrow| {
        let mut uut = ConvertPath::new(0, narrow);
        uut.connect_all();
        set(&mut uut, x, m, shift, zp);
        settle(&mut uut);
        (uut.y.val().index() as u16, uut.cast_y.val().index() as u16)
    });
    assert_eq!(wide, narrow, "the narrowed lane: {x:#x} {m:#x} {shift} {zp:#x}");
    wide
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn cast_matches_core(x in f32_operand()) {
        prop_assert_eq!(convert_now(x, 0, 0, 0).1, cast(x), "{:#010x}", x);
    }

    #[test]
    fn requant_matches_core(x in int_word(), m in int_word(), shift in 0u8..32, zp in any::<u8>()) {
        prop_assert_eq!(convert_now(x, m, shift, zp).0, requant(x, m, shift, zp));
    }

    /// Built with `stages` registers, a word read in an enabled cycle leaves both lanes
    /// `stages` enabled cycles later, converted as core converts it; frozen cycles hold it.
    #[test]
    fn pipelined_lanes_deliver_core_words_stages_later(
        stages in 1..=MAX_CONVERT_STAGES,
        words in prop::collection::vec((int_word(), f32_operand(), any::<bool>()), 1..12),
        m in int_word(), shift in 0u8..32, zp in any::<u8>(), narrow in any::<bool>(),
    ) {
        let mut uut = ConvertPath::new(stages, narrow);
        uut.connect_all();
        // Words read in enabled cycles, oldest first (an int word for the requantize lane and
        // an f32 word for the cast lane take turns on `x`).
        let mut read: Vec<u32> = vec![];
        for (cycle, &(int, float, enable)) in words.iter().enumerate() {
            let x = if cycle % 2 == 0 { int } else { float };
            set(&mut uut, x, m, shift, zp);
            uut.enable.next = enable;
            settle(&mut uut);
            if read.len() >= stages as usize {
                let old = read[read.len() - stages as usize];
                prop_assert_eq!(uut.y.val().index() as u16, requant(old, m, shift, zp));
                prop_assert_eq!(uut.cast_y.val().index() as u16, cast(old));
            }
            if enable {
                read.push(x);
            }
            tick(&mut uut, |u| &mut u.clock);
        }
    }
}

#[test]
fn requant_edge_cases() {
    let half = 1u32 << 30;
    for (x, m, shift, zp) in [
        (5u32, half, 0u8, 0u8),
        ((-5i32) as u32, half, 0, 0),
        ((-10i32) as u32, half, 1, 0),
        (1000, half, 0, 0),
        ((-1000i32) as u32, half, 0, 0),
        (4, half, 0, (-10i8) as u8),
        (0x8000_0000, 0x8000_0000, 0, 0),
        (0x8000_0000, 0x8000_0000, 31, 0x7F),
        (0x8000_0000, 0x7FFF_FFFF, 31, 0x80),
        (0x7FFF_FFFF, 0x7FFF_FFFF, 24, 0),
        (0xFFFF_FFFF, 0x8000_0000, 0, 0),
    ] {
        assert_eq!(convert_now(x, m, shift, zp).0, requant(x, m, shift, zp), "{x:#x} {m:#x}");
    }
    // Shifted values around the clamp and around ten bits, with the zero points that move them
    // furthest: `x / 2` by `m = 2^30`, or `x / 4` shifted once more.
    let near = (-516i32..=-505).chain(-132..=-124).chain(123..=132).chain(504..=516);
    for v in near {
        for zp in [0x80u8, 0x81, 0xFF, 0, 1, 0x7E, 0x7F] {
            for (x, shift) in [(2 * v, 0u8), (4 * v, 1)] {
                let (x, want) = (x as u32, requant(x as u32, half, shift, zp));
                assert_eq!(convert_now(x, half, shift, zp).0, want, "{x:#x} {shift} {zp:#x}");
            }
        }
    }
}

/// The emitted Verilog of the unregistered lanes, evaluated by Yosys, against core (the
/// pipelined ones run in the Verilated machine, `systole-tests`).
#[test]
fn verilog_matches_core() {
    let mut seed = 0x5EED_u64;
    let mut next = || (lcg_step(&mut seed) >> 32) as u32;
    let mut cases: Vec<(u32, u32, u32, u32)> =
        (0..64).map(|i| (next(), next(), next() & 0xFF, (i * 7) % 32)).collect();
    // NaN with a payload, subnormals, -0, infinities, i32::MIN.
    for x in [0x7F80_0001u32, 0x8000_0001, 0x8000_0000, 0xFF80_0000, 0x0000_0000] {
        cases.push((x, 0x8000_0000, 0x01, 31));
    }
    let inputs: Vec<Vec<(&str, u64)>> = cases
        .iter()
        .map(|&(x, m, zp, shift)| {
            vec![
                ("x", x as u64),
                ("multiplier", m as u64),
                ("shift", shift as u64),
                ("zero_point", zp as u64),
                ("enable", 1),
            ]
        })
        .collect();
    for narrow in [false, true] {
        let verilog = verilog_of(ConvertPath::new(0, narrow));
        let got = yosys_eval(&verilog, &inputs, "y");
        for (&(x, m, zp, shift), &g) in cases.iter().zip(&got) {
            let want = requant(x, m, shift as u8, zp as u8);
            assert_eq!(g as u16, want, "{x:#x} {m:#x} {shift} narrowed {narrow}");
        }
    }
    let verilog = verilog_of(ConvertPath::new(0, false));
    let got = yosys_eval(&verilog, &inputs, "cast_y");
    for (&(x, ..), &g) in cases.iter().zip(&got) {
        assert_eq!(g as u16, cast(x), "{x:#010x}");
    }
}

#[test]
fn verilog_is_valid() {
    for stages in 0..=MAX_CONVERT_STAGES {
        yosys_validate("cast_lane", &verilog_of(CastLane::new(stages))).unwrap();
        yosys_validate("requant_lane", &verilog_of(RequantLane::new(stages))).unwrap();
        let narrowed = RequantLane::new(stages).narrowed();
        yosys_validate("requant_lane", &verilog_of(narrowed)).unwrap();
    }
}

/// The requantize lane fed by [`SerialProducts`], as a machine built with `requant_cycles = 4`
/// wires them: the sequencer's phase on `phase`, the row's word held on `x`.
#[derive(LogicBlock)]
struct SerialPath {
    clock: Signal<In, Clock>,
    enable: Signal<In, Bit>,
    phase: Signal<In, Bits<2>>,
    x: Signal<In, Bits<32>>,
    multiplier: Signal<In, Bits<32>>,
    shift: Signal<In, Bits<5>>,
    zero_point: Signal<In, Bits<8>>,
    y: Signal<Out, Bits<16>>,
    products: SerialProducts,
    requant: RequantLane,
}

impl SerialPath {
    fn new(stages: u8) -> Self {
        SerialPath {
            clock: Default::default(),
            enable: Default::default(),
            phase: Default::default(),
            x: Default::default(),
            multiplier: Default::default(),
            shift: Default::default(),
            zero_point: Default::default(),
            y: Default::default(),
            products: Default::default(),
            requant: RequantLane::new(stages),
        }
    }
}

impl Logic for SerialPath {
    #[hdl_gen]
    fn update(&mut self) {
        self.products.clock.next = self.clock.val();
        self.products.phase.next = self.phase.val();
        self.products.a.next = self.x.val();
        self.products.b.next = self.multiplier.val();
        self.requant.clock.next = self.clock.val();
        self.requant.enable.next = self.enable.val();
        self.requant.x.next = self.x.val();
        self.requant.multiplier.next = self.multiplier.val();
        self.requant.shift.next = self.shift.val();
        self.requant.zero_point.next = self.zero_point.val();
        self.requant.ll.next = self.products.ll.val();
        self.requant.lh.next = self.products.lh.val();
        self.requant.hl.next = self.products.hl.val();
        self.requant.hh.next = self.products.hh.val();
        self.y.next = self.requant.y.val();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Rows of four phases each, with frozen cycles (which hold the phase) anywhere: each
    /// row's word leaves the lane `stages` enabled cycles after its phase 3, requantized as
    /// core requantizes it, whatever the rows before it were.
    #[test]
    fn serial_products_requantize_as_core(
        stages in 0..=MAX_CONVERT_STAGES,
        rows in prop::collection::vec((int_word(), prop::collection::vec(any::<bool>(), 4)), 1..5),
        m in int_word(), shift in 0u8..32, zp in any::<u8>(),
    ) {
        let mut uut = SerialPath::new(stages);
        uut.connect_all();
        uut.multiplier.next = (m as u64).into();
        uut.shift.next = (shift as u64).into();
        uut.zero_point.next = (zp as u64).into();
        // Each enabled cycle's word on `y` that the lane owes: a row's, `stages` late.
        let mut owed: Vec<Option<u32>> = vec![None; stages as usize];
        let mut step = |uut: &mut SerialPath, phase: u64, x: u32, enable: bool| {
            uut.phase.next = phase.into();
            uut.x.next = (x as u64).into();
            uut.enable.next = enable;
            settle(uut);
            if enable {
                owed.push((phase == 3).then_some(x));
                if let Some(x) = owed.remove(0) {
                    assert_eq!(uut.y.val().index() as u16, requant(x, m, shift, zp), "{x:#x}");
                }
            }
            tick(uut, |u| &mut u.clock);
        };
        for (x, frozen) in &rows {
            for phase in 0..4u64 {
                if frozen[phase as usize] {
                    step(&mut uut, phase, *x, false);
                }
                step(&mut uut, phase, *x, true);
            }
        }
        // Drain the pipeline with the next row's phase 0.
        for _ in 0..stages {
            step(&mut uut, 0, 0, true);
        }
    }
}

#[test]
fn serial_products_verilog_is_valid() {
    yosys_validate("serial_products", &verilog_of(SerialProducts::default())).unwrap();
}
