//! Any bytes as an IDX pair of `systole train --dataset IMAGES,LABELS` (the first byte says
//! where the images file ends and the labels file starts): a data set read from it is `rows x
//! features` pixels with labels below its class count, written back as IDX it reads as the same
//! data set, and splitting it never panics; a refusal is one line that names one of the files.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_host::dataset::{Dataset, IdxArray};

const IMAGES: &str = "fuzz-images-idx3-ubyte";
const LABELS: &str = "fuzz-labels-idx1-ubyte";

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
            let again = Dataset::from_idx(&i.to_bytes()[..], IMAGES, &l.to_bytes()[..], LABELS, "pair")
                .expect("written back");
            assert_eq!(again.labels, d.labels);
            assert_eq!(again.x, d.x);
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
