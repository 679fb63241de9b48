//! Any bytes as a `.npy` input of `systole gemm`, for both datapaths: a matrix read from it is
//! `rows x cols` elements of the dtype, written back as a C-order `.npy` it reads as the same
//! matrix, and a refusal is one line that names the file. Reading never panics.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use systole_core::Dtype;
use systole_host::npy::{parse_matrix, write_matrix};

const PATH: &str = "fuzz/A.npy";

fuzz_target!(|data: &[u8]| {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        match parse_matrix(data, Path::new(PATH), dtype) {
            Ok(m) => {
                let n = m.rows as usize * m.cols as usize * dtype.elem_bytes();
                assert!(m.rows > 0 && m.cols > 0);
                assert_eq!(m.elems.len(), n, "{} x {} of {dtype:?}", m.rows, m.cols);
                let mut file = Vec::new();
                write_matrix(&mut file, &m, dtype).expect("a matrix writes");
                let again = parse_matrix(&file, Path::new(PATH), dtype)
                    .expect("a matrix written back reads");
                assert_eq!((again.rows, again.cols), (m.rows, m.cols));
                // bf16 -> f32 -> bf16 is the identity, NaN payloads included.
                assert_eq!(again.elems, m.elems);
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.starts_with(PATH), "{msg:?} does not name the file");
                assert!(!msg.contains('\n'), "{msg:?} is not one line");
            }
        }
    }
});
