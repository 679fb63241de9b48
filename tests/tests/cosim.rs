//! The whole emitted accelerator, Verilated and driven through its pins (`systole_sim::rtl`):
//! `core::link::LinkMachine` over the UART and over SPI, against the golden machines.
//!
//! * Every request frame (good ones, and every kind of refusal) gets the same response frame
//!   from the RTL as from `core::link::emulator::Emulator`, over both links.
//! * Random valid programs leave every memory bit-identical to `CycleMachine`'s, and the status
//!   register's cycle count equals its count, with the instruction FIFO smaller than the program
//!   (so the machine freezes while the host tops the FIFO up).
//! * Tiled GEMMs from core's tiler give `CycleMachine`'s accumulators and cycles.
//! * A bad word of each kind faults with its code; what came before it ran, nothing after.
//! * The firmware driver, unchanged, runs an INT8 inference blob on the RTL over SPI.
//!
//! Verilated models are cached (`systole_sim::build_model`), so only a first run builds them.

use systole_core::isa::Instruction;
use systole_core::link::emulator::Emulator;
use systole_core::link::{Framed, LinkMachine, Transport};
use systole_core::machine::run_gemm;
use systole_core::machine::{golden, GoldenKind, Region};
use systole_core::protocol::{self, Request};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dataflow, Dtype, Machine, Schedule};
use systole_hdl::TopConfig;
use systole_sim::{RtlTop, SpiLink, UartLink};
use systole_tests::{assert_bit_identical, random_program, SplitMix};

/// The model of `top`, built (or found in the cache) and reset.
pub(crate) fn verilated(top: &TopConfig) -> RtlTop {
    systole_sim::verilate_top(top, &Default::default())
        .unwrap_or_else(|err| panic!("{top:?}: verilating failed: {err}"))
}

/// A small machine: memories of a few rows, so whole-memory comparisons are quick.
pub(crate) fn small(rows: u16, cols: u16, dtype: Dtype, dataflow: Dataflow) -> TopConfig {
    let array = ArrayConfig {
        spad_depth: 3 * rows.max(cols) as u32 + 8,
        acc_depth: 12,
        ..ArrayConfig::new(rows, cols, dtype).with_dataflow(dataflow)
    };
    TopConfig { dram_bytes: 700, fifo_depth: 64, uart_divisor: 4, ..TopConfig::new(array) }
}

/// Every memory of both machines, byte for byte.
fn assert_same_memories(what: &str, want: &mut dyn Machine, got: &mut dyn Machine) {
    for region in [Region::Dram, Region::Spad, Region::Acc] {
        let size = want.region_size(region);
        assert_eq!(got.region_size(region), size, "{what}: {} size", region.name());
        let (mut a, mut b) = (vec![0u8; size], vec![0u8; size]);
        want.read(region, 0, &mut a).unwrap();
        got.read(region, 0, &mut b).unwrap_or_else(|e| panic!("{what}: reading the RTL: {e}"));
        if let Some(at) = a.iter().zip(&b).position(|(x, y)| x != y) {
            panic!(
                "{what}: {} differs first at byte {at}: cycle machine {:#04x}, RTL {:#04x}",
                region.name(),
                a[at],
                b[at]
            );
        }
    }
}

/// Random programs on the RTL (through `link`) and on the cycle machine, from the same random
/// memories: the same result (or fault), the same cycle count, the same memories after. Both
/// machines live through all the programs, as weights (and whether the shadow is full) do.
fn random_programs<T: Transport>(top: &TopConfig, link: T, programs: usize, seed: u64) {
    let (config, dram) = (top.array, top.dram_bytes);
    programs_match(top, link, programs, seed, |rng| random_program(&config, dram, rng));
}

/// [`random_programs`] with programs from `program`.
fn programs_match<T: Transport>(
    top: &TopConfig,
    link: T,
    programs: usize,
    seed: u64,
    mut program: impl FnMut(&mut SplitMix) -> Vec<Instruction>,
) {
    let config = top.array;
    let mut rtl = LinkMachine::new(link, config, top.dram_bytes);
    let mut golden_m = golden(GoldenKind::Cycle, config, top.dram_bytes).unwrap();
    let mut rng = SplitMix(seed);
    for p in 0..programs {
        for region in [Region::Dram, Region::Spad, Region::Acc] {
            let bytes: Vec<u8> =
                (0..golden_m.region_size(region)).map(|_| rng.next_u64() as u8).collect();
            golden_m.write(region, 0, &bytes).unwrap();
            rtl.write(region, 0, &bytes).unwrap_or_else(|e| panic!("program {p}: writing: {e}"));
        }
        // Every program starts with an empty shadow (DECISIONS 28): a swap before this
        // program's own load faults, whatever the previous program loaded.
        let program = program(&mut rng);
        let what = format!("{config:?}, program {p} {program:?}");
        let want = golden_m.run(&program);
        let got = rtl.run(&program);
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                assert_eq!(g.cycles, w.cycles, "{what}: cycles");
                assert_eq!(g.macs, w.macs, "{what}: MACs");
            }
            (Err(w), Err(g)) => assert_eq!(g, w, "{what}"),
            _ => panic!("{what}: cycle machine {want:?}, RTL {got:?}"),
        }
        assert_same_memories(&what, golden_m.as_mut(), &mut rtl);
    }
}

#[test]
fn random_programs_match_the_cycle_machine_over_the_uart() {
    // A FIFO of 3 words: the machine freezes while the host tops it up, and must count the
    // cycles of the program alone.
    let top = TopConfig { fifo_depth: 3, ..small(2, 3, Dtype::Int8, Dataflow::WeightStationary) };
    random_programs(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 12, 1);
    let top = small(3, 2, Dtype::Bf16, Dataflow::WeightStationary);
    random_programs(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 12, 2);
    // Fault codes formed from the FIFO's head, as the iCEBreaker builds it.
    let top = TopConfig {
        checks_at_queue: false,
        ..small(2, 2, Dtype::Int8, Dataflow::WeightStationary)
    };
    random_programs(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 12, 5);
    // And so again, the candidate registered after a FIFO of 3 words (`TopConfig::
    // head_register`, tried on the ULX3S 85F's BF16): the machine holds a fourth.
    let top = TopConfig {
        checks_at_queue: false,
        head_register: true,
        fifo_depth: 3,
        ..small(2, 2, Dtype::Bf16, Dataflow::WeightStationary)
    };
    random_programs(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 12, 6);
}

/// The decoupled machine (docs/DECISIONS.md 41): four units overlapping under the scoreboard,
/// streamed matmuls, two accumulator banks; the same programs, the same cycles and memories as
/// the decoupled cycle machine.
#[test]
fn random_programs_match_the_decoupled_cycle_machine() {
    let decoupled =
        |top: TopConfig| TopConfig { array: top.array.with_schedule(Schedule::Decoupled), ..top };
    let top = decoupled(TopConfig {
        fifo_depth: 3,
        ..small(2, 3, Dtype::Int8, Dataflow::WeightStationary)
    });
    random_programs(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 16, 21);
    let top = decoupled(small(3, 2, Dtype::Bf16, Dataflow::WeightStationary));
    random_programs(&top, Framed { stream: SpiLink::new(verilated(&top), 4) }, 16, 22);
    let top = decoupled(small(2, 2, Dtype::Bf16, Dataflow::OutputStationary));
    random_programs(&top, Framed { stream: SpiLink::new(verilated(&top), 4) }, 12, 23);
}

/// The memories built with their write stages (`TopConfig::spad_write_stage`,
/// `acc_write_stage`, `dram_write_stage`) change no result and no cycle: random programs on the
/// blocking machine with the accumulators' and the DRAM's stages and on the decoupled one with
/// all three, programs that read rows back right after writing them on both, and a tiled GEMM
/// with all three, whose matmuls read rows its loads wrote the cycle before.
#[test]
fn write_stages_change_no_result_or_cycle() {
    let top = TopConfig {
        acc_write_stage: true,
        dram_write_stage: true,
        ..small(2, 3, Dtype::Int8, Dataflow::WeightStationary)
    };
    random_programs(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 12, 31);
    let (w, c) = (top.array.spad_width() as u16, top.array.cols);
    programs_match(&top, Framed { stream: UartLink::new(verilated(&top), 4) }, 4, 34, |rng| {
        read_after_write(w, c, rng)
    });
    let top = TopConfig {
        array: small(3, 2, Dtype::Bf16, Dataflow::WeightStationary)
            .array
            .with_schedule(Schedule::Decoupled),
        spad_write_stage: true,
        acc_write_stage: true,
        dram_write_stage: true,
        ..small(3, 2, Dtype::Bf16, Dataflow::WeightStationary)
    };
    random_programs(&top, Framed { stream: SpiLink::new(verilated(&top), 4) }, 12, 32);
    let (w, c) = (top.array.spad_width() as u16, top.array.cols);
    programs_match(&top, Framed { stream: SpiLink::new(verilated(&top), 4) }, 4, 35, |rng| {
        read_after_write(w, c, rng)
    });
    let ws = ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(4, 4, Dtype::Int8) };
    gemm_over_spi_on(
        ws.with_schedule(Schedule::Decoupled),
        true,
        GemmShape { m: 10, k: 9, n: 7 },
        33,
    );
}

/// Rows read back right after they are written, zero to two cycles apart, at random unaligned
/// DRAM addresses: a scratchpad row stored to DRAM and loaded back, an accumulator row stored
/// and loaded back, an accumulator row a vector op wrote, stored (the reads a write stage must
/// forward from its register).
fn read_after_write(w: u16, c: u16, rng: &mut SplitMix) -> Vec<Instruction> {
    use systole_core::isa::VectorOp;
    let mut program = vec![];
    for gap in [0, 1, 2, 0] {
        let sync = || std::iter::repeat_n(Instruction::Sync, gap);
        let a = rng.next_u64() as u32 % 64;
        let b = 64 + rng.next_u64() as u32 % 64;
        program.push(Instruction::StoreSpad {
            spad_row: 0,
            dram_addr: a,
            rows: 1,
            len: w,
            row_stride: w as u32,
        });
        program.extend(sync());
        program.push(Instruction::Load {
            spad_row: 1,
            dram_addr: a,
            rows: 1,
            len: w,
            row_stride: w as u32,
            elem_stride: 1,
        });
        program.push(Instruction::Store {
            acc_row: 0,
            dram_addr: b,
            rows: 1,
            len: c,
            row_stride: c as u32,
        });
        program.extend(sync());
        program.push(Instruction::LoadAcc {
            acc_row: 1,
            dram_addr: b,
            rows: 1,
            len: c,
            row_stride: c as u32,
        });
        program.extend(sync());
        program.push(Instruction::Vector { op: VectorOp::Relu, dst: 1, src: 0, rows: 1, imm: 0 });
        program.extend(sync());
        program.push(Instruction::Store {
            acc_row: 1,
            dram_addr: a,
            rows: 1,
            len: c,
            row_stride: c as u32,
        });
    }
    program.push(Instruction::Halt);
    program
}

#[test]
fn random_programs_match_the_cycle_machine_over_spi() {
    let top = small(2, 3, Dtype::Bf16, Dataflow::OutputStationary);
    random_programs(&top, Framed { stream: SpiLink::new(verilated(&top), 4) }, 12, 3);
    // Responses read in polls of four bytes, each its own transaction (as the firmware reads).
    let top = TopConfig { fifo_depth: 5, ..small(3, 2, Dtype::Int8, Dataflow::OutputStationary) };
    random_programs(&top, Framed { stream: SpiLink::polling(verilated(&top), 4, 4) }, 12, 4);
}

/// A request frame with any kind, payload and CRC (`crc_xor` spoils the checksum).
fn raw_frame(kind: u8, payload: &[u8], crc_xor: u16) -> Vec<u8> {
    let mut f = vec![protocol::REQUEST_SYNC, kind];
    f.extend((payload.len() as u16).to_le_bytes());
    f.extend(payload);
    let crc = protocol::crc16(&f[1..]) ^ crc_xor;
    f.extend(crc.to_be_bytes());
    f
}

fn request(req: &Request<'_>) -> Vec<u8> {
    let mut buf = [0u8; protocol::MAX_FRAME];
    let n = protocol::encode_request(req, &mut buf).unwrap();
    buf[..n].to_vec()
}

fn memory_header(region: u8, addr: u32) -> Vec<u8> {
    let mut p = vec![region];
    p.extend(addr.to_le_bytes());
    p
}

/// Requests of every kind, and every refusal: what `Emulator` answers, the RTL answers.
fn requests_like_the_emulator<T: Transport>(top: &TopConfig, link: &mut T) {
    let (config, dram) = (top.array, top.dram_bytes as u32);
    let spad = config.spad_depth * config.spad_width() as u32 * config.dtype.elem_bytes() as u32;
    let acc = config.acc_depth * config.cols as u32 * 4;
    let word = |ins: Instruction| systole_core::isa::encode(&ins).unwrap().to_le_bytes();
    let words = |n: usize| -> Vec<u8> { (0..n).flat_map(|_| word(Instruction::Sync)).collect() };
    let data: Vec<u8> = (0..protocol::MAX_DATA as u32).map(|i| (i * 37 + 11) as u8).collect();
    let too_long = (top.max_data() + 1) as u16;
    let read = |region: u8, addr: u32, len: u16| {
        let mut p = memory_header(region, addr);
        p.extend(len.to_le_bytes());
        raw_frame(3, &p, 0)
    };
    let write = |region: u8, addr: u32, n: usize| {
        let mut p = memory_header(region, addr);
        p.extend(&data[..n]);
        raw_frame(2, &p, 0)
    };
    let mut frames = vec![
        request(&Request::Identify),
        request(&Request::ReadStatus),
        write(0, 5, 10),
        write(0, dram - 256, 256),
        read(0, 0, 20),
        read(0, dram - 256, 256),
        // Large requests on a machine that takes them, refused on one that does not.
        write(0, 8, 600),
        read(0, 8, 600),
        write(1, 2, 6),
        write(1, spad - 4, 4),
        read(1, 0, 12),
        read(1, spad - 64, 64),
        write(2, 4, 8),
        write(2, acc - 4, 4),
        read(2, 0, 16),
        read(2, acc - 8, 8),
        // Refusals: range, alignment, region, lengths, command, checksum.
        write(0, dram - 9, 10),
        read(0, dram, 1),
        read(2, acc - 4, 8),
        write(1, spad, 2),
        write(1, 1, 2),
        write(1, 2, 3),
        read(2, 2, 4),
        read(2, 4, 6),
        write(3, 0, 4),
        read(7, 0, 4),
        read(0, 0, 0),
        read(0, 0, too_long),
        raw_frame(3, &memory_header(0, 0), 0),
        raw_frame(2, &memory_header(0, 0), 0),
        raw_frame(9, &[], 0),
        raw_frame(0, &[1, 2], 0),
        raw_frame(4, &[0], 0),
        raw_frame(7, &[], 1),
        write(0, 0, 10)
            .iter()
            .enumerate()
            .map(|(i, &b)| if i == 9 { b ^ 0x40 } else { b })
            .collect(),
        raw_frame(2, &data[..200].repeat(2)[..300], 0),
        raw_frame(1, &words(1)[..15], 0),
        raw_frame(1, &[], 0),
        // The FIFO: 60 words fit, five more do not; `Reset` empties it.
        raw_frame(1, &words(15), 0),
        raw_frame(1, &words(15), 0),
        raw_frame(1, &words(15), 0),
        raw_frame(1, &words(15), 0),
        request(&Request::ReadStatus),
        raw_frame(1, &words(5), 0),
        request(&Request::Reset),
        request(&Request::ReadStatus),
    ];
    // A program, run to its end: its stores and the final status.
    let program = [
        Instruction::LoadAcc { acc_row: 0, dram_addr: 5, rows: 2, len: 2, row_stride: 3 },
        Instruction::Store { acc_row: 0, dram_addr: 100, rows: 2, len: 2, row_stride: 2 },
        Instruction::Halt,
    ];
    let program: Vec<u8> = program.iter().flat_map(|&i| word(i)).collect();
    frames.push(raw_frame(1, &program, 0));
    frames.push(request(&Request::Run));
    let machine = golden(GoldenKind::Cycle, config, top.dram_bytes).unwrap();
    let mut emulator = Emulator::new(machine).with_large_requests(top.large_requests());
    let mut got = [0u8; protocol::MAX_FRAME];
    let mut exchange = |link: &mut T, frame: &[u8]| -> Vec<u8> {
        let n = link
            .exchange(frame, &mut got)
            .unwrap_or_else(|e| panic!("no answer to {frame:02x?}: {e:?}"));
        got[..n].to_vec()
    };
    for (i, frame) in frames.iter().enumerate() {
        let want = emulator.serve(frame);
        assert_eq!(exchange(link, frame), want, "request {i}: {frame:02x?}");
    }
    // The emulator ran the program at once; the RTL is done after a few polls.
    let status = request(&Request::ReadStatus);
    let want = emulator.serve(&status);
    let mut answer = exchange(link, &status);
    for _ in 0..20 {
        if answer == want {
            break;
        }
        answer = exchange(link, &status);
    }
    assert_eq!(answer, want, "the status after the program");
    for frame in [read(0, 96, 40), request(&Request::Reset), request(&Request::ReadStatus)] {
        assert_eq!(exchange(link, &frame), emulator.serve(&frame), "{frame:02x?}");
    }
    // While a program runs (here: waiting for more words), memory commands are refused.
    let frames =
        [raw_frame(1, &words(2), 0), request(&Request::Run), write(0, 0, 4), read(1, 0, 2)];
    for frame in frames {
        assert_eq!(exchange(link, &frame), emulator.serve(&frame), "{frame:02x?}");
    }
    let reset = request(&Request::Reset);
    assert_eq!(exchange(link, &reset), emulator.serve(&reset));
}

#[test]
fn requests_are_answered_as_the_emulator_answers() {
    let top = small(4, 2, Dtype::Bf16, Dataflow::WeightStationary);
    requests_like_the_emulator(&top, &mut Framed { stream: UartLink::new(verilated(&top), 4) });
    requests_like_the_emulator(&top, &mut Framed { stream: SpiLink::new(verilated(&top), 4) });
    let mut polling = Framed { stream: SpiLink::polling(verilated(&top), 5, 3) };
    requests_like_the_emulator(&top, &mut polling);
    // The link of the boards built before large requests: 256 bytes a request.
    let legacy = TopConfig { rtl_revision: systole_hdl::top::FAST_LINK_REVISION - 1, ..top };
    requests_like_the_emulator(
        &legacy,
        &mut Framed { stream: UartLink::new(verilated(&legacy), 4) },
    );
}

/// Each kind of bad word, reaching the decoder after a valid store and before another: the
/// fault code of core's first failing check, the first store done, nothing after it run.
/// Every fault code, on machines that form it as each word is queued and from the FIFO's head
/// (`TopConfig::checks_at_queue`, as the iCEBreaker builds it), and from the head on its way
/// into the head register (`TopConfig::head_register`, tried on the ULX3S 85F's BF16). A
/// machine built without its program checks (`TopConfig::program_checks`) still stops on
/// every decoder's fault, and says in its identity that it leaves the rest to its host.
#[test]
fn bad_words_fault_with_their_code_and_stop_the_program() {
    for (checks_at_queue, head_register, program_checks) in
        [(true, false, true), (false, false, true), (false, true, true), (false, false, false)]
    {
        bad_words_fault(&TopConfig {
            checks_at_queue,
            head_register,
            program_checks,
            ..small(2, 3, Dtype::Bf16, Dataflow::WeightStationary)
        });
    }
}

fn bad_words_fault(top: &TopConfig) {
    use systole_core::isa::{encode, VectorOp, Word};
    use systole_core::protocol::{FaultCode, Status};
    let mut link = Framed { stream: UartLink::new(verilated(top), 4) };
    let enc = |ins: Instruction| encode(&ins).unwrap();
    let halt = enc(Instruction::Halt);
    let bad: [(Word, FaultCode); 10] = [
        (Word(0), FaultCode::Opcode),
        (Word(enc(Instruction::Sync).0 | 1 << 100), FaultCode::Reserved),
        (
            Word(
                enc(Instruction::LoadWeights { spad_row: 0, rows: 1, cols: 1 }).0 & !(0x1FF << 21),
            ),
            FaultCode::Field,
        ),
        (
            Word(
                enc(Instruction::Vector { op: VectorOp::Relu, dst: 0, src: 0, rows: 1, imm: 0 }).0
                    | 1 << 25,
            ),
            FaultCode::UnusedField,
        ),
        (
            enc(Instruction::MatmulOs {
                a_row: 0,
                b_row: 0,
                k: 1,
                acc_row: 0,
                rows: 1,
                cols: 1,
                accumulate: false,
            }),
            FaultCode::Dataflow,
        ),
        (
            enc(Instruction::Requantize {
                acc_row: 0,
                spad_row: 0,
                rows: 1,
                requant: systole_core::numerics::Requant::from_scale(0.5, 0).unwrap(),
            }),
            FaultCode::Dtype,
        ),
        (enc(Instruction::LoadWeights { spad_row: 0, rows: 3, cols: 1 }), FaultCode::TooWide),
        (
            enc(Instruction::Store { acc_row: 11, dram_addr: 0, rows: 2, len: 1, row_stride: 0 }),
            FaultCode::Range,
        ),
        // Past the DRAM's end, found by the link's extent check as the word was queued.
        (
            enc(Instruction::Store {
                acc_row: 0,
                dram_addr: 0,
                rows: 2,
                len: 1,
                row_stride: 0xFF_FFFF,
            }),
            FaultCode::Range,
        ),
        (
            enc(Instruction::Load {
                spad_row: 0,
                dram_addr: 0,
                rows: 1,
                len: 2,
                row_stride: 0,
                elem_stride: 0x1_0000,
            }),
            FaultCode::Range,
        ),
    ];
    let mut got = [0u8; protocol::MAX_FRAME];
    let mut call = |link: &mut Framed<UartLink>, frame: Vec<u8>| -> Vec<u8> {
        let n = link.exchange(&frame, &mut got).expect("an answer");
        match protocol::parse_response(&got[..n]) {
            Ok(protocol::Response::Ok(p)) => p.to_vec(),
            other => panic!("{frame:02x?}: {other:?}"),
        }
    };
    let identity = call(&mut link, request(&Request::Identify));
    let identity = protocol::Identity::from_bytes(&identity, top.array.clock_mhz).unwrap();
    assert_eq!(identity.program_checks, top.program_checks);
    let decoders =
        [FaultCode::Opcode, FaultCode::Reserved, FaultCode::Field, FaultCode::UnusedField];
    let bad = bad.iter().filter(|(_, code)| top.program_checks || decoders.contains(code));
    let acc_row0: Vec<u8> = (0..12u8).map(|i| i.wrapping_mul(29).wrapping_add(3)).collect();
    for &(word, code) in bad {
        let mut p = memory_header(2, 0);
        p.extend(&acc_row0);
        call(&mut link, raw_frame(2, &p, 0));
        // DRAM bytes 0..40 cleared: region 0, address 0, 40 zeros.
        call(&mut link, raw_frame(2, &[0u8; 45], 0));
        let first =
            enc(Instruction::Store { acc_row: 0, dram_addr: 0, rows: 1, len: 3, row_stride: 0 });
        let after =
            enc(Instruction::Store { acc_row: 0, dram_addr: 20, rows: 1, len: 3, row_stride: 0 });
        let words: Vec<u8> =
            [first, word, after, halt].iter().flat_map(|w| w.to_le_bytes()).collect();
        call(&mut link, request(&Request::Reset));
        call(&mut link, raw_frame(1, &words, 0));
        call(&mut link, request(&Request::Run));
        let mut status =
            Status::from_bytes(&call(&mut link, request(&Request::ReadStatus))).unwrap();
        for _ in 0..20 {
            if !status.busy {
                break;
            }
            status = Status::from_bytes(&call(&mut link, request(&Request::ReadStatus))).unwrap();
        }
        assert_eq!(
            (status.busy, status.done, status.fault),
            (false, false, Some(code)),
            "{word:?}, checks at queue: {}, head register: {}, program checks: {}",
            top.checks_at_queue,
            top.head_register,
            top.program_checks
        );
        let mut p = memory_header(0, 0);
        p.extend(40u16.to_le_bytes());
        let dram = call(&mut link, raw_frame(3, &p, 0));
        assert_eq!(&dram[..12], &acc_row0[..], "{code:?}: the store before ran");
        assert_eq!(&dram[20..32], &[0u8; 12], "{code:?}: the store after did not");
    }
}

/// A tiled GEMM through the SPI link: C's words and the cycle count equal the cycle machine's.
fn gemm_over_spi(array: ArrayConfig, shape: GemmShape, seed: u64) {
    gemm_over_spi_on(array, false, shape, seed)
}

/// [`gemm_over_spi`] on a machine built with or without the memories' write stages.
fn gemm_over_spi_on(array: ArrayConfig, write_stages: bool, shape: GemmShape, seed: u64) {
    let (layout, dram) = GemmLayout::packed(&array, &shape).expect("layout");
    let plan = GemmPlan::new(&array, shape, layout).expect("plan");
    let mut rng = SplitMix(seed);
    let a = rng.matrix((shape.m * shape.k) as usize, array.dtype);
    let b = rng.matrix((shape.k * shape.n) as usize, array.dtype);
    let mut golden_m = golden(GoldenKind::Cycle, array, dram).unwrap();
    let (want, want_stats) = run_gemm(golden_m.as_mut(), &plan, &a, &b).expect("cycle machine");
    // A FIFO of 8 words, far shorter than the program: the host keeps topping it up.
    let top = TopConfig {
        dram_bytes: dram,
        fifo_depth: 8,
        uart_divisor: 4,
        spad_write_stage: write_stages,
        acc_write_stage: write_stages,
        dram_write_stage: write_stages,
        ..TopConfig::new(array)
    };
    let mut rtl =
        LinkMachine::new(Framed { stream: SpiLink::new(verilated(&top), 4) }, array, dram);
    let (got, stats) = run_gemm(&mut rtl, &plan, &a, &b).unwrap_or_else(|e| panic!("RTL: {e}"));
    assert_bit_identical(&format!("{array:?} {shape:?}"), &want, &got, shape.n as usize);
    assert_eq!(stats.cycles, want_stats.cycles, "{array:?} {shape:?}: cycles");
    assert!(plan.instruction_count() > 8 * 3, "the program is longer than the FIFO");
}

#[test]
fn tiled_gemms_match_the_cycle_machine_over_spi() {
    let ws = ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(4, 4, Dtype::Int8) };
    // Blocking: the m-block's A chunks stay in the scratchpad for its three n-tiles (DECISIONS
    // 112), a program of 34 words.
    gemm_over_spi(ws, GemmShape { m: 10, k: 9, n: 11 }, 5);
    let os = ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(3, 4, Dtype::Bf16) }
        .with_dataflow(Dataflow::OutputStationary);
    gemm_over_spi(os, GemmShape { m: 7, k: 11, n: 6 }, 6);
    // Decoupled: the tiler's software pipeline, matmuls streaming, transposed loads.
    gemm_over_spi(ws.with_schedule(Schedule::Decoupled), GemmShape { m: 10, k: 9, n: 7 }, 7);
    let bf16 = ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(4, 4, Dtype::Bf16) }
        .with_schedule(Schedule::Decoupled);
    gemm_over_spi(bf16, GemmShape { m: 13, k: 6, n: 9 }, 8);
}

/// The firmware's simulated SPI bus, played on the RTL's pins.
struct RtlTarget(SpiLink);

impl systole_firmware::sim::SpiTarget for RtlTarget {
    fn select(&mut self, selected: bool) {
        self.0.select(selected);
    }
    fn transfer_byte(&mut self, mosi: u8) -> u8 {
        self.0.transfer(mosi)
    }
    fn delay_ns(&mut self, ns: u32) {
        // At the config's 100 MHz, 10 ns a cycle.
        self.0.wait(ns / 10);
    }
}

/// The firmware driver, unchanged, runs INT8 inference blobs on the RTL over SPI, an MLP's and
/// a CNN's whose max pooling runs on the INT8 lanes' comparator (its input an image the driver
/// places inside its zero border): the logits bits and the cycle counts of the golden machine
/// (pyramid level 4 of DESIGN.md).
#[test]
fn the_firmware_driver_runs_int8_inference_on_the_rtl() {
    use embedded_hal_mock::eh1::delay::NoopDelay;
    use systole_core::blob::{self, Blob};
    use systole_core::compile::Int8Plan;
    use systole_core::graph::{Graph, MlpSpec};
    use systole_core::layers::{Layer, Net, Shape};
    use systole_core::params::{Params, SplitMix64};
    use systole_core::train::Int8Inference;
    use systole_firmware::sim::SimSpi;
    use systole_firmware::{Input, Options, Systole};

    let spec = MlpSpec { inputs: 12, hidden: heapless::Vec::from_slice(&[8]).unwrap(), classes: 4 };
    let conv = Layer::Conv2d { in_channels: 1, out_channels: 3, kernel: 3, stride: 1, padding: 1 };
    let cnn = Net::new(
        Shape::Image { c: 1, h: 6, w: 6 },
        &[
            conv,
            Layer::Relu,
            Layer::MaxPool2d { kernel: 2, stride: 2 },
            Layer::Flatten,
            Layer::Dense { inputs: 27, outputs: 4 },
        ],
    )
    .unwrap();
    let config =
        ArrayConfig { spad_depth: 256, acc_depth: 64, ..ArrayConfig::new(4, 4, Dtype::Int8) };
    let batch = 2u16;
    let mut rng = SplitMix64(9);
    let mut runs = Vec::new();
    for net in [spec.net().unwrap(), cnn] {
        let params = Params::init(&net, 3);
        let graph = Graph::network(&net).unwrap();
        let features = graph.inputs() as usize;
        let x: Vec<f32> =
            (0..batch as usize * features).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
        let plan = Int8Plan::calibrate(&graph, &params, &x, batch as usize).unwrap();
        let bytes = blob::build(&net, &params, &config, batch, Some(&plan), 1.0).unwrap();
        let dram = Blob::parse(&bytes).unwrap().target.dram_bytes as usize;
        let machine = golden(GoldenKind::Cycle, config, dram).unwrap();
        let mut reference = Int8Inference::new(machine, graph, &params, plan).unwrap();
        // One channel: the image's channels-first and channels-last rows are the same.
        let (expected, work) = reference.logits(&x, batch as usize).unwrap();
        runs.push((bytes, x, expected, work.cycles));
    }
    let dram = runs.iter().map(|r| Blob::parse(&r.0).unwrap().target.dram_bytes).max().unwrap();
    let top = TopConfig {
        dram_bytes: dram as usize,
        fifo_depth: 16,
        uart_divisor: 4,
        ..TopConfig::new(config)
    };
    let bus = SimSpi::new(RtlTarget(SpiLink::new(verilated(&top), 4)));
    let options = Options { clock_mhz: config.clock_mhz, ..Options::DEFAULT };
    let mut accel = Systole::with_options(bus, NoopDelay::new(), options);
    for (bytes, x, expected, cycles) in runs {
        let blob = Blob::parse(&bytes).unwrap();
        assert!(blob.program_words() > 16, "the program is longer than the FIFO");
        let mut logits = vec![0f32; blob.logits_len()];
        let got = accel
            .run_inference(&blob, Input::F32(&x), &mut logits)
            .unwrap_or_else(|e| panic!("the driver on the RTL: {e:?}"));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        assert_eq!(bits(&logits), bits(&expected), "image: {:?}", blob.image);
        assert_eq!(got, cycles, "image: {:?}", blob.image);
    }
}

#[test]
fn identify_answers_over_both_links() {
    let top = small(2, 3, Dtype::Int8, Dataflow::WeightStationary);
    let mut uart = Framed { stream: UartLink::new(verilated(&top), 4) };
    let mut emulator = Emulator::new(golden(GoldenKind::Cycle, top.array, top.dram_bytes).unwrap());
    let mut frame = [0u8; protocol::MAX_FRAME];
    let n = protocol::encode_request(&Request::Identify, &mut frame).unwrap();
    let mut got = [0u8; protocol::MAX_FRAME];
    let m = uart.exchange(&frame[..n], &mut got).expect("an answer over the UART");
    assert_eq!(&got[..m], emulator.serve(&frame[..n]).as_slice());
    let mut spi = Framed { stream: SpiLink::new(verilated(&top), 4) };
    let m = spi.exchange(&frame[..n], &mut got).expect("an answer over SPI");
    assert_eq!(&got[..m], emulator.serve(&frame[..n]).as_slice());
}

/// The digits model the Pico example embeds (`firmware/pico-digits/blobs`), run by the unchanged
/// firmware driver on the RTL over SPI, with the ULX3S 25F's memories (its preset's DRAM and
/// FIFO): the sample's digit, and exactly the logits and the cycle count of the same driver on a
/// golden cycle machine (behind core's device emulator).
#[test]
fn the_firmware_driver_runs_the_digits_model_on_the_rtl() {
    use embedded_hal_mock::eh1::delay::NoopDelay;
    use systole_core::blob::Blob;
    use systole_core::link::emulator::Emulator;
    use systole_firmware::sim::{EmulatedTarget, SimSpi};
    use systole_firmware::{Input, Options, Systole};

    let bytes = include_bytes!("../../firmware/pico-digits/blobs/digits-ulx3s-25f-int8.blob");
    let sample = include_bytes!("../../firmware/pico-digits/blobs/sample.bin");
    let blob = Blob::parse(bytes).unwrap();
    let (pixels, label) = sample.split_at(64);
    let x: Vec<f32> = pixels.iter().map(|&p| p as f32 / blob.feature_scale).collect();
    let config = *blob.config();
    let memories = systole_boards::board::by_name("ulx3s-25f").unwrap().memories;
    let (dram, fifo_depth) = (memories.dram_bytes, memories.fifo_depth);
    let options = Options { clock_mhz: config.clock_mhz, ..Options::DEFAULT };
    let mut logits = vec![0f32; blob.logits_len()];

    let golden_bus = SimSpi::new(EmulatedTarget::new(
        Emulator::new(golden(GoldenKind::Cycle, config, dram).unwrap()),
        2,
    ));
    let mut golden_accel = Systole::with_options(golden_bus, NoopDelay::new(), options);
    let golden_cycles = golden_accel.run_inference(&blob, Input::F32(&x), &mut logits).unwrap();
    let expected = logits.clone();

    let top = TopConfig { dram_bytes: dram, fifo_depth, uart_divisor: 4, ..TopConfig::new(config) };
    let bus = SimSpi::new(RtlTarget(SpiLink::new(verilated(&top), 4)));
    let mut accel = Systole::with_options(bus, NoopDelay::new(), options);
    logits.fill(0.0);
    let cycles = accel
        .run_inference(&blob, Input::F32(&x), &mut logits)
        .unwrap_or_else(|e| panic!("the driver on the RTL: {e:?}"));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    assert_eq!(bits(&logits), bits(&expected), "logits of the digits model");
    assert_eq!((cycles, golden_cycles), (blob.expected_cycles, blob.expected_cycles));
    let digit =
        logits.iter().enumerate().fold(0, |best, (i, v)| if *v > logits[best] { i } else { best });
    assert_eq!(digit, label[0] as usize, "the sample's digit");
}

/// What the host link says crossed it (`LinkMachine::traffic`, what `gemm --stats` and the
/// bench report) is what the RTL's UART pins carried: every byte driven onto `uart_rx` and every
/// byte decoded from `uart_tx`, for a tiled GEMM whose program tops up a FIFO shorter than it;
/// and the link's time at a baud rate is those bytes' 10 bits each.
#[test]
fn the_link_counts_the_bytes_the_uart_pins_carried() {
    let array =
        ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(2, 2, Dtype::Int8) };
    let shape = GemmShape { m: 5, k: 6, n: 3 };
    let (layout, dram) = GemmLayout::packed(&array, &shape).expect("layout");
    let plan = GemmPlan::new(&array, shape, layout).expect("plan");
    let mut rng = SplitMix(31);
    let a = rng.matrix((shape.m * shape.k) as usize, array.dtype);
    let b = rng.matrix((shape.k * shape.n) as usize, array.dtype);
    let top =
        TopConfig { dram_bytes: dram, fifo_depth: 8, uart_divisor: 4, ..TopConfig::new(array) };
    let mut rtl =
        LinkMachine::new(Framed { stream: UartLink::new(verilated(&top), 4) }, array, dram);
    run_gemm(&mut rtl, &plan, &a, &b).unwrap_or_else(|e| panic!("RTL: {e}"));
    let traffic = rtl.link_traffic().expect("a link machine counts its traffic");
    let uart = &rtl.transport.stream;
    assert_eq!((traffic.bytes_out, traffic.bytes_in), (uart.sent, uart.heard));
    // A, B and C cross the link, and the program's words: more than their bytes alone.
    let payload = (a.len() + b.len() + (shape.m * shape.n) as usize * 4) as u64
        + plan.instruction_count() * 16;
    assert!(traffic.bytes() > payload, "{traffic:?} for {payload} bytes of payload");
    assert!(traffic.requests > 3, "{traffic:?}");
    let seconds = traffic.seconds_at(115_200.0);
    assert_eq!(seconds, (traffic.bytes() * 10) as f64 / 115_200.0);
}
