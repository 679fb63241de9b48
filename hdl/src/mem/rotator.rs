//! The byte barrel rotator.

use rust_hdl::prelude::*;

/// `data_out[i] = data_in[(i + amount) mod n]` for `n` byte lanes, `n` a power of two.
#[derive(LogicBlock)]
pub struct Rotator {
    pub data_in: Vec<Signal<In, Bits<8>>>,
    pub amount: Signal<In, Bits<16>>,
    pub data_out: Vec<Signal<Out, Bits<8>>>,
}

impl Rotator {
    pub fn new(lanes: usize) -> Rotator {
        assert!(lanes.is_power_of_two() && lanes <= 1 << 15, "{lanes} lanes");
        Rotator {
            data_in: (0..lanes).map(|_| Default::default()).collect(),
            amount: Default::default(),
            data_out: (0..lanes).map(|_| Default::default()).collect(),
        }
    }
}

impl Logic for Rotator {
    fn update(&mut self) {
        let n = self.data_in.len();
        let amount = self.amount.val().index() % n;
        for i in 0..n {
            self.data_out[i].next = self.data_in[(i + amount) % n].val();
        }
    }

    fn connect(&mut self) {
        for o in &mut self.data_out {
            o.connect();
        }
    }

    /// A shift of the lanes concatenated twice: Yosys builds a log-depth shifter from it.
    fn hdl(&self) -> Verilog {
        let n = self.data_in.len();
        let bits = n.trailing_zeros() as usize;
        let packed: Vec<String> = (0..n).rev().map(|i| format!("data_in${i}")).collect();
        if bits == 0 {
            // One lane (a byte-port DRAM's): nothing to rotate.
            return Verilog::Custom("always @(*) data_out$0 = data_in$0;\n".to_string());
        }
        let amount = format!("amount[{}:0]", bits - 1);
        let mut v = format!(
            "wire [{w}:0] lanes_in = {{{list}}};\nwire [{w2}:0] doubled = {{lanes_in, lanes_in}};\n\
             wire [{w}:0] rotated = doubled >> ({{{amount}, 3'b000}});\n",
            w = 8 * n - 1,
            w2 = 16 * n - 1,
            list = packed.join(", "),
        );
        for i in 0..n {
            v.push_str(&format!("always @(*) data_out${i} = rotated[{}:{}];\n", 8 * i + 7, 8 * i));
        }
        Verilog::Custom(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{settle, verilog_of};

    #[test]
    fn rotator_rotates() {
        let mut r = Rotator::new(8);
        r.connect_all();
        for i in 0..8 {
            r.data_in[i].next = (10 + i as u64).into();
        }
        for amount in [0usize, 1, 5, 7, 9] {
            r.amount.next = (amount as u64).into();
            settle(&mut r);
            for i in 0..8 {
                assert_eq!(r.data_out[i].val().index(), 10 + (i + amount) % 8, "amount {amount}");
            }
        }
    }

    #[test]
    fn verilog_is_valid() {
        yosys_validate("rotator", &verilog_of(Rotator::new(16))).unwrap();
    }
}
