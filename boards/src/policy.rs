//! What `systole board build` makes: a board's default build in a dtype, its knobs turned where
//! asked ([`default_knobs`], then [`Knobs::with_array`] and the like), checked against what the
//! board and its flow have, as the machine to emit ([`top_config`]) and where its PEs' products
//! go ([`products`]). The memories stay the board's (grown to core's minimum for a larger
//! array). Errors name the knob as the command line spells it.

use systole_core::{ConfigError, Dtype};
use systole_hdl::top::BaudError;
use systole_hdl::TopConfig;

use crate::board::Board;
use crate::bridge::LinkRateError;
use crate::knobs::{Knobs, TopMemories};
use crate::pe_products::PeProducts;
use crate::yosys::Products;

/// Why a board build is refused before any tool runs.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "no {dtype} array fits board {board} (docs/BOARDS.md): pass both --rows and --cols to \
         try one anyway"
    )]
    NoArray { dtype: &'static str, board: &'static str },
    #[error("--rows and --cols must be at least 1")]
    EmptyArray,
    #[error("--pe-products {asked}: {board} builds its PEs' products only as {ways} ({why})")]
    PeProducts { asked: &'static str, board: &'static str, ways: String, why: &'static str },
    #[error("--spad-spram true: {board} has no SPRAM (the iCE40 UP5K's iCEBreaker has)")]
    NoSpram { board: &'static str },
    #[error("array config: {0}")]
    Array(ConfigError),
    #[error("--clock-mhz {mhz}: {source}")]
    Clock { mhz: f64, source: BaudError },
    #[error("--clock-mhz {mhz}: {source}")]
    LinkRate { mhz: f64, source: LinkRateError },
    #[error(
        "--multiplier-pes {asked}: only a build with its PEs' products in logic on a board with \
         multipliers keeps some of them in multipliers (this build's are in {way})"
    )]
    MultiplierPesNotInLogic { asked: u32, way: &'static str },
    #[error(
        "--multiplier-pes {asked}: the {rows}x{cols} array has {pes} PEs, so at most {most} can \
         keep their products in multipliers beside those in logic (--pe-products dsp puts all \
         of them there)",
        most = pes - 1
    )]
    MultiplierPesEvery { asked: u32, rows: u16, cols: u16, pes: u32 },
}

/// The knobs a build on `b` in `dtype` starts from: its default build's; where no array in
/// `dtype` fits the board, `array` (which the build must then name) with the INT8 build's other
/// knobs, its PEs' products where the part usually forms them and none kept in multipliers.
pub fn default_knobs(
    b: &Board,
    dtype: Dtype,
    array: Option<(u16, u16)>,
) -> Result<Knobs, PolicyError> {
    match (b.preset(dtype), array) {
        (Some(p), _) => Ok(p.knobs),
        (None, Some((rows, cols))) => Ok(Knobs {
            rows,
            cols,
            pe_products: Some(b.pe_products_ways()[0]),
            multiplier_pes: 0,
            ..b.int8.knobs
        }),
        (None, None) => Err(PolicyError::NoArray { dtype: dtype.name(), board: b.name }),
    }
}

/// The machine `knobs` make on `b` in `dtype`, refused where the board or its flow cannot
/// build it or core does not allow it.
pub fn top_config(b: &Board, dtype: Dtype, knobs: &Knobs) -> Result<TopConfig, PolicyError> {
    let k = knobs;
    if k.rows == 0 || k.cols == 0 {
        return Err(PolicyError::EmptyArray);
    }
    // Paired products are registered in their DSP ([`Knobs::with_pe_products`]): a one-stage
    // build of them is refused by the emitter, naming why.
    let pe_pairs = pe_products(b, k)? == PeProducts::DspPairs;
    if k.spad_spram && b.sprams == 0 {
        return Err(PolicyError::NoSpram { board: b.name });
    }
    let config = b.array_config(dtype, k);
    config.validate().map_err(PolicyError::Array)?;
    // Before any work: a clock the link's rate cannot be divided from would build a board
    // that nobody can talk to.
    let uart_divisor = uart_divisor(b, config.clock_mhz, k.rtl_revision)?;
    let memories = TopMemories {
        dram_bytes: b.memories.dram_bytes,
        fifo_depth: b.memories.fifo_depth,
        uart_divisor,
    };
    Ok(k.top(config, memories, pe_pairs))
}

/// The UART divisor of a build on `b` at `mhz` on RTL revision `revision`: from revision
/// [`FAST_LINK_REVISION`] the fastest rate the board's bridge carries with the margin
/// ([`crate::bridge::UsbBridge::link_rate`]); before it [`DEFAULT_BAUD`]'s, as the boards
/// measured on those revisions were built, so that their commands emit what they measured.
///
/// [`FAST_LINK_REVISION`]: systole_hdl::top::FAST_LINK_REVISION
/// [`DEFAULT_BAUD`]: systole_hdl::top::DEFAULT_BAUD
pub fn uart_divisor(b: &Board, mhz: f64, revision: u8) -> Result<u16, PolicyError> {
    use systole_hdl::top::{DEFAULT_BAUD, FAST_LINK_REVISION};
    if revision >= FAST_LINK_REVISION {
        let rate =
            b.bridge.link_rate(mhz).map_err(|source| PolicyError::LinkRate { mhz, source })?;
        return Ok(rate.divisor);
    }
    systole_hdl::top::uart_divisor(mhz, DEFAULT_BAUD)
        .map_err(|source| PolicyError::Clock { mhz, source })
}

/// Where a build of `knobs` on `b` forms the PEs' products ([`Board::pe_products_of`]); a way
/// the board's flow does not have ([`Board::pe_products_ways`]) is refused.
pub fn pe_products(b: &Board, knobs: &Knobs) -> Result<PeProducts, PolicyError> {
    let ways = b.pe_products_ways();
    let chosen = b.pe_products_of(knobs);
    if ways.contains(&chosen) {
        return Ok(chosen);
    }
    let names: Vec<&str> = ways.iter().map(|w| w.name()).collect();
    let why = match (b.dsps, chosen) {
        (false, _) => "it has no multipliers",
        (true, PeProducts::Logic) => "Debian's Yosys, its flow, has no Booth pass",
        _ => "only the iCE40 UP5K's DSPs have the dual 8 x 8 mode",
    };
    Err(PolicyError::PeProducts {
        asked: chosen.name(),
        board: b.name,
        ways: names.join(" or "),
        why,
    })
}

/// Where a build of `top` on `b` forms its PEs' products: [`pe_products`], with the first
/// `knobs.multiplier_pes` PEs in multiplier blocks; refused where the products are not in logic
/// or where it names every PE.
pub fn products(b: &Board, top: &TopConfig, knobs: &Knobs) -> Result<Products, PolicyError> {
    let a = &top.array;
    let way = pe_products(b, knobs)?;
    let pes = a.pe_count() as u32;
    let asked = knobs.multiplier_pes;
    if asked == 0 {
        return Ok(Products::all(way));
    }
    if way != PeProducts::Logic || !b.dsps {
        return Err(PolicyError::MultiplierPesNotInLogic { asked, way: way.name() });
    }
    if asked >= pes {
        return Err(PolicyError::MultiplierPesEvery { asked, rows: a.rows, cols: a.cols, pes });
    }
    Ok(Products { way, in_multipliers: asked, pes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::board::by_name;
    use systole_core::Schedule;

    fn board(name: &str) -> Board {
        by_name(name).unwrap()
    }

    /// The machine of `b`'s default build in `dtype` with its knobs turned by `turn`.
    fn top(
        b: &Board,
        dtype: Dtype,
        turn: impl FnOnce(Knobs) -> Knobs,
    ) -> Result<TopConfig, String> {
        let knobs = turn(default_knobs(b, dtype, None).unwrap());
        top_config(b, dtype, &knobs).map_err(|e| e.to_string())
    }

    /// Each default build emits the divisor its measured report records (115,200 baud and
    /// requests of BASE_DATA, the link of the revision it was built on), and the same build on
    /// the fast link's revision runs at its bridge's rate with large requests (DECISIONS 140).
    #[test]
    fn default_builds_keep_the_link_they_were_measured_with() {
        use systole_hdl::top::FAST_LINK_REVISION;
        for b in crate::board::BOARDS {
            for dtype in [Dtype::Int8, Dtype::Bf16] {
                let Some(p) = b.preset(dtype) else { continue };
                let top = top_config(&b, dtype, &p.knobs).unwrap();
                let report = crate::Report::from_json(p.measured.unwrap()).unwrap();
                let built = report.built.unwrap();
                assert_eq!(top.uart_divisor, built.uart_divisor, "{} {dtype:?}", b.name);
                assert!(!top.large_requests() && p.knobs.rtl_revision < FAST_LINK_REVISION);
                let fast = Knobs { rtl_revision: FAST_LINK_REVISION, ..p.knobs };
                let fast = top_config(&b, dtype, &fast).unwrap();
                let rate = b.bridge.link_rate(p.knobs.clock_mhz).unwrap();
                assert_eq!(fast.uart_divisor, rate.divisor, "{} {dtype:?}", b.name);
                assert!(fast.large_requests());
            }
        }
    }

    /// A build takes the board's default build and turns what it is asked to: the lanes and
    /// the schedule (a decoupled machine always checks words as they are queued), and a value
    /// core does not allow is refused naming its field.
    #[test]
    fn board_builds_take_the_preset_and_override_what_is_asked() {
        let b = board("ulx3s-25f");
        assert_eq!(top(&b, Dtype::Int8, |k| k).unwrap().array, b.default_config());
        let decoupled = |k| Knobs { schedule: Schedule::Decoupled, requant_cycles: 4, ..k };
        let t = top(&b, Dtype::Int8, decoupled).unwrap();
        assert_eq!((t.array.schedule, t.array.requant_cycles), (Schedule::Decoupled, 4));
        assert!(t.checks_words_at_queue());
        let ice = board("icebreaker");
        let blocking = top(&ice, Dtype::Int8, |k| k).unwrap();
        assert!(!blocking.checks_words_at_queue(), "the iCEBreaker's preset checks the head");
        let queued = top(&ice, Dtype::Int8, |k| Knobs { checks_at_queue: true, ..k }).unwrap();
        assert!(queued.checks_words_at_queue(), "as asked");
        // Its preset's byte port and SPRAM scratchpad are the blocking machine's: a decoupled
        // build asks for rows and block RAM.
        let decoupled = |k| Knobs { schedule: Schedule::Decoupled, ..k };
        let err = top(&ice, Dtype::Int8, decoupled).unwrap_err();
        assert!(err.contains("dram_port = byte"), "{err}");
        let rows = |k| Knobs { dram_port: systole_core::DramPort::Row, ..decoupled(k) };
        let err = top(&ice, Dtype::Int8, rows).unwrap_err();
        assert!(err.contains("single_port_spad = true"), "{err}");
        let block_ram = |k| Knobs { spad_spram: false, ..rows(k) };
        assert!(top(&ice, Dtype::Int8, block_ram).unwrap().checks_words_at_queue());
        let err = top(&b, Dtype::Int8, |k| Knobs { requant_cycles: 3, ..k }).unwrap_err();
        assert!(err.contains("requant_cycles = 3"), "{err}");
    }

    /// A dtype no array of fits the board builds only the array named, with the INT8 build's
    /// other knobs; an empty array, SPRAM on a part without and a clock the link's rate cannot
    /// be divided from are refused, naming the flag.
    #[test]
    fn what_the_board_cannot_build_is_refused_naming_the_flag() {
        let mut b = board("ulx3s-25f");
        b.bf16 = None;
        let err = default_knobs(&b, Dtype::Bf16, None).unwrap_err().to_string();
        assert!(err.contains("no bf16 array fits board ulx3s-25f"), "{err}");
        let k = default_knobs(&b, Dtype::Bf16, Some((2, 2))).unwrap();
        assert_eq!(
            k,
            Knobs {
                rows: 2,
                cols: 2,
                multiplier_pes: 0,
                pe_products: Some(PeProducts::Dsp),
                ..b.int8.knobs
            }
        );
        let err = top(&b, Dtype::Int8, |k| Knobs { rows: 0, ..k }).unwrap_err();
        assert_eq!(err, "--rows and --cols must be at least 1");
        let err = top(&b, Dtype::Int8, |k| Knobs { spad_spram: true, ..k }).unwrap_err();
        assert!(err.starts_with("--spad-spram true: ulx3s-25f has no SPRAM"), "{err}");
        let err = top(&b, Dtype::Int8, |k| Knobs { clock_mhz: 0.001, ..k }).unwrap_err();
        assert!(err.starts_with("--clock-mhz 0.001: a 0.001 MHz clock cannot make"), "{err}");
    }

    /// Adder trees sum the columns where the array is blocking weight-stationary INT8; the
    /// emitter refuses them elsewhere, naming why.
    #[test]
    fn adder_trees_are_built_on_blocking_int8_arrays() {
        let tree = |k| Knobs { adder_tree: true, ..k };
        let t = top(&board("icebreaker"), Dtype::Int8, tree).unwrap();
        assert!(t.adder_tree && systole_hdl::emit::check(&t).is_ok());
        let decoupled = top(&board("ulx3s"), Dtype::Int8, tree).unwrap();
        let err = systole_hdl::emit::check(&decoupled).unwrap_err().to_string();
        assert!(err.contains("adder trees need") && err.contains("decoupled"), "{err}");
    }

    /// A blocking machine may leave its program checks to its host; the decoupled machine
    /// refuses it, naming why.
    #[test]
    fn program_checks_are_left_to_the_host_on_blocking_machines() {
        let lean = |k| Knobs { program_checks: false, ..k };
        let t = top(&board("icebreaker"), Dtype::Int8, lean).unwrap();
        assert!(!t.program_checks && systole_hdl::emit::check(&t).is_ok());
        let decoupled = top(&board("ulx3s"), Dtype::Int8, lean).unwrap();
        let err = systole_hdl::emit::check(&decoupled).unwrap_err().to_string();
        assert!(err.contains("decoupled"), "{err}");
    }

    /// A blocking machine's candidate may be registered; the decoupled machine, which always
    /// has one, refuses the knob, naming why.
    #[test]
    fn head_registers_are_built_on_blocking_machines() {
        let head = |k| Knobs { head_register: true, ..k };
        let t = top(&board("ulx3s-25f"), Dtype::Int8, head).unwrap();
        assert!(t.head_register && systole_hdl::emit::check(&t).is_ok());
        assert!(!top(&board("ulx3s-25f"), Dtype::Int8, |k| k).unwrap().head_register);
        let decoupled = top(&board("ulx3s"), Dtype::Int8, head).unwrap();
        let err = systole_hdl::emit::check(&decoupled).unwrap_err().to_string();
        assert!(err.contains("decoupled top always registers its candidate"), "{err}");
    }

    /// Some PEs keep their products in multipliers where the others are in logic; that is
    /// refused where the products are not in logic, on a part without multipliers, and where
    /// it names every PE.
    #[test]
    fn some_pe_products_stay_in_multipliers_where_asked() {
        let products = |name: &str, turn: &dyn Fn(Knobs) -> Knobs| {
            let b = board(name);
            let k = turn(default_knobs(&b, Dtype::Int8, None).unwrap());
            let t = top_config(&b, Dtype::Int8, &k).unwrap();
            super::products(&b, &t, &k).map_err(|e| e.to_string())
        };
        let b = board("ulx3s");
        let mixed = products("ulx3s", &|k| Knobs { multiplier_pes: 64, ..k }).unwrap();
        assert_eq!(mixed.way, PeProducts::Logic, "the 85F's INT8 default's way");
        let pes = b.int8.knobs.rows as u32 * b.int8.knobs.cols as u32;
        assert_eq!((mixed.in_multipliers, mixed.pes), (64, pes));
        let small = products("ulx3s", &|k| k.with_array(4, 4)).unwrap();
        assert_eq!(small, Products::all(PeProducts::Logic), "not the preset's array");
        let dsp = |k: Knobs| Knobs { multiplier_pes: 4, ..k.with_pe_products(PeProducts::Dsp) };
        let err = products("ulx3s", &dsp).unwrap_err();
        assert!(err.contains("only a build with its PEs' products in logic"), "{err}");
        let err = products("alchitry-cu", &|k| Knobs { multiplier_pes: 1, ..k }).unwrap_err();
        assert!(err.contains("on a board with multipliers"), "{err}");
        let every = |k: Knobs| Knobs { multiplier_pes: 4, ..k.with_array(2, 2) };
        let err = products("ulx3s", &every).unwrap_err();
        assert!(err.contains("the 2x2 array has 4 PEs, so at most 3"), "{err}");
    }

    /// A BF16 build's lanes align as the board's default does unless asked; the 85F's BF16
    /// default aligns beside the compare too.
    #[test]
    fn lanes_align_as_the_preset_or_as_asked() {
        let b = board("ulx3s-25f");
        assert!(top(&b, Dtype::Bf16, |k| k).unwrap().parallel_align);
        let compact = top(&b, Dtype::Bf16, |k| Knobs { parallel_align: false, ..k }).unwrap();
        assert!(!compact.parallel_align);
        assert!(top(&board("ulx3s"), Dtype::Bf16, |k| k).unwrap().parallel_align);
    }

    /// The iCEBreaker pairs its PEs' products in its DSPs, two-stage unless a later knob says
    /// otherwise (then the emitter refuses it, naming why); a board without the mode refuses it.
    #[test]
    fn pe_pairs_are_built_where_the_dsps_have_them() {
        let ice = board("icebreaker");
        let column = |k: Knobs| k.with_array(8, 1).with_pe_products(PeProducts::DspPairs);
        let t = top(&ice, Dtype::Int8, column).unwrap();
        assert!(t.pe_pairs && t.array.pe_stages == 2);
        assert!(systole_hdl::emit::check(&t).is_ok());
        let one_stage = |k: Knobs| Knobs { pe_stages: 1, ..column(k) };
        let t = top(&ice, Dtype::Int8, one_stage).unwrap();
        let err = systole_hdl::emit::check(&t).unwrap_err().to_string();
        assert!(err.contains("two-stage PEs"), "{err}");
        let default = top(&ice, Dtype::Int8, |k| k).unwrap();
        assert!(default.pe_pairs && default.array.pe_stages == 2, "the default build pairs");
        let one = top(&ice, Dtype::Int8, |k| k.with_pe_products(PeProducts::Dsp)).unwrap();
        assert!(!one.pe_pairs);
        for (name, way) in [
            ("ulx3s", PeProducts::DspPairs),
            ("alchitry-cu", PeProducts::Dsp),
            ("icebreaker", PeProducts::Logic),
        ] {
            let err = top(&board(name), Dtype::Int8, |k| k.with_pe_products(way)).unwrap_err();
            assert!(err.contains(&format!("--pe-products {}: {name}", way.name())), "{err}");
        }
    }
}
