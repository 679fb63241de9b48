//! Verilog text -> a loadable shared library, cached by a hash of everything that went in.
//!
//! The steps (the Verilator recipe that works with Debian's Verilator 5.006):
//! 1. `verilator --cc -O3 [--trace] -CFLAGS -fPIC` writes the C++ model; its makefile builds
//!    `V<top>__ALL.a`. Tracing is built in only when asked for ([`BuildOptions::trace`]): it
//!    doubles the C++ to compile and slows every cycle.
//! 2. Verilator's runtime (`verilated.cpp`, `verilated_vcd_c.cpp`, `verilated_threads.cpp`) is
//!    compiled once per Verilator version into the cache.
//! 3. A generated C++ shim gives the model a C ABI (set and get a port by index, eval, tick,
//!    trace), and g++ links shim, model and runtime into `libmodel.so`.
//!
//! The cache key hashes the shim generator's version, Verilator's version, the compiler, the
//! options, the port list and the Verilog itself; the build happens in a temporary directory
//! that is renamed into place, so concurrent builders never see a half-built model.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::model::Model;
pub use crate::port::{Port, PortDir};
use crate::toolchain::{self, run, SimError};

/// Bumped whenever the generated shim changes, to invalidate cached models.
const SHIM_VERSION: u32 = 2;

/// The C++ optimisation of the model's per-cycle code (Verilator's makefile defaults to -Os):
/// -O1 builds in half the time of -O2 and runs about 10% slower (docs/DECISIONS.md 96).
const OPT_FAST: &str = "-O1";
/// The C++ optimisation of the code that runs once, at the model's first evaluation
/// (Verilator's makefile defaults to -Os): none, since it runs once and is half the C++.
const OPT_SLOW: &str = "-O0";

/// How to build.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Verilator `--threads N` (None: single-threaded model).
    pub threads: Option<u32>,
    /// Build VCD tracing in (`Model::trace`); without it, `Model::trace` is refused.
    pub trace: bool,
    /// Where built models live; default `$SYSTOLE_SIM_CACHE`, else `$XDG_CACHE_HOME/systole/sim`,
    /// else `~/.cache/systole/sim`.
    pub cache_dir: Option<PathBuf>,
}

fn default_cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("SYSTOLE_SIM_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("systole").join("sim")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Builds (or finds in the cache) and loads the model of `top` in `verilog`.
pub fn build_model(
    verilog: &str,
    top: &str,
    ports: &[Port],
    opts: &BuildOptions,
) -> Result<Model, SimError> {
    Model::load(&build_library(verilog, top, ports, opts)?, ports)
}

/// Builds (or finds in the cache) the model of `top` in `verilog`: the path of its shared
/// library, from which [`Model::load`] makes any number of instances.
pub fn build_library(
    verilog: &str,
    top: &str,
    ports: &[Port],
    opts: &BuildOptions,
) -> Result<PathBuf, SimError> {
    check_ports(ports)?;
    let with_models = crate::cells::with_cell_models(verilog)?;
    let verilog = with_models.as_str();
    let version = toolchain::verilator_version()?;
    let cxx = toolchain::cxx()?;
    let cache = opts.cache_dir.clone().unwrap_or_else(default_cache);
    let mut h = Sha256::new();
    h.update(format!(
        "shim {SHIM_VERSION} {OPT_FAST} {OPT_SLOW}\n{version}\n{cxx}\n{top}\n{:?} trace {}\n{ports:?}\n",
        opts.threads, opts.trace
    ));
    h.update(verilog.as_bytes());
    let key = hex(&h.finalize()[..16]);
    let dir = cache.join(format!("{top}-{key}"));
    let lib = dir.join("libmodel.so");
    if !lib.is_file() {
        std::fs::create_dir_all(&cache).map_err(SimError::io(&cache))?;
        let runtime = build_runtime(&cache, &version, &cxx)?;
        let work = tempfile::Builder::new()
            .prefix(".build-")
            .tempdir_in(&cache)
            .map_err(SimError::io(&cache))?;
        build_in(work.path(), verilog, top, ports, opts, &cxx, &runtime)?;
        // Another builder may have won the race; either copy is complete.
        match std::fs::rename(work.path(), &dir) {
            Ok(()) => {
                let _ = work.keep();
            }
            Err(_) if lib.is_file() => {}
            Err(e) => return Err(SimError::Io { path: dir.clone(), source: e }),
        }
    }
    Ok(lib)
}

fn check_ports(ports: &[Port]) -> Result<(), SimError> {
    for p in ports {
        let valid = !p.name.is_empty()
            && p.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !p.name.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(SimError::Port { name: p.name.clone(), why: "not a C identifier".into() });
        }
        if p.width == 0 {
            return Err(SimError::Port { name: p.name.clone(), why: "width 0".into() });
        }
    }
    Ok(())
}

/// Verilator's runtime objects, compiled once per Verilator version and compiler.
fn build_runtime(cache: &Path, version: &str, cxx: &str) -> Result<Vec<PathBuf>, SimError> {
    let include = toolchain::verilator_include()?;
    let key = hex(&Sha256::digest(format!("{version}\n{cxx}\n").as_bytes())[..8]);
    let dir = cache.join(format!("runtime-{key}"));
    let sources = ["verilated.cpp", "verilated_vcd_c.cpp", "verilated_threads.cpp"];
    let objects: Vec<PathBuf> = sources.iter().map(|s| dir.join(s.replace(".cpp", ".o"))).collect();
    if objects.iter().all(|o| o.is_file()) {
        return Ok(objects);
    }
    let work = tempfile::Builder::new()
        .prefix(".runtime-")
        .tempdir_in(cache)
        .map_err(SimError::io(cache))?;
    for src in sources {
        let obj = work.path().join(src.replace(".cpp", ".o"));
        run(
            format!("{cxx} -c {src}"),
            Command::new(cxx)
                .args(["-c", "-O2", "-fPIC", "-std=c++17", "-w"])
                .arg(format!("-I{}", include.display()))
                .arg(format!("-I{}", include.join("vltstd").display()))
                .arg(include.join(src))
                .arg("-o")
                .arg(&obj),
        )?;
    }
    match std::fs::rename(work.path(), &dir) {
        Ok(()) => {
            let _ = work.keep();
        }
        Err(_) if objects.iter().all(|o| o.is_file()) => {}
        Err(e) => return Err(SimError::Io { path: dir, source: e }),
    }
    Ok(objects)
}

fn build_in(
    work: &Path,
    verilog: &str,
    top: &str,
    ports: &[Port],
    opts: &BuildOptions,
    cxx: &str,
    runtime: &[PathBuf],
) -> Result<(), SimError> {
    let include = toolchain::verilator_include()?;
    let src = work.join(format!("{top}.v"));
    std::fs::write(&src, verilog).map_err(SimError::io(&src))?;
    let shim = work.join("shim.cpp");
    std::fs::write(&shim, shim_source(top, ports, opts.trace)).map_err(SimError::io(&shim))?;
    let obj = work.join("obj");
    let mut verilator = Command::new("verilator");
    verilator
        .args(["--cc", "-O3", "-Wno-fatal", "-Wno-WIDTH", "--top-module", top])
        .args(["-CFLAGS", "-fPIC", "-Mdir"])
        .arg(&obj)
        .arg(&src);
    if let Some(n) = opts.threads {
        verilator.args(["--threads", &n.to_string()]);
    }
    if opts.trace {
        verilator.arg("--trace");
    }
    run("verilator", &mut verilator)?;
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get()).to_string();
    run(
        "make (Verilated model)",
        Command::new("make").arg("-C").arg(&obj).args([
            "-f",
            &format!("V{top}.mk"),
            "-j",
            &jobs,
            &format!("OPT_FAST={OPT_FAST}"),
            &format!("OPT_SLOW={OPT_SLOW}"),
        ]),
    )?;
    let mut link = Command::new(cxx);
    link.args(["-shared", "-fPIC", "-O2", "-std=c++17", "-w"])
        .arg(format!("-I{}", obj.display()))
        .arg(format!("-I{}", include.display()))
        .arg(format!("-I{}", include.join("vltstd").display()))
        .arg(&shim)
        .arg(obj.join(format!("V{top}__ALL.a")))
        .args(runtime)
        .args(["-pthread", "-o"])
        .arg(work.join("libmodel.so"));
    run("g++ (shim and model)", &mut link)?;
    Ok(())
}

/// The C ABI over `V<top>`: ports by index, in `ports` order.
fn shim_source(top: &str, ports: &[Port], trace: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "// Generated by systole-sim (shim version {SHIM_VERSION}). Do not edit.");
    let _ = writeln!(s, "#include <cstdint>\n#include <cstring>\n#include \"V{top}.h\"");
    let _ = writeln!(s, "#include \"verilated.h\"\n#include \"verilated_vcd_c.h\"");
    let _ = writeln!(
        s,
        "struct Sim {{ VerilatedContext ctx; V{top}* m; VerilatedVcdC* vcd = nullptr; uint64_t time = 0; }};"
    );
    s.push_str("extern \"C\" {\n");
    let _ = writeln!(
        s,
        "void* systole_sim_new() {{ Sim* s = new Sim; s->ctx.traceEverOn(true); s->m = new V{top}(&s->ctx, \"TOP\"); return s; }}"
    );
    s.push_str(
        "void systole_sim_free(void* p) { Sim* s = (Sim*)p; if (s->vcd) { s->vcd->close(); delete s->vcd; } s->m->final(); delete s->m; delete s; }\n",
    );
    s.push_str(
        "void systole_sim_eval(void* p) { Sim* s = (Sim*)p; s->m->eval(); if (s->vcd) s->vcd->dump(s->time); s->time++; }\n",
    );
    s.push_str("int systole_sim_set(void* p, uint32_t port, const uint32_t* w) {\n  Sim* s = (Sim*)p;\n  switch (port) {\n");
    for (i, port) in ports.iter().enumerate().filter(|(_, p)| p.dir == PortDir::Input) {
        let _ = writeln!(s, "  case {i}: {} return 0;", assign_in(port));
    }
    s.push_str("  default: return -1;\n  }\n}\n");
    s.push_str("int systole_sim_get(void* p, uint32_t port, uint32_t* w) {\n  Sim* s = (Sim*)p;\n  switch (port) {\n");
    for (i, port) in ports.iter().enumerate() {
        let _ = writeln!(s, "  case {i}: {} return 0;", read_out(port));
    }
    s.push_str("  default: return -1;\n  }\n}\n");
    if trace {
        s.push_str(
            "int systole_sim_trace_open(void* p, const char* path) { Sim* s = (Sim*)p; if (s->vcd) return -1; s->vcd = new VerilatedVcdC; s->m->trace(s->vcd, 99); s->vcd->open(path); return s->vcd->isOpen() ? 0 : -1; }\n",
        );
    } else {
        s.push_str("int systole_sim_trace_open(void* p, const char* path) { (void)p; (void)path; return -2; }\n");
    }
    s.push_str("void systole_sim_trace_close(void* p) { Sim* s = (Sim*)p; if (s->vcd) { s->vcd->close(); delete s->vcd; s->vcd = nullptr; } }\n");
    // Clocked designs get a fast tick: n rising edges without crossing the FFI per edge.
    match ports.iter().find(|p| p.name == "clock" && p.dir == PortDir::Input && p.width == 1) {
        Some(_) => s.push_str(
            "void systole_sim_tick(void* p, uint64_t n) { Sim* s = (Sim*)p; for (uint64_t i = 0; i < n; i++) { s->m->clock = 0; s->m->eval(); if (s->vcd) s->vcd->dump(s->time); s->time++; s->m->clock = 1; s->m->eval(); if (s->vcd) s->vcd->dump(s->time); s->time++; } }\n",
        ),
        None => s.push_str("void systole_sim_tick(void* p, uint64_t n) { (void)p; (void)n; }\n"),
    }
    s.push_str("}\n");
    s
}

fn assign_in(p: &Port) -> String {
    let n = &p.name;
    match p.width {
        1..=32 => {
            let mask = if p.width == 32 { u32::MAX } else { (1u32 << p.width) - 1 };
            format!("s->m->{n} = w[0] & {mask}u;")
        }
        33..=64 => {
            let mask = if p.width == 64 { u64::MAX } else { (1u64 << p.width) - 1 };
            format!("s->m->{n} = ((uint64_t)w[0] | ((uint64_t)w[1] << 32)) & {mask}ull;")
        }
        _ => format!("std::memcpy(s->m->{n}.data(), w, {} * 4);", p.words()),
    }
}

fn read_out(p: &Port) -> String {
    let n = &p.name;
    match p.width {
        1..=32 => format!("w[0] = (uint32_t)s->m->{n};"),
        33..=64 => format!("w[0] = (uint32_t)s->m->{n}; w[1] = (uint32_t)(s->m->{n} >> 32);"),
        _ => format!("std::memcpy(w, s->m->{n}.data(), {} * 4);", p.words()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COUNTER: &str =
        "module counter(input wire clock, input wire reset, input wire [7:0] step,
        input wire [95:0] wide_in, output reg [31:0] count, output wire [63:0] pair,
        output wire [95:0] wide_out);
      always @(posedge clock) if (reset) count <= 0; else count <= count + {24'd0, step};
      assign pair = {count, ~count};
      assign wide_out = ~wide_in;
    endmodule";

    fn ports() -> Vec<Port> {
        vec![
            Port::input("clock", 1),
            Port::input("reset", 1),
            Port::input("step", 8),
            Port::input("wide_in", 96),
            Port::output("count", 32),
            Port::output("pair", 64),
            Port::output("wide_out", 96),
        ]
    }

    fn opts(dir: &Path) -> BuildOptions {
        BuildOptions { threads: None, trace: true, cache_dir: Some(dir.to_path_buf()) }
    }

    #[test]
    fn a_counter_counts_and_the_cache_is_reused() {
        let cache = tempfile::tempdir().unwrap();
        let mut m = build_model(COUNTER, "counter", &ports(), &opts(cache.path())).unwrap();
        let (reset, step, count, pair) = (m.port("reset").unwrap(), m.port("step").unwrap(), 4, 5);
        m.set_u64(reset, 1).unwrap();
        m.tick(1);
        m.set_u64(reset, 0).unwrap();
        m.set_u64(step, 3 | 0x100).unwrap(); // bit 8 is past the port's width and dropped
        m.tick(10);
        assert_eq!(m.get_u64(count).unwrap(), 30);
        assert_eq!(m.get_u64(pair).unwrap(), (30u64 << 32) | (!30u32) as u64);
        m.set(3, &[1, 2, 3]).unwrap();
        m.eval();
        let mut w = [0u32; 3];
        m.get(6, &mut w).unwrap();
        assert_eq!(w, [!1, !2, !3]);
        assert!(m.set(count, &[1]).is_err(), "an output cannot be driven");
        // The same Verilog again: the cached library is loaded, not rebuilt.
        let built: Vec<_> =
            std::fs::read_dir(cache.path()).unwrap().map(|e| e.unwrap().path()).collect();
        let lib = built
            .iter()
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("counter-"))
            .unwrap();
        let stamp = std::fs::metadata(lib.join("libmodel.so")).unwrap().modified().unwrap();
        let again = build_model(COUNTER, "counter", &ports(), &opts(cache.path())).unwrap();
        assert_eq!(again.get_u64(count).unwrap(), 0, "a fresh instance");
        assert_eq!(std::fs::metadata(lib.join("libmodel.so")).unwrap().modified().unwrap(), stamp);
        // Traced: a VCD of every port.
        let vcd = cache.path().join("counter.vcd");
        let mut traced = again;
        traced.trace(&vcd).unwrap();
        traced.tick(3);
        traced.close_trace();
        let text = std::fs::read_to_string(&vcd).unwrap();
        assert!(text.contains("$enddefinitions") && text.contains(" count "), "{text}");
    }

    #[test]
    fn a_model_built_without_tracing_refuses_a_trace() {
        let cache = tempfile::tempdir().unwrap();
        let opts = BuildOptions { trace: false, ..opts(cache.path()) };
        let mut m = build_model(COUNTER, "counter", &ports(), &opts).unwrap();
        let err = m.trace(&cache.path().join("x.vcd")).unwrap_err();
        assert!(err.to_string().contains("built without tracing"), "{err}");
        m.tick(2);
    }

    #[test]
    fn verilator_errors_carry_its_output() {
        let cache = tempfile::tempdir().unwrap();
        let broken = "module broken(input wire clock); always @(posedge clock) undefined_signal <= 1; endmodule";
        let err = build_model(broken, "broken", &[Port::input("clock", 1)], &opts(cache.path()))
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("verilator failed"), "{text}");
        assert!(text.contains("undefined_signal"), "the tool's own message is kept: {text}");
    }

    #[test]
    fn bad_port_names_are_refused_before_building() {
        let err =
            build_model("", "x", &[Port::input("a;b", 1)], &BuildOptions::default()).unwrap_err();
        assert!(err.to_string().contains("not a C identifier"), "{err}");
    }
}
