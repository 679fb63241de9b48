//! The firmware driver's host tests, one binary, a module per topic.

mod digits;
mod driver;
mod end_to_end;
