//! The `systole` CLI's library, in layers: [`cli`] (every clap type; the only module that knows
//! the command line), [`cmd`] (one file per subcommand, turning parsed flags into plain configs),
//! and the services below that take only plain types: the machines, training ([`train`],
//! [`fit`], [`gpu`]), models and data sets, the bench, the readers of the files a command takes
//! (`.npy`, CSV and IDX data sets, safetensors models) and the outputs it writes. The fuzz
//! targets (`fuzz/`) and other front ends reach the same code the command runs; `src/main.rs`
//! only parses and dispatches. `scripts/import-cycles` keeps the layers free of circles.

pub mod bench;
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
