//! The weight-stationary INT8 array with each column's products summed in one adder tree
//! ([`ArrayTree`]): the same results in the same cycles as the systolic array (`array::ArrayWs`)
//! under the blocking schedule, in less logic.
//!
//! The systolic column skews row `i`'s element by `i` cycles, so that PE row `i` adds its
//! product to the partial sum coming down in the cycle it arrives, and de-skews the columns on
//! the way out: row `m` leaves in cycle `m + timing::ws_latency`. Its INT8 sums wrap mod 2^32,
//! so their order does not matter, and under the blocking schedule a swapping matmul starts only
//! once the last one's rows have left the array (`WsWeights::ShadowSwap`): every product of a row
//! is then formed with the weights of its own matmul whether it is formed as the row enters or
//! `i + j` cycles later. So the tree multiplies row `m`'s elements as they enter (in a DSP pair
//! or a product register where the PEs have two stages), sums each column at once, and delays
//! the sum to the same cycle: no skew lines, no partial-sum registers, no de-skew lines, adders
//! only as wide as the sums (16 bits plus one per level) and one delay line per column
//! (docs/DECISIONS.md 95).

use rust_hdl::prelude::*;
use systole_core::{timing, ArrayConfig, Dataflow, Dtype, Schedule};

use crate::array_pairs;
use crate::pe::DspPair;
use crate::wire::wire;

/// Whether `config` can be built with adder trees: INT8, weight-stationary, blocking.
pub fn tree_fits(config: &ArrayConfig) -> bool {
    config.dtype == Dtype::Int8
        && config.dataflow == Dataflow::WeightStationary
        && config.schedule == Schedule::Blocking
}

/// A PE's weights: the shadow that loads (shifting down the column with `shift`) and the active
/// one; `b` is the weight a product takes this cycle (the shadow in a swap's cycle, when the
/// active one takes it too), `w_out` the shadow, for the PE below. It also hands its product
/// the low byte of its row's 16-bit element (`a`), so that the wiring takes no bit slices.
#[derive(LogicBlock, Default)]
pub struct TreeWeight {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub shift: Signal<In, Bit>,
    pub swap: Signal<In, Bit>,
    pub w_in: Signal<In, Bits<16>>,
    pub w_out: Signal<Out, Bits<16>>,
    pub b: Signal<Out, Bits<8>>,
    pub a_in: Signal<In, Bits<16>>,
    pub a: Signal<Out, Bits<8>>,
    shadow: DFF<Bits<8>>,
    active: DFF<Bits<8>>,
}

impl Logic for TreeWeight {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, shadow, active);
        self.b.next = self.active.q.val();
        if self.swap.val() {
            self.b.next = self.shadow.q.val();
        }
        if self.enable.val() {
            if self.swap.val() {
                self.active.d.next = self.shadow.q.val();
            }
            if self.shift.val() {
                self.shadow.d.next = self.w_in.val().get_bits::<8>(0);
            }
        }
        self.w_out.next = bit_cast::<16, 8>(self.shadow.q.val());
        self.a.next = self.a_in.val().get_bits::<8>(0);
    }
}

/// An `i8 x i8` product, exact in 16 bits: at once, or registered (held while `enable` is off)
/// when built `staged` (two-stage PEs).
#[derive(LogicBlock)]
pub struct TreeProduct {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub a: Signal<In, Bits<8>>,
    pub b: Signal<In, Bits<8>>,
    pub p: Signal<Out, Bits<16>>,
    staged: Constant<Bit>,
    product: DFF<Bits<16>>,
    a16: Signal<Local, Bits<16>>,
    b16: Signal<Local, Bits<16>>,
    wide: Signal<Local, Bits<32>>,
    now: Signal<Local, Bits<16>>,
}

impl TreeProduct {
    pub fn new(staged: bool) -> TreeProduct {
        TreeProduct {
            clock: Default::default(),
            enable: Default::default(),
            a: Default::default(),
            b: Default::default(),
            p: Default::default(),
            staged: Constant::new(staged),
            product: Default::default(),
            a16: Default::default(),
            b16: Default::default(),
            wide: Default::default(),
            now: Default::default(),
        }
    }
}

impl Logic for TreeProduct {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, product);
        self.a16.next = bit_cast::<16, 8>(self.a.val());
        if self.a.val().get_bit(7) {
            self.a16.next = bit_cast::<16, 8>(self.a.val()) | 0xFF00;
        }
        self.b16.next = bit_cast::<16, 8>(self.b.val());
        if self.b.val().get_bit(7) {
            self.b16.next = bit_cast::<16, 8>(self.b.val()) | 0xFF00;
        }
        // The low 16 bits of the product of the sign-extended operands: the signed product.
        self.wide.next = self.a16.val() * self.b16.val();
        self.now.next = self.wide.val().get_bits::<16>(0);
        self.p.next = self.now.val();
        if self.staged.val() {
            self.p.next = self.product.q.val();
            if self.enable.val() {
                self.product.d.next = self.now.val();
            }
        }
    }
}

/// A column's products summed (signed, exact) and delayed `delay` cycles (≥ 1, each a register
/// that holds while `enable` is off); `out` is the sum sign-extended to 32 bits. The Verilog is
/// a balanced tree whose adders are as wide as their sums and a line of registers as wide as the
/// column's sum; the Rust model below computes the same words.
#[derive(LogicBlock)]
pub struct ColumnSum {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub p: Vec<Signal<In, Bits<16>>>,
    pub out: Signal<Out, Bits<32>>,
    _line: std::collections::VecDeque<u32>,
}

impl ColumnSum {
    pub fn new(rows: usize, delay: usize) -> ColumnSum {
        assert!(rows >= 1 && delay >= 1, "{rows} products, delay {delay}");
        ColumnSum {
            clock: Default::default(),
            enable: Default::default(),
            p: (0..rows).map(|_| Signal::default()).collect(),
            out: Default::default(),
            _line: std::iter::repeat_n(0, delay).collect(),
        }
    }

    /// Bits of the column's sum: 16 plus one per level of the tree.
    fn sum_bits(&self) -> usize {
        16 + self.p.len().next_power_of_two().trailing_zeros() as usize
    }
}

impl Logic for ColumnSum {
    fn update(&mut self) {
        if self.clock.pos_edge() && self.enable.val() {
            let sum = self.p.iter().map(|p| p.val().to_u16() as i16 as i32).sum::<i32>();
            self._line.pop_front();
            self._line.push_back(sum as u32);
        }
        self.out.next = (*self._line.front().expect("delay >= 1") as u64).into();
    }

    fn connect(&mut self) {
        self.out.connect();
    }

    fn hdl(&self) -> Verilog {
        // Level 0 holds the products; each level adds neighbours pairwise, one bit wider (an odd
        // last one passes through, sign-extended).
        let mut v = String::new();
        let mut level: Vec<String> = (0..self.p.len()).map(|i| format!("p${i}")).collect();
        let mut bits = 16;
        let mut depth = 0;
        while level.len() > 1 {
            depth += 1;
            let next: Vec<String> = level
                .chunks(2)
                .enumerate()
                .map(|(k, pair)| {
                    let name = format!("s{depth}_{k}");
                    let ext = |x: &String| format!("{{{x}[{}], {x}}}", bits - 1);
                    let sum = match pair {
                        [x, y] => format!("{} + {}", ext(x), ext(y)),
                        [x] => ext(x),
                        _ => unreachable!(),
                    };
                    v += &format!("wire [{bits}:0] {name} = {sum};\n");
                    name
                })
                .collect();
            level = next;
            bits += 1;
        }
        assert_eq!(bits, self.sum_bits());
        let top = bits - 1;
        let delay = self._line.len();
        for d in 0..delay {
            v += &format!("reg [{top}:0] line{d};\ninitial line{d} = 0;\n");
        }
        v += "always @(posedge clock) begin\n   if (enable) begin\n";
        v += &format!("      line0 <= {};\n", level[0]);
        for d in 1..delay {
            v += &format!("      line{d} <= line{};\n", d - 1);
        }
        v += "   end\nend\n";
        let last = format!("line{}", delay - 1);
        v += &if bits < 32 {
            format!("always @(*) out = {{{{{}{{{last}[{top}]}}}}, {last}}};\n", 32 - bits)
        } else {
            format!("always @(*) out = {last}[31:0];\n")
        };
        Verilog::Custom(v)
    }
}

/// The weight-stationary INT8 array of the blocking schedule with each column summed in a tree
/// (module docs): the ports and timing of `array::ArrayWs` without tags. PE `(i, j)`'s
/// weights and product sit at `i * C + j`; `paired` forms the products two to a [`DspPair`] in
/// that order, as `ArrayWs::paired` does.
#[derive(LogicBlock)]
pub struct ArrayTree {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub left: Vec<Signal<In, Bits<16>>>,
    pub w_top: Vec<Signal<In, Bits<16>>>,
    pub shift: Signal<In, Bit>,
    pub swap: Signal<In, Bit>,
    pub out: Vec<Signal<Out, Bits<32>>>,
    weights: Vec<TreeWeight>,
    /// One per PE, unless paired.
    products: Vec<TreeProduct>,
    pairs: Vec<DspPair>,
    sums: Vec<ColumnSum>,
}

impl ArrayTree {
    /// The array of `config` (which [`tree_fits`]); two-stage PEs register their products, in
    /// DSP pairs when `paired`.
    pub fn new(config: &ArrayConfig, paired: bool) -> ArrayTree {
        assert!(tree_fits(config), "adder trees are built for blocking weight-stationary INT8");
        assert!(!paired || config.pe_stages == 2, "DSP pairs are two-stage PEs' products");
        let (r, c) = (config.rows as usize, config.cols as usize);
        let staged = config.pe_stages == 2;
        // The products of two-stage PEs leave their register a cycle after the row enters.
        let delay = timing::ws_latency(config) as usize - staged as usize;
        ArrayTree {
            clock: Default::default(),
            enable: Default::default(),
            left: (0..r).map(|_| Signal::default()).collect(),
            w_top: (0..c).map(|_| Signal::default()).collect(),
            shift: Default::default(),
            swap: Default::default(),
            out: (0..c).map(|_| Signal::default()).collect(),
            weights: (0..r * c).map(|_| TreeWeight::default()).collect(),
            products: if paired {
                vec![]
            } else {
                (0..r * c).map(|_| TreeProduct::new(staged)).collect()
            },
            pairs: array_pairs::pairs_for(if paired { r * c } else { 0 }),
            sums: (0..c).map(|_| ColumnSum::new(r, delay)).collect(),
        }
    }

    /// Where PE `k`'s product leaves: its own product block's `p`, or its pair's half.
    fn product_source(&self, k: usize) -> String {
        if self.pairs.is_empty() {
            format!("products${k}$p")
        } else {
            array_pairs::product_name(k)
        }
    }
}

impl Logic for ArrayTree {
    fn update(&mut self) {
        let (r, c) = (self.left.len(), self.out.len());
        for i in 0..r {
            for j in 0..c {
                let k = i * c + j;
                let w_in =
                    if i == 0 { self.w_top[j].val() } else { self.weights[k - c].w_out.val() };
                let a_in = self.left[i].val();
                let w = &mut self.weights[k];
                w.clock.next = self.clock.val();
                w.enable.next = self.enable.val();
                w.shift.next = self.shift.val();
                w.swap.next = self.swap.val();
                w.w_in.next = w_in;
                w.a_in.next = a_in;
            }
        }
        for k in 0..self.products.len() {
            let a = self.weights[k].a.val();
            let p = &mut self.products[k];
            p.clock.next = self.clock.val();
            p.enable.next = self.enable.val();
            p.a.next = a;
            p.b.next = self.weights[k].b.val();
        }
        if !self.pairs.is_empty() {
            let weights = &self.weights;
            let operands = |k: usize| (weights[k].a.val(), weights[k].b.val());
            array_pairs::drive(
                &mut self.pairs,
                r * c,
                self.clock.val(),
                self.enable.val(),
                operands,
            );
        }
        for j in 0..c {
            self.sums[j].clock.next = self.clock.val();
            self.sums[j].enable.next = self.enable.val();
            for i in 0..r {
                let k = i * c + j;
                self.sums[j].p[i].next = if self.pairs.is_empty() {
                    self.products[k].p.val()
                } else {
                    array_pairs::product(&self.pairs, k)
                };
            }
            self.out[j].next = self.sums[j].out.val();
        }
    }

    fn connect(&mut self) {
        for w in &mut self.weights {
            w.clock.connect();
            w.enable.connect();
            w.shift.connect();
            w.swap.connect();
            w.w_in.connect();
            w.a_in.connect();
        }
        for p in &mut self.products {
            p.clock.connect();
            p.enable.connect();
            p.a.connect();
            p.b.connect();
        }
        array_pairs::connect(&mut self.pairs);
        for s in &mut self.sums {
            s.clock.connect();
            s.enable.connect();
            s.p.iter_mut().for_each(|p| p.connect());
        }
        self.out.iter_mut().for_each(|o| o.connect());
    }

    fn hdl(&self) -> Verilog {
        let (r, c) = (self.left.len(), self.out.len());
        let mut code = vec![];
        for i in 0..r {
            for j in 0..c {
                let k = i * c + j;
                for port in ["clock", "enable", "shift", "swap"] {
                    code.push(wire(format!("weights${k}${port}"), port.into()));
                }
                let w_in =
                    if i == 0 { format!("w_top${j}") } else { format!("weights${}$w_out", k - c) };
                code.push(wire(format!("weights${k}$w_in"), w_in));
                code.push(wire(format!("weights${k}$a_in"), format!("left${i}")));
            }
        }
        for k in 0..self.products.len() {
            code.push(wire(format!("products${k}$clock"), "clock".into()));
            code.push(wire(format!("products${k}$enable"), "enable".into()));
            code.push(wire(format!("products${k}$a"), format!("weights${k}$a")));
            code.push(wire(format!("products${k}$b"), format!("weights${k}$b")));
        }
        if !self.pairs.is_empty() {
            let operands = |k: usize| (format!("weights${k}$a"), format!("weights${k}$b"));
            array_pairs::wires(&mut code, r * c, operands, |_| None);
        }
        for j in 0..c {
            code.push(wire(format!("sums${j}$clock"), "clock".into()));
            code.push(wire(format!("sums${j}$enable"), "enable".into()));
            for i in 0..r {
                code.push(wire(format!("sums${j}$p${i}"), self.product_source(i * c + j)));
            }
            code.push(wire(format!("out${j}"), format!("sums${j}$out")));
        }
        Verilog::Combinatorial(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Array, ArrayParts};
    use crate::testing::{lcg_step, settle, tick, verilog_of};

    fn byte(seed: &mut u64) -> u64 {
        lcg_step(seed) >> 56
    }

    /// One cycle's inputs: `left` rows, the weight row entering at the top, `shift`, `swap`.
    #[derive(Clone)]
    struct Step {
        enable: bool,
        left: Vec<u64>,
        top: Vec<u64>,
        shift: bool,
        swap: bool,
    }

    /// Drives `arr` through `steps`, returning `out` in each cycle (after it settles).
    fn run(mut arr: Array, steps: &[Step]) -> Vec<Vec<u32>> {
        arr.connect_all();
        let mut outs = vec![];
        for s in steps {
            arr.enable.next = s.enable;
            arr.shift.next = s.shift;
            arr.swap.next = s.swap;
            for (l, &v) in arr.left.iter_mut().zip(&s.left) {
                l.next = v.into();
            }
            for (t, &v) in arr.top.iter_mut().zip(&s.top) {
                t.next = v.into();
            }
            settle(&mut arr);
            outs.push(arr.out.iter().map(|o| o.val().to_u32()).collect());
            tick(&mut arr, |a| &mut a.clock);
        }
        outs
    }

    /// Weight loads and matmuls as the blocking schedule issues them (each matmul's rows and
    /// then zeros until its last row leaves, a swap in its first cycle if it swaps, weights
    /// loading meanwhile or not), with frozen cycles (`enable` off, the inputs of the next
    /// cycle already presented) among them; the rows and the expected output rows, with the
    /// cycle each leaves in.
    fn program(
        cfg: &ArrayConfig,
        seed: &mut u64,
        matmuls: usize,
    ) -> (Vec<Step>, Vec<(usize, Vec<u32>)>) {
        let (r, c) = (cfg.rows as usize, cfg.cols as usize);
        let latency = timing::ws_latency(cfg) as usize;
        let zeros =
            Step { enable: true, left: vec![0; r], top: vec![0; c], shift: false, swap: false };
        let (mut steps, mut want) = (vec![], vec![]);
        let mut shadow = vec![vec![0u64; c]; r];
        let mut active = shadow.clone();
        let push = |steps: &mut Vec<Step>, seed: &mut u64, step: Step| {
            while lcg_step(seed) % 5 == 0 {
                steps.push(Step { enable: false, ..step.clone() });
            }
            steps.push(step);
        };
        for _ in 0..matmuls {
            // A weight load: R rows, bottom row first.
            let w: Vec<Vec<u64>> = (0..r).map(|_| (0..c).map(|_| byte(seed)).collect()).collect();
            for t in 0..r {
                push(
                    &mut steps,
                    seed,
                    Step { top: w[r - 1 - t].clone(), shift: true, ..zeros.clone() },
                );
            }
            shadow = w;
            let swap = lcg_step(seed) % 4 != 0;
            if swap {
                active = shadow.clone();
            }
            let rows = 1 + (lcg_step(seed) % 5) as usize;
            let a: Vec<Vec<u64>> =
                (0..rows).map(|_| (0..r).map(|_| byte(seed)).collect()).collect();
            for tau in 0..rows + latency {
                let left = if tau < rows { a[tau].clone() } else { vec![0; r] };
                push(&mut steps, seed, Step { left, swap: swap && tau == 0, ..zeros.clone() });
                if tau >= latency {
                    let m = tau - latency;
                    let dot = |j: usize| {
                        (0..r).fold(0i32, |s, i| {
                            s.wrapping_add(
                                (a[m][i] as u8 as i8 as i32) * (active[i][j] as u8 as i8 as i32),
                            )
                        }) as u32
                    };
                    want.push((steps.len() - 1, (0..c).map(dot).collect()));
                }
            }
        }
        (steps, want)
    }

    /// Every shape and product form sums what core sums, in core's cycles, and the same words
    /// as the systolic array in every cycle, frozen ones included.
    #[test]
    fn tree_array_matches_core_and_the_systolic_array() {
        let mut seed = 23;
        for (rows, cols) in [(1u16, 1u16), (3, 2), (4, 1), (8, 1), (5, 3)] {
            for (stages, paired) in [(1, false), (2, false), (2, true)] {
                let cfg = ArrayConfig::new(rows, cols, Dtype::Int8).with_pe_stages(stages);
                let what = format!("{rows}x{cols}, {stages} stage(s), paired {paired}");
                let (steps, want) = program(&cfg, &mut seed, 6);
                let parts = ArrayParts { paired, tree: true, ..Default::default() };
                let tree = run(Array::build(&cfg, parts), &steps);
                for (cycle, row) in &want {
                    assert_eq!(&tree[*cycle], row, "{what}: cycle {cycle}");
                }
                let systolic = run(Array::build(&cfg, ArrayParts { tree: false, ..parts }), &steps);
                assert_eq!(tree, systolic, "{what}");
            }
        }
    }

    /// The tree's adders are as wide as its sums: the extreme products of eight rows sum
    /// exactly in 19 bits, sign-extended, in the model and in the Verilog (Yosys' evaluation).
    #[test]
    fn column_sums_are_exact_at_the_extremes() {
        for (products, want) in [
            (vec![0x4000u64; 8], 8 * 0x4000u32),
            (vec![0xC080; 8], (8 * -16256i32) as u32),
            (vec![0x4000, 0xC080, 0x4000, 0xC080, 0x4000], (3 * 16384 - 2 * 16256) as u32),
        ] {
            let mut sum = ColumnSum::new(products.len(), 2);
            sum.connect_all();
            sum.enable.next = true;
            for (p, &v) in sum.p.iter_mut().zip(&products) {
                p.next = v.into();
            }
            tick(&mut sum, |s| &mut s.clock);
            tick(&mut sum, |s| &mut s.clock);
            assert_eq!(sum.out.val().to_u32(), want, "model: {products:x?}");
        }
        let v = verilog_of(ColumnSum::new(8, 1));
        assert!(v.contains("wire [18:0] s3_0"), "three levels, 19 bits:\n{v}");
    }

    /// (Paired trees instantiate `SB_MAC16`, which only the iCE40 flow knows: the conformance
    /// suite simulates them and the iCEBreaker's build synthesizes them.)
    #[test]
    fn verilog_is_valid() {
        for stages in [1, 2] {
            let cfg = ArrayConfig::new(5, 3, Dtype::Int8).with_pe_stages(stages);
            yosys_validate("array_tree", &verilog_of(ArrayTree::new(&cfg, false))).unwrap();
        }
        let one = ArrayConfig::new(8, 1, Dtype::Int8);
        yosys_validate("array_tree", &verilog_of(ArrayTree::new(&one, false))).unwrap();
    }
}
