//! Convolution and pooling shapes across the whole `u32` range (issue 73): every geometry core
//! accepts has PyTorch's output sides, computed here in `u128`, and every one whose true sizes
//! do not fit core's limits is refused naming a model file's field, never wrapped.

use proptest::prelude::*;
use systole_core::conv::{ConvGeometry, PoolGeometry, MAX_PADDED_IMAGE};
use systole_core::layers::{Layer, Net, Shape, MAX_WIDTH};

/// Any `u32`, biased toward the edges: 0, 1, small, 2^16 and 2^31 and their neighbours, and
/// `u32::MAX` and just below it.
fn edgy() -> impl Strategy<Value = u32> {
    let edges = vec![
        0,
        1,
        2,
        3,
        65_535,
        65_536,
        65_537,
        (1 << 31) - 1,
        1 << 31,
        (1 << 31) + 1,
        u32::MAX - 1,
        u32::MAX,
    ];
    prop_oneof![
        3 => prop::sample::select(edges),
        3 => 0u32..10,
        1 => 0u32..70_000,
        2 => any::<u32>(),
        1 => (0u32..8).prop_map(|d| u32::MAX - d),
    ]
}

/// PyTorch's output side, `floor((side + 2 padding - dilation (kernel - 1) - 1) / stride) + 1`
/// with dilation 1, in `u128`; `None` where the kernel is larger than the padded side.
fn torch_side(side: u32, kernel: u32, stride: u32, padding: u32) -> Option<u128> {
    let padded = side as u128 + 2 * padding as u128;
    let span = kernel as u128 - 1;
    (padded > span).then(|| (padded - span - 1) / stride as u128 + 1)
}

/// Whether a convolution of these fields fits every limit core states, restated in `u128`.
fn conv_fits(chw: (u32, u32, u32), out_c: u32, kernel: u32, stride: u32, padding: u32) -> bool {
    let (c, h, w) = chw;
    let max = MAX_WIDTH as u128;
    if [c, h, w, out_c, kernel, stride].contains(&0) {
        return false;
    }
    let (Some(oh), Some(ow)) =
        (torch_side(h, kernel, stride, padding), torch_side(w, kernel, stride, padding))
    else {
        return false;
    };
    let (c, k, p) = (c as u128, kernel as u128, padding as u128);
    let padded = c * (h as u128 + 2 * p) * (w as u128 + 2 * p);
    c * h as u128 * w as u128 <= max
        && out_c as u128 <= max
        && oh.max(ow) <= max
        && oh * ow <= max
        && c * k * k <= max
        && p <= max
        && padded <= MAX_PADDED_IMAGE as u128
        && stride as u128 <= max
}

const FIELDS: [&str; 5] = ["in", "out", "kernel", "stride", "padding"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn convolution_shapes_are_pytorchs_or_refused(
        chw in (edgy(), edgy(), edgy()),
        out_c in edgy(),
        kernel in edgy(),
        stride in edgy(),
        padding in edgy(),
    ) {
        let got = ConvGeometry::new(chw, out_c, kernel, stride, padding);
        let fits = conv_fits(chw, out_c, kernel, stride, padding);
        match got {
            Ok(g) => {
                prop_assert!(fits, "accepted past a limit: {:?}", g);
                let oh = torch_side(chw.1, kernel, stride, padding);
                let ow = torch_side(chw.2, kernel, stride, padding);
                prop_assert_eq!((Some(g.out_h() as u128), Some(g.out_w() as u128)), (oh, ow));
                let patch = chw.0 as u128 * kernel as u128 * kernel as u128;
                prop_assert_eq!(g.patch() as u128, patch);
                prop_assert_eq!(g.positions() as u128, oh.unwrap() * ow.unwrap());
            }
            Err(e) => {
                prop_assert!(!fits, "refused within the limits: {}", e);
                prop_assert!(FIELDS.contains(&e.field()), "{}", e);
            }
        }
        // Through a layer list: the shape after the convolution is PyTorch's, or the list is
        // refused naming the input or layer 0.
        let (c, h, w) = chw;
        let conv = Layer::Conv2d { in_channels: c, out_channels: out_c, kernel, stride, padding };
        let layers = [conv, Layer::Flatten];
        match Net::new(Shape::Image { c, h, w }, &layers) {
            Ok(net) => {
                let oh = torch_side(h, kernel, stride, padding).unwrap();
                let ow = torch_side(w, kernel, stride, padding).unwrap();
                let Shape::Image { c: oc, h: nh, w: nw } = net.shapes[0] else {
                    return Err(TestCaseError::fail("not an image"));
                };
                prop_assert_eq!((oc, nh as u128, nw as u128), (out_c, oh, ow));
                prop_assert!(out_c as u128 * oh * ow <= MAX_WIDTH as u128);
            }
            Err(e) => prop_assert!(e.layer.is_none() || e.layer == Some(0) || e.layer == Some(1)),
        }
    }

    #[test]
    fn pooling_shapes_are_pytorchs_or_refused(
        chw in (edgy(), edgy(), edgy()),
        kernel in edgy(),
        stride in edgy(),
    ) {
        let (c, h, w) = chw;
        let fits = ![c, h, w, kernel, stride].contains(&0)
            && c as u128 * h as u128 * w as u128 <= MAX_WIDTH as u128
            && kernel <= h.min(w)
            && stride <= MAX_WIDTH;
        match PoolGeometry::new(chw, kernel, stride) {
            Ok(g) => {
                prop_assert!(fits, "accepted past a limit: {:?}", g);
                let side = |s: u32| (s as u128 - kernel as u128) / stride as u128 + 1;
                prop_assert_eq!((g.out_h() as u128, g.out_w() as u128), (side(h), side(w)));
                prop_assert_eq!(g.size() as u128, kernel as u128 * kernel as u128);
            }
            Err(e) => {
                prop_assert!(!fits, "refused within the limits: {}", e);
                prop_assert!(FIELDS.contains(&e.field()), "{}", e);
            }
        }
    }
}

/// A few accepted edges the random draws rarely reach: a stride far past the input (one output
/// position, as in PyTorch), the largest padding the padded image allows, and a patch of
/// exactly `MAX_WIDTH` elements.
#[test]
fn accepted_edges_have_pytorchs_sides() {
    let cases = [
        ((1, 8, 8), 3, 65_536, 0, (1, 1)),
        ((1, 1, 1), 1, 32_766, 16_383, (2, 2)),
        ((1, 256, 256), 256, 1, 0, (1, 1)),
    ];
    for (chw, kernel, stride, padding, (oh, ow)) in cases {
        let g = ConvGeometry::new(chw, 1, kernel, stride, padding).unwrap();
        assert_eq!((g.out_h(), g.out_w()), (oh, ow), "{g:?}");
        let torch = torch_side(chw.1, kernel, stride, padding).unwrap();
        assert_eq!(torch, oh as u128);
    }
}
