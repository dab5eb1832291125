//! `hotq` command lines in the docs: every subcommand and flag they show
//! exists, as the built binary's own `--help` says.
//!
//! A command line is found where a shell would run `hotq`: the first word
//! of a command (after a `$` prompt and `NAME=value` assignments; any path
//! to the binary, `ExecStart=` included), in a shell-like fence or an
//! inline code span. Subcommands are resolved against the `Commands:` list
//! of each level's help (so `hotq pq pop` is two levels, `hotq pop jobs`
//! one), and each flag after them must appear in the last level's help.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Report;
use super::links::{read_doc, shown};

/// One `hotq …` command line the docs show.
#[derive(Debug)]
pub struct Shown {
    /// The words after `hotq`, to the end of the command.
    pub words: Vec<String>,
    /// `file:line`, for the report.
    pub place: String,
}

/// Every `hotq` command line of `files`.
pub fn shown_commands(root: &Path, files: &[PathBuf]) -> Vec<Shown> {
    let mut out = Vec::new();
    for file in files {
        let doc = read_doc(file);
        let spans = doc.code_spans.iter().map(|s| (s.text.clone(), s.line));
        let block_lines = doc.shell_blocks.iter().flat_map(|block| {
            logical_lines(&block.text)
                .into_iter()
                .map(move |(text, n)| (text, block.line + n))
        });
        for (text, line) in spans.chain(block_lines) {
            for words in hotq_commands(&text) {
                out.push(Shown {
                    words,
                    place: format!("{}:{line}", shown(root, file)),
                });
            }
        }
    }
    out
}

/// Lines with `\` continuations joined and `#` comments cut, each with its
/// first line's index in the block.
fn logical_lines(block: &str) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    let mut continued = false;
    for (n, raw) in block.lines().enumerate() {
        let line = without_comment(raw);
        let (line, continues) = match line.trim_end().strip_suffix('\\') {
            Some(head) => (head.to_string(), true),
            None => (line, false),
        };
        match (continued, out.last_mut()) {
            (true, Some(last)) => last.0.push_str(&line),
            _ => out.push((line, n)),
        }
        continued = continues;
    }
    out
}

/// The line up to a `#` that starts a word outside quotes.
fn without_comment(line: &str) -> String {
    let mut quote = None;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if previous.is_whitespace() => return line[..i].to_string(),
            _ => {}
        }
        previous = c;
    }
    line.to_string()
}

/// The words after `hotq` of each command in `line` that runs it.
fn hotq_commands(line: &str) -> Vec<Vec<String>> {
    let separated = line
        .replace("&&", ";")
        .replace("||", ";")
        .replace("$(", ";");
    let mut out = Vec::new();
    for command in separated.split([';', '|', '&', '(', ')', '`']) {
        let mut words = command
            .split_whitespace()
            .skip_while(|w| *w == "$" || is_assignment(w));
        if words.next().is_some_and(is_hotq) {
            out.push(words.map(str::to_string).collect());
        }
    }
    out
}

/// `hotq` or a path to it (`./target/debug/hotq`,
/// `ExecStart=/usr/local/bin/hotq`); not `Description=hotq`.
fn is_hotq(word: &str) -> bool {
    word == "hotq" || word.ends_with("/hotq")
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    }) && !is_hotq(word)
}

/// Runs the binary's `--help` for each subcommand path once.
pub struct Help {
    bin: PathBuf,
    seen: HashMap<Vec<String>, Option<String>>,
}

impl Help {
    pub fn new(bin: &Path) -> Self {
        Help {
            bin: bin.to_path_buf(),
            seen: HashMap::new(),
        }
    }

    /// `hotq <path> --help`, or `None` when it fails (no such subcommand).
    fn of(&mut self, path: &[String]) -> Option<String> {
        let bin = &self.bin;
        self.seen
            .entry(path.to_vec())
            .or_insert_with(|| {
                let out = Command::new(bin)
                    .args(path)
                    .arg("--help")
                    .output()
                    .expect("run hotq --help");
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            })
            .clone()
    }
}

/// Checks each shown command's subcommands and flags against `help`.
pub fn check(help: &mut Help, commands: &[Shown]) -> Report {
    let mut report = Report::default();
    for shown in commands {
        report.checked += 1;
        if let Err(problem) = check_one(help, &shown.words) {
            report.problems.push(format!(
                "{}: `hotq {}`: {problem}",
                shown.place,
                shown.words.join(" ")
            ));
        }
    }
    report
}

fn check_one(help: &mut Help, words: &[String]) -> Result<(), String> {
    let mut path: Vec<String> = Vec::new();
    let text = loop {
        let text = help
            .of(&path)
            .ok_or_else(|| format!("`{} --help` fails", named(&path)))?;
        let subcommands = subcommands(&text);
        match words.get(path.len()) {
            Some(next) if subcommands.contains(next) => path.push(next.clone()),
            Some(next) if !subcommands.is_empty() && is_word(next) => {
                return Err(format!(
                    "no subcommand `{next}` in `{} --help`",
                    named(&path)
                ));
            }
            _ => break text,
        }
    };
    for flag in words[path.len()..].iter().filter_map(|w| as_flag(w)) {
        if !lists_flag(&text, flag) {
            return Err(format!("no flag `{flag}` in `{} --help`", named(&path)));
        }
    }
    Ok(())
}

/// `hotq pq pop` for the path `[pq, pop]`.
fn named(path: &[String]) -> String {
    std::iter::once("hotq")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The names in a clap help's `Commands:` section.
fn subcommands(help: &str) -> Vec<String> {
    let section = help.lines().skip_while(|l| l.trim() != "Commands:").skip(1);
    let entries = section.take_while(|l| l.starts_with("  "));
    entries
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// A word that can only be a subcommand's name (not a placeholder such as
/// `<cmd>` or `…`, not a path, not a flag).
fn is_word(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase())
        && word
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// `--wait-ms=5` as `--wait-ms`; `None` for what is not a flag: `-`,
/// `--`, and negative numbers such as the `-3` of `--priority -3` (so a
/// digit short flag like `-0` is not checked).
fn as_flag(word: &str) -> Option<&str> {
    let flag = word.split('=').next().unwrap_or(word);
    let name = flag.trim_start_matches('-');
    let numeric = name.chars().all(|c| c.is_ascii_digit());
    (flag.starts_with('-') && !name.is_empty() && !numeric).then_some(flag)
}

/// Whether `help` lists `flag` as a whole word (`--max` is not
/// `--max-items`).
fn lists_flag(help: &str, flag: &str) -> bool {
    let part_of_name = |c: char| c.is_ascii_alphanumeric() || c == '-';
    help.match_indices(flag).any(|(at, _)| {
        let before = help[..at].chars().next_back();
        let after = help[at + flag.len()..].chars().next();
        !before.is_some_and(part_of_name) && !after.is_some_and(part_of_name)
    })
}

#[test]
fn command_lines_are_found_where_a_shell_would_run_hotq() {
    let words = |line: &str| hotq_commands(&without_comment(line));
    assert_eq!(
        words("$ hotq pop jobs --max 5   # hotq push x"),
        vec![vec!["pop", "jobs", "--max", "5"]]
    );
    assert_eq!(
        words("RUST_LOG=debug ./target/debug/hotq serve"),
        vec![vec!["serve"]]
    );
    assert_eq!(
        words("ExecStart=/usr/local/bin/hotq serve --config x"),
        vec![vec!["serve", "--config", "x"]]
    );
    assert_eq!(
        words("echo a | hotq push jobs && hotq stats jobs"),
        vec![vec!["push", "jobs"], vec!["stats", "jobs"]]
    );
    assert!(words("from hotq import Client").is_empty());
    assert!(words("Description=hotq queue daemon").is_empty());
    assert!(
        words("peerbench --http-pid $(pgrep -nx hotq)")
            .iter()
            .all(|w| w.is_empty())
    );
    assert_eq!(as_flag("--priority"), Some("--priority"));
    assert_eq!(as_flag("-3"), None);
    assert!(
        lists_flag("  --max <MAX>\n  --max-items", "--max")
            && !lists_flag("  --max-items", "--max")
    );
}
