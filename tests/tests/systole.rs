//! One integration binary, one module per topic.

mod cli;
mod isa;
mod machines;
mod numerics;
mod training;
