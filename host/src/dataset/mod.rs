//! Classification data sets for `systole train` and `systole predict`: the built-in digits and
//! MNIST, a user CSV in the same layout, or an IDX pair (`idx.rs`; `source.rs` says which); their
//! validation, the deterministic stratified train/test split and the feature scaling.
//!
//! **Layout**: one sample a row, the features (numbers) first and the class label last. The first
//! row is a header of column names when any of its cells is not a number (so `p0,...,label`
//! works, and so does a file without a header). Labels are integers 0 to 255 (`3` and `3.0` both
//! read as 3); the model has `max label + 1` classes, and at least two distinct labels must occur.
//! A row holds at most [`MAX_COLUMNS`] cells (the widest model input, and the label) and
//! [`MAX_ROW_BYTES`] bytes; a longer one is refused while it is read.
//!
//! **Split** (deterministic for a seed): each class's rows, in file order, are shuffled with
//! [`SplitMix64`] and the first `round(0.8 n)` go to training, the rest to test; both sides then
//! keep file order. **Scaling**: every feature is divided by one number, the largest absolute
//! feature value in the training split (16 for digits, whose pixels are 0 to 16), so the inputs
//! lie in [-1, 1] whatever the units. The scale is saved with a model, so `predict` feeds it the
//! same inputs.
//!
//! **Memory**: what a data set will hold, read and split, is counted before it is allocated
//! (`memory.rs`: an IDX file's from its header, a CSV's row by row) and refused past the memory
//! limit; an allocation the system refuses below it is an error too, never an abort.

use std::fmt;
use std::io::{self, Read};
use std::path::PathBuf;

use systole_core::graph::MAX_WIDTH;
use systole_core::params::SplitMix64;

use crate::limits::{try_grow, try_vec, MemoryError};

mod gzip;
mod idx;
mod memory;
mod source;
pub use idx::{IdxArray, MNIST_IMAGES, MNIST_LABELS};
pub use memory::held_bytes;
pub use source::Source;

/// The digits CSV (data/digits.csv; data/README.md has its provenance), compiled in so that
/// `--dataset digits` works from any directory.
pub const DIGITS_CSV: &str = include_str!("../../../data/digits.csv");

/// Largest label: labels travel as `u16` on the host side, and 256 classes is a generous bound.
pub const MAX_LABEL: u32 = 255;

/// Most columns a row may have: the widest input a model takes (core's [`MAX_WIDTH`]
/// features), and the label.
pub const MAX_COLUMNS: usize = MAX_WIDTH as usize + 1;

/// Most bytes of one cell that [`MAX_ROW_BYTES`] allows for, on average: more than any f32
/// needs (`Dataset::to_csv` writes at most 48), so every data set read writes back readable.
pub const MAX_CELL_BYTES: usize = 64;

/// Longest row, in bytes with its line break: [`MAX_COLUMNS`] cells of [`MAX_CELL_BYTES`]
/// (4 MiB). The reader stops at this many bytes of one row, while reading it: a file with no
/// line break (`/dev/zero`) or one very wide row is refused without holding it.
pub const MAX_ROW_BYTES: usize = MAX_COLUMNS * MAX_CELL_BYTES;

/// Seeds the split's shuffles: `SplitMix64(seed ^ SPLIT_STREAM)`, a stream of its own so the
/// split does not reuse the numbers `Params::init(spec, seed)` draws its weights from.
const SPLIT_STREAM: u64 = 0x5350_4c49_5453_5452; // "SPLITSTR"

/// A CSV column, 1-based, with its header name when the file has one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub number: usize,
    pub name: Option<String>,
}

impl fmt::Display for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            // A quoted header cell may hold a line break: escaped, the message stays one line.
            Some(name) => write!(f, "column {} ({})", self.number, name.escape_debug()),
            None => write!(f, "column {}", self.number),
        }
    }
}

/// Why a data set cannot be used. Each names the file, and the line and column where there is one.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("cannot read {}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{file}: {message}")]
    Csv { file: String, message: String },
    #[error("{file}: empty: no data rows")]
    Empty { file: String },
    #[error(
        "{file}: line {line} has {found} column(s): a row needs at least one feature and a label"
    )]
    NoFeatures { file: String, line: u64, found: usize },
    #[error("{file}: line {line} has {found} columns, expected {expected} (as line {first_line})")]
    Ragged { file: String, line: u64, found: usize, expected: usize, first_line: u64 },
    #[error("{file}: line {line}, {column}: {value:?} is not a number")]
    NotNumber { file: String, line: u64, column: Column, value: String },
    #[error("{file}: line {line}, {column}: {value} is not a finite 32-bit float")]
    NotFinite { file: String, line: u64, column: Column, value: String },
    #[error(
        "{file}: line {line}, {column}: label {value} is not an integer from 0 to {MAX_LABEL}"
    )]
    Label { file: String, line: u64, column: Column, value: String },
    #[error(
        "{file}: line {line} is too long: the limit is {MAX_ROW_BYTES} bytes a row ({MAX_COLUMNS} \
         columns of up to {MAX_CELL_BYTES} bytes: {MAX_WIDTH} features and a label)"
    )]
    RowTooLong { file: String, line: u64 },
    #[error(
        "{file}: line {line} has {found} columns; the limit is {MAX_COLUMNS} ({MAX_WIDTH} \
         features, the widest model input, and a label)"
    )]
    TooManyColumns { file: String, line: u64, found: usize },
    #[error("{file}: every row has label {label}: a classifier needs at least 2 classes")]
    OneClass { file: String, label: u16 },
    #[error(
        "{file}: {rows} rows are too few to split 80/20 by class: that gives {train} training \
         and {test} test rows, and both need at least one"
    )]
    TooFewRows { file: String, rows: usize, train: usize, test: usize },
    #[error("{file}: has {found} features but the model takes {expected}")]
    Features { file: String, found: usize, expected: usize },
    #[error("{file}: has label {label} but the model has only {classes} classes")]
    Classes { file: String, label: u16, classes: u32 },
    /// An IDX file (`idx.rs`) that cannot be read: `part` is `header`, `element type`,
    /// `dimensions` or `elements`.
    #[error("{file}: {part}: {message}")]
    Idx { file: String, part: &'static str, message: String },
    /// What the data set needs past the memory limit, or more than the system gives; the
    /// message starts with the file.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// Samples as read: features unscaled, one row each, labels below `classes`.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// What error messages call it: the path, or `digits (built in)`.
    pub file: String,
    pub features: usize,
    pub classes: u32,
    /// `labels.len() x features`, row-major.
    pub x: Vec<f32>,
    pub labels: Vec<u16>,
}

impl Dataset {
    /// Parses and validates a CSV (`file` names it in errors).
    pub fn from_csv(reader: impl Read, file: &str) -> Result<Dataset, DatasetError> {
        let csv_error =
            |e: csv::Error| DatasetError::Csv { file: file.into(), message: e.to_string() };
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(RowLimit::new(reader));
        let mut header: Option<Vec<String>> = None;
        let mut width: Option<(usize, u64)> = None;
        let mut x = Vec::new();
        let mut labels = Vec::new();
        let mut record = csv::ByteRecord::new();
        loop {
            let start = reader.position().clone();
            reader.get_mut().start_row();
            match reader.read_byte_record(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) if reader.get_ref().over => {
                    return Err(DatasetError::RowTooLong { file: file.into(), line: start.line() });
                }
                Err(e) => return Err(csv_error(e)),
            }
            let line = record.position().map_or(0, |p| p.line());
            // The reader stopped a row only once it was past the limit by its read-ahead; the
            // exact length decides, so that the limit does not depend on where reads fall.
            if reader.position().byte() - start.byte() > MAX_ROW_BYTES as u64 {
                return Err(DatasetError::RowTooLong { file: file.into(), line });
            }
            if record.len() > MAX_COLUMNS {
                return Err(DatasetError::TooManyColumns {
                    file: file.into(),
                    line,
                    found: record.len(),
                });
            }
            let cells: Vec<&str> =
                record.iter().map(|c| std::str::from_utf8(c).unwrap_or("\u{fffd}")).collect();
            let first = width.is_none() && header.is_none();
            if first && cells.iter().any(|c| c.parse::<f64>().is_err()) {
                if cells.len() < 2 {
                    return Err(DatasetError::NoFeatures {
                        file: file.into(),
                        line,
                        found: cells.len(),
                    });
                }
                header = Some(cells.iter().map(|c| c.to_string()).collect());
                width = Some((cells.len(), line));
                continue;
            }
            let (expected, first_line) = *width.get_or_insert((cells.len(), line));
            if cells.len() < 2 {
                return Err(DatasetError::NoFeatures {
                    file: file.into(),
                    line,
                    found: cells.len(),
                });
            }
            if cells.len() != expected {
                return Err(DatasetError::Ragged {
                    file: file.into(),
                    line,
                    found: cells.len(),
                    expected,
                    first_line,
                });
            }
            let column =
                |i: usize| Column { number: i + 1, name: header.as_ref().map(|h| h[i].clone()) };
            let (label, features) = cells.split_last().expect("at least two cells");
            let (rows, width) = (labels.len() as u64 + 1, features.len() as u64);
            memory::check_held(file, rows, width)?;
            let what = format_args!("{file}: {rows} rows of {width} features as f32");
            try_grow(&mut x, width, u64::MAX, what)?;
            for (i, cell) in features.iter().enumerate() {
                let value = cell.parse::<f32>().map_err(|_| DatasetError::NotNumber {
                    file: file.into(),
                    line,
                    column: column(i),
                    value: cell.to_string(),
                })?;
                if !value.is_finite() {
                    return Err(DatasetError::NotFinite {
                        file: file.into(),
                        line,
                        column: column(i),
                        value: cell.to_string(),
                    });
                }
                x.push(value);
            }
            let i = features.len();
            let value = label.parse::<f64>().map_err(|_| DatasetError::NotNumber {
                file: file.into(),
                line,
                column: column(i),
                value: label.to_string(),
            })?;
            if !(value.fract() == 0.0 && (0.0..=MAX_LABEL as f64).contains(&value)) {
                return Err(DatasetError::Label {
                    file: file.into(),
                    line,
                    column: column(i),
                    value: label.to_string(),
                });
            }
            labels.push(value as u16);
        }
        x.shrink_to_fit();
        let Some((width, _)) = width.filter(|_| !labels.is_empty()) else {
            return Err(DatasetError::Empty { file: file.into() });
        };
        let max = *labels.iter().max().expect("non-empty");
        if labels.iter().all(|&l| l == max) {
            return Err(DatasetError::OneClass { file: file.into(), label: max });
        }
        Ok(Dataset { file: file.into(), features: width - 1, classes: max as u32 + 1, x, labels })
    }

    pub fn rows(&self) -> usize {
        self.labels.len()
    }

    /// The data set as a headerless CSV that [`Dataset::from_csv`] reads back to the same
    /// values (an f32's `Display` is the shortest string that parses back to its bits).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for (i, label) in self.labels.iter().enumerate() {
            for v in self.row(i) {
                out.push_str(&v.to_string());
                out.push(',');
            }
            out.push_str(&label.to_string());
            out.push('\n');
        }
        out
    }

    /// The data rows (0-based, file order) of the training and test sides for `seed`.
    pub fn split_indices(&self, seed: u64) -> Result<(Vec<usize>, Vec<usize>), DatasetError> {
        let mut rng = SplitMix64(seed ^ SPLIT_STREAM);
        let (mut train, mut test) = (Vec::new(), Vec::new());
        for class in 0..self.classes as u16 {
            let mut rows: Vec<usize> =
                (0..self.rows()).filter(|&i| self.labels[i] == class).collect();
            rng.shuffle(&mut rows);
            // round(0.8 n), in integers (0.8 n is never exactly half-way).
            let n_train = (8 * rows.len() + 5) / 10;
            train.extend_from_slice(&rows[..n_train]);
            test.extend_from_slice(&rows[n_train..]);
        }
        if train.is_empty() || test.is_empty() {
            return Err(DatasetError::TooFewRows {
                file: self.file.clone(),
                rows: self.rows(),
                train: train.len(),
                test: test.len(),
            });
        }
        train.sort_unstable();
        test.sort_unstable();
        Ok((train, test))
    }

    /// The 80/20 split for `seed`, scaled by the training side's largest absolute feature.
    /// [`Dataset::into_split`] on a copy: for tests, which keep the data set.
    pub fn split(&self, seed: u64) -> Result<Split, DatasetError> {
        self.clone().into_split(seed)
    }

    /// The 80/20 split for `seed`, scaled by the training side's largest absolute feature. The
    /// training side takes over the data set's features in place, so the split's peak is the
    /// data set and a copy of its test side, not two copies of every feature.
    pub fn into_split(self, seed: u64) -> Result<Split, DatasetError> {
        let (train, test) = self.split_indices(seed)?;
        let max = train.iter().flat_map(|&i| self.row(i)).fold(0.0f32, |m, &v| m.max(v.abs()));
        let scale = if max > 0.0 { max } else { 1.0 };
        self.into_sides(&train, &test, scale)
    }

    /// The split for `seed` with a given scale (a saved model's), after checking the data fits a
    /// model of `inputs` features and `classes` classes.
    pub fn into_split_for_model(
        self,
        seed: u64,
        scale: f32,
        inputs: usize,
        classes: u32,
    ) -> Result<Split, DatasetError> {
        if self.features != inputs {
            return Err(DatasetError::Features {
                file: self.file.clone(),
                found: self.features,
                expected: inputs,
            });
        }
        if self.classes > classes {
            return Err(DatasetError::Classes {
                file: self.file.clone(),
                label: self.classes as u16 - 1,
                classes,
            });
        }
        let (train, test) = self.split_indices(seed)?;
        self.into_sides(&train, &test, scale)
    }

    fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.features..(i + 1) * self.features]
    }

    /// The two sides of a split, divided by `scale`: the test side copied out, then the
    /// training side's rows (ascending, so each moves to a place at or before its own) moved
    /// down over the data set's features in place.
    fn into_sides(
        mut self,
        train: &[usize],
        test: &[usize],
        scale: f32,
    ) -> Result<Split, DatasetError> {
        let test_side = self.take(test, scale, "test")?;
        let f = self.features;
        for (to, &from) in train.iter().enumerate() {
            debug_assert!(to <= from, "the training rows are sorted");
            self.x.copy_within(from * f..(from + 1) * f, to * f);
            self.x[to * f..(to + 1) * f].iter_mut().for_each(|v| *v /= scale);
        }
        self.x.truncate(train.len() * f);
        self.x.shrink_to_fit();
        let train_side = Samples {
            features: f,
            labels: train.iter().map(|&i| self.labels[i]).collect(),
            rows: train.to_vec(),
            x: self.x,
        };
        Ok(Split { feature_scale: scale, train: train_side, test: test_side })
    }

    /// The rows `rows` as the `side` side of a split, divided by `scale`.
    fn take(&self, rows: &[usize], scale: f32, side: &str) -> Result<Samples, DatasetError> {
        let (n, features) = (rows.len() as u64, self.features as u64);
        let what = format_args!("{}: the {side} side ({n} rows of {features} features)", self.file);
        let mut x = try_vec(what, n.saturating_mul(features))?;
        x.extend(rows.iter().flat_map(|&i| self.row(i)).map(|&v| v / scale));
        Ok(Samples {
            features: self.features,
            x,
            labels: rows.iter().map(|&i| self.labels[i]).collect(),
            rows: rows.to_vec(),
        })
    }
}

/// The file under the CSV reader, counting the bytes handed to it since the row it is reading
/// began. The reader asks for more only while its row is unfinished, and everything handed
/// over since the row began is then part of it, so past [`MAX_ROW_BYTES`] the row is too long:
/// the next read fails (`over`) instead of letting the row grow in memory.
struct RowLimit<R> {
    inner: R,
    /// Bytes handed over since [`RowLimit::start_row`].
    in_row: usize,
    over: bool,
}

impl<R> RowLimit<R> {
    fn new(inner: R) -> RowLimit<R> {
        RowLimit { inner, in_row: 0, over: false }
    }

    /// A row begins (part of it may be in the reader's buffer already, not counted).
    fn start_row(&mut self) {
        self.in_row = 0;
    }
}

impl<R: Read> Read for RowLimit<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.in_row > MAX_ROW_BYTES {
            self.over = true;
            return Err(io::Error::other(format!("a row longer than {MAX_ROW_BYTES} bytes")));
        }
        let n = self.inner.read(buf)?;
        self.in_row += n;
        Ok(n)
    }
}

/// One side of a split, scaled, ready to feed a model.
#[derive(Clone, Debug)]
pub struct Samples {
    pub features: usize,
    /// `len() x features`, row-major, already divided by the split's scale.
    pub x: Vec<f32>,
    pub labels: Vec<u16>,
    /// Each sample's data row in the file (0-based, header not counted).
    pub rows: Vec<usize>,
}

impl Samples {
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The first `n` samples' features.
    pub fn head(&self, n: usize) -> &[f32] {
        &self.x[..n.min(self.len()) * self.features]
    }
}

/// A deterministic train/test split and the scale both sides were divided by.
#[derive(Clone, Debug)]
pub struct Split {
    pub feature_scale: f32,
    pub train: Samples,
    pub test: Samples,
}

impl Split {
    /// Both sides' images from channels-first (`c x positions` per sample, as data sets and
    /// PyTorch hold them) to channels-last, as every machine runs images (core's `conv`), one
    /// image at a time in place: a side is never held twice.
    pub fn to_channels_last(&mut self, c: usize, positions: usize) {
        for side in [&mut self.train, &mut self.test] {
            assert_eq!(side.x.len(), side.len() * c * positions);
            for image in side.x.chunks_exact_mut((c * positions).max(1)) {
                let last = systole_core::conv::nchw_to_nhwc(image, 1, positions, c);
                image.copy_from_slice(&last);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Dataset, DatasetError> {
        Dataset::from_csv(text.as_bytes(), "t.csv")
    }

    #[test]
    fn digits_are_1797_rows_of_64_features_and_10_classes() {
        let d = Source::Digits.load().unwrap();
        assert_eq!((d.rows(), d.features, d.classes), (1797, 64, 10));
        let split = d.split(0).unwrap();
        assert_eq!(split.feature_scale, 16.0);
        assert_eq!(split.train.len() + split.test.len(), 1797);
        // Per class round(0.8 n): 1438 training rows in all.
        assert_eq!((split.train.len(), split.test.len()), (1438, 359));
        assert!(split.train.x.iter().all(|v| (0.0..=1.0).contains(v)));
    }

    /// Images turn channels-last one at a time in place, as core turns a whole side.
    #[test]
    fn channels_last_in_place_is_cores_transpose() {
        let d = parse(
            &(0..12)
                .map(|i| format!("{},{},{},{},{},{},{}\n", i, -i, 2 * i, 3, i % 5, 7 - i, i % 2))
                .collect::<String>(),
        )
        .unwrap();
        let mut split = d.split(0).unwrap();
        let whole: Vec<Vec<f32>> = [&split.train, &split.test]
            .map(|s| systole_core::conv::nchw_to_nhwc(&s.x, s.len(), 3, 2))
            .to_vec();
        split.to_channels_last(2, 3);
        assert_eq!([split.train.x, split.test.x].to_vec(), whole);
    }

    #[test]
    fn split_is_stratified_and_deterministic() {
        let d = Source::Digits.load().unwrap();
        let (a, b) = (d.split_indices(7).unwrap(), d.split_indices(7).unwrap());
        assert_eq!(a, b);
        assert_ne!(a, d.split_indices(8).unwrap());
        for class in 0..10u16 {
            let n = d.labels.iter().filter(|&&l| l == class).count();
            let n_train = a.0.iter().filter(|&&i| d.labels[i] == class).count();
            assert_eq!(n_train, (8 * n + 5) / 10);
        }
    }

    #[test]
    fn header_is_optional() {
        let with = parse("a,b,label\n1,2,0\n3,4,1\n").unwrap();
        let without = parse("1,2,0\n3,4,1\n").unwrap();
        assert_eq!((with.x, with.labels), (without.x, without.labels));
        assert_eq!(parse("1,2,0.0\n3,4,1\n").unwrap().labels, [0, 1]);
    }

    /// A quoted header cell with a line break in it made a two-line message (found by the fuzz
    /// target `csv_dataset`).
    #[test]
    fn header_names_with_line_breaks_stay_on_one_line() {
        let e = parse("\"a\nb\",c,label\nx,1,0\n").unwrap_err().to_string();
        assert_eq!(e, "t.csv: line 3, column 1 (a\\nb): \"x\" is not a number");
    }

    /// A reader that hands over at most `n` bytes a read, to move where reads fall in a row.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// A wide row held about 23 times its size before anything checked it, and a file with no
    /// line break (`/dev/zero`) never ended its row.
    #[test]
    fn rows_past_the_limits_are_refused_while_reading() {
        let too_long = |line: u64| {
            format!(
                "t.csv: line {line} is too long: the limit is {MAX_ROW_BYTES} bytes a row (65537 \
                 columns of up to 64 bytes: 65536 features and a label)"
            )
        };
        let e = Dataset::from_csv(io::repeat(0), "t.csv").unwrap_err().to_string();
        assert_eq!(e, too_long(1));
        // `len` bytes with the line break: a 2-column row, one long number.
        let long = |len: usize| format!("{}1,0\n", "0".repeat(len - 4));
        for chunk in [1, 8191, 8192, 8193, usize::MAX] {
            let at_limit = long(MAX_ROW_BYTES) + "1,1\n";
            let d = Dataset::from_csv(Trickle(at_limit.as_bytes(), chunk), "t.csv").unwrap();
            assert_eq!((d.rows(), d.features, d.x[0]), (2, 1, 1.0), "chunk {chunk}");
            let over = "1,1\n".to_string() + &long(MAX_ROW_BYTES + 1);
            let e = Dataset::from_csv(Trickle(over.as_bytes(), chunk), "t.csv").unwrap_err();
            assert_eq!(e.to_string(), too_long(2), "chunk {chunk}");
        }
        let wide = |cells: usize, label: u8| format!("{}{label}\n", "1,".repeat(cells - 1));
        let d = parse(&(wide(MAX_COLUMNS, 0) + &wide(MAX_COLUMNS, 1))).unwrap();
        assert_eq!(d.features, MAX_WIDTH as usize);
        assert_eq!(
            parse(&wide(MAX_COLUMNS + 1, 0)).unwrap_err().to_string(),
            "t.csv: line 1 has 65538 columns; the limit is 65537 (65536 features, the widest \
             model input, and a label)"
        );
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = |t: &str| parse(t).unwrap_err().to_string();
        assert_eq!(
            e("a,b,label\n1,2,0\n3,4\n"),
            "t.csv: line 3 has 2 columns, expected 3 (as line 1)"
        );
        assert_eq!(e("a,b,label\n1,x,0\n"), "t.csv: line 2, column 2 (b): \"x\" is not a number");
        assert_eq!(
            e("1,2,0\n1,inf,1\n"),
            "t.csv: line 2, column 2: inf is not a finite 32-bit float"
        );
        assert_eq!(
            e("1,2,0\n1,2,256\n"),
            "t.csv: line 2, column 3: label 256 is not an integer from 0 to 255"
        );
        assert!(e("1,2,0\n1,2,1.5\n").contains("label 1.5"));
        assert!(e("1,2,0\n1,2,-1\n").contains("label -1"));
        assert_eq!(e(""), "t.csv: empty: no data rows");
        assert_eq!(e("a,b,label\n"), "t.csv: empty: no data rows");
        assert!(e("1,2,3\n4,5,3\n").contains("at least 2 classes"));
        let split = parse("1,2,0\n1,2,1\n").unwrap().split(0).unwrap_err().to_string();
        assert!(split.contains("too few"), "{split}");
    }
}
