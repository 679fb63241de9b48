//! The MACs and PEs against core, in rust-hdl's simulation and in Yosys.

use super::*;
use crate::testing::{bf16_operand, f32_operand, settle, tick, verilog_of, yosys_eval};
use proptest::prelude::*;
use systole_core::{Arith, Bf16, Dtype, Int8, BF16};

/// `acc + a * b` by the one-stage MAC, plain and lean ([`Mac::lean`]), which must agree.
fn mac(dtype: Dtype, a: u16, b: u16, acc: u32) -> u32 {
    let y = |mut uut: Mac| {
        uut.a.next = (a as u64).into();
        uut.b.next = (b as u64).into();
        uut.acc.next = (acc as u64).into();
        settle(&mut uut);
        uut.y.val().to_u32()
    };
    let plain = y(Mac::new(dtype, 1));
    assert_eq!(y(Mac::new(dtype, 1).lean()), plain, "lean {a:#x} {b:#x} {acc:#x}");
    plain
}

/// A MAC of `dtype` and `stages`, lean or not.
fn mac_of(dtype: Dtype, stages: u8, lean: bool) -> Mac {
    let mac = Mac::new(dtype, stages);
    if lean {
        mac.lean()
    } else {
        mac
    }
}

fn core_int8(a: u8, b: u8, acc: u32) -> u32 {
    Int8::acc_to_bits(Int8::mac(acc as i32, a as i8 as i32, b as i8 as i32))
}

/// The PE's partial sums are datapath values (never subnormal); the accumulator reads DAZ.
fn core_bf16(a: u16, b: u16, acc: u32) -> u32 {
    let acc = BF16::acc_from_bits(acc);
    BF16::acc_to_bits(BF16::mac(acc, Bf16(a).to_f32_daz(), Bf16(b).to_f32_daz()))
}

fn int8_operand() -> impl Strategy<Value = u8> {
    prop_oneof![any::<u8>(), prop::sample::select(vec![0x80u8, 0x7F, 0xFF, 0, 1])]
}

/// A two-stage MAC over `steps` of `(a, b, acc, enable)`: each clock edge takes the pair when
/// enabled; after it, `y` for that step's `acc` is read. Returns the `y`s, and what core says
/// they are: `acc` plus the product of the last enabled pair (the first step is enabled).
fn staged_run(dtype: Dtype, lean: bool, steps: &[(u16, u16, u32, bool)]) -> (Vec<u32>, Vec<u32>) {
    let mut uut = mac_of(dtype, 2, lean);
    assert!(uut.staged());
    uut.connect_all();
    let (mut got, mut want) = (vec![], vec![]);
    let mut pair = (0u16, 0u16);
    for (i, &(a, b, acc, enable)) in steps.iter().enumerate() {
        let enable = enable || i == 0;
        uut.a.next = (a as u64).into();
        uut.b.next = (b as u64).into();
        uut.enable.next = enable;
        tick(&mut uut, |m| &mut *m.clock);
        if enable {
            pair = (a, b);
        }
        // The operands change after the edge: `y` must not follow them.
        uut.a.next = (a as u64 ^ 0x5A5A).into();
        uut.b.next = (b as u64 ^ 0x0F0F).into();
        uut.acc.next = (acc as u64).into();
        settle(&mut uut);
        got.push(uut.y.val().to_u32());
        want.push(match dtype {
            Dtype::Int8 => core_int8(pair.0 as u8, pair.1 as u8, acc),
            Dtype::Bf16 => core_bf16(pair.0, pair.1, acc),
        });
    }
    (got, want)
}

/// A BF16 MAC of three or four `stages` over `steps` of `(a, b, acc, enable)`: each enabled
/// edge registers its pair's product and the alignment of its `acc` with the product
/// registered before (and, on four stages, the normalised sum of the alignment registered
/// before); after it, `y` is read. Returns the `y`s, and what core says they are: on three
/// stages the `acc` of the last enabled edge plus the product of the enabled pair before it, on
/// four what three stages gave after the enabled edge before (the first step is enabled).
/// Built lean, the sum is formed in the aligner's stage; the results are the same.
fn pipelined_run(stages: u8, lean: bool, steps: &[(u16, u16, u32, bool)]) -> (Vec<u32>, Vec<u32>) {
    let mut uut = mac_of(Dtype::Bf16, stages, lean);
    assert!(uut.staged());
    uut.connect_all();
    let (mut got, mut want) = (vec![], vec![]);
    let (mut pair, mut sum, mut late) = ((0u16, 0u16), 0u32, 0u32);
    for (i, &(a, b, acc, enable)) in steps.iter().enumerate() {
        let enable = enable || i == 0;
        uut.a.next = (a as u64).into();
        uut.b.next = (b as u64).into();
        uut.acc.next = (acc as u64).into();
        uut.enable.next = enable;
        tick(&mut uut, |m| &mut *m.clock);
        if enable {
            late = sum;
            sum = core_bf16(pair.0, pair.1, acc);
            pair = (a, b);
        }
        // Every input changes after the edge: `y` must follow none of them.
        uut.a.next = (a as u64 ^ 0x5A5A).into();
        uut.b.next = (b as u64 ^ 0x0F0F).into();
        uut.acc.next = (acc as u64 ^ 0x4321_0000).into();
        settle(&mut uut);
        got.push(uut.y.val().to_u32());
        want.push(if stages == 4 { late } else { sum });
    }
    (got, want)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn int8_mac_matches_core(a in int8_operand(), b in int8_operand(), acc in any::<u32>()) {
        prop_assert_eq!(mac(Dtype::Int8, a as u16, b as u16, acc), core_int8(a, b, acc));
    }

    #[test]
    fn bf16_mac_matches_core(a in bf16_operand(), b in bf16_operand(), acc in f32_operand()) {
        prop_assert_eq!(
            mac(Dtype::Bf16, a, b, acc),
            core_bf16(a, b, acc),
            "{:#06x} * {:#06x} + {:#010x}", a, b, acc
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]
    #[test]
    fn staged_int8_mac_adds_the_last_enabled_product(
        steps in prop::collection::vec(
            (int8_operand(), int8_operand(), any::<u32>(), any::<bool>()), 1..10)
    ) {
        let steps: Vec<_> =
            steps.into_iter().map(|(a, b, acc, en)| (a as u16, b as u16, acc, en)).collect();
        let (got, want) = staged_run(Dtype::Int8, false, &steps);
        prop_assert_eq!(got, want);
    }

    #[test]
    fn staged_bf16_mac_adds_the_last_enabled_product(
        steps in prop::collection::vec(
            (bf16_operand(), bf16_operand(), f32_operand(), any::<bool>()), 1..10)
    ) {
        for lean in [false, true] {
            let (got, want) = staged_run(Dtype::Bf16, lean, &steps);
            prop_assert_eq!(got, want, "lean {}", lean);
        }
    }

    #[test]
    fn pipelined_bf16_mac_sums_the_last_enabled_acc_and_the_product_before(
        steps in prop::collection::vec(
            (bf16_operand(), bf16_operand(), f32_operand(), any::<bool>()), 1..10)
    ) {
        for (stages, lean) in [(3, false), (4, false), (3, true), (4, true)] {
            let (got, want) = pipelined_run(stages, lean, &steps);
            prop_assert_eq!(got, want, "{} stages, lean {}", stages, lean);
        }
    }
}

#[test]
fn edge_operands() {
    for (a, b) in [(0x80u8, 0x80u8), (0x80, 0x7F), (0x7F, 0x7F), (0xFF, 0x80)] {
        for acc in [0u32, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF] {
            assert_eq!(mac(Dtype::Int8, a as u16, b as u16, acc), core_int8(a, b, acc));
        }
    }
    let specials = [0u16, 0x8000, 0x0001, 0x8001, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0x7F7F];
    for a in specials {
        for b in specials {
            for acc in [0u32, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x0000_0001, 0x4000_0000] {
                assert_eq!(mac(Dtype::Bf16, a, b, acc), core_bf16(a, b, acc));
            }
        }
    }
}

/// The emitted Verilog of both MACs, evaluated by Yosys, against core.
#[test]
fn verilog_matches_core() {
    let mut vectors = vec![];
    let mut seed = 0x1234_5678_9ABC_DEF0u64;
    for _ in 0..200 {
        let r = crate::testing::lcg_step(&mut seed) >> 16;
        vectors.push((r as u16, (r >> 16) as u16, (r >> 32) as u32 ^ (seed as u32)));
    }
    vectors.extend([(0x80, 0x80, 0), (0x7F80, 0, 0), (0x7F80, 0xFF80, 0x7F80_0000)]);
    let inputs: Vec<Vec<(&str, u64)>> = vectors
        .iter()
        .map(|&(a, b, acc)| vec![("a", a as u64), ("b", b as u64), ("acc", acc as u64)])
        .collect();
    let int8 = yosys_eval(&verilog_of(Mac::new(Dtype::Int8, 1)), &inputs, "y");
    let bf16 = yosys_eval(&verilog_of(Mac::new(Dtype::Bf16, 1)), &inputs, "y");
    let lean = yosys_eval(&verilog_of(Mac::new(Dtype::Bf16, 1).lean()), &inputs, "y");
    assert_eq!(lean, bf16, "the lean MAC");
    for (i, &(a, b, acc)) in vectors.iter().enumerate() {
        assert_eq!(int8[i] as u32, core_int8(a as u8, b as u8, acc), "int8 {a} {b} {acc}");
        assert_eq!(bf16[i] as u32, core_bf16(a, b, acc), "bf16 {a:#x} {b:#x} {acc:#x}");
    }
}

/// Shadow loading, the swap bypass, and the pass-through registers.
#[test]
fn ws_pe_swaps_its_shadow_in() {
    let mut pe = PeWs::new(Mac::new(Dtype::Int8, 1), WsWeights::ShadowSwap);
    pe.connect_all();
    pe.enable.next = true;
    pe.w_in.next = 3u64.into();
    pe.shift.next = true;
    tick(&mut pe, |p| &mut p.clock);
    pe.shift.next = false;
    pe.a_in.next = 5u64.into();
    pe.p_in.next = 100u64.into();
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(pe.p_out.val().to_u32(), 100, "active weight still zero");
    pe.swap.next = true;
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(pe.p_out.val().to_u32(), 115, "the swap cycle uses the shadow");
    pe.swap.next = false;
    pe.a_in.next = 0xFEu64.into(); // -2
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(pe.p_out.val().to_u32(), 94);
    assert_eq!(pe.a_out.val().to_u32(), 0xFE);
    assert_eq!(pe.w_out.val().to_u32(), 3);
    // Frozen: no register moves, whatever the inputs say.
    pe.enable.next = false;
    pe.shift.next = true;
    pe.swap.next = true;
    pe.w_in.next = 9u64.into();
    pe.a_in.next = 1u64.into();
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(
        (pe.p_out.val().to_u32(), pe.a_out.val().to_u32(), pe.w_out.val().to_u32()),
        (94, 0xFE, 3)
    );
}

/// Three banks: `shift` fills the one `load_bank` names, each row computes with the bank its
/// tag names, and the tag moves on with `a`.
#[test]
fn tagged_pe_uses_the_bank_its_row_names() {
    let mut pe = PeWs::new(Mac::new(Dtype::Int8, 1), WsWeights::Tagged);
    pe.connect_all();
    pe.enable.next = true;
    pe.shift.next = true;
    for (bank, w) in [(1u64, 3u64), (2, 5), (0, 7)] {
        pe.load_bank.next = bank.into();
        pe.w_in.next = w.into();
        tick(&mut pe, |p| &mut p.clock);
        assert_eq!(pe.w_out.val().to_u32(), w as u32, "w_out is bank {bank}");
    }
    pe.shift.next = false;
    pe.load_bank.next = 1u64.into();
    settle(&mut pe);
    assert_eq!(pe.w_out.val().to_u32(), 3);
    pe.p_in.next = 100u64.into();
    pe.a_in.next = 2u64.into();
    for (tag, w) in [(2u64, 5u32), (0, 7), (1, 3)] {
        pe.tag_in.next = tag.into();
        tick(&mut pe, |p| &mut p.clock);
        assert_eq!(pe.p_out.val().to_u32(), 100 + 2 * w, "bank {tag}");
        assert_eq!(pe.tag_out.val().to_u32(), tag as u32);
    }
    // Frozen: neither the sum, the tag nor a bank moves.
    pe.enable.next = false;
    pe.shift.next = true;
    pe.w_in.next = 9u64.into();
    pe.tag_in.next = 0u64.into();
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(
        (pe.p_out.val().to_u32(), pe.tag_out.val().to_u32(), pe.w_out.val().to_u32()),
        (106, 1, 3)
    );
}

#[test]
fn os_pe_accumulates_then_drains() {
    let mut pe = PeOs::new(Mac::new(Dtype::Int8, 1));
    pe.connect_all();
    pe.enable.next = true;
    pe.p_below.next = 77u64.into();
    for (k, (a, b)) in [(2u64, 3u64), (4, 5), (0xFF, 6)].into_iter().enumerate() {
        pe.a_in.next = a.into();
        pe.b_in.next = b.into();
        pe.first_in.next = k == 0;
        tick(&mut pe, |p| &mut p.clock);
    }
    assert_eq!(pe.p_out.val().to_u32(), 2 * 3 + 4 * 5 - 6);
    pe.enable.next = false;
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(pe.p_out.val().to_u32(), 2 * 3 + 4 * 5 - 6, "frozen");
    pe.enable.next = true;
    pe.drain.next = true;
    tick(&mut pe, |p| &mut p.clock);
    assert_eq!(pe.p_out.val().to_u32(), 77);
}

/// A two-stage WS PE: each sum is `p_in` plus the product of the cycle before.
#[test]
fn staged_ws_pe_adds_the_product_a_cycle_late() {
    for weights in [WsWeights::ShadowSwap, WsWeights::Tagged] {
        let mut pe = PeWs::new(Mac::new(Dtype::Int8, 2), weights);
        pe.connect_all();
        pe.enable.next = true;
        pe.w_in.next = 3u64.into();
        pe.shift.next = true;
        if weights == WsWeights::Tagged {
            pe.load_bank.next = 0u64.into();
            pe.tag_in.next = 0u64.into();
        }
        tick(&mut pe, |p| &mut p.clock);
        pe.shift.next = false;
        if weights == WsWeights::ShadowSwap {
            pe.swap.next = true;
            tick(&mut pe, |p| &mut p.clock);
            pe.swap.next = false;
        }
        // Activations 5, then 0xFE (-2), then 7: each sum adds the one before it.
        let mut sums = vec![];
        for (a, p_in) in [(5u64, 0u64), (0xFE, 100), (7, 1000), (0, 10)] {
            pe.a_in.next = a.into();
            pe.p_in.next = p_in.into();
            tick(&mut pe, |p| &mut p.clock);
            sums.push(pe.p_out.val().to_u32());
        }
        assert_eq!(sums[1..], [115, 1000 - 6, 10 + 21], "{weights:?}");
        // Frozen: the product register holds, so the next enabled cycle adds 7 * 3 still.
        pe.enable.next = false;
        pe.a_in.next = 9u64.into();
        tick(&mut pe, |p| &mut p.clock);
        assert_eq!(pe.p_out.val().to_u32(), 31, "frozen, {weights:?}");
        pe.enable.next = true;
        pe.p_in.next = 0u64.into();
        tick(&mut pe, |p| &mut p.clock);
        assert_eq!(pe.p_out.val().to_u32(), 0, "the product of a_in = 0, {weights:?}");
    }
}

/// A two-stage OS PE restarts its sum with the product of the pair that came with `first`.
#[test]
fn staged_os_pe_restarts_with_the_first_product() {
    let mut pe = PeOs::new(Mac::new(Dtype::Int8, 2));
    pe.connect_all();
    pe.enable.next = true;
    // A sum left from before, then pairs k = 0, 1, 2 and a zero pair as the product drains.
    pe.a_in.next = 9u64.into();
    pe.b_in.next = 9u64.into();
    tick(&mut pe, |p| &mut p.clock);
    tick(&mut pe, |p| &mut p.clock);
    for (k, (a, b)) in [(2u64, 3u64), (4, 5), (0xFF, 6), (0, 0)].into_iter().enumerate() {
        pe.a_in.next = a.into();
        pe.b_in.next = b.into();
        pe.first_in.next = k == 0;
        tick(&mut pe, |p| &mut p.clock);
    }
    assert_eq!(pe.p_out.val().to_u32(), 2 * 3 + 4 * 5 - 6);
}

#[test]
fn verilog_is_valid() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        // Three and four stages are BF16 weight-stationary blocking PEs'
        // (ArrayConfig::may_stage_pe_add).
        for stages in systole_core::PE_STAGES.into_iter().filter(|&s| s < 3) {
            let mac = || Mac::new(dtype, stages);
            let ws = PeWs::new(mac(), WsWeights::ShadowSwap);
            yosys_validate("pe_ws", &verilog_of(ws)).unwrap();
            let tagged = PeWs::new(mac(), WsWeights::Tagged);
            yosys_validate("pe_ws_tagged", &verilog_of(tagged)).unwrap();
            yosys_validate("pe_os", &verilog_of(PeOs::new(mac()))).unwrap();
        }
    }
    for (stages, lean) in [(3, false), (4, false), (3, true), (4, true)] {
        let pipelined = PeWs::new(mac_of(Dtype::Bf16, stages, lean), WsWeights::ShadowSwap);
        yosys_validate("pe_ws_pipelined", &verilog_of(pipelined)).unwrap();
    }
}
