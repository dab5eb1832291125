//! `docs/cli.md`'s session is what the command line prints: every
//! `$ hotq ...` line of its console block runs against a fresh daemon, in
//! order, and must print the lines that follow it (`<...>` stands for any
//! text: a receipt, a time).

mod common;

use std::process::Stdio;

use common::daemon::Daemon;

/// The session: (arguments, expected stdout lines) per command.
fn session() -> Vec<(Vec<String>, Vec<String>)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let block = doc
        .split("```console\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/cli.md has a console block");
    let mut commands: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for line in block.lines() {
        if let Some(command) = line.strip_prefix("$ hotq ") {
            // No quoting in the session: arguments are split at spaces.
            commands.push((command.split(' ').map(str::to_string).collect(), Vec::new()));
        } else {
            let (_, expected) = commands.last_mut().expect("a command before its output");
            expected.push(line.to_string());
        }
    }
    commands
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
    let daemon = Daemon::start(|_| {}).await;
    let session = session();
    assert!(session.len() >= 10, "the session is there");
    for (args, expected) in session {
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
                .all(|(line, want)| matches(want, line));
        assert!(
            all_match,
            "hotq {}\nprinted:\n{stdout}\ndocs/cli.md says:\n{}\nstderr: {}",
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
