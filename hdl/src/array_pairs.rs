//! An array's INT8 products formed two to a [`DspPair`]: product `k` (in the array's `i * C + j`
//! order) in pair `k / 2`, its low half when `k` is even, the last product alone in its pair
//! when the count is odd. The systolic array (`ArrayWs::paired`) and the adder-tree array
//! (`ArrayTree`) wire their pairs alike through these.

use rust_hdl::prelude::*;

use crate::pe::DspPair;
use crate::wire::{wire, wire_zero};

/// The pairs that form `products` products.
pub(crate) fn pairs_for(products: usize) -> Vec<DspPair> {
    (0..products.div_ceil(2)).map(|_| DspPair::default()).collect()
}

/// Drives every pair's clock, enable and operands for `products` products, product `k`'s
/// operands being `operands(k)`; the lone last pair's second half multiplies zeros.
pub(crate) fn drive(
    pairs: &mut [DspPair],
    products: usize,
    clock: Clock,
    enable: bool,
    operands: impl Fn(usize) -> (Bits<8>, Bits<8>),
) {
    for (q, pair) in pairs.iter_mut().enumerate() {
        let (lo, hi) = (2 * q, 2 * q + 1);
        pair.clock.next = clock;
        pair.enable.next = enable;
        (pair.a0.next, pair.b0.next) = operands(lo);
        (pair.a1.next, pair.b1.next) =
            if hi < products { operands(hi) } else { (Bits::default(), Bits::default()) };
    }
}

/// Product `k` of the pairs.
pub(crate) fn product(pairs: &[DspPair], k: usize) -> Bits<16> {
    let pair = &pairs[k / 2];
    if k % 2 == 0 {
        pair.p0.val()
    } else {
        pair.p1.val()
    }
}

/// The Verilog name of product `k`'s output.
pub(crate) fn product_name(k: usize) -> String {
    format!("pairs${}$p{}", k / 2, k % 2)
}

pub(crate) fn connect(pairs: &mut [DspPair]) {
    for d in pairs {
        d.clock.connect();
        d.enable.connect();
        d.a0.connect();
        d.b0.connect();
        d.a1.connect();
        d.b1.connect();
    }
}

/// The Verilog of [`drive`]: product `k`'s operands are the signals `operands(k)`; with
/// `product_to(k)`, the signal product `k` is wired into.
pub(crate) fn wires(
    code: &mut Vec<ast::VerilogStatement>,
    products: usize,
    operands: impl Fn(usize) -> (String, String),
    product_to: impl Fn(usize) -> Option<String>,
) {
    for q in 0..products.div_ceil(2) {
        let (lo, hi) = (2 * q, 2 * q + 1);
        code.push(wire(format!("pairs${q}$clock"), "clock".into()));
        code.push(wire(format!("pairs${q}$enable"), "enable".into()));
        for (k, half) in [(lo, 0), (hi, 1)] {
            if k < products {
                let (a, b) = operands(k);
                code.push(wire(format!("pairs${q}$a{half}"), a));
                code.push(wire(format!("pairs${q}$b{half}"), b));
                if let Some(dst) = product_to(k) {
                    code.push(wire(dst, product_name(k)));
                }
            } else {
                code.push(wire_zero(format!("pairs${q}$a{half}"), 8));
                code.push(wire_zero(format!("pairs${q}$b{half}"), 8));
            }
        }
    }
}
