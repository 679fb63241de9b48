//! Where a build's logic goes: the cells of the netlist Yosys wrote (`netlist.json` in a
//! `systole board build` directory) counted by the block of `systole_top` they belong to.
//!
//! The build is flattened before it is mapped, so the cells have no hierarchy left; Yosys
//! names each after the net it drives (`top.engine.assembly.q_SB_DFFE_Q`, ...), and a cell is
//! counted for the block of `systole_top` (instance `top` in the board's wrapper) that its
//! name starts in, with an array index dropped (`top.acc_lanes$0` is `acc_lanes`). Logic
//! that computes a block's input is often named after the block that drives it (the decoder of
//! the FIFO's head after `fifo`), so the split is close, not exact; unlike a synthesis of the
//! unflattened Verilog, it counts what the build holds after optimisation across blocks.

use std::collections::BTreeMap;

use serde_json::Value;

/// The cells of one block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockCells {
    pub block: String,
    /// Lookup tables (`SB_LUT4`, `LUT4`).
    pub luts: usize,
    /// Carry cells (`SB_CARRY`; `CCU2C`, two bits each).
    pub carries: usize,
    pub flip_flops: usize,
    /// Block RAMs, SPRAMs and LUT RAMs.
    pub memories: usize,
    /// Multipliers and DSPs.
    pub dsps: usize,
    /// Any other cell (wide multiplexers, PLL, I/O).
    pub other: usize,
}

/// The block a cell named `name` belongs to: the component after the `top.` instance, without
/// its array index; cells of the board's wrapper are `(wrapper)`.
pub fn block_of(name: &str) -> String {
    let at = name.match_indices("top.").map(|(i, _)| i).find(|&i| {
        i == 0 || !name[..i].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_')
    });
    let Some(at) = at else { return "(wrapper)".into() };
    let rest = &name[at + 4..];
    let end = rest.find(['.', '$', ' ']).unwrap_or(rest.len());
    let block = &rest[..end];
    if block.is_empty() {
        "(top)".into()
    } else {
        block.into()
    }
}

/// The cells of the netlist's top module, by block, the largest in lookup tables first.
pub fn by_block(netlist_json: &str) -> Result<Vec<BlockCells>, String> {
    let netlist: Value =
        serde_json::from_str(netlist_json).map_err(|e| format!("not Yosys JSON: {e}"))?;
    let modules = netlist["modules"].as_object().ok_or("no `modules` object")?;
    let top = modules
        .values()
        .find(|m| m["attributes"]["top"].as_str().is_some_and(|t| t.trim_start_matches('0') == "1"))
        .or_else(|| modules.get("board_top"))
        .ok_or("no top module (attribute `top`, or `board_top`)")?;
    let cells = top["cells"].as_object().ok_or("the top module has no `cells` object")?;
    let mut blocks: BTreeMap<String, BlockCells> = BTreeMap::new();
    for (name, cell) in cells {
        let kind = cell["type"].as_str().ok_or_else(|| format!("cell {name} has no type"))?;
        if kind.starts_with('$') {
            continue; // Yosys' bookkeeping ($scopeinfo), not logic.
        }
        let block = block_of(name);
        let b = blocks
            .entry(block.clone())
            .or_insert_with(|| BlockCells { block, ..Default::default() });
        match kind {
            "SB_LUT4" | "LUT4" => b.luts += 1,
            "SB_CARRY" | "CCU2C" => b.carries += 1,
            k if k.starts_with("SB_DFF") || k == "TRELLIS_FF" => b.flip_flops += 1,
            "SB_RAM40_4K" | "SB_SPRAM256KA" | "DP16KD" | "TRELLIS_DPR16X4" => b.memories += 1,
            "SB_MAC16" | "MULT18X18D" | "ALU54B" => b.dsps += 1,
            _ => b.other += 1,
        }
    }
    let mut out: Vec<BlockCells> = blocks.into_values().collect();
    out.sort_by(|a, b| b.luts.cmp(&a.luts).then_with(|| a.block.cmp(&b.block)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_named_into_their_block_without_its_index() {
        assert_eq!(block_of("top.engine.assembly.q_SB_DFFE_Q_D"), "engine");
        assert_eq!(block_of("top.acc_lanes$0.int8$0.mul.a_SB_LUT4_O_1"), "acc_lanes");
        assert_eq!(block_of("top.array.ws$0.pes$8$p_out"), "array");
        assert_eq!(block_of("$abc$123$top.seq.row_SB_LUT4"), "seq");
        // `board_top.` or `stop.` are not the instance.
        assert_eq!(block_of("board_top.x"), "(wrapper)");
        assert_eq!(block_of("btn_n_SB_LUT4_I2"), "(wrapper)");
        assert_eq!(block_of("top."), "(top)");
    }

    #[test]
    fn a_netlist_is_counted_by_block_and_kind() {
        let json = r#"{"modules": {
            "sub": {"attributes": {}, "cells": {"top.x": {"type": "SB_LUT4"}}},
            "board_top": {"attributes": {"top": "00000000000000000000000000000001"}, "cells": {
                "top.seq.a": {"type": "SB_LUT4"}, "top.seq.b": {"type": "SB_CARRY"},
                "top.seq.c": {"type": "SB_DFFE"}, "top.fifo.ram": {"type": "SB_RAM40_4K"},
                "top.fifo.d": {"type": "LUT4"}, "top.fifo.e": {"type": "LUT4"},
                "top.array.m": {"type": "SB_MAC16"}, "pll": {"type": "SB_PLL40_PAD"},
                "s": {"type": "$scopeinfo"}}}}}"#;
        let blocks = by_block(json).unwrap();
        let names: Vec<&str> = blocks.iter().map(|b| b.block.as_str()).collect();
        assert_eq!(names, ["fifo", "seq", "(wrapper)", "array"]);
        assert_eq!(
            blocks[0],
            BlockCells { block: "fifo".into(), luts: 2, memories: 1, ..Default::default() }
        );
        assert_eq!((blocks[1].luts, blocks[1].carries, blocks[1].flip_flops), (1, 1, 1));
        assert_eq!((blocks[2].other, blocks[3].dsps), (1, 1));
    }

    #[test]
    fn what_is_not_a_netlist_is_refused_saying_why() {
        assert!(by_block("{").unwrap_err().contains("not Yosys JSON"));
        assert!(by_block("{}").unwrap_err().contains("modules"));
        assert!(by_block(r#"{"modules": {"x": {}}}"#).unwrap_err().contains("no top module"));
        let untyped = r#"{"modules": {"board_top": {"cells": {"top.a": {}}}}}"#;
        assert!(by_block(untyped).unwrap_err().contains("cell top.a has no type"));
    }
}
