//! Trained networks as `.safetensors` files, readable by PyTorch's
//! `safetensors.torch.load_file` and loadable into the equivalent `torch.nn.Sequential`.
//!
//! The tensors are that `nn.Sequential`'s state dict ([`pytorch`]): `layers.{i}.weight` and
//! `layers.{i}.bias` (f32) for each entry `i` of the layer list with parameters. The header's
//! metadata (strings, as the format requires) says how to use them: `format` ([`FORMAT`]),
//! `input` (`[1, 28, 28]` or `[64]`) and `layers` (the layer list as a model file writes it,
//! [`crate::net_file`]), `feature_scale` (what every input feature is divided by), `seed` (of
//! the train/test split), `dataset`, `dtype` (how it was trained), and the run's test
//! accuracies.

mod header;
pub mod pytorch;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use systole_core::exec::{argmax, Executor, Plain};
use systole_core::graph::{Graph, MlpSpec, MAX_LAYERS, MAX_WIDTH};
use systole_core::layers::Net;
use systole_core::params::Params;

use crate::dataset::Samples;
use crate::train_dtype::TrainDtype;

/// The `format` metadata value of a Systole model file.
pub const FORMAT: &str = "systole-net";

/// The `format` of the MLP files that earlier versions wrote: metadata `widths` (`64,64,10`)
/// instead of `input` and `layers`, and dense layer `l` as `layers.{l}` (the layer list's entry
/// `2l`). Still read; never written.
pub const MLP_FORMAT: &str = "systole-mlp";

/// A model and what its file says about it.
#[derive(Clone, Debug)]
pub struct Model {
    pub net: Net,
    pub params: Params,
    /// How it was trained: `bf16`, `int8` (trained in BF16) or `f32`.
    pub dtype: String,
    /// The seed of the train/test split (and of the run).
    pub seed: u64,
    pub feature_scale: f32,
    pub dataset: String,
    /// Test accuracies of the training run, by their JSON names.
    pub accuracies: Vec<(String, f64)>,
}

/// Why a model file cannot be used. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read {}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: not a valid safetensors file ({reason})", path.display())]
    Format { path: PathBuf, reason: String },
    #[error("{}: metadata `{key}`: {problem}", path.display())]
    Metadata { path: PathBuf, key: &'static str, problem: String },
    #[error("{}: tensor `{name}`: {problem}", path.display())]
    Tensor { path: PathBuf, name: String, problem: String },
}

/// The spec of widths `inputs, hidden..., classes`, or why it is not one.
pub fn spec_of(widths: &[u32]) -> Result<MlpSpec, String> {
    if widths.len() < 2 || widths.len() > MAX_LAYERS + 1 {
        return Err(format!(
            "{} widths: an MLP has 2 to {} (inputs, hidden..., classes)",
            widths.len(),
            MAX_LAYERS + 1
        ));
    }
    if let Some(w) = widths.iter().find(|&&w| w == 0 || w > MAX_WIDTH) {
        return Err(format!("width {w}: every width must be 1 to {MAX_WIDTH}"));
    }
    Ok(MlpSpec {
        inputs: widths[0],
        hidden: widths[1..widths.len() - 1].iter().copied().collect(),
        classes: widths[widths.len() - 1],
    })
}

impl Model {
    /// The file's bytes.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, safetensors::SafeTensorError> {
        let tensors: Vec<(String, Vec<usize>, Vec<u8>)> =
            pytorch::to_pytorch(&self.net, &self.params)
                .into_iter()
                .map(|t| (t.name, t.shape, le_bytes(&t.values)))
                .collect();
        let views = tensors
            .iter()
            .map(|(name, shape, data)| {
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), data)
                    .map(|view| (name.clone(), view))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let net = crate::net_file::net_json(&self.net);
        let mut metadata = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("input".to_string(), net["input"].to_string()),
            ("layers".to_string(), net["layers"].to_string()),
            ("seed".to_string(), self.seed.to_string()),
            // Display of an f32 is the shortest string that parses back to the same bits.
            ("feature_scale".to_string(), self.feature_scale.to_string()),
            ("dataset".to_string(), self.dataset.clone()),
        ]);
        // `""`: not known (a file without it was loaded); a file must not say `""`.
        if !self.dtype.is_empty() {
            metadata.insert("dtype".to_string(), self.dtype.clone());
        }
        for (name, value) in &self.accuracies {
            metadata.insert(name.clone(), value.to_string());
        }
        let mut bytes = safetensors::serialize(views, Some(metadata))?;
        sort_header(&mut bytes);
        Ok(bytes)
    }

    /// The MLP it is, if it is one.
    pub fn mlp_spec(&self) -> Option<MlpSpec> {
        spec_of(&self.net.mlp_widths()?).ok()
    }

    /// Reads and validates a model file: metadata, tensor names, dtypes and shapes.
    pub fn load(path: &Path) -> Result<Model, ModelError> {
        let bytes = crate::limits::read_file(path)
            .map_err(|source| ModelError::Io { path: path.into(), source })?;
        Model::from_safetensors(&bytes, path)
    }

    /// [`Model::load`] on a file's bytes already in memory; `path` names it in errors.
    pub fn from_safetensors(bytes: &[u8], path: &Path) -> Result<Model, ModelError> {
        // The crate's refusal of a tensor's shape or offsets names no tensor: say which.
        let format = |e: safetensors::SafeTensorError| ModelError::Format {
            path: path.into(),
            reason: header::fault(bytes).unwrap_or_else(|| e.to_string()),
        };
        let (_, header) = safetensors::SafeTensors::read_metadata(bytes).map_err(format)?;
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(format)?;
        let empty = HashMap::new();
        let metadata = header.metadata().as_ref().unwrap_or(&empty);
        let meta_error =
            |key, problem: String| ModelError::Metadata { path: path.into(), key, problem };
        let get =
            |key: &'static str| metadata.get(key).ok_or_else(|| meta_error(key, "missing".into()));
        let declared = get("format")?;
        let legacy = declared == MLP_FORMAT;
        if declared != FORMAT && !legacy {
            return Err(meta_error("format", format!("{declared:?}, expected {FORMAT:?}")));
        }
        let net = if legacy {
            let widths = get("widths")?;
            widths
                .split(',')
                .map(|w| {
                    w.trim()
                        .parse::<u32>()
                        .map_err(|_| format!("{widths:?} is not a list of widths"))
                })
                .collect::<Result<Vec<u32>, String>>()
                .and_then(|w| spec_of(&w)?.net().map_err(|e| e.to_string()))
                .map_err(|problem| meta_error("widths", problem))?
        } else {
            let json = |key: &'static str| -> Result<Value, ModelError> {
                serde_json::from_str(get(key)?)
                    .map_err(|e| meta_error(key, format!("not JSON: {e}")))
            };
            let (input, layers) = (json("input")?, json("layers")?);
            let text = serde_json::json!({ "input": input, "layers": layers }).to_string();
            crate::net_file::parse_net(text.as_bytes(), "the model")
                .map_err(|e| meta_error("layers", e.message))?
        };
        // The tensor's name in this file: an old MLP file numbers its dense layers 0, 1, 2...
        let in_file = |name: &str| -> String {
            let numbered = name.strip_prefix("layers.").and_then(|rest| rest.split_once('.'));
            match numbered {
                Some((i, part)) if legacy => match i.parse::<usize>() {
                    Ok(i) => format!("layers.{}.{part}", i / 2),
                    Err(_) => name.to_string(),
                },
                _ => name.to_string(),
            }
        };
        let seed = get("seed")?;
        let seed = seed
            .parse::<u64>()
            .map_err(|_| meta_error("seed", format!("{seed:?} is not a seed")))?;
        let feature_scale = get("feature_scale")?
            .parse::<f32>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .ok_or_else(|| meta_error("feature_scale", "must be a number > 0".into()))?;

        let tensor_error = |name: &str, problem: String| ModelError::Tensor {
            path: path.into(),
            name: name.into(),
            problem,
        };
        let read = |name: &str, shape: &[usize]| -> Result<Vec<f32>, ModelError> {
            let name = &in_file(name);
            let view = file.tensor(name).map_err(|_| tensor_error(name, "missing".into()))?;
            if view.dtype() != safetensors::Dtype::F32 {
                return Err(tensor_error(name, format!("dtype {:?}, expected F32", view.dtype())));
            }
            if view.shape() != shape {
                return Err(tensor_error(
                    name,
                    format!("shape {:?}, expected {shape:?}", view.shape()),
                ));
            }
            let values: Vec<f32> = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            // A NaN or infinite parameter makes every prediction through it NaN.
            if let Some(at) = values.iter().position(|v| !v.is_finite()) {
                // The element's index along each dimension, last fastest.
                let mut rest = at;
                let mut index: Vec<String> = shape
                    .iter()
                    .rev()
                    .map(|&d| {
                        let i = rest % d.max(1);
                        rest /= d.max(1);
                        i.to_string()
                    })
                    .collect();
                index.reverse();
                let index = format!("[{}]", index.join(", "));
                return Err(tensor_error(
                    name,
                    format!(
                        "element {index} is {}; every weight and bias must be finite",
                        values[at]
                    ),
                ));
            }
            Ok(values)
        };
        // Each layer is built from its tensor once the tensor's shape is checked, so what is
        // allocated is bounded by the file's size, whatever shapes the metadata claims.
        let params = pytorch::from_pytorch(&net, read)?;
        let expected: Vec<String> = pytorch::names(&net).iter().map(|n| in_file(n)).collect();
        let mut names = file.names();
        names.sort_unstable();
        if let Some(extra) = names.iter().find(|n| !expected.iter().any(|e| e == *n)) {
            return Err(tensor_error(
                extra,
                format!("not a parameter of the model's layers (it has {})", expected.join(", ")),
            ));
        }
        // What it was trained in only labels the model (`predict` prints it): checked last, and
        // a file that does not say is taken (as `""`).
        let dtype = metadata.get("dtype").cloned().unwrap_or_default();
        let trained_in = TrainDtype::ALL.iter().map(|d| d.name());
        if metadata.contains_key("dtype") && !trained_in.clone().any(|name| name == dtype) {
            let names: Vec<&str> = trained_in.collect();
            let shown: String = dtype.chars().take(40).collect();
            return Err(meta_error(
                "dtype",
                format!(
                    "{shown:?} is not one `systole train --save` writes ({})",
                    names.join(", ")
                ),
            ));
        }
        let accuracies = [
            "test_accuracy_f32",
            "test_accuracy_bf16",
            "test_accuracy_int8",
            "reference_test_accuracy_f32",
        ]
        .iter()
        .filter_map(|&k| Some((k.to_string(), metadata.get(k)?.parse().ok()?)))
        .collect();
        Ok(Model {
            net,
            params,
            dtype,
            seed,
            feature_scale,
            dataset: metadata.get("dataset").cloned().unwrap_or_default(),
            accuracies,
        })
    }
}

/// Rewrites a serialized file's JSON header with its keys in sorted order, so one model is one
/// byte string: `safetensors::serialize` takes the metadata as a `HashMap` and writes it in that
/// map's (per-process random) order. The header keeps its length and padding.
fn sort_header(bytes: &mut [u8]) {
    fn sorted(value: Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(String, Value)> = map.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            other => other,
        }
    }
    let Some(len) = bytes.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize)
    else {
        return;
    };
    let Some(header) = bytes.get_mut(8..8 + len) else { return };
    let Ok(value) = serde_json::from_slice::<Value>(header) else { return };
    let text = serde_json::to_string(&sorted(value)).expect("a JSON value serializes");
    // The same keys and values in another order: the same length, then the same padding.
    if text.len() <= header.len() {
        header[..text.len()].copy_from_slice(text.as_bytes());
        header[text.len()..].fill(b' ');
    }
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The classes the f32 CPU reference forward pass predicts for `samples`: the oracle both
/// `train` (for `test_accuracy_f32`) and `predict` use, so a reload predicts the same.
pub fn f32_predictions(net: &Net, params: &Params, samples: &Samples) -> Vec<u16> {
    let graph = Graph::network(net).expect("a network that trained is a valid graph");
    let mut ex = Executor::new(graph, Plain::<f32>::new(), params);
    let classes = net.classes() as usize;
    // In passes of a bounded number of rows: the executor keeps every layer's activations, so
    // a pass over a whole large test split of a wide model would hold rows x widths of them.
    let pass = crate::fit::EVAL_ROWS * samples.features;
    let mut predicted = Vec::with_capacity(samples.len());
    for x in samples.x.chunks(pass.max(1)) {
        let logits = ex.logits(x, x.len() / samples.features.max(1));
        predicted.extend(logits.chunks_exact(classes).map(|row| argmax(row) as u16));
    }
    predicted
}

/// The fraction of `predicted` equal to `labels`.
pub fn accuracy(predicted: &[u16], labels: &[u16]) -> f64 {
    let correct = predicted.iter().zip(labels).filter(|(p, l)| p == l).count();
    correct as f64 / labels.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-2 model (one layer: a 2 x 3 weight and 2 biases) trained in `dtype`.
    fn model(dtype: &str) -> Model {
        let net = spec_of(&[3, 2]).unwrap().net().unwrap();
        Model {
            params: Params::init(&net, 7),
            net,
            dtype: dtype.into(),
            seed: 7,
            feature_scale: 16.0,
            dataset: "digits".into(),
            accuracies: vec![],
        }
    }

    fn load(m: &Model) -> Result<Model, String> {
        let bytes = m.to_safetensors().unwrap();
        Model::from_safetensors(&bytes, Path::new("m.safetensors")).map_err(|e| e.to_string())
    }

    /// Issue 73: `--save` wrote the metadata in a `HashMap`'s order, different in each run.
    #[test]
    fn one_model_is_one_byte_string() {
        let mut m = model("bf16");
        m.accuracies = vec![("test_accuracy_f32".into(), 0.5), ("test_accuracy_bf16".into(), 0.25)];
        let first = m.to_safetensors().unwrap();
        for _ in 0..8 {
            assert_eq!(m.to_safetensors().unwrap(), first);
        }
        let len = u64::from_le_bytes(first[..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&first[8..8 + len]).unwrap();
        let at = |key: &str| header.find(&format!("\"{key}\"")).unwrap();
        assert!(at("dataset") < at("dtype") && at("dtype") < at("feature_scale"), "{header}");
        assert!(at("seed") < at("test_accuracy_bf16"), "{header}");
        assert_eq!(load(&m).unwrap().accuracies.len(), 2);
    }

    /// `systole predict` and `firmware blob` took a model "trained in fp64".
    #[test]
    fn dtypes_are_those_train_save_writes() {
        for name in ["bf16", "int8", "f32"] {
            assert_eq!(load(&model(name)).unwrap().dtype, name);
        }
        assert_eq!(
            load(&model("fp64")).unwrap_err(),
            "m.safetensors: metadata `dtype`: \"fp64\" is not one `systole train --save` writes \
             (bf16, int8, f32)"
        );
        let e = load(&model("F32")).unwrap_err();
        assert!(e.ends_with("\"F32\" is not one `systole train --save` writes (bf16, int8, f32)"));
        // A file that does not say is taken, and saved again without it.
        let mut bytes = model("f32").to_safetensors().unwrap();
        let key = bytes.windows(13).position(|w| w == b"\"dtype\":\"f32\"").unwrap();
        bytes[key + 4] = b'q';
        let unknown = Model::from_safetensors(&bytes, Path::new("m.safetensors")).unwrap();
        assert_eq!(load(&unknown).unwrap().dtype, "");
        // A name that is blank (or empty) is no name `train` writes.
        let mut bytes = model("f32").to_safetensors().unwrap();
        let key = bytes.windows(13).position(|w| w == b"\"dtype\":\"f32\"").unwrap();
        bytes[key + 9..key + 12].copy_from_slice(b"   ");
        let e = Model::from_safetensors(&bytes, Path::new("m.safetensors")).unwrap_err();
        assert!(e.to_string().contains("metadata `dtype`: \"   \" is not one"), "{e}");
    }

    /// A file that an earlier version saved (`systole-mlp`, `widths`, dense layers numbered
    /// 0, 1, 2) loads as the same MLP, and saves again in today's layout.
    #[test]
    fn earlier_mlp_files_still_load() {
        let net = spec_of(&[3, 4, 2]).unwrap().net().unwrap();
        let params = Params::init(&net, 5);
        let mut tensors = Vec::new();
        for (l, t) in pytorch::to_pytorch(&net, &params).into_iter().enumerate() {
            let part = if l % 2 == 0 { "weight" } else { "bias" };
            tensors.push((format!("layers.{}.{part}", l / 2), t.shape, le_bytes(&t.values)));
        }
        let views: Vec<_> = tensors
            .iter()
            .map(|(n, shape, d)| {
                let view =
                    safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), d);
                (n.clone(), view.unwrap())
            })
            .collect();
        let meta =
            [("format", MLP_FORMAT), ("widths", "3,4,2"), ("seed", "9"), ("feature_scale", "2")];
        let meta = meta.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let bytes = safetensors::serialize(views, Some(meta)).unwrap();
        let m = Model::from_safetensors(&bytes, Path::new("old.safetensors")).unwrap();
        assert_eq!((&m.net, &m.params, m.seed), (&net, &params, 9));
        let again = load(&m).unwrap();
        assert_eq!(again.params, m.params);
        // A wrong width is named as the old file names it.
        let mut bad = bytes.clone();
        let at = bad.windows(5).position(|w| w == b"3,4,2").unwrap();
        bad[at + 2] = b'5';
        let e = Model::from_safetensors(&bad, Path::new("old.safetensors")).unwrap_err();
        assert!(
            e.to_string().contains("tensor `layers.0.weight`: shape [4, 3], expected [5, 3]"),
            "{e}"
        );
    }

    /// NaN and infinite weights were loaded, and every prediction through them was NaN.
    #[test]
    fn non_finite_parameters_are_refused_naming_the_element() {
        let mut m = model("bf16");
        // Core's weights are fan_in x fan_out; the file's [fan_out, fan_in]: core's (2, 1) is
        // the file's [1, 2].
        m.params.layers[0].weight[2 * 2 + 1] = f32::NAN;
        assert_eq!(
            load(&m).unwrap_err(),
            "m.safetensors: tensor `layers.0.weight`: element [1, 2] is NaN; every weight and \
             bias must be finite"
        );
        let mut m = model("bf16");
        m.params.layers[0].bias[1] = f32::NEG_INFINITY;
        assert_eq!(
            load(&m).unwrap_err(),
            "m.safetensors: tensor `layers.0.bias`: element [1] is -inf; every weight and bias \
             must be finite"
        );
    }
}
