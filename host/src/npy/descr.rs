//! NumPy's spellings of a plain dtype in a `.npy` header's `descr`, as npyz's type strings.
//!
//! NumPy reads `descr` with `numpy.dtype(descr)`, which takes far more than the `|i1` and `<f4`
//! that NumPy writes: no byte order (`i1`, `f4`: the reading machine's order), `=` (the
//! machine's), `|` (for a multi-byte type NumPy takes it as the machine's too), a one-character
//! code (`b` is int8, `f` float32) with or without an order, a name (`int8`, `float32`,
//! `single`) without one (NumPy refuses `<int8`), and sizes with leading zeros (`i01`). npyz
//! reads only an explicit order, a kind and a size; [`spell`] gives it those. "The machine's
//! order" is little-endian on every host Systole runs on (x86-64, AArch64); [`NATIVE_ORDER`]
//! says so for the host it is built for.

use npyz::TypeStr;

/// The byte order NumPy reads a type without one (or with `=`) in: this machine's.
pub const NATIVE_ORDER: char = if cfg!(target_endian = "big") { '>' } else { '<' };

/// `descr` as npyz reads it (`<f4`, `|i1`), when it is NumPy's spelling of a plain numeric
/// dtype; else `None`, and it is left to npyz as it is.
pub fn spell(descr: &str) -> Option<String> {
    let (order, rest) = match descr.chars().next()? {
        o @ ('<' | '>' | '=' | '|') => (Some(o), &descr[1..]),
        _ => (None, descr),
    };
    let named = || order.is_none().then(|| name(rest)).flatten();
    let Some((kind, size)) = code(rest).or_else(named).or_else(|| kind_and_size(rest)) else {
        // Any other type NumPy reads in native order (`=M8[s]`), with the order spelled out.
        let native = format!("{NATIVE_ORDER}{rest}");
        return (order == Some('=') && native.parse::<TypeStr>().is_ok()).then_some(native);
    };
    let order = match order {
        _ if size == 1 => '|',
        Some(o @ ('<' | '>')) => o,
        _ => NATIVE_ORDER,
    };
    Some(format!("{order}{kind}{size}"))
}

/// A kind NumPy sizes in bytes and a size it has for it (`i4`, `f04`, `b1`).
fn kind_and_size(s: &str) -> Option<(char, u32)> {
    let kind = s.chars().next()?;
    let digits = &s[kind.len_utf8()..];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let size: u32 = digits.parse().ok()?;
    let sizes: &[u32] = match kind {
        'b' => &[1],
        'i' | 'u' => &[1, 2, 4, 8],
        'f' => &[2, 4, 8],
        'c' => &[8, 16],
        _ => return None,
    };
    sizes.contains(&size).then_some((kind, size))
}

/// NumPy's one-character type codes (the sizes of C's types on 64-bit Linux and macOS).
fn code(s: &str) -> Option<(char, u32)> {
    Some(match s {
        "?" => ('b', 1),
        "b" => ('i', 1),
        "B" => ('u', 1),
        "h" => ('i', 2),
        "H" => ('u', 2),
        "i" => ('i', 4),
        "I" => ('u', 4),
        "l" | "q" => ('i', 8),
        "L" | "Q" => ('u', 8),
        "e" => ('f', 2),
        "f" => ('f', 4),
        "d" => ('f', 8),
        "F" => ('c', 8),
        "D" => ('c', 16),
        _ => return None,
    })
}

/// NumPy's names of the numeric types (NumPy 2's: `int` and `long` are int64 there).
fn name(s: &str) -> Option<(char, u32)> {
    Some(match s {
        "bool" | "bool_" => ('b', 1),
        "int8" | "byte" => ('i', 1),
        "uint8" | "ubyte" => ('u', 1),
        "int16" | "short" => ('i', 2),
        "uint16" | "ushort" => ('u', 2),
        "int32" | "intc" => ('i', 4),
        "uint32" | "uintc" => ('u', 4),
        "int64" | "int" | "long" | "longlong" | "intp" => ('i', 8),
        "uint64" | "uint" | "ulong" | "ulonglong" | "uintp" => ('u', 8),
        "float16" | "half" => ('f', 2),
        "float32" | "single" => ('f', 4),
        "float64" | "float" | "double" => ('f', 8),
        "complex64" | "csingle" => ('c', 8),
        "complex128" | "complex" | "cdouble" => ('c', 16),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `numpy.dtype(s).str` gives (NumPy 2.4 on x86-64 Linux), for each spelling.
    #[test]
    fn spellings_are_numpys() {
        let n = NATIVE_ORDER;
        for (given, numpy) in [
            ("|i1", "|i1".to_string()),
            ("i1", "|i1".into()),
            (">i1", "|i1".into()),
            ("b", "|i1".into()),
            ("<b", "|i1".into()),
            ("int8", "|i1".into()),
            ("byte", "|i1".into()),
            ("i01", "|i1".into()),
            ("f4", format!("{n}f4")),
            ("|f4", format!("{n}f4")),
            ("=f4", format!("{n}f4")),
            ("f", format!("{n}f4")),
            (">f", ">f4".into()),
            ("float32", format!("{n}f4")),
            ("single", format!("{n}f4")),
            ("f04", format!("{n}f4")),
            ("B", "|u1".into()),
            ("?", "|b1".into()),
            ("b1", "|b1".into()),
            ("i", format!("{n}i4")),
            ("d", format!("{n}f8")),
            ("float", format!("{n}f8")),
            ("int", format!("{n}i8")),
        ] {
            assert_eq!(spell(given), Some(numpy), "{given}");
        }
        // NumPy refuses these; npyz is left to say so.
        for refused in ["<int8", ">float32", "i0", "f1", "f4 ", "F4", "Int8", "", "<", "b2"] {
            assert_eq!(spell(refused), None, "{refused}");
        }
    }
}
