//! Any bytes as a model file of `systole predict` / `firmware blob`: a model read from it has
//! one weight and bias per parameter layer of its layer list, of that layer's shape, saved again it reads as the same model, and a
//! refusal is one line that names the file. Nothing is allocated beyond what the file holds.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use systole_core::params::ParamShapes;
use systole_host::model::Model;

const PATH: &str = "fuzz/model.safetensors";

fuzz_target!(|data: &[u8]| {
    match Model::from_safetensors(data, Path::new(PATH)) {
        Ok(m) => {
            let shapes = m.net.param_shapes();
            assert_eq!(m.params.layers.len(), shapes.len());
            for (layer, &(fan_in, fan_out)) in m.params.layers.iter().zip(&shapes) {
                assert_eq!((layer.fan_in, layer.fan_out), (fan_in, fan_out));
                assert_eq!(layer.weight.len(), fan_in as usize * fan_out as usize);
                assert_eq!(layer.bias.len(), fan_out as usize);
            }
            let bytes = m.to_safetensors().expect("a loaded model saves");
            let again = Model::from_safetensors(&bytes, Path::new(PATH)).expect("saved reloads");
            assert_eq!(again.net, m.net);
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
