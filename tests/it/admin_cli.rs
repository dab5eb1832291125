//! `hotq queues|purge|delete|leases|settings|pause|resume --json`, and
//! `pause`/`resume`'s text, against the real daemon.

use crate::common;

use common::daemon::Daemon;
use serde_json::Value;

async fn hotq(url: &str, args: &[&str]) -> (i32, Value) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args(args)
        .arg("--json")
        .env("HOTQ_URL", url)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (output.status.code().unwrap(), json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_subcommands_print_the_daemons_answers() {
    let daemon = Daemon::start(|_| {}).await;
    let url = daemon.url.as_str();
    let (code, _) = hotq(url, &["push", "cli-q", "a", "b", "c"]).await;
    assert_eq!(code, 0);
    let (code, _) = hotq(url, &["pop", "cli-q", "--lease-ms", "60000"]).await;
    assert_eq!(code, 0);

    let (code, settings) = hotq(
        url,
        &["settings", "cli-q", "--set", r#"{"max_deliveries": 3}"#],
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(settings["settings"]["max_deliveries"], 3);
    let (code, _) = hotq(
        url,
        &["settings", "cli-q", "--set", r#"{"max_deliveries": "x"}"#],
    )
    .await;
    assert_eq!(code, 1, "an invalid setting fails");
    let (_, settings) = hotq(url, &["settings", "cli-q"]).await;
    assert_eq!(settings["stored"]["max_deliveries"], 3);

    let (_, queues) = hotq(url, &["queues", "--limit", "5"]).await;
    assert_eq!(queues["queues"][0]["queue"], "cli-q");
    assert_eq!(queues["queues"][0]["depth"], 2);
    let (_, leases) = hotq(url, &["leases", "cli-q"]).await;
    assert_eq!(leases["leases"].as_array().unwrap().len(), 1);
    let (_, purged) = hotq(url, &["purge", "cli-q"]).await;
    assert_eq!(purged["purged"], 2);
    let (_, deleted) = hotq(url, &["delete", "cli-q"]).await;
    assert_eq!(
        (deleted["deleted"].as_bool(), deleted["leased"].as_u64()),
        (Some(true), Some(1))
    );
    let (_, queues) = hotq(url, &["queues"]).await;
    assert_eq!(queues["queues"], serde_json::json!([]));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_change_what_the_queue_hands_out() {
    let daemon = Daemon::start(|_| {}).await;
    let url = daemon.url.as_str();
    let (code, _) = hotq(url, &["push", "cli-p", "a"]).await;
    assert_eq!(code, 0);
    let (code, paused) = hotq(url, &["pause", "cli-p"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        paused,
        serde_json::json!({"queue": "cli-p", "paused": true})
    );
    let (_, queues) = hotq(url, &["queues"]).await;
    assert_eq!(queues["queues"][0]["paused"], true);
    let (_, stats) = hotq(url, &["stats", "cli-p"]).await;
    assert_eq!(stats["paused"], true);
    // Paused: nothing handed out, so `pop` exits 3 (empty).
    let (code, _) = hotq(url, &["pop", "cli-p"]).await;
    assert_eq!(code, 3);
    let (code, resumed) = hotq(url, &["resume", "cli-p"]).await;
    assert_eq!(code, 0);
    assert_eq!(resumed["paused"], false);
    let (code, popped) = hotq(url, &["pop", "cli-p"]).await;
    assert_eq!(code, 0, "{popped}");

    // Priority queues: `hotq pq pause|resume`, text by default.
    let (code, _) = hotq(url, &["pq", "push", "cli-pq", "--priority", "1", "x"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        text(url, &["pq", "pause", "cli-pq"]).await,
        (0, "paused cli-pq\n".into())
    );
    let (code, _) = hotq(url, &["pq", "pop", "cli-pq", "--end", "min"]).await;
    assert_eq!(code, 3);
    let settings = text(url, &["pq", "settings", "cli-pq"]).await.1;
    let line = settings.lines().find(|line| line.starts_with("paused "));
    let words: Vec<&str> = line.unwrap_or_default().split_whitespace().collect();
    assert_eq!(words, ["paused", "true", "(set)"], "{settings}");
    assert_eq!(
        text(url, &["pq", "resume", "cli-pq"]).await,
        (0, "resumed cli-pq\n".into())
    );
    let (code, _) = hotq(url, &["pq", "pop", "cli-pq", "--end", "min"]).await;
    assert_eq!(code, 0);
    // An invalid name is the daemon's 400: exit 1, nothing on stdout.
    assert_eq!(text(url, &["pause", "bad name"]).await, (1, String::new()));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_set_and_print_the_limits() {
    let daemon = Daemon::start(|_| {}).await;
    let url = daemon.url.as_str();
    let limits = r#"{"leases_max": 10, "pop_rate_max": 1000}"#;
    let (code, shown) = text(url, &["settings", "cli-l", "--set", limits]).await;
    assert_eq!(code, 0, "{shown}");
    let line = |shown: &str, key: &str| -> Vec<String> {
        let line = shown
            .lines()
            .find(|line| line.starts_with(&format!("{key} ")));
        let words = line.unwrap_or_default().split_whitespace();
        words.map(str::to_string).collect()
    };
    assert_eq!(line(&shown, "leases_max"), ["leases_max", "10", "(set)"]);
    assert_eq!(
        line(&shown, "pop_rate_max"),
        ["pop_rate_max", "1000", "(set)"]
    );
    // The burst nobody set: a tenth of a second's worth.
    let burst = ["pop_rate_burst", "100", "(default)"];
    assert_eq!(line(&shown, "pop_rate_burst"), burst, "{shown}");

    // Read back, in text and in JSON.
    let (code, shown) = text(url, &["settings", "cli-l"]).await;
    assert_eq!(code, 0);
    assert_eq!(line(&shown, "leases_max"), ["leases_max", "10", "(set)"]);
    let (_, settings) = hotq(url, &["settings", "cli-l"]).await;
    assert_eq!(settings["stored"]["pop_rate_max"], 1000);
    assert_eq!(settings["settings"]["pop_rate_burst"], 100);

    // A refused value: exit 1, the daemon's reason on stderr, nothing saved.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args(["settings", "cli-l", "--set", r#"{"leases_max": 0}"#])
        .env("HOTQ_URL", url)
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("leases_max must be an integer from 1 to 1000000"),
        "{stderr}"
    );
    let (_, settings) = hotq(url, &["settings", "cli-l"]).await;
    assert_eq!(settings["stored"]["leases_max"], 10);

    // Reset: no limit again.
    let reset = r#"{"leases_max": null, "pop_rate_max": null}"#;
    let (code, shown) = text(url, &["settings", "cli-l", "--set", reset]).await;
    assert_eq!(code, 0);
    let unlimited = ["leases_max", "unlimited", "(default)"];
    assert_eq!(line(&shown, "leases_max"), unlimited, "{shown}");
    assert_eq!(
        line(&shown, "pop_rate_burst"),
        ["pop_rate_burst", "none", "(default)"]
    );
    daemon.stop().await;
}

/// Runs `hotq args...` without `--json`: its exit code and stdout.
async fn text(url: &str, args: &[&str]) -> (i32, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args(args)
        .env("HOTQ_URL", url)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    (output.status.code().unwrap(), stdout)
}
