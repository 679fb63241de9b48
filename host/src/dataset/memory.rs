//! What a data set holds once read and split, counted from its header (IDX) or row by row
//! (CSV) before it is allocated, against [`crate::limits::MEMORY_LIMIT`].

use super::DatasetError;
use crate::limits::check_memory;

/// Bytes a row holds beside its features, at the split's peak: its label in the data set and
/// in its side of the split (`u16` each), and its row number in the split's list of its side
/// and in [`super::Samples::rows`] (`usize` each).
const ROW_BYTES: u64 = 2 + 2 + 8 + 8;

/// Bytes a data set of `rows` x `features` holds at its peak, once split: each feature as f32
/// (the training side takes over the data set's features in place), again for the test side's
/// rows, and [`ROW_BYTES`] a row. The test side is at most a fifth of the rows and half a row
/// for each class's rounding ([`super::Dataset::split_indices`]; 256 classes at most, from
/// labels of one byte): [`test_rows_at_most`]. The file itself is never held whole (a CSV is
/// read a row at a time, an IDX file's pixels become f32 as they are read), nor a side twice
/// (images turn channels-last in place). Saturates rather than wraps.
pub fn held_bytes(rows: u64, features: u64) -> u64 {
    let feature_rows = rows.saturating_add(test_rows_at_most(rows));
    features
        .saturating_mul(4)
        .saturating_mul(feature_rows)
        .saturating_add(ROW_BYTES.saturating_mul(rows))
}

/// The most rows the test side of a split of `rows` can have: `round(0.8 n)` of each class's
/// `n` rows train, so at most `0.2 n + 0.5` of them test, and at most 256 classes.
pub fn test_rows_at_most(rows: u64) -> u64 {
    rows.min(rows / 5 + 128)
}

/// Refuses a data set of `rows` x `features` read from `file` whose [`held_bytes`] pass the
/// memory limit: the one check every data set path (CSV, IDX, the built-in sets) makes before
/// it allocates what it reads.
pub fn check_held(file: &str, rows: u64, features: u64) -> Result<(), DatasetError> {
    check_memory(
        format_args!(
            "{file}: {rows} rows of {features} features (as f32, with the test side's copy)"
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
        // 1,797 rows: a test side of at most 359 + 128 rows.
        assert_eq!(held_bytes(1797, 64), 64 * 4 * (1797 + 487) + 1797 * 20);
        assert_eq!(test_rows_at_most(3), 3);
        assert_eq!(held_bytes(u32::MAX as u64, u32::MAX as u64), u64::MAX);
        // 13,545 rows of 65,536 features are the most the limit holds.
        let rows = 13_545;
        assert!(held_bytes(rows, 65536) <= MEMORY_LIMIT);
        assert!(check_held("a.idx", rows, 65536).is_ok());
        let e = check_held("a.idx", rows + 1, 65536).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "a.idx: {} rows of 65536 features (as f32, with the test side's copy) needs {} \
                 bytes of memory; the limit is 4294967296 (4 GiB)",
                rows + 1,
                65536 * 4 * (rows + 1 + (rows + 1) / 5 + 128) + (rows + 1) * 20
            )
        );
    }

    /// The bound holds for the split itself: any mix of classes, any seed.
    #[test]
    fn no_split_has_more_test_rows_than_the_bound() {
        use super::super::Dataset;
        for rows in [2usize, 3, 7, 10, 99, 1000] {
            for classes in [2u32, 3, 10, 256] {
                for seed in 0..4u64 {
                    let labels: Vec<u16> = (0..rows)
                        .map(|i| ((i * 7 + seed as usize) % classes as usize) as u16)
                        .collect();
                    let used = *labels.iter().max().unwrap() as u32 + 1;
                    let data = Dataset {
                        file: "d".into(),
                        features: 1,
                        classes: used,
                        x: vec![1.0; rows],
                        labels,
                    };
                    if let Ok(split) = data.into_split(seed) {
                        assert!(split.test.len() as u64 <= test_rows_at_most(rows as u64));
                        assert_eq!(split.test.len() + split.train.len(), rows);
                    }
                }
            }
        }
    }
}
