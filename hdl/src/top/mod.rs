//! `systole_top`: the whole accelerator behind its host interface.
//!
//! Pins: `clock`, `reset` (synchronous, active high: the host's `Reset` plus the link's state),
//! the UART (`uart_rx`, `uart_tx`), the SPI slave (`spi_sck`, `spi_cs_n`, `spi_mosi`,
//! `spi_miso`) and three status outputs for LEDs (`busy`, `done`, `error`).
//!
//! Inside: the packet engine and its two interfaces ([`crate::link`]), the instruction FIFO (each
//! word stored with its fault code, formed by the decoder and program checks as it is queued),
//! the candidate word's decoder, the controller's units ([`crate::controller`]), the memories
//! ([`crate::mem`]: scratchpad and accumulators with two read ports each, the byte-banked DRAM),
//! the array ([`crate::array`]) and one accumulator lane plus one cast or requantize lane per
//! column ([`crate::vector`]; built with `requant_cycles = 4`, each requantize lane's products
//! come from a [`SerialProducts`] instead of its accumulator lane's multiplier). This file is
//! wiring and multiplexers: which unit (or the host, while no program runs) owns each memory
//! port.

use systole_core::{ArrayConfig, DramPort, Schedule};

use crate::convert::{serial_requant, SerialProducts};
use crate::mem::{dram_banks, Dram, RowRam, SdramMemory};
use systole_core::sdram::{timing_under, SDRAM_PART};

mod blocking;
mod decoupled;
mod lanes;

pub use blocking::SystoleTop;
pub use decoupled::SystoleTopDecoupled;
pub use lanes::{ByteWord, SpadLane, WordLane};

/// Instruction words the FIFO holds by default (as core's emulated host interface).
pub const DEFAULT_FIFO_DEPTH: usize = systole_core::link::emulator::FIFO_DEPTH;
/// DRAM bytes by default.
pub const DEFAULT_DRAM_BYTES: usize = 64 * 1024;
/// The most DRAM an emitted design holds: 16 MiB. A board keeps its DRAM in block RAM, and the
/// largest part here (the ULX3S's LFE5U-85F, 208 blocks of 18 Kbit) has 468 KiB of it; the
/// other target, the Verilated model, is loaded through its UART (about 40 clock cycles a byte:
/// 16 MiB is some 670 million simulated cycles). While emitting, rust-hdl keeps 8 bytes of
/// simulation state per DRAM byte (128 MiB at this limit; `--dram-bytes 4294967295` asked for 32
/// GiB and aborted).
pub const MAX_DRAM_BYTES: usize = 16 << 20;
/// The UART's default rate, from which the default divisor follows the clock.
pub const DEFAULT_BAUD: u32 = 115_200;

/// How far a UART's rate may be from the one asked for: 2%, a side's usual share of the 8N1
/// frame's 5% budget (half a bit over ten bits) between the two ends' clocks.
pub const BAUD_TOLERANCE: f64 = 0.02;

/// Why a clock cannot make a UART rate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a {clock_mhz} MHz clock cannot make the link's {baud} baud: the nearest divisor ({divisor}) \
     gives {made:.0} baud, {off:.1}% off; the UART needs 4 to 65535 cycles a bit, within {tol}%",
    off = 100.0 * (made - *baud as f64).abs() / *baud as f64,
    tol = 100.0 * BAUD_TOLERANCE
)]
pub struct BaudError {
    pub clock_mhz: f64,
    pub baud: u32,
    pub divisor: u64,
    pub made: f64,
}

/// The UART divisor (clock cycles a bit) that makes `baud` at `clock_mhz`: the nearest, refused
/// if it is below 4 (the receiver samples the middle of a bit), above 65535 (the counter's
/// width), or gives a rate more than [`BAUD_TOLERANCE`] away.
pub fn uart_divisor(clock_mhz: f64, baud: u32) -> Result<u16, BaudError> {
    let exact = clock_mhz * 1e6 / baud.max(1) as f64;
    let divisor = exact.round().max(1.0) as u64;
    let made = clock_mhz * 1e6 / divisor as f64;
    let off = (made - baud as f64).abs() / baud as f64;
    match u16::try_from(divisor) {
        Ok(d) if d >= 4 && off <= BAUD_TOLERANCE && baud > 0 => Ok(d),
        _ => Err(BaudError { clock_mhz, baud, divisor, made }),
    }
}

/// The latest revision of the emitted RTL ([`TopConfig::rtl_revision`]). A revision changes
/// the netlist, never what the machine computes or when: a board's measured default names the
/// revision it was built on, so that its command emits, byte for byte, the design its report
/// measured (docs/DECISIONS.md 113 and 118).
///
/// 1. The RTL of every measured default up to 2026-11-30.
/// 2. The requantize lanes add their zero points in 11 bits rather than 33
///    ([`crate::convert::RequantLane::narrowed`]), and the instruction FIFO compares its
///    pointers for its stale flag before the pop selects a result
///    ([`crate::controller::InstrFifo::precompared`]).
/// 3. The BF16 f32 adds, in PEs and lanes, round with the exponent formed beside the
///    significand's increment ([`crate::float::F32Round::early_exponent`]), and the
///    pipelined BF16 PEs align in parallel and sum their aligned significands in the aligner's
///    stage ([`crate::array::ArrayParts::lean_add`]).
/// 4. The BF16 lanes sum their aligned significands beside their aligner, as revision 3's PEs do
///    ([`crate::float::F32Normalize::given_sum`]).
/// 5. The host link of issue 75: the packet engine takes memory commands of `MAX_DATA` bytes
///    in a 2 KiB request buffer ([`TopConfig::large_requests`]), and a board's build runs its
///    UART at the fastest rate its USB bridge carries (`systole_boards::bridge`) rather than
///    at [`DEFAULT_BAUD`]. A build of an earlier revision keeps the 512-byte buffer and 115,200
///    baud, as the boards measured on them were built.
pub const RTL_REVISION: u8 = 5;

/// The first revision whose link is issue 75's (revision 5 of [`RTL_REVISION`]): large requests,
/// and a board's UART at its bridge's rate.
pub const FAST_LINK_REVISION: u8 = 5;

/// Everything the emitted machine is built for: the array and its memories, and the sizes core's
/// `ArrayConfig` does not hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TopConfig {
    pub array: ArrayConfig,
    pub dram_bytes: usize,
    pub fifo_depth: usize,
    /// System clock cycles per UART bit.
    pub uart_divisor: u16,
    /// Where the blocking machine forms each word's fault code (the decoder's and the program
    /// checks'): as the host link queues it, stored beside it in the FIFO, so the dispatch
    /// decision does not run through the checks (true, the default); or from the FIFO's head in
    /// the cycle it is decided on, which saves a second decoder's logic on a part too small for
    /// it (docs/DECISIONS.md 56). Results and cycles are the same either way; the decoupled
    /// machine always checks as it queues.
    pub checks_at_queue: bool,
    /// The scratchpad's lanes register their writes on the way in ([`crate::mem::Ram::with_write_stage`]),
    /// so that a `Load`'s path from a DRAM bank through the rotator ends at flip-flops beside
    /// it rather than at the scratchpad's block RAMs. Results and cycles are the same either
    /// way (the lanes forward the registered word to a read); it costs the write registers and
    /// a forwarding multiplexer per lane.
    pub spad_write_stage: bool,
    /// The accumulators' lanes register their writes on the way in, as the scratchpad's may:
    /// a `LoadAcc`'s path from a DRAM bank, and an accumulator lane's result, end at flip-flops
    /// rather than at the accumulators' block RAMs. Results and cycles are the same either way.
    pub acc_write_stage: bool,
    /// The DRAM's banks register their writes on the way in ([`crate::mem::Dram::with_write_stage`]):
    /// a `Store`'s path from the scratchpad or the accumulators through the write rotator ends
    /// at flip-flops rather than at the banks' block RAMs. Results and cycles are the same.
    pub dram_write_stage: bool,
    /// Each two PEs' INT8 products formed in one iCE40 UP5K DSP in its dual 8 x 8 mode
    /// ([`crate::pe::DspPair`]), the DSP's product register standing for the PEs' own: a
    /// weight-stationary INT8 array of two-stage PEs (`ArrayConfig::pe_stages` 2). The same
    /// results and cycles in half the DSPs; the Verilog instantiates `SB_MAC16`, so only the
    /// iCE40 flow builds it.
    pub pe_pairs: bool,
    /// The weight-stationary array's columns summed in adder trees ([`crate::array_tree`]):
    /// each row's products formed as it enters, summed at once and delayed to the systolic
    /// array's cycle. The same results and cycles with no skew, partial-sum or de-skew
    /// registers: blocking weight-stationary INT8 only, where its sums wrap and a swap waits for
    /// the array to empty.
    pub adder_tree: bool,
    /// The blocking machine's candidate registered after the FIFO
    /// ([`crate::controller::HeadRegister`], as the decoupled machine always has it): the
    /// dispatch decision starts at flip-flops rather than at the FIFO's block RAM output, and
    /// a machine that checks words at the head forms their fault codes on the way in. A word
    /// reaches the dispatcher a cycle later while the machine is frozen, so results and cycles
    /// are the same; it costs the register's 133 flip-flops.
    pub head_register: bool,
    /// The BF16 accumulator lanes' f32 aligner shifts beside the operands' magnitude comparison
    /// rather than after it ([`crate::float::F32Align::parallel`]): a shorter path from the
    /// accumulators' block RAMs, in more logic (docs/DECISIONS.md 103). The same bits either
    /// way; INT8 machines have no aligner.
    pub parallel_align: bool,
    /// The blocking machine checks each word against its build as the FIFO hands it on (the
    /// [`crate::decode::Checker`]'s dataflow, dtype, width and range checks and the host link's
    /// DRAM extent check), faulting on one that fails (true, the default). Built without them
    /// (a part too small to hold the checker) it faults only on a word its decoder cannot read
    /// and on `NoWeightsLoaded`, and says so in its identity
    /// (`systole_core::protocol::Identity::program_checks`): its host validates every program
    /// before it sends a word, as `LinkMachine::run` and the firmware's driver do. Results and
    /// cycles of every valid program are the same (docs/DECISIONS.md 107).
    pub program_checks: bool,
    /// Each systolic INT8 PE's partial sum is as wide as the sums it can hold (true, the
    /// default: docs/DECISIONS.md 108), or 32 bits in every PE (the RTL before it, which the
    /// 85F's measured INT8 default was built on: DECISIONS 113). The same bits either way.
    pub narrow_sums: bool,
    /// The revision of the RTL emitted ([`RTL_REVISION`], the latest, by default): 1 to
    /// [`RTL_REVISION`], every one computing the same bits in the same cycles.
    pub rtl_revision: u8,
    /// The scratchpad in the iCE40 UP5K's single-port SPRAMs ([`crate::mem::SpramRows`]): up
    /// to 16,384 rows of up to eight INT8 lanes, where its block RAMs hold 512. A machine whose
    /// timing is the single port's (`ArrayConfig::single_port_spad`) without write or read
    /// stages; the Verilog instantiates `SB_SPRAM256KA`, so only the iCE40 UP5K's flow builds
    /// it, and its reset clears the scratchpad (16,384 cycles; the SPRAM has no initial
    /// contents).
    pub spad_spram: bool,
}

impl TopConfig {
    /// Whether the machine built forms each word's fault code as it is queued: always when
    /// decoupled, else as [`TopConfig::checks_at_queue`] says.
    pub fn checks_words_at_queue(&self) -> bool {
        self.checks_at_queue || self.array.schedule == Schedule::Decoupled
    }

    /// Whether the packet engine takes memory commands of `MAX_DATA` bytes (revision 5 on),
    /// else of `BASE_DATA` (`systole_core::protocol`); its identity says which.
    pub fn large_requests(&self) -> bool {
        self.rtl_revision >= FAST_LINK_REVISION
    }

    /// Most data bytes one memory command moves on this machine.
    pub fn max_data(&self) -> usize {
        match self.large_requests() {
            true => systole_core::protocol::MAX_DATA,
            false => systole_core::protocol::BASE_DATA,
        }
    }

    /// Whether the machine built keeps 32-bit partial sums in PEs that could narrow them: INT8
    /// PEs built without [`TopConfig::narrow_sums`] (BF16 PEs sum in f32 either way).
    pub fn wide_sums(&self) -> bool {
        !self.narrow_sums && self.array.dtype == systole_core::Dtype::Int8
    }
}

impl TopConfig {
    /// The instruction FIFO as this machine builds it, queueing footprints if `with_footprints`.
    pub(crate) fn fifo(&self, with_footprints: bool) -> crate::controller::InstrFifo {
        let fifo = crate::controller::InstrFifo::new(self.fifo_depth, with_footprints);
        if self.rtl_revision >= 2 {
            fifo.precompared()
        } else {
            fifo
        }
    }

    /// What this machine builds its array with beyond its `ArrayConfig`.
    pub(crate) fn array_parts(&self) -> crate::array::ArrayParts {
        crate::array::ArrayParts {
            paired: self.pe_pairs,
            tree: self.adder_tree,
            narrow: self.narrow_sums,
            lean_add: self.rtl_revision >= 3,
        }
    }

    /// A requantize lane as this machine builds it.
    pub(crate) fn requant_lane(&self) -> crate::convert::RequantLane {
        let lane = crate::convert::RequantLane::new(self.array.convert_stages);
        if self.rtl_revision >= 2 {
            lane.narrowed()
        } else {
            lane
        }
    }

    /// The defaults: 64 KiB of DRAM, a FIFO of 64 words, 115,200 baud at the config's clock.
    pub fn new(array: ArrayConfig) -> TopConfig {
        // A clock that cannot make the rate still gets a machine (the simulators' links run at
        // any divisor); what is built for a board or emitted asks `uart_divisor` first.
        let divisor = (array.clock_mhz * 1e6 / DEFAULT_BAUD as f64).round().clamp(4.0, 65535.0);
        TopConfig {
            array,
            dram_bytes: DEFAULT_DRAM_BYTES,
            fifo_depth: DEFAULT_FIFO_DEPTH,
            uart_divisor: divisor as u16,
            checks_at_queue: true,
            spad_write_stage: false,
            acc_write_stage: false,
            dram_write_stage: false,
            pe_pairs: false,
            adder_tree: false,
            head_register: false,
            parallel_align: true,
            program_checks: true,
            narrow_sums: true,
            rtl_revision: RTL_REVISION,
            spad_spram: false,
        }
    }

    /// One of the scratchpad's two read ports: a row of `spad_width` lanes of one element each,
    /// with the write stage if built with one, and the read stage if `read_stages` asks for one.
    pub(crate) fn spad(&self) -> RowRam<16> {
        let a = &self.array;
        if self.spad_spram {
            return RowRam::in_spram(a.spad_width());
        }
        let ram =
            RowRam::with_bits(a.spad_width(), a.spad_depth as usize, 8 * a.dtype.elem_bytes());
        let ram = if self.spad_write_stage { ram.with_write_stage() } else { ram };
        if a.read_stages > 0 {
            ram.with_read_stage()
        } else {
            ram
        }
    }

    /// An accumulator memory of `cols` lanes and `depth` rows (one copy of one bank), with the
    /// write stage if built with one, and the read stage if `read_stages` asks for one.
    pub(crate) fn acc(&self, depth: usize) -> RowRam<32> {
        let ram = RowRam::new(self.array.cols as usize, depth);
        let ram = if self.acc_write_stage { ram.with_write_stage() } else { ram };
        if self.array.read_stages > 0 {
            ram.with_read_stage()
        } else {
            ram
        }
    }

    /// The DRAM, in [`TopConfig::dram_banks`] banks, with the write stage if built with one,
    /// and the read stage if `read_stages` asks for one.
    pub(crate) fn dram(&self) -> Dram {
        let dram = Dram::new(self.dram_bytes, self.dram_banks());
        let dram = if self.dram_write_stage { dram.with_write_stage() } else { dram };
        if self.array.read_stages > 0 {
            dram.with_read_stage()
        } else {
            dram
        }
    }

    /// The SDRAM behind the DRAM port (`DramPort::Sdram`): rows as wide as the row port's, the
    /// controller's phases from the clock (`sdram::clock_ratio`).
    pub(crate) fn sdram(&self) -> SdramMemory {
        let (timing, ratio) = timing_under(&SDRAM_PART, self.array.clock_mhz)
            .unwrap_or_else(|e| panic!("an SDRAM machine of an unvalidated config: {e}"));
        let rows = self.row_port_bytes();
        let stages = self.array.read_stages as usize;
        SdramMemory::new(&timing, &SDRAM_PART.geometry, ratio as usize, rows, stages)
    }

    /// Bytes of a scratchpad row or an accumulator row, whichever is wider: a DRAM transfer's
    /// row on the row port and on the SDRAM.
    pub fn row_port_bytes(&self) -> usize {
        let a = &self.array;
        (a.spad_width() * a.dtype.elem_bytes()).max(4 * a.cols as usize)
    }

    /// The UART's rate at the config's clock.
    pub fn baud(&self) -> f64 {
        self.array.clock_mhz * 1e6 / self.uart_divisor as f64
    }

    /// Bytes of the widest row the DRAM moves in a cycle: a scratchpad row or an accumulator
    /// row, or one byte on the byte port (`ArrayConfig::dram_port`).
    pub fn dram_row_bytes(&self) -> usize {
        let a = &self.array;
        match a.dram_port {
            DramPort::Row => self.row_port_bytes(),
            DramPort::Byte => 1,
            // Refused by `emit::check`; one SDRAM word.
            DramPort::Sdram => systole_core::sdram::WORD_BYTES as usize,
        }
    }

    /// The DRAM's one-byte banks.
    pub fn dram_banks(&self) -> usize {
        dram_banks(self.dram_row_bytes())
    }
}

/// One [`SerialProducts`] per requantize lane where [`serial_requant`], else none (the lanes
/// take their accumulator lanes' products).
fn serial_products(config: &ArrayConfig) -> Vec<SerialProducts> {
    let n = if serial_requant(config) { config.cols } else { 0 };
    (0..n).map(|_| SerialProducts::default()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::verilog_of;
    use rust_hdl::prelude::*;
    use systole_core::Dtype;

    #[test]
    fn defaults_follow_the_clock() {
        let mut array = ArrayConfig::new(4, 4, Dtype::Int8);
        array.clock_mhz = 12.0;
        let top = TopConfig::new(array);
        assert_eq!(top.uart_divisor, 104);
        assert!((top.baud() - 115_384.6).abs() < 1.0);
        assert_eq!(top.dram_banks(), 16);
        assert_eq!(TopConfig::new(ArrayConfig::new(3, 5, Dtype::Bf16)).dram_banks(), 32);
    }

    /// Issue 73: `hdl emit --clock-mhz 0.001` clamped the divisor to 4 and wrote a 250-baud UART
    /// where 115,200 was promised.
    #[test]
    fn a_clock_that_cannot_make_the_baud_is_refused_naming_the_rate_it_would_give() {
        assert_eq!(uart_divisor(12.0, DEFAULT_BAUD), Ok(104));
        assert_eq!(uart_divisor(50.0, DEFAULT_BAUD), Ok(434));
        let e = uart_divisor(0.001, DEFAULT_BAUD).unwrap_err();
        assert_eq!(e.divisor, 1);
        let text = e.to_string();
        assert!(text.contains("0.001 MHz") && text.contains("gives 1000 baud"), "{text}");
        // Four cycles a bit, but 8.5% fast: past the tolerance.
        assert!(uart_divisor(0.5, DEFAULT_BAUD).is_err());
        // 1 MHz: 9 cycles a bit make 111,111 baud, 3.5% slow.
        assert!(uart_divisor(1.0, DEFAULT_BAUD).is_err());
        assert_eq!(uart_divisor(1.8432, DEFAULT_BAUD), Ok(16));
        assert!(uart_divisor(10_000.0, 9600).is_err(), "past the 16-bit counter");
        assert!(uart_divisor(12.0, 0).is_err());
    }

    /// The whole machine's Rust model answers `Identify` through its UART pins as core encodes
    /// it (a 1 x 1 array, so rust-hdl's simulator gets through the frames in seconds).
    #[test]
    fn the_machine_identifies_itself_over_its_uart_pins() {
        use systole_core::protocol::{encode_request, Request, MAX_FRAME};
        let array =
            ArrayConfig { spad_depth: 3, acc_depth: 1, ..ArrayConfig::new(1, 1, Dtype::Int8) };
        let top =
            TopConfig { dram_bytes: 16, fifo_depth: 2, uart_divisor: 4, ..TopConfig::new(array) };
        let mut m = SystoleTop::new(&top);
        m.connect_all();
        m.uart_rx.next = true;
        m.spi_cs_n.next = true;
        let mut frame = [0u8; MAX_FRAME];
        let n = encode_request(&Request::Identify, &mut frame).unwrap();
        let mut line = vec![true; 8];
        for &b in &frame[..n] {
            line.extend([false; 4]);
            for i in 0..8 {
                line.extend([b >> i & 1 == 1; 4]);
            }
            line.extend([true; 4]);
        }
        let mut out = vec![];
        for cycle in 0..line.len() + 40 * 36 {
            m.uart_rx.next = *line.get(cycle).unwrap_or(&true);
            crate::testing::tick(&mut m, |m| &mut m.clock);
            out.push(m.uart_tx.val());
        }
        // Decode 8N1 at 4 cycles per bit, sampling mid-bit.
        let mut bytes = vec![];
        let mut at = 0;
        while at < out.len() {
            if !out[at] && at + 40 <= out.len() {
                let bit = |i: usize| out[at + 2 + 4 * i] as u8;
                bytes.push((1..9).fold(0u8, |b, i| b | bit(i) << (i - 1)));
                at += 38;
            } else {
                at += 1;
            }
        }
        let identity = crate::link::HostMap::new(&array, 16, 2, 4, true, true).identity;
        let mut want = [0u8; MAX_FRAME];
        let k = systole_core::protocol::encode_response(
            &systole_core::protocol::Response::Ok(&identity),
            &mut want,
        )
        .unwrap();
        assert_eq!(bytes, &want[..k]);
    }

    #[test]
    fn verilog_is_valid() {
        let array =
            ArrayConfig { spad_depth: 16, acc_depth: 8, ..ArrayConfig::new(2, 3, Dtype::Bf16) };
        let top = TopConfig { dram_bytes: 256, uart_divisor: 4, ..TopConfig::new(array) };
        yosys_validate("systole_top", &verilog_of(SystoleTop::new(&top))).unwrap();
        let byte = ArrayConfig::new(8, 1, Dtype::Int8).with_dram_port(DramPort::Byte);
        let byte = ArrayConfig { spad_depth: 16, acc_depth: 8, ..byte.with_read_stages(1) };
        let top = TopConfig { dram_bytes: 256, uart_divisor: 4, ..TopConfig::new(byte) };
        yosys_validate("systole_top_byte", &verilog_of(SystoleTop::new(&top))).unwrap();
    }
}
