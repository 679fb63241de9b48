//! A board over USB serial: the host protocol's frames on a serial port, so `--machine board`
//! is one more [`Machine`](systole_core::Machine).

use std::io::{Read, Write};
use std::time::Duration;

use systole_core::link::emulator::Emulator;
use systole_core::link::{ByteStream, TransportError};
use systole_core::protocol::{frame_len, HEADER_BYTES};

/// The default baud rate of the boards' UART host interface (the rate the RTL's divisor makes).
pub use systole_hdl::top::DEFAULT_BAUD;

/// A serial port as a [`ByteStream`].
pub struct SerialStream {
    port: Box<dyn serialport::SerialPort>,
}

impl SerialStream {
    /// Opens `path` at `baud`, 8N1, with `timeout` per byte read.
    pub fn open(
        path: &str,
        baud: u32,
        timeout: Duration,
    ) -> Result<SerialStream, serialport::Error> {
        let port = serialport::new(path, baud).timeout(timeout).open()?;
        Ok(SerialStream { port })
    }

    /// Wraps an already open port (a pseudo-terminal in tests).
    pub fn from_port(port: Box<dyn serialport::SerialPort>) -> SerialStream {
        SerialStream { port }
    }
}

impl ByteStream for SerialStream {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TransportError> {
        self.port.write_all(bytes).and_then(|()| self.port.flush()).map_err(|_| TransportError::Io)
    }
    fn read_byte(&mut self) -> Result<u8, TransportError> {
        let mut b = [0u8; 1];
        match self.port.read(&mut b) {
            Ok(1) => Ok(b[0]),
            Ok(_) => Err(TransportError::Timeout),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(TransportError::Timeout),
            Err(_) => Err(TransportError::Io),
        }
    }
    fn discard_input(&mut self) {
        let _ = self.port.clear(serialport::ClearBuffer::Input);
    }
}

/// The device end of a serial link played by a golden machine: reads request frames byte by
/// byte, serves them with `device`, writes the responses, until the host closes its end. For
/// tests and demonstrations without a board; `lossy` lists response frames (counted from 1) that
/// lose their middle byte, like a noisy cable.
pub fn serve<P: Read + Write>(mut port: P, device: &mut Emulator, lossy: &[usize]) {
    let mut frames = 0;
    loop {
        let mut head = [0u8; HEADER_BYTES];
        if !wait_for(&mut port, &mut head) {
            return;
        }
        let len = u16::from_le_bytes([head[2], head[3]]) as usize;
        let mut frame = head.to_vec();
        frame.resize(frame_len(len), 0);
        if !wait_for(&mut port, &mut frame[HEADER_BYTES..]) {
            return;
        }
        let mut response = device.serve(&frame);
        frames += 1;
        if lossy.contains(&frames) {
            response.remove(response.len() / 2);
        }
        if port.write_all(&response).is_err() {
            return;
        }
    }
}

/// Fills `buf` from `port`, waiting through read time-outs as a board waits for its host
/// however long it is idle; false once the host end is closed or fails.
fn wait_for<P: Read>(port: &mut P, mut buf: &mut [u8]) -> bool {
    while !buf.is_empty() {
        match port.read(buf) {
            Ok(0) => return false,
            Ok(n) => buf = &mut buf[n..],
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use systole_core::link::{Framed, LinkMachine};
    use systole_core::machine::{golden, run_gemm, GoldenKind};
    use systole_core::tiler::{GemmLayout, GemmPlan, GemmShape};
    use systole_core::{ArrayConfig, Dtype};

    #[test]
    fn a_gemm_over_a_pseudo_terminal_equals_the_cycle_machine() {
        let config = ArrayConfig::new(4, 4, Dtype::Int8);
        let shape = GemmShape { m: 33, k: 20, n: 9 };
        let (layout, dram) = GemmLayout::packed(&config, &shape).unwrap();
        let plan = GemmPlan::new(&config, shape, layout).unwrap();
        let a: Vec<u8> = (0..33 * 20).map(|i| (i * 7 % 251) as u8).collect();
        let b: Vec<u8> = (0..20 * 9).map(|i| (i * 13 % 249) as u8).collect();
        let mut reference = golden(GoldenKind::Cycle, config, dram).unwrap();
        let (want, want_stats) = run_gemm(reference.as_mut(), &plan, &a, &b).unwrap();

        // Frame 1 writes A in one request (and 2 again); 6 and 9 are instruction uploads before
        // `Run`, each lost answer costing a reset and a new upload; 17 is a status poll.
        for lossy in [&[][..], &[1, 6, 9, 17][..]] {
            let (host, device) = serialport::TTYPort::pair().expect("a pseudo-terminal pair");
            let server = std::thread::spawn(move || {
                let mut emulator = Emulator::new(golden(GoldenKind::Cycle, config, dram).unwrap());
                serve(device, &mut emulator, lossy)
            });
            let mut host = host;
            serialport::SerialPort::set_timeout(&mut host, Duration::from_millis(200)).unwrap();
            let stream = SerialStream::from_port(Box::new(host));
            let mut board = LinkMachine::new(Framed { stream }, config, dram);
            let (got, stats) = run_gemm(&mut board, &plan, &a, &b).unwrap();
            assert_eq!(got, want, "lossy frames {lossy:?}");
            assert_eq!(stats.cycles, want_stats.cycles);
            if !lossy.is_empty() {
                assert!(board.retries > 0, "dropped bytes must have cost retries");
            }
            drop(board);
            server.join().unwrap();
        }
    }
}
