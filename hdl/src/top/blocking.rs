//! `systole_top` of the blocking schedule: wiring and multiplexers, which unit (or the host,
//! while no program runs) owns each memory port.

use rust_hdl::prelude::*;
use systole_core::{Dataflow, DramPort, Dtype, Schedule};

use super::{ByteWord, SpadLane, TopConfig, WordLane};
use crate::array::Array;
use crate::controller::{ArrayUnit, Dispatcher, HeadRegister, InstrFifo, Sequencer, WeightLoader};
use crate::convert::{CastLane, RequantLane, SerialProducts};
use crate::decode::{Decoder, WordFault};
use crate::decoded::DecodedOut;
use crate::link::{HostMap, PacketEngine, SpiSlave, UartRx, UartTx};
use crate::mem::{Dram, RowRam, SdramMemory};
use crate::optional::Optional;
use crate::vector::{AccLane, AccOp, LaneBuild};

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
    /// On an SDRAM machine (`DramPort::Sdram`) only, the chip's pins, one of each a phase
    /// ([`SdramMemory`]).
    pub sdram_ras_n: Vec<Signal<Out, Bit>>,
    pub sdram_cas_n: Vec<Signal<Out, Bit>>,
    pub sdram_we_n: Vec<Signal<Out, Bit>>,
    pub sdram_ba: Vec<Signal<Out, Bits<2>>>,
    pub sdram_a: Vec<Signal<Out, Bits<13>>>,
    pub sdram_dq_out: Vec<Signal<Out, Bits<16>>>,
    pub sdram_dq_drive: Vec<Signal<Out, Bit>>,
    pub sdram_dqm: Vec<Signal<Out, Bits<2>>>,
    pub sdram_dq_in: Vec<Signal<In, Bits<16>>>,
    uart_in: UartRx,
    uart_out: UartTx,
    spi: SpiSlave,
    engine: PacketEngine,
    fifo: InstrFifo,
    /// The candidate registered after the FIFO (`TopConfig::head_register`), its fault code
    /// with it.
    head: Optional<HeadRegister>,
    /// The fault code of the word the host link queues, stored with it (or of the FIFO's head,
    /// built without `checks_at_queue`).
    word_fault: WordFault,
    candidate: Decoder,
    dispatcher: Dispatcher,
    seq: Sequencer,
    wl: WeightLoader,
    unit: ArrayUnit,
    spad_a: RowRam<16>,
    /// The scratchpad's second copy, for the weight loader (or an output-stationary matmul's
    /// `B` rows); absent where the weight loader shares port A with the array
    /// (`ArrayConfig::single_port_spad`).
    spad_b: Optional<RowRam<16>>,
    acc_x: RowRam<32>,
    acc_y: RowRam<32>,
    /// The DRAM: block RAM, or (`DramPort::Sdram`) the board's SDRAM.
    dram: Optional<Dram>,
    sdram: Optional<SdramMemory>,
    array: Array,
    spad_lanes: Vec<SpadLane>,
    acc_lanes: Vec<AccLane>,
    words: Vec<WordLane>,
    /// On the byte port, each accumulator lane's `LoadAcc` word, a byte a cycle (else none).
    byte_words: Vec<ByteWord>,
    cast: Vec<CastLane>,
    requant: Vec<RequantLane>,
    products: Vec<SerialProducts>,
    weight_stationary: Constant<Bit>,
    checks_at_queue: Constant<Bit>,
    en: Signal<Local, Bit>,
    host: Signal<Local, Bit>,
    /// The scratchpad's port A and the accumulators' port X read for the sequencer.
    seq_reads: Signal<Local, Bit>,
    /// Bytes per scratchpad element, for the byte wiring of the DRAM rows.
    _es: usize,
    /// 1 where the DRAM moves rows (`DramPort::Row`) and 0 on the byte port, and the other way
    /// round: the bounds of the loops that wire each.
    _row_port: usize,
    _byte_port: usize,
    /// 1 on the SDRAM, whose rows are wired as the row port's from the transfers' rows.
    _sdram: usize,
    /// Bytes of the block-RAM DRAM's row, and of the SDRAM's (0 where there is none): the bounds
    /// of the loops over them, which `hdl_gen` evaluates even inside a loop that never runs.
    _dram_lanes: usize,
    _sdram_lanes: usize,
    /// On the SDRAM only: bytes of a scratchpad element, a `Load`'s or `StoreSpad`'s DRAM one.
    es_bytes: Optional<Constant<Bits<3>>>,
    /// On the byte port, 1 for an INT8 machine (one-byte elements) or a BF16 one (two).
    _int8_bytes: usize,
    _bf16_bytes: usize,
    /// 1 on a single-port scratchpad (`ArrayConfig::single_port_spad`): the weight loader reads
    /// it through port A, taking turns with the array, and the sequencer counts as busy in the
    /// cycle it writes it, so that no read is addressed in a write's cycle; else 0.
    _single: usize,
}

impl SystoleTop {
    pub fn new(top: &TopConfig) -> SystoleTop {
        let config = top.array;
        let (c, w) = (config.cols as usize, config.spad_width());
        let dtype = config.dtype;
        let byte_port = config.dram_port == DramPort::Byte;
        let sdram = config.dram_port == DramPort::Sdram;
        let phases = if sdram { top.sdram().phases() } else { 0 };
        let pins = || (0..phases).map(|_| Default::default()).collect::<Vec<_>>();
        let map = HostMap::new(
            &config,
            top.dram_bytes as u64,
            top.fifo_depth as u16,
            top.uart_divisor,
            top.program_checks,
            top.large_requests(),
        );
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
            sdram_ras_n: pins(),
            sdram_cas_n: pins(),
            sdram_we_n: pins(),
            sdram_ba: (0..phases).map(|_| Default::default()).collect(),
            sdram_a: (0..phases).map(|_| Default::default()).collect(),
            sdram_dq_out: (0..phases).map(|_| Default::default()).collect(),
            sdram_dq_drive: pins(),
            sdram_dqm: (0..phases).map(|_| Default::default()).collect(),
            sdram_dq_in: (0..phases).map(|_| Default::default()).collect(),
            uart_in: UartRx::new(top.uart_divisor),
            uart_out: UartTx::new(top.uart_divisor),
            spi: Default::default(),
            engine: if sdram {
                PacketEngine::new(map).with_slow_dram()
            } else {
                PacketEngine::new(map)
            },
            fifo: top.fifo(config.schedule == Schedule::Decoupled),
            head: Optional::when(top.head_register, || HeadRegister::new(false)),
            word_fault: WordFault::new(&config, false, top.program_checks),
            candidate: Default::default(),
            dispatcher: match (config.single_port_spad, sdram) {
                (true, _) => Dispatcher::single_port_spad(),
                (false, true) => Dispatcher::default().with_sdram(),
                (false, false) => Dispatcher::default(),
            },
            seq: Sequencer::new(&config),
            wl: WeightLoader::new(&config),
            unit: ArrayUnit::new(&config),
            spad_a: top.spad(),
            spad_b: Optional::when(!config.single_port_spad, || top.spad()),
            acc_x: top.acc(config.acc_depth as usize),
            acc_y: top.acc(config.acc_depth as usize),
            dram: Optional::when(!sdram, || top.dram()),
            sdram: Optional::when(sdram, || top.sdram()),
            array: Array::build(&config, top.array_parts()),
            spad_lanes: (0..w)
                .map(|e| match (byte_port, dtype) {
                    (true, Dtype::Bf16) => SpadLane::new(e, w, dtype).pairing_bytes(),
                    _ => SpadLane::new(e, w, dtype),
                })
                .collect(),
            acc_lanes: (0..c).map(|_| AccLane::new(dtype, LaneBuild::for_top(top))).collect(),
            words: (0..c).map(|j| WordLane::new(j, c)).collect(),
            byte_words: (0..if byte_port { c } else { 0 }).map(ByteWord::new).collect(),
            cast: (0..if dtype == Dtype::Bf16 { c } else { 0 })
                .map(|_| CastLane::new(config.convert_stages))
                .collect(),
            requant: (0..if dtype == Dtype::Int8 { c } else { 0 })
                .map(|_| top.requant_lane())
                .collect(),
            products: super::serial_products(&config),
            weight_stationary: Constant::new(config.dataflow == Dataflow::WeightStationary),
            checks_at_queue: Constant::new(top.checks_at_queue),
            en: Default::default(),
            host: Default::default(),
            seq_reads: Default::default(),
            _es: dtype.elem_bytes(),
            _row_port: (config.dram_port == DramPort::Row) as usize,
            _byte_port: byte_port as usize,
            _sdram: sdram as usize,
            _dram_lanes: if sdram { 0 } else { top.dram_banks() },
            _sdram_lanes: if sdram { top.row_port_bytes() } else { 0 },
            es_bytes: Optional::when(sdram, || Constant::new((dtype.elem_bytes() as u64).into())),
            _int8_bytes: (byte_port && dtype == Dtype::Int8) as usize,
            _bf16_bytes: (byte_port && dtype == Dtype::Bf16) as usize,
            _single: config.single_port_spad as usize,
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
        for _k in 0..self.spad_b.len() {
            self.spad_b.clock.next = self.clock.val();
        }
        self.acc_x.clock.next = self.clock.val();
        self.acc_y.clock.next = self.clock.val();
        for _d in 0..self.dram.len() {
            self.dram.clock.next = self.clock.val();
        }
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

        // Instructions: each word's fault code is formed as it is queued and stored with it (or
        // formed from the head); the FIFO's head (the candidate) -> decoder -> dispatcher, units.
        self.fifo.push.next = self.engine.fifo_push.val();
        self.fifo.push_word.next = self.engine.fifo_word.val();
        self.fifo.push_flag.next = self.engine.fifo_extent_over.val();
        self.word_fault.word.next = self.engine.fifo_word.val();
        self.word_fault.extent_over.next = self.engine.fifo_extent_over.val();
        self.fifo.push_fault.next = self.word_fault.fault.val();
        if !self.checks_at_queue.val() {
            self.word_fault.word.next = self.fifo.head.val();
            self.word_fault.extent_over.next = self.fifo.head_flag.val();
            self.fifo.push_fault.next = 0.into();
        }
        self.fifo.pop.next = self.dispatcher.pop.val();
        self.fifo.clear.next = self.dispatcher.fifo_clear.val();
        self.dispatcher.head_valid.next = self.fifo.valid.val();
        self.dispatcher.head_word.next = self.fifo.head.val();
        self.dispatcher.fault_in.next = self.fifo.head_fault.val();
        if !self.checks_at_queue.val() {
            self.dispatcher.fault_in.next = self.word_fault.fault.val();
        }
        // Built with a head register, the FIFO's head (and its fault code, formed there when
        // the checks are at the head) enters it, and the dispatcher decides on its word.
        for _k in 0..self.head.len() {
            self.head.clock.next = self.clock.val();
            self.head.clear.next = self.dispatcher.fifo_clear.val();
            self.head.in_valid.next = self.fifo.valid.val();
            self.head.in_word.next = self.fifo.head.val();
            self.head.in_fault.next = self.fifo.head_fault.val();
            if !self.checks_at_queue.val() {
                self.head.in_fault.next = self.word_fault.fault.val();
            }
            self.head.pop.next = self.dispatcher.pop.val();
            self.fifo.pop.next = self.head.take.val();
            self.dispatcher.head_valid.next = self.head.valid.val();
            self.dispatcher.head_word.next = self.head.head.val();
            self.dispatcher.fault_in.next = self.head.head_fault.val();
        }
        self.dispatcher.run.next = self.engine.run.val();
        // On the SDRAM a run starts once the chip is quiet, and the port may stall the machine.
        for _s in 0..self.sdram.len() {
            self.sdram.clock.next = self.clock.val();
            self.sdram.run_in.next = self.engine.run.val();
            self.dispatcher.run.next = self.sdram.run_out.val();
            self.dispatcher.stall.next = self.sdram.stall.val();
            self.sdram.running.next = self.dispatcher.running.val();
            self.sdram.counting.next = self.dispatcher.counting.val();
        }
        self.dispatcher.reset.next = self.engine.machine_reset.val() || self.reset.val();
        self.candidate.word.next = self.dispatcher.word.val();
        DecodedOut::join(&mut self.candidate.out, &mut self.dispatcher.ins);
        self.dispatcher.seq_free.next = self.seq.free.val();
        for _s in 0..self._single {
            if self.seq.spad_write.val() {
                self.dispatcher.seq_free.next = false;
            }
        }
        self.dispatcher.wl_free.next = self.wl.free.val();
        self.dispatcher.wl_finishing.next = self.wl.finishing.val();
        self.dispatcher.arr_free.next = self.unit.free.val();
        for _s in 0..self.dispatcher.arr_reading.len() {
            self.dispatcher.arr_reading.next = self.unit.reading.val();
        }
        self.en.next = self.dispatcher.enable.val();
        // The host owns the memory ports whenever no program runs.
        self.host.next = !self.dispatcher.running.val();

        self.seq.enable.next = self.en.val();
        self.seq.abort.next = self.dispatcher.abort.val();
        self.seq.start.next = self.dispatcher.start_seq.val();
        DecodedOut::join(&mut self.candidate.out, &mut self.seq.ins);
        self.wl.enable.next = self.en.val();
        self.wl.abort.next = self.dispatcher.abort.val();
        self.wl.start.next = self.dispatcher.start_wl.val();
        DecodedOut::join(&mut self.candidate.out, &mut self.wl.ins);
        self.unit.enable.next = self.en.val();
        self.unit.abort.next = self.dispatcher.abort.val();
        self.unit.start.next = self.dispatcher.start_arr.val();
        DecodedOut::join(&mut self.candidate.out, &mut self.unit.ins);

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
        // A scratchpad in SPRAM, which the bitstream cannot initialise, is cleared in reset.
        for _k in 0..self.spad_a.clear.len() {
            self.spad_a.clear.next = self.reset.val();
        }
        for _k in 0..self.spad_b.len() {
            self.spad_b.read_enable.next = self.en.val();
        }
        self.engine.spad_elem.next = 0.into();
        self.engine.acc_word.next = 0.into();
        // Port A and port X are the sequencer's while it continues or its candidate may start
        // (its reads are addressed before the program checks decide; docs in sequencer.rs).
        self.seq_reads.next = !self.seq.free.val() || self.dispatcher.seq_may_start.val();
        self.spad_a.read_address.next = self.unit.spad_read_a.val();
        // On a single-port scratchpad the weight loader reads through port A while it continues
        // a load, or when the array's reads are over and the candidate is a `LoadWeights` (each
        // unit addresses its next read a cycle ahead, a candidate's first before it dispatches).
        for _s in 0..self._single {
            if !self.wl.free.val()
                || (!self.unit.reading.val() && self.candidate.out.load_weights.val())
            {
                self.spad_a.read_address.next = self.wl.spad_read.val();
            }
        }
        if self.seq_reads.val() {
            self.spad_a.read_address.next = self.seq.spad_read.val();
        }
        for _k in 0..self.spad_b.len() {
            self.spad_b.read_address.next = self.unit.spad_read_b.val();
            if self.weight_stationary.val() {
                self.spad_b.read_address.next = self.wl.spad_read.val();
            }
        }
        self.spad_a.write_address.next = self.seq.spad_write_row.val();
        for _k in 0..self.spad_b.len() {
            self.spad_b.write_address.next = self.seq.spad_write_row.val();
        }
        if self.host.val() {
            self.spad_a.read_address.next = self.engine.host_row.val();
            self.spad_a.write_address.next = self.engine.host_row.val();
            for _k in 0..self.spad_b.len() {
                self.spad_b.write_address.next = self.engine.host_row.val();
            }
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
            for _k in 0..self.spad_b.len() {
                self.spad_b.write_data[e].next = self.spad_lanes[e].data.val();
            }
            self.spad_a.write_lane[e].next = self.spad_lanes[e].host_writes.val()
                || (self.en.val() && self.seq.spad_write.val() && !self.host.val());
            for _k in 0..self.spad_b.len() {
                self.spad_b.write_lane[e].next = self.spad_lanes[e].host_writes.val()
                    || (self.en.val() && self.seq.spad_write.val() && !self.host.val());
            }
            if self.engine.host_lane.val() == e.to_bits() {
                self.engine.spad_elem.next = self.spad_a.read_data[e].val();
            }
        }
        // A one-iteration loop binds the element's bytes for the index arithmetic.
        for _r in 0..self._row_port {
            for es in self._es..(self._es + 1) {
                for e in 0..self.spad_lanes.len() {
                    self.spad_lanes[e].lo.next = self.dram.read_data[e * es].val();
                    self.spad_lanes[e].hi.next = self.dram.read_data[e * es + es - 1].val();
                    self.spad_lanes[e].lo0.next = self.dram.read_data[0].val();
                    self.spad_lanes[e].hi0.next = self.dram.read_data[es - 1].val();
                }
            }
        }
        for _s in 0..self._sdram {
            for es in self._es..(self._es + 1) {
                for e in 0..self.spad_lanes.len() {
                    self.spad_lanes[e].lo.next = self.sdram.row_data[e * es].val();
                    self.spad_lanes[e].hi.next = self.sdram.row_data[e * es + es - 1].val();
                    self.spad_lanes[e].lo0.next = self.sdram.row_data[0].val();
                    self.spad_lanes[e].hi0.next = self.sdram.row_data[es - 1].val();
                }
            }
        }
        // On the byte port every `Load` of more than one byte gathers, a byte a cycle.
        for _b in 0..self._byte_port {
            for e in 0..self.spad_lanes.len() {
                self.spad_lanes[e].lo.next = self.dram.read_data[0].val();
                self.spad_lanes[e].hi.next = self.dram.read_data[0].val();
                self.spad_lanes[e].lo0.next = self.dram.read_data[0].val();
                self.spad_lanes[e].hi0.next = self.dram.read_data[0].val();
            }
        }
        // A BF16 row's `length` counts its bytes there, two an element.
        for _p in 0..self._bf16_bytes {
            for e in 0..self.spad_lanes.len() {
                self.spad_lanes[e].length.next = self.seq.length.val() >> 1;
            }
        }
        for j in 0..self.cast.len() {
            self.cast[j].clock.next = self.clock.val();
            self.cast[j].enable.next = self.en.val();
            self.cast[j].x.next = self.acc_x.read_data[j].val();
            self.spad_lanes[j].cast.next = self.cast[j].y.val();
        }
        for j in 0..self.requant.len() {
            self.requant[j].clock.next = self.clock.val();
            self.requant[j].enable.next = self.en.val();
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
        // Built with `requant_cycles = 4`: the products, one a cycle of the row's four.
        for j in 0..self.products.len() {
            self.products[j].clock.next = self.clock.val();
            self.products[j].phase.next = self.seq.element.val().get_bits::<2>(0);
            self.products[j].a.next = self.acc_x.read_data[j].val();
            self.products[j].b.next = self.seq.requant_multiplier.val();
            self.requant[j].ll.next = self.products[j].ll.val();
            self.requant[j].lh.next = self.products[j].lh.val();
            self.requant[j].hl.next = self.products[j].hl.val();
            self.requant[j].hh.next = self.products[j].hh.val();
        }

        // Accumulators: port X (the destination word, Store, casts, accumulate, host reads),
        // port Y (a vector op's source), one write port (array rows, vector ops, LoadAcc, host).
        self.acc_x.read_enable.next = self.en.val();
        self.acc_y.read_enable.next = self.en.val();
        // On the byte port a `LoadAcc` row is gathered a byte a cycle, and the sequencer's
        // `length` counts its bytes.
        for j in 0..self.byte_words.len() {
            self.byte_words[j].clock.next = self.clock.val();
            self.byte_words[j].enable.next = self.en.val();
            self.byte_words[j].dram_byte.next = self.dram.read_data[0].val();
            self.byte_words[j].element.next = self.seq.element.val();
            self.words[j].b0.next = self.byte_words[j].b0.val();
            self.words[j].b1.next = self.byte_words[j].b1.val();
            self.words[j].b2.next = self.byte_words[j].b2.val();
            self.words[j].b3.next = self.byte_words[j].b3.val();
            self.words[j].length.next = self.seq.length.val() >> 2;
        }
        self.acc_x.read_address.next = self.unit.acc_read.val();
        if self.seq_reads.val() {
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
            self.acc_lanes[j].multiplier.next = self.seq.requant_multiplier.val();
            self.acc_lanes[j].clock.next = self.clock.val();
            self.acc_lanes[j].enable.next = self.en.val();
            self.acc_lanes[j].op.next = self.unit.acc_op.val();
            if self.seq.lanes_busy.val() {
                self.acc_lanes[j].op.next = self.seq.acc_op.val();
            }
            // LoadAcc: word j of the DRAM row, zero at and past `len`; or the host's word.
            for _r in 0..self._row_port {
                self.words[j].b0.next = self.dram.read_data[j * 4].val();
                self.words[j].b1.next = self.dram.read_data[j * 4 + 1].val();
                self.words[j].b2.next = self.dram.read_data[j * 4 + 2].val();
                self.words[j].b3.next = self.dram.read_data[j * 4 + 3].val();
                self.words[j].length.next = self.seq.length.val();
            }
            for _s in 0..self._sdram {
                self.words[j].b0.next = self.sdram.row_data[j * 4].val();
                self.words[j].b1.next = self.sdram.row_data[j * 4 + 1].val();
                self.words[j].b2.next = self.sdram.row_data[j * 4 + 2].val();
                self.words[j].b3.next = self.sdram.row_data[j * 4 + 3].val();
                self.words[j].length.next = self.seq.length.val();
            }
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

        // DRAM: reads for Load and LoadAcc, writes for Store, StoreSpad and StoreBf16, host
        // bytes.
        for _d in 0..self.dram.len() {
            self.dram.read_enable.next = self.en.val();
            self.dram.read_address.next = self.seq.dram_read_address.val();
            self.dram.write_address.next = self.seq.dram_write_address.val();
            self.dram.write_count.next = 0.into();
            if self.en.val() {
                self.dram.write_count.next = self.seq.dram_write_count.val();
            }
            for k in 0..self._dram_lanes {
                self.dram.write_data[k].next = 0.into();
            }
        }
        for _r in 0..self._row_port {
            for es in self._es..(self._es + 1) {
                for e in 0..self.spad_lanes.len() {
                    self.dram.write_data[e * es].next =
                        self.spad_a.read_data[e].val().get_bits::<8>(0);
                    self.dram.write_data[e * es + es - 1].next =
                        self.spad_a.read_data[e].val().get_bits::<8>(es * 8 - 8);
                }
            }
            if self.seq.is_store.val() {
                for j in 0..self.acc_lanes.len() {
                    self.dram.write_data[j * 4].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(0);
                    self.dram.write_data[j * 4 + 1].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(8);
                    self.dram.write_data[j * 4 + 2].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(16);
                    self.dram.write_data[j * 4 + 3].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(24);
                }
            }
            // StoreBf16: each lane's word cast to bf16 (the casts read what `Store` reads).
            if self.seq.is_store_bf16.val() {
                for j in 0..self.cast.len() {
                    self.dram.write_data[j * 2].next = self.cast[j].y.val().get_bits::<8>(0);
                    self.dram.write_data[j * 2 + 1].next = self.cast[j].y.val().get_bits::<8>(8);
                }
            }
        }
        // On the byte port an INT8 `StoreSpad` writes element `element` of its row, a `Store`
        // byte `element mod 4` of word `element / 4`.
        for _b in 0..self._byte_port {
            for _i in 0..self._int8_bytes {
                for e in 0..self.spad_lanes.len() {
                    if self.seq.element.val() == e.to_bits() {
                        self.dram.write_data[0].next =
                            self.spad_a.read_data[e].val().get_bits::<8>(0);
                    }
                }
            }
            // BF16: byte `element mod 2` of element `element / 2`, of the scratchpad row or
            // (`StoreBf16`) of the cast lanes' words.
            for _p in 0..self._bf16_bytes {
                for e in 0..self.spad_lanes.len() {
                    if (self.seq.element.val() >> 1) == e.to_bits() {
                        self.dram.write_data[0].next =
                            self.spad_a.read_data[e].val().get_bits::<8>(0);
                        if self.seq.element.val().get_bit(0) {
                            self.dram.write_data[0].next =
                                self.spad_a.read_data[e].val().get_bits::<8>(8);
                        }
                    }
                }
                for j in 0..self.cast.len() {
                    if self.seq.is_store_bf16.val()
                        && ((self.seq.element.val() >> 1) == j.to_bits())
                    {
                        self.dram.write_data[0].next = self.cast[j].y.val().get_bits::<8>(0);
                        if self.seq.element.val().get_bit(0) {
                            self.dram.write_data[0].next = self.cast[j].y.val().get_bits::<8>(8);
                        }
                    }
                }
            }
            if self.seq.is_store.val() {
                for j in 0..self.acc_lanes.len() {
                    for k in 0..4 {
                        if ((self.seq.element.val() >> 2) == j.to_bits())
                            && (self.seq.element.val().get_bits::<2>(0) == k.to_bits())
                        {
                            self.dram.write_data[0].next =
                                self.acc_x.read_data[j].val().get_bits::<8>(k * 8);
                        }
                    }
                }
            }
        }
        for _d in 0..self.dram.len() {
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
        }
        // On the SDRAM: a transfer starts with its sequencer's DRAM instruction, its rows
        // pace the sequencer, and a store row goes in as the row port's DRAM would take it.
        for _s in 0..self.sdram.len() {
            self.sdram.enable.next = self.en.val();
            self.sdram.start.next = self.dispatcher.start_seq.val()
                && (self.seq.ins.load.val()
                    || self.seq.ins.load_acc.val()
                    || self.seq.ins.store.val()
                    || self.seq.ins.store_spad.val()
                    || self.seq.ins.store_bf16.val());
            self.sdram.write.next = self.seq.ins.store.val()
                || self.seq.ins.store_spad.val()
                || self.seq.ins.store_bf16.val();
            self.sdram.addr.next = self.seq.ins.dram_addr.val();
            self.sdram.rows.next = self.seq.ins.rows.val();
            self.sdram.len.next = self.seq.ins.len.val();
            self.sdram.row_stride.next = self.seq.ins.row_stride.val();
            self.sdram.elem_stride.next = 1.into();
            if self.seq.ins.load.val() {
                self.sdram.elem_stride.next = self.seq.ins.elem_stride.val();
            }
            self.sdram.es.next = self.es_bytes.val();
            if self.seq.ins.load_acc.val() || self.seq.ins.store.val() {
                self.sdram.es.next = 4.into();
            }
            if self.seq.ins.store_bf16.val() {
                self.sdram.es.next = 2.into();
            }
            self.seq.sdram_row.next = self.sdram.row_valid.val();
            self.seq.sdram_last.next = self.sdram.last_row.val();
            self.seq.sdram_room.next = self.sdram.room.val();
            self.sdram.issue.next = self.seq.sdram_issue.val();
            self.sdram.push.next = self.en.val() && self.seq.dram_write_count.val().any();
            for k in 0..self._sdram_lanes {
                self.sdram.push_data[k].next = 0.into();
            }
            self.sdram.host_addr.next = self.engine.host_addr.val();
            self.sdram.host_byte.next = self.engine.host_byte.val();
            self.sdram.host_write.next =
                self.engine.host_write.val() && (self.engine.host_region.val() == 0);
            self.sdram.host_read.next = self.engine.host_read.val();
            self.engine.mem_ready.next = self.sdram.mem_ready.val();
            self.engine.dram_byte.next = self.sdram.dram_byte.val();
            for p in 0..self.sdram_ras_n.len() {
                self.sdram_ras_n[p].next = self.sdram.ras_n[p].val();
                self.sdram_cas_n[p].next = self.sdram.cas_n[p].val();
                self.sdram_we_n[p].next = self.sdram.we_n[p].val();
                self.sdram_ba[p].next = self.sdram.ba[p].val();
                self.sdram_a[p].next = self.sdram.a[p].val();
                self.sdram_dq_out[p].next = self.sdram.dq_out[p].val();
                self.sdram_dq_drive[p].next = self.sdram.dq_drive[p].val();
                self.sdram_dqm[p].next = self.sdram.dqm[p].val();
                self.sdram.dq_in[p].next = self.sdram_dq_in[p].val();
            }
        }
        for _s in 0..self._sdram {
            for es in self._es..(self._es + 1) {
                for e in 0..self.spad_lanes.len() {
                    self.sdram.push_data[e * es].next =
                        self.spad_a.read_data[e].val().get_bits::<8>(0);
                    self.sdram.push_data[e * es + es - 1].next =
                        self.spad_a.read_data[e].val().get_bits::<8>(es * 8 - 8);
                }
            }
            if self.seq.is_store.val() {
                for j in 0..self.acc_lanes.len() {
                    self.sdram.push_data[j * 4].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(0);
                    self.sdram.push_data[j * 4 + 1].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(8);
                    self.sdram.push_data[j * 4 + 2].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(16);
                    self.sdram.push_data[j * 4 + 3].next =
                        self.acc_x.read_data[j].val().get_bits::<8>(24);
                }
            }
            if self.seq.is_store_bf16.val() {
                for j in 0..self.cast.len() {
                    self.sdram.push_data[j * 2].next = self.cast[j].y.val().get_bits::<8>(0);
                    self.sdram.push_data[j * 2 + 1].next = self.cast[j].y.val().get_bits::<8>(8);
                }
            }
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
                    for _k in 0..self.spad_b.len() {
                        self.array.top[j].next = self.spad_b.read_data[j].val();
                    }
                    for _s in 0..self._single {
                        self.array.top[j].next = self.spad_a.read_data[j].val();
                    }
                }
            } else if self.unit.feed.val() {
                for _k in 0..self.spad_b.len() {
                    self.array.top[j].next = self.spad_b.read_data[j].val();
                }
            }
        }
    }
}
