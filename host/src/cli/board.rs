//! `systole board`'s flags: the board subcommands' arguments, and the knobs a build's flags
//! turn on its board's default build ([`BoardBuildArgs::knobs`]).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use systole_boards::nextpnr::Router;
use systole_boards::pe_products::PeProducts;
use systole_boards::policy::{self, PolicyError};
use systole_boards::{Board, Knobs};
use systole_core::{DramPort, Dtype, Schedule};

use super::{parse_mhz, DramPortArg, DtypeArg, ScheduleArg};

#[derive(Debug, Subcommand)]
pub enum BoardCommand {
    /// The supported boards and their default arrays.
    List,
    /// Build DIR/systole.bin (iCE40) or DIR/systole.bit (ECP5) and DIR/report.json.
    Build(BoardBuildArgs),
    /// Load DIR's bitstream onto a connected board (iceprog or openFPGALoader).
    Program(BoardProgramArgs),
    /// Where a build's logic goes: the cells of DIR/netlist.json by block of the machine.
    Blocks(BoardBlocksArgs),
}

#[derive(Debug, Args)]
pub struct BoardBlocksArgs {
    /// The directory `board build` wrote.
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct BoardBuildArgs {
    /// icebreaker, alchitry-cu, ulx3s or ulx3s-25f.
    pub board: String,
    /// PE rows (default: the board's default build in the dtype, `systole board list`).
    #[arg(long)]
    pub rows: Option<u16>,
    /// PE columns (default: the board's default build in the dtype).
    #[arg(long)]
    pub cols: Option<u16>,
    /// Datapath (default: int8).
    #[arg(long, value_enum)]
    pub dtype: Option<DtypeArg>,
    /// Clock the design must meet (default: the board's default build's in the dtype);
    /// an even fraction of the board's oscillator divides it in logic, another frequency adds
    /// a PLL.
    #[arg(long, value_name = "MHZ", value_parser = parse_mhz, allow_negative_numbers = true)]
    pub clock_mhz: Option<f64>,
    /// nextpnr's router: router1 (nextpnr's default) or router2 (docs/BOARDS.md compares them
    /// on this project's builds).
    #[arg(long, value_enum, default_value_t = RouterArg::Router1)]
    pub router: RouterArg,
    /// Where the PEs' products are built (default: the board's default build's): in the FPGA's
    /// multipliers (dsp), or in LUTs (logic), on the ECP5 boards; on the iCEBreaker in its
    /// DSPs, one product each (dsp) or two, in their dual 8 x 8 mode (dsp-pairs: INT8,
    /// two-stage PEs); on the Alchitry Cu, which has none, in logic (docs/BOARDS.md).
    #[arg(long, value_enum)]
    pub pe_products: Option<PeProductsArg>,
    /// With the PEs' products in logic on an ECP5 board: how many PEs, the first of the
    /// array row by row, keep theirs in multiplier blocks (fewer LUTs for the router; the same
    /// results and cycles). Default: the board's default build's for its own array, else 0.
    #[arg(long, value_name = "N")]
    pub multiplier_pes: Option<u32>,
    /// Pipeline registers in the requantize and cast lanes, 0 to 3 (default: the board's
    /// default build's in the dtype); each conversion takes as many cycles more.
    #[arg(long)]
    pub convert_stages: Option<u8>,
    /// Cycles each requantized row takes in the INT8 conversion lanes: 1 (a 32 x 32 multiplier
    /// per lane) or 4 (one 16 x 16 multiplier per lane, a quarter of the logic; default: the
    /// board's default build's).
    #[arg(long)]
    pub requant_cycles: Option<u8>,
    /// Cycles each `Scale` or `Axpy` row takes in the BF16 accumulator lanes: 1 (product and
    /// sum in one cycle), 2 (the product registered) or 3 (the multiplier's halves registered
    /// apart too; default: the board's default build's).
    #[arg(long)]
    pub scale_cycles: Option<u8>,
    /// Cycles each PE takes from its operands to its sum: 1, or 2 with the product registered
    /// (a shorter clock period; results leave the array a cycle later), or 3 with the f32 add's
    /// aligned operands registered too (BF16 weight-stationary blocking builds: input rows
    /// skewed two cycles a PE row, results `rows + 1` cycles later), or 4 with its normalised
    /// sum registered as well (rows skewed three cycles a PE row, results `2 rows + 1` cycles
    /// later; default: the board's default build's).
    #[arg(long)]
    pub pe_stages: Option<u8>,
    /// Cycles a BF16 accumulator lane's f32 add takes: 1, or 2 with its aligned operands
    /// registered, or 3 with its normalised sum registered too (a shorter clock period each;
    /// results land a cycle later, and adding vector rows take a cycle more, for each;
    /// default: the board's default build's).
    #[arg(long)]
    pub add_stages: Option<u8>,
    /// Whether the INT8 lanes have their comparator (`Max`, for max pooling in INT8 inference;
    /// default: the board's default build's).
    #[arg(long, value_name = "true|false")]
    pub int8_max: Option<bool>,
    /// Registers after each memory's read port: 0, or 1 with the block RAM's read word
    /// registered once more (a shorter path from every memory; every instruction a cycle
    /// longer; default: the board's default build's).
    #[arg(long)]
    pub read_stages: Option<u8>,
    /// Whether the scratchpad registers its writes on the way in (the same results and
    /// cycles; a `Load`'s path from DRAM ends at flip-flops; default: the board's default
    /// build's).
    #[arg(long, value_name = "true|false")]
    pub spad_write_stage: Option<bool>,
    /// Whether the accumulators register their writes on the way in (the same results and
    /// cycles; a `LoadAcc`'s path from DRAM and the lanes' results end at flip-flops; default:
    /// the board's default build's).
    #[arg(long, value_name = "true|false")]
    pub acc_write_stage: Option<bool>,
    /// Whether the DRAM registers its writes on the way in (the same results and cycles; a
    /// `Store`'s path into DRAM ends at flip-flops; default: the board's default build's).
    #[arg(long, value_name = "true|false")]
    pub dram_write_stage: Option<bool>,
    /// Whether the weight-stationary array sums each column in an adder tree instead of down
    /// its PEs (the same results and cycles in less logic: blocking INT8 only; default: the
    /// board's default build's).
    #[arg(long, value_name = "true|false")]
    pub adder_tree: Option<bool>,
    /// Whether the blocking machine registers its candidate word after the FIFO (the same
    /// results and cycles; the dispatch decision starts at flip-flops, not at the FIFO's block
    /// RAM; the decoupled machine always has it; default: the board's default build's).
    #[arg(long, value_name = "true|false")]
    pub head_register: Option<bool>,
    /// Whether the scratchpad is in the iCE40 UP5K's SPRAMs: 16,384 rows of up to eight INT8
    /// lanes where its block RAMs hold 512, timed for their single port (`LoadWeights` waits
    /// for the array and `Matmul` for the weight loader; each `Load` and `Requantize` takes a
    /// cycle more). The iCEBreaker only; default: the board's default build's.
    #[arg(long, value_name = "true|false")]
    pub spad_spram: Option<bool>,
    /// Whether the blocking machine forms each word's fault code as the word is queued (a
    /// second decoder beside the host link) or from the FIFO's head as it is decided on (the
    /// same results and cycles in less logic; the decoupled machine always checks as it queues;
    /// default: the board's default build's).
    #[arg(long, value_name = "true|false")]
    pub checks_at_queue: Option<bool>,
    /// Whether the BF16 accumulator lanes' f32 aligner shifts beside the operands' comparison
    /// (the same results and cycles; a shorter path from the accumulators in more logic;
    /// default: the board's default build's).
    #[arg(long, value_name = "true|false")]
    pub parallel_align: Option<bool>,
    /// Whether the blocking machine checks each word against its build itself (the program
    /// checks: dataflow, dtype, widths, ranges, the DRAM extent), or leaves them to its host,
    /// which validates every program before it sends a word (fewer cells and a shorter
    /// dispatch path on a small part; the identity says so; default: the board's default
    /// build's).
    #[arg(long, value_name = "true|false")]
    pub program_checks: Option<bool>,
    /// Whether each INT8 PE's partial sum is as wide as the sums it can hold (docs/DECISIONS.md
    /// 108), or 32 bits in every PE; the same bits either way (default: the board's default
    /// build's).
    #[arg(long, value_name = "true|false")]
    pub narrow_sums: Option<bool>,
    /// The revision of the RTL to emit, 1 to the latest: each computes the same bits in the
    /// same cycles in a different netlist (docs/DECISIONS.md 118). Default: the board's
    /// default build's, the revision its measured report was built on.
    #[arg(long, value_name = "N")]
    pub rtl_revision: Option<u8>,
    /// row: the DRAM moves a row a cycle in byte banks; byte: one byte a cycle, every row of a
    /// DRAM transfer a cycle per byte, in far fewer cells (the blocking schedule;
    /// docs/DECISIONS.md 114 and 116). Default: the board's default build's.
    #[arg(long, value_enum)]
    pub dram_port: Option<DramPortArg>,
    /// blocking: one unit at a time beside the array; decoupled: the units overlap under a
    /// scoreboard and matmuls stream (docs/HARDWARE.md). Default: the board's default build's.
    #[arg(long, value_enum)]
    pub schedule: Option<ScheduleArg>,
    /// The frequency nextpnr's placement and routing aim at (default: the board's default
    /// build's at its clock, else the clock). A large design aimed below its clock can route
    /// far faster and reach a higher fmax; the achieved fmax alone says whether the clock is
    /// met (docs/BOARDS.md).
    #[arg(long, value_name = "MHZ", value_parser = parse_mhz)]
    pub pnr_mhz: Option<f64>,
    /// nextpnr's placement seed: another seed gives another placement and fmax (default: the
    /// board's default build's at its clock, else 1).
    #[arg(long)]
    pub seed: Option<u32>,
    /// Output directory.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PeProductsArg {
    Dsp,
    /// Two PEs' INT8 products to each iCE40 UP5K DSP, in its dual 8 x 8 mode.
    DspPairs,
    Logic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RouterArg {
    Router1,
    Router2,
}

#[derive(Debug, Args)]
pub struct BoardProgramArgs {
    pub board: String,
    /// The directory `board build` wrote.
    pub dir: PathBuf,
    /// Load a bitstream whose build missed timing, or whose report.json predates bitstream
    /// checksums (a changed or missing bitstream is never loaded).
    #[arg(long)]
    pub force: bool,
}

impl From<PeProductsArg> for PeProducts {
    fn from(p: PeProductsArg) -> PeProducts {
        match p {
            PeProductsArg::Dsp => PeProducts::Dsp,
            PeProductsArg::DspPairs => PeProducts::DspPairs,
            PeProductsArg::Logic => PeProducts::Logic,
        }
    }
}

impl From<RouterArg> for Router {
    fn from(r: RouterArg) -> Router {
        match r {
            RouterArg::Router1 => Router::Router1,
            RouterArg::Router2 => Router::Router2,
        }
    }
}

impl BoardBuildArgs {
    /// The dtype asked: INT8 unless asked.
    pub fn dtype(&self) -> Dtype {
        self.dtype.map_or(Dtype::Int8, Dtype::from)
    }

    /// The knobs this build asks for on `b`: its default build's in the dtype
    /// ([`policy::default_knobs`]), each flag given turning its knob.
    pub fn knobs(&self, b: &Board) -> Result<Knobs, PolicyError> {
        let k = policy::default_knobs(b, self.dtype(), self.rows.zip(self.cols))?;
        let k = k.with_array(self.rows.unwrap_or(k.rows), self.cols.unwrap_or(k.cols));
        let k = match self.pe_products {
            Some(way) => k.with_pe_products(way.into()),
            None => k,
        };
        Ok(Knobs {
            clock_mhz: self.clock_mhz.unwrap_or(k.clock_mhz),
            multiplier_pes: self.multiplier_pes.unwrap_or(k.multiplier_pes),
            convert_stages: self.convert_stages.unwrap_or(k.convert_stages),
            requant_cycles: self.requant_cycles.unwrap_or(k.requant_cycles),
            scale_cycles: self.scale_cycles.unwrap_or(k.scale_cycles),
            pe_stages: self.pe_stages.unwrap_or(k.pe_stages),
            add_stages: self.add_stages.unwrap_or(k.add_stages),
            int8_max: self.int8_max.unwrap_or(k.int8_max),
            read_stages: self.read_stages.unwrap_or(k.read_stages),
            dram_port: self.dram_port.map_or(k.dram_port, DramPort::from),
            schedule: self.schedule.map_or(k.schedule, Schedule::from),
            checks_at_queue: self.checks_at_queue.unwrap_or(k.checks_at_queue),
            spad_write_stage: self.spad_write_stage.unwrap_or(k.spad_write_stage),
            acc_write_stage: self.acc_write_stage.unwrap_or(k.acc_write_stage),
            dram_write_stage: self.dram_write_stage.unwrap_or(k.dram_write_stage),
            adder_tree: self.adder_tree.unwrap_or(k.adder_tree),
            head_register: self.head_register.unwrap_or(k.head_register),
            parallel_align: self.parallel_align.unwrap_or(k.parallel_align),
            program_checks: self.program_checks.unwrap_or(k.program_checks),
            narrow_sums: self.narrow_sums.unwrap_or(k.narrow_sums),
            rtl_revision: self.rtl_revision.unwrap_or(k.rtl_revision),
            spad_spram: self.spad_spram.unwrap_or(k.spad_spram),
            ..k
        })
    }
}
