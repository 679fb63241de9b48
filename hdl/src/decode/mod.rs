//! The instruction decoder, generated from core's ISA tables ([`Decoder`]), and the checks core's
//! `validate_program` makes of each instruction (`checks.rs`: [`Checker`], [`ExtentCheck`],
//! [`RangeCheck`]).
//!
//! [`Decoder`] is combinational: a 128-bit word in, one flag per opcode and per vector op, every
//! field (the [`DecodedOut`] bundle), and an encoding fault code out. Its bit slices, field
//! ranges, reserved bits and unused-field rules are *generated* from `Opcode::layout()`,
//! `Opcode::used_bits()` and `VectorOp`'s `uses_src` / `uses_imm` when the Verilog is emitted (and
//! walked by the same table in its Rust model), so a change to the ISA in core changes the
//! hardware with it; only the set of field *names* is declared here, and a field core adds that
//! this file does not know fails every test.

use rust_hdl::prelude::*;
use systole_core::isa::{Opcode, VectorOp, OPCODE_BITS, WORD_BITS};
use systole_core::protocol::FaultCode;

mod checks;
mod word_fault;

pub use checks::{Checker, ExtentCheck, RangeCheck};
pub use word_fault::WordFault;

use crate::decoded::DecodedOut;

/// The decoded form of one instruction word.
#[derive(LogicBlock, Default)]
pub struct Decoder {
    pub word: Signal<In, Bits<128>>,
    /// 0, or the encoding's [`FaultCode`] (opcode, field range, unused field, reserved bits).
    pub fault: Signal<Out, Bits<4>>,
    /// One flag per opcode and per vector op, and every field.
    pub out: DecodedOut,
}

/// Output names for opcode flags and vector-op flags: core's own names.
fn opcode_flag(op: Opcode) -> &'static str {
    op.name()
}

impl Decoder {
    fn set_flag(&mut self, name: &str, v: bool) {
        self.flag(name).next = v;
    }

    /// The flag output for an opcode or vector op, by core's name.
    fn flag(&mut self, name: &str) -> &mut Signal<Out, Bit> {
        match name {
            "load" => &mut self.out.load,
            "store" => &mut self.out.store,
            "load_weights" => &mut self.out.load_weights,
            "matmul" => &mut self.out.matmul,
            "matmul_os" => &mut self.out.matmul_os,
            "vector" => &mut self.out.vector,
            "cast_bf16" => &mut self.out.cast_bf16,
            "requantize" => &mut self.out.requantize,
            "sync" => &mut self.out.sync,
            "halt" => &mut self.out.halt,
            "load_acc" => &mut self.out.load_acc,
            "store_spad" => &mut self.out.store_spad,
            "store_bf16" => &mut self.out.store_bf16,
            "bias_add" => &mut self.out.bias_add,
            "relu" => &mut self.out.relu,
            "relu_grad" => &mut self.out.relu_grad,
            "scale" => &mut self.out.scale,
            "axpy" => &mut self.out.axpy,
            "bias_relu" => &mut self.out.bias_relu,
            "max" => &mut self.out.max,
            "equal" => &mut self.out.equal,
            "add" => &mut self.out.add,
            other => panic!("the decoder has no flag for `{other}`: add one"),
        }
    }

    fn set_field(&mut self, name: &str, v: u64) {
        match name {
            "spad_row" => self.out.spad_row.next = v.into(),
            "acc_row" => self.out.acc_row.next = v.into(),
            "a_row" => self.out.a_row.next = v.into(),
            "b_row" => self.out.b_row.next = v.into(),
            "dst" => self.out.dst.next = v.into(),
            "src" => self.out.src.next = v.into(),
            "dram_addr" => self.out.dram_addr.next = v.into(),
            "rows" => self.out.rows.next = v.into(),
            "len" => self.out.len.next = v.into(),
            "row_stride" => self.out.row_stride.next = v.into(),
            "elem_stride" => self.out.elem_stride.next = v.into(),
            "k" => self.out.k.next = v.into(),
            "cols" => self.out.cols.next = v.into(),
            "swap" => self.out.swap.next = v != 0,
            "accumulate" => self.out.accumulate.next = v != 0,
            "op" => self.out.op.next = v.into(),
            "imm" => self.out.imm.next = v.into(),
            "multiplier" => self.out.multiplier.next = v.into(),
            "shift" => self.out.shift.next = v.into(),
            "zero_point" => self.out.zero_point.next = v.into(),
            other => panic!("the decoder has no output for field `{other}`: add one"),
        }
    }

    /// Every field name any layout uses.
    fn field_names() -> Vec<&'static str> {
        let mut names: Vec<&'static str> = vec![];
        for op in Opcode::ALL {
            for f in op.layout() {
                if !names.contains(&f.name) {
                    names.push(f.name);
                }
            }
        }
        names
    }
}

/// Where a vector op's unused fields sit: (field name, vector ops that must leave it zero).
fn unused_rules() -> Vec<(&'static str, Vec<VectorOp>)> {
    let all = VectorOp::ALL;
    vec![
        ("src", all.iter().copied().filter(|v| !v.uses_src()).collect()),
        ("imm", all.iter().copied().filter(|v| !v.uses_imm()).collect()),
    ]
}

fn vector_ops() -> [VectorOp; VectorOp::ALL.len()] {
    VectorOp::ALL
}

impl Logic for Decoder {
    /// The Rust model: the same walk of the layout tables as the generated Verilog.
    fn update(&mut self) {
        let word = self.word.val().to_u128();
        let bits = |at: usize, n: usize| -> u64 { (word >> at) as u64 & mask(n) };
        for name in Decoder::field_names() {
            self.set_field(name, 0);
        }
        for op in Opcode::ALL {
            self.set_flag(opcode_flag(op), false);
        }
        for v in vector_ops() {
            self.set_flag(v.name(), false);
        }
        let code = bits(0, OPCODE_BITS);
        let Some(op) = Opcode::from_code(code) else {
            self.fault.next = (FaultCode::Opcode as u64).into();
            return;
        };
        self.set_flag(opcode_flag(op), true);
        let mut fault = 0u64;
        let mut at = OPCODE_BITS;
        let mut values = vec![];
        for f in op.layout() {
            let v = bits(at, f.bits);
            self.set_field(f.name, v);
            if (v < f.min || v > f.max) && fault == 0 {
                fault = FaultCode::Field as u64;
            }
            values.push((f.name, v));
            at += f.bits;
        }
        if op == Opcode::Vector {
            let code = values.iter().find(|(n, _)| *n == "op").map_or(0, |x| x.1);
            for v in vector_ops() {
                if v.code() as u64 == code {
                    self.set_flag(v.name(), true);
                }
            }
            if fault == 0 {
                for (field, ops) in unused_rules() {
                    let value = values.iter().find(|(n, _)| *n == field).map_or(0, |x| x.1);
                    if value != 0 && ops.iter().any(|v| v.code() as u64 == code) {
                        fault = FaultCode::UnusedField as u64;
                        break;
                    }
                }
            }
        }
        let used = op.used_bits();
        if used < WORD_BITS {
            let mut reserved = false;
            let mut a = used;
            while a < WORD_BITS {
                let n = (WORD_BITS - a).min(64);
                reserved |= bits(a, n) != 0;
                a += n;
            }
            if reserved {
                fault = FaultCode::Reserved as u64;
            }
        }
        self.fault.next = fault.into();
    }

    fn connect(&mut self) {
        self.fault.connect();
        self.out.join_connect();
    }

    /// One `case` arm per opcode, its slices and checks written out from the layout table.
    fn hdl(&self) -> Verilog {
        let mut v = String::from("always @(*) begin\n");
        for name in Decoder::field_names() {
            v.push_str(&format!("   out${name} = 0;\n"));
        }
        for op in Opcode::ALL {
            v.push_str(&format!("   out${} = 0;\n", opcode_flag(op)));
        }
        for op in vector_ops() {
            v.push_str(&format!("   out${} = 0;\n", op.name()));
        }
        v.push_str(&format!("   fault = {};\n", FaultCode::Opcode as u8));
        v.push_str(&format!("   case (word[{}:0])\n", OPCODE_BITS - 1));
        for op in Opcode::ALL {
            v.push_str(&format!("   {OPCODE_BITS}'d{}: begin // {}\n", op as u8, op.name()));
            v.push_str(&format!("      out${} = 1;\n      fault = 0;\n", opcode_flag(op)));
            let mut at = OPCODE_BITS;
            let mut range = vec![];
            for f in op.layout() {
                let slice = format!("word[{}:{}]", at + f.bits - 1, at);
                v.push_str(&format!("      out${} = {slice};\n", f.name));
                let mut bad = vec![];
                if f.min > 0 {
                    bad.push(format!("{slice} < {}'d{}", f.bits, f.min));
                }
                if f.max < mask(f.bits) {
                    bad.push(format!("{slice} > {}'d{}", f.bits, f.max));
                }
                range.extend(bad);
                at += f.bits;
            }
            if op == Opcode::Vector {
                let opfield = slice_of(op, "op");
                for vop in vector_ops() {
                    v.push_str(&format!(
                        "      out${} = ({opfield} == {}'d{});\n",
                        vop.name(),
                        field_bits(op, "op"),
                        vop.code()
                    ));
                }
                for (field, ops) in unused_rules() {
                    let tests: Vec<String> = ops
                        .iter()
                        .map(|vop| format!("{opfield} == {}'d{}", field_bits(op, "op"), vop.code()))
                        .collect();
                    if !tests.is_empty() {
                        v.push_str(&format!(
                            "      if (({}) && {} != 0) fault = {};\n",
                            tests.join(" || "),
                            slice_of(op, field),
                            FaultCode::UnusedField as u8
                        ));
                    }
                }
            }
            if !range.is_empty() {
                v.push_str(&format!(
                    "      if ({}) fault = {};\n",
                    range.join(" || "),
                    FaultCode::Field as u8
                ));
            }
            let used = op.used_bits();
            if used < WORD_BITS {
                v.push_str(&format!(
                    "      if (word[{}:{used}] != 0) fault = {};\n",
                    WORD_BITS - 1,
                    FaultCode::Reserved as u8
                ));
            }
            v.push_str("   end\n");
        }
        v.push_str("   default: ;\n   endcase\nend\n");
        Verilog::Custom(v)
    }
}

fn mask(bits: usize) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Bit offset and width of a field in an opcode's layout.
fn field_at(op: Opcode, name: &str) -> (usize, usize) {
    let mut at = OPCODE_BITS;
    for f in op.layout() {
        if f.name == name {
            return (at, f.bits);
        }
        at += f.bits;
    }
    panic!("{} has no field {name}", op.name())
}

fn field_bits(op: Opcode, name: &str) -> usize {
    field_at(op, name).1
}

fn slice_of(op: Opcode, name: &str) -> String {
    let (at, bits) = field_at(op, name);
    format!("word[{}:{at}]", at + bits - 1)
}

/// A constant of any width (rust-hdl emits it as a `localparam`).
pub(crate) fn constant<const N: usize>(v: u64) -> Constant<Bits<N>> {
    Constant::new(v.into())
}

/// The mask of the bits that hold every value from 0 to `max`: a counter or pointer that never
/// exceeds `max` keeps its value when its next value is masked with it, and Yosys then drops
/// the bits above, with the carries and compares that read them (docs/DECISIONS.md 94).
pub(crate) fn holding(max: u64) -> u64 {
    if max == 0 {
        1
    } else {
        u64::MAX >> max.leading_zeros()
    }
}

/// The bits of a `width`-bit operand below twice `limit`: an operand with a bit outside this
/// mask exceeds `limit` on its own, so sums of masked operands need no more bits than `limit`.
pub(crate) fn below_twice(limit: u64, width: u32) -> u64 {
    let bits = 64 - limit.leading_zeros();
    if bits + 1 >= width {
        u64::MAX >> (64 - width)
    } else {
        (1u64 << (bits + 1)) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, verilog_of, yosys_eval};
    use systole_core::isa::{decode, DecodeError, Word};

    pub(crate) fn lcg(seed: &mut u64) -> u64 {
        crate::testing::lcg_step(seed) >> 11
    }

    fn fault_of(e: DecodeError) -> u64 {
        (match e {
            DecodeError::Opcode { .. } => FaultCode::Opcode,
            DecodeError::Field { .. } => FaultCode::Field,
            DecodeError::UnusedField { .. } => FaultCode::UnusedField,
            DecodeError::Reserved { .. } => FaultCode::Reserved,
        }) as u64
    }

    /// Words near valid encodings: random field values (often in range), opcodes 0..=15, and
    /// now and then a reserved bit.
    pub(crate) fn words(n: usize) -> Vec<u128> {
        let mut seed = 99;
        let mut out = vec![0u128, u128::MAX];
        for _ in 0..n {
            let code = lcg(&mut seed) % 16;
            let mut w = code as u128;
            let mut at = OPCODE_BITS;
            if let Some(op) = Opcode::from_code(code) {
                for f in op.layout() {
                    let v = match lcg(&mut seed) % 4 {
                        0 => lcg(&mut seed) & mask(f.bits),
                        1 => f.min,
                        2 => f.max,
                        _ => f.min + lcg(&mut seed) % 3,
                    } & mask(f.bits);
                    w |= (v as u128) << at;
                    at += f.bits;
                }
            }
            if lcg(&mut seed) % 5 == 0 {
                w |= 1u128 << (lcg(&mut seed) % 128);
            }
            out.push(w);
        }
        out
    }

    pub(crate) fn decoded(word: u128) -> Decoder {
        let mut d = Decoder::default();
        d.connect_all();
        d.word.next = word.to_bits();
        settle(&mut d);
        d
    }

    #[test]
    fn decoder_model_matches_core() {
        for w in words(3000) {
            let d = decoded(w);
            match decode(Word(w)) {
                Err(e) => assert_eq!(d.fault.val().index() as u64, fault_of(e), "{w:#x}: {e}"),
                Ok(ins) => {
                    assert_eq!(d.fault.val().index(), 0, "{w:#x} is {ins:?}");
                    let op = ins.opcode();
                    let mut at = OPCODE_BITS;
                    let mut d2 = Decoder::default();
                    for f in op.layout() {
                        d2.set_field(f.name, ((w >> at) as u64) & mask(f.bits));
                        at += f.bits;
                    }
                    assert_eq!(d.out.rows.val(), d2.out.rows.next, "{ins:?}");
                    assert_eq!(d.out.dram_addr.val(), d2.out.dram_addr.next, "{ins:?}");
                    assert_eq!(d.out.multiplier.val(), d2.out.multiplier.next, "{ins:?}");
                    let flag = |d: &Decoder| -> Vec<bool> {
                        vec![
                            d.out.load.val(),
                            d.out.matmul.val(),
                            d.out.halt.val(),
                            d.out.vector.val(),
                        ]
                    };
                    let want = vec![
                        op == Opcode::Load,
                        op == Opcode::Matmul,
                        op == Opcode::Halt,
                        op == Opcode::Vector,
                    ];
                    assert_eq!(flag(&d), want, "{ins:?}");
                }
            }
        }
    }

    /// The generated Verilog, evaluated by Yosys, gives core's fault code and fields.
    #[test]
    fn decoder_verilog_matches_core() {
        let sample: Vec<u128> = words(120);
        let v = verilog_of(Decoder::default());
        // Every output of the module, with its width, from its port declarations.
        let ports: Vec<(String, usize)> = v
            .lines()
            .filter_map(|l| {
                let decl = l.trim().strip_prefix("output reg")?.trim().trim_end_matches(';');
                Some(match decl.split_once(']') {
                    Some((range, name)) => {
                        let high: usize =
                            range.trim_start_matches('[').split(':').next()?.parse().ok()?;
                        (name.trim().to_string(), high + 1)
                    }
                    None => (decl.to_string(), 1),
                })
            })
            .collect();
        let outputs = 1 + Opcode::ALL.len() + vector_ops().len() + Decoder::field_names().len();
        assert_eq!(ports.len(), outputs, "{ports:?}");
        // Yosys `eval` shows numbers of up to 64 bits here: the outputs go out packed in groups.
        let mut groups: Vec<Vec<(String, usize)>> = vec![vec![]];
        for p in &ports {
            let used: usize = groups.last().unwrap().iter().map(|q| q.1).sum();
            if used + p.1 > 64 {
                groups.push(vec![]);
            }
            groups.last_mut().unwrap().push(p.clone());
        }
        // Yosys `eval -set` reads plain numbers as 32 bits: the word goes in as four words.
        let v = v.replace("module top(", "module top_inner(");
        let mut wrapper = String::from(
            "module top(input wire [31:0] w0, input wire [31:0] w1, input wire [31:0] w2, \
             input wire [31:0] w3",
        );
        for (g, group) in groups.iter().enumerate() {
            let bits: usize = group.iter().map(|p| p.1).sum();
            wrapper.push_str(&format!(", output wire [{}:0] g{g}", bits - 1));
        }
        wrapper.push_str(");\n");
        for (name, bits) in &ports {
            wrapper.push_str(&format!("wire [{}:0] {};\n", bits - 1, name.replace('$', "_")));
        }
        let connections: Vec<String> =
            ports.iter().map(|(n, _)| format!(".{n}({})", n.replace('$', "_"))).collect();
        wrapper.push_str(&format!(
            "top_inner inner(.word({{w3, w2, w1, w0}}), {});\n",
            connections.join(", ")
        ));
        for (g, group) in groups.iter().enumerate() {
            let names: Vec<String> = group.iter().rev().map(|p| p.0.replace('$', "_")).collect();
            wrapper.push_str(&format!("assign g{g} = {{{}}};\n", names.join(", ")));
        }
        wrapper.push_str("endmodule\n");
        let v = format!("{v}\n{wrapper}");
        let vectors: Vec<Vec<(&str, u64)>> = sample
            .iter()
            .map(|&w| {
                let part = |i: u32| (w >> (32 * i)) as u32 as u64;
                vec![("w0", part(0)), ("w1", part(1)), ("w2", part(2)), ("w3", part(3))]
            })
            .collect();
        for (g, group) in groups.iter().enumerate() {
            let got = yosys_eval(&v, &vectors, &format!("g{g}"));
            for (i, &w) in sample.iter().enumerate() {
                let mut d = decoded(w);
                let mut at = 0;
                for (name, bits) in group {
                    let field = (got[i] >> at) & mask(*bits);
                    let want = output_of(&mut d, name);
                    assert_eq!(field, want, "{name} of {w:#x}");
                    at += bits;
                }
            }
        }
    }

    /// The Rust model's value of the output the Verilog names `name`.
    fn output_of(d: &mut Decoder, name: &str) -> u64 {
        if name == "fault" {
            return d.fault.val().index() as u64;
        }
        let name = name.strip_prefix("out$").expect("an output of the bundle");
        let is_flag = Opcode::ALL.iter().any(|op| opcode_flag(*op) == name)
            || vector_ops().iter().any(|v| v.name() == name);
        if is_flag {
            return d.flag(name).val() as u64;
        }
        let o = &d.out;
        match name {
            "spad_row" => o.spad_row.val().index() as u64,
            "acc_row" => o.acc_row.val().index() as u64,
            "a_row" => o.a_row.val().index() as u64,
            "b_row" => o.b_row.val().index() as u64,
            "dst" => o.dst.val().index() as u64,
            "src" => o.src.val().index() as u64,
            "dram_addr" => o.dram_addr.val().index() as u64,
            "rows" => o.rows.val().index() as u64,
            "len" => o.len.val().index() as u64,
            "row_stride" => o.row_stride.val().index() as u64,
            "elem_stride" => o.elem_stride.val().index() as u64,
            "k" => o.k.val().index() as u64,
            "cols" => o.cols.val().index() as u64,
            "swap" => o.swap.val() as u64,
            "accumulate" => o.accumulate.val() as u64,
            "op" => o.op.val().index() as u64,
            "imm" => o.imm.val().index() as u64,
            "multiplier" => o.multiplier.val().index() as u64,
            "shift" => o.shift.val().index() as u64,
            "zero_point" => o.zero_point.val().index() as u64,
            other => panic!("the test does not read `{other}`: add it"),
        }
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("decoder", &verilog_of(Decoder::default())).unwrap();
    }
}
