//! Any bytes as a request frame (what the device's packet engine parses): a parsed request
//! re-serialises to exactly the same bytes; a rejected one has an answer code or no sync byte.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_core::protocol::{
    encode_request, parse_error_code, parse_request, ProtocolError, MAX_FRAME,
};

fuzz_target!(|data: &[u8]| {
    match parse_request(data) {
        Ok(req) => {
            let mut out = [0u8; MAX_FRAME];
            let n = encode_request(&req, &mut out).expect("a parsed request encodes");
            assert_eq!(&out[..n], data, "{req:?} re-serialises differently");
        }
        Err(e) => assert!(
            parse_error_code(&e).is_some()
                || matches!(e, ProtocolError::Sync { .. } | ProtocolError::Frame { .. }),
            "{e:?} has no answer"
        ),
    }
});
