//! The R x C array with its input skew and output de-skew, in both dataflows.
//!
//! Timing is core's (`core/src/machine/cycle/mod.rs`), with `tau` counting cycles from a matmul's
//! dispatch:
//!
//! * [`ArrayWs`]: in cycle `tau` the caller presents scratchpad row `tau` (zero past the matmul's
//!   rows) on `left`. Skew line `i` delays element `i` by `i` cycles, so PE row `i` sees row
//!   `tau - i`; partial sums flow down; column `j` of row `m` leaves the bottom register at the end
//!   of cycle `m + R - 1 + j` and de-skew line `j` holds it `C - 1 - j` more cycles, so that in
//!   cycle `m + R + C - 1` all of row `m` is on `out`, when the caller writes it to the
//!   accumulators (one cycle later, `m + timing::ws_latency`, on PEs that register their
//!   products: every sum leaves the bottom a cycle late, the de-skew unchanged). PEs that stage
//!   their f32 add (`ArrayConfig::pe_add_staged`) pass each partial sum on `S = pe_stages - 1`
//!   (two or three) cycles after they take it, so skew line `i` delays by `S i` and every sum
//!   leaves the bottom `(S - 1) R` cycles later again (`timing::pe_row_cycles`,
//!   `timing::ws_latency`). The shadow weights shift down
//!   a row per cycle while `shift` is set, the top
//!   row taking `w_top`; `swap` (the dispatch cycle of a swapping matmul) makes the shadow active.
//!   Under the decoupled schedule the array is *tagged* ([`tagged`]): each PE holds
//!   `WEIGHT_BANKS` weight banks, the row entering on `left` comes with its matmul's bank on
//!   `tag` (skewed with it, passed right with it), so each PE multiplies by the weight of the
//!   bank its row names and rows of consecutive matmuls follow each other with no gap; `shift`
//!   loads bank `load_bank`, and there is no `swap` (the stream unit,
//!   `controller::StreamUnit`, owns the active bank).
//! * [`ArrayOs`]: in cycle `tau` the caller presents `A^T` row `tau` on `left`, `B` row `tau` on
//!   `top` and `first` for `tau == 0`; skew lines delay `left[i]` (and its `first` tag) by `i`
//!   and `top[j]` by `j`, so PE `(i, j)` multiplies pair `k` in cycle `k + i + j`. While `drain`,
//!   the sums shift up a row per cycle: `out` is PE row 0, so in drain cycle `d` it holds what PE
//!   row `d` summed.
//!
//! The PEs sit in one flat `Vec`, PE `(i, j)` at `i * C + j`. rust-hdl's `hdl_gen` resolves one
//! index per signal path and only from loop variables, which cannot express `i * C + j` for a
//! run-time C, so the mesh's wiring is written out by hand here: [`ArrayWs::update`] in Rust and
//! the same assignments, statement for statement, as Verilog AST in `hdl` (wiring only: every
//! register and every operator lives in the PEs and delay lines).

use rust_hdl::prelude::*;
use systole_core::{timing, ArrayConfig, Dataflow, Dtype};

use crate::array_pairs;
use crate::array_tree::ArrayTree;
use crate::delay::Delay;
use crate::optional::Optional;
use crate::pe::{DspPair, Mac, PeOs, PeWs, WsWeights, TAG_BITS};
use crate::wire::{wire, wire_zero};

/// Signal slots of a `Vec` port.
fn vec_port<D: Direction, T: Synth>(n: usize) -> Vec<Signal<D, T>> {
    (0..n).map(|_| Signal::default()).collect()
}

/// Whether a config's array rows carry weight-bank tags: weight-stationary under the decoupled
/// schedule ([`WsWeights::Tagged`]).
pub fn tagged(config: &ArrayConfig) -> bool {
    config.dataflow == Dataflow::WeightStationary && WsWeights::of(config) == WsWeights::Tagged
}

/// The weight-stationary array.
///
/// Blocking schedule: `swap` makes the shadow weights active in a swapping matmul's dispatch
/// cycle. Decoupled schedule (tagged): no `swap`; `tag` is the weight bank of the row entering on
/// `left`, delayed with element `i` by skew line `i` and passed right with it, and `shift` loads
/// bank `load_bank`.
#[derive(LogicBlock)]
pub struct ArrayWs {
    pub clock: Signal<In, Clock>,
    /// Clock enable of every register (off while the machine is frozen).
    pub enable: Signal<In, Bit>,
    /// Element `i` of the row entering in this cycle (before the skew).
    pub left: Vec<Signal<In, Bits<16>>>,
    /// Tagged: the weight bank of the row entering in this cycle.
    pub tag: Optional<Signal<In, Bits<TAG_BITS>>>,
    /// The row entering the shadow registers' top row while `shift`.
    pub w_top: Vec<Signal<In, Bits<16>>>,
    pub shift: Signal<In, Bit>,
    /// Blocking: the shadow becomes active this cycle.
    pub swap: Optional<Signal<In, Bit>>,
    /// Tagged: the bank `shift` loads.
    pub load_bank: Optional<Signal<In, Bits<TAG_BITS>>>,
    /// The de-skewed output row of this cycle.
    pub out: Vec<Signal<Out, Bits<32>>>,
    pes: Vec<PeWs>,
    /// Paired PEs' DSPs: pair `q` forms the products of PEs `2q` and `2q + 1` (empty unless the
    /// array is [`ArrayWs::paired`]).
    pairs: Vec<DspPair>,
    skew: Vec<Delay<Bits<16>>>,
    skew_tag: Vec<Delay<Bits<TAG_BITS>>>,
    deskew: Vec<Delay<Bits<32>>>,
}

impl ArrayWs {
    pub fn new(config: &ArrayConfig) -> ArrayWs {
        ArrayWs::build(config, &ArrayParts::default())
    }

    /// The array with each two PEs' products formed in one [`DspPair`] (the last PE alone in
    /// one when there are an odd number): INT8 PEs of two stages, the DSP's product register
    /// standing for theirs.
    pub fn paired(config: &ArrayConfig) -> ArrayWs {
        ArrayWs::build(config, &ArrayParts { paired: true, ..Default::default() })
    }

    /// The array built with `parts` (its tree aside).
    fn build(config: &ArrayConfig, parts: &ArrayParts) -> ArrayWs {
        let (r, c) = (config.rows as usize, config.cols as usize);
        let weights = WsWeights::of(config);
        let tagged = weights == WsWeights::Tagged;
        let ArrayParts { paired, narrow, .. } = *parts;
        let mac = || if paired { Mac::paired() } else { parts.mac(config) };
        let row_cycles = timing::pe_row_cycles(config) as usize;
        ArrayWs {
            clock: Default::default(),
            enable: Default::default(),
            left: vec_port(r),
            tag: Optional::default_when(tagged),
            w_top: vec_port(c),
            shift: Default::default(),
            swap: Optional::default_when(!tagged),
            load_bank: Optional::default_when(tagged),
            out: vec_port(c),
            pes: (0..r * c)
                .map(|k| {
                    let pe = PeWs::new(mac(), weights);
                    if narrow {
                        pe.summing((k / c + 1) as u32)
                    } else {
                        pe
                    }
                })
                .collect(),
            pairs: array_pairs::pairs_for(if paired { r * c } else { 0 }),
            skew: (0..r).map(|i| Delay::new(i * row_cycles)).collect(),
            skew_tag: (0..if tagged { r } else { 0 }).map(Delay::new).collect(),
            deskew: (0..c).map(|j| Delay::new(c - 1 - j)).collect(),
        }
    }
}

impl Logic for ArrayWs {
    fn update(&mut self) {
        let (r, c) = (self.left.len(), self.out.len());
        let tagged = self.tag.is_some();
        for i in 0..r {
            self.skew[i].clock.next = self.clock.val();
            self.skew[i].enable.next = self.enable.val();
            self.skew[i].d_in.next = self.left[i].val();
            if tagged {
                self.skew_tag[i].clock.next = self.clock.val();
                self.skew_tag[i].enable.next = self.enable.val();
                self.skew_tag[i].d_in.next = self.tag.val();
            }
        }
        for i in 0..r {
            for j in 0..c {
                let k = i * c + j;
                self.pes[k].clock.next = self.clock.val();
                self.pes[k].enable.next = self.enable.val();
                self.pes[k].shift.next = self.shift.val();
                if tagged {
                    self.pes[k].load_bank.next = self.load_bank.val();
                    self.pes[k].tag_in.next = if j == 0 {
                        self.skew_tag[i].d_out.val()
                    } else {
                        self.pes[k - 1].tag_out.val()
                    };
                } else {
                    self.pes[k].swap.next = self.swap.val();
                }
                self.pes[k].a_in.next =
                    if j == 0 { self.skew[i].d_out.val() } else { self.pes[k - 1].a_out.val() };
                self.pes[k].p_in.next =
                    if i == 0 { Bits::default() } else { self.pes[k - c].p_out.val() };
                self.pes[k].w_in.next =
                    if i == 0 { self.w_top[j].val() } else { self.pes[k - c].w_out.val() };
            }
        }
        if !self.pairs.is_empty() {
            let n = self.pes.len();
            let pes = &self.pes;
            let operands = |k: usize| (pes[k].mul_a.val(), pes[k].mul_b.val());
            array_pairs::drive(&mut self.pairs, n, self.clock.val(), self.enable.val(), operands);
            for k in 0..n {
                self.pes[k].product.next = array_pairs::product(&self.pairs, k);
            }
        }
        for j in 0..c {
            self.deskew[j].clock.next = self.clock.val();
            self.deskew[j].enable.next = self.enable.val();
            self.deskew[j].d_in.next = self.pes[(r - 1) * c + j].p_out.val();
            self.out[j].next = self.deskew[j].d_out.val();
        }
    }

    fn connect(&mut self) {
        for s in &mut self.skew {
            s.clock.connect();
            s.enable.connect();
            s.d_in.connect();
        }
        for s in &mut self.skew_tag {
            s.clock.connect();
            s.enable.connect();
            s.d_in.connect();
        }
        let tagged = self.tag.is_some();
        for p in &mut self.pes {
            p.clock.connect();
            p.enable.connect();
            p.shift.connect();
            if tagged {
                p.load_bank.connect();
                p.tag_in.connect();
            } else {
                p.swap.connect();
            }
            p.a_in.connect();
            p.p_in.connect();
            p.w_in.connect();
            if p.product.is_some() {
                p.product.connect();
            }
        }
        array_pairs::connect(&mut self.pairs);
        for (d, o) in self.deskew.iter_mut().zip(&mut self.out) {
            d.clock.connect();
            d.enable.connect();
            d.d_in.connect();
            o.connect();
        }
    }

    fn hdl(&self) -> Verilog {
        let (r, c) = (self.left.len(), self.out.len());
        let tagged = self.tag.is_some();
        let mut code = vec![];
        for i in 0..r {
            code.push(wire(format!("skew${i}$clock"), "clock".into()));
            code.push(wire(format!("skew${i}$enable"), "enable".into()));
            code.push(wire(format!("skew${i}$d_in"), format!("left${i}")));
            if tagged {
                code.push(wire(format!("skew_tag${i}$clock"), "clock".into()));
                code.push(wire(format!("skew_tag${i}$enable"), "enable".into()));
                code.push(wire(format!("skew_tag${i}$d_in"), "tag".into()));
            }
        }
        for i in 0..r {
            for j in 0..c {
                let k = i * c + j;
                code.push(wire(format!("pes${k}$clock"), "clock".into()));
                code.push(wire(format!("pes${k}$enable"), "enable".into()));
                code.push(wire(format!("pes${k}$shift"), "shift".into()));
                if tagged {
                    code.push(wire(format!("pes${k}$load_bank"), "load_bank".into()));
                    code.push(if j == 0 {
                        wire(format!("pes${k}$tag_in"), format!("skew_tag${i}$d_out"))
                    } else {
                        wire(format!("pes${k}$tag_in"), format!("pes${}$tag_out", k - 1))
                    });
                } else {
                    code.push(wire(format!("pes${k}$swap"), "swap".into()));
                }
                code.push(if j == 0 {
                    wire(format!("pes${k}$a_in"), format!("skew${i}$d_out"))
                } else {
                    wire(format!("pes${k}$a_in"), format!("pes${}$a_out", k - 1))
                });
                code.push(if i == 0 {
                    wire_zero(format!("pes${k}$p_in"), 32)
                } else {
                    wire(format!("pes${k}$p_in"), format!("pes${}$p_out", k - c))
                });
                code.push(if i == 0 {
                    wire(format!("pes${k}$w_in"), format!("w_top${j}"))
                } else {
                    wire(format!("pes${k}$w_in"), format!("pes${}$w_out", k - c))
                });
            }
        }
        if !self.pairs.is_empty() {
            array_pairs::wires(
                &mut code,
                self.pes.len(),
                |k| (format!("pes${k}$mul_a"), format!("pes${k}$mul_b")),
                |k| Some(format!("pes${k}$product")),
            );
        }
        for j in 0..c {
            code.push(wire(format!("deskew${j}$clock"), "clock".into()));
            code.push(wire(format!("deskew${j}$enable"), "enable".into()));
            code.push(wire(format!("deskew${j}$d_in"), format!("pes${}$p_out", (r - 1) * c + j)));
            code.push(wire(format!("out${j}"), format!("deskew${j}$d_out")));
        }
        Verilog::Combinatorial(code)
    }
}

/// The output-stationary array.
#[derive(LogicBlock)]
pub struct ArrayOs {
    pub clock: Signal<In, Clock>,
    /// Clock enable of every register (off while the machine is frozen).
    pub enable: Signal<In, Bit>,
    /// `A^T` row of this cycle: element `i` enters PE row `i` (before the skew).
    pub left: Vec<Signal<In, Bits<16>>>,
    /// `B` row of this cycle: element `j` enters PE column `j` (before the skew).
    pub top: Vec<Signal<In, Bits<16>>>,
    /// Set with the rows of `k = 0`: each PE starts its sum afresh.
    pub first: Signal<In, Bit>,
    /// The sums shift up a row.
    pub drain: Signal<In, Bit>,
    /// PE row 0's sums.
    pub out: Vec<Signal<Out, Bits<32>>>,
    pes: Vec<PeOs>,
    skew_a: Vec<Delay<Bits<16>>>,
    skew_first: Vec<Delay<Bit>>,
    skew_b: Vec<Delay<Bits<16>>>,
}

impl ArrayOs {
    pub fn new(config: &ArrayConfig) -> ArrayOs {
        ArrayOs::build(config, &ArrayParts::default())
    }

    /// The array with its MACs built as `parts` says (it pairs none and has no tree).
    fn build(config: &ArrayConfig, parts: &ArrayParts) -> ArrayOs {
        let (r, c) = (config.rows as usize, config.cols as usize);
        ArrayOs {
            clock: Default::default(),
            enable: Default::default(),
            left: vec_port(r),
            top: vec_port(c),
            first: Default::default(),
            drain: Default::default(),
            out: vec_port(c),
            pes: (0..r * c).map(|_| PeOs::new(parts.mac(config))).collect(),
            skew_a: (0..r).map(Delay::new).collect(),
            skew_first: (0..r).map(Delay::new).collect(),
            skew_b: (0..c).map(Delay::new).collect(),
        }
    }
}

impl Logic for ArrayOs {
    fn update(&mut self) {
        let (r, c) = (self.left.len(), self.out.len());
        for i in 0..r {
            self.skew_a[i].clock.next = self.clock.val();
            self.skew_a[i].enable.next = self.enable.val();
            self.skew_a[i].d_in.next = self.left[i].val();
            self.skew_first[i].clock.next = self.clock.val();
            self.skew_first[i].enable.next = self.enable.val();
            self.skew_first[i].d_in.next = self.first.val();
        }
        for j in 0..c {
            self.skew_b[j].clock.next = self.clock.val();
            self.skew_b[j].enable.next = self.enable.val();
            self.skew_b[j].d_in.next = self.top[j].val();
        }
        for i in 0..r {
            for j in 0..c {
                let k = i * c + j;
                self.pes[k].clock.next = self.clock.val();
                self.pes[k].enable.next = self.enable.val();
                self.pes[k].drain.next = self.drain.val();
                if j == 0 {
                    self.pes[k].a_in.next = self.skew_a[i].d_out.val();
                    self.pes[k].first_in.next = self.skew_first[i].d_out.val();
                } else {
                    self.pes[k].a_in.next = self.pes[k - 1].a_out.val();
                    self.pes[k].first_in.next = self.pes[k - 1].first_out.val();
                }
                self.pes[k].b_in.next =
                    if i == 0 { self.skew_b[j].d_out.val() } else { self.pes[k - c].b_out.val() };
                self.pes[k].p_below.next =
                    if i + 1 == r { Bits::default() } else { self.pes[k + c].p_out.val() };
            }
        }
        for j in 0..c {
            self.out[j].next = self.pes[j].p_out.val();
        }
    }

    fn connect(&mut self) {
        for s in self.skew_a.iter_mut() {
            s.clock.connect();
            s.enable.connect();
            s.d_in.connect();
        }
        for s in self.skew_first.iter_mut() {
            s.clock.connect();
            s.enable.connect();
            s.d_in.connect();
        }
        for s in self.skew_b.iter_mut() {
            s.clock.connect();
            s.enable.connect();
            s.d_in.connect();
        }
        for p in &mut self.pes {
            p.clock.connect();
            p.enable.connect();
            p.drain.connect();
            p.a_in.connect();
            p.first_in.connect();
            p.b_in.connect();
            p.p_below.connect();
        }
        for o in &mut self.out {
            o.connect();
        }
    }

    fn hdl(&self) -> Verilog {
        let (r, c) = (self.left.len(), self.out.len());
        let mut code = vec![];
        for i in 0..r {
            code.push(wire(format!("skew_a${i}$clock"), "clock".into()));
            code.push(wire(format!("skew_a${i}$enable"), "enable".into()));
            code.push(wire(format!("skew_a${i}$d_in"), format!("left${i}")));
            code.push(wire(format!("skew_first${i}$clock"), "clock".into()));
            code.push(wire(format!("skew_first${i}$enable"), "enable".into()));
            code.push(wire(format!("skew_first${i}$d_in"), "first".into()));
        }
        for j in 0..c {
            code.push(wire(format!("skew_b${j}$clock"), "clock".into()));
            code.push(wire(format!("skew_b${j}$enable"), "enable".into()));
            code.push(wire(format!("skew_b${j}$d_in"), format!("top${j}")));
        }
        for i in 0..r {
            for j in 0..c {
                let k = i * c + j;
                code.push(wire(format!("pes${k}$clock"), "clock".into()));
                code.push(wire(format!("pes${k}$enable"), "enable".into()));
                code.push(wire(format!("pes${k}$drain"), "drain".into()));
                if j == 0 {
                    code.push(wire(format!("pes${k}$a_in"), format!("skew_a${i}$d_out")));
                    code.push(wire(format!("pes${k}$first_in"), format!("skew_first${i}$d_out")));
                } else {
                    code.push(wire(format!("pes${k}$a_in"), format!("pes${}$a_out", k - 1)));
                    code.push(wire(
                        format!("pes${k}$first_in"),
                        format!("pes${}$first_out", k - 1),
                    ));
                }
                code.push(if i == 0 {
                    wire(format!("pes${k}$b_in"), format!("skew_b${j}$d_out"))
                } else {
                    wire(format!("pes${k}$b_in"), format!("pes${}$b_out", k - c))
                });
                code.push(if i + 1 == r {
                    wire_zero(format!("pes${k}$p_below"), 32)
                } else {
                    wire(format!("pes${k}$p_below"), format!("pes${}$p_out", k + c))
                });
            }
        }
        for j in 0..c {
            code.push(wire(format!("out${j}"), format!("pes${j}$p_out")));
        }
        Verilog::Combinatorial(code)
    }
}

/// The array of a config's dataflow behind one set of ports: `top` is the weight-stationary
/// array's `w_top` (shadow weights) or the output-stationary array's `top` (B rows); `shift` and
/// `swap` (blocking) or `shift`, `tag` and `load_bank` (decoupled, [`tagged`]) are used by the
/// first, `first` and `drain` by the second. `swap` exists unless the array is tagged, `tag` and
/// `load_bank` only when it is. The wiring is written by hand, as the mesh's is: `hdl_gen`
/// cannot index a port of an element of a `Vec` of blocks.
#[derive(LogicBlock)]
pub struct Array {
    pub clock: Signal<In, Clock>,
    pub enable: Signal<In, Bit>,
    pub left: Vec<Signal<In, Bits<16>>>,
    pub tag: Optional<Signal<In, Bits<TAG_BITS>>>,
    pub top: Vec<Signal<In, Bits<16>>>,
    pub shift: Signal<In, Bit>,
    pub swap: Optional<Signal<In, Bit>>,
    pub load_bank: Optional<Signal<In, Bits<TAG_BITS>>>,
    pub first: Signal<In, Bit>,
    pub drain: Signal<In, Bit>,
    pub out: Vec<Signal<Out, Bits<32>>>,
    ws: Vec<ArrayWs>,
    os: Vec<ArrayOs>,
    tree: Vec<ArrayTree>,
}

impl Array {
    pub fn new(config: &ArrayConfig) -> Array {
        Array::build(config, ArrayParts::default())
    }

    /// The array of `config` built with `parts`.
    pub fn build(config: &ArrayConfig, parts: ArrayParts) -> Array {
        let ArrayParts { paired, tree, .. } = parts;
        let ws = config.dataflow == Dataflow::WeightStationary;
        assert!(ws || !paired, "only the weight-stationary array pairs its PEs");
        let tagged = tagged(config);
        let systolic = ws && !tree;
        Array {
            clock: Default::default(),
            enable: Default::default(),
            left: vec_port(config.rows as usize),
            tag: Optional::default_when(tagged),
            top: vec_port(config.cols as usize),
            shift: Default::default(),
            swap: Optional::default_when(!tagged),
            load_bank: Optional::default_when(tagged),
            first: Default::default(),
            drain: Default::default(),
            out: vec_port(config.cols as usize),
            ws: if systolic { vec![ArrayWs::build(config, &parts)] } else { vec![] },
            os: if ws { vec![] } else { vec![ArrayOs::build(config, &parts)] },
            tree: if tree { vec![ArrayTree::new(config, paired)] } else { vec![] },
        }
    }
}

/// How a machine builds its array beyond its [`ArrayConfig`] (`TopConfig::array_parts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayParts {
    /// Each two PEs' products formed in one DSP (weight stationary only: [`ArrayWs::paired`]).
    pub paired: bool,
    /// The columns summed in adder trees ([`ArrayTree`]: blocking weight-stationary INT8 only).
    pub tree: bool,
    /// Each systolic INT8 PE's partial sum as wide as the sums it holds ([`PeWs::summing`]),
    /// else 32 bits in every PE, the RTL before DECISIONS 108.
    pub narrow: bool,
    /// BF16 PEs' f32 adds built lean ([`Mac::lean`]: revision 3 on).
    pub lean_add: bool,
}

/// The latest RTL's array: narrow sums, lean adds, neither paired nor summed in trees.
impl Default for ArrayParts {
    fn default() -> Self {
        ArrayParts { paired: false, tree: false, narrow: true, lean_add: true }
    }
}

impl ArrayParts {
    /// The MAC of an unpaired PE.
    fn mac(&self, config: &ArrayConfig) -> Mac {
        let mac = Mac::of(config);
        if self.lean_add {
            mac.lean()
        } else {
            mac
        }
    }
}

type Element = Signal<In, Bits<16>>;
type Sum = Signal<Out, Bits<32>>;

/// The wrapper's rows (`left`) and weights or `B` rows (`top`) into an inner array's ports,
/// and its output rows out.
fn pass_rows(
    left: &mut [Element],
    top: &mut [Element],
    (from_left, from_top): (&[Element], &[Element]),
    (out, from_out): (&mut [Sum], &[Sum]),
) {
    for (l, s) in left.iter_mut().zip(from_left) {
        l.next = s.val();
    }
    for (t, s) in top.iter_mut().zip(from_top) {
        t.next = s.val();
    }
    for (o, s) in out.iter_mut().zip(from_out) {
        o.next = s.val();
    }
}

impl Logic for Array {
    fn update(&mut self) {
        for a in &mut self.ws {
            a.clock.next = self.clock.val();
            a.enable.next = self.enable.val();
            a.shift.next = self.shift.val();
            if self.tag.is_some() {
                a.tag.next = self.tag.val();
                a.load_bank.next = self.load_bank.val();
            } else {
                a.swap.next = self.swap.val();
            }
            pass_rows(&mut a.left, &mut a.w_top, (&self.left, &self.top), (&mut self.out, &a.out));
        }
        for a in &mut self.tree {
            a.clock.next = self.clock.val();
            a.enable.next = self.enable.val();
            a.shift.next = self.shift.val();
            a.swap.next = self.swap.val();
            pass_rows(&mut a.left, &mut a.w_top, (&self.left, &self.top), (&mut self.out, &a.out));
        }
        for a in &mut self.os {
            a.clock.next = self.clock.val();
            a.enable.next = self.enable.val();
            a.first.next = self.first.val();
            a.drain.next = self.drain.val();
            pass_rows(&mut a.left, &mut a.top, (&self.left, &self.top), (&mut self.out, &a.out));
        }
    }

    fn connect(&mut self) {
        let tagged = self.tag.is_some();
        for a in &mut self.ws {
            a.clock.connect();
            a.enable.connect();
            a.shift.connect();
            if tagged {
                a.tag.connect();
                a.load_bank.connect();
            } else {
                a.swap.connect();
            }
            a.left.iter_mut().for_each(|s| s.connect());
            a.w_top.iter_mut().for_each(|s| s.connect());
        }
        for a in &mut self.tree {
            a.clock.connect();
            a.enable.connect();
            a.shift.connect();
            a.swap.connect();
            a.left.iter_mut().for_each(|s| s.connect());
            a.w_top.iter_mut().for_each(|s| s.connect());
        }
        for a in &mut self.os {
            a.clock.connect();
            a.enable.connect();
            a.first.connect();
            a.drain.connect();
            a.left.iter_mut().for_each(|s| s.connect());
            a.top.iter_mut().for_each(|s| s.connect());
        }
        self.out.iter_mut().for_each(|s| s.connect());
    }

    fn hdl(&self) -> Verilog {
        let (r, c) = (self.left.len(), self.out.len());
        let mut code = vec![];
        let (name, top, controls): (_, _, &[&str]) = if !self.tree.is_empty() {
            ("tree$0", "w_top", &["shift", "swap"])
        } else if self.ws.is_empty() {
            ("os$0", "top", &["first", "drain"])
        } else if self.tag.is_some() {
            ("ws$0", "w_top", &["shift", "tag", "load_bank"])
        } else {
            ("ws$0", "w_top", &["shift", "swap"])
        };
        for port in ["clock", "enable"].iter().chain(controls.iter()) {
            code.push(wire(format!("{name}${port}"), port.to_string()));
        }
        for i in 0..r {
            code.push(wire(format!("{name}$left${i}"), format!("left${i}")));
        }
        for j in 0..c {
            code.push(wire(format!("{name}${top}${j}"), format!("top${j}")));
            code.push(wire(format!("out${j}"), format!("{name}$out${j}")));
        }
        Verilog::Combinatorial(code)
    }
}

/// Bits of one scratchpad element of `dtype` on the 16-bit operand buses (INT8: low byte).
pub fn elem_bits(dtype: Dtype) -> usize {
    dtype.elem_bytes() * 8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{tick, verilog_of};
    use systole_core::timing::{os_latency, ws_latency};
    use systole_core::{Arith, Bf16, Int8, Schedule, BF16, PE_STAGES};

    fn set(sig: &mut Signal<In, Bits<16>>, v: u16) {
        sig.next = (v as u64).into();
    }

    /// Drives a WS array through a weight load and a matmul of `a` (rows x R elements) exactly
    /// as cycle.rs times them; returns the rows on `out` in the cycles the accumulators take them.
    fn run_ws(cfg: &ArrayConfig, w: &[Vec<u16>], a: &[Vec<u16>]) -> Vec<Vec<u32>> {
        run_ws_array(ArrayWs::new(cfg), cfg, w, a)
    }

    fn run_ws_array(
        mut arr: ArrayWs,
        cfg: &ArrayConfig,
        w: &[Vec<u16>],
        a: &[Vec<u16>],
    ) -> Vec<Vec<u32>> {
        let (r, c) = (cfg.rows as usize, cfg.cols as usize);
        arr.connect_all();
        arr.enable.next = true;
        // Weight loader: R cycles, bottom row first.
        arr.shift.next = true;
        for t in 0..r {
            for j in 0..c {
                set(&mut arr.w_top[j], w[r - 1 - t][j]);
            }
            tick(&mut arr, |a| &mut a.clock);
        }
        arr.shift.next = false;
        // Matmul with swap: rows + L cycles (`R + C - 1`, one more on two-stage PEs).
        let rows = a.len();
        let latency = ws_latency(cfg) as usize;
        let mut out = vec![];
        for tau in 0..rows + latency {
            arr.swap.next = tau == 0;
            for i in 0..r {
                set(&mut arr.left[i], if tau < rows { a[tau][i] } else { 0 });
            }
            crate::testing::settle(&mut arr);
            if tau >= latency {
                out.push(arr.out.iter().map(|o| o.val().to_u32()).collect());
            }
            tick(&mut arr, |a| &mut a.clock);
        }
        out
    }

    fn reference<A: Arith>(w: &[Vec<u16>], a: &[u16], j: usize) -> u32 {
        let mut s = A::zero();
        for (i, &x) in a.iter().enumerate() {
            s = A::mac(s, A::operand(A::elem_from_bits(x)), A::operand(A::elem_from_bits(w[i][j])));
        }
        A::acc_to_bits(s)
    }

    fn lcg(seed: &mut u64) -> u16 {
        (crate::testing::lcg_step(seed) >> 40) as u16
    }

    /// PEs paired in DSPs (an odd count leaves the last alone in one) sum what core sums in
    /// the cycles of two-stage PEs.
    #[test]
    fn paired_ws_array_matches_core_order_and_timing() {
        let mut seed = 11;
        for (rows, cols) in [(3u16, 2u16), (3, 1), (1, 1), (4, 1)] {
            let cfg = ArrayConfig::new(rows, cols, Dtype::Int8).with_pe_stages(2);
            let (r, c) = (rows as usize, cols as usize);
            let arr = ArrayWs::paired(&cfg);
            assert_eq!(arr.pairs.len(), (r * c).div_ceil(2));
            let w: Vec<Vec<u16>> =
                (0..r).map(|_| (0..c).map(|_| lcg(&mut seed) & 0xFF).collect()).collect();
            let mut a: Vec<Vec<u16>> =
                (0..5).map(|_| (0..r).map(|_| lcg(&mut seed) & 0xFF).collect()).collect();
            a[2] = vec![0x80; r];
            let out = run_ws_array(arr, &cfg, &w, &a);
            for (m, row) in a.iter().enumerate() {
                for j in 0..c {
                    let want = reference::<Int8>(&w, row, j);
                    assert_eq!(out[m][j], want, "{rows}x{cols}: row {m} col {j}");
                }
            }
        }
    }

    #[test]
    fn ws_array_matches_core_order_and_timing() {
        let mut seed = 7;
        let shapes = [(Dtype::Int8, 3, 2), (Dtype::Bf16, 2, 3), (Dtype::Bf16, 4, 2)];
        for ((dtype, rows, cols), stages) in
            shapes.into_iter().flat_map(|s| PE_STAGES.map(|p| (s, p)))
        {
            let cfg = ArrayConfig::new(rows, cols, dtype).with_pe_stages(stages);
            // Only BF16 PEs stage their add (`ArrayConfig::may_stage_pe_add`).
            if cfg.validate().is_err() {
                assert!(dtype == Dtype::Int8 && stages >= 3, "{cfg:?}");
                continue;
            }
            let (r, c) = (rows as usize, cols as usize);
            let elem = |s: &mut u64| match dtype {
                Dtype::Int8 => lcg(s) & 0xFF,
                // bf16 in [1/4, 4) of either sign, and an Inf to see NaN rows stay apart.
                Dtype::Bf16 => (0x3E80 + lcg(s) % 0x200) | (lcg(s) & 0x8000),
            };
            let w: Vec<Vec<u16>> =
                (0..r).map(|_| (0..c).map(|_| elem(&mut seed)).collect()).collect();
            let mut a: Vec<Vec<u16>> =
                (0..4).map(|_| (0..r).map(|_| elem(&mut seed)).collect()).collect();
            if dtype == Dtype::Bf16 {
                a[1][0] = 0x7F80;
            }
            let out = run_ws(&cfg, &w, &a);
            for (m, row) in a.iter().enumerate() {
                for j in 0..c {
                    let want = match dtype {
                        Dtype::Int8 => reference::<Int8>(&w, row, j),
                        Dtype::Bf16 => reference::<BF16>(&w, row, j),
                    };
                    assert_eq!(out[m][j], want, "{dtype:?} {stages} stages: row {m} col {j}");
                }
            }
        }
    }

    /// Tagged: rows of two matmuls, each naming its own weight bank, enter back to back, and
    /// each row meets its own bank's weights in every PE.
    #[test]
    fn tagged_ws_array_streams_two_banks_back_to_back() {
        let cfg = ArrayConfig::new(3, 2, Dtype::Int8).with_schedule(Schedule::Decoupled);
        let (r, c) = (3usize, 2usize);
        let mut seed = 5;
        let mut tile = |rows, cols| -> Vec<Vec<u16>> {
            (0..rows).map(|_| (0..cols).map(|_| lcg(&mut seed) & 0xFF).collect()).collect()
        };
        let w = [tile(r, c), tile(r, c)];
        let a = tile(5, r);
        let mut arr = ArrayWs::new(&cfg);
        arr.connect_all();
        arr.enable.next = true;
        arr.shift.next = true;
        for (bank, w) in [1u64, 2].into_iter().zip(&w) {
            arr.load_bank.next = bank.into();
            for t in 0..r {
                for j in 0..c {
                    set(&mut arr.w_top[j], w[r - 1 - t][j]);
                }
                tick(&mut arr, |a| &mut a.clock);
            }
        }
        arr.shift.next = false;
        arr.load_bank.next = 0u64.into();
        // Rows 0 to 2 use bank 1, rows 3 and 4 bank 2.
        let bank = |m: usize| if m < 3 { 1 } else { 2 };
        for tau in 0..a.len() + r + c - 1 {
            for i in 0..r {
                set(&mut arr.left[i], a.get(tau).map_or(0, |row| row[i]));
            }
            arr.tag.next = (bank(tau) as u64).into();
            crate::testing::settle(&mut arr);
            if let Some(m) = tau.checked_sub(r + c - 1) {
                for j in 0..c {
                    let want = reference::<Int8>(&w[bank(m) - 1], &a[m], j);
                    assert_eq!(arr.out[j].val().to_u32(), want, "row {m} col {j}");
                }
            }
            tick(&mut arr, |a| &mut a.clock);
        }
    }

    #[test]
    fn os_array_matches_core_order_and_timing() {
        // Output-stationary PEs never stage their add (`ArrayConfig::may_stage_pe_add`).
        for stages in [1, 2] {
            os_array_case(stages);
        }
    }

    fn os_array_case(stages: u8) {
        let cfg = ArrayConfig::new(2, 3, Dtype::Bf16)
            .with_dataflow(Dataflow::OutputStationary)
            .with_pe_stages(stages);
        let (r, c, k) = (2usize, 3usize, 4usize);
        let mut seed = 11;
        let elem = |s: &mut u64| (0x3E80 + lcg(s) % 0x200) | (lcg(s) & 0x8000);
        let at: Vec<Vec<u16>> = (0..k).map(|_| (0..r).map(|_| elem(&mut seed)).collect()).collect();
        let b: Vec<Vec<u16>> = (0..k).map(|_| (0..c).map(|_| elem(&mut seed)).collect()).collect();
        let mut arr = ArrayOs::new(&cfg);
        arr.connect_all();
        arr.enable.next = true;
        // Stale values from an earlier op must not leak into the sums.
        for i in 0..r {
            set(&mut arr.left[i], 0x7F80);
        }
        tick(&mut arr, |a| &mut a.clock);
        let compute = k + os_latency(&cfg) as usize;
        let mut out = vec![];
        for tau in 0..compute + r {
            arr.first.next = tau == 0;
            arr.drain.next = tau >= compute;
            for i in 0..r {
                set(&mut arr.left[i], if tau < k { at[tau][i] } else { 0 });
            }
            for j in 0..c {
                set(&mut arr.top[j], if tau < k { b[tau][j] } else { 0 });
            }
            crate::testing::settle(&mut arr);
            if tau >= compute {
                out.push(arr.out.iter().map(|o| o.val().to_u32()).collect::<Vec<_>>());
            }
            tick(&mut arr, |a| &mut a.clock);
        }
        for i in 0..r {
            for j in 0..c {
                let mut s = BF16::zero();
                for kk in 0..k {
                    s = BF16::mac(s, Bf16(at[kk][i]).to_f32_daz(), Bf16(b[kk][j]).to_f32_daz());
                }
                assert_eq!(out[i][j], BF16::acc_to_bits(s), "{stages} stages: PE ({i}, {j})");
            }
        }
    }

    #[test]
    fn verilog_is_valid() {
        let ws = ArrayConfig::new(2, 3, Dtype::Int8);
        yosys_validate("array_ws", &verilog_of(ArrayWs::new(&ws))).unwrap();
        let os = ArrayConfig::new(3, 2, Dtype::Bf16).with_dataflow(Dataflow::OutputStationary);
        yosys_validate("array_os", &verilog_of(ArrayOs::new(&os))).unwrap();
        let tagged = ArrayConfig::new(3, 2, Dtype::Bf16).with_schedule(Schedule::Decoupled);
        yosys_validate("array_ws_tagged", &verilog_of(ArrayWs::new(&tagged))).unwrap();
        yosys_validate("array_tagged", &verilog_of(Array::new(&tagged))).unwrap();
    }

    /// INT8 PEs narrow their sums by default; an array built without (`narrow` false, the 85F's
    /// default, `TopConfig::narrow_sums`) has no trace of the masks, and computes the same.
    #[test]
    fn narrowed_sums_are_an_option_that_leaves_no_trace_when_off() {
        let cfg = ArrayConfig::new(3, 2, Dtype::Int8);
        let wide_parts = ArrayParts { narrow: false, ..Default::default() };
        let narrow = verilog_of(Array::build(&cfg, ArrayParts::default()));
        let wide = verilog_of(Array::build(&cfg, wide_parts));
        assert!(narrow.contains("sum_low") && !wide.contains("sum_low"));
        let byte = |v: i8| v as u8 as u16;
        let w: Vec<Vec<u16>> = [[-128i8, 127], [-128, -128], [127, -1]]
            .iter()
            .map(|r| r.iter().map(|&v| byte(v)).collect())
            .collect();
        let a: Vec<Vec<u16>> = [[-128i8, -128, 127], [5, -7, 3]]
            .iter()
            .map(|r| r.iter().map(|&v| byte(v)).collect())
            .collect();
        let run = |arr| run_ws_array(arr, &cfg, &w, &a);
        assert_eq!(run(ArrayWs::build(&cfg, &wide_parts)), run(ArrayWs::new(&cfg)));
    }

    /// A blocking array has its `swap` and no trace of tags; a tagged one the reverse.
    #[test]
    fn each_schedule_builds_only_its_own_ports() {
        let ports = |config: &ArrayConfig| {
            let verilog = verilog_of(Array::new(config));
            let header = verilog.lines().find(|l| l.starts_with("module top(")).unwrap().to_owned();
            (header, verilog.contains("tag"), verilog.contains("banks"))
        };
        let blocking = ArrayConfig::new(2, 3, Dtype::Int8);
        let (header, tags, banks) = ports(&blocking);
        assert!(header.contains(",shift,swap,first,") && !tags && !banks, "{header}");
        let (header, tags, banks) = ports(&blocking.with_schedule(Schedule::Decoupled));
        assert!(header.contains(",tag,") && header.contains(",shift,load_bank,first,"), "{header}");
        assert!(!header.contains("swap") && tags && banks);
    }
}
