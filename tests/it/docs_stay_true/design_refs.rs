//! Citations of the design in the code: every "docs/design.md §n" in
//! `src/`, `tests/` and `config/` names a numbered section of
//! docs/design.md, and nothing cites the design brief that used to live
//! outside the repository (as "DESIGN" and a section sign).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::Report;
use super::links::{read_doc, shown};

/// How the code cites a section: this, then the section number.
const CITATION: &str = "design.md §";
/// How the code cited the brief outside the repository (split so this
/// file does not cite it).
const OLD_CITATIONS: [&str; 2] = [concat!("DESIGN", " §"), concat!("DESIGN", " section")];
/// Where citations are looked for, and in which files.
const CITING_DIRS: [&str; 3] = ["src", "tests", "config"];
const CITING_EXTENSIONS: [&str; 2] = ["rs", "toml"];
/// Deepest directory nesting searched (a bound, far past the tree's).
const DEPTH_MAX: usize = 16;

/// Checks every citation under `root` against `root/docs/design.md`.
pub fn check(root: &Path) -> Report {
    let sections = sections(&root.join("docs/design.md"));
    let mut report = Report::default();
    for file in citing_files(root) {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let place = format!("{}:{}", shown(root, &file), n + 1);
            if OLD_CITATIONS.iter().any(|old| line.contains(old)) {
                report.problems.push(format!(
                    "{place}: cites the old design brief; cite docs/design.md §n"
                ));
            }
            for section in cited_sections(line) {
                report.checked += 1;
                if !sections.contains(&section) {
                    report
                        .problems
                        .push(format!("{place}: docs/design.md has no §{section}"));
                }
            }
        }
    }
    report
}

/// The numbers of docs/design.md's numbered headings: `## 4. The staging
/// protocol` is "4", `### 4.2 The second level` is "4.2".
fn sections(design: &Path) -> HashSet<String> {
    let doc = read_doc(design);
    doc.headings
        .iter()
        .filter_map(|h| h.split_whitespace().next())
        .map(|first| first.trim_end_matches('.').to_string())
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.'))
        .collect()
}

/// The section numbers a line cites, such as "4" and "4.2".
fn cited_sections(line: &str) -> Vec<String> {
    line.match_indices(CITATION)
        .map(|(at, _)| {
            let rest = &line[at + CITATION.len()..];
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            number.trim_end_matches('.').to_string()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

fn citing_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs: Vec<(PathBuf, usize)> = CITING_DIRS.iter().map(|d| (root.join(d), 0)).collect();
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
            if path.is_dir() && depth < DEPTH_MAX {
                dirs.push((path, depth + 1));
            } else if path
                .extension()
                .is_some_and(|e| CITING_EXTENSIONS.iter().any(|x| e == *x))
            {
                out.push(path);
            }
        }
    }
    out
}

#[test]
fn citations_are_read_with_their_section_number() {
    let line = concat!("see docs/design.md ", "§4.2, and docs/design.md ", "§7.");
    assert_eq!(cited_sections(line), vec!["4.2", "7"]);
    assert!(cited_sections("docs/design.md, the whole page").is_empty());
}
