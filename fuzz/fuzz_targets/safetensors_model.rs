//! Any bytes as a model file of `systole predict` / `firmware blob`: a model read from it has
//! one weight and bias per layer of its widths, saved again it reads as the same model, and a
//! refusal is one line that names the file. Nothing is allocated beyond what the file holds.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use systole_host::model::Model;

const PATH: &str = "fuzz/model.safetensors";

fuzz_target!(|data: &[u8]| {
    match Model::from_safetensors(data, Path::new(PATH)) {
        Ok(m) => {
            let widths: Vec<u32> = m.spec.widths().collect();
            assert_eq!(m.params.layers.len(), widths.len() - 1);
            for (layer, pair) in m.params.layers.iter().zip(widths.windows(2)) {
                assert_eq!((layer.fan_in, layer.fan_out), (pair[0], pair[1]));
                assert_eq!(layer.weight.len(), pair[0] as usize * pair[1] as usize);
                assert_eq!(layer.bias.len(), pair[1] as usize);
            }
            let bytes = m.to_safetensors().expect("a loaded model saves");
            let again = Model::from_safetensors(&bytes, Path::new(PATH)).expect("saved reloads");
            assert_eq!(again.spec, m.spec);
            assert_eq!(
                (again.seed, again.feature_scale.to_bits()),
                (m.seed, m.feature_scale.to_bits())
            );
            assert_eq!((&again.dtype, &again.dataset), (&m.dtype, &m.dataset));
            for (a, b) in again.params.layers.iter().zip(&m.params.layers) {
                let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a.weight), bits(&b.weight));
                assert_eq!(bits(&a.bias), bits(&b.bias));
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(PATH), "{msg:?} does not name the file");
            assert!(!msg.contains('\n'), "{msg:?} is not one line");
        }
    }
});
