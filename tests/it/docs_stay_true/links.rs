//! Links and paths in the docs: every relative link resolves to a file in
//! the repository (and its `#anchor` to a heading of that file), and every
//! repository path named in inline code exists.

use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::Report;
use super::markdown::{self, Doc};

/// Checks every link of `files` (Markdown files under `root`).
pub fn check_links(root: &Path, files: &[PathBuf]) -> Report {
    let mut report = Report::default();
    let mut anchors = HashMap::new();
    for file in files {
        let doc = read_doc(file);
        for link in &doc.links {
            report.checked += 1;
            if let Err(why) = check_link(root, file, &link.text, &mut anchors) {
                report.problems.push(format!(
                    "{}:{}: ({}) {why}",
                    shown(root, file),
                    link.line,
                    link.text
                ));
            }
        }
    }
    report
}

fn check_link(
    root: &Path,
    file: &Path,
    dest: &str,
    anchors: &mut HashMap<PathBuf, std::collections::HashSet<String>>,
) -> Result<(), String> {
    if has_scheme(dest) {
        return Ok(()); // https:, mailto: …: not this repository's to check
    }
    let (path, fragment) = dest.split_once('#').unwrap_or((dest, ""));
    let target = if path.is_empty() {
        file.to_path_buf()
    } else {
        normalize(&file.parent().unwrap_or(root).join(path))
    };
    if !target.starts_with(root) {
        return Err("points outside the repository".into());
    }
    if !target.exists() {
        return Err(format!("no such file: {}", shown(root, &target)));
    }
    let is_markdown = target.extension().is_some_and(|e| e == "md");
    if fragment.is_empty() || !is_markdown {
        return Ok(());
    }
    let known = anchors
        .entry(target.clone())
        .or_insert_with(|| markdown::anchors(&read_doc(&target)));
    match known.contains(fragment) {
        true => Ok(()),
        false => Err(format!(
            "no heading #{fragment} in {}",
            shown(root, &target)
        )),
    }
}

/// Checks that every inline code span of `files` that names a path in the
/// repository (its first part is a top-level directory, such as
/// `src/queue.rs` or `tests/it/common/`) names one that exists, and that none
/// names a path above the repository (`../…`).
pub fn check_code_paths(root: &Path, files: &[PathBuf]) -> Report {
    let top = top_level_dirs(root);
    let mut report = Report::default();
    for file in files {
        for span in read_doc(file).code_spans {
            let text = span.text.trim();
            let problem = if text.starts_with("../") {
                Some("names a path outside the repository")
            } else if names_repo_path(text, &top) {
                report.checked += 1;
                (!root.join(text).exists()).then_some("no such path in the repository")
            } else {
                None
            };
            if let Some(problem) = problem {
                report.problems.push(format!(
                    "{}:{}: `{text}` {problem}",
                    shown(root, file),
                    span.line
                ));
            }
        }
    }
    report
}

fn names_repo_path(text: &str, top: &[String]) -> bool {
    let path_chars = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
    let first = text.split('/').next().unwrap_or("");
    path_chars && text.contains('/') && !text.contains("..") && top.iter().any(|d| d == first)
}

fn top_level_dirs(root: &Path) -> Vec<String> {
    let entries = fs::read_dir(root).expect("read the repository root");
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != ".git" && name != "target")
        .collect()
}

pub fn read_doc(file: &Path) -> Doc {
    let source =
        fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    markdown::parse(&source)
}

fn has_scheme(dest: &str) -> bool {
    let scheme = dest.split(':').next().unwrap_or("");
    dest.contains(':') && !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic())
}

/// `a/./b/../c` as `a/c`, without touching the file system (the target
/// may not exist, and symlinks are not in play in a repository's docs).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

pub fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}
