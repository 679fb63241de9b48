//! Core's own tests, one binary with a module per topic: `cargo test -p systole-core` checks the
//! golden model without building the hardware. Tests of other machines against it live in
//! `systole-tests`.

mod banks;
mod byte_port;
mod cnn;
mod cnn_common;
mod cnn_compiled;
mod finite_differences;
mod hazards;
mod isa;
mod last_row;
mod link;
mod machines;
mod modules;
mod numerics;
mod pooled_compiled;
mod read_stages;
mod relu_placements;
mod reorder;
mod sdram;
mod sdram_port;
mod training;
mod updates;
