//! The SPI slave: mode 0, MSB first, its pins synchronised to the system clock.

use rust_hdl::prelude::*;

use crate::decode::constant;
use systole_core::protocol::SPI_IDLE;

/// SPI slave, mode 0, MSB first. `rx_valid` pulses with each received byte while selected; at
/// selection and after each byte the next MISO byte is loaded: `tx_byte` if `tx_valid`, else
/// `SPI_IDLE`. A loaded `tx_byte` is taken (`take` pulses) only when its first bit is clocked,
/// so a byte loaded as the master ends its transaction is offered again in the next one.
/// `deselect` pulses when CS rises.
#[derive(LogicBlock)]
pub struct SpiSlave {
    pub clock: Signal<In, Clock>,
    pub sck: Signal<In, Bit>,
    pub cs_n: Signal<In, Bit>,
    pub mosi: Signal<In, Bit>,
    pub miso: Signal<Out, Bit>,
    pub rx_byte: Signal<Out, Bits<8>>,
    pub rx_valid: Signal<Out, Bit>,
    pub tx_byte: Signal<In, Bits<8>>,
    pub tx_valid: Signal<In, Bit>,
    pub take: Signal<Out, Bit>,
    pub deselect: Signal<Out, Bit>,
    sck1: DFF<Bit>,
    sck2: DFF<Bit>,
    sck3: DFF<Bit>,
    cs1: DFF<Bit>,
    cs2: DFF<Bit>,
    cs3: DFF<Bit>,
    mosi1: DFF<Bit>,
    mosi2: DFF<Bit>,
    bit_index: DFF<Bits<3>>,
    rx_shift: DFF<Bits<8>>,
    tx_shift: DFF<Bits<8>>,
    out: DFF<Bits<8>>,
    strobe: DFF<Bit>,
    /// `tx_shift` holds a byte of the response, not yet committed.
    offered: DFF<Bit>,
    idle: Constant<Bits<8>>,
    load: Signal<Local, Bit>,
}

impl Default for SpiSlave {
    fn default() -> Self {
        SpiSlave {
            clock: Default::default(),
            sck: Default::default(),
            cs_n: Default::default(),
            mosi: Default::default(),
            miso: Default::default(),
            rx_byte: Default::default(),
            rx_valid: Default::default(),
            tx_byte: Default::default(),
            tx_valid: Default::default(),
            take: Default::default(),
            deselect: Default::default(),
            sck1: Default::default(),
            sck2: Default::default(),
            sck3: Default::default(),
            cs1: Default::default(),
            cs2: Default::default(),
            cs3: Default::default(),
            mosi1: Default::default(),
            mosi2: Default::default(),
            bit_index: Default::default(),
            rx_shift: Default::default(),
            tx_shift: Default::default(),
            out: Default::default(),
            strobe: Default::default(),
            offered: Default::default(),
            idle: constant(SPI_IDLE as u64),
            load: Default::default(),
        }
    }
}

impl Logic for SpiSlave {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, sck1, sck2, sck3, cs1, cs2, cs3, mosi1, mosi2, bit_index, rx_shift,
            tx_shift, out, strobe, offered
        );
        self.sck1.d.next = self.sck.val();
        self.sck2.d.next = self.sck1.q.val();
        self.sck3.d.next = self.sck2.q.val();
        // CS_n idles high: the synchronisers start deselected.
        self.cs1.d.next = self.cs_n.val();
        self.cs2.d.next = self.cs1.q.val();
        self.cs3.d.next = self.cs2.q.val();
        self.mosi1.d.next = self.mosi.val();
        self.mosi2.d.next = self.mosi1.q.val();
        self.strobe.d.next = false;
        self.load.next = false;
        self.take.next = false;
        self.deselect.next = self.cs2.q.val() && !self.cs3.q.val();
        if self.cs3.q.val() && !self.cs2.q.val() {
            self.bit_index.d.next = 0.into();
            self.load.next = true;
        } else if !self.cs2.q.val() {
            if self.sck2.q.val() && !self.sck3.q.val() {
                if !self.bit_index.q.val().any() {
                    // The loaded byte's first bit goes out: it is committed now.
                    self.take.next = self.offered.q.val();
                    self.offered.d.next = false;
                }
                self.rx_shift.d.next =
                    (self.rx_shift.q.val() << 1) | bit_cast::<8, 1>(self.mosi2.q.val().into());
                self.bit_index.d.next = self.bit_index.q.val() + 1;
                if self.bit_index.q.val() == 7 {
                    self.out.d.next =
                        (self.rx_shift.q.val() << 1) | bit_cast::<8, 1>(self.mosi2.q.val().into());
                    self.strobe.d.next = true;
                }
            }
            if !self.sck2.q.val() && self.sck3.q.val() {
                if self.bit_index.q.val().any() {
                    self.tx_shift.d.next = self.tx_shift.q.val() << 1;
                } else {
                    self.load.next = true;
                }
            }
        }
        if self.load.val() {
            self.tx_shift.d.next = self.idle.val();
            self.offered.d.next = self.tx_valid.val();
            if self.tx_valid.val() {
                self.tx_shift.d.next = self.tx_byte.val();
            }
        }
        self.miso.next = self.tx_shift.q.val().get_bit(7);
        self.rx_byte.next = self.out.q.val();
        self.rx_valid.next = self.strobe.q.val();
    }
}
