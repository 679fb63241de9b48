//! One program on two machines from the same memories, and where they first part.
//!
//! [`run_from`] loads an [`Image`] (every memory, byte for byte), runs a program and reads every
//! memory back; [`first_difference`] compares two such [`Outcome`]s: the result (statistics or
//! fault), then each memory element by element (DRAM bytes, scratchpad elements, accumulator
//! words), then the cycle count. [`localize`] finds the first instruction after which two
//! machines differ, by bisecting over the program's prefixes on fresh machines, and names the
//! cycle the instruction was dispatched in (core's timing model).

use std::fmt;

use systole_core::isa::Instruction;
use systole_core::machine::{Region, Stats};
use systole_core::params::SplitMix64;
use systole_core::timing;
use systole_core::{ArrayConfig, Dtype, Machine, MachineError};

/// The contents of every memory of a machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub dram: Vec<u8>,
    pub spad: Vec<u8>,
    pub acc: Vec<u8>,
}

impl Image {
    /// Memories of `machine`'s sizes, filled from `seed`. BF16 scratchpad elements and
    /// accumulator words are finite numbers of moderate size (with some zeros and negative
    /// zeros), so the arithmetic they feed is exercised rather than saturated with NaN.
    pub fn random(config: &ArrayConfig, machine: &dyn Machine, seed: u64) -> Image {
        let mut rng = SplitMix64(seed);
        let mut bytes = |n: usize| -> Vec<u8> { (0..n).map(|_| rng.next_u64() as u8).collect() };
        let mut image = Image {
            dram: bytes(machine.region_size(Region::Dram)),
            spad: bytes(machine.region_size(Region::Spad)),
            acc: bytes(machine.region_size(Region::Acc)),
        };
        if config.dtype == Dtype::Bf16 {
            let mut rng = SplitMix64(seed ^ 0x9e37_79b9);
            let mut value = || -> f32 {
                let r = rng.next_u64();
                match r % 16 {
                    0 => 0.0,
                    1 => -0.0,
                    _ => ((r >> 8) % 2001) as f32 / 250.0 - 4.0,
                }
            };
            for e in image.spad.chunks_exact_mut(2) {
                e.copy_from_slice(&((value().to_bits() >> 16) as u16).to_le_bytes());
            }
            for w in image.acc.chunks_exact_mut(4) {
                w.copy_from_slice(&value().to_bits().to_le_bytes());
            }
            // DRAM holds operands (bf16) and accumulator images (f32) alike: bf16 pairs read
            // as f32 are finite too.
            for e in image.dram.chunks_exact_mut(2) {
                e.copy_from_slice(&((value().to_bits() >> 16) as u16).to_le_bytes());
            }
        }
        image
    }

    /// Writes every memory of `machine`.
    pub fn load_into(&self, machine: &mut dyn Machine) -> Result<(), MachineError> {
        machine.write(Region::Dram, 0, &self.dram)?;
        machine.write(Region::Spad, 0, &self.spad)?;
        machine.write(Region::Acc, 0, &self.acc)
    }

    /// Reads every memory of `machine`.
    pub fn read_from(machine: &mut dyn Machine) -> Result<Image, MachineError> {
        let mut read = |region: Region| -> Result<Vec<u8>, MachineError> {
            let mut out = vec![0u8; machine.region_size(region)];
            machine.read(region, 0, &mut out)?;
            Ok(out)
        };
        Ok(Image { dram: read(Region::Dram)?, spad: read(Region::Spad)?, acc: read(Region::Acc)? })
    }

    fn region(&self, region: Region) -> &[u8] {
        match region {
            Region::Dram => &self.dram,
            Region::Spad => &self.spad,
            Region::Acc => &self.acc,
        }
    }
}

/// What a run left: its result and every memory.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub result: Result<Stats, MachineError>,
    pub memories: Image,
}

/// Loads `image`, runs `program`, reads every memory back. An error here is the host's (a
/// memory access refused or a link that failed); a program's fault is in the outcome.
pub fn run_from(
    machine: &mut dyn Machine,
    image: &Image,
    program: &[Instruction],
) -> Result<Outcome, MachineError> {
    image.load_into(machine)?;
    let result = machine.run(program);
    if let Err(MachineError::Link(_)) = result {
        return Err(result.unwrap_err());
    }
    Ok(Outcome { result, memories: Image::read_from(machine)? })
}

/// Where two outcomes first differ.
#[derive(Clone, Debug, PartialEq)]
pub enum Difference {
    /// One faulted and the other did not, or they faulted differently.
    Result { expected: String, got: String },
    /// A memory element: DRAM byte, scratchpad element or accumulator word `row`, `element`.
    Memory {
        region: Region,
        /// Byte offset of the element in its memory.
        offset: usize,
        row: usize,
        element: usize,
        /// The element's bytes, little-endian, as an integer.
        expected: u32,
        got: u32,
        /// Bytes per element (1, 2 or 4).
        width: usize,
    },
    /// The cycle counts (both machines count cycles).
    Cycles { expected: u64, got: u64 },
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Result { expected, got } => {
                write!(f, "result: expected {expected}, got {got}")
            }
            Difference::Memory { region, offset, row, element, expected, got, width } => {
                let digits = width * 2;
                let place = match region {
                    Region::Dram => format!("DRAM byte {offset:#x}"),
                    Region::Spad => format!("scratchpad row {row} element {element}"),
                    Region::Acc => format!("accumulator row {row} word {element}"),
                };
                write!(
                    f,
                    "{place} (byte offset {offset:#x}): expected {expected:#0w$x}, got {got:#0w$x}",
                    w = digits + 2
                )
            }
            Difference::Cycles { expected, got } => {
                write!(f, "cycle count: expected {expected}, got {got}")
            }
        }
    }
}

fn describe(result: &Result<Stats, MachineError>) -> String {
    match result {
        Ok(s) => format!(
            "ok ({} instructions, {} MACs{})",
            s.instructions,
            s.macs,
            s.cycles.map_or(String::new(), |c| format!(", {c} cycles"))
        ),
        Err(e) => format!("fault: {e}"),
    }
}

/// The first difference between `want` and `got`: the result, then the memories in the order
/// DRAM, scratchpad, accumulator (lowest address first), then the cycle count when both count.
pub fn first_difference(config: &ArrayConfig, want: &Outcome, got: &Outcome) -> Option<Difference> {
    let same_result = match (&want.result, &got.result) {
        (Ok(a), Ok(b)) => a.macs == b.macs && a.instructions == b.instructions,
        (Err(a), Err(b)) => a == b,
        _ => false,
    };
    if !same_result {
        return Some(Difference::Result {
            expected: describe(&want.result),
            got: describe(&got.result),
        });
    }
    let widths = [
        (Region::Dram, 1, usize::MAX),
        (Region::Spad, config.dtype.elem_bytes(), config.spad_width()),
        (Region::Acc, 4, config.cols as usize),
    ];
    for (region, width, per_row) in widths {
        let (a, b) = (want.memories.region(region), got.memories.region(region));
        if a.len() != b.len() {
            return Some(Difference::Result {
                expected: format!("{} of {} bytes", region.name(), a.len()),
                got: format!("{} bytes", b.len()),
            });
        }
        if let Some(at) = a.iter().zip(b).position(|(x, y)| x != y) {
            let index = at / width;
            let offset = index * width;
            let word = |m: &[u8]| {
                m[offset..offset + width]
                    .iter()
                    .rev()
                    .fold(0u32, |acc, &byte| acc << 8 | byte as u32)
            };
            let (row, element) = match per_row {
                usize::MAX => (0, index),
                n => (index / n, index % n),
            };
            return Some(Difference::Memory {
                region,
                offset,
                row,
                element,
                expected: word(a),
                got: word(b),
                width,
            });
        }
    }
    match (&want.result, &got.result) {
        (Ok(Stats { cycles: Some(a), .. }), Ok(Stats { cycles: Some(b), .. })) if a != b => {
            Some(Difference::Cycles { expected: *a, got: *b })
        }
        _ => None,
    }
}

/// Two fresh machines, the reference first: what [`localize`] reruns prefixes on.
pub type Pair = (Box<dyn Machine>, Box<dyn Machine>);

/// The first instruction after which two machines part.
#[derive(Clone, Debug, PartialEq)]
pub struct Localized {
    /// Index of the instruction in the program.
    pub index: usize,
    pub instruction: Instruction,
    /// The cycle core's timing model dispatches it in (`None` past a fault).
    pub dispatch_cycle: Option<u64>,
    /// How the program cut after it (`program[..=index]` and `Halt`) differs.
    pub difference: Difference,
    /// That prefix program.
    pub prefix: Vec<Instruction>,
}

/// `program[..len]` followed by `Halt`.
pub fn prefix(program: &[Instruction], len: usize) -> Vec<Instruction> {
    let mut p: Vec<Instruction> = program[..len].to_vec();
    p.push(Instruction::Halt);
    p
}

/// Finds the shortest prefix of `program` (cut before its `Halt`, a `Halt` appended) on which
/// the two machines `fresh()` makes differ, starting each run from `image` on fresh machines
/// (so no state but the memories carries over). `None` when even the whole program agrees.
/// Assumes a difference, once there, persists in longer prefixes (a result, a memory word or a
/// cycle count that differs is not usually undone); the search checks the prefix it reports.
pub fn localize<E: From<MachineError>>(
    config: &ArrayConfig,
    image: &Image,
    program: &[Instruction],
    fresh: &mut dyn FnMut() -> Result<Pair, E>,
) -> Result<Option<Localized>, E> {
    let body = program.iter().position(|i| *i == Instruction::Halt).unwrap_or(program.len());
    let mut differs = |len: usize| -> Result<Option<Difference>, E> {
        let (mut want, mut got) = fresh()?;
        let p = prefix(program, len);
        let a = run_from(want.as_mut(), image, &p)?;
        let b = run_from(got.as_mut(), image, &p)?;
        Ok(first_difference(config, &a, &b))
    };
    let Some(mut found) = differs(body)? else {
        return Ok(None);
    };
    // Invariant: prefix `hi` differs (with `found`); prefix `lo` agrees (checked below for
    // the empty prefix, which a broken machine may fail too).
    let (mut lo, mut hi) = (0usize, body);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match differs(mid)? {
            Some(d) => {
                hi = mid;
                found = d;
            }
            None => lo = mid,
        }
    }
    if lo == 0 && hi > 0 {
        if let Some(d) = differs(0)? {
            // Even `Halt` alone differs.
            return Ok(Some(Localized {
                index: body,
                instruction: Instruction::Halt,
                dispatch_cycle: Some(0),
                difference: d,
                prefix: prefix(program, 0),
            }));
        }
    }
    let index = hi.saturating_sub(1);
    let instruction = if hi == 0 { Instruction::Halt } else { program[index] };
    let mut dispatch_cycle = None;
    let _ = timing::schedule(config, &prefix(program, hi), |i, at| {
        if i == index {
            dispatch_cycle = Some(at);
        }
    });
    Ok(Some(Localized {
        index,
        instruction,
        dispatch_cycle,
        difference: found,
        prefix: prefix(program, hi),
    }))
}
