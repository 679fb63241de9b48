//! What a data set holds once read and split, counted from its header (IDX) or row by row
//! (CSV) before it is allocated, against [`crate::limits::MEMORY_LIMIT`].

use super::DatasetError;
use crate::limits::check_memory;

/// Bytes a row holds beside its features, at the split's peak: its label in the data set and
/// in its side of the split (`u16` each), and its row number in the split's list of its side
/// and in [`super::Samples::rows`] (`usize` each).
const ROW_BYTES: u64 = 2 + 2 + 8 + 8;

/// Bytes a data set of `rows` x `features` holds at its peak, once split: each feature as f32
/// in the data set and again, scaled, in its side of the split (8 bytes a feature), and
/// [`ROW_BYTES`] a row. The file itself is never held whole (a CSV is read a row at a time,
/// an IDX file's pixels become f32 as they are read), nor a split's side twice (images turn
/// channels-last in place). Saturates rather than wraps.
pub fn held_bytes(rows: u64, features: u64) -> u64 {
    features
        .checked_mul(8)
        .and_then(|row| row.checked_add(ROW_BYTES))
        .and_then(|row| row.checked_mul(rows))
        .unwrap_or(u64::MAX)
}

/// Refuses a data set of `rows` x `features` read from `file` whose [`held_bytes`] pass the
/// memory limit: the one check every data set path (CSV, IDX, the built-in sets) makes before
/// it allocates what it reads.
pub fn check_held(file: &str, rows: u64, features: u64) -> Result<(), DatasetError> {
    check_memory(
        format_args!(
            "{file}: {rows} rows of {features} features (as f32, with the train/test split's copy)"
        ),
        held_bytes(rows, features),
    )
    .map_err(DatasetError::Memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MEMORY_LIMIT;

    #[test]
    fn the_need_is_counted_in_64_bits_up_to_the_limit_and_past_it() {
        assert_eq!(held_bytes(1797, 64), 1797 * (64 * 8 + 20));
        assert_eq!(held_bytes(u32::MAX as u64, u32::MAX as u64), u64::MAX);
        // The most rows of 65536 features the limit holds, and one more.
        let rows = MEMORY_LIMIT / (65536 * 8 + ROW_BYTES);
        assert!(check_held("a.idx", rows, 65536).is_ok());
        let e = check_held("a.idx", rows + 1, 65536).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "a.idx: {} rows of 65536 features (as f32, with the train/test split's copy) \
                 needs {} bytes of memory; the limit is 4294967296 (4 GiB)",
                rows + 1,
                (rows + 1) * (65536 * 8 + 20)
            )
        );
    }
}
