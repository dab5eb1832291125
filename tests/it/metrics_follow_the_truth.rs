//! Sampled gauges follow the store at any number of queues: a queue that
//! left the set this daemon served recently is still re-sampled (the timer
//! changing it, and a rotation through every queue), and `_other` sums
//! every queue past the label cap, not only those that happened to be
//! sampled.
//!
//! Alone in its test binary: the metrics recorder is process-global and
//! the first daemon's label cap wins.

mod common;

use std::time::Duration;

use common::daemon::{Daemon, http};
use hotq::metrics::{DELAYED_ITEMS, OVERFLOW_QUEUE_LABEL, QUEUE_DEPTH};
use reqwest::StatusCode;

const OTHERS: usize = 60;
const LABELS_MAX: usize = 10;

/// The value of `name{queue="queue",kind="fifo"}` in a scrape, if exported.
fn gauge(text: &str, name: &str, queue: &str) -> Option<f64> {
    let series = format!("{name}{{queue=\"{queue}\",kind=\"fifo\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map(|value| value.trim().parse().unwrap())
}

fn total(text: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{");
    text.lines()
        .filter(|line| line.starts_with(prefix.as_str()))
        .filter_map(|line| line.rsplit_once(' '))
        .map(|(_, value)| value.parse::<f64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gauges_follow_a_queue_the_daemon_stopped_serving_and_other_sums_all() {
    let daemon = Daemon::start(|config| {
        config.metrics_queue_labels_max = LABELS_MAX;
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
