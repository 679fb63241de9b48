//! Any bytes as a CSV data set of `systole train` / `predict`: a data set read from it is
//! `rows x features` finite numbers with labels below its class count, written back as CSV it
//! reads as the same data set, and splitting it never panics; a refusal is one line that names
//! the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_host::dataset::Dataset;

const FILE: &str = "fuzz.csv";

fuzz_target!(|data: &[u8]| {
    match Dataset::from_csv(data, FILE) {
        Ok(d) => {
            assert!(d.features >= 1 && d.classes >= 2);
            assert_eq!(d.x.len(), d.rows() * d.features);
            assert!(d.x.iter().all(|v| v.is_finite()));
            assert!(d.labels.iter().all(|&l| (l as u32) < d.classes));
            let again = Dataset::from_csv(d.to_csv().as_bytes(), FILE).expect("written back");
            assert_eq!((again.features, again.classes), (d.features, d.classes));
            assert_eq!(again.labels, d.labels);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&again.x), bits(&d.x));
            if let Ok(split) = d.split(1) {
                assert_eq!(split.train.len() + split.test.len(), d.rows());
                assert!(split.feature_scale.is_finite() && split.feature_scale > 0.0);
                // Scaled by the training side's largest feature (the test side may exceed it).
                assert!(split.train.x.iter().all(|v| v.abs() <= 1.0));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(FILE), "{msg:?} does not name the file");
            assert!(!msg.contains('\n'), "{msg:?} is not one line");
        }
    }
});
