//! What crosses a host link: the frames a machine reached over one (`crate::link::LinkMachine`)
//! sent and received, and their time on a UART.

/// Bits a UART sends per byte: a start bit, eight data bits, a stop bit (8N1, what every host
/// link here speaks).
pub const UART_BITS_PER_BYTE: u64 = 10;

/// What crossed the link: every request frame sent (retries included) and every response frame
/// received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub requests: u64,
    /// Bytes of request frames, host to accelerator.
    pub bytes_out: u64,
    /// Bytes of response frames, accelerator to host.
    pub bytes_in: u64,
}

impl Traffic {
    /// Both directions.
    pub fn bytes(&self) -> u64 {
        self.bytes_out + self.bytes_in
    }

    /// Seconds the bytes take on a UART at `baud`, one direction after the other (a request and
    /// its response never overlap on this link).
    pub fn seconds_at(&self, baud: f64) -> f64 {
        (self.bytes() * UART_BITS_PER_BYTE) as f64 / baud
    }
}

impl core::ops::Sub for Traffic {
    type Output = Traffic;
    fn sub(self, earlier: Traffic) -> Traffic {
        Traffic {
            requests: self.requests - earlier.requests,
            bytes_out: self.bytes_out - earlier.bytes_out,
            bytes_in: self.bytes_in - earlier.bytes_in,
        }
    }
}

impl core::ops::AddAssign for Traffic {
    fn add_assign(&mut self, more: Traffic) {
        self.requests += more.requests;
        self.bytes_out += more.bytes_out;
        self.bytes_in += more.bytes_in;
    }
}
