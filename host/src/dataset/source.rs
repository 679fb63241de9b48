//! Where `--dataset` takes samples from: the built-in sets, a CSV, or an IDX pair.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::PathBuf;

use super::{Dataset, DatasetError, DIGITS_CSV};

/// Where samples come from: `--dataset digits`, `--dataset mnist`, `--dataset PATH.csv`, or an
/// IDX pair (`idx.rs`): `--dataset IMAGES,LABELS`, or the images file alone when its name has
/// MNIST's `images-idx3-ubyte` (its labels file is the same name with `labels-idx1-ubyte`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Digits,
    Mnist,
    Csv(PathBuf),
    Idx { images: PathBuf, labels: PathBuf },
}

/// The part of an MNIST images file's name that its labels file has as [`LABELS_PART`].
const IMAGES_PART: &str = "images-idx3-ubyte";
const LABELS_PART: &str = "labels-idx1-ubyte";

impl Source {
    /// `digits` is the built-in set; anything else is a path.
    pub fn parse(s: &str) -> Result<Source, String> {
        match s {
            "" => Err("the data set must be `digits`, `mnist`, a .csv file or an IDX pair".into()),
            "digits" => Ok(Source::Digits),
            "mnist" => Ok(Source::Mnist),
            pair if pair.contains(',') => {
                let (images, labels) = pair.split_once(',').expect("has a comma");
                if images.is_empty() || labels.is_empty() || labels.contains(',') {
                    return Err(format!(
                        "{pair:?}: an IDX pair is IMAGES,LABELS: two paths and one comma"
                    ));
                }
                Ok(Source::Idx { images: images.into(), labels: labels.into() })
            }
            path => {
                let name = std::path::Path::new(path).file_name().and_then(|n| n.to_str());
                match name.filter(|n| n.contains(IMAGES_PART)) {
                    Some(n) => Ok(Source::Idx {
                        images: path.into(),
                        labels: PathBuf::from(path)
                            .with_file_name(n.replace(IMAGES_PART, LABELS_PART)),
                    }),
                    None => Ok(Source::Csv(PathBuf::from(path))),
                }
            }
        }
    }

    /// The files it reads (none for a built-in set), for the outputs' input checks.
    pub fn files(&self) -> Vec<&std::path::Path> {
        match self {
            Source::Digits | Source::Mnist => vec![],
            Source::Csv(path) => vec![path],
            Source::Idx { images, labels } => vec![images, labels],
        }
    }

    /// `digits`, `mnist`, or the path(s) as given.
    pub fn name(&self) -> String {
        match self {
            Source::Digits => "digits".into(),
            Source::Mnist => "mnist".into(),
            Source::Csv(path) => path.display().to_string(),
            Source::Idx { images, labels } => format!("{},{}", images.display(), labels.display()),
        }
    }

    pub fn load(&self) -> Result<Dataset, DatasetError> {
        match self {
            Source::Digits => Dataset::from_csv(DIGITS_CSV.as_bytes(), "digits (built in)"),
            Source::Csv(path) => {
                let file = File::open(path)
                    .map_err(|source| DatasetError::Io { path: path.clone(), source })?;
                Dataset::from_csv(io::BufReader::new(file), &path.display().to_string())
            }
            Source::Mnist => Dataset::mnist(),
            Source::Idx { images, labels } => {
                let open = |path: &PathBuf| {
                    File::open(path)
                        .map_err(|source| DatasetError::Io { path: path.clone(), source })
                };
                let (i, l) = (open(images)?, open(labels)?);
                Dataset::from_idx(
                    i,
                    &images.display().to_string(),
                    l,
                    &labels.display().to_string(),
                    &self.name(),
                )
            }
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}
