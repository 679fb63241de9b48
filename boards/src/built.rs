//! What a build's `report.json` records of the accelerator it made ([`Built`]), and the round
//! trip between it and the machine: [`Built::of`] a `systole_hdl::TopConfig`, and back
//! ([`Built::array_config`], [`Built::top`]) for whatever runs or simulates a report's build.

use serde::{Deserialize, Serialize};
use systole_core::{ArrayConfig, ConfigError, Dataflow, Dtype};
use systole_hdl::TopConfig;

use crate::knobs::{Knobs, TopMemories};
use crate::pe_products::PeProducts;
use crate::yosys::Products;

/// What was built: the accelerator's dtype, dataflow and knobs, and the memories and UART they
/// came to on the board.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Built {
    /// `int8` or `bf16`.
    pub dtype: String,
    /// `ws` or `os`.
    pub dataflow: String,
    /// The array, its clock and options, written among the others (`rows`, `clock_mhz`, ...).
    #[serde(flatten)]
    pub knobs: Knobs,
    pub spad_depth: u32,
    pub acc_depth: u32,
    pub dram_bytes: usize,
    pub fifo_depth: usize,
    pub uart_divisor: u16,
}

/// Why a report's `built` is not a machine.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BuiltError {
    #[error("unknown dtype `{0}`")]
    Dtype(String),
    #[error("unknown dataflow `{0}`")]
    Dataflow(String),
    #[error("{0}")]
    Array(ConfigError),
}

impl Built {
    /// What `report.json` records of `top`, its PEs' products formed as `products` says.
    pub fn of(top: &TopConfig, products: Products) -> Built {
        let a = &top.array;
        Built {
            dtype: a.dtype.name().into(),
            dataflow: a.dataflow.short_name().into(),
            knobs: Knobs {
                rows: a.rows,
                cols: a.cols,
                clock_mhz: a.clock_mhz,
                convert_stages: a.convert_stages,
                requant_cycles: a.requant_cycles,
                scale_cycles: a.scale_cycles,
                pe_stages: a.pe_stages,
                add_stages: a.add_stages,
                read_stages: a.read_stages,
                dram_port: a.dram_port,
                int8_max: a.int8_max,
                schedule: a.schedule,
                checks_at_queue: top.checks_words_at_queue(),
                spad_write_stage: top.spad_write_stage,
                acc_write_stage: top.acc_write_stage,
                dram_write_stage: top.dram_write_stage,
                adder_tree: top.adder_tree,
                head_register: top.head_register,
                parallel_align: top.parallel_align && a.dtype == Dtype::Bf16,
                program_checks: top.program_checks,
                narrow_sums: !top.wide_sums(),
                rtl_revision: top.rtl_revision,
                spad_spram: top.spad_spram,
                pe_products: Some(products.way),
                multiplier_pes: products.in_multipliers,
            },
            spad_depth: a.spad_depth,
            acc_depth: a.acc_depth,
            dram_bytes: top.dram_bytes,
            fifo_depth: top.fifo_depth,
            uart_divisor: top.uart_divisor,
        }
    }

    /// The array this build made, validated.
    pub fn array_config(&self) -> Result<ArrayConfig, BuiltError> {
        let dtype = match self.dtype.as_str() {
            "int8" => Dtype::Int8,
            "bf16" => Dtype::Bf16,
            other => return Err(BuiltError::Dtype(other.into())),
        };
        let dataflow = match self.dataflow.as_str() {
            "ws" => Dataflow::WeightStationary,
            "os" => Dataflow::OutputStationary,
            other => return Err(BuiltError::Dataflow(other.into())),
        };
        let k = &self.knobs;
        let config = ArrayConfig {
            spad_depth: self.spad_depth,
            acc_depth: self.acc_depth,
            clock_mhz: k.clock_mhz,
            int8_max: k.int8_max,
            ..ArrayConfig::new(k.rows, k.cols, dtype)
                .with_dataflow(dataflow)
                .with_convert_stages(k.convert_stages)
                .with_requant_cycles(k.requant_cycles)
                .with_scale_cycles(k.scale_cycles)
                .with_pe_stages(k.pe_stages)
                .with_add_stages(k.add_stages)
                .with_read_stages(k.read_stages)
                .with_dram_port(k.dram_port)
                .with_schedule(k.schedule)
                .with_single_port_spad(k.spad_spram)
        };
        config.validate().map_err(BuiltError::Array)?;
        Ok(config)
    }

    /// The machine this build made around its array `config` ([`Built::array_config`]): what
    /// [`Built::of`] recorded, read back.
    pub fn top(&self, config: ArrayConfig) -> TopConfig {
        let memories = TopMemories {
            dram_bytes: self.dram_bytes,
            fifo_depth: self.fifo_depth,
            uart_divisor: self.uart_divisor,
        };
        self.knobs.top(config, memories, self.knobs.pe_products == Some(PeProducts::DspPairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::BOARDS;
    use crate::policy::{default_knobs, products, top_config};

    /// What a report's `built` records reads back as the machine built: each board's default
    /// build in each dtype, and one with its options turned the other way.
    #[test]
    fn a_reports_built_reads_back_as_the_machine() {
        let mut cases = vec![];
        for b in BOARDS {
            for dtype in [Dtype::Int8, Dtype::Bf16] {
                if let Ok(k) = default_knobs(&b, dtype, None) {
                    cases.push((b, dtype, k));
                }
            }
        }
        let ice = crate::board::ICEBREAKER;
        let turned = Knobs {
            head_register: false,
            program_checks: true,
            checks_at_queue: true,
            spad_write_stage: true,
            rtl_revision: 1,
            ..ice.int8.knobs
        };
        cases.push((ice, Dtype::Int8, turned));
        for (b, dtype, k) in cases {
            let top = top_config(&b, dtype, &k).unwrap();
            let built = Built::of(&top, products(&b, &top, &k).unwrap());
            let json = serde_json::to_string(&built).unwrap();
            let read: Built = serde_json::from_str(&json).unwrap();
            assert_eq!(read, built, "{json}");
            assert_eq!(read.top(read.array_config().unwrap()), top, "{} {k:?}", b.name);
        }
    }

    /// Every committed report reads back and writes each of its fields as it was (a knob it
    /// lacks is written with the value it was read as).
    #[test]
    fn committed_reports_write_what_they_read() {
        for b in BOARDS {
            for json in
                [Some(&b.int8), b.bf16.as_ref()].into_iter().flatten().filter_map(|p| p.measured)
            {
                let committed: serde_json::Value = serde_json::from_str(json).unwrap();
                let report = crate::Report::from_json(json).unwrap();
                let written = serde_json::to_value(report.built.as_ref().unwrap()).unwrap();
                for (key, value) in committed["built"].as_object().unwrap() {
                    assert_eq!(&written[key], value, "{}: {key}", b.name);
                }
            }
        }
    }

    /// A knob at its usual value is left out of the report, as reports from before it existed
    /// do: program checks on the machine, reads unregistered, the row port.
    #[test]
    fn knobs_at_their_old_value_are_left_out() {
        let ice = crate::board::ICEBREAKER;
        let k = ice.int8.knobs;
        let top = top_config(&ice, Dtype::Int8, &k).unwrap();
        let lean = serde_json::to_string(&Built::of(&top, products(&ice, &top, &k).unwrap()));
        let lean = lean.unwrap();
        assert!(
            lean.contains(r#""program_checks":false"#) && lean.contains(r#""dram_port":"byte""#),
            "{lean}"
        );
        let k = Knobs {
            program_checks: true,
            dram_port: systole_core::DramPort::Row,
            spad_spram: false,
            ..k
        };
        let top = top_config(&ice, Dtype::Int8, &k).unwrap();
        let plain = serde_json::to_string(&Built::of(&top, products(&ice, &top, &k).unwrap()));
        let plain = plain.unwrap();
        assert!(!plain.contains("program_checks") && !plain.contains("dram_port"), "{plain}");
        assert!(!plain.contains("read_stages") && !plain.contains("multiplier_pes"), "{plain}");
    }

    /// A report naming a schedule or DRAM port there is not is refused as it is read.
    #[test]
    fn unknown_names_are_refused_as_they_are_read() {
        let json = crate::board::ICEBREAKER.int8.measured.unwrap();
        let bad = json.replace(r#""schedule": "blocking""#, r#""schedule": "eager""#);
        assert_ne!(bad, json);
        let err = crate::Report::from_json(&bad).unwrap_err().to_string();
        assert!(err.contains("unknown schedule `eager`"), "{err}");
    }
}
