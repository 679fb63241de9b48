//! What the packet engine checks host accesses against: the memories' sizes and shapes.

use systole_core::isa::ISA_VERSION;
use systole_core::protocol::{Identity, BASE_DATA, IDENTITY_BYTES, MAX_DATA};
use systole_core::ArrayConfig;

/// Bytes of the packet engine's request buffer for memory commands of `max_data` bytes: a
/// `WriteMemory`'s payload (region, address and the data), to a power of two.
pub fn request_buffer_bytes(max_data: u64) -> usize {
    (5 + max_data as usize).next_power_of_two()
}

/// Memory sizes and shapes the engine checks host accesses against.
#[derive(Clone, Copy, Debug)]
pub struct HostMap {
    pub dram_bytes: u64,
    pub spad_bytes: u64,
    pub acc_bytes: u64,
    /// Elements per scratchpad row, and their bytes.
    pub spad_lanes: u64,
    pub spad_elem_bytes: u64,
    /// Words per accumulator row.
    pub acc_lanes: u64,
    /// Cycles of silence after which a partly received UART frame is dropped.
    pub uart_patience: u64,
    /// The `Identify` payload.
    pub identity: [u8; IDENTITY_BYTES],
    /// Queue each word's DRAM end with it (the decoupled schedule's scoreboard compares spans).
    pub queue_ends: bool,
    /// The machine checks its words (`TopConfig::program_checks`): the engine's DRAM extent
    /// check counts, and the identity says so.
    pub program_checks: bool,
    /// Most data bytes one memory command moves: `MAX_DATA` on a machine built for large
    /// requests (`TopConfig::large_requests`), else `BASE_DATA`; the identity says which.
    pub max_data: u64,
}

impl HostMap {
    /// The map of `config` with `dram_bytes` of DRAM (below 2^32), a FIFO of `fifo_depth` words
    /// and a UART of `uart_divisor`, checking its words or not (`program_checks`), taking memory
    /// commands of `MAX_DATA` bytes or of `BASE_DATA` (`large_requests`): a frame that
    /// pauses for 1,024 byte times (at most `2^24 - 1` cycles, 0.17 s at 100 MHz, so the
    /// counter is 24 bits) is dropped.
    pub fn new(
        config: &ArrayConfig,
        dram_bytes: u64,
        fifo_depth: u16,
        uart_divisor: u16,
        program_checks: bool,
        large_requests: bool,
    ) -> HostMap {
        let identity = Identity {
            isa_version: ISA_VERSION,
            config: *config,
            dram_bytes: dram_bytes as u32,
            fifo_depth,
            program_checks,
            large_requests,
        };
        let es = config.dtype.elem_bytes() as u64;
        HostMap {
            dram_bytes,
            spad_bytes: config.spad_depth as u64 * config.spad_width() as u64 * es,
            acc_bytes: config.acc_depth as u64 * config.cols as u64 * 4,
            spad_lanes: config.spad_width() as u64,
            spad_elem_bytes: es,
            acc_lanes: config.cols as u64,
            uart_patience: (uart_divisor as u64 * 10 * 1024).min((1 << 24) - 1),
            identity: identity.to_bytes(),
            queue_ends: config.schedule == systole_core::Schedule::Decoupled,
            program_checks,
            max_data: if large_requests { MAX_DATA } else { BASE_DATA } as u64,
        }
    }
}
