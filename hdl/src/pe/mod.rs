//! The processing elements, built on the multiply-accumulate units of `mac.rs` ([`Mac`]).
//!
//! [`PeWs`] is a weight-stationary PE: an activation register passing right, a partial-sum
//! register passing down, and weights that load (shifting down the column) while others compute:
//! under the blocking schedule an active weight and a shadow swapped in at a matmul's dispatch,
//! under the decoupled one three banks, picked by a tag that travels with each input row.
//! [`PeOs`] is an output-stationary PE: A passing right, B passing down, the sum held in place
//! and drained upwards a row per cycle.

use rust_hdl::prelude::*;
use systole_core::numerics::int8;
use systole_core::scoreboard::WEIGHT_BANKS;
use systole_core::{ArrayConfig, Schedule};

use crate::optional::Optional;

mod dsp_pair;
mod mac;
pub use dsp_pair::{ice40_cells_model, module_of, DspPair};
pub use mac::{
    Mac, MacBf16, MacBf16Pipelined, MacBf16Staged, MacInt8, MacInt8Paired, MacInt8Staged,
};

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
/// is the upper neighbour's `p`, or zero on the top row; with a two-stage [`Mac`], `p_in` plus
/// the product of the cycle before, so every sum is a cycle late; with a three-stage BF16 one,
/// the sum of the `p_in` of the cycle before and the product before that, so `p` takes two
/// cycles from `p_in`, [`MacBf16Pipelined`]). Nothing changes in a cycle
/// without `enable` (the machine is frozen, docs/HARDWARE.md). The weight `w` and the weight
/// load depend on [`WsWeights`]:
///
/// * `ShadowSwap`: `w` is the active weight, or the shadow weight in the cycle a matmul swaps it
///   in (`swap`), when the active one takes it too. With `shift`, the shadow takes `w_in` (the
///   upper neighbour's shadow, or the loader's row); `w_out` is the shadow.
/// * `Tagged`: `w` is bank `tag_in`'s weight, the bank of the row `a_in` belongs to; `tag`
///   takes `tag_in` beside `a`. With `shift`, bank `load_bank` takes `w_in`; `w_out` is that
///   bank's weight. There is no `swap`: which bank is active is the tags' business.
///
/// Each kind's ports and registers exist only in its config ([`Optional`]), so a blocking PE
/// is emitted exactly as before the tags existed. A PE whose [`Mac`] is paired passes its
/// operands' bytes out on `mul_a` and `mul_b` and takes their registered product on `product`
/// from the [`DspPair`] the array gives it.
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
    pub mul_a: Optional<Signal<Out, Bits<8>>>,
    pub mul_b: Optional<Signal<Out, Bits<8>>>,
    pub product: Optional<Signal<In, Bits<16>>>,
    a: DFF<Bits<16>>,
    tag: Optional<DFF<Bits<TAG_BITS>>>,
    p: DFF<Bits<32>>,
    shadow: Optional<DFF<Bits<16>>>,
    active: Optional<DFF<Bits<16>>>,
    banks: Vec<DFF<Bits<16>>>,
    /// INT8 PEs: the partial sum's bits ([`PeWs::summing`]), its sign bit, and the bits above,
    /// which copy the sign. Absent, they leave no trace in the Verilog.
    sum_low: Optional<Constant<Bits<32>>>,
    sum_sign: Optional<Constant<Bits<32>>>,
    sum_high: Optional<Constant<Bits<32>>>,
    mac: Mac,
}

impl PeWs {
    /// A PE of `mac`'s dtype and stages ([`Mac::of`] a config) holding `weights`.
    pub fn new(mac: Mac, weights: WsWeights) -> PeWs {
        let tagged = weights == WsWeights::Tagged;
        let paired = mac.is_paired();
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
            mul_a: Optional::default_when(paired),
            mul_b: Optional::default_when(paired),
            product: Optional::default_when(paired),
            a: Default::default(),
            tag: Optional::default_when(tagged),
            p: Default::default(),
            shadow: Optional::default_when(!tagged),
            active: Optional::default_when(!tagged),
            banks: (0..if tagged { WEIGHT_BANKS } else { 0 }).map(|_| DFF::default()).collect(),
            sum_low: Optional::none(),
            sum_sign: Optional::none(),
            sum_high: Optional::none(),
            mac,
        }
    }

    /// An INT8 PE whose partial sum is a sum of `products` products (`i + 1` in PE row `i`):
    /// its sum register and adder hold [`int8::product_sum_bits`] of them, sign-extended on
    /// `p_out` (the same bits). A BF16 PE, or a sum that needs all 32 bits, is left as it is.
    pub fn summing(mut self, products: u32) -> PeWs {
        let bits = int8::product_sum_bits(products);
        if self.mac.is_int8() && bits < 32 {
            let low = (1u64 << bits) - 1;
            self.sum_low = Optional::some(Constant::new(low.to_bits()));
            self.sum_sign = Optional::some(Constant::new((1u64 << (bits - 1)).to_bits()));
            self.sum_high = Optional::some(Constant::new((0xFFFF_FFFF & !low).to_bits()));
        }
        self
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
            for _k in 0..self.mac.clock.len() {
                self.mac.clock.next = self.clock.val();
                self.mac.enable.next = self.enable.val();
            }
            for _k in 0..self.product.len() {
                self.mac.product.next = self.product.val();
                self.mul_a.next = self.mac.mul_a.val();
                self.mul_b.next = self.mac.mul_b.val();
            }
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
                for _k in 0..self.sum_low.len() {
                    self.p.d.next = self.mac.y.val() & self.sum_low.val();
                    if (self.mac.y.val() & self.sum_sign.val()).any() {
                        self.p.d.next = self.mac.y.val() | self.sum_high.val();
                    }
                }
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
            for _k in 0..self.mac.clock.len() {
                self.mac.clock.next = self.clock.val();
                self.mac.enable.next = self.enable.val();
            }
            for _k in 0..self.product.len() {
                self.mac.product.next = self.product.val();
                self.mul_a.next = self.mac.mul_a.val();
                self.mul_b.next = self.mac.mul_b.val();
            }
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
                for _k in 0..self.sum_low.len() {
                    self.p.d.next = self.mac.y.val() & self.sum_low.val();
                    if (self.mac.y.val() & self.sum_sign.val()).any() {
                        self.p.d.next = self.mac.y.val() | self.sum_high.val();
                    }
                }
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
/// the sum takes `p_below` instead: the array shifts its results up a row per cycle. With a
/// two-stage [`Mac`] the sum takes `(first ? 0 : sum)` plus the product of the cycle before, so
/// each sum is a cycle late. Nothing
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
    /// A PE of `mac`'s dtype and stages ([`Mac::of`] a config).
    pub fn new(mac: Mac) -> PeOs {
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
            mac,
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
        // A two-stage MAC adds the product of the pair of the cycle before: the sum restarts
        // with the flag that came with that pair, `first` (this assignment replaces the one
        // above; a one-stage MAC emits none of it).
        for _k in 0..self.mac.clock.len() {
            self.mac.clock.next = self.clock.val();
            self.mac.enable.next = self.enable.val();
            self.mac.acc.next = self.p.q.val();
            if self.first.q.val() {
                self.mac.acc.next = 0.into();
            }
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
mod tests;
