//! Two PEs' INT8 products in one iCE40 UP5K DSP (`SB_MAC16`) in its dual 8 x 8 mode.
//!
//! The UP5K has 8 DSPs. Yosys maps each `i8 x i8` product to a whole 16 x 16 DSP and never uses
//! the 8 x 8 mode, in which one DSP forms two independent signed products, `A[15:8] * B[15:8]`
//! and `A[7:0] * B[7:0]`, each with its own product register. [`DspPair`] instantiates that
//! mode: the products of PE `2q` (low half) and PE `2q + 1` (high half) leave the DSP registered,
//! which is exactly a two-stage PE's product register (`ArrayConfig::pe_stages` 2, the
//! `MacInt8Staged` of `mac.rs`), so the pairs change where the bits are formed, never which
//! bits or in which cycle. Its registers take the array's clock enable (`CE`).
//!
//! The Rust model below is what rust-hdl simulates; the Verilog is the instance. Simulated
//! Verilog (Verilator) takes the instance's behaviour from Yosys' own model of the cell
//! (`ice40/cells_sim.v`, where the tools are installed), and the conformance suite runs a
//! paired machine against core through it.

use rust_hdl::prelude::*;

/// Two registered signed 8 x 8 products: `p0 = a0 * b0`, `p1 = a1 * b1` of the last cycle with
/// `enable`, each exact in 16 bits.
#[derive(LogicBlock, Default)]
pub struct DspPair {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a0: Signal<In, Bits<8>>,
    pub b0: Signal<In, Bits<8>>,
    pub a1: Signal<In, Bits<8>>,
    pub b1: Signal<In, Bits<8>>,
    pub p0: Signal<Out, Bits<16>>,
    pub p1: Signal<Out, Bits<16>>,
    product0: DFF<Bits<16>>,
    product1: DFF<Bits<16>>,
}

/// The signed product of two bytes, as 16 bits (the model's arithmetic; the instance's is the
/// DSP's).
fn signed_product(a: Bits<8>, b: Bits<8>) -> Bits<16> {
    let p = (a.to_u8() as i8 as i32) * (b.to_u8() as i8 as i32);
    ((p as u16) as u64).into()
}

impl Logic for DspPair {
    fn update(&mut self) {
        self.product0.clock.next = self.clock.val();
        self.product1.clock.next = self.clock.val();
        self.product0.d.next = self.product0.q.val();
        self.product1.d.next = self.product1.q.val();
        if self.enable.val() {
            self.product0.d.next = signed_product(self.a0.val(), self.b0.val());
            self.product1.d.next = signed_product(self.a1.val(), self.b1.val());
        }
        self.p0.next = self.product0.q.val();
        self.p1.next = self.product1.q.val();
    }

    fn connect(&mut self) {
        self.product0.clock.connect();
        self.product1.clock.connect();
        self.product0.d.connect();
        self.product1.d.connect();
        self.p0.connect();
        self.p1.connect();
    }

    fn hdl(&self) -> Verilog {
        // 8 x 8 mode, both operands signed, both products registered and routed to the outputs
        // (output select 2: the 8 x 8 product); the input, accumulator and pipeline registers
        // and the adders are unused. Inputs held at zero are tied off.
        Verilog::Wrapper(Wrapper {
            code: r#"
wire [31:0] o;
SB_MAC16 #(
    .MODE_8x8(1'b1),
    .A_SIGNED(1'b1),
    .B_SIGNED(1'b1),
    .TOP_8x8_MULT_REG(1'b1),
    .BOT_8x8_MULT_REG(1'b1),
    .TOPOUTPUT_SELECT(2'b10),
    .BOTOUTPUT_SELECT(2'b10)
) dsp (
    .CLK(clock), .CE(enable),
    .A({a1, a0}), .B({b1, b0}), .C(16'h0000), .D(16'h0000),
    .AHOLD(1'b0), .BHOLD(1'b0), .CHOLD(1'b0), .DHOLD(1'b0),
    .IRSTTOP(1'b0), .IRSTBOT(1'b0), .ORSTTOP(1'b0), .ORSTBOT(1'b0),
    .OLOADTOP(1'b0), .OLOADBOT(1'b0), .ADDSUBTOP(1'b0), .ADDSUBBOT(1'b0),
    .OHOLDTOP(1'b0), .OHOLDBOT(1'b0), .CI(1'b0), .ACCUMCI(1'b0), .SIGNEXTIN(1'b0),
    .O(o), .CO(), .ACCUMCO(), .SIGNEXTOUT()
);
assign p1 = o[31:16];
assign p0 = o[15:0];
"#
            .into(),
            // SB_MAC16 is a cell of the iCE40 flow (Yosys' synth_ice40 knows it); a simulation
            // takes its model from Yosys (`systole_sim`).
            cores: String::new(),
        })
    }
}

/// Where Yosys keeps its model of the iCE40 cells, beside the `yosys` on the `PATH`
/// (`<prefix>/bin/yosys` -> `<prefix>/share/yosys/ice40/cells_sim.v`).
pub fn ice40_cells_model() -> Result<std::path::PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let yosys = std::env::split_paths(&path)
        .map(|dir| dir.join("yosys"))
        .find(|p| p.is_file())
        .ok_or("yosys is not on the PATH (apt-get install yosys): its iCE40 cell models are")?;
    let prefix = yosys
        .canonicalize()
        .ok()
        .and_then(|p| p.parent()?.parent().map(|d| d.to_path_buf()))
        .ok_or_else(|| format!("cannot resolve {}", yosys.display()))?;
    let model = prefix.join("share/yosys/ice40/cells_sim.v");
    if model.is_file() {
        Ok(model)
    } else {
        Err(format!("{} is missing (it comes with Debian's yosys package)", model.display()))
    }
}

/// The Verilog of one module (`module NAME` to its `endmodule`) in `library`, for simulating
/// an instance of it; `None` if the library has no such module. The name ends at a space or
/// at the port list's parenthesis (`module NAME (` and `module NAME(` both declare it).
pub fn module_of(library: &str, name: &str) -> Option<String> {
    let head = format!("\nmodule {name}");
    let start = library
        .match_indices(&head)
        .map(|(i, _)| i)
        .find(|&i| matches!(library.as_bytes().get(i + head.len()), Some(b' ' | b'(')))?
        + 1;
    let end = library[start..].find("\nendmodule")? + start + "\nendmodule".len();
    Some(library[start..end].to_string() + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};

    /// Every pair of bytes, through both halves, against core's INT8 product; the registers
    /// hold while `enable` is off.
    #[test]
    fn products_are_cores_and_hold_without_enable() {
        use systole_core::{Arith, Int8};
        let mut uut = DspPair::default();
        uut.clock.connect();
        uut.enable.connect();
        uut.a0.connect();
        uut.b0.connect();
        uut.a1.connect();
        uut.b1.connect();
        uut.connect_all();
        for a in 0..=255u8 {
            for b in (0..=255u8).step_by(3) {
                let (a1, b1) = (b ^ 0x81, a.wrapping_add(b));
                uut.a0.next = (a as u64).into();
                uut.b0.next = (b as u64).into();
                uut.a1.next = (a1 as u64).into();
                uut.b1.next = (b1 as u64).into();
                uut.enable.next = true;
                tick(&mut uut, |u| &mut u.clock);
                let want = |x: u8, y: u8| Int8::mac(0, x as i8 as i32, y as i8 as i32) as u16;
                assert_eq!(uut.p0.val().to_u32() as u16, want(a, b), "{a} x {b}");
                assert_eq!(uut.p1.val().to_u32() as u16, want(a1, b1), "{a1} x {b1}");
                uut.enable.next = false;
                uut.a0.next = (!a as u64).into();
                tick(&mut uut, |u| &mut u.clock);
                assert_eq!(uut.p0.val().to_u32() as u16, want(a, b), "held");
            }
        }
    }

    /// Yosys maps the instance to one DSP and nothing else: no multiplier in logic. (Without
    /// `-dsp`, whose mapper rewrites an instance's parameters: the board flow hides its
    /// instances from it, `systole_boards::yosys`.)
    #[test]
    fn synthesizes_to_one_dsp_in_8x8_mode() {
        let verilog = verilog_of(DspPair::default());
        assert!(verilog.contains(".MODE_8x8(1'b1)"), "{verilog}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pair.v");
        std::fs::write(&file, &verilog).unwrap();
        let out = std::process::Command::new("yosys")
            .args(["-q", "-p"])
            .arg(format!(
                "read_verilog {}; synth_ice40 -top top; tee -q -o {} stat",
                file.display(),
                dir.path().join("stat.txt").display()
            ))
            .output()
            .expect("yosys must be installed (apt-get install yosys)");
        let log = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{log}{}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(dir.path().join("stat.txt")).unwrap();
        // Yosys' statistics list each cell type with its count: `SB_MAC16   1`.
        let cells: Vec<(String, u32)> = text
            .lines()
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                let (cell, n) = (words.next()?, words.next()?.parse().ok()?);
                cell.starts_with("SB_").then(|| (cell.to_string(), n))
            })
            .collect();
        assert_eq!(cells, vec![("SB_MAC16".to_string(), 1)], "{text}");
    }

    #[test]
    fn finds_yosys_model_of_the_dsp() {
        let model = ice40_cells_model().unwrap();
        let library = std::fs::read_to_string(model).unwrap();
        let module = module_of(&library, "SB_MAC16").unwrap();
        assert!(module.starts_with("module SB_MAC16 (") && module.ends_with("endmodule\n"));
        assert!(module.contains("MODE_8x8") && !module[10..].contains("\nmodule "));
        assert!(module_of(&library, "NO_SUCH_CELL").is_none());
        let lib = "// cells\nmodule LUT4X(input A);\nendmodule\nmodule LUT4(input A, output Z);\n\
                   assign Z = A;\nendmodule\n";
        assert_eq!(
            module_of(lib, "LUT4").as_deref(),
            Some("module LUT4(input A, output Z);\nassign Z = A;\nendmodule\n")
        );
    }
}
