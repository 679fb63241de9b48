//! A gzip file's members, one after another, as one stream: what `gunzip` writes for a file
//! made by `cat a.gz b.gz`. A member begins wherever a gzip header does; bytes after the last
//! member that do not begin with one are not decompressed, and [`Members::trailing`] says
//! they were there, for the reader to refuse as it refuses bytes after a plain file's end.

use std::io::{self, BufRead, Read};

use flate2::bufread::GzDecoder;

/// The decompressed members of the gzip stream `R`, in order.
pub struct Members<R: BufRead> {
    /// The member being read; `None` once the last has ended.
    member: Option<GzDecoder<R>>,
    trailing: bool,
}

impl<R: BufRead> Members<R> {
    /// The members of `source`, which starts with gzip's magic bytes.
    pub fn new(source: R) -> Members<R> {
        Members { member: Some(GzDecoder::new(source)), trailing: false }
    }

    /// Whether bytes that are not a gzip member followed the last member (known once a read
    /// has returned 0).
    pub fn trailing(&self) -> bool {
        self.trailing
    }
}

impl<R: BufRead> Read for Members<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while let Some(member) = &mut self.member {
            let n = member.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // The member ended, its checksum and length checked: another may follow.
            let mut rest = self.member.take().expect("a member was being read").into_inner();
            if rest.fill_buf()?.is_empty() {
                break;
            }
            // `GzDecoder::new` reads the header: where none parses, no member begins.
            let next = GzDecoder::new(rest);
            match next.header() {
                Some(_) => self.member = Some(next),
                None => self.trailing = true,
            }
        }
        Ok(0)
    }
}

/// `bytes` as one gzip member, for the readers' tests.
#[cfg(test)]
pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(file: &[u8]) -> (io::Result<Vec<u8>>, bool) {
        let mut members = Members::new(file);
        let mut out = Vec::new();
        let result = members.read_to_end(&mut out).map(|_| out);
        (result, members.trailing())
    }

    #[test]
    fn members_read_as_their_concatenation_and_trailing_bytes_are_kept_apart() {
        let file = [gzip(b"ab"), gzip(b""), gzip(b"cde")].concat();
        assert_eq!(read_all(&file).0.unwrap(), b"abcde");
        assert!(!read_all(&file).1);
        for extra in [&b"\0"[..], b"\x1f", b"\x1f\x8b", b"\x1f\x8b\x08\0", b"zz"] {
            let (bytes, trailing) = read_all(&[&file[..], extra].concat());
            assert_eq!((bytes.unwrap(), trailing), (b"abcde".to_vec(), true), "{extra:?}");
        }
        // A member whose checksum is wrong is a damaged file.
        let mut damaged = gzip(b"ab");
        let at = damaged.len() - 5;
        damaged[at] ^= 1;
        assert!(read_all(&damaged).0.is_err());
    }
}
