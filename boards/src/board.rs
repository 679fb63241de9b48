//! The boards: their FPGA, clock, constraint file, and the accelerator each builds by default in
//! each dtype (array, memories, clock), with the report of the measured build of that default.

use systole_core::sdram::{SdramPart, ULX3S_SDRAM};
use systole_core::{ArrayConfig, DramPort, Dtype, Schedule};

use crate::bridge::{UsbBridge, FT2232H, FT231X};
use crate::knobs::Knobs;
use crate::pe_products::PeProducts;

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
    /// Single-port SPRAMs of 16,384 x 16 bits (the iCE40 UP5K's four; none elsewhere), which
    /// may hold the scratchpad (`Preset::spad_spram`).
    pub sprams: u8,
    /// The on-board oscillator: its port name in the constraints and its frequency.
    pub clock_port: &'static str,
    pub clock_mhz: f64,
    /// The constraint file (`.pcf` for iCE40, `.lpf` for ECP5) in this board's folder.
    pub constraints: &'static str,
    pub constraints_name: &'static str,
    /// The default INT8 build: what `systole board build <name>` makes. Every board holds one.
    pub int8: Preset,
    /// The default BF16 build (`--dtype bf16`), if a BF16 array fits the part. Its PEs are
    /// larger, and its accumulator lane's one-cycle f32 multiply and add is a longer path than
    /// INT8's requantize, so its array is smaller or its clock slower.
    pub bf16: Option<Preset>,
    /// Default memories, sized to the board's block RAM: scratchpad and accumulator rows, DRAM
    /// bytes, instruction FIFO words.
    pub memories: Memories,
    /// How the bitstream is loaded: `iceprog` or `openFPGALoader -b <board>`.
    pub programmer: &'static [&'static str],
    /// The USB-serial bridge its UART host link crosses, which sets the link's rate
    /// ([`UsbBridge::link_rate`]).
    pub bridge: UsbBridge,
    /// The SDRAM on the board, which a build on the SDRAM port (`DramPort::Sdram`) takes as
    /// its DRAM: every ULX3S carries a 32 MB one (core's `sdram::ULX3S_SDRAM`); none elsewhere.
    pub sdram: Option<SdramPart>,
}

/// A board's default build in one dtype: its knobs (the array, the clock it is built for, where
/// its PEs' products are formed, the machine's options), how nextpnr placed it, and the report of
/// that build as measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preset {
    /// What `systole board build` makes unless its flags say otherwise; the measured report
    /// records the same.
    pub knobs: Knobs,
    /// The frequency nextpnr aims at when it is not the clock (`pnr::Pnr::aim_mhz`).
    pub pnr_aim_mhz: Option<f64>,
    /// nextpnr's placement seed (`pnr::Pnr::seed`): nextpnr is deterministic for one
    /// netlist and seed, and a full part meets its clock with some seeds and not others.
    pub pnr_seed: u32,
    /// `report.json` of this build (`report-<board>[-bf16].json` in the board's folder, written
    /// by `systole board build` and copied there), if it was measured.
    pub measured: Option<&'static str>,
}

/// The memories a board's accelerator is built with (what `systole_hdl::TopConfig` and
/// `ArrayConfig` take beyond the array).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memories {
    pub spad_depth: u32,
    pub acc_depth: u32,
    pub dram_bytes: usize,
    pub fifo_depth: usize,
}

impl Board {
    /// The default accelerator config for this board (its INT8 build), at its clock, with its
    /// memories.
    pub fn default_config(&self) -> ArrayConfig {
        self.array_config(Dtype::Int8, &self.int8.knobs)
    }

    /// The default build in `dtype`, if one fits the board.
    pub fn preset(&self, dtype: Dtype) -> Option<&Preset> {
        match dtype {
            Dtype::Int8 => Some(&self.int8),
            Dtype::Bf16 => self.bf16.as_ref(),
        }
    }

    /// The config of the default build in `dtype`, if one fits the board.
    pub fn preset_config(&self, dtype: Dtype) -> Option<ArrayConfig> {
        self.preset(dtype).map(|p| self.array_config(dtype, &p.knobs))
    }

    /// An array of `rows x cols` in `dtype` at `mhz` with this board's memories and the
    /// conversion lanes (stages, requantize cycles) and schedule of its default build in `dtype`
    /// (else its INT8 one's), as [`Board::array_config`] makes it.
    pub fn config(&self, rows: u16, cols: u16, dtype: Dtype, mhz: f64) -> ArrayConfig {
        let p = self.preset(dtype).unwrap_or(&self.int8);
        self.array_config(dtype, &Knobs { rows, cols, clock_mhz: mhz, ..p.knobs })
    }

    /// The array `knobs` make in `dtype` on this board: with its memories, the scratchpad and
    /// accumulator grown to the minimum core requires (`3 * max(R, C)` and `R` rows) when the
    /// array is larger than they were sized for, or the scratchpad in SPRAM where the knobs
    /// put it there.
    pub fn array_config(&self, dtype: Dtype, knobs: &Knobs) -> ArrayConfig {
        let k = knobs;
        let mut c = ArrayConfig::new(k.rows, k.cols, dtype)
            .with_convert_stages(k.convert_stages)
            .with_requant_cycles(k.requant_cycles)
            .with_scale_cycles(k.scale_cycles)
            .with_pe_stages(k.pe_stages)
            .with_add_stages(k.add_stages)
            .with_int8_max(k.int8_max)
            .with_read_stages(k.read_stages)
            .with_dram_port(k.dram_port)
            .with_schedule(k.schedule)
            .with_single_port_spad(k.spad_spram);
        c.clock_mhz = k.clock_mhz;
        c.spad_depth = if k.spad_spram {
            systole_hdl::mem::SPRAM_WORDS as u32
        } else {
            self.memories.spad_depth.max(3 * c.spad_width() as u32)
        };
        c.acc_depth = self.memories.acc_depth.max(k.rows as u32);
        c
    }

    /// Where this board's flow can form the PEs' products (`--pe-products`): the ECP5 boards
    /// in their multipliers or in LUTs; the iCEBreaker in its DSPs, one or two products to
    /// each (Debian's Yosys has no Booth pass); the Alchitry Cu in logic (it has no
    /// multipliers).
    pub fn pe_products_ways(&self) -> &'static [PeProducts] {
        match (self.family, self.dsps) {
            (Family::Ecp5, _) => &[PeProducts::Dsp, PeProducts::Logic],
            (Family::Ice40, true) => &[PeProducts::Dsp, PeProducts::DspPairs],
            (Family::Ice40, false) => &[PeProducts::Logic],
        }
    }

    /// Where `knobs` form the PEs' products on this board: where they say, else where the part
    /// usually does (the first of [`Board::pe_products_ways`]: in multipliers where it has
    /// them), as a report from before it was recorded built them.
    pub fn pe_products_of(&self, knobs: &Knobs) -> PeProducts {
        knobs.pe_products.unwrap_or(self.pe_products_ways()[0])
    }

    /// The clock a build in `dtype` defaults to: its default build's, else the INT8 build's.
    pub fn default_clock(&self, dtype: Dtype) -> f64 {
        self.preset(dtype).unwrap_or(&self.int8).knobs.clock_mhz
    }

    /// What nextpnr aims at for a build in `dtype` at `mhz` when `--pnr-mhz` does not say: the
    /// default build's aim at its own clock, else the clock itself (`None`).
    pub fn default_aim(&self, dtype: Dtype, mhz: f64) -> Option<f64> {
        let p = self.preset(dtype)?;
        if p.knobs.clock_mhz == mhz {
            p.pnr_aim_mhz
        } else {
            None
        }
    }

    /// nextpnr's seed for a build in `dtype` at `mhz` when `--seed` does not say: the default
    /// build's at its own clock, else 1 (`pnr::Pnr`'s default).
    pub fn default_seed(&self, dtype: Dtype, mhz: f64) -> u32 {
        match self.preset(dtype) {
            Some(p) if p.knobs.clock_mhz == mhz => p.pnr_seed,
            _ => crate::pnr::Pnr::default().seed,
        }
    }

    /// File name of the bitstream.
    pub fn bitstream_name(&self) -> &'static str {
        match self.family {
            Family::Ice40 => "systole.bin",
            Family::Ecp5 => "systole.bit",
        }
    }
}

/// iCE40 memories: 30 (UP5K) or 32 (HX8K) block RAMs of 4 Kbit. A 2 x 2 INT8 machine takes 4
/// for the scratchpad (two copies of two 512 x 8 lanes), 8 for the accumulators (two copies of
/// two 256 x 32 lanes), 8 for the DRAM's eight 512-byte banks, 8 for the 128-bit FIFO (any depth
/// up to 256; 9 with the words' fault codes, when they are formed as words are queued) and 1 for
/// the request buffer: 29.
const ICE40_MEMORIES: Memories =
    Memories { spad_depth: 512, acc_depth: 256, dram_bytes: 4096, fifo_depth: 16 };

pub const ICEBREAKER: Board = Board {
    name: "icebreaker",
    title: "iCEBreaker (Lattice iCE40UP5K, 8 DSPs, 128 KiB SPRAM)",
    family: Family::Ice40,
    device: &["--up5k", "--package", "sg48"],
    dsps: true,
    sprams: 4,
    clock_port: "clk_12mhz",
    clock_mhz: 12.0,
    constraints: include_str!("../icebreaker/icebreaker.pcf"),
    constraints_name: "icebreaker.pcf",
    // Three conversion stages take the requantize lane off the critical path: 13.5 MHz instead of
    // 8.4, so the oscillator's 12 MHz undivided (DECISIONS 51). PEs in a column, their products
    // two to a DSP (DECISIONS 92), its program checks left to its host (DECISIONS 107): four fit
    // the row port's DRAM, and eight fit since its DRAM moves a byte a cycle (DECISIONS 114).
    // The PLL's 20.25 MHz is met with the candidate registered and RTL revision 2 (DECISIONS
    // 118: 99% of the cells, seed 1). Its scratchpad is in the four SPRAMs, 16,384 rows where
    // the block RAMs held 512 (DECISIONS 123: the 256^3 GEMM in half the time).
    int8: Preset {
        knobs: Knobs {
            rows: 8,
            cols: 1,
            clock_mhz: 20.25,
            pe_products: Some(PeProducts::DspPairs),
            multiplier_pes: 0,
            convert_stages: 3,
            requant_cycles: 1,
            scale_cycles: 1,
            pe_stages: 2,
            add_stages: 1,
            int8_max: false,
            read_stages: 0,
            dram_port: DramPort::Byte,
            schedule: Schedule::Blocking,
            // Fault codes from the FIFO's head: checking words as they are queued takes a second
            // decoder, and the machine then needs 5,314 of the 5,280 cells (DECISIONS 56).
            checks_at_queue: false,
            spad_write_stage: false,
            acc_write_stage: false,
            dram_write_stage: false,
            adder_tree: false,
            head_register: true,
            parallel_align: false,
            program_checks: false,
            narrow_sums: true,
            rtl_revision: 2,
            spad_spram: true,
        },
        pnr_aim_mhz: None,
        pnr_seed: 1,
        measured: Some(include_str!("../icebreaker/report-icebreaker.json")),
    },
    // The 1 x 1 BF16 needs 5,511 of the 5,280 logic cells on the row port (docs/BOARDS.md); on
    // the byte port (DECISIONS 116) it takes 4,902, its lanes' product and add registered once.
    // Its 10.5 MHz is the PLL's 21 halved (DECISIONS 126: below the 16 MHz the PLL starts at,
    // where the oscillator's 12 halved gave 6), on RTL revision 4 (4,993 cells, 11.3 MHz for a
    // placement aimed at 12, seed 2).
    bf16: Some(Preset {
        knobs: Knobs {
            rows: 1,
            cols: 1,
            clock_mhz: 10.5,
            pe_products: Some(PeProducts::Dsp),
            multiplier_pes: 0,
            convert_stages: 3,
            requant_cycles: 1,
            scale_cycles: 2,
            pe_stages: 2,
            add_stages: 2,
            int8_max: false,
            read_stages: 0,
            dram_port: DramPort::Byte,
            schedule: Schedule::Blocking,
            checks_at_queue: false,
            spad_write_stage: false,
            acc_write_stage: false,
            dram_write_stage: false,
            adder_tree: false,
            head_register: false,
            parallel_align: false,
            program_checks: false,
            narrow_sums: true,
            rtl_revision: 4,
            spad_spram: false,
        },
        pnr_aim_mhz: Some(12.0),
        pnr_seed: 2,
        measured: Some(include_str!("../icebreaker/report-icebreaker-bf16.json")),
    }),
    memories: ICE40_MEMORIES,
    programmer: &["iceprog"],
    bridge: FT2232H,
    sdram: None,
};

pub const ALCHITRY_CU: Board = Board {
    name: "alchitry-cu",
    title: "Alchitry Cu (Lattice iCE40HX8K, no DSPs)",
    family: Family::Ice40,
    device: &["--hx8k", "--package", "cb132"],
    dsps: false,
    sprams: 0,
    clock_port: "clk_100mhz",
    clock_mhz: 100.0,
    constraints: include_str!("../alchitry-cu/alchitry-cu.pcf"),
    constraints_name: "alchitry-cu.pcf",
    // With no multipliers the products are LUTs (Booth-mapped, docs/DECISIONS.md 36). The
    // requantize lane's 32 x 32 multiplier took 2,640 of the 7,680 cells; one 16 x 16 used over
    // four cycles (DECISIONS 57) leaves room for a 4 x 1, which reaches 43.6 MHz built for 45:
    // 40 MHz from the PLL. A 2 x 2 needs 8,981 cells. With its DRAM a byte a cycle (DECISIONS
    // 114) a column of eight fits (on RTL revision 2, DECISIONS 118: 7,481 cells, 45.7 MHz); a
    // ninth row's scratchpad lanes would take more block RAMs than the part has. Placed with
    // seed 3 it runs at the PLL's 47.5 MHz (DECISIONS 127: 48.1 MHz).
    int8: Preset {
        knobs: Knobs {
            rows: 8,
            cols: 1,
            clock_mhz: 47.5,
            pe_products: Some(PeProducts::Logic),
            multiplier_pes: 0,
            convert_stages: 3,
            requant_cycles: 4,
            scale_cycles: 1,
            pe_stages: 1,
            add_stages: 1,
            int8_max: false,
            read_stages: 0,
            dram_port: DramPort::Byte,
            schedule: Schedule::Blocking,
            checks_at_queue: true,
            spad_write_stage: false,
            acc_write_stage: false,
            dram_write_stage: false,
            adder_tree: false,
            head_register: false,
            parallel_align: false,
            program_checks: true,
            narrow_sums: true,
            rtl_revision: 2,
            spad_spram: false,
        },
        pnr_aim_mhz: None,
        pnr_seed: 3,
        measured: Some(include_str!("../alchitry-cu/report-alchitry-cu.json")),
    },
    // The 1 x 1 BF16 fits (6,797 cells). Its lanes register their product (`Scale` and `Axpy`
    // take two cycles a row, DECISIONS 68): 15.25 MHz instead of 8.53; with the lanes' aligner
    // shifting beside its comparison (DECISIONS 103), 16.86 MHz: the oscillator divided by 6.
    // Fault codes come from the FIFO's head.
    bf16: Some(Preset {
        knobs: Knobs {
            rows: 1,
            cols: 1,
            clock_mhz: 16.666667,
            pe_products: Some(PeProducts::Logic),
            multiplier_pes: 0,
            convert_stages: 0,
            requant_cycles: 1,
            scale_cycles: 2,
            pe_stages: 1,
            add_stages: 1,
            int8_max: false,
            read_stages: 0,
            dram_port: DramPort::Row,
            schedule: Schedule::Blocking,
            checks_at_queue: false,
            spad_write_stage: false,
            acc_write_stage: false,
            dram_write_stage: false,
            adder_tree: false,
            head_register: false,
            parallel_align: true,
            program_checks: true,
            narrow_sums: true,
            rtl_revision: 1,
            spad_spram: false,
        },
        pnr_aim_mhz: None,
        pnr_seed: 1,
        measured: Some(include_str!("../alchitry-cu/report-alchitry-cu-bf16.json")),
    }),
    memories: ICE40_MEMORIES,
    programmer: &["iceprog"],
    bridge: FT2232H,
    sdram: None,
};

pub const ULX3S_85F: Board = Board {
    name: "ulx3s",
    title: "ULX3S (Lattice ECP5 LFE5U-85F)",
    family: Family::Ecp5,
    device: &["--85k", "--package", "CABGA381"],
    dsps: true,
    sprams: 0,
    clock_port: "clk_25mhz",
    clock_mhz: 25.0,
    constraints: include_str!("../ulx3s/ulx3s.lpf"),
    constraints_name: "ulx3s.lpf",
    // 144 PEs, 96 of them with their products in multipliers and 48 in LUTs (DECISIONS 38, 104),
    // and three conversion stages, decoupled: the transpose buffer in LUT RAM, the candidate and
    // its decoded fields registered (DECISIONS 59, 67), the host link's verdict registered (79),
    // the scratchpad's writes registered (84, 87), the scoreboard's conflicts registered a cycle
    // ahead (105), route at 40.8 MHz in 67% of the LUTs, built for 40 MHz from the PLL and aimed
    // at 33.33 (DECISIONS 91, 104), where its 256^3 GEMM runs at 94% of peak (the blocking
    // 18 x 8 reached 40.78 MHz but 42%). With every memory's reads registered (106, 109), built
    // for 45 MHz and aimed at 37.5, at 48.3 MHz in 64%; with the PEs' products registered too
    // (110), built for 50 MHz and aimed at 41.67, at 50.7 MHz in 61%.
    int8: Preset {
        knobs: Knobs {
            rows: 18,
            cols: 8,
            clock_mhz: 50.0,
            pe_products: Some(PeProducts::Logic),
            multiplier_pes: 96,
            convert_stages: 3,
            requant_cycles: 1,
            scale_cycles: 1,
            pe_stages: 2,
            add_stages: 1,
            int8_max: false,
            read_stages: 1,
            dram_port: DramPort::Row,
            schedule: Schedule::Decoupled,
            checks_at_queue: true,
            spad_write_stage: true,
            acc_write_stage: false,
            dram_write_stage: false,
            adder_tree: false,
            head_register: false,
            parallel_align: false,
            program_checks: true,
            // The PEs' sums 32 bits wide, the RTL its measured build ran on: built on DECISIONS
            // 108's narrowed sums, the same command reached 46.92 MHz (DECISIONS 113).
            narrow_sums: false,
            rtl_revision: 1,
            spad_spram: false,
        },
        pnr_aim_mhz: Some(41.6667),
        pnr_seed: 1,
        measured: Some(include_str!("../ulx3s/report-ulx3s.json")),
    },
    // With its lanes' and PEs' products registered (DECISIONS 68, 69) and the smaller f32 adder
    // (71), the 8 x 8 BF16 fits (88% of the LUTs) and routed at 16.86 MHz; with the lanes' f32
    // add staged (90), the accumulators' writes registered (88) and the PEs' f32 add staged
    // (98), built for the oscillator's 25 MHz, it routes at 26.8 MHz in 90% of the LUTs; with
    // its lanes' multiply split (99), built for 28.125 MHz from the PLL, at 31.42 MHz; built
    // for 30 MHz and aimed at 28.125, at 31.73 MHz. With the candidate registered after the
    // FIFO (102) and the lanes aligning beside the compare (103), built for 32.14 MHz from the
    // PLL and aimed at 31.25, at 33.56 MHz. On RTL revision 3 (119: the PEs' stages balanced,
    // the roundings' exponents formed early), with the memories' reads registered (106) and the
    // lanes' adds in three stages, built for 40 MHz and aimed at 36, at 40.28 MHz in 96%; on
    // revision 4 (the lanes' sums beside their aligners too), at 43.6 MHz in 93%.
    bf16: Some(Preset {
        knobs: Knobs {
            rows: 8,
            cols: 8,
            clock_mhz: 40.0,
            pe_products: Some(PeProducts::Dsp),
            multiplier_pes: 0,
            convert_stages: 0,
            requant_cycles: 1,
            scale_cycles: 3,
            pe_stages: 3,
            add_stages: 3,
            int8_max: false,
            read_stages: 1,
            dram_port: DramPort::Row,
            schedule: Schedule::Blocking,
            checks_at_queue: false,
            spad_write_stage: false,
            acc_write_stage: true,
            dram_write_stage: false,
            adder_tree: false,
            head_register: true,
            parallel_align: true,
            program_checks: true,
            narrow_sums: true,
            rtl_revision: 4,
            spad_spram: false,
        },
        pnr_aim_mhz: Some(36.0),
        pnr_seed: 1,
        measured: Some(include_str!("../ulx3s/report-ulx3s-bf16.json")),
    }),
    memories: Memories { spad_depth: 2048, acc_depth: 1024, dram_bytes: 64 * 1024, fifo_depth: 64 },
    programmer: &["openFPGALoader", "-b", "ulx3s"],
    bridge: FT231X,
    sdram: Some(ULX3S_SDRAM),
};

pub const ULX3S_25F: Board = Board {
    name: "ulx3s-25f",
    title: "ULX3S (Lattice ECP5 LFE5U-25F)",
    device: &["--25k", "--package", "CABGA381"],
    // 10 x 4, the first 12 PEs' products in the multipliers the lanes leave free (they take 16
    // of the 28) and the other 28 in LUTs (DECISIONS 104; 80% of the LUTs), three conversion
    // stages, no INT8 multiply on the vector path (DECISIONS 52), registered array controls and
    // forwarding compares (DECISIONS 53), each word's fault code formed as it is queued
    // (DECISIONS 56), the scratchpad's and the accumulators' writes registered (DECISIONS 84,
    // 88): run at 55 MHz from the PLL (DECISIONS 89). The iCE40 boards' memories.
    int8: Preset {
        knobs: Knobs {
            rows: 10,
            cols: 4,
            clock_mhz: 55.0,
            pe_products: Some(PeProducts::Logic),
            multiplier_pes: 12,
            convert_stages: 3,
            requant_cycles: 1,
            scale_cycles: 1,
            pe_stages: 1,
            add_stages: 1,
            int8_max: false,
            read_stages: 0,
            dram_port: DramPort::Row,
            schedule: Schedule::Blocking,
            checks_at_queue: true,
            spad_write_stage: true,
            acc_write_stage: true,
            dram_write_stage: false,
            adder_tree: false,
            head_register: false,
            parallel_align: false,
            program_checks: true,
            narrow_sums: true,
            rtl_revision: 1,
            spad_spram: false,
        },
        pnr_aim_mhz: None,
        pnr_seed: 1,
        measured: Some(include_str!("../ulx3s/report-ulx3s-25f.json")),
    },
    // The 3 x 3 BF16 with its lanes' product registered (DECISIONS 68), its PEs' too (69), its
    // lanes' f32 add staged (90), its accumulators' writes registered (88), its PEs' f32 add
    // staged (98), its lanes' f32 multiply split (99), its f32 adds in three stages (100) and
    // its lanes' aligner shifting beside its comparison (103) reaches 42.59 MHz (38.51 with the
    // compact aligner, 35.09 with the adds in two as well, 31.33 with the multiply in one cycle
    // too, 24.04 with the PEs' add in one as well, 19.91 with the product registers alone), and
    // with its memories' reads registered (106) 43.26 MHz aimed at 45: 42.86 MHz from the PLL.
    bf16: Some(Preset {
        knobs: Knobs {
            rows: 3,
            cols: 3,
            clock_mhz: 42.8571,
            pe_products: Some(PeProducts::Dsp),
            multiplier_pes: 0,
            convert_stages: 0,
            requant_cycles: 1,
            scale_cycles: 3,
            pe_stages: 4,
            add_stages: 3,
            int8_max: false,
            read_stages: 1,
            dram_port: DramPort::Row,
            schedule: Schedule::Blocking,
            checks_at_queue: false,
            spad_write_stage: false,
            acc_write_stage: true,
            dram_write_stage: false,
            adder_tree: false,
            head_register: false,
            parallel_align: true,
            program_checks: true,
            narrow_sums: true,
            rtl_revision: 1,
            spad_spram: false,
        },
        pnr_aim_mhz: Some(45.0),
        pnr_seed: 1,
        measured: Some(include_str!("../ulx3s/report-ulx3s-25f-bf16.json")),
    }),
    memories: ICE40_MEMORIES,
    ..ULX3S_85F
};

/// Every supported board.
///
/// A measured report must describe the default build it belongs to (checked by a test).
pub const BOARDS: [Board; 4] = [ICEBREAKER, ALCHITRY_CU, ULX3S_85F, ULX3S_25F];

/// A board by its command-line name.
pub fn by_name(name: &str) -> Option<Board> {
    BOARDS.iter().copied().find(|b| b.name == name)
}

/// The board named `name`, or an error that lists the boards there are.
pub fn named(name: &str) -> Result<Board, UnknownBoard> {
    by_name(name).ok_or_else(|| UnknownBoard(name.to_string()))
}

/// A board name that is none of [`BOARDS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown board `{0}`: the boards are {names}", names = board_names())]
pub struct UnknownBoard(pub String);

fn board_names() -> String {
    BOARDS.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_reports_describe_the_default_builds_and_met_timing() {
        let mut measured = 0;
        for b in BOARDS {
            for dtype in [Dtype::Int8, Dtype::Bf16] {
                let Some(p) = b.preset(dtype) else { continue };
                let Some(json) = p.measured else { continue };
                let what = format!("{} {}", b.name, dtype.name());
                let r = crate::Report::from_json(json).unwrap();
                let built = r.built.as_ref().expect("a systole_top build");
                let c = b.preset_config(dtype).unwrap();
                assert_eq!(r.board, b.name);
                assert_eq!(built.dtype, c.dtype.name(), "{what}");
                assert_eq!((built.spad_depth, built.acc_depth), (c.spad_depth, c.acc_depth));
                assert_eq!(
                    (built.dram_bytes, built.fifo_depth),
                    (b.memories.dram_bytes, b.memories.fifo_depth)
                );
                // The knobs the report records are the preset's, its products where a report
                // from before they were recorded built them.
                let way = b.pe_products_of(&built.knobs);
                assert_eq!(Knobs { pe_products: Some(way), ..built.knobs }, p.knobs, "{what}");
                let k = &p.knobs;
                assert!(!k.spad_spram || b.sprams > 0, "{what}: SPRAM on a part without");
                assert_eq!(r.pnr.aim_mhz, p.pnr_aim_mhz, "{what}");
                assert_eq!(r.pnr.seed, p.pnr_seed, "{what}");
                assert_eq!(b.default_seed(dtype, k.clock_mhz), p.pnr_seed, "{what}");
                let way = b.pe_products_of(k);
                assert!(b.pe_products_ways().contains(&way), "{what}: not a way its flow has");
                assert!(
                    k.multiplier_pes == 0
                        || (way == PeProducts::Logic && k.multiplier_pes < c.pe_count() as u32),
                    "{what}: some PEs' products in multipliers, the others in logic"
                );
                assert!(r.timing_met && r.fmax_mhz >= r.target_mhz, "{what}: {r:?}");
                // The critical path is what limits fmax: its delay is the clock period reached.
                match &r.critical_path {
                    Some(path) => {
                        let mhz = 1000.0 / path.delay_ns;
                        assert!((mhz - r.fmax_mhz).abs() < 0.05, "{what}: {path} for {mhz} MHz");
                    }
                    None => panic!("{what}: the report names no critical path"),
                }
                measured += 1;
            }
        }
        let presets = BOARDS.iter().map(|b| 1 + b.bf16.is_some() as usize).sum::<usize>();
        assert_eq!(measured, presets, "every default build is measured");
    }

    #[test]
    fn bf16_builds_default_to_their_own_array_and_clock() {
        use crate::wrapper::{clock_source, ClockSource};
        assert_eq!(ULX3S_85F.default_clock(Dtype::Int8), 50.0);
        // The 25F's INT8 runs at 55 MHz from its PLL.
        let clock = ULX3S_25F.default_clock(Dtype::Int8);
        assert_eq!((clock, clock_source(&ULX3S_25F, clock)), (55.0, ClockSource::Pll));
        // The 25F's BF16 at 42.86 MHz from its PLL (its f32 adds in three stages, its lanes'
        // multiply split and their aligner parallel, its memories' reads registered, DECISIONS
        // 98 to 100, 103 and 106).
        assert_eq!(ULX3S_25F.default_clock(Dtype::Bf16), 42.8571);
        let clock = ULX3S_25F.default_clock(Dtype::Bf16);
        assert_eq!(clock_source(&ULX3S_25F, clock), ClockSource::Pll);
        // The 85F's BF16 is a smaller array than its INT8, at 40 MHz from its PLL (DECISIONS
        // 119).
        let bf16 = ULX3S_85F.preset_config(Dtype::Bf16).unwrap();
        assert_eq!((bf16.rows, bf16.cols, bf16.clock_mhz), (8, 8, 40.0));
        assert_eq!(clock_source(&ULX3S_85F, bf16.clock_mhz), ClockSource::Pll);
        // The iCEBreaker's INT8 at 20.25 MHz from its PLL.
        let clock = ICEBREAKER.default_config().clock_mhz;
        assert_eq!((clock, clock_source(&ICEBREAKER, clock)), (20.25, ClockSource::Pll));
        // Its BF16, a 1 x 1 on the byte port, at the PLL's 21 MHz halved.
        let bf16 = ICEBREAKER.preset_config(Dtype::Bf16).unwrap();
        assert_eq!((bf16.rows, bf16.cols, bf16.clock_mhz), (1, 1, 10.5));
        assert_eq!(clock_source(&ICEBREAKER, bf16.clock_mhz), ClockSource::PllDivided(2));
        // The Alchitry Cu's INT8 at 47.5 MHz from its PLL; its BF16 the 100 MHz divided by 6.
        let clock = ALCHITRY_CU.default_clock(Dtype::Int8);
        assert_eq!((clock, clock_source(&ALCHITRY_CU, clock)), (47.5, ClockSource::Pll));
        assert_eq!(
            clock_source(&ALCHITRY_CU, ALCHITRY_CU.default_clock(Dtype::Bf16)),
            ClockSource::Divided(6)
        );
    }
}
