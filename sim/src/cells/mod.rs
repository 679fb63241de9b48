//! Models of the FPGA cells a Verilog text instantiates, for Verilator: Yosys' own models of
//! the iCE40 cells ([`ice40`]), and of the ECP5 cells with this crate's behaviour for the three
//! Yosys declares without any ([`ecp5`]).

pub mod ecp5;
mod ecp5_settings;
pub mod ice40;

pub use ecp5::with_ecp5_models;
pub use ice40::{tie_high_defaults, with_cell_models};

/// The module a line declares (`module NAME (` or `module NAME(`), if it declares one.
pub(crate) fn module_name(line: &str) -> Option<&str> {
    line.strip_prefix("module ")?.split([' ', '(']).next()
}

/// The names of the cells `verilog` instantiates from `library` (a line whose first word is
/// the cell's name and goes on) and does not define itself.
pub(crate) fn instantiated<'a>(verilog: &str, library: &'a str) -> Vec<&'a str> {
    let defined = |text: &str, name: &str| {
        text.contains(&format!("\nmodule {name} (")) || text.contains(&format!("\nmodule {name}("))
    };
    let mut used: Vec<&str> = Vec::new();
    let names: Vec<&str> = library.lines().filter_map(module_name).collect();
    // An instance's line starts with the cell's name and goes on (` #(` or the instance's).
    let first_words: std::collections::BTreeSet<&str> = verilog
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let first = words.next()?;
            words.next().map(|_| first)
        })
        .collect();
    for name in names {
        if first_words.contains(name) && !defined(verilog, name) && !used.contains(&name) {
            used.push(name);
        }
    }
    used
}

/// Cell instances in a netlist Yosys wrote: the lines that open one, whose first word is a
/// cell's name (upper case, as every iCE40 and ECP5 cell is named) and go on.
pub fn instance_count(netlist: &str) -> usize {
    netlist
        .lines()
        .filter(|l| {
            let mut words = l.split_whitespace();
            let cell = words.next().unwrap_or_default();
            words.next().is_some()
                && cell.starts_with(|c: char| c.is_ascii_uppercase())
                && cell.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .count()
}
