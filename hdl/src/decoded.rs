//! The decoded instruction as one signal bundle: [`DecodedOut`] leaves the
//! [`Decoder`](crate::decode::Decoder), [`Decoded`] enters every block that reads the instruction (the
//! checks, the footprint, the dispatchers, the units). A top joins them in one line per block
//! (`DecodedOut::join(&mut self.candidate.out, &mut self.seq.ins)`) instead of copying each
//! field; a block reads the fields it needs, and synthesis drops the ones it does not.
//!
//! The field names are the decoder's: one flag per opcode and per vector op (core's names), then
//! every field any layout uses. A field core adds to the ISA needs a line in each struct here
//! (and the decoder fails its tests until it has one).

use rust_hdl::prelude::*;

/// The decoder's side: every decoded flag and field, driven.
#[derive(LogicInterface, Default)]
#[join = "Decoded"]
pub struct DecodedOut {
    pub load: Signal<Out, Bit>,
    pub store: Signal<Out, Bit>,
    pub load_weights: Signal<Out, Bit>,
    pub matmul: Signal<Out, Bit>,
    pub matmul_os: Signal<Out, Bit>,
    pub vector: Signal<Out, Bit>,
    pub cast_bf16: Signal<Out, Bit>,
    pub requantize: Signal<Out, Bit>,
    pub sync: Signal<Out, Bit>,
    pub halt: Signal<Out, Bit>,
    pub load_acc: Signal<Out, Bit>,
    pub store_spad: Signal<Out, Bit>,
    pub store_bf16: Signal<Out, Bit>,
    pub bias_add: Signal<Out, Bit>,
    pub relu: Signal<Out, Bit>,
    pub relu_grad: Signal<Out, Bit>,
    pub scale: Signal<Out, Bit>,
    pub axpy: Signal<Out, Bit>,
    pub bias_relu: Signal<Out, Bit>,
    pub max: Signal<Out, Bit>,
    pub equal: Signal<Out, Bit>,
    pub spad_row: Signal<Out, Bits<16>>,
    pub acc_row: Signal<Out, Bits<16>>,
    pub a_row: Signal<Out, Bits<16>>,
    pub b_row: Signal<Out, Bits<16>>,
    pub dst: Signal<Out, Bits<16>>,
    pub src: Signal<Out, Bits<16>>,
    pub dram_addr: Signal<Out, Bits<32>>,
    pub rows: Signal<Out, Bits<16>>,
    pub len: Signal<Out, Bits<16>>,
    pub row_stride: Signal<Out, Bits<32>>,
    pub elem_stride: Signal<Out, Bits<32>>,
    pub k: Signal<Out, Bits<16>>,
    pub cols: Signal<Out, Bits<16>>,
    pub swap: Signal<Out, Bit>,
    pub accumulate: Signal<Out, Bit>,
    pub op: Signal<Out, Bits<4>>,
    pub imm: Signal<Out, Bits<32>>,
    pub multiplier: Signal<Out, Bits<32>>,
    pub shift: Signal<Out, Bits<5>>,
    pub zero_point: Signal<Out, Bits<8>>,
}

/// A reader's side: the same flags and fields, as inputs.
#[derive(LogicInterface, Default)]
#[join = "DecodedOut"]
pub struct Decoded {
    pub load: Signal<In, Bit>,
    pub store: Signal<In, Bit>,
    pub load_weights: Signal<In, Bit>,
    pub matmul: Signal<In, Bit>,
    pub matmul_os: Signal<In, Bit>,
    pub vector: Signal<In, Bit>,
    pub cast_bf16: Signal<In, Bit>,
    pub requantize: Signal<In, Bit>,
    pub sync: Signal<In, Bit>,
    pub halt: Signal<In, Bit>,
    pub load_acc: Signal<In, Bit>,
    pub store_spad: Signal<In, Bit>,
    pub store_bf16: Signal<In, Bit>,
    pub bias_add: Signal<In, Bit>,
    pub relu: Signal<In, Bit>,
    pub relu_grad: Signal<In, Bit>,
    pub scale: Signal<In, Bit>,
    pub axpy: Signal<In, Bit>,
    pub bias_relu: Signal<In, Bit>,
    pub max: Signal<In, Bit>,
    pub equal: Signal<In, Bit>,
    pub spad_row: Signal<In, Bits<16>>,
    pub acc_row: Signal<In, Bits<16>>,
    pub a_row: Signal<In, Bits<16>>,
    pub b_row: Signal<In, Bits<16>>,
    pub dst: Signal<In, Bits<16>>,
    pub src: Signal<In, Bits<16>>,
    pub dram_addr: Signal<In, Bits<32>>,
    pub rows: Signal<In, Bits<16>>,
    pub len: Signal<In, Bits<16>>,
    pub row_stride: Signal<In, Bits<32>>,
    pub elem_stride: Signal<In, Bits<32>>,
    pub k: Signal<In, Bits<16>>,
    pub cols: Signal<In, Bits<16>>,
    pub swap: Signal<In, Bit>,
    pub accumulate: Signal<In, Bit>,
    pub op: Signal<In, Bits<4>>,
    pub imm: Signal<In, Bits<32>>,
    pub multiplier: Signal<In, Bits<32>>,
    pub shift: Signal<In, Bits<5>>,
    pub zero_point: Signal<In, Bits<8>>,
}
