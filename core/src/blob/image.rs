//! An image model's input in a blob: the values a caller gives (one row per image, channels
//! first, as data sets and PyTorch hold images) and where each lands in the input buffer, which
//! holds the images channels-last with the first convolution's zero padding around them, as
//! the compiled program reads them ([`crate::compile::CompiledStep::padded_input`]).

/// The input image of a blob: `c x h x w` values a row, `padding` zeros around each image in
/// DRAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Image {
    pub c: u16,
    pub h: u16,
    pub w: u16,
    pub padding: u16,
}

impl Image {
    /// The header's four fields: `None` when all are zero (a vector input), else an image whose
    /// values are the input's `features`; the field that disagrees, named, otherwise.
    pub fn from_fields(
        c: u16,
        h: u16,
        w: u16,
        padding: u16,
        features: u32,
    ) -> Result<Option<Image>, &'static str> {
        if (c, h, w, padding) == (0, 0, 0, 0) {
            return Ok(None);
        }
        if c == 0 || h == 0 || w == 0 {
            return Err("input image");
        }
        if c as u64 * h as u64 * w as u64 != features as u64 {
            return Err("input image");
        }
        Ok(Some(Image { c, h, w, padding }))
    }

    /// The header's fields of an optional image (zeros for none).
    pub fn fields(image: Option<Image>) -> [u16; 4] {
        image.map_or([0; 4], |i| [i.c, i.h, i.w, i.padding])
    }

    /// Values of one image (`c x h x w`).
    pub fn features(&self) -> u64 {
        self.c as u64 * self.h as u64 * self.w as u64
    }

    /// Elements of one image in DRAM, its zero border included.
    pub fn elements(&self) -> u64 {
        let p = 2 * self.padding as u64;
        self.c as u64 * (self.h as u64 + p) * (self.w as u64 + p)
    }

    /// The value (channels-first index into one image's features) that element `at` of the
    /// image in DRAM (channels-last, padded) holds, or `None` for a zero of its border.
    pub fn feature_at(&self, at: usize) -> Option<usize> {
        let (c, h, w, p) =
            (self.c as usize, self.h as usize, self.w as usize, self.padding as usize);
        let (ch, position) = (at % c, at / c);
        let (y, x) = (position / (w + 2 * p), position % (w + 2 * p));
        let (y, x) = (y.checked_sub(p)?, x.checked_sub(p)?);
        (y < h && x < w).then_some((ch * h + y) * w + x)
    }
}
