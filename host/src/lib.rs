//! The `systole` CLI's library: every subcommand's code, and the readers of the files it takes
//! (`.npy`, CSV data sets, safetensors models), so the fuzz targets (`fuzz/`) and other tools
//! reach the same code the command runs. `src/main.rs` only parses and dispatches.

pub mod bench;
pub mod board;
pub mod cli;
pub mod cmd;
pub mod dataset;
pub mod fit;
pub mod gpu;
pub mod limits;
pub mod machines;
pub mod model;
pub mod net_file;
pub mod netlist;
pub mod network;
pub mod npy;
pub mod outputs;
pub mod program_file;
pub mod progress;
pub mod report;
pub mod sim;
pub mod table;
pub mod train;
pub mod train_dtype;
pub mod verbose;
