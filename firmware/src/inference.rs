//! Running a model blob (`systole_core::blob`): load its DRAM image once, then per inference
//! write the input, run the program and read the logits back, dequantized.
//!
//! The host side of this (which DRAM buffers get written, how the input is quantized or cast
//! and how the logits are dequantized) is `systole_core::train::Int8Inference::logits` and
//! `AccelTrainer::logits`, element for element, so the logits are theirs bit for bit.

use embedded_hal::delay::DelayNs;
use embedded_hal::spi::SpiDevice;
use systole_core::blob::{Blob, Format};
use systole_core::machine::Region;
use systole_core::numerics::bf16::to_operand;
use systole_core::numerics::int8::quantize;
use systole_core::protocol::{Identity, BASE_DATA};

use crate::driver::{Result, Systole};
use crate::error::Error;

/// One inference's input.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Input<'a> {
    /// The model's input values, `batch x features` row-major (raw features already divided by
    /// the blob's `feature_scale`; an image model's images channels first, as data sets and
    /// PyTorch hold them): quantized with the blob's input scale (INT8) or rounded to bf16
    /// (BF16) exactly as the host does, and placed where the program reads them (an image
    /// channels-last inside its zero border: [`Blob::input_source`]).
    F32(&'a [f32]),
    /// The input buffer's bytes as they are (i8, or bf16 little-endian):
    /// [`Blob::input_elements`] elements.
    Encoded(&'a [u8]),
}

/// Bytes of `n` elements of `format`.
fn bytes_of(n: usize, format: Format) -> usize {
    n.saturating_mul(format.bytes())
}

impl<SPI: SpiDevice, D: DelayNs> Systole<SPI, D> {
    /// Checks that the accelerator is the blob's target ([`Systole::identify`]) and writes the
    /// blob's DRAM image (the quantized or bf16 weights and the biases). Memories keep it until
    /// the accelerator is reprogrammed, so one load serves any number of [`infer`]s.
    ///
    /// [`infer`]: Systole::infer
    pub fn load_model(&mut self, blob: &Blob<'_>) -> Result<Identity, SPI::Error> {
        let identity = self.identify(&blob.target)?;
        let mut bytes = 0usize;
        for write in blob.writes() {
            self.write_memory(Region::Dram, write.addr, write.data)?;
            bytes = bytes.saturating_add(write.data.len());
        }
        info!("model loaded: {} program words, {} DRAM bytes", blob.program_words(), bytes);
        Ok(identity)
    }

    /// One inference of a loaded blob: writes `input`, runs the program, reads the logits
    /// (`batch x classes`, dequantized for INT8) into `logits`. Returns the cycles the
    /// accelerator counted, which equal the blob's `expected_cycles`.
    pub fn infer(
        &mut self,
        blob: &Blob<'_>,
        input: Input<'_>,
        logits: &mut [f32],
    ) -> Result<u64, SPI::Error> {
        if logits.len() != blob.logits_len() {
            let (expected, got) = (blob.logits_len(), logits.len());
            return Err(Error::Buffer { what: "logits", expected, got });
        }
        self.write_input(blob, input)?;
        let status = self.run_program(blob.program())?;
        self.read_logits(blob, logits)?;
        Ok(status.cycles)
    }

    /// [`load_model`](Self::load_model), then [`infer`](Self::infer): the whole of one
    /// inference of a blob. Returns the accelerator's cycle count.
    pub fn run_inference(
        &mut self,
        blob: &Blob<'_>,
        input: Input<'_>,
        logits: &mut [f32],
    ) -> Result<u64, SPI::Error> {
        self.load_model(blob)?;
        self.infer(blob, input, logits)
    }

    fn write_input(&mut self, blob: &Blob<'_>, input: Input<'_>) -> Result<(), SPI::Error> {
        let format = blob.input.format;
        match input {
            Input::Encoded(bytes) => {
                let expected = bytes_of(blob.input_elements(), format);
                if bytes.len() != expected {
                    return Err(Error::Buffer { what: "input bytes", expected, got: bytes.len() });
                }
                self.write_memory(Region::Dram, blob.input.addr, bytes)
            }
            Input::F32(values) => {
                let n = blob.input_len();
                if values.len() != n {
                    return Err(Error::Buffer { what: "input", expected: n, got: values.len() });
                }
                // The buffer's elements in order, each its input value or a border's zero.
                let elements = blob.input_elements();
                let value = |e: usize| blob.input_source(e).and_then(|i| values.get(i).copied());
                let per_chunk = BASE_DATA.checked_div(format.bytes()).unwrap_or(1).max(1);
                let mut addr = blob.input.addr;
                for first in (0..elements).step_by(per_chunk) {
                    let count = per_chunk.min(elements.saturating_sub(first));
                    let mut buf = [0u8; BASE_DATA];
                    match format {
                        Format::Bf16 => {
                            for (e, slot) in (first..).zip(buf.chunks_exact_mut(2).take(count)) {
                                let bits = value(e).map_or(0, |x| to_operand(x).0);
                                slot.copy_from_slice(&bits.to_le_bytes());
                            }
                        }
                        _ => {
                            for (e, slot) in (first..).zip(buf.iter_mut().take(count)) {
                                *slot = value(e).map_or(0, |x| quantize(x, blob.input.scale) as u8);
                            }
                        }
                    }
                    let len = bytes_of(count, format);
                    let data = buf.get(..len).unwrap_or(&[]);
                    self.write_memory(Region::Dram, addr, data)?;
                    addr = addr.wrapping_add(len as u32);
                }
                Ok(())
            }
        }
    }

    fn read_logits(&mut self, blob: &Blob<'_>, logits: &mut [f32]) -> Result<(), SPI::Error> {
        let format = blob.logits.format;
        let per_chunk = BASE_DATA.checked_div(format.bytes()).unwrap_or(1).max(1);
        let mut addr = blob.logits.addr;
        for chunk in logits.chunks_mut(per_chunk) {
            let mut buf = [0u8; BASE_DATA];
            let len = bytes_of(chunk.len(), format);
            self.read_memory(Region::Dram, addr, buf.get_mut(..len).unwrap_or(&mut []))?;
            for (value, word) in chunk.iter_mut().zip(buf.chunks_exact(4)) {
                let bits = <[u8; 4]>::try_from(word).map_or(0, u32::from_le_bytes);
                *value = match format {
                    Format::F32 => f32::from_bits(bits),
                    _ => bits as i32 as f32 * blob.logits.scale,
                };
            }
            addr = addr.wrapping_add(len as u32);
        }
        Ok(())
    }
}
