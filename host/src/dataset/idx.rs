//! Image data sets in MNIST's IDX format: an images file and a labels file, each gzipped or not
//! (MNIST, Fashion-MNIST and the built-in `mnist` are such pairs).
//!
//! **Format** (big-endian): two zero bytes, the element type (only `0x08`, unsigned bytes, is
//! read: the type of every MNIST-style file), the number of dimensions, then each dimension as
//! a 32-bit count, then the elements, row-major. The images file has 2 to 4 dimensions (`count`,
//! then an image's shape: `count x 28 x 28` for MNIST), the labels file one (`count`). Pixels
//! become features as they are (0 to 255; the split scales them), one image a row. A gzipped
//! file may have several members (`cat a.gz b.gz`): it is their concatenation (`gzip.rs`).
//!
//! **Bounds**: the header's sizes are checked before anything is allocated: an image holds at
//! most core's [`MAX_WIDTH`] pixels, a file at most [`INPUT_LIMIT`] bytes of elements (after
//! decompression, counted while reading, so a small gzip that inflates without end is
//! refused), and the data set they make, as f32 and split, at most the memory limit
//! (`memory.rs`). Pixels become f32 as they are read, a chunk at a time. A file that ends
//! early is refused, and so is one that goes on past its elements, by one rule whether the
//! bytes after them are plain, gunzipped, or follow the last gzip member without being one.

use std::io::{self, BufReader, Read};
use std::ops::RangeInclusive;

use systole_core::graph::MAX_WIDTH;

use super::gzip::Members;
use super::memory::check_held;
use super::{Dataset, DatasetError};
use crate::limits::{try_grow, INPUT_LIMIT};

/// The built-in MNIST sample (data/README.md has its provenance): 10,000 images of 28 x 28.
pub const MNIST_IMAGES: &[u8] = include_bytes!("../../../data/mnist10k-images-idx3-ubyte.gz");
pub const MNIST_LABELS: &[u8] = include_bytes!("../../../data/mnist10k-labels-idx1-ubyte.gz");

/// The element type code of unsigned bytes.
const UBYTE: u8 = 0x08;

/// gzip's magic bytes, which no IDX file starts with.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Elements read at a time.
const CHUNK: usize = 1 << 16;

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
        let idx = IdxReader::open(reader, file, ranks)?;
        let dims = idx.dims.clone();
        let mut data = Vec::new();
        idx.read_elements(|chunk, elements| {
            let what = format_args!("{file}: {elements} elements");
            try_grow(&mut data, chunk.len() as u64, elements, what)?;
            data.extend_from_slice(chunk);
            Ok(())
        })?;
        Ok(IdxArray { dims, data })
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

/// A file's bytes as the reader hands them over: the first two (looked at for gzip's magic)
/// given back in front of the rest.
type Source<R> = BufReader<io::Chain<io::Take<io::Cursor<[u8; 2]>>, R>>;

/// An IDX file's bytes, plain or gunzipped.
enum Stream<R: Read> {
    Plain(Source<R>),
    Gzip(Members<Source<R>>),
}

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(r) => r.read(buf),
            Stream::Gzip(r) => r.read(buf),
        }
    }
}

/// An IDX file whose header has been read and checked, its elements still to come.
struct IdxReader<'f, R: Read> {
    stream: Stream<R>,
    file: &'f str,
    dims: Vec<u32>,
    /// The product of `dims`, at most [`INPUT_LIMIT`].
    elements: u64,
}

impl<'f, R: Read> IdxReader<'f, R> {
    /// Reads and checks the header of the file `reader` holds, gzipped or not.
    fn open(
        mut reader: R,
        file: &'f str,
        ranks: RangeInclusive<usize>,
    ) -> Result<IdxReader<'f, R>, DatasetError> {
        let mut first = [0u8; 2];
        let got = read_up_to(&mut reader, &mut first)
            .map_err(|e| idx_error(file, "header", format!("cannot be read: {e}")))?;
        let source = BufReader::new(io::Cursor::new(first).take(got as u64).chain(reader));
        let mut stream = match first == GZIP_MAGIC {
            true => Stream::Gzip(Members::new(source)),
            false => Stream::Plain(source),
        };
        let mut magic = [0u8; 4];
        read_exact(&mut stream, &mut magic, file, "header")?;
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
            read_exact(&mut stream, &mut be, file, "header")?;
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
        Ok(IdxReader { stream, file, dims, elements })
    }

    /// Hands the elements to `take` a chunk at a time (with their count, for the room to
    /// grow to), then checks that nothing follows them.
    fn read_elements(
        mut self,
        mut take: impl FnMut(&[u8], u64) -> Result<(), DatasetError>,
    ) -> Result<(), DatasetError> {
        let (file, total) = (self.file, self.elements);
        let mut chunk = vec![0u8; CHUNK];
        let mut done = 0u64;
        while done < total {
            let want = (total - done).min(CHUNK as u64) as usize;
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => {
                    return Err(idx_error(
                        file,
                        "elements",
                        format!("the file ends after {done} of its {total} bytes"),
                    ))
                }
                Ok(n) => {
                    take(&chunk[..n], total)?;
                    done += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(idx_error(file, "elements", format!("cannot be read: {e}"))),
            }
        }
        self.check_end()
    }

    /// The one rule for what follows the elements: nothing. Not in a plain file, not in the
    /// gunzipped stream, and not after the last gzip member (bytes that are no member).
    fn check_end(&mut self) -> Result<(), DatasetError> {
        let mut extra = [0u8; 1];
        let read = loop {
            match self.stream.read(&mut extra) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                read => break read,
            }
        };
        let trailing = matches!(&self.stream, Stream::Gzip(members) if members.trailing());
        match read {
            Ok(0) if !trailing => Ok(()),
            Ok(_) => Err(idx_error(
                self.file,
                "elements",
                format!(
                    "the file goes on past the {} its header {:?} gives",
                    self.elements, self.dims
                ),
            )),
            Err(e) => Err(idx_error(self.file, "elements", format!("cannot be read: {e}"))),
        }
    }
}

fn idx_error(file: &str, part: &'static str, message: String) -> DatasetError {
    DatasetError::Idx { file: file.into(), part, message }
}

/// Reads until `buf` is full or the reader ends; returns how much it read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_exact(
    r: &mut impl Read,
    buf: &mut [u8],
    file: &str,
    part: &'static str,
) -> Result<(), DatasetError> {
    match read_up_to(r, buf) {
        Ok(got) if got < buf.len() => Err(idx_error(
            file,
            part,
            format!("the file ends after {got} of its {} bytes", buf.len()),
        )),
        Ok(_) => Ok(()),
        Err(e) => Err(idx_error(file, part, format!("cannot be read: {e}"))),
    }
}

impl Dataset {
    /// An image data set from an IDX pair: `images` (`count` x an image's shape) and `labels`
    /// (`count` labels); `name` names the pair, and each file's errors name that file. What
    /// the images' header implies is checked against the memory limit before a pixel is read.
    pub fn from_idx(
        images: impl Read,
        images_file: &str,
        labels: impl Read,
        labels_file: &str,
        name: &str,
    ) -> Result<Dataset, DatasetError> {
        let images = IdxReader::open(images, images_file, 2..=4)?;
        let (count, shape) = (images.dims[0], &images.dims[1..]);
        let features = images.elements / count as u64;
        if features > MAX_WIDTH as u64 {
            return Err(DatasetError::Idx {
                file: images_file.into(),
                part: "dimensions",
                message: format!(
                    "an image of {shape:?} has {features} pixels; the limit is {MAX_WIDTH}, the \
                     widest model input"
                ),
            });
        }
        check_held(images_file, count as u64, features)?;
        // Room for the f32 features grows with the pixels read: a file that ends early never
        // had what its header claims reserved.
        let mut x: Vec<f32> = Vec::new();
        images.read_elements(|chunk, pixels| {
            let what = format_args!("{images_file}: {pixels} pixels as f32");
            try_grow(&mut x, chunk.len() as u64, pixels, what)?;
            x.extend(chunk.iter().map(|&p| p as f32));
            Ok(())
        })?;
        let labels = IdxReader::open(labels, labels_file, 1..=1)?;
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
        let mut read: Vec<u16> = Vec::new();
        labels.read_elements(|chunk, count| {
            let what = format_args!("{labels_file}: {count} labels");
            try_grow(&mut read, chunk.len() as u64, count, what)?;
            read.extend(chunk.iter().map(|&l| l as u16));
            Ok(())
        })?;
        let max = *read.iter().max().expect("a dimension is never 0");
        if read.iter().all(|&l| l == max) {
            return Err(DatasetError::OneClass { file: labels_file.into(), label: max });
        }
        Ok(Dataset {
            file: name.into(),
            features: features as usize,
            classes: max as u32 + 1,
            x,
            labels: read,
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
    use super::super::gzip::gzip;
    use super::*;

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
                "i.idx: dimensions: an image of [300, 300] has 90000 pixels; the limit is 65536",
            ),
            (
                IdxArray { dims: vec![1, 30, 30], data: vec![] }.to_bytes(),
                lb.clone(),
                "i.idx: elements: the file ends after 0 of its 900 bytes",
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

    /// A 1 MB gzip whose header said 16,384 x 256 x 256 (within the 1 GiB input limit) had its
    /// pixels read and copied to f32 before anything counted them: an abort asking for 4 GiB.
    /// The header alone now decides, plain or gzipped, before a pixel is read or allocated.
    #[test]
    fn a_header_implying_more_than_the_memory_limit_is_refused_before_its_pixels_are_read() {
        let lb = IdxArray { dims: vec![3], data: vec![0, 1, 2] }.to_bytes();
        let refused = |i: &[u8]| {
            Dataset::from_idx(i, "i.idx", &lb[..], "l.idx", "pair").unwrap_err().to_string()
        };
        // 16384 x 65536 pixels as f32 (4 GiB, the training side's in place), the test side's
        // copy of at most 3,276 + 128 rows, and 20 bytes a row of labels and row numbers.
        let need = 4 * 65536 * (16384 + 3404) + 20 * 16384u64;
        let header = IdxArray { dims: vec![16384, 256, 256], data: vec![] }.to_bytes();
        let some_pixels = [&header[..], &[0u8; 4096]].concat();
        for file in [header.clone(), gzip(&header), gzip(&some_pixels)] {
            assert_eq!(
                refused(&file),
                format!(
                    "i.idx: 16384 rows of 65536 features (as f32, with the test side's copy) \
                     needs {need} bytes of memory; the limit is 4294967296 (4 GiB)"
                )
            );
        }
        // Every shape of that many pixels is the same need; 13,546 images are past the limit
        // too, and 13,545 within it are read (and found cut short here).
        let shapes = [[16384, 65536].to_vec(), vec![16384, 16, 16, 256], vec![13546, 256, 256]];
        for dims in [&shapes[..], &[vec![13545, 256, 256]]].concat() {
            let header = IdxArray { dims: dims.clone(), data: vec![] }.to_bytes();
            let e = refused(&gzip(&header));
            let fits = dims[0] == 13545;
            assert_eq!(e.contains("the limit is 4294967296"), !fits, "{dims:?}: {e}");
            assert_eq!(e.contains("the file ends after 0"), fits, "{dims:?}: {e}");
        }
    }

    /// A gzip file of several members (`cat a.gz b.gz`, which gunzip and Python read whole) was
    /// refused as ending early: only the first member was read.
    #[test]
    fn multi_member_gzip_reads_as_its_concatenation() {
        let images = IdxArray { dims: vec![3, 2, 2], data: (0..12).collect() };
        let labels = IdxArray { dims: vec![3], data: vec![0, 1, 2] };
        let (ib, lb) = (images.to_bytes(), labels.to_bytes());
        let plain = Dataset::from_idx(&ib[..], "i.idx", &lb[..], "l.idx", "pair").unwrap();
        for cut in 0..=ib.len() {
            let members = [gzip(&ib[..cut]), gzip(&ib[cut..])].concat();
            let three = [gzip(&ib[..cut / 2]), gzip(&ib[cut / 2..cut]), gzip(&ib[cut..])].concat();
            for file in [members, three] {
                let d = Dataset::from_idx(&file[..], "i.idx", &gzip(&lb)[..], "l.idx", "pair")
                    .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
                assert_eq!((&d.x, &d.labels), (&plain.x, &plain.labels), "cut at {cut}");
            }
        }
    }

    /// Bytes after the elements are refused by one rule, whether they follow a plain file's
    /// elements, follow them inside the gunzipped stream (in the last member or in a member
    /// of their own), or follow the last gzip member without being one (trailing garbage,
    /// which was ignored: only the first member was read).
    #[test]
    fn bytes_after_the_elements_are_refused_alike_plain_or_gzipped() {
        let images = IdxArray { dims: vec![3, 2, 2], data: (0..12).collect() };
        let (ib, lb) =
            (images.to_bytes(), IdxArray { dims: vec![3], data: vec![0, 1, 2] }.to_bytes());
        let refused = |i: &[u8]| {
            Dataset::from_idx(i, "i.idx", &lb[..], "l.idx", "pair").unwrap_err().to_string()
        };
        let past = "i.idx: elements: the file goes on past the 12 its header [3, 2, 2] gives";
        let extras: [&[u8]; 7] =
            [&[7], &[0], &[0; 9], &[0x1f], &[0x1f, 0x8b], &[0x1f, 0x8b, 8, 0], b"garbage\n"];
        for extra in extras {
            let with = [&ib[..], extra].concat();
            for file in [
                with.clone(),
                gzip(&with),
                [gzip(&ib), gzip(extra)].concat(),
                [gzip(&ib), extra.to_vec()].concat(),
                [gzip(&ib[..5]), gzip(&ib[5..]), extra.to_vec()].concat(),
            ] {
                assert_eq!(refused(&file), past, "{extra:?} after {file:?}");
            }
        }
        // A member whose checksum is wrong is a damaged file, not extra bytes.
        let mut damaged = gzip(&ib);
        let at = damaged.len() - 5;
        damaged[at] ^= 1;
        let e = refused(&damaged);
        assert!(e.starts_with("i.idx: elements: cannot be read: "), "{e}");
    }
}
