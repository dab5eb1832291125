//! Handles of the metrics every pop and request touches, looked up once.
//!
//! `counter!` and `histogram!` build a labelled key, allocate its label
//! values, hash it and look it up in the recorder's registry on every
//! call: 6.7% of a plain pop's CPU (`docs/profile.md`). A handle stays
//! valid for the life of the process, so the hot path keeps them here,
//! one per label set, in maps bounded like the queue labels themselves.
//! Until the recorder is installed nothing is kept: a handle taken then
//! would count nowhere, forever.

use parking_lot::Mutex;
use std::collections::HashMap;

use metrics::{Counter, Histogram};

/// Most queues whose counters are kept (valid names only); calls for
/// others look up as before.
const QUEUES_CACHED_MAX: usize = 4_096;
/// Most distinct HTTP statuses and histogram label sets kept.
const OTHERS_CACHED_MAX: usize = 256;

/// A queue-labelled counter's name and its other label values, in the
/// order its call site gives them.
pub type QueueCounterKey = (&'static str, &'static str, &'static str, &'static str);

#[derive(Default)]
struct Handles {
    /// By the queue name as called (before `queue_label`), then by key.
    queue_counters: HashMap<String, HashMap<QueueCounterKey, Counter>>,
    statuses: HashMap<u16, Counter>,
    /// By metric name and `path` label ("" when it has none).
    histograms: HashMap<(&'static str, &'static str), Histogram>,
}

static HANDLES: Mutex<Option<Handles>> = Mutex::new(None);

fn with_handles<R>(act: impl FnOnce(&mut Handles) -> R) -> R {
    let mut handles = HANDLES.lock();
    act(handles.get_or_insert_with(Handles::default))
}

/// Adds `n` to the counter `key` of `queue`. `make` registers it the
/// first time (every time while the recorder is not installed) and says
/// whether it may be kept: a name the caller chose without validation is
/// not, or the map would grow with whatever callers send.
pub fn count_queue(
    queue: &str,
    key: QueueCounterKey,
    n: u64,
    make: impl FnOnce(&str) -> (Counter, bool),
) {
    if !super::installed() {
        return make(queue).0.increment(n);
    }
    let counted = with_handles(
        |h| match h.queue_counters.get(queue).and_then(|c| c.get(&key)) {
            Some(counter) => {
                counter.increment(n);
                true
            }
            None => false,
        },
    );
    if counted {
        return;
    }
    // Registered outside the lock: `make` takes the label lock.
    let (counter, keep) = make(queue);
    counter.increment(n);
    if !keep {
        return;
    }
    with_handles(|h| {
        if h.queue_counters.len() < QUEUES_CACHED_MAX || h.queue_counters.contains_key(queue) {
            let per_queue = h.queue_counters.entry(queue.to_string()).or_default();
            per_queue.insert(key, counter);
        }
    });
}

/// Adds one to the responses counter of `status`.
pub fn count_status(status: u16, make: impl FnOnce() -> Counter) {
    if !super::installed() {
        return make().increment(1);
    }
    let counted = with_handles(|h| h.statuses.get(&status).map(|c| c.increment(1)).is_some());
    if !counted {
        let counter = make();
        counter.increment(1);
        with_handles(|h| {
            if h.statuses.len() < OTHERS_CACHED_MAX {
                h.statuses.insert(status, counter);
            }
        });
    }
}

/// Records `values` in histogram `name` with `path` label (`""`: none).
pub fn record(
    name: &'static str,
    path: &'static str,
    values: impl IntoIterator<Item = f64>,
    make: impl FnOnce() -> Histogram,
) {
    if !super::installed() {
        let histogram = make();
        return values.into_iter().for_each(|v| histogram.record(v));
    }
    let histogram = with_handles(|h| h.histograms.get(&(name, path)).cloned());
    let histogram = histogram.unwrap_or_else(|| {
        let histogram = make();
        with_handles(|h| {
            if h.histograms.len() < OTHERS_CACHED_MAX {
                h.histograms.insert((name, path), histogram.clone());
            }
        });
        histogram
    });
    values.into_iter().for_each(|v| histogram.record(v));
}
