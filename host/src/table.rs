//! Plain-text tables for the terminal: each column padded to its widest cell, columns two
//! spaces apart, and every line within [`WIDTH`] columns.

/// The widest line a table prints: a terminal's width with room to spare. Text past it wraps.
pub const WIDTH: usize = 100;

/// A free column whose room beside the others is narrower than this starts on the next line
/// instead, indented by [`HANG`], where it has the whole width.
const NARROWEST_FREE: usize = 36;

/// The indent of a free column's text when it starts on the line after its row.
const HANG: usize = 4;

/// How a column's cells are padded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
    /// Not padded: a last column of free-running text, wrapped at word boundaries to keep the
    /// line within [`WIDTH`].
    Free,
}

/// The lines of a table of `rows` (a header is a row like any other), one entry a row, each
/// without its newline and trailing spaces. `align` gives each column's padding; cells are
/// counted in characters. A row shorter than `align` leaves its last columns out. A free
/// column's text that would pass [`WIDTH`] wraps under itself, and where the columns before
/// it leave it less than [`NARROWEST_FREE`] it starts on the row's next line: such an entry
/// holds several lines, joined by `\n`.
pub fn lines<R: AsRef<[String]>>(rows: &[R], align: &[Align]) -> Vec<String> {
    let width = |c: usize| {
        rows.iter().filter_map(|r| r.as_ref().get(c)).map(|s| s.chars().count()).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..align.len()).map(width).collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (c, (cell, (a, &w))) in
                row.as_ref().iter().zip(align.iter().zip(&widths)).enumerate()
            {
                if c > 0 {
                    line.push_str("  ");
                }
                match a {
                    Align::Left => line.push_str(&format!("{cell:<w$}")),
                    Align::Right => line.push_str(&format!("{cell:>w$}")),
                    Align::Free => return free(line, cell),
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// `start` (the row's padded columns) followed by its free text, wrapped.
fn free(start: String, text: &str) -> String {
    let at = start.chars().count();
    if at + text.chars().count() <= WIDTH {
        return (start + text).trim_end().to_string();
    }
    if WIDTH.saturating_sub(at) >= NARROWEST_FREE {
        let pieces = wrap(text, WIDTH - at);
        let indent = " ".repeat(at);
        let rest: Vec<String> = pieces[1..].iter().map(|p| format!("{indent}{p}")).collect();
        return [vec![start + &pieces[0]], rest].concat().join("\n");
    }
    let indent = " ".repeat(HANG);
    let under: Vec<String> =
        wrap(text, WIDTH - HANG).iter().map(|p| format!("{indent}{p}")).collect();
    [vec![start.trim_end().to_string()], under].concat().join("\n")
}

/// Prose for the terminal: each line of `text` wrapped at [`WIDTH`].
pub fn paragraph(text: &str) -> String {
    text.lines().map(|l| wrap(l, WIDTH).join("\n")).collect::<Vec<_>>().join("\n")
}

/// `text` in pieces of at most `width` characters, broken at spaces; a word longer than
/// `width` stands alone on its piece.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut pieces = vec![String::new()];
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let last = pieces.last_mut().expect("one piece at least");
        let len = last.chars().count();
        if len == 0 {
            last.push_str(word);
        } else if len + 1 + word.chars().count() <= width {
            last.push(' ');
            last.push_str(word);
        } else {
            pieces.push(word.to_string());
        }
    }
    pieces
}

/// A clock as written: exact to the kHz when it is (a PLL's 16.125 MHz), else to 10 kHz
/// (33.3333 MHz as 33.33), without trailing zeros.
pub(crate) fn mhz(f: f64) -> String {
    let khz = f * 1000.0;
    let s = if (khz - khz.round()).abs() < 1e-6 { format!("{f:.3}") } else { format!("{f:.2}") };
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn columns_are_padded_to_their_widest_cell() {
        let rows =
            [row(&["name", "n", "note"]), row(&["abc", "1234", "free text"]), row(&["x", "5", ""])];
        let got = lines(&rows, &[Align::Left, Align::Right, Align::Free]);
        assert_eq!(got, ["name     n  note", "abc   1234  free text", "x        5"]);
    }

    #[test]
    fn widths_count_characters_not_bytes() {
        let rows = [row(&["µs", "a"]), row(&["ns", "b"])];
        assert_eq!(lines(&rows, &[Align::Left, Align::Left]), ["µs  a", "ns  b"]);
    }

    /// Free text past the width wraps under itself, every line within it, no word lost.
    #[test]
    fn long_free_text_wraps_under_its_column() {
        let text = "word ".repeat(40);
        let rows = [row(&["name", "note"]), row(&["abcdef", text.trim_end()])];
        let got = lines(&rows, &[Align::Left, Align::Free]);
        let physical: Vec<&str> = got[1].lines().collect();
        assert!(physical.len() > 1, "{got:?}");
        assert!(physical.iter().all(|l| l.chars().count() <= WIDTH), "{got:?}");
        assert!(physical[1..].iter().all(|l| l.starts_with(&" ".repeat(8))), "{got:?}");
        let words: usize = physical.iter().map(|l| l.split_whitespace().count()).sum();
        assert_eq!(words, 41, "the row's name and its forty words");
    }

    /// Where the columns before it leave a free column too little room, its text starts on
    /// the next line, indented, with the whole width.
    #[test]
    fn a_squeezed_free_column_hangs_below_its_row() {
        let wide = "x".repeat(80);
        let rows = [row(&[&wide, "one two three four five six seven eight nine ten"])];
        let got = lines(&rows, &[Align::Left, Align::Free]);
        assert_eq!(got[0], format!("{wide}\n    one two three four five six seven eight nine ten"));
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_keeps_long_words_whole() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("abcdefgh ij", 4), ["abcdefgh", "ij"]);
        assert_eq!(wrap("", 4), [""]);
        assert_eq!(paragraph(&format!("{}\nb", "a ".repeat(60))).lines().count(), 3);
    }

    /// Clocks are written as exactly as the kHz allows, without trailing zeros.
    #[test]
    fn clocks_are_written_to_the_khz_they_have() {
        use super::mhz;
        assert_eq!(mhz(16.125), "16.125");
        assert_eq!(mhz(33.3333), "33.33");
        assert_eq!(mhz(25.0), "25");
        assert_eq!(mhz(37.5), "37.5");
        assert_eq!(mhz(12.5), "12.5");
    }
}
