//! Verilog for one [`TopConfig`] (the whole machine) or one [`ArrayConfig`] (the array
//! datapath alone): generation, module de-duplication, and what the manifest records.
//!
//! rust-hdl writes one module per instance (`top$pes$17$mac$bf16$0$add`, ...), so an R x C array
//! repeats every PE body R x C times. [`dedup_modules`] merges modules whose bodies are identical
//! up to their names, deepest first (children are merged before the parents that instantiate
//! them), and gives each survivor a readable name from its path; the top becomes
//! [`TOP_MODULE`].

use std::collections::{BTreeMap, HashMap};

use rust_hdl::prelude::*;
use serde::Serialize;
use systole_core::{ArrayConfig, ConfigError, Dataflow, DramPort, Dtype, Schedule};

use crate::array::{ArrayOs, ArrayWs};
use crate::top::{SystoleTop, SystoleTopDecoupled, TopConfig, MAX_DRAM_BYTES, RTL_REVISION};

/// Name of the emitted top module.
pub const TOP_MODULE: &str = "systole_top";
/// Name of the top module [`emit_array`] writes.
pub const ARRAY_MODULE: &str = "systole_array";
/// Most PEs `emit` builds: rust-hdl holds every instance in memory before de-duplication.
pub const MAX_EMIT_PES: u64 = 64 * 64;

/// Why a config cannot be emitted.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    #[error("invalid config: {0}")]
    Config(ConfigError),
    #[error("{rows} x {cols} = {pes} PEs: emission is limited to {MAX_EMIT_PES} PEs")]
    TooLarge { rows: u16, cols: u16, pes: u64 },
    #[error("generated Verilog has no module `{0}`")]
    Malformed(String),
    #[error(
        "dram_bytes = {0}: an emitted DRAM holds 1 to {MAX_DRAM_BYTES} bytes; the limit is 16 \
         MiB"
    )]
    Dram(usize),
    #[error("fifo_depth = {0}: the instruction FIFO holds 1 to 65,535 words")]
    Fifo(usize),
    #[error("uart_divisor = {0}: the UART needs at least 4 clock cycles per bit")]
    Uart(u16),
    #[error(
        "schedule = {}: the array alone is emitted for the blocking schedule (its ports are a \
         swap, not weight-bank tags); emit the whole machine instead",
        .0.name()
    )]
    Schedule(Schedule),
    #[error(
        "add_stages = {0} with the decoupled schedule: the decoupled top has no staged lane add \
         yet (its stream unit and scoreboard time results without it); build it blocking"
    )]
    StagedAddDecoupled(u8),
    #[error(
        "head_register with the decoupled schedule: the decoupled top always registers its \
         candidate after the FIFO; the option is the blocking top's"
    )]
    HeadRegisterDecoupled,
    #[error(
        "program checks off with the decoupled schedule: the decoupled top forms each word's \
         footprint beside its checks as it queues it, and is built with them; leaving the \
         checks to the host is the blocking top's option (for small parts)"
    )]
    ProgramChecksDecoupled,
    #[error(
        "PE pairs (two INT8 products per iCE40 DSP) need an INT8 weight-stationary array of \
         two-stage PEs; this one is {dtype}, {dataflow}, {pe_stages} stage(s): use --dtype int8 \
         --pe-stages 2 (weight-stationary), or products one to a DSP"
    )]
    PePairs { dtype: &'static str, dataflow: &'static str, pe_stages: u8 },
    #[error(
        "adder trees need an INT8 weight-stationary array under the blocking schedule (INT8 \
         sums wrap, so their order is free, and a blocking swap waits for the array to empty); \
         this one is {dtype}, {dataflow}, {schedule}: build it systolic"
    )]
    AdderTree { dtype: &'static str, dataflow: &'static str, schedule: &'static str },
    #[error("rtl_revision = {0}: the RTL's revisions are 1 to {RTL_REVISION}")]
    RtlRevision(u8),
    #[error(
        "dram_port = sdram on the decoupled schedule: the RTL's SDRAM port is behind the \
         blocking machine's DRAM port only so far; the functional and cycle machines run it, \
         or use schedule = blocking"
    )]
    SdramPort,
    #[error(
        "a scratchpad in SPRAM holds up to {} rows of up to {} INT8 lanes on a machine timed \
         for its single port (single_port_spad) without scratchpad write or read stages; this \
         one is {dtype}, {lanes} lanes of {depth} rows, single_port_spad {single}, write stage \
         {write_stage}, {read_stages} read stage(s)",
        crate::mem::SPRAM_WORDS,
        crate::mem::UP5K_SPRAMS * crate::mem::LANES_PER_SPRAM
    )]
    Spram {
        dtype: &'static str,
        lanes: usize,
        depth: u32,
        single: bool,
        write_stage: bool,
        read_stages: u8,
    },
}

/// One memory inside the emitted top, for the manifest and the cost table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryInfo {
    pub name: &'static str,
    /// Words of one copy and their bits (a row, for the row memories).
    pub words: u64,
    pub word_bits: u64,
    /// Identical copies (one per read port).
    pub copies: u64,
    /// Block RAM lanes per copy (a row memory is one RAM per element).
    pub lanes: u64,
}

impl MemoryInfo {
    pub fn bits(&self) -> u64 {
        self.words * self.word_bits * self.copies
    }
}

/// One port of the top module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Port {
    pub name: String,
    pub direction: &'static str,
    pub bits: usize,
}

/// What `emit` produced.
#[derive(Clone, Debug)]
pub struct Emitted {
    pub verilog: String,
    pub ports: Vec<Port>,
    /// Modules after de-duplication.
    pub modules: usize,
    /// Modules rust-hdl generated (one per instance).
    pub instances: usize,
    /// The memories (none for the array alone).
    pub memories: Vec<MemoryInfo>,
}

fn check_array(config: &ArrayConfig) -> Result<(), EmitError> {
    config.validate().map_err(EmitError::Config)?;
    if config.pe_count() > MAX_EMIT_PES {
        return Err(EmitError::TooLarge {
            rows: config.rows,
            cols: config.cols,
            pes: config.pe_count(),
        });
    }
    Ok(())
}

/// Checks a machine config: the array's, and the sizes the hardware adds.
pub fn check(top: &TopConfig) -> Result<(), EmitError> {
    check_array(&top.array)?;
    if top.dram_bytes == 0 || top.dram_bytes > MAX_DRAM_BYTES {
        return Err(EmitError::Dram(top.dram_bytes));
    }
    if top.fifo_depth == 0 || top.fifo_depth > 65535 {
        return Err(EmitError::Fifo(top.fifo_depth));
    }
    if top.uart_divisor < 4 {
        return Err(EmitError::Uart(top.uart_divisor));
    }
    if !(1..=RTL_REVISION).contains(&top.rtl_revision) {
        return Err(EmitError::RtlRevision(top.rtl_revision));
    }
    if top.array.dram_port == DramPort::Sdram && top.array.schedule == Schedule::Decoupled {
        return Err(EmitError::SdramPort);
    }
    if top.array.add_stages > 1 && top.array.schedule == Schedule::Decoupled {
        return Err(EmitError::StagedAddDecoupled(top.array.add_stages));
    }
    let a = &top.array;
    let pairable =
        a.dtype == Dtype::Int8 && a.dataflow == Dataflow::WeightStationary && a.pe_stages == 2;
    if top.pe_pairs && !pairable {
        return Err(EmitError::PePairs {
            dtype: a.dtype.name(),
            dataflow: a.dataflow.short_name(),
            pe_stages: a.pe_stages,
        });
    }
    if top.head_register && a.schedule == Schedule::Decoupled {
        return Err(EmitError::HeadRegisterDecoupled);
    }
    if !top.program_checks && a.schedule == Schedule::Decoupled {
        return Err(EmitError::ProgramChecksDecoupled);
    }
    let spram_fits = a.dtype == Dtype::Int8
        && a.spad_width() <= crate::mem::UP5K_SPRAMS * crate::mem::LANES_PER_SPRAM
        && a.spad_depth as usize <= crate::mem::SPRAM_WORDS
        && a.single_port_spad
        && !top.spad_write_stage
        && a.read_stages == 0;
    if top.spad_spram && !spram_fits {
        return Err(EmitError::Spram {
            dtype: a.dtype.name(),
            lanes: a.spad_width(),
            depth: a.spad_depth,
            single: a.single_port_spad,
            write_stage: top.spad_write_stage,
            read_stages: a.read_stages,
        });
    }
    if top.adder_tree && !crate::array_tree::tree_fits(a) {
        return Err(EmitError::AdderTree {
            dtype: a.dtype.name(),
            dataflow: a.dataflow.short_name(),
            schedule: a.schedule.name(),
        });
    }
    Ok(())
}

/// The memories of a machine config.
pub fn memories(top: &TopConfig) -> Vec<MemoryInfo> {
    let a = &top.array;
    let banks = top.dram_banks() as u64;
    let decoupled = a.schedule == Schedule::Decoupled;
    let acc = |name, words| MemoryInfo {
        name,
        words,
        word_bits: a.cols as u64 * 32,
        copies: 2,
        lanes: a.cols as u64,
    };
    let mut memories = vec![MemoryInfo {
        name: "scratchpad",
        words: a.spad_depth as u64,
        word_bits: a.spad_width() as u64 * 8 * a.dtype.elem_bytes() as u64,
        // One copy with a single port (`ArrayConfig::single_port_spad`), else one a read port.
        copies: if a.single_port_spad { 1 } else { 2 },
        lanes: a.spad_width() as u64,
    }];
    if decoupled {
        // Two banks (`acc_banks.rs`); a one-row accumulator's second bank keeps one unused row.
        let split = a.acc_depth.div_ceil(2) as u64;
        memories.push(acc("accumulator_bank_0", split));
        memories.push(acc("accumulator_bank_1", (a.acc_depth as u64 - split).max(1)));
    } else {
        memories.push(acc("accumulators", a.acc_depth as u64));
    }
    let one = |name, words, word_bits| MemoryInfo { name, words, word_bits, copies: 1, lanes: 1 };
    // The SDRAM is the board's chip, not a memory of the design.
    if a.dram_port != DramPort::Sdram {
        memories.push(MemoryInfo {
            name: "dram",
            words: (top.dram_bytes as u64).div_ceil(banks),
            word_bits: banks * 8,
            copies: 1,
            lanes: banks,
        });
    }
    // The words with their fault codes in block RAM, their extent bits in a RAM of their own
    // built in flip-flops on the iCE40 (`InstrFifo`): a memory to a generic synthesis.
    memories.push(one(
        "instruction_fifo",
        top.fifo_depth as u64,
        crate::controller::FIFO_ENTRY_BITS as u64 - 1,
    ));
    memories.push(one("instruction_fifo_extent_bits", top.fifo_depth as u64, 1));
    if decoupled {
        // Each word's footprint, for the scoreboard.
        memories.push(one(
            "instruction_footprints",
            top.fifo_depth as u64,
            crate::controller::FOOTPRINT_BITS as u64,
        ));
        // The load unit's transpose buffer: one distributed RAM per element lane.
        let w = a.spad_width();
        memories.push(MemoryInfo {
            name: "transpose_buffer",
            words: crate::transpose::Transposer::bank_words(w) as u64,
            word_bits: (w * 8 * a.dtype.elem_bytes()) as u64,
            copies: 1,
            lanes: w as u64,
        });
    }
    let buffer = crate::link::request_buffer_bytes(top.max_data() as u64) as u64;
    memories.push(one("request_buffer", buffer, 8));
    memories
}

/// The whole machine of `top` as Verilog with top module [`TOP_MODULE`].
pub fn emit(top: &TopConfig) -> Result<Emitted, EmitError> {
    check(top)?;
    let raw = match top.array.schedule {
        Schedule::Blocking => {
            let mut machine = SystoleTop::new(top);
            machine.connect_all();
            generate_verilog(&machine)
        }
        Schedule::Decoupled => {
            let mut machine = SystoleTopDecoupled::new(top);
            machine.connect_all();
            generate_verilog(&machine)
        }
    };
    let mut e = finish(&raw, TOP_MODULE)?;
    e.memories = memories(top);
    Ok(e)
}

/// The array datapath of `config` alone, with top module [`ARRAY_MODULE`]: its ports are the
/// skewed array's edges (`left_i`, `w_top_j` / `top_j`, `shift`, `swap` or `first`, `drain`,
/// `enable`, `out_j`), for driving the array directly in co-simulation.
pub fn emit_array(config: &ArrayConfig) -> Result<Emitted, EmitError> {
    check_array(config)?;
    if config.schedule != Schedule::Blocking {
        return Err(EmitError::Schedule(config.schedule));
    }
    let raw = match config.dataflow {
        Dataflow::WeightStationary => {
            let mut top = ArrayWs::new(config);
            top.connect_all();
            generate_verilog(&top)
        }
        Dataflow::OutputStationary => {
            let mut top = ArrayOs::new(config);
            top.connect_all();
            generate_verilog(&top)
        }
    };
    finish(&raw, ARRAY_MODULE)
}

/// The Verilog of one block (a memory, a lane) as the top module `top`, its ports named as its
/// fields, for co-simulating that block alone against its rust-hdl model.
pub fn block_verilog<B: Block>(mut block: B) -> String {
    block.connect_all();
    generate_verilog(&block)
}

fn finish(raw: &str, top: &str) -> Result<Emitted, EmitError> {
    let instances = split_modules(raw).len();
    let verilog = c_identifier_ports(&dedup_modules(raw, "top", top)?, top);
    let modules = split_modules(&verilog).len();
    let ports = top_ports(&verilog, top);
    Ok(Emitted { verilog, ports, modules, instances, memories: vec![] })
}

/// `(name, text)` of every module, in order.
fn split_modules(verilog: &str) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut current: Option<(String, String)> = None;
    for line in verilog.lines() {
        if let Some(rest) = line.strip_prefix("module ") {
            let name = rest.split('(').next().unwrap_or("").trim().to_string();
            current = Some((name, String::new()));
        }
        if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
        if line.starts_with("endmodule") {
            if let Some(m) = current.take() {
                out.push(m);
            }
        }
    }
    out
}

/// The module type instantiated on this line (`    <type> <instance>(`), if any.
fn instance_type(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if !line.starts_with("    ") || !t.ends_with('(') {
        return None;
    }
    let mut words = t.split_whitespace();
    let ty = words.next()?;
    let inst = words.next()?;
    (words.next().is_none() && inst.ends_with('(') && !ty.starts_with('.')).then_some(ty)
}

/// A module's text with its own name and its children's names replaced (by `rename`).
fn canonical(name: &str, text: &str, rename: &HashMap<String, String>, as_name: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if let Some(ty) = instance_type(line) {
            if let Some(new) = rename.get(ty) {
                out.push_str(&line.replacen(ty, new, 1));
                out.push('\n');
                continue;
            }
        }
        if line.starts_with("module ") || line.starts_with("endmodule") {
            out.push_str(&line.replacen(name, as_name, 1));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// A readable module name from an instance path: `top$pes$3$mac$bf16$0$add` -> `pes_mac_bf16_add`.
fn readable(path: &str) -> String {
    let parts: Vec<&str> =
        path.split('$').skip(1).filter(|p| !p.chars().all(|c| c.is_ascii_digit())).collect();
    if parts.is_empty() {
        "module".into()
    } else {
        parts.join("_")
    }
}

/// Merges modules whose bodies are identical up to their names; renames `top` to `new_top`.
pub fn dedup_modules(verilog: &str, top: &str, new_top: &str) -> Result<String, EmitError> {
    let modules = split_modules(verilog);
    if !modules.iter().any(|(n, _)| n == top) {
        return Err(EmitError::Malformed(top.into()));
    }
    let depth = |n: &str| n.matches('$').count();
    let mut order: Vec<usize> = (0..modules.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(depth(&modules[i].0)));
    let mut rename: HashMap<String, String> = HashMap::new();
    let mut by_body: HashMap<String, String> = HashMap::new();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut kept: Vec<(usize, String)> = vec![];
    for i in order {
        let (name, text) = &modules[i];
        let body = canonical(name, text, &rename, "@");
        if let Some(rep) = by_body.get(&body) {
            rename.insert(name.clone(), rep.clone());
            continue;
        }
        let new_name = if name == top {
            new_top.to_string()
        } else {
            let base = format!("{new_top}_{}", readable(name));
            let n = used.entry(base.clone()).or_insert(0);
            *n += 1;
            if *n == 1 {
                base
            } else {
                format!("{base}_{n}")
            }
        };
        by_body.insert(body, new_name.clone());
        rename.insert(name.clone(), new_name.clone());
        kept.push((i, new_name));
    }
    // Parents first, as rust-hdl writes them.
    kept.sort_by_key(|(i, _)| *i);
    let mut out = String::new();
    for (i, new_name) in kept {
        let (name, text) = &modules[i];
        out.push('\n');
        out.push_str(&canonical(name, text, &rename, &new_name));
    }
    Ok(out)
}

/// Renames the top's ports `left$3` -> `left_3`, so that every port is a C identifier (the
/// Verilated model exposes them to C++). Only the top module's text changes; tokens are matched
/// whole, so `left$1` never touches `left$10`.
fn c_identifier_ports(verilog: &str, top: &str) -> String {
    let modules = split_modules(verilog);
    let Some((_, top_text)) = modules.iter().find(|(n, _)| n == top) else {
        return verilog.to_string();
    };
    let ports: std::collections::HashSet<String> = top_ports_of(top_text)
        .into_iter()
        .filter(|p| p.name.contains('$'))
        .map(|p| p.name)
        .collect();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    let mut renamed = String::with_capacity(top_text.len());
    let mut token = String::new();
    for ch in top_text.chars().chain(std::iter::once('\n')) {
        if is_ident(ch) {
            token.push(ch);
            continue;
        }
        if ports.contains(&token) {
            renamed.push_str(&token.replace('$', "_"));
        } else {
            renamed.push_str(&token);
        }
        token.clear();
        renamed.push(ch);
    }
    renamed.pop();
    verilog.replacen(top_text.as_str(), &renamed, 1)
}

/// The ports of the top module, from its declarations.
fn top_ports(verilog: &str, top: &str) -> Vec<Port> {
    match split_modules(verilog).into_iter().find(|(n, _)| n == top) {
        Some((_, text)) => top_ports_of(&text),
        None => vec![],
    }
}

fn top_ports_of(text: &str) -> Vec<Port> {
    let mut ports = vec![];
    for line in text.lines() {
        let t = line.trim();
        let direction = if t.starts_with("input ") {
            "input"
        } else if t.starts_with("output ") {
            "output"
        } else {
            continue;
        };
        let name = t.trim_end_matches(';').split_whitespace().last().unwrap_or("").to_string();
        let bits = match (t.find('['), t.find(':')) {
            (Some(a), Some(b)) if a < b => t[a + 1..b].trim().parse::<usize>().map_or(1, |h| h + 1),
            _ => 1,
        };
        ports.push(Port { name, direction, bits });
    }
    ports
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::{DramPort, Dtype};

    #[test]
    fn dedup_keeps_one_body_per_kind() {
        let cfg = ArrayConfig::new(3, 3, Dtype::Bf16);
        let e = emit_array(&cfg).unwrap();
        assert!(e.instances > 9 * 8, "{} instances", e.instances);
        assert!(e.modules < 20, "{} modules after de-duplication", e.modules);
        assert!(e.verilog.contains("module systole_array("));
        assert!(!e.verilog.contains("module top"));
        // Every instantiated type is defined.
        let defined: Vec<String> = split_modules(&e.verilog).into_iter().map(|m| m.0).collect();
        for line in e.verilog.lines() {
            if let Some(ty) = instance_type(line) {
                assert!(defined.iter().any(|d| d == ty), "undefined module {ty}");
            }
        }
        yosys_validate("dedup", &e.verilog.replace("systole_array(", "top(")).unwrap();
        assert_eq!(e.ports.iter().filter(|p| p.name.starts_with("left")).count(), 3);
        assert!(e
            .ports
            .iter()
            .any(|p| p.name == "out_2" && p.bits == 32 && p.direction == "output"));
    }

    /// Every schedule, dataflow and dtype emits: each block's inputs are all driven (rust-hdl's
    /// connection check panics on one that is not, as on a decoded field left unjoined).
    #[test]
    fn every_kind_of_machine_emits() {
        use systole_core::{Dataflow, Schedule};
        for schedule in [Schedule::Blocking, Schedule::Decoupled] {
            for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
                for dtype in [Dtype::Int8, Dtype::Bf16] {
                    let array = ArrayConfig {
                        spad_depth: 16,
                        acc_depth: 8,
                        dataflow,
                        ..ArrayConfig::new(2, 3, dtype)
                    }
                    .with_schedule(schedule);
                    let top =
                        TopConfig { dram_bytes: 256, uart_divisor: 4, ..TopConfig::new(array) };
                    let out = emit(&top).unwrap();
                    assert!(out.verilog.contains("module systole_top("), "{array:?}");
                }
            }
        }
    }

    #[test]
    fn unbuildable_configs_are_refused() {
        let bad = TopConfig::new(ArrayConfig::new(0, 4, Dtype::Int8));
        assert!(matches!(emit(&bad), Err(EmitError::Config(_))));
        let big = ArrayConfig::new(128, 128, Dtype::Int8);
        assert!(matches!(emit_array(&big), Err(EmitError::TooLarge { .. })));
        let ok = TopConfig::new(ArrayConfig::new(2, 2, Dtype::Int8));
        assert!(matches!(check(&TopConfig { dram_bytes: 0, ..ok }), Err(EmitError::Dram(0))));
        // Refused before rust-hdl allocates its 8 bytes per DRAM byte.
        let huge = TopConfig { dram_bytes: u32::MAX as usize, ..ok };
        assert!(matches!(emit(&huge), Err(EmitError::Dram(_))));
        assert!(check(&TopConfig { dram_bytes: MAX_DRAM_BYTES, ..ok }).is_ok());
        assert!(check(&TopConfig { dram_bytes: MAX_DRAM_BYTES + 1, ..ok }).is_err());
        assert!(matches!(check(&TopConfig { fifo_depth: 0, ..ok }), Err(EmitError::Fifo(0))));
        assert!(matches!(check(&TopConfig { uart_divisor: 3, ..ok }), Err(EmitError::Uart(3))));
        for bad in [0, RTL_REVISION + 1] {
            let err = check(&TopConfig { rtl_revision: bad, ..ok }).unwrap_err();
            assert!(matches!(err, EmitError::RtlRevision(r) if r == bad), "{err}");
        }
        assert!(check(&TopConfig { rtl_revision: 1, ..ok }).is_ok());
        // Both machines register their memories' reads when asked.
        assert!(check(&TopConfig::new(ok.array.with_read_stages(1))).is_ok());
        let decoupled = ok.array.with_schedule(Schedule::Decoupled).with_read_stages(1);
        assert!(check(&TopConfig::new(decoupled)).is_ok());
        for add_stages in [2, 3] {
            let staged = ArrayConfig::new(2, 2, Dtype::Bf16).with_add_stages(add_stages);
            assert!(check(&TopConfig::new(staged)).is_ok());
            let decoupled = TopConfig::new(staged.with_schedule(Schedule::Decoupled));
            let err = check(&decoupled).unwrap_err();
            assert!(matches!(err, EmitError::StagedAddDecoupled(s) if s == add_stages));
            assert!(err.to_string().starts_with(&format!("add_stages = {add_stages} ")), "{err}");
        }
        // The RTL's SDRAM port is behind the blocking machine's DRAM port only so far.
        let sdram = ArrayConfig { clock_mhz: 50.0, ..ok.array }.with_dram_port(DramPort::Sdram);
        let blocking = TopConfig::new(sdram.with_schedule(Schedule::Blocking));
        assert!(check(&blocking).is_ok());
        // Its pins, two commands an array cycle at 50 MHz; no DRAM among its memories.
        let emitted = emit(&blocking).unwrap();
        for pin in ["sdram_ras_n_0", "sdram_ras_n_1", "sdram_dq_in_1", "sdram_dqm_0"] {
            assert!(emitted.ports.iter().any(|p| p.name == pin), "{pin}");
        }
        assert!(!emitted.ports.iter().any(|p| p.name == "sdram_ras_n_2"));
        assert!(memories(&blocking).iter().all(|m| m.name != "dram"));
        let decoupled = TopConfig::new(sdram.with_schedule(Schedule::Decoupled));
        let err = check(&decoupled).unwrap_err();
        assert!(matches!(err, EmitError::SdramPort), "{err}");
        assert!(err.to_string().starts_with("dram_port = sdram on the decoupled "), "{err}");
    }

    #[test]
    fn head_registers_are_the_blocking_tops_option() {
        let a = ArrayConfig::new(2, 2, Dtype::Bf16);
        let head = |a: ArrayConfig| TopConfig { head_register: true, ..TopConfig::new(a) };
        assert!(check(&head(a)).is_ok());
        let err = check(&head(a.with_schedule(Schedule::Decoupled))).unwrap_err();
        assert!(matches!(err, EmitError::HeadRegisterDecoupled));
        assert!(err.to_string().starts_with("head_register with the decoupled schedule"), "{err}");
    }

    #[test]
    fn leaving_the_checks_to_the_host_is_the_blocking_tops_option() {
        let a = ArrayConfig::new(2, 1, Dtype::Int8);
        let lean = |a: ArrayConfig| TopConfig { program_checks: false, ..TopConfig::new(a) };
        assert!(check(&lean(a)).is_ok());
        let err = check(&lean(a.with_schedule(Schedule::Decoupled))).unwrap_err();
        assert!(matches!(err, EmitError::ProgramChecksDecoupled));
        assert!(err.to_string().starts_with("program checks off with the decoupled"), "{err}");
    }

    /// The RTL builds the byte port (one bank) for the blocking machine in both dtypes; the
    /// decoupled one is refused by core's config check.
    #[test]
    fn the_byte_port_is_built_blocking() {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            let byte = ArrayConfig::new(8, 1, dtype).with_dram_port(DramPort::Byte);
            assert!(check(&TopConfig::new(byte)).is_ok());
            assert_eq!(TopConfig::new(byte).dram_banks(), 1);
            let decoupled = byte.with_schedule(Schedule::Decoupled);
            assert!(check(&TopConfig::new(decoupled)).is_err());
        }
    }

    /// A scratchpad in SPRAM: INT8, up to eight lanes of up to 16,384 rows, single-port timing,
    /// no write or read stage; each other machine is refused, naming what it has.
    #[test]
    fn a_scratchpad_in_spram_needs_the_single_port_machine_it_fits() {
        let int8 = ArrayConfig { spad_depth: 16_384, ..ArrayConfig::new(8, 1, Dtype::Int8) }
            .with_single_port_spad(true);
        let spram = |a: ArrayConfig| TopConfig { spad_spram: true, ..TopConfig::new(a) };
        assert!(check(&spram(int8)).is_ok());
        let refused = [
            int8.with_single_port_spad(false),
            ArrayConfig { spad_depth: 16_385, ..int8 },
            ArrayConfig { rows: 9, ..int8 },
            ArrayConfig { dtype: Dtype::Bf16, ..int8 },
            int8.with_read_stages(1),
        ];
        for a in refused {
            let err = check(&spram(a)).unwrap_err();
            assert!(matches!(err, EmitError::Spram { .. }), "{a:?}: {err}");
            assert!(err.to_string().starts_with("a scratchpad in SPRAM holds up to 16384 rows"));
        }
        let staged = TopConfig { spad_write_stage: true, ..spram(int8) };
        assert!(matches!(check(&staged), Err(EmitError::Spram { write_stage: true, .. })));
    }

    #[test]
    fn pe_pairs_need_two_stage_int8_weight_stationary_pes() {
        let int8 = ArrayConfig::new(3, 1, Dtype::Int8).with_pe_stages(2);
        let paired = |a: ArrayConfig| TopConfig { pe_pairs: true, ..TopConfig::new(a) };
        assert!(check(&paired(int8)).is_ok());
        let one_stage = check(&paired(ArrayConfig::new(3, 1, Dtype::Int8))).unwrap_err();
        assert!(one_stage.to_string().contains("1 stage(s)"), "{one_stage}");
        let bf16 = ArrayConfig::new(3, 1, Dtype::Bf16).with_pe_stages(2);
        assert!(matches!(check(&paired(bf16)), Err(EmitError::PePairs { dtype: "bf16", .. })));
        let os = ArrayConfig { dataflow: Dataflow::OutputStationary, ..int8 };
        assert!(matches!(check(&paired(os)), Err(EmitError::PePairs { .. })));
    }

    #[test]
    fn adder_trees_need_blocking_weight_stationary_int8() {
        let int8 = ArrayConfig::new(4, 2, Dtype::Int8);
        let tree = |a: ArrayConfig| TopConfig { adder_tree: true, ..TopConfig::new(a) };
        assert!(check(&tree(int8)).is_ok());
        assert!(check(&TopConfig { pe_pairs: true, ..tree(int8.with_pe_stages(2)) }).is_ok());
        let bf16 = check(&tree(ArrayConfig::new(4, 2, Dtype::Bf16))).unwrap_err();
        assert!(bf16.to_string().contains("this one is bf16, ws, blocking"), "{bf16}");
        let os = ArrayConfig { dataflow: Dataflow::OutputStationary, ..int8 };
        assert!(matches!(check(&tree(os)), Err(EmitError::AdderTree { dataflow: "os", .. })));
        let decoupled = check(&tree(int8.with_schedule(Schedule::Decoupled))).unwrap_err();
        assert!(decoupled.to_string().contains("decoupled"), "{decoupled}");
    }

    /// Revision 1 leaves no trace of revision 2's narrowed lanes and precompared FIFO, which
    /// the latest builds in both schedules; revision 2 none of revision 3's lean f32 adds, and
    /// revision 3 none of revision 4's lanes summing early.
    #[test]
    fn each_rtl_revision_emits_its_own_netlist() {
        let array =
            ArrayConfig { spad_depth: 32, acc_depth: 8, ..ArrayConfig::new(2, 2, Dtype::Int8) };
        let revision2 = ["small_sum", "in_range", "at_read_next"];
        for schedule in [Schedule::Blocking, Schedule::Decoupled] {
            let top =
                TopConfig { dram_bytes: 512, ..TopConfig::new(array.with_schedule(schedule)) };
            assert_eq!(top.rtl_revision, RTL_REVISION);
            let latest = emit(&top).unwrap().verilog;
            let first = emit(&TopConfig { rtl_revision: 1, ..top }).unwrap().verilog;
            for name in revision2 {
                assert!(latest.contains(name) && !first.contains(name), "{schedule:?}: {name}");
            }
        }
        // Revision 3: a BF16 machine's PEs sum in the aligner's stage, and its adds round with
        // the exponent formed early; revision 2 has neither.
        let bf16 =
            ArrayConfig { spad_depth: 32, acc_depth: 8, ..ArrayConfig::new(2, 2, Dtype::Bf16) }
                .with_pe_stages(3)
                .with_add_stages(2);
        let top = TopConfig { dram_bytes: 512, ..TopConfig::new(bf16) };
        let latest = emit(&top).unwrap().verilog;
        let second = emit(&TopConfig { rtl_revision: 2, ..top }).unwrap().verilog;
        let third = emit(&TopConfig { rtl_revision: 3, ..top }).unwrap().verilog;
        for name in ["mac_bf16_pipelined_sum", "under"] {
            assert!(third.contains(name) && !second.contains(name), "bf16: {name}");
        }
        // Revision 4: the lanes sum beside their aligner too.
        assert!(latest.contains("sig_add$s") && !third.contains("sig_add$s"));
    }

    #[test]
    fn the_machine_has_its_pins_and_memories() {
        let array =
            ArrayConfig { spad_depth: 32, acc_depth: 8, ..ArrayConfig::new(2, 2, Dtype::Int8) };
        let top = TopConfig { dram_bytes: 512, ..TopConfig::new(array) };
        let e = emit(&top).unwrap();
        let names: Vec<&str> = e.ports.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "clock", "reset", "uart_rx", "uart_tx", "spi_sck", "spi_cs_n", "spi_mosi",
                "spi_miso", "busy", "done", "error"
            ]
        );
        assert!(e.modules * 3 < e.instances, "{} of {}", e.modules, e.instances);
        let spad = &e.memories[0];
        assert_eq!((spad.words, spad.word_bits, spad.copies), (32, 16, 2), "two INT8 lanes");
        assert_eq!(e.memories[2].word_bits, 64, "8 DRAM banks of one byte");
    }
}
