//! Image data sets in MNIST's IDX format: an images file and a labels file, each gzipped or not
//! (MNIST, Fashion-MNIST and the built-in `mnist` are such pairs).
//!
//! **Format** (big-endian): two zero bytes, the element type (only `0x08`, unsigned bytes, is
//! read: the type of every MNIST-style file), the number of dimensions, then each dimension as
//! a 32-bit count, then the elements, row-major. The images file has 2 to 4 dimensions (`count`,
//! then an image's shape: `count x 28 x 28` for MNIST), the labels file one (`count`). Pixels
//! become features as they are (0 to 255; the split scales them), one image a row.
//!
//! **Bounds**: the header's sizes are checked before anything is allocated: an image holds at
//! most core's [`MAX_WIDTH`] pixels and a file at most [`INPUT_LIMIT`] bytes of elements (after
//! decompression, counted while reading, so a small gzip that inflates without end is refused).
//! A file that ends early or goes on past its elements is refused, naming the file and the part.

use std::io::{self, BufRead, BufReader, Read};
use std::ops::RangeInclusive;

use flate2::bufread::GzDecoder;
use systole_core::graph::MAX_WIDTH;

use super::{Dataset, DatasetError};
use crate::limits::INPUT_LIMIT;

/// The built-in MNIST sample (data/README.md has its provenance): 10,000 images of 28 x 28.
pub const MNIST_IMAGES: &[u8] = include_bytes!("../../../data/mnist10k-images-idx3-ubyte.gz");
pub const MNIST_LABELS: &[u8] = include_bytes!("../../../data/mnist10k-labels-idx1-ubyte.gz");

/// The element type code of unsigned bytes.
const UBYTE: u8 = 0x08;

/// One IDX file's contents: its dimensions and its elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<u32>,
    pub data: Vec<u8>,
}

impl IdxArray {
    /// Reads an IDX file of unsigned bytes with a number of dimensions in `ranks` (`file` names
    /// it in errors), gunzipping it when it starts with gzip's magic bytes.
    pub fn read(
        reader: impl Read,
        file: &str,
        ranks: RangeInclusive<usize>,
    ) -> Result<IdxArray, DatasetError> {
        let mut buffered = BufReader::new(reader);
        let gzipped = buffered
            .fill_buf()
            .map_err(|e| idx_error(file, "header", format!("cannot be read: {e}")))?
            .starts_with(&[0x1f, 0x8b]);
        if gzipped {
            IdxArray::read_plain(BufReader::new(GzDecoder::new(buffered)), file, ranks)
        } else {
            IdxArray::read_plain(buffered, file, ranks)
        }
    }

    fn read_plain(
        mut r: impl Read,
        file: &str,
        ranks: RangeInclusive<usize>,
    ) -> Result<IdxArray, DatasetError> {
        let mut magic = [0u8; 4];
        read_exact(&mut r, &mut magic, file, "header")?;
        if magic[..2] != [0, 0] {
            return Err(idx_error(
                file,
                "header",
                format!(
                    "starts {:02x} {:02x}, not the two zero bytes of an IDX file",
                    magic[0], magic[1]
                ),
            ));
        }
        if magic[2] != UBYTE {
            return Err(idx_error(
                file,
                "element type",
                format!("0x{:02x} is not 0x08 (unsigned bytes), the only type read", magic[2]),
            ));
        }
        let rank = magic[3] as usize;
        if !ranks.contains(&rank) {
            return Err(idx_error(
                file,
                "dimensions",
                format!("{rank}, expected {} to {}", ranks.start(), ranks.end()),
            ));
        }
        let mut dims = Vec::with_capacity(rank);
        for d in 0..rank {
            let mut be = [0u8; 4];
            read_exact(&mut r, &mut be, file, "header")?;
            let n = u32::from_be_bytes(be);
            if n == 0 {
                return Err(idx_error(file, "dimensions", format!("dimension {d} is 0")));
            }
            dims.push(n);
        }
        let elements = dims.iter().try_fold(1u64, |acc, &n| acc.checked_mul(n as u64));
        let elements = match elements {
            Some(n) if n <= INPUT_LIMIT => n,
            _ => {
                return Err(idx_error(
                    file,
                    "dimensions",
                    format!("{dims:?} hold more than {INPUT_LIMIT} bytes, the input limit"),
                ))
            }
        };
        let mut data = vec![0u8; elements as usize];
        read_exact(&mut r, &mut data, file, "elements")?;
        let mut extra = [0u8; 1];
        match r.read(&mut extra) {
            Ok(0) => Ok(IdxArray { dims, data }),
            Ok(_) => Err(idx_error(
                file,
                "elements",
                format!("the file goes on past the {elements} its header {dims:?} gives"),
            )),
            Err(e) => Err(idx_error(file, "elements", format!("cannot be read: {e}"))),
        }
    }

    /// The file's bytes, uncompressed (`read` gives back this array).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0, 0, UBYTE, self.dims.len() as u8];
        for d in &self.dims {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(&self.data);
        out
    }
}

fn idx_error(file: &str, part: &'static str, message: String) -> DatasetError {
    DatasetError::Idx { file: file.into(), part, message }
}

fn read_exact(
    r: &mut impl Read,
    buf: &mut [u8],
    file: &str,
    part: &'static str,
) -> Result<(), DatasetError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(idx_error(
                    file,
                    part,
                    format!("the file ends after {got} of its {} bytes", buf.len()),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(idx_error(file, part, format!("cannot be read: {e}"))),
        }
    }
    Ok(())
}

impl Dataset {
    /// An image data set from an IDX pair: `images` (`count` x an image's shape) and `labels`
    /// (`count` labels); `name` names the pair, and each file's errors name that file.
    pub fn from_idx(
        images: impl Read,
        images_file: &str,
        labels: impl Read,
        labels_file: &str,
        name: &str,
    ) -> Result<Dataset, DatasetError> {
        let images = IdxArray::read(images, images_file, 2..=4)?;
        let labels = IdxArray::read(labels, labels_file, 1..=1)?;
        let (count, shape) = (images.dims[0], &images.dims[1..]);
        if labels.dims[0] != count {
            return Err(DatasetError::Idx {
                file: labels_file.into(),
                part: "dimensions",
                message: format!(
                    "{} labels for the {count} images of {images_file}",
                    labels.dims[0]
                ),
            });
        }
        let features = images.data.len() / count as usize;
        if features > MAX_WIDTH as usize {
            return Err(DatasetError::Idx {
                file: images_file.into(),
                part: "dimensions",
                message: format!(
                    "an image of {shape:?} has {features} pixels; the limit is {MAX_WIDTH}, the \
                     widest model input"
                ),
            });
        }
        let labels: Vec<u16> = labels.data.iter().map(|&l| l as u16).collect();
        let max = *labels.iter().max().expect("a dimension is never 0");
        if labels.iter().all(|&l| l == max) {
            return Err(DatasetError::OneClass { file: labels_file.into(), label: max });
        }
        Ok(Dataset {
            file: name.into(),
            features,
            classes: max as u32 + 1,
            x: images.data.iter().map(|&p| p as f32).collect(),
            labels,
        })
    }

    /// The built-in MNIST sample.
    pub fn mnist() -> Result<Dataset, DatasetError> {
        Dataset::from_idx(
            MNIST_IMAGES,
            "mnist images (built in)",
            MNIST_LABELS,
            "mnist labels (built in)",
            "mnist (built in)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn pair(images: &IdxArray, labels: &IdxArray) -> Result<Dataset, DatasetError> {
        let (i, l) = (images.to_bytes(), labels.to_bytes());
        Dataset::from_idx(&i[..], "i.idx", &l[..], "l.idx", "pair")
    }

    /// The built-in sample is what data/README.md says: 10,000 images of 28 x 28, the ten
    /// classes in the counts it lists.
    #[test]
    fn mnist_is_10000_images_of_28_by_28_in_ten_classes() {
        let d = Dataset::mnist().unwrap();
        assert_eq!((d.rows(), d.features, d.classes), (10_000, 784, 10));
        let mut counts = [0usize; 10];
        for &l in &d.labels {
            counts[l as usize] += 1;
        }
        assert_eq!(counts, [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]);
        assert!(d.x.iter().all(|&p| (0.0..=255.0).contains(&p) && p.fract() == 0.0));
        assert_eq!(d.x.iter().cloned().fold(0.0, f32::max), 255.0);
    }

    /// Every way a file can be wrong is one line naming the file and the part.
    #[test]
    fn bad_files_are_refused_naming_file_and_part() {
        let images = IdxArray { dims: vec![3, 2, 2], data: (0..12).collect() };
        let labels = IdxArray { dims: vec![3], data: vec![0, 1, 2] };
        assert_eq!(pair(&images, &labels).unwrap().x.len(), 12);
        let refused = |i: &[u8], l: &[u8]| {
            Dataset::from_idx(i, "i.idx", l, "l.idx", "pair").unwrap_err().to_string()
        };
        let (ib, lb) = (images.to_bytes(), labels.to_bytes());
        let cases: Vec<(Vec<u8>, Vec<u8>, &str)> = vec![
            (b"P5 2 2".to_vec(), lb.clone(), "i.idx: header: starts 50 35"),
            ([&[0, 0, 0x0D, 3][..], &ib[4..]].concat(), lb.clone(), "i.idx: element type: 0x0d"),
            (
                [&[0, 0, 8, 5][..], &ib[4..]].concat(),
                lb.clone(),
                "i.idx: dimensions: 5, expected 2 to 4",
            ),
            (
                ib.clone(),
                [&[0, 0, 8, 2][..], &lb[4..]].concat(),
                "l.idx: dimensions: 2, expected 1 to 1",
            ),
            (
                ib[..ib.len() - 1].to_vec(),
                lb.clone(),
                "i.idx: elements: the file ends after 11 of its 12 bytes",
            ),
            (ib[..6].to_vec(), lb.clone(), "i.idx: header: the file ends after 2 of its 4 bytes"),
            ([&ib[..], &[7]].concat(), lb.clone(), "i.idx: elements: the file goes on past the 12"),
            (
                ib.clone(),
                IdxArray { dims: vec![2], data: vec![0, 1] }.to_bytes(),
                "l.idx: dimensions: 2 labels for the 3 images of i.idx",
            ),
            (
                ib.clone(),
                IdxArray { dims: vec![3], data: vec![4, 4, 4] }.to_bytes(),
                "l.idx: every row has label 4",
            ),
            (
                IdxArray { dims: vec![0, 2], data: vec![] }.to_bytes(),
                lb.clone(),
                "i.idx: dimensions: dimension 0 is 0",
            ),
            (
                IdxArray { dims: vec![1, 300, 300], data: vec![] }.to_bytes(),
                lb.clone(),
                "i.idx: elements: the file ends after 0",
            ),
            (
                IdxArray { dims: vec![1, 1 << 17], data: vec![0; 1 << 17] }.to_bytes(),
                [&[0, 0, 8, 1][..], &1u32.to_be_bytes(), &[0]].concat(),
                "i.idx: dimensions: an image of [131072] has 131072 pixels; the limit is 65536",
            ),
            (
                IdxArray { dims: vec![65536, 65536, 65536], data: vec![] }.to_bytes(),
                lb.clone(),
                "i.idx: dimensions: [65536, 65536, 65536] hold more than",
            ),
        ];
        for (i, l, want) in cases {
            let got = refused(&i, &l);
            assert!(got.starts_with(want), "{got:?} does not start {want:?}");
            assert!(!got.contains('\n'), "{got:?}");
        }
        // A gzip that inflates past its header's size is refused when it has read that much.
        let long = gzip(&[&ib[..], &vec![0u8; 1 << 20]].concat());
        assert!(refused(&long, &lb).starts_with("i.idx: elements: the file goes on past"));
    }
}
