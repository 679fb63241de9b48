//! Where a build forms its PEs' products: a board's default build names it, the flow's
//! synthesis follows it and the report records it.

use serde::{Deserialize, Serialize};

/// Where the PEs' products are built: in the FPGA's multiplier blocks, one product each; two to
/// an iCE40 UP5K DSP in its dual 8 x 8 mode (`systole_hdl::TopConfig::pe_pairs`, instantiated
/// in the Verilog); or in LUTs by Yosys' radix-4 Booth pass. The other multipliers (the
/// accumulator lanes' requantize and f32 products) stay in multiplier blocks where the part has
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeProducts {
    #[default]
    Dsp,
    DspPairs,
    Logic,
}

impl PeProducts {
    pub fn name(self) -> &'static str {
        match self {
            PeProducts::Dsp => "dsp",
            PeProducts::DspPairs => "dsp-pairs",
            PeProducts::Logic => "logic",
        }
    }
}
