//! One integration binary, one module per topic.

mod machines;
