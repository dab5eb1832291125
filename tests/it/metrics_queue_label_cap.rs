//! Ten thousand queue names do not blow up the exporter: past
//! `metrics_queue_labels_max` distinct queues, everything is counted under
//! `queue="_other"`.
//!
//! Alone in its process on purpose (`common::alone`): the metrics
//! recorder is process-global and the first daemon's label cap wins, so
//! this test's daemon must be the first (and only) one.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::daemon::{Daemon, http};
use hotq::metrics::{OPERATIONS, OVERFLOW_QUEUE_LABEL, QUEUE_DEPTH};
use reqwest::StatusCode;

const QUEUES: usize = 10_000;
const LABELS_MAX: usize = 50;
const CONCURRENCY: usize = 64;
const SCRAPE_BYTES_MAX: usize = 512 * 1024;

/// The value of every `queue="..."` label in a scrape, with the metric and
/// labels of every sample line.
fn queue_labels(text: &str) -> BTreeSet<String> {
    let mut queues = BTreeSet::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        let mut rest = line;
        while let Some(at) = rest.find("queue=\"") {
            let boundary = at == 0 || matches!(rest.as_bytes()[at - 1], b'{' | b',');
            let value_start = at + "queue=\"".len();
            let value_len = rest[value_start..]
                .find('"')
                .unwrap_or_else(|| panic!("unterminated label in {line}"));
            if boundary {
                queues.insert(rest[value_start..value_start + value_len].to_string());
            }
            rest = &rest[value_start + value_len..];
        }
    }
    queues
}

/// Sum of the sample lines of `name` whose labels include every `filter` pair.
fn total(text: &str, name: &str, filter: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
            let wanted = metric == name && filter.iter().all(|pair| labels.contains(pair));
            wanted.then(|| value.parse::<f64>().unwrap())
        })
        .sum()
}

async fn scrape(client: &reqwest::Client, url: &str) -> String {
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_queue_names_keep_the_exporter_bounded() {
    if !common::alone::here(
        module_path!(),
        "ten_thousand_queue_names_keep_the_exporter_bounded",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|config| {
        config.metrics_queue_labels_max = LABELS_MAX;
        config.metrics_sample_interval_ms = 50;
    })
    .await;
    let client = http();

    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (client, url, next) = (client.clone(), daemon.url.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= QUEUES {
                        return;
                    }
                    let response = client
                        .post(format!("{url}/v1/queues/q-{n:05}/items"))
                        .body(format!("item {n}"))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), StatusCode::CREATED, "push to q-{n:05}");
                }
            })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(600), async {
        for worker in workers {
            worker.await.unwrap();
        }
    })
    .await
    .expect("10,000 pushes within 600 s");

    // Let the sampler publish its gauges too, so they are in the count.
    let other_depth = format!("{QUEUE_DEPTH}{{queue=\"{OVERFLOW_QUEUE_LABEL}\",kind=\"fifo\"}}");
    common::eventually(
        "the sampled depth gauge of _other",
        Duration::from_secs(60),
        || {
            let (client, url, other_depth) = (&client, &daemon.metrics_url, &other_depth);
            async move { scrape(client, url).await.contains(other_depth.as_str()) }
        },
    )
    .await;

    let text = scrape(&client, &daemon.metrics_url).await;
    let queues = queue_labels(&text);
    eprintln!(
        "{QUEUES} queues: scrape of {} bytes, {} distinct queue labels",
        text.len(),
        queues.len()
    );
    // The sampler reads at most `metrics_sample_queues_max` queues a pass,
    // so the depth gauges cover that many queues, not all of them.
    eprintln!(
        "sampled depth over all labels: {}",
        total(&text, QUEUE_DEPTH, &[])
    );
    assert!(
        text.len() < SCRAPE_BYTES_MAX,
        "scrape of {} bytes after {QUEUES} queues",
        text.len()
    );
    assert!(
        queues.len() <= LABELS_MAX + 1,
        "{} distinct queue labels (cap {LABELS_MAX} + {OVERFLOW_QUEUE_LABEL}): {queues:?}",
        queues.len()
    );
    assert!(queues.contains(OVERFLOW_QUEUE_LABEL), "{queues:?}");
    // Capping relabels, it does not drop: every push is counted once.
    let pushes = ["op=\"push\"", "outcome=\"ok\""];
    assert_eq!(total(&text, OPERATIONS, &pushes), QUEUES as f64);
    let other = format!("queue=\"{OVERFLOW_QUEUE_LABEL}\"");
    let overflow = [pushes[0], pushes[1], other.as_str()];
    assert_eq!(
        total(&text, OPERATIONS, &overflow),
        (QUEUES - LABELS_MAX) as f64
    );
    daemon.stop().await;
}
