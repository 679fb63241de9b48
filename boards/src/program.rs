//! iceprog and openFPGALoader: what may be loaded onto a board. A bitstream is loaded only
//! beside the `report.json` of the build that wrote it: for this board, byte for byte the
//! bitstream the report names, and (unless forced) from a build that met timing, since a
//! design clocked past its fmax can compute wrong results that nothing on the link would catch.

use std::path::{Path, PathBuf};

use crate::board::Board;
use crate::report::{Bitstream, Report};

/// Why a build directory's bitstream is not loaded.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(
        "{report} not found: {dir} is not the output of `systole board build` (run `systole \
         board build {board} -o {dir}`)"
    )]
    NoReport { report: String, dir: String, board: String },
    /// The report or the bitstream could not be read, or the report did not parse.
    #[error("{path}: {error}")]
    Unreadable { path: String, error: String },
    #[error("{dir} holds a build for {built_for}, not {board}")]
    OtherBoard { dir: String, built_for: String, board: String },
    #[error("{path} not found, though {report} describes it: its build did not finish; rebuild")]
    NoBitstream { path: String, report: String },
    #[error(
        "{path} is not the bitstream {report} describes ({have} bytes, SHA-256 {have_sha}; the \
         report says {want} bytes, {want_sha}): it was changed after its build, or a build \
         stopped while replacing it; rebuild"
    )]
    Changed {
        path: String,
        report: String,
        have: u64,
        have_sha: String,
        want: u64,
        want_sha: String,
    },
    #[error(
        "{report} records no checksum of its bitstream (it predates them), so the bitstream \
         cannot be matched to it: rebuild, or pass --force to load {path} unchecked"
    )]
    Unrecorded { path: String, report: String },
    #[error(
        "the build in {dir} missed timing ({fmax:.2} MHz achieved for {target} MHz): a board \
         clocked past its fmax can compute wrong results. Rebuild with a lower --clock-mhz or a \
         smaller array, or pass --force to load it anyway"
    )]
    Timing { dir: String, fmax: f64, target: f64 },
}

/// The bitstream in `dir` that may be loaded onto `board`, with its report. `force` loads one
/// whose build missed timing, or whose report predates bitstream checksums; a bitstream that is
/// missing, for another board, or not the one its report describes is never loaded.
pub fn loadable(board: &Board, dir: &Path, force: bool) -> Result<(PathBuf, Report), ProgramError> {
    let report_path = dir.join("report.json");
    let show = |p: &Path| p.display().to_string();
    let json = std::fs::read_to_string(&report_path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            ProgramError::NoReport {
                report: show(&report_path),
                dir: show(dir),
                board: board.name.into(),
            }
        } else {
            ProgramError::Unreadable { path: show(&report_path), error: e.to_string() }
        }
    })?;
    let report = Report::from_json(&json)
        .map_err(|e| ProgramError::Unreadable { path: show(&report_path), error: e.to_string() })?;
    if report.board != board.name {
        return Err(ProgramError::OtherBoard {
            dir: show(dir),
            built_for: report.board,
            board: board.name.into(),
        });
    }
    let path = dir.join(board.bitstream_name());
    let bits = match std::fs::read(&path) {
        Ok(bits) => bits,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProgramError::NoBitstream { path: show(&path), report: show(&report_path) })
        }
        Err(e) => return Err(ProgramError::Unreadable { path: show(&path), error: e.to_string() }),
    };
    match &report.bitstream {
        Some(want) => {
            let have = Bitstream::of(board.bitstream_name(), &bits);
            if have != *want {
                return Err(ProgramError::Changed {
                    path: show(&path),
                    report: show(&report_path),
                    have: have.bytes,
                    have_sha: have.sha256,
                    want: want.bytes,
                    want_sha: want.sha256.clone(),
                });
            }
        }
        None if !force => {
            return Err(ProgramError::Unrecorded { path: show(&path), report: show(&report_path) })
        }
        None => {}
    }
    if !report.timing_met && !force {
        return Err(ProgramError::Timing {
            dir: show(dir),
            fmax: report.fmax_mhz,
            target: report.target_mhz,
        });
    }
    Ok((path, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::{ICEBREAKER, ULX3S_85F};
    use crate::nextpnr::Pnr;

    /// A build directory as `board build` leaves it: a bitstream and the report naming it.
    fn build_dir(board: &Board, timing_met: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let bits = b"a bitstream".to_vec();
        std::fs::write(dir.path().join(board.bitstream_name()), &bits).unwrap();
        let report = Report {
            board: board.name.into(),
            device: board.device.join(" "),
            built: None,
            pnr: Pnr::default(),
            luts: 1,
            luts_available: 2,
            flip_flops: 1,
            bram: 0,
            bram_available: 1,
            spram: 0,
            dsps: 0,
            dsps_available: 1,
            fmax_mhz: if timing_met { 13.0 } else { 11.0 },
            target_mhz: 12.0,
            timing_met,
            critical_path: None,
            bitstream: Some(Bitstream::of(board.bitstream_name(), &bits)),
        };
        write_report(dir.path(), &report);
        dir
    }

    fn write_report(dir: &Path, report: &Report) {
        std::fs::write(dir.join("report.json"), serde_json::to_string(report).unwrap()).unwrap();
    }

    fn report_of(dir: &Path) -> Report {
        Report::from_json(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
    }

    #[test]
    fn a_whole_build_that_met_timing_is_loadable() {
        let dir = build_dir(&ICEBREAKER, true);
        let (path, report) = loadable(&ICEBREAKER, dir.path(), false).unwrap();
        assert_eq!(path, dir.path().join("systole.bin"));
        assert!(report.timing_met);
    }

    #[test]
    fn a_build_that_missed_timing_needs_force() {
        let dir = build_dir(&ICEBREAKER, false);
        let err = loadable(&ICEBREAKER, dir.path(), false).unwrap_err().to_string();
        assert!(err.contains("missed timing (11.00 MHz achieved for 12 MHz)"), "{err}");
        assert!(err.contains("--force"), "{err}");
        assert!(loadable(&ICEBREAKER, dir.path(), true).is_ok());
    }

    #[test]
    fn a_changed_or_missing_bitstream_is_never_loaded() {
        let dir = build_dir(&ICEBREAKER, true);
        let bin = dir.path().join("systole.bin");
        std::fs::write(&bin, b"a bitstreaM").unwrap();
        for force in [false, true] {
            let err = loadable(&ICEBREAKER, dir.path(), force).unwrap_err().to_string();
            assert!(err.contains("is not the bitstream"), "{err}");
            assert!(err.contains("11 bytes"), "{err}");
        }
        std::fs::remove_file(&bin).unwrap();
        let err = loadable(&ICEBREAKER, dir.path(), true).unwrap_err().to_string();
        assert!(err.contains("systole.bin not found"), "{err}");
    }

    #[test]
    fn another_boards_build_or_no_report_is_refused() {
        let dir = build_dir(&ICEBREAKER, true);
        let err = loadable(&ULX3S_85F, dir.path(), true).unwrap_err().to_string();
        assert!(err.contains("holds a build for icebreaker, not ulx3s"), "{err}");
        std::fs::write(dir.path().join("report.json"), "{").unwrap();
        let err = loadable(&ICEBREAKER, dir.path(), true).unwrap_err().to_string();
        assert!(err.contains("report.json: board report"), "{err}");
        std::fs::remove_file(dir.path().join("report.json")).unwrap();
        let err = loadable(&ICEBREAKER, dir.path(), true).unwrap_err().to_string();
        assert!(err.contains("is not the output of `systole board build`"), "{err}");
    }

    #[test]
    fn a_report_without_a_checksum_needs_force() {
        let dir = build_dir(&ICEBREAKER, true);
        let mut report = report_of(dir.path());
        report.bitstream = None;
        write_report(dir.path(), &report);
        let err = loadable(&ICEBREAKER, dir.path(), false).unwrap_err().to_string();
        assert!(err.contains("records no checksum"), "{err}");
        assert!(loadable(&ICEBREAKER, dir.path(), true).is_ok());
    }
}
