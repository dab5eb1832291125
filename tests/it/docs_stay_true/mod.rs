//! The docs stay true: every relative link in the repository's Markdown
//! resolves to a file in it (and an `#anchor` to a heading of that file);
//! every repository path README.md and docs/ name in code exists; every
//! `hotq <subcommand> --flag` they show exists in the built binary (its
//! own `--help` says so); every "docs/design.md §n" the code cites is a
//! section there. Each check also runs over a small tree with deliberate
//! breaks and must report exactly those, so none can pass by checking
//! nothing. (`cargo doc` with broken intra-doc links denied is the fifth
//! check; it runs in `.ci/run`.)

mod commands;
mod design_refs;
mod links;
mod markdown;
mod resp_commands;

use std::fs;
use std::path::{Path, PathBuf};

/// What one check looked at and what it found wrong.
#[derive(Debug, Default)]
pub struct Report {
    pub checked: usize,
    pub problems: Vec<String>,
}

impl Report {
    /// Fails with every problem, or when fewer than `at_least` things
    /// were checked (a check that finds nothing to check is broken).
    fn assert_clean(&self, what: &str, at_least: usize) {
        println!(
            "{what}: {} checked, {} problems",
            self.checked,
            self.problems.len()
        );
        assert!(
            self.problems.is_empty(),
            "{what} that are wrong:\n{}",
            self.problems.join("\n")
        );
        assert!(
            self.checked >= at_least,
            "{what}: only {} checked, expected at least {at_least}",
            self.checked
        );
    }
}

/// Directory names never searched for docs.
const SKIPPED_DIRS: [&str; 4] = ["target", "node_modules", "__pycache__", "venv"];
/// Deepest directory nesting searched (a bound, far past the tree's).
const DEPTH_MAX: usize = 16;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file under `dir` (hidden and build directories skipped).
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![(dir.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            let (path, name) = (
                entry.path(),
                entry.file_name().to_string_lossy().into_owned(),
            );
            if path.is_dir()
                && depth < DEPTH_MAX
                && !name.starts_with('.')
                && !SKIPPED_DIRS.contains(&name.as_str())
            {
                dirs.push((path, depth + 1));
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// README.md and docs/: the pages whose code names repository paths and
/// `hotq` commands (other READMEs name paths relative to themselves).
fn front_docs(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    files.extend(markdown_under(&root.join("docs")));
    files
}

fn hotq_help() -> commands::Help {
    commands::Help::new(Path::new(env!("CARGO_BIN_EXE_hotq")))
}

/// Writes `files` (path, content) under a fresh temporary directory.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    dir
}

/// Asserts `report` found exactly one problem containing each of `expected`.
fn assert_reports(report: &Report, expected: &[&str]) {
    assert_eq!(
        report.problems.len(),
        expected.len(),
        "{:#?}",
        report.problems
    );
    for needle in expected {
        let found = report
            .problems
            .iter()
            .filter(|p| p.contains(needle))
            .count();
        assert_eq!(found, 1, "{needle:?} in {:#?}", report.problems);
    }
}

#[test]
fn every_relative_link_in_the_docs_resolves_to_a_file_and_a_heading() {
    let root = repo();
    links::check_links(&root, &markdown_under(&root)).assert_clean("links", 30);
}

#[test]
fn every_repository_path_the_docs_name_exists() {
    let root = repo();
    links::check_code_paths(&root, &front_docs(&root)).assert_clean("paths named in code", 20);
}

#[test]
fn every_hotq_subcommand_and_flag_the_docs_show_exists() {
    let root = repo();
    let shown = commands::shown_commands(&root, &front_docs(&root));
    commands::check(&mut hotq_help(), &shown).assert_clean("hotq command lines", 10);
}

#[test]
fn docs_resp_md_names_every_resp_command_served_and_no_other() {
    let page = fs::read_to_string(repo().join("docs/resp.md")).unwrap();
    resp_commands::check(&page, &resp_commands::served()).assert_clean("RESP commands", 40);
}

#[test]
fn a_resp_command_not_documented_and_one_documented_not_served_are_reported() {
    let page = "| command | answers |\n|---|---|\n| `PUSH queue item` | integer |\n\
        | `PQ PUSH queue priority item` | integer |\n| `FROB queue` | nothing |\n\
        | `resp_listen = \"\"` | off |\n";
    let served = ["push", "pop", "pq|push"].map(String::from).into();
    let report = resp_commands::check(page, &served);
    assert_eq!(report.checked, 3);
    assert_reports(
        &report,
        &[
            "`pop` is served but",
            "`frob` is in docs/resp.md but not served",
        ],
    );
}

#[test]
fn every_design_section_the_code_cites_exists() {
    design_refs::check(&repo()).assert_clean("design citations", 5);
}

#[test]
fn a_missing_file_a_missing_heading_and_a_link_out_of_the_repository_are_reported() {
    let readme = "# Top\n\n## A heading\n\n\
        [ok](docs/a.md) [ok](docs/a.md#section-one) [ok](#a-heading) [web](https://example.com)\n\
        [gone](docs/missing.md) [bad anchor](docs/a.md#no-such) [out](../elsewhere.md)\n\n\
        ```sh\n[not a link](nowhere.md)\n```\n";
    let dir = tree(&[("README.md", readme), ("docs/a.md", "# Section one\n")]);
    let files = markdown_under(dir.path());
    let report = links::check_links(dir.path(), &files);
    assert_eq!(report.checked, 7);
    assert_reports(
        &report,
        &[
            "no such file: docs/missing.md",
            "no heading #no-such in docs/a.md",
            "outside the repository",
        ],
    );
}

#[test]
fn a_missing_path_and_a_path_above_the_repository_named_in_code_are_reported() {
    let readme = "`src/here.rs` `docs/` `src/gone.rs` `../shared/brief.md` `not/a/top/dir`\n";
    let dir = tree(&[
        ("README.md", readme),
        ("src/here.rs", ""),
        ("docs/a.md", ""),
    ]);
    let report = links::check_code_paths(dir.path(), &front_docs(dir.path()));
    assert_eq!(report.checked, 3);
    assert_reports(
        &report,
        &[
            "`src/gone.rs` no such path",
            "`../shared/brief.md` names a path outside",
        ],
    );
}

#[test]
fn an_unknown_subcommand_and_an_unknown_flag_are_reported() {
    let readme = "Run `hotq push jobs --delay-ms 5 x`.\n\n```sh\n\
        $ hotq pop jobs --wait-ms 5 --max=2\n\
        $ hotq pq pop tasks --end min\n\
        $ hotq pop jobs --no-such-flag\n\
        $ hotq frobnicate jobs\n\
        $ hotq pq frob tasks\n```\n";
    let dir = tree(&[("README.md", readme)]);
    let shown = commands::shown_commands(dir.path(), &front_docs(dir.path()));
    let report = commands::check(&mut hotq_help(), &shown);
    assert_eq!(report.checked, 6);
    assert_reports(
        &report,
        &[
            "no flag `--no-such-flag`",
            "no subcommand `frobnicate`",
            "no subcommand `frob`",
        ],
    );
}

#[test]
fn a_citation_of_a_missing_section_or_of_the_old_brief_is_reported() {
    // Split so that this file itself cites nothing.
    let code = concat!(
        "//! See docs/design.md ",
        "§4 and docs/design.md ",
        "§4.2.\n",
        "//! As docs/design.md ",
        "§9 says.\n",
        "//! As DES",
        "IGN §4 says.\n"
    );
    let design = "# Design\n\n## 4. The staging protocol\n\n### 4.2 The second level\n";
    let dir = tree(&[("docs/design.md", design), ("src/a.rs", code)]);
    let report = design_refs::check(dir.path());
    assert_eq!(report.checked, 3);
    assert_reports(
        &report,
        &[
            "src/a.rs:2: docs/design.md has no §9",
            "src/a.rs:3: cites the old design brief",
        ],
    );
}
