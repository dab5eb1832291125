//! One CLI convention against a real daemon: text for people by default,
//! `--json` everywhere, a newline after every item, a duplicate push and
//! a delete of nothing that say so, `invalid` for a malformed receipt on
//! every path, and priority queues with every command FIFO queues have.
//! Also the daemon's request log line at `debug`.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use serde_json::Value;

async fn hotq(url: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args(args)
        .env("HOTQ_URL", url)
        .env_remove("HOTQ_TOKEN")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

/// Runs `hotq args...`, expects exit `code`, returns stdout.
async fn run(url: &str, args: &[&str], code: i32) -> String {
    let output = hotq(url, args).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{args:?}: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

async fn json(url: &str, args: &[&str]) -> Value {
    let args = [args, &["--json"]].concat();
    let stdout = run(url, &args, 0).await;
    assert!(
        stdout.ends_with('\n') && stdout.lines().count() == 1,
        "{stdout:?}"
    );
    serde_json::from_str(&stdout).unwrap()
}

fn value_of<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|line| {
            let (k, v) = line.split_once(char::is_whitespace)?;
            (k == key).then(|| v.trim())
        })
        .unwrap_or_else(|| panic!("no {key} line in {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_commands_print_text_by_default_and_json_when_asked() {
    let daemon = Daemon::start(|_| {}).await;
    let url = daemon.url.as_str();
    assert_eq!(run(url, &["push", "q", "a", "b"], 0).await, "pushed 2\n");
    let once = ["push", "q", "--dedup-id", "order-42", "c"];
    assert_eq!(run(url, &once, 0).await, "pushed 1\n");
    assert_eq!(
        run(url, &once, 0).await,
        "duplicate: not pushed (dedup id \"order-42\" seen within the dedup window)\n"
    );
    assert_eq!(json(url, &once).await["duplicate"], true);
    // One item alone ends in a newline too.
    assert_eq!(run(url, &["pop", "q"], 0).await, "a\n");
    assert_eq!(run(url, &["peek", "q"], 0).await, "b\n");
    let stats = run(url, &["stats", "q"], 0).await;
    assert_eq!(value_of(&stats, "depth"), "2");
    assert_eq!(value_of(&stats, "grouped"), "0");
    assert_eq!(value_of(&stats, "dead_letter"), "false");
    assert_eq!(json(url, &["stats", "q"]).await["depth"], 2);

    let settings = run(
        url,
        &["settings", "q", "--set", r#"{"max_deliveries":2}"#],
        0,
    )
    .await;
    assert_eq!(value_of(&settings, "max_deliveries"), "2 (set)");
    assert_eq!(value_of(&settings, "dead_letter_queue"), "q.dead (default)");
    assert_eq!(
        json(url, &["settings", "q"]).await["stored"]["max_deliveries"],
        2
    );

    let leased = run(url, &["pop", "q", "--lease-ms", "60000"], 0).await;
    let receipt = leased.split('\t').next().unwrap().to_string();
    let leases = run(url, &["leases", "q"], 0).await;
    let mut lines = leases.lines();
    assert!(lines.next().unwrap().starts_with("RECEIPT"), "{leases}");
    assert!(lines.next().unwrap().starts_with(&receipt), "{leases}");
    let extended = run(url, &["extend", "q", &receipt, "--lease-ms", "90000"], 0).await;
    assert!(extended.starts_with("lease expires at "), "{extended}");
    assert_eq!(run(url, &["nack", "q", &receipt], 0).await, "requeued\n");
    let queues = run(url, &["queues"], 0).await;
    assert!(queues.starts_with("QUEUE"), "{queues}");
    assert!(
        queues
            .lines()
            .any(|l| l.split_whitespace().next() == Some("q"))
    );
    assert_eq!(json(url, &["queues"]).await["queues"][0]["queue"], "q");

    // A malformed receipt is `invalid`, in a batch or alone, ack or nack.
    assert_eq!(run(url, &["ack", "q", "nope"], 1).await, "nope invalid\n");
    let nack = hotq(url, &["nack", "q", "nope"]).await;
    let stderr = String::from_utf8_lossy(&nack.stderr);
    assert!(
        stderr.contains("is invalid") && stderr.contains("(400 invalid_receipt)"),
        "{stderr}"
    );

    let purged = run(url, &["purge", "q"], 0).await;
    assert_eq!(purged, "purged 2 from q: 2 visible, 0 delayed\n");
    assert_eq!(
        run(url, &["delete", "never-existed"], 0).await,
        "never-existed held nothing: no items, leases or delayed items to delete\n"
    );
    run(url, &["push", "q", "x"], 0).await;
    assert_eq!(json(url, &["delete", "q"]).await["items"], 1);
    // Two output choices at once are a usage error.
    run(url, &["pop", "q", "--json", "--base64"], 2).await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_queues_have_every_command() {
    let daemon = Daemon::start(|_| {}).await;
    let url = daemon.url.as_str();
    let pushed = run(url, &["pq", "push", "t", "--priority", "2", "a", "b"], 0).await;
    assert_eq!(pushed, "pushed 1\npushed 1\n");
    let settings = ["pq", "settings", "t", "--set", r#"{"max_deliveries":1}"#];
    assert_eq!(
        value_of(&run(url, &settings, 0).await, "max_deliveries"),
        "1 (set)"
    );
    let leased = run(
        url,
        &["pq", "pop", "t", "--end", "min", "--lease-ms", "60000"],
        0,
    )
    .await;
    let fields: Vec<&str> = leased.trim_end().split('\t').collect();
    assert_eq!((fields[1], fields[2]), ("1", "a"), "{leased}");
    let receipt = fields[0];
    let leases = run(url, &["pq", "leases", "t"], 0).await;
    assert!(leases.contains(receipt), "{leases}");
    let extend = ["pq", "extend", "t", receipt, "--lease-ms", "90000"];
    assert!(run(url, &extend, 0).await.starts_with("lease expires at "));
    assert_eq!(
        run(url, &["pq", "ack", "t", receipt], 0).await,
        format!("{receipt} acked\n")
    );
    assert_eq!(
        run(url, &["pq", "ack", "t", receipt], 1).await,
        format!("{receipt} unknown_receipt\n")
    );
    assert_eq!(
        run(url, &["pq", "ack", "t", "nope"], 1).await,
        "nope invalid\n"
    );
    let popped = json(
        url,
        &["pq", "pop", "t", "--end", "min", "--lease-ms", "60000"],
    )
    .await;
    let receipt = popped[0]["receipt"].as_str().unwrap();
    let nacked = run(url, &["pq", "nack", "t", receipt], 0).await;
    assert_eq!(nacked, "dead-lettered to t.dead\n");
    assert_eq!(
        value_of(&run(url, &["pq", "stats", "t"], 0).await, "depth"),
        "0"
    );
    run(url, &["pq", "push", "t", "--priority", "-1", "c"], 0).await;
    assert_eq!(json(url, &["pq", "purge", "t"]).await["purged"], 1);
    let deleted = run(url, &["pq", "delete", "t"], 0).await;
    assert_eq!(
        deleted,
        "t held nothing: no items, leases or delayed items to delete\n"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_logs_each_request_at_debug() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--resp-listen",
            "127.0.0.1:0",
            "--worker-threads",
            "3",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env("RUST_LOG", "info,hotq::request=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(log) = serde_json::from_str(&line) {
                let _ = tx.send(log);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let next = || rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
    let address = loop {
        let log = next().expect("the daemon logs its address");
        if log["fields"]["message"] == "starting" {
            // The flag reached the runtime: it runs the workers asked for.
            assert_eq!(log["fields"]["worker_threads"], 3, "{log}");
        }
        if log["fields"]["message"] == "API listening" {
            break log["fields"]["address"].as_str().unwrap().to_string();
        }
    };
    let status = common::daemon::http()
        .get(format!("http://{address}/v1/queues/logged"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    let request = loop {
        let log = next().expect("a request line within 60 s");
        if log["target"] == "hotq::request" {
            break log;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(request["level"], "DEBUG");
    let fields = &request["fields"];
    assert_eq!(
        (&fields["method"], &fields["route"], &fields["status"]),
        (
            &Value::from("GET"),
            &Value::from("/v1/queues/{queue}"),
            &Value::from(200)
        ),
        "{request}"
    );
    assert!(fields["ms"].as_f64().is_some(), "{request}");
}
