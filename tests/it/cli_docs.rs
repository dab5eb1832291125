//! `docs/cli.md`'s session, and the README's, are what the command line
//! prints: every `$ hotq ...` line of the block runs against a fresh
//! daemon, in order, and must print the lines that follow it (`<...>`
//! stands for any text: a receipt, a time; a receipt written out in the
//! doc stands for the one the daemon issued there, in later commands too;
//! a `# comment` after a command is the doc's, not an argument).

use crate::common;

use std::process::Stdio;

use common::daemon::Daemon;

/// A doc's session: (arguments, expected stdout lines) per command, from
/// the first block of `doc` (a path under the crate) opened by `fence`.
fn session(doc: &str, fence: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let path = format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let block = text
        .split(fence)
        .find(|block| block.starts_with("$ hotq "))
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_else(|| panic!("{doc} has a {fence:?} block of hotq commands"));
    let mut commands: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for line in block.lines() {
        if let Some(command) = line.strip_prefix("$ hotq ") {
            let command = command.split("  #").next().unwrap().trim_end();
            // No quoting in the session: arguments are split at spaces.
            commands.push((command.split(' ').map(str::to_string).collect(), Vec::new()));
        } else {
            let (_, expected) = commands.last_mut().expect("a command before its output");
            expected.push(line.to_string());
        }
    }
    commands
}

/// A receipt as the docs write it out: 32 hex digits.
fn is_receipt(word: &str) -> bool {
    word.len() == 32 && word.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `line` is `pattern`, with a receipt the doc wrote out standing
/// for any receipt, remembered in `issued` (doc's → daemon's).
fn matches_issued(pattern: &str, line: &str, issued: &mut Vec<(String, String)>) -> bool {
    let split = |text: &str| -> Vec<String> { text.split('\t').map(str::to_string).collect() };
    let (want, got) = (split(pattern), split(line));
    if want.len() != got.len() {
        return matches(pattern, line);
    }
    let mut pattern = Vec::with_capacity(want.len());
    for (want, got) in want.iter().zip(&got) {
        let first = |text: &str| text.split(' ').next().unwrap_or("").to_string();
        let (doc, real) = (first(want), first(got));
        if is_receipt(&doc) && is_receipt(&real) {
            issued.retain(|(known, _)| *known != doc);
            issued.push((doc.clone(), real.clone()));
            pattern.push(want.replacen(&doc, &real, 1));
        } else {
            pattern.push(want.clone());
        }
    }
    matches(&pattern.join("\t"), line)
}

/// Whether `line` is `pattern`, where `<...>` matches any text.
fn matches(pattern: &str, line: &str) -> bool {
    let pieces: Vec<&str> = pattern.split("<...>").collect();
    let [first, middle @ .., last] = pieces.as_slice() else {
        return pattern == line;
    };
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last) && rest.len() >= last.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_session_prints_what_the_doc_says() {
    run_session("docs/cli.md", session("docs/cli.md", "```console\n"), 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_session_prints_what_the_readme_says() {
    run_session("README.md", session("README.md", "```sh\n"), 4).await;
}

/// Runs `session` against a fresh daemon; `doc` names it in failures.
async fn run_session(doc: &str, session: Vec<(Vec<String>, Vec<String>)>, commands_min: usize) {
    let daemon = Daemon::start(|_| {}).await;
    assert!(session.len() >= commands_min, "{doc}'s session is there");
    let mut issued: Vec<(String, String)> = Vec::new();
    for (args, expected) in session {
        let args: Vec<String> = args
            .iter()
            .map(|arg| {
                let known = issued.iter().find(|(doc, _)| doc == arg);
                known.map_or_else(|| arg.clone(), |(_, real)| real.clone())
            })
            .collect();
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
            .args(&args)
            .env("HOTQ_URL", &daemon.url)
            .env_remove("HOTQ_TOKEN")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let printed: Vec<&str> = stdout.lines().collect();
        let all_match = printed.len() == expected.len()
            && printed
                .iter()
                .zip(&expected)
                .all(|(line, want)| matches_issued(want, line, &mut issued));
        assert!(
            all_match,
            "hotq {}\nprinted:\n{stdout}\n{doc} says:\n{}\nstderr: {}",
            args.join(" "),
            expected.join("\n"),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    daemon.stop().await;
}

#[test]
fn the_wildcard_matches_any_text_and_nothing_else() {
    assert!(matches("oldest  <...>", "oldest  12 ms"));
    assert!(matches("<...>\t1\tx", "abc\t1\tx"));
    assert!(!matches("<...>\t1\tx", "abc\t2\tx"));
    assert!(!matches("depth  2", "depth  3"));
}

#[test]
fn a_written_out_receipt_stands_for_the_one_issued() {
    let doc = "8d2e4b7f0a1c49e3b6f5d2a7c8e90f14";
    let real = "811f42199565f02ab4cc66a5aaa16ecf";
    let mut issued = Vec::new();
    assert!(matches_issued(
        &format!("{doc}\t1\tbuild-6"),
        &format!("{real}\t1\tbuild-6"),
        &mut issued
    ));
    assert_eq!(issued, [(doc.to_string(), real.to_string())]);
    assert!(matches_issued(
        &format!("{doc} acked"),
        &format!("{real} acked"),
        &mut issued
    ));
    assert!(!matches_issued(
        &format!("{doc}\t1\tbuild-6"),
        &format!("{real}\t2\tbuild-6"),
        &mut issued
    ));
    assert!(!matches_issued("nope invalid", "nope acked", &mut issued));
}
