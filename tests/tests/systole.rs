//! One integration binary, one module per topic.

mod board_machine;
mod boundaries;
mod cli;
mod cli_audit;
mod cli_firmware;
mod cli_flags;
mod cli_limits;
mod cli_outputs;
mod cli_sim;
mod cli_train;
mod conformance;
mod cosim;
mod docs;
mod faults;
mod gpu;
mod hardware;
mod link_rate;
