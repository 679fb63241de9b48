//! `systole hdl emit`: the Verilog of one accelerator config and its manifest.

use anyhow::Context;
use serde::Serialize;
use systole_core::isa::ISA_VERSION;
use systole_core::{timing, ArrayConfig, Dtype};
use systole_hdl::{emit as emit_verilog, MemoryInfo, Port, TopConfig, TOP_MODULE};

use crate::cli::EmitArgs;
use crate::outputs::Outputs;

/// What `manifest.json` holds: enough for a simulator or a board flow to use the Verilog without
/// reading it.
#[derive(Serialize)]
struct Manifest<'a> {
    top: &'static str,
    verilog: &'static str,
    isa_version: u16,
    config: ConfigJson,
    /// Blocks the emitted top contains.
    blocks: &'a [&'static str],
    ports: &'a [Port],
    /// Memories inside the top (block RAM), and their bits in all.
    memories: &'a [MemoryInfo],
    memory_bits: u64,
    /// The host link: UART and SPI, core's packet protocol.
    link: Link,
    modules: usize,
    instances: usize,
    timing: Timing,
}

#[derive(Serialize)]
struct Link {
    uart_divisor: u16,
    uart_baud: f64,
    uart_frame: &'static str,
    spi_mode: u8,
    /// Fastest SPI clock, as a fraction of the system clock.
    spi_max_sck_mhz: f64,
    fifo_depth: usize,
}

#[derive(Serialize)]
struct ConfigJson {
    rows: u16,
    cols: u16,
    dtype: &'static str,
    dataflow: &'static str,
    schedule: &'static str,
    convert_stages: u8,
    requant_cycles: u8,
    scale_cycles: u8,
    pe_stages: u8,
    add_stages: u8,
    int8_max: bool,
    spad_width: usize,
    spad_depth: u32,
    acc_depth: u32,
    clock_mhz: f64,
    dram_bytes: usize,
    dram_banks: usize,
}

/// Cycle counts of the array ops, as core's cycle machine defines them.
#[derive(Serialize)]
struct Timing {
    load_weights: String,
    matmul: String,
    out_row_m_at: String,
}

pub fn emit(args: &EmitArgs) -> anyhow::Result<()> {
    let config = ArrayConfig {
        spad_depth: args.spad_depth,
        acc_depth: args.acc_depth,
        clock_mhz: args.clock_mhz,
        ..ArrayConfig::new(args.rows, args.cols, Dtype::from(args.dtype))
    }
    .with_dataflow(args.dataflow.into())
    .with_schedule(args.schedule.into())
    .with_convert_stages(args.convert_stages)
    .with_requant_cycles(args.requant_cycles)
    .with_scale_cycles(args.scale_cycles)
    .with_pe_stages(args.pe_stages)
    .with_add_stages(args.add_stages)
    .with_int8_max(args.int8_max);
    let mut top = TopConfig::new(config);
    top.dram_bytes = args.dram_bytes;
    top.fifo_depth = args.fifo_depth;
    top.rtl_revision = args.rtl_revision;
    top.uart_divisor = match args.uart_divisor {
        Some(divisor) => divisor,
        None => systole_hdl::top::uart_divisor(config.clock_mhz, systole_hdl::top::DEFAULT_BAUD)
            .map_err(|e| anyhow::anyhow!("--clock-mhz {}: {e}", config.clock_mhz))?,
    };
    let emitted = emit_verilog(&top).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (r, c) = (config.rows, config.cols);
    let ws = config.dataflow == systole_core::Dataflow::WeightStationary;
    let manifest = Manifest {
        top: TOP_MODULE,
        verilog: "systole_top.v",
        isa_version: ISA_VERSION,
        config: ConfigJson {
            rows: r,
            cols: c,
            dtype: config.dtype.name(),
            dataflow: config.dataflow.short_name(),
            schedule: config.schedule.name(),
            convert_stages: config.convert_stages,
            requant_cycles: config.requant_cycles,
            scale_cycles: config.scale_cycles,
            pe_stages: config.pe_stages,
            add_stages: config.add_stages,
            int8_max: config.int8_max,
            spad_width: config.spad_width(),
            spad_depth: config.spad_depth,
            acc_depth: config.acc_depth,
            clock_mhz: config.clock_mhz,
            dram_bytes: top.dram_bytes,
            dram_banks: top.dram_banks(),
        },
        blocks: if ws {
            &[
                "pe_ws",
                "mac",
                "input_skew",
                "output_deskew",
                "shadow_weights",
                "scratchpad",
                "accumulators",
                "dram",
                "vector_unit",
                "controller",
                "instruction_fifo",
                "uart",
                "spi_slave",
                "packet_engine",
            ]
        } else {
            &[
                "pe_os",
                "mac",
                "input_skew_a",
                "input_skew_b",
                "scratchpad",
                "accumulators",
                "dram",
                "vector_unit",
                "controller",
                "instruction_fifo",
                "uart",
                "spi_slave",
                "packet_engine",
            ]
        },
        ports: &emitted.ports,
        memories: &emitted.memories,
        memory_bits: emitted.memories.iter().map(MemoryInfo::bits).sum(),
        link: Link {
            uart_divisor: top.uart_divisor,
            uart_baud: top.baud(),
            uart_frame: "8N1",
            spi_mode: 0,
            spi_max_sck_mhz: config.clock_mhz / 8.0,
            fifo_depth: top.fifo_depth,
        },
        modules: emitted.modules,
        instances: emitted.instances,
        timing: if ws {
            Timing {
                load_weights: format!("{r}"),
                matmul: format!("rows + {}", timing::ws_latency(&config)),
                out_row_m_at: format!("m + {}", timing::ws_latency(&config)),
            }
        } else {
            Timing {
                load_weights: "n/a".into(),
                matmul: format!("k + {} + rows", timing::os_latency(&config)),
                out_row_m_at: format!("k + {} + m", timing::os_latency(&config)),
            }
        },
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    // Both files are staged before either is committed: a failure leaves neither half-written.
    let mut outputs = Outputs::new();
    let v_file = outputs.writes("-o", &args.out.join("systole_top.v"))?;
    let m_file = outputs.writes("-o", &args.out.join("manifest.json"))?;
    outputs.write(v_file, |out| out.write_all(emitted.verilog.as_bytes()))?;
    let json = serde_json::to_string_pretty(&manifest)?;
    outputs.write(m_file, |out| writeln!(out, "{json}"))?;
    outputs.commit()?;
    println!(
        "{} {}x{} {} {}{}: {} modules ({} instances) -> {}",
        TOP_MODULE,
        r,
        c,
        config.dtype.name(),
        config.dataflow.short_name(),
        crate::report::schedule_word(&config),
        emitted.modules,
        emitted.instances,
        args.out.display()
    );
    Ok(())
}
