//! Every driver call against embedded-hal-mock's expected SPI transactions, byte for byte, and
//! every error path. Each test ends with `done()` on its mocks.

use embedded_hal::spi::{ErrorKind, ErrorType, Operation, SpiDevice};
use embedded_hal_mock::eh1::delay::{CheckedDelay, NoopDelay, Transaction as Delay};
use embedded_hal_mock::eh1::spi::{Mock, Transaction as T};
use systole_core::isa::{encode, Instruction, Word, ISA_VERSION};
use systole_core::protocol::{
    encode_request, encode_response, Request, Response, BASE_FRAME, BASE_PAYLOAD, HEADER_BYTES,
    MAX_FRAME, SPI_IDLE,
};
use systole_core::{ArrayConfig, Dataflow, Dtype, Schedule};
use systole_firmware::{
    Error, ErrorCode, FaultCode, Identity, IdentityField, Options, Program, ProtocolError, Region,
    Status, Systole,
};

/// Small poll limits so that time-out paths are short to spell out.
const OPTIONS: Options = Options {
    clock_mhz: 12.0,
    response_polls: 3,
    response_poll_delay_us: 7,
    status_polls: 4,
    status_poll_delay_us: 50,
    tries: 3,
};

fn request_frame(req: &Request<'_>) -> Vec<u8> {
    let mut buf = [0u8; MAX_FRAME];
    let n = encode_request(req, &mut buf).unwrap();
    buf[..n].to_vec()
}

fn response_frame(resp: &Response<'_>) -> Vec<u8> {
    let mut buf = [0u8; MAX_FRAME];
    let n = encode_response(resp, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// One transaction writing `bytes` (a request).
fn send(bytes: Vec<u8>) -> Vec<T<u8>> {
    vec![T::transaction_start(), T::write_vec(bytes), T::transaction_end()]
}

/// One transaction clocking filler bytes while the device sends `miso`.
fn clock(miso: &[u8]) -> Vec<T<u8>> {
    vec![
        T::transaction_start(),
        T::transfer_in_place(vec![0; miso.len()], miso.to_vec()),
        T::transaction_end(),
    ]
}

/// A response read as the driver reads a ready one: the header in the first poll, the rest in
/// one more transaction.
fn receive(frame: &[u8]) -> Vec<T<u8>> {
    [clock(&frame[..HEADER_BYTES]), clock(&frame[HEADER_BYTES..])].concat()
}

/// A request answered at once.
fn exchange(req: &Request<'_>, resp: &Response<'_>) -> Vec<T<u8>> {
    [send(request_frame(req)), receive(&response_frame(resp))].concat()
}

fn ok(req: &Request<'_>) -> Vec<T<u8>> {
    exchange(req, &Response::Ok(&[]))
}

fn status_exchange(status: Status) -> Vec<T<u8>> {
    exchange(&Request::ReadStatus, &Response::Ok(&status.to_bytes()))
}

fn idle_status(fifo_free: u16) -> Status {
    Status { busy: false, done: false, fault: None, fifo_free, cycles: 0 }
}

fn busy_status(fifo_free: u16) -> Status {
    Status { busy: true, ..idle_status(fifo_free) }
}

fn identity() -> Identity {
    Identity {
        isa_version: ISA_VERSION,
        config: ArrayConfig { clock_mhz: 12.0, ..ArrayConfig::new(4, 4, Dtype::Int8) },
        dram_bytes: 1 << 16,
        fifo_depth: 64,
        program_checks: true,
        large_requests: false,
    }
}

fn driver(expect: &[T<u8>]) -> Systole<Mock<u8>, NoopDelay> {
    Systole::with_options(Mock::new(expect), NoopDelay::new(), OPTIONS)
}

fn finish<D>(d: Systole<Mock<u8>, D>) {
    let (mut spi, _) = d.release();
    spi.done();
}

fn finish_checked(d: Systole<Mock<u8>, CheckedDelay>) {
    let (mut spi, mut delay) = d.release();
    spi.done();
    delay.done();
}

/// `n` distinct valid instruction words.
fn words(n: usize) -> Vec<Word> {
    (0..n)
        .map(|i| {
            let ins = if i + 1 == n {
                Instruction::Halt
            } else {
                Instruction::LoadWeights { spad_row: i as u16, rows: 1, cols: 1 }
            };
            encode(&ins).unwrap()
        })
        .collect()
}

fn word_bytes(words: &[Word]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The encoding is pinned by hand-computed bytes, not only by core's encoder.
#[test]
fn read_status_sends_the_documented_bytes() {
    let status = Status { busy: true, done: false, fault: None, fifo_free: 9, cycles: 0x1234 };
    let payload = status.to_bytes();
    let expect = [
        send(vec![0xA5, 0x04, 0x00, 0x00, 0x10, 0x5C]),
        receive(&response_frame(&Response::Ok(&payload))),
    ]
    .concat();
    let mut d = driver(&expect);
    assert_eq!(d.read_status().unwrap(), status);
    finish(d);
}

#[test]
fn reset_reads_an_empty_ok() {
    let expect = [
        send(vec![0xA5, 0x06, 0x00, 0x00, 0x7E, 0x3C]),
        clock(&[0x5A, 0x00, 0x00, 0x00]),
        clock(&[0xCC, 0x9C]),
    ]
    .concat();
    let mut d = driver(&expect);
    d.reset().unwrap();
    finish(d);
}

#[test]
fn read_cycles_is_the_status_counter() {
    let status = Status { done: true, cycles: 987_654_321_000, ..idle_status(64) };
    let mut d = driver(&status_exchange(status));
    assert_eq!(d.read_cycles().unwrap(), 987_654_321_000);
    finish(d);
}

/// The device answers late: idle polls (with the poll delay between them), then the sync in
/// the middle of a poll; the rest of the header comes in its own transaction.
#[test]
fn polling_waits_for_the_sync_byte_wherever_it_lands() {
    let frame = response_frame(&Response::Ok(&[]));
    let expect = [
        send(request_frame(&Request::Reset)),
        clock(&[SPI_IDLE; 4]),
        clock(&[SPI_IDLE, SPI_IDLE, frame[0], frame[1]]),
        clock(&frame[2..4]),
        clock(&frame[4..]),
    ]
    .concat();
    let delays = [Delay::delay_us(7)];
    let mut d = Systole::with_options(Mock::new(&expect), CheckedDelay::new(&delays), OPTIONS);
    d.reset().unwrap();
    finish_checked(d);
}

#[test]
fn identify_accepts_the_expected_accelerator() {
    let id = identity();
    let mut d = driver(&exchange(&Request::Identify, &Response::Ok(&id.to_bytes())));
    assert_eq!(d.identify(&Identity { fifo_depth: 0, dram_bytes: 1000, ..id }).unwrap(), id);
    finish(d);
}

#[test]
fn identify_refuses_a_mismatch_naming_the_field() {
    let id = identity();
    let cases = [
        (
            Identity { isa_version: ISA_VERSION + 1, ..id },
            IdentityField::IsaVersion,
            ISA_VERSION as u32 + 1,
            ISA_VERSION as u32,
        ),
        (
            Identity { config: ArrayConfig { rows: 8, ..id.config }, ..id },
            IdentityField::Rows,
            8,
            4,
        ),
        (
            Identity { config: ArrayConfig { dtype: Dtype::Bf16, ..id.config }, ..id },
            IdentityField::Dtype,
            1,
            0,
        ),
        (
            Identity {
                config: ArrayConfig { dataflow: Dataflow::OutputStationary, ..id.config },
                ..id
            },
            IdentityField::Dataflow,
            1,
            0,
        ),
        (
            Identity { config: ArrayConfig { acc_depth: 512, ..id.config }, ..id },
            IdentityField::AccDepth,
            512,
            1024,
        ),
        (
            Identity { config: id.config.with_schedule(Schedule::Decoupled), ..id },
            IdentityField::Schedule,
            1,
            0,
        ),
        (Identity { dram_bytes: (1 << 16) + 1, ..id }, IdentityField::DramBytes, 65537, 65536),
    ];
    for (expected, field, e, f) in cases {
        let mut d = driver(&exchange(&Request::Identify, &Response::Ok(&id.to_bytes())));
        let err = d.identify(&expected).unwrap_err();
        assert_eq!(err, Error::Mismatch { field, expected: e, found: f }, "{field:?}");
        finish(d);
    }
    // The INT8 comparator, like the DRAM, is what the accelerator must have at least.
    let without = Identity { config: id.config.with_int8_max(false), ..id };
    let mut d = driver(&exchange(&Request::Identify, &Response::Ok(&without.to_bytes())));
    let err = d.identify(&id).unwrap_err();
    let field = IdentityField::Int8Max;
    assert_eq!(err, Error::Mismatch { field, expected: 1, found: 0 });
    finish(d);
    let mut d = driver(&exchange(&Request::Identify, &Response::Ok(&id.to_bytes())));
    assert_eq!(d.identify(&without).unwrap(), id);
    finish(d);
}

#[test]
fn a_malformed_identity_is_a_protocol_error() {
    let mut bytes = identity().to_bytes();
    bytes[6] = 16; // no such flag beside the dtype
    let mut d = driver(&exchange(&Request::Identify, &Response::Ok(&bytes)));
    assert_eq!(d.read_identity().unwrap_err(), Error::Protocol(ProtocolError::Field));
    finish(d);
}

#[test]
fn write_memory_is_chunked_by_max_data() {
    let data: Vec<u8> = (0..600u32).map(|i| (i * 7) as u8).collect();
    let region = Region::Dram;
    let expect = [
        ok(&Request::WriteMemory { region, addr: 1000, data: &data[..256] }),
        ok(&Request::WriteMemory { region, addr: 1256, data: &data[256..512] }),
        ok(&Request::WriteMemory { region, addr: 1512, data: &data[512..] }),
    ]
    .concat();
    let mut d = driver(&expect);
    d.write_memory(region, 1000, &data).unwrap();
    finish(d);
}

#[test]
fn read_memory_is_chunked_and_copied() {
    let data: Vec<u8> = (0..300u32).map(|i| (i * 13 + 5) as u8).collect();
    let region = Region::Acc;
    let expect = [
        exchange(&Request::ReadMemory { region, addr: 64, len: 256 }, &Response::Ok(&data[..256])),
        exchange(&Request::ReadMemory { region, addr: 320, len: 44 }, &Response::Ok(&data[256..])),
    ]
    .concat();
    let mut d = driver(&expect);
    let mut out = vec![0u8; 300];
    d.read_memory(region, 64, &mut out).unwrap();
    assert_eq!(out, data);
    finish(d);
}

#[test]
fn a_short_read_answer_is_a_protocol_error() {
    let region = Region::Spad;
    let expect =
        exchange(&Request::ReadMemory { region, addr: 0, len: 8 }, &Response::Ok(&[1, 2, 3]));
    let mut d = driver(&expect);
    let mut out = [0u8; 8];
    assert_eq!(d.read_memory(region, 0, &mut out), Err(Error::Protocol(ProtocolError::Field)));
    finish(d);
}

#[test]
fn an_access_past_4_gib_is_refused_before_anything_is_sent() {
    let data = [0u8; 301];
    let region = Region::Dram;
    // Up to the last byte of the address space is a valid request (the device judges it).
    let at = u32::MAX - 299;
    let expect = [
        ok(&Request::WriteMemory { region, addr: at, data: &data[..256] }),
        ok(&Request::WriteMemory { region, addr: at + 256, data: &data[256..300] }),
    ]
    .concat();
    let mut d = driver(&expect);
    d.write_memory(region, at, &data[..300]).unwrap();
    assert_eq!(d.write_memory(region, at, &data), Err(Error::Device(ErrorCode::OutOfRange)));
    let mut out = [0u8; 2];
    assert_eq!(
        d.read_memory(region, u32::MAX, &mut out),
        Err(Error::Device(ErrorCode::OutOfRange))
    );
    finish(d);
}

/// `write_program` queues only what `fifo_free` allows, MAX_WORDS per request.
#[test]
fn write_program_honours_fifo_free() {
    let w = words(40);
    let bytes = word_bytes(&w);
    let expect = [
        status_exchange(idle_status(20)),
        ok(&Request::WriteInstructions(&bytes[..16 * 16])),
        ok(&Request::WriteInstructions(&bytes[16 * 16..20 * 16])),
    ]
    .concat();
    let mut d = driver(&expect);
    assert_eq!(d.write_program(&w[..], 0).unwrap(), 20);
    finish(d);

    // From the middle, as raw bytes, with room for everything left.
    let expect =
        [status_exchange(idle_status(64)), ok(&Request::WriteInstructions(&bytes[30 * 16..]))]
            .concat();
    let mut d = driver(&expect);
    assert_eq!(d.write_program(Program::Bytes(&bytes), 30).unwrap(), 40);
    finish(d);
}

#[test]
fn a_partial_word_is_refused_before_anything_is_sent() {
    let mut d = driver(&[]);
    let e = d.write_program(&[0u8; 20][..], 0).unwrap_err();
    assert_eq!(e, Error::Buffer { what: "program bytes", expected: 32, got: 20 });
    let e = d.run_program(&[][..] as &[Word]).unwrap_err();
    assert_eq!(e, Error::Buffer { what: "program bytes", expected: 16, got: 0 });
    finish(d);
}

/// `run` then `wait_done`: status polls with the status delay between them.
#[test]
fn run_then_wait_done_returns_the_cycles() {
    let done = Status { done: true, cycles: 4242, ..idle_status(64) };
    let expect = [
        ok(&Request::Run),
        status_exchange(busy_status(64)),
        status_exchange(busy_status(64)),
        status_exchange(done),
    ]
    .concat();
    let delays = [Delay::delay_us(50), Delay::delay_us(50)];
    let mut d = Systole::with_options(Mock::new(&expect), CheckedDelay::new(&delays), OPTIONS);
    d.run().unwrap();
    assert_eq!(d.wait_done().unwrap(), done);
    finish_checked(d);
}

#[test]
fn wait_done_times_out_after_its_polls() {
    let expect: Vec<T<u8>> = (0..4).flat_map(|_| status_exchange(busy_status(64))).collect();
    let delays = [Delay::delay_us(50), Delay::delay_us(50), Delay::delay_us(50)];
    let mut d = Systole::with_options(Mock::new(&expect), CheckedDelay::new(&delays), OPTIONS);
    assert_eq!(d.wait_done(), Err(Error::Timeout));
    finish_checked(d);
}

#[test]
fn a_fault_code_stops_the_wait() {
    let faulted = Status { fault: Some(FaultCode::Range), ..busy_status(64) };
    let expect = [status_exchange(busy_status(64)), status_exchange(faulted)].concat();
    let mut d = driver(&expect);
    assert_eq!(d.wait_done(), Err(Error::Fault(FaultCode::Range)));
    finish(d);
}

/// The whole sequence: reset, fill the FIFO, run, top it up from `fifo_free` while polling.
#[test]
fn run_program_keeps_the_fifo_fed() {
    let w = words(20);
    let b = word_bytes(&w);
    let done = Status { done: true, cycles: 777, ..idle_status(8) };
    let expect = [
        ok(&Request::Reset),
        status_exchange(idle_status(8)),
        ok(&Request::WriteInstructions(&b[..8 * 16])),
        ok(&Request::Run),
        status_exchange(busy_status(8)),
        ok(&Request::WriteInstructions(&b[8 * 16..16 * 16])),
        status_exchange(busy_status(3)),
        ok(&Request::WriteInstructions(&b[16 * 16..19 * 16])),
        status_exchange(busy_status(5)),
        ok(&Request::WriteInstructions(&b[19 * 16..])),
        status_exchange(done),
    ]
    .concat();
    let mut d = driver(&expect);
    assert_eq!(d.run_program(&w[..]).unwrap(), done);
    finish(d);
}

/// An accelerator built without its program checks leaves them to the driver once it has read
/// its identity: a word past the scratchpad's end is refused with the fault a checking device
/// gives it, before anything of the program is sent; a valid program runs as on any device,
/// and a checking device's driver sends words unchecked, as before.
#[test]
fn the_driver_checks_the_words_of_an_accelerator_without_program_checks() {
    let lean = Identity { program_checks: false, ..identity() };
    let mut bad = words(3);
    let deep =
        Instruction::LoadWeights { spad_row: lean.config.spad_depth as u16, rows: 1, cols: 1 };
    bad[1] = encode(&deep).unwrap();
    let good = words(2);
    let b = word_bytes(&good);
    let done = Status { done: true, cycles: 5, ..idle_status(8) };
    let expect = [
        exchange(&Request::Identify, &Response::Ok(&lean.to_bytes())),
        ok(&Request::Reset),
        status_exchange(idle_status(8)),
        ok(&Request::WriteInstructions(&b)),
        ok(&Request::Run),
        status_exchange(done),
    ]
    .concat();
    let mut d = driver(&expect);
    assert_eq!(d.read_identity().unwrap(), lean);
    let err = d.run_program(&bad[..]).unwrap_err();
    assert_eq!(err, Error::Invalid { index: 1, code: FaultCode::Range });
    assert!(err.to_string().contains("program word 1"), "{err}");
    assert_eq!(
        d.write_program(&bad[..], 0),
        Err(Error::Invalid { index: 1, code: FaultCode::Range })
    );
    assert_eq!(d.run_program(&good[..]).unwrap(), done);
    finish(d);
    // A checking accelerator's driver leaves the checks to it.
    let checked = identity();
    let bb = word_bytes(&bad);
    let expect = [
        exchange(&Request::Identify, &Response::Ok(&checked.to_bytes())),
        status_exchange(idle_status(8)),
        ok(&Request::WriteInstructions(&bb)),
    ]
    .concat();
    let mut d = driver(&expect);
    d.read_identity().unwrap();
    assert_eq!(d.write_program(&bad[..], 0).unwrap(), 3);
    finish(d);
}

/// A corrupted answer to an upload before `Run`: nothing has executed, so the driver resets
/// (emptying the FIFO) and uploads again.
#[test]
fn a_lost_upload_answer_before_run_is_recovered_by_resetting() {
    let w = words(3);
    let b = word_bytes(&w);
    let mut garbled = response_frame(&Response::Ok(&[]));
    garbled[5] ^= 0x40;
    let done = Status { done: true, cycles: 12, ..idle_status(64) };
    let expect = [
        ok(&Request::Reset),
        status_exchange(idle_status(64)),
        send(request_frame(&Request::WriteInstructions(&b))),
        receive(&garbled),
        ok(&Request::Reset),
        status_exchange(idle_status(64)),
        ok(&Request::WriteInstructions(&b)),
        ok(&Request::Run),
        status_exchange(done),
    ]
    .concat();
    let mut d = driver(&expect);
    assert_eq!(d.run_program(&w[..]).unwrap(), done);
    finish(d);
}

/// A lost answer to `Run` is resolved by the status: busy means it started, so no second `Run`.
#[test]
fn a_lost_run_answer_is_resolved_by_the_status() {
    let w = words(2);
    let b = word_bytes(&w);
    let mut garbled = response_frame(&Response::Ok(&[]));
    garbled[1] = 0x01; // kind 1 with this CRC: a checksum mismatch
    let done = Status { done: true, cycles: 5, ..idle_status(64) };
    let expect = [
        ok(&Request::Reset),
        status_exchange(idle_status(64)),
        ok(&Request::WriteInstructions(&b)),
        send(request_frame(&Request::Run)),
        receive(&garbled),
        status_exchange(busy_status(64)),
        status_exchange(done),
    ]
    .concat();
    let mut d = driver(&expect);
    assert_eq!(d.run_program(&w[..]).unwrap(), done);
    finish(d);
}

/// `Run` on its own is never repeated blindly: a corrupted answer is reported.
#[test]
fn a_corrupted_answer_to_run_is_reported_not_retried() {
    let mut garbled = response_frame(&Response::Ok(&[]));
    garbled[4] ^= 1;
    let expect = [send(request_frame(&Request::Run)), receive(&garbled)].concat();
    let mut d = driver(&expect);
    assert_eq!(d.run(), Err(Error::Checksum));
    finish(d);
}

/// A response whose CRC does not match is retried (status is idempotent), then reported.
#[test]
fn a_bad_response_checksum_is_retried_then_reported() {
    let good = response_frame(&Response::Ok(&busy_status(7).to_bytes()));
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 0x10;
    let request = request_frame(&Request::ReadStatus);
    let attempt = |frame: &[u8]| [send(request.clone()), receive(frame)].concat();

    let mut d = driver(&[attempt(&bad), attempt(&good)].concat());
    assert_eq!(d.read_status().unwrap(), busy_status(7));
    finish(d);

    let mut d = driver(&[attempt(&bad), attempt(&bad), attempt(&bad)].concat());
    assert_eq!(d.read_status(), Err(Error::Checksum));
    finish(d);
}

/// The device refusing our request as corrupted means it did not execute it: resend, even a
/// non-idempotent one.
#[test]
fn a_checksum_refusal_resends_the_request() {
    let w = words(1);
    let b = word_bytes(&w);
    let req = Request::WriteInstructions(&b);
    let expect = [exchange(&req, &Response::Err(ErrorCode::Checksum)), ok(&req)].concat();
    let mut d = driver(&expect);
    d.write_instructions(&b).unwrap();
    finish(d);

    let expect: Vec<T<u8>> =
        (0..3).flat_map(|_| exchange(&req, &Response::Err(ErrorCode::Checksum))).collect();
    let mut d = driver(&expect);
    assert_eq!(d.write_instructions(&b), Err(Error::Device(ErrorCode::Checksum)));
    finish(d);
}

#[test]
fn a_device_error_code_is_reported_at_once() {
    let data = [1u8, 2, 3, 4];
    let req = Request::WriteMemory { region: Region::Acc, addr: 2, data: &data };
    let expect = exchange(&req, &Response::Err(ErrorCode::Misaligned));
    let mut d = driver(&expect);
    assert_eq!(d.write_memory(Region::Acc, 2, &data), Err(Error::Device(ErrorCode::Misaligned)));
    finish(d);

    let expect = exchange(&Request::Run, &Response::Err(ErrorCode::Busy));
    let mut d = driver(&expect);
    assert_eq!(d.run(), Err(Error::Device(ErrorCode::Busy)));
    finish(d);
}

/// A device that never leaves SPI_IDLE: `response_polls` polls (delays between them) per try,
/// three tries of an idempotent request, then a time-out.
#[test]
fn a_silent_device_times_out() {
    let request = request_frame(&Request::Identify);
    let one_try =
        [send(request), clock(&[SPI_IDLE; 4]), clock(&[SPI_IDLE; 4]), clock(&[SPI_IDLE; 4])]
            .concat();
    let expect = [one_try.clone(), one_try.clone(), one_try].concat();
    let delays: Vec<Delay> = (0..6).map(|_| Delay::delay_us(7)).collect();
    let mut d = Systole::with_options(Mock::new(&expect), CheckedDelay::new(&delays), OPTIONS);
    assert_eq!(d.read_identity(), Err(Error::Timeout));
    finish_checked(d);
}

/// A garbled first byte: the rest of that frame is drained before the request is sent again.
#[test]
fn a_bad_sync_byte_is_drained_and_retried() {
    let frame = response_frame(&Response::Ok(&[]));
    let expect = [
        send(request_frame(&Request::Reset)),
        clock(&[SPI_IDLE, 0x13, 0x00, 0x00]),
        clock(&[SPI_IDLE; BASE_FRAME]),
        send(request_frame(&Request::Reset)),
        receive(&frame),
    ]
    .concat();
    let mut d = driver(&expect);
    d.reset().unwrap();
    finish(d);
}

/// A header announcing more than a frame can hold: drained, retried, reported.
#[test]
fn an_impossible_length_is_a_protocol_error() {
    let one_try = [
        send(request_frame(&Request::ReadStatus)),
        clock(&[0x5A, 0x00, 0xFF, 0x7F]),
        clock(&[SPI_IDLE; BASE_FRAME]),
    ]
    .concat();
    let expect = [one_try.clone(), one_try.clone(), one_try].concat();
    let mut d = driver(&expect);
    assert_eq!(
        d.read_status(),
        Err(Error::Protocol(ProtocolError::TooLong { len: 0x7FFF, max: BASE_PAYLOAD }))
    );
    finish(d);
}

/// An `SpiDevice` whose `fail_at`-th transaction (1-based) reports a bus error after the mock
/// has checked it.
struct FailingBus {
    mock: Mock<u8>,
    fail_at: usize,
    count: usize,
}

impl ErrorType for FailingBus {
    type Error = ErrorKind;
}

impl SpiDevice for FailingBus {
    fn transaction(&mut self, ops: &mut [Operation<'_, u8>]) -> Result<(), ErrorKind> {
        let r = self.mock.transaction(ops);
        self.count += 1;
        if self.count == self.fail_at {
            return Err(ErrorKind::Overrun);
        }
        r
    }
}

/// A bus error is reported as `Spi(e)` at once: nothing is retried over a failing bus.
#[test]
fn a_bus_error_is_reported_at_once() {
    for fail_at in 1..=3 {
        let frame = response_frame(&Response::Ok(&busy_status(1).to_bytes()));
        let all = [send(request_frame(&Request::ReadStatus)), receive(&frame)].concat();
        let expect = &all[..3 * fail_at];
        let bus = FailingBus { mock: Mock::new(expect), fail_at, count: 0 };
        let mut d = Systole::with_options(bus, NoopDelay::new(), OPTIONS);
        assert_eq!(d.read_status(), Err(Error::Spi(ErrorKind::Overrun)), "transaction {fail_at}");
        let (mut bus, _) = d.release();
        bus.mock.done();
    }
}

#[test]
fn errors_read_as_sentences() {
    let e: Error<ErrorKind> = Error::Mismatch { field: IdentityField::Rows, expected: 8, found: 4 };
    assert_eq!(e.to_string(), "the accelerator's rows is 4, expected 8");
    let e: Error<ErrorKind> = Error::Buffer { what: "logits", expected: 10, got: 9 };
    assert_eq!(e.to_string(), "logits has 9 elements, expected 10");
}

#[test]
fn program_lengths_count_whole_words() {
    let w = words(3);
    let b = word_bytes(&w);
    assert_eq!(Program::from(&w[..]).len(), 3);
    assert_eq!(Program::from(&b[..]).len(), 3);
    assert!(Program::Bytes(&b[..15]).is_empty());
}

/// `run_inference` of a blob, request by request: identify, the DRAM image, the quantized
/// input, the program through the FIFO, `Run`, the status, the logits (dequantized).
#[test]
fn run_inference_sends_the_blob_the_input_and_reads_the_logits() {
    use systole_core::blob::{self, Blob};
    use systole_core::compile::Int8Plan;
    use systole_core::graph::{Graph, MlpSpec};
    use systole_core::params::Params;
    use systole_firmware::Input;

    let spec = MlpSpec { inputs: 3, hidden: heapless::Vec::new(), classes: 2 };
    let params = Params::init(&spec, 3);
    let x = [0.25f32, -0.5, 1.0];
    let plan = Int8Plan::calibrate(&Graph::mlp(&spec).unwrap(), &params, &x, 1).unwrap();
    let config = identity().config;
    let bytes = blob::build(&spec.net().unwrap(), &params, &config, 1, Some(&plan), 1.0).unwrap();
    let blob = Blob::parse(&bytes).unwrap();
    let id = Identity { dram_bytes: blob.target.dram_bytes + 64, ..identity() };

    let mut expect = exchange(&Request::Identify, &Response::Ok(&id.to_bytes()));
    for w in blob.writes() {
        for (i, chunk) in w.data.chunks(256).enumerate() {
            let addr = w.addr + 256 * i as u32;
            expect.extend(ok(&Request::WriteMemory { region: Region::Dram, addr, data: chunk }));
        }
    }
    let input = plan.input_bytes(&x);
    expect.extend(ok(&Request::WriteMemory {
        region: Region::Dram,
        addr: blob.input.addr,
        data: &input,
    }));
    expect.extend(ok(&Request::Reset));
    expect.extend(status_exchange(idle_status(64)));
    for chunk in blob.program().chunks(16 * 16) {
        expect.extend(ok(&Request::WriteInstructions(chunk)));
    }
    expect.extend(ok(&Request::Run));
    expect.extend(status_exchange(Status { done: true, cycles: 1234, ..idle_status(64) }));
    let words: Vec<u8> = [-5i32, 7].iter().flat_map(|w| w.to_le_bytes()).collect();
    expect.extend(exchange(
        &Request::ReadMemory { region: Region::Dram, addr: blob.logits.addr, len: 8 },
        &Response::Ok(&words),
    ));

    let mut d = driver(&expect);
    let mut logits = [0f32; 2];
    assert_eq!(d.run_inference(&blob, Input::F32(&x), &mut logits).unwrap(), 1234);
    let scale = plan.logits_scale();
    assert_eq!(logits, [-5.0 * scale, 7.0 * scale]);
    finish(d);
}
