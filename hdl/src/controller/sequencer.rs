//! The sequencer: the unit that moves rows between DRAM, the scratchpad and the accumulators
//! (loads, stores, vector ops, casts, requantization), and runs `Sync`.

use rust_hdl::prelude::*;
use systole_core::ArrayConfig;

use crate::decode::constant;
use crate::vector::AccOp;

/// The sequencer: `Load`, `Store`, `Vector`, `CastBf16`, `Requantize`, `LoadAcc`, `StoreSpad`
/// one row per cycle (a strided `Load` gathers one element per cycle), `Sync` in one cycle.
#[derive(LogicBlock)]
pub struct Sequencer {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub abort: Signal<In, Bit>,
    pub start: Signal<In, Bit>,
    // The instruction, as decoded.
    pub load: Signal<In, Bit>,
    pub store: Signal<In, Bit>,
    pub vector: Signal<In, Bit>,
    pub cast_bf16: Signal<In, Bit>,
    pub requantize: Signal<In, Bit>,
    pub load_acc: Signal<In, Bit>,
    pub store_spad: Signal<In, Bit>,
    pub bias_add: Signal<In, Bit>,
    pub relu: Signal<In, Bit>,
    pub relu_grad: Signal<In, Bit>,
    pub scale: Signal<In, Bit>,
    pub spad_row: Signal<In, Bits<16>>,
    pub acc_row: Signal<In, Bits<16>>,
    pub dst: Signal<In, Bits<16>>,
    pub src: Signal<In, Bits<16>>,
    pub dram_addr: Signal<In, Bits<32>>,
    pub rows: Signal<In, Bits<16>>,
    pub len: Signal<In, Bits<16>>,
    pub row_stride: Signal<In, Bits<32>>,
    pub elem_stride: Signal<In, Bits<32>>,
    pub imm: Signal<In, Bits<32>>,
    pub multiplier: Signal<In, Bits<32>>,
    pub shift: Signal<In, Bits<5>>,
    pub zero_point: Signal<In, Bits<8>>,
    /// Idle at the start of the next cycle, unless started now.
    pub free: Signal<Out, Bit>,
    /// Busy in the next cycle (the memory ports it addresses are its).
    pub busy_next: Signal<Out, Bit>,
    // What the datapath does this cycle.
    pub is_load: Signal<Out, Bit>,
    pub is_store: Signal<Out, Bit>,
    pub gather: Signal<Out, Bit>,
    pub broadcast: Signal<Out, Bit>,
    pub element: Signal<Out, Bits<16>>,
    pub length: Signal<Out, Bits<16>>,
    pub spad_write: Signal<Out, Bit>,
    pub spad_write_row: Signal<Out, Bits<16>>,
    pub acc_write: Signal<Out, Bit>,
    pub acc_write_row: Signal<Out, Bits<16>>,
    pub acc_op: Signal<Out, AccOp>,
    pub dram_write_address: Signal<Out, Bits<32>>,
    pub dram_write_count: Signal<Out, Bits<16>>,
    pub immediate: Signal<Out, Bits<32>>,
    pub requant_multiplier: Signal<Out, Bits<32>>,
    /// A `Requantize` row is being converted (its lane borrows the accumulator lanes'
    /// multipliers).
    pub requantizing: Signal<Out, Bit>,
    pub requant_shift: Signal<Out, Bits<5>>,
    pub requant_zero_point: Signal<Out, Bits<8>>,
    // Read addresses for the next cycle.
    pub dram_read_address: Signal<Out, Bits<32>>,
    pub spad_read: Signal<Out, Bits<16>>,
    pub acc_read_x: Signal<Out, Bits<16>>,
    pub acc_read_y: Signal<Out, Bits<16>>,
    busy: DFF<Bit>,
    k_load: DFF<Bit>,
    k_store: DFF<Bit>,
    k_vector: DFF<Bit>,
    k_cast: DFF<Bit>,
    k_requant: DFF<Bit>,
    k_load_acc: DFF<Bit>,
    k_store_spad: DFF<Bit>,
    op: DFF<AccOp>,
    row: DFF<Bits<16>>,
    n_rows: DFF<Bits<16>>,
    elem: DFF<Bits<16>>,
    n_len: DFF<Bits<16>>,
    gathering: DFF<Bit>,
    broadcasting: DFF<Bit>,
    spad_ptr: DFF<Bits<16>>,
    acc_ptr: DFF<Bits<16>>,
    src_ptr: DFF<Bits<16>>,
    src_moves: DFF<Bit>,
    dram_row: DFF<Bits<32>>,
    dram_ptr: DFF<Bits<32>>,
    row_step: DFF<Bits<32>>,
    elem_step: DFF<Bits<32>>,
    /// The vector op's immediate, or `Requantize`'s multiplier (one register serves both).
    imm_q: DFF<Bits<32>>,
    shift_q: DFF<Bits<5>>,
    zp: DFF<Bits<8>>,
    /// log2 of the scratchpad element's bytes.
    elem_shift: Constant<Bits<2>>,
    row_last: Signal<Local, Bit>,
    last: Signal<Local, Bit>,
}

impl Sequencer {
    pub fn new(config: &ArrayConfig) -> Sequencer {
        Sequencer {
            clock: Default::default(),
            enable: Default::default(),
            abort: Default::default(),
            start: Default::default(),
            load: Default::default(),
            store: Default::default(),
            vector: Default::default(),
            cast_bf16: Default::default(),
            requantize: Default::default(),
            load_acc: Default::default(),
            store_spad: Default::default(),
            bias_add: Default::default(),
            relu: Default::default(),
            relu_grad: Default::default(),
            scale: Default::default(),
            spad_row: Default::default(),
            acc_row: Default::default(),
            dst: Default::default(),
            src: Default::default(),
            dram_addr: Default::default(),
            rows: Default::default(),
            len: Default::default(),
            row_stride: Default::default(),
            elem_stride: Default::default(),
            imm: Default::default(),
            multiplier: Default::default(),
            shift: Default::default(),
            zero_point: Default::default(),
            free: Default::default(),
            busy_next: Default::default(),
            is_load: Default::default(),
            is_store: Default::default(),
            gather: Default::default(),
            broadcast: Default::default(),
            element: Default::default(),
            length: Default::default(),
            spad_write: Default::default(),
            spad_write_row: Default::default(),
            acc_write: Default::default(),
            acc_write_row: Default::default(),
            acc_op: Default::default(),
            dram_write_address: Default::default(),
            dram_write_count: Default::default(),
            immediate: Default::default(),
            requant_multiplier: Default::default(),
            requantizing: Default::default(),
            requant_shift: Default::default(),
            requant_zero_point: Default::default(),
            dram_read_address: Default::default(),
            spad_read: Default::default(),
            acc_read_x: Default::default(),
            acc_read_y: Default::default(),
            busy: Default::default(),
            k_load: Default::default(),
            k_store: Default::default(),
            k_vector: Default::default(),
            k_cast: Default::default(),
            k_requant: Default::default(),
            k_load_acc: Default::default(),
            k_store_spad: Default::default(),
            op: Default::default(),
            row: Default::default(),
            n_rows: Default::default(),
            elem: Default::default(),
            n_len: Default::default(),
            gathering: Default::default(),
            broadcasting: Default::default(),
            spad_ptr: Default::default(),
            acc_ptr: Default::default(),
            src_ptr: Default::default(),
            src_moves: Default::default(),
            dram_row: Default::default(),
            dram_ptr: Default::default(),
            row_step: Default::default(),
            elem_step: Default::default(),
            imm_q: Default::default(),
            shift_q: Default::default(),
            zp: Default::default(),
            elem_shift: constant((config.dtype == systole_core::Dtype::Bf16) as u64),
            row_last: Default::default(),
            last: Default::default(),
        }
    }
}

impl Logic for Sequencer {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            busy,
            k_load,
            k_store,
            k_vector,
            k_cast,
            k_requant,
            k_load_acc,
            k_store_spad,
            op,
            row,
            n_rows,
            elem,
            n_len,
            gathering,
            broadcasting,
            spad_ptr,
            acc_ptr,
            src_ptr,
            src_moves,
            dram_row,
            dram_ptr,
            row_step,
            elem_step,
            imm_q,
            shift_q,
            zp
        );
        // A row ends in its last cycle (the element `len - 1` of a gather, else its only one);
        // `Sync` (no kind) is its own last cycle.
        self.row_last.next =
            !self.gathering.q.val() || (self.elem.q.val() == self.n_len.q.val() - 1);
        self.last.next = (self.row_last.val() && (self.row.q.val() == self.n_rows.q.val() - 1))
            || !(self.k_load.q.val()
                || self.k_store.q.val()
                || self.k_vector.q.val()
                || self.k_cast.q.val()
                || self.k_requant.q.val()
                || self.k_load_acc.q.val()
                || self.k_store_spad.q.val());
        self.free.next = !self.busy.q.val() || self.last.val();
        if self.enable.val() {
            if self.busy.q.val() {
                if self.last.val() {
                    self.busy.d.next = false;
                } else if self.row_last.val() {
                    self.row.d.next = self.row.q.val() + 1;
                    self.elem.d.next = 0.into();
                    self.spad_ptr.d.next = self.spad_ptr.q.val() + 1;
                    self.acc_ptr.d.next = self.acc_ptr.q.val() + 1;
                    if self.src_moves.q.val() {
                        self.src_ptr.d.next = self.src_ptr.q.val() + 1;
                    }
                    self.dram_row.d.next = self.dram_row.q.val() + self.row_step.q.val();
                    self.dram_ptr.d.next = self.dram_row.q.val() + self.row_step.q.val();
                } else {
                    self.elem.d.next = self.elem.q.val() + 1;
                    self.dram_ptr.d.next = self.dram_ptr.q.val() + self.elem_step.q.val();
                }
            }
            if self.start.val() {
                self.busy.d.next = true;
                self.k_load.d.next = self.load.val();
                self.k_store.d.next = self.store.val();
                self.k_vector.d.next = self.vector.val();
                self.k_cast.d.next = self.cast_bf16.val();
                self.k_requant.d.next = self.requantize.val();
                self.k_load_acc.d.next = self.load_acc.val();
                self.k_store_spad.d.next = self.store_spad.val();
                self.op.d.next = AccOp::Axpy;
                if self.bias_add.val() {
                    self.op.d.next = AccOp::BiasAdd;
                }
                if self.relu.val() {
                    self.op.d.next = AccOp::Relu;
                }
                if self.relu_grad.val() {
                    self.op.d.next = AccOp::ReluGrad;
                }
                if self.scale.val() {
                    self.op.d.next = AccOp::Scale;
                }
                if self.load_acc.val() {
                    self.op.d.next = AccOp::Word;
                }
                self.row.d.next = 0.into();
                self.n_rows.d.next = self.rows.val();
                self.elem.d.next = 0.into();
                self.n_len.d.next = self.len.val();
                // timing::load_row_cycles: one cycle per element unless contiguous or single.
                self.gathering.d.next =
                    self.load.val() && (self.elem_stride.val() > 1) && (self.len.val() > 1);
                self.broadcasting.d.next = self.load.val() && !self.elem_stride.val().any();
                self.spad_ptr.d.next = self.spad_row.val();
                self.acc_ptr.d.next = self.acc_row.val();
                if self.vector.val() {
                    self.acc_ptr.d.next = self.dst.val();
                }
                self.src_ptr.d.next = self.src.val();
                self.src_moves.d.next = !self.bias_add.val();
                self.dram_row.d.next = self.dram_addr.val();
                self.dram_ptr.d.next = self.dram_addr.val();
                self.row_step.d.next = self.row_stride.val() << self.elem_shift.val();
                if self.store.val() || self.load_acc.val() {
                    self.row_step.d.next = self.row_stride.val() << 2;
                }
                self.elem_step.d.next = self.elem_stride.val() << self.elem_shift.val();
                self.imm_q.d.next = self.imm.val();
                if self.requantize.val() {
                    self.imm_q.d.next = self.multiplier.val();
                }
                self.shift_q.d.next = self.shift.val();
                self.zp.d.next = self.zero_point.val();
            }
            if self.abort.val() {
                self.busy.d.next = false;
            }
        }
        self.busy_next.next = self.busy.d.val();
        self.is_load.next = self.busy.q.val() && self.k_load.q.val();
        self.is_store.next = self.busy.q.val() && self.k_store.q.val();
        self.gather.next = self.gathering.q.val();
        self.broadcast.next = self.broadcasting.q.val();
        self.element.next = self.elem.q.val();
        self.length.next = self.n_len.q.val();
        self.spad_write.next = self.busy.q.val()
            && self.row_last.val()
            && (self.k_load.q.val() || self.k_cast.q.val() || self.k_requant.q.val());
        self.spad_write_row.next = self.spad_ptr.q.val();
        self.acc_write.next =
            self.busy.q.val() && (self.k_vector.q.val() || self.k_load_acc.q.val());
        self.acc_write_row.next = self.acc_ptr.q.val();
        self.acc_op.next = self.op.q.val();
        self.dram_write_address.next = self.dram_row.q.val();
        self.dram_write_count.next = 0.into();
        if self.busy.q.val() && self.k_store.q.val() {
            self.dram_write_count.next = self.n_len.q.val() << 2;
        }
        if self.busy.q.val() && self.k_store_spad.q.val() {
            self.dram_write_count.next = self.n_len.q.val() << self.elem_shift.val();
        }
        self.immediate.next = self.imm_q.q.val();
        self.requant_multiplier.next = self.imm_q.q.val();
        self.requantizing.next = self.busy.q.val() && self.k_requant.q.val();
        self.requant_shift.next = self.shift_q.q.val();
        self.requant_zero_point.next = self.zp.q.val();
        self.dram_read_address.next = self.dram_ptr.d.val();
        self.spad_read.next = self.spad_ptr.d.val();
        self.acc_read_x.next = self.acc_ptr.d.val();
        self.acc_read_y.next = self.src_ptr.d.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, tick, verilog_of};
    use systole_core::{timing, Dtype, Instruction};

    /// A strided `Load` gathers one element per cycle (core's duration), addresses DRAM one
    /// cycle ahead and writes each row in its last element's cycle.
    #[test]
    fn sequencer_gathers_a_strided_load_element_by_element() {
        let config = ArrayConfig::new(2, 2, Dtype::Int8);
        let load = Instruction::Load {
            spad_row: 5,
            dram_addr: 100,
            rows: 2,
            len: 3,
            row_stride: 10,
            elem_stride: 2,
        };
        let mut s = Sequencer::new(&config);
        s.connect_all();
        s.enable.next = true;
        s.start.next = true;
        s.load.next = true;
        s.spad_row.next = 5u64.into();
        s.dram_addr.next = 100u64.into();
        s.rows.next = 2u64.into();
        s.len.next = 3u64.into();
        s.row_stride.next = 10u64.into();
        s.elem_stride.next = 2u64.into();
        settle(&mut s);
        assert_eq!(s.dram_read_address.val().index(), 100, "addressed before dispatch");
        tick(&mut s, |s| &mut s.clock);
        s.start.next = false;
        s.load.next = false;
        let mut seen = vec![];
        loop {
            settle(&mut s);
            assert!(s.is_load.val() && s.gather.val());
            let free = s.free.val();
            seen.push((
                s.element.val().index(),
                s.dram_read_address.val().index(),
                s.spad_write.val().then(|| s.spad_write_row.val().index()),
                free,
            ));
            tick(&mut s, |s| &mut s.clock);
            if free {
                break;
            }
        }
        assert_eq!(seen.len() as u64, timing::duration(&config, &load));
        // Element e of row r is at 100 + 10 r + 2 e; the next one is addressed a cycle ahead.
        assert_eq!(
            seen,
            vec![
                (0, 102, None, false),
                (1, 104, None, false),
                (2, 110, Some(5), false),
                (0, 112, None, false),
                (1, 114, None, false),
                (2, 114, Some(6), true),
            ]
        );
        settle(&mut s);
        assert!(s.free.val() && !s.is_load.val() && !s.spad_write.val());
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(3, 4, Dtype::Bf16);
        yosys_validate("sequencer", &verilog_of(Sequencer::new(&config))).unwrap();
    }
}
