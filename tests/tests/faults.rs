//! Fault injection against the RTL, through the co-simulation: the emitted accelerator,
//! Verilated, behind its UART, with faults put on the wire and into what it is sent.
//!
//! * Bytes dropped, duplicated, flipped, and frames cut short, on the UART in both directions
//!   ([`Noisy`], a `ByteStream` around `UartLink` that damages one exchange in three from a
//!   seed), under `LinkMachine`'s reads, writes and program runs.
//! * Bits flipped in instruction words that reach the device in valid frames.
//! * Addresses outside the memories, in memory requests and in instructions.
//! * The reset pin pulsed while a program runs.
//!
//! For every fault: the host sees an error (a time-out, a bad frame, a refusal with its
//! [`ErrorCode`], a fault code, `LinkFault::Reset`) or the fault had no effect; no operation
//! returns a wrong result; memory outside the failing transfer is unchanged; and after the
//! device's frame time-out (1,024 byte times, DECISIONS 25) the next correct command is answered
//! at the first try. Each test prints its row of the table in docs/ROBUSTNESS.md
//! (`cargo test -p systole-tests --test systole faults -- --nocapture`).

use systole_core::isa::{decode, encode, Instruction, Word};
use systole_core::link::{ByteStream, Framed, LinkMachine, Transport, TransportError};
use systole_core::machine::{check_instruction, golden, GoldenKind, ProgramErrorKind, Region};
use systole_core::protocol::{
    self, parse_response, ErrorCode, FaultCode, Request, Response, Status, MAX_FRAME,
};
use systole_core::{ArrayConfig, Dataflow, Dtype, Machine, MachineError};
use systole_hdl::TopConfig;
use systole_sim::UartLink;
use systole_tests::{random_program, SplitMix};

use crate::cosim::{small, verilated};

const REGIONS: [Region; 3] = [Region::Dram, Region::Spad, Region::Acc];

/// Byte times after which the device drops a stalled frame (DECISIONS 25), with a margin.
const FRAME_TIMEOUT_BYTES: u64 = 1_100;

/// The machine every test uses: a 2 x 3 BF16 array with memories of a few hundred bytes, so a
/// whole-memory comparison after every operation is quick (cosim.rs uses it too, so its
/// Verilated model is usually cached).
fn top() -> TopConfig {
    small(2, 3, Dtype::Bf16, Dataflow::WeightStationary)
}

/// What [`Noisy`] does to a damaged exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ByteFault {
    /// One byte of the request or of the response is lost.
    Drop,
    /// One byte is received twice.
    Duplicate,
    /// One bit of one byte is flipped.
    Flip,
    /// The request, or the response, stops part-way.
    Truncate,
}

/// A `UartLink` whose bytes are damaged: while `enabled`, one exchange (request and response)
/// in `every` gets one `fault`, in the request or the response, at a byte drawn from `rng`.
/// It can also pulse the device's reset pin before the `reset_at`-th request it sends.
struct Noisy {
    link: UartLink,
    rng: SplitMix,
    fault: ByteFault,
    every: u64,
    enabled: bool,
    /// The fault planned for the response being read: at which byte.
    response_fault: Option<usize>,
    read: usize,
    /// A response byte to be read a second time.
    repeat: Option<u8>,
    /// The response is being swallowed (its tail is cut).
    swallowing: bool,
    /// Faults injected and not yet seen to fail an exchange or to have passed harmlessly.
    /// Each with the exchanges that succeeded since, and where it was put.
    pending: Vec<(u64, String)>,
    injected: u64,
    /// Requests sent since the last `arm_reset`; the reset pulse comes before request `reset_at`.
    requests: u64,
    reset_at: Option<u64>,
    reset_seen: bool,
    resets: u64,
}

impl Noisy {
    fn new(link: UartLink, fault: ByteFault, seed: u64) -> Noisy {
        Noisy {
            link,
            rng: SplitMix(seed),
            fault,
            every: 3,
            enabled: false,
            response_fault: None,
            read: 0,
            repeat: None,
            swallowing: false,
            pending: Vec::new(),
            injected: 0,
            requests: 0,
            reset_at: None,
            reset_seen: false,
            resets: 0,
        }
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn inject(&mut self, place: String) {
        self.injected += 1;
        self.pending.push((0, place));
    }

    /// Holds the reset pin for a few cycles, as a board's button does.
    fn pulse_reset(&mut self) {
        let model = self.link.top.model();
        let pin = model.port("reset").expect("systole_top has a reset pin");
        model.set(pin, &[1]).expect("reset is an input");
        model.tick(4);
        model.set(pin, &[0]).expect("reset is an input");
        model.tick(4);
        self.reset_seen = true;
        self.resets += 1;
    }

    /// Steps the device with the line idle for `byte_times`, then forgets what it sent.
    fn idle(&mut self, byte_times: u64) {
        for _ in 0..byte_times * 10 * 4 {
            self.link.top.step();
        }
        self.link.discard_input();
    }
}

impl ByteStream for Noisy {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        self.requests += 1;
        if self.reset_at == Some(self.requests) {
            self.pulse_reset();
        }
        self.response_fault = None;
        self.read = 0;
        self.repeat = None;
        self.swallowing = false;
        if !self.enabled || self.below(self.every) != 0 {
            return self.link.write_all(bytes);
        }
        if self.below(2) == 0 {
            // The response: somewhere in its 6-byte minimum (header and CRC).
            let at = self.below(6) as usize;
            self.response_fault = Some(at);
            self.inject(format!("response byte {at}"));
            return self.link.write_all(bytes);
        }
        let at = self.below(bytes.len() as u64) as usize;
        self.inject(format!("request byte {at} of {}", bytes.len()));
        let mut sent = bytes.to_vec();
        match self.fault {
            ByteFault::Drop => {
                sent.remove(at);
            }
            ByteFault::Duplicate => sent.insert(at, bytes[at]),
            ByteFault::Flip => sent[at] ^= 1 << self.below(8),
            ByteFault::Truncate => sent.truncate(at.max(1)),
        }
        self.link.write_all(&sent)
    }

    fn read_byte(&mut self) -> Result<u8, TransportError> {
        if let Some(b) = self.repeat.take() {
            return Ok(b);
        }
        if self.swallowing {
            // What the device still sends is lost: wait until it has finished.
            while self.link.read_byte().is_ok() {}
            return Err(TransportError::Timeout);
        }
        let i = self.read;
        self.read += 1;
        if self.response_fault != Some(i) {
            return self.link.read_byte();
        }
        match self.fault {
            ByteFault::Drop => {
                self.link.read_byte()?;
                self.link.read_byte()
            }
            ByteFault::Duplicate => {
                let b = self.link.read_byte()?;
                self.repeat = Some(b);
                Ok(b)
            }
            ByteFault::Flip => {
                let b = self.link.read_byte()?;
                Ok(b ^ 1 << self.below(8))
            }
            ByteFault::Truncate => {
                self.swallowing = true;
                self.read_byte()
            }
        }
    }

    fn discard_input(&mut self) {
        self.link.discard_input();
    }

    fn was_reset(&mut self) -> bool {
        std::mem::take(&mut self.reset_seen)
    }
}

/// A transport that sorts the injected faults: one that fails an exchange (a time-out, a
/// response that is not a frame, a refusal) is detected; one after which two exchanges in a row
/// succeed had no effect on the link.
struct Observed {
    inner: Framed<Noisy>,
    detected: u64,
    harmless: Vec<String>,
    /// Exchanges that failed (one fault may fail several: a retry that meets the rest of a
    /// frame the device is still waiting for fails too).
    failed: u64,
}

impl Observed {
    fn noisy(&mut self) -> &mut Noisy {
        &mut self.inner.stream
    }
}

impl Transport for Observed {
    fn exchange(&mut self, request: &[u8], response: &mut [u8]) -> Result<usize, TransportError> {
        let result = self.inner.exchange(request, response);
        let failed = match result {
            Err(_) => true,
            Ok(n) => !matches!(parse_response(&response[..n]), Ok(Response::Ok(_))),
        };
        let pending = &mut self.inner.stream.pending;
        if failed {
            self.failed += 1;
            self.detected += pending.len() as u64;
            pending.clear();
        } else {
            pending.iter_mut().for_each(|(clean, _)| *clean += 1);
            for (_, place) in pending.iter().filter(|(clean, _)| *clean >= 2) {
                self.harmless.push(place.clone());
            }
            pending.retain(|(clean, _)| *clean < 2);
        }
        result
    }

    fn was_reset(&mut self) -> bool {
        self.inner.was_reset()
    }
}

type Device = LinkMachine<Observed>;

/// The RTL of `top` behind a `Noisy` UART (quiet until enabled), and a cycle machine beside it
/// holding the same random memories.
fn device_and_golden(top: &TopConfig, fault: ByteFault, seed: u64) -> (Device, Box<dyn Machine>) {
    let noisy = Noisy::new(UartLink::new(verilated(top), 4), fault, seed);
    let observed =
        Observed { inner: Framed { stream: noisy }, detected: 0, harmless: Vec::new(), failed: 0 };
    let mut device =
        LinkMachine::new(observed, top.array, top.dram_bytes).with_max_data(top.max_data());
    device.max_polls = 100;
    let mut reference = golden(GoldenKind::Cycle, top.array, top.dram_bytes).unwrap();
    let mut rng = SplitMix(seed ^ 0x5eed);
    for region in REGIONS {
        let bytes: Vec<u8> =
            (0..reference.region_size(region)).map(|_| rng.next_u64() as u8).collect();
        reference.write(region, 0, &bytes).unwrap();
        device.write(region, 0, &bytes).expect("a quiet link writes");
    }
    (device, reference)
}

/// Every memory, in `REGIONS` order.
fn snapshot(m: &mut dyn Machine) -> Vec<Vec<u8>> {
    REGIONS
        .iter()
        .map(|&region| {
            let mut bytes = vec![0u8; m.region_size(region)];
            m.read(region, 0, &mut bytes)
                .unwrap_or_else(|e| panic!("reading {} of the {}: {e}", region.name(), m.name()));
            bytes
        })
        .collect()
}

fn restore(m: &mut dyn Machine, memories: &[Vec<u8>]) {
    for (&region, bytes) in REGIONS.iter().zip(memories) {
        m.write(region, 0, bytes).unwrap();
    }
}

/// Gives both machines the same active weights (spad rows 0.. swapped in), leaving their
/// memories as they were. The active weights outlive a program (DECISIONS 28), so after a
/// program ran on one machine and not the other, a later non-swapping matmul would differ.
fn sync_weights(top: &TopConfig, machines: [&mut dyn Machine; 2]) {
    let (rows, cols) = (top.array.rows, top.array.cols);
    let program = [
        Instruction::LoadWeights { spad_row: 0, rows, cols },
        Instruction::Matmul { a_row: 0, acc_row: 0, rows: 1, swap: true, accumulate: false },
        Instruction::Halt,
    ];
    for m in machines {
        let memories = snapshot(m);
        m.run(&program).unwrap_or_else(|e| panic!("weights on the {}: {e}", m.name()));
        restore(m, &memories);
    }
}

/// Where two snapshots first differ, for messages.
fn first_difference(a: &[Vec<u8>], b: &[Vec<u8>]) -> String {
    for ((region, x), y) in REGIONS.iter().zip(a).zip(b) {
        if let Some(at) = x.iter().zip(y).position(|(p, q)| p != q) {
            return format!("{} byte {at}: {:#04x} vs {:#04x}", region.name(), x[at], y[at]);
        }
    }
    "nowhere".into()
}

/// After a failed operation: the line idles past the device's frame time-out, and then the
/// next correct command (a status read, on a quiet link) is answered at the first try.
fn next_command_works(device: &mut Device, what: &str) {
    device.transport.noisy().enabled = false;
    device.transport.noisy().idle(FRAME_TIMEOUT_BYTES);
    let retries = device.retries;
    let status = device.status();
    assert!(status.is_ok(), "{what}: the device did not answer the next status read: {status:?}");
    assert_eq!(device.retries, retries, "{what}: the next command needed a retry");
}

/// One row of the table in docs/ROBUSTNESS.md.
#[derive(Debug, Default)]
struct Row {
    injected: u64,
    detected: u64,
    harmless: u64,
    /// Operations that succeeded after `LinkMachine` retried.
    recovered: u64,
    /// Operations that returned an error (and were followed by the device resynchronising).
    reported: u64,
    /// Operations that returned a wrong result, or memories that changed where they must not.
    silent: u64,
    first_silent: Option<String>,
    failed_exchanges: u64,
    /// Where the faults that had no effect were put.
    harmless_at: Vec<String>,
}

impl Row {
    fn silent(&mut self, what: String) {
        self.silent += 1;
        self.first_silent.get_or_insert(what);
    }

    fn print(&self, kind: &str) {
        println!(
            "| {kind} | {} | {} | {} | {} | {} | {} |",
            self.injected, self.detected, self.harmless, self.recovered, self.reported, self.silent
        );
    }
}

/// `ops` random reads, writes and program runs through a link damaged by `fault`, each checked
/// against the cycle machine, and every memory compared after each.
fn byte_faults(fault: ByteFault, ops: usize, seed: u64) -> Row {
    let top = top();
    let (mut device, mut reference) = device_and_golden(&top, fault, seed);
    let mut rng = SplitMix(seed);
    let mut row = Row::default();
    for op in 0..ops {
        let before = snapshot(reference.as_mut());
        let retries = device.retries;
        device.transport.noisy().enabled = true;
        let region = REGIONS[(rng.next_u64() % 3) as usize];
        let size = reference.region_size(region);
        // Transfers are whole accumulator words and scratchpad elements.
        let align = match region {
            Region::Acc => 4,
            Region::Spad => top.array.dtype.elem_bytes(),
            Region::Dram => 1,
        };
        let len = (1 + rng.next_u64() as usize % 64.min(size / align)) * align;
        let addr = rng.next_u64() as usize % ((size - len) / align + 1) * align;
        let (what, result) = match rng.next_u64() % 3 {
            0 => {
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                reference.write(region, addr, &data).unwrap();
                let r = device.write(region, addr, &data);
                (format!("op {op}: write {len} bytes of {} at {addr}", region.name()), r)
            }
            1 => {
                let mut got = vec![0u8; len];
                let r = device.read(region, addr, &mut got);
                let what = format!("op {op}: read {len} bytes of {} at {addr}", region.name());
                let mut want = vec![0u8; len];
                reference.read(region, addr, &mut want).unwrap();
                if r.is_ok() && got != want {
                    row.silent(format!("{what}: wrong bytes {got:02x?}, want {want:02x?}"));
                }
                (what, r)
            }
            _ => {
                let program = random_program(&top.array, top.dram_bytes, &mut rng);
                let what = format!("op {op}: run {program:?}");
                let want = reference.run(&program);
                let got = device.run(&program);
                let r = match (&want, &got) {
                    (_, Err(MachineError::Link(_))) => got.map(|_| ()),
                    // Cycles, not MACs: after a run the link lost, `LinkMachine` no longer knows
                    // which weights a previous program left active, and counts a non-swapping
                    // matmul's MACs as if none were (`timing::program_macs_from`).
                    (Ok(w), Ok(g)) if w.cycles == g.cycles => Ok(()),
                    (Err(w), Err(g)) if w == g => Ok(()),
                    _ => {
                        row.silent(format!("{what}: cycle machine {want:?}, RTL {got:?}"));
                        Ok(())
                    }
                };
                (what, r)
            }
        };
        device.transport.noisy().enabled = false;
        let after = snapshot(reference.as_mut());
        if result.is_err() {
            row.reported += 1;
            next_command_works(&mut device, &what);
            sync_weights(&top, [&mut device, reference.as_mut()]);
        } else if device.retries > retries {
            row.recovered += 1;
        }
        let memories = snapshot(&mut device);
        if memories == after {
            continue;
        }
        if result.is_err() && memories == before {
            // The failed transfer did not take effect, and nothing else changed.
            restore(reference.as_mut(), &before);
            continue;
        }
        row.silent(format!(
            "{what} ({result:?}): memories differ from core's after at {}, and before at {}",
            first_difference(&memories, &after),
            first_difference(&memories, &before)
        ));
        restore(reference.as_mut(), &memories);
    }
    let t = &device.transport;
    row.injected = t.inner.stream.injected;
    row.detected = t.detected;
    row.harmless = (t.harmless.len() + t.inner.stream.pending.len()) as u64;
    row.harmless_at = t.harmless.clone();
    row.harmless_at.extend(t.inner.stream.pending.iter().map(|(_, place)| place.clone()));
    row.failed_exchanges = t.failed;
    row
}

fn check_byte_faults(fault: ByteFault, seed: u64) {
    let row = byte_faults(fault, 60, seed);
    row.print(&format!("UART: {fault:?}"));
    println!("{fault:?}: {row:?}");
    assert_eq!(row.silent, 0, "{fault:?}: {row:?}");
    assert_eq!(row.detected + row.harmless, row.injected, "{row:?}");
    assert!(row.injected >= 40, "{fault:?}: too few faults injected: {row:?}");
    assert!(row.detected > 0 && row.reported + row.recovered > 0, "{row:?}");
}

#[test]
fn dropped_bytes_on_the_uart_are_caught() {
    check_byte_faults(ByteFault::Drop, 11);
}

#[test]
fn duplicated_bytes_on_the_uart_are_caught() {
    check_byte_faults(ByteFault::Duplicate, 12);
}

#[test]
fn flipped_bits_on_the_uart_are_caught() {
    check_byte_faults(ByteFault::Flip, 13);
}

#[test]
fn truncated_frames_on_the_uart_are_caught() {
    check_byte_faults(ByteFault::Truncate, 14);
}

// ---------------------------------------------------------------------------------------------
// Faults in what the device is sent in valid frames: flipped instruction bits, addresses
// outside the memories. The RTL must do what core says of the words it received.

type Quiet = LinkMachine<Framed<UartLink>>;

fn quiet_device(top: &TopConfig, seed: u64) -> (Quiet, Box<dyn Machine>) {
    let mut device = LinkMachine::new(
        Framed { stream: UartLink::new(verilated(top), 4) },
        top.array,
        top.dram_bytes,
    );
    let mut reference = golden(GoldenKind::Cycle, top.array, top.dram_bytes).unwrap();
    let mut rng = SplitMix(seed);
    for region in REGIONS {
        let bytes: Vec<u8> =
            (0..reference.region_size(region)).map(|_| rng.next_u64() as u8).collect();
        reference.write(region, 0, &bytes).unwrap();
        device.write(region, 0, &bytes).unwrap();
    }
    (device, reference)
}

fn frame(req: &Request<'_>) -> Vec<u8> {
    let mut buf = [0u8; MAX_FRAME];
    let n = protocol::encode_request(req, &mut buf).unwrap();
    buf[..n].to_vec()
}

/// One request on a quiet link: its response frame.
fn exchange(device: &mut Quiet, request: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; MAX_FRAME];
    let n = device
        .transport
        .exchange(request, &mut buf)
        .unwrap_or_else(|e| panic!("no answer to {request:02x?}: {e:?}"));
    buf[..n].to_vec()
}

fn ok(device: &mut Quiet, req: &Request<'_>) -> Vec<u8> {
    let response = exchange(device, &frame(req));
    match parse_response(&response) {
        Ok(Response::Ok(payload)) => payload.to_vec(),
        other => panic!("{req:?}: {other:?}"),
    }
}

/// What the device does with a stream of words, by core: the program up to its first `Halt`
/// runs, or it runs up to the first word core rejects and stops with that check's fault code,
/// or it runs everything and waits for more words when no `Halt` came.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    Done { cycles: u64 },
    Fault(FaultCode),
    Waiting,
}

/// Core's outcome for `words`, run on `reference` (whose memories it changes as the device's).
fn predict(top: &TopConfig, words: &[Word], reference: &mut dyn Machine) -> Outcome {
    let mut program = Vec::new();
    let mut stop = None;
    for &w in words {
        let checked = decode(w).map_err(|e| e.fault_code()).and_then(|ins| {
            check_instruction(&top.array, &ins, top.dram_bytes)
                .map_err(|k| k.fault_code().expect("one instruction's error"))?;
            Ok(ins)
        });
        match checked {
            Err(code) => {
                stop = Some(code);
                break;
            }
            Ok(ins) => {
                program.push(ins);
                if ins == Instruction::Halt {
                    break;
                }
            }
        }
    }
    if stop.is_none() && program.last() != Some(&Instruction::Halt) {
        return Outcome::Waiting;
    }
    if stop.is_some() {
        program.push(Instruction::Halt);
    }
    match (reference.run(&program), stop) {
        (Ok(stats), None) => Outcome::Done { cycles: stats.cycles.expect("cycle machine") },
        (Ok(_), Some(code)) => Outcome::Fault(code),
        (Err(MachineError::Exec { .. }), _) => Outcome::Fault(FaultCode::NoWeightsLoaded),
        (Err(e), _) => panic!("core refused a prefix it checked: {e}"),
    }
}

/// Uploads `words`, runs them and polls until the device stops (or is seen waiting).
fn run_words(device: &mut Quiet, words: &[Word]) -> Outcome {
    ok(device, &Request::Reset);
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    for chunk in bytes.chunks(16 * protocol::MAX_WORDS) {
        ok(device, &Request::WriteInstructions(chunk));
    }
    ok(device, &Request::Run);
    let mut status = Status::from_bytes(&ok(device, &Request::ReadStatus)).unwrap();
    for _ in 0..40 {
        if !status.busy {
            break;
        }
        status = Status::from_bytes(&ok(device, &Request::ReadStatus)).unwrap();
    }
    let outcome = match (status.busy, status.done, status.fault) {
        (true, false, None) => Outcome::Waiting,
        (false, true, None) => Outcome::Done { cycles: status.cycles },
        (false, false, Some(code)) => Outcome::Fault(code),
        _ => panic!("an impossible status after {words:x?}: {status:?}"),
    };
    ok(device, &Request::Reset);
    outcome
}

#[derive(Debug, Default)]
struct WordRow {
    injected: u64,
    /// Stopped with core's fault code for the damaged word.
    rejected: u64,
    /// The damaged word is another valid instruction: ran as core runs it.
    ran_as_core: u64,
    /// The `Halt` was damaged away: the device waits for more words (a host sees it hang).
    waiting: u64,
    silent: u64,
    first_silent: Option<String>,
}

/// `trials` random programs, each with `damage` applied to its words, on the RTL and core.
fn damaged_programs(
    trials: usize,
    seed: u64,
    mut damage: impl FnMut(&mut Vec<Word>, &mut SplitMix),
) -> WordRow {
    let top = top();
    let (mut device, mut reference) = quiet_device(&top, seed);
    let mut rng = SplitMix(seed);
    let mut row = WordRow::default();
    for trial in 0..trials {
        let program = random_program(&top.array, top.dram_bytes, &mut rng);
        let mut words: Vec<Word> = program.iter().map(|i| encode(i).unwrap()).collect();
        damage(&mut words, &mut rng);
        row.injected += 1;
        let want = predict(&top, &words, reference.as_mut());
        let got = run_words(&mut device, &words);
        let memories = snapshot(&mut device);
        let expected = snapshot(reference.as_mut());
        let what = format!("trial {trial}: {words:x?}");
        match (want, got) {
            (Outcome::Waiting, Outcome::Waiting) => {
                // Frozen part-way (DECISIONS 23) and then reset: core has no state to compare.
                row.waiting += 1;
                restore(reference.as_mut(), &memories);
                sync_weights(&top, [&mut device, reference.as_mut()]);
                continue;
            }
            (w, g) if w == g => match w {
                Outcome::Fault(code) if code != FaultCode::NoWeightsLoaded => row.rejected += 1,
                _ => row.ran_as_core += 1,
            },
            (w, g) => {
                row.silent += 1;
                row.first_silent.get_or_insert(format!("{what}: core {w:?}, RTL {g:?}"));
            }
        }
        if memories != expected {
            row.silent += 1;
            row.first_silent.get_or_insert(format!(
                "{what}: memories differ at {}",
                first_difference(&memories, &expected)
            ));
            restore(reference.as_mut(), &memories);
        }
    }
    row
}

#[test]
fn flipped_instruction_bits_fault_or_run_as_core_says() {
    let row = damaged_programs(120, 21, |words, rng| {
        let at = rng.next_u64() as usize % words.len();
        words[at] = Word(words[at].0 ^ 1 << (rng.next_u64() % 128));
    });
    println!(
        "| instruction word: one bit flipped | {} | {} rejected with core's fault code, {} ran \
         as the valid instruction core decodes, {} lost their Halt and wait (a host reports \
         Hung) | {} |",
        row.injected, row.rejected, row.ran_as_core, row.waiting, row.silent
    );
    assert_eq!(row.silent, 0, "{row:?}");
    assert!(row.rejected > 10 && row.ran_as_core > 10, "{row:?}");
}

/// Instructions whose rows or bytes run past a memory (core's `Range` check).
fn out_of_range(top: &TopConfig) -> Vec<Instruction> {
    let (spad, acc, dram) =
        (top.array.spad_depth as u16, top.array.acc_depth as u16, top.dram_bytes as u32);
    let list = vec![
        Instruction::Load {
            spad_row: spad - 1,
            dram_addr: 0,
            rows: 2,
            len: 1,
            row_stride: 1,
            elem_stride: 1,
        },
        Instruction::Load {
            spad_row: 0,
            dram_addr: dram - 1,
            rows: 1,
            len: 2,
            row_stride: 0,
            elem_stride: 1,
        },
        Instruction::Store { acc_row: acc - 1, dram_addr: 0, rows: 2, len: 1, row_stride: 1 },
        Instruction::Store { acc_row: 0, dram_addr: dram - 4, rows: 1, len: 2, row_stride: 0 },
        Instruction::LoadAcc { acc_row: acc, dram_addr: 0, rows: 1, len: 1, row_stride: 0 },
        Instruction::StoreSpad { spad_row: 0, dram_addr: dram, rows: 1, len: 1, row_stride: 0 },
        Instruction::LoadWeights { spad_row: spad - 1, rows: 2, cols: 1 },
    ];
    for ins in &list {
        let e = check_instruction(&top.array, ins, top.dram_bytes);
        assert!(
            matches!(e, Err(ProgramErrorKind::Range { .. })),
            "{ins:?} is not out of range: {e:?}"
        );
    }
    list
}

#[test]
fn addresses_outside_the_memories_are_refused_and_change_nothing() {
    let top = top();
    // Instructions: each kind of out-of-range access, put into random programs.
    let bad = out_of_range(&top);
    let row = damaged_programs(40, 31, |words, rng| {
        let ins = bad[rng.next_u64() as usize % bad.len()];
        let at = rng.next_u64() as usize % words.len();
        words.insert(at, encode(&ins).unwrap());
    });
    println!(
        "| instruction: address outside a memory | {} | {} stopped with Range (or an earlier \
         NoWeightsLoaded, as core) | {} |",
        row.injected,
        row.rejected + row.ran_as_core,
        row.silent
    );
    assert_eq!(row.silent, 0, "{row:?}");
    assert_eq!(row.rejected + row.ran_as_core, row.injected, "{row:?}");

    // Memory requests: past the end, straddling it, misaligned; answered as the emulator
    // answers, memories unchanged, the next request served.
    let (mut device, mut reference) = quiet_device(&top, 32);
    let mut emulator = systole_core::link::emulator::Emulator::new(
        golden(GoldenKind::Cycle, top.array, top.dram_bytes).unwrap(),
    );
    let mut rng = SplitMix(33);
    let (mut injected, mut refused, mut silent) = (0, 0, 0);
    let before = snapshot(reference.as_mut());
    for _ in 0..60 {
        let region = REGIONS[(rng.next_u64() % 3) as usize];
        let size = reference.region_size(region) as u32;
        let len = 1 + rng.next_u64() as u32 % 16;
        let addr = match rng.next_u64() % 3 {
            0 => size + rng.next_u64() as u32 % 1000,
            1 => size - len / 2 - 1 + len.min(1),
            _ if region == Region::Acc => 1 + 4 * (rng.next_u64() as u32 % 8),
            _ => u32::MAX - rng.next_u64() as u32 % 8,
        };
        let data = vec![0xA5u8; len as usize];
        let request = if rng.next_u64() % 2 == 0 {
            frame(&Request::WriteMemory { region, addr, data: &data })
        } else {
            frame(&Request::ReadMemory { region, addr, len: len as u16 })
        };
        let want = emulator.serve(&request);
        let got = exchange(&mut device, &request);
        injected += 1;
        match parse_response(&got) {
            Ok(Response::Err(ErrorCode::OutOfRange | ErrorCode::Misaligned)) if got == want => {
                refused += 1
            }
            other => {
                silent += 1;
                println!(
                    "{region:?} {addr} {len}: RTL {other:?}, emulator {:?}",
                    parse_response(&want)
                );
            }
        }
        assert!(ok(&mut device, &Request::ReadStatus).len() == protocol::STATUS_BYTES);
    }
    if snapshot(&mut device) != before {
        silent += 1;
    }
    println!("| memory request: address outside a memory or misaligned | {injected} | {refused} refused with OutOfRange or Misaligned, as the emulator | {silent} |");
    assert_eq!(silent, 0);
    assert_eq!(refused, injected);
}

// ---------------------------------------------------------------------------------------------
// The reset pin, pulsed while a program runs.

/// Bytes of DRAM a program's stores may write (each store's whole span, strides included), as
/// core's scoreboard has them.
fn dram_written(config: &ArrayConfig, program: &[Instruction]) -> Vec<std::ops::Range<usize>> {
    program
        .iter()
        .map(|ins| systole_core::scoreboard::footprint(config, ins).dram_write)
        .filter(|span| span.lo < span.hi)
        .map(|span| span.lo as usize..span.hi as usize)
        .collect()
}

#[test]
fn a_reset_during_a_run_is_reported_and_the_device_runs_the_next_program() {
    let top = top();
    let (mut device, mut reference) = device_and_golden(&top, ByteFault::Flip, 41);
    let mut rng = SplitMix(41);
    let (mut injected, mut detected, mut silent) = (0u64, 0u64, 0u64);
    for trial in 0..30 {
        let program = random_program(&top.array, top.dram_bytes, &mut rng);
        let before = snapshot(reference.as_mut());
        let noisy = device.transport.noisy();
        noisy.requests = 0;
        let reset_at = 1 + rng.next_u64() % 8;
        noisy.reset_at = Some(reset_at);
        let resets = noisy.resets;
        let got = device.run(&program);
        let noisy = device.transport.noisy();
        noisy.reset_at = None;
        if noisy.resets == resets {
            // The run ended before the pulse was due: it ran as on core.
            let want = reference.run(&program);
            match (&want, &got) {
                (Ok(w), Ok(g)) if w.cycles == g.cycles => {}
                (Err(w), Err(g)) if w == g => {}
                _ => panic!("trial {trial}: core {want:?}, RTL {got:?}"),
            }
            continue;
        }
        injected += 1;
        let what = format!("trial {trial}: {program:?}");
        match got {
            Err(MachineError::Link(systole_core::link::LinkFault::Reset)) => detected += 1,
            other => {
                silent += 1;
                println!("{what}: reset and {other:?}");
            }
        }
        next_command_works(&mut device, &what);
        // DRAM the program cannot write is as it was.
        let memories = snapshot(&mut device);
        let written = dram_written(&top.array, &program);
        let changed: Vec<usize> = (0..top.dram_bytes)
            .filter(|&a| memories[0][a] != before[0][a])
            .filter(|a| !written.iter().any(|r| r.contains(a)))
            .collect();
        if !changed.is_empty() {
            silent += 1;
            println!(
                "{what}: reset before request {:?}: DRAM bytes {changed:?} changed outside the \
                 program's stores {written:?}",
                reset_at
            );
        }
        // The same program again, from the same memories and weights, runs as on core.
        restore(&mut device, &before);
        sync_weights(&top, [&mut device, reference.as_mut()]);
        let want = reference.run(&program);
        let again = device.run(&program);
        match (&want, &again) {
            (Ok(w), Ok(g)) if w.cycles == g.cycles => {}
            (Err(w), Err(g)) if w == g => {}
            _ => panic!("{what}: after the reset, core {want:?}, RTL {again:?}"),
        }
        assert_eq!(snapshot(&mut device), snapshot(reference.as_mut()), "{what}: after the rerun");
    }
    println!("| reset pin pulsed during a run | {injected} | {detected} reported as LinkFault::Reset | {silent} |");
    assert_eq!(silent, 0);
    assert_eq!(detected, injected);
    assert!(injected >= 15, "too few resets landed in a run: {injected}");
}
