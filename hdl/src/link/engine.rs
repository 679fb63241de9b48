//! The packet engine: a request buffered and checked in core's order, then executed; its
//! response out; memory and FIFO accesses and the `Run` / `Reset` strobes.

use rust_hdl::prelude::*;
use systole_core::protocol::{
    Command, ErrorCode, CRC_BYTES, HEADER_BYTES, IDENTITY_BYTES, MAX_WORDS, REQUEST_SYNC,
    RESPONSE_SYNC,
};
use systole_core::Dtype;

use super::{Crc16Step, HostMap, RowDivider};
use crate::decode::{below_twice, constant, holding, ExtentCheck};
use crate::mem::Ram;
use crate::optional::Optional;

/// The engine's states.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum LinkState {
    Hunt,
    Kind,
    LenLo,
    LenHi,
    Payload,
    CrcHi,
    CrcLo,
    /// The request's checks run; their verdict is registered for `Execute`.
    Check,
    Execute,
    Divide,
    PushRead,
    PushByte,
    /// The word is assembled: its DRAM extent is checked, then it is queued.
    PushCheck,
    WriteRead,
    WriteByte,
    RespNext,
    RespMemWait,
    RespMemLatch,
    RespSend,
}

/// Where a response's payload comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq, LogicState)]
pub enum Payload {
    Empty,
    /// The status snapshot, shifted out a byte at a time.
    Status,
    /// The identity, a constant.
    Identity,
    Memory,
}

/// Bytes as one little-endian value (byte 0 in bits 7..0).
fn little_endian<const N: usize>(bytes: &[u8]) -> Bits<N> {
    let mut v = Bits::<N>::default();
    for &b in bytes.iter().rev() {
        v = (v << 8u64) | bit_cast::<N, 8>((b as u64).into());
    }
    v
}

/// Requests in, responses out, memory and FIFO accesses and the `Run` / `Reset` strobes.
#[derive(LogicBlock)]
pub struct PacketEngine {
    pub clock: Signal<In, Clock>,
    pub reset: Signal<In, Bit>,
    pub rx_byte: Signal<In, Bits<8>>,
    pub rx_valid: Signal<In, Bit>,
    /// The byte came from the SPI slave (else the UART).
    pub rx_spi: Signal<In, Bit>,
    pub spi_deselect: Signal<In, Bit>,
    pub tx_byte: Signal<Out, Bits<8>>,
    pub tx_valid_uart: Signal<Out, Bit>,
    pub tx_valid_spi: Signal<Out, Bit>,
    pub tx_take: Signal<In, Bit>,
    // The machine's status.
    pub running: Signal<In, Bit>,
    pub done: Signal<In, Bit>,
    pub fault: Signal<In, Bits<4>>,
    pub fifo_free: Signal<In, Bits<16>>,
    pub cycles: Signal<In, Bits<64>>,
    pub fifo_push: Signal<Out, Bit>,
    pub fifo_word: Signal<Out, Bits<128>>,
    /// With `fifo_push`: the word, read as a DRAM access, passes the end of the DRAM.
    pub fifo_extent_over: Signal<Out, Bit>,
    /// With `fifo_push`: the byte after the word's last DRAM byte, read as a DRAM access (built
    /// when the map `queue_ends`).
    pub fifo_end: Optional<Signal<Out, Bits<32>>>,
    /// `Run` and `Reset`, each a pulse from a register (a frame's checks end in it the cycle
    /// before): the machine's start and abort do not wait on the frame's checks.
    pub run: Signal<Out, Bit>,
    pub machine_reset: Signal<Out, Bit>,
    // The host port of the memories (used only while no program runs).
    /// 0 DRAM, 1 scratchpad, 2 accumulators.
    pub host_region: Signal<Out, Bits<2>>,
    pub host_row: Signal<Out, Bits<16>>,
    pub host_lane: Signal<Out, Bits<16>>,
    pub host_addr: Signal<Out, Bits<32>>,
    pub host_elem: Signal<Out, Bits<16>>,
    pub host_word: Signal<Out, Bits<32>>,
    pub host_byte: Signal<Out, Bits<8>>,
    pub host_write: Signal<Out, Bit>,
    /// The addressed element / word / byte, a cycle after its address.
    pub spad_elem: Signal<In, Bits<16>>,
    pub acc_word: Signal<In, Bits<32>>,
    pub dram_byte: Signal<In, Bits<8>>,
    /// Built for a DRAM that answers in its own time (the SDRAM) only: a memory read's byte is
    /// asked for while `host_read` (DRAM region), and waited for until `mem_ready`, which also
    /// holds the next memory write until the last one is done.
    pub host_read: Optional<Signal<Out, Bit>>,
    pub mem_ready: Optional<Signal<In, Bit>>,
    buffer: Ram<8, 16>,
    extent: ExtentCheck,
    rx_crc: Crc16Step,
    tx_crc: Crc16Step,
    state: DFF<LinkState>,
    run_q: DFF<Bit>,
    reset_q: DFF<Bit>,
    from_spi: DFF<Bit>,
    crc: DFF<Bits<16>>,
    got_crc: DFF<Bits<16>>,
    kind: DFF<Bits<8>>,
    len: DFF<Bits<16>>,
    count: DFF<Bits<16>>,
    region: DFF<Bits<8>>,
    addr: DFF<Bits<32>>,
    read_len: DFF<Bits<16>>,
    code: DFF<Bits<8>>,
    /// The checks' verdict on the request, registered in `Check` so that `Execute`'s many
    /// loads do not hang off the checks' comparisons (docs/DECISIONS.md 79).
    verdict: DFF<Bits<8>>,
    payload: DFF<Payload>,
    payload_len: DFF<Bits<16>>,
    index: DFF<Bits<16>>,
    tx_data: DFF<Bits<8>>,
    tx_crc_q: DFF<Bits<16>>,
    /// Bytes on their way: an instruction word or a memory element being assembled, or the
    /// status taken when `ReadStatus` executes (its byte 0 the next one sent).
    assembly: DFF<Bits<128>>,
    row: DFF<Bits<16>>,
    lane: DFF<Bits<16>>,
    offset: DFF<Bits<2>>,
    /// Present only where a row's bytes are not a power of two.
    divider: Vec<RowDivider>,
    silence: DFF<Bits<24>>,
    /// Cycles a UART frame may pause before the engine gives it up and hunts again.
    patience: Constant<Bits<24>>,
    dram_bytes: Constant<Bits<40>>,
    spad_bytes: Constant<Bits<40>>,
    acc_bytes: Constant<Bits<40>>,
    /// The address bits below twice the largest region: an address with a bit above is out
    /// of range of every region, and the access end is formed in no more bits than that.
    addr_low: Constant<Bits<32>>,
    /// log2 of a row's bytes and the mask of a byte within a row (power-of-two rows).
    spad_row_shift: Constant<Bits<32>>,
    acc_row_shift: Constant<Bits<32>>,
    spad_row_mask: Constant<Bits<32>>,
    acc_row_mask: Constant<Bits<32>>,
    spad_last_lane: Constant<Bits<16>>,
    acc_last_lane: Constant<Bits<16>>,
    bf16: Constant<Bit>,
    /// Present on a machine built without its program checks: a word's DRAM extent then does
    /// not count. Absent, it leaves no trace in the Verilog.
    unchecked: Optional<Constant<Bit>>,
    max_payload: Constant<Bits<16>>,
    /// The bits a response's payload length (at most the map's `max_data`) and its byte index (at most
    /// the payload's end and its checksum) can have (docs/DECISIONS.md 94).
    payload_bits: Constant<Bits<16>>,
    index_bits: Constant<Bits<16>>,
    max_data: Constant<Bits<16>>,
    max_words_bytes: Constant<Bits<16>>,
    request_sync: Constant<Bits<8>>,
    response_sync: Constant<Bits<8>>,
    cmd_write_instructions: Constant<Bits<8>>,
    cmd_write_memory: Constant<Bits<8>>,
    cmd_read_memory: Constant<Bits<8>>,
    cmd_read_status: Constant<Bits<8>>,
    cmd_run: Constant<Bits<8>>,
    cmd_reset: Constant<Bits<8>>,
    cmd_identify: Constant<Bits<8>>,
    identity: Constant<Bits<192>>,
    err_checksum: Constant<Bits<8>>,
    err_command: Constant<Bits<8>>,
    err_length: Constant<Bits<8>>,
    err_region: Constant<Bits<8>>,
    err_out_of_range: Constant<Bits<8>>,
    err_busy: Constant<Bits<8>>,
    err_fifo_full: Constant<Bits<8>>,
    err_misaligned: Constant<Bits<8>>,
    accept: Signal<Local, Bit>,
    data_len: Signal<Local, Bits<16>>,
    access_end: Signal<Local, Bits<40>>,
    addr_high: Signal<Local, Bit>,
    region_size: Signal<Local, Bits<40>>,
    misaligned: Signal<Local, Bit>,
    error: Signal<Local, Bits<8>>,
    /// The address split into a row and the byte within it.
    split_row: Signal<Local, Bits<32>>,
    split_byte: Signal<Local, Bits<32>>,
    split_busy: Signal<Local, Bit>,
    status_index: Signal<Local, Bits<16>>,
    status_byte: Signal<Local, Bits<8>>,
    receiving: Signal<Local, Bit>,
    mem_byte: Signal<Local, Bits<8>>,
    elem_last_byte: Signal<Local, Bit>,
    payload_end: Signal<Local, Bits<16>>,
}

impl PacketEngine {
    /// The same engine, waiting on its DRAM's `mem_ready` (the SDRAM's host port).
    pub fn with_slow_dram(self) -> PacketEngine {
        PacketEngine {
            host_read: Optional::default_when(true),
            mem_ready: Optional::default_when(true),
            ..self
        }
    }

    pub fn new(map: HostMap) -> PacketEngine {
        let es = map.spad_elem_bytes;
        let spad_row_bytes = map.spad_lanes * es;
        let acc_row_bytes = map.acc_lanes * 4;
        // A `WriteMemory`'s payload: region, address and the data.
        let max_payload = 5 + map.max_data;
        let max_response = map.max_data.max(IDENTITY_BYTES as u64);
        PacketEngine {
            clock: Default::default(),
            reset: Default::default(),
            rx_byte: Default::default(),
            rx_valid: Default::default(),
            rx_spi: Default::default(),
            spi_deselect: Default::default(),
            tx_byte: Default::default(),
            tx_valid_uart: Default::default(),
            tx_valid_spi: Default::default(),
            tx_take: Default::default(),
            running: Default::default(),
            done: Default::default(),
            fault: Default::default(),
            fifo_free: Default::default(),
            cycles: Default::default(),
            fifo_push: Default::default(),
            fifo_word: Default::default(),
            fifo_extent_over: Default::default(),
            fifo_end: Optional::default_when(map.queue_ends),
            run: Default::default(),
            machine_reset: Default::default(),
            host_region: Default::default(),
            host_row: Default::default(),
            host_lane: Default::default(),
            host_addr: Default::default(),
            host_elem: Default::default(),
            host_word: Default::default(),
            host_byte: Default::default(),
            host_write: Default::default(),
            spad_elem: Default::default(),
            acc_word: Default::default(),
            dram_byte: Default::default(),
            host_read: Default::default(),
            mem_ready: Default::default(),
            buffer: Ram::read_first(super::request_buffer_bytes(map.max_data)),
            extent: ExtentCheck::new(map.dram_bytes, map.spad_elem_bytes, map.queue_ends),
            rx_crc: Default::default(),
            tx_crc: Default::default(),
            state: Default::default(),
            run_q: Default::default(),
            reset_q: Default::default(),
            from_spi: Default::default(),
            crc: Default::default(),
            got_crc: Default::default(),
            kind: Default::default(),
            len: Default::default(),
            count: Default::default(),
            region: Default::default(),
            addr: Default::default(),
            read_len: Default::default(),
            code: Default::default(),
            verdict: Default::default(),
            payload: Default::default(),
            payload_len: Default::default(),
            index: Default::default(),
            tx_data: Default::default(),
            tx_crc_q: Default::default(),
            assembly: Default::default(),
            row: Default::default(),
            lane: Default::default(),
            offset: Default::default(),
            divider: if spad_row_bytes.is_power_of_two() && acc_row_bytes.is_power_of_two() {
                Vec::new()
            } else {
                vec![RowDivider::new(spad_row_bytes, acc_row_bytes)]
            },
            silence: Default::default(),
            patience: constant(map.uart_patience),
            dram_bytes: constant(map.dram_bytes),
            spad_bytes: constant(map.spad_bytes),
            acc_bytes: constant(map.acc_bytes),
            addr_low: constant(below_twice(
                map.dram_bytes.max(map.spad_bytes).max(map.acc_bytes),
                32,
            )),
            spad_row_shift: constant(spad_row_bytes.trailing_zeros() as u64),
            acc_row_shift: constant(acc_row_bytes.trailing_zeros() as u64),
            spad_row_mask: constant(spad_row_bytes - 1),
            acc_row_mask: constant(acc_row_bytes - 1),
            spad_last_lane: constant(map.spad_lanes - 1),
            acc_last_lane: constant(map.acc_lanes - 1),
            bf16: Constant::new(es == Dtype::Bf16.elem_bytes() as u64),
            unchecked: Optional::when(!map.program_checks, || Constant::new(true)),
            max_payload: constant(max_payload),
            payload_bits: constant(holding(max_response)),
            index_bits: constant(holding((HEADER_BYTES + CRC_BYTES) as u64 + max_response)),
            max_data: constant(map.max_data),
            max_words_bytes: constant(16 * MAX_WORDS as u64),
            request_sync: constant(REQUEST_SYNC as u64),
            response_sync: constant(RESPONSE_SYNC as u64),
            cmd_write_instructions: constant(Command::WriteInstructions as u64),
            cmd_write_memory: constant(Command::WriteMemory as u64),
            cmd_read_memory: constant(Command::ReadMemory as u64),
            cmd_read_status: constant(Command::ReadStatus as u64),
            cmd_run: constant(Command::Run as u64),
            cmd_reset: constant(Command::Reset as u64),
            cmd_identify: constant(Command::Identify as u64),
            identity: Constant::new(little_endian(&map.identity)),
            err_checksum: constant(ErrorCode::Checksum as u64),
            err_command: constant(ErrorCode::Command as u64),
            err_length: constant(ErrorCode::Length as u64),
            err_region: constant(ErrorCode::Region as u64),
            err_out_of_range: constant(ErrorCode::OutOfRange as u64),
            err_busy: constant(ErrorCode::Busy as u64),
            err_fifo_full: constant(ErrorCode::FifoFull as u64),
            err_misaligned: constant(ErrorCode::Misaligned as u64),
            accept: Default::default(),
            data_len: Default::default(),
            access_end: Default::default(),
            addr_high: Default::default(),
            region_size: Default::default(),
            misaligned: Default::default(),
            error: Default::default(),
            split_row: Default::default(),
            split_byte: Default::default(),
            split_busy: Default::default(),
            status_index: Default::default(),
            status_byte: Default::default(),
            receiving: Default::default(),
            mem_byte: Default::default(),
            elem_last_byte: Default::default(),
            payload_end: Default::default(),
        }
    }
}

impl Logic for PacketEngine {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            state,
            run_q,
            reset_q,
            from_spi,
            crc,
            got_crc,
            kind,
            len,
            count,
            region,
            addr,
            read_len,
            code,
            verdict,
            payload,
            payload_len,
            index,
            tx_data,
            tx_crc_q,
            assembly,
            row,
            lane,
            offset,
            silence
        );
        self.buffer.clock.next = self.clock.val();
        self.buffer.read_enable.next = true;
        self.buffer.read_address.next = 0.into();
        self.buffer.write_enable.next = false;
        self.buffer.write_address.next = self.count.q.val();
        self.buffer.write_data.next = self.rx_byte.val();
        self.rx_crc.crc.next = self.crc.q.val();
        self.rx_crc.data.next = self.rx_byte.val();
        self.tx_crc.crc.next = self.tx_crc_q.q.val();
        self.tx_crc.data.next = self.tx_data.q.val();
        // A byte belongs to the frame if it comes from the frame's interface.
        self.accept.next = self.rx_valid.val() && (self.rx_spi.val() == self.from_spi.q.val());
        self.fifo_push.next = false;
        self.fifo_word.next = self.assembly.q.val();
        self.extent.clock.next = self.clock.val();
        self.extent.check.next = self.state.q.val() == LinkState::PushCheck;
        self.extent.word.next = self.assembly.q.val();
        self.fifo_extent_over.next = self.extent.bad.val();
        for _k in 0..self.unchecked.len() {
            self.fifo_extent_over.next = false;
        }
        for _k in 0..self.fifo_end.len() {
            self.fifo_end.next = self.extent.end_byte.val();
        }
        self.run.next = self.run_q.q.val();
        self.machine_reset.next = self.reset_q.q.val();
        self.run_q.d.next = false;
        self.reset_q.d.next = false;
        self.host_write.next = false;
        for _s in 0..self.host_read.len() {
            self.host_read.next =
                self.state.q.val() == LinkState::RespMemWait && !self.region.q.val().any();
        }
        self.host_region.next = self.region.q.val().get_bits::<2>(0);
        self.host_row.next = self.row.q.val();
        self.host_lane.next = self.lane.q.val();
        self.host_addr.next = self.addr.q.val();
        self.host_byte.next = self.buffer.read_data.val();
        // An element or word is written with its last byte; earlier bytes wait in `assembly`.
        self.host_elem.next = bit_cast::<16, 8>(self.buffer.read_data.val());
        if self.bf16.val() {
            self.host_elem.next = (bit_cast::<16, 8>(self.buffer.read_data.val()) << 8)
                | bit_cast::<16, 8>(self.assembly.q.val().get_bits::<8>(120));
        }
        self.host_word.next = (bit_cast::<32, 8>(self.buffer.read_data.val()) << 24)
            | bit_cast::<32, 24>(self.assembly.q.val().get_bits::<24>(104));
        self.tx_byte.next = self.tx_data.q.val();
        self.tx_valid_uart.next = false;
        self.tx_valid_spi.next = false;

        // Field checks of a request (core's parse_request, then the Emulator's execute).
        self.data_len.next = self.read_len.q.val();
        if self.kind.q.val() == self.cmd_write_memory.val() {
            self.data_len.next = self.len.q.val() - 5;
        }
        self.access_end.next = bit_cast::<40, 32>(self.addr.q.val() & self.addr_low.val())
            + bit_cast::<40, 16>(self.data_len.val());
        self.addr_high.next = (self.addr.q.val() & !self.addr_low.val()).any();
        self.region_size.next = self.dram_bytes.val();
        self.misaligned.next = false;
        if self.region.q.val() == 1 {
            self.region_size.next = self.spad_bytes.val();
            self.misaligned.next =
                self.bf16.val() && (self.addr.q.val().get_bit(0) || self.data_len.val().get_bit(0));
        }
        if self.region.q.val() == 2 {
            self.region_size.next = self.acc_bytes.val();
            self.misaligned.next = self.addr.q.val().get_bits::<2>(0).any()
                || self.data_len.val().get_bits::<2>(0).any();
        }
        self.error.next = 0.into();
        if self.kind.q.val() == self.cmd_write_instructions.val() {
            if !self.len.q.val().any()
                || self.len.q.val().get_bits::<4>(0).any()
                || self.len.q.val() > self.max_words_bytes.val()
            {
                self.error.next = self.err_length.val();
            } else if bit_cast::<16, 12>(self.len.q.val().get_bits::<12>(4)) > self.fifo_free.val()
            {
                self.error.next = self.err_fifo_full.val();
            }
        } else if self.kind.q.val() == self.cmd_write_memory.val()
            || self.kind.q.val() == self.cmd_read_memory.val()
        {
            if (self.kind.q.val() == self.cmd_write_memory.val()
                && (self.len.q.val() < 6 || self.len.q.val() > self.max_payload.val()))
                || (self.kind.q.val() == self.cmd_read_memory.val()
                    && (self.len.q.val() != 7
                        || !self.read_len.q.val().any()
                        || self.read_len.q.val() > self.max_data.val()))
            {
                self.error.next = self.err_length.val();
            } else if self.region.q.val() > 2 {
                self.error.next = self.err_region.val();
            } else if self.running.val() {
                self.error.next = self.err_busy.val();
            } else if self.addr_high.val() || self.access_end.val() > self.region_size.val() {
                self.error.next = self.err_out_of_range.val();
            } else if self.misaligned.val() {
                self.error.next = self.err_misaligned.val();
            }
        } else if self.kind.q.val() == self.cmd_read_status.val()
            || self.kind.q.val() == self.cmd_run.val()
            || self.kind.q.val() == self.cmd_reset.val()
            || self.kind.q.val() == self.cmd_identify.val()
        {
            if self.len.q.val().any() {
                self.error.next = self.err_length.val();
            }
        } else {
            self.error.next = self.err_command.val();
        }
        if self.len.q.val() > self.max_payload.val() {
            self.error.next = self.err_length.val();
        }
        if self.got_crc.q.val() != self.crc.q.val() {
            self.error.next = self.err_checksum.val();
        }

        // The addressed byte of a memory read: byte `offset` of the element or word.
        self.mem_byte.next = self.dram_byte.val();
        if self.region.q.val() == 1 {
            self.mem_byte.next = self.spad_elem.val().get_bits::<8>(0);
            if self.offset.q.val().any() {
                self.mem_byte.next = self.spad_elem.val().get_bits::<8>(8);
            }
        }
        if self.region.q.val() == 2 {
            self.mem_byte.next = self.acc_word.val().get_bits::<8>(0);
            if self.offset.q.val() == 1 {
                self.mem_byte.next = self.acc_word.val().get_bits::<8>(8);
            }
            if self.offset.q.val() == 2 {
                self.mem_byte.next = self.acc_word.val().get_bits::<8>(16);
            }
            if self.offset.q.val() == 3 {
                self.mem_byte.next = self.acc_word.val().get_bits::<8>(24);
            }
        }
        self.elem_last_byte.next = true;
        if self.region.q.val() == 1 && self.bf16.val() {
            self.elem_last_byte.next = self.offset.q.val() == 1;
        }
        if self.region.q.val() == 2 {
            self.elem_last_byte.next = self.offset.q.val() == 3;
        }
        self.status_index.next = self.index.q.val() - 4;
        self.status_byte.next = 0.into();
        if self.payload.q.val() == Payload::Status {
            self.status_byte.next = self.assembly.q.val().get_bits::<8>(0);
        }
        if self.payload.q.val() == Payload::Identity {
            for i in 0..24 {
                if self.status_index.val() == i.to_bits() {
                    self.status_byte.next = self.identity.val().get_bits::<8>(i * 8);
                }
            }
        }
        self.payload_end.next = self.payload_len.q.val() + 4;
        // A byte address as a row and the byte within it: a shift and a mask for power-of-two
        // rows, else the serial divider's result.
        self.split_row.next = self.addr.q.val() >> self.acc_row_shift.val();
        self.split_byte.next = self.addr.q.val() & self.acc_row_mask.val();
        if self.region.q.val() == 1 {
            self.split_row.next = self.addr.q.val() >> self.spad_row_shift.val();
            self.split_byte.next = self.addr.q.val() & self.spad_row_mask.val();
        }
        self.split_busy.next = false;
        for i in 0..self.divider.len() {
            self.divider[i].clock.next = self.clock.val();
            self.divider[i].start.next = false;
            self.divider[i].dividend.next = self.addr.q.val();
            self.divider[i].spad.next = self.region.q.val() == 1;
            self.split_row.next = self.divider[i].quotient.val();
            self.split_byte.next = self.divider[i].remainder.val();
            self.split_busy.next = self.divider[i].busy.val();
        }

        match self.state.q.val() {
            LinkState::Hunt => {
                if self.rx_valid.val() && self.rx_byte.val() == self.request_sync.val() {
                    self.from_spi.d.next = self.rx_spi.val();
                    self.crc.d.next = 0xFFFF.into();
                    self.state.d.next = LinkState::Kind;
                }
            }
            LinkState::Kind => {
                if self.accept.val() {
                    self.kind.d.next = self.rx_byte.val();
                    self.crc.d.next = self.rx_crc.out.val();
                    self.state.d.next = LinkState::LenLo;
                }
            }
            LinkState::LenLo => {
                if self.accept.val() {
                    self.len.d.next = bit_cast::<16, 8>(self.rx_byte.val());
                    self.crc.d.next = self.rx_crc.out.val();
                    self.state.d.next = LinkState::LenHi;
                }
            }
            LinkState::LenHi => {
                if self.accept.val() {
                    self.len.d.next = (bit_cast::<16, 8>(self.rx_byte.val()) << 8)
                        | bit_cast::<16, 8>(self.len.q.val().get_bits::<8>(0));
                    self.crc.d.next = self.rx_crc.out.val();
                    self.count.d.next = 0.into();
                    self.region.d.next = 0.into();
                    self.addr.d.next = 0.into();
                    self.read_len.d.next = 0.into();
                    self.state.d.next = LinkState::Payload;
                    if !self.rx_byte.val().any() && !self.len.q.val().get_bits::<8>(0).any() {
                        self.state.d.next = LinkState::CrcHi;
                    }
                }
            }
            LinkState::Payload => {
                if self.accept.val() {
                    self.buffer.write_enable.next = self.count.q.val() < self.max_payload.val();
                    self.crc.d.next = self.rx_crc.out.val();
                    self.count.d.next = self.count.q.val() + 1;
                    // The memory commands' header: region, address, length.
                    if self.count.q.val() == 0 {
                        self.region.d.next = self.rx_byte.val();
                    }
                    if self.count.q.val() >= 1 && self.count.q.val() <= 4 {
                        self.addr.d.next = (bit_cast::<32, 8>(self.rx_byte.val()) << 24)
                            | (self.addr.q.val() >> 8);
                    }
                    if self.count.q.val() == 5 {
                        self.read_len.d.next = bit_cast::<16, 8>(self.rx_byte.val());
                    }
                    if self.count.q.val() == 6 {
                        self.read_len.d.next =
                            (bit_cast::<16, 8>(self.rx_byte.val()) << 8) | self.read_len.q.val();
                    }
                    if self.count.q.val() == self.len.q.val() - 1 {
                        self.state.d.next = LinkState::CrcHi;
                    }
                }
            }
            LinkState::CrcHi => {
                if self.accept.val() {
                    self.got_crc.d.next = bit_cast::<16, 8>(self.rx_byte.val()) << 8;
                    self.state.d.next = LinkState::CrcLo;
                }
            }
            LinkState::CrcLo => {
                if self.accept.val() {
                    self.got_crc.d.next =
                        self.got_crc.q.val() | bit_cast::<16, 8>(self.rx_byte.val());
                    self.state.d.next = LinkState::Check;
                }
            }
            LinkState::Check => {
                self.verdict.d.next = self.error.val();
                self.state.d.next = LinkState::Execute;
            }
            LinkState::Execute => {
                self.code.d.next = self.verdict.q.val();
                self.payload.d.next = Payload::Empty;
                self.payload_len.d.next = 0.into();
                self.index.d.next = 0.into();
                self.tx_crc_q.d.next = 0xFFFF.into();
                self.count.d.next = 0.into();
                self.offset.d.next = 0.into();
                self.state.d.next = LinkState::RespNext;
                if !self.verdict.q.val().any() {
                    if self.kind.q.val() == self.cmd_write_instructions.val() {
                        self.state.d.next = LinkState::PushRead;
                    }
                    if self.kind.q.val() == self.cmd_write_memory.val()
                        || self.kind.q.val() == self.cmd_read_memory.val()
                    {
                        for i in 0..self.divider.len() {
                            self.divider[i].start.next = true;
                        }
                        self.state.d.next = LinkState::Divide;
                    }
                    if self.kind.q.val() == self.cmd_read_status.val() {
                        // core::protocol::Status::to_bytes.
                        self.payload.d.next = Payload::Status;
                        self.payload_len.d.next = 12.into();
                        self.assembly.d.next = bit_cast::<128, 1>(self.running.val().into())
                            | (bit_cast::<128, 1>(self.done.val().into()) << 1)
                            | (bit_cast::<128, 1>(self.fault.val().any().into()) << 2)
                            | (bit_cast::<128, 4>(self.fault.val()) << 8)
                            | (bit_cast::<128, 16>(self.fifo_free.val()) << 16)
                            | (bit_cast::<128, 64>(self.cycles.val()) << 32);
                    }
                    if self.kind.q.val() == self.cmd_identify.val() {
                        self.payload.d.next = Payload::Identity;
                        self.payload_len.d.next = 24.into();
                    }
                    if self.kind.q.val() == self.cmd_run.val() {
                        self.run_q.d.next = true;
                    }
                    if self.kind.q.val() == self.cmd_reset.val() {
                        self.reset_q.d.next = true;
                    }
                }
            }
            LinkState::Divide => {
                if !self.split_busy.val() {
                    self.row.d.next = self.split_row.val().get_bits::<16>(0);
                    self.lane.d.next = self.split_byte.val().get_bits::<16>(0);
                    self.offset.d.next = 0.into();
                    if self.region.q.val() == 1 && self.bf16.val() {
                        self.lane.d.next = self.split_byte.val().get_bits::<16>(1);
                        self.offset.d.next = self.split_byte.val().get_bits::<2>(0) & 1;
                    }
                    if self.region.q.val() == 2 {
                        self.lane.d.next = self.split_byte.val().get_bits::<16>(2);
                        self.offset.d.next = self.split_byte.val().get_bits::<2>(0);
                    }
                    if self.kind.q.val() == self.cmd_write_memory.val() {
                        self.count.d.next = 5.into();
                        self.state.d.next = LinkState::WriteRead;
                    } else {
                        self.payload.d.next = Payload::Memory;
                        self.payload_len.d.next = self.read_len.q.val() & self.payload_bits.val();
                        self.state.d.next = LinkState::RespNext;
                    }
                }
            }
            LinkState::PushRead => {
                self.buffer.read_address.next = self.count.q.val();
                self.state.d.next = LinkState::PushByte;
            }
            LinkState::PushByte => {
                // Little-endian: each byte enters at the top and the word shifts down.
                self.assembly.d.next = (self.assembly.q.val() >> 8)
                    | (bit_cast::<128, 8>(self.buffer.read_data.val()) << 120);
                self.count.d.next = self.count.q.val() + 1;
                self.state.d.next = LinkState::PushRead;
                if self.count.q.val().get_bits::<4>(0) == 15 {
                    self.state.d.next = LinkState::PushCheck;
                }
            }
            LinkState::PushCheck => {
                // `assembly` holds the word while the extent check runs (18 cycles).
                if self.extent.done.val() {
                    self.fifo_push.next = true;
                    self.state.d.next = LinkState::PushRead;
                    if self.count.q.val() == self.len.q.val() {
                        self.state.d.next = LinkState::RespNext;
                    }
                }
            }
            LinkState::WriteRead => {
                self.buffer.read_address.next = self.count.q.val();
                self.state.d.next = LinkState::WriteByte;
                for _s in 0..self.mem_ready.len() {
                    if !self.mem_ready.val() {
                        self.state.d.next = LinkState::WriteRead;
                    }
                }
            }
            LinkState::WriteByte => {
                self.host_write.next = self.elem_last_byte.val();
                self.assembly.d.next = (self.assembly.q.val() >> 8)
                    | (bit_cast::<128, 8>(self.buffer.read_data.val()) << 120);
                self.count.d.next = self.count.q.val() + 1;
                self.addr.d.next = self.addr.q.val() + 1;
                self.offset.d.next = self.offset.q.val() + 1;
                if self.elem_last_byte.val() {
                    self.offset.d.next = 0.into();
                    self.lane.d.next = self.lane.q.val() + 1;
                    if (self.region.q.val() == 1 && self.lane.q.val() == self.spad_last_lane.val())
                        || (self.region.q.val() == 2
                            && self.lane.q.val() == self.acc_last_lane.val())
                    {
                        self.lane.d.next = 0.into();
                        self.row.d.next = self.row.q.val() + 1;
                    }
                }
                self.state.d.next = LinkState::WriteRead;
                if self.count.q.val() == self.len.q.val() - 1 {
                    self.state.d.next = LinkState::RespNext;
                }
            }
            LinkState::RespNext => {
                self.state.d.next = LinkState::RespSend;
                if self.index.q.val() == 0 {
                    self.tx_data.d.next = self.response_sync.val();
                } else if self.index.q.val() == 1 {
                    self.tx_data.d.next = self.code.q.val();
                } else if self.index.q.val() == 2 {
                    self.tx_data.d.next = self.payload_len.q.val().get_bits::<8>(0);
                } else if self.index.q.val() == 3 {
                    self.tx_data.d.next = self.payload_len.q.val().get_bits::<8>(8);
                } else if self.index.q.val() < self.payload_end.val() {
                    self.tx_data.d.next = self.status_byte.val();
                    if self.payload.q.val() == Payload::Memory {
                        self.state.d.next = LinkState::RespMemWait;
                    }
                } else if self.index.q.val() == self.payload_end.val() {
                    self.tx_data.d.next = self.tx_crc_q.q.val().get_bits::<8>(8);
                } else if self.index.q.val() == self.payload_end.val() + 1 {
                    self.tx_data.d.next = self.tx_crc_q.q.val().get_bits::<8>(0);
                } else {
                    self.state.d.next = LinkState::Hunt;
                }
            }
            LinkState::RespMemWait => {
                self.state.d.next = LinkState::RespMemLatch;
                for _s in 0..self.mem_ready.len() {
                    if !self.mem_ready.val() {
                        self.state.d.next = LinkState::RespMemWait;
                    }
                }
            }
            LinkState::RespMemLatch => {
                self.tx_data.d.next = self.mem_byte.val();
                self.state.d.next = LinkState::RespSend;
            }
            LinkState::RespSend => {
                self.tx_valid_uart.next = !self.from_spi.q.val();
                self.tx_valid_spi.next = self.from_spi.q.val();
                if self.tx_take.val() {
                    self.index.d.next = (self.index.q.val() + 1) & self.index_bits.val();
                    if self.index.q.val() >= 1 && self.index.q.val() < self.payload_end.val() {
                        self.tx_crc_q.d.next = self.tx_crc.out.val();
                    }
                    if self.index.q.val() >= 4
                        && self.index.q.val() < self.payload_end.val()
                        && self.payload.q.val() == Payload::Status
                    {
                        self.assembly.d.next = self.assembly.q.val() >> 8;
                    }
                    if self.index.q.val() >= 4
                        && self.index.q.val() < self.payload_end.val()
                        && self.payload.q.val() == Payload::Memory
                    {
                        self.addr.d.next = self.addr.q.val() + 1;
                        self.offset.d.next = self.offset.q.val() + 1;
                        if self.elem_last_byte.val() {
                            self.offset.d.next = 0.into();
                            self.lane.d.next = self.lane.q.val() + 1;
                            if (self.region.q.val() == 1
                                && self.lane.q.val() == self.spad_last_lane.val())
                                || (self.region.q.val() == 2
                                    && self.lane.q.val() == self.acc_last_lane.val())
                            {
                                self.lane.d.next = 0.into();
                                self.row.d.next = self.row.q.val() + 1;
                            }
                        }
                    }
                    self.state.d.next = LinkState::RespNext;
                }
            }
            _ => {
                self.state.d.next = LinkState::Hunt;
            }
        }
        // A UART frame that stalls is dropped, so that a host which lost bytes can resynchronise.
        self.receiving.next = self.state.q.val() == LinkState::Kind
            || self.state.q.val() == LinkState::LenLo
            || self.state.q.val() == LinkState::LenHi
            || self.state.q.val() == LinkState::Payload
            || self.state.q.val() == LinkState::CrcHi
            || self.state.q.val() == LinkState::CrcLo;
        self.silence.d.next = 0.into();
        if self.receiving.val() && !self.accept.val() {
            self.silence.d.next = self.silence.q.val() + 1;
            if self.silence.q.val() == self.patience.val() && !self.from_spi.q.val() {
                self.state.d.next = LinkState::Hunt;
            }
        }
        // An SPI request is one transaction: raising CS part-way abandons it. A response
        // survives deselection (the master polls for it), but a new request's sync byte
        // abandons it.
        if self.spi_deselect.val() && self.from_spi.q.val() && self.receiving.val() {
            self.state.d.next = LinkState::Hunt;
        }
        if (self.state.q.val() == LinkState::RespNext
            || self.state.q.val() == LinkState::RespMemWait
            || self.state.q.val() == LinkState::RespMemLatch
            || self.state.q.val() == LinkState::RespSend)
            && self.from_spi.q.val()
            && self.rx_valid.val()
            && self.rx_spi.val()
            && self.rx_byte.val() == self.request_sync.val()
        {
            self.crc.d.next = 0xFFFF.into();
            self.state.d.next = LinkState::Kind;
        }
        if self.reset.val() {
            self.state.d.next = LinkState::Hunt;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{SpiSlave, UartRx, UartTx};
    use crate::testing::{settle, tick, verilog_of};
    use systole_core::ArrayConfig;

    /// Feeds one request frame into the engine a byte every few cycles and collects the
    /// response, taking each byte as soon as it is offered.
    fn exchange(engine: &mut PacketEngine, request: &[u8], status: (bool, u64)) -> Vec<u8> {
        engine.running.next = status.0;
        engine.cycles.next = status.1.into();
        engine.fifo_free.next = 9u64.into();
        let mut response = vec![];
        let mut input = request.iter();
        for cycle in 0..2000 {
            engine.rx_valid.next = false;
            if cycle % 3 == 0 {
                if let Some(&b) = input.next() {
                    engine.rx_byte.next = (b as u64).into();
                    engine.rx_valid.next = true;
                }
            }
            settle(engine);
            engine.tx_take.next = engine.tx_valid_uart.val();
            settle(engine);
            if engine.tx_take.val() {
                response.push(engine.tx_byte.val().index() as u8);
            }
            tick(engine, |e| &mut e.clock);
            engine.tx_take.next = false;
        }
        response
    }

    /// Status and identity answered as core encodes them; a corrupted frame refused.
    #[test]
    fn engine_answers_status_identify_and_refuses_bad_frames() {
        use systole_core::protocol::{
            encode_request, encode_response, Request, Response, Status, MAX_FRAME,
        };
        let config = ArrayConfig::new(2, 3, Dtype::Int8);
        let map = HostMap::new(&config, 512, 9, 4, true, true);
        let mut engine = PacketEngine::new(map);
        engine.connect_all();
        let frame = |req: Request<'_>| {
            let mut b = [0u8; MAX_FRAME];
            let n = encode_request(&req, &mut b).unwrap();
            b[..n].to_vec()
        };
        let answer = |resp: Response<'_>| {
            let mut b = [0u8; MAX_FRAME];
            let n = encode_response(&resp, &mut b).unwrap();
            b[..n].to_vec()
        };
        let status = Status { busy: true, done: false, fault: None, fifo_free: 9, cycles: 1234 };
        let got = exchange(&mut engine, &frame(Request::ReadStatus), (true, 1234));
        assert_eq!(got, answer(Response::Ok(&status.to_bytes())));
        let got = exchange(&mut engine, &frame(Request::Identify), (false, 0));
        assert_eq!(got, answer(Response::Ok(&map.identity)));
        let mut bad = frame(Request::Run);
        bad[4] ^= 1;
        let got = exchange(&mut engine, &bad, (false, 0));
        assert_eq!(got, answer(Response::Err(ErrorCode::Checksum)));
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("crc16", &verilog_of(Crc16Step::default())).unwrap();
        yosys_validate("uart_rx", &verilog_of(UartRx::new(8))).unwrap();
        yosys_validate("uart_tx", &verilog_of(UartTx::new(8))).unwrap();
        yosys_validate("spi_slave", &verilog_of(SpiSlave::default())).unwrap();
        let config = ArrayConfig::new(2, 3, Dtype::Bf16);
        let map = HostMap::new(&config, 1024, 16, 8, true, true);
        yosys_validate("packet_engine", &verilog_of(PacketEngine::new(map))).unwrap();
    }
}
