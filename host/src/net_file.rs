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
//! a value that is not a whole number is one line naming the file, the layer and the field.

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
    let Value::Object(top) = value else {
        return Err(fail("not a JSON object with \"input\" and \"layers\"".into()));
    };
    if let Some(key) = top.keys().find(|k| !["input", "layers"].contains(&k.as_str())) {
        return Err(fail(format!(
            "unknown field {key:?} (a model file has \"input\" and \"layers\")"
        )));
    }
    let input = match top.get("input") {
        Some(Value::Array(dims)) if dims.len() == 1 || dims.len() == 3 => {
            let mut d = [0u32; 3];
            for (i, v) in dims.iter().enumerate() {
                d[i] = whole(v)
                    .ok_or_else(|| fail(format!("field \"input\": {v} is not a whole number")))?;
            }
            if dims.len() == 1 {
                Shape::Flat(d[0])
            } else {
                Shape::Image { c: d[0], h: d[1], w: d[2] }
            }
        }
        Some(other) => {
            return Err(fail(format!(
                "field \"input\": {other} is not [channels, height, width] or [features]"
            )))
        }
        None => return Err(fail("field \"input\" is missing".into())),
    };
    let Some(Value::Array(list)) = top.get("layers") else {
        return Err(fail("field \"layers\" is missing or not a list".into()));
    };
    if list.len() > MAX_NET_LAYERS {
        return Err(fail(format!("{} layers; the limit is {MAX_NET_LAYERS}", list.len())));
    }
    let mut layers = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        layers.push(layer(entry).map_err(|m| fail(format!("layer {i}{m}")))?);
    }
    Net::new(input, &layers).map_err(|e| fail(e.to_string()))
}

/// One layer, or the rest of an error message after `layer {i}`.
fn layer(entry: &Value) -> Result<Layer, String> {
    let Value::Object(fields) = entry else {
        return Err(format!(": {entry} is not an object with a \"kind\""));
    };
    let kind = match fields.get("kind") {
        Some(Value::String(k)) if KINDS.contains(&k.as_str()) => k.as_str(),
        Some(other) => {
            return Err(format!(", field \"kind\": {other} is not one of {}", KINDS.join(", ")))
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
            (Some(v), _) => whole(v).ok_or_else(|| {
                format!(
                    " ({kind}), field {name:?}: {v} is not a whole number from 0 to {}",
                    u32::MAX
                )
            }),
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

fn whole(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|n| u32::try_from(n).ok())
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
}
