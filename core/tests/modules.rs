//! Core's module graph has no circles: a module's `crate::` imports (doc links aside) never lead
//! back to it. The shared vocabulary lives in `fault`, which imports nothing of core.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `crate::x` paths in code, not in comments: each module's direct imports.
fn imports(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// Top-level module name -> the top-level modules its files import.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut visit = |module: String, path: &Path| {
        let text = std::fs::read_to_string(path).expect("core source is readable");
        graph.entry(module).or_default().extend(imports(&text));
    };
    for entry in std::fs::read_dir(&src).expect("core/src") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut folders = vec![path];
            while let Some(folder) = folders.pop() {
                for file in std::fs::read_dir(&folder).expect("module folder") {
                    let file = file.expect("entry").path();
                    if file.is_dir() {
                        folders.push(file);
                    } else {
                        visit(name.clone(), &file);
                    }
                }
            }
        } else if name != "lib" {
            visit(name, &path);
        }
    }
    for (module, deps) in graph.iter_mut() {
        deps.remove(module);
    }
    graph
}

/// A circle through `start`, if any, as the modules along it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                return Some([path.clone(), vec![next.clone()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

#[test]
fn core_modules_import_each_other_in_no_circle() {
    let graph = graph();
    for module in ["machine", "link", "timing", "tiler", "protocol", "fault", "isa", "config"] {
        assert!(graph.contains_key(module), "module {module} not found in core/src");
    }
    assert!(graph["fault"].is_empty(), "fault must be a leaf: it imports {:?}", graph["fault"]);
    for module in graph.keys() {
        if let Some(path) = circle(&graph, module) {
            panic!("core's modules import in a circle: {}", path.join(" -> "));
        }
    }
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(circle(&graph, "a"), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    assert_eq!(
        imports("use crate::x::Y; // crate::z\n/// [`crate::w`]"),
        BTreeSet::from(["x".into()])
    );
}
