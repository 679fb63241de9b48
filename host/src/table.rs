//! Plain-text tables for the terminal: each column padded to its widest cell, columns two
//! spaces apart.

/// How a column's cells are padded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
    /// Not padded: a last column of free-running text.
    Free,
}

/// The lines of a table of `rows` (a header is a row like any other), each without its
/// newline and trailing spaces. `align` gives each column's padding; cells are counted in
/// characters. A row shorter than `align` leaves its last columns out.
pub fn lines<R: AsRef<[String]>>(rows: &[R], align: &[Align]) -> Vec<String> {
    let width = |c: usize| {
        rows.iter().filter_map(|r| r.as_ref().get(c)).map(|s| s.chars().count()).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..align.len()).map(width).collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .as_ref()
                .iter()
                .zip(align.iter().zip(&widths))
                .map(|(cell, (a, &w))| match a {
                    Align::Left => format!("{cell:<w$}"),
                    Align::Right => format!("{cell:>w$}"),
                    Align::Free => cell.clone(),
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
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
}
