//! The BF16 accumulator lane.

use rust_hdl::prelude::*;

use super::AccOp;
use crate::float::{F32Align, F32MulProduct, F32MulRound, F32Normalize, F32Round, F32SigAdd};
use crate::optional::Optional;

/// The BF16 accumulator lane: f32 words read DAZ, written with canonical NaN. Built paced
/// ([`paced_scale`](super::paced_scale)), its product passes a register before the sum and the
/// result: the sequencer holds a `Scale` or `Axpy` row for two cycles and writes it in the
/// second, so no path runs from an accumulator read through both the multiplier and the adder.
/// Built with its product split ([`split_product`](super::split_product)), the multiplier's
/// halves ([`F32MulProduct`], [`F32MulRound`]) pass a register between them too, and such a row
/// takes three cycles. Built with a staged add ([`add_registers`](super::add_registers) 1), the
/// aligned operands pass a register between [`F32Align`] and [`F32Normalize`], and so does the
/// array's word: the sum and an overwriting result are written a cycle after their operands
/// were read, by a sequencer that holds an adding row a cycle more and a top that writes the
/// array's rows a cycle late. With two ([`add_registers`](super::add_registers) 2), the
/// normalised sum passes one more before [`F32Round`], and the array's word beside it: two
/// cycles.
#[derive(LogicBlock, Default)]
pub struct AccLaneBf16 {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub op: Signal<In, AccOp>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub array: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    align: F32Align,
    normalize: F32Normalize,
    round: F32Round,
    mul_product: F32MulProduct,
    mul_round: F32MulRound,
    /// The split product's registers (one each; else none): what the multiplier's first half
    /// hands its second.
    prod_q: Vec<DFF<Bits<48>>>,
    e_sum_q: Vec<DFF<Bits<10>>>,
    mul_flags_q: Vec<DFF<Bits<3>>>,
    /// The staged add's registers (one each; else none): the aligned operands, and the array's
    /// word beside them.
    x_q: Vec<DFF<Bits<32>>>,
    mz_q: Vec<DFF<Bits<28>>>,
    z_flags_q: Vec<DFF<Bits<3>>>,
    array_q: Vec<DFF<Bits<32>>>,
    /// The deeper staged add's registers (one each, on a lane that has the ones above; else
    /// none): the normalised sum, and the array's word beside it again.
    norm_q: Vec<DFF<Bits<27>>>,
    e_pre_q: Vec<DFF<Bits<10>>>,
    flags_q: Vec<DFF<Bits<4>>>,
    array_qq: Vec<DFF<Bits<32>>>,
    /// Built with an early sum: the aligned significands' sum, formed beside the aligner
    /// ([`F32Normalize::given_sum`]), and on a staged lane registered in place of the aligned
    /// significand (one; else none), whose register is then left unread.
    sig_add: Optional<F32SigAdd>,
    s_q: Vec<DFF<Bits<28>>>,
    /// The array's word as an overwriting result writes it: its registers', or the lane's input.
    array_word: Signal<Local, Bits<32>>,
    /// The product register of a paced lane (one; else none), and the product the sum and
    /// `Scale` take: the register's, or the multiplier's own.
    product_q: Vec<DFF<Bits<32>>>,
    product: Signal<Local, Bits<32>>,
    /// `x` and `y` as the datapath reads and writes them: DAZ, canonical NaN.
    x_clean: Signal<Local, Bits<32>>,
    y_clean: Signal<Local, Bits<32>>,
    x_nan: Signal<Local, Bit>,
    y_nan: Signal<Local, Bit>,
    /// `y > x` for the clean values, NaNs aside.
    y_above: Signal<Local, Bit>,
    x_le_zero: Signal<Local, Bit>,
    y_le_zero: Signal<Local, Bit>,
    sum_le_zero: Signal<Local, Bit>,
}

impl AccLaneBf16 {
    /// A lane with its product registered (`paced`) and split, `add_registers` (0 to 2) inside
    /// its f32 add, its aligner [`F32Align::parallel`] or compact, its rounding's exponent
    /// early or not, and its significands summed beside the aligner or after (`build`).
    pub(super) fn new(build: &super::LaneBuild) -> AccLaneBf16 {
        let super::LaneBuild {
            paced,
            split,
            add_registers,
            parallel_align,
            lean_add,
            early_sum,
            ..
        } = *build;
        assert!(paced || !split, "a split product is registered at both ends");
        assert!(add_registers <= 2, "an f32 add of at most three stages");
        let one = |on: bool| if on { 1 } else { 0 };
        let (staged, deep) = (add_registers >= 1, add_registers == 2);
        AccLaneBf16 {
            product_q: (0..one(paced)).map(|_| DFF::default()).collect(),
            prod_q: (0..one(split)).map(|_| DFF::default()).collect(),
            e_sum_q: (0..one(split)).map(|_| DFF::default()).collect(),
            mul_flags_q: (0..one(split)).map(|_| DFF::default()).collect(),
            x_q: (0..one(staged)).map(|_| DFF::default()).collect(),
            s_q: (0..one(staged && early_sum)).map(|_| DFF::default()).collect(),
            sig_add: Optional::default_when(early_sum),
            normalize: if early_sum { F32Normalize::given_sum() } else { F32Normalize::default() },
            mz_q: (0..one(staged)).map(|_| DFF::default()).collect(),
            z_flags_q: (0..one(staged)).map(|_| DFF::default()).collect(),
            array_q: (0..one(staged)).map(|_| DFF::default()).collect(),
            norm_q: (0..one(deep)).map(|_| DFF::default()).collect(),
            e_pre_q: (0..one(deep)).map(|_| DFF::default()).collect(),
            flags_q: (0..one(deep)).map(|_| DFF::default()).collect(),
            array_qq: (0..one(deep)).map(|_| DFF::default()).collect(),
            align: if parallel_align { F32Align::parallel() } else { F32Align::default() },
            round: if lean_add { F32Round::early_exponent() } else { F32Round::default() },
            ..Default::default()
        }
    }
}

impl Logic for AccLaneBf16 {
    #[hdl_gen]
    fn update(&mut self) {
        self.mul_product.a.next = self.imm.val();
        self.mul_product.b.next = self.y.val();
        if self.op.val() == AccOp::Scale {
            self.mul_product.b.next = self.x.val();
        }
        self.mul_round.prod.next = self.mul_product.prod.val();
        self.mul_round.e_sum.next = self.mul_product.e_sum.val();
        self.mul_round.flags.next = self.mul_product.flags.val();
        for k in 0..self.prod_q.len() {
            self.prod_q[k].clock.next = self.clock.val();
            self.e_sum_q[k].clock.next = self.clock.val();
            self.mul_flags_q[k].clock.next = self.clock.val();
            self.prod_q[k].d.next = self.prod_q[k].q.val();
            self.e_sum_q[k].d.next = self.e_sum_q[k].q.val();
            self.mul_flags_q[k].d.next = self.mul_flags_q[k].q.val();
            if self.enable.val() {
                self.prod_q[k].d.next = self.mul_product.prod.val();
                self.e_sum_q[k].d.next = self.mul_product.e_sum.val();
                self.mul_flags_q[k].d.next = self.mul_product.flags.val();
            }
            self.mul_round.prod.next = self.prod_q[k].q.val();
            self.mul_round.e_sum.next = self.e_sum_q[k].q.val();
            self.mul_round.flags.next = self.mul_flags_q[k].q.val();
        }
        self.product.next = self.mul_round.y.val();
        for k in 0..self.product_q.len() {
            self.product_q[k].clock.next = self.clock.val();
            self.product_q[k].d.next = self.product_q[k].q.val();
            if self.enable.val() {
                self.product_q[k].d.next = self.mul_round.y.val();
            }
            self.product.next = self.product_q[k].q.val();
        }
        self.align.a.next = self.x.val();
        self.align.b.next = self.product.val();
        if self.op.val() == AccOp::BiasAdd || self.op.val() == AccOp::BiasRelu {
            self.align.b.next = self.y.val();
        }
        if self.op.val() == AccOp::Accumulate {
            self.align.b.next = self.array.val();
        }
        self.normalize.x.next = self.align.x.val();
        self.normalize.mz.next = self.align.mz.val();
        self.normalize.z_flags.next = self.align.z_flags.val();
        self.array_word.next = self.array.val();
        for k in 0..self.x_q.len() {
            self.x_q[k].clock.next = self.clock.val();
            self.mz_q[k].clock.next = self.clock.val();
            self.z_flags_q[k].clock.next = self.clock.val();
            self.array_q[k].clock.next = self.clock.val();
            self.x_q[k].d.next = self.x_q[k].q.val();
            self.mz_q[k].d.next = self.mz_q[k].q.val();
            self.z_flags_q[k].d.next = self.z_flags_q[k].q.val();
            self.array_q[k].d.next = self.array_q[k].q.val();
            if self.enable.val() {
                self.x_q[k].d.next = self.align.x.val();
                self.mz_q[k].d.next = self.align.mz.val();
                self.z_flags_q[k].d.next = self.align.z_flags.val();
                self.array_q[k].d.next = self.array.val();
            }
            self.normalize.x.next = self.x_q[k].q.val();
            self.normalize.mz.next = self.mz_q[k].q.val();
            self.normalize.z_flags.next = self.z_flags_q[k].q.val();
            self.array_word.next = self.array_q[k].q.val();
        }
        for _k in 0..self.sig_add.len() {
            self.sig_add.x.next = self.align.x.val();
            self.sig_add.mz.next = self.align.mz.val();
            self.sig_add.z_flags.next = self.align.z_flags.val();
            self.normalize.sum.next = self.sig_add.s.val();
        }
        for k in 0..self.s_q.len() {
            self.s_q[k].clock.next = self.clock.val();
            self.s_q[k].d.next = self.s_q[k].q.val();
            if self.enable.val() {
                self.s_q[k].d.next = self.sig_add.s.val();
            }
            self.normalize.sum.next = self.s_q[k].q.val();
        }
        self.round.norm.next = self.normalize.norm.val();
        self.round.e_pre.next = self.normalize.e_pre.val();
        self.round.flags.next = self.normalize.flags.val();
        for k in 0..self.norm_q.len() {
            self.norm_q[k].clock.next = self.clock.val();
            self.e_pre_q[k].clock.next = self.clock.val();
            self.flags_q[k].clock.next = self.clock.val();
            self.array_qq[k].clock.next = self.clock.val();
            self.norm_q[k].d.next = self.norm_q[k].q.val();
            self.e_pre_q[k].d.next = self.e_pre_q[k].q.val();
            self.flags_q[k].d.next = self.flags_q[k].q.val();
            self.array_qq[k].d.next = self.array_qq[k].q.val();
            if self.enable.val() {
                self.norm_q[k].d.next = self.normalize.norm.val();
                self.e_pre_q[k].d.next = self.normalize.e_pre.val();
                self.flags_q[k].d.next = self.normalize.flags.val();
                self.array_qq[k].d.next = self.array_q[k].q.val();
            }
            self.round.norm.next = self.norm_q[k].q.val();
            self.round.e_pre.next = self.e_pre_q[k].q.val();
            self.round.flags.next = self.flags_q[k].q.val();
            self.array_word.next = self.array_qq[k].q.val();
        }
        // The sum as written: flushed and canonical, so `<= 0` is its sign or a zero exponent,
        // NaN excepted.
        self.sum_le_zero.next = !self.round.y.val().get_bits::<8>(23).any()
            || (self.round.y.val().get_bit(31)
                && !(self.round.y.val().get_bits::<8>(23).all()
                    && self.round.y.val().get_bits::<23>(0).any()));
        self.x_clean.next = self.x.val();
        if !self.x.val().get_bits::<8>(23).any() {
            self.x_clean.next = 0.into();
        }
        self.x_nan.next =
            self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any();
        if self.x_nan.val() {
            self.x_clean.next = 0x7FC0_0000.into();
        }
        self.y_clean.next = self.y.val();
        if !self.y.val().get_bits::<8>(23).any() {
            self.y_clean.next = 0.into();
        }
        self.y_nan.next =
            self.y.val().get_bits::<8>(23).all() && self.y.val().get_bits::<23>(0).any();
        if self.y_nan.val() {
            self.y_clean.next = 0x7FC0_0000.into();
        }
        // Sign and magnitude: a clean zero is +0, so different signs order by sign alone.
        self.y_above.next =
            self.y_clean.val().get_bits::<31>(0) > self.x_clean.val().get_bits::<31>(0);
        if self.x_clean.val().get_bit(31) && self.y_clean.val().get_bit(31) {
            self.y_above.next =
                self.y_clean.val().get_bits::<31>(0) < self.x_clean.val().get_bits::<31>(0);
        }
        if self.x_clean.val().get_bit(31) != self.y_clean.val().get_bit(31) {
            self.y_above.next = self.x_clean.val().get_bit(31);
        }
        // `v <= 0` after DAZ: zero exponent, or negative and not NaN.
        self.x_le_zero.next = !self.x.val().get_bits::<8>(23).any()
            || (self.x.val().get_bit(31)
                && !(self.x.val().get_bits::<8>(23).all() && self.x.val().get_bits::<23>(0).any()));
        self.y_le_zero.next = !self.y.val().get_bits::<8>(23).any()
            || (self.y.val().get_bit(31)
                && !(self.y.val().get_bits::<8>(23).all() && self.y.val().get_bits::<23>(0).any()));
        match self.op.val() {
            AccOp::Overwrite => self.result.next = self.array_word.val(),
            AccOp::Relu => {
                self.result.next = self.x_clean.val();
                if self.x_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::ReluGrad => {
                self.result.next = self.x_clean.val();
                if self.y_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::Scale => self.result.next = self.product.val(),
            AccOp::Word => self.result.next = self.word.val(),
            AccOp::BiasRelu => {
                self.result.next = self.round.y.val();
                if self.sum_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::Max => {
                self.result.next = self.x_clean.val();
                if !self.x_nan.val() && (self.y_nan.val() || self.y_above.val()) {
                    self.result.next = self.y_clean.val();
                }
            }
            AccOp::Equal => {
                self.result.next = 0.into();
                if self.x_clean.val() == self.y_clean.val() {
                    self.result.next = 0x3F80_0000.into();
                }
            }
            _ => self.result.next = self.round.y.val(),
        }
    }
}
