//! The host link: a machine reached through protocol frames equals the golden machines, and link
//! faults are retried or reported, never turned into wrong results.

use systole_core::check::{assert_bit_identical, SplitMix};
use systole_core::link::emulator::Emulator;
use systole_core::link::{LinkFault, LinkMachine, Transport, TransportError};
use systole_core::machine::{golden, run_gemm, GoldenKind};
use systole_core::protocol::{BASE_DATA, MAX_DATA};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Machine, MachineError};

/// What happens to one exchange.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    /// Flip a bit of the request in flight (the device sees a bad checksum).
    CorruptRequest(usize),
    /// The response never arrives.
    DropResponse,
    /// Flip a bit of the response in flight.
    CorruptResponse(usize),
    /// Lose one byte of the response.
    TruncateResponse,
    /// The device is reset (its program and status are gone) before it answers.
    ResetDevice,
}

/// A transport that injects `faults[i]` into exchange `i`.
struct Faulty {
    device: Emulator,
    faults: Vec<Fault>,
    exchanges: usize,
    reset_seen: bool,
}

impl Transport for Faulty {
    fn exchange(&mut self, request: &[u8], response: &mut [u8]) -> Result<usize, TransportError> {
        let fault = self.faults.get(self.exchanges).copied().unwrap_or(Fault::None);
        self.exchanges += 1;
        let mut req = request.to_vec();
        if let Fault::CorruptRequest(at) = fault {
            let i = 1 + at % (req.len() - 1); // keep the sync byte: the device must answer
            req[i] ^= 0x10;
        }
        if fault == Fault::ResetDevice {
            let mut reset = [0u8; 16];
            let n = systole_core::protocol::encode_request(
                &systole_core::protocol::Request::Reset,
                &mut reset,
            )
            .unwrap();
            self.device.serve(&reset[..n]);
            self.reset_seen = true;
        }
        let mut n = self.device.exchange(&req, response)?;
        match fault {
            Fault::DropResponse => return Err(TransportError::Timeout),
            Fault::CorruptResponse(at) => response[at % n] ^= 0x04,
            Fault::TruncateResponse => n -= 1,
            _ => {}
        }
        Ok(n)
    }
    fn was_reset(&mut self) -> bool {
        std::mem::take(&mut self.reset_seen)
    }
}

fn gemm_case(config: ArrayConfig, shape: GemmShape) -> (GemmPlan, usize, Vec<u8>, Vec<u8>) {
    let (layout, dram) = GemmLayout::packed(&config, &shape).unwrap();
    let plan = GemmPlan::new(&config, shape, layout).unwrap();
    let mut rng = SplitMix(42);
    let a = rng.matrix((shape.m * shape.k) as usize, config.dtype);
    let b = rng.matrix((shape.k * shape.n) as usize, config.dtype);
    (plan, dram, a, b)
}

fn linked(config: ArrayConfig, dram: usize, faults: Vec<Fault>) -> LinkMachine<Faulty> {
    let device = Emulator::new(golden(GoldenKind::Cycle, config, dram).unwrap());
    LinkMachine::new(Faulty { device, faults, exchanges: 0, reset_seen: false }, config, dram)
}

#[test]
fn a_gemm_over_the_link_equals_the_cycle_machine() {
    for dtype in [Dtype::Int8, Dtype::Bf16] {
        let config = ArrayConfig::new(4, 4, dtype);
        // 300 x 40 x 70 INT8: 22 KB of DRAM traffic in 2 KB packets, and a program much
        // longer than the 64-word FIFO, streamed while it runs.
        let (plan, dram, a, b) = gemm_case(config, GemmShape { m: 300, k: 40, n: 70 });
        let mut reference = golden(GoldenKind::Cycle, config, dram).unwrap();
        let (want, want_stats) = run_gemm(reference.as_mut(), &plan, &a, &b).unwrap();
        let mut link = linked(config, dram, vec![]);
        let (got, stats) = run_gemm(&mut link, &plan, &a, &b).unwrap();
        assert!(plan.instruction_count() > 64);
        assert_bit_identical("link vs cycle", &want, &got, 70);
        assert_eq!(stats.cycles, want_stats.cycles, "cycle counter read back");
        assert_eq!(stats.macs, want_stats.macs);
        assert_eq!(link.retries, 0);
    }
}

/// Large transfers go in requests of the device's size: MAX_DATA bytes to today's RTL, and
/// BASE_DATA to a device from before large requests, which `identify` tells the link.
#[test]
fn transfers_go_in_requests_of_the_devices_size() {
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let dram = 16 * 1024;
    let data: Vec<u8> = (0..10_000).map(|i| (i * 7) as u8).collect();
    for (large, max) in [(true, MAX_DATA), (false, BASE_DATA)] {
        let device = Emulator::new(golden(GoldenKind::Cycle, config, dram).unwrap())
            .with_large_requests(large);
        let mut link = LinkMachine::new(device, config, dram);
        let id = link.identify(config.clock_mhz).unwrap();
        assert_eq!((id.large_requests, link.max_data()), (large, max));
        let before = link.traffic;
        link.write(systole_core::machine::Region::Dram, 0, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        link.read(systole_core::machine::Region::Dram, 0, &mut back).unwrap();
        assert_eq!(back, data);
        let requests = (link.traffic - before).requests;
        assert_eq!(requests as usize, 2 * data.len().div_ceil(max), "{max}");
    }
    // A link that sends a large request to a small device is refused, not misread.
    let small =
        Emulator::new(golden(GoldenKind::Cycle, config, dram).unwrap()).with_large_requests(false);
    let mut link = LinkMachine::new(small, config, dram);
    let err = link.write(systole_core::machine::Region::Dram, 0, &data).unwrap_err();
    assert_eq!(
        err,
        MachineError::Link(LinkFault::Refused(systole_core::protocol::ErrorCode::Length))
    );
}

#[test]
fn corrupted_and_lost_frames_are_retried_and_the_result_stays_exact() {
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let (plan, dram, a, b) = gemm_case(config, GemmShape { m: 20, k: 9, n: 7 });
    let mut reference = golden(GoldenKind::Cycle, config, dram).unwrap();
    let (want, _) = run_gemm(reference.as_mut(), &plan, &a, &b).unwrap();
    // Exchange 0 writes A (one packet), 1 writes B, 2 resets, 3 reads the status, 4.. upload.
    let faults = vec![
        Fault::CorruptRequest(7),
        Fault::DropResponse,
        Fault::None,
        Fault::None,
        Fault::CorruptResponse(3),
        Fault::CorruptRequest(20),
    ];
    let mut link = linked(config, dram, faults);
    let (got, _) = run_gemm(&mut link, &plan, &a, &b).unwrap();
    assert_bit_identical("faulty link vs cycle", &want, &got, 7);
    assert!(link.retries >= 3, "{} retries", link.retries);
}

#[test]
fn a_lost_answer_to_an_upload_before_run_is_recovered() {
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let (plan, dram, a, b) = gemm_case(config, GemmShape { m: 5, k: 5, n: 5 });
    // 0: write A, 1: write B, 2: reset, 3: status, 4: the first upload's answer is lost. Nothing
    // has run yet, so the client resets (emptying the FIFO) and uploads again.
    let faults = vec![Fault::None, Fault::None, Fault::None, Fault::None, Fault::TruncateResponse];
    let mut link = linked(config, dram, faults);
    let mut reference = golden(GoldenKind::Cycle, config, dram).unwrap();
    let (want, _) = run_gemm(reference.as_mut(), &plan, &a, &b).unwrap();
    let (got, _) = run_gemm(&mut link, &plan, &a, &b).unwrap();
    assert_bit_identical("recovered upload", &want, &got, 5);
    assert_eq!(link.retries, 1);
}

#[test]
fn a_lost_answer_to_an_upload_while_running_is_reported_not_guessed() {
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let (plan, dram, a, b) = gemm_case(config, GemmShape { m: 300, k: 40, n: 70 });
    // The packets of A and B, reset, status, four uploads fill the FIFO, run, a status poll,
    // then an upload while running.
    let packets = a.len().div_ceil(MAX_DATA) + b.len().div_ceil(MAX_DATA);
    assert_eq!(packets, 8, "12,000 and 2,800 bytes in requests of {MAX_DATA}");
    let mut faults = vec![Fault::None; packets + 8];
    faults.push(Fault::TruncateResponse);
    let mut link = linked(config, dram, faults);
    let err = run_gemm(&mut link, &plan, &a, &b).unwrap_err();
    assert_eq!(
        err,
        MachineError::Link(LinkFault::Unknown { command: "write_instructions" }),
        "{err}"
    );
    // The device resynchronises: the next run on the same link is exact.
    let mut reference = golden(GoldenKind::Cycle, config, dram).unwrap();
    let (want, _) = run_gemm(reference.as_mut(), &plan, &a, &b).unwrap();
    let (got, _) = run_gemm(&mut link, &plan, &a, &b).unwrap();
    assert_bit_identical("after resync", &want, &got, 70);
}

#[test]
fn a_reset_in_the_middle_of_a_run_is_an_error() {
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let (plan, dram, a, b) = gemm_case(config, GemmShape { m: 200, k: 40, n: 40 });
    let mut faults = vec![Fault::None; 200];
    // The packets of A and B, reset, status, four uploads, run: then a status poll.
    faults[a.len().div_ceil(MAX_DATA) + b.len().div_ceil(MAX_DATA) + 7] = Fault::ResetDevice;
    let mut link = linked(config, dram, faults);
    let err = run_gemm(&mut link, &plan, &a, &b).unwrap_err();
    assert!(
        matches!(
            err,
            MachineError::Link(LinkFault::Reset) | MachineError::Link(LinkFault::Refused(_))
        ),
        "{err}"
    );
}

#[test]
fn out_of_range_host_accesses_are_refused_locally() {
    let config = ArrayConfig::new(2, 2, Dtype::Int8);
    let mut link = linked(config, 64, vec![]);
    let err = link.write(systole_core::Region::Dram, 60, &[0; 8]).unwrap_err();
    assert!(matches!(err, MachineError::OutOfRange { size: 64, .. }), "{err}");
}

#[test]
fn identify_reports_the_config_the_device_was_built_for() {
    let bf16 = ArrayConfig::new(8, 4, Dtype::Bf16);
    let lean = ArrayConfig::new(4, 1, Dtype::Int8).with_convert_stages(3).with_requant_cycles(4);
    let paced = bf16.with_convert_stages(2).with_scale_cycles(2);
    let staged = paced.with_pe_stages(2).with_schedule(systole_core::Schedule::Decoupled);
    let added = paced.with_pe_stages(2).with_add_stages(2);
    let read = staged.with_read_stages(systole_core::MAX_READ_STAGES);
    for config in [bf16, lean, lean.with_convert_stages(0), paced, staged, added, read] {
        let mut link = linked(config, 4096, vec![]);
        let id = link.identify(config.clock_mhz).unwrap();
        assert_eq!(id.config, config);
        assert_eq!((id.isa_version, id.dram_bytes), (systole_core::isa::ISA_VERSION, 4096));
        assert!(id.fifo_depth >= 16);
    }
}

/// The active weights survive from one program to the next (DECISIONS 28): a program whose
/// first matmul does not swap uses the tile an earlier program swapped in, and `LinkMachine`
/// counts its MACs as the golden machines do, also after a program that faulted part-way.
#[test]
fn macs_count_the_weights_an_earlier_program_left_active() {
    use systole_core::isa::Instruction;
    let config = ArrayConfig::new(4, 4, Dtype::Int8);
    let mut reference = golden(GoldenKind::Cycle, config, 64).unwrap();
    let mut link = linked(config, 64, vec![]);
    let load = |rows, cols| Instruction::LoadWeights { spad_row: 0, rows, cols };
    let matmul =
        |swap| Instruction::Matmul { a_row: 4, acc_row: 0, rows: 3, swap, accumulate: false };
    let programs = [
        vec![load(3, 2), matmul(true), Instruction::Halt],
        vec![matmul(false), Instruction::Halt],
        // Swaps in a 4 x 1 tile, then faults at the second swap: the 4 x 1 tile stays active.
        vec![load(4, 1), matmul(true), matmul(true), Instruction::Halt],
        vec![matmul(false), matmul(false), Instruction::Halt],
    ];
    let mut macs = Vec::new();
    for program in &programs {
        let want = reference.run(program);
        let got = link.run(program);
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(g.macs, w.macs, "{program:?}");
                macs.push(g.macs);
            }
            (Err(w), Err(g)) => assert_eq!(g, w, "{program:?}"),
            _ => panic!("{program:?}: cycle machine {want:?}, link {got:?}"),
        }
    }
    assert_eq!(macs, [3 * 3 * 2, 3 * 3 * 2, 2 * 3 * 4]);
}

/// A device's answer, byte by byte, and nothing after it.
struct Replay(std::collections::VecDeque<u8>);

impl systole_core::link::ByteStream for Replay {
    fn write_all(&mut self, _: &[u8]) -> Result<(), TransportError> {
        Ok(())
    }
    fn read_byte(&mut self) -> Result<u8, TransportError> {
        self.0.pop_front().ok_or(TransportError::Timeout)
    }
}

/// A status answer whose length was corrupted to 1,000 (shorter than the largest frame since
/// requests grew to 2 KB, longer than any status): dropped at its header, for the caller to
/// retry, rather than waited on for bytes that never come (which cost the fault tests a run
/// that looked right and was not).
#[test]
fn an_answer_longer_than_its_request_can_get_is_dropped_at_its_header() {
    use systole_core::protocol::{encode_request, encode_response, Request, Response, MAX_FRAME};
    let status = [0u8; systole_core::protocol::STATUS_BYTES];
    let mut answer = [0u8; MAX_FRAME];
    let n = encode_response(&Response::Ok(&status), &mut answer).unwrap();
    let mut corrupted = answer[..n].to_vec();
    corrupted[2..4].copy_from_slice(&1000u16.to_le_bytes());
    let mut request = [0u8; MAX_FRAME];
    let r = encode_request(&Request::ReadStatus, &mut request).unwrap();
    let mut link = systole_core::link::Framed { stream: Replay(corrupted.clone().into()) };
    let mut got = [0u8; MAX_FRAME];
    assert_eq!(link.exchange(&request[..r], &mut got), Ok(4));
    // The same length answering a read of 1,000 bytes is read (and here runs out).
    let read =
        Request::ReadMemory { region: systole_core::machine::Region::Dram, addr: 0, len: 1000 };
    let r = encode_request(&read, &mut request).unwrap();
    let mut answer = corrupted.clone();
    answer.truncate(40);
    let mut link = systole_core::link::Framed { stream: Replay(answer.into()) };
    assert_eq!(link.exchange(&request[..r], &mut got), Err(TransportError::Timeout));
}
