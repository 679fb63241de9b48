//! `systole board`: list the supported dev boards, build a bitstream for one, program it.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{anyhow, bail, Context};
use systole_boards::board::{by_name, BOARDS};
use systole_boards::flow::{self, Design, FlowError};
use systole_boards::wrapper::{self, TopPort};
use systole_boards::Board;
use systole_core::ArrayConfig;

use crate::cli::{BoardBuildArgs, BoardProgramArgs, DtypeArg};

fn board(name: &str) -> anyhow::Result<Board> {
    by_name(name).ok_or_else(|| {
        let names: Vec<&str> = BOARDS.iter().map(|b| b.name).collect();
        anyhow!("unknown board `{name}`: the boards are {}", names.join(", "))
    })
}

/// `systole board list`: each board, its default array, and whether its tools are installed.
pub fn list() -> anyhow::Result<()> {
    println!("{:<12} {:<8} {:<12} {:>8}  board", "name", "family", "default", "clock");
    for b in BOARDS {
        let family = match b.family {
            systole_boards::Family::Ice40 => "iCE40",
            systole_boards::Family::Ecp5 => "ECP5",
        };
        let array = format!("{}x{} {}", b.default_rows, b.default_cols, b.default_dtype.name());
        println!(
            "{:<12} {:<8} {:<12} {:>4} MHz  {}",
            b.name, family, array, b.default_mhz, b.title
        );
    }
    Ok(())
}

/// `systole board build`: emit the array's Verilog, wrap it for the board, run the flow.
pub fn build(args: &BoardBuildArgs) -> anyhow::Result<()> {
    let b = board(&args.board)?;
    let mut config = b.default_config();
    config.rows = args.rows.unwrap_or(config.rows);
    config.cols = args.cols.unwrap_or(config.cols);
    if let Some(d) = args.dtype {
        config.dtype = match d {
            DtypeArg::Int8 => systole_core::Dtype::Int8,
            DtypeArg::Bf16 => systole_core::Dtype::Bf16,
        };
    }
    config.clock_mhz = args.clock_mhz.unwrap_or(b.default_mhz);
    config.validate().map_err(|e| anyhow!("array config: {e}"))?;
    let emitted =
        systole_hdl::emit(&systole_hdl::TopConfig::new(config)).map_err(|e| anyhow!("{e}"))?;
    let ports: Vec<TopPort> = emitted
        .ports
        .iter()
        .map(|p| TopPort { name: p.name.clone(), input: p.direction == "input", bits: p.bits })
        .collect();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let use_pll = (config.clock_mhz - b.clock_mhz).abs() > 1e-9;
    let top = wrapper::wrapper(&b, &ports, use_pll)?;
    let mut sources =
        vec![("systole_top.v".to_string(), emitted.verilog), ("board_top.v".to_string(), top)];
    if use_pll {
        let file = wrapper::pll(&b, config.clock_mhz, &args.out)?;
        let text = std::fs::read_to_string(args.out.join(&file))?;
        sources.push((file, text));
    }
    let design = Design { sources, top: "board_top".into() };
    eprintln!(
        "building {} for {} at {} MHz in {}",
        describe(&config),
        b.name,
        config.clock_mhz,
        args.out.display()
    );
    match flow::build(&b, &design, config.clock_mhz, &args.out) {
        Ok(r) => {
            println!(
                "{}: {} LUTs of {}, {} flip-flops, {} block RAMs, {} DSPs; fmax {:.1} MHz for {} MHz \
                 (timing met); {}",
                b.name,
                r.luts,
                r.luts_available,
                r.flip_flops,
                r.bram,
                r.dsps,
                r.fmax_mhz,
                r.target_mhz,
                args.out.join(b.bitstream_name()).display()
            );
            Ok(())
        }
        Err(FlowError::Timing { report, dir }) => bail!(
            "timing not met on {}: {:.2} MHz achieved for {} MHz; lower --clock-mhz or the array (report in {dir}/report.json)",
            b.name,
            report.fmax_mhz,
            report.target_mhz
        ),
        Err(e) => Err(anyhow!("{e}")),
    }
}

fn describe(c: &ArrayConfig) -> String {
    format!("a {}x{} {} array", c.rows, c.cols, c.dtype.name())
}

/// `systole board program`: load DIR's bitstream with the board's programmer.
pub fn program(args: &BoardProgramArgs) -> anyhow::Result<()> {
    let b = board(&args.board)?;
    let bitstream: PathBuf = args.dir.join(b.bitstream_name());
    if !bitstream.is_file() {
        bail!(
            "{} not found: run `systole board build {} -o {}` first",
            bitstream.display(),
            b.name,
            args.dir.display()
        );
    }
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
