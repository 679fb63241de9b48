//! The input boundaries under arbitrary bytes, as property tests (the same properties the
//! `fuzz/` targets assert, so regressions are caught without a fuzzer).

use proptest::prelude::*;
use systole_core::isa::{decode, encode, Word};
use systole_core::protocol::{
    encode_request, encode_response, frame_len, parse_error_code, parse_request, parse_response,
    Identity, ProtocolError, Request, Response, Status, MAX_FRAME, REQUEST_SYNC, RESPONSE_SYNC,
};

/// Bytes shaped like a frame (right sync byte, a plausible length) so that the parsers get past
/// the first checks often, and a valid CRC half of the time.
fn framelike(sync: u8) -> impl Strategy<Value = Vec<u8>> {
    (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()).prop_map(
        move |(kind, payload, fix_crc)| {
            let mut f = vec![sync, kind, payload.len() as u8, (payload.len() >> 8) as u8];
            f.extend_from_slice(&payload);
            let crc = systole_core::protocol::crc16(&f[1..]);
            f.extend_from_slice(&if fix_crc { crc } else { crc ^ 1 }.to_be_bytes());
            assert_eq!(f.len(), frame_len(payload.len()));
            f
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn instruction_words_decode_or_name_their_fault(bytes in any::<[u8; 16]>()) {
        let word = Word::from_le_bytes(bytes);
        if let Ok(ins) = decode(word) {
            prop_assert_eq!(encode(&ins), Ok(word));
        }
    }

    #[test]
    fn requests_reserialise_or_are_answered(bytes in prop_oneof![framelike(REQUEST_SYNC), proptest::collection::vec(any::<u8>(), 0..64)]) {
        match parse_request(&bytes) {
            Ok(req) => {
                let mut out = [0u8; MAX_FRAME];
                let n = encode_request(&req, &mut out).unwrap();
                prop_assert_eq!(&out[..n], &bytes[..]);
            }
            Err(e) => {
                let answered = parse_error_code(&e).is_some();
                let unanswerable = matches!(e, ProtocolError::Sync { .. } | ProtocolError::Frame { .. });
                prop_assert!(answered || unanswerable, "{:?}", e);
            }
        }
    }

    #[test]
    fn responses_reserialise(bytes in prop_oneof![framelike(RESPONSE_SYNC), proptest::collection::vec(any::<u8>(), 0..64)]) {
        if let Ok(resp) = parse_response(&bytes) {
            let mut out = [0u8; MAX_FRAME];
            let n = encode_response(&resp, &mut out).unwrap();
            prop_assert_eq!(&out[..n], &bytes[..]);
            if let Response::Ok(p) = resp {
                if let Ok(s) = Status::from_bytes(p) {
                    prop_assert_eq!(&s.to_bytes()[..], p);
                }
                if let Ok(id) = Identity::from_bytes(p, 100.0) {
                    prop_assert_eq!(&id.to_bytes()[..], p);
                }
            }
        }
    }

    #[test]
    fn a_flipped_bit_anywhere_in_a_request_is_caught(bit in 0usize..(8 * 40), addr in any::<u32>()) {
        let data = [7u8; 30];
        let req = Request::WriteMemory { region: systole_core::Region::Dram, addr, data: &data };
        let mut frame = [0u8; MAX_FRAME];
        let n = encode_request(&req, &mut frame).unwrap();
        let bit = bit % (8 * n);
        frame[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(parse_request(&frame[..n]).is_err(), "bit {} flipped and still accepted", bit);
    }
}
