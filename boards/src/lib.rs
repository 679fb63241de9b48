//! # systole-boards
//!
//! Bitstreams for FPGA dev boards through the open toolchain, with honest resource and timing
//! reports. One module per tool (STYLE point 10), one folder per board in this crate's directory
//! (pin constraints and the top wrapper around `systole_top`).
//!
//! * [`board`]: the boards, their parts, pins and default builds.
//! * [`bridge`]: their USB-serial bridges, and the rate each build runs its UART at.
//! * [`knobs`]: what a build can vary (the array, its clock, the machine's options): one type
//!   that a default build holds, `board build`'s flags set and a report records.
//! * [`policy`]: what `board build` makes of a board's default build and the knobs asked.
//! * [`pe_products`], [`pnr`]: where a build forms its PEs' products, and how nextpnr places
//!   and routes it (seed, router, aim): what a default build names and a report records.
//! * [`blocks`]: where a build's logic goes, by block of `systole_top`.
//! * [`tool`]: finding and running the tools; a missing one names its package.
//! * [`yosys`], [`nextpnr`], [`pack`]: one module per tool of the flow.
//! * [`report`]: utilisation and fmax from nextpnr's JSON report, and the bitstream's checksum.
//! * [`built`]: what a report records of the accelerator, and the machine read back from it.
//! * [`program`]: which bitstream may be loaded onto a board.
//! * [`flow`]: synthesis, place and route, packing, report.
//! * [`netlist`]: a build's synthesized netlist as Verilog a simulator runs.

pub mod blocks;
pub mod board;
pub mod bridge;
pub mod built;
pub mod clock;
pub mod flow;
pub mod instances;
pub mod knobs;
pub mod netlist;
pub mod nextpnr;
pub mod pack;
pub mod pe_products;
pub mod pnr;
pub mod policy;
pub mod program;
pub mod report;
pub mod serial;
pub mod tool;
pub mod wrapper;
pub mod yosys;

pub use board::{Board, Family, Preset};
pub use built::Built;
pub use flow::{build, Design};
pub use knobs::Knobs;
pub use report::Report;
pub use tool::ToolError;
