//! Samples depth, waiting requests, leased and delayed items and oldest-item age of the queues this
//! daemon serves (and those in the staging registry), at a fixed interval
//! and for a bounded number of queues, so a scrape never scans a queue.
//! Depth and waiting come from the counters pushes, pops and requests
//! maintain with atomic adds; the oldest age from one snapshot read of the
//! head.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::AppState;
use super::fifo::queue_stats;
use crate::keys::QueueKeys;
use crate::metrics::{
    DELAYED_ITEMS, LEASED_ITEMS, OLDEST_ITEM_AGE, QUEUE_DEPTH, REQUESTS_WAITING, queue_label,
};
use crate::staging::reap::registered_queues;
use crate::store::Store;

/// Samples until `stop` turns true.
pub async fn run<S: Store>(state: Arc<AppState<S>>, mut stop: watch::Receiver<bool>) {
    let interval = Duration::from_millis(state.config.metrics_sample_interval_ms);
    loop {
        sample_once(&state).await;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}

/// One pass over at most `metrics_sample_queues_max` queues.
pub async fn sample_once<S: Store>(state: &AppState<S>) {
    let limit = state.config.metrics_sample_queues_max;
    let mut queues: BTreeSet<_> = state
        .known_queues
        .lock()
        .expect("known queue lock")
        .iter()
        .cloned()
        .collect();
    if let Ok(registered) = registered_queues(&state.store).await {
        for keys in registered {
            if queues.len() >= limit {
                break;
            }
            queues.insert((keys.kind(), keys.name().clone()));
        }
    }
    // Queues past the label cap share one label: their depths and
    // waiting counts add up, their oldest age is the oldest of them.
    let mut by_label: BTreeMap<String, [f64; 5]> = BTreeMap::new();
    for (kind, name) in queues.into_iter().take(limit) {
        let keys = QueueKeys::of_kind(kind, &name);
        let Ok(stats) = queue_stats(state, &keys).await else {
            continue;
        };
        let number = |field: &str| stats[field].as_f64().unwrap_or(0.0);
        let entry = by_label.entry(queue_label(name.as_str())).or_default();
        entry[0] += number("depth");
        entry[1] += number("waiting");
        entry[2] = entry[2].max(number("oldest_item_age_ms") / 1_000.0);
        entry[3] += number("leased");
        entry[4] += number("delayed");
    }
    for (label, [depth, waiting, oldest_age_s, leased, delayed]) in by_label {
        metrics::gauge!(QUEUE_DEPTH, "queue" => label.clone()).set(depth);
        metrics::gauge!(REQUESTS_WAITING, "queue" => label.clone()).set(waiting);
        metrics::gauge!(OLDEST_ITEM_AGE, "queue" => label.clone()).set(oldest_age_s);
        metrics::gauge!(LEASED_ITEMS, "queue" => label.clone()).set(leased);
        metrics::gauge!(DELAYED_ITEMS, "queue" => label).set(delayed);
    }
}
