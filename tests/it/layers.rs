//! The layers of `src/` run one way (issue #36): no import circle between
//! files, and the leaves (`keys`, `envelope`, `metrics`, `config`) import
//! nothing of the crate above them. Read from the source's own
//! `crate::…` paths, no external tool.
//!
//! What counts as an import: every `crate::a::b…` or `super::b…` path in
//! a file's code (a `use` line, grouped `use crate::{a, b::c}` included,
//! or a path written inline), resolved to the file that defines the
//! longest module prefix (a `super::` path from its module's parent). A
//! parent's `mod child;` is no import; its `pub use child::X` is.
//! A file's test module (`#[cfg(test)] mod …` and what follows it) is left
//! out, and so are `tests.rs` files (tests may reach anywhere).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The leaves, by top module: they may import each other, nothing else.
const LEAVES: &[&str] = &["keys", "envelope", "metrics", "config"];

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` or `src/a/b/mod.rs` → `a::b`; `src/lib.rs` → ``.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|part| part != "mod" && part != "lib")
        .collect();
    parts.join("::")
}

/// The code of `text` before its test module (`#[cfg(test)] mod …`),
/// without comments.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
    body.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module paths named after `crate::` in `code`, braces expanded, and
/// after `super::` as seen from module `module` (`a::b`: `super::` is `a`).
fn crate_paths(code: &str, module: &str) -> Vec<String> {
    let parent = module.rsplit_once("::").map_or("", |(parent, _)| parent);
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        // `pub(crate)`-less `crate::` only: `$crate::` is a macro's.
        let starts_path =
            at == 0 || !rest[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$');
        rest = &rest[at + "crate::".len()..];
        if starts_path {
            paths.extend(expand("", rest));
        }
    }
    let mut rest = code;
    while let Some(at) = rest.find("super::") {
        let starts_path =
            at == 0 || !rest[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':');
        rest = &rest[at + "super::".len()..];
        if starts_path {
            let prefix = if parent.is_empty() {
                String::new()
            } else {
                format!("{parent}::")
            };
            paths.extend(expand(&prefix, rest));
        }
    }
    paths
}

/// Paths starting at `text` (after `prefix`): `a::b::{c, d::e}` gives
/// `a::b::c` and `a::b::d::e`.
fn expand(prefix: &str, text: &str) -> Vec<String> {
    let ident_end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    let head = format!("{prefix}{}", &text[..ident_end]);
    if !text[ident_end..].starts_with('{') || !head.ends_with("::") {
        return vec![head.trim_end_matches("::").to_string()];
    }
    let inner = &text[ident_end + 1..];
    let mut depth = 0;
    let mut start = 0;
    let mut out = Vec::new();
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.extend(expand(&head, inner[start..i].trim_start()));
                return out;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(expand(&head, inner[start..i].trim_start()));
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// The file-level import graph of `src/`: file → files it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeMap<String, String> = files
        .iter()
        .map(|f| {
            (
                module_of(&src, f),
                f.strip_prefix(&src).unwrap().display().to_string(),
            )
        })
        .collect();
    let mut edges = BTreeMap::new();
    for file in &files {
        let name = file.strip_prefix(&src).unwrap().display().to_string();
        if name.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let mut targets = BTreeSet::new();
        for path in crate_paths(&code(&text), &module_of(&src, file)) {
            let mut parts: Vec<&str> = path.split("::").collect();
            while !parts.is_empty() {
                if let Some(target) = modules.get(&parts.join("::")) {
                    if *target != name {
                        targets.insert(target.clone());
                    }
                    break;
                }
                parts.pop();
            }
        }
        edges.insert(name, targets);
    }
    edges
}

/// Every file on some circle, as the circles (strongly connected
/// components of more than one file).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(file) = todo.pop() {
            for next in graph.get(&file).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|file| (file, reach(file))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for file in graph.keys() {
        if placed.contains(file) || !reaches[file].contains(file) {
            continue;
        }
        let circle: Vec<String> = reaches[file]
            .iter()
            .filter(|other| reaches[other].contains(file))
            .cloned()
            .collect();
        placed.extend(circle.iter().cloned());
        out.push(circle);
    }
    out
}

fn top(file: &str) -> &str {
    file.split(['/', '.']).next().unwrap_or_default()
}

#[test]
fn no_file_imports_another_that_imports_it_back() {
    let circles = circles(&graph());
    assert!(
        circles.is_empty(),
        "import circles in src/ (files importing each other through crate:: paths):\n{circles:#?}"
    );
}

#[test]
fn leaves_import_only_leaves() {
    let mut upward = Vec::new();
    for (file, targets) in graph() {
        if !LEAVES.contains(&top(&file)) {
            continue;
        }
        for target in targets.iter().filter(|t| !LEAVES.contains(&top(t))) {
            upward.push(format!("{file} -> {target}"));
        }
    }
    assert!(upward.is_empty(), "leaves importing upward:\n{upward:#?}");
}

#[test]
fn the_check_sees_grouped_and_inline_paths() {
    let paths = crate_paths(
        "use crate::a::{b, c::{d, e}};\nlet x = crate::f::g(1);\nuse super::h::I;",
        "m::n",
    );
    assert_eq!(paths, ["a::b", "a::c::d", "a::c::e", "f::g", "m::h::I"]);
    let graph = BTreeMap::from([
        ("a.rs".to_string(), BTreeSet::from(["b.rs".to_string()])),
        ("b.rs".to_string(), BTreeSet::from(["a.rs".to_string()])),
        ("c.rs".to_string(), BTreeSet::from(["a.rs".to_string()])),
    ]);
    assert_eq!(circles(&graph), [["a.rs", "b.rs"]]);
}

/// The front ends: they parse, call the core ([`hotq::Hotq`], `src/service`)
/// and render (issue #36).
const FRONT_ENDS: &[&str] = &["server", "sqs", "console", "resp"];
/// The layers below the core, which no front end reaches into.
const BELOW_THE_CORE: &[&str] = &["coordinator", "staging", "lease", "due", "queue", "store"];

#[test]
fn front_ends_reach_nothing_below_the_core() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut below = Vec::new();
    for (file, targets) in graph() {
        if !FRONT_ENDS.contains(&top(&file)) {
            continue;
        }
        for target in targets.iter().filter(|t| BELOW_THE_CORE.contains(&top(t))) {
            below.push(format!("{file} imports {target}"));
        }
        // The core's store and coordinator are its own: a front end
        // holding them could open a transaction without importing a thing.
        let text = std::fs::read_to_string(src.join(&file)).expect("a source file");
        // A method chain split over lines (`state\n.hotq\n.store`) is read
        // as one.
        let chained = code(&text)
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join("\n")
            .replace("\n.", ".");
        for line in chained.lines() {
            if reaches(line, "hotq.store") || reaches(line, "hotq.coordinator") {
                below.push(format!("{file} uses the core's own: {line}"));
            }
        }
    }
    assert!(
        below.is_empty(),
        "front ends reaching below the core:\n{below:#?}"
    );
}

/// True when `line` names the field `field` (`hotq.store`, not
/// `hotq.store_failure()`).
fn reaches(line: &str, field: &str) -> bool {
    line.match_indices(field).any(|(at, _)| {
        let next = line[at + field.len()..].chars().next();
        !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}
