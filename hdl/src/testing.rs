//! Helpers of the hdl unit tests: settle a combinational block, step a clocked one, random
//! operands with the special values over-represented.

use proptest::prelude::*;
use rust_hdl::prelude::*;

/// One step of the tests' seeded generator (Knuth's MMIX LCG): advances `seed` and returns
/// its new state, whose high bits the callers take.
pub fn lcg_step(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed
}

/// Propagates inputs through a combinational block until nothing changes.
pub fn settle<B: Block>(uut: &mut B) {
    assert!(simulate(uut, 10_000), "the block did not settle (a combinational loop?)");
}

/// One rising clock edge, then settle: what the registers hold after this cycle.
pub fn tick<B: Block>(uut: &mut B, clock: impl Fn(&mut B) -> &mut Signal<In, Clock>) {
    settle(uut);
    clock(uut).next = Clock { clk: true };
    settle(uut);
    clock(uut).next = Clock { clk: false };
    settle(uut);
}

/// The Verilog of a block, connected as a top level.
pub use crate::emit::block_verilog as verilog_of;

/// f32 bit patterns: random bits, bf16-shaped values, and the special cases (zeros of both
/// signs, subnormals, the smallest and largest normals, infinities, NaN with payloads).
pub fn f32_operand() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => any::<u32>(),
        2 => any::<u16>().prop_map(|h| (h as u32) << 16),
        2 => (any::<bool>(), 120u32..136, any::<u32>())
            .prop_map(|(s, e, m)| (s as u32) << 31 | e << 23 | m & 0x7F_FFFF),
        1 => (any::<bool>(), 0u32..3, any::<u32>())
            .prop_map(|(s, e, m)| (s as u32) << 31 | e << 23 | m & 0x7F_FFFF),
        1 => (any::<bool>(), 252u32..256, any::<u32>())
            .prop_map(|(s, e, m)| (s as u32) << 31 | e << 23 | m & 0x7F_FFFF),
        2 => prop::sample::select(vec![
            0u32, 0x8000_0000, 0x7F80_0000, 0xFF80_0000, 0x7FC0_0000, 0xFFC1_2345, 0x0000_0001,
            0x807F_FFFF, 0x0080_0000, 0x8080_0000, 0x7F7F_FFFF, 0xFF7F_FFFF, 0x3F80_0000,
            0xBF80_0000, 0x3F7F_FFFF, 0x3380_0000,
        ]),
    ]
}

/// i32 words as bits, the edges (zero, one, the extremes, -1) over-represented.
pub fn int_word() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>(),
        prop::sample::select(vec![0u32, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0xFFFF])
    ]
}

/// bf16 bit patterns, the special cases over-represented.
pub fn bf16_operand() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => any::<u16>(),
        1 => prop::sample::select(vec![
            0u16, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F,
            0x3F80, 0xBF80, 0x0040,
        ]),
        1 => (any::<bool>(), 0u16..4, any::<u16>())
            .prop_map(|(s, e, m)| (s as u16) << 15 | e << 7 | m & 0x7F),
        1 => (any::<bool>(), 250u16..256, any::<u16>())
            .prop_map(|(s, e, m)| (s as u16) << 15 | e << 7 | m & 0x7F),
    ]
}

/// Evaluates the emitted Verilog of a combinational block with Yosys (`eval`), one input
/// vector per call of `inputs`: the Verilog itself, not the Rust model, is checked.
pub fn yosys_eval(verilog: &str, vectors: &[Vec<(&str, u64)>], output: &str) -> Vec<u64> {
    use std::fmt::Write as _;
    let dir =
        std::env::temp_dir().join(format!("systole-eval-{}-{}", std::process::id(), vectors.len()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(format!("{}.v", verilog.len() ^ vectors.len()));
    std::fs::write(&file, verilog).expect("write verilog");
    let mut script =
        format!("read_verilog {}; hierarchy -top top; proc; flatten; opt_clean; ", file.display());
    for v in vectors {
        script.push_str("eval");
        for (name, value) in v {
            let _ = write!(script, " -set {name} {value}");
        }
        let _ = write!(script, " -show {output}; ");
    }
    let out = std::process::Command::new("yosys")
        .args(["-p", &script])
        .output()
        .expect("yosys must be installed (apt-get install yosys)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "yosys failed: {}{}", text, String::from_utf8_lossy(&out.stderr));
    let results: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_once("Eval result:"))
        .map(|(_, r)| {
            let value = r.rsplit('=').next().unwrap_or("").trim().trim_end_matches('.');
            let parsed = match value.split_once('\'') {
                Some((_, bits)) => u64::from_str_radix(bits, 2),
                None => value.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("cannot parse {r:?}"))
        })
        .collect();
    assert_eq!(results.len(), vectors.len(), "yosys output: {text}");
    results
}
