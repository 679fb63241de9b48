//! `systole firmware blob --board` against the digits blobs the Pico example embeds
//! (`firmware/pico-digits/blobs`, built by `firmware/tests/digits.rs`): what the CLI builds for
//! a board and what the firmware ships for it are one plan.
//!
//! Like cli.rs, these run the `systole` binary: `cargo build -p systole-host` first.

use std::fs;
use std::path::Path;

use systole_boards::board::{by_name, Board};
use systole_core::blob::Blob;
use systole_tests::{systole, Scratch};

/// Each committed digits blob with the board its file is named for (`digits-<board>-int8.blob`).
fn committed_blobs() -> Vec<(Board, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware/pico-digits/blobs");
    let mut blobs = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(board) = name.strip_prefix("digits-").and_then(|n| n.strip_suffix("-int8.blob"))
        else {
            continue;
        };
        let board = by_name(board).unwrap_or_else(|| panic!("{name}: no board {board}"));
        blobs.push((board, fs::read(dir.join(&name)).unwrap()));
    }
    blobs
}

/// `firmware blob --board ulx3s-25f` (and `alchitry-cu`, `icebreaker`) refused the 64-32-10
/// digits MLP whose committed blobs the Pico runs on those boards: the INT8 plan kept f32 master
/// weights it never read, 12,736 bytes of DRAM where the boards have 4,096 (DECISIONS 132). Now
/// the CLI builds, for every board with a committed blob, a blob of that network that is the
/// committed one's but for the trained values: its target (the board's default build and the
/// DRAM it needs, which the board has), program length, cycles, buffers and DRAM image layout.
#[test]
fn firmware_blob_refused_the_boards_their_committed_digits_blobs_run_on() {
    let s = Scratch::new();
    let model = s.path("digits.safetensors");
    let model = model.to_str().unwrap();
    let args = ["train", "--dtype", "f32", "--epochs", "1", "--hidden", "32", "--save", model];
    let out = systole(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let blobs = committed_blobs();
    assert!(blobs.len() >= 4, "the committed digits blobs, one per board: {}", blobs.len());
    for (board, committed) in blobs {
        let path = s.path(&format!("{}.blob", board.name));
        let (name, out_path) = (board.name, path.to_str().unwrap());
        let args = ["firmware", "blob", "--model", model, "--dtype", "int8", "--board", name];
        let out = systole(args.iter().chain(&["-o", out_path]));
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let built = fs::read(&path).unwrap();
        let (ours, theirs) = (Blob::parse(&built).unwrap(), Blob::parse(&committed).unwrap());
        assert_eq!(ours.target, theirs.target, "{name}: the target and the DRAM it needs");
        assert!(ours.target.dram_bytes as usize <= board.memories.dram_bytes, "{name}");
        assert_eq!(ours.target.config, board.default_config(), "{name}");
        let buffers =
            |b: &Blob| (b.batch, b.input.addr, b.input.cols, b.logits.addr, b.logits.cols);
        assert_eq!(buffers(&ours), buffers(&theirs), "{name}: input and logits");
        let program = |b: &Blob| (b.program_words(), b.expected_cycles);
        assert_eq!(program(&ours), program(&theirs), "{name}: program words and cycles");
        let layout = |b: &Blob| b.writes().map(|w| (w.addr, w.data.len())).collect::<Vec<_>>();
        assert_eq!(layout(&ours), layout(&theirs), "{name}: the DRAM image's layout");
        assert_eq!((built.len(), ours.feature_scale), (committed.len(), theirs.feature_scale));
    }
}
