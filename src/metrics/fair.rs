//! The backlog of a fair queue's largest fairness keys (issue #40; see
//! `crate::queue::fair::backlog_in`), as a gauge per key. A queue may
//! have any number of keys, so only its largest
//! [`FAIR_KEYS_EXPORTED_MAX`] are published; a key that leaves them is
//! hidden from the exporter's output (the `metrics` registry cannot drop
//! one series), so the series exported stay bounded by the cap per queue.

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::keys::{QueueKind, QueueName};

/// Gauge: items waiting under one fairness key (label `key`; `""` is the
/// default key of items pushed without one), for each fair queue's largest keys (sampled).
pub const FAIR_KEY_BACKLOG: &str = "hotq_fair_key_backlog";
/// Most fairness keys one queue publishes a backlog for.
pub const FAIR_KEYS_EXPORTED_MAX: usize = 10;

/// The keys each queue last published, by kind label and queue label.
type Published = BTreeMap<(&'static str, String), BTreeSet<String>>;

static PUBLISHED: Mutex<Published> = Mutex::new(BTreeMap::new());
/// Set once any key has left its queue's top: only then does rendering
/// look at the lines at all.
static ANY_LEFT: AtomicBool = AtomicBool::new(false);

/// Publishes the backlog of `queue`'s largest keys, `top` (largest first;
/// at most [`FAIR_KEYS_EXPORTED_MAX`] taken). A queue counted under the
/// overflow label publishes none: per-key series of a sum of queues mean
/// nothing.
pub fn publish(kind: QueueKind, queue: &QueueName, top: &[(String, u64)]) {
    let label = super::queue_label(queue.as_str());
    if label == super::OVERFLOW_QUEUE_LABEL {
        return;
    }
    let kind = super::kind_label(kind);
    // A queue without keys that never published any has nothing to hide:
    // no entry is kept for it (the sampler calls this for every FIFO queue).
    if top.is_empty() && !PUBLISHED.lock().contains_key(&(kind, label.clone())) {
        return;
    }
    let top = &top[..top.len().min(FAIR_KEYS_EXPORTED_MAX)];
    for (key, items) in top {
        metrics::gauge!(FAIR_KEY_BACKLOG, "queue" => label.clone(), "kind" => kind, "key" => key.clone())
            .set(*items as f64);
    }
    let keys: BTreeSet<String> = top.iter().map(|(key, _)| key.clone()).collect();
    let previous = PUBLISHED.lock().insert((kind, label), keys.clone());
    if previous.is_some_and(|previous| !previous.is_subset(&keys)) {
        ANY_LEFT.store(true, Ordering::Relaxed);
    }
}

/// Forgets what `queue` published (it was deleted): its keys' lines are
/// hidden until it publishes again.
pub fn forget(kind: QueueKind, queue: &QueueName) {
    let key = (super::kind_label(kind), queue.as_str().to_string());
    let mut published = PUBLISHED.lock();
    if let Some(keys) = published.get_mut(&key)
        && !keys.is_empty()
    {
        keys.clear();
        ANY_LEFT.store(true, Ordering::Relaxed);
    }
}

/// True when some line may need hiding (see [`left_the_top`]).
pub(super) fn any_left() -> bool {
    ANY_LEFT.load(Ordering::Relaxed)
}

/// True when the sample `line` is the backlog of a key no longer among
/// its queue's published keys.
pub(super) fn left_the_top(line: &str) -> bool {
    let Some(labels) = line
        .strip_prefix(FAIR_KEY_BACKLOG)
        .and_then(|rest| rest.strip_prefix('{'))
        .and_then(|rest| rest.split_once('}'))
        .map(|(labels, _)| labels)
    else {
        return false;
    };
    // Queue names, kinds and fairness keys hold no quote or comma.
    let value = |name: &str| {
        labels.split(',').find_map(|pair| {
            pair.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix("=\""))
                .and_then(|rest| rest.strip_suffix('"'))
        })
    };
    let (Some(queue), Some(kind), Some(key)) = (value("queue"), value("kind"), value("key")) else {
        return false;
    };
    let kind = match kind {
        "fifo" => super::kind_label(QueueKind::Fifo),
        "priority" => super::kind_label(QueueKind::Priority),
        _ => return false,
    };
    PUBLISHED
        .lock()
        .get(&(kind, queue.to_string()))
        .is_none_or(|keys| !keys.contains(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(queue: &str, key: &str) -> String {
        format!("{FAIR_KEY_BACKLOG}{{queue=\"{queue}\",kind=\"fifo\",key=\"{key}\"}} 3")
    }

    #[test]
    fn only_the_published_top_keys_are_shown() {
        let queue = QueueName::new("fair-metric-test").unwrap();
        let top: Vec<(String, u64)> = (0..15).map(|n| (format!("k{n}"), 100 - n)).collect();
        publish(QueueKind::Fifo, &queue, &top);
        assert!(!left_the_top(&line("fair-metric-test", "k0")));
        assert!(!left_the_top(&line("fair-metric-test", "k9")));
        assert!(
            left_the_top(&line("fair-metric-test", "k10")),
            "past the cap"
        );
        publish(QueueKind::Fifo, &queue, &[("k3".into(), 7), ("".into(), 2)]);
        assert!(any_left());
        assert!(
            left_the_top(&line("fair-metric-test", "k0")),
            "left the top"
        );
        assert!(!left_the_top(&line("fair-metric-test", "k3")));
        assert!(!left_the_top(&line("fair-metric-test", "")));
        assert!(!left_the_top(
            "hotq_queue_depth{queue=\"fair-metric-test\",kind=\"fifo\"} 3"
        ));
        forget(QueueKind::Fifo, &queue);
        assert!(left_the_top(&line("fair-metric-test", "k3")), "forgotten");
    }
}
