//! What a board build can vary: the array, its clock, where its PEs' products are formed and
//! each option of the machine it emits. A board's default build holds one
//! ([`crate::Preset::knobs`]), `systole board build`'s flags set them, and a build's report
//! records them ([`crate::Built::knobs`]) under the names written here.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use systole_core::{ArrayConfig, DramPort, Schedule};
use systole_hdl::TopConfig;

use crate::pe_products::PeProducts;

/// The knobs of one build. The serde attributes are `report.json`'s: a knob added after reports
/// were first committed reads, where a report lacks it, as the builds before it were made.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knobs {
    pub rows: u16,
    pub cols: u16,
    /// The clock the build is made for.
    pub clock_mhz: f64,
    /// Pipeline registers in the conversion lanes (`ArrayConfig::convert_stages`; absent in
    /// reports from before they existed: none).
    #[serde(default)]
    pub convert_stages: u8,
    /// Cycles a requantized row takes in the conversion lanes (`ArrayConfig::requant_cycles`;
    /// absent in reports from before it existed: 1).
    #[serde(default = "one_cycle")]
    pub requant_cycles: u8,
    /// Cycles a `Scale` or `Axpy` row takes in the BF16 lanes (`ArrayConfig::scale_cycles`;
    /// absent in reports from before it existed: 1).
    #[serde(default = "one_cycle")]
    pub scale_cycles: u8,
    /// Cycles a PE takes from its operands to its sum (`ArrayConfig::pe_stages`; absent in
    /// reports from before it existed: 1).
    #[serde(default = "one_cycle")]
    pub pe_stages: u8,
    /// Cycles a BF16 lane's f32 add takes (`ArrayConfig::add_stages`; absent in reports from
    /// before it existed: 1).
    #[serde(default = "one_cycle")]
    pub add_stages: u8,
    /// Registers after each memory's read port (`ArrayConfig::read_stages`; absent in reports
    /// of builds without, and from before it existed).
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub read_stages: u8,
    /// How the DRAM moves bytes, `row`, `byte` or `sdram` (`ArrayConfig::dram_port`; absent for the
    /// row port, which every build before the byte port had).
    #[serde(default = "row_port", skip_serializing_if = "is_row_port", with = "dram_port")]
    pub dram_port: DramPort,
    /// Whether the INT8 lanes have their comparator (`ArrayConfig::int8_max`: `Max`, for max
    /// pooling in INT8 inference; absent in reports from before it existed, built without).
    #[serde(default)]
    pub int8_max: bool,
    /// `blocking` or `decoupled` (`ArrayConfig::schedule`; absent in reports from before it was
    /// recorded, which were all blocking).
    #[serde(default = "blocking", with = "schedule")]
    pub schedule: Schedule,
    /// Each word's fault code formed as it is queued (`systole_hdl::TopConfig::checks_at_queue`),
    /// not from the FIFO's head in the dispatch cycle (absent in reports from before it
    /// existed, which checked the FIFO's head).
    #[serde(default)]
    pub checks_at_queue: bool,
    /// The scratchpad's writes registered on the way in (`systole_hdl::TopConfig::
    /// spad_write_stage`; absent in reports from before it existed, which were built without).
    #[serde(default)]
    pub spad_write_stage: bool,
    /// The accumulators' writes registered on the way in (`systole_hdl::TopConfig::
    /// acc_write_stage`; absent in reports from before it existed, which were built without).
    #[serde(default)]
    pub acc_write_stage: bool,
    /// The DRAM's writes registered on the way in (`systole_hdl::TopConfig::dram_write_stage`;
    /// absent in reports from before it existed, which were built without).
    #[serde(default)]
    pub dram_write_stage: bool,
    /// The weight-stationary array's columns summed in adder trees (`systole_hdl::TopConfig::
    /// adder_tree`; absent in reports from before it existed, whose arrays were systolic).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adder_tree: bool,
    /// The blocking machine's candidate registered after the FIFO (`systole_hdl::TopConfig::
    /// head_register`; absent in reports from before it existed, which were built without).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub head_register: bool,
    /// The BF16 lanes' f32 aligner shifting beside the comparison (`systole_hdl::TopConfig::
    /// parallel_align`; a report says false for an INT8 build, which has no aligner, and omits
    /// it then, as builds from before it existed, whose aligner was compact).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel_align: bool,
    /// The machine checks its words itself (`systole_hdl::TopConfig::program_checks`), or leaves
    /// them to its host (absent when it does, as every build before the option did).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub program_checks: bool,
    /// Each INT8 PE's partial sum as wide as the sums it holds (`systole_hdl::TopConfig::
    /// narrow_sums`), or 32 bits in every PE (absent when it is, as in every BF16 build; false
    /// in the 85F's INT8 default, built on the RTL before DECISIONS 108).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub narrow_sums: bool,
    /// The revision of the RTL emitted (`systole_hdl::TopConfig::rtl_revision`; absent in
    /// reports from before revisions were counted, which were built on revision 1).
    #[serde(default = "first_revision")]
    pub rtl_revision: u8,
    /// The scratchpad in the part's SPRAMs (`systole_hdl::TopConfig::spad_spram`), of
    /// `systole_hdl::mem::SPRAM_WORDS` rows and timed for their single port
    /// (`ArrayConfig::single_port_spad`; absent when it is in block RAM, as in every build
    /// before it existed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spad_spram: bool,
    /// Where the PEs' products are formed; `None` where the part usually forms them
    /// (`crate::Board::pe_products_ways`' first: in multipliers where it has them), as reports
    /// from before it was recorded say by its absence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pe_products: Option<PeProducts>,
    /// With the products in logic: how many PEs, the first of the array, keep theirs in
    /// multiplier blocks (`yosys::Products::in_multipliers`; absent when none do).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub multiplier_pes: u32,
}

impl Knobs {
    /// These knobs on an array of `rows x cols`: the PEs kept in multipliers are counted for one
    /// array, and none carry over to another.
    pub fn with_array(self, rows: u16, cols: u16) -> Knobs {
        let same = (rows, cols) == (self.rows, self.cols);
        Knobs { rows, cols, multiplier_pes: if same { self.multiplier_pes } else { 0 }, ..self }
    }

    /// These knobs with the PEs' products formed `way`: paired products are registered in their
    /// DSP (two-stage PEs, which a later knob may undo and the emitter then refuses), and the PEs
    /// kept in multipliers are counted for one way, none carrying over to another.
    pub fn with_pe_products(self, way: PeProducts) -> Knobs {
        let same = self.pe_products == Some(way);
        Knobs {
            pe_products: Some(way),
            pe_stages: if way == PeProducts::DspPairs { 2 } else { self.pe_stages },
            multiplier_pes: if same { self.multiplier_pes } else { 0 },
            ..self
        }
    }

    /// The machine these knobs make of `config` around `memories`, its PEs' products paired
    /// in DSPs or not (where `None` puts them is the board's to say: `policy::pe_products`).
    pub fn top(&self, config: ArrayConfig, memories: TopMemories, pe_pairs: bool) -> TopConfig {
        TopConfig {
            dram_bytes: memories.dram_bytes,
            fifo_depth: memories.fifo_depth,
            uart_divisor: memories.uart_divisor,
            checks_at_queue: self.checks_at_queue,
            spad_write_stage: self.spad_write_stage,
            acc_write_stage: self.acc_write_stage,
            dram_write_stage: self.dram_write_stage,
            adder_tree: self.adder_tree,
            head_register: self.head_register,
            parallel_align: self.parallel_align,
            program_checks: self.program_checks,
            narrow_sums: self.narrow_sums,
            rtl_revision: self.rtl_revision,
            spad_spram: self.spad_spram,
            pe_pairs,
            ..TopConfig::new(config)
        }
    }
}

/// What a machine has around its array that the knobs do not set: its DRAM, its instruction
/// FIFO and its UART's divisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopMemories {
    pub dram_bytes: usize,
    pub fifo_depth: usize,
    pub uart_divisor: u16,
}

fn one_cycle() -> u8 {
    1
}

fn first_revision() -> u8 {
    1
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u8(n: &u8) -> bool {
    *n == 0
}

fn row_port() -> DramPort {
    DramPort::Row
}

fn is_row_port(port: &DramPort) -> bool {
    *port == DramPort::Row
}

fn blocking() -> Schedule {
    Schedule::Blocking
}

/// A [`DramPort`] as its name (core has no serde).
mod dram_port {
    use super::*;

    pub fn serialize<S: Serializer>(port: &DramPort, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(port.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DramPort, D::Error> {
        let name = String::deserialize(d)?;
        DramPort::ALL.into_iter().find(|p| p.name() == name).ok_or_else(|| {
            let names: Vec<&str> = DramPort::ALL.iter().map(|p| p.name()).collect();
            serde::de::Error::custom(format!("unknown dram_port `{name}` ({})", names.join(", ")))
        })
    }
}

/// A [`Schedule`] as its name.
mod schedule {
    use super::*;

    pub fn serialize<S: Serializer>(schedule: &Schedule, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(schedule.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Schedule, D::Error> {
        let name = String::deserialize(d)?;
        Schedule::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown schedule `{name}`")))
    }
}
