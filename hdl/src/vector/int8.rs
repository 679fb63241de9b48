//! The INT8 accumulator lane and the 32 x 32 multiplier its requantize lane uses.

use rust_hdl::prelude::*;

use super::AccOp;

/// `a * b` for two 32-bit words as the four unsigned 16 x 16 products (`ll = a_lo * b_lo`,
/// `lh = a_lo * b_hi`, `hl = a_hi * b_lo`, `hh = a_hi * b_hi`), which the requantize lane sums.
#[derive(LogicBlock, Default)]
pub struct Mul32 {
    pub a: Signal<In, Bits<32>>,
    pub b: Signal<In, Bits<32>>,
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
}

impl Logic for Mul32 {
    #[hdl_gen]
    fn update(&mut self) {
        self.ll.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(0);
        self.lh.next = self.a.val().get_bits::<16>(0) * self.b.val().get_bits::<16>(16);
        self.hl.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(0);
        self.hh.next = self.a.val().get_bits::<16>(16) * self.b.val().get_bits::<16>(16);
    }
}

/// The larger of two i32 words (`x` on a tie): an INT8 lane's comparator, for `Max`.
#[derive(LogicBlock, Default)]
pub struct MaxInt32 {
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    y_above: Signal<Local, Bit>,
}

impl Logic for MaxInt32 {
    #[hdl_gen]
    fn update(&mut self) {
        // Signed order: a negative `x` is below a non-negative `y`; same signs compare as
        // unsigned words.
        self.y_above.next = (self.x.val().get_bit(31) && !self.y.val().get_bit(31))
            || (self.x.val().get_bit(31) == self.y.val().get_bit(31)
                && self.y.val() > self.x.val());
        self.result.next = self.x.val();
        if self.y_above.val() {
            self.result.next = self.y.val();
        }
    }
}

/// The INT8 accumulator lane: i32 words, wrapping arithmetic.
#[derive(LogicBlock, Default)]
pub struct AccLaneInt8 {
    pub op: Signal<In, AccOp>,
    pub x: Signal<In, Bits<32>>,
    pub y: Signal<In, Bits<32>>,
    pub array: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    pub multiplier: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
    mul: Mul32,
    /// The comparator, where the machine has one (`ArrayConfig::int8_max`): `Max`.
    max: Vec<MaxInt32>,
    x_le_zero: Signal<Local, Bit>,
    y_le_zero: Signal<Local, Bit>,
    /// What `x` is added to: the array's word, the bias word or the product (one adder).
    addend: Signal<Local, Bits<32>>,
    sum: Signal<Local, Bits<32>>,
    sum_le_zero: Signal<Local, Bit>,
}

impl AccLaneInt8 {
    /// A lane, with its comparator when `int8_max`.
    pub fn new(int8_max: bool) -> AccLaneInt8 {
        let max = if int8_max { vec![MaxInt32::default()] } else { vec![] };
        AccLaneInt8 { max, ..Default::default() }
    }
}

impl Logic for AccLaneInt8 {
    #[hdl_gen]
    fn update(&mut self) {
        // `x * multiplier` for the requantize lane only: `Scale` and `Axpy` are BF16 ops
        // (core's `VectorOp::bf16_only`), so no accumulator word goes through the multiplier
        // on its way back into the accumulators.
        self.mul.a.next = self.x.val();
        self.mul.b.next = self.multiplier.val();
        self.ll.next = self.mul.ll.val();
        self.lh.next = self.mul.lh.val();
        self.hl.next = self.mul.hl.val();
        self.hh.next = self.mul.hh.val();
        self.x_le_zero.next = self.x.val().get_bit(31) || !self.x.val().any();
        self.y_le_zero.next = self.y.val().get_bit(31) || !self.y.val().any();
        self.addend.next = self.y.val();
        if self.op.val() == AccOp::Accumulate {
            self.addend.next = self.array.val();
        }
        self.sum.next = self.x.val() + self.addend.val();
        self.sum_le_zero.next = self.sum.val().get_bit(31) || !self.sum.val().any();
        match self.op.val() {
            AccOp::Overwrite => self.result.next = self.array.val(),
            AccOp::Accumulate => self.result.next = self.sum.val(),
            AccOp::BiasAdd => self.result.next = self.sum.val(),
            AccOp::Relu => {
                self.result.next = self.x.val();
                if self.x_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::ReluGrad => {
                self.result.next = self.x.val();
                if self.y_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            AccOp::BiasRelu => {
                self.result.next = self.sum.val();
                if self.sum_le_zero.val() {
                    self.result.next = 0.into();
                }
            }
            // `Word`, and the ops an INT8 machine never runs (`Scale`, `Axpy`, `Equal`; `Max`
            // without the comparator).
            _ => self.result.next = self.word.val(),
        }
        for k in 0..self.max.len() {
            self.max[k].x.next = self.x.val();
            self.max[k].y.next = self.y.val();
            if self.op.val() == AccOp::Max {
                self.result.next = self.max[k].result.val();
            }
        }
    }
}
