//! Prometheus metrics (docs/design.md §6), through the `metrics` facade.
//!
//! Every name starts `hotq_`, every metric is described with a unit, and
//! histograms have buckets chosen for this workload (sub-millisecond pops
//! to multi-second long polls). Queue labels are capped: past
//! `queue_labels_max` distinct queues, further queues are counted under
//! `queue="_other"`, so a client creating millions of queues cannot blow
//! up the exporter. Queue-labelled metrics also carry `kind` (`fifo`,
//! `priority`): a FIFO queue and a priority queue may share a name.
//!
//! - [`process`]: the `process_*` metrics, read from `/proc/self`.

mod describe;
pub mod fair;
mod handles;
pub(crate) mod process;
pub mod traffic;

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;
use std::time::Instant;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::keys::{QueueKind, QueueName};

/// Operations by queue, op and outcome.
pub const OPERATIONS: &str = "hotq_operations_total";
/// Commit conflicts by protocol step.
pub const CONFLICTS: &str = "hotq_commit_conflicts_total";
/// Items pushed (committed), by queue; delayed items when pushed.
pub const PUSHED: &str = "hotq_pushed_items_total";
/// Items delivered, by queue and path (`direct`, `staged`).
pub const POPS: &str = "hotq_pops_total";
/// Pops a queue's limit held back, by queue and `limit` (`rate`,
/// `leases`): a direct pop refused counts once, a waiting pop once per
/// fulfill round that could not serve it.
pub const POPS_THROTTLED: &str = "hotq_pops_throttled_total";
/// Requests waiting, by queue (sampled).
pub const REQUESTS_WAITING: &str = "hotq_requests_waiting";
/// Requests served per fulfillment transaction.
pub const FULFILL_BATCH_SIZE: &str = "hotq_fulfill_batch_size";
/// Pop service time, by path: call to item, less the time the pop waited
/// with its queue empty (that is [`POP_EMPTY_WAIT`]).
pub const POP_LATENCY: &str = "hotq_pop_latency_seconds";
/// Time a delivered pop waited with its queue empty, before its item came.
pub const POP_EMPTY_WAIT: &str = "hotq_pop_empty_wait_seconds";
/// API responses by status code, unknown routes included.
pub const HTTP_RESPONSES: &str = "hotq_http_responses_total";
/// SQS API calls by action and outcome (see [`crate::sqs`]).
pub const SQS_REQUESTS: &str = "hotq_sqs_requests_total";
/// RESP (Redis protocol) commands by command and outcome (`ok`, `empty`,
/// `error`; see `crate::resp`): the RESP listener's counterpart of
/// [`HTTP_RESPONSES`]; its queue operations count in [`OPERATIONS`] too.
pub const RESP_COMMANDS: &str = "hotq_resp_commands_total";
/// RESP connections open now.
pub const RESP_CONNECTIONS: &str = "hotq_resp_connections";
/// RESP connections refused or closed by the daemon, by reason
/// (`connections_max`, `protocol`, `buffer_max_bytes`).
pub const RESP_CLOSED: &str = "hotq_resp_connections_closed_total";
/// 1, labelled with the running version.
pub const BUILD_INFO: &str = "hotq_build_info";
/// Item wait, enqueue to delivery.
pub const ITEM_WAIT: &str = "hotq_item_wait_seconds";
/// Items in a queue (sampled).
pub const QUEUE_DEPTH: &str = "hotq_queue_depth";
/// 1 for a dead-letter queue (by role, see `crate::queue::dead_letters`), 0 for a
/// live one (sampled): dashboards and alerts tell the two apart with it.
pub const QUEUE_DEAD_LETTER: &str = "hotq_queue_dead_letter";
/// Age of a queue's oldest item (sampled).
pub const OLDEST_ITEM_AGE: &str = "hotq_oldest_item_age_seconds";
/// Requests cleared unserved at their deadline, by queue.
pub const REQUESTS_EXPIRED: &str = "hotq_requests_expired_total";
/// Uncollected results returned to their queue, by queue.
pub const RESULTS_REAPED: &str = "hotq_results_reaped_total";
/// Items held under a lease, by queue (sampled).
pub const LEASED_ITEMS: &str = "hotq_leased_items";
/// Gauge: 1 while the queue is paused (takes pushes, hands nothing out), else 0.
pub const QUEUE_PAUSED: &str = "hotq_queue_paused";
/// Delayed items not yet visible, by queue (sampled).
pub const DELAYED_ITEMS: &str = "hotq_delayed_items";
/// Leases acked, by queue.
pub const ACKS: &str = "hotq_acks_total";
/// Leases nacked, by queue.
pub const NACKS: &str = "hotq_nacks_total";
/// Expired leases whose item went back to its queue, by queue.
pub const REDELIVERIES: &str = "hotq_redeliveries_total";
/// Items moved to a dead-letter queue, by the queue they left.
pub const DEAD_LETTERED: &str = "hotq_dead_lettered_total";
/// Items of pops whose caller left, put back where they were, by queue.
pub const PUT_BACKS: &str = "hotq_put_backs_total";
/// Items a purge or delete dropped (visible, delayed, leased and
/// uncollected results), by queue: with pushes, pops and the depth, the
/// daemon's own books of a queue balance even when a client never reads
/// its purge's or delete's answer (a deleted queue's series are hidden
/// from the exporter until it is used again, see [`forget_queue`]).
pub const DROPPED_ITEMS: &str = "hotq_dropped_items_total";
/// Items dropped because their retention ended (`retention_ms`), by queue.
pub const EXPIRED: &str = "hotq_expired_items_total";
/// Lateness of leases expired and delayed items revealed: commit time
/// minus due time.
pub const DUE_LATENESS: &str = "hotq_due_lateness_seconds";
/// Due-index entries the timer read (its work follows these, not the
/// number of queues).
pub const DUE_ROWS: &str = "hotq_timer_due_rows_total";
/// Settle transactions committed (acks, nacks and extends share them).
pub const SETTLE_COMMITS: &str = "hotq_settle_commits_total";
/// Settles (acks, nacks, extends) per settle transaction.
pub const SETTLE_BATCH_SIZE: &str = "hotq_settle_batch_size";
/// Store commit latency, submit to durable answer.
pub const STORE_COMMIT_LATENCY: &str = "hotq_store_commit_seconds";
/// Transactions each fsync carried (embedded store).
pub const STORE_COMMIT_GROUP_SIZE: &str = "hotq_store_commit_group_size";
/// Latency of one group's durable journal write: append and fsync
/// (embedded store).
pub const FSYNC_SECONDS: &str = "hotq_fsync_seconds";

/// 1 while the store has failed or does not answer its health probe
/// (the daemon then answers 503 and exits after `store_failure_exit_ms`).
pub const STORE_UNAVAILABLE: &str = "hotq_store_unavailable";
/// Panics in any task of the daemon (a handler, a round, the timer). Each
/// is a bug; none stops the others (locks do not poison, a handler's
/// panic answers 500), so this counter is how they are seen.
pub const PANICS: &str = "hotq_panics_total";

/// The label value for queues past the label cap.
pub const OVERFLOW_QUEUE_LABEL: &str = "_other";
/// The label value for requests naming an invalid queue (they must not
/// take label slots).
pub const INVALID_QUEUE_LABEL: &str = "_invalid";

const LATENCY_BUCKETS_S: &[f64] = &[
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];
const WAIT_BUCKETS_S: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3_600.0,
    21_600.0, 86_400.0,
];
/// An fsync takes tens of µs on a battery-backed cache, ms on SSDs, tens
/// of ms on spinning or networked disks.
const FSYNC_BUCKETS_S: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];
/// Sizes are whole numbers, at least 1. `histogram_quantile` interpolates
/// inside a bucket from its lower edge: with `le=1` first, a stream of
/// batches of 1 read as p50 0.5. The (always empty) bucket just below 1
/// makes 1's bucket span (0.999, 1], so they read as 1.
const BATCH_BUCKETS: &[f64] = &[
    0.999, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1_024.0,
];
/// A long poll's wait is bounded by `wait_max_ms` (at most 10 minutes).
const EMPTY_WAIT_BUCKETS_S: &[f64] = &[
    0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

struct Labels {
    max: usize,
    seen: Mutex<HashSet<String>>,
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static LABELS: OnceLock<Labels> = OnceLock::new();

/// Counts every panic of the process in [`PANICS`], then runs the hook
/// that was there (the default one prints it).
fn count_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        metrics::counter!(PANICS).increment(1);
        previous(info);
    }));
}

/// True once [`install`] has installed the recorder.
fn installed() -> bool {
    HANDLE.get().is_some()
}

/// Installs the Prometheus recorder once per process and returns its
/// handle (later calls return the same handle; the first cap wins).
pub fn install(queue_labels_max: usize) -> PrometheusHandle {
    static PANIC_HOOK: std::sync::Once = std::sync::Once::new();
    PANIC_HOOK.call_once(count_panics);
    LABELS.get_or_init(|| Labels {
        max: queue_labels_max.max(1),
        seen: Mutex::new(HashSet::new()),
    });
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(POP_LATENCY.into()), LATENCY_BUCKETS_S)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(STORE_COMMIT_LATENCY.into()),
                        LATENCY_BUCKETS_S,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(ITEM_WAIT.into()), WAIT_BUCKETS_S)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(FULFILL_BATCH_SIZE.into()),
                        BATCH_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(STORE_COMMIT_GROUP_SIZE.into()),
                        BATCH_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(SETTLE_BATCH_SIZE.into()), BATCH_BUCKETS)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(DUE_LATENESS.into()), LATENCY_BUCKETS_S)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(Matcher::Full(FSYNC_SECONDS.into()), FSYNC_BUCKETS_S)
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(POP_EMPTY_WAIT.into()),
                        EMPTY_WAIT_BUCKETS_S,
                    )
                })
                .expect("bucket lists are non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (an embedding
            // application's); then this handle renders nothing of ours.
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!(
                    "a metrics recorder was already installed; /metrics shows only what it records"
                );
            }
            describe::describe();
            register_at_start();
            handle
        })
        .clone()
}

/// Protocol steps that count conflicts (see [`conflict`]): every `op`
/// the code passes, and no other. `expire` is a due-index sweep's round,
/// whatever it consumed (expired leases, delayed items, dedup ids, group
/// hand-offs); `settle` is a batch of acks, nacks and extends.
pub const CONFLICT_OPS: &[&str] = &[
    "direct_pop",
    "fulfill",
    "withdraw",
    "collect",
    "reap",
    "expire",
    "settle",
];

/// Status codes the API answers with; registered at 0 so error ratios
/// have data before the first error.
const STATUSES: &[u16] = &[200, 201, 204, 400, 401, 404, 405, 409, 413, 500, 503];

/// Registers every metric whose label sets are known up front, so each is
/// exported (at 0) from start-up: the exporter renders only what was
/// registered, and a series that appears only when it first fires shows
/// "No data" in Grafana and breaks `rate` over its first increment.
/// Queue-labelled series are registered when their queue is first served
/// ([`register_queue`]).
fn register_at_start() {
    metrics::gauge!(STORE_UNAVAILABLE).set(0.0);
    metrics::counter!(PANICS).absolute(0);
    metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    for histogram in [
        STORE_COMMIT_GROUP_SIZE,
        FSYNC_SECONDS,
        STORE_COMMIT_LATENCY,
        FULFILL_BATCH_SIZE,
        SETTLE_BATCH_SIZE,
        ITEM_WAIT,
        POP_EMPTY_WAIT,
        DUE_LATENESS,
    ] {
        let _ = metrics::histogram!(histogram);
    }
    for path in ["direct", "staged"] {
        let _ = metrics::histogram!(POP_LATENCY, "path" => path);
    }
    for op in CONFLICT_OPS {
        metrics::counter!(CONFLICTS, "op" => *op).absolute(0);
    }
    for counter in [DUE_ROWS, SETTLE_COMMITS] {
        metrics::counter!(counter).absolute(0);
    }
    for status in STATUSES {
        metrics::counter!(HTTP_RESPONSES, "status" => status.to_string()).absolute(0);
    }
}

/// The `kind` label of a queue kind.
pub fn kind_label(kind: QueueKind) -> &'static str {
    match kind {
        QueueKind::Fifo => "fifo",
        QueueKind::Priority => "priority",
    }
}

/// Queues deleted since they were last used, as `(kind, label)`, with
/// when they were forgotten: their series are left out of [`render`]. The
/// `metrics` registry cannot remove one series, so the exporter hides them
/// instead; only labelled queues enter, so this holds at most two entries
/// per label slot.
static FORGOTTEN: Mutex<BTreeMap<(&'static str, String), Instant>> = Mutex::new(BTreeMap::new());

/// Drops the deleted queue's series from the exporter's output, until the
/// queue is used again ([`register_queue`]) or found in the store again
/// ([`found_in_store`]). A queue counted under `_other` stays in that sum.
pub fn forget_queue(kind: QueueKind, queue: &QueueName) {
    fair::forget(kind, queue);
    let labelled = LABELS
        .get()
        .is_some_and(|labels| labels.seen.lock().contains(queue.as_str()));
    if labelled {
        FORGOTTEN.lock().insert(
            (kind_label(kind), queue.as_str().to_string()),
            Instant::now(),
        );
    }
}

/// The sampler found `queue` in a store read that began at `read_began`:
/// a queue forgotten before that exists again, made by no push or pop of
/// this daemon (an item dead-lettered into it, a redrive, another
/// daemon), and its series are exported again. One forgotten after the
/// read began stays hidden: its delete may have come after the read.
pub fn found_in_store(kind: QueueKind, queue: &QueueName, read_began: Instant) {
    let mut forgotten = FORGOTTEN.lock();
    let key = (kind_label(kind), queue.as_str().to_string());
    if forgotten.get(&key).is_some_and(|at| *at < read_began) {
        forgotten.remove(&key);
    }
}

/// The exporter's text from `handle`, without the series of deleted
/// queues (see [`forget_queue`]).
pub fn render(handle: &PrometheusHandle) -> String {
    let text = handle.render();
    let forgotten = FORGOTTEN.lock().clone();
    let fair_keys_left = fair::any_left();
    if forgotten.is_empty() && !fair_keys_left {
        return text;
    }
    let mut kept = String::with_capacity(text.len());
    for line in text.lines() {
        if !line.starts_with('#') && names_forgotten(line, &forgotten) {
            continue;
        }
        if fair_keys_left && fair::left_the_top(line) {
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    kept
}

/// True when the sample `line`'s labels name a forgotten queue and kind.
fn names_forgotten(line: &str, forgotten: &BTreeMap<(&'static str, String), Instant>) -> bool {
    let Some(labels) = line
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
    else {
        return false;
    };
    // Queue names and kinds hold no quote or comma, so a plain split works.
    let value = |name: &str| {
        labels.0.split(',').find_map(|pair| {
            pair.strip_prefix(name)
                .and_then(|rest| rest.strip_prefix("=\""))
                .and_then(|rest| rest.strip_suffix('"'))
        })
    };
    let kind = match value("kind") {
        Some("fifo") => kind_label(QueueKind::Fifo),
        Some("priority") => kind_label(QueueKind::Priority),
        _ => return false,
    };
    value("queue").is_some_and(|queue| forgotten.contains_key(&(kind, queue.to_string())))
}

/// Registers `queue`'s counters at 0 (see [`register_at_start`]); called
/// when the daemon starts serving it. `absolute(0)` on a counter that has
/// counted already leaves it as it is (counters only grow).
pub fn register_queue(kind: QueueKind, queue: &QueueName) {
    FORGOTTEN
        .lock()
        .remove(&(kind_label(kind), queue.as_str().to_string()));
    let label = queue_label(queue.as_str());
    let kind_name = kind_label(kind);
    let per_queue = |name: &'static str| {
        metrics::counter!(name, "queue" => label.clone(), "kind" => kind_name).absolute(0);
    };
    for name in [
        PUSHED,
        REQUESTS_EXPIRED,
        RESULTS_REAPED,
        PUT_BACKS,
        DROPPED_ITEMS,
        EXPIRED,
    ] {
        per_queue(name);
    }
    for path in ["direct", "staged"] {
        metrics::counter!(POPS, "queue" => label.clone(), "kind" => kind_name, "path" => path)
            .absolute(0);
    }
    let (push, pop) = match kind {
        QueueKind::Fifo => ("push", "pop"),
        QueueKind::Priority => ("pq_push", "pq_pop"),
    };
    for (op, outcome) in [
        (push, "ok"),
        (push, "error"),
        (pop, "ok"),
        (pop, "empty"),
        (pop, "error"),
    ] {
        metrics::counter!(OPERATIONS, "queue" => label.clone(), "kind" => kind_name, "op" => op, "outcome" => outcome)
            .absolute(0);
    }
    // Both kinds lease (priority pops with `lease_ms`).
    for name in [ACKS, NACKS, REDELIVERIES, DEAD_LETTERED] {
        per_queue(name);
    }
}

/// Counts `count` items of queue `keys` pushed (their commit returned).
pub fn pushed(keys: &crate::keys::QueueKeys, count: usize) {
    crate::metrics::traffic::pushed(keys.kind(), keys.name().as_str(), count as u64);
    queue_count(PUSHED, keys.kind(), keys.name(), count as u64);
}

/// Adds `n` to the counter `name` of queue `queue` of kind `kind` (its
/// labels are `queue` and `kind` only): the one way to count a
/// queue-labelled event, through the handles kept for the hot path (see
/// `handles.rs`), under the queue label cap.
pub fn queue_count(name: &'static str, kind: QueueKind, queue: &QueueName, n: u64) {
    let settled = match name {
        ACKS => Some(traffic::Settled::Acked),
        NACKS => Some(traffic::Settled::Nacked),
        DEAD_LETTERED => Some(traffic::Settled::DeadLettered),
        _ => None,
    };
    if let Some(settled) = settled {
        traffic::settled(kind, queue.as_str(), settled, n);
    }
    let kind = kind_label(kind);
    handles::count_queue(queue.as_str(), (name, kind, "", ""), n, |queue| {
        let counter = metrics::counter!(name, "queue" => queue_label(queue), "kind" => kind);
        (counter, true)
    });
}

/// Counts one API response by status.
pub fn http_response(status: u16) {
    handles::count_status(
        status,
        || metrics::counter!(HTTP_RESPONSES, "status" => status.to_string()),
    );
}

/// The label value for `queue`: its name while fewer than the cap have
/// been seen, else [`OVERFLOW_QUEUE_LABEL`]. Without [`install`] every
/// name passes (nothing is exported anyway).
pub fn queue_label(queue: &str) -> String {
    let Some(labels) = LABELS.get() else {
        return queue.to_string();
    };
    let mut seen = labels.seen.lock();
    if seen.contains(queue) {
        return queue.to_string();
    }
    if seen.len() < labels.max {
        seen.insert(queue.to_string());
        return queue.to_string();
    }
    OVERFLOW_QUEUE_LABEL.to_string()
}

/// Counts one conflict at protocol step `op` (one of [`CONFLICT_OPS`],
/// which registers them all at 0).
pub fn conflict(op: &'static str) {
    debug_assert!(
        CONFLICT_OPS.contains(&op),
        "conflict op {op} is not in CONFLICT_OPS"
    );
    metrics::counter!(CONFLICTS, "op" => op).increment(1);
}

/// Counts one API operation. Handlers count a request before they know
/// whether its queue name is valid: an invalid name is counted under
/// [`INVALID_QUEUE_LABEL`], so it never takes a label slot (a hundred bad
/// names would push real queues into `_other`). Priority-queue ops are
/// named `pq_*`, which gives the kind.
pub fn operation(queue: &str, op: &'static str, outcome: &'static str) {
    let kind = if op.starts_with("pq_") {
        QueueKind::Priority
    } else {
        QueueKind::Fifo
    };
    let make = |label: String| metrics::counter!(OPERATIONS, "queue" => label, "kind" => kind_label(kind), "op" => op, "outcome" => outcome);
    // A name found among the kept handles was valid when it was kept:
    // only a new one is validated.
    let key = (OPERATIONS, kind_label(kind), op, outcome);
    handles::count_queue(queue, key, 1, |queue| match QueueName::new(queue) {
        Ok(name) => (make(queue_label(name.as_str())), true),
        Err(_) => (make(INVALID_QUEUE_LABEL.to_string()), false),
    });
}

/// Counts `n` items delivered from `queue` by `path` (`direct`, `staged`).
pub fn pops(kind: QueueKind, queue: &QueueName, path: &'static str, n: u64) {
    crate::metrics::traffic::popped(kind, queue.as_str(), n, path == "direct");
    let kind = kind_label(kind);
    handles::count_queue(queue.as_str(), (POPS, kind, path, ""), n, |queue| {
        let counter =
            metrics::counter!(POPS, "queue" => queue_label(queue), "kind" => kind, "path" => path);
        (counter, true)
    });
}

/// Counts `n` pops of `queue` held back by its `limit` (`rate`, `leases`).
pub fn throttled(kind: QueueKind, queue: &QueueName, limit: &'static str, n: u64) {
    let kind = kind_label(kind);
    handles::count_queue(
        queue.as_str(),
        (POPS_THROTTLED, kind, limit, ""),
        n,
        |queue| {
            let counter = metrics::counter!(POPS_THROTTLED, "queue" => queue_label(queue), "kind" => kind, "limit" => limit);
            (counter, true)
        },
    );
}

/// Records a delivered pop's service time and empty wait, in seconds,
/// and each of its items' enqueue-to-delivery wait.
pub fn delivery(
    path: &'static str,
    latency_s: f64,
    empty_wait_s: f64,
    item_waits_s: impl IntoIterator<Item = f64>,
) {
    handles::record(
        POP_LATENCY,
        path,
        [latency_s],
        || metrics::histogram!(POP_LATENCY, "path" => path),
    );
    handles::record(POP_EMPTY_WAIT, "", [empty_wait_s], || {
        metrics::histogram!(POP_EMPTY_WAIT)
    });
    handles::record(ITEM_WAIT, "", item_waits_s, || {
        metrics::histogram!(ITEM_WAIT)
    });
}
