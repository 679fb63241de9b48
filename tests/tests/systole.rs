//! One integration binary, one module per topic.

mod cli;
mod hardware;
mod isa;
mod link;
mod machines;
mod numerics;
mod training;
