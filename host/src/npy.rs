//! NumPy `.npy` matrices in, accumulator matrices out.
//!
//! Inputs become the bytes the accelerator's DRAM holds: INT8 as they are, float32 rounded to
//! bf16 with [`Bf16::from_f32`], as the hardware's input path would. C-order and Fortran-order
//! files are both read; the result is always row-major. Every spelling NumPy reads of the two
//! dtypes is read (`descr.rs`): int8 (`|i1`, `i1`, `b`, `int8`, any byte order) and float32
//! (`<f4`, `f4`, `f`, `float32`, and big-endian `>f4`, whose bytes are swapped).

use std::fmt;
use std::io::{self, Cursor, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use npyz::{DType, Endianness, NpyHeader, Order, TypeChar, TypeStr, WriteOptions, WriterBuilder};
use systole_core::{Bf16, Dtype};

mod descr;

/// A row-major matrix as the accelerator's DRAM holds it: little-endian elements of the dtype.
#[derive(Debug)]
pub struct Matrix {
    pub rows: u32,
    pub cols: u32,
    pub elems: Vec<u8>,
}

/// Why a `.npy` file is not a matrix of the wanted dtype. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("cannot read {}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: not a valid .npy file ({reason})", path.display())]
    Malformed { path: PathBuf, reason: String },
    #[error("{}: dtype {found} but --dtype {wanted} needs {needs}", path.display())]
    Dtype { path: PathBuf, found: String, wanted: &'static str, needs: &'static str },
    #[error("{}: shape {shape} is {}-D, a matrix must be 2-D", path.display(), shape.0.len())]
    NotMatrix { path: PathBuf, shape: Shape },
    #[error("{}: shape {shape} has a zero-size dimension", path.display())]
    Empty { path: PathBuf, shape: Shape },
    #[error("{}: truncated: shape {shape} needs {needed} bytes of data but the file holds {found}", path.display())]
    Truncated { path: PathBuf, shape: Shape, needed: u64, found: u64 },
    #[error("{}: shape {shape} needs {needed} bytes of data but the file holds {found}", path.display())]
    TrailingData { path: PathBuf, shape: Shape, needed: u64, found: u64 },
    #[error("{}: shape {shape} is too large for the accelerator's 32-bit DRAM", path.display())]
    TooLarge { path: PathBuf, shape: Shape },
}

/// An array shape, displayed as NumPy does: `(3, 4)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape(pub Vec<u64>);

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [d] => write!(f, "({d},)"),
            dims => {
                let dims: Vec<String> = dims.iter().map(u64::to_string).collect();
                write!(f, "({})", dims.join(", "))
            }
        }
    }
}

/// Reads a 2-D matrix of `dtype`'s input type from `path`.
pub fn read_matrix(path: &Path, dtype: Dtype) -> Result<Matrix, NpyError> {
    let file = crate::limits::read_file(path)
        .map_err(|source| NpyError::Io { path: path.into(), source })?;
    parse_matrix(&file, path, dtype)
}

/// [`read_matrix`] on a file's bytes already in memory; `path` names it in errors.
pub fn parse_matrix(file: &[u8], path: &Path, dtype: Dtype) -> Result<Matrix, NpyError> {
    let (header, data) =
        split_header(file).map_err(|reason| NpyError::Malformed { path: path.into(), reason })?;
    let input = InputType::of(dtype);
    input.check(&header.dtype()).map_err(|found| NpyError::Dtype {
        path: path.into(),
        found,
        wanted: dtype.name(),
        needs: input.name,
    })?;
    let shape = Shape(header.shape().to_vec());
    let (rows, cols) = matrix_dims(path, &shape, input.bytes, data.len() as u64)?;
    let mut elems = input.to_dram(data, header.dtype());
    if header.order() == Order::Fortran {
        elems = fortran_to_row_major(&elems, rows as usize, cols as usize, dtype.elem_bytes());
    }
    Ok(Matrix { rows, cols, elems })
}

/// Parses the header; returns it and the data bytes after it.
fn split_header(file: &[u8]) -> Result<(NpyHeader, &[u8]), String> {
    // npyz allocates the header length the file declares (up to 4 GiB in versions 2 and 3)
    // before reading it: refuse a length the file does not hold first.
    if let Some((declared, start)) = header_len(file) {
        if start.saturating_add(declared) > file.len() {
            return Err(format!(
                "its header declares {declared} bytes but the file holds {} after the preamble",
                file.len() - start
            ));
        }
    }
    // npyz's literal parser backtracks exponentially on nested brackets (22 levels took 13
    // minutes); a NumPy header is a flat dict, nesting at most a structured dtype's list of
    // tuples.
    let depth = header_text(file).map_or(0, nesting_depth);
    if depth > MAX_HEADER_NESTING {
        return Err(format!(
            "its header nests brackets {depth} deep; a .npy header nests at most \
             {MAX_HEADER_NESTING}"
        ));
    }
    // NumPy reads a header with exactly its three keys; npyz ignores others and names a
    // missing one in its own words.
    let entries = header_text(file).and_then(header_entries);
    if let Some(entries) = &entries {
        check_header_keys(entries)?;
    }
    if element_count_overflows(file) {
        return Err("the shape's element count overflows 64 bits".into());
    }
    // npyz knows only an explicit byte order, a kind and a size (`<f4`): NumPy's other
    // spellings (`f4`, `=f4`, `float32`, `b`) are given to it spelled so.
    if let Some((spelled, data_start)) = entries.as_deref().and_then(|e| spell_descr(file, e)) {
        let header = NpyHeader::from_reader(&spelled[..]).map_err(|e| one_line(&e.to_string()))?;
        return Ok((header, &file[data_start..]));
    }
    let mut cursor = Cursor::new(file);
    let header = NpyHeader::from_reader(&mut cursor).map_err(|e| one_line(&e.to_string()))?;
    Ok((header, &file[cursor.position() as usize..]))
}

/// The keys of a `.npy` header's dict: NumPy writes these and reads nothing else.
const HEADER_KEYS: [&str; 3] = ["descr", "fortran_order", "shape"];

/// A missing key or one NumPy does not read, named.
fn check_header_keys(entries: &[(Vec<u8>, Range<usize>)]) -> Result<(), String> {
    const HOLDS: &str = "a .npy header holds exactly 'descr', 'fortran_order' and 'shape'";
    if let Some(missing) =
        HEADER_KEYS.iter().find(|k| !entries.iter().any(|(e, _)| e == k.as_bytes()))
    {
        return Err(format!("its header has no '{missing}' key; {HOLDS}"));
    }
    if let Some((extra, _)) =
        entries.iter().find(|(e, _)| !HEADER_KEYS.iter().any(|k| k.as_bytes() == e))
    {
        return Err(format!(
            "its header has a key '{}' that NumPy refuses; {HOLDS}",
            quoted_key(extra)
        ));
    }
    Ok(())
}

/// A key as a message shows it: on one line, at most 40 characters.
fn quoted_key(key: &[u8]) -> String {
    let key = String::from_utf8_lossy(key);
    let shown: String = key.chars().take(40).flat_map(char::escape_debug).collect();
    if key.chars().count() > 40 {
        format!("{shown}...")
    } else {
        shown
    }
}

/// The preamble and header of `file` with each type string in its `descr` (the dtype's own,
/// or a structured dtype's fields') spelled as npyz reads it ([`descr::spell`]), and where
/// the data starts in `file`; `None` if every type string is spelled so already.
fn spell_descr(file: &[u8], entries: &[(Vec<u8>, Range<usize>)]) -> Option<(Vec<u8>, usize)> {
    let (len, start) = header_len(file)?;
    let (_, descr) = entries.iter().find(|(k, _)| k == b"descr")?;
    let text = file.get(start..start + len)?;
    let mut spelled_text = text[..descr.start].to_vec();
    let mut spelled = false;
    let mut i = descr.start;
    while i < descr.end {
        let quoted = matches!(text[i], b'\'' | b'"');
        // A string after `(` is a field's name (or title), not its type.
        let named = text[..i].iter().rev().find(|b| !b.is_ascii_whitespace()) == Some(&b'(');
        let end = if quoted { string_end(text, i)? } else { i };
        let respelled = match quoted && !named {
            true => std::str::from_utf8(&text[i + 1..end])
                .ok()
                .and_then(descr::spell)
                .filter(|s| s.as_bytes() != &text[i + 1..end]),
            false => None,
        };
        match respelled {
            Some(s) => {
                spelled = true;
                spelled_text.push(text[i]);
                spelled_text.extend_from_slice(s.as_bytes());
                spelled_text.push(text[end]);
            }
            None => spelled_text.extend_from_slice(&text[i..=end]),
        }
        i = end + 1;
    }
    if !spelled {
        return None;
    }
    spelled_text.extend_from_slice(&text[descr.end..]);
    // The same version and preamble, with the header's new length.
    let mut head = file[..start].to_vec();
    match start {
        10 => head[8..10].copy_from_slice(&u16::try_from(spelled_text.len()).ok()?.to_le_bytes()),
        _ => head[8..12].copy_from_slice(&u32::try_from(spelled_text.len()).ok()?.to_le_bytes()),
    }
    head.extend_from_slice(&spelled_text);
    Some((head, start + len))
}

/// A header's dict, entry by entry: each key and where its value lies in `text`. `None` when
/// `text` is not a dict of string keys this scan can follow; npyz then says what is wrong.
fn header_entries(text: &[u8]) -> Option<Vec<(Vec<u8>, Range<usize>)>> {
    let skip_space = |mut i: usize| {
        while text.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut i = skip_space(0);
    if text.get(i) != Some(&b'{') {
        return None;
    }
    let mut entries = Vec::new();
    i += 1;
    loop {
        i = skip_space(i);
        match text.get(i)? {
            b'}' => return Some(entries),
            b'\'' | b'"' => {}
            _ => return None,
        }
        let key_end = string_end(text, i)?;
        let key = text[i + 1..key_end].to_vec();
        i = skip_space(key_end + 1);
        if text.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_space(i + 1);
        let end = value_end(text, start)?;
        let mut trimmed = end;
        while trimmed > start && text[trimmed - 1].is_ascii_whitespace() {
            trimmed -= 1;
        }
        if trimmed == start {
            return None;
        }
        entries.push((key, start..trimmed));
        i = end;
        if text[i] == b',' {
            i += 1;
        }
    }
}

/// Where the string literal opening at `text[open]` closes (the index of its closing quote).
fn string_end(text: &[u8], open: usize) -> Option<usize> {
    let quote = text[open];
    let mut i = open + 1;
    loop {
        match *text.get(i)? {
            b'\\' => i += 2,
            b if b == quote => return Some(i),
            _ => i += 1,
        }
    }
}

/// Where the dict value starting at `text[start]` ends: the `,` or `}` after it, outside any
/// bracket or string.
fn value_end(text: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    loop {
        match *text.get(i)? {
            b'\'' | b'"' => i = string_end(text, i)?,
            b'(' | b'[' | b'{' => depth += 1,
            b',' | b'}' if depth == 0 => return Some(i),
            b')' | b']' | b'}' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        i += 1;
    }
}

/// Deepest bracket nesting a header may have: the dict, a structured dtype's list, its tuples,
/// and a sub-array shape.
const MAX_HEADER_NESTING: usize = 4;

/// How deep `(`, `[` and `{` nest in `text` (quotes not considered: a plain header has none of
/// them inside its strings).
fn nesting_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for &b in text {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// npyz's header errors quote the header in a multi-line diagram (`--> 1:64`, the text, a caret,
/// `= expected EOI`): kept to what they say, on one line, as every message of the CLI is.
fn one_line(message: &str) -> String {
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default().replace("-->", "at");
    let mut out = first.split_whitespace().collect::<Vec<_>>().join(" ");
    for line in lines {
        if let Some(at) = line.strip_prefix("-->") {
            out.push_str(&format!(" at {}", at.trim()));
        } else if let Some(what) = line.strip_prefix("= ") {
            out.push_str(&format!(": {what}"));
        }
    }
    out
}

/// npyz multiplies the dimensions unchecked (a panic in debug builds): look at the shape in the
/// header text first. Anything unparsable here is left for npyz to report.
fn element_count_overflows(file: &[u8]) -> bool {
    let Some(text) = header_text(file) else { return false };
    let text = String::from_utf8_lossy(text);
    let Some(at) = text.find("'shape'").or_else(|| text.find("\"shape\"")) else { return false };
    let rest = &text[at..];
    let (Some(open), Some(close)) = (rest.find('('), rest.find(')')) else { return false };
    if close < open {
        return false;
    }
    let dims = rest[open + 1..close].split(',').map(str::trim).filter(|d| !d.is_empty());
    let dims: Option<Vec<u64>> = dims.map(|d| d.parse().ok()).collect();
    dims.is_some_and(|d| d.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).is_none())
}

/// The header's dict literal: after the magic, the version and its length (2 bytes in version 1,
/// 4 in versions 2 and 3).
fn header_text(file: &[u8]) -> Option<&[u8]> {
    let (len, start) = header_len(file)?;
    file.get(start..start.checked_add(len)?)
}

/// The header's declared length and where it starts, for versions 1 to 3 of a file that has
/// the magic.
fn header_len(file: &[u8]) -> Option<(usize, usize)> {
    if !file.starts_with(b"\x93NUMPY") {
        return None;
    }
    match file.get(6)? {
        1 => Some((u16::from_le_bytes(file.get(8..10)?.try_into().ok()?) as usize, 10)),
        2 | 3 => Some((u32::from_le_bytes(file.get(8..12)?.try_into().ok()?) as usize, 12)),
        _ => None,
    }
}

/// The shape as `(rows, cols)`, once it is 2-D, non-empty and matched by the data.
fn matrix_dims(
    path: &Path,
    shape: &Shape,
    elem_bytes: u64,
    found: u64,
) -> Result<(u32, u32), NpyError> {
    let err_path = || path.to_path_buf();
    let &[rows, cols] = shape.0.as_slice() else {
        return Err(NpyError::NotMatrix { path: err_path(), shape: shape.clone() });
    };
    if rows == 0 || cols == 0 {
        return Err(NpyError::Empty { path: err_path(), shape: shape.clone() });
    }
    let needed = rows.checked_mul(cols).and_then(|n| n.checked_mul(elem_bytes)).unwrap_or(u64::MAX);
    if found < needed {
        return Err(NpyError::Truncated { path: err_path(), shape: shape.clone(), needed, found });
    }
    if found > needed {
        return Err(NpyError::TrailingData {
            path: err_path(),
            shape: shape.clone(),
            needed,
            found,
        });
    }
    match (u32::try_from(rows), u32::try_from(cols)) {
        (Ok(r), Ok(c)) => Ok((r, c)),
        _ => Err(NpyError::TooLarge { path: err_path(), shape: shape.clone() }),
    }
}

/// What a file must hold for one datapath.
struct InputType {
    /// NumPy's name, with its type string: `int8 (|i1)`.
    name: &'static str,
    type_char: TypeChar,
    bytes: u64,
    dtype: Dtype,
}

impl InputType {
    fn of(dtype: Dtype) -> InputType {
        match dtype {
            Dtype::Int8 => {
                InputType { name: "int8 (|i1)", type_char: TypeChar::Int, bytes: 1, dtype }
            }
            Dtype::Bf16 => {
                InputType { name: "float32 (<f4)", type_char: TypeChar::Float, bytes: 4, dtype }
            }
        }
    }

    /// `Ok` if `found` is this type, in either byte order; else `found` as NumPy names it.
    fn check(&self, found: &DType) -> Result<(), String> {
        let DType::Plain(ts) = found else { return Err(format!("{} (structured)", found.descr())) };
        if ts.type_char() == self.type_char && ts.size_field() == self.bytes {
            Ok(())
        } else {
            Err(numpy_name(ts))
        }
    }

    /// File data of type `found` (already checked to be this type and the right size) as
    /// DRAM bytes: little-endian.
    fn to_dram(&self, data: &[u8], found: DType) -> Vec<u8> {
        let big = matches!(found, DType::Plain(ts) if ts.endianness() == Endianness::Big);
        match self.dtype {
            Dtype::Int8 => data.to_vec(),
            Dtype::Bf16 => data
                .chunks_exact(4)
                .map(|w| {
                    let w = [w[0], w[1], w[2], w[3]];
                    if big {
                        f32::from_be_bytes(w)
                    } else {
                        f32::from_le_bytes(w)
                    }
                })
                .flat_map(|x| Bf16::from_f32(x).0.to_le_bytes())
                .collect(),
        }
    }
}

/// A type string as NumPy names it in messages: `float64 (<f8)`, `big-endian float32 (>f4)`.
fn numpy_name(ts: &TypeStr) -> String {
    let bits = ts.size_field() * 8;
    let base = match ts.type_char() {
        TypeChar::Bool => "bool".to_string(),
        TypeChar::Int => format!("int{bits}"),
        TypeChar::Uint => format!("uint{bits}"),
        TypeChar::Float => format!("float{bits}"),
        TypeChar::Complex => format!("complex{bits}"),
        TypeChar::Object => "object".to_string(),
        _ => return ts.to_string(),
    };
    match ts.endianness() {
        Endianness::Big if ts.size_field() > 1 => format!("big-endian {base} ({ts})"),
        _ => format!("{base} ({ts})"),
    }
}

/// Column-major elements of `elem_bytes` each, reordered row-major.
fn fortran_to_row_major(elems: &[u8], rows: usize, cols: usize, elem_bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(elems.len());
    for i in 0..rows {
        for j in 0..cols {
            let at = (j * rows + i) * elem_bytes;
            out.extend_from_slice(&elems[at..at + elem_bytes]);
        }
    }
    out
}

/// Writes an input matrix back as the C-order `.npy` [`read_matrix`] takes for `dtype`: `|i1`,
/// or `<f4` holding the bf16 values exactly, so it reads back as the same matrix.
pub fn write_matrix(out: impl Write, m: &Matrix, dtype: Dtype) -> io::Result<()> {
    let shape = [m.rows as u64, m.cols as u64];
    match dtype {
        Dtype::Int8 => write_array(out, "|i1", &shape, m.elems.iter().map(|&b| b as i8)),
        Dtype::Bf16 => write_array(
            out,
            "<f4",
            &shape,
            m.elems.chunks_exact(2).map(|b| Bf16(u16::from_le_bytes([b[0], b[1]])).to_f32()),
        ),
    }
}

/// Writes C's accumulator words as an `m x n` C-order array: `<i4` for INT8, `<f4` (the words'
/// bits) for BF16.
pub fn write_accumulators(
    out: impl Write,
    m: u32,
    n: u32,
    words: &[u32],
    dtype: Dtype,
) -> io::Result<()> {
    let shape = [m as u64, n as u64];
    match dtype {
        Dtype::Int8 => write_array(out, "<i4", &shape, words.iter().map(|&w| w as i32)),
        Dtype::Bf16 => write_array(out, "<f4", &shape, words.iter().map(|&w| f32::from_bits(w))),
    }
}

fn write_array<T: npyz::Serialize>(
    out: impl Write,
    type_str: &str,
    shape: &[u64],
    elems: impl Iterator<Item = T>,
) -> io::Result<()> {
    let type_str: TypeStr = type_str.parse().map_err(io::Error::other)?;
    let mut writer =
        WriteOptions::new().dtype(DType::Plain(type_str)).shape(shape).writer(out).begin_nd()?;
    writer.extend(elems)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fortran_order_is_transposed() {
        // [[1, 2, 3], [4, 5, 6]] stored column by column.
        let f = [1u8, 4, 2, 5, 3, 6];
        assert_eq!(fortran_to_row_major(&f, 2, 3, 1), [1, 2, 3, 4, 5, 6]);
        let f2: Vec<u8> = f.iter().flat_map(|&x| [x, 0]).collect();
        let c2: Vec<u8> = [1u8, 2, 3, 4, 5, 6].iter().flat_map(|&x| [x, 0]).collect();
        assert_eq!(fortran_to_row_major(&f2, 2, 3, 2), c2);
    }

    #[test]
    fn overflowing_shapes_are_caught_before_npyz() {
        let npy = |shape: &str| {
            let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
            let mut file = b"\x93NUMPY\x01\x00".to_vec();
            file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            file.extend_from_slice(dict.as_bytes());
            file
        };
        assert!(element_count_overflows(&npy("(4294967296, 4294967296)")));
        assert!(!element_count_overflows(&npy("(3, 4)")));
        assert!(!element_count_overflows(&npy("(3,)")));
    }

    /// A version-2 header declaring 4 GiB made npyz allocate 4 GiB before finding the file
    /// short (the fuzz target `npy_matrix` ran out of memory on 137 bytes).
    #[test]
    fn header_longer_than_the_file_is_refused_before_npyz_allocates_it() {
        let mut file = b"\x93NUMPY\x02\x00".to_vec();
        file.extend_from_slice(&0xFFFF_FF74u32.to_le_bytes());
        file.extend_from_slice(b"{'descr': '|i1', 'fortran_order': False, 'shape': (1, 4), }\n");
        let e = parse_matrix(&file, Path::new("a.npy"), Dtype::Int8).unwrap_err().to_string();
        assert_eq!(
            e,
            "a.npy: not a valid .npy file (its header declares 4294967156 bytes but the file \
             holds 60 after the preamble)"
        );
    }

    /// A 159-byte header of 22 nested brackets kept npyz's parser busy for 13 minutes (the
    /// fuzz target `npy_matrix`'s slowest unit): nesting is bounded before npyz parses.
    #[test]
    fn deeply_nested_header_is_refused_before_npyz_parses_it() {
        let dict = format!("{}'descr': '|i1'{}", "[".repeat(22), "]".repeat(22));
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        let started = std::time::Instant::now();
        let e = parse_matrix(&file, Path::new("a.npy"), Dtype::Int8).unwrap_err().to_string();
        assert!(started.elapsed().as_secs() < 1);
        assert_eq!(
            e,
            "a.npy: not a valid .npy file (its header nests brackets 22 deep; a .npy header \
             nests at most 4)"
        );
        // A structured dtype nests 3 deep and reaches npyz (which the dtype check refuses).
        let dict = "{'descr': [('a', '<f4', (2,))], 'fortran_order': False, 'shape': (1, 1), }";
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        file.extend_from_slice(&[0; 8]);
        let e = parse_matrix(&file, Path::new("a.npy"), Dtype::Bf16).unwrap_err().to_string();
        assert!(e.contains("structured"), "{e}");
    }

    /// npyz's pest errors span five lines; the fuzz target `npy_matrix` found the message
    /// reaching the user that way.
    #[test]
    fn header_syntax_errors_are_one_line() {
        let dict = "{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), } %";
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        let e = parse_matrix(&file, Path::new("a.npy"), Dtype::Int8).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e:?}");
        assert_eq!(
            e,
            "a.npy: not a valid .npy file (could not parse Python expression: syntax error: at \
             1:61: expected EOI)"
        );
    }

    /// A version-1 file of `dict` and `data`.
    fn npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        file.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        file.extend_from_slice(dict.as_bytes());
        file.extend_from_slice(data);
        file
    }

    /// `=f4` (native byte order, which NumPy reads in the reading machine's order) was refused
    /// as "invalid type string": npyz knows only `<`, `>` and `|`.
    #[test]
    fn native_byte_order_reads_as_this_machines() {
        let dict = |descr: &str| {
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 2), }}")
        };
        let floats: Vec<u8> =
            [1.0f32, -2.5, 3.0, 0.25].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let path = Path::new("a.npy");
        let native = parse_matrix(&npy(&dict("=f4"), &floats), path, Dtype::Bf16).unwrap();
        let spelled = if cfg!(target_endian = "big") { ">f4" } else { "<f4" };
        let explicit = parse_matrix(&npy(&dict(spelled), &floats), path, Dtype::Bf16).unwrap();
        assert_eq!((native.rows, native.cols, &native.elems), (2, 2, &explicit.elems));
        let int8 = parse_matrix(&npy(&dict("=i1"), &[1, 2, 0xfe, 4]), path, Dtype::Int8).unwrap();
        assert_eq!(int8.elems, [1, 2, 0xfe, 4]);
        // A native-order type of the wrong kind is refused as what it is.
        let e = parse_matrix(&npy(&dict("=u2"), &[0; 8]), path, Dtype::Int8).unwrap_err();
        assert!(e.to_string().starts_with("a.npy: dtype uint16 ("), "{e}");
        // Fortran order, and a structured dtype's fields, take it too.
        let fortran = "{'descr': '=i1', 'fortran_order': True, 'shape': (2, 2), }";
        let m = parse_matrix(&npy(fortran, &[1, 3, 2, 4]), path, Dtype::Int8).unwrap();
        assert_eq!(m.elems, [1, 2, 3, 4]);
        let fields = "{'descr': [('a', '=f4')], 'fortran_order': False, 'shape': (1, 1), }";
        let e = parse_matrix(&npy(fields, &[0; 4]), path, Dtype::Bf16).unwrap_err().to_string();
        assert!(e.contains("structured"), "{e}");
        // `=` before something that is no type is still npyz's to refuse.
        let e = parse_matrix(&npy(&dict("=q9"), &[0; 4]), path, Dtype::Int8).unwrap_err();
        assert!(e.to_string().contains("invalid type string"), "{e}");
    }

    /// `'i1'` and `'f4'` (no byte-order character; NumPy reads them as int8 and native
    /// float32) were refused as "invalid type string", and so was every other spelling NumPy
    /// takes for the two dtypes (`b`, `int8`, `f`, `float32`, ...); `>f4` was refused as
    /// big-endian. Each now reads as the usual spelling does.
    #[test]
    fn every_spelling_numpy_reads_as_int8_or_float32_is_read_as_it() {
        let path = Path::new("a.npy");
        let dict = |descr: &str| {
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 2), }}")
        };
        let read = |descr: &str, data: &[u8], dtype: Dtype| {
            parse_matrix(&npy(&dict(descr), data), path, dtype).map(|m| m.elems)
        };
        let ints = [1u8, 0xfe, 0x80, 4];
        let int8 = read("|i1", &ints, Dtype::Int8).unwrap();
        for descr in ["i1", "<i1", ">i1", "=i1", "b", "<b", ">b", "|b", "=b", "int8", "byte", "i01"]
        {
            assert_eq!(read(descr, &ints, Dtype::Int8).unwrap(), int8, "{descr}");
        }
        let floats = [1.0f32, -2.5, 3.0, 0.25];
        let le: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
        let be: Vec<u8> = floats.iter().flat_map(|x| x.to_be_bytes()).collect();
        let float32 = read("<f4", &le, Dtype::Bf16).unwrap();
        // Without an order (and with `|`, which NumPy takes as native for a 4-byte type), the
        // machine's own: little-endian on every host Systole runs on.
        let native = if cfg!(target_endian = "big") { &be } else { &le };
        for descr in ["f4", "=f4", "|f4", "f", "<f", "=f", "float32", "single", "f04"] {
            assert_eq!(read(descr, native, Dtype::Bf16).unwrap(), float32, "{descr}");
        }
        for descr in [">f4", ">f"] {
            assert_eq!(read(descr, &be, Dtype::Bf16).unwrap(), float32, "{descr}");
        }
        // Other dtypes, however spelled, are named as NumPy names them.
        let wrong = |descr: &str, dtype: Dtype| {
            parse_matrix(&npy(&dict(descr), &[0; 32]), path, dtype).unwrap_err().to_string()
        };
        for (descr, name) in [
            ("f8", "float64 (<f8)"),
            ("d", "float64 (<f8)"),
            ("float64", "float64 (<f8)"),
            ("u1", "uint8 (|u1)"),
            ("B", "uint8 (|u1)"),
            ("h", "int16 (<i2)"),
            ("e", "float16 (<f2)"),
            ("b1", "bool (|b1)"),
        ] {
            let e = wrong(descr, Dtype::Int8);
            assert!(e.starts_with(&format!("a.npy: dtype {name} but --dtype int8")), "{e}");
        }
        let e = wrong("f4", Dtype::Int8);
        assert!(e.starts_with("a.npy: dtype float32 (<f4) but --dtype int8"), "{e}");
        // What NumPy refuses stays refused: a name with a byte order, a size of 0, spaces.
        for descr in ["<int8", ">float32", "i0", "f4 ", "F4", "Int8"] {
            let e = wrong(descr, Dtype::Int8);
            assert!(e.starts_with("a.npy: not a valid .npy file"), "{descr}: {e}");
        }
    }

    /// A header with a key NumPy refuses (`'extra': 1`) was read; a missing key was npyz's
    /// "dict is missing key".
    #[test]
    fn header_keys_are_exactly_numpys_three() {
        let path = Path::new("a.npy");
        let e = |dict: &str| {
            parse_matrix(&npy(dict, &[1; 4]), path, Dtype::Int8).unwrap_err().to_string()
        };
        let refused = |why: &str| {
            format!(
                "a.npy: not a valid .npy file ({why}; a .npy header holds exactly 'descr', \
                 'fortran_order' and 'shape')"
            )
        };
        assert_eq!(
            e("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), 'extra': 1, }"),
            refused("its header has a key 'extra' that NumPy refuses")
        );
        assert_eq!(
            e("{'descr': '|i1', 'shape': (2, 2), }"),
            refused("its header has no 'fortran_order' key")
        );
        assert_eq!(
            e("{\"descr\": '|i1', 'fortran_order': False}"),
            refused("its header has no 'shape' key")
        );
        // Keys are shown on one line and cut short.
        let long = format!(
            "{{'descr': '|i1', 'fortran_order': False, 'shape': (2, 2), 'a\\n{}': 0}}",
            "b".repeat(60)
        );
        let message = e(&long);
        assert!(message.contains("'a\\\\nbbb") && message.contains("b...'"), "{message}");
        // Values with strings, brackets and commas in them are stepped over whole.
        let tricky = "{'descr': [('x,}', '|i1')], 'shape': (2, 2), 'fortran_order': False, }";
        assert!(e(tricky).contains("structured"), "{}", e(tricky));
        let ok = "{ 'shape' : (2, 2) , \"fortran_order\":False,'descr':'|i1'}";
        assert!(parse_matrix(&npy(ok, &[1; 4]), path, Dtype::Int8).is_ok());
    }

    #[test]
    fn dtypes_are_named_as_numpy_names_them() {
        let name = |s: &str| numpy_name(&s.parse().unwrap());
        assert_eq!(name("<f8"), "float64 (<f8)");
        assert_eq!(name(">f4"), "big-endian float32 (>f4)");
        assert_eq!(name("|u1"), "uint8 (|u1)");
        assert_eq!(name("|b1"), "bool (|b1)");
    }
}
