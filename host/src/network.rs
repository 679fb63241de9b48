//! Which network a run trains (`--model mlp|lenet|PATH.json`), resolved against its data set.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use systole_core::graph::MlpSpec;
use systole_core::layers::Net;

use crate::net_file;

/// The `--model` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelChoice {
    /// Dense layers of the `--hidden` widths with ReLUs between them.
    Mlp,
    /// LeNet-5 for `1 x 28 x 28` images (core's `Net::lenet`).
    Lenet,
    /// A model file ([`net_file`]).
    File(PathBuf),
}

/// `--lr` of `--model lenet` by default.
const LENET_LR: f32 = 0.01;

impl ModelChoice {
    pub fn parse(s: &str) -> Result<ModelChoice, String> {
        match s {
            "" => Err("the model must be `mlp`, `lenet` or a .json model file".into()),
            "mlp" => Ok(ModelChoice::Mlp),
            "lenet" => Ok(ModelChoice::Lenet),
            path => Ok(ModelChoice::File(path.into())),
        }
    }

    /// `--epochs` when the command line gives none: LeNet learns MNIST in a few passes, which
    /// the default run keeps under 3 minutes on 2 cores (docs/PERF.md).
    pub fn default_epochs(&self) -> u32 {
        match self {
            ModelChoice::Lenet => 6,
            _ => 30,
        }
    }

    /// `--lr` when the command line gives none: LeNet's deeper gradients take a smaller step
    /// (at 0.05 its loss swings from epoch to epoch).
    pub fn default_lr(&self) -> f32 {
        match self {
            ModelChoice::Lenet => LENET_LR,
            _ => systole_core::graph::Sgd::DEFAULT.lr,
        }
    }

    /// The file it reads, if any.
    pub fn file(&self) -> Option<&Path> {
        match self {
            ModelChoice::File(path) => Some(path),
            _ => None,
        }
    }

    /// The network for a data set of `features` and `classes`: an MLP of `hidden` widths, or
    /// a layer list whose input and classes must be the data set's.
    pub fn resolve(&self, hidden: &[u32], features: u32, classes: u32) -> anyhow::Result<Net> {
        let net = match self {
            ModelChoice::Mlp => {
                let mut widths = vec![features];
                widths.extend(hidden);
                widths.push(classes);
                let spec = crate::model::spec_of(&widths)
                    .map_err(|e| anyhow!("model {}: {e}", dashed(&widths)))?;
                return spec_net(&spec);
            }
            ModelChoice::Lenet => Net::lenet(classes).map_err(|e| anyhow!("--model lenet: {e}"))?,
            ModelChoice::File(path) => {
                let limit = net_file::MAX_NET_FILE_BYTES as u64;
                let bytes = crate::limits::read_file_at_most(path, limit)
                    .map_err(|e| anyhow!("cannot read --model {}: {e}", path.display()))?;
                net_file::parse_net(&bytes, &path.display().to_string())?
            }
        };
        let inputs = net.input.elements();
        if inputs != features as u64 {
            bail!(
                "--model {}: its input {} is {inputs} features; the data set's samples have \
                 {features}",
                self,
                net.input
            );
        }
        if net.classes() != classes {
            bail!(
                "--model {}: its last layer gives {} classes; the data set has {classes}",
                self,
                net.classes()
            );
        }
        Ok(net)
    }
}

impl std::fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelChoice::Mlp => f.write_str("mlp"),
            ModelChoice::Lenet => f.write_str("lenet"),
            ModelChoice::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The layer list of an MLP spec.
pub fn spec_net(spec: &MlpSpec) -> anyhow::Result<Net> {
    spec.net().map_err(|e| anyhow!("model: {e}"))
}

/// How a run names its network: `64-64-10` for an MLP, else the layer kinds and shapes
/// (`1 x 28 x 28 conv2d relu maxpool2d ... dense -> 10`).
pub fn describe(net: &Net) -> String {
    if let Some(widths) = net.mlp_widths() {
        return dashed(&widths);
    }
    let kinds: Vec<&str> = net.layers.iter().map(|l| l.kind()).collect();
    format!("{} {} -> {}", net.input, kinds.join(" "), net.classes())
}

/// `64-64-10`.
pub fn dashed(widths: &[u32]) -> String {
    widths.iter().map(u32::to_string).collect::<Vec<_>>().join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_resolve_against_the_data() {
        assert_eq!(ModelChoice::parse("lenet"), Ok(ModelChoice::Lenet));
        assert_eq!(ModelChoice::parse("m.json"), Ok(ModelChoice::File("m.json".into())));
        assert!(ModelChoice::parse("").is_err());
        let lenet = ModelChoice::Lenet.resolve(&[], 784, 10).unwrap();
        assert_eq!(lenet, Net::lenet(10).unwrap());
        let e = ModelChoice::Lenet.resolve(&[], 64, 10).unwrap_err().to_string();
        assert!(e.contains("784 features") && e.contains("have 64"), "{e}");
        let mlp = ModelChoice::Mlp.resolve(&[32], 64, 10).unwrap();
        assert_eq!(describe(&mlp), "64-32-10");
        assert!(
            describe(&lenet).starts_with("1 x 28 x 28 conv2d relu maxpool2d"),
            "{}",
            describe(&lenet)
        );
    }

    /// Issue 73: a model file that goes on (`/dev/zero`, a FIFO) is refused once past the
    /// model file's own limit, not read to the 1 GiB any input may be.
    #[test]
    fn an_endless_model_file_is_refused_at_its_own_limit() {
        let endless = ModelChoice::File("/dev/zero".into());
        let e = endless.resolve(&[], 64, 10).unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("more than 65536 bytes"), "{e}");
    }
}
