//! Building a blob from a trained model: the compiled inference pass, its DRAM image, the header.
extern crate alloc;
use alloc::vec::Vec;

use super::*;
use alloc::vec;

use crate::compile::{compile_inference, CompileError, CompiledStep, Int8Plan};
use crate::graph::{Graph, GraphError};
use crate::isa::{encode, ISA_VERSION};
use crate::layers::{Net, Shape};
use crate::params::ParamShapes;
use crate::params::Params;
use crate::train::{bf16_bytes, word_bytes};

/// Why a blob cannot be built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BuildError {
    Graph(GraphError),
    Compile(CompileError),
    /// Layer `layer` of the parameters does not have the spec's shape.
    Params {
        layer: usize,
    },
    /// The INT8 plan does not have one scale per layer.
    Plan,
    /// The batch is 0, or the feature scale not finite and > 0.
    Field {
        field: &'static str,
    },
    /// The memory plan needs more than 4 GiB.
    Dram {
        needed: usize,
    },
}

impl core::fmt::Display for BuildError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BuildError::Graph(e) => write!(f, "model: {e}"),
            BuildError::Compile(e) => write!(f, "compile: {e}"),
            BuildError::Params { layer } => {
                write!(f, "layer {layer}'s parameters do not match the model's widths")
            }
            BuildError::Plan => write!(f, "the INT8 plan does not match the model's layers"),
            BuildError::Field { field } => write!(f, "{field} is out of range"),
            BuildError::Dram { needed } => {
                write!(f, "the memory plan needs {needed} bytes of DRAM, over 4 GiB")
            }
        }
    }
}

fn push_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn push_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// The header fields of a blob, as [`Blob`] holds them.
struct Header {
    target: Identity,
    batch: u16,
    input: Buffer,
    feature_scale: f32,
    logits: Buffer,
    image: Option<Image>,
    expected_cycles: u64,
}

/// The bytes of a blob: header, program words, DRAM writes, CRC-32 (the module's layout).
/// [`build`] and [`Blob::to_bytes`] both write through here, so a parsed blob re-serialises
/// to the bytes it was parsed from.
fn assemble<'a>(
    h: &Header,
    program: &[u8],
    writes: impl ExactSizeIterator<Item = DramWrite<'a>>,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    push_u16(&mut out, FORMAT_VERSION);
    push_u16(&mut out, HEADER_BYTES as u16);
    push_u32(&mut out, 0); // total, filled in below
    out.extend_from_slice(&h.target.to_bytes());
    out.extend_from_slice(&h.target.config.clock_mhz.to_le_bytes());
    push_u16(&mut out, h.batch);
    out.push(h.input.format.code());
    out.push(h.logits.format.code());
    push_u32(&mut out, h.input.addr);
    push_u32(&mut out, h.input.cols);
    push_u32(&mut out, h.input.scale.to_bits());
    push_u32(&mut out, h.feature_scale.to_bits());
    push_u32(&mut out, h.logits.addr);
    push_u32(&mut out, h.logits.cols);
    push_u32(&mut out, h.logits.scale.to_bits());
    out.extend_from_slice(&h.expected_cycles.to_le_bytes());
    push_u32(&mut out, (program.len() / WORD_BYTES) as u32);
    push_u32(&mut out, writes.len() as u32);
    for field in Image::fields(h.image) {
        push_u16(&mut out, field);
    }
    push_u32(&mut out, 0);
    debug_assert_eq!(out.len(), HEADER_BYTES);
    out.extend_from_slice(program);
    for w in writes {
        push_u32(&mut out, w.addr);
        push_u32(&mut out, w.data.len() as u32);
        out.extend_from_slice(w.data);
        out.resize(out.len().div_ceil(4) * 4, 0);
    }
    let total = (out.len() + CHECKSUM_BYTES) as u32;
    out[8..12].copy_from_slice(&total.to_le_bytes());
    let crc = crc32(&out);
    push_u32(&mut out, crc);
    out
}

impl Blob<'_> {
    /// The blob's bytes, written again from its fields: for any `bytes` that
    /// [`Blob::parse`] accepts, `parse(bytes)?.to_bytes() == bytes`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = Header {
            target: self.target,
            batch: self.batch,
            input: self.input,
            feature_scale: self.feature_scale,
            logits: self.logits,
            image: self.image,
            expected_cycles: self.expected_cycles,
        };
        let writes: Vec<DramWrite<'_>> = self.writes().collect();
        assemble(&header, self.program, writes.into_iter())
    }
}

/// The input image of `net` as a blob holds it, padded as `step` reads it.
fn image_of(net: &Net, step: &CompiledStep) -> Result<Option<Image>, BuildError> {
    let Shape::Image { c, h, w } = net.input else { return Ok(None) };
    let narrow = |v: u32| u16::try_from(v).map_err(|_| BuildError::Field { field: "input image" });
    let image =
        Image { c: narrow(c)?, h: narrow(h)?, w: narrow(w)?, padding: narrow(step.input_padding)? };
    Ok(Some(image))
}

/// The blob of one inference pass of `batch` rows of `net` with `params` on `config`: INT8
/// with `int8` (weights and inputs quantized by the plan), else BF16. The program is
/// `compile_inference`'s and the DRAM image is exactly what [`Int8Inference`] (or
/// [`AccelTrainer`]) writes: the parameters, and zeros where the step needs them
/// ([`CompiledStep::zeroed`]: the borders of later convolutions' padded inputs). So the blob's
/// logits equal theirs bit for bit.
///
/// [`Int8Inference`]: crate::train::Int8Inference
/// [`AccelTrainer`]: crate::train::AccelTrainer
pub fn build(
    net: &Net,
    params: &Params,
    config: &ArrayConfig,
    batch: u16,
    int8: Option<&Int8Plan>,
    feature_scale: f32,
) -> Result<Vec<u8>, BuildError> {
    if batch == 0 {
        return Err(BuildError::Field { field: "batch" });
    }
    if !positive(feature_scale) {
        return Err(BuildError::Field { field: "feature scale" });
    }
    let graph = Graph::network(net).map_err(BuildError::Graph)?;
    let shapes = net.param_shapes();
    if params.layers.len() != shapes.len() {
        return Err(BuildError::Params { layer: params.layers.len().min(shapes.len()) });
    }
    for (layer, (p, &(fan_in, fan_out))) in params.layers.iter().zip(&shapes).enumerate() {
        let n = fan_in as usize * fan_out as usize;
        if p.fan_in != fan_in
            || p.fan_out != fan_out
            || p.weight.len() != n
            || p.bias.len() != fan_out as usize
        {
            return Err(BuildError::Params { layer });
        }
    }
    if let Some(plan) = int8 {
        let layers = params.layers.len();
        if plan.input_scales.len() != layers
            || plan.weight_scales.len() != layers
            || plan.requant.len() + 1 != layers
        {
            return Err(BuildError::Plan);
        }
    }
    let step =
        compile_inference(&graph, config, batch as u32, int8).map_err(BuildError::Compile)?;
    let dram_bytes =
        u32::try_from(step.dram_bytes).map_err(|_| BuildError::Dram { needed: step.dram_bytes })?;
    let elems = |t: u8| step.buffers[t as usize].elems.unwrap_or(0);
    let words = |t: u8| step.buffers[t as usize].words.unwrap_or(0);

    let mut writes: Vec<(u32, Vec<u8>)> = Vec::new();
    for (l, &(w, b)) in graph.params.iter().enumerate() {
        let layer = &params.layers[l];
        match int8 {
            Some(plan) => {
                writes.push((elems(w), plan.weight_bytes(l, params)));
                writes.push((words(b), word_bytes(plan.bias_words(l, params).into_iter())));
            }
            None => {
                writes.push((elems(w), bf16_bytes(&layer.weight)));
                writes.push((words(b), word_bytes(layer.bias.iter().map(|x| x.to_bits()))));
            }
        }
    }
    writes.extend(step.zeroed.iter().map(|&(at, bytes)| (at, vec![0u8; bytes as usize])));
    // The target asks for the INT8 lanes' comparator only where the program uses it, so a
    // blob without a pooling runs on machines built without one.
    let uses_max = step.forward.iter().any(|ins| {
        matches!(ins, crate::isa::Instruction::Vector { op: crate::isa::VectorOp::Max, .. })
    });
    let config = &ArrayConfig { int8_max: config.dtype == Dtype::Int8 && uses_max, ..*config };
    let target = Identity {
        isa_version: ISA_VERSION,
        config: *config,
        dram_bytes,
        fifo_depth: 0,
        program_checks: true,
        large_requests: false,
    };
    let input = Buffer {
        addr: elems(graph.input),
        format: Format::input_of(config.dtype),
        cols: graph.inputs(),
        scale: int8.map_or(1.0, |p| p.input_scales[0]),
    };
    let logits = Buffer {
        addr: words(graph.logits),
        format: Format::logits_of(config.dtype),
        cols: graph.classes(),
        scale: int8.map_or(1.0, |p| p.logits_scale()),
    };

    let mut program = Vec::with_capacity(step.forward.len() * WORD_BYTES);
    for ins in &step.forward {
        // The compiler emits only valid instructions, and a valid instruction encodes.
        let word = encode(ins).map_err(|_| {
            BuildError::Compile(CompileError::Unsupported {
                op: "an instruction that does not encode",
            })
        })?;
        program.extend_from_slice(&word.to_le_bytes());
    }
    let header = Header {
        target,
        batch,
        input,
        feature_scale,
        logits,
        image: image_of(net, &step)?,
        expected_cycles: step.forward_cycles,
    };
    let writes = writes.iter().map(|(addr, data)| DramWrite { addr: *addr, data });
    Ok(assemble(&header, &program, writes))
}
