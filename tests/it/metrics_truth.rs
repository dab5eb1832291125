//! Metrics that tell the truth, on a real daemon.
//!
//! Counters and labels (issue 17, part 4): invalid queue names never take
//! label slots; a FIFO queue and a priority queue of one name get distinct
//! series; a queue's counters exist at 0 from its first use; a long poll
//! that times out counts as an expired request in both request modes; a
//! pop's service time leaves out the time it waited with its queue empty,
//! which has a metric of its own; process and build metrics are exported.
//!
//! Sampled gauges follow the store at any number of queues: a queue that
//! left the set this daemon served recently is still re-sampled (the timer
//! changing it, and a rotation through every queue), and `_other` sums
//! every queue past the label cap, not only those that happened to be
//! sampled.
//!
//! Each test runs alone in a process (`common::alone`): the recorder (and
//! its label cap, the first daemon's) is process-global.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, http};
use hotq::metrics::{self, DELAYED_ITEMS, OVERFLOW_QUEUE_LABEL, QUEUE_DEPTH};
use reqwest::StatusCode;

/// The label cap of the counters' daemon: past it, `_other`.
const LABELS_MAX: usize = 4;
/// The label cap of the gauges' daemon, and the queues it serves past it.
const GAUGE_LABELS_MAX: usize = 10;
const OTHERS: usize = 60;
const EVENT_BOUND: Duration = Duration::from_secs(60);
/// How long the long poll below idles on its empty queue before the push.
const IDLE: Duration = Duration::from_millis(400);

type Labels = BTreeMap<String, String>;

/// Every sample of a scrape: (name, labels, value).
fn samples(text: &str) -> Vec<(String, Labels, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (key, value) = pair.split_once("=\"")?;
                    Some((key.to_string(), value.trim_end_matches('"').to_string()))
                })
                .collect();
            Some((name.to_string(), labels, value.parse().ok()?))
        })
        .collect()
}

/// The value of the one series of `name` with exactly `labels`.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    samples(text)
        .into_iter()
        .find(|(n, l, _)| n == name && *l == wanted)
        .map(|(_, _, v)| v)
}

async fn scrape(daemon: &Daemon) -> String {
    http()
        .get(&daemon.metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn push(daemon: &Daemon, path: &str) -> StatusCode {
    http()
        .post(format!("{}{path}", daemon.url))
        .body("item")
        .send()
        .await
        .unwrap()
        .status()
}

/// Waits (bounded) until `queue`'s stats show a waiting pop.
async fn until_waiting(daemon: &Daemon, queue: &str) {
    let client = http();
    common::eventually("a pop waits in line", EVENT_BOUND, || async {
        let stats: serde_json::Value = client
            .get(format!("{}/v1/queues/{queue}", daemon.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["waiting"].as_i64() == Some(1)
    })
    .await;
}

async fn a_long_poll_that_times_out_is_an_expired_request(requests_in_memory: bool, queue: &str) {
    let daemon = Daemon::start(|config| {
        config.metrics_queue_labels_max = LABELS_MAX;
        config.staging.requests_in_memory = requests_in_memory;
        config.staging.result_grace_ms = 50;
        config.staging.reap_interval_ms = 50;
    })
    .await;
    let response = http()
        .post(format!("{}/v1/queues/{queue}/pop?wait_ms=200", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let labels = [("queue", queue), ("kind", "fifo")];
    common::eventually(
        "the timed-out long poll counted as expired",
        EVENT_BOUND,
        || async { value(&scrape(&daemon).await, metrics::REQUESTS_EXPIRED, &labels) == Some(1.0) },
    )
    .await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_and_labels_tell_the_truth() {
    if !common::alone::here(module_path!(), "counters_and_labels_tell_the_truth").await {
        return;
    }
    let daemon = Daemon::start(|config| config.metrics_queue_labels_max = LABELS_MAX).await;

    // Invalid names are refused and counted without a label slot of their own.
    for n in 0..20 {
        let status = push(&daemon, &format!("/v1/queues/bad%20name{n}/items")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
    assert_eq!(
        push(&daemon, "/v1/queues/jobs/items").await,
        StatusCode::CREATED
    );
    assert_eq!(
        push(&daemon, "/v1/pqueues/jobs/items?priority=3").await,
        StatusCode::CREATED
    );
    let text = scrape(&daemon).await;
    let pushed = |kind: &'static str, op: &'static str| {
        value(
            &text,
            metrics::OPERATIONS,
            &[
                ("queue", "jobs"),
                ("kind", kind),
                ("op", op),
                ("outcome", "ok"),
            ],
        )
    };
    assert_eq!(
        pushed("fifo", "push"),
        Some(1.0),
        "a real queue keeps its label"
    );
    assert_eq!(
        pushed("priority", "pq_push"),
        Some(1.0),
        "distinct per kind"
    );
    let invalid = samples(&text)
        .into_iter()
        .filter(|(n, l, _)| n == metrics::OPERATIONS && l["queue"] == metrics::INVALID_QUEUE_LABEL)
        .map(|(_, _, v)| v)
        .sum::<f64>();
    assert_eq!(invalid, 20.0, "invalid names count under one label");
    assert!(
        !text.contains("bad name") && !text.contains("bad%20name"),
        "no invalid name is a label"
    );

    // A queue's counters exist from its first use, at 0.
    // Both kinds lease, so the lease counters carry `kind` too.
    for name in [
        metrics::REQUESTS_EXPIRED,
        metrics::RESULTS_REAPED,
        metrics::ACKS,
        metrics::NACKS,
        metrics::REDELIVERIES,
        metrics::DEAD_LETTERED,
    ] {
        for kind in ["fifo", "priority"] {
            assert_eq!(
                value(&text, name, &[("queue", "jobs"), ("kind", kind)]),
                Some(0.0),
                "{name} of {kind} jobs"
            );
        }
    }
    assert_eq!(
        value(
            &text,
            metrics::BUILD_INFO,
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        Some(1.0)
    );
    for name in ["process_cpu_seconds_total", "process_resident_memory_bytes"] {
        assert!(value(&text, name, &[]).is_some_and(|v| v > 0.0), "{name}");
    }

    // A long poll idles on an empty queue, then a push serves it: the idle
    // time is the empty wait, not the pop's service time. (The sleep makes
    // the idle stretch; the wait for the pop to be in line is an event.)
    let before = scrape(&daemon).await;
    let sum = |text: &str, name: &str, labels: &[(&str, &str)]| {
        value(text, &format!("{name}_sum"), labels).unwrap_or(0.0)
    };
    let started = Instant::now();
    let poll = tokio::spawn({
        let url = format!("{}/v1/queues/idle/pop?wait_ms=30000", daemon.url);
        async move { http().post(url).send().await.unwrap() }
    });
    until_waiting(&daemon, "idle").await;
    tokio::time::sleep(IDLE).await;
    assert_eq!(
        push(&daemon, "/v1/queues/idle/items").await,
        StatusCode::CREATED
    );
    let response = poll.await.unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(response.status(), StatusCode::OK);
    let after = scrape(&daemon).await;
    let empty_wait =
        sum(&after, metrics::POP_EMPTY_WAIT, &[]) - sum(&before, metrics::POP_EMPTY_WAIT, &[]);
    let service = sum(&after, metrics::POP_LATENCY, &[("path", "staged")])
        - sum(&before, metrics::POP_LATENCY, &[("path", "staged")]);
    println!(
        "long poll: {elapsed:.3} s at the client, {empty_wait:.3} s empty, {service:.3} s service"
    );
    assert!(
        empty_wait >= IDLE.as_secs_f64() - 0.002,
        "the idle stretch is empty wait: {empty_wait}"
    );
    assert!(
        service + empty_wait <= elapsed + 0.002,
        "service {service} + empty wait {empty_wait} fit in the client's {elapsed}"
    );
    daemon.stop().await;

    a_long_poll_that_times_out_is_an_expired_request(true, "expire-mem").await;
    a_long_poll_that_times_out_is_an_expired_request(false, "expire-stored").await;
}

/// The value of `name{queue="queue",kind="fifo"}` in a scrape, if exported.
fn gauge(text: &str, name: &str, queue: &str) -> Option<f64> {
    value(text, name, &[("queue", queue), ("kind", "fifo")])
}

/// The sum of every labelled sample of `name` in a scrape.
fn total(text: &str, name: &str) -> f64 {
    samples(text)
        .into_iter()
        .filter(|(n, l, _)| n == name && !l.is_empty())
        .map(|(_, _, v)| v)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gauges_follow_a_queue_the_daemon_stopped_serving_and_other_sums_all() {
    let name = "gauges_follow_a_queue_the_daemon_stopped_serving_and_other_sums_all";
    if !common::alone::here(module_path!(), name).await {
        return;
    }
    let daemon = Daemon::start(|config| {
        config.metrics_queue_labels_max = GAUGE_LABELS_MAX;
        config.metrics_sample_interval_ms = 50;
        // Fewer than the queues below: `stale` leaves the recently served set.
        config.metrics_sample_queues_max = 8;
    })
    .await;
    let client = http();
    let push = |queue: String, query: &'static str| {
        let (client, url) = (client.clone(), daemon.url.clone());
        async move {
            let response = client
                .post(format!("{url}/v1/queues/{queue}/items{query}"))
                .body("item")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::CREATED);
        }
    };
    push("stale".into(), "?delay_ms=1500").await;
    let scrape = || async {
        client
            .get(&daemon.metrics_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    common::eventually(
        "the delayed item is sampled",
        Duration::from_secs(60),
        || async { gauge(&scrape().await, DELAYED_ITEMS, "stale") == Some(1.0) },
    )
    .await;
    for n in 0..OTHERS {
        push(format!("other-{n:03}"), "").await;
    }
    // Once visible, the item shows: depth 1, delayed 0, whatever else was served since.
    common::eventually(
        "stale's gauges follow its reveal",
        Duration::from_secs(60),
        || async {
            let text = scrape().await;
            gauge(&text, QUEUE_DEPTH, "stale") == Some(1.0)
                && gauge(&text, DELAYED_ITEMS, "stale") == Some(0.0)
        },
    )
    .await;
    // Every queue holds one item: over all labels, `_other` included, the
    // depths add up to all of them.
    let queues = (OTHERS + 1) as f64;
    common::eventually(
        "the depth gauges sum every queue",
        Duration::from_secs(60),
        || async {
            let text = scrape().await;
            gauge(&text, QUEUE_DEPTH, OVERFLOW_QUEUE_LABEL).is_some()
                && total(&text, QUEUE_DEPTH) == queues
        },
    )
    .await;
    daemon.stop().await;
}
