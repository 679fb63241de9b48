//! Any bytes as an IDX pair of `systole train --dataset IMAGES,LABELS` (the first byte says
//! where the images file ends and the labels file starts): a data set read from it is `rows x
//! features` pixels with labels below its class count, written back as IDX it reads as the same
//! data set, gzipped in two members it reads as the same data set again, one byte more after
//! its images (plain, inside the gzip, or after its last member) is refused in one message,
//! and splitting it never panics; a refusal is one line that names one of the files.
#![no_main]
use std::io::Write;

use libfuzzer_sys::fuzz_target;
use systole_host::dataset::{Dataset, IdxArray};

const IMAGES: &str = "fuzz-images-idx3-ubyte";
const LABELS: &str = "fuzz-labels-idx1-ubyte";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).expect("gzip into memory");
    e.finish().expect("gzip into memory")
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let (images, labels) = rest.split_at((cut as usize).min(rest.len()));
    match Dataset::from_idx(images, IMAGES, labels, LABELS, "pair") {
        Ok(d) => {
            assert!(d.features >= 1 && d.classes >= 2);
            assert_eq!(d.x.len(), d.rows() * d.features);
            assert!(d.labels.iter().all(|&l| (l as u32) < d.classes));
            let pixels: Vec<u8> = d.x.iter().map(|&p| p as u8).collect();
            let i = IdxArray { dims: vec![d.rows() as u32, d.features as u32], data: pixels };
            let l = IdxArray {
                dims: vec![d.rows() as u32],
                data: d.labels.iter().map(|&l| l as u8).collect(),
            };
            let (ib, lb) = (i.to_bytes(), l.to_bytes());
            let read = |images: &[u8]| Dataset::from_idx(images, IMAGES, &lb[..], LABELS, "pair");
            let again = read(&ib).expect("written back");
            assert_eq!(again.labels, d.labels);
            assert_eq!(again.x, d.x);
            // Two gzip members read as their concatenation.
            let at = cut as usize % (ib.len() + 1);
            let members = read(&[gzip(&ib[..at]), gzip(&ib[at..])].concat()).expect("members");
            assert_eq!((members.x, members.labels), (d.x.clone(), d.labels.clone()));
            // A byte after the elements is refused by one rule, wherever it is.
            let extra = [cut];
            let plain = read(&[&ib[..], &extra].concat()).expect_err("a byte more").to_string();
            for file in [
                gzip(&[&ib[..], &extra].concat()),
                [gzip(&ib), gzip(&extra)].concat(),
                [gzip(&ib), extra.to_vec()].concat(),
            ] {
                assert_eq!(read(&file).expect_err("a byte more").to_string(), plain);
            }
            if let Ok(split) = d.split(1) {
                assert_eq!(split.train.len() + split.test.len(), d.rows());
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(IMAGES) || msg.starts_with(LABELS), "{msg:?} names no file");
            assert!(!msg.contains('\n'), "{msg:?} is not one line");
        }
    }
});
