//! Program files: 16-byte little-endian instruction words, as `systole sim --program` reads
//! and `--save-program` writes them.

use std::io::Write;
use std::path::Path;

use anyhow::{anyhow, Context};
use systole_core::isa::{decode, encode, Instruction, Word};

use crate::limits::check_memory;

/// A path as messages show it.
pub fn show(p: &Path) -> String {
    p.display().to_string()
}

/// Reads a program file: whole 16-byte words, each one that decodes, no more of them than
/// [`crate::limits::MEMORY_LIMIT`] holds decoded. A regular file's length is checked before it
/// is read; any other file (a pipe, `/dev/zero`) is decoded word by word as it is read.
pub fn read_program(path: &Path) -> anyhow::Result<Vec<Instruction>> {
    let ragged = |len: u64| {
        anyhow!("{}: {len} bytes is not a whole number of 16-byte instruction words", show(path))
    };
    let memory = |words: u64| {
        let bytes = words.saturating_mul(size_of::<Instruction>() as u64);
        check_memory(format_args!("{}: a program of {words} words", show(path)), bytes)
    };
    let file = std::fs::File::open(path).with_context(|| show(path))?;
    let metadata = file.metadata().with_context(|| show(path))?;
    if metadata.is_file() {
        if metadata.len() == 0 || metadata.len() % 16 != 0 {
            return Err(ragged(metadata.len()));
        }
        memory(metadata.len() / 16)?;
    }
    let mut reader = std::io::BufReader::new(file);
    let mut program = Vec::new();
    loop {
        let mut word = [0u8; 16];
        let got = read_word(&mut reader, &mut word).with_context(|| show(path))?;
        let i = program.len();
        if got < 16 {
            if got > 0 || i == 0 {
                return Err(ragged(i as u64 * 16 + got as u64));
            }
            return Ok(program);
        }
        memory(i as u64 + 1)?;
        program.push(
            decode(Word::from_le_bytes(word))
                .map_err(|e| anyhow!("{}: word {i} (byte {}): {e}", show(path), i * 16))?,
        );
    }
}

/// Fills `word` from `reader`; fewer bytes than its length only at the end of the file.
fn read_word(reader: &mut impl std::io::Read, word: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < word.len() {
        match reader.read(&mut word[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Writes `program` as a program file.
pub fn write_program(out: &mut dyn Write, program: &[Instruction]) -> std::io::Result<()> {
    for (i, ins) in program.iter().enumerate() {
        let word = encode(ins).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("instruction {i}: {e}"))
        })?;
        out.write_all(&word.0.to_le_bytes())?;
    }
    Ok(())
}
