//! Convolution and pooling shapes, checked as PyTorch would build them (no allocation: the
//! graph IR and the layer lists hold them).

/// Why a convolution or pooling geometry cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ShapeError {
    /// A channel count, side, kernel or stride of 0.
    Zero(&'static str),
    /// The kernel is larger than the (padded) input: no output position.
    KernelTooLarge { kernel: u32, side: u32 },
}

impl core::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ShapeError::Zero(field) => write!(f, "{field} is 0"),
            ShapeError::KernelTooLarge { kernel, side } => {
                write!(f, "kernel {kernel} is larger than the input side {side} (with padding)")
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
        for side in [h, w] {
            if kernel > side + 2 * padding {
                return Err(ShapeError::KernelTooLarge { kernel, side: side + 2 * padding });
            }
        }
        Ok(ConvGeometry { c, h, w, out_c, kernel, stride, padding })
    }

    pub fn out_h(&self) -> u32 {
        (self.h + 2 * self.padding - self.kernel) / self.stride + 1
    }

    pub fn out_w(&self) -> u32 {
        (self.w + 2 * self.padding - self.kernel) / self.stride + 1
    }

    /// Elements of one patch: `kernel x kernel x c` (a row of the patches, a row of `W`).
    pub fn patch(&self) -> usize {
        (self.c * self.kernel * self.kernel) as usize
    }

    /// Output positions of one image: `out_h x out_w`.
    pub fn positions(&self) -> usize {
        (self.out_h() * self.out_w()) as usize
    }

    /// Elements of one input image.
    pub fn image(&self) -> usize {
        (self.c * self.h * self.w) as usize
    }

    /// The input element (index within its HWC image) at patch column `col`, `(ky, kx, c)`, of
    /// output position `(oy, ox)`, or `None` in the zero padding.
    pub fn source(&self, oy: u32, ox: u32, col: usize) -> Option<usize> {
        let c = self.c as usize;
        let (tap, ch) = (col / c, col % c);
        let (ky, kx) = ((tap / self.kernel as usize) as u32, (tap % self.kernel as usize) as u32);
        let y = (oy * self.stride + ky).checked_sub(self.padding)?;
        let x = (ox * self.stride + kx).checked_sub(self.padding)?;
        (y < self.h && x < self.w).then(|| ((y * self.w + x) as usize) * c + ch)
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
        for side in [h, w] {
            if kernel > side {
                return Err(ShapeError::KernelTooLarge { kernel, side });
            }
        }
        Ok(PoolGeometry { c, h, w, kernel, stride })
    }

    pub fn out_h(&self) -> u32 {
        (self.h - self.kernel) / self.stride + 1
    }

    pub fn out_w(&self) -> u32 {
        (self.w - self.kernel) / self.stride + 1
    }

    pub fn image(&self) -> usize {
        (self.c * self.h * self.w) as usize
    }

    pub fn out_image(&self) -> usize {
        (self.c * self.out_h() * self.out_w()) as usize
    }

    /// Taps in a window.
    pub fn size(&self) -> u32 {
        self.kernel * self.kernel
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
