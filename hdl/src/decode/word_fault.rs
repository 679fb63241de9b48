//! A word's fault code, formed as the host link queues it: the decoder's encoding checks, then
//! the [`Checker`]'s program checks. Both depend on the word and the config alone, so the FIFO
//! stores the code beside its word and the dispatcher reads it from the head with the word,
//! instead of deciding through the checks in its own cycle (docs/DECISIONS.md 56). A decoupled
//! machine's scoreboard footprint ([`FootprintOf`]) depends on the word and its DRAM end alone
//! too, so it is formed here from the same decoded word and queued beside it (DECISIONS 60).

use rust_hdl::prelude::*;
use systole_core::ArrayConfig;

use super::{Checker, Decoder};
use crate::controller::{Footprint, FootprintOf};
use crate::decoded::DecodedOut;
use crate::optional::Optional;

/// The fault code core's `validate_program` gives one word (0 if none): the decoder's, else the
/// checker's; and, built `with_footprint`, the word's footprint. Built without the program
/// checks (`TopConfig::program_checks`), the decoder's alone: synthesis then drops the
/// checker, whose code nothing reads.
#[derive(LogicBlock)]
pub struct WordFault {
    pub word: Signal<In, Bits<128>>,
    /// The word's DRAM extent passes the end of the DRAM ([`super::ExtentCheck`]).
    pub extent_over: Signal<In, Bit>,
    /// The byte after the word's last DRAM byte ([`super::ExtentCheck`]'s `end_byte`).
    pub dram_end: Optional<Signal<In, Bits<32>>>,
    pub fault: Signal<Out, Bits<4>>,
    pub fp: Optional<Signal<Out, Footprint>>,
    decoder: Decoder,
    checks: Checker,
    footprint: Optional<FootprintOf>,
    /// Present on a machine built without its program checks: the checker's code is then
    /// dropped. Absent, it leaves no trace in the Verilog.
    unchecked: Optional<Constant<Bit>>,
}

impl WordFault {
    pub fn new(config: &ArrayConfig, with_footprint: bool, program_checks: bool) -> WordFault {
        WordFault {
            word: Default::default(),
            extent_over: Default::default(),
            dram_end: Optional::default_when(with_footprint),
            fault: Default::default(),
            fp: Optional::default_when(with_footprint),
            decoder: Default::default(),
            checks: Checker::new(config),
            footprint: Optional::when(with_footprint, || FootprintOf::new(config)),
            unchecked: Optional::when(!program_checks, || Constant::new(true)),
        }
    }
}

impl Logic for WordFault {
    #[hdl_gen]
    fn update(&mut self) {
        self.decoder.word.next = self.word.val();
        DecodedOut::join(&mut self.decoder.out, &mut self.checks.ins);
        self.checks.extent_over.next = self.extent_over.val();
        self.fault.next = self.checks.fault.val();
        for _k in 0..self.unchecked.len() {
            self.fault.next = 0.into();
        }
        if self.decoder.fault.val().any() {
            self.fault.next = self.decoder.fault.val();
        }
        for _k in 0..self.footprint.len() {
            DecodedOut::join(&mut self.decoder.out, &mut self.footprint.ins);
            self.footprint.dram_end.next = self.dram_end.val();
            self.fp.next = self.footprint.fp.val();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, verilog_of};
    use systole_core::isa::{encode, Instruction};
    use systole_core::protocol::FaultCode;
    use systole_core::Dtype;

    fn fault_of(w: &mut WordFault, word: u128, extent_over: bool) -> u64 {
        w.word.next = word.to_bits();
        w.extent_over.next = extent_over;
        settle(w);
        w.fault.val().index() as u64
    }

    fn word(ins: &Instruction) -> u128 {
        encode(ins).unwrap().0
    }

    /// A one-row `Load` into scratchpad row `spad_row`.
    fn load(spad_row: u16) -> Instruction {
        Instruction::Load { spad_row, dram_addr: 0, rows: 1, len: 1, row_stride: 0, elem_stride: 1 }
    }

    /// An output-stationary matmul, which a weight-stationary machine refuses.
    fn matmul_os() -> Instruction {
        Instruction::MatmulOs {
            a_row: 0,
            b_row: 0,
            k: 1,
            acc_row: 0,
            rows: 1,
            cols: 1,
            accumulate: false,
        }
    }

    /// The combination of the two codes (each is checked against core on its own: the
    /// decoder's and the checker's tests).
    #[test]
    fn the_word_fault_is_the_decoders_before_the_checkers() {
        let config = ArrayConfig::new(2, 2, Dtype::Int8);
        let mut w = WordFault::new(&config, false, true);
        w.connect_all();
        let halt = word(&Instruction::Halt);
        assert_eq!(fault_of(&mut w, halt, false), 0);
        assert_eq!(fault_of(&mut w, halt | 1 << 120, false), FaultCode::Reserved as u64);
        // The extent counts only for DRAM instructions.
        assert_eq!(fault_of(&mut w, halt, true), 0);
        assert_eq!(fault_of(&mut w, word(&load(0)), false), 0);
        assert_eq!(fault_of(&mut w, word(&load(0)), true), FaultCode::Range as u64);
        let deep = load(config.spad_depth as u16);
        assert_eq!(fault_of(&mut w, word(&deep), false), FaultCode::Range as u64);
        // Both fault: the decoder's code wins.
        assert_eq!(fault_of(&mut w, word(&deep) | 1 << 127, true), FaultCode::Reserved as u64);
        assert_eq!(fault_of(&mut w, word(&matmul_os()), false), FaultCode::Dataflow as u64);
    }

    /// Without the program checks, only the decoder's faults remain: a word past a memory's end
    /// or the DRAM's, or of the other dataflow, passes.
    #[test]
    fn without_program_checks_the_word_fault_is_the_decoders() {
        let config = ArrayConfig::new(2, 2, Dtype::Int8);
        let mut w = WordFault::new(&config, false, false);
        w.connect_all();
        let halt = word(&Instruction::Halt);
        assert_eq!(fault_of(&mut w, halt | 1 << 120, false), FaultCode::Reserved as u64);
        assert_eq!(fault_of(&mut w, 0, false), FaultCode::Opcode as u64);
        let deep = load(config.spad_depth as u16);
        assert_eq!(fault_of(&mut w, word(&deep), true), 0);
        assert_eq!(fault_of(&mut w, word(&matmul_os()), false), 0);
    }

    #[test]
    fn verilog_is_valid() {
        let config = ArrayConfig::new(2, 2, Dtype::Int8);
        yosys_validate("word_fault", &verilog_of(WordFault::new(&config, false, true))).unwrap();
        yosys_validate("word_fault", &verilog_of(WordFault::new(&config, true, true))).unwrap();
        yosys_validate("word_fault", &verilog_of(WordFault::new(&config, false, false))).unwrap();
    }
}
