//! The vector unit: one accumulator row per cycle, one lane per column, each lane combinational
//! (read data arrives registered, the result is written at the end of the same cycle) but for a
//! paced BF16 lane's product register ([`paced_scale`]). The conversion lanes beside it are
//! `crate::convert`'s.
//!
//! * [`AccLane`]: everything that writes an accumulator word: the array's output row (written, or
//!   added to the word there), every [`VectorOp`](systole_core::isa::VectorOp), and a word
//!   from DRAM or the host. INT8 and BF16 lanes share nothing but the interface, and a lane holds
//!   the datapath of its dtype only (the other is an empty `Vec`, as in [`crate::pe::Mac`]). One
//!   adder per lane serves every op; a BF16 lane's multiplier serves `Scale` and `Axpy`, and its
//!   comparator `Max` and `Equal`, which INT8 machines reject (core's `VectorOp::runs_on`), so
//!   an INT8 word never passes a multiplier on its way from the accumulators back into them. An
//!   INT8 lane has a signed comparator for `Max` ([`MaxInt32`]) where the machine is built with
//!   one (`ArrayConfig::int8_max`).
//! * [`Mul32`]: an INT8 lane's 32 x 32 multiplier in 16 x 16 pieces (rust-hdl multiplies only
//!   16-bit values), which only the requantize lane uses.
//!
//! Every lane computes exactly core's `Memories::row_step` (core/src/machine/memories.rs) and
//! `write_acc` for one word; the tests check the Rust model against core on random and special
//! operands, and the emitted Verilog (evaluated by Yosys) on a sample.

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dtype};

mod bf16;
mod int8;

pub use bf16::AccLaneBf16;
pub use int8::{AccLaneInt8, MaxInt32, Mul32};

/// What an accumulator lane writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum AccOp {
    /// The array's output word (a matmul without `accumulate`).
    Overwrite,
    /// The word there plus the array's output word.
    Accumulate,
    /// `x + y`: `y` is the bias row's word.
    BiasAdd,
    /// `x`, or zero where `x <= 0`.
    Relu,
    /// `x`, or zero where `y <= 0`.
    ReluGrad,
    /// `x * imm`.
    Scale,
    /// `x + imm * y`, the product rounded first.
    Axpy,
    /// `x + y`, or zero where that is `<= 0`: `BiasAdd` then `Relu` in one pass.
    BiasRelu,
    /// `y` where it is larger than `x` or a NaN where `x` is not, else `x`.
    Max,
    /// One where `x == y` (two NaNs too), else zero.
    Equal,
    /// `word` as it is (`LoadAcc`, the host).
    Word,
}

/// One accumulator lane of either dtype.
#[derive(LogicBlock)]
pub struct AccLane {
    /// Clock and clock enable of a BF16 lane's product register ([`paced_scale`]); unused
    /// elsewhere.
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub op: Signal<In, AccOp>,
    /// The word at the destination (accumulator read port A).
    pub x: Signal<In, Bits<32>>,
    /// The source word (read port B).
    pub y: Signal<In, Bits<32>>,
    /// The array's de-skewed output word.
    pub array: Signal<In, Bits<32>>,
    /// The vector op's immediate.
    pub imm: Signal<In, Bits<32>>,
    pub word: Signal<In, Bits<32>>,
    /// INT8: the requantize lane's multiplier, which this lane's [`Mul32`] multiplies `x` by
    /// (the lane's own ops never multiply: `Scale` and `Axpy` are BF16 ops).
    pub multiplier: Signal<In, Bits<32>>,
    pub result: Signal<Out, Bits<32>>,
    /// INT8: the multiplier's four 16 x 16 products ([`Mul32`]), for the requantize lane
    /// (zero for BF16).
    pub ll: Signal<Out, Bits<32>>,
    pub lh: Signal<Out, Bits<32>>,
    pub hl: Signal<Out, Bits<32>>,
    pub hh: Signal<Out, Bits<32>>,
    int8: Vec<AccLaneInt8>,
    bf16: Vec<AccLaneBf16>,
}

/// How a lane is built: a BF16 lane's product registered ([`paced_scale`]) and split
/// ([`split_product`]), the registers inside its f32 add ([`add_registers`]), and an INT8
/// lane's comparator (`ArrayConfig::int8_max`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneBuild {
    pub paced: bool,
    pub split: bool,
    pub add_registers: u8,
    pub int8_max: bool,
    /// A BF16 lane's f32 aligner shifts beside the operands' comparison
    /// ([`crate::float::F32Align::parallel`]; `TopConfig::parallel_align`).
    pub parallel_align: bool,
    /// A BF16 lane's f32 add rounds with its exponent formed early
    /// ([`crate::float::F32Round::early_exponent`]: revision 3 on).
    pub lean_add: bool,
    /// A BF16 lane's aligned significands are summed beside its aligner, before the add's
    /// first register if it has one ([`crate::float::F32Normalize::given_sum`]: revision 4 on).
    pub early_sum: bool,
}

impl LaneBuild {
    /// The accumulator lanes of a machine built with `config`.
    pub fn of(config: &ArrayConfig) -> LaneBuild {
        LaneBuild {
            paced: paced_scale(config),
            split: split_product(config),
            add_registers: add_registers(config),
            int8_max: config.int8_max,
            parallel_align: false,
            lean_add: false,
            early_sum: false,
        }
    }

    /// The same lanes with their aligner built as `top` asks.
    pub fn for_top(top: &crate::TopConfig) -> LaneBuild {
        LaneBuild {
            parallel_align: top.parallel_align,
            lean_add: top.rtl_revision >= 3,
            early_sum: top.rtl_revision >= 4,
            ..LaneBuild::of(&top.array)
        }
    }
}

/// The registers inside a machine's BF16 lanes' f32 add: `add_stages - 1`, the aligned
/// operands' (2) and the normalised sum's (3). Each makes a row that adds hold the lanes a cycle
/// more and a result row of the array land a cycle later (core's `timing::vector_row_cycles`,
/// `timing::lane_latency`); INT8 lanes have none.
pub fn add_registers(config: &ArrayConfig) -> u8 {
    if config.dtype == Dtype::Bf16 {
        config.add_stages - 1
    } else {
        0
    }
}

/// Whether a machine's BF16 lanes register their product before the sum: built with
/// `scale_cycles = 2`, a `Scale` or `Axpy` row holds the lanes two cycles (core's
/// `timing::row_lands`), the product made in the first and added in the second; with 3, see
/// [`split_product`].
pub fn paced_scale(config: &ArrayConfig) -> bool {
    config.dtype == Dtype::Bf16 && config.scale_cycles >= 2
}

/// Whether a machine's BF16 lanes also register their multiplier's halves apart: built with
/// `scale_cycles = 3`, a `Scale` or `Axpy` row holds the lanes three cycles, the significands'
/// product made in the first, rounded in the second and added in the third.
pub fn split_product(config: &ArrayConfig) -> bool {
    config.dtype == Dtype::Bf16 && config.scale_cycles == 3
}

impl AccLane {
    /// A lane of `dtype`, built as `build` says.
    pub fn new(dtype: Dtype, build: LaneBuild) -> AccLane {
        AccLane {
            clock: Default::default(),
            enable: Default::default(),
            op: Default::default(),
            x: Default::default(),
            y: Default::default(),
            array: Default::default(),
            imm: Default::default(),
            word: Default::default(),
            multiplier: Default::default(),
            result: Default::default(),
            ll: Default::default(),
            lh: Default::default(),
            hl: Default::default(),
            hh: Default::default(),
            int8: match dtype {
                Dtype::Int8 => vec![AccLaneInt8::new(build.int8_max)],
                Dtype::Bf16 => vec![],
            },
            bf16: match dtype {
                Dtype::Bf16 => {
                    vec![AccLaneBf16::new(&build)]
                }
                Dtype::Int8 => vec![],
            },
        }
    }
}

impl Logic for AccLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.result.next = 0.into();
        self.ll.next = 0.into();
        self.lh.next = 0.into();
        self.hl.next = 0.into();
        self.hh.next = 0.into();
        for k in 0..self.int8.len() {
            self.int8[k].multiplier.next = self.multiplier.val();
            self.ll.next = self.int8[k].ll.val();
            self.lh.next = self.int8[k].lh.val();
            self.hl.next = self.int8[k].hl.val();
            self.hh.next = self.int8[k].hh.val();
            self.int8[k].op.next = self.op.val();
            self.int8[k].x.next = self.x.val();
            self.int8[k].y.next = self.y.val();
            self.int8[k].array.next = self.array.val();
            self.int8[k].word.next = self.word.val();
            self.result.next = self.int8[k].result.val();
        }
        for k in 0..self.bf16.len() {
            self.bf16[k].clock.next = self.clock.val();
            self.bf16[k].enable.next = self.enable.val();
            self.bf16[k].op.next = self.op.val();
            self.bf16[k].x.next = self.x.val();
            self.bf16[k].y.next = self.y.val();
            self.bf16[k].array.next = self.array.val();
            self.bf16[k].imm.next = self.imm.val();
            self.bf16[k].word.next = self.word.val();
            self.result.next = self.bf16[k].result.val();
        }
    }
}

#[cfg(test)]
mod tests;
