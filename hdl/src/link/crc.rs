//! One byte into CRC-16/CCITT-FALSE, as the packet engine checks and sends frames.

use rust_hdl::prelude::*;

/// One byte into CRC-16/CCITT-FALSE (`core::protocol::crc16_update`).
#[derive(LogicBlock)]
pub struct Crc16Step {
    pub crc: Signal<In, Bits<16>>,
    pub data: Signal<In, Bits<8>>,
    pub out: Signal<Out, Bits<16>>,
    steps: Vec<Signal<Local, Bits<16>>>,
}

impl Default for Crc16Step {
    fn default() -> Self {
        Crc16Step {
            crc: Default::default(),
            data: Default::default(),
            out: Default::default(),
            steps: (0..9).map(|_| Default::default()).collect(),
        }
    }
}

impl Logic for Crc16Step {
    #[hdl_gen]
    fn update(&mut self) {
        self.steps[0].next = self.crc.val() ^ (bit_cast::<16, 8>(self.data.val()) << 8);
        for i in 0..8 {
            if self.steps[i].val().get_bit(15) {
                self.steps[i + 1].next = (self.steps[i].val() << 1) ^ 0x1021;
            } else {
                self.steps[i + 1].next = self.steps[i].val() << 1;
            }
        }
        self.out.next = self.steps[8].val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::settle;
    use systole_core::protocol::crc16_update;

    #[test]
    fn crc_step_matches_core() {
        let mut c = Crc16Step::default();
        for (crc, byte) in [(0xFFFFu16, 0x31u8), (0x1234, 0xA5), (0, 0), (0x8000, 0xFF)] {
            c.crc.next = (crc as u64).into();
            c.data.next = (byte as u64).into();
            settle(&mut c);
            assert_eq!(c.out.val().index() as u16, crc16_update(crc, byte));
        }
    }
}
