//! `systole board`: list the supported dev boards, build a bitstream for one, program it, and
//! say where a build's logic goes.

use std::process::Command;

use anyhow::{anyhow, bail, Context};
use systole_boards::blocks::BlockCells;
use systole_boards::board::{by_name, BOARDS};
use systole_boards::flow::{self, Design, FlowError};
use systole_boards::nextpnr::{Pnr, Router};
use systole_boards::report::Built;
use systole_boards::wrapper::{self, TopPort};
use systole_boards::yosys::{PeProducts, Products};
use systole_boards::{Board, Preset};
use systole_core::{ArrayConfig, Dtype, Schedule};

use crate::cli::{
    BoardBlocksArgs, BoardBuildArgs, BoardProgramArgs, DtypeArg, PeProductsArg, RouterArg,
};

/// The board named `name`, or an error listing the boards.
pub fn board(name: &str) -> anyhow::Result<Board> {
    by_name(name).ok_or_else(|| {
        let names: Vec<&str> = BOARDS.iter().map(|b| b.name).collect();
        anyhow!("unknown board `{name}`: the boards are {}", names.join(", "))
    })
}

/// `systole board list`: each board, its default INT8 and BF16 builds with their measured fmax,
/// and its memories.
pub fn list() -> anyhow::Result<()> {
    print!("{}", list_text());
    Ok(())
}

/// The table `systole board list` prints (docs/BOARDS.md quotes it; tests/tests/docs.rs keeps
/// the quote current).
fn list_text() -> String {
    let mut lines = vec![["name", "family", "", "default build and memories"].map(String::from)];
    for b in BOARDS {
        let family = match b.family {
            systole_boards::Family::Ice40 => "iCE40",
            systole_boards::Family::Ecp5 => "ECP5",
        };
        let m = b.memories;
        let preset = |p: Option<&Preset>| match p {
            None => "none fits".to_string(),
            Some(p) => {
                let measured = match p.measured.map(systole_boards::Report::from_json) {
                    Some(Ok(r)) => format!("fmax {:.2}", r.fmax_mhz),
                    Some(Err(e)) => format!("report unreadable: {e}"),
                    None => "not measured".into(),
                };
                // The PEs' products where the part's usual place is not: LUTs beside multipliers.
                let products = match (b.dsps, p.pe_products) {
                    (true, PeProducts::Logic) => {
                        format!(", PE products in logic{}", multiplier_pes(p.multiplier_pes))
                    }
                    (_, PeProducts::DspPairs) => ", PE products two to a DSP".into(),
                    _ => String::new(),
                };
                let stages = match p.convert_stages {
                    0 => String::new(),
                    n => format!(", {n} conversion stages"),
                };
                let stages = match p.requant_cycles {
                    1 => stages,
                    n => format!("{stages}, requantize {} a row", cycles(n)),
                };
                let stages = match p.scale_cycles {
                    1 => stages,
                    n => format!("{stages}, Scale and Axpy {} a row", cycles(n)),
                };
                let stages = match p.pe_stages {
                    1 => stages,
                    n => format!("{stages}, PEs {} a sum", cycles(n)),
                };
                let stages = match p.add_stages {
                    1 => stages,
                    n => format!("{stages}, lane adds {} a sum", cycles(n)),
                };
                let stages = match p.int8_max {
                    true => format!("{stages}, INT8 max pooling"),
                    false => stages,
                };
                let stages = match p.schedule {
                    Schedule::Blocking => stages,
                    s => format!("{stages}, {}", s.name()),
                };
                let staged =
                    write_stages(p.spad_write_stage, p.acc_write_stage, p.dram_write_stage)
                        + read_stages(p.read_stages)
                        + adder_tree(p.adder_tree)
                        + head_register(p.head_register)
                        + &spad_spram(p.spad_spram)
                        + parallel_align(p.parallel_align)
                        + program_checks(p.program_checks)
                        + narrow_sums(p.narrow_sums)
                        + &rtl_revision(p.rtl_revision)
                        + crate::report::dram_port_words(p.dram_port);
                format!(
                    "{}x{} at {} MHz{products}{stages}{staged} ({measured})",
                    p.rows,
                    p.cols,
                    mhz(p.mhz)
                )
            }
        };
        let memories = format!(
            "spad {} acc {} dram {} fifo {}",
            m.spad_depth, m.acc_depth, m.dram_bytes, m.fifo_depth
        );
        let item = |name: &str, what: &str, item: &str, text: String| {
            [name.to_string(), what.to_string(), item.to_string(), text]
        };
        lines.push(item(b.name, family, "part", b.title.to_string()));
        lines.push(item("", "", "int8", preset(b.preset(Dtype::Int8))));
        lines.push(item("", "", "bf16", preset(b.preset(Dtype::Bf16))));
        lines.push(item("", "", "memories", memories));
    }
    use crate::table::Align::{Free, Left};
    let align = [Left, Left, Left, Free];
    crate::table::lines(&lines, &align).into_iter().map(|l| l + "\n").collect()
}

/// The accelerator a board build makes: the board's default build in the dtype asked (INT8
/// unless asked), with the array, clock, lanes and schedule overridden where asked. The
/// memories stay the board's (grown to core's minimum for a larger array).
pub fn top_config(b: &Board, args: &BoardBuildArgs) -> anyhow::Result<systole_hdl::TopConfig> {
    let dtype = match args.dtype {
        None | Some(DtypeArg::Int8) => Dtype::Int8,
        Some(DtypeArg::Bf16) => Dtype::Bf16,
    };
    let (rows, cols) = match (b.preset(dtype), args.rows, args.cols) {
        (_, Some(rows), Some(cols)) => (rows, cols),
        (Some(p), rows, cols) => (rows.unwrap_or(p.rows), cols.unwrap_or(p.cols)),
        (None, ..) => bail!(
            "no {} array fits board {} (docs/BOARDS.md): pass both --rows and --cols to try one \
             anyway",
            dtype.name(),
            b.name
        ),
    };
    if rows == 0 || cols == 0 {
        bail!("--rows and --cols must be at least 1");
    }
    let clock = args.clock_mhz.unwrap_or(b.default_clock(dtype));
    let mut config = b.config(rows, cols, dtype, clock);
    if let Some(stages) = args.convert_stages {
        config.convert_stages = stages;
    }
    if let Some(cycles) = args.requant_cycles {
        config.requant_cycles = cycles;
    }
    if let Some(cycles) = args.scale_cycles {
        config.scale_cycles = cycles;
    }
    // Paired products are registered in their DSP: two-stage PEs unless asked otherwise (and
    // then refused by the emitter, naming why).
    let pe_pairs = pe_products(b, dtype, args.pe_products)? == PeProducts::DspPairs;
    if pe_pairs {
        config.pe_stages = 2;
    }
    if let Some(stages) = args.pe_stages {
        config.pe_stages = stages;
    }
    if let Some(stages) = args.add_stages {
        config.add_stages = stages;
    }
    if let Some(int8_max) = args.int8_max {
        config.int8_max = int8_max;
    }
    if let Some(stages) = args.read_stages {
        config.read_stages = stages;
    }
    if let Some(schedule) = args.schedule {
        config.schedule = schedule.into();
    }
    if let Some(port) = args.dram_port {
        config.dram_port = port.into();
    }
    let preset = b.preset(dtype).unwrap_or(&b.int8);
    // The scratchpad in SPRAM (its rows, its single port) or in block RAM (the board's rows).
    let spad_spram = args.spad_spram.unwrap_or(preset.spad_spram);
    if spad_spram && b.sprams == 0 {
        bail!("--spad-spram true: {} has no SPRAM (the iCE40 UP5K's iCEBreaker has)", b.name);
    }
    config.single_port_spad = spad_spram;
    config.spad_depth = if spad_spram {
        systole_hdl::mem::SPRAM_WORDS as u32
    } else {
        b.memories.spad_depth.max(3 * config.spad_width() as u32)
    };
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    // Before any work: a clock the link's rate cannot be divided from would build a board
    // that nobody can talk to.
    let uart_divisor =
        systole_hdl::top::uart_divisor(config.clock_mhz, systole_hdl::top::DEFAULT_BAUD)
            .map_err(|e| anyhow!("--clock-mhz {}: {e}", config.clock_mhz))?;
    Ok(systole_hdl::TopConfig {
        uart_divisor,
        dram_bytes: b.memories.dram_bytes,
        fifo_depth: b.memories.fifo_depth,
        checks_at_queue: args.checks_at_queue.unwrap_or(preset.checks_at_queue),
        spad_write_stage: args.spad_write_stage.unwrap_or(preset.spad_write_stage),
        acc_write_stage: args.acc_write_stage.unwrap_or(preset.acc_write_stage),
        dram_write_stage: args.dram_write_stage.unwrap_or(preset.dram_write_stage),
        adder_tree: args.adder_tree.unwrap_or(preset.adder_tree),
        head_register: args.head_register.unwrap_or(preset.head_register),
        parallel_align: args.parallel_align.unwrap_or(preset.parallel_align),
        program_checks: args.program_checks.unwrap_or(preset.program_checks),
        narrow_sums: args.narrow_sums.unwrap_or(preset.narrow_sums),
        rtl_revision: args.rtl_revision.unwrap_or(preset.rtl_revision),
        spad_spram,
        pe_pairs,
        ..systole_hdl::TopConfig::new(config)
    })
}

/// Where a build on `b` in `dtype` forms the PEs' products: as asked, else as the board's
/// default build in that dtype does; a way the board's flow does not have
/// (`Board::pe_products_ways`) is refused.
pub fn pe_products(
    b: &Board,
    dtype: Dtype,
    asked: Option<PeProductsArg>,
) -> anyhow::Result<PeProducts> {
    let ways = b.pe_products_ways();
    let default = b.preset(dtype).map_or(ways[0], |p| p.pe_products);
    let chosen = asked.map_or(default, |a| match a {
        PeProductsArg::Dsp => PeProducts::Dsp,
        PeProductsArg::DspPairs => PeProducts::DspPairs,
        PeProductsArg::Logic => PeProducts::Logic,
    });
    if ways.contains(&chosen) {
        return Ok(chosen);
    }
    let names: Vec<&str> = ways.iter().map(|w| w.name()).collect();
    let why = match (b.dsps, chosen) {
        (false, _) => "it has no multipliers",
        (true, PeProducts::Logic) => "Debian's Yosys, its flow, has no Booth pass",
        _ => "only the iCE40 UP5K's DSPs have the dual 8 x 8 mode",
    };
    bail!(
        "--pe-products {}: {} builds its PEs' products only as {} ({why})",
        chosen.name(),
        b.name,
        names.join(" or ")
    )
}

/// Where a build of `top` on `b` forms its PEs' products: [`pe_products`], with as many PEs in
/// multiplier blocks as `--multiplier-pes` asks (else as many as the board's default build
/// keeps there, if it is this array); refused where the products are not in logic or where it
/// names every PE.
pub fn products(
    b: &Board,
    top: &systole_hdl::TopConfig,
    args: &BoardBuildArgs,
) -> anyhow::Result<Products> {
    let a = &top.array;
    let way = pe_products(b, a.dtype, args.pe_products)?;
    let pes = a.pe_count() as u32;
    let preset =
        b.preset(a.dtype).filter(|p| (p.rows, p.cols) == (a.rows, a.cols) && p.pe_products == way);
    let in_multipliers =
        args.multiplier_pes.unwrap_or_else(|| preset.map_or(0, |p| p.multiplier_pes));
    if in_multipliers == 0 {
        return Ok(Products::all(way));
    }
    if way != PeProducts::Logic || !b.dsps {
        bail!(
            "--multiplier-pes {in_multipliers}: only a build with its PEs' products in logic on \
             a board with multipliers keeps some of them in multipliers (this build's are in {})",
            way.name()
        );
    }
    if in_multipliers >= pes {
        bail!(
            "--multiplier-pes {in_multipliers}: the {}x{} array has {pes} PEs, so at most {} \
             can keep their products in multipliers beside those in logic (--pe-products dsp \
             puts all of them there)",
            a.rows,
            a.cols,
            pes - 1
        );
    }
    Ok(Products { way, in_multipliers, pes })
}

/// `, the first 64 in multipliers`: the words `board list` and `board build` add for a build
/// whose products are in logic but for some PEs'.
fn multiplier_pes(n: u32) -> String {
    match n {
        0 => String::new(),
        n => format!(", the first {n} in multipliers"),
    }
}

/// `, scratchpad and DRAM writes registered` and the like: the memories built with a write
/// stage, empty for none.
fn write_stages(spad: bool, acc: bool, dram: bool) -> String {
    let names = [(spad, "scratchpad"), (acc, "accumulator"), (dram, "DRAM")];
    let names: Vec<&str> = names.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => format!(", {one} writes registered"),
        [init @ .., last] => format!(", {} and {last} writes registered", init.join(", ")),
    }
}

/// What a build's memory reads pass (`ArrayConfig::read_stages`), for the build's description.
fn read_stages(stages: u8) -> &'static str {
    if stages > 0 {
        ", memory reads registered"
    } else {
        ""
    }
}

/// The words `board list` and `board build` add for an array summed in adder trees.
fn adder_tree(on: bool) -> &'static str {
    if on {
        ", columns summed in adder trees"
    } else {
        ""
    }
}

/// The words `board list` and `board build` add for a blocking machine whose candidate is
/// registered after the FIFO.
/// The words `board list` and `board build` add for a machine whose scratchpad is in SPRAM.
fn spad_spram(on: bool) -> String {
    if on {
        format!(", scratchpad of {} rows in SPRAM (one port)", systole_hdl::mem::SPRAM_WORDS)
    } else {
        String::new()
    }
}

fn head_register(on: bool) -> &'static str {
    if on {
        ", candidate registered"
    } else {
        ""
    }
}

/// The words `board list` and `board build` add for an INT8 machine whose PEs keep 32-bit sums.
fn narrow_sums(on: bool) -> &'static str {
    if on {
        ""
    } else {
        ", PE sums 32 bits"
    }
}

/// The words `board list` and `board build` add for a machine built on an RTL revision before
/// the latest.
fn rtl_revision(revision: u8) -> String {
    if revision == systole_hdl::RTL_REVISION {
        String::new()
    } else {
        format!(", RTL revision {revision}")
    }
}

/// The words `board list` and `board build` add for a machine that leaves its program checks
/// to its host.
fn program_checks(on: bool) -> &'static str {
    if on {
        ""
    } else {
        ", words checked by the host"
    }
}

/// The words `board list` and `board build` add for BF16 lanes whose aligner is parallel.
fn parallel_align(on: bool) -> &'static str {
    if on {
        ", lanes aligning beside the compare"
    } else {
        ""
    }
}

/// What `report.json` records of the accelerator.
pub fn built(top: &systole_hdl::TopConfig, products: Products) -> Built {
    let a = &top.array;
    Built {
        rows: a.rows,
        cols: a.cols,
        dtype: a.dtype.name().into(),
        dataflow: a.dataflow.short_name().into(),
        spad_depth: a.spad_depth,
        acc_depth: a.acc_depth,
        dram_bytes: top.dram_bytes,
        fifo_depth: top.fifo_depth,
        uart_divisor: top.uart_divisor,
        clock_mhz: a.clock_mhz,
        convert_stages: a.convert_stages,
        requant_cycles: a.requant_cycles,
        scale_cycles: a.scale_cycles,
        pe_stages: a.pe_stages,
        add_stages: a.add_stages,
        read_stages: a.read_stages,
        dram_port: a.dram_port.name().into(),
        int8_max: a.int8_max,
        schedule: a.schedule.name().into(),
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
    }
}

/// The machine a report's `built` describes, around its array `config`
/// ([`crate::bench::array_config_of`]): what [`built`] recorded, read back.
pub fn top_of(built: &Built, config: ArrayConfig) -> systole_hdl::TopConfig {
    systole_hdl::TopConfig {
        dram_bytes: built.dram_bytes,
        fifo_depth: built.fifo_depth,
        uart_divisor: built.uart_divisor,
        checks_at_queue: built.checks_at_queue,
        spad_write_stage: built.spad_write_stage,
        acc_write_stage: built.acc_write_stage,
        dram_write_stage: built.dram_write_stage,
        adder_tree: built.adder_tree,
        head_register: built.head_register,
        parallel_align: built.parallel_align,
        program_checks: built.program_checks,
        narrow_sums: built.narrow_sums,
        rtl_revision: built.rtl_revision,
        spad_spram: built.spad_spram,
        pe_pairs: built.pe_products == Some(PeProducts::DspPairs),
        ..systole_hdl::TopConfig::new(config)
    }
}

/// `systole board build`: emit the whole accelerator (`systole_top`) for the board's config,
/// wrap it for the board, run the flow.
pub fn build(args: &BoardBuildArgs) -> anyhow::Result<()> {
    let b = board(&args.board)?;
    let top_config = top_config(&b, args)?;
    let pe_products = products(&b, &top_config, args)?;
    let config = top_config.array;
    let emitted = systole_hdl::emit(&top_config).map_err(|e| anyhow!("{e}"))?;
    let ports: Vec<TopPort> = emitted
        .ports
        .iter()
        .map(|p| TopPort { name: p.name.clone(), input: p.direction == "input", bits: p.bits })
        .collect();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let clock = wrapper::clock_source(&b, config.clock_mhz);
    let reset = wrapper::PowerOnReset::for_top(&top_config);
    let top = wrapper::wrapper_with_reset(&b, &ports, clock, reset)?;
    let mut sources =
        vec![("systole_top.v".to_string(), emitted.verilog), ("board_top.v".to_string(), top)];
    if let Some(file) = wrapper::clock_pll(&b, clock, config.clock_mhz, &args.out)? {
        let text = std::fs::read_to_string(args.out.join(&file))?;
        sources.push((file, text));
    }
    let design = Design {
        sources,
        top: "board_top".into(),
        built: Some(built(&top_config, pe_products)),
        pe_products,
    };
    let pnr = Pnr {
        seed: args.seed.unwrap_or_else(|| b.default_seed(config.dtype, config.clock_mhz)),
        router: match args.router {
            RouterArg::Router1 => Router::Router1,
            RouterArg::Router2 => Router::Router2,
        },
        aim_mhz: args
            .pnr_mhz
            .or_else(|| b.default_aim(config.dtype, config.clock_mhz))
            .filter(|&aim| aim != config.clock_mhz),
    };
    let m = &top_config;
    eprintln!(
        "building {} (scratchpad {} rows, accumulators {} rows, DRAM {} bytes, FIFO {} words, {} \
         conversion stages, requantize {} a row{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}, {} schedule) for {} at {} MHz in {} (PE \
         products in {}{}; nextpnr {}, seed {}{})",
        describe(&config),
        config.spad_depth,
        config.acc_depth,
        m.dram_bytes,
        m.fifo_depth,
        config.convert_stages,
        cycles(config.requant_cycles),
        match config.scale_cycles {
            1 => String::new(),
            n => format!(", Scale and Axpy {} a row", cycles(n)),
        },
        match config.pe_stages {
            1 => String::new(),
            n => format!(", PEs {} a sum", cycles(n)),
        },
        match config.add_stages {
            1 => String::new(),
            n => format!(", lane adds {} a sum", cycles(n)),
        },
        match (config.dtype, config.int8_max) {
            (Dtype::Int8, true) => ", INT8 lanes with their comparator",
            _ => "",
        },
        write_stages(m.spad_write_stage, m.acc_write_stage, m.dram_write_stage),
        read_stages(config.read_stages),
        adder_tree(m.adder_tree),
        head_register(m.head_register),
        spad_spram(m.spad_spram),
        parallel_align(m.parallel_align && config.dtype == Dtype::Bf16),
        program_checks(m.program_checks),
        narrow_sums(!m.wide_sums()),
        rtl_revision(m.rtl_revision),
        crate::report::dram_port_words(config.dram_port),
        if m.checks_words_at_queue() || !m.program_checks {
            ""
        } else {
            ", words checked at the FIFO's head"
        },
        config.schedule.name(),
        b.name,
        mhz(config.clock_mhz),
        args.out.display(),
        pe_products.way.name(),
        multiplier_pes(pe_products.in_multipliers),
        pnr.router.name(),
        pnr.seed,
        pnr.aim_mhz.map_or(String::new(), |aim| format!(", aimed at {} MHz", mhz(aim)))
    );
    let mut progress = |line: &str| eprintln!("  {line}");
    match flow::build(&b, &design, config.clock_mhz, pnr, &args.out, &mut progress) {
        Ok(r) => {
            println!(
                "{}: {} LUTs of {}, {} flip-flops, {} block RAMs of {}, {} DSPs of {}; fmax {:.1} \
                 MHz for {} MHz (timing met), peak {:.1} MMAC/s; {}",
                b.name,
                r.luts,
                r.luts_available,
                r.flip_flops,
                r.bram,
                r.bram_available,
                r.dsps,
                r.dsps_available,
                r.fmax_mhz,
                mhz(r.target_mhz),
                r.peak_macs_per_s().unwrap_or(0.0) / 1e6,
                args.out.join(b.bitstream_name()).display()
            );
            if let Some(path) = &r.critical_path {
                println!("{path}");
            }
            Ok(())
        }
        Err(FlowError::Timing { report, dir }) => bail!(
            "timing not met on {}: {:.2} MHz achieved for {} MHz{}; lower --clock-mhz or the array (report in {dir}/report.json)",
            b.name,
            report.fmax_mhz,
            mhz(report.target_mhz),
            report.critical_path.as_ref().map_or(String::new(), |p| format!(" ({p})"))
        ),
        Err(e @ FlowError::DoesNotFit { .. }) => {
            Err(anyhow!("{e}\nlower --rows/--cols or pick a larger board (systole board list)"))
        }
        Err(e) => Err(anyhow!("{e}")),
    }
}

fn describe(c: &ArrayConfig) -> String {
    // "an 8x8", "an 11x4", "an 18x2": the article follows the number as it is spoken.
    let rows = c.rows.to_string();
    let article = if rows.starts_with('8') || rows == "11" || rows == "18" { "an" } else { "a" };
    format!("{article} {rows}x{} {} array", c.cols, c.dtype.name())
}

/// `systole board program`: load DIR's bitstream with the board's programmer.
pub fn program(args: &BoardProgramArgs) -> anyhow::Result<()> {
    let b = board(&args.board)?;
    let (bitstream, _) = systole_boards::program::loadable(&b, &args.dir, args.force)?;
    let (tool, rest) =
        b.programmer.split_first().ok_or_else(|| anyhow!("no programmer for {}", b.name))?;
    let package = if *tool == "iceprog" {
        "Debian's package `fpga-icestorm`"
    } else {
        "Debian's package `openfpgaloader`"
    };
    let status = Command::new(tool)
        .args(rest)
        .arg(&bitstream)
        .status()
        .map_err(|e| anyhow!("cannot run {tool} ({e}); it comes with {package}"))?;
    if !status.success() {
        bail!("{tool} failed ({status}): is the board connected and powered?");
    }
    Ok(())
}

/// `systole board blocks`: DIR/netlist.json's cells by block, the largest first.
pub fn blocks(args: &BoardBlocksArgs) -> anyhow::Result<()> {
    let path = args.dir.join("netlist.json");
    let json = std::fs::read_to_string(&path).map_err(|e| {
        anyhow!("cannot read {} ({e}); `systole board build` writes it there", path.display())
    })?;
    let blocks =
        systole_boards::blocks::by_block(&json).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    print!("{}", blocks_text(&blocks));
    Ok(())
}

fn blocks_text(blocks: &[BlockCells]) -> String {
    let mut total = BlockCells { block: "total".into(), ..Default::default() };
    for b in blocks {
        total.luts += b.luts;
        total.carries += b.carries;
        total.flip_flops += b.flip_flops;
        total.memories += b.memories;
        total.dsps += b.dsps;
        total.other += b.other;
    }
    let head = ["block", "LUTs", "carries", "flip-flops", "memories", "DSPs", "other"];
    let mut rows = vec![head.map(String::from).to_vec()];
    for b in blocks.iter().chain([&total]) {
        let counts = [b.luts, b.carries, b.flip_flops, b.memories, b.dsps, b.other];
        rows.push(std::iter::once(b.block.clone()).chain(counts.map(|n| n.to_string())).collect());
    }
    use crate::table::Align::{Left, Right};
    let align = [Left, Right, Right, Right, Right, Right, Right];
    let mut out: String =
        crate::table::lines(&rows, &align).into_iter().map(|l| l + "\n").collect();
    out.push_str(
        "(cells of the flattened netlist, each counted for the block its name starts in: \
         docs/BOARDS.md)\n",
    );
    out
}

/// "1 cycle", "4 cycles".
fn cycles(n: u8) -> String {
    format!("{n} cycle{}", if n == 1 { "" } else { "s" })
}

/// A clock as written: exact to the kHz when it is (a PLL's 16.125 MHz), else to 10 kHz
/// (33.3333 MHz as 33.33), without trailing zeros.
pub(crate) fn mhz(f: f64) -> String {
    let khz = f * 1000.0;
    let s = if (khz - khz.round()).abs() < 1e-6 { format!("{f:.3}") } else { format!("{f:.2}") };
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    /// Clocks are written as exactly as the kHz allows, without trailing zeros.
    #[test]
    fn clocks_are_written_to_the_khz_they_have() {
        use super::mhz;
        assert_eq!(mhz(16.125), "16.125");
        assert_eq!(mhz(33.3333), "33.33");
        assert_eq!(mhz(25.0), "25");
        assert_eq!(mhz(37.5), "37.5");
        assert_eq!(mhz(12.5), "12.5");
    }

    /// The memories built with a write stage are named in a list.
    #[test]
    fn write_stages_are_listed() {
        use super::write_stages;
        assert_eq!(write_stages(false, false, false), "");
        assert_eq!(write_stages(false, true, false), ", accumulator writes registered");
        assert_eq!(write_stages(true, false, true), ", scratchpad and DRAM writes registered");
        let all = ", scratchpad, accumulator and DRAM writes registered";
        assert_eq!(write_stages(true, true, true), all);
    }

    /// `board blocks` prints a column per kind of cell, aligned, and their totals.
    #[test]
    fn blocks_are_tabulated_with_their_total() {
        use systole_boards::blocks::BlockCells;
        let blocks = [
            BlockCells {
                block: "engine".into(),
                luts: 1287,
                carries: 418,
                flip_flops: 435,
                ..Default::default()
            },
            BlockCells {
                block: "seq".into(),
                luts: 501,
                memories: 2,
                dsps: 1,
                other: 3,
                ..Default::default()
            },
        ];
        let text = super::blocks_text(&blocks);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "block   LUTs  carries  flip-flops  memories  DSPs  other");
        assert_eq!(lines[1], "engine  1287      418         435         0     0      0");
        assert_eq!(lines[2], "seq      501        0           0         2     1      3");
        assert_eq!(lines[3], "total   1788      418         435         2     1      3");
        assert!(lines[4].contains("docs/BOARDS.md"), "{text}");
    }

    fn build_args(args: &[&str]) -> crate::cli::BoardBuildArgs {
        use clap::Parser;
        let argv = ["systole", "board", "build"].iter().chain(args).chain(&["-o", "out"]);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Board(crate::cli::BoardCommand::Build(a)) => a,
            other => panic!("not a board build: {other:?}"),
        }
    }

    /// What a report's `built` records reads back as the machine built: each board's default
    /// build in each dtype, and one with its options turned the other way.
    #[test]
    fn a_reports_built_reads_back_as_the_machine() {
        let cases: Vec<Vec<&str>> = super::BOARDS
            .iter()
            .flat_map(|b| {
                let mut dtypes = vec![vec![b.name]];
                if b.bf16.is_some() {
                    dtypes.push(vec![b.name, "--dtype", "bf16"]);
                }
                dtypes
            })
            .chain([vec![
                "icebreaker",
                "--head-register",
                "false",
                "--program-checks",
                "true",
                "--checks-at-queue",
                "true",
                "--spad-write-stage",
                "true",
                "--rtl-revision",
                "1",
            ]])
            .collect();
        for case in cases {
            let args = build_args(&case);
            let b = super::board(&args.board).unwrap();
            let top = super::top_config(&b, &args).unwrap();
            let built = super::built(&top, super::products(&b, &top, &args).unwrap());
            let config = crate::bench::array_config_of(&built, "a test").unwrap();
            assert_eq!(super::top_of(&built, config), top, "{case:?}");
        }
    }

    /// A build takes the board's default build and overrides what it is asked to: the lanes
    /// and the schedule (a decoupled machine always checks words as they are queued), and a
    /// value core does not allow is refused naming its field.
    #[test]
    fn board_builds_take_the_preset_and_override_what_is_asked() {
        use systole_core::Schedule;
        let b = super::board("ulx3s-25f").unwrap();
        let preset = super::top_config(&b, &build_args(&["ulx3s-25f"])).unwrap();
        assert_eq!(preset.array, b.default_config());
        let top = super::top_config(
            &b,
            &build_args(&["ulx3s-25f", "--schedule", "decoupled", "--requant-cycles", "4"]),
        )
        .unwrap();
        assert_eq!(top.array.schedule, Schedule::Decoupled);
        assert_eq!(top.array.requant_cycles, 4);
        assert!(top.checks_words_at_queue());
        let ice = super::board("icebreaker").unwrap();
        let blocking = super::top_config(&ice, &build_args(&["icebreaker"])).unwrap();
        assert!(!blocking.checks_words_at_queue(), "the iCEBreaker's preset checks the head");
        let queued = ["icebreaker", "--checks-at-queue", "true"];
        let queued = super::top_config(&ice, &build_args(&queued)).unwrap();
        assert!(
            super::built(&queued, super::Products::all(super::PeProducts::Dsp)).checks_at_queue,
            "as asked"
        );
        // Its preset's byte port and SPRAM scratchpad are the blocking machine's: a decoupled
        // build asks for rows and block RAM.
        let err = super::top_config(&ice, &build_args(&["icebreaker", "--schedule", "decoupled"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("dram_port = byte"), "{err}");
        let rows = ["icebreaker", "--schedule", "decoupled", "--dram-port", "row"];
        let err = super::top_config(&ice, &build_args(&rows)).unwrap_err().to_string();
        assert!(err.contains("single_port_spad = true"), "{err}");
        let decoupled = [&rows[..], &["--spad-spram", "false"]].concat();
        let decoupled = super::top_config(&ice, &build_args(&decoupled));
        let built = super::built(&decoupled.unwrap(), super::Products::all(super::PeProducts::Dsp));
        assert!(built.checks_at_queue, "a decoupled build records its checks at the queue");
        let err = super::top_config(&b, &build_args(&["ulx3s-25f", "--requant-cycles", "3"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("requant_cycles = 3"), "{err}");
    }

    /// `--adder-tree true` sums the columns in trees where the array is blocking
    /// weight-stationary INT8 (and says so in the report); the emitter refuses it elsewhere,
    /// naming why.
    #[test]
    fn adder_trees_are_built_on_blocking_int8_arrays() {
        let ice = super::board("icebreaker").unwrap();
        let top = super::top_config(&ice, &build_args(&["icebreaker", "--adder-tree", "true"]));
        let top = top.unwrap();
        assert!(top.adder_tree && systole_hdl::emit::check(&top).is_ok());
        assert!(super::built(&top, super::Products::all(super::PeProducts::DspPairs)).adder_tree);
        let b = super::board("ulx3s").unwrap();
        let decoupled = super::top_config(&b, &build_args(&["ulx3s", "--adder-tree", "true"]));
        let err = systole_hdl::emit::check(&decoupled.unwrap()).unwrap_err().to_string();
        assert!(err.contains("adder trees need") && err.contains("decoupled"), "{err}");
    }

    /// `--program-checks false` leaves a blocking machine's program checks to its host: the
    /// report records it (and omits it on a checking machine, as reports before the option
    /// did), and the decoupled machine refuses it, naming why.
    #[test]
    fn program_checks_are_left_to_the_host_on_blocking_machines() {
        let ice = super::board("icebreaker").unwrap();
        let args = build_args(&["icebreaker", "--program-checks", "false"]);
        let top = super::top_config(&ice, &args).unwrap();
        assert!(!top.program_checks && systole_hdl::emit::check(&top).is_ok());
        let lean = super::built(&top, super::Products::all(super::PeProducts::DspPairs));
        assert!(!lean.program_checks);
        let json = serde_json::to_string(&lean).unwrap();
        assert!(json.contains(r#""program_checks":false"#), "{json}");
        let args = build_args(&["icebreaker", "--program-checks", "true"]);
        let plain = super::top_config(&ice, &args).unwrap();
        let checked = super::built(&plain, super::Products::all(super::PeProducts::DspPairs));
        assert!(!serde_json::to_string(&checked).unwrap().contains("program_checks"));
        let b = super::board("ulx3s").unwrap();
        let args = build_args(&["ulx3s", "--program-checks", "false"]);
        let err = systole_hdl::emit::check(&super::top_config(&b, &args).unwrap()).unwrap_err();
        assert!(err.to_string().contains("decoupled"), "{err}");
    }

    /// `--head-register true` registers a blocking machine's candidate (and the report says
    /// so); the decoupled machine, which always has one, refuses the option, naming why.
    #[test]
    fn head_registers_are_built_on_blocking_machines() {
        let b = super::board("ulx3s-25f").unwrap();
        let top = super::top_config(&b, &build_args(&["ulx3s-25f", "--head-register", "true"]));
        let top = top.unwrap();
        assert!(top.head_register && systole_hdl::emit::check(&top).is_ok());
        assert!(super::built(&top, super::Products::all(super::PeProducts::Logic)).head_register);
        let plain = super::top_config(&b, &build_args(&["ulx3s-25f"])).unwrap();
        assert!(
            !super::built(&plain, super::Products::all(super::PeProducts::Logic)).head_register
        );
        let ulx3s = super::board("ulx3s").unwrap();
        let decoupled =
            super::top_config(&ulx3s, &build_args(&["ulx3s", "--head-register", "true"]));
        let err = systole_hdl::emit::check(&decoupled.unwrap()).unwrap_err().to_string();
        assert!(err.contains("decoupled top always registers its candidate"), "{err}");
    }

    /// `--multiplier-pes N` keeps the first N PEs' products in multipliers where the others
    /// are in logic (and the report says how many); it is refused where the products are not
    /// in logic, on a part without multipliers, and where it names every PE.
    #[test]
    fn some_pe_products_stay_in_multipliers_where_asked() {
        let products = |board: &str, args: &[&str]| {
            let b = super::board(board).unwrap();
            let args = build_args(&[&[board], args].concat());
            let top = super::top_config(&b, &args).unwrap();
            super::products(&b, &top, &args).map_err(|e| e.to_string())
        };
        let mixed = products("ulx3s", &["--multiplier-pes", "64"]).unwrap();
        let b = super::board("ulx3s").unwrap();
        assert_eq!(mixed.way, super::PeProducts::Logic, "the 85F's INT8 default's way");
        assert_eq!(
            (mixed.in_multipliers, mixed.pes),
            (64, b.int8.rows as u32 * b.int8.cols as u32)
        );
        let top = super::top_config(&b, &build_args(&["ulx3s"])).unwrap();
        assert_eq!(super::built(&top, mixed).multiplier_pes, 64);
        let none = products("ulx3s", &["--rows", "4", "--cols", "4"]).unwrap();
        assert_eq!(none, super::Products::all(super::PeProducts::Logic), "not the preset's array");
        let err = products("ulx3s", &["--pe-products", "dsp", "--multiplier-pes", "4"]);
        assert!(err.unwrap_err().contains("only a build with its PEs' products in logic"));
        let err = products("alchitry-cu", &["--multiplier-pes", "1"]).unwrap_err();
        assert!(err.contains("on a board with multipliers"), "{err}");
        let err = products("ulx3s", &["--rows", "2", "--cols", "2", "--multiplier-pes", "4"]);
        assert!(err.unwrap_err().contains("the 2x2 array has 4 PEs, so at most 3"));
    }

    /// A BF16 build's lanes align as the board's default does unless asked (and the report
    /// says how); an INT8 machine has no aligner and its report says false.
    #[test]
    fn lanes_align_as_the_preset_or_as_asked() {
        let b = super::board("ulx3s-25f").unwrap();
        let parallel = |args: &[&str]| {
            let top = super::top_config(&b, &build_args(args)).unwrap();
            (
                top.parallel_align,
                super::built(&top, super::Products::all(super::PeProducts::Dsp)).parallel_align,
            )
        };
        assert_eq!(parallel(&["ulx3s-25f", "--dtype", "bf16"]), (true, true));
        let compact = ["ulx3s-25f", "--dtype", "bf16", "--parallel-align", "false"];
        assert_eq!(parallel(&compact), (false, false));
        let int8 = ["ulx3s-25f", "--parallel-align", "true"];
        assert_eq!(parallel(&int8), (true, false), "no aligner in an INT8 machine");
        let ulx3s = super::board("ulx3s").unwrap();
        let top = super::top_config(&ulx3s, &build_args(&["ulx3s", "--dtype", "bf16"])).unwrap();
        assert!(top.parallel_align, "the 85F's BF16 default aligns beside the compare too");
    }

    /// `--pe-products dsp-pairs` pairs the iCEBreaker's PEs in its DSPs, two-stage unless asked
    /// otherwise (then the emitter refuses it, naming why); a board without the mode refuses it.
    #[test]
    fn pe_pairs_are_built_where_the_dsps_have_them() {
        let ice = super::board("icebreaker").unwrap();
        let args =
            build_args(&["icebreaker", "--rows", "8", "--cols", "1", "--pe-products", "dsp-pairs"]);
        let top = super::top_config(&ice, &args).unwrap();
        assert!(top.pe_pairs && top.array.pe_stages == 2);
        assert!(systole_hdl::emit::check(&top).is_ok());
        let args = build_args(&["icebreaker", "--pe-products", "dsp-pairs", "--pe-stages", "1"]);
        let one_stage = super::top_config(&ice, &args).unwrap();
        let err = systole_hdl::emit::check(&one_stage).unwrap_err().to_string();
        assert!(err.contains("two-stage PEs"), "{err}");
        let default = super::top_config(&ice, &build_args(&["icebreaker"])).unwrap();
        assert!(default.pe_pairs && default.array.pe_stages == 2, "the default build pairs");
        let one = build_args(&["icebreaker", "--pe-products", "dsp"]);
        assert!(!super::top_config(&ice, &one).unwrap().pe_pairs);
        for (board, asked) in
            [("ulx3s", "dsp-pairs"), ("alchitry-cu", "dsp"), ("icebreaker", "logic")]
        {
            let b = super::board(board).unwrap();
            let args = build_args(&[board, "--pe-products", asked]);
            let err = super::top_config(&b, &args).unwrap_err().to_string();
            assert!(err.contains(&format!("--pe-products {asked}: {board}")), "{err}");
        }
    }
}
