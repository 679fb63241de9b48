//! Instantiated primitives keep the parameters their Verilog gives them: a check of the
//! synthesized netlist against the sources (docs/DECISIONS.md 117: Yosys' iCE40 DSP mapper
//! once rewrote every instantiated `SB_MAC16`).

use crate::tool::ToolError;

/// One instance of a primitive in the sources: its instance name and its parameters' values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub parameters: Vec<(String, u64)>,
}

/// The instances of `cell` in Verilog `text` written as `cell #(.P(v), ...) name (`, each
/// value a sized literal (`2'b10`, `16'h0`, `4'd3`) or a plain decimal.
pub fn instances(text: &str, cell: &str) -> Vec<Instance> {
    let opening = format!("{cell} #(");
    let mut found = vec![];
    let mut rest = text;
    while let Some(at) = rest.find(&opening) {
        let body = &rest[at + opening.len()..];
        // The parameter list closes at the first `)` at depth zero.
        let mut depth = 0usize;
        let close = body.char_indices().find(|&(_, c)| match c {
            '(' => {
                depth += 1;
                false
            }
            ')' if depth == 0 => true,
            ')' => {
                depth -= 1;
                false
            }
            _ => false,
        });
        let Some((close, _)) = close else { break };
        let name: String = body[close + 1..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let parameters = body[..close]
            .split('.')
            .filter_map(|p| {
                let (key, value) = p.split_once('(')?;
                let value = value.split(')').next()?.trim();
                Some((key.trim().to_string(), literal(value)?))
            })
            .collect();
        found.push(Instance { name, parameters });
        rest = &body[close..];
    }
    found
}

/// A Verilog number: `N'bBITS`, `N'hHEX`, `N'dDEC` or a plain decimal.
fn literal(text: &str) -> Option<u64> {
    match text.split_once('\'') {
        None => text.parse().ok(),
        Some((_, based)) => {
            let radix = match based.chars().next()?.to_ascii_lowercase() {
                'b' => 2,
                'h' => 16,
                'd' => 10,
                _ => return None,
            };
            u64::from_str_radix(&based[1..].replace('_', ""), radix).ok()
        }
    }
}

/// Checks that every cell of type `cell` in the netlist (Yosys' JSON) whose name ends in one
/// of `instances`' names has that instance's parameters; returns how many cells it checked.
pub fn check_netlist(
    netlist: &str,
    cell: &str,
    instances: &[Instance],
) -> Result<usize, ToolError> {
    let bad = |what: String| ToolError::Report(format!("netlist.json: {what}"));
    let json: serde_json::Value =
        serde_json::from_str(netlist).map_err(|e| bad(format!("not Yosys' JSON: {e}")))?;
    let modules = json["modules"].as_object().ok_or_else(|| bad("no modules".into()))?;
    let mut checked = 0;
    for (module, m) in modules {
        let Some(cells) = m["cells"].as_object() else { continue };
        for (name, c) in cells.iter().filter(|(_, c)| c["type"] == cell) {
            let leaf = name.rsplit('.').next().unwrap_or(name);
            let Some(instance) = instances.iter().find(|i| i.name == leaf) else { continue };
            for (key, want) in &instance.parameters {
                let got = c["parameters"][key.as_str()].as_str().and_then(|v| {
                    // Yosys writes a parameter as its bits, most significant first.
                    u64::from_str_radix(v, 2).ok()
                });
                if got != Some(*want) {
                    return Err(ToolError::Report(format!(
                        "synthesis changed the instantiated {cell} `{name}` (module {module}): \
                         its {key} is {} where the Verilog gives {want}; a bitstream from this \
                         netlist would not compute what the design says",
                        got.map_or("absent".to_string(), |g| g.to_string())
                    )));
                }
            }
            checked += 1;
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "module m;\n    SB_MAC16 #(\n        .MODE_8x8(1'b1),\n        \
                          .TOPOUTPUT_SELECT(2'b10),\n        .C_REG(0)\n    ) dsp (\n        \
                          .CLK(clock), .A({a1, a0}), .O(o));\nendmodule\n";

    #[test]
    fn reads_the_instances_and_their_parameters() {
        let found = instances(SOURCE, "SB_MAC16");
        let want = [("MODE_8x8", 1), ("TOPOUTPUT_SELECT", 2), ("C_REG", 0)];
        let want: Vec<_> = want.iter().map(|&(k, v)| (k.to_string(), v)).collect();
        assert_eq!(found, vec![Instance { name: "dsp".into(), parameters: want }]);
        assert!(instances(SOURCE, "MULT18X18D").is_empty());
        assert_eq!(literal("16'h0_1f"), Some(31));
        assert_eq!(literal("4'd9"), Some(9));
        assert_eq!(literal("x"), None);
    }

    #[test]
    fn a_rewritten_parameter_is_an_error_naming_it() {
        let found = instances(SOURCE, "SB_MAC16");
        let netlist = |mode: &str| {
            format!(
                r#"{{"modules": {{"top": {{"cells": {{
                "top.pairs$0.dsp": {{"type": "SB_MAC16", "parameters": {{"MODE_8x8": "{mode}",
                    "TOPOUTPUT_SELECT": "10", "C_REG": "0"}}}},
                "mul_SB_MAC16_O": {{"type": "SB_MAC16", "parameters": {{"MODE_8x8": "0"}}}}
                }}}}}}}}"#
            )
        };
        assert_eq!(check_netlist(&netlist("1"), "SB_MAC16", &found).unwrap(), 1);
        let err = check_netlist(&netlist("0"), "SB_MAC16", &found).unwrap_err().to_string();
        assert!(err.contains("top.pairs$0.dsp") && err.contains("MODE_8x8 is 0"), "{err}");
        assert!(check_netlist("{", "SB_MAC16", &found).is_err());
    }
}
