//! Simulated cycles per second of the RTL machine, beside core's cycle machine on the same
//! program: a tiled GEMM whose data already sits in DRAM, so the time measured is the run
//! (upload of the program, the program's cycles, the host's status polls). The accelerators
//! are the conformance suite's (small memories; `tests/tests/conformance.rs`), so the tests
//! and the benchmark share their Verilated models. `--threads 2` models are built for 4x4 and
//! 8x8 only.
//!
//! `cargo bench -p systole-sim --bench rtl [-- FILTER]`, e.g. `-- 8x8` or `-- int8`.
//! Each line: config, threads, program cycles, all simulated cycles of the run (host traffic
//! included), wall time, simulated cycles/s; then the cycle machine's program cycles/s.
//! The first run of a config also Verilates it and prints how long that took.

use std::time::Instant;

use systole_core::machine::{golden, GoldenKind, Region};
use systole_core::params::SplitMix64;
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Machine};
use systole_hdl::TopConfig;
use systole_sim::machine::{rtl_machine, simulated_cycles};
use systole_sim::BuildOptions;

fn main() {
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let threads: Vec<Option<u32>> = vec![None, Some(2)];
    println!(
        "{:<12} {:>7} {:>10} {:>12} {:>9} {:>14} {:>16}",
        "config", "threads", "program", "simulated", "wall s", "RTL cycles/s", "cycle machine/s"
    );
    for n in [4u16, 8, 16] {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            for &t in threads.iter().filter(|t| n <= 8 || t.is_none()) {
                let name = format!("{n}x{n} {}", dtype.name());
                let tag = format!("{name} threads={}", t.map_or(1, |t| t));
                if !filter.is_empty() && !filter.iter().any(|f| tag.contains(f.as_str())) {
                    continue;
                }
                measure(&name, ArrayConfig::new(n, n, dtype), t);
            }
        }
    }
}

fn measure(name: &str, config: ArrayConfig, threads: Option<u32>) {
    let n = config.rows as u32;
    let config = ArrayConfig { spad_depth: 3 * n + 8, acc_depth: 2 * n + 8, ..config };
    let shape = GemmShape { m: 16, k: 32, n: 16 };
    let (layout, dram) = GemmLayout::packed(&config, &shape).expect("layout");
    let plan = GemmPlan::new(&config, shape, layout).expect("plan");
    let mut program = Vec::new();
    plan.emit(&mut |i| program.push(i));
    let mut rng = SplitMix64(7);
    let bytes = (shape.m * shape.k + shape.k * shape.n) as usize * config.dtype.elem_bytes();
    let data: Vec<u8> = (0..bytes).map(|_| (rng.next_u64() >> 40) as u8 & 0x3f).collect();

    let top =
        TopConfig { dram_bytes: 4096, fifo_depth: 64, uart_divisor: 4, ..TopConfig::new(config) };
    assert!(dram <= top.dram_bytes);
    let opts = BuildOptions { threads, ..Default::default() };
    let built = Instant::now();
    let mut rtl = match rtl_machine(&top, &opts) {
        Ok(m) => m,
        Err(e) => {
            println!("{name}: cannot build the RTL: {e}");
            return;
        }
    };
    let build_s = built.elapsed().as_secs_f64();
    if build_s > 2.0 {
        println!("{name}: built (Verilator + g++) in {build_s:.0} s");
    }
    rtl.write(Region::Dram, 0, &data).expect("upload");
    // Repeat the run for at least a second of wall time.
    let before = simulated_cycles(&rtl);
    let t0 = Instant::now();
    let mut stats = rtl.run(&program).expect("RTL run");
    let mut runs = 1;
    while t0.elapsed().as_secs_f64() < 1.0 {
        stats = rtl.run(&program).expect("RTL run");
        runs += 1;
    }
    let wall = t0.elapsed().as_secs_f64();
    let simulated = (simulated_cycles(&rtl) - before) / runs;
    let wall = wall / runs as f64;

    let mut cyc = golden(GoldenKind::Cycle, config, dram).expect("config");
    cyc.write(Region::Dram, 0, &data).expect("upload");
    let t1 = Instant::now();
    let reps = 20;
    let mut golden_stats = None;
    for _ in 0..reps {
        golden_stats = Some(cyc.run(&program).expect("cycle run"));
    }
    let cyc_wall = t1.elapsed().as_secs_f64() / reps as f64;
    let program_cycles = stats.cycles.unwrap_or(0);
    assert_eq!(golden_stats.and_then(|s| s.cycles), stats.cycles, "{name}: cycles differ");
    println!(
        "{:<12} {:>7} {:>10} {:>12} {:>9.3} {:>14.0} {:>16.0}",
        name,
        threads.map_or(1, |t| t),
        program_cycles,
        simulated,
        wall,
        simulated as f64 / wall,
        program_cycles as f64 / cyc_wall
    );
}
