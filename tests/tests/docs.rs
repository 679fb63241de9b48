//! Every figure README.md and docs/ quote from a command is what the command prints today.
//!
//! A figure is a fenced block whose info string is `console`: each `$ systole ...` line in it is
//! a command, and the lines after it, up to the next `$` line, are what it prints. The test runs
//! each command with the debug `systole` (the commands of one block in one scratch directory, in
//! order, so a later one may read what an earlier one wrote) and compares the lines exactly; a
//! command may end in a pipeline of `grep [-v] PATTERN` (fixed strings, `\|` between
//! alternatives), `head -n N` and `tail -n N`, run here as a shell would. A line `done in ...`
//! (a run's wall clock) matches any such line.
//!
//! Figures too slow for CI or made on other machines (a GPU, the FPGA tools over hours) quote a
//! committed file instead: `console from=PATH` takes the command's output from PATH (its first
//! line the command, `$ systole ...`), and `scripts/figures` runs those commands again to
//! refresh the files.
//!
//! `SYSTOLE_BLESS=1` rewrites every stale block with what its command prints (`scripts/figures`
//! does, after building): the docs then hold the binary's figures, and `git diff` shows what
//! changed.

use std::path::{Path, PathBuf};

use systole_tests::{systole_binary, Scratch};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// One command of a figure and the lines quoted after it (`lines` indexes the document).
#[derive(Debug)]
struct Quote {
    command: String,
    lines: std::ops::Range<usize>,
}

/// A `console` block: its commands, the file its output comes from, if any, and the indent of
/// its lines (a block inside a list item).
#[derive(Debug)]
struct Figure {
    from: Option<String>,
    quotes: Vec<Quote>,
    indent: usize,
}

/// The figures of a Markdown document, given as its lines.
fn figures(doc: &[&str]) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < doc.len() {
        let indent = doc[i].len() - doc[i].trim_start().len();
        let Some(info) = doc[i].trim_start().strip_prefix("```console") else {
            i += 1;
            continue;
        };
        let from = info.trim().strip_prefix("from=").map(str::to_string);
        let mut quotes: Vec<Quote> = Vec::new();
        i += 1;
        while i < doc.len() && doc[i].trim_start() != "```" {
            if let Some(command) = unindent(doc[i], indent).strip_prefix("$ ") {
                quotes.push(Quote { command: command.to_string(), lines: i + 1..i + 1 });
            } else if let Some(q) = quotes.last_mut() {
                q.lines.end = i + 1;
            }
            i += 1;
        }
        out.push(Figure { from, quotes, indent });
        i += 1;
    }
    out
}

/// `line` without the block's indent (a blank line has none).
fn unindent(line: &str, indent: usize) -> &str {
    line.get(indent..).filter(|_| line[..indent].trim().is_empty()).unwrap_or(line.trim_start())
}

/// Splits a command line into words: spaces separate, single and double quotes group.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (None, ' ') => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// A pipeline stage after the command.
fn filter(lines: Vec<String>, stage: &[String]) -> Result<Vec<String>, String> {
    let count = |n: &str| n.parse::<usize>().map_err(|_| format!("not a line count: {n}"));
    match stage.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["grep", pattern] | ["grep", "-v", pattern] => {
            let keep = stage[1] != "-v";
            let any: Vec<&str> = pattern.split("\\|").collect();
            Ok(lines.into_iter().filter(|l| any.iter().any(|p| l.contains(p)) == keep).collect())
        }
        ["head", "-n", n] => Ok(lines.into_iter().take(count(n)?).collect()),
        ["tail", "-n", n] => {
            let n = count(n)?;
            Ok(lines.into_iter().rev().take(n).collect::<Vec<_>>().into_iter().rev().collect())
        }
        _ => Err(format!("a stage this test does not run: {}", stage.join(" "))),
    }
}

/// The command part of a quote (before the first `|`) and its stages.
fn pipeline(command: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut stages = command.split(" | ").map(words);
    let first = stages.next().unwrap_or_default();
    (first, stages.collect())
}

/// What `command` prints through its pipeline, run in `dir` (or read from `from`).
fn output(command: &str, dir: &Path, from: Option<&str>) -> Result<Vec<String>, String> {
    let (argv, stages) = pipeline(command);
    let text = match from {
        Some(file) => {
            let path = root().join(file);
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
            let (recorded, _) = pipeline(first.strip_prefix("$ ").unwrap_or(first));
            if recorded != argv {
                return Err(format!("{file} records `{first}`, not `$ {}`", argv.join(" ")));
            }
            rest.to_string()
        }
        None => {
            let Some(("systole", args)) = argv.split_first().map(|(p, a)| (p.as_str(), a)) else {
                return Err(format!("not a systole command: {command}"));
            };
            let out = std::process::Command::new(systole_binary())
                .args(args)
                .current_dir(dir)
                .output()
                .map_err(|e| format!("spawn: {e}"))?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                return Err(format!("`{command}` failed ({}): {err}", out.status));
            }
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for stage in &stages {
        lines = filter(lines, stage)?;
    }
    Ok(lines)
}

/// Whether a quoted line is the line a command printed: equal once the wall clocks in both are
/// masked.
fn same(quoted: &str, printed: &str) -> bool {
    mask(quoted) == mask(printed)
}

/// `line` with its wall-clock figures replaced by `#`: the number of `done in 3.8 s`, and of
/// `in 0.036 s (957452 cycles/s)`, the speed a simulator ran at.
fn mask(line: &str) -> String {
    let words: Vec<&str> = line.split(' ').collect();
    let number = |w: &str| w.trim_start_matches('(').parse::<f64>().is_ok();
    let masked: Vec<&str> = (0..words.len())
        .map(|i| {
            let after_in = i > 0 && words[i - 1] == "in" && words.get(i + 1) == Some(&"s");
            let speed = words.get(i + 1).is_some_and(|n| n.starts_with("cycles/s"));
            if number(words[i]) && (after_in || speed) {
                "#"
            } else {
                words[i]
            }
        })
        .collect();
    masked.join(" ")
}

/// The scratch directory a block's commands run in: the repository's `data/`, `docs/` and
/// `bench/` are there (`--dataset data/digits.csv`, `--model docs/examples/conv.json`,
/// `bench --show bench/results/...`), and the `A.npy` and
/// `B.npy` docs/COMMANDS.md makes with NumPy for its GEMM example.
fn scratch() -> Scratch {
    let s = Scratch::new();
    for dir in ["data", "docs", "bench"] {
        std::os::unix::fs::symlink(root().join(dir), s.path(dir)).unwrap();
    }
    let matrix = |rows: usize, cols: usize, step: i64| -> Vec<i8> {
        (0..(rows * cols) as i64).map(|i| ((i * step) % 256 - 128) as i8).collect()
    };
    write_npy(&s.path("A.npy"), &[200, 300], &matrix(200, 300, 7));
    write_npy(&s.path("B.npy"), &[300, 100], &matrix(300, 100, 13));
    s
}

/// An int8 `.npy` of `shape`, as `np.save` writes it.
fn write_npy(path: &Path, shape: &[u64], data: &[i8]) {
    use npyz::WriterBuilder;
    let file = std::fs::File::create(path).unwrap();
    let options = npyz::WriteOptions::<i8>::new().default_dtype().shape(shape).writer(file);
    let mut writer = options.begin_nd().unwrap();
    writer.extend(data.iter().copied()).unwrap();
    writer.finish().unwrap();
}

/// Checks every figure of `file` (relative to the root); with `SYSTOLE_BLESS` set, rewrites the
/// stale ones. Panics naming each stale quote.
fn check(file: &str) {
    let path = root().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let doc: Vec<&str> = text.lines().collect();
    let bless = std::env::var_os("SYSTOLE_BLESS").is_some();
    let mut stale = Vec::new();
    // Replacements, by the document's line ranges, applied back to front.
    let mut fresh: Vec<(std::ops::Range<usize>, Vec<String>)> = Vec::new();
    for figure in figures(&doc) {
        let scratch = scratch();
        for q in &figure.quotes {
            let quoted: Vec<&str> =
                doc[q.lines.clone()].iter().map(|l| unindent(l, figure.indent)).collect();
            let printed = match output(&q.command, &scratch.path(""), figure.from.as_deref()) {
                Ok(lines) => lines,
                Err(e) => {
                    stale.push(format!("{file}:{}: {e}", q.lines.start));
                    continue;
                }
            };
            let agree = quoted.len() == printed.len()
                && quoted.iter().zip(&printed).all(|(a, b)| same(a, b));
            if !agree {
                let first = quoted.iter().zip(&printed).position(|(a, b)| !same(a, b));
                let at = first.unwrap_or(quoted.len().min(printed.len()));
                stale.push(format!(
                    "{file}:{}: `$ {}` quotes {:?}, prints {:?}",
                    q.lines.start + at + 1,
                    q.command,
                    quoted.get(at),
                    printed.get(at)
                ));
                let pad = " ".repeat(figure.indent);
                let lines = printed.iter().map(|l| format!("{pad}{l}").trim_end().to_string());
                fresh.push((q.lines.clone(), lines.collect()));
            }
        }
    }
    if bless && !fresh.is_empty() {
        let mut lines: Vec<String> = doc.iter().map(|l| l.to_string()).collect();
        for (range, printed) in fresh.into_iter().rev() {
            lines.splice(range, printed);
        }
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        println!("{file}: rewrote {} stale quotes", stale.len());
        return;
    }
    assert!(
        stale.is_empty(),
        "{} stale figures (SYSTOLE_BLESS=1 rewrites them; scripts/figures runs the slow ones):\n{}",
        stale.len(),
        stale.join("\n")
    );
}

/// The documents whose figures are checked: README.md and every file in docs/.
fn documents() -> Vec<String> {
    let mut out = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

#[test]
fn readme_figures_are_what_the_commands_print() {
    check("README.md");
}

#[test]
fn perf_figures_are_what_the_commands_print() {
    check("docs/PERF.md");
}

#[test]
fn every_other_docs_figure_is_what_its_command_prints() {
    for doc in documents().iter().filter(|d| !["README.md", "docs/PERF.md"].contains(&d.as_str())) {
        check(doc);
    }
}

/// The checker itself: a stale quote is caught, a fresh one passes, filters run as a shell's.
#[test]
fn the_figure_checker_catches_a_stale_quote() {
    let doc = ["text", "```console", "$ systole --version | head -n 1", "systole 0.0.0", "```"];
    let figs = figures(&doc);
    assert_eq!(figs.len(), 1);
    assert_eq!(figs[0].quotes[0].lines, 3..4);
    let scratch = scratch();
    let printed = output(&figs[0].quotes[0].command, &scratch.path(""), None).unwrap();
    assert_eq!(printed.len(), 1);
    assert!(printed[0].starts_with("systole "), "{printed:?}");
    assert_ne!(printed[0], doc[3], "a made-up version is stale");
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let grep = |args: &[&str]| filter(lines(&["a 1", "b 2", "c 3"]), &lines(args)).unwrap();
    assert_eq!(grep(&["grep", "a\\|c"]), ["a 1", "c 3"]);
    assert_eq!(grep(&["grep", "-v", "b"]), ["a 1", "c 3"]);
    assert_eq!(grep(&["tail", "-n", "1"]), ["c 3"]);
    assert_eq!(words("grep 'a b' \"c\" ''"), ["grep", "a b", "c", ""]);
    assert!(same("done in 0.9 s", "done in 3.8 s"));
    assert!(same(
        "rtl: 4 cycles in 0.036 s (957452 cycles/s)",
        "rtl: 4 cycles in 1.5 s (12 cycles/s)"
    ));
    assert!(!same("rtl: 4 cycles in 0.036 s", "rtl: 5 cycles in 0.036 s"));
    assert!(!same("97.70%", "97.71%"));
    let indented = ["- item", "  ```console", "  $ systole --version", "  x", "  ```"];
    let figs = figures(&indented);
    assert_eq!((figs[0].indent, figs[0].quotes[0].lines.clone()), (2, 3..4));
}
