//! icepack and ecppack: the routed design to a bitstream.

use std::path::Path;

use crate::board::{Board, Family};
use crate::tool::{ToolError, ECPPACK, ICEPACK};

/// Packs `dir/routed.*` into `dir/<bitstream>`.
pub fn pack(board: &Board, dir: &Path) -> Result<(), ToolError> {
    match board.family {
        Family::Ice40 => ICEPACK.run(dir, &["routed.asc", board.bitstream_name()])?,
        Family::Ecp5 => {
            ECPPACK.run(dir, &["--compress", "routed.config", board.bitstream_name()])?
        }
    };
    Ok(())
}
