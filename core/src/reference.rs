//! Naive references: plain loops that compute what the array computes, in the order it sums.
//! They are the oracle of the tests and live beside the fast paths on purpose.

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "alloc")]
use alloc::vec::Vec;

#[cfg(feature = "alloc")]
use crate::numerics::Arith;

/// `C = A x B` (row-major, `m x k` times `k x n`), returned as stored accumulator bits.
///
/// For each output, K is summed in chunks of `k_chunk` (the array's R for weight-stationary, the
/// tiler's K chunk for output-stationary): each chunk from zero, in k order, and each chunk's sum
/// added to the running accumulator, which is stored and read back between chunks as the
/// accumulator memory would. Zero padding of partial tiles is left out: adding `+0` to a partial
/// sum (never `-0`) is exact.
#[cfg(feature = "alloc")]
pub fn gemm<A: Arith>(
    a: &[A::Elem],
    b: &[A::Elem],
    m: usize,
    k: usize,
    n: usize,
    k_chunk: usize,
) -> Vec<u32> {
    assert_eq!(a.len(), m * k, "A is not m x k");
    assert_eq!(b.len(), k * n, "B is not k x n");
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc: Option<u32> = None;
            for k0 in (0..k).step_by(k_chunk.max(1)) {
                let mut s = A::zero();
                for kk in k0..(k0 + k_chunk).min(k) {
                    s = A::mac(s, A::operand(a[i * k + kk]), A::operand(b[kk * n + j]));
                }
                acc = Some(match acc {
                    None => A::acc_to_bits(s),
                    Some(bits) => A::acc_to_bits(A::add(A::acc_from_bits(bits), s)),
                });
            }
            c.push(acc.unwrap_or(0));
        }
    }
    c
}
