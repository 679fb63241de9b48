//! `systole board`: list the supported dev boards, build a bitstream for one, program it, and
//! say where a build's logic goes.

use std::process::Command;

use anyhow::{anyhow, bail, Context};
use systole_boards::blocks::BlockCells;
use systole_boards::board::{named, BOARDS};
use systole_boards::flow::{self, Design, FlowError};
use systole_boards::nextpnr::Pnr;
use systole_boards::policy;
use systole_boards::wrapper::{self, TopPort};
use systole_boards::yosys::PeProducts;
use systole_boards::{Built, Preset};
use systole_core::{ArrayConfig, Dtype, Schedule};

use crate::cli::{BoardBlocksArgs, BoardBuildArgs, BoardProgramArgs};
use crate::table::mhz;

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
                let k = &p.knobs;
                let measured = match p.measured.map(systole_boards::Report::from_json) {
                    Some(Ok(r)) => format!("fmax {:.2}", r.fmax_mhz),
                    Some(Err(e)) => format!("report unreadable: {e}"),
                    None => "not measured".into(),
                };
                // The PEs' products where the part's usual place is not: LUTs beside multipliers.
                let products = match (b.dsps, b.pe_products_of(k)) {
                    (true, PeProducts::Logic) => {
                        format!(", PE products in logic{}", multiplier_pes(k.multiplier_pes))
                    }
                    (_, PeProducts::DspPairs) => ", PE products two to a DSP".into(),
                    _ => String::new(),
                };
                let stages = match k.convert_stages {
                    0 => String::new(),
                    n => format!(", {n} conversion stages"),
                };
                let stages = match k.requant_cycles {
                    1 => stages,
                    n => format!("{stages}, requantize {} a row", cycles(n)),
                };
                let stages = match k.scale_cycles {
                    1 => stages,
                    n => format!("{stages}, Scale and Axpy {} a row", cycles(n)),
                };
                let stages = match k.pe_stages {
                    1 => stages,
                    n => format!("{stages}, PEs {} a sum", cycles(n)),
                };
                let stages = match k.add_stages {
                    1 => stages,
                    n => format!("{stages}, lane adds {} a sum", cycles(n)),
                };
                let stages = match k.int8_max {
                    true => format!("{stages}, INT8 max pooling"),
                    false => stages,
                };
                let stages = match k.schedule {
                    Schedule::Blocking => stages,
                    s => format!("{stages}, {}", s.name()),
                };
                let staged =
                    write_stages(k.spad_write_stage, k.acc_write_stage, k.dram_write_stage)
                        + read_stages(k.read_stages)
                        + adder_tree(k.adder_tree)
                        + head_register(k.head_register)
                        + &spad_spram(k.spad_spram)
                        + parallel_align(k.parallel_align)
                        + program_checks(k.program_checks)
                        + narrow_sums(k.narrow_sums)
                        + &rtl_revision(k.rtl_revision)
                        + crate::report::dram_port_words(k.dram_port);
                format!(
                    "{}x{} at {} MHz{products}{stages}{staged} ({measured})",
                    k.rows,
                    k.cols,
                    mhz(k.clock_mhz)
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

/// `systole board build`: emit the whole accelerator (`systole_top`) for the board's config,
/// wrap it for the board, run the flow.
pub fn build(args: &BoardBuildArgs) -> anyhow::Result<()> {
    let b = named(&args.board)?;
    let knobs = args.knobs(&b)?;
    let top_config = policy::top_config(&b, args.dtype(), &knobs)?;
    let pe_products = policy::products(&b, &top_config, &knobs)?;
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
        built: Some(Built::of(&top_config, pe_products)),
        pe_products,
    };
    let pnr = Pnr {
        seed: args.seed.unwrap_or_else(|| b.default_seed(config.dtype, config.clock_mhz)),
        router: args.router.into(),
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
    let b = named(&args.board)?;
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

#[cfg(test)]
mod tests {
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

    /// Each flag turns its knob on the board's default build in the dtype asked; a new array
    /// keeps none of the default build's PEs in multipliers, and paired products make two-stage
    /// PEs unless `--pe-stages` says otherwise.
    #[test]
    fn flags_turn_the_knobs_of_the_default_build() {
        use systole_boards::pe_products::PeProducts;
        use systole_boards::Knobs;
        use systole_core::{DramPort, Schedule};
        let knobs = |args: &[&str]| {
            let args = build_args(args);
            args.knobs(&systole_boards::board::named(&args.board).unwrap())
                .map_err(|e| e.to_string())
        };
        let ulx3s = systole_boards::board::named("ulx3s").unwrap();
        assert_eq!(knobs(&["ulx3s"]), Ok(ulx3s.int8.knobs));
        assert_eq!(knobs(&["ulx3s", "--dtype", "bf16"]), Ok(ulx3s.bf16.unwrap().knobs));
        let all = [
            "ulx3s",
            "--rows",
            "4",
            "--cols",
            "2",
            "--clock-mhz",
            "30",
            "--convert-stages",
            "1",
            "--requant-cycles",
            "4",
            "--scale-cycles",
            "2",
            "--pe-stages",
            "1",
            "--add-stages",
            "2",
            "--int8-max",
            "true",
            "--read-stages",
            "0",
            "--dram-port",
            "byte",
            "--schedule",
            "blocking",
            "--checks-at-queue",
            "false",
            "--spad-write-stage",
            "false",
            "--acc-write-stage",
            "true",
            "--dram-write-stage",
            "true",
            "--adder-tree",
            "true",
            "--head-register",
            "true",
            "--parallel-align",
            "true",
            "--program-checks",
            "false",
            "--narrow-sums",
            "true",
            "--rtl-revision",
            "3",
            "--spad-spram",
            "true",
            "--pe-products",
            "dsp",
            "--multiplier-pes",
            "5",
        ];
        let turned = Knobs {
            rows: 4,
            cols: 2,
            clock_mhz: 30.0,
            convert_stages: 1,
            requant_cycles: 4,
            scale_cycles: 2,
            pe_stages: 1,
            add_stages: 2,
            int8_max: true,
            read_stages: 0,
            dram_port: DramPort::Byte,
            schedule: Schedule::Blocking,
            checks_at_queue: false,
            spad_write_stage: false,
            acc_write_stage: true,
            dram_write_stage: true,
            adder_tree: true,
            head_register: true,
            parallel_align: true,
            program_checks: false,
            narrow_sums: true,
            rtl_revision: 3,
            spad_spram: true,
            pe_products: Some(PeProducts::Dsp),
            multiplier_pes: 5,
        };
        assert_eq!(knobs(&all), Ok(turned));
        // The 85F's INT8 default keeps 96 PEs in multipliers: of its own array and way only.
        assert_eq!(knobs(&["ulx3s", "--rows", "4"]).unwrap().multiplier_pes, 0);
        assert_eq!(knobs(&["ulx3s", "--pe-products", "dsp"]).unwrap().multiplier_pes, 0);
        assert_eq!(knobs(&["ulx3s", "--pe-products", "logic"]).unwrap().multiplier_pes, 96);
        let ice = ["icebreaker", "--dtype", "bf16", "--pe-products", "dsp-pairs"];
        assert_eq!(knobs(&ice).unwrap().pe_stages, 2);
        let one = ["icebreaker", "--pe-products", "dsp-pairs", "--pe-stages", "1"];
        assert_eq!(knobs(&one).unwrap().pe_stages, 1);
    }
}
