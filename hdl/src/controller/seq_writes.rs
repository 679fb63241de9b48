//! What the sequencer drives into the datapath in a cycle, as one bundle: everything it puts
//! out but its read addresses and its state. Built with read stages
//! (`ArrayConfig::read_stages`), the bundle passes that many registers on its way out, so the
//! datapath acts on a row in the cycle its registered read words arrive.

use rust_hdl::prelude::*;

use crate::vector::AccOp;

/// One cycle of the sequencer's datapath controls (each field is the `Sequencer` output of
/// the same name; the transpose buffer's controls, which only decoupled machines have, are
/// delayed beside the buffer, in `top::decoupled`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, LogicStruct)]
pub struct SeqWrites {
    pub is_load: Bit,
    pub is_store: Bit,
    pub is_store_bf16: Bit,
    pub gather: Bit,
    pub broadcast: Bit,
    pub element: Bits<16>,
    pub length: Bits<16>,
    pub spad_write: Bit,
    pub spad_write_row: Bits<16>,
    pub acc_write: Bit,
    pub acc_write_row: Bits<16>,
    pub lanes_busy: Bit,
    pub acc_op: AccOp,
    pub dram_write_address: Bits<32>,
    pub dram_write_count: Bits<16>,
    pub immediate: Bits<32>,
    pub requant_multiplier: Bits<32>,
    pub requant_shift: Bits<5>,
    pub requant_zero_point: Bits<8>,
}
