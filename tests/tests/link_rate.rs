//! The UART link at the boards' rates, through the Verilated RTL: its receiver's sampling
//! margin measured against a host sending off its rate, and each board's link carrying a GEMM
//! at the rate its bridge makes (docs/DECISIONS.md 140).

use systole_boards::board::BOARDS;
use systole_core::link::{ByteStream, Framed, LinkMachine};
use systole_core::machine::{golden, run_gemm, GoldenKind, Region};
use systole_core::protocol::{encode_request, Request, MAX_FRAME};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::{ArrayConfig, Dtype, Machine};
use systole_hdl::link::rate_error_limit;
use systole_hdl::TopConfig;
use systole_sim::UartLink;
use systole_tests::{assert_bit_identical, SplitMix};

use crate::cosim::verilated;

/// A small machine whose UART runs at `divisor` cycles a bit: the rate is what is tested, and
/// the simulator counts cycles, not seconds.
fn small(divisor: u16, dram_bytes: usize) -> (ArrayConfig, TopConfig) {
    let array =
        ArrayConfig { spad_depth: 64, acc_depth: 16, ..ArrayConfig::new(2, 2, Dtype::Int8) };
    (array, TopConfig { dram_bytes, fifo_depth: 8, uart_divisor: divisor, ..TopConfig::new(array) })
}

/// Whether a `WriteMemory` of `data` sent by a host at `rate` times the UART's rate arrives:
/// the RTL executes a request only when its checksum holds, so the bytes read back (at the
/// UART's own rate) are the data only if every byte arrived as sent.
fn arrives(link: &mut LinkMachine<Framed<UartLink>>, rate: f64, data: &[u8]) -> bool {
    let stream = &mut link.transport.stream;
    let mut frame = [0u8; MAX_FRAME];
    let request = Request::WriteMemory { region: Region::Dram, addr: 0, data };
    let n = encode_request(&request, &mut frame).expect("a frame");
    stream.set_host_rate(rate);
    stream.write_all(&frame[..n]).expect("the pins take any bytes");
    // Past the answer, whatever it is, and the engine's patience with a frame cut short.
    stream.set_host_rate(1.0);
    stream.patience_bytes = 1100;
    while stream.read_byte().is_ok() {}
    stream.patience_bytes = 64;
    let mut back = vec![0u8; data.len()];
    link.read(Region::Dram, 0, &mut back).expect("a read at the UART's own rate");
    link.write(Region::Dram, 0, &vec![0u8; data.len()]).expect("cleared");
    back == data
}

/// "Measure the margin": at 40 cycles a bit, a host just inside the rate errors where
/// `sampling_margin` reaches zero (5.0% fast, 5.3% slow) gets every byte of a 512-byte write
/// through the RTL's receiver, back to back; one just beyond it, either way, does not. A cycle
/// of the bit over a frame's ten bits is 0.26% of the rate: the test is a cycle and a half
/// either side of the prediction.
#[test]
fn the_uart_reads_a_host_inside_its_sampling_margin_and_misreads_one_beyond_it() {
    let (array, top) = small(40, 1024);
    let link = Framed { stream: UartLink::new(verilated(&top), 40) };
    let mut link = LinkMachine::new(link, array, top.dram_bytes);
    let mut rng = SplitMix(75);
    let data: Vec<u8> = (0..512).map(|_| rng.next_u64() as u8).collect();
    assert!(arrives(&mut link, 1.0, &data), "at the UART's own rate");
    for faster in [true, false] {
        let edge = rate_error_limit(40, faster);
        assert!(edge.abs() > 0.045 && edge.abs() < 0.055, "{edge}");
        let toward = if faster { 1.0 } else { -1.0 };
        assert!(arrives(&mut link, 1.0 + edge - toward * 0.004, &data), "inside {edge}");
        assert!(!arrives(&mut link, 1.0 + edge + toward * 0.004, &data), "beyond {edge}");
    }
}

/// Every board's default build on the fast link's revision, as its UART's divisor and the rate
/// its bridge makes for it (2 Mbaud exactly on the ULX3S 85F; 5.33 Mbaud against the Alchitry
/// Cu's 5.28, 1% fast): a GEMM over the RTL's pins at that rate equals the cycle machine's,
/// with no retries, and the link counts the bytes the pins carried.
#[test]
fn each_boards_link_carries_a_gemm_at_its_bridges_rate() {
    let mut divisors = vec![];
    for b in BOARDS {
        for p in [Some(b.int8), b.bf16].into_iter().flatten() {
            let rate = b.bridge.link_rate(p.knobs.clock_mhz).expect("a rate");
            if !divisors.iter().any(|(d, _)| *d == rate.divisor) {
                divisors.push((rate.divisor, rate.bridge_baud / rate.baud));
            }
        }
    }
    assert_eq!(divisors.len(), 7, "{divisors:?}");
    for (divisor, host_rate) in divisors {
        let shape = GemmShape { m: 24, k: 20, n: 6 };
        let (array, _) = small(divisor, 0);
        let (layout, dram) = GemmLayout::packed(&array, &shape).expect("layout");
        let (array, top) = small(divisor, dram);
        let plan = GemmPlan::new(&array, shape, layout).expect("plan");
        let mut rng = SplitMix(divisor as u64);
        let a = rng.matrix((shape.m * shape.k) as usize, array.dtype);
        let b = rng.matrix((shape.k * shape.n) as usize, array.dtype);
        let mut reference = golden(GoldenKind::Cycle, array, dram).expect("golden");
        let (want, _) = run_gemm(reference.as_mut(), &plan, &a, &b).expect("cycle");
        let stream = UartLink::new(verilated(&top), divisor as u32).with_host_rate(host_rate);
        let mut rtl = LinkMachine::new(Framed { stream }, array, dram);
        let (got, _) = run_gemm(&mut rtl, &plan, &a, &b)
            .unwrap_or_else(|e| panic!("divisor {divisor} at {host_rate}: {e}"));
        assert_bit_identical(&format!("divisor {divisor}"), &want, &got, shape.n as usize);
        assert_eq!(rtl.retries, 0, "divisor {divisor} at {host_rate}");
        let uart = &rtl.transport.stream;
        assert_eq!((rtl.traffic.bytes_out, rtl.traffic.bytes_in), (uart.sent, uart.heard));
    }
}
