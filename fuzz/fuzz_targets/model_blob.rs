//! Any bytes as a firmware model blob (`core::blob`, what a microcontroller parses without a
//! heap): a parsed blob writes back to exactly its bytes, every part of it lies inside the
//! blob and its target's DRAM, and a refusal has a message. Parsing never panics.
//!
//! Each input is parsed as it is and again with its last four bytes replaced by the CRC-32 of
//! the rest, so that mutations reach the checks behind the checksum.
#![no_main]
use libfuzzer_sys::fuzz_target;
use systole_core::blob::{crc32, Blob, CHECKSUM_BYTES, WORD_BYTES};

fn check(data: &[u8]) {
    match Blob::parse(data) {
        Ok(blob) => {
            assert_eq!(blob.to_bytes(), data, "{blob:?} re-serialises differently");
            assert!(blob.program_words() >= 1);
            assert_eq!(blob.program().len(), blob.program_words() * WORD_BYTES);
            let dram = blob.target.dram_bytes as u64;
            for w in blob.writes() {
                assert!(!w.data.is_empty() && w.addr as u64 + w.data.len() as u64 <= dram);
            }
            let input_end =
                blob.input.addr as u64 + (blob.input_elements() * blob.input.format.bytes()) as u64;
            assert!(blob.input_elements() >= blob.input_len());
            // Every input value lands inside the input buffer, and no slot reads past the input.
            if let Some(image) = blob.image {
                let per_row = image.elements() as usize;
                for at in 0..per_row.min(4096) {
                    assert!(image.feature_at(at).is_none_or(|f| f < image.features() as usize));
                }
            }
            let logits_end =
                blob.logits.addr as u64 + (blob.logits_len() * blob.logits.format.bytes()) as u64;
            assert!(input_end <= dram && logits_end <= dram);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= CHECKSUM_BYTES {
        let mut sealed = data.to_vec();
        let body = sealed.len() - CHECKSUM_BYTES;
        let crc = crc32(&sealed[..body]);
        sealed[body..].copy_from_slice(&crc.to_le_bytes());
        check(&sealed);
    }
});
