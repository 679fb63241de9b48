//! A report `systole bench --json` wrote, read back (`bench --show`): its command, its host and
//! its rows, so results measured elsewhere (a GPU machine, a board) print as the bench prints
//! them, and docs quote them through the binary.

use std::path::Path;

use anyhow::anyhow;
use serde::Deserialize;

use super::Row;
use crate::limits::read_file;

/// What `--show` needs of a saved report; the rest of the JSON is left unread.
#[derive(Debug, Deserialize)]
pub struct Saved {
    pub command: String,
    pub host: String,
    pub rows: Vec<Row>,
}

impl Saved {
    pub fn read(path: &Path) -> anyhow::Result<Saved> {
        let bytes = read_file(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| anyhow!("{}: not a report of `systole bench --json`: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::Saved;

    /// A committed report reads back whole; a file of another kind is refused by name.
    #[test]
    fn committed_reports_read_back_and_others_are_refused() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/results/h100-2026-11-27/");
        let saved = Saved::read(format!("{root}bench.json").as_ref()).unwrap();
        assert!(saved.command.contains("systole bench"), "{}", saved.command);
        assert!(saved.rows.iter().any(|r| r.machine.contains("NVIDIA H100")));
        let e = Saved::read(format!("{root}lenet-gpu-f32.json").as_ref()).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("lenet-gpu-f32.json: not a report of `systole bench --json`"), "{e}");
    }
}
