//! Model files: a network's input shape and layer list as JSON, the form `--model PATH.json`
//! takes and a saved model's metadata keeps (core's [`Net`] checks the shapes):
//!
//! ```json
//! {"input": [1, 28, 28], "layers": [
//!   {"kind": "conv2d", "in": 1, "out": 6, "kernel": 5, "stride": 1, "padding": 2},
//!   {"kind": "relu"}, {"kind": "maxpool2d", "kernel": 2, "stride": 2},
//!   {"kind": "flatten"}, {"kind": "dense", "in": 1176, "out": 10}]}
//! ```
//!
//! `input` is `[channels, height, width]` for images or `[features]`. Fields as PyTorch names
//! its arguments: `conv2d` needs `in`, `out`, `kernel` (`stride` 1 and `padding` 0 unless
//! given), `maxpool2d` and `avgpool2d` need `kernel` (`stride` the kernel unless given),
//! `dense` needs `in` and `out`; `relu` and `flatten` take none. Anything else, a missing field or
//! a value that is not a whole number from 0 to 2^32 - 1 (however it is written: `64.0` is 64)
//! is one line naming the file, the layer and the field, showing the value as written.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use systole_core::layers::{Layer, Net, Shape, MAX_NET_LAYERS};

/// The largest model file read: far more than [`MAX_NET_LAYERS`] layers can take.
pub const MAX_NET_FILE_BYTES: usize = 64 * 1024;

/// Why a model file cannot be used; the message starts with the file's name.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct NetFileError {
    pub file: String,
    pub message: String,
}

/// The layer kinds, as the file names them.
const KINDS: [&str; 6] = ["conv2d", "maxpool2d", "avgpool2d", "relu", "flatten", "dense"];

/// Parses and checks a model file's text (`file` names it in errors).
pub fn parse_net(bytes: &[u8], file: &str) -> Result<Net, NetFileError> {
    let fail = |message: String| NetFileError { file: file.into(), message };
    if bytes.len() > MAX_NET_FILE_BYTES {
        return Err(fail(format!(
            "{} bytes; a model file is at most {MAX_NET_FILE_BYTES}",
            bytes.len()
        )));
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| fail(format!("not a JSON model file: {e}")))?;
    if !value.is_object() {
        return Err(fail("not a JSON object with \"input\" and \"layers\"".into()));
    }
    // Again with each value as written, so a number is shown as the file spells it.
    let top: Fields =
        serde_json::from_slice(bytes).map_err(|e| fail(format!("not a JSON model file: {e}")))?;
    if let Some(key) = top.keys().find(|k| !["input", "layers"].contains(&k.as_str())) {
        return Err(fail(format!(
            "unknown field {key:?} (a model file has \"input\" and \"layers\")"
        )));
    }
    let input = match top.get("input").map(|raw| list(raw)) {
        Some(Ok(dims)) if dims.len() == 1 || dims.len() == 3 => {
            let mut d = [0u32; 3];
            for (i, v) in dims.iter().enumerate() {
                d[i] = whole(v).map_err(|m| fail(format!("field \"input\": {m}")))?;
            }
            if dims.len() == 1 {
                Shape::Flat(d[0])
            } else {
                Shape::Image { c: d[0], h: d[1], w: d[2] }
            }
        }
        Some(_) => {
            return Err(fail(format!(
                "field \"input\": {} is not [channels, height, width] or [features]",
                compact(top["input"])
            )))
        }
        None => return Err(fail("field \"input\" is missing".into())),
    };
    let Some(Ok(entries)) = top.get("layers").map(|raw| list(raw)) else {
        return Err(fail("field \"layers\" is missing or not a list".into()));
    };
    if entries.len() > MAX_NET_LAYERS {
        return Err(fail(format!("{} layers; the limit is {MAX_NET_LAYERS}", entries.len())));
    }
    let mut layers = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        layers.push(layer(entry).map_err(|m| fail(format!("layer {i}{m}")))?);
    }
    Net::new(input, &layers).map_err(|e| fail(e.to_string()))
}

/// An object's fields, each value as written.
type Fields<'a> = BTreeMap<String, &'a RawValue>;

/// A list's values as written, if `raw` is a list.
fn list(raw: &RawValue) -> Result<Vec<&RawValue>, serde_json::Error> {
    serde_json::from_str(raw.get())
}

/// A value on one line (JSON's compact form).
fn compact(raw: &RawValue) -> String {
    serde_json::from_str::<Value>(raw.get()).map_or_else(|_| raw.get().into(), |v| v.to_string())
}

/// One layer, or the rest of an error message after `layer {i}`.
fn layer(entry: &RawValue) -> Result<Layer, String> {
    let Ok(fields) = serde_json::from_str::<Fields>(entry.get()) else {
        return Err(format!(": {} is not an object with a \"kind\"", compact(entry)));
    };
    let kind = match fields.get("kind").map(|raw| serde_json::from_str::<Value>(raw.get())) {
        Some(Ok(Value::String(k))) if KINDS.contains(&k.as_str()) => {
            KINDS.into_iter().find(|known| *known == k).unwrap_or_default()
        }
        Some(_) => {
            return Err(format!(
                ", field \"kind\": {} is not one of {}",
                compact(fields["kind"]),
                KINDS.join(", ")
            ))
        }
        None => return Err(": field \"kind\" is missing".into()),
    };
    let allowed: &[&str] = match kind {
        "conv2d" => &["in", "out", "kernel", "stride", "padding"],
        "maxpool2d" | "avgpool2d" => &["kernel", "stride"],
        "dense" => &["in", "out"],
        _ => &[],
    };
    if let Some(key) = fields.keys().find(|k| *k != "kind" && !allowed.contains(&k.as_str())) {
        let takes = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
        return Err(format!(" ({kind}): unknown field {key:?} (it takes {takes})"));
    }
    let get = |name: &str, default: Option<u32>| -> Result<u32, String> {
        match (fields.get(name), default) {
            (Some(v), _) => whole(v).map_err(|m| format!(" ({kind}), field {name:?}: {m}")),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(format!(" ({kind}), field {name:?} is missing")),
        }
    };
    Ok(match kind {
        "conv2d" => Layer::Conv2d {
            in_channels: get("in", None)?,
            out_channels: get("out", None)?,
            kernel: get("kernel", None)?,
            stride: get("stride", Some(1))?,
            padding: get("padding", Some(0))?,
        },
        "maxpool2d" | "avgpool2d" => {
            let kernel = get("kernel", None)?;
            let stride = get("stride", Some(kernel))?;
            if kind == "maxpool2d" {
                Layer::MaxPool2d { kernel, stride }
            } else {
                Layer::AvgPool2d { kernel, stride }
            }
        }
        "dense" => Layer::Dense { inputs: get("in", None)?, outputs: get("out", None)? },
        "relu" => Layer::Relu,
        _ => Layer::Flatten,
    })
}

/// A field's number, or why it is none: a number is its value however it is written (`64`,
/// `64.0`, `6.4e1`, `-0`), and must be whole and fit a `u32`; the message shows it as written.
fn whole(raw: &RawValue) -> Result<u32, String> {
    let text = raw.get();
    let Ok(Value::Number(n)) = serde_json::from_str::<Value>(text) else {
        return Err(format!("{} is not a number", compact(raw)));
    };
    let range = || format!("{text} is out of range: a whole number from 0 to {}", u32::MAX);
    if let Some(v) = n.as_u64() {
        return u32::try_from(v).map_err(|_| range());
    }
    if n.is_i64() {
        return Err(range()); // negative
    }
    let v = n.as_f64().unwrap_or(f64::NAN);
    if v.fract() != 0.0 {
        Err(format!("{text} is not a whole number"))
    } else if (0.0..=u32::MAX as f64).contains(&v) {
        Ok(v as u32)
    } else {
        Err(range())
    }
}

/// The model file of `net`, every field written out ([`parse_net`] reads it back as `net`).
pub fn net_json(net: &Net) -> Value {
    let input = match net.input {
        Shape::Image { c, h, w } => vec![c, h, w],
        Shape::Flat(n) => vec![n],
    };
    let layers: Vec<Value> = net
        .layers
        .iter()
        .map(|l| {
            let mut m = Map::new();
            m.insert("kind".into(), l.kind().into());
            let mut put = |k: &str, v: u32| {
                m.insert(k.into(), v.into());
            };
            match *l {
                Layer::Conv2d { in_channels, out_channels, kernel, stride, padding } => {
                    put("in", in_channels);
                    put("out", out_channels);
                    put("kernel", kernel);
                    put("stride", stride);
                    put("padding", padding);
                }
                Layer::MaxPool2d { kernel, stride } | Layer::AvgPool2d { kernel, stride } => {
                    put("kernel", kernel);
                    put("stride", stride);
                }
                Layer::Dense { inputs, outputs } => {
                    put("in", inputs);
                    put("out", outputs);
                }
                Layer::Relu | Layer::Flatten => {}
            }
            Value::Object(m)
        })
        .collect();
    serde_json::json!({ "input": input, "layers": layers })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LENET: &str = r#"{"input": [1, 28, 28], "layers": [
        {"kind": "conv2d", "in": 1, "out": 6, "kernel": 5, "padding": 2}, {"kind": "relu"},
        {"kind": "maxpool2d", "kernel": 2}, {"kind": "conv2d", "in": 6, "out": 16, "kernel": 5},
        {"kind": "relu"}, {"kind": "maxpool2d", "kernel": 2, "stride": 2}, {"kind": "flatten"},
        {"kind": "dense", "in": 400, "out": 120}, {"kind": "relu"},
        {"kind": "dense", "in": 120, "out": 84}, {"kind": "relu"},
        {"kind": "dense", "in": 84, "out": 10}]}"#;

    /// The issue's LeNet, with PyTorch's defaults left out, is core's LeNet; written back and
    /// read again it is the same network.
    #[test]
    fn lenet_reads_with_pytorch_defaults_and_round_trips() {
        let net = parse_net(LENET.as_bytes(), "lenet.json").unwrap();
        assert_eq!(net, Net::lenet(10).unwrap());
        let text = net_json(&net).to_string();
        assert_eq!(parse_net(text.as_bytes(), "again.json").unwrap(), net);
    }

    /// Each mistake is one line naming the file, the layer and the field.
    #[test]
    fn bad_files_name_layer_and_field() {
        let cases = [
            ("[1, 2]", "m.json: not a JSON object"),
            ("{\"input\": [4], \"layers\": [], \"x\": 1}", "m.json: unknown field \"x\""),
            ("{\"layers\": []}", "m.json: field \"input\" is missing"),
            ("{\"input\": [1, 2], \"layers\": []}", "m.json: field \"input\": [1,2] is not"),
            ("{\"input\": [4], \"layers\": []}", "m.json: the list is empty"),
            (
                "{\"input\": [4], \"layers\": [{\"kind\": \"conv3d\"}]}",
                "m.json: layer 0, field \"kind\": \"conv3d\" is not one of",
            ),
            (
                "{\"input\": [4], \"layers\": [{\"kind\": \"relu\", \"inplace\": true}]}",
                "m.json: layer 0 (relu): unknown field \"inplace\" (it takes none)",
            ),
            (
                "{\"input\": [4], \"layers\": [{\"kind\": \"dense\", \"in\": 4}]}",
                "m.json: layer 0 (dense), field \"out\" is missing",
            ),
            (
                "{\"input\": [4], \"layers\": [{\"kind\": \"dense\", \"in\": 4, \"out\": 2.5}]}",
                "m.json: layer 0 (dense), field \"out\": 2.5 is not a whole number",
            ),
            (
                "{\"input\": [4], \"layers\": [{\"kind\": \"dense\", \"in\": 5, \"out\": 3}]}",
                "m.json: layer 0 (dense), field \"in\": 5, but the layer before gives 4",
            ),
            (
                "{\"input\": [1, 4, 4], \"layers\": [{\"kind\": \"maxpool2d\", \"kernel\": 5}]}",
                "m.json: layer 0 (maxpool2d), field \"kernel\": kernel 5 is larger",
            ),
            ("{\"input\": [4], \"layers\": [7]}", "m.json: layer 0: 7 is not an object"),
            (
                "{\"input\": [4], \"layers\": [{\"kind\": \"dense\", \"in\": 4, \"out\": 3}",
                "m.json: not a JSON model file: EOF while parsing",
            ),
        ];
        for (text, want) in cases {
            let got = parse_net(text.as_bytes(), "m.json").unwrap_err().to_string();
            assert!(got.starts_with(want), "{got:?} does not start {want:?}");
            assert!(!got.contains('\n'), "{got:?}");
        }
        let huge = vec![b' '; MAX_NET_FILE_BYTES + 1];
        assert!(parse_net(&huge, "m.json").unwrap_err().to_string().contains("at most 65536"));
    }

    /// Issue 73: a convolution whose shape does not fit 64-bit-checked limits is refused as the
    /// file is read, naming the file, the layer and the field (each of these trained, its
    /// shapes wrapped in 32 bits, with the dense layer sized for the wrapped shape).
    #[test]
    fn huge_geometry_is_refused_naming_file_layer_and_field() {
        let cases = [
            (r#""kernel": 3, "padding": 2147483648"#, 72, "padding"),
            (r#""kernel": 3, "stride": 4294967295, "padding": 4294967295"#, 2, "padding"),
            (r#""kernel": 65537, "padding": 32765"#, 8, "kernel"),
        ];
        for (conv, flat, field) in cases {
            let text = format!(
                r#"{{"input": [1, 8, 8], "layers": [{{"kind": "conv2d", "in": 1, "out": 2, {conv}}},
                {{"kind": "flatten"}}, {{"kind": "dense", "in": {flat}, "out": 10}}]}}"#
            );
            let got = parse_net(text.as_bytes(), "m.json").unwrap_err().to_string();
            let want = format!("m.json: layer 0 (conv2d), field \"{field}\": ");
            assert!(got.starts_with(&want), "{got:?} does not start {want:?}");
            assert!(!got.contains('\n'), "{got:?}");
        }
    }

    /// Issue 73: a number that is whole is taken as one however it is written (`64.0`, `-0`);
    /// one out of range says so, naming the range, and is shown as written.
    #[test]
    fn numbers_are_judged_as_numbers_and_shown_as_written() {
        let dense = |out: &str| {
            format!(r#"{{"input": [64], "layers": [{{"kind": "dense", "in": 64, "out": {out}}}]}}"#)
        };
        let ten = parse_net(dense("10").as_bytes(), "m.json").unwrap();
        for same in ["10.0", "1e1", "1.0E+1"] {
            assert_eq!(parse_net(dense(same).as_bytes(), "m.json").unwrap(), ten, "{same}");
        }
        let input = r#"{"input": [64.0], "layers": [{"kind": "dense", "in": 64, "out": 10}]}"#;
        assert_eq!(parse_net(input.as_bytes(), "m.json").unwrap(), ten);
        let range = "is out of range: a whole number from 0 to 4294967295";
        let cases = [
            ("4294967296", format!("field \"out\": 4294967296 {range}")),
            ("4294967296.0", format!("field \"out\": 4294967296.0 {range}")),
            ("1e10", format!("field \"out\": 1e10 {range}")),
            ("-1", format!("field \"out\": -1 {range}")),
            ("-0", "field \"out\": is 0".to_string()),
            ("2.5", "field \"out\": 2.5 is not a whole number".to_string()),
            ("\"10\"", "field \"out\": \"10\" is not a number".to_string()),
        ];
        for (out, want) in cases {
            let got = parse_net(dense(out).as_bytes(), "m.json").unwrap_err().to_string();
            let want = format!("m.json: layer 0 (dense), {want}");
            assert!(got.starts_with(&want), "{got:?} does not start {want:?}");
        }
        let input = r#"{"input": [1, 4294967296.0, 2], "layers": [{"kind": "flatten"}]}"#;
        let got = parse_net(input.as_bytes(), "m.json").unwrap_err().to_string();
        let want = format!("m.json: field \"input\": 4294967296.0 {range}");
        assert!(got.starts_with(&want), "{got:?} does not start {want:?}");
    }

    /// Issue 73: more layers with parameters than core takes is said of the file as it is
    /// read, counted as the file counts them.
    #[test]
    fn too_many_parameter_layers_are_counted_in_the_file() {
        let mut layers = vec![r#"{"kind": "dense", "in": 4, "out": 4}"#; 11];
        layers.push(r#"{"kind": "dense", "in": 4, "out": 2}"#);
        let text = format!(r#"{{"input": [4], "layers": [{}]}}"#, layers.join(", "));
        let got = parse_net(text.as_bytes(), "m.json").unwrap_err().to_string();
        let want = "m.json: 12 layers with parameters (conv2d, dense); at most 8 are supported";
        assert_eq!(got, want);
    }
}
