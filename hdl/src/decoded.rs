//! The decoded instruction as one signal bundle: [`DecodedOut`] leaves the decoder
//! (`decode::Decoder`), [`Decoded`] enters every block that reads the instruction (the
//! checks, the footprint, the dispatchers, the units). A top joins them in one line per block
//! (`DecodedOut::join(&mut self.candidate.out, &mut self.seq.ins)`) instead of copying each
//! field; a block reads the fields it needs, and synthesis drops the ones it does not.
//!
//! The field names are the decoder's: one flag per opcode and per vector op (core's names), then
//! every field any layout uses. A field core adds to the ISA needs a line in the list below (and
//! the decoder fails its tests until it has one).
//!
//! [`DecodedRegister`] holds a decoded instruction: the decoupled top decodes the word entering
//! its head register and registers the fields beside it, so no decoder sits between the
//! candidate's flip-flops and the units that act on it (docs/DECISIONS.md 67).

use rust_hdl::prelude::*;

/// Declares the bundle's two sides and its register from one list of fields.
macro_rules! decoded_bundle {
    ($($name:ident: $ty:ty),* $(,)?) => {
        /// The decoder's side: every decoded flag and field, driven.
        #[derive(LogicInterface, Default)]
        #[join = "Decoded"]
        pub struct DecodedOut {
            $(pub $name: Signal<Out, $ty>,)*
        }

        /// A reader's side: the same flags and fields, as inputs.
        #[derive(LogicInterface, Default)]
        #[join = "DecodedOut"]
        pub struct Decoded {
            $(pub $name: Signal<In, $ty>,)*
        }

        /// A decoded instruction in flip-flops: `out` takes `fields` at the clock edges where
        /// `take` is set and holds it otherwise (zero from power-up).
        #[derive(LogicBlock, Default)]
        pub struct DecodedRegister {
            pub clock: Signal<In, Clock>,
            pub take: Signal<In, Bit>,
            pub fields: Decoded,
            pub out: DecodedOut,
        }

        impl Logic for DecodedRegister {
            fn update(&mut self) {
                if self.clock.pos_edge() && self.take.val() {
                    $(self.out.$name.next = self.fields.$name.val();)*
                }
            }

            fn connect(&mut self) {
                self.out.join_connect();
            }

            fn hdl(&self) -> Verilog {
                let names = [$(stringify!($name)),*];
                let mut v = String::from("initial begin\n");
                for n in names {
                    v.push_str(&format!("   out${n} = 0;\n"));
                }
                v.push_str("end\n\nalways @(posedge clock) begin\n   if (take) begin\n");
                for n in names {
                    v.push_str(&format!("      out${n} <= fields${n};\n"));
                }
                v.push_str("   end\nend\n");
                Verilog::Custom(v)
            }
        }
    };
}

decoded_bundle! {
    load: Bit,
    store: Bit,
    load_weights: Bit,
    matmul: Bit,
    matmul_os: Bit,
    vector: Bit,
    cast_bf16: Bit,
    requantize: Bit,
    sync: Bit,
    halt: Bit,
    load_acc: Bit,
    store_spad: Bit,
    store_bf16: Bit,
    bias_add: Bit,
    relu: Bit,
    relu_grad: Bit,
    scale: Bit,
    axpy: Bit,
    bias_relu: Bit,
    max: Bit,
    equal: Bit,
    add: Bit,
    spad_row: Bits<16>,
    acc_row: Bits<16>,
    a_row: Bits<16>,
    b_row: Bits<16>,
    dst: Bits<16>,
    src: Bits<16>,
    dram_addr: Bits<32>,
    rows: Bits<16>,
    len: Bits<16>,
    row_stride: Bits<32>,
    elem_stride: Bits<32>,
    k: Bits<16>,
    cols: Bits<16>,
    swap: Bit,
    accumulate: Bit,
    op: Bits<4>,
    imm: Bits<32>,
    multiplier: Bits<32>,
    shift: Bits<5>,
    zero_point: Bits<8>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Decoder;
    use crate::testing::{settle, tick, verilog_of};
    use systole_core::isa::{encode, Instruction, VectorOp};

    /// A decoder feeding a register, as the decoupled top joins them.
    #[derive(LogicBlock, Default)]
    struct Bench {
        clock: Signal<In, Clock>,
        take: Signal<In, Bit>,
        word: Signal<In, Bits<128>>,
        decoder: Decoder,
        held: DecodedRegister,
    }

    impl Logic for Bench {
        #[hdl_gen]
        fn update(&mut self) {
            self.decoder.word.next = self.word.val();
            DecodedOut::join(&mut self.decoder.out, &mut self.held.fields);
            self.held.clock.next = self.clock.val();
            self.held.take.next = self.take.val();
        }
    }

    fn word(ins: Instruction) -> Bits<128> {
        encode(&ins).unwrap().0.to_bits()
    }

    /// The register takes every field at a `take` edge and holds them through edges without.
    #[test]
    fn the_register_takes_the_decoded_fields_and_holds_them() {
        let load = Instruction::Load {
            spad_row: 45,
            dram_addr: 1100,
            rows: 13,
            len: 7,
            row_stride: 9,
            elem_stride: 1,
        };
        let axpy = Instruction::Vector { op: VectorOp::Axpy, dst: 3, src: 12, rows: 5, imm: 77 };
        let mut b = Bench::default();
        b.connect_all();
        b.word.next = word(load);
        b.take.next = true;
        tick(&mut b, |b| &mut b.clock);
        let held = |b: &Bench| {
            let o = &b.held.out;
            (
                o.load.val(),
                o.vector.val(),
                o.axpy.val(),
                o.spad_row.val().index(),
                o.dram_addr.val().index(),
                o.rows.val().index(),
                o.len.val().index(),
                o.row_stride.val().index(),
                o.dst.val().index(),
                o.src.val().index(),
                o.imm.val().index(),
            )
        };
        assert_eq!(held(&b), (true, false, false, 45, 1100, 13, 7, 9, 0, 0, 0));
        b.word.next = word(axpy);
        b.take.next = false;
        tick(&mut b, |b| &mut b.clock);
        settle(&mut b);
        assert!(b.decoder.out.axpy.val(), "the decoder sees the next word");
        assert_eq!(held(&b), (true, false, false, 45, 1100, 13, 7, 9, 0, 0, 0), "held");
        b.take.next = true;
        tick(&mut b, |b| &mut b.clock);
        assert_eq!(held(&b), (false, true, true, 0, 0, 5, 0, 0, 3, 12, 77));
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("decoded_register", &verilog_of(Bench::default())).unwrap();
    }
}
