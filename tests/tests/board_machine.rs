//! The board machine end to end without a board: `boards::serial::SerialStream` on one end of a
//! pseudo-terminal, the Verilated `systole_top`'s UART pins on the other (a thread copies the
//! TTY's bytes onto `uart_rx`, one bit every `uart_divisor` clocks, and `uart_tx`'s bytes back),
//! so `--machine board` talks to the same RTL a board runs, through a real serial port. A GEMM
//! and a training step equal the cycle machine's bits, and the cycle counter read back equals
//! its count.

use std::io::{Read, Write};
use std::time::Duration;

use serialport::SerialPort;
use systole_boards::serial::SerialStream;
use systole_core::graph::{Graph, MlpSpec, Sgd};
use systole_core::link::{ByteStream, Framed, LinkMachine, TransportError};
use systole_core::machine::{golden, run_gemm, GoldenKind};
use systole_core::params::{Params, SplitMix64};
use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
use systole_core::train::AccelTrainer;
use systole_core::{ArrayConfig, Dtype};
use systole_hdl::TopConfig;
use systole_sim::UartLink;

use crate::cosim::verilated;

/// The board's side of the cable: bytes from the TTY go out on the RTL's `uart_rx`; the RTL is
/// clocked continuously (a program runs between requests) and every byte it sends on `uart_tx`
/// goes back to the TTY. Returns when the host closes its end.
fn bridge(mut tty: serialport::TTYPort, mut uart: UartLink) {
    // Read the TTY without waiting long, so the RTL keeps running between requests.
    tty.set_timeout(Duration::from_millis(1)).expect("TTY timeout");
    // One poll of the RTL: about two byte times of clocks.
    uart.patience_bytes = 2;
    let mut buf = [0u8; 512];
    loop {
        match tty.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => uart.write_all(&buf[..n]).expect("the UART link takes every byte"),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return, // the host closed its end
        }
        let mut out = Vec::new();
        loop {
            match uart.read_byte() {
                Ok(b) => out.push(b),
                Err(TransportError::Timeout) => break,
                Err(e) => panic!("UART link: {e:?}"),
            }
        }
        if !out.is_empty() && tty.write_all(&out).and_then(|()| tty.flush()).is_err() {
            return;
        }
    }
}

/// Runs `host` on a thread with a board machine on one end of a pseudo-terminal, while this
/// thread plays the board on the other end with the Verilated `top` (a Verilated model stays on
/// the thread that made it). Returns what `host` returns once it has closed its end.
fn on_rtl_board<R: Send + 'static>(
    top: &TopConfig,
    host: impl FnOnce(LinkMachine<Framed<SerialStream>>) -> R + Send + 'static,
) -> R {
    let uart = UartLink::new(verilated(top), top.uart_divisor as u32);
    let (mut tty, device) = serialport::TTYPort::pair().expect("a pseudo-terminal pair");
    // The simulated board answers in simulated time; give it wall-clock seconds.
    tty.set_timeout(Duration::from_secs(5)).expect("TTY timeout");
    let (config, dram_bytes) = (top.array, top.dram_bytes);
    let host = std::thread::spawn(move || {
        let stream = SerialStream::from_port(Box::new(tty));
        host(LinkMachine::new(Framed { stream }, config, dram_bytes))
    });
    bridge(device, uart);
    host.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// A BF16 2 x 2 machine with memories just large enough for the GEMM and the MLP below.
fn machine(dram_bytes: usize) -> TopConfig {
    let array =
        ArrayConfig { spad_depth: 96, acc_depth: 48, ..ArrayConfig::new(2, 2, Dtype::Bf16) };
    TopConfig { dram_bytes, fifo_depth: 16, uart_divisor: 4, ..TopConfig::new(array) }
}

fn bf16_bytes(values: impl Iterator<Item = f32>) -> Vec<u8> {
    values.flat_map(|v| half::bf16::from_f32(v).to_le_bytes()).collect()
}

#[test]
fn the_serial_board_machine_on_the_rtl_runs_a_gemm_and_a_training_step_exactly() {
    // The training step: a 6-5-3 MLP, batch 4, SGD with momentum.
    let spec = MlpSpec { inputs: 6, hidden: heapless::Vec::from_slice(&[5]).unwrap(), classes: 3 };
    let sgd = Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.0 };
    let graph = Graph::training(&spec, sgd).unwrap();
    let params = Params::init(&spec, 5);
    let batch = 4;
    let probe = machine(1);
    let train_dram = AccelTrainer::dram_needed(&graph, &probe.array, batch, batch).unwrap();

    // The GEMM: 7 x 5 times 5 x 3, tiled for the 2 x 2 array.
    let shape = GemmShape { m: 7, k: 5, n: 3 };
    let (layout, gemm_dram) = GemmLayout::packed(&probe.array, &shape).unwrap();
    let top = machine(train_dram.max(gemm_dram));
    let config = top.array;
    let plan = GemmPlan::new(&config, shape, layout).unwrap();
    let mut rng = SplitMix64(11);
    let a = bf16_bytes((0..7 * 5).map(|_| (rng.next_f64() * 4.0 - 2.0) as f32));
    let b = bf16_bytes((0..5 * 3).map(|_| (rng.next_f64() * 4.0 - 2.0) as f32));

    let mut cycle = golden(GoldenKind::Cycle, config, top.dram_bytes).unwrap();
    let (want, want_stats) = run_gemm(cycle.as_mut(), &plan, &a, &b).unwrap();
    assert!(want_stats.cycles.is_some());

    // One training step: loss, logits and every parameter bit, and the cycles of both programs.
    let x: Vec<f32> = (0..batch * 6).map(|_| (rng.next_f64() * 2.0 - 1.0) as f32).collect();
    let y: Vec<u16> = (0..batch).map(|_| rng.below(3) as u16).collect();
    let mut on_cycle = AccelTrainer::new(
        golden(GoldenKind::Cycle, config, top.dram_bytes).unwrap(),
        graph.clone(),
        &params,
    )
    .unwrap();
    let (want_step, want_work) = on_cycle.step(&x, &y).unwrap();
    let want_params = on_cycle.params().unwrap();
    assert!(want_work.cycles > 0);

    let (got, stats, got_step, work, got_params) = on_rtl_board(&top, move |mut board| {
        let (got, stats) = run_gemm(&mut board, &plan, &a, &b).unwrap();
        let mut on_board = AccelTrainer::new(Box::new(board), graph, &params).unwrap();
        let (step, work) = on_board.step(&x, &y).unwrap();
        (got, stats, step, work, on_board.params().unwrap())
    });
    assert_eq!(got, want, "GEMM accumulators");
    assert_eq!(stats.cycles, want_stats.cycles, "the counter read back over the serial port");
    assert_eq!(got_step, want_step, "the step's outcome");
    assert_eq!(work, want_work, "the step's cycles, read back from the RTL's counter");
    assert_eq!(got_params, want_params, "parameters after the step");
}
