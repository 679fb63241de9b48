//! The meshes' hand-written wires (the arrays' and their DSP pairs'), one Verilog assignment
//! each: `hdl_gen` cannot index a `Vec` of blocks by a run-time `i * C + j`, so their `hdl`
//! functions list the wires as Verilog AST.

use rust_hdl::prelude::*;

/// One hand-written wire `dst = src` of the mesh, as Verilog AST.
pub(crate) fn wire(dst: String, src: String) -> ast::VerilogStatement {
    ast::VerilogStatement::Assignment(
        ast::VerilogExpression::Signal(dst),
        ast::VerilogExpression::Signal(src),
    )
}

/// One hand-written wire `dst = 0` of `bits` bits (1, 8, 16, else 32), as Verilog AST.
pub(crate) fn wire_zero(dst: String, bits: usize) -> ast::VerilogStatement {
    let zero: VerilogLiteral = match bits {
        1 => false.into(),
        8 => Bits::<8>::default().into(),
        16 => Bits::<16>::default().into(),
        _ => Bits::<32>::default().into(),
    };
    ast::VerilogStatement::Assignment(
        ast::VerilogExpression::Signal(dst),
        ast::VerilogExpression::Literal(zero),
    )
}
