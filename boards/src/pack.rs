//! icepack and ecppack: the routed design to a bitstream.

use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{ToolError, ECPPACK, ICEPACK};

/// Packs `dir/routed.*` into the bitstream `dir/file`.
pub fn pack(board: &Board, dir: &Path, file: &str) -> Result<(), ToolError> {
    match board.family {
        Family::Ice40 => ICEPACK.run(dir, &["routed.asc", file])?,
        Family::Ecp5 => ECPPACK.run(dir, &["--compress", "routed.config", file])?,
    };
    Ok(())
}
