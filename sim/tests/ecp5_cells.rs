//! The ECP5 block RAM and multiplier as this crate models them (`cells::ecp5`), Verilated and
//! driven at random against the behaviour its documentation states: each write mode, the byte
//! enables, the 36-bit word split across both ports, and signed and unsigned products. Needs
//! the YoWASP Yosys (`scripts/install-fpga-tools`), whose cell library the models complete.

use std::fmt::Write as _;

use systole_sim::cells::with_ecp5_models;
use systole_sim::{build_model, Model, Port};

/// One block RAM per width, both ports that wide, and a multiplier, on shared pins.
fn harness() -> (String, Vec<Port>) {
    let mut v = String::from(
        "module cells(input clock, input [13:0] ada, input [13:0] adb, input [17:0] dia,\n\
         input [17:0] dib, input cea, input wea, input ceb, input web,\n\
         output [17:0] doa9, output [17:0] dob9, output [17:0] doa18, output [17:0] dob18,\n\
         output [17:0] doa36, output [17:0] dob36,\n\
         input [17:0] a, input [17:0] b, input signeda, input signedb, output [35:0] p);\n",
    );
    let rams = [
        (9, "READBEFOREWRITE", "WRITETHROUGH"),
        (18, "NORMAL", "READBEFOREWRITE"),
        (36, "NORMAL", "NORMAL"),
    ];
    for (width, mode_a, mode_b) in rams {
        let _ = writeln!(
            v,
            "  DP16KD #(\n    .DATA_WIDTH_A(32'd{width}),\n    .DATA_WIDTH_B(32'd{width}),\n    \
             .WRITEMODE_A(\"{mode_a}\"),\n    .WRITEMODE_B(\"{mode_b}\")\n  ) ram{width} (\n    \
             .CLKA(clock),\n    .CLKB(clock),"
        );
        // A 36-bit port writes only through A, as Yosys maps it.
        let web = if width == 36 { "1'h0" } else { "web" };
        for (pin, net) in [("CEA", "cea"), ("WEA", "wea"), ("CEB", "ceb"), ("WEB", web)] {
            let _ = writeln!(v, "    .{pin}({net}),");
        }
        for i in 0..18 {
            for port in ['a', 'b'] {
                let up = port.to_ascii_uppercase();
                let _ = writeln!(v, "    .DI{up}{i}(di{port}[{i}]),");
                let _ = writeln!(v, "    .DO{up}{i}(do{port}{width}[{i}]),");
                if i < 14 {
                    let _ = writeln!(v, "    .AD{up}{i}(ad{port}[{i}]),");
                }
            }
        }
        v.push_str("    .RSTA(1'h0)\n  );\n");
    }
    v.push_str("  MULT18X18D mult (\n");
    for i in 0..18 {
        let _ = writeln!(v, "    .A{i}(a[{i}]),\n    .B{i}(b[{i}]),");
    }
    for i in 0..36 {
        let _ = writeln!(v, "    .P{i}(p[{i}]),");
    }
    v.push_str("    .SIGNEDA(signeda),\n    .SIGNEDB(signedb)\n  );\nendmodule\n");
    let mut ports = vec![Port::input("clock", 1)];
    for (name, bits) in [("ada", 14), ("adb", 14), ("dia", 18), ("dib", 18)] {
        ports.push(Port::input(name, bits));
    }
    for name in ["cea", "wea", "ceb", "web", "signeda", "signedb"] {
        ports.push(Port::input(name, 1));
    }
    ports.extend([Port::input("a", 18), Port::input("b", 18), Port::output("p", 36)]);
    for w in [9, 18, 36] {
        ports.extend([Port::output(&format!("doa{w}"), 18), Port::output(&format!("dob{w}"), 18)]);
    }
    (v, ports)
}

/// What one of the harness' block RAMs holds and shows, as the models' documentation says.
struct Ram {
    width: u32,
    modes: [&'static str; 2],
    rows: Vec<u32>,
    shown: [u32; 2],
}

/// One port's inputs for a cycle.
#[derive(Clone, Copy)]
struct Access {
    address: u32,
    data: u32,
    enable: bool,
    write: bool,
}

impl Ram {
    fn new(width: u32, modes: [&'static str; 2]) -> Ram {
        Ram { width, modes, rows: vec![0; 1024], shown: [0; 2] }
    }

    fn cycle(&mut self, ports: [Access; 2]) {
        let old = self.rows.clone();
        if self.width == 36 {
            let [a, b] = ports;
            let word = (a.address >> 5) as usize * 2;
            if a.enable && a.write {
                for lane in 0..4 {
                    if a.address >> lane & 1 == 1 {
                        let data = if lane < 2 { a.data } else { ports[1].data };
                        let half = 9 * (lane % 2);
                        let row = &mut self.rows[word + lane as usize / 2];
                        *row = *row & !(0x1FF << half) | (data >> half & 0x1FF) << half;
                    }
                }
            }
            if b.enable {
                let word = (b.address >> 5) as usize * 2;
                self.shown = [old[word], old[word + 1]];
            }
            return;
        }
        for (p, access) in ports.iter().enumerate() {
            let row = (access.address >> 4) as usize;
            let high = access.address >> 3 & 1 == 1;
            let (mask, put) = match self.width {
                18 => {
                    let lanes =
                        ((access.address & 1) * 0x1FF) | ((access.address >> 1 & 1) * 0x3FE00);
                    (lanes, access.data)
                }
                _ => (if high { 0x3FE00 } else { 0x1FF }, (access.data & 0x1FF) * 0x201),
            };
            let new = old[row] & !mask | put & mask;
            let show = |r: u32| match self.width {
                18 => r,
                _ if high => r >> 9,
                _ => r & 0x1FF,
            };
            if !access.enable {
                continue;
            }
            if !access.write {
                self.shown[p] = show(old[row]);
                continue;
            }
            self.rows[row] = new;
            match self.modes[p] {
                "WRITETHROUGH" => self.shown[p] = show(new),
                "READBEFOREWRITE" => self.shown[p] = show(old[row]),
                _ => {}
            }
        }
    }
}

fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 29
}

fn set(m: &mut Model, name: &str, value: u64) {
    let port = m.port(name).unwrap();
    m.set_u64(port, value).unwrap();
}

fn get(m: &Model, name: &str) -> u64 {
    m.get_u64(m.port(name).unwrap()).unwrap()
}

fn sign_extend(v: u64, signed: bool) -> i64 {
    if signed && v >> 17 & 1 == 1 {
        v as i64 - (1 << 18)
    } else {
        v as i64
    }
}

#[test]
fn the_block_ram_and_multiplier_models_behave_as_documented() {
    let share = systole_boards::yosys::share_dir(&systole_boards::board::ULX3S_85F)
        .unwrap_or_else(|e| panic!("the ECP5 cell library (scripts/install-fpga-tools): {e}"));
    let (verilog, ports) = harness();
    let verilog = with_ecp5_models(&verilog, &share).unwrap();
    let mut m = build_model(&verilog, "cells", &ports, &Default::default())
        .unwrap_or_else(|e| panic!("verilating the ECP5 cells failed: {e}"));
    let mut rams = [
        Ram::new(9, ["READBEFOREWRITE", "WRITETHROUGH"]),
        Ram::new(18, ["NORMAL", "READBEFOREWRITE"]),
        Ram::new(36, ["NORMAL", "NORMAL"]),
    ];
    let mut seed = 5;
    let mut reads_seen = 0;
    for cycle in 0..4000 {
        // Few rows, so reads find what was written; port B writes only rows port A leaves.
        let mut access = || Access {
            address: ((lcg(&mut seed) % 64) << 4 | lcg(&mut seed) & 0xF) as u32,
            data: lcg(&mut seed) as u32 & 0x3FFFF,
            enable: lcg(&mut seed) % 6 > 0,
            write: lcg(&mut seed) % 2 == 0,
        };
        let a = access();
        let mut b = access();
        if b.address >> 4 == a.address >> 4 || b.address >> 5 == a.address >> 5 {
            b.write = false;
        }
        for (pin, v) in [
            ("ada", a.address),
            ("adb", b.address),
            ("dia", a.data),
            ("dib", b.data),
            ("cea", a.enable as u32),
            ("wea", a.write as u32),
            ("ceb", b.enable as u32),
            ("web", b.write as u32),
        ] {
            set(&mut m, pin, v as u64);
        }
        let (x, y) = (lcg(&mut seed) & 0x3FFFF, lcg(&mut seed) & 0x3FFFF);
        let (sx, sy) = (cycle % 2 == 0, cycle % 3 == 0);
        for (pin, v) in [("a", x), ("b", y), ("signeda", sx as u64), ("signedb", sy as u64)] {
            set(&mut m, pin, v);
        }
        m.tick(1);
        let product = (sign_extend(x, sx) * sign_extend(y, sy)) as u64 & ((1 << 36) - 1);
        assert_eq!(get(&m, "p"), product, "cycle {cycle}: {x:#x} x {y:#x}, signed {sx} {sy}");
        for ram in rams.iter_mut() {
            ram.cycle([a, b]);
            let w = ram.width;
            let shown = [get(&m, &format!("doa{w}")), get(&m, &format!("dob{w}"))];
            assert_eq!(shown, ram.shown.map(u64::from), "cycle {cycle}, {w} bits");
            reads_seen += ram.shown.iter().filter(|&&s| s != 0).count();
        }
    }
    assert!(reads_seen > 5000, "reads showed written data {reads_seen} times");
}
