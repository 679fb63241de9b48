//! Convolution and pooling shapes, checked as PyTorch would build them (no allocation: the
//! graph IR and the layer lists hold them).

use crate::limits::{MAX_PADDED_IMAGE, MAX_WIDTH};

/// Why a convolution or pooling geometry cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ShapeError {
    /// A channel count, side, kernel or stride of 0.
    Zero(&'static str),
    /// The kernel is larger than the (padded) input: no output position.
    KernelTooLarge { kernel: u32, side: u64 },
    /// A field, or a size made of the fields (computed in 64 bits with checked operations, as
    /// PyTorch's formulas give it; `None` past `u64::MAX`), past its limit: `what` says which
    /// size, `field` the model file's field at fault (`in`, `out`, `kernel`, `stride` or
    /// `padding`).
    TooLarge { field: &'static str, what: &'static str, value: Option<u64>, limit: u64 },
}

impl ShapeError {
    /// The model file's field at fault.
    pub fn field(&self) -> &'static str {
        match *self {
            ShapeError::Zero("kernel") => "kernel",
            ShapeError::Zero("stride") => "stride",
            ShapeError::Zero(_) => "in",
            ShapeError::KernelTooLarge { .. } => "kernel",
            ShapeError::TooLarge { field, .. } => field,
        }
    }
}

impl core::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ShapeError::Zero(field) => write!(f, "{field} is 0"),
            ShapeError::KernelTooLarge { kernel, side } => {
                write!(f, "kernel {kernel} is larger than the input side {side} (with padding)")
            }
            ShapeError::TooLarge { what, value: Some(value), limit, .. } => {
                write!(f, "{what} is {value}, more than {limit}")
            }
            ShapeError::TooLarge { what, value: None, limit, .. } => {
                write!(f, "{what} is more than 2^64, past {limit}")
            }
        }
    }
}

/// The first of `fields` that is 0, as an error naming it.
fn nonzero(fields: &[(u32, &'static str)]) -> Result<(), ShapeError> {
    match fields.iter().find(|(v, _)| *v == 0) {
        Some(&(_, field)) => Err(ShapeError::Zero(field)),
        None => Ok(()),
    }
}

/// `value` of `what` (blamed on `field`; `None` past `u64::MAX`) if it is at most `limit`.
fn at_most(
    field: &'static str,
    what: &'static str,
    value: Option<u64>,
    limit: u64,
) -> Result<u64, ShapeError> {
    match value {
        Some(v) if v <= limit => Ok(v),
        _ => Err(ShapeError::TooLarge { field, what, value, limit }),
    }
}

/// The product of `factors`, or `None` past `u64::MAX` (past every limit).
fn product(factors: &[u64]) -> Option<u64> {
    factors.iter().try_fold(1u64, |p, &f| p.checked_mul(f))
}

/// A side with `padding` on both ends (below 2^34: it cannot wrap).
fn padded(side: u32, padding: u32) -> u64 {
    side as u64 + 2 * padding as u64
}

/// One output side, PyTorch's `floor((side + 2 padding - kernel) / stride) + 1` (dilation 1) in
/// 64 bits, where no operand can wrap (each is below 2^34).
fn out_side(side: u32, kernel: u32, stride: u32, padding: u32) -> Result<u64, ShapeError> {
    let padded = padded(side, padding);
    if kernel as u64 > padded {
        return Err(ShapeError::KernelTooLarge { kernel, side: padded });
    }
    Ok((padded - kernel as u64) / stride as u64 + 1)
}

/// The input image's elements, at most [`MAX_WIDTH`] (a sample between layers), so each side
/// and the channel count are too.
fn image((c, h, w): (u32, u32, u32)) -> Result<u64, ShapeError> {
    let elements = product(&[c as u64, h as u64, w as u64]);
    at_most("in", "the input image's elements", elements, MAX_WIDTH as u64)
}

/// A 2-D convolution of `c x h x w` images to `out_c` channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConvGeometry {
    pub c: u32,
    pub h: u32,
    pub w: u32,
    pub out_c: u32,
    pub kernel: u32,
    pub stride: u32,
    pub padding: u32,
}

impl ConvGeometry {
    pub fn new(
        (c, h, w): (u32, u32, u32),
        out_c: u32,
        kernel: u32,
        stride: u32,
        padding: u32,
    ) -> Result<ConvGeometry, ShapeError> {
        nonzero(&[
            (c, "in channels"),
            (h, "height"),
            (w, "width"),
            (out_c, "out channels"),
            (kernel, "kernel"),
            (stride, "stride"),
        ])?;
        let max = MAX_WIDTH as u64;
        image((c, h, w))?;
        at_most("out", "the out channels", Some(out_c as u64), max)?;
        let (oh, ow) =
            (out_side(h, kernel, stride, padding)?, out_side(w, kernel, stride, padding)?);
        at_most("padding", "the output side", Some(oh.max(ow)), max)?;
        at_most("padding", "the output positions (height x width)", product(&[oh, ow]), max)?;
        let patch = product(&[c as u64, kernel as u64, kernel as u64]);
        at_most("kernel", "the patch (in x kernel x kernel)", patch, max)?;
        at_most("padding", "the padding", Some(padding as u64), max)?;
        let image = product(&[c as u64, padded(h, padding), padded(w, padding)]);
        at_most("padding", "the padded image's elements", image, MAX_PADDED_IMAGE)?;
        at_most("stride", "the stride", Some(stride as u64), max)?;
        Ok(ConvGeometry { c, h, w, out_c, kernel, stride, padding })
    }

    // The accessors' sizes are those `new` checked against [`MAX_WIDTH`] (2^16), so each fits
    // its type; the fields are public, so they compute in 64 bits all the same.

    pub fn out_h(&self) -> u32 {
        ((self.h as u64 + 2 * self.padding as u64 - self.kernel as u64) / self.stride as u64 + 1)
            as u32
    }

    pub fn out_w(&self) -> u32 {
        ((self.w as u64 + 2 * self.padding as u64 - self.kernel as u64) / self.stride as u64 + 1)
            as u32
    }

    /// Elements of one patch: `kernel x kernel x c` (a row of the patches, a row of `W`).
    pub fn patch(&self) -> usize {
        (self.c as u64 * self.kernel as u64 * self.kernel as u64) as usize
    }

    /// Taps of the kernel: `kernel x kernel`.
    pub fn taps(&self) -> usize {
        (self.kernel as u64 * self.kernel as u64) as usize
    }

    /// Output positions of one image: `out_h x out_w`.
    pub fn positions(&self) -> usize {
        (self.out_h() as u64 * self.out_w() as u64) as usize
    }

    /// Elements of one input image.
    pub fn image(&self) -> usize {
        (self.c as u64 * self.h as u64 * self.w as u64) as usize
    }

    /// The input element (index within its HWC image) at patch column `col`, `(ky, kx, c)`, of
    /// output position `(oy, ox)`, or `None` in the zero padding.
    pub fn source(&self, oy: u32, ox: u32, col: usize) -> Option<usize> {
        let c = self.c as usize;
        let (tap, ch) = (col / c, col % c);
        let (ky, kx) = ((tap / self.kernel as usize) as u32, (tap % self.kernel as usize) as u32);
        let (s, p) = (self.stride as u64, self.padding as u64);
        let y = (oy as u64 * s + ky as u64).checked_sub(p)?;
        let x = (ox as u64 * s + kx as u64).checked_sub(p)?;
        (y < self.h as u64 && x < self.w as u64).then(|| (y * self.w as u64 + x) as usize * c + ch)
    }
}

/// A pooling window over `c x h x w` images (no padding; floor mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolGeometry {
    pub c: u32,
    pub h: u32,
    pub w: u32,
    pub kernel: u32,
    pub stride: u32,
}

impl PoolGeometry {
    pub fn new((c, h, w): (u32, u32, u32), kernel: u32, stride: u32) -> Result<Self, ShapeError> {
        nonzero(&[
            (c, "channels"),
            (h, "height"),
            (w, "width"),
            (kernel, "kernel"),
            (stride, "stride"),
        ])?;
        image((c, h, w))?;
        for side in [h, w] {
            out_side(side, kernel, stride, 0)?;
        }
        at_most("stride", "the stride", Some(stride as u64), MAX_WIDTH as u64)?;
        Ok(PoolGeometry { c, h, w, kernel, stride })
    }

    pub fn out_h(&self) -> u32 {
        (self.h - self.kernel) / self.stride + 1
    }

    pub fn out_w(&self) -> u32 {
        (self.w - self.kernel) / self.stride + 1
    }

    pub fn image(&self) -> usize {
        (self.c as u64 * self.h as u64 * self.w as u64) as usize
    }

    pub fn out_image(&self) -> usize {
        (self.c as u64 * self.out_h() as u64 * self.out_w() as u64) as usize
    }

    /// Taps in a window (at most the image's elements, which `new` bounds by [`MAX_WIDTH`]).
    pub fn size(&self) -> u32 {
        (self.kernel as u64 * self.kernel as u64) as u32
    }

    /// What the accelerator's average pooling multiplies a window's sum by, and its gradient
    /// each output's gradient: `1 / size`, rounded to f32.
    pub fn mean_factor(&self) -> f32 {
        1.0 / self.size() as f32
    }

    /// The input elements (within the HWC image) of HWC output element `o`'s window, row by
    /// row.
    pub fn window(&self, o: usize) -> impl Iterator<Item = usize> + '_ {
        let (c, ow) = (self.c as usize, self.out_w() as usize);
        let (position, ch) = (o / c, o % c);
        let (oy, ox) = (position / ow, position % ow);
        let k = self.kernel as usize;
        let (y0, x0) = (oy * self.stride as usize, ox * self.stride as usize);
        (0..k * k).map(move |i| ((y0 + i / k) * self.w as usize + x0 + i % k) * c + ch)
    }
}
