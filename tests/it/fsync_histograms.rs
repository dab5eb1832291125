//! The disk's limit, visible: how many transactions each fsync carried and
//! how long fsyncs took, exported from start-up (issue #14, part 3).
//!
//! The fsync counts are the process's (every embedded store's), so the
//! test that counts them runs alone in a process (`common::alone`).

use crate::common;

use std::time::Duration;

use common::client::Client;
use common::daemon::{Daemon, http};
use common::exposition::{HISTOGRAM_SUFFIXES, Sample, exported, matching, parse, scrape, total};
use hotq::metrics;
use serde_json::Value;

const EVENT_BOUND: Duration = Duration::from_secs(60);

/// The `le` bounds of histogram `name`'s buckets in a scrape, `+Inf` left out.
fn bucket_bounds(samples: &[Sample], name: &str) -> Vec<f64> {
    let bucket = format!("{name}_bucket");
    let mut bounds: Vec<f64> = matching(samples, &bucket, &[])
        .filter_map(|s| s.labels.get("le"))
        .filter(|le| le.as_str() != "+Inf")
        .map(|le| le.parse().unwrap())
        .collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    bounds
}

/// One scrape and the store's group count, taken while no group was written
/// (the count is the same before and after the scrape).
async fn quiet_scrape(client: &reqwest::Client, daemon: &Daemon) -> (Vec<Sample>, u64) {
    let deadline = tokio::time::Instant::now() + EVENT_BOUND;
    loop {
        let (_, _, groups_before) = daemon.store.counts();
        let samples = parse(&scrape(client, &daemon.metrics_url).await);
        let (_, _, groups_after) = daemon.store.counts();
        if groups_before == groups_after {
            return (samples, groups_after);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no scrape between two commit groups within {EVENT_BOUND:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fsync_histograms_count_each_fsync_and_what_it_carried() {
    if !common::alone::here(
        module_path!(),
        "fsync_histograms_count_each_fsync_and_what_it_carried",
    )
    .await
    {
        return;
    }
    const PUSHES: usize = 20;
    let group_count = format!("{}_count", metrics::STORE_COMMIT_GROUP_SIZE);
    let group_sum = format!("{}_sum", metrics::STORE_COMMIT_GROUP_SIZE);
    let fsync_count = format!("{}_count", metrics::FSYNC_SECONDS);
    let fsync_sum = format!("{}_sum", metrics::FSYNC_SECONDS);

    for durability in [
        hotq::store::embedded::Durability::Sync,
        hotq::store::embedded::Durability::Buffered,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let daemon = Daemon::start_in(dir.path(), durability, |_| {}).await;
        let client = http();
        let (before, groups_before) = quiet_scrape(&client, &daemon).await;
        assert_eq!(
            bucket_bounds(&before, metrics::FSYNC_SECONDS),
            [
                0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05,
                0.1, 0.25, 0.5, 1.0
            ]
        );
        assert_eq!(
            bucket_bounds(&before, metrics::STORE_COMMIT_GROUP_SIZE),
            [
                0.999, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
                1_024.0
            ]
        );
        // One at a time: each push's commit is a group of its own.
        for n in 0..PUSHES {
            Client::new(&daemon.url)
                .push("fsync-carried", format!("item-{n}"))
                .await;
        }
        let (after, groups_after) = quiet_scrape(&client, &daemon).await;
        let delta = |name: &str| total(&after, name, &[]) - total(&before, name, &[]);
        let groups = (groups_after - groups_before) as f64;
        assert!(groups >= PUSHES as f64, "{durability:?}: {groups} groups");
        // One sample per written group, however many it carried.
        assert_eq!(delta(&group_count), groups, "{durability:?}");
        assert!(
            delta(&group_sum) >= PUSHES as f64,
            "{durability:?}: every push's transaction is counted"
        );
        match durability {
            hotq::store::embedded::Durability::Sync => {
                assert_eq!(delta(&fsync_count), groups, "one fsync per group");
                assert!(delta(&fsync_sum) > 0.0, "fsyncs take time");
            }
            hotq::store::embedded::Durability::Buffered => {
                assert_eq!(delta(&fsync_count), 0.0, "buffered makes no fsync");
            }
        }
        daemon.stop().await;
    }
}

/// Starts the built binary on port 0 with metrics on port 0; returns the
/// child and its metrics URL (from its log).
fn spawn_daemon(data_dir: &std::path::Path) -> (std::process::Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_hotq"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--resp-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = std::time::Instant::now() + EVENT_BOUND;
    loop {
        let wait = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = received.recv_timeout(wait) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon did not log its metrics address within {EVENT_BOUND:?}");
        };
        let Ok(log) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if log["fields"]["message"] == "metrics exporter listening" {
            let address = log["fields"]["address"].as_str().unwrap();
            return (child, format!("http://{address}/metrics"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fsync_histograms_are_exported_from_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, metrics_url) = spawn_daemon(dir.path());
    // Before any API request: a process of its own, so nothing else in
    // this test binary has recorded into its exporter.
    let text = scrape(&http(), &metrics_url).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let samples = parse(&text);
    for name in [metrics::FSYNC_SECONDS, metrics::STORE_COMMIT_GROUP_SIZE] {
        for suffix in HISTOGRAM_SUFFIXES {
            let series = format!("{name}{suffix}");
            assert!(
                exported(&text, &samples, &series),
                "{series} missing from a fresh daemon's scrape:\n{text}"
            );
        }
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has no description"
        );
    }
}
