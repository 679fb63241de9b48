//! `systole_top`: the whole accelerator behind its host interface.
//!
//! Pins: `clock`, `reset` (synchronous, active high: the host's `Reset` plus the link's state),
//! the UART (`uart_rx`, `uart_tx`), the SPI slave (`spi_sck`, `spi_cs_n`, `spi_mosi`,
//! `spi_miso`) and three status outputs for LEDs (`busy`, `done`, `error`).
//!
//! Inside: the packet engine and its two interfaces ([`crate::link`]), the instruction FIFO, the
//! decoder and program checks of the candidate word, the controller's units ([`crate::controller`]), the memories
//! ([`crate::mem`]: scratchpad and accumulators with two read ports each, the byte-banked DRAM),
//! the array ([`crate::array`]) and one accumulator lane plus one cast or requantize lane per
//! column ([`crate::vector`]). This file is wiring and multiplexers: which unit (or the host,
//! while no program runs) owns each memory port.

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dataflow, Dtype, Schedule};

use crate::array::Array;
use crate::controller::{ArrayUnit, Dispatcher, InstrFifo, Sequencer, WeightLoader};
use crate::decode::{constant, Checker, Decoder};
use crate::link::{HostMap, PacketEngine, SpiSlave, UartRx, UartTx};
use crate::mem::{dram_banks, Dram, RowRam};
use crate::vector::{AccLane, AccOp, CastLane, RequantLane};

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
pub const DEFAULT_BAUD: f64 = 115_200.0;

/// Everything the emitted machine is built for: the array and its memories, and the sizes core's
/// `ArrayConfig` does not hold.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TopConfig {
    pub array: ArrayConfig,
    pub dram_bytes: usize,
    pub fifo_depth: usize,
    /// System clock cycles per UART bit.
    pub uart_divisor: u16,
}

impl TopConfig {
    /// The defaults: 64 KiB of DRAM, a FIFO of 64 words, 115,200 baud at the config's clock.
    pub fn new(array: ArrayConfig) -> TopConfig {
        let divisor = (array.clock_mhz * 1e6 / DEFAULT_BAUD).round().clamp(4.0, 65535.0);
        TopConfig {
            array,
            dram_bytes: DEFAULT_DRAM_BYTES,
            fifo_depth: DEFAULT_FIFO_DEPTH,
            uart_divisor: divisor as u16,
        }
    }

    /// The UART's rate at the config's clock.
    pub fn baud(&self) -> f64 {
        self.array.clock_mhz * 1e6 / self.uart_divisor as f64
    }

    /// Bytes of the widest row the DRAM moves in a cycle: a scratchpad row or an accumulator
    /// row.
    pub fn dram_row_bytes(&self) -> usize {
        let a = &self.array;
        (a.spad_width() * a.dtype.elem_bytes()).max(4 * a.cols as usize)
    }

    /// The DRAM's one-byte banks.
    pub fn dram_banks(&self) -> usize {
        dram_banks(self.dram_row_bytes())
    }
}

/// One scratchpad lane's write data: a `Load` element (contiguous, broadcast, or gathered over
/// several cycles into this lane's row-buffer register), a cast or requantized word, or a host
/// element. Lanes at or past the instruction's `len` (or past C for casts) write zero.
#[derive(LogicBlock)]
pub struct SpadLane {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    /// Low and high byte of this lane's element, and of element 0, in the DRAM row just read.
    pub lo: Signal<In, Bits<8>>,
    pub hi: Signal<In, Bits<8>>,
    pub lo0: Signal<In, Bits<8>>,
    pub hi0: Signal<In, Bits<8>>,
    pub is_load: Signal<In, Bit>,
    pub gather: Signal<In, Bit>,
    pub broadcast: Signal<In, Bit>,
    pub element: Signal<In, Bits<16>>,
    pub length: Signal<In, Bits<16>>,
    pub cast: Signal<In, Bits<16>>,
    pub host: Signal<In, Bit>,
    pub host_lane: Signal<In, Bits<16>>,
    pub host_elem: Signal<In, Bits<16>>,
    pub host_write: Signal<In, Bit>,
    pub data: Signal<Out, Bits<16>>,
    /// The host writes this lane (the units write whole rows).
    pub host_writes: Signal<Out, Bit>,
    row_buffer: DFF<Bits<16>>,
    lane: Constant<Bits<16>>,
    bf16: Constant<Bit>,
    mine: Signal<Local, Bits<16>>,
    first: Signal<Local, Bits<16>>,
    loaded: Signal<Local, Bits<16>>,
}

impl SpadLane {
    pub fn new(lane: usize, dtype: Dtype) -> SpadLane {
        SpadLane {
            clock: Default::default(),
            enable: Default::default(),
            lo: Default::default(),
            hi: Default::default(),
            lo0: Default::default(),
            hi0: Default::default(),
            is_load: Default::default(),
            gather: Default::default(),
            broadcast: Default::default(),
            element: Default::default(),
            length: Default::default(),
            cast: Default::default(),
            host: Default::default(),
            host_lane: Default::default(),
            host_elem: Default::default(),
            host_write: Default::default(),
            data: Default::default(),
            host_writes: Default::default(),
            row_buffer: Default::default(),
            lane: constant(lane as u64),
            bf16: Constant::new(dtype == Dtype::Bf16),
            mine: Default::default(),
            first: Default::default(),
            loaded: Default::default(),
        }
    }
}

impl Logic for SpadLane {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, row_buffer);
        self.mine.next = bit_cast::<16, 8>(self.lo.val());
        self.first.next = bit_cast::<16, 8>(self.lo0.val());
        if self.bf16.val() {
            self.mine.next =
                bit_cast::<16, 8>(self.lo.val()) | (bit_cast::<16, 8>(self.hi.val()) << 8);
            self.first.next =
                bit_cast::<16, 8>(self.lo0.val()) | (bit_cast::<16, 8>(self.hi0.val()) << 8);
        }
        // A gather reads one element per cycle, always at the row's offset 0.
        self.loaded.next = self.mine.val();
        if self.broadcast.val() {
            self.loaded.next = self.first.val();
        }
        if self.gather.val() {
            self.loaded.next = self.row_buffer.q.val();
            if self.element.val() == self.lane.val() {
                self.loaded.next = self.first.val();
            }
        }
        if self.enable.val()
            && self.is_load.val()
            && self.gather.val()
            && self.element.val() == self.lane.val()
        {
            self.row_buffer.d.next = self.first.val();
        }
        self.data.next = self.cast.val();
        if self.is_load.val() {
            self.data.next = 0.into();
            if self.lane.val() < self.length.val() {
                self.data.next = self.loaded.val();
            }
        }
        if self.host.val() {
            self.data.next = self.host_elem.val();
        }
        self.host_writes.next =
            self.host.val() && self.host_write.val() && self.host_lane.val() == self.lane.val();
    }
}

/// A `LoadAcc` word from four DRAM bytes, little-endian; zero in lanes at or past `length`.
#[derive(LogicBlock)]
pub struct WordLane {
    pub b0: Signal<In, Bits<8>>,
    pub b1: Signal<In, Bits<8>>,
    pub b2: Signal<In, Bits<8>>,
    pub b3: Signal<In, Bits<8>>,
    pub length: Signal<In, Bits<16>>,
    pub word: Signal<Out, Bits<32>>,
    lane: Constant<Bits<16>>,
}

impl WordLane {
    pub fn new(lane: usize) -> WordLane {
        WordLane {
            b0: Default::default(),
            b1: Default::default(),
            b2: Default::default(),
            b3: Default::default(),
            length: Default::default(),
            word: Default::default(),
            lane: constant(lane as u64),
        }
    }
}

impl Logic for WordLane {
    #[hdl_gen]
    fn update(&mut self) {
        self.word.next = 0.into();
        if self.lane.val() < self.length.val() {
            self.word.next = bit_cast::<32, 8>(self.b0.val())
                | (bit_cast::<32, 8>(self.b1.val()) << 8)
                | (bit_cast::<32, 8>(self.b2.val()) << 16)
                | (bit_cast::<32, 8>(self.b3.val()) << 24);
        }
    }
}

/// The whole machine.
#[derive(LogicBlock)]
pub struct SystoleTop {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub uart_rx: Signal<In, Bit>,
    pub uart_tx: Signal<Out, Bit>,
    pub spi_sck: Signal<In, Bit>,
    pub spi_cs_n: Signal<In, Bit>,
    pub spi_mosi: Signal<In, Bit>,
    pub spi_miso: Signal<Out, Bit>,
    pub busy: Signal<Out, Bit>,
    pub done: Signal<Out, Bit>,
    pub error: Signal<Out, Bit>,
    uart_in: UartRx,
    uart_out: UartTx,
    spi: SpiSlave,
    engine: PacketEngine,
    fifo: InstrFifo,
    checks: Checker,
    candidate: Decoder,
    dispatcher: Dispatcher,
    seq: Sequencer,
    wl: WeightLoader,
    unit: ArrayUnit,
    spad_a: RowRam<16>,
    spad_b: RowRam<16>,
    acc_x: RowRam<32>,
    acc_y: RowRam<32>,
    dram: Dram,
    array: Array,
    spad_lanes: Vec<SpadLane>,
    acc_lanes: Vec<AccLane>,
    words: Vec<WordLane>,
    cast: Vec<CastLane>,
    requant: Vec<RequantLane>,
    weight_stationary: Constant<Bit>,
    en: Signal<Local, Bit>,
    host: Signal<Local, Bit>,
    /// Bytes per scratchpad element, for the byte wiring of the DRAM rows.
    _es: usize,
}

impl SystoleTop {
    pub fn new(top: &TopConfig) -> SystoleTop {
        let config = top.array;
        let (c, w) = (config.cols as usize, config.spad_width());
        let dtype = config.dtype;
        let banks = top.dram_banks();
        let map =
            HostMap::new(&config, top.dram_bytes as u64, top.fifo_depth as u16, top.uart_divisor);
        SystoleTop {
            clock: Default::default(),
            reset: Default::default(),
            uart_rx: Default::default(),
            uart_tx: Default::default(),
            spi_sck: Default::default(),
            spi_cs_n: Default::default(),
            spi_mosi: Default::default(),
            spi_miso: Default::default(),
            busy: Default::default(),
            done: Default::default(),
            error: Default::default(),
            uart_in: UartRx::new(top.uart_divisor),
            uart_out: UartTx::new(top.uart_divisor),
            spi: Default::default(),
            engine: PacketEngine::new(map),
            fifo: InstrFifo::new(top.fifo_depth, config.schedule == Schedule::Decoupled),
            checks: Checker::new(&config),
            candidate: Default::default(),
            dispatcher: Default::default(),
            seq: Sequencer::new(&config),
            wl: WeightLoader::new(&config),
            unit: ArrayUnit::new(&config),
            spad_a: RowRam::with_bits(w, config.spad_depth as usize, 8 * dtype.elem_bytes()),
            spad_b: RowRam::with_bits(w, config.spad_depth as usize, 8 * dtype.elem_bytes()),
            acc_x: RowRam::new(c, config.acc_depth as usize),
            acc_y: RowRam::new(c, config.acc_depth as usize),
            dram: Dram::new(top.dram_bytes, banks),
            array: Array::new(&config),
            spad_lanes: (0..w).map(|e| SpadLane::new(e, dtype)).collect(),
            acc_lanes: (0..c).map(|_| AccLane::new(dtype)).collect(),
            words: (0..c).map(WordLane::new).collect(),
            cast: (0..if dtype == Dtype::Bf16 { c } else { 0 })
                .map(|_| Default::default())
                .collect(),
            requant: (0..if dtype == Dtype::Int8 { c } else { 0 })
                .map(|_| Default::default())
                .collect(),
            weight_stationary: Constant::new(config.dataflow == Dataflow::WeightStationary),
            en: Default::default(),
            host: Default::default(),
            _es: dtype.elem_bytes(),
        }
    }
}

impl Logic for SystoleTop {
    #[hdl_gen]
    fn update(&mut self) {
        // Clocks.
        self.uart_in.clock.next = self.clock.val();
        self.uart_out.clock.next = self.clock.val();
        self.spi.clock.next = self.clock.val();
        self.engine.clock.next = self.clock.val();
        self.fifo.clock.next = self.clock.val();
        self.dispatcher.clock.next = self.clock.val();
        self.seq.clock.next = self.clock.val();
        self.wl.clock.next = self.clock.val();
        self.unit.clock.next = self.clock.val();
        self.spad_a.clock.next = self.clock.val();
        self.spad_b.clock.next = self.clock.val();
        self.acc_x.clock.next = self.clock.val();
        self.acc_y.clock.next = self.clock.val();
        self.dram.clock.next = self.clock.val();
        self.array.clock.next = self.clock.val();

        // The host link: bytes from either interface into the engine, its answer back out of
        // the interface the request came in on.
        self.uart_in.rx.next = self.uart_rx.val();
        self.uart_tx.next = self.uart_out.tx.val();
        self.spi.sck.next = self.spi_sck.val();
        self.spi.cs_n.next = self.spi_cs_n.val();
        self.spi.mosi.next = self.spi_mosi.val();
        self.spi_miso.next = self.spi.miso.val();
        self.engine.reset.next = self.reset.val();
        self.engine.rx_valid.next = self.uart_in.valid.val() || self.spi.rx_valid.val();
        self.engine.rx_spi.next = self.spi.rx_valid.val();
        self.engine.rx_byte.next = self.uart_in.data.val();
        if self.spi.rx_valid.val() {
            self.engine.rx_byte.next = self.spi.rx_byte.val();
        }
        self.engine.spi_deselect.next = self.spi.deselect.val();
        self.uart_out.data.next = self.engine.tx_byte.val();
        self.uart_out.valid.next = self.engine.tx_valid_uart.val();
        self.spi.tx_byte.next = self.engine.tx_byte.val();
        self.spi.tx_valid.next = self.engine.tx_valid_spi.val();
        self.engine.tx_take.next = self.uart_out.take.val() || self.spi.take.val();

        // Instructions: FIFO (its head is the candidate) -> decoder and checks -> dispatcher, units.
        self.fifo.push.next = self.engine.fifo_push.val();
        self.fifo.push_word.next = self.engine.fifo_word.val();
        self.fifo.push_flag.next = self.engine.fifo_extent_over.val();
        self.fifo.push_end.next = self.engine.fifo_end.val();
        self.fifo.pop.next = self.dispatcher.pop.val();
        self.fifo.clear.next = self.dispatcher.fifo_clear.val();
        self.checks.load.next = self.candidate.load.val();
        self.checks.store.next = self.candidate.store.val();
        self.checks.load_weights.next = self.candidate.load_weights.val();
        self.checks.matmul.next = self.candidate.matmul.val();
        self.checks.matmul_os.next = self.candidate.matmul_os.val();
        self.checks.vector.next = self.candidate.vector.val();
        self.checks.cast_bf16.next = self.candidate.cast_bf16.val();
        self.checks.requantize.next = self.candidate.requantize.val();
        self.checks.load_acc.next = self.candidate.load_acc.val();
        self.checks.store_spad.next = self.candidate.store_spad.val();
        self.checks.bias_add.next = self.candidate.bias_add.val();
        self.checks.relu_grad.next = self.candidate.relu_grad.val();
        self.checks.axpy.next = self.candidate.axpy.val();
        self.checks.spad_row.next = self.candidate.spad_row.val();
        self.checks.acc_row.next = self.candidate.acc_row.val();
        self.checks.a_row.next = self.candidate.a_row.val();
        self.checks.b_row.next = self.candidate.b_row.val();
        self.checks.dst.next = self.candidate.dst.val();
        self.checks.src.next = self.candidate.src.val();
        self.checks.rows.next = self.candidate.rows.val();
        self.checks.len.next = self.candidate.len.val();
        self.checks.k.next = self.candidate.k.val();
        self.checks.cols.next = self.candidate.cols.val();
        self.checks.extent_over.next = self.fifo.head_flag.val();
        self.dispatcher.head_valid.next = self.fifo.valid.val();
        self.dispatcher.head_word.next = self.fifo.head.val();
        self.dispatcher.fault_in.next = self.checks.fault.val();
        if self.candidate.fault.val().any() {
            self.dispatcher.fault_in.next = self.candidate.fault.val();
        }
        self.dispatcher.run.next = self.engine.run.val();
        self.dispatcher.reset.next = self.engine.machine_reset.val() || self.reset.val();
        self.candidate.word.next = self.dispatcher.word.val();
        self.dispatcher.load_weights.next = self.candidate.load_weights.val();
        self.dispatcher.matmul.next = self.candidate.matmul.val();
        self.dispatcher.matmul_os.next = self.candidate.matmul_os.val();
        self.dispatcher.halt.next = self.candidate.halt.val();
        self.dispatcher.swap.next = self.candidate.swap.val();
        self.dispatcher.seq_free.next = self.seq.free.val();
        self.dispatcher.wl_free.next = self.wl.free.val();
        self.dispatcher.wl_finishing.next = self.wl.finishing.val();
        self.dispatcher.arr_free.next = self.unit.free.val();
        self.en.next = self.dispatcher.enable.val();
        // The host owns the memory ports whenever no program runs.
        self.host.next = !self.dispatcher.running.val();

        self.seq.enable.next = self.en.val();
        self.seq.abort.next = self.dispatcher.abort.val();
        self.seq.start.next = self.dispatcher.start_seq.val();
        self.seq.load.next = self.candidate.load.val();
        self.seq.store.next = self.candidate.store.val();
        self.seq.vector.next = self.candidate.vector.val();
        self.seq.cast_bf16.next = self.candidate.cast_bf16.val();
        self.seq.requantize.next = self.candidate.requantize.val();
        self.seq.load_acc.next = self.candidate.load_acc.val();
        self.seq.store_spad.next = self.candidate.store_spad.val();
        self.seq.bias_add.next = self.candidate.bias_add.val();
        self.seq.relu.next = self.candidate.relu.val();
        self.seq.relu_grad.next = self.candidate.relu_grad.val();
        self.seq.scale.next = self.candidate.scale.val();
        self.seq.spad_row.next = self.candidate.spad_row.val();
        self.seq.acc_row.next = self.candidate.acc_row.val();
        self.seq.dst.next = self.candidate.dst.val();
        self.seq.src.next = self.candidate.src.val();
        self.seq.dram_addr.next = self.candidate.dram_addr.val();
        self.seq.rows.next = self.candidate.rows.val();
        self.seq.len.next = self.candidate.len.val();
        self.seq.row_stride.next = self.candidate.row_stride.val();
        self.seq.elem_stride.next = self.candidate.elem_stride.val();
        self.seq.imm.next = self.candidate.imm.val();
        self.seq.multiplier.next = self.candidate.multiplier.val();
        self.seq.shift.next = self.candidate.shift.val();
        self.seq.zero_point.next = self.candidate.zero_point.val();
        self.wl.enable.next = self.en.val();
        self.wl.abort.next = self.dispatcher.abort.val();
        self.wl.start.next = self.dispatcher.start_wl.val();
        self.wl.spad_row.next = self.candidate.spad_row.val();
        self.wl.rows.next = self.candidate.rows.val();
        self.wl.cols.next = self.candidate.cols.val();
        self.unit.enable.next = self.en.val();
        self.unit.abort.next = self.dispatcher.abort.val();
        self.unit.start.next = self.dispatcher.start_arr.val();
        self.unit.a_row.next = self.candidate.a_row.val();
        self.unit.b_row.next = self.candidate.b_row.val();
        self.unit.acc_row.next = self.candidate.acc_row.val();
        self.unit.rows.next = self.candidate.rows.val();
        self.unit.k.next = self.candidate.k.val();
        self.unit.swap.next = self.candidate.swap.val();
        self.unit.accumulate.next = self.candidate.accumulate.val();

        // Status.
        self.engine.running.next = self.dispatcher.running.val();
        self.engine.done.next = self.dispatcher.done.val();
        self.engine.fault.next = self.dispatcher.fault.val();
        self.engine.fifo_free.next = self.fifo.free.val();
        self.engine.cycles.next = self.dispatcher.cycles.val();
        self.busy.next = self.dispatcher.running.val();
        self.done.next = self.dispatcher.done.val();
        self.error.next = self.dispatcher.fault.val().any();

        // Scratchpad: port A (matmul rows, A^T rows, StoreSpad, host reads), port B (weight
        // rows or B rows), one write port (Load, casts, host).
        self.spad_a.read_enable.next = self.en.val();
        self.spad_b.read_enable.next = self.en.val();
        self.engine.spad_elem.next = 0.into();
        self.engine.acc_word.next = 0.into();
        self.spad_a.read_address.next = self.unit.spad_read_a.val();
        if self.seq.busy_next.val() {
            self.spad_a.read_address.next = self.seq.spad_read.val();
        }
        self.spad_b.read_address.next = self.unit.spad_read_b.val();
        if self.weight_stationary.val() {
            self.spad_b.read_address.next = self.wl.spad_read.val();
        }
        self.spad_a.write_address.next = self.seq.spad_write_row.val();
        self.spad_b.write_address.next = self.seq.spad_write_row.val();
        if self.host.val() {
            self.spad_a.read_address.next = self.engine.host_row.val();
            self.spad_a.write_address.next = self.engine.host_row.val();
            self.spad_b.write_address.next = self.engine.host_row.val();
        }
        for e in 0..self.spad_lanes.len() {
            self.spad_lanes[e].clock.next = self.clock.val();
            self.spad_lanes[e].enable.next = self.en.val();
            self.spad_lanes[e].is_load.next = self.seq.is_load.val();
            self.spad_lanes[e].gather.next = self.seq.gather.val();
            self.spad_lanes[e].broadcast.next = self.seq.broadcast.val();
            self.spad_lanes[e].element.next = self.seq.element.val();
            self.spad_lanes[e].length.next = self.seq.length.val();
            self.spad_lanes[e].cast.next = 0.into();
            self.spad_lanes[e].host.next = self.host.val();
            self.spad_lanes[e].host_lane.next = self.engine.host_lane.val();
            self.spad_lanes[e].host_elem.next = self.engine.host_elem.val();
            self.spad_lanes[e].host_write.next =
                self.engine.host_write.val() && (self.engine.host_region.val() == 1);
            self.spad_a.write_data[e].next = self.spad_lanes[e].data.val();
            self.spad_b.write_data[e].next = self.spad_lanes[e].data.val();
            self.spad_a.write_lane[e].next = self.spad_lanes[e].host_writes.val()
                || (self.en.val() && self.seq.spad_write.val() && !self.host.val());
            self.spad_b.write_lane[e].next = self.spad_lanes[e].host_writes.val()
                || (self.en.val() && self.seq.spad_write.val() && !self.host.val());
            if self.engine.host_lane.val() == e.to_bits() {
                self.engine.spad_elem.next = self.spad_a.read_data[e].val();
            }
        }
        // A one-iteration loop binds the element's bytes for the index arithmetic.
        for es in self._es..(self._es + 1) {
            for e in 0..self.spad_lanes.len() {
                self.spad_lanes[e].lo.next = self.dram.read_data[e * es].val();
                self.spad_lanes[e].hi.next = self.dram.read_data[e * es + es - 1].val();
                self.spad_lanes[e].lo0.next = self.dram.read_data[0].val();
                self.spad_lanes[e].hi0.next = self.dram.read_data[es - 1].val();
            }
        }
        for j in 0..self.cast.len() {
            self.cast[j].x.next = self.acc_x.read_data[j].val();
            self.spad_lanes[j].cast.next = self.cast[j].y.val();
        }
        for j in 0..self.requant.len() {
            self.requant[j].x.next = self.acc_x.read_data[j].val();
            self.requant[j].multiplier.next = self.seq.requant_multiplier.val();
            self.requant[j].shift.next = self.seq.requant_shift.val();
            self.requant[j].zero_point.next = self.seq.requant_zero_point.val();
            self.requant[j].ll.next = self.acc_lanes[j].ll.val();
            self.requant[j].lh.next = self.acc_lanes[j].lh.val();
            self.requant[j].hl.next = self.acc_lanes[j].hl.val();
            self.requant[j].hh.next = self.acc_lanes[j].hh.val();
            self.spad_lanes[j].cast.next = self.requant[j].y.val();
        }

        // Accumulators: port X (the destination word, Store, casts, accumulate, host reads),
        // port Y (a vector op's source), one write port (array rows, vector ops, LoadAcc, host).
        self.acc_x.read_enable.next = self.en.val();
        self.acc_y.read_enable.next = self.en.val();
        self.acc_x.read_address.next = self.unit.acc_read.val();
        if self.seq.busy_next.val() {
            self.acc_x.read_address.next = self.seq.acc_read_x.val();
        }
        self.acc_y.read_address.next = self.seq.acc_read_y.val();
        self.acc_x.write_address.next = self.unit.acc_write_row.val();
        if self.seq.acc_write.val() {
            self.acc_x.write_address.next = self.seq.acc_write_row.val();
        }
        if self.host.val() {
            self.acc_x.read_address.next = self.engine.host_row.val();
            self.acc_x.write_address.next = self.engine.host_row.val();
        }
        self.acc_y.write_address.next = self.acc_x.write_address.val();
        for j in 0..self.acc_lanes.len() {
            self.acc_lanes[j].x.next = self.acc_x.read_data[j].val();
            self.acc_lanes[j].y.next = self.acc_y.read_data[j].val();
            self.acc_lanes[j].array.next = self.array.out[j].val();
            self.acc_lanes[j].imm.next = self.seq.immediate.val();
            self.acc_lanes[j].requantize.next = self.seq.requantizing.val();
            self.acc_lanes[j].multiplier.next = self.seq.requant_multiplier.val();
            self.acc_lanes[j].op.next = self.unit.acc_op.val();
            if self.seq.acc_write.val() {
                self.acc_lanes[j].op.next = self.seq.acc_op.val();
            }
            // LoadAcc: word j of the DRAM row, zero at and past `len`; or the host's word.
            self.words[j].b0.next = self.dram.read_data[j * 4].val();
            self.words[j].b1.next = self.dram.read_data[j * 4 + 1].val();
            self.words[j].b2.next = self.dram.read_data[j * 4 + 2].val();
            self.words[j].b3.next = self.dram.read_data[j * 4 + 3].val();
            self.words[j].length.next = self.seq.length.val();
            self.acc_lanes[j].word.next = self.words[j].word.val();
            self.acc_x.write_lane[j].next = self.en.val()
                && !self.host.val()
                && (self.seq.acc_write.val() || self.unit.acc_write.val());
            if self.host.val() {
                self.acc_lanes[j].op.next = AccOp::Word;
                self.acc_lanes[j].word.next = self.engine.host_word.val();
                self.acc_x.write_lane[j].next = self.engine.host_write.val()
                    && (self.engine.host_region.val() == 2)
                    && (self.engine.host_lane.val() == j.to_bits());
                if self.engine.host_lane.val() == j.to_bits() {
                    self.engine.acc_word.next = self.acc_x.read_data[j].val();
                }
            }
            self.acc_y.write_lane[j].next = self.acc_x.write_lane[j].val();
            self.acc_x.write_data[j].next = self.acc_lanes[j].result.val();
            self.acc_y.write_data[j].next = self.acc_lanes[j].result.val();
        }

        // DRAM: reads for Load and LoadAcc, writes for Store and StoreSpad, host bytes.
        self.dram.read_enable.next = self.en.val();
        self.dram.read_address.next = self.seq.dram_read_address.val();
        self.dram.write_address.next = self.seq.dram_write_address.val();
        self.dram.write_count.next = 0.into();
        if self.en.val() {
            self.dram.write_count.next = self.seq.dram_write_count.val();
        }
        for k in 0..self.dram.write_data.len() {
            self.dram.write_data[k].next = 0.into();
        }
        for es in self._es..(self._es + 1) {
            for e in 0..self.spad_lanes.len() {
                self.dram.write_data[e * es].next = self.spad_a.read_data[e].val().get_bits::<8>(0);
                self.dram.write_data[e * es + es - 1].next =
                    self.spad_a.read_data[e].val().get_bits::<8>(es * 8 - 8);
            }
        }
        if self.seq.is_store.val() {
            for j in 0..self.acc_lanes.len() {
                self.dram.write_data[j * 4].next = self.acc_x.read_data[j].val().get_bits::<8>(0);
                self.dram.write_data[j * 4 + 1].next =
                    self.acc_x.read_data[j].val().get_bits::<8>(8);
                self.dram.write_data[j * 4 + 2].next =
                    self.acc_x.read_data[j].val().get_bits::<8>(16);
                self.dram.write_data[j * 4 + 3].next =
                    self.acc_x.read_data[j].val().get_bits::<8>(24);
            }
        }
        self.engine.dram_byte.next = self.dram.read_data[0].val();
        if self.host.val() {
            self.dram.read_address.next = self.engine.host_addr.val();
            self.dram.write_address.next = self.engine.host_addr.val();
            self.dram.write_count.next = 0.into();
            if self.engine.host_write.val() && (self.engine.host_region.val() == 0) {
                self.dram.write_count.next = 1.into();
            }
            self.dram.write_data[0].next = self.engine.host_byte.val();
        }

        // The array: rows from the scratchpad while the matmul feeds, zeros otherwise.
        self.array.enable.next = self.en.val();
        self.array.shift.next = self.wl.shift.val();
        self.array.swap.next = self.unit.swap_now.val();
        self.array.first.next = self.unit.first.val();
        self.array.drain.next = self.unit.drain.val();
        for i in 0..self.array.left.len() {
            self.array.left[i].next = 0.into();
            if self.unit.feed.val() {
                self.array.left[i].next = self.spad_a.read_data[i].val();
            }
        }
        for j in 0..self.array.top.len() {
            self.array.top[j].next = 0.into();
            if self.weight_stationary.val() {
                if self.wl.row_valid.val() && (self.wl.columns.val() > j.to_bits()) {
                    self.array.top[j].next = self.spad_b.read_data[j].val();
                }
            } else if self.unit.feed.val() {
                self.array.top[j].next = self.spad_b.read_data[j].val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::verilog_of;

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
        let identity = crate::link::HostMap::new(&array, 16, 2, 4).identity;
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
    }
}
