//! `systole train`'s and `systole predict`'s flags.

use std::path::PathBuf;

use clap::Args;
use systole_core::graph::Sgd;

use super::{ArrayArgs, LinkArgs};
use crate::dataset::Source;
use crate::machines::MachineKind;
use crate::network::ModelChoice;
use crate::train::Device;
use crate::train_dtype::TrainDtype;

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// `digits` (built in: 1,797 8x8 handwritten digits), `mnist` (built in: MNIST's 70,000
    /// 28x28 digits), a CSV file (features, then an integer label 0-255 in the last column; an
    /// optional header row) or an IDX pair `IMAGES,LABELS` (MNIST's format, plain or gzipped).
    #[arg(long, default_value = "digits", value_name = "digits|mnist|PATH.csv|IMAGES,LABELS", value_parser = Source::parse)]
    pub dataset: Source,
    /// The network: `mlp` (dense layers of the --hidden widths), `lenet` (LeNet-5 for 1 x 28 x
    /// 28 images: --dataset mnist) or a JSON model file of an input shape and a layer list
    /// (conv2d, maxpool2d, avgpool2d, relu, flatten, dense; README "Networks"). The
    /// accelerator trains convolutions and pooling in BF16 (pooling whose windows tile its
    /// input, not of the network's input), and --dtype int8 runs the trained network, max and
    /// average pooling included, in INT8 inference; other networks train on the f32 CPU
    /// reference (--dtype f32) and the GPU (--device gpu).
    #[arg(long, default_value = "mlp", value_name = "mlp|lenet|PATH.json", value_parser = ModelChoice::parse)]
    pub model: ModelChoice,
    /// Hidden layer widths of `--model mlp`, input side first (at most 7 layers).
    #[arg(long, value_delimiter = ',', default_value = "64", value_name = "W[,W...]")]
    pub hidden: Vec<u32>,
    /// bf16: train on the accelerator (and the f32 reference beside it); int8: the same, then
    /// quantize and run INT8 inference; f32: train only the f32 CPU reference.
    #[arg(long, value_enum, default_value_t = TrainDtype::Bf16)]
    pub dtype: TrainDtype,
    /// Which machine trains (rtl and board: every step's programs run there).
    #[arg(long, value_enum, default_value_t = MachineKind::Functional)]
    pub machine: MachineKind,
    #[command(flatten)]
    pub link: LinkArgs,
    #[command(flatten)]
    pub array: ArrayArgs,
    /// Passes over the training split [default: 30; 6 with --model lenet].
    #[arg(long)]
    pub epochs: Option<u32>,
    /// Rows per SGD step (the last batch of an epoch may be smaller).
    #[arg(long, default_value_t = 32)]
    pub batch: u32,
    /// SGD learning rate [default: 0.05; 0.01 with --model lenet].
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f32>,
    /// SGD momentum, 0 <= m < 1 (0: plain SGD).
    #[arg(long, default_value_t = Sgd::DEFAULT.momentum, allow_negative_numbers = true)]
    pub momentum: f32,
    /// L2 penalty added to every gradient: g + wd * p.
    #[arg(long, default_value_t = Sgd::DEFAULT.weight_decay, allow_negative_numbers = true)]
    pub weight_decay: f32,
    /// Seeds the split, the shuffles and the initial weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the whole run (config, per-epoch figures, per-op cycles, accuracies) as JSON.
    #[arg(long, value_name = "run.json")]
    pub json: Option<PathBuf>,
    /// Save the trained f32 weights as safetensors, in PyTorch's layouts (nn.Linear's
    /// out x in, nn.Conv2d's out x in x kh x kw), with the network and the run's facts.
    #[arg(long, value_name = "model.safetensors")]
    pub save: Option<PathBuf>,
    /// accel: a golden machine (--dtype bf16|int8); gpu: a CUDA GPU, beside the f32 CPU
    /// reference (--dtype f32|bf16: the precision of its matrix products).
    #[arg(long, value_enum, default_value_t = Device::Accel)]
    pub device: Device,
    /// Train the accelerator (bf16) and the GPU (f32; the f32 CPU reference when there is no
    /// GPU) from the same weights on the same batches, and print both curves side by side.
    #[arg(long)]
    pub compare: bool,
}

#[derive(Debug, Args)]
pub struct PredictArgs {
    /// A model written by `systole train --save`.
    #[arg(long, value_name = "model.safetensors")]
    pub model: PathBuf,
    /// The data set to split (with the model's seed) and predict the test side of: digits,
    /// mnist, a CSV file or an IDX pair, as `train --dataset` takes it.
    #[arg(long, default_value = "digits", value_name = "digits|mnist|PATH.csv|IMAGES,LABELS", value_parser = Source::parse)]
    pub dataset: Source,
    /// Write the accuracy and every test row's prediction as JSON.
    #[arg(long, value_name = "out.json")]
    pub json: Option<PathBuf>,
}

impl TrainArgs {
    /// `--epochs`, or the model's default.
    pub fn epochs(&self) -> u32 {
        self.epochs.unwrap_or_else(|| self.model.default_epochs())
    }
    /// `--lr`, or the model's default.
    pub fn lr(&self) -> f32 {
        self.lr.unwrap_or_else(|| self.model.default_lr())
    }
}
