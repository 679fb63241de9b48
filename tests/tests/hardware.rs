//! The emitted hardware as the open tools see it: every config of docs/HARDWARE.md's table is
//! linted by Verilator (`-Wall`, every warning either fixed or one of the explained kinds below)
//! and synthesised by Yosys. These tests need `verilator` and `yosys` on the PATH (scripts/check
//! installs them) and fail, naming the missing tool, without them.

use std::path::Path;
use std::process::Command;

use systole_core::{ArrayConfig, Dataflow, Dtype, Schedule};
use systole_hdl::{emit, emit_array, TopConfig, ARRAY_MODULE, TOP_MODULE};

/// The configs docs/HARDWARE.md reports.
const SIDES: [u16; 4] = [2, 4, 8, 16];

fn tool(name: &str) -> Command {
    let found = Command::new(name).arg("-V").output().is_ok();
    assert!(
        found,
        "`{name}` is not installed: run `apt-get install -y verilator yosys` (scripts/check does)"
    );
    Command::new(name)
}

fn write_top(config: &TopConfig, dir: &Path) -> std::path::PathBuf {
    let e = emit(config).unwrap_or_else(|err| panic!("{config:?}: {err}"));
    let path = dir.join(format!("{TOP_MODULE}.v"));
    std::fs::write(&path, e.verilog).expect("write Verilog");
    path
}

/// Whether one Verilator warning is of a kind docs/HARDWARE.md explains:
/// * UNUSEDSIGNAL on a PE output at the array's edge (`a_out`/`first_out` of the last column,
///   `w_out`/`b_out` of the bottom row): the mesh has no neighbour there;
/// * UNUSEDSIGNAL on `clock` of a zero-depth delay line (skew line 0, de-skew line C - 1);
/// * UNUSEDSIGNAL on bits of `prod`/`mant` (the INT8 product's sign copies above bit 15, the
///   bf16 product's empty top half, the f32 significand's hidden bit) and of `a`/`b` (an INT8
///   operand is the low byte of a 16-bit element bus);
/// * UNUSEDSIGNAL on outputs of the two instruction decoders (`head$*`, `candidate$*`): one feeds
///   the checks, the other the units, and each reads only the fields it needs;
/// * UNUSEDSIGNAL on the array wrapper's controls of the other dataflow (`first`/`drain` in a
///   weight-stationary machine, `shift`/`swap` in an output-stationary one);
/// * UNUSEDSIGNAL on bits of `toward_zero` (the requantizer keeps bits 62..31 of its 64-bit
///   quotient), of `rounded` (the bf16 cast keeps the top half of the rounded word), of
///   `amount` (a rotator uses its amount modulo its lanes), of `write_data` (an INT8
///   scratchpad lane stores the low byte of the 16-bit element bus), of `read_address` and
///   `write_address` (a RAM decodes the bits its depth needs) and of the host link's
///   `split_row` / `split_byte` (a row is 16 bits, a byte within a row fewer);
/// * UNUSEDSIGNAL on the sequencer's `requant_*` outputs in a BF16 machine, which has no
///   requantize lanes;
/// * UNUSEDPARAM on an enum's variants (`AccOp$*`, `LinkState$*`, `Payload$*`): rust-hdl declares
///   every variant as a `localparam` in each module with a signal of the enum's type;
/// * UNOPTFLAT: rust-hdl writes each module's logic as one `always @(*)` block, and Verilator,
///   which orders whole blocks, sees a cycle between a block computing an output from registers
///   only (a unit's `free`, the dispatcher's `running` and `enable`) and a block feeding that
///   one's inputs; no signal depends on itself (rust-hdl's `check_all` passes, and the
///   co-simulation settles).
fn explained(warning: &str) -> bool {
    if warning.starts_with("%Warning-UNOPTFLAT:") {
        return true;
    }
    if let Some(rest) = warning.strip_prefix("%Warning-UNUSEDPARAM:") {
        let name = rest.split("used: ").nth(1).unwrap_or("").trim();
        return ["'AccOp$", "'LinkState$", "'Payload$"].iter().any(|e| name.starts_with(e));
    }
    let Some(rest) = warning.strip_prefix("%Warning-UNUSEDSIGNAL:") else {
        return false;
    };
    let name = rest.split("used: ").nth(1).unwrap_or("").trim();
    let edge = ["a_out'", "w_out'", "b_out'", "first_out'"];
    let controls = ["'first'", "'drain'", "'shift'", "'swap'"];
    (rest.contains("Signal is not used: 'pes$") && edge.iter().any(|e| name.ends_with(e)))
        || name == "'clock'"
        || (rest.contains("Signal is not used")
            && (name.starts_with("'candidate$")
                // A block reads the decoded fields it needs; the rest of its bundle is unused.
                || name.starts_with("'ins$")
                // A BF16 machine has no requantize lane to lend the products to.
                || (name.starts_with("'acc_lanes$")
                    && ["$ll'", "$lh'", "$hl'", "$hh'"].iter().any(|e| name.ends_with(e)))
                || name == "'multiplier'"
                // A lane that does not register its product (`scale_cycles = 1`) has no use for
                // the clock enable its ports carry.
                || name == "'enable'"
                // An INT8 accumulator lane takes no immediate (`Scale` and `Axpy` are BF16).
                || name == "'imm'"
                || name.starts_with("'seq$requant_")
                // The blocking top gives the sequencer its ports ahead of dispatch
                // (`seq_may_start`, DECISIONS 54); the decoupled top reads `busy_next`.
                || name == "'seq$busy_next'"
                // On the SDRAM the transfer walks a transfer's addresses, not the sequencer,
                // and a run starts when the chip is quiet, long after it is ready.
                || name == "'seq$dram_write_address'"
                || name == "'seq$dram_read_address'"
                || name == "'port$ready'"
                || controls.contains(&name)))
        || (rest.contains("Bits of signal are not used") && name.starts_with("'ins$"))
        || (rest.contains("Bits of signal are not used")
            && [
                "'prod'",
                "'mant'",
                "'a'",
                "'b'",
                // The requantize lane uses the product's bits 16.. (`ll`), 30.. (`upper`) and
                // the nudged high word's bits 1..32.
                "'ll'",
                "'upper'",
                "'nudged'",
                "'rounded'",
                // The narrowed requantize lane (RTL revision 2) reads its 11-bit sum's clamp
                // bits 7..11; the low byte it takes from the wide sum's, the same bits.
                "'small_sum'",
                // The significands' sum of RTL revision 3 (`F32SigAdd`) reads the smaller
                // operand's sign of its flags, not whether it is infinite or a NaN.
                "'z_flags'",
                // A RAM decodes the address bits its depth needs.
                "'read_address'",
                "'write_address'",
                "'amount'",
                "'write_data'",
                // The host link's address split: a row is 16 bits, a byte within a row fewer.
                "'split_row'",
                "'split_byte'",
                // The DRAM extent check takes each field from the word shifted to its place.
                "'addr_word'",
                "'rows_word'",
                "'len_word'",
                "'row_stride_word'",
                "'elem_stride_word'",
                // The SDRAM controller splits a word address into the chip's column, bank and
                // row, each in the bits the chip has.
                "'col_word'",
                "'bank_word'",
                "'row_word'",
            ]
            .iter()
            .any(|s| name.starts_with(s)))
}

fn lint(config: &TopConfig) {
    let dir = tempfile::tempdir().expect("temp dir");
    let top = write_top(config, dir.path());
    let out = tool("verilator")
        .args([
            "--lint-only",
            "-Wall",
            "-Wno-WIDTH",
            "-Wno-DECLFILENAME",
            "--top-module",
            TOP_MODULE,
        ])
        .arg(&top)
        .output()
        .expect("run verilator");
    let text = String::from_utf8_lossy(&out.stderr);
    let unexplained: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("%Warning") || l.starts_with("%Error"))
        .filter(|l| !explained(l) && !l.starts_with("%Error: Exiting due to"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "{config:?}: unexplained Verilator output:\n{}",
        unexplained.join("\n")
    );
}

/// Yosys `synth` statistics of the whole top: (cells, flip-flops, block RAMs), with the script
/// docs/HARDWARE.md's table was made with: Yosys's generic `synth` up to its `fine` stage, then
/// its `fine` stage without `memory_map`, so the memories stay memories (block RAM on an FPGA)
/// instead of becoming flip-flops.
fn synth(config: &TopConfig) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let top = write_top(config, dir.path());
    let stat = dir.path().join("stat.txt");
    let script = format!(
        "read_verilog {}; synth -top {TOP_MODULE} -run begin:fine; opt -fast -full; techmap; \
         opt -fast; abc -fast; opt -fast; tee -q -o {} stat",
        top.display(),
        stat.display()
    );
    let out = tool("yosys").args(["-q", "-p", &script]).output().expect("run yosys");
    assert!(
        out.status.success(),
        "{config:?}: yosys synth failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let all = std::fs::read_to_string(&stat).expect("yosys stat output");
    // Synthesis keeps the (de-duplicated) hierarchy, which keeps 16 x 16 BF16 to seconds; the
    // totals are in the "design hierarchy" section at the end.
    let text = all.rsplit("=== design hierarchy ===").next().unwrap_or(&all);
    let field = |key: &str| -> u64 {
        text.lines()
            .filter_map(|l| l.trim().strip_prefix(key))
            .filter_map(|v| v.trim().parse().ok())
            .next_back()
            .unwrap_or(0)
    };
    let dffs: u64 = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with("$_DFF") || t.starts_with("$_SDFF") || t.starts_with("$_DFFE")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    // `stat` counts the memories as `$mem_v2` cells (their bits are the manifest's).
    let rams: u64 = text
        .lines()
        .filter(|l| l.trim_start().starts_with("$mem_v2"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    (field("Number of cells:"), dffs, rams)
}

fn configs() -> Vec<TopConfig> {
    let mut v = vec![];
    for side in SIDES {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            v.push(TopConfig::new(ArrayConfig::new(side, side, dtype)));
        }
    }
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        v.push(TopConfig::new(
            ArrayConfig::new(4, 4, dtype).with_dataflow(Dataflow::OutputStationary),
        ));
    }
    v
}

/// The decoupled machine (docs/HARDWARE.md, "The decoupled machine") of `side` x `side`,
/// synthesised beside the blocking one. It does not lint clean yet: its load and vector units are
/// two instances of one sequencer, each with the other's outputs unused (docs/HARDWARE.md, "Lint").
fn decoupled_configs(side: u16) -> Vec<TopConfig> {
    [
        (Dtype::Int8, Dataflow::WeightStationary),
        (Dtype::Bf16, Dataflow::WeightStationary),
        (Dtype::Int8, Dataflow::OutputStationary),
    ]
    .into_iter()
    .map(|(dtype, dataflow)| {
        let array = ArrayConfig::new(side, side, dtype).with_dataflow(dataflow);
        TopConfig::new(array.with_schedule(Schedule::Decoupled))
    })
    .collect()
}

#[test]
fn whole_top_lints_clean_in_verilator() {
    for config in configs() {
        lint(&config);
    }
    // Memories that register their reads, with and without the write stages beside them.
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        let read = TopConfig::new(ArrayConfig::new(4, 4, dtype).with_read_stages(1));
        lint(&read);
        lint(&TopConfig {
            spad_write_stage: true,
            acc_write_stage: true,
            dram_write_stage: true,
            ..read
        });
    }
    // On the SDRAM (two commands an array cycle), with registered reads.
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        let sdram = ArrayConfig { clock_mhz: 50.0, ..ArrayConfig::new(4, 4, dtype) }
            .with_dram_port(systole_core::DramPort::Sdram)
            .with_schedule(systole_core::Schedule::Blocking);
        lint(&TopConfig::new(sdram.with_read_stages(1)));
    }
}

/// Every kind of top, at 2 x 2: both dtypes, both dataflows, both schedules. The larger arrays
/// are the same generators' output, and synthesising the table's 13 tops took 504 s on two
/// cores (docs/DECISIONS.md 97); `the_tables_tops_synthesise_in_yosys` has them.
#[test]
fn whole_top_synthesises_in_yosys() {
    let mut configs = vec![];
    for dataflow in [Dataflow::WeightStationary, Dataflow::OutputStationary] {
        for dtype in [Dtype::Int8, Dtype::Bf16] {
            configs.push(TopConfig::new(ArrayConfig::new(2, 2, dtype).with_dataflow(dataflow)));
        }
    }
    configs.extend(decoupled_configs(2));
    synthesise_all(configs);
}

/// docs/HARDWARE.md's table, regenerated with `--ignored --nocapture`. Left out of CI for its
/// time (398 s on two cores): `whole_top_synthesises_in_yosys` makes the same checks on every
/// kind of top at 2 x 2, and the larger arrays are the same generators' output.
#[test]
#[ignore = "about 7 minutes on two cores: docs/HARDWARE.md's table (run with --ignored)"]
fn the_tables_tops_synthesise_in_yosys() {
    let mut configs = configs();
    configs.extend(decoupled_configs(4));
    synthesise_all(configs);
}

/// Synthesises `configs`, two Yosys processes at a time (CI has two cores), the biggest first,
/// and checks and prints each one's statistics.
fn synthesise_all(mut configs: Vec<TopConfig>) {
    configs.sort_by_key(|c| std::cmp::Reverse((c.array.pe_count(), c.array.dtype == Dtype::Bf16)));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(TopConfig, (u64, u64, u64))> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut done = vec![];
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(c) = configs.get(i) else { return done };
                        done.push((*c, synth(c)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a synthesis thread panicked")).collect()
    });
    for (config, (cells, dffs, rams)) in results {
        // Every PE keeps at least its partial-sum register (Yosys merges the sign copies of a top-row
        // INT8 sum and drops the last column's pass-through registers, so no exact count).
        let array = &config.array;
        assert!(dffs >= array.pe_count() * 16, "{config:?}: only {dffs} flip-flops");
        assert!(cells > dffs, "{config:?}: {cells} cells");
        // Every RAM lane stayed a memory (none became flip-flops).
        let memories = systole_hdl::emit::memories(&config);
        let lanes: u64 = memories.iter().map(|m| m.lanes * m.copies).sum();
        let bits: u64 = memories.iter().map(|m| m.bits()).sum();
        assert_eq!(rams, lanes, "{config:?}: {rams} memories, the design has {lanes} RAM lanes");
        eprintln!(
            "{}x{} {} {} {}: {cells} cells, {dffs} flip-flops, {rams} RAMs of {bits} bits",
            array.rows,
            array.cols,
            array.dtype.name(),
            array.dataflow.short_name(),
            array.schedule.name()
        );
    }
}

/// The emitted Verilog itself, Verilated: a weight load and a swapping matmul driven with
/// core's timing, every output row compared with core's summation order in the cycle the
/// accumulators take it.
fn verilated(config: &ArrayConfig) -> (systole_sim::Model, systole_hdl::Emitted) {
    let e = emit_array(config).unwrap_or_else(|err| panic!("{config:?}: {err}"));
    let ports = systole_sim::machine::ports_of(&e);
    let model = systole_sim::build_model(&e.verilog, ARRAY_MODULE, &ports, &Default::default())
        .unwrap_or_else(|err| panic!("{config:?}: verilating failed: {err}"));
    (model, e)
}

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

fn dot<A: systole_core::Arith>(a: &[u16], w: &[Vec<u16>], j: usize) -> u32 {
    let mut s = A::zero();
    for (i, &x) in a.iter().enumerate() {
        s = A::mac(s, A::operand(A::elem_from_bits(x)), A::operand(A::elem_from_bits(w[i][j])));
    }
    A::acc_to_bits(s)
}

/// A RAM lane with a read stage (`Ram::with_read_stage`), Verilated: random writes and
/// reads, some disabled, show after the next enabled cycle the word a write-first RAM read in
/// the read's cycle, or the word written to its address in that next cycle.
#[test]
fn verilated_ram_read_stage_forwards_the_next_cycles_write() {
    use systole_sim::build::Port;
    let verilog = systole_hdl::emit::block_verilog(
        systole_hdl::mem::Ram::<16, 16>::with_bits(16, 12).with_read_stage(),
    );
    let ports = [
        Port::input("clock", 1),
        Port::input("read_enable", 1),
        Port::input("read_address", 16),
        Port::output("read_data", 16),
        Port::input("write_enable", 1),
        Port::input("write_address", 16),
        Port::input("write_data", 16),
    ];
    let mut m = systole_sim::build_model(&verilog, "top", &ports, &Default::default())
        .unwrap_or_else(|err| panic!("verilating the RAM failed: {err}"));
    let port = |m: &systole_sim::Model, name: &str| m.port(name).expect("port");
    let [re, ra, rd, we, wa, wd] =
        ["read_enable", "read_address", "read_data", "write_enable", "write_address", "write_data"]
            .map(|name| port(&m, name));
    let mut mem = [0u64; 16];
    let (mut seed, mut last_read, mut pending, mut shown, mut forwarded) = (9u64, 0, 0, 0, 0);
    for cycle in 0..3000 {
        let write = lcg(&mut seed) % 3 > 0;
        let w_addr = if lcg(&mut seed) % 3 == 0 { last_read } else { lcg(&mut seed) % 16 };
        let r_addr = if lcg(&mut seed) % 3 == 0 { w_addr } else { lcg(&mut seed) % 16 };
        let read = lcg(&mut seed) % 8 > 0;
        let data = lcg(&mut seed) & 0xFFFF;
        for (p, v) in
            [(re, read as u64), (ra, r_addr), (we, write as u64), (wa, w_addr), (wd, data)]
        {
            m.set_u64(p, v).unwrap();
        }
        m.tick(1);
        if write {
            mem[w_addr as usize] = data & 0xFFF;
        }
        if read {
            let hit = write && w_addr == last_read;
            forwarded += hit as u32;
            shown = if hit { data & 0xFFF } else { pending };
            // A write-first read sees this cycle's write.
            pending = mem[r_addr as usize];
            last_read = r_addr;
        }
        assert_eq!(m.get_u64(rd).unwrap(), shown, "cycle {cycle}");
    }
    assert!(forwarded > 200, "writes forwarded past the read stage: {forwarded}");
}

#[test]
fn verilated_ws_array_matches_core_cycle_for_cycle() {
    for config in [ArrayConfig::new(3, 4, Dtype::Int8), ArrayConfig::new(4, 2, Dtype::Bf16)] {
        let (r, c) = (config.rows as usize, config.cols as usize);
        let (mut m, _) = verilated(&config);
        let mut seed = 42;
        let elem = |s: &mut u64| match config.dtype {
            Dtype::Int8 => lcg(s) as u16 & 0xFF,
            Dtype::Bf16 => (0x3E80 + lcg(s) as u16 % 0x200) | (lcg(s) as u16 & 0x8000),
        };
        let w: Vec<Vec<u16>> = (0..r).map(|_| (0..c).map(|_| elem(&mut seed)).collect()).collect();
        let rows = 5;
        let a: Vec<Vec<u16>> =
            (0..rows).map(|_| (0..r).map(|_| elem(&mut seed)).collect()).collect();
        let port = |m: &systole_sim::Model, name: String| m.port(&name).expect("port");
        // Weight loader: R cycles, bottom tile row first.
        let shift = port(&m, "shift".into());
        let swap = port(&m, "swap".into());
        let enable = port(&m, "enable".into());
        m.set_u64(enable, 1).unwrap();
        m.set_u64(shift, 1).unwrap();
        for tile_row in w.iter().rev() {
            for (j, &wj) in tile_row.iter().enumerate() {
                let p = port(&m, format!("w_top_{j}"));
                m.set_u64(p, wj as u64).unwrap();
            }
            m.tick(1);
        }
        m.set_u64(shift, 0).unwrap();
        for tau in 0..rows + r + c - 1 {
            m.set_u64(swap, (tau == 0) as u64).unwrap();
            for i in 0..r {
                let p = port(&m, format!("left_{i}"));
                let value = a.get(tau).map_or(0, |row| row[i] as u64);
                m.set_u64(p, value).unwrap();
            }
            m.eval();
            if let Some(row) = tau.checked_sub(r + c - 1) {
                for j in 0..c {
                    let got = m.get_u64(port(&m, format!("out_{j}"))).unwrap() as u32;
                    let want = match config.dtype {
                        Dtype::Int8 => dot::<systole_core::Int8>(&a[row], &w, j),
                        Dtype::Bf16 => dot::<systole_core::BF16>(&a[row], &w, j),
                    };
                    assert_eq!(got, want, "{config:?}: row {row} col {j} in cycle {tau}");
                }
            }
            m.tick(1);
        }
    }
}

/// `systole board build --pe-products logic` on an ECP5 board: Yosys' Booth pass forms every
/// PE's product in LUTs (but for those `--multiplier-pes` keeps in multipliers) and nothing
/// else, so the build uses exactly one multiplier block fewer than the default per PE in logic,
/// in both dtypes and both dataflows, and keeps the accumulator lanes' multipliers. Synthesis
/// only (YoWASP Yosys, as the board flow runs it), with the ULX3S 25F's memories.
#[test]
fn ecp5_pe_products_in_logic_take_exactly_the_pes_multipliers_out() {
    use systole_boards::board::ULX3S_25F;
    use systole_boards::yosys::{synthesize, PeProducts, Products};
    let mults = |config: &TopConfig, products: Products| -> u64 {
        let dir = tempfile::tempdir().expect("temp dir");
        write_top(config, dir.path());
        let stat = synthesize(&ULX3S_25F, dir.path(), &["systole_top.v"], TOP_MODULE, products)
            .unwrap_or_else(|e| panic!("{config:?} {products:?}: {e}"));
        // The flattened top's own count: "     12   MULT18X18D".
        stat.lines()
            .filter_map(|l| l.trim().split_once(' '))
            .filter(|(_, cell)| cell.trim() == "MULT18X18D")
            .filter_map(|(n, _)| n.parse().ok())
            .next_back()
            .unwrap_or(0)
    };
    for (dtype, dataflow) in
        [(Dtype::Int8, Dataflow::WeightStationary), (Dtype::Bf16, Dataflow::OutputStationary)]
    {
        let mut array = ULX3S_25F.config(2, 2, dtype, 15.0).with_dataflow(dataflow);
        // The BF16 preset's PEs stage their add, which only weight-stationary PEs do
        // (`ArrayConfig::may_stage_pe_add`): output-stationary ones register their product only.
        if !array.may_stage_pe_add() {
            array.pe_stages = array.pe_stages.min(2);
        }
        let m = ULX3S_25F.memories;
        let config = TopConfig {
            dram_bytes: m.dram_bytes,
            fifo_depth: m.fifo_depth,
            ..TopConfig::new(array)
        };
        // INT8 keeps one PE's product in a multiplier (the flattened flow that selects PEs by
        // instance, `--multiplier-pes`), BF16 none (the flow that selects their module).
        let pes = array.pe_count() as u32;
        let in_multipliers = match dtype {
            Dtype::Int8 => 1,
            Dtype::Bf16 => 0,
        };
        let logic = Products { way: PeProducts::Logic, in_multipliers, pes };
        let (dsp, logic) = std::thread::scope(|s| {
            let logic = s.spawn(|| mults(&config, logic));
            (
                mults(&config, Products::all(PeProducts::Dsp)),
                logic.join().expect("synthesis thread"),
            )
        });
        eprintln!(
            "2x2 {} {}: {dsp} multipliers, {logic} with the PE products in logic but for \
             {in_multipliers}",
            dtype.name(),
            dataflow.short_name()
        );
        assert!(logic > 0, "{config:?}: the accumulator lanes keep their multipliers");
        assert_eq!(
            dsp,
            logic + array.pe_count() - in_multipliers as u64,
            "{config:?}: one multiplier per PE in logic"
        );
    }
}
