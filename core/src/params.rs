//! Model parameters (f32 master copies), their deterministic initialisation, and the one
//! pseudo-random generator every machine and the host share.

extern crate alloc;
use alloc::vec;
use alloc::vec::Vec;

use crate::graph::{Graph, MlpSpec};
use crate::layers::{Layer, Net};

/// SplitMix64: small, fast, and the same on every platform, so a seed means the same split,
/// shuffle and initial weights everywhere.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1) with 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..n` (n > 0), by rejection so every value is equally likely.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// What has layers with parameters: each one's `(fan_in, fan_out)`, input side first (a
/// convolution's `fan_in` is its patch, `in x kernel x kernel`; its `fan_out` its channels).
pub trait ParamShapes {
    fn param_shapes(&self) -> Vec<(u32, u32)>;

    /// Parameters (weights and biases) in all layers.
    fn parameter_count(&self) -> u64 {
        self.param_shapes().iter().map(|&(i, o)| i as u64 * o as u64 + o as u64).sum()
    }
}

impl ParamShapes for MlpSpec {
    fn param_shapes(&self) -> Vec<(u32, u32)> {
        let widths: Vec<u32> = self.widths().collect();
        widths.windows(2).map(|p| (p[0], p[1])).collect()
    }
}

impl ParamShapes for Net {
    fn param_shapes(&self) -> Vec<(u32, u32)> {
        self.layers
            .iter()
            .filter_map(|layer| match *layer {
                Layer::Dense { inputs, outputs } => Some((inputs, outputs)),
                Layer::Conv2d { in_channels, out_channels, kernel, .. } => {
                    // At most `MAX_WIDTH` in a checked net (`ConvGeometry::new`); saturated, so
                    // an unchecked one fails every size check after it rather than wrap.
                    let patch = in_channels as u64 * kernel as u64 * kernel as u64;
                    Some((u32::try_from(patch).unwrap_or(u32::MAX), out_channels))
                }
                _ => None,
            })
            .collect()
    }
}

impl ParamShapes for Graph {
    fn param_shapes(&self) -> Vec<(u32, u32)> {
        self.net.param_shapes()
    }
}

/// One layer's parameters: `weight` is `fan_in x fan_out` row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerParams {
    pub fan_in: u32,
    pub fan_out: u32,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// All parameters of a network, input layer first.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub layers: Vec<LayerParams>,
}

impl Params {
    pub fn zeros(net: &impl ParamShapes) -> Params {
        Params {
            layers: net
                .param_shapes()
                .into_iter()
                .map(|(fan_in, fan_out)| LayerParams {
                    fan_in,
                    fan_out,
                    weight: vec![0.0; fan_in as usize * fan_out as usize],
                    bias: vec![0.0; fan_out as usize],
                })
                .collect(),
        }
    }

    /// PyTorch's default `nn.Linear` and `nn.Conv2d` initialisation, from `seed`: weights and
    /// biases uniform in `[-1/sqrt(fan_in), 1/sqrt(fan_in))`, layer by layer, weights
    /// (row-major, `fan_in x fan_out`) then biases.
    pub fn init(net: &impl ParamShapes, seed: u64) -> Params {
        let mut rng = SplitMix64(seed);
        let mut p = Params::zeros(net);
        for layer in &mut p.layers {
            let bound = 1.0 / libm::sqrt(layer.fan_in as f64);
            for w in layer.weight.iter_mut().chain(layer.bias.iter_mut()) {
                *w = ((rng.next_f64() * 2.0 - 1.0) * bound) as f32;
            }
        }
        p
    }
}
