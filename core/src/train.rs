//! Training and inference on any [`Machine`]: the compiled programs plus the host's share of
//! each step (writing the batch, the softmax cross-entropy between the two programs, reading
//! results). Used by the CLI on the golden machines, and by every later machine unchanged.

extern crate alloc;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::compile::{compile_inference, compile_training, CompileError, CompiledStep, Int8Plan};
use crate::exec::{softmax_cross_entropy, to_operand, BatchOutcome, Executor, Numerics, Plain};
use crate::graph::Graph;
use crate::machine::{Machine, MachineError, Region, Stats};
use crate::numerics::int8::quantize;
use crate::numerics::Requant;
use crate::params::Params;

/// Why training or inference on a machine failed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TrainError {
    Compile(CompileError),
    Machine(MachineError),
    /// The machine's DRAM is smaller than the memory plan.
    Dram {
        needed: usize,
        have: usize,
    },
    /// Calibration found a layer whose requantization scale is not in (2^-32, 1).
    Quantize {
        layer: usize,
        scale: f64,
    },
}

impl From<CompileError> for TrainError {
    fn from(e: CompileError) -> Self {
        TrainError::Compile(e)
    }
}
impl From<MachineError> for TrainError {
    fn from(e: MachineError) -> Self {
        TrainError::Machine(e)
    }
}

impl core::fmt::Display for TrainError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TrainError::Compile(e) => write!(f, "compile: {e}"),
            TrainError::Machine(e) => write!(f, "machine: {e}"),
            TrainError::Dram { needed, have } => {
                write!(f, "the memory plan needs {needed} bytes of DRAM, the machine has {have}")
            }
            TrainError::Quantize { layer, scale } => write!(
                f,
                "layer {layer}: requantization scale {scale} is outside (2^-32, 1); the \
                 activations cannot be represented in int8 with per-tensor scales"
            ),
        }
    }
}

/// Cycles and MACs of one run of a program pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub cycles: u64,
    pub macs: u64,
}

impl core::ops::AddAssign for Work {
    fn add_assign(&mut self, o: Work) {
        self.cycles += o.cycles;
        self.macs += o.macs;
    }
}

/// 32-bit words as DRAM holds them (little-endian).
pub fn word_bytes(words: impl Iterator<Item = u32>) -> Vec<u8> {
    words.flat_map(u32::to_le_bytes).collect()
}

/// f32 values as the bf16 elements the array multiplies ([`to_operand`], little-endian).
pub fn bf16_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|&x| to_operand(x).0.to_le_bytes()).collect()
}

fn write_words(
    m: &mut dyn Machine,
    addr: u32,
    words: impl Iterator<Item = u32>,
) -> Result<(), MachineError> {
    m.write(Region::Dram, addr as usize, &word_bytes(words))
}

fn read_words(m: &mut dyn Machine, addr: u32, n: usize) -> Result<Vec<u32>, MachineError> {
    let mut bytes = vec![0u8; 4 * n];
    m.read(Region::Dram, addr as usize, &mut bytes)?;
    Ok(bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect())
}

fn write_bf16(m: &mut dyn Machine, addr: u32, values: &[f32]) -> Result<(), MachineError> {
    m.write(Region::Dram, addr as usize, &bf16_bytes(values))
}

/// Writes zeros over a step's zeroed DRAM ([`CompiledStep::zeroed`]).
fn write_zeros(m: &mut dyn Machine, regions: &[(u32, u32)]) -> Result<(), MachineError> {
    for &(at, bytes) in regions {
        m.write(Region::Dram, at as usize, &vec![0; bytes as usize])?;
    }
    Ok(())
}

/// Runs a program; cycles from the machine when it counts them, else from the timing model
/// (which equals the cycle machine's count).
fn run(
    m: &mut dyn Machine,
    program: &[crate::isa::Instruction],
    model_cycles: u64,
) -> Result<u64, MachineError> {
    let Stats { cycles, .. } = m.run(program)?;
    Ok(cycles.unwrap_or(model_cycles))
}

/// BF16 mixed-precision training on a machine, with the compiled steps cached by batch size.
pub struct AccelTrainer {
    pub machine: Box<dyn Machine>,
    pub graph: Graph,
    steps: Vec<CompiledStep>,
    inference: Vec<CompiledStep>,
    /// The step that ran last (training or not, its index): its zeroed DRAM still holds zeros,
    /// unless something wrote `machine`'s DRAM since.
    last: Option<(bool, usize)>,
}

impl AccelTrainer {
    /// Compiles for the batch sizes ahead, checks the machine's DRAM, and writes `params` (f32
    /// masters, bf16 copies, zero velocities).
    pub fn new(
        machine: Box<dyn Machine>,
        graph: Graph,
        params: &Params,
    ) -> Result<Self, TrainError> {
        let mut t =
            AccelTrainer { machine, graph, steps: Vec::new(), inference: Vec::new(), last: None };
        t.write_params(params)?;
        Ok(t)
    }

    /// DRAM a machine needs to train with batches up to `batch` and evaluate `eval_batch` rows.
    pub fn dram_needed(
        graph: &Graph,
        config: &crate::ArrayConfig,
        batch: u32,
        eval_batch: u32,
    ) -> Result<usize, TrainError> {
        let train = compile_training(graph, config, batch)?.dram_bytes;
        let eval = compile_inference(graph, config, eval_batch, None)?.dram_bytes;
        Ok(train.max(eval))
    }

    fn step_for(&mut self, batch: u32, training: bool) -> Result<usize, TrainError> {
        let cache = if training { &self.steps } else { &self.inference };
        if let Some(i) = cache.iter().position(|s| s.batch == batch) {
            return Ok(i);
        }
        let config = *self.machine.config();
        let step = if training {
            compile_training(&self.graph, &config, batch)?
        } else {
            compile_inference(&self.graph, &config, batch, None)?
        };
        let have = self.machine.region_size(Region::Dram);
        if step.dram_bytes > have {
            return Err(TrainError::Dram { needed: step.dram_bytes, have });
        }
        let cache = if training { &mut self.steps } else { &mut self.inference };
        cache.push(step);
        Ok(cache.len() - 1)
    }

    /// The compiled training step for `batch` rows (for per-op reports).
    pub fn compiled(&mut self, batch: u32) -> Result<&CompiledStep, TrainError> {
        let i = self.step_for(batch, true)?;
        Ok(&self.steps[i])
    }

    fn write_params(&mut self, params: &Params) -> Result<(), TrainError> {
        let step = compile_training(&self.graph, self.machine.config(), 1)?;
        let have = self.machine.region_size(Region::Dram);
        if step.dram_bytes > have {
            return Err(TrainError::Dram { needed: step.dram_bytes, have });
        }
        let m = self.machine.as_mut();
        for (l, &(w, b)) in self.graph.params.iter().enumerate() {
            let layer = &params.layers[l];
            let (wb, bb) = (step.buffers[w as usize], step.buffers[b as usize]);
            write_words(m, wb.words.unwrap_or(0), layer.weight.iter().map(|x| x.to_bits()))?;
            write_bf16(m, wb.elems.unwrap_or(0), &layer.weight)?;
            write_words(m, bb.words.unwrap_or(0), layer.bias.iter().map(|x| x.to_bits()))?;
        }
        for (t, info) in self.graph.tensors.iter().enumerate() {
            if let crate::graph::TensorKind::Velocity(_) = info.kind {
                let n = (info.rows(1) * info.cols) as usize;
                write_words(m, step.buffers[t].words.unwrap_or(0), core::iter::repeat_n(0, n))?;
            }
        }
        Ok(())
    }

    /// One training step on `labels.len()` rows of `x` (row-major f32 features).
    pub fn step(&mut self, x: &[f32], labels: &[u16]) -> Result<(BatchOutcome, Work), TrainError> {
        let i = self.step_for(labels.len() as u32, true)?;
        let step = &self.steps[i];
        let m = self.machine.as_mut();
        if self.last != Some((true, i)) {
            write_zeros(m, &step.zeroed)?;
            self.last = Some((true, i));
        }
        let g = &self.graph;
        write_bf16(m, step.buffers[g.input as usize].elems.unwrap_or(0), &step.padded_input(x))?;
        let mut cycles = run(m, &step.forward, step.forward_cycles)?;
        let classes = g.classes() as usize;
        let logits = read_words(
            m,
            step.buffers[g.logits as usize].words.unwrap_or(0),
            labels.len() * classes,
        )?;
        let logits: Vec<f32> = logits.into_iter().map(f32::from_bits).collect();
        let (outcome, mut dlogits) = softmax_cross_entropy(&logits, labels, classes);
        let mut at = g.gradient(g.logits).map(|t| step.buffers[t as usize]).unwrap_or_default();
        // A network ending in a ReLU: its gradient too, with the golden model's numerics.
        if let Some(dx) = crate::compile::logits_relu(g) {
            let accel = crate::exec::Accel { config: step.config };
            for (d, &y) in dlogits.iter_mut().zip(&logits) {
                *d = accel.relu_grad(*d, y);
            }
            at = step.buffers[dx as usize];
        }
        write_bf16(m, at.elems.unwrap_or(0), &dlogits)?;
        // A pooling whose output is the logits reads their gradient as f32 words.
        if let Some(words) = at.words {
            write_words(m, words, dlogits.iter().map(|v| v.to_bits()))?;
        }
        write_bf16(m, step.ones.unwrap_or(0), &vec![1.0; step.ones_len as usize])?;
        cycles += run(m, &step.backward, step.backward_cycles)?;
        Ok((outcome, Work { cycles, macs: step.macs() }))
    }

    /// Logits of `rows` inputs (a BF16 forward pass).
    pub fn logits(&mut self, x: &[f32], rows: usize) -> Result<(Vec<f32>, Work), TrainError> {
        let i = self.step_for(rows as u32, false)?;
        let step = &self.inference[i];
        let m = self.machine.as_mut();
        if self.last != Some((false, i)) {
            write_zeros(m, &step.zeroed)?;
            self.last = Some((false, i));
        }
        let g = &self.graph;
        write_bf16(m, step.buffers[g.input as usize].elems.unwrap_or(0), &step.padded_input(x))?;
        let cycles = run(m, &step.forward, step.forward_cycles)?;
        let words = read_words(
            m,
            step.buffers[g.logits as usize].words.unwrap_or(0),
            rows * g.classes() as usize,
        )?;
        Ok((words.into_iter().map(f32::from_bits).collect(), Work { cycles, macs: step.macs() }))
    }

    /// The f32 master parameters, read back from the machine.
    pub fn params(&mut self) -> Result<Params, TrainError> {
        let step = compile_training(&self.graph, self.machine.config(), 1)?;
        let mut p = Params::zeros(&self.graph);
        let m = self.machine.as_mut();
        for (l, &(w, b)) in self.graph.params.iter().enumerate() {
            let layer = &mut p.layers[l];
            let ws =
                read_words(m, step.buffers[w as usize].words.unwrap_or(0), layer.weight.len())?;
            let bs = read_words(m, step.buffers[b as usize].words.unwrap_or(0), layer.bias.len())?;
            layer.weight = ws.into_iter().map(f32::from_bits).collect();
            layer.bias = bs.into_iter().map(f32::from_bits).collect();
        }
        Ok(p)
    }
}

impl Int8Plan {
    /// Post-training quantization: per-tensor symmetric scales, the activations' calibrated on
    /// `rows` samples of `x` through the f32 reference forward pass.
    pub fn calibrate(
        graph: &Graph,
        params: &Params,
        x: &[f32],
        rows: usize,
    ) -> Result<Int8Plan, TrainError> {
        let mut ex = Executor::new(graph.clone(), Plain::<f32>::new(), params);
        ex.logits(x, rows);
        let mut input_scales = Vec::new();
        for op in &graph.forward {
            if let crate::graph::Op::Dense { x, .. } = *op {
                input_scales.push(scale_of(&ex.values[x as usize]));
            }
        }
        let weight_scales: Vec<f32> = params.layers.iter().map(|l| scale_of(&l.weight)).collect();
        // The average poolings after each layer's product (before the next layer's).
        let mut pool_sums = vec![1u32; params.layers.len()];
        let mut layer = None;
        for op in &graph.forward {
            match *op {
                crate::graph::Op::Dense { .. } => layer = Some(layer.map_or(0, |l| l + 1)),
                crate::graph::Op::AvgPool { geom, .. } => {
                    if let Some(sums) = layer.and_then(|l| pool_sums.get_mut(l)) {
                        *sums = sums.saturating_mul(geom.size());
                    }
                }
                _ => {}
            }
        }
        let mut requant = Vec::new();
        for l in 0..params.layers.len().saturating_sub(1) {
            let scale = input_scales[l] as f64 * weight_scales[l] as f64
                / input_scales[l + 1] as f64
                / pool_sums[l] as f64;
            requant.push(
                Requant::from_scale(scale, 0)
                    .map_err(|_| TrainError::Quantize { layer: l, scale })?,
            );
        }
        Ok(Int8Plan { input_scales, weight_scales, requant, pool_sums })
    }

    /// Layer `layer`'s weights as the INT8 array multiplies them: i8 in the weight scale,
    /// row-major `fan_in x fan_out`.
    pub fn weight_bytes(&self, layer: usize, params: &Params) -> Vec<u8> {
        let scale = self.weight_scales[layer];
        params.layers[layer].weight.iter().map(|&v| quantize(v, scale) as u8).collect()
    }

    /// Layer `layer`'s biases as i32 words in its accumulator scale `input_scale *
    /// weight_scale` (rounded half away from zero, saturated).
    pub fn bias_words(&self, layer: usize, params: &Params) -> Vec<u32> {
        let scale = self.input_scales[layer] as f64 * self.weight_scales[layer] as f64;
        params.layers[layer]
            .bias
            .iter()
            .map(|&v| libm::round(v as f64 / scale).clamp(i32::MIN as f64, i32::MAX as f64) as i32)
            .map(|q| q as u32)
            .collect()
    }

    /// What one logits accumulator (i32) is worth: the last layer's `input_scale *
    /// weight_scale`, over the window sizes its average poolings sum, so `real = scale * word`.
    pub fn logits_scale(&self) -> f32 {
        let last = self.input_scales.len() - 1;
        let sums = self.pool_sums.get(last).copied().unwrap_or(1);
        (self.input_scales[last] as f64 * self.weight_scales[last] as f64 / sums as f64) as f32
    }

    /// The model's input quantized for the INT8 array (`input_scales[0]`).
    pub fn input_bytes(&self, x: &[f32]) -> Vec<u8> {
        x.iter().map(|&v| quantize(v, self.input_scales[0]) as u8).collect()
    }
}

/// `max |x| / 127`, or 1 for an all-zero tensor.
fn scale_of(x: &[f32]) -> f32 {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if max > 0.0 {
        max / 127.0
    } else {
        1.0
    }
}

/// INT8 inference of a trained model on an INT8 machine.
pub struct Int8Inference {
    pub machine: Box<dyn Machine>,
    pub graph: Graph,
    pub plan: Int8Plan,
    steps: Vec<CompiledStep>,
    /// The index of the step that ran last: its zeroed DRAM still holds zeros.
    last: Option<usize>,
}

impl Int8Inference {
    /// Quantizes `params` with `plan` and writes them: weights as i8
    /// ([`Int8Plan::weight_bytes`]), biases as i32 in the accumulator scale
    /// ([`Int8Plan::bias_words`]).
    pub fn new(
        machine: Box<dyn Machine>,
        graph: Graph,
        params: &Params,
        plan: Int8Plan,
    ) -> Result<Self, TrainError> {
        let mut t = Int8Inference { machine, graph, plan, steps: Vec::new(), last: None };
        let step = compile_inference(&t.graph, t.machine.config(), 1, Some(&t.plan))?;
        let have = t.machine.region_size(Region::Dram);
        if step.dram_bytes > have {
            return Err(TrainError::Dram { needed: step.dram_bytes, have });
        }
        let m = t.machine.as_mut();
        for (l, &(w, b)) in t.graph.params.iter().enumerate() {
            let q = t.plan.weight_bytes(l, params);
            m.write(Region::Dram, step.buffers[w as usize].elems.unwrap_or(0) as usize, &q)?;
            let bias = t.plan.bias_words(l, params);
            write_words(m, step.buffers[b as usize].words.unwrap_or(0), bias.into_iter())?;
        }
        Ok(t)
    }

    /// DRAM an INT8 machine needs for `batch` rows.
    pub fn dram_needed(
        graph: &Graph,
        config: &crate::ArrayConfig,
        plan: &Int8Plan,
        batch: u32,
    ) -> Result<usize, TrainError> {
        Ok(compile_inference(graph, config, batch, Some(plan))?.dram_bytes)
    }

    /// Dequantized logits of `rows` inputs.
    pub fn logits(&mut self, x: &[f32], rows: usize) -> Result<(Vec<f32>, Work), TrainError> {
        let i = match self.steps.iter().position(|s| s.batch == rows as u32) {
            Some(i) => i,
            None => {
                let step = compile_inference(
                    &self.graph,
                    self.machine.config(),
                    rows as u32,
                    Some(&self.plan),
                )?;
                let have = self.machine.region_size(Region::Dram);
                if step.dram_bytes > have {
                    return Err(TrainError::Dram { needed: step.dram_bytes, have });
                }
                self.steps.push(step);
                self.steps.len() - 1
            }
        };
        let step = &self.steps[i];
        let m = self.machine.as_mut();
        if self.last != Some(i) {
            write_zeros(m, &step.zeroed)?;
            self.last = Some(i);
        }
        let g = &self.graph;
        let q = step.padded_input(&self.plan.input_bytes(x));
        m.write(Region::Dram, step.buffers[g.input as usize].elems.unwrap_or(0) as usize, &q)?;
        let cycles = run(m, &step.forward, step.forward_cycles)?;
        let classes = g.classes() as usize;
        let words =
            read_words(m, step.buffers[g.logits as usize].words.unwrap_or(0), rows * classes)?;
        let scale = self.plan.logits_scale();
        let logits = words.into_iter().map(|w| w as i32 as f32 * scale).collect();
        Ok((logits, Work { cycles, macs: step.macs() }))
    }
}
