//! Any 16 bytes: a word either decodes to an instruction that re-encodes to the same word, or is
//! rejected with an error that names a field; decoding never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_core::isa::{decode, encode, Word};

fuzz_target!(|data: [u8; 16]| {
    let word = Word::from_le_bytes(data);
    match decode(word) {
        Ok(ins) => assert_eq!(encode(&ins), Ok(word), "{ins:?} does not re-encode to its word"),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
