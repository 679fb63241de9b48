//! `ArrayConfig`: the one description of an accelerator instance that every crate reads.

/// Element type of the array's datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dtype {
    /// i8 x i8 products, i32 accumulation.
    Int8,
    /// bf16 x bf16 products, f32 accumulation.
    Bf16,
}

impl Dtype {
    /// Bytes of one scratchpad element.
    pub const fn elem_bytes(self) -> usize {
        match self {
            Dtype::Int8 => 1,
            Dtype::Bf16 => 2,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::Int8 => "int8",
            Dtype::Bf16 => "bf16",
        }
    }
}

/// What stays in the PEs while data streams past.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dataflow {
    /// TPU style: a weight tile sits in the PEs, activations enter the left edge skewed, partial
    /// sums flow down and leave the bottom into the accumulators.
    WeightStationary,
    /// Each PE owns one output: A enters from the left, B from the top, results drain at the end.
    OutputStationary,
}

impl Dataflow {
    pub const fn short_name(self) -> &'static str {
        match self {
            Dataflow::WeightStationary => "ws",
            Dataflow::OutputStationary => "os",
        }
    }
}

/// How the controller issues instructions to its units. Both give every valid program the
/// results of program order; they differ in which instructions overlap, so in cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Schedule {
    /// One sequencer runs loads, stores and vector ops while every other unit is idle; only the
    /// weight loader overlaps the array (docs/DECISIONS.md 4). What the RTL builds today.
    Blocking,
    /// Load, weight, array and vector units run from one in-order issue stage and overlap
    /// whenever a scoreboard of memory footprints finds no hazard; consecutive matmuls stream
    /// back to back (docs/DECISIONS.md 41, `crate::scoreboard`).
    Decoupled,
}

impl Schedule {
    pub const ALL: [Schedule; 2] = [Schedule::Blocking, Schedule::Decoupled];
    pub const fn name(self) -> &'static str {
        match self {
            Schedule::Blocking => "blocking",
            Schedule::Decoupled => "decoupled",
        }
    }
    /// The code an accelerator reports it by when it identifies itself.
    pub const fn code(self) -> u8 {
        self as u8
    }
    pub fn from_code(code: u8) -> Option<Schedule> {
        Schedule::ALL.into_iter().find(|s| s.code() == code)
    }
}

/// How a machine's DRAM moves bytes to and from its other memories ([`ArrayConfig::dram_port`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DramPort {
    /// A row a cycle: the DRAM in byte banks, each contiguous row of a transfer read or written
    /// in one cycle and rotated to its lanes; a strided gather takes a cycle per element.
    Row,
    /// A byte a cycle: one byte-wide memory, every row of a `Load`, `Store`, `LoadAcc`,
    /// `StoreSpad` or `StoreBf16` a cycle per byte it moves, contiguous or not. For parts too
    /// small for the banks and rotations of a wide array's rows (docs/DECISIONS.md 111); the
    /// blocking schedule only.
    Byte,
    /// The board's SDR SDRAM ([`crate::sdram`]: the ULX3S's 32 MB, 16-bit words): each DRAM
    /// transfer streams its words through core's controller one a cycle in an open row, with
    /// its activates, precharges and refreshes, and a row lands in the cycle its last word is
    /// done (`timing::sdram`). One transfer holds the SDRAM at a time (`scoreboard`), at a
    /// clock the part's timing allows.
    Sdram,
}

impl DramPort {
    pub const ALL: [DramPort; 3] = [DramPort::Row, DramPort::Byte, DramPort::Sdram];

    /// Its name on the command line and in build reports.
    pub const fn name(self) -> &'static str {
        match self {
            DramPort::Row => "row",
            DramPort::Byte => "byte",
            DramPort::Sdram => "sdram",
        }
    }
}

/// Largest array side.
pub const MAX_SIDE: u16 = 256;
/// Memory depths are addressed by 16-bit row fields in the ISA.
pub const MAX_DEPTH: u32 = 1 << 16;
/// Lowest clock, 1 kHz: a sanity limit for the performance model, which prints cycles as time
/// (`1e-320` MHz made a run "take" `inf` us, and `1e-300` printed 300 digits).
pub const MIN_CLOCK_MHZ: f64 = 0.001;
/// Highest clock, 10 GHz: a sanity limit for the performance model.
pub const MAX_CLOCK_MHZ: f64 = 10_000.0;
/// Most pipeline registers a conversion lane has ([`ArrayConfig::convert_stages`]): one after
/// the 16 x 16 products, one after the high multiply, one after the rounding shift.
pub const MAX_CONVERT_STAGES: u8 = 3;
/// The [`ArrayConfig::requant_cycles`] a machine may be built with: 1, each requantize lane a
/// 32 x 32 multiplier; 4, each lane one 16 x 16 multiplier making a partial product a cycle.
pub const REQUANT_CYCLES: [u8; 2] = [1, 4];
/// The [`ArrayConfig::scale_cycles`] a machine may be built with: 1, a BF16 lane's product and
/// sum in one cycle; 2, the product registered between them; 3, the multiplier's halves
/// registered apart too.
pub const SCALE_CYCLES: [u8; 3] = [1, 2, 3];
/// The [`ArrayConfig::pe_stages`] a machine may be built with: 1, a PE multiplies and adds in
/// one cycle; 2, its product registered between them; 3, its f32 add's aligned operands
/// registered too; 4, its normalised sum registered before it is rounded as well (3 and 4: BF16
/// weight-stationary PEs of the blocking schedule, [`ArrayConfig::pe_add_staged`]).
pub const PE_STAGES: [u8; 4] = [1, 2, 3, 4];
/// The [`ArrayConfig::add_stages`] a machine may be built with: 1, a BF16 lane's f32 add in one
/// cycle; 2, its aligned operands registered before the sum is formed; 3, the sum's normalised
/// significand and exponent registered before it is rounded too.
pub const ADD_STAGES: [u8; 3] = [1, 2, 3];
/// Most read stages a machine's memories have ([`ArrayConfig::read_stages`]): one, the block
/// RAM's own output register (or a register beside it).
pub const MAX_READ_STAGES: u8 = 1;

/// One accelerator instance.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArrayConfig {
    /// PE rows (R). In weight-stationary mode the reduction (K) dimension runs down the rows.
    pub rows: u16,
    /// PE columns (C). Outputs leave the array C wide.
    pub cols: u16,
    pub dtype: Dtype,
    pub dataflow: Dataflow,
    /// Scratchpad rows; each row is [`ArrayConfig::spad_width`] elements.
    pub spad_depth: u32,
    /// Accumulator rows; each row is `cols` 32-bit words.
    pub acc_depth: u32,
    /// Clock frequency, for turning cycles into time.
    pub clock_mhz: f64,
    /// How instructions overlap.
    pub schedule: Schedule,
    /// Pipeline registers in the conversion lanes (requantize, cast to bf16): a `Requantize`,
    /// `CastBf16` or `StoreBf16` row lands this many cycles after it is read, and the
    /// instruction takes as many cycles more (`timing::row_lands`). 0 to
    /// [`MAX_CONVERT_STAGES`]; the boards build them to close timing (docs/DECISIONS.md 51).
    pub convert_stages: u8,
    /// Cycles each `Requantize` row spends in the conversion lanes: 1, or 4 on a machine whose
    /// lanes each make the 32 x 32 product from one 16 x 16 multiplier, a partial product a
    /// cycle (a quarter of the logic, for FPGAs without multipliers: docs/DECISIONS.md 57).
    /// One of [`REQUANT_CYCLES`]; row `r` lands `requant_cycles * (r + 1) - 1 + convert_stages`
    /// cycles after dispatch (`timing::row_lands`). BF16 machines have no requantize lanes.
    pub requant_cycles: u8,
    /// Cycles each `Scale` or `Axpy` row spends in the accumulator lanes: 1, or 2 on a machine
    /// whose BF16 lanes register the product before the sum, so that no accumulator row passes
    /// a multiplier and an adder in one cycle (docs/DECISIONS.md 68), or 3 on one whose lanes
    /// also register the significands' product before it is rounded (99). One of
    /// [`SCALE_CYCLES`]; row `r` lands `scale_cycles * (r + 1) - 1` cycles after dispatch
    /// (`timing::row_lands`). Only BF16 machines run these ops.
    pub scale_cycles: u8,
    /// Cycles a PE takes from its operands to its sum: 1, or 2 on a machine whose PEs register
    /// the product before the add, so that no operand passes a multiplier and an adder in one
    /// cycle (docs/DECISIONS.md 69), or 3 on a BF16 weight-stationary machine of the blocking
    /// schedule whose PEs also register their f32 add's aligned operands, as a staged lane does
    /// (docs/DECISIONS.md 98), or 4 on one whose PEs register the add's normalised sum before
    /// it is rounded as well (100). One of [`PE_STAGES`]. With 2, every result leaves the array
    /// a cycle later (`timing::ws_latency`, `timing::os_latency`), with the same bits: the
    /// product is exact in both dtypes. With 3 (4), a partial sum also takes two (three) cycles
    /// through each PE, so the input rows are skewed that many cycles a PE row and every result
    /// leaves `rows` (`2 rows`) cycles later again (`timing::pe_row_cycles`,
    /// `timing::ws_latency`); the sums and their order are the same, so are the bits.
    pub pe_stages: u8,
    /// Whether an INT8 machine's accumulator lanes have a comparator, for `Max` (max pooling
    /// in INT8 inference: docs/DECISIONS.md 75). BF16 lanes always have one; an INT8 machine
    /// without it rejects `Max` as it rejects the BF16 ops, and a part too small to hold it
    /// (the iCEBreaker's) is built without.
    pub int8_max: bool,
    /// Cycles a BF16 accumulator lane's f32 add takes: 1, or 2 on a machine whose lanes register
    /// the aligned operands before the sum is formed, so that no accumulator row passes the
    /// whole adder in one cycle (docs/DECISIONS.md 90), or 3 on one whose lanes also register
    /// the normalised sum before it is rounded (100). One of [`ADD_STAGES`], and 1 on INT8
    /// machines (their lanes add 32-bit integers). Every result row of a matmul lands
    /// `add_stages - 1` cycles later (`timing::ws_latency`, `timing::os_latency`), and a vector
    /// row that adds (`BiasAdd`, `BiasRelu`, `Add`, `Axpy`) is read that many cycles more
    /// (`timing::vector_row_cycles`); the bits are the same.
    pub add_stages: u8,
    /// Registers after each memory's read port: 0, a read's word is used in the cycle after
    /// its address (the block RAM's read register), or 1 on a machine whose memories register
    /// the word once more before it is used (the ECP5 block RAM's output register: 0.94 ns
    /// from the clock instead of 5.6, docs/DECISIONS.md 106). Every instruction but `Sync` and
    /// `Halt` reads a memory in its first cycle, so each of its rows lands `read_stages`
    /// cycles later and it takes as many cycles more (`timing::row_lands`,
    /// `timing::duration`, `timing::ws_latency`, `timing::os_latency`): the rows of one
    /// instruction still follow each other every cycle, and their bits are the same.
    /// 0 to [`MAX_READ_STAGES`].
    pub read_stages: u8,
    /// How the DRAM moves bytes ([`DramPort`]): a row a cycle, or a byte a cycle, in which case
    /// each row of a DRAM transfer takes a cycle per byte (`timing::load_row_cycles`,
    /// `timing::row_lands`); the bits are the same.
    pub dram_port: DramPort,
    /// Whether the scratchpad is one single-port memory, which reads or writes one row a cycle
    /// (the iCE40 UP5K's SPRAM: 128 KiB where its block RAMs hold 15), instead of copies with
    /// a read port each beside a write port. Then the weight loader and the array take turns
    /// on its port: `LoadWeights` waits for the running matmul's reads
    /// (`timing::matmul_port_cycles`) and `Matmul` for the weight loader, where otherwise the
    /// weight loader fills the shadow weights from the cycle after a matmul dispatches
    /// (`timing::schedule`); and an instruction that writes the scratchpad (`Load`,
    /// `CastBf16`, `Requantize`) holds the sequencer a cycle after its last row lands, so that
    /// the next instruction's first read is not addressed in the cycle of that write
    /// (`timing::duration`). The bits are the same. Weight-stationary machines of the blocking
    /// schedule only (an output-stationary matmul reads both operands at once).
    pub single_port_spad: bool,
}

/// Why an [`ArrayConfig`] is not buildable: a field out of its range, or `PeAddStaged`,
/// `pe_stages` 3 or 4 on a machine whose PEs may not stage their add
/// ([`ArrayConfig::may_stage_pe_add`]), or `BytePortDecoupled`, a byte-wide DRAM port on the
/// decoupled schedule, whose load unit times its transposing loads and its scoreboard its spans
/// on the row port.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    Rows { rows: u16 },
    Cols { cols: u16 },
    SpadDepth { depth: u32, min: u32 },
    AccDepth { depth: u32, min: u32 },
    Clock { mhz: f64 },
    ConvertStages { stages: u8 },
    RequantCycles { cycles: u8 },
    ScaleCycles { cycles: u8 },
    PeStages { stages: u8 },
    PeAddStaged { stages: u8, dtype: Dtype, dataflow: Dataflow, schedule: Schedule },
    AddStages { stages: u8, dtype: Dtype },
    ReadStages { stages: u8 },
    BytePortDecoupled,
    SdramClock(crate::sdram::TimingError),
    SdramBytes { bytes: u64, max: u64 },
    SinglePortSpad { dataflow: Dataflow, schedule: Schedule },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ConfigError::Rows { rows } => {
                write!(f, "rows = {rows}: the array must have 1 to {MAX_SIDE} rows")
            }
            ConfigError::Cols { cols } => {
                write!(f, "cols = {cols}: the array must have 1 to {MAX_SIDE} columns")
            }
            ConfigError::SpadDepth { depth, min } => write!(
                f,
                "spad_depth = {depth}: the scratchpad needs {min} to {MAX_DEPTH} rows \
                 (three tiles of max(rows, cols) rows, and 16-bit row addresses)"
            ),
            ConfigError::AccDepth { depth, min } => write!(
                f,
                "acc_depth = {depth}: the accumulator needs {min} to {MAX_DEPTH} rows \
                 (one output tile of `rows` rows, and 16-bit row addresses)"
            ),
            ConfigError::Clock { mhz } => {
                // `1e-320`, not the 320 digits `{}` writes for it.
                if mhz != 0.0 && !(1e-3..1e6).contains(&mhz.abs()) && mhz.is_finite() {
                    write!(f, "clock_mhz = {mhz:e}")?;
                } else {
                    write!(f, "clock_mhz = {mhz}")?;
                }
                write!(f, ": must be {MIN_CLOCK_MHZ} to {MAX_CLOCK_MHZ} MHz")
            }
            ConfigError::ConvertStages { stages } => write!(
                f,
                "convert_stages = {stages}: the conversion lanes have 0 to {MAX_CONVERT_STAGES} \
                 pipeline registers"
            ),
            ConfigError::RequantCycles { cycles } => write!(
                f,
                "requant_cycles = {cycles}: a requantize lane takes 1 or 4 cycles a row \
                 (a 32 x 32 multiplier, or a 16 x 16 one used four times)"
            ),
            ConfigError::ScaleCycles { cycles } => write!(
                f,
                "scale_cycles = {cycles}: a Scale or Axpy row takes 1, 2 or 3 cycles (the lane's \
                 product and sum in one cycle, the product registered, or the multiplier's \
                 halves registered apart too)"
            ),
            ConfigError::PeStages { stages } => write!(
                f,
                "pe_stages = {stages}: a PE takes 1, 2 or 3 cycles from its operands to its sum \
                 (the product and sum in one cycle, the product registered, or the f32 add's \
                 aligned operands registered too)"
            ),
            ConfigError::PeAddStaged { stages, dtype, dataflow, schedule } => write!(
                f,
                "pe_stages = {stages}: only BF16 weight-stationary PEs of the blocking schedule \
                 stage their f32 add, and this machine is {} {} {}; use pe_stages 1 or 2, or \
                 the blocking schedule",
                dtype.name(),
                dataflow.short_name(),
                schedule.name()
            ),
            ConfigError::AddStages { stages, dtype: Dtype::Bf16 } => write!(
                f,
                "add_stages = {stages}: a BF16 lane's f32 add takes 1, 2 or 3 cycles (in one \
                 cycle, its aligned operands registered, or its normalised sum registered too)"
            ),
            ConfigError::AddStages { stages, dtype: Dtype::Int8 } => write!(
                f,
                "add_stages = {stages}: an INT8 machine's lanes add 32-bit integers in one \
                 cycle (add_stages = 1); 2 and 3 are for the f32 adder of BF16 lanes"
            ),
            ConfigError::ReadStages { stages } => write!(
                f,
                "read_stages = {stages}: a memory's read word passes 0 to {MAX_READ_STAGES} \
                 registers after the block RAM's read register"
            ),
            ConfigError::BytePortDecoupled => write!(
                f,
                "dram_port = byte: a DRAM that moves a byte a cycle is built for the blocking \
                 schedule only (the decoupled load unit and scoreboard time rows of the row \
                 port); use the blocking schedule or dram_port = row"
            ),
            ConfigError::SdramClock(e) => write!(f, "dram_port = sdram: {e}"),
            ConfigError::SdramBytes { bytes, max } => write!(
                f,
                "dram_port = sdram: {bytes} bytes of DRAM do not fit the {} ({max} bytes)",
                crate::sdram::SDRAM_PART.name
            ),
            ConfigError::SinglePortSpad { dataflow, schedule } => write!(
                f,
                "single_port_spad = true: a single-port scratchpad serves weight-stationary \
                 machines of the blocking schedule only, and this machine is {} {}; use \
                 the blocking schedule",
                dataflow.short_name(),
                schedule.name()
            ),
        }
    }
}

impl ArrayConfig {
    /// A config with the default memories: 4096 scratchpad rows, 1024 accumulator rows,
    /// weight-stationary, 100 MHz, the blocking schedule, INT8 lanes with their comparator.
    pub const fn new(rows: u16, cols: u16, dtype: Dtype) -> ArrayConfig {
        ArrayConfig {
            rows,
            cols,
            dtype,
            dataflow: Dataflow::WeightStationary,
            spad_depth: 4096,
            acc_depth: 1024,
            clock_mhz: 100.0,
            schedule: Schedule::Blocking,
            convert_stages: 0,
            requant_cycles: 1,
            scale_cycles: 1,
            pe_stages: 1,
            int8_max: true,
            add_stages: 1,
            read_stages: 0,
            dram_port: DramPort::Row,
            single_port_spad: false,
        }
    }

    pub const fn with_schedule(mut self, schedule: Schedule) -> ArrayConfig {
        self.schedule = schedule;
        self
    }

    pub const fn with_dataflow(mut self, dataflow: Dataflow) -> ArrayConfig {
        self.dataflow = dataflow;
        self
    }

    pub const fn with_convert_stages(mut self, stages: u8) -> ArrayConfig {
        self.convert_stages = stages;
        self
    }

    pub const fn with_requant_cycles(mut self, cycles: u8) -> ArrayConfig {
        self.requant_cycles = cycles;
        self
    }

    pub const fn with_scale_cycles(mut self, cycles: u8) -> ArrayConfig {
        self.scale_cycles = cycles;
        self
    }

    pub const fn with_pe_stages(mut self, stages: u8) -> ArrayConfig {
        self.pe_stages = stages;
        self
    }

    /// Whether this machine's PEs may stage their f32 add (`pe_stages` 3): BF16 (an INT8 PE adds
    /// integers), weight-stationary (an output-stationary PE adds into its own sum every cycle,
    /// which a register inside the add would break) and blocking (the decoupled schedule's
    /// scoreboard times its weight banks on one-cycle PE rows).
    pub const fn may_stage_pe_add(&self) -> bool {
        matches!(self.dtype, Dtype::Bf16)
            && matches!(self.dataflow, Dataflow::WeightStationary)
            && matches!(self.schedule, Schedule::Blocking)
    }

    /// Whether the PEs stage their f32 add (`pe_stages` 3 or 4): each partial sum takes
    /// `pe_stages - 1` cycles through a PE.
    pub const fn pe_add_staged(&self) -> bool {
        self.pe_stages >= 3
    }

    pub const fn with_add_stages(mut self, stages: u8) -> ArrayConfig {
        self.add_stages = stages;
        self
    }

    pub const fn with_read_stages(mut self, stages: u8) -> ArrayConfig {
        self.read_stages = stages;
        self
    }

    pub const fn with_dram_port(mut self, port: DramPort) -> ArrayConfig {
        self.dram_port = port;
        self
    }

    pub const fn with_single_port_spad(mut self, single: bool) -> ArrayConfig {
        self.single_port_spad = single;
        self
    }

    pub const fn with_int8_max(mut self, int8_max: bool) -> ArrayConfig {
        self.int8_max = int8_max;
        self
    }

    /// Elements in one scratchpad row: `max(rows, cols)`, so a row holds either an activation
    /// vector (R elements, entering the left edge) or a weight / B row (C elements, entering
    /// the top).
    pub const fn spad_width(&self) -> usize {
        if self.rows > self.cols {
            self.rows as usize
        } else {
            self.cols as usize
        }
    }

    pub const fn pe_count(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }

    /// Peak MACs per cycle: one per PE.
    pub const fn peak_macs_per_cycle(&self) -> u64 {
        self.pe_count()
    }

    /// Checks every field and every combination; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.rows == 0 || self.rows > MAX_SIDE {
            return Err(ConfigError::Rows { rows: self.rows });
        }
        if self.cols == 0 || self.cols > MAX_SIDE {
            return Err(ConfigError::Cols { cols: self.cols });
        }
        let min_spad = 3 * self.spad_width() as u32;
        if self.spad_depth < min_spad || self.spad_depth > MAX_DEPTH {
            return Err(ConfigError::SpadDepth { depth: self.spad_depth, min: min_spad });
        }
        let min_acc = self.rows as u32;
        if self.acc_depth < min_acc || self.acc_depth > MAX_DEPTH {
            return Err(ConfigError::AccDepth { depth: self.acc_depth, min: min_acc });
        }
        if self.convert_stages > MAX_CONVERT_STAGES {
            return Err(ConfigError::ConvertStages { stages: self.convert_stages });
        }
        if !REQUANT_CYCLES.contains(&self.requant_cycles) {
            return Err(ConfigError::RequantCycles { cycles: self.requant_cycles });
        }
        if !SCALE_CYCLES.contains(&self.scale_cycles) {
            return Err(ConfigError::ScaleCycles { cycles: self.scale_cycles });
        }
        if !PE_STAGES.contains(&self.pe_stages) {
            return Err(ConfigError::PeStages { stages: self.pe_stages });
        }
        if self.pe_add_staged() && !self.may_stage_pe_add() {
            let (stages, dtype, dataflow, schedule) =
                (self.pe_stages, self.dtype, self.dataflow, self.schedule);
            return Err(ConfigError::PeAddStaged { stages, dtype, dataflow, schedule });
        }
        let add_ok = match self.dtype {
            Dtype::Bf16 => ADD_STAGES.contains(&self.add_stages),
            Dtype::Int8 => self.add_stages == 1,
        };
        if !add_ok {
            return Err(ConfigError::AddStages { stages: self.add_stages, dtype: self.dtype });
        }
        if self.read_stages > MAX_READ_STAGES {
            return Err(ConfigError::ReadStages { stages: self.read_stages });
        }
        if self.dram_port == DramPort::Byte && self.schedule == Schedule::Decoupled {
            return Err(ConfigError::BytePortDecoupled);
        }
        if self.dram_port == DramPort::Sdram {
            ArrayConfig::check_clock(self.clock_mhz)?;
            crate::sdram::timing_under(&crate::sdram::SDRAM_PART, self.clock_mhz)
                .map_err(ConfigError::SdramClock)?;
        }
        let one_port_ok =
            self.dataflow == Dataflow::WeightStationary && self.schedule == Schedule::Blocking;
        if self.single_port_spad && !one_port_ok {
            let (dataflow, schedule) = (self.dataflow, self.schedule);
            return Err(ConfigError::SinglePortSpad { dataflow, schedule });
        }
        ArrayConfig::check_clock(self.clock_mhz)
    }

    /// Whether `mhz` is a clock an [`ArrayConfig`] may have: [`MIN_CLOCK_MHZ`] to
    /// [`MAX_CLOCK_MHZ`]. The host's `--clock-mhz` and `--fmax-mhz` flags are parsed with it.
    pub fn check_clock(mhz: f64) -> Result<(), ConfigError> {
        // NaN fails the range test too.
        if (MIN_CLOCK_MHZ..=MAX_CLOCK_MHZ).contains(&mhz) {
            Ok(())
        } else {
            Err(ConfigError::Clock { mhz })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_field() {
        let ok = ArrayConfig::new(16, 16, Dtype::Int8);
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(ArrayConfig { rows: 0, ..ok }.validate(), Err(ConfigError::Rows { rows: 0 }));
        assert_eq!(
            ArrayConfig { cols: 257, ..ok }.validate(),
            Err(ConfigError::Cols { cols: 257 })
        );
        assert_eq!(
            ArrayConfig { spad_depth: 47, ..ok }.validate(),
            Err(ConfigError::SpadDepth { depth: 47, min: 48 })
        );
        assert_eq!(
            ArrayConfig { acc_depth: 1 << 17, ..ok }.validate(),
            Err(ConfigError::AccDepth { depth: 1 << 17, min: 16 })
        );
        assert_eq!(ok.with_convert_stages(MAX_CONVERT_STAGES).validate(), Ok(()));
        assert_eq!(
            ok.with_convert_stages(4).validate(),
            Err(ConfigError::ConvertStages { stages: 4 })
        );
        for cycles in REQUANT_CYCLES {
            assert_eq!(ok.with_requant_cycles(cycles).validate(), Ok(()));
        }
        for cycles in [0, 2, 3, 5] {
            assert_eq!(
                ok.with_requant_cycles(cycles).validate(),
                Err(ConfigError::RequantCycles { cycles })
            );
        }
        for cycles in SCALE_CYCLES {
            assert_eq!(ok.with_scale_cycles(cycles).validate(), Ok(()));
        }
        for cycles in [0, 4] {
            assert_eq!(
                ok.with_scale_cycles(cycles).validate(),
                Err(ConfigError::ScaleCycles { cycles })
            );
        }
        for stages in [1, 2] {
            assert_eq!(ok.with_pe_stages(stages).validate(), Ok(()));
        }
        for stages in [0, 5] {
            assert_eq!(ok.with_pe_stages(stages).validate(), Err(ConfigError::PeStages { stages }));
        }
        let bf16 = ArrayConfig::new(4, 4, Dtype::Bf16);
        for stages in PE_STAGES {
            assert_eq!(bf16.with_pe_stages(stages).validate(), Ok(()));
        }
        let os = bf16.with_dataflow(Dataflow::OutputStationary);
        let decoupled = bf16.with_schedule(Schedule::Decoupled);
        for (config, stages) in [ok, os, decoupled].into_iter().flat_map(|c| [(c, 3), (c, 4)]) {
            let (dtype, dataflow, schedule) = (config.dtype, config.dataflow, config.schedule);
            let err = config.with_pe_stages(stages).validate().unwrap_err();
            assert_eq!(err, ConfigError::PeAddStaged { stages, dtype, dataflow, schedule });
            assert!(err.to_string().contains("only BF16 weight-stationary"), "{err}");
            assert!(err.to_string().starts_with(&alloc::format!("pe_stages = {stages}:")), "{err}");
        }
        let bf16 = ArrayConfig::new(4, 4, Dtype::Bf16);
        for stages in ADD_STAGES {
            assert_eq!(bf16.with_add_stages(stages).validate(), Ok(()));
        }
        for (config, stages) in [(bf16, 0), (bf16, 4), (ok, 2), (ok, 3), (ok, 0)] {
            assert_eq!(
                config.with_add_stages(stages).validate(),
                Err(ConfigError::AddStages { stages, dtype: config.dtype })
            );
        }
        assert_eq!(ok.with_read_stages(MAX_READ_STAGES).validate(), Ok(()));
        let err = ok.with_read_stages(2).validate().unwrap_err();
        assert_eq!(err, ConfigError::ReadStages { stages: 2 });
        assert!(err.to_string().starts_with("read_stages = 2:"), "{err}");
        assert_eq!(ok.with_dram_port(DramPort::Byte).validate(), Ok(()));
        let err = ok.with_dram_port(DramPort::Byte).with_schedule(Schedule::Decoupled).validate();
        assert_eq!(err, Err(ConfigError::BytePortDecoupled));
        assert!(err.unwrap_err().to_string().starts_with("dram_port = byte:"));
        assert_eq!(ok.with_single_port_spad(true).validate(), Ok(()));
        for (dataflow, schedule) in [
            (Dataflow::OutputStationary, Schedule::Blocking),
            (Dataflow::WeightStationary, Schedule::Decoupled),
        ] {
            let one = ok.with_single_port_spad(true).with_dataflow(dataflow);
            let err = one.with_schedule(schedule).validate().unwrap_err();
            assert_eq!(err, ConfigError::SinglePortSpad { dataflow, schedule });
            assert!(err.to_string().starts_with("single_port_spad = true:"), "{err}");
        }
        assert!(ArrayConfig { clock_mhz: f64::NAN, ..ok }.validate().is_err());
        assert!(ArrayConfig { clock_mhz: 0.0, ..ok }.validate().is_err());
        // A clock so low that cycles as time overflow to `inf` us, or print 300 digits.
        for mhz in [1e-320, 1e-300, 0.000_999, 10_000.5, f64::INFINITY] {
            assert_eq!(
                ArrayConfig { clock_mhz: mhz, ..ok }.validate(),
                Err(ConfigError::Clock { mhz }),
                "{mhz}"
            );
        }
        for mhz in [MIN_CLOCK_MHZ, 12.0, MAX_CLOCK_MHZ] {
            assert_eq!(ArrayConfig::check_clock(mhz), Ok(()), "{mhz}");
        }
        extern crate alloc;
        use alloc::string::ToString;
        let message = |mhz| ConfigError::Clock { mhz }.to_string();
        assert_eq!(message(1e-320), "clock_mhz = 1e-320: must be 0.001 to 10000 MHz");
        assert_eq!(message(-2.5), "clock_mhz = -2.5: must be 0.001 to 10000 MHz");
        assert_eq!(message(f64::NAN), "clock_mhz = NaN: must be 0.001 to 10000 MHz");
        assert_eq!(ArrayConfig::new(8, 32, Dtype::Bf16).spad_width(), 32);
    }
}
