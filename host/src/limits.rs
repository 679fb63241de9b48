//! How much memory a command may set out to allocate for what its flags and files imply.
//!
//! A flag or a small file can imply a huge allocation: `--gemm 20000x1x20000` a 1.6 GB DRAM,
//! `--hidden 65536,65536` 17 GB of weights, two 30 KB `.npy` files a 3.6 GB product. Each command
//! adds up what its inputs imply before it allocates any of it, and refuses past
//! [`MEMORY_LIMIT`] in one line (`... needs N bytes of memory; the limit is M`), so bad input
//! ends with status 2 and a message, never with an allocation failure's abort. The other limits
//! are the facts of their own crates: core's `MAX_WIDTH` and `MAX_DEPTH`, the ISA's 4 GiB of
//! DRAM, systole-hdl's `top::MAX_DRAM_BYTES`, the CSV reader's `dataset::MAX_ROW_BYTES`.

use std::fmt::Display;
use std::io::{self, Read};
use std::path::Path;

/// The most memory one command sets out to allocate: 4 GiB, about three times what the largest
/// default workload holds (`bench`'s 8192 x 8192 x 8192 GEMM on a GPU: 1.5 GB on the host).
pub const MEMORY_LIMIT: u64 = 4 << 30;

/// Memory a command set out to allocate and may not have: past [`MEMORY_LIMIT`], or within it
/// but refused by the system (an address-space limit, a machine short of memory).
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("{what} needs {bytes} bytes of memory; the limit is {MEMORY_LIMIT} (4 GiB)")]
    OverLimit { what: String, bytes: u64 },
    #[error(
        "{what} needs {bytes} bytes of memory, more than the system gives this run (the limit is \
         {MEMORY_LIMIT}, 4 GiB)"
    )]
    Refused { what: String, bytes: u64 },
}

/// Refuses `bytes` of memory for `what` past [`MEMORY_LIMIT`].
pub fn check_memory(what: impl Display, bytes: u64) -> Result<(), MemoryError> {
    if bytes > MEMORY_LIMIT {
        return Err(MemoryError::OverLimit { what: what.to_string(), bytes });
    }
    Ok(())
}

/// An empty vector with room for `len` elements, for `what`: `len` checked against
/// [`MEMORY_LIMIT`] in 64 bits, then reserved with `try_reserve_exact`, so a size that comes
/// from a file ends the run with a message, never with an allocation failure's abort.
pub fn try_vec<T>(what: impl Display, len: u64) -> Result<Vec<T>, MemoryError> {
    let mut v = Vec::new();
    try_grow(&mut v, len, len, what)?;
    Ok(v)
}

/// Room in `v` for `more` elements beyond its length, for `what`: the length they make
/// checked as [`try_vec`] checks it, the room grown geometrically as `Vec` grows it (so what
/// is reserved follows what has been read, never what a header claims) but to at most
/// `at_most` elements (a header's count, once it is being met).
pub fn try_grow<T>(
    v: &mut Vec<T>,
    more: u64,
    at_most: u64,
    what: impl Display,
) -> Result<(), MemoryError> {
    let need = (v.len() as u64).saturating_add(more);
    let bytes = need.saturating_mul(size_of::<T>() as u64);
    check_memory(&what, bytes)?;
    if need <= v.capacity() as u64 {
        return Ok(());
    }
    let room = (v.capacity() as u64).saturating_mul(2).min(at_most).max(need);
    let refused = || MemoryError::Refused { what: what.to_string(), bytes };
    let extra = usize::try_from(room - v.len() as u64).map_err(|_| refused())?;
    v.try_reserve_exact(extra).map_err(|_| refused())
}

/// The largest input file one command reads whole (a `.npy`, a model, a report): 1 GiB, a
/// quarter of [`MEMORY_LIMIT`], so the inputs of one run and what is made from them fit in it.
pub const INPUT_LIMIT: u64 = 1 << 30;

/// Reads a whole input file of at most [`INPUT_LIMIT`] bytes. A larger regular file is refused
/// from its size; a stream that goes on (`/dev/zero`, a FIFO) once that much is read.
pub fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    read_file_at_most(path, INPUT_LIMIT)
}

/// Reads a whole input file of at most `limit` bytes (an input with a smaller limit of its own:
/// a model file's `net_file::MAX_NET_FILE_BYTES`), refused as [`read_file`] refuses.
pub fn read_file_at_most(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > limit {
        return Err(too_long(limit));
    }
    read_at_most(file, limit)
}

/// Reads `file` to its end in chunks, never holding more than `limit` bytes (nor, while
/// growing, reserving more than `limit` plus a chunk).
fn read_at_most(mut file: impl Read, limit: u64) -> io::Result<Vec<u8>> {
    const CHUNK: usize = 1 << 16;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if bytes.len() + n > limit {
            return Err(too_long(limit as u64));
        }
        if bytes.capacity() - bytes.len() < n {
            let grown = (bytes.capacity() * 2).clamp(CHUNK, limit.max(CHUNK));
            bytes.try_reserve_exact(grown.max(bytes.len() + n) - bytes.len())?;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

fn too_long(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("it holds more than {limit} bytes, the most this input file may"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_past_the_limit_is_refused_once_the_limit_is_read() {
        assert_eq!(read_at_most(&b"abcd"[..], 4).unwrap(), b"abcd");
        let endless = std::io::repeat(0);
        let e = read_at_most(endless, 1000).unwrap_err().to_string();
        assert!(e.contains("more than 1000 bytes"), "{e}");
        assert_eq!(read_at_most(&[7u8; 200_000][..], 200_000).unwrap().len(), 200_000);
    }

    /// A size the system refuses (here: one no address space holds) is an error, not an abort.
    #[test]
    fn a_reservation_past_the_limit_or_refused_is_an_error() {
        let past = try_vec::<u32>("a.idx", (MEMORY_LIMIT / 4) + 1).unwrap_err().to_string();
        assert_eq!(past, "a.idx needs 4294967300 bytes of memory; the limit is 4294967296 (4 GiB)");
        // Room grows as a vector's does, to at most the count given.
        let mut v = vec![0u64; 8];
        try_grow(&mut v, 1, 100, "x").unwrap();
        assert_eq!(v.capacity(), 16);
        v.resize(16, 0);
        try_grow(&mut v, 4, 20, "x").unwrap();
        assert_eq!(v.capacity(), 20);
        try_grow(&mut v, 1 << 20, u64::MAX, "x").unwrap();
        assert_eq!(v.capacity(), 16 + (1 << 20));
        let e = MemoryError::Refused { what: "t.csv".into(), bytes: 7 }.to_string();
        assert_eq!(
            e,
            "t.csv needs 7 bytes of memory, more than the system gives this run (the limit is \
             4294967296, 4 GiB)"
        );
    }

    #[test]
    fn the_limit_is_named_in_one_line() {
        assert!(check_memory("x", MEMORY_LIMIT).is_ok());
        let e = check_memory("--gemm 1x2x3", MEMORY_LIMIT + 1).unwrap_err().to_string();
        assert_eq!(
            e,
            "--gemm 1x2x3 needs 4294967297 bytes of memory; the limit is 4294967296 (4 GiB)"
        );
    }
}
