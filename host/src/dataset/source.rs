//! Where `--dataset` takes samples from: the built-in sets, a CSV, or an IDX pair.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

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
    /// `digits` and `mnist` are the built-in sets; anything else is a path. A name that
    /// names an existing file is that file, commas and all; only otherwise is a comma the one
    /// between an IDX pair's two paths: the one comma that splits the name into two existing
    /// files (a pair's paths may hold commas too).
    pub fn parse(s: &str) -> Result<Source, String> {
        match s {
            "" => Err("the data set must be `digits`, `mnist`, a .csv file or an IDX pair".into()),
            "digits" => Ok(Source::Digits),
            "mnist" => Ok(Source::Mnist),
            path if !path.contains(',') || Path::new(path).exists() => Ok(Source::file(path)),
            pair => Source::pair(pair),
        }
    }

    /// `IMAGES,LABELS`, split at the one comma that leaves two existing files on its sides;
    /// else a message that gives both readings, the file's and the pair's.
    fn pair(s: &str) -> Result<Source, String> {
        let splits: Vec<(&str, &str)> = s
            .match_indices(',')
            .map(|(at, _)| (&s[..at], &s[at + 1..]))
            .filter(|(images, labels)| !images.is_empty() && !labels.is_empty())
            .collect();
        let exists = |path: &&str| Path::new(path).exists();
        let pairs: Vec<&(&str, &str)> =
            splits.iter().filter(|(i, l)| exists(i) && exists(l)).collect();
        match (pairs.as_slice(), splits.as_slice()) {
            ([(images, labels)], _) => {
                Ok(Source::Idx { images: images.into(), labels: labels.into() })
            }
            ([], [(images, labels)]) => {
                let (which, path) = match exists(images) {
                    false => ("images", images),
                    true => ("labels", labels),
                };
                Err(format!(
                    "{s:?} names no file; as an IMAGES,LABELS pair, its {which} file {path:?} \
                     does not exist"
                ))
            }
            ([], _) => Err(format!(
                "{s:?} names no file, nor does any of its commas split it into an IMAGES,LABELS \
                 pair of files"
            )),
            (several, _) => {
                let shown: Vec<String> =
                    several.iter().map(|(i, l)| format!("{i:?} and {l:?}")).collect();
                Err(format!(
                    "{s:?} names no file, and splits into more than one IMAGES,LABELS pair of \
                     files: {}",
                    shown.join("; ")
                ))
            }
        }
    }

    /// The one file `path`: an IDX images file when its name has MNIST's `images-idx3-ubyte`
    /// (its labels beside it), else a CSV.
    fn file(path: &str) -> Source {
        let name = Path::new(path).file_name().and_then(|n| n.to_str());
        match name.filter(|n| n.contains(IMAGES_PART)) {
            Some(n) => Source::Idx {
                images: path.into(),
                labels: PathBuf::from(path).with_file_name(n.replace(IMAGES_PART, LABELS_PART)),
            },
            None => Source::Csv(PathBuf::from(path)),
        }
    }

    /// The files it reads (none for a built-in set), for the outputs' input checks.
    pub fn files(&self) -> Vec<&Path> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own under the system's temporary one, removed when dropped.
    struct Folder(PathBuf);

    impl Folder {
        fn new(name: &str) -> Folder {
            let dir = std::env::temp_dir().join(format!("systole-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Folder(dir)
        }

        fn file(&self, name: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, "1,0\n2,1\n").unwrap();
            path
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `--dataset 'my,data.csv'` was read as the IDX pair `my` and `data.csv` (`cannot read
    /// my`): a comma had no escape. A name that is an existing file is now that file, and
    /// when neither reading exists the message gives both.
    #[test]
    fn a_comma_in_an_existing_files_name_is_part_of_the_name() {
        let dir = Folder::new("comma");
        let csv = dir.file("my,data.csv");
        assert_eq!(Source::parse(csv.to_str().unwrap()).unwrap(), Source::Csv(csv.clone()));
        let images = dir.file("a,b-images-idx3-ubyte");
        assert_eq!(
            Source::parse(images.to_str().unwrap()).unwrap(),
            Source::Idx { images: images.clone(), labels: dir.0.join("a,b-labels-idx1-ubyte") }
        );
        // A pair whose files exist is a pair, as before.
        let (i, l) = (dir.file("i"), dir.file("l"));
        let pair = format!("{},{}", i.display(), l.display());
        assert_eq!(Source::parse(&pair).unwrap(), Source::Idx { images: i, labels: l });
        // Neither the whole name nor the pair: both readings named.
        let missing = format!("{}/no,such.csv", dir.0.display());
        assert_eq!(
            Source::parse(&missing).unwrap_err(),
            format!(
                "{missing:?} names no file; as an IMAGES,LABELS pair, its images file {:?} does \
                 not exist",
                format!("{}/no", dir.0.display()),
            )
        );
        let half = format!("{},such.csv", dir.file("yes").display());
        let e = Source::parse(&half).unwrap_err();
        assert!(e.ends_with("its labels file \"such.csv\" does not exist"), "{e}");
        let odd = format!("{missing},x");
        assert_eq!(
            Source::parse(&odd).unwrap_err(),
            format!(
                "{odd:?} names no file, nor does any of its commas split it into an \
                 IMAGES,LABELS pair of files"
            )
        );
    }

    /// A pair's paths may hold commas too: the comma that splits the name into two existing
    /// files is the pair's (one comma only was taken, and a second was refused).
    #[test]
    fn a_pair_of_files_with_commas_in_their_names_is_that_pair() {
        let dir = Folder::new("comma-pair");
        let (i, l) = (dir.file("a,b-images"), dir.file("c,d"));
        let pair = format!("{},{}", i.display(), l.display());
        assert_eq!(Source::parse(&pair).unwrap(), Source::Idx { images: i, labels: l });
        // Two splits into existing files: which pair is meant cannot be told. `D/p,D/q,D/r`
        // is `D/p` and `D/q,D/r`, or `D/p,D/q` and `D/r`.
        let d = dir.0.display().to_string();
        std::fs::create_dir_all(dir.0.join(format!("q,{d}"))).unwrap();
        std::fs::create_dir_all(dir.0.join(format!("p,{d}"))).unwrap();
        for name in ["p".to_string(), format!("q,{d}/r"), format!("p,{d}/q"), "r".into()] {
            dir.file(&name);
        }
        let e = Source::parse(&format!("{d}/p,{d}/q,{d}/r")).unwrap_err();
        assert!(e.contains("splits into more than one IMAGES,LABELS pair"), "{e}");
    }
}
