//! The `hotq` command line against a real daemon: binary-safe item
//! formats, JSON output, readable errors, the cause of a failed
//! connection; and the daemon's JSON error for a non-UTF-8 queue name.

use crate::common;

use std::process::{Output, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::client::Client;
use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::Value;

/// Runs `hotq args...` against `url`.
async fn hotq(url: &str, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hotq"));
    command
        .args(args)
        .env("HOTQ_URL", url)
        .env_remove("HOTQ_TOKEN")
        .stdin(Stdio::null());
    command.output().await.unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pops_print_binary_safe_and_as_json() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let items = ["two\nlines", "tab\there", "plain"];
    let pushed = hotq(url, &[&["push", "bin"][..], &items].concat()).await;
    assert!(pushed.status.success(), "{}", stderr(&pushed));

    // -0: each item ends in NUL, newlines inside survive.
    let nul = hotq(url, &["pop", "bin", "--max", "2", "-0"]).await;
    assert_eq!(nul.status.code(), Some(0), "{}", stderr(&nul));
    assert_eq!(nul.stdout, b"two\nlines\0tab\there\0");

    // --base64: one line per item, any bytes.
    hotq(url, &["push", "bin", "again\nand again"]).await;
    let b64 = hotq(url, &["pop", "bin", "--max", "5", "--base64"]).await;
    let lines: Vec<Vec<u8>> = String::from_utf8(b64.stdout)
        .unwrap()
        .lines()
        .map(|line| BASE64.decode(line).unwrap())
        .collect();
    assert_eq!(lines, [b"plain".to_vec(), b"again\nand again".to_vec()]);

    // --json: the daemon's objects, leased ones with their receipt.
    hotq(url, &["push", "bin", "leased"]).await;
    let json = hotq(url, &["pop", "bin", "--lease-ms", "60000", "--json"]).await;
    let popped: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(popped[0]["item"], BASE64.encode("leased"));
    assert_eq!(popped[0]["delivery_count"], 1);
    let receipt = popped[0]["receipt"].as_str().unwrap();
    let nacked = hotq(url, &["nack", "bin", receipt, "--json"]).await;
    let nacked: Value = serde_json::from_slice(&nacked.stdout).unwrap();
    assert_eq!(nacked["outcome"], "requeued");

    // Stats: readable by default, the JSON with --json.
    let stats = hotq(url, &["stats", "bin", "--json"]).await;
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["depth"], 1);
    let readable = hotq(url, &["stats", "bin"]).await;
    let readable = String::from_utf8(readable.stdout).unwrap();
    assert!(
        readable
            .lines()
            .any(|l| l.split_whitespace().eq(["depth", "1"]))
    );

    // Empty: exit 3 in every format, nothing printed.
    hotq(url, &["pop", "bin", "--max", "9"]).await;
    for format in ["-0", "--base64", "--json"] {
        let empty = hotq(url, &["pop", "bin", "--max", "9", format]).await;
        assert_eq!((empty.status.code(), empty.stdout.len()), (Some(3), 0));
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_read_as_sentences_with_status_and_code() {
    let daemon = Daemon::start(|_| {}).await;
    let bad = hotq(&daemon.url, &["push", "a b", "x"]).await;
    assert_eq!(bad.status.code(), Some(1));
    let message = stderr(&bad);
    assert!(
        message.starts_with("hotq: queue name \"a b\" is invalid")
            && message.trim_end().ends_with("(400 invalid_queue_name)"),
        "{message}"
    );
    // A slash in a name cannot reach another route.
    let slash = hotq(&daemon.url, &["stats", "a/b"]).await;
    assert!(stderr(&slash).contains("(400 invalid_queue_name)"));
    let late = hotq(&daemon.url, &["ack", "q", &"0".repeat(32)]).await;
    // Acks answer one `receipt outcome` line each, exit 1 unless acked.
    assert_eq!(late.status.code(), Some(1));
    let zeros = "0".repeat(32);
    assert_eq!(
        String::from_utf8_lossy(&late.stdout),
        format!("{zeros} receipt_queue_mismatch\n")
    );
    daemon.stop().await;

    // Nothing listens here any more: the cause is named.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let refused = hotq(&closed, &["stats", "q"]).await;
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr(&refused);
    assert!(
        message.starts_with(&format!("hotq: cannot reach the daemon at {closed}: "))
            && message.to_lowercase().contains("refused"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_utf8_queue_name_gets_the_json_error() {
    let daemon = Daemon::start(|_| {}).await;
    for (method, path) in [
        (reqwest::Method::POST, "/v1/queues/%FF/items"),
        (reqwest::Method::GET, "/v1/queues/%C3%28"),
        (reqwest::Method::POST, "/v1/queues/ok%FF/ack/0123"),
        (reqwest::Method::GET, "/v1/pqueues/%FF/peek?end=min"),
    ] {
        let response = http()
            .request(method, format!("{}{path}", daemon.url))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let body: Value = response.json().await.expect("a JSON error body");
        assert_eq!(body["error"]["code"], "invalid_queue_name", "{path}");
    }
    daemon.stop().await;
}

/// `hotq push --fair-key`: a quiet key's item comes out within a round
/// of a noisy backlog pushed before it; `hotq stats` shows each key's
/// backlog; a malformed key is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_takes_a_fairness_key() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let noisy = hotq(
        url,
        &["push", "cli-fair", "--fair-key", "noisy", "n0", "n1", "n2"],
    )
    .await;
    assert!(noisy.status.success(), "{}", stderr(&noisy));
    let quiet = hotq(url, &["push", "cli-fair", "--fair-key", "quiet", "q0"]).await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    let stats = hotq(url, &["stats", "cli-fair"]).await;
    let printed = String::from_utf8(stats.stdout).unwrap();
    assert!(
        printed.contains("fair_backlog  \"noisy\"=3 \"quiet\"=1"),
        "{printed}"
    );
    // The noisy key's first item was the head; the quiet key's item comes
    // in the next round, beside the noisy key's second.
    let client = Client::new(url);
    let order = [
        client.pop("cli-fair", 0).await.unwrap(),
        client.pop("cli-fair", 0).await.unwrap(),
        client.pop("cli-fair", 0).await.unwrap(),
    ];
    assert_eq!(order[0], "n0");
    assert!(order[1..].contains(&"q0".to_string()), "{order:?}");
    let bad = hotq(url, &["push", "cli-fair", "--fair-key", "no spaces", "x"]).await;
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("bad_fair_key"), "{}", stderr(&bad));
    daemon.stop().await;
}

/// `hotq pq push --fair-key` places items fairly within their priority:
/// a quiet key's item comes right behind the noisy key's first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pq_push_takes_a_fairness_key() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let words = ["pq", "push", "cli-pfair", "--priority", "3", "--fair-key"];
    let noisy: Vec<&str> = words
        .iter()
        .copied()
        .chain(["noisy", "n0", "n1", "n2"])
        .collect();
    let noisy = hotq(url, &noisy).await;
    assert!(noisy.status.success(), "{}", stderr(&noisy));
    let quiet: Vec<&str> = words.iter().copied().chain(["quiet", "q0"]).collect();
    let quiet = hotq(url, &quiet).await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    let mut order = Vec::new();
    for _ in 0..3 {
        let popped = crate::common::daemon::http()
            .post(format!("{url}/v1/pqueues/cli-pfair/pop?end=min"))
            .send()
            .await
            .unwrap();
        assert_eq!(popped.status(), reqwest::StatusCode::OK);
        order.push(popped.text().await.unwrap());
    }
    assert_eq!(order[0], "n0");
    assert!(order[1..].contains(&"q0".to_string()), "{order:?}");
    let bad: Vec<&str> = words.iter().copied().chain(["no spaces", "x"]).collect();
    let bad = hotq(url, &bad).await;
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("bad_fair_key"), "{}", stderr(&bad));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_takes_a_group_and_a_dedup_id() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    let pushed = hotq(url, &["push", "cli-groups", "--group", "c:1", "a", "b"]).await;
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let stats = Client::new(url).stats("cli-groups").await;
    assert_eq!((stats.depth, stats.grouped), (1, 1), "{stats}");
    let json = hotq(url, &["pop", "cli-groups", "--json"]).await;
    let popped: Vec<Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(popped[0]["group"], "c:1");
    let bad = hotq(url, &["push", "cli-groups", "--group", "no spaces", "x"]).await;
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("bad_group"), "{}", stderr(&bad));
    for _ in 0..2 {
        let once = hotq(url, &["push", "cli-dedup", "--dedup-id", "order-42", "x"]).await;
        assert!(once.status.success(), "{}", stderr(&once));
    }
    let stats = Client::new(url).stats("cli-dedup").await;
    assert_eq!(stats.depth, 1, "{stats}");
    let two = hotq(url, &["push", "cli-dedup", "--dedup-id", "x", "a", "b"]).await;
    assert!(!two.status.success());
    daemon.stop().await;
}
