//! Any bytes as a response frame (what the host and the firmware parse): a parsed response
//! re-serialises to the same bytes, and a status or identity payload round-trips.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_core::protocol::{
    encode_response, parse_response, Identity, Response, Status, MAX_FRAME,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(resp) = parse_response(data) {
        let mut out = [0u8; MAX_FRAME];
        let n = encode_response(&resp, &mut out).expect("a parsed response encodes");
        assert_eq!(&out[..n], data);
        if let Response::Ok(payload) = resp {
            if let Ok(status) = Status::from_bytes(payload) {
                assert_eq!(&status.to_bytes()[..], payload);
            }
            if let Ok(id) = Identity::from_bytes(payload, 100.0) {
                assert_eq!(&id.to_bytes()[..], payload);
            }
        }
    }
});
