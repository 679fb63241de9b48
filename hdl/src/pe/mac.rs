//! Multiply-accumulate units: `y = acc + a * b` for one [`Dtype`], in one cycle or two.
//!
//! [`Mac`] holds the datapath of its dtype only: the other one is an empty `Vec`, so no logic of
//! it is emitted. INT8 is `i8 x i8` exact in 16 bits, added to an `i32` with wrap-around; BF16
//! the exact [`Bf16Mul`] product into the [`F32Add`]. Operands travel as 16-bit elements (INT8 in
//! the low byte), sums as 32-bit words. Built with two stages ([`ArrayConfig::pe_stages`]), the
//! product is registered and `y` adds `acc` to the product of the operands of the cycle before:
//! the same bits a cycle later, since the product is exact in both dtypes. A BF16 MAC of three
//! stages registers its add's aligned operands too, and one of four its normalised sum as well
//! ([`MacBf16Pipelined`]).

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dtype};

use crate::float::{Bf16Mul, F32Add, F32Align, F32Normalize, F32Round, F32SigAdd};
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

impl MacBf16 {
    /// The MAC with the lean f32 add ([`F32Add::lean`]).
    fn lean(self) -> MacBf16 {
        MacBf16 { add: self.add.lean(), ..self }
    }
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

/// `y = acc + p`, INT8, where `p` is the product of the operands of the cycle before: the
/// product registered (it holds while `enable` is off).
#[derive(LogicBlock, Default)]
pub struct MacInt8Staged {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    /// The product alone: the one-cycle MAC with zero added (the adder synthesizes away).
    mul: MacInt8,
    product: DFF<Bits<32>>,
}

impl Logic for MacInt8Staged {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, product);
        self.mul.a.next = self.a.val();
        self.mul.b.next = self.b.val();
        self.mul.acc.next = 0.into();
        if self.enable.val() {
            self.product.d.next = self.mul.y.val();
        }
        self.y.next = self.acc.val() + self.product.q.val();
    }
}

/// `y = acc + p`, INT8, where `p` is the registered product of the operands of the cycle
/// before, formed outside (`mul_a * mul_b` in a [`super::DspPair`] shared with another PE):
/// [`MacInt8Staged`]'s bits and cycles with its product register in the DSP.
#[derive(LogicBlock, Default)]
pub struct MacInt8Paired {
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    /// The operands' bytes, to the DSP.
    pub mul_a: Signal<Out, Bits<8>>,
    pub mul_b: Signal<Out, Bits<8>>,
    /// The DSP's registered product of the last enabled cycle's `mul_a * mul_b`.
    pub product: Signal<In, Bits<16>>,
    product32: Signal<Local, Bits<32>>,
}

impl Logic for MacInt8Paired {
    #[hdl_gen]
    fn update(&mut self) {
        self.mul_a.next = self.a.val().get_bits::<8>(0);
        self.mul_b.next = self.b.val().get_bits::<8>(0);
        self.product32.next = bit_cast::<32, 16>(self.product.val());
        if self.product.val().get_bit(15) {
            self.product32.next = bit_cast::<32, 16>(self.product.val()) | 0xFFFF_0000u64;
        }
        self.y.next = self.acc.val() + self.product32.val();
    }
}

/// `y = acc + p`, BF16, where `p` is the exact product of the operands of the cycle before:
/// the product registered (it holds while `enable` is off), the f32 sum rounded as
/// [`MacBf16`]'s.
#[derive(LogicBlock, Default)]
pub struct MacBf16Staged {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    mul: Bf16Mul,
    product: DFF<Bits<32>>,
    add: F32Add,
}

impl MacBf16Staged {
    /// The MAC with the lean f32 add ([`F32Add::lean`]).
    fn lean(self) -> MacBf16Staged {
        MacBf16Staged { add: self.add.lean(), ..self }
    }
}

impl Logic for MacBf16Staged {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, product);
        self.mul.a.next = self.a.val();
        self.mul.b.next = self.b.val();
        if self.enable.val() {
            self.product.d.next = self.mul.y.val();
        }
        self.add.a.next = self.acc.val();
        self.add.b.next = self.product.q.val();
        self.y.next = self.add.y.val();
    }
}

/// `y = acc' + p'`, BF16, where `acc'` is the `acc` of the cycle before and `p'` the exact
/// product of the operands of the cycle before that: the product registered, then the
/// [`F32Align`] of `acc` and the product registered (63 bits), and the [`F32Normalize`] and
/// [`F32Round`] of those. The same f32 add as [`MacBf16Staged`]'s, its first part a cycle
/// before the rest: each sum takes two cycles from `acc`, so a column of these PEs takes its
/// inputs two cycles a row apart ([`ArrayConfig::pe_add_staged`]). Built deep (`pe_stages` 4),
/// the normalised sum is registered too (41 bits): `acc'` is then the `acc` of two cycles
/// before, `p'` the product of the operands of three, and the inputs three cycles a row apart.
/// Built lean (revision 3, [`MacBf16Pipelined::lean`]) it aligns in parallel and adds the
/// aligned significands before the first register ([`F32SigAdd`]), so the stages are nearer
/// equal; the same bits in the same cycles. Every register holds while `enable` is off.
#[derive(LogicBlock, Default)]
pub struct MacBf16Pipelined {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    mul: Bf16Mul,
    product: DFF<Bits<32>>,
    align: F32Align,
    x: DFF<Bits<32>>,
    mz: DFF<Bits<28>>,
    z_flags: DFF<Bits<3>>,
    normalize: F32Normalize,
    /// The normalised sum's registers, built deep (one each; else none).
    norm: Vec<DFF<Bits<27>>>,
    e_pre: Vec<DFF<Bits<10>>>,
    flags: Vec<DFF<Bits<4>>>,
    round: F32Round,
    /// Built lean: the aligned significands' sum, formed in the aligner's stage and registered
    /// in place of `mz` (whose register is then left unread).
    sum: Optional<F32SigAdd>,
    s: Optional<DFF<Bits<28>>>,
}

impl MacBf16Pipelined {
    /// A MAC of three stages, or of four (`deep`).
    pub fn new(deep: bool) -> MacBf16Pipelined {
        let n = deep as usize;
        MacBf16Pipelined {
            norm: (0..n).map(|_| DFF::default()).collect(),
            e_pre: (0..n).map(|_| DFF::default()).collect(),
            flags: (0..n).map(|_| DFF::default()).collect(),
            ..Default::default()
        }
    }

    /// The MAC with its stages balanced: the parallel aligner and the significands' sum in
    /// the first, the normalisation of the registered sum and [`F32Round::early_exponent`]
    /// after it (docs/DECISIONS.md 119).
    fn lean(self) -> MacBf16Pipelined {
        MacBf16Pipelined {
            align: F32Align::parallel(),
            normalize: F32Normalize::given_sum(),
            round: F32Round::early_exponent(),
            sum: Optional::default_when(true),
            s: Optional::default_when(true),
            ..self
        }
    }
}

impl Logic for MacBf16Pipelined {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, product, x, mz, z_flags);
        self.mul.a.next = self.a.val();
        self.mul.b.next = self.b.val();
        self.align.a.next = self.acc.val();
        self.align.b.next = self.product.q.val();
        if self.enable.val() {
            self.product.d.next = self.mul.y.val();
            self.x.d.next = self.align.x.val();
            self.mz.d.next = self.align.mz.val();
            self.z_flags.d.next = self.align.z_flags.val();
        }
        self.normalize.x.next = self.x.q.val();
        self.normalize.mz.next = self.mz.q.val();
        self.normalize.z_flags.next = self.z_flags.q.val();
        self.round.norm.next = self.normalize.norm.val();
        self.round.e_pre.next = self.normalize.e_pre.val();
        self.round.flags.next = self.normalize.flags.val();
        for _k in 0..self.s.len() {
            self.s.clock.next = self.clock.val();
            self.sum.x.next = self.align.x.val();
            self.sum.mz.next = self.align.mz.val();
            self.sum.z_flags.next = self.align.z_flags.val();
            self.s.d.next = self.s.q.val();
            if self.enable.val() {
                self.s.d.next = self.sum.s.val();
            }
            self.normalize.sum.next = self.s.q.val();
        }
        for k in 0..self.norm.len() {
            self.norm[k].clock.next = self.clock.val();
            self.e_pre[k].clock.next = self.clock.val();
            self.flags[k].clock.next = self.clock.val();
            self.norm[k].d.next = self.norm[k].q.val();
            self.e_pre[k].d.next = self.e_pre[k].q.val();
            self.flags[k].d.next = self.flags[k].q.val();
            if self.enable.val() {
                self.norm[k].d.next = self.normalize.norm.val();
                self.e_pre[k].d.next = self.normalize.e_pre.val();
                self.flags[k].d.next = self.normalize.flags.val();
            }
            self.round.norm.next = self.norm[k].q.val();
            self.round.e_pre.next = self.e_pre[k].q.val();
            self.round.flags.next = self.flags[k].q.val();
        }
        self.y.next = self.round.y.val();
    }
}

/// The MAC of one dtype and [`ArrayConfig::pe_stages`] (the others' `Vec`s are empty). Only a
/// two-stage MAC has `clock` and `enable` ([`Optional`]), so a one-stage one is emitted as it
/// was before the stages existed; only a paired one ([`Mac::paired`]) has `mul_a`, `mul_b` and
/// `product`, its product formed in a DSP it shares.
#[derive(LogicBlock)]
pub struct Mac {
    pub clock: Optional<Signal<In, Clock>>,
    pub enable: Optional<Signal<In, Bit>>,
    pub a: Signal<In, Bits<16>>,
    pub b: Signal<In, Bits<16>>,
    pub acc: Signal<In, Bits<32>>,
    pub y: Signal<Out, Bits<32>>,
    pub mul_a: Optional<Signal<Out, Bits<8>>>,
    pub mul_b: Optional<Signal<Out, Bits<8>>>,
    pub product: Optional<Signal<In, Bits<16>>>,
    int8: Vec<MacInt8>,
    bf16: Vec<MacBf16>,
    int8_staged: Vec<MacInt8Staged>,
    bf16_staged: Vec<MacBf16Staged>,
    bf16_pipelined: Vec<MacBf16Pipelined>,
    int8_paired: Vec<MacInt8Paired>,
}

impl Mac {
    /// The MAC a config's PEs hold: its dtype's, in its `pe_stages`.
    pub fn of(config: &ArrayConfig) -> Mac {
        Mac::new(config.dtype, config.pe_stages)
    }

    /// A MAC of `dtype` in `stages` (1 or 2, or 3 or 4 for BF16) cycles.
    pub fn new(dtype: Dtype, stages: u8) -> Mac {
        assert!(
            (1..=2).contains(&stages) || (dtype == Dtype::Bf16 && (3..=4).contains(&stages)),
            "a {} MAC of {stages} stages (ArrayConfig::validate refuses it)",
            dtype.name()
        );
        let staged = stages > 1;
        let one = |d: Dtype, s: u8| dtype == d && stages == s;
        Mac {
            clock: Optional::default_when(staged),
            enable: Optional::default_when(staged),
            a: Default::default(),
            b: Default::default(),
            acc: Default::default(),
            y: Default::default(),
            mul_a: Optional::none(),
            mul_b: Optional::none(),
            product: Optional::none(),
            int8: one(Dtype::Int8, 1).then(MacInt8::default).into_iter().collect(),
            bf16: one(Dtype::Bf16, 1).then(MacBf16::default).into_iter().collect(),
            int8_staged: one(Dtype::Int8, 2).then(MacInt8Staged::default).into_iter().collect(),
            bf16_staged: one(Dtype::Bf16, 2).then(MacBf16Staged::default).into_iter().collect(),
            bf16_pipelined: (dtype == Dtype::Bf16 && stages >= 3)
                .then(|| MacBf16Pipelined::new(stages == 4))
                .into_iter()
                .collect(),
            int8_paired: vec![],
        }
    }

    /// The same MAC with a BF16 datapath's f32 add built lean ([`F32Add::lean`], revision 3):
    /// the same bits. An INT8 MAC has none and is unchanged.
    pub fn lean(self) -> Mac {
        Mac {
            bf16: self.bf16.into_iter().map(MacBf16::lean).collect(),
            bf16_staged: self.bf16_staged.into_iter().map(MacBf16Staged::lean).collect(),
            bf16_pipelined: self.bf16_pipelined.into_iter().map(MacBf16Pipelined::lean).collect(),
            ..self
        }
    }

    /// A two-stage INT8 MAC whose product register is half of a DSP it shares with another
    /// PE's ([`super::DspPair`]): its operands' bytes leave on `mul_a` and `mul_b`, their
    /// product comes back on `product` a cycle later.
    pub fn paired() -> Mac {
        Mac {
            clock: Optional::none(),
            enable: Optional::none(),
            a: Default::default(),
            b: Default::default(),
            acc: Default::default(),
            y: Default::default(),
            mul_a: Optional::default_when(true),
            mul_b: Optional::default_when(true),
            product: Optional::default_when(true),
            int8: vec![],
            bf16: vec![],
            int8_staged: vec![],
            bf16_staged: vec![],
            bf16_pipelined: vec![],
            int8_paired: vec![MacInt8Paired::default()],
        }
    }

    /// Whether the MAC is INT8's.
    pub fn is_int8(&self) -> bool {
        !(self.int8.is_empty() && self.int8_staged.is_empty() && self.int8_paired.is_empty())
    }

    /// Whether the product is formed in a DSP outside ([`Mac::paired`]).
    pub fn is_paired(&self) -> bool {
        self.product.is_some()
    }

    /// Whether the product is registered (the MAC has a clock).
    pub fn staged(&self) -> bool {
        self.clock.is_some()
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
        for k in 0..self.int8_staged.len() {
            self.int8_staged[k].clock.next = self.clock.val();
            self.int8_staged[k].enable.next = self.enable.val();
            self.int8_staged[k].a.next = self.a.val();
            self.int8_staged[k].b.next = self.b.val();
            self.int8_staged[k].acc.next = self.acc.val();
            self.y.next = self.int8_staged[k].y.val();
        }
        for k in 0..self.bf16_staged.len() {
            self.bf16_staged[k].clock.next = self.clock.val();
            self.bf16_staged[k].enable.next = self.enable.val();
            self.bf16_staged[k].a.next = self.a.val();
            self.bf16_staged[k].b.next = self.b.val();
            self.bf16_staged[k].acc.next = self.acc.val();
            self.y.next = self.bf16_staged[k].y.val();
        }
        for k in 0..self.bf16_pipelined.len() {
            self.bf16_pipelined[k].clock.next = self.clock.val();
            self.bf16_pipelined[k].enable.next = self.enable.val();
            self.bf16_pipelined[k].a.next = self.a.val();
            self.bf16_pipelined[k].b.next = self.b.val();
            self.bf16_pipelined[k].acc.next = self.acc.val();
            self.y.next = self.bf16_pipelined[k].y.val();
        }
        for k in 0..self.int8_paired.len() {
            self.int8_paired[k].a.next = self.a.val();
            self.int8_paired[k].b.next = self.b.val();
            self.int8_paired[k].acc.next = self.acc.val();
            self.int8_paired[k].product.next = self.product.val();
            self.mul_a.next = self.int8_paired[k].mul_a.val();
            self.mul_b.next = self.int8_paired[k].mul_b.val();
            self.y.next = self.int8_paired[k].y.val();
        }
    }
}
