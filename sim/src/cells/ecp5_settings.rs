//! Which ECP5 cell settings the simulator's models cover ([`super::ecp5`]): each instance of a
//! cell Yosys only declares (and of the flip-flop, whose clock the model takes from its pin),
//! read from the netlist as Yosys writes it, is refused by name when a setting lies outside.

use crate::toolchain::SimError;

/// One instance in a netlist Yosys wrote: its name and its `.NAME(VALUE)` settings and pins.
pub(super) struct Instance<'a> {
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
pub(super) fn instances<'a>(
    verilog: &'a str,
    cell: &'a str,
) -> impl Iterator<Item = Instance<'a>> + 'a {
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
    let Some((_, based)) = value.split_once('\'') else {
        return value.parse().ok();
    };
    let based = based.trim_start_matches(['s', 'S']);
    let radix = match based.chars().next()?.to_ascii_lowercase() {
        'd' => 10,
        'h' => 16,
        'b' => 2,
        'o' => 8,
        _ => return None,
    };
    zero_or(&based[1..], radix)
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
pub(super) fn check_settings(verilog: &str) -> Result<(), SimError> {
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
}
