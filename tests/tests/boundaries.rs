//! The input boundaries under arbitrary bytes, as property tests (the same properties the
//! `fuzz/` targets assert, so regressions are caught without a fuzzer).

use proptest::prelude::*;
use systole_core::isa::{decode, encode, Word};
use systole_core::protocol::{
    encode_request, encode_response, frame_len, parse_error_code, parse_request, parse_response,
    Identity, ProtocolError, Request, Response, Status, MAX_FRAME, REQUEST_SYNC, RESPONSE_SYNC,
};

/// Bytes shaped like a frame (right sync byte, a plausible length) so that the parsers get past
/// the first checks often, and a valid CRC half of the time.
fn framelike(sync: u8) -> impl Strategy<Value = Vec<u8>> {
    (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()).prop_map(
        move |(kind, payload, fix_crc)| {
            let mut f = vec![sync, kind, payload.len() as u8, (payload.len() >> 8) as u8];
            f.extend_from_slice(&payload);
            let crc = systole_core::protocol::crc16(&f[1..]);
            f.extend_from_slice(&if fix_crc { crc } else { crc ^ 1 }.to_be_bytes());
            assert_eq!(f.len(), frame_len(payload.len()));
            f
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn instruction_words_decode_or_name_their_fault(bytes in any::<[u8; 16]>()) {
        let word = Word::from_le_bytes(bytes);
        if let Ok(ins) = decode(word) {
            prop_assert_eq!(encode(&ins), Ok(word));
        }
    }

    #[test]
    fn requests_reserialise_or_are_answered(bytes in prop_oneof![framelike(REQUEST_SYNC), proptest::collection::vec(any::<u8>(), 0..64)]) {
        match parse_request(&bytes) {
            Ok(req) => {
                let mut out = [0u8; MAX_FRAME];
                let n = encode_request(&req, &mut out).unwrap();
                prop_assert_eq!(&out[..n], &bytes[..]);
            }
            Err(e) => {
                let answered = parse_error_code(&e).is_some();
                let unanswerable = matches!(e, ProtocolError::Sync { .. } | ProtocolError::Frame { .. });
                prop_assert!(answered || unanswerable, "{:?}", e);
            }
        }
    }

    #[test]
    fn responses_reserialise(bytes in prop_oneof![framelike(RESPONSE_SYNC), proptest::collection::vec(any::<u8>(), 0..64)]) {
        if let Ok(resp) = parse_response(&bytes) {
            let mut out = [0u8; MAX_FRAME];
            let n = encode_response(&resp, &mut out).unwrap();
            prop_assert_eq!(&out[..n], &bytes[..]);
            if let Response::Ok(p) = resp {
                if let Ok(s) = Status::from_bytes(p) {
                    prop_assert_eq!(&s.to_bytes()[..], p);
                }
                if let Ok(id) = Identity::from_bytes(p, 100.0) {
                    prop_assert_eq!(&id.to_bytes()[..], p);
                }
            }
        }
    }

    #[test]
    fn a_flipped_bit_anywhere_in_a_request_is_caught(bit in 0usize..(8 * 40), addr in any::<u32>()) {
        let data = [7u8; 30];
        let req = Request::WriteMemory { region: systole_core::Region::Dram, addr, data: &data };
        let mut frame = [0u8; MAX_FRAME];
        let n = encode_request(&req, &mut frame).unwrap();
        let bit = bit % (8 * n);
        frame[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(parse_request(&frame[..n]).is_err(), "bit {} flipped and still accepted", bit);
    }
}

// Convolution and pooling shapes over the whole `u32` range.
mod geometry;

// ---------------------------------------------------------------------------------------------
// The host's file readers (`systole_host`): `.npy` inputs, CSV data sets, safetensors models,
// and core's firmware model blobs. Valid files, then the same files damaged.

mod files {
    use std::path::Path;

    use proptest::prelude::*;
    use std::io::Write;
    use systole_core::blob::{self, Blob};
    use systole_core::compile::Int8Plan;
    use systole_core::graph::{Graph, MlpSpec};
    use systole_core::layers::{Layer, Net, Shape};
    use systole_core::params::Params;
    use systole_core::{ArrayConfig, Bf16, Dtype};
    use systole_host::dataset::{Dataset, IdxArray};
    use systole_host::model::Model;
    use systole_host::net_file::{net_json, parse_net};
    use systole_host::npy::{parse_matrix, write_matrix, Matrix};

    /// One way to damage a file: cut it, flip a bit, insert a byte, or drop one.
    #[derive(Clone, Debug)]
    enum Damage {
        None,
        Truncate(usize),
        Flip(usize, u8),
        Insert(usize, u8),
        Drop(usize),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        prop_oneof![
            1 => Just(Damage::None),
            2 => any::<usize>().prop_map(Damage::Truncate),
            3 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip(at, bit)),
            1 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Damage::Insert(at, b)),
            1 => any::<usize>().prop_map(Damage::Drop),
        ]
    }

    fn apply(mut bytes: Vec<u8>, damage: &Damage) -> Vec<u8> {
        let n = bytes.len().max(1);
        match *damage {
            Damage::None => {}
            Damage::Truncate(at) => bytes.truncate(at % n),
            Damage::Flip(at, bit) if !bytes.is_empty() => bytes[at % n] ^= 1 << bit,
            Damage::Insert(at, b) => bytes.insert(at % (bytes.len() + 1), b),
            Damage::Drop(at) if !bytes.is_empty() => {
                bytes.remove(at % n);
            }
            _ => {}
        }
        bytes
    }

    /// A refusal is one line naming the file.
    fn assert_names(msg: &str, file: &str) -> Result<(), TestCaseError> {
        prop_assert!(msg.starts_with(file), "{:?} does not name {}", msg, file);
        prop_assert!(!msg.contains('\n'), "{:?} is not one line", msg);
        Ok(())
    }

    // -- IDX -----------------------------------------------------------------------------------

    const IMAGES: &str = "in/images-idx3-ubyte";
    const LABELS: &str = "in/labels-idx1-ubyte";

    /// A valid IDX pair: images of 1 to 3 dimensions after the count, labels of two classes
    /// or more.
    fn idx_pair() -> impl Strategy<Value = (IdxArray, IdxArray)> {
        (2u32..6, proptest::collection::vec(1u32..5, 1..=3)).prop_flat_map(|(count, shape)| {
            let pixels = count as usize * shape.iter().product::<u32>() as usize;
            let dims = [&[count][..], &shape].concat();
            (
                proptest::collection::vec(any::<u8>(), pixels),
                proptest::collection::vec(0u8..10, count as usize),
            )
                .prop_map(move |(data, mut l)| {
                    l[0] = 10;
                    (IdxArray { dims: dims.clone(), data }, IdxArray { dims: vec![count], data: l })
                })
        })
    }

    // -- model files (layer lists) ---------------------------------------------------------------

    const NET: &str = "in/model.json";

    /// A model file, valid or not: an input shape and up to six layers of any kind with small
    /// fields, some left out.
    fn net_file() -> impl Strategy<Value = Vec<u8>> {
        let layer = (0usize..6, proptest::collection::vec(proptest::option::of(0u32..9), 5))
            .prop_map(|(kind, v)| {
                let kinds = ["conv2d", "maxpool2d", "avgpool2d", "relu", "flatten", "dense"];
                let mut m = serde_json::Map::new();
                m.insert("kind".into(), kinds[kind].into());
                let names: &[&str] = match kind {
                    0 => &["in", "out", "kernel", "stride", "padding"],
                    1 | 2 => &["kernel", "stride"],
                    5 => &["in", "out"],
                    _ => &[],
                };
                for (name, value) in names.iter().zip(&v) {
                    if let Some(x) = value {
                        m.insert((*name).into(), (*x).into());
                    }
                }
                serde_json::Value::Object(m)
            });
        (
            prop_oneof![
                (1u32..9).prop_map(|n| vec![n]),
                (1u32..3, 1u32..9, 1u32..9).prop_map(|(c, h, w)| vec![c, h, w])
            ],
            proptest::collection::vec(layer, 1..7),
        )
            .prop_map(|(input, layers)| {
                serde_json::json!({ "input": input, "layers": layers }).to_string().into_bytes()
            })
    }

    // -- .npy ----------------------------------------------------------------------------------

    const NPY: &str = "in/A.npy";

    /// A valid input file: `(dtype, bytes, the matrix it holds)`.
    fn npy_file() -> impl Strategy<Value = (Dtype, Vec<u8>, Matrix)> {
        (any::<bool>(), 1u32..5, 1u32..6, any::<bool>(), any::<u64>()).prop_map(
            |(bf16, rows, cols, fortran, seed)| {
                let dtype = if bf16 { Dtype::Bf16 } else { Dtype::Int8 };
                let mut rng = systole_tests::SplitMix(seed);
                let n = (rows * cols) as usize;
                let elems: Vec<u8> = match dtype {
                    Dtype::Int8 => (0..n).map(|_| rng.next_u64() as u8).collect(),
                    // Any bf16, as the input path rounds its f32 (a signalling NaN is quieted).
                    Dtype::Bf16 => (0..n)
                        .map(|_| Bf16((rng.next_u64() >> 48) as u16).to_f32())
                        .flat_map(|x| Bf16::from_f32(x).0.to_le_bytes())
                        .collect(),
                };
                let m = Matrix { rows, cols, elems };
                let mut bytes = Vec::new();
                write_matrix(&mut bytes, &m, dtype).unwrap();
                if fortran {
                    bytes = to_fortran(&bytes, &m, dtype);
                }
                (dtype, bytes, m)
            },
        )
    }

    /// The same file in Fortran order: the header's flag set, the elements column by column.
    fn to_fortran(c_order: &[u8], m: &Matrix, dtype: Dtype) -> Vec<u8> {
        let e = file_elem(dtype);
        let (rows, cols) = (m.rows as usize, m.cols as usize);
        let (header, data) = c_order.split_at(c_order.len() - rows * cols * e);
        let at = header.windows(5).position(|w| w == b"False").expect("fortran_order: False");
        let mut out = header.to_vec();
        out[at..at + 5].copy_from_slice(b"True ");
        for j in 0..cols {
            for i in 0..rows {
                out.extend_from_slice(&data[(i * cols + j) * e..][..e]);
            }
        }
        out
    }

    fn file_elem(dtype: Dtype) -> usize {
        match dtype {
            Dtype::Int8 => 1,
            Dtype::Bf16 => 4,
        }
    }

    // -- CSV -----------------------------------------------------------------------------------

    const CSV: &str = "in/data.csv";

    /// Cells from a vocabulary that reaches every check: numbers, labels, non-numbers, huge and
    /// non-finite values, quoted cells with separators inside.
    fn cell() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => (0u8..4).prop_map(|v| v.to_string()),
            3 => any::<f32>().prop_map(|v| v.to_string()),
            1 => Just("1e40".to_string()),
            1 => Just("NaN".to_string()),
            1 => Just("-inf".to_string()),
            1 => Just("2.5".to_string()),
            1 => Just("256".to_string()),
            1 => Just("-1".to_string()),
            1 => Just("x".to_string()),
            1 => Just(String::new()),
            1 => Just("\"a,\nb\"".to_string()),
            1 => Just(" 7 ".to_string()),
        ]
    }

    fn csv_text() -> impl Strategy<Value = String> {
        let row = proptest::collection::vec(cell(), 1..5).prop_map(|c| c.join(","));
        (proptest::collection::vec(row, 0..8), any::<bool>())
            .prop_map(|(rows, crlf)| rows.join(if crlf { "\r\n" } else { "\n" }))
    }

    // -- safetensors and blobs -----------------------------------------------------------------

    const MODEL: &str = "in/model.safetensors";

    fn spec(inputs: u32, hidden: &[u32], classes: u32) -> MlpSpec {
        MlpSpec { inputs, hidden: heapless::Vec::from_slice(hidden).unwrap(), classes }
    }

    fn model(spec: MlpSpec, seed: u64) -> Model {
        net_model(spec.net().unwrap(), seed)
    }

    fn net_model(net: Net, seed: u64) -> Model {
        Model {
            params: Params::init(&net, seed),
            net,
            dtype: "bf16".into(),
            seed,
            feature_scale: 16.0,
            dataset: "digits".into(),
            accuracies: vec![("test_accuracy_f32".into(), 0.5)],
        }
    }

    /// An MLP's file, or a small CNN's (a convolution, pooling, a flatten of channels into a
    /// dense layer).
    fn model_file() -> impl Strategy<Value = Vec<u8>> {
        let mlp = (1u32..6, proptest::collection::vec(1u32..5, 0..3), 2u32..5, any::<u64>())
            .prop_map(|(inputs, hidden, classes, seed)| {
                model(spec(inputs, &hidden, classes), seed).to_safetensors().unwrap()
            });
        let cnn = (1u32..3, 1u32..4, 3u32..5, 2u32..4, any::<u64>()).prop_map(
            |(c, out, side, classes, seed)| {
                let conv = Layer::Conv2d {
                    in_channels: c,
                    out_channels: out,
                    kernel: 2,
                    stride: 1,
                    padding: 1,
                };
                let pooled = side.div_ceil(2);
                let layers = [
                    conv,
                    Layer::Relu,
                    Layer::AvgPool2d { kernel: 2, stride: 2 },
                    Layer::Flatten,
                    Layer::Dense { inputs: out * pooled * pooled, outputs: classes },
                ];
                let net = Net::new(Shape::Image { c, h: side, w: side }, &layers).unwrap();
                net_model(net, seed).to_safetensors().unwrap()
            },
        );
        prop_oneof![mlp, cnn]
    }

    /// An MLP, or an image model (a convolution of `padding` and a ReLU before the dense
    /// layer), of `inputs` features or a `1 x inputs x inputs` image.
    fn blob_net(image: Option<u32>, inputs: u32, classes: u32) -> Net {
        let Some(padding) = image else { return spec(inputs, &[3], classes).net().unwrap() };
        let side = inputs + 2;
        let conv = Layer::Conv2d { in_channels: 1, out_channels: 2, kernel: 3, stride: 1, padding };
        let out = side + 2 * padding - 2;
        let layers = [
            conv,
            Layer::Relu,
            Layer::Flatten,
            Layer::Dense { inputs: 2 * out * out, outputs: classes },
        ];
        Net::new(Shape::Image { c: 1, h: side, w: side }, &layers).unwrap()
    }

    fn blob_file() -> impl Strategy<Value = Vec<u8>> {
        let image = prop_oneof![Just(None), (0u32..3).prop_map(Some)];
        (any::<bool>(), image, 1u32..6, 2u32..5, 1u16..3, any::<u64>()).prop_filter_map(
            "INT8 calibration failed",
            |(int8, image, inputs, classes, batch, seed)| {
                let net = blob_net(image, inputs, classes);
                let params = Params::init(&net, seed);
                let dtype = if int8 { Dtype::Int8 } else { Dtype::Bf16 };
                let graph = Graph::network(&net).unwrap();
                let features = graph.inputs();
                let x: Vec<f32> = (0..2 * features).map(|i| (i as f32 * 0.37).sin()).collect();
                let plan = Int8Plan::calibrate(&graph, &params, &x, 2).ok();
                if int8 && plan.is_none() {
                    return None;
                }
                let config = ArrayConfig::new(2, 2, dtype);
                Some(
                    blob::build(
                        &net,
                        &params,
                        &config,
                        batch,
                        plan.as_ref().filter(|_| int8),
                        16.0,
                    )
                    .unwrap(),
                )
            },
        )
    }

    /// Rewrites a blob's checksum after damage, so the checks behind it are reached.
    fn reseal(b: &mut [u8]) {
        if b.len() >= blob::CHECKSUM_BYTES {
            let body = b.len() - blob::CHECKSUM_BYTES;
            let crc = blob::crc32(&b[..body]);
            b[body..].copy_from_slice(&crc.to_le_bytes());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn npy_inputs_read_back_or_are_refused_naming_the_file(
            (dtype, file, m) in npy_file(),
            damage in damage(),
            noise in proptest::collection::vec(any::<u8>(), 0..80),
        ) {
            let undamaged = matches!(damage, Damage::None);
            for (bytes, whole) in [(apply(file, &damage), undamaged), (noise, false)] {
                match parse_matrix(&bytes, Path::new(NPY), dtype) {
                    Ok(got) => {
                        if whole {
                            prop_assert_eq!((got.rows, got.cols), (m.rows, m.cols));
                            prop_assert_eq!(&got.elems, &m.elems);
                        }
                        prop_assert_eq!(
                            got.elems.len(),
                            (got.rows * got.cols) as usize * dtype.elem_bytes()
                        );
                        let mut again = Vec::new();
                        write_matrix(&mut again, &got, dtype).unwrap();
                        let again = parse_matrix(&again, Path::new(NPY), dtype).unwrap();
                        prop_assert_eq!(again.elems, got.elems);
                    }
                    Err(e) => {
                        prop_assert!(!whole, "a valid file was refused: {}", e);
                        assert_names(&e.to_string(), NPY)?;
                    }
                }
            }
        }

        #[test]
        fn csv_data_sets_read_back_or_are_refused_naming_the_file(
            text in csv_text(),
            damage in damage(),
        ) {
            let bytes = apply(text.into_bytes(), &damage);
            match Dataset::from_csv(&bytes[..], CSV) {
                Ok(d) => {
                    prop_assert!(d.features >= 1 && d.classes >= 2);
                    prop_assert_eq!(d.x.len(), d.rows() * d.features);
                    prop_assert!(d.x.iter().all(|v| v.is_finite()));
                    prop_assert!(d.labels.iter().all(|&l| (l as u32) < d.classes));
                    let again = Dataset::from_csv(d.to_csv().as_bytes(), CSV).unwrap();
                    prop_assert_eq!(&again.labels, &d.labels);
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    prop_assert_eq!(bits(&again.x), bits(&d.x));
                    if let Ok(split) = d.split(3) {
                        prop_assert_eq!(split.train.len() + split.test.len(), d.rows());
                        prop_assert!(split.train.x.iter().all(|v| v.abs() <= 1.0));
                    }
                }
                Err(e) => assert_names(&e.to_string(), CSV)?,
            }
        }

        /// Plain, or gzipped in one to three members (`cat a.gz b.gz`), cut at `cut`.
        #[test]
        fn idx_data_sets_read_back_or_are_refused_naming_a_file(
            (images, labels) in idx_pair(),
            members in 0usize..4,
            cut in any::<usize>(),
            damage in damage(),
            damaged_labels in any::<bool>(),
        ) {
            let gzip = |bytes: &[u8]| {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            };
            let wrap = |a: &IdxArray| {
                let bytes = a.to_bytes();
                let at = cut % (bytes.len() + 1);
                match members {
                    0 => bytes,
                    1 => gzip(&bytes),
                    2 => [gzip(&bytes[..at]), gzip(&bytes[at..])].concat(),
                    _ => [gzip(&bytes[..at / 2]), gzip(&bytes[at / 2..at]), gzip(&bytes[at..])]
                        .concat(),
                }
            };
            let (mut i, mut l) = (wrap(&images), wrap(&labels));
            if damaged_labels {
                l = apply(l, &damage);
            } else {
                i = apply(i, &damage);
            }
            match Dataset::from_idx(&i[..], IMAGES, &l[..], LABELS, "pair") {
                Ok(d) => {
                    prop_assert!(d.features >= 1 && d.classes >= 2);
                    prop_assert_eq!(d.x.len(), d.rows() * d.features);
                    prop_assert!(d.labels.iter().all(|&l| (l as u32) < d.classes));
                    if matches!(damage, Damage::None) {
                        prop_assert!(d.x.iter().zip(&images.data).all(|(&x, &p)| x == p as f32));
                        prop_assert!(d.labels.iter().zip(&labels.data).all(|(&a, &b)| a == b as u16));
                    }
                    if let Ok(split) = d.split(3) {
                        prop_assert_eq!(split.train.len() + split.test.len(), d.rows());
                    }
                }
                Err(e) => {
                    prop_assert!(!matches!(damage, Damage::None), "a valid pair was refused: {}", e);
                    let msg = e.to_string();
                    let file = if msg.starts_with(LABELS) { LABELS } else { IMAGES };
                    assert_names(&msg, file)?;
                }
            }
        }

        #[test]
        fn model_json_files_read_back_or_are_refused_naming_the_file(
            file in net_file(),
            damage in damage(),
        ) {
            let bytes = apply(file, &damage);
            match parse_net(&bytes, NET) {
                Ok(net) => {
                    prop_assert!(net.classes() >= 2);
                    prop_assert_eq!(net.shapes.len(), net.layers.len());
                    let again = parse_net(net_json(&net).to_string().as_bytes(), NET).unwrap();
                    prop_assert_eq!(again, net);
                }
                Err(e) => assert_names(&e.to_string(), NET)?,
            }
        }

        #[test]
        fn model_files_reload_or_are_refused_naming_the_file(
            file in model_file(),
            damage in damage(),
        ) {
            let undamaged = matches!(damage, Damage::None);
            let bytes = apply(file, &damage);
            match Model::from_safetensors(&bytes, Path::new(MODEL)) {
                Ok(m) => {
                    let again = m.to_safetensors().unwrap();
                    let again = Model::from_safetensors(&again, Path::new(MODEL)).unwrap();
                    prop_assert_eq!(&again.net, &m.net);
                    for (a, b) in again.params.layers.iter().zip(&m.params.layers) {
                        prop_assert_eq!(a.weight.len(), (a.fan_in * a.fan_out) as usize);
                        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        prop_assert_eq!(bits(&a.weight), bits(&b.weight));
                        prop_assert_eq!(bits(&a.bias), bits(&b.bias));
                    }
                }
                Err(e) => {
                    prop_assert!(!undamaged, "a saved model was refused: {}", e);
                    assert_names(&e.to_string(), MODEL)?;
                }
            }
        }

        #[test]
        fn blobs_reserialise_or_are_refused(
            file in blob_file(),
            damage in damage(),
            resealed in any::<bool>(),
        ) {
            let undamaged = matches!(damage, Damage::None);
            let mut bytes = apply(file, &damage);
            if resealed {
                reseal(&mut bytes);
            }
            match Blob::parse(&bytes) {
                Ok(b) => {
                    prop_assert_eq!(&b.to_bytes(), &bytes);
                    let dram = b.target.dram_bytes as u64;
                    prop_assert!(b.writes().all(|w| w.addr as u64 + w.data.len() as u64 <= dram));
                    let bytes = (b.input_elements() * b.input.format.bytes()) as u64;
                    prop_assert!(b.input.addr as u64 + bytes <= dram);
                    for e in 0..b.input_elements().min(4096) {
                        prop_assert!(b.input_source(e).is_none_or(|i| i < b.input_len()));
                    }
                }
                Err(e) => prop_assert!(!undamaged, "a built blob was refused: {}", e),
            }
        }
    }

    /// `Params::zeros` multiplied the widths in 32 bits and the loader allocated every layer
    /// before reading its tensor: a tiny file claiming 65536-wide layers panicked (overflow) or
    /// asked for 16 GiB. The tensors are now checked before anything is allocated.
    #[test]
    fn model_claiming_huge_widths_is_refused_without_allocating_them() {
        let dense = |i: u32, o: u32| format!(r#"{{\"kind\":\"dense\",\"in\":{i},\"out\":{o}}}"#);
        for (input, layers) in [
            (65536, format!("[{}]", dense(65536, 65536))),
            (65535, format!("[{},{}]", dense(65535, 65535), dense(65535, 65535))),
        ] {
            let widths = &layers;
            let header = format!(
                "{{\"__metadata__\":{{\"format\":\"systole-net\",\"input\":\"[{input}]\",\
                 \"layers\":\"{layers}\",\"seed\":\"1\",\"feature_scale\":\"1\"}},\
                 \"layers.0.weight\":{{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}}}"
            );
            let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
            bytes.extend_from_slice(header.as_bytes());
            bytes.extend_from_slice(&[0u8; 16]);
            let e = Model::from_safetensors(&bytes, Path::new(MODEL)).unwrap_err().to_string();
            assert!(e.contains("layers.0.weight") && e.contains("shape"), "{widths}: {e}");
        }
    }
}
