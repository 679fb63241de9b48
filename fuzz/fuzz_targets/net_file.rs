//! Any bytes as a model file of `systole train --model PATH.json`: a network read from it ends in
//! two or more classes with a shape after every layer, and written back (`net_json`) it reads as
//! the same network; a refusal is one line that names the file.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_host::net_file::{net_json, parse_net};

const FILE: &str = "fuzz.json";

fuzz_target!(|data: &[u8]| {
    match parse_net(data, FILE) {
        Ok(net) => {
            assert!(net.classes() >= 2);
            assert_eq!(net.shapes.len(), net.layers.len());
            let again = parse_net(net_json(&net).to_string().as_bytes(), FILE).expect("written back");
            assert_eq!(again, net);
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with(FILE), "{msg:?} does not name the file");
            assert!(!msg.contains('\n'), "{msg:?} is not one line");
        }
    }
});
