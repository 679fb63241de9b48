//! The blob format's checks: round trips, every corruption, named fields.
extern crate alloc;
use alloc::vec::Vec;

use super::*;
use crate::compile::Int8Plan;
use crate::graph::MlpSpec;
use crate::params::Params;

fn spec() -> MlpSpec {
    MlpSpec { inputs: 12, hidden: heapless::Vec::from_slice(&[9]).unwrap(), classes: 4 }
}

fn sample(dtype: Dtype) -> Vec<u8> {
    let spec = spec();
    let params = Params::init(&spec, 7);
    let config = ArrayConfig::new(4, 4, dtype);
    let x: Vec<f32> = (0..24).map(|i| libm::sinf(i as f32 * 0.37)).collect();
    let graph = crate::graph::Graph::mlp(&spec).unwrap();
    let plan = Int8Plan::calibrate(&graph, &params, &x, 2).unwrap();
    let int8 = (dtype == Dtype::Int8).then_some(&plan);
    build(&spec.net().unwrap(), &params, &config, 2, int8, 16.0).unwrap()
}

/// Rewrites the checksum after a deliberate edit, so the field checks behind it are reached.
fn reseal(b: &mut [u8]) {
    let body = b.len() - CHECKSUM_BYTES;
    let crc = crc32(&b[..body]);
    b[body..].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn parsed_blobs_reserialise_to_their_bytes() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        let bytes = sample(dtype);
        assert_eq!(Blob::parse(&bytes).unwrap().to_bytes(), bytes, "{dtype:?}");
    }
}

/// The padding after a DRAM write was not checked, so two byte strings parsed to the same
/// blob and `to_bytes` did not give back the one that was parsed.
#[test]
fn nonzero_write_padding_is_refused() {
    // INT8 weights of a 3 x 3 layer: 9 bytes, 3 of padding.
    let spec = MlpSpec { inputs: 3, hidden: heapless::Vec::from_slice(&[3]).unwrap(), classes: 3 };
    let params = Params::init(&spec, 1);
    let graph = crate::graph::Graph::mlp(&spec).unwrap();
    let x = [0.5f32, -0.25, 1.0, 0.1, 0.2, -0.3];
    let plan = Int8Plan::calibrate(&graph, &params, &x, 2).unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let mut bytes = build(&spec.net().unwrap(), &params, &config, 1, Some(&plan), 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    let at = HEADER_BYTES + blob.program().len();
    let (first, len) = blob
        .writes()
        .enumerate()
        .find(|(_, w)| w.data.len() % 4 != 0)
        .map(|(i, w)| (i, w.data.len()))
        .expect("a write whose length is not a multiple of 4");
    let record_at: usize = at
        + blob
            .writes()
            .take(first)
            .map(|w| write_record_bytes(w.data.len()).unwrap())
            .sum::<usize>();
    bytes[record_at + 8 + len] = 1;
    reseal(&mut bytes);
    assert_eq!(Blob::parse(&bytes), Err(BlobError::Write { index: first as u32 }));
}

#[test]
fn crc32_check_value() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32(b""), 0);
}

#[test]
fn built_blobs_parse_with_their_fields() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        let bytes = sample(dtype);
        let blob = Blob::parse(&bytes).unwrap();
        // An MLP uses no `Max`: its target asks for no INT8 comparator.
        assert_eq!(blob.target.config, ArrayConfig::new(4, 4, dtype).with_int8_max(false));
        assert_eq!(blob.batch, 2);
        assert_eq!((blob.input.cols, blob.logits.cols), (12, 4));
        assert_eq!(blob.input.format, Format::input_of(dtype));
        assert_eq!(blob.feature_scale, 16.0);
        assert_eq!(blob.writes().count(), 4);
        assert!(blob.expected_cycles > 0);
        let last = &blob.program()[blob.program().len() - WORD_BYTES..];
        let last = decode(Word::from_le_bytes(last.try_into().unwrap())).unwrap();
        assert_eq!(last, Instruction::Halt);
        // Layer 0's weights: 12 x 9 elements.
        let w0 = blob.writes().next().unwrap();
        assert_eq!(w0.data.len(), 12 * 9 * dtype.elem_bytes());
    }
}

/// Every single corrupted byte, every truncation and one extension are rejected.
#[test]
fn every_corruption_is_rejected() {
    let mut bytes = sample(Dtype::Int8);
    for at in 0..bytes.len() {
        for flip in [0x01, 0x80, 0xFF] {
            bytes[at] ^= flip;
            assert!(Blob::parse(&bytes).is_err(), "byte {at} ^ {flip:#x} accepted");
            bytes[at] ^= flip;
        }
    }
    for cut in 0..bytes.len() {
        assert!(Blob::parse(&bytes[..cut]).is_err(), "{cut} bytes accepted");
    }
    bytes.push(0);
    assert!(matches!(Blob::parse(&bytes), Err(BlobError::Length { .. })));
}

#[test]
fn bad_fields_are_named() {
    let good = sample(Dtype::Int8);
    let edit = |at: usize, v: &[u8]| {
        let mut b = good.clone();
        b[at..at + v.len()].copy_from_slice(v);
        reseal(&mut b);
        Blob::parse(&b).unwrap_err()
    };
    assert_eq!(edit(0, b"SYSC"), BlobError::Magic);
    assert_eq!(edit(4, &3u16.to_le_bytes()), BlobError::Version { found: 3 });
    assert_eq!(edit(4, &1u16.to_le_bytes()), BlobError::Version { found: 1 });
    assert_eq!(edit(44, &0u16.to_le_bytes()), BlobError::Field { field: "batch" });
    assert_eq!(edit(46, &[1]), BlobError::Field { field: "input format" });
    assert_eq!(edit(47, &[9]), BlobError::Field { field: "logits format" });
    assert_eq!(
        edit(56, &f32::NAN.to_bits().to_le_bytes()),
        BlobError::Field { field: "input scale" }
    );
    assert_eq!(edit(64, &u32::MAX.to_le_bytes()), BlobError::Field { field: "logits address" });
    assert_eq!(edit(100, &[1]), BlobError::Field { field: "reserved" });
    // An image of 1 x 0 x 0 is no image; 2 x 2 x 3 is one of the input's 12 features, and
    // 3 x 2 x 3 is not.
    assert_eq!(edit(92, &[1]), BlobError::Field { field: "input image" });
    let mut image = good.clone();
    image[92..100].copy_from_slice(&[2, 0, 2, 0, 3, 0, 0, 0]);
    reseal(&mut image);
    assert_eq!(Blob::parse(&image).unwrap().image, Some(Image { c: 2, h: 2, w: 3, padding: 0 }));
    assert_eq!(edit(92, &[3, 0, 2, 0, 3, 0]), BlobError::Field { field: "input image" });
    // Padding whose images no longer fit the target's DRAM.
    assert_eq!(
        edit(92, &[2, 0, 2, 0, 3, 0, 0xFF, 0xFF]),
        BlobError::Field { field: "input address" }
    );
    assert!(matches!(edit(12 + 2, &0u16.to_le_bytes()), BlobError::Target(_)));
    // The first instruction word made all-zero: opcode 0.
    assert!(matches!(
        edit(HEADER_BYTES, &[0; 16]),
        BlobError::Program(ProgramError { index: 0, kind: ProgramErrorKind::Encoding(_) })
    ));
    // A target with less DRAM than the image: a write no longer fits.
    let dram = Blob::parse(&good).unwrap().target.dram_bytes;
    let e = edit(12 + 16, &(dram / 2).to_le_bytes());
    assert!(
        matches!(e, BlobError::Program(_) | BlobError::Field { .. } | BlobError::Write { .. }),
        "{e:?}"
    );
    let mut wrong_crc = good.clone();
    let n = wrong_crc.len();
    wrong_crc[n - 1] ^= 1;
    assert!(matches!(Blob::parse(&wrong_crc), Err(BlobError::Checksum { .. })));
}

#[test]
fn build_refuses_mismatched_params() {
    let spec = spec();
    let mut params = Params::init(&spec, 1);
    params.layers[1].bias.pop();
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    assert_eq!(
        build(&spec.net().unwrap(), &params, &config, 1, None, 1.0),
        Err(BuildError::Params { layer: 1 })
    );
    let params = Params::init(&spec, 1);
    assert_eq!(
        build(&spec.net().unwrap(), &params, &config, 0, None, 1.0),
        Err(BuildError::Field { field: "batch" })
    );
    let int8 = ArrayConfig::new(4, 4, Dtype::Int8);
    assert!(matches!(
        build(&spec.net().unwrap(), &params, &int8, 1, None, 1.0),
        Err(BuildError::Compile(_))
    ));
}

/// A CNN whose first convolution pads its input, and whose second (after a pooling) pads the
/// pooling's output, which the array copies into a zero-bordered buffer.
fn cnn() -> crate::layers::Net {
    use crate::layers::{Layer, Net, Shape};
    let conv = |i, o, padding| Layer::Conv2d {
        in_channels: i,
        out_channels: o,
        kernel: 3,
        stride: 1,
        padding,
    };
    Net::new(
        Shape::Image { c: 2, h: 6, w: 6 },
        &[
            conv(2, 3, 1),
            Layer::Relu,
            Layer::MaxPool2d { kernel: 2, stride: 2 },
            conv(3, 4, 1),
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 36, outputs: 3 },
        ],
    )
    .unwrap()
}

/// An image model's blob holds its image and padding, places each input value where the
/// compiled step reads it (channels-last, zero-bordered), and zeroes the later convolution's
/// padded copy.
#[test]
fn image_blobs_place_the_input_as_the_step_reads_it() {
    use crate::compile::compile_inference;
    use crate::conv::nchw_to_nhwc;
    let net = cnn();
    let params = Params::init(&net, 5);
    let config = ArrayConfig::new(4, 4, Dtype::Bf16);
    let bytes = build(&net, &params, &config, 2, None, 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    assert_eq!(blob.image, Some(Image { c: 2, h: 6, w: 6, padding: 1 }));
    assert!(!blob.target.config.int8_max, "a BF16 target needs no INT8 comparator");
    assert_eq!((blob.input_len(), blob.input_elements()), (2 * 72, 2 * 2 * 64));
    assert_eq!(blob.to_bytes(), bytes);
    // Values 1, 2, ... channels first: the element each DRAM slot holds is the padded
    // channels-last image the step reads.
    let x: Vec<f32> = (1..=blob.input_len()).map(|v| v as f32).collect();
    let placed: Vec<f32> =
        (0..blob.input_elements()).map(|e| blob.input_source(e).map_or(0.0, |i| x[i])).collect();
    let graph = crate::graph::Graph::network(&net).unwrap();
    let step = compile_inference(&graph, &config, 2, None).unwrap();
    assert_eq!(placed, step.padded_input(&nchw_to_nhwc(&x, 2, 36, 2)));
    // The parameters (two per layer), then the zeros of the padded copy.
    let writes: Vec<DramWrite<'_>> = blob.writes().collect();
    assert_eq!(writes.len(), 6 + step.zeroed.len());
    assert!(!step.zeroed.is_empty());
    for (w, &(at, n)) in writes[6..].iter().zip(&step.zeroed) {
        assert_eq!((w.addr, w.data.len()), (at, n as usize));
        assert!(w.data.iter().all(|&b| b == 0));
    }
}

/// An MLP's blob has no image, and its input is written as it is.
#[test]
fn vector_inputs_have_no_image() {
    let blob_bytes = sample(Dtype::Bf16);
    let blob = Blob::parse(&blob_bytes).unwrap();
    assert_eq!(blob.image, None);
    assert_eq!(blob.input_elements(), blob.input_len());
    assert_eq!((0..5).map(|e| blob.input_source(e)).collect::<Vec<_>>(), [0, 1, 2, 3, 4].map(Some));
}

/// An INT8 blob whose program pools asks for the INT8 lanes' comparator, and one built for a
/// machine without it is refused with the op named.
#[test]
fn an_int8_pooling_blob_asks_for_the_comparator() {
    let net = cnn();
    let params = Params::init(&net, 5);
    let graph = crate::graph::Graph::network(&net).unwrap();
    let x: alloc::vec::Vec<f32> = (0..144).map(|i| libm::sinf(i as f32 * 0.37)).collect();
    let plan = Int8Plan::calibrate(&graph, &params, &x, 2).unwrap();
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let bytes = build(&net, &params, &config, 2, Some(&plan), 1.0).unwrap();
    assert!(Blob::parse(&bytes).unwrap().target.config.int8_max);
    let without = config.with_int8_max(false);
    let e = build(&net, &params, &without, 2, Some(&plan), 1.0).unwrap_err();
    let what = crate::compile::pool::INT8;
    assert_eq!(e, BuildError::Compile(crate::compile::CompileError::NotLowered { what }));
}
