//! `systole_top` of the decoupled schedule (core/src/timing/decoupled.rs): the same pins, link,
//! FIFO, fault codes and decoder as the blocking machine ([`super::SystoleTop`]), but four units
//! that overlap under core's scoreboard ([`DecoupledDispatcher`]): a load unit (`Load`,
//! `LoadAcc`) and a vector unit (vector ops, casts, `Store`, `StoreSpad`), two instances of the
//! [`Sequencer`], the weight loader, and the array (weight-stationary matmuls streamed through
//! [`StreamUnit`], output-stationary ones through [`ArrayUnit`]).
//!
//! Memory ports follow the scoreboard's port rules, so no two units ever drive one port:
//!
//! * DRAM: the load unit reads, the vector unit writes (the host while no program runs).
//! * Scratchpad: one write port (`Load`, through the load unit's transpose buffer
//!   [`Transposer`], or the vector unit's casts); port A feeds the array
//!   (and the host); port B serves the weight loader or an output-stationary matmul's `B` rows
//!   while they read, else the vector unit's `StoreSpad`.
//! * Accumulators: two banks ([`AccBanks`]), each touched by one unit at a time. The array has
//!   its own accumulate lanes, so it adds into one bank while the vector unit's lanes work in
//!   the other.

use rust_hdl::prelude::*;
use systole_core::{ArrayConfig, Dataflow, Dtype};

use super::{SpadLane, TopConfig, WordLane};
use crate::acc_banks::AccBanks;
use crate::array::{Array, ArrayParts};
use crate::controller::{
    ArrayUnit, DecoupledDispatcher, HeadRegister, InstrFifo, Sequencer, StreamUnit, WeightLoader,
};
use crate::convert::{CastLane, RequantLane, SerialProducts};
use crate::decode::{Decoder, WordFault};
use crate::decoded::{DecodedOut, DecodedRegister};
use crate::delay::Delay;
use crate::link::{HostMap, PacketEngine, SpiSlave, UartRx, UartTx};
use crate::mem::{Dram, RowRam};
use crate::optional::Optional;
use crate::transpose::Transposer;
use crate::vector::{AccLane, AccOp, LaneBuild};

/// The whole machine under the decoupled schedule.
#[derive(LogicBlock)]
pub struct SystoleTopDecoupled {
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
    /// The dispatcher's candidate word, registered after the FIFO.
    head: HeadRegister,
    /// The FIFO's head word decoded, and the candidate's decoded fields, registered beside the
    /// head register's word.
    next_decoder: Decoder,
    candidate: DecodedRegister,
    /// The fault code and footprint of the word the host link queues, stored with it.
    queued: WordFault,
    dispatcher: DecoupledDispatcher,
    /// The load unit and the vector unit.
    ld: Sequencer,
    vu: Sequencer,
    wl: WeightLoader,
    /// Weight-stationary: the stream unit; output-stationary: the array unit.
    stream: Vec<StreamUnit>,
    os_unit: Vec<ArrayUnit>,
    spad_a: RowRam<16>,
    spad_b: RowRam<16>,
    acc: AccBanks,
    dram: Dram,
    array: Array,
    /// The load unit's transpose buffer, between the DRAM rows and the scratchpad lanes.
    transposer: Transposer,
    /// Built with read stages: the load unit's transpose controls on their way to meet the
    /// DRAM rows they name (its other controls are delayed inside it).
    late_write: Optional<Delay<Bit>>,
    late_read: Optional<Delay<Bit>>,
    late_half: Optional<Delay<Bit>>,
    late_next_row: Optional<Delay<Bits<16>>>,
    late_next_half: Optional<Delay<Bit>>,
    spad_lanes: Vec<SpadLane>,
    /// The vector unit's accumulator lanes, and the array's.
    acc_lanes: Vec<AccLane>,
    array_lanes: Vec<AccLane>,
    words: Vec<WordLane>,
    cast: Vec<CastLane>,
    requant: Vec<RequantLane>,
    products: Vec<SerialProducts>,
    en: Signal<Local, Bit>,
    host: Signal<Local, Bit>,
    /// The weight loader (or an output-stationary matmul) reads scratchpad port B next.
    port_b_array: Signal<Local, Bit>,
    /// The vector unit's instruction is a `StoreSpad` (it reads no accumulator).
    vu_store_spad: DFF<Bit>,
    vu_reads_acc: Signal<Local, Bit>,
    /// Bytes per scratchpad element, for the byte wiring of the DRAM rows.
    _es: usize,
}

impl SystoleTopDecoupled {
    pub fn new(top: &TopConfig) -> SystoleTopDecoupled {
        let config = top.array;
        fn late<T: Synth>(config: &ArrayConfig) -> Optional<Delay<T>> {
            Optional::when(config.read_stages > 0, || Delay::new(config.read_stages as usize))
        }
        let (c, w) = (config.cols as usize, config.spad_width());
        let dtype = config.dtype;
        let ws = config.dataflow == Dataflow::WeightStationary;
        let map = HostMap::new(
            &config,
            top.dram_bytes as u64,
            top.fifo_depth as u16,
            top.uart_divisor,
            true,
            top.large_requests(),
        );
        SystoleTopDecoupled {
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
            fifo: top.fifo(true),
            head: HeadRegister::new(true),
            queued: WordFault::new(&config, true, true),
            next_decoder: Default::default(),
            candidate: Default::default(),
            dispatcher: DecoupledDispatcher::new(&config),
            ld: Sequencer::new(&config),
            vu: Sequencer::new(&config),
            wl: WeightLoader::new(&config),
            stream: (0..ws as usize).map(|_| StreamUnit::new(&config)).collect(),
            os_unit: (0..!ws as usize).map(|_| ArrayUnit::new(&config)).collect(),
            spad_a: top.spad(),
            spad_b: top.spad(),
            acc: AccBanks::new(top),
            dram: top.dram(),
            array: Array::build(&config, ArrayParts { tree: false, ..top.array_parts() }),
            transposer: Transposer::new(&config),
            late_write: late(&config),
            late_read: late(&config),
            late_half: late(&config),
            late_next_row: late(&config),
            late_next_half: late(&config),
            spad_lanes: (0..w).map(|e| SpadLane::new(e, w, dtype)).collect(),
            acc_lanes: (0..c).map(|_| AccLane::new(dtype, LaneBuild::for_top(top))).collect(),
            // The array's lanes write its output rows and run no vector op.
            array_lanes: (0..c).map(|_| AccLane::new(dtype, LaneBuild::default())).collect(),
            words: (0..c).map(|j| WordLane::new(j, c)).collect(),
            cast: (0..if dtype == Dtype::Bf16 { c } else { 0 })
                .map(|_| CastLane::new(config.convert_stages))
                .collect(),
            requant: (0..if dtype == Dtype::Int8 { c } else { 0 })
                .map(|_| top.requant_lane())
                .collect(),
            products: super::serial_products(&config),
            en: Default::default(),
            host: Default::default(),
            port_b_array: Default::default(),
            vu_store_spad: Default::default(),
            vu_reads_acc: Default::default(),
            _es: dtype.elem_bytes(),
        }
    }
}

impl Logic for SystoleTopDecoupled {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, vu_store_spad);
        // Clocks.
        self.uart_in.clock.next = self.clock.val();
        self.uart_out.clock.next = self.clock.val();
        self.spi.clock.next = self.clock.val();
        self.engine.clock.next = self.clock.val();
        self.fifo.clock.next = self.clock.val();
        self.dispatcher.clock.next = self.clock.val();
        self.wl.clock.next = self.clock.val();
        self.spad_a.clock.next = self.clock.val();
        self.spad_b.clock.next = self.clock.val();
        self.acc.clock.next = self.clock.val();
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

        // Instructions: each word's fault code and footprint are formed as it is queued and
        // stored with it; the FIFO's head -> decoder -> the head register and the candidate's
        // decoded fields (registered together) -> dispatcher, units.
        self.fifo.push.next = self.engine.fifo_push.val();
        self.fifo.push_word.next = self.engine.fifo_word.val();
        self.fifo.push_flag.next = self.engine.fifo_extent_over.val();
        self.queued.word.next = self.engine.fifo_word.val();
        self.queued.extent_over.next = self.engine.fifo_extent_over.val();
        self.fifo.push_fault.next = self.queued.fault.val();
        self.queued.dram_end.next = self.engine.fifo_end.val();
        self.fifo.push_fp.next = self.queued.fp.val();
        self.fifo.pop.next = self.head.take.val();
        self.fifo.clear.next = self.dispatcher.fifo_clear.val();
        self.head.clock.next = self.clock.val();
        self.head.clear.next = self.dispatcher.fifo_clear.val();
        self.head.in_valid.next = self.fifo.valid.val();
        self.head.in_word.next = self.fifo.head.val();
        self.head.in_fault.next = self.fifo.head_fault.val();
        self.head.in_fp.next = self.fifo.head_fp.val();
        self.head.pop.next = self.dispatcher.pop.val();
        self.dispatcher.head_valid.next = self.head.valid.val();
        self.dispatcher.head_word.next = self.head.head.val();
        self.dispatcher.fault_in.next = self.head.head_fault.val();
        self.dispatcher.run.next = self.engine.run.val();
        self.dispatcher.reset.next = self.engine.machine_reset.val() || self.reset.val();
        self.next_decoder.word.next = self.fifo.head.val();
        DecodedOut::join(&mut self.next_decoder.out, &mut self.candidate.fields);
        self.candidate.clock.next = self.clock.val();
        self.candidate.take.next = self.head.take.val();
        DecodedOut::join(&mut self.candidate.out, &mut self.dispatcher.ins);
        self.dispatcher.fp.next = self.head.head_fp.val();
        self.dispatcher.next_fp.next = self.fifo.head_fp.val();
        self.dispatcher.take.next = self.head.take.val();
        self.dispatcher.load_free.next = self.ld.free.val();
        self.dispatcher.vector_free.next = self.vu.free.val();
        self.dispatcher.wl_free.next = self.wl.free.val();
        self.dispatcher.active.next = 0.into();
        self.en.next = self.dispatcher.enable.val();
        // The host owns the memory ports whenever no program runs.
        self.host.next = !self.dispatcher.running.val();

        DecodedOut::join(&mut self.candidate.out, &mut self.ld.ins);
        DecodedOut::join(&mut self.candidate.out, &mut self.vu.ins);
        self.ld.clock.next = self.clock.val();
        self.ld.enable.next = self.en.val();
        self.ld.abort.next = self.dispatcher.abort.val();
        self.vu.clock.next = self.clock.val();
        self.vu.enable.next = self.en.val();
        self.vu.abort.next = self.dispatcher.abort.val();
        self.ld.start.next = self.dispatcher.start_load.val();
        self.vu.start.next = self.dispatcher.start_vector.val();
        self.wl.enable.next = self.en.val();
        self.wl.abort.next = self.dispatcher.abort.val();
        self.wl.start.next = self.dispatcher.start_wl.val();
        DecodedOut::join(&mut self.candidate.out, &mut self.wl.ins);
        self.array.enable.next = self.en.val();
        self.array.shift.next = self.wl.shift.val();
        self.array.first.next = false;
        self.array.drain.next = false;
        // An output-stationary array keeps the blocking one's (unused) swap.
        for _k in 0..self.array.swap.len() {
            self.array.swap.next = false;
        }
        self.spad_a.read_address.next = 0.into();
        self.spad_b.read_address.next = self.wl.spad_read.val();
        self.port_b_array.next = self.dispatcher.start_wl.val() || !self.wl.free.val();
        self.acc.array_x.next = 0.into();
        self.acc.array_write.next = false;
        self.acc.array_row.next = 0.into();
        for j in 0..self.array_lanes.len() {
            self.array_lanes[j].op.next = AccOp::Overwrite;
        }
        // Weight-stationary: matmuls stream; the rows carry their weight bank.
        for k in 0..self.stream.len() {
            self.stream[k].clock.next = self.clock.val();
            self.stream[k].enable.next = self.en.val();
            self.stream[k].abort.next = self.dispatcher.abort.val();
            self.stream[k].start.next = self.dispatcher.start_arr.val();
            DecodedOut::join(&mut self.candidate.out, &mut self.stream[k].ins);
            self.dispatcher.active.next = self.stream[k].active.val();
            self.array.tag.next = self.stream[k].tag.val();
            self.array.load_bank.next = self.stream[k].load_bank.val();
            self.spad_a.read_address.next = self.stream[k].spad_read_a.val();
            self.acc.array_x.next = self.stream[k].acc_read.val();
            self.acc.array_write.next = self.stream[k].acc_write.val();
            self.acc.array_row.next = self.stream[k].acc_write_row.val();
            for j in 0..self.array_lanes.len() {
                self.array_lanes[j].op.next = self.stream[k].acc_op.val();
            }
            for i in 0..self.array.left.len() {
                self.array.left[i].next = 0.into();
                if self.stream[k].feed.val() {
                    self.array.left[i].next = self.spad_a.read_data[i].val();
                }
            }
            for j in 0..self.array.top.len() {
                self.array.top[j].next = 0.into();
                if self.wl.row_valid.val() && (self.wl.columns.val() > j.to_bits()) {
                    self.array.top[j].next = self.spad_b.read_data[j].val();
                }
            }
        }
        // Output-stationary: one matmul at a time, `A^T` rows on port A, `B` rows on port B.
        for k in 0..self.os_unit.len() {
            self.os_unit[k].clock.next = self.clock.val();
            self.os_unit[k].enable.next = self.en.val();
            self.os_unit[k].abort.next = self.dispatcher.abort.val();
            self.os_unit[k].start.next = self.dispatcher.start_arr.val();
            DecodedOut::join(&mut self.candidate.out, &mut self.os_unit[k].ins);
            self.array.first.next = self.os_unit[k].first.val();
            self.array.drain.next = self.os_unit[k].drain.val();
            self.spad_a.read_address.next = self.os_unit[k].spad_read_a.val();
            self.spad_b.read_address.next = self.os_unit[k].spad_read_b.val();
            self.port_b_array.next = self.dispatcher.start_arr.val() || !self.os_unit[k].free.val();
            self.acc.array_x.next = self.os_unit[k].acc_read.val();
            self.acc.array_write.next = self.os_unit[k].acc_write.val();
            self.acc.array_row.next = self.os_unit[k].acc_write_row.val();
            for j in 0..self.array_lanes.len() {
                self.array_lanes[j].op.next = self.os_unit[k].acc_op.val();
            }
            for i in 0..self.array.left.len() {
                self.array.left[i].next = 0.into();
                if self.os_unit[k].feed.val() {
                    self.array.left[i].next = self.spad_a.read_data[i].val();
                }
            }
            for j in 0..self.array.top.len() {
                self.array.top[j].next = 0.into();
                if self.os_unit[k].feed.val() {
                    self.array.top[j].next = self.spad_b.read_data[j].val();
                }
            }
        }
        // Port B: the vector unit's `StoreSpad` when the array side does not read it.
        if !self.port_b_array.val() {
            self.spad_b.read_address.next = self.vu.spad_read.val();
        }

        // Status.
        self.engine.running.next = self.dispatcher.running.val();
        self.engine.done.next = self.dispatcher.done.val();
        self.engine.fault.next = self.dispatcher.fault.val();
        self.engine.fifo_free.next = self.fifo.free.val();
        self.engine.cycles.next = self.dispatcher.cycles.val();
        self.busy.next = self.dispatcher.running.val();
        self.done.next = self.dispatcher.done.val();
        self.error.next = self.dispatcher.fault.val().any();

        // Scratchpad: one write port (the load unit's `Load`, the vector unit's casts, the host).
        self.spad_a.read_enable.next = self.en.val();
        self.spad_b.read_enable.next = self.en.val();
        self.engine.spad_elem.next = 0.into();
        self.spad_a.write_address.next = self.vu.spad_write_row.val();
        if self.ld.spad_write.val() {
            self.spad_a.write_address.next = self.ld.spad_write_row.val();
        }
        if self.host.val() {
            self.spad_a.read_address.next = self.engine.host_row.val();
            self.spad_a.write_address.next = self.engine.host_row.val();
        }
        self.spad_b.write_address.next = self.spad_a.write_address.val();
        for e in 0..self.spad_lanes.len() {
            self.spad_lanes[e].clock.next = self.clock.val();
            self.spad_lanes[e].enable.next = self.en.val();
            self.spad_lanes[e].is_load.next = self.ld.is_load.val();
            self.spad_lanes[e].gather.next = self.ld.gather.val();
            self.spad_lanes[e].broadcast.next = self.ld.broadcast.val();
            self.spad_lanes[e].element.next = self.ld.element.val();
            self.spad_lanes[e].length.next = self.ld.length.val();
            self.spad_lanes[e].cast.next = 0.into();
            self.spad_lanes[e].host.next = self.host.val();
            self.spad_lanes[e].host_lane.next = self.engine.host_lane.val();
            self.spad_lanes[e].host_elem.next = self.engine.host_elem.val();
            self.spad_lanes[e].host_write.next =
                self.engine.host_write.val() && (self.engine.host_region.val() == 1);
            self.spad_a.write_data[e].next = self.spad_lanes[e].data.val();
            self.spad_b.write_data[e].next = self.spad_lanes[e].data.val();
            self.spad_a.write_lane[e].next = self.spad_lanes[e].host_writes.val()
                || (self.en.val()
                    && (self.ld.spad_write.val() || self.vu.spad_write.val())
                    && !self.host.val());
            self.spad_b.write_lane[e].next = self.spad_a.write_lane[e].val();
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
            // A transposing `Load`'s rows come out of the buffer (else it passes the DRAM row).
            for e in 0..self.transposer.width() {
                self.spad_lanes[e].lo.next = self.transposer.out[e * es].val();
                self.spad_lanes[e].hi.next = self.transposer.out[e * es + es - 1].val();
            }
        }
        self.transposer.clock.next = self.clock.val();
        self.transposer.enable.next = self.en.val();
        for k in 0..self.transposer.dram.len() {
            self.transposer.dram[k].next = self.dram.read_data[k].val();
        }
        for _k in 0..self.ld.transpose_write.len() {
            self.transposer.write.next = self.ld.transpose_write.val();
            self.transposer.read.next = self.ld.transpose_read.val();
            self.transposer.half.next = self.ld.transpose_half.val();
            self.transposer.column.next = self.ld.element.val();
            self.transposer.next_row.next = self.ld.transpose_next_row.val();
            self.transposer.next_half.next = self.ld.transpose_next_half.val();
        }
        for _k in 0..self.late_write.len() {
            self.late_write.clock.next = self.clock.val();
            self.late_read.clock.next = self.clock.val();
            self.late_half.clock.next = self.clock.val();
            self.late_next_row.clock.next = self.clock.val();
            self.late_next_half.clock.next = self.clock.val();
            self.late_write.enable.next = self.en.val();
            self.late_read.enable.next = self.en.val();
            self.late_half.enable.next = self.en.val();
            self.late_next_row.enable.next = self.en.val();
            self.late_next_half.enable.next = self.en.val();
            self.late_write.d_in.next = self.ld.transpose_write.val();
            self.late_read.d_in.next = self.ld.transpose_read.val();
            self.late_half.d_in.next = self.ld.transpose_half.val();
            self.late_next_row.d_in.next = self.ld.transpose_next_row.val();
            self.late_next_half.d_in.next = self.ld.transpose_next_half.val();
            // The buffer has no enable of its own: a frozen cycle writes nothing.
            self.transposer.write.next = self.late_write.d_out.val() && self.en.val();
            self.transposer.read.next = self.late_read.d_out.val();
            self.transposer.half.next = self.late_half.d_out.val();
            self.transposer.next_row.next = self.late_next_row.d_out.val();
            self.transposer.next_half.next = self.late_next_half.d_out.val();
        }
        for j in 0..self.cast.len() {
            self.cast[j].clock.next = self.clock.val();
            self.cast[j].enable.next = self.en.val();
            self.cast[j].x.next = self.acc.vector_x_data[j].val();
            self.spad_lanes[j].cast.next = self.cast[j].y.val();
        }
        for j in 0..self.requant.len() {
            self.requant[j].clock.next = self.clock.val();
            self.requant[j].enable.next = self.en.val();
            self.requant[j].x.next = self.acc.vector_x_data[j].val();
            self.requant[j].multiplier.next = self.vu.requant_multiplier.val();
            self.requant[j].shift.next = self.vu.requant_shift.val();
            self.requant[j].zero_point.next = self.vu.requant_zero_point.val();
            self.requant[j].ll.next = self.acc_lanes[j].ll.val();
            self.requant[j].lh.next = self.acc_lanes[j].lh.val();
            self.requant[j].hl.next = self.acc_lanes[j].hl.val();
            self.requant[j].hh.next = self.acc_lanes[j].hh.val();
            self.spad_lanes[j].cast.next = self.requant[j].y.val();
        }
        // Built with `requant_cycles = 4`: the products, one a cycle of the row's four.
        for j in 0..self.products.len() {
            self.products[j].clock.next = self.clock.val();
            self.products[j].phase.next = self.vu.element.val().get_bits::<2>(0);
            self.products[j].a.next = self.acc.vector_x_data[j].val();
            self.products[j].b.next = self.vu.requant_multiplier.val();
            self.requant[j].ll.next = self.products[j].ll.val();
            self.requant[j].lh.next = self.products[j].lh.val();
            self.requant[j].hl.next = self.products[j].hl.val();
            self.requant[j].hh.next = self.products[j].hh.val();
        }

        // Accumulators: the vector unit's reads and writes, the load unit's `LoadAcc` words, the
        // array's rows, the host's words.
        self.acc.enable.next = self.en.val();
        self.acc.host.next = self.host.val();
        self.acc.host_row.next = self.engine.host_row.val();
        self.acc.host_lane.next = self.engine.host_lane.val();
        self.acc.host_word.next = self.engine.host_word.val();
        self.acc.host_write.next =
            self.engine.host_write.val() && (self.engine.host_region.val() == 2);
        self.engine.acc_word.next = self.acc.host_data.val();
        // The vector unit reads the accumulators next unless it runs a `StoreSpad` then.
        if self.en.val() && self.dispatcher.start_vector.val() {
            self.vu_store_spad.d.next = self.candidate.out.store_spad.val();
        }
        self.vu_reads_acc.next = self.vu.busy_next.val() && !self.vu_store_spad.q.val();
        if self.dispatcher.start_vector.val() {
            self.vu_reads_acc.next = !self.candidate.out.store_spad.val();
        }
        self.acc.vector_reads.next = self.vu_reads_acc.val();
        self.acc.vector_x.next = self.vu.acc_read_x.val();
        self.acc.vector_y.next = self.vu.acc_read_y.val();
        self.acc.vector_write.next = self.vu.acc_write.val();
        self.acc.vector_row.next = self.vu.acc_write_row.val();
        self.acc.load_write.next = self.ld.acc_write.val();
        self.acc.load_row.next = self.ld.acc_write_row.val();
        for j in 0..self.acc_lanes.len() {
            self.acc_lanes[j].x.next = self.acc.vector_x_data[j].val();
            self.acc_lanes[j].y.next = self.acc.vector_y_data[j].val();
            self.acc_lanes[j].array.next = 0.into();
            self.acc_lanes[j].word.next = 0.into();
            self.acc_lanes[j].imm.next = self.vu.immediate.val();
            self.acc_lanes[j].multiplier.next = self.vu.requant_multiplier.val();
            self.acc_lanes[j].op.next = self.vu.acc_op.val();
            self.acc_lanes[j].clock.next = self.clock.val();
            self.acc_lanes[j].enable.next = self.en.val();
            self.array_lanes[j].clock.next = self.clock.val();
            self.array_lanes[j].enable.next = self.en.val();
            self.acc.vector_data[j].next = self.acc_lanes[j].result.val();
            self.array_lanes[j].x.next = self.acc.array_x_data[j].val();
            self.array_lanes[j].y.next = 0.into();
            self.array_lanes[j].array.next = self.array.out[j].val();
            self.array_lanes[j].imm.next = 0.into();
            self.array_lanes[j].word.next = 0.into();
            self.array_lanes[j].multiplier.next = 0.into();
            self.acc.array_data[j].next = self.array_lanes[j].result.val();
            // LoadAcc: word j of the DRAM row, zero at and past `len`.
            self.words[j].b0.next = self.dram.read_data[j * 4].val();
            self.words[j].b1.next = self.dram.read_data[j * 4 + 1].val();
            self.words[j].b2.next = self.dram.read_data[j * 4 + 2].val();
            self.words[j].b3.next = self.dram.read_data[j * 4 + 3].val();
            self.words[j].length.next = self.ld.length.val();
            self.acc.load_data[j].next = self.words[j].word.val();
        }

        // DRAM: the load unit reads, the vector unit writes (`Store` words, `StoreSpad`
        // elements from port B), the host reads and writes bytes.
        self.dram.read_enable.next = self.en.val();
        self.dram.read_address.next = self.ld.dram_read_address.val();
        self.dram.write_address.next = self.vu.dram_write_address.val();
        self.dram.write_count.next = 0.into();
        if self.en.val() {
            self.dram.write_count.next = self.vu.dram_write_count.val();
        }
        for k in 0..self.dram.write_data.len() {
            self.dram.write_data[k].next = 0.into();
        }
        for es in self._es..(self._es + 1) {
            for e in 0..self.spad_lanes.len() {
                self.dram.write_data[e * es].next = self.spad_b.read_data[e].val().get_bits::<8>(0);
                self.dram.write_data[e * es + es - 1].next =
                    self.spad_b.read_data[e].val().get_bits::<8>(es * 8 - 8);
            }
        }
        if self.vu.is_store.val() {
            for j in 0..self.acc_lanes.len() {
                self.dram.write_data[j * 4].next = self.acc.vector_x_data[j].val().get_bits::<8>(0);
                self.dram.write_data[j * 4 + 1].next =
                    self.acc.vector_x_data[j].val().get_bits::<8>(8);
                self.dram.write_data[j * 4 + 2].next =
                    self.acc.vector_x_data[j].val().get_bits::<8>(16);
                self.dram.write_data[j * 4 + 3].next =
                    self.acc.vector_x_data[j].val().get_bits::<8>(24);
            }
        }
        // StoreBf16: each lane's word cast to bf16 (the casts read what `Store` reads).
        if self.vu.is_store_bf16.val() {
            for j in 0..self.cast.len() {
                self.dram.write_data[j * 2].next = self.cast[j].y.val().get_bits::<8>(0);
                self.dram.write_data[j * 2 + 1].next = self.cast[j].y.val().get_bits::<8>(8);
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
    }
}
