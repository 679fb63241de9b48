//! One file per subcommand: each turns its parsed arguments ([`crate::cli`]) into the plain
//! configs the services below take, runs them, and prints what the command prints. Nothing
//! below this layer knows the command line.

pub mod bench;
pub mod board;
pub mod firmware;
pub mod gemm;
pub mod hdl;
pub mod predict;
pub mod sim;
pub mod train;
