//! The boards: their FPGA, clock, constraint file, and the array each builds by default.

use systole_core::{ArrayConfig, Dtype};

/// FPGA family, which picks the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Yosys `synth_ice40` + nextpnr-ice40 + icepack (Debian's packages).
    Ice40,
    /// YoWASP Yosys `synth_ecp5` + nextpnr-ecp5 + ecppack (PyPI).
    Ecp5,
}

/// One dev board.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Board {
    /// Name on the command line: `systole board build <name>`.
    pub name: &'static str,
    pub title: &'static str,
    pub family: Family,
    /// nextpnr's device and package arguments.
    pub device: &'static [&'static str],
    /// Whether synthesis may map multipliers to DSP blocks.
    pub dsps: bool,
    /// The on-board oscillator: its port name in the constraints and its frequency.
    pub clock_port: &'static str,
    pub clock_mhz: f64,
    /// The constraint file (`.pcf` for iCE40, `.lpf` for ECP5) in this board's folder.
    pub constraints: &'static str,
    pub constraints_name: &'static str,
    /// Default array: rows, cols, dtype, and the clock the design is built for.
    pub default_rows: u16,
    pub default_cols: u16,
    pub default_dtype: Dtype,
    pub default_mhz: f64,
    /// How the bitstream is loaded: `iceprog` or `openFPGALoader -b <board>`.
    pub programmer: &'static [&'static str],
}

impl Board {
    /// The default accelerator config for this board, at its default clock.
    pub fn default_config(&self) -> ArrayConfig {
        let mut c = ArrayConfig::new(self.default_rows, self.default_cols, self.default_dtype);
        c.clock_mhz = self.default_mhz;
        c
    }

    /// File name of the bitstream.
    pub fn bitstream_name(&self) -> &'static str {
        match self.family {
            Family::Ice40 => "systole.bin",
            Family::Ecp5 => "systole.bit",
        }
    }
}

pub const ICEBREAKER: Board = Board {
    name: "icebreaker",
    title: "iCEBreaker (Lattice iCE40UP5K, 8 DSPs, 128 KiB SPRAM)",
    family: Family::Ice40,
    device: &["--up5k", "--package", "sg48"],
    dsps: true,
    clock_port: "clk_12mhz",
    clock_mhz: 12.0,
    constraints: include_str!("../icebreaker/icebreaker.pcf"),
    constraints_name: "icebreaker.pcf",
    default_rows: 2,
    default_cols: 2,
    default_dtype: Dtype::Int8,
    default_mhz: 12.0,
    programmer: &["iceprog"],
};

pub const ALCHITRY_CU: Board = Board {
    name: "alchitry-cu",
    title: "Alchitry Cu (Lattice iCE40HX8K, no DSPs)",
    family: Family::Ice40,
    device: &["--hx8k", "--package", "cb132"],
    dsps: false,
    clock_port: "clk_100mhz",
    clock_mhz: 100.0,
    constraints: include_str!("../alchitry-cu/alchitry-cu.pcf"),
    constraints_name: "alchitry-cu.pcf",
    default_rows: 2,
    default_cols: 2,
    default_dtype: Dtype::Int8,
    default_mhz: 25.0,
    programmer: &["iceprog"],
};

pub const ULX3S_85F: Board = Board {
    name: "ulx3s",
    title: "ULX3S (Lattice ECP5 LFE5U-85F)",
    family: Family::Ecp5,
    device: &["--85k", "--package", "CABGA381"],
    dsps: true,
    clock_port: "clk_25mhz",
    clock_mhz: 25.0,
    constraints: include_str!("../ulx3s/ulx3s.lpf"),
    constraints_name: "ulx3s.lpf",
    default_rows: 8,
    default_cols: 8,
    default_dtype: Dtype::Int8,
    default_mhz: 25.0,
    programmer: &["openFPGALoader", "-b", "ulx3s"],
};

pub const ULX3S_25F: Board = Board {
    name: "ulx3s-25f",
    title: "ULX3S (Lattice ECP5 LFE5U-25F)",
    device: &["--25k", "--package", "CABGA381"],
    default_rows: 4,
    default_cols: 4,
    ..ULX3S_85F
};

/// Every supported board.
pub const BOARDS: [Board; 4] = [ICEBREAKER, ALCHITRY_CU, ULX3S_85F, ULX3S_25F];

/// A board by its command-line name.
pub fn by_name(name: &str) -> Option<Board> {
    BOARDS.iter().copied().find(|b| b.name == name)
}
