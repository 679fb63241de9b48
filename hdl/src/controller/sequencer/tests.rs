use super::*;
use crate::testing::{settle, tick, verilog_of};
use crate::top::SpadLane;
use crate::transpose::Transposer;
use systole_core::{timing, Dtype, Instruction, VectorOp};

/// A free sequencer addresses its candidate's first reads whether or not it starts (the
/// program checks decide `start` later in the cycle); a busy one addresses its own next
/// reads, whatever the candidate.
#[test]
fn a_free_sequencer_addresses_the_candidate_and_a_busy_one_its_own_rows() {
    let config = ArrayConfig::new(2, 2, Dtype::Int8);
    let mut s = Sequencer::new(&config);
    s.connect_all();
    s.enable.next = true;
    s.ins.vector.next = true;
    s.ins.dst.next = 7u64.into();
    s.ins.src.next = 3u64.into();
    s.ins.rows.next = 3u64.into();
    s.ins.len.next = 1u64.into();
    s.ins.dram_addr.next = 40u64.into();
    settle(&mut s);
    assert!(s.free.val());
    assert_eq!((s.acc_read_x.val().index(), s.acc_read_y.val().index()), (7, 3));
    assert_eq!(s.dram_read_address.val().index(), 40);
    // Not started: still idle, still addressing the candidate.
    tick(&mut s, |s| &mut s.clock);
    settle(&mut s);
    assert!(s.free.val() && !s.acc_write.val());
    assert_eq!(s.acc_read_x.val().index(), 7);
    // Started: rows 7, 8, 9 of the destination; the candidate that follows does not move
    // the reads until the last row.
    s.start.next = true;
    tick(&mut s, |s| &mut s.clock);
    s.start.next = false;
    s.ins.dst.next = 100u64.into();
    s.ins.src.next = 50u64.into();
    let mut reads = vec![];
    for _ in 0..3 {
        settle(&mut s);
        reads.push((s.acc_read_x.val().index(), s.acc_read_y.val().index(), s.free.val()));
        tick(&mut s, |s| &mut s.clock);
    }
    assert_eq!(reads, vec![(8, 4, false), (9, 5, false), (100, 50, true)]);
}

/// A strided `Load` gathers one element per cycle (core's duration), addresses DRAM one
/// cycle ahead and writes each row in its last element's cycle.
#[test]
fn sequencer_gathers_a_strided_load_element_by_element() {
    let config = ArrayConfig::new(2, 2, Dtype::Int8);
    let load = Instruction::Load {
        spad_row: 5,
        dram_addr: 100,
        rows: 2,
        len: 3,
        row_stride: 10,
        elem_stride: 2,
    };
    let mut s = Sequencer::new(&config);
    s.connect_all();
    s.enable.next = true;
    s.start.next = true;
    s.ins.load.next = true;
    s.ins.spad_row.next = 5u64.into();
    s.ins.dram_addr.next = 100u64.into();
    s.ins.rows.next = 2u64.into();
    s.ins.len.next = 3u64.into();
    s.ins.row_stride.next = 10u64.into();
    s.ins.elem_stride.next = 2u64.into();
    settle(&mut s);
    assert_eq!(s.dram_read_address.val().index(), 100, "addressed before dispatch");
    tick(&mut s, |s| &mut s.clock);
    s.start.next = false;
    s.ins.load.next = false;
    let mut seen = vec![];
    loop {
        settle(&mut s);
        assert!(s.is_load.val() && s.gather.val());
        let free = s.free.val();
        seen.push((
            s.element.val().index(),
            s.dram_read_address.val().index(),
            s.spad_write.val().then(|| s.spad_write_row.val().index()),
            free,
        ));
        tick(&mut s, |s| &mut s.clock);
        if free {
            break;
        }
    }
    assert_eq!(seen.len() as u64, timing::duration(&config, &load));
    // Element e of row r is at 100 + 10 r + 2 e; the next one is addressed a cycle ahead.
    // In the last cycle the sequencer is free and addresses its candidate's first element
    // (the inputs still hold this load's fields: 100), whether or not it dispatches.
    assert_eq!(
        seen,
        vec![
            (0, 102, None, false),
            (1, 104, None, false),
            (2, 110, Some(5), false),
            (0, 112, None, false),
            (1, 114, None, false),
            (2, 100, Some(6), true),
        ]
    );
    settle(&mut s);
    assert!(s.free.val() && !s.is_load.val() && !s.spad_write.val());
}

/// Built with `requant_cycles = 4`, a `Requantize` holds each accumulator row on the read
/// port for four enabled cycles, counts them on `element`, and writes the row's scratchpad
/// row in core's `timing::row_lands` cycle; frozen cycles hold everything.
/// Runs a started sequencer until it is free, every third cycle frozen; `probe` of each
/// enabled cycle.
fn run_to_the_end<T>(s: &mut Sequencer, probe: impl Fn(&Sequencer) -> T) -> Vec<T> {
    let mut seen = vec![];
    for cycle in 0.. {
        s.enable.next = cycle % 3 != 1;
        settle(s);
        let free = s.free.val() && s.enable.val();
        if s.enable.val() {
            seen.push(probe(s));
        }
        tick(s, |s| &mut s.clock);
        if free {
            break;
        }
    }
    seen
}

#[test]
fn sequencer_paces_requantize_rows() {
    let config = ArrayConfig::new(4, 1, Dtype::Int8).with_convert_stages(2).with_requant_cycles(4);
    let requant = Instruction::Requantize {
        acc_row: 3,
        spad_row: 7,
        rows: 2,
        requant: systole_core::Requant::from_scale(0.25, 0).unwrap(),
    };
    let mut s = Sequencer::new(&config);
    s.connect_all();
    s.enable.next = true;
    s.start.next = true;
    s.ins.requantize.next = true;
    s.ins.acc_row.next = 3u64.into();
    s.ins.spad_row.next = 7u64.into();
    s.ins.rows.next = 2u64.into();
    settle(&mut s);
    assert_eq!(s.acc_read_x.val().index(), 3, "addressed before dispatch");
    tick(&mut s, |s| &mut s.clock);
    s.start.next = false;
    s.ins.requantize.next = false;
    // Per enabled cycle: the phase, the row read next, the scratchpad row written.
    let seen = run_to_the_end(&mut s, |s| {
        (
            s.element.val().index() & 3,
            s.acc_read_x.val().index(),
            s.spad_write.val().then(|| s.spad_write_row.val().index()),
        )
    });
    assert_eq!(seen.len() as u64, timing::duration(&config, &requant));
    let writes: Vec<(usize, usize)> = seen
        .iter()
        .enumerate()
        .filter_map(|(cycle, &(_, _, row))| row.map(|row| (cycle, row)))
        .collect();
    let lands = |r| timing::row_lands(&config, &requant, r) as usize;
    assert_eq!(writes, vec![(lands(0), 7), (lands(1), 8)]);
    assert_eq!((lands(0), lands(1)), (5, 9));
    // Rows 3 and 4 are read for four cycles each (the next row addressed in the fourth,
    // except after the final row, whose pointers hold while the lanes drain).
    let reads: Vec<(usize, usize)> = seen.iter().map(|&(e, x, _)| (e, x)).take(8).collect();
    assert_eq!(reads, vec![(0, 3), (1, 3), (2, 3), (3, 4), (0, 4), (1, 4), (2, 4), (3, 4)]);
}

/// Built with paced BF16 lanes, a `Scale` or `Axpy` row holds its reads two cycles (three
/// on lanes that split their product) and is written in the last; built with a staged add,
/// a row that adds holds them a cycle more again for each register inside the add; each row
/// is written in core's `timing::row_lands` cycle, and the ops that neither multiply nor
/// add are not paced.
#[test]
fn sequencer_paces_products_and_sums() {
    let bf16 = ArrayConfig::new(2, 2, Dtype::Bf16);
    let axpy = Instruction::Vector { op: VectorOp::Axpy, dst: 3, src: 9, rows: 3, imm: 0 };
    let add = Instruction::Vector { op: VectorOp::Add, dst: 3, src: 9, rows: 3, imm: 0 };
    let relu = Instruction::Vector { op: VectorOp::Relu, dst: 3, src: 0, rows: 3, imm: 0 };
    for config in [
        bf16.with_scale_cycles(2),
        bf16.with_add_stages(2),
        bf16.with_scale_cycles(2).with_add_stages(2),
        bf16.with_scale_cycles(3),
        bf16.with_scale_cycles(3).with_add_stages(2),
        bf16.with_add_stages(3),
        bf16.with_scale_cycles(3).with_add_stages(3),
    ] {
        for ins in [axpy, add, relu] {
            let mut s = Sequencer::new(&config);
            s.connect_all();
            s.enable.next = true;
            s.start.next = true;
            s.ins.vector.next = true;
            s.ins.axpy.next = ins == axpy;
            s.ins.add.next = ins == add;
            s.ins.relu.next = ins == relu;
            s.ins.dst.next = 3u64.into();
            s.ins.src.next = (if ins == relu { 0u64 } else { 9 }).into();
            s.ins.rows.next = 3u64.into();
            tick(&mut s, |s| &mut s.clock);
            s.start.next = false;
            s.ins.vector.next = false;
            // Per enabled cycle: the rows read next (x, y), the row written.
            let seen = run_to_the_end(&mut s, |s| {
                assert!(s.lanes_busy.val(), "the lanes take the op in every cycle");
                (
                    s.acc_read_x.val().index(),
                    s.acc_read_y.val().index(),
                    s.acc_write.val().then(|| s.acc_write_row.val().index()),
                )
            });
            let what = format!("{ins:?} on {config:?}");
            assert_eq!(seen.len() as u64, timing::duration(&config, &ins), "{what}");
            let writes: Vec<(usize, usize)> = seen
                .iter()
                .enumerate()
                .filter_map(|(cycle, &(_, _, row))| row.map(|row| (cycle, row)))
                .collect();
            let lands = |r| timing::row_lands(&config, &ins, r) as usize;
            assert_eq!(writes, vec![(lands(0), 3), (lands(1), 4), (lands(2), 5)], "{what}");
            // The reads addressed in a cycle are the next cycle's: row r is read from the
            // cycle after row r - 1 lands to the cycle it lands.
            for (cycle, &(x, y, _)) in seen.iter().enumerate() {
                if let Some(row) = (0..3usize).find(|&r| cycle < lands(r as u64)) {
                    // Relu reads no source row.
                    let y = if ins == relu { 9 + row } else { y };
                    assert_eq!((x, y), (3 + row, 9 + row), "{what}: cycle {cycle}");
                }
            }
            if ins == relu {
                assert_eq!((lands(0), lands(1), lands(2)), (0, 1, 2), "{what}");
            }
        }
    }
}

/// The load path as `systole_top` wires it (see `crate::transpose`): the sequencer, the
/// transpose buffer and the scratchpad lanes, fed by a DRAM read register that the test
/// drives from a Rust model of the DRAM.
#[derive(LogicBlock)]
struct LoadPath {
    clock: Signal<In, Clock>,
    enable: Signal<In, Bit>,
    /// The DRAM row read in the previous enabled cycle.
    dram: Vec<Signal<In, Bits<8>>>,
    /// The scratchpad row's write data.
    spad_data: Vec<Signal<Out, Bits<16>>>,
    seq: Sequencer,
    transposer: Transposer,
    lanes: Vec<SpadLane>,
    _es: usize,
}

impl LoadPath {
    fn new(config: &ArrayConfig) -> LoadPath {
        let (w, es) = (config.spad_width(), config.dtype.elem_bytes());
        LoadPath {
            clock: Default::default(),
            enable: Default::default(),
            dram: (0..w * es).map(|_| Default::default()).collect(),
            spad_data: (0..w).map(|_| Default::default()).collect(),
            seq: Sequencer::new(config),
            transposer: Transposer::new(config),
            lanes: (0..w).map(|e| SpadLane::new(e, w, config.dtype)).collect(),
            _es: es,
        }
    }
}

impl Logic for LoadPath {
    #[hdl_gen]
    fn update(&mut self) {
        self.seq.clock.next = self.clock.val();
        self.seq.enable.next = self.enable.val();
        self.transposer.clock.next = self.clock.val();
        self.transposer.enable.next = self.enable.val();
        for k in 0..self.transposer.dram.len() {
            self.transposer.dram[k].next = self.dram[k].val();
        }
        for _k in 0..self.seq.transpose_write.len() {
            self.transposer.write.next = self.seq.transpose_write.val();
            self.transposer.read.next = self.seq.transpose_read.val();
            self.transposer.half.next = self.seq.transpose_half.val();
            self.transposer.column.next = self.seq.element.val();
            self.transposer.next_row.next = self.seq.transpose_next_row.val();
            self.transposer.next_half.next = self.seq.transpose_next_half.val();
        }
        for es in self._es..(self._es + 1) {
            for e in 0..self.lanes.len() {
                self.lanes[e].clock.next = self.clock.val();
                self.lanes[e].enable.next = self.enable.val();
                self.lanes[e].lo.next = self.dram[e * es].val();
                self.lanes[e].hi.next = self.dram[e * es + es - 1].val();
                self.lanes[e].lo0.next = self.dram[0].val();
                self.lanes[e].hi0.next = self.dram[es - 1].val();
                self.lanes[e].is_load.next = self.seq.is_load.val();
                self.lanes[e].gather.next = self.seq.gather.val();
                self.lanes[e].broadcast.next = self.seq.broadcast.val();
                self.lanes[e].element.next = self.seq.element.val();
                self.lanes[e].length.next = self.seq.length.val();
                self.lanes[e].cast.next = 0.into();
                self.lanes[e].host.next = false;
                self.lanes[e].host_lane.next = 0.into();
                self.lanes[e].host_elem.next = 0.into();
                self.lanes[e].host_write.next = false;
                self.spad_data[e].next = self.lanes[e].data.val();
            }
            for e in 0..self.transposer.width() {
                self.lanes[e].lo.next = self.transposer.out[e * es].val();
                self.lanes[e].hi.next = self.transposer.out[e * es + es - 1].val();
            }
        }
    }
}

/// splitmix64: the tests' deterministic random bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const DRAM_BYTES: usize = 2048;

/// Runs `loads` back to back (each dispatched in its predecessor's last cycle, as the
/// dispatcher does) on the load path from random memories, with a frozen cycle every
/// `freeze_every` cycles if set, and checks against core: every row lands in the cycle
/// `timing::row_lands` gives and nothing else is written; `free` and `busy_next` say the
/// unit is busy exactly `timing::duration` cycles; the scratchpad equals the functional
/// machine's, bit for bit. Returns how many of the loads transposed.
fn run_loads(config: ArrayConfig, loads: &[Instruction], freeze_every: Option<u64>) -> usize {
    use systole_core::machine::{golden, GoldenKind};
    use systole_core::Region;
    let (w, es) = (config.spad_width(), config.dtype.elem_bytes());
    let depth = config.spad_depth as usize;
    let mut rng = Rng(w as u64 * 1000 + es as u64 * 100 + loads.len() as u64);
    let dram: Vec<u8> = (0..DRAM_BYTES).map(|_| rng.next() as u8).collect();
    let spad_bytes: Vec<u8> = (0..depth * w * es).map(|_| rng.next() as u8).collect();
    let mut golden = golden(GoldenKind::Functional, config, DRAM_BYTES).unwrap();
    golden.write(Region::Dram, 0, &dram).unwrap();
    golden.write(Region::Spad, 0, &spad_bytes).unwrap();
    let mut program = loads.to_vec();
    program.push(Instruction::Halt);
    golden.run(&program).unwrap();
    let mut want = vec![0u8; spad_bytes.len()];
    golden.read(Region::Spad, 0, &mut want).unwrap();

    let mut spad: Vec<u16> = (0..depth * w)
        .map(|k| (0..es).map(|b| (spad_bytes[k * es + b] as u16) << (8 * b)).sum())
        .collect();
    let mut b = LoadPath::new(&config);
    b.connect_all();
    let mut read_reg = vec![0u8; w * es];
    let mut writes = vec![]; // (cycle, scratchpad row)
    let mut dispatched = vec![]; // cycle 0 of each load
    let mut last_cycle = None; // the current load's last cycle
    let (mut next, mut cycle, mut raw) = (0usize, 0u64, 0u64);
    while next < loads.len() || last_cycle.is_some_and(|l| cycle <= l) {
        raw += 1;
        let enable = freeze_every.is_none_or(|f| raw % f != f - 1);
        b.enable.next = enable;
        for (k, v) in read_reg.iter().enumerate() {
            b.dram[k].next = (*v as u64).into();
        }
        b.seq.start.next = false;
        b.seq.ins.load.next = false;
        settle(&mut b);
        let busy_now = last_cycle.is_some_and(|l| cycle <= l);
        let free = !busy_now || last_cycle == Some(cycle);
        assert_eq!(b.seq.free.val(), free, "free in cycle {cycle}");
        let start = enable && free && next < loads.len();
        if start {
            let Instruction::Load { spad_row, dram_addr, rows, len, row_stride, elem_stride } =
                loads[next]
            else {
                panic!("not a load: {:?}", loads[next]);
            };
            let s = &mut b.seq;
            s.start.next = true;
            s.ins.load.next = true;
            s.ins.spad_row.next = (spad_row as u64).into();
            s.ins.dram_addr.next = (dram_addr as u64).into();
            s.ins.rows.next = (rows as u64).into();
            s.ins.len.next = (len as u64).into();
            s.ins.row_stride.next = (row_stride as u64).into();
            s.ins.elem_stride.next = (elem_stride as u64).into();
            settle(&mut b);
        }
        if enable {
            let busy_after = (busy_now && last_cycle != Some(cycle)) || start;
            assert_eq!(b.seq.busy_next.val(), busy_after, "busy_next in cycle {cycle}");
            if b.seq.spad_write.val() {
                let row = b.seq.spad_write_row.val().index();
                writes.push((cycle, row));
                for e in 0..w {
                    let v = b.spad_data[e].val().index() as u16;
                    spad[row * w + e] = if es == 1 { v & 0xFF } else { v };
                }
            }
            let addr = b.seq.dram_read_address.val().index();
            for (k, v) in read_reg.iter_mut().enumerate() {
                *v = dram.get(addr + k).copied().unwrap_or(0);
            }
            if start {
                dispatched.push(cycle + 1);
                last_cycle = Some(cycle + timing::duration(&config, &loads[next]));
                next += 1;
            }
            cycle += 1;
        }
        tick(&mut b, |b| &mut b.clock);
    }

    // Each row in its cycle, each load busy exactly its duration.
    let mut expected = vec![];
    for (load, &at) in loads.iter().zip(&dispatched) {
        let Instruction::Load { spad_row, rows, .. } = *load else { unreachable!() };
        for r in 0..rows as u64 {
            expected
                .push((at + timing::row_lands(&config, load, r), spad_row as usize + r as usize));
        }
    }
    expected.sort();
    assert_eq!(writes, expected, "rows written (cycle, row), {config:?}");
    for (k, pair) in dispatched.windows(2).enumerate() {
        assert_eq!(pair[1] - pair[0], timing::duration(&config, &loads[k]), "load {k}");
    }
    let got: Vec<u8> =
        spad.iter().flat_map(|v| (0..es).map(move |b| (v >> (8 * b)) as u8)).collect();
    for row in 0..depth {
        let at = row * w * es..(row + 1) * w * es;
        assert_eq!(got[at.clone()], want[at], "scratchpad row {row}, {config:?}");
    }
    loads.iter().filter(|l| timing::transposes(&config, l)).count()
}

fn load(
    spad_row: u16,
    dram_addr: u32,
    rows: u16,
    len: u16,
    row_stride: u32,
    es: u32,
) -> Instruction {
    Instruction::Load { spad_row, dram_addr, rows, len, row_stride, elem_stride: es }
}

/// Transposing shapes for a scratchpad `w` wide: fewer rows than `w`, exactly `w`, several
/// blocks with a partial last one, `len` below and at `w`, several element strides; then a
/// strided gather (not transposed: `row_stride` 5, or a single row), a contiguous load and
/// a broadcast.
fn shapes(w: u16) -> Vec<Instruction> {
    let short = (w - 1).max(2);
    let wide = w as u32;
    vec![
        load(0, 3, short, short, 1, 2),
        load(4, 100, w, w, 1, wide + 1),
        load(2, 7, 2 * w + 1, 2, 1, 3),
        load(1, 40, 3 * w - 1, w, 1, 17),
        load(9, 501, 2 * w, short, 1, 37),
        load(3, 11, w + 1, w, 1, 2),
        load(0, 250, 3, w, 5, 2),
        load(6, 33, 1, w, 1, 3),
        load(5, 60, 3, w, wide + 1, 1),
        load(7, 91, 2, w, 1, 0),
    ]
}

fn decoupled(rows: u16, cols: u16, dtype: Dtype) -> ArrayConfig {
    ArrayConfig { spad_depth: 96, ..ArrayConfig::new(rows, cols, dtype) }
        .with_schedule(Schedule::Decoupled)
}

/// A decoupled sequencer transposes in blocks through the buffer: core's bits and core's
/// cycles for W from 2 to 8, INT8 and BF16; other loads as before.
#[test]
fn sequencer_transposes_loads_in_blocks_when_decoupled() {
    for (rows, cols, dtype) in [
        (2, 2, Dtype::Int8),
        (3, 2, Dtype::Bf16),
        (4, 4, Dtype::Int8),
        (4, 4, Dtype::Bf16),
        (2, 5, Dtype::Int8),
        (8, 3, Dtype::Bf16),
    ] {
        let config = decoupled(rows, cols, dtype);
        let loads = shapes(config.spad_width() as u16);
        assert_eq!(run_loads(config, &loads, None), 6, "{config:?}");
    }
}

/// Frozen cycles stop the buffer with the rest of the machine.
#[test]
fn sequencer_transposes_through_frozen_cycles() {
    let config = decoupled(5, 5, Dtype::Int8);
    assert_eq!(run_loads(config, &shapes(5), Some(4)), 6);
}

/// Built for the blocking schedule, the same loads gather element by element, as before.
#[test]
fn sequencer_gathers_the_same_loads_when_blocking() {
    for (n, dtype) in [(3, Dtype::Int8), (4, Dtype::Bf16)] {
        let config = ArrayConfig { spad_depth: 96, ..ArrayConfig::new(n, n, dtype) };
        assert_eq!(run_loads(config, &shapes(n), None), 0);
    }
}

#[test]
fn verilog_is_valid() {
    let config = ArrayConfig::new(3, 4, Dtype::Bf16);
    let blocking = verilog_of(Sequencer::new(&config));
    assert!(!blocking.contains("transpose_"), "a blocking sequencer has no transpose controls");
    yosys_validate("sequencer", &blocking).unwrap();
    let config = config.with_schedule(Schedule::Decoupled);
    yosys_validate("sequencer_decoupled", &verilog_of(Sequencer::new(&config))).unwrap();
}

/// An SDRAM machine with registered reads.
fn sdram_config() -> ArrayConfig {
    let c = ArrayConfig::new(2, 2, Dtype::Int8).with_dram_port(systole_core::DramPort::Sdram);
    ArrayConfig { clock_mhz: 50.0, ..c }.with_read_stages(1)
}

/// On the SDRAM a `Load` writes a row in each cycle the transfer says one lands (a read stage
/// later, through the registered reads), gathers nothing however strided, and ends a read-stage
/// tail after the last.
#[test]
fn on_the_sdram_a_load_writes_its_rows_as_they_land() {
    let mut s = Sequencer::new(&sdram_config());
    s.connect_all();
    s.enable.next = true;
    s.start.next = true;
    s.ins.load.next = true;
    s.ins.spad_row.next = 5u64.into();
    s.ins.rows.next = 3u64.into();
    s.ins.len.next = 2u64.into();
    s.ins.elem_stride.next = 3u64.into();
    tick(&mut s, |s| &mut s.clock);
    s.start.next = false;
    s.ins.load.next = false;
    let lands = [3, 4, 8];
    let mut seen = vec![];
    for cycle in 0..12 {
        s.sdram_row.next = lands.contains(&cycle);
        s.sdram_last.next = cycle == 8;
        settle(&mut s);
        assert!(!s.gather.val(), "cycle {cycle}: the transfer assembles the row");
        if s.spad_write.val() {
            seen.push((cycle, s.spad_write_row.val().index()));
        }
        if s.free.val() {
            seen.push((cycle, 0));
            break;
        }
        tick(&mut s, |s| &mut s.clock);
    }
    assert_eq!(seen, vec![(4, 5), (5, 6), (9, 7), (9, 0)]);
}

/// On the SDRAM a `StoreSpad` addresses its first source row as it starts and each next one in
/// a cycle with room, shows each row's write once (a read stage after the row's read), and
/// ends when the transfer has written its last word, whatever its rows did before.
#[test]
fn on_the_sdram_a_store_reads_a_row_while_there_is_room_and_ends_with_the_last_write() {
    let mut s = Sequencer::new(&sdram_config());
    s.connect_all();
    s.enable.next = true;
    s.start.next = true;
    s.ins.store_spad.next = true;
    s.ins.spad_row.next = 7u64.into();
    s.ins.rows.next = 3u64.into();
    s.ins.len.next = 2u64.into();
    settle(&mut s);
    assert!(s.sdram_issue.val(), "row 0 is addressed as the store starts");
    assert_eq!(s.spad_read.val().index(), 7);
    tick(&mut s, |s| &mut s.clock);
    s.start.next = false;
    s.ins.store_spad.next = false;
    let room = [true, false, false, true, true, true, true, true, true, true, true];
    let mut issues = vec![];
    let mut reads = vec![];
    let mut writes = vec![];
    let mut end = 0;
    for cycle in 0..11 {
        s.sdram_room.next = room[cycle];
        s.sdram_last.next = cycle == 9;
        settle(&mut s);
        if s.sdram_issue.val() {
            issues.push(cycle);
        }
        reads.push(s.spad_read.val().index());
        if s.dram_write_count.val().any() {
            writes.push(cycle);
        }
        if s.free.val() {
            end = cycle;
            break;
        }
        tick(&mut s, |s| &mut s.clock);
    }
    // Rows read (data out) in cycles 0, 1 and 4 (rows 1 and 2 addressed in 0 and 3, with
    // room); their writes a read stage later; the end with the last write, in cycle 9.
    assert_eq!(issues, vec![0, 3]);
    assert_eq!(&reads[..5], &[8, 8, 8, 9, 9]);
    assert_eq!(writes, vec![1, 2, 5]);
    assert_eq!(end, 9);
}

/// A store whose transfer takes a while after its last source row reads no row more (a regression:
/// its row counter, past the last row, advanced again with room and pushed rows that were not
/// its own into the next store's registers).
#[test]
fn on_the_sdram_a_store_reads_nothing_after_its_last_row() {
    // Without read stages, where the last row does not start a tail.
    let mut s = Sequencer::new(&sdram_config().with_read_stages(0));
    s.connect_all();
    s.enable.next = true;
    s.start.next = true;
    s.ins.store.next = true;
    s.ins.rows.next = 1u64.into();
    s.ins.len.next = 1u64.into();
    tick(&mut s, |s| &mut s.clock);
    s.start.next = false;
    s.ins.store.next = false;
    let mut writes = 0;
    for cycle in 0..20 {
        s.sdram_room.next = true;
        s.sdram_last.next = cycle == 15;
        settle(&mut s);
        assert!(!s.sdram_issue.val(), "cycle {cycle}: a row past the last addressed");
        writes += s.dram_write_count.val().any() as u32;
        if s.free.val() {
            break;
        }
        tick(&mut s, |s| &mut s.clock);
    }
    assert_eq!(writes, 1);
}
