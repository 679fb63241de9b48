//! Multiply-accumulate units and the processing elements built on them.
//!
//! [`Mac`] is `y = acc + a * b` for one [`Dtype`]: INT8 (`i8 x i8` exact in 16 bits, added to an
//! `i32` with wrap-around) or BF16 (the exact [`Bf16Mul`] product into the [`F32Add`]). It holds
//! the datapath of its dtype only: the other one is an empty `Vec`, so no logic of it is emitted.
//! Operands travel as 16-bit elements (INT8 in the low byte), sums as 32-bit words.
//!
//! [`PeWs`] is a weight-stationary PE: an activation register passing right, a partial-sum
//! register passing down, and weights that load (shifting down the column) while others compute:
//! under the blocking schedule an active weight and a shadow swapped in at a matmul's dispatch,
//! under the decoupled one three banks, picked by a tag that travels with each input row.
//! [`PeOs`] is an output-stationary PE: A passing right, B passing down, the sum held in place
//! and drained upwards a row per cycle.

use rust_hdl::prelude::*;
use systole_core::scoreboard::WEIGHT_BANKS;
use systole_core::{ArrayConfig, Dtype, Schedule};

use crate::float::{Bf16Mul, F32Add};
use crate::optional::Optional;

/// `y = acc + a * b`, INT8: i8 x i8 -> i16 (exact), sign-extended and added mod 2^32.
///
/// Sign extension is written out by hand: rust-hdl's `signed_bit_cast` of -128 overflows the
/// stack of its simulator (docs/HARDWARE.md, toolchain notes).
#[derive(LogicBlock, Default)]
pub struct MacInt8 {
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    a16: Signal<Local, Bits<16>>,
    b16: Signal<Local, Bits<16>>,
    prod: Signal<Local, Bits<32>>,
    prod32: Signal<Local, Bits<32>>,
}

impl Logic for MacInt8 {
    #[hdl_gen]
    fn update(&mut self) {
        self.a16.next = bit_cast::<16, 8>(self.a.val().get_bits::<8>(0));
        if self.a.val().get_bit(7) {
            self.a16.next = bit_cast::<16, 8>(self.a.val().get_bits::<8>(0)) | 0xFF00;
        }
        self.b16.next = bit_cast::<16, 8>(self.b.val().get_bits::<8>(0));
        if self.b.val().get_bit(7) {
            self.b16.next = bit_cast::<16, 8>(self.b.val().get_bits::<8>(0)) | 0xFF00;
        }
        // The low 16 bits of the unsigned product of two sign-extended operands are the signed
        // product, which fits i16.
        self.prod.next = self.a16.val() * self.b16.val();
        self.prod32.next = bit_cast::<32, 16>(self.prod.val().get_bits::<16>(0));
        if self.prod.val().get_bit(15) {
            self.prod32.next =
                bit_cast::<32, 16>(self.prod.val().get_bits::<16>(0)) | 0xFFFF_0000u64;
        }
        self.y.next = self.acc.val() + self.prod32.val();
    }
}

/// `y = acc + a * b`, BF16: exact product, f32 sum rounded to nearest even (never fused).
#[derive(LogicBlock, Default)]
pub struct MacBf16 {
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    mul: Bf16Mul,
    add: F32Add,
}

impl Logic for MacBf16 {
    #[hdl_gen]
    fn update(&mut self) {
        self.mul.a.next = self.a.val();
        self.mul.b.next = self.b.val();
        self.add.a.next = self.acc.val();
        self.add.b.next = self.mul.y.val();
        self.y.next = self.add.y.val();
    }
}

/// The MAC of one dtype (the other's `Vec` is empty).
#[derive(LogicBlock)]
pub struct Mac {
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    int8: Vec<MacInt8>,
    bf16: Vec<MacBf16>,
}

impl Mac {
    pub fn new(dtype: Dtype) -> Mac {
        Mac {
            a: Default::default(),
            b: Default::default(),
            acc: Default::default(),
            y: Default::default(),
            int8: if dtype == Dtype::Int8 { vec![MacInt8::default()] } else { vec![] },
            bf16: if dtype == Dtype::Bf16 { vec![MacBf16::default()] } else { vec![] },
        }
    }
}

impl Logic for Mac {
    #[hdl_gen]
    fn update(&mut self) {
        self.y.next = 0.into();
        for k in 0..self.int8.len() {
            self.int8[k].a.next = self.a.val();
            self.int8[k].b.next = self.b.val();
            self.int8[k].acc.next = self.acc.val();
            self.y.next = self.int8[k].y.val();
        }
        for k in 0..self.bf16.len() {
            self.bf16[k].a.next = self.a.val();
            self.bf16[k].b.next = self.b.val();
            self.bf16[k].acc.next = self.acc.val();
            self.y.next = self.bf16[k].y.val();
        }
    }
}

/// How a weight-stationary PE holds its weights, by the config's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsWeights {
    /// Blocking: a shadow weight that loads and an active one; a matmul's dispatch swaps the
    /// shadow in (`swap`). Never more than one matmul's rows are in the array.
    ShadowSwap,
    /// Decoupled: [`WEIGHT_BANKS`] banks, and each input row carries the tag of its matmul's
    /// bank (`tag_in`, passed on with `a`), so rows of matmuls that use different banks stream
    /// through back to back. `shift` loads bank `load_bank`.
    Tagged,
}

impl WsWeights {
    /// The weights a config's weight-stationary PEs hold.
    pub fn of(config: &ArrayConfig) -> WsWeights {
        match config.schedule {
            Schedule::Blocking => WsWeights::ShadowSwap,
            Schedule::Decoupled => WsWeights::Tagged,
        }
    }
}

/// Bits of a weight-bank tag.
pub const TAG_BITS: usize = 2;
const _: () = assert!(WEIGHT_BANKS <= 1 << TAG_BITS);

/// A weight-stationary PE.
///
/// Each cycle: `a` takes `a_in` (the left neighbour's `a`), `p` takes `p_in + a_in * w` (`p_in`
/// is the upper neighbour's `p`, or zero on the top row). Nothing changes in a cycle without
/// `enable` (the machine is frozen, docs/HARDWARE.md). The weight `w` and the weight load
/// depend on [`WsWeights`]:
///
/// * `ShadowSwap`: `w` is the active weight, or the shadow weight in the cycle a matmul swaps it
///   in (`swap`), when the active one takes it too. With `shift`, the shadow takes `w_in` (the
///   upper neighbour's shadow, or the loader's row); `w_out` is the shadow.
/// * `Tagged`: `w` is bank `tag_in`'s weight, the bank of the row `a_in` belongs to; `tag`
///   takes `tag_in` beside `a`. With `shift`, bank `load_bank` takes `w_in`; `w_out` is that
///   bank's weight. There is no `swap`: which bank is active is the tags' business.
///
/// Each kind's ports and registers exist only in its config ([`Optional`]), so a blocking PE
/// is emitted exactly as before the tags existed.
#[derive(LogicBlock)]
pub struct PeWs {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a_in: Signal<In, Bits<16>>,
    pub tag_in: Optional<Signal<In, Bits<TAG_BITS>>>,
    pub p_in: Signal<In, Bits<32>>,
    pub w_in: Signal<In, Bits<16>>,
    pub shift: Signal<In, Bit>,
    pub swap: Optional<Signal<In, Bit>>,
    pub load_bank: Optional<Signal<In, Bits<TAG_BITS>>>,
    pub a_out: Signal<Out, Bits<16>>,
    pub tag_out: Optional<Signal<Out, Bits<TAG_BITS>>>,
    pub p_out: Signal<Out, Bits<32>>,
    pub w_out: Signal<Out, Bits<16>>,
    a: DFF<Bits<16>>,
    tag: Optional<DFF<Bits<TAG_BITS>>>,
    p: DFF<Bits<32>>,
    shadow: Optional<DFF<Bits<16>>>,
    active: Optional<DFF<Bits<16>>>,
    banks: Vec<DFF<Bits<16>>>,
    mac: Mac,
}

impl PeWs {
    pub fn new(dtype: Dtype, weights: WsWeights) -> PeWs {
        let tagged = weights == WsWeights::Tagged;
        PeWs {
            clock: Default::default(),
            enable: Default::default(),
            a_in: Default::default(),
            tag_in: Optional::default_when(tagged),
            p_in: Default::default(),
            w_in: Default::default(),
            shift: Default::default(),
            swap: Optional::default_when(!tagged),
            load_bank: Optional::default_when(tagged),
            a_out: Default::default(),
            tag_out: Optional::default_when(tagged),
            p_out: Default::default(),
            w_out: Default::default(),
            a: Default::default(),
            tag: Optional::default_when(tagged),
            p: Default::default(),
            shadow: Optional::default_when(!tagged),
            active: Optional::default_when(!tagged),
            banks: (0..if tagged { WEIGHT_BANKS } else { 0 }).map(|_| DFF::default()).collect(),
            mac: Mac::new(dtype),
        }
    }

    fn tagged(&self) -> bool {
        !self.banks.is_empty()
    }
}

/// The next-state function of each kind of PE. An `hdl_gen` kernel gives `update`, `connect` and
/// `hdl`, and a type has one `Logic`, so each kind's kernel implements a trait of its own, kept
/// out of scope of the derived `Block` (whose `self.update()` must find `Logic`'s alone).
mod kernels {
    use super::*;

    pub(super) trait ShadowSwapKernel {
        fn update(&mut self);
        fn connect(&mut self);
        fn hdl(&self) -> Verilog;
    }

    pub(super) trait TaggedKernel {
        fn update(&mut self);
        fn connect(&mut self);
        fn hdl(&self) -> Verilog;
    }

    impl ShadowSwapKernel for PeWs {
        #[hdl_gen]
        fn update(&mut self) {
            dff_setup!(self, clock, a, p, shadow, active);
            self.mac.a.next = self.a_in.val();
            self.mac.b.next = self.active.q.val();
            if self.swap.val() {
                self.mac.b.next = self.shadow.q.val();
            }
            self.mac.acc.next = self.p_in.val();
            if self.enable.val() {
                if self.swap.val() {
                    self.active.d.next = self.shadow.q.val();
                }
                if self.shift.val() {
                    self.shadow.d.next = self.w_in.val();
                }
                self.a.d.next = self.a_in.val();
                self.p.d.next = self.mac.y.val();
            }
            self.a_out.next = self.a.q.val();
            self.p_out.next = self.p.q.val();
            self.w_out.next = self.shadow.q.val();
        }
    }

    impl TaggedKernel for PeWs {
        #[hdl_gen]
        fn update(&mut self) {
            dff_setup!(self, clock, a, tag, p);
            for b in 0..self.banks.len() {
                self.banks[b].clock.next = self.clock.val();
                self.banks[b].d.next = self.banks[b].q.val();
            }
            self.mac.a.next = self.a_in.val();
            self.mac.b.next = self.banks[0].q.val();
            self.w_out.next = self.banks[0].q.val();
            for b in 1..self.banks.len() {
                if self.tag_in.val() == b.to_bits() {
                    self.mac.b.next = self.banks[b].q.val();
                }
                if self.load_bank.val() == b.to_bits() {
                    self.w_out.next = self.banks[b].q.val();
                }
            }
            self.mac.acc.next = self.p_in.val();
            if self.enable.val() {
                for b in 0..self.banks.len() {
                    if self.shift.val() && (self.load_bank.val() == b.to_bits()) {
                        self.banks[b].d.next = self.w_in.val();
                    }
                }
                self.a.d.next = self.a_in.val();
                self.tag.d.next = self.tag_in.val();
                self.p.d.next = self.mac.y.val();
            }
            self.a_out.next = self.a.q.val();
            self.tag_out.next = self.tag.q.val();
            self.p_out.next = self.p.q.val();
        }
    }
}

impl Logic for PeWs {
    fn update(&mut self) {
        if self.tagged() {
            kernels::TaggedKernel::update(self)
        } else {
            kernels::ShadowSwapKernel::update(self)
        }
    }

    fn connect(&mut self) {
        if self.tagged() {
            kernels::TaggedKernel::connect(self)
        } else {
            kernels::ShadowSwapKernel::connect(self)
        }
    }

    fn hdl(&self) -> Verilog {
        if self.tagged() {
            kernels::TaggedKernel::hdl(self)
        } else {
            kernels::ShadowSwapKernel::hdl(self)
        }
    }
}

/// An output-stationary PE.
///
/// Each cycle: `a` takes `a_in`, `b` takes `b_in`, `first` takes `first_in` (set with the A
/// element of k = 0), and the sum takes `(first_in ? 0 : sum) + a_in * b_in`. While `drain`,
/// the sum takes `p_below` instead: the array shifts its results up a row per cycle. Nothing
/// changes in a cycle without `enable`.
#[derive(LogicBlock)]
pub struct PeOs {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a_in: Signal<In, Bits<16>>,
    pub b_in: Signal<In, Bits<16>>,
    pub first_in: Signal<In, Bit>,
    pub drain: Signal<In, Bit>,
    pub p_below: Signal<In, Bits<32>>,
    pub a_out: Signal<Out, Bits<16>>,
    pub b_out: Signal<Out, Bits<16>>,
    pub first_out: Signal<Out, Bit>,
    pub p_out: Signal<Out, Bits<32>>,
    a: DFF<Bits<16>>,
    b: DFF<Bits<16>>,
    first: DFF<Bit>,
    p: DFF<Bits<32>>,
    mac: Mac,
}

impl PeOs {
    pub fn new(dtype: Dtype) -> PeOs {
        PeOs {
            clock: Default::default(),
            enable: Default::default(),
            a_in: Default::default(),
            b_in: Default::default(),
            first_in: Default::default(),
            drain: Default::default(),
            p_below: Default::default(),
            a_out: Default::default(),
            b_out: Default::default(),
            first_out: Default::default(),
            p_out: Default::default(),
            a: Default::default(),
            b: Default::default(),
            first: Default::default(),
            p: Default::default(),
            mac: Mac::new(dtype),
        }
    }
}

impl Logic for PeOs {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, a, b, first, p);
        self.mac.a.next = self.a_in.val();
        self.mac.b.next = self.b_in.val();
        self.mac.acc.next = self.p.q.val();
        if self.first_in.val() {
            self.mac.acc.next = 0.into();
        }
        if self.enable.val() {
            self.a.d.next = self.a_in.val();
            self.b.d.next = self.b_in.val();
            self.first.d.next = self.first_in.val();
            self.p.d.next = self.mac.y.val();
            if self.drain.val() {
                self.p.d.next = self.p_below.val();
            }
        }
        self.a_out.next = self.a.q.val();
        self.b_out.next = self.b.q.val();
        self.first_out.next = self.first.q.val();
        self.p_out.next = self.p.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bf16_operand, f32_operand, settle, tick, verilog_of, yosys_eval};
    use proptest::prelude::*;
    use systole_core::{Arith, Bf16, Int8, BF16};

    fn mac(dtype: Dtype, a: u16, b: u16, acc: u32) -> u32 {
        let mut uut = Mac::new(dtype);
        uut.a.next = (a as u64).into();
        uut.b.next = (b as u64).into();
        uut.acc.next = (acc as u64).into();
        settle(&mut uut);
        uut.y.val().to_u32()
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
        let int8 = yosys_eval(&verilog_of(Mac::new(Dtype::Int8)), &inputs, "y");
        let bf16 = yosys_eval(&verilog_of(Mac::new(Dtype::Bf16)), &inputs, "y");
        for (i, &(a, b, acc)) in vectors.iter().enumerate() {
            assert_eq!(int8[i] as u32, core_int8(a as u8, b as u8, acc), "int8 {a} {b} {acc}");
            assert_eq!(bf16[i] as u32, core_bf16(a, b, acc), "bf16 {a:#x} {b:#x} {acc:#x}");
        }
    }

    /// Shadow loading, the swap bypass, and the pass-through registers.
    #[test]
    fn ws_pe_swaps_its_shadow_in() {
        let mut pe = PeWs::new(Dtype::Int8, WsWeights::ShadowSwap);
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
        let mut pe = PeWs::new(Dtype::Int8, WsWeights::Tagged);
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
        let mut pe = PeOs::new(Dtype::Int8);
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

    #[test]
    fn verilog_is_valid() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            yosys_validate("pe_ws", &verilog_of(PeWs::new(dtype, WsWeights::ShadowSwap))).unwrap();
            yosys_validate("pe_ws_tagged", &verilog_of(PeWs::new(dtype, WsWeights::Tagged)))
                .unwrap();
            yosys_validate("pe_os", &verilog_of(PeOs::new(dtype))).unwrap();
        }
    }
}
