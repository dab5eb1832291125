//! docs/resp.md names every RESP command the daemon serves, and only
//! those: the commands its tables' rows start with (`| \`PUSH queue …\``,
//! `PQ PUSH` as the subcommand `pq|push`) against the listener's command
//! table, which `COMMAND` answers.

use std::collections::BTreeSet;

use super::Report;

/// The commands the rows of `page`'s tables name: a row's first code span,
/// when it starts with an upper-case word.
pub fn documented(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|row| row.split('`').next())
        .filter_map(|span| {
            let mut words = span.split_whitespace();
            let first = words.next()?;
            if !first.chars().all(|c| c.is_ascii_uppercase()) {
                return None;
            }
            Some(match (first, words.next()) {
                ("PQ", Some(sub)) => format!("pq|{}", sub.to_ascii_lowercase()),
                (first, _) => first.to_ascii_lowercase(),
            })
        })
        .collect()
}

/// The commands served: every command, a container's subcommands in its
/// place.
pub fn served() -> BTreeSet<String> {
    use hotq::resp::cmd::spec::COMMANDS;
    COMMANDS
        .iter()
        .flat_map(|spec| match spec.subcommands {
            [] => vec![spec.name.to_string()],
            subs => subs.iter().map(|sub| sub.name.to_string()).collect(),
        })
        .collect()
}

/// Checks `page` (docs/resp.md's text) against `served`.
pub fn check(page: &str, served: &BTreeSet<String>) -> Report {
    let documented = documented(page);
    let mut report = Report {
        checked: served.len(),
        problems: Vec::new(),
    };
    for name in served.difference(&documented) {
        report.problems.push(format!(
            "`{name}` is served but docs/resp.md does not name it"
        ));
    }
    for name in documented.difference(served) {
        report
            .problems
            .push(format!("`{name}` is in docs/resp.md but not served"));
    }
    report
}
