//! Prometheus metrics (DESIGN §6), through the `metrics` facade.
//!
//! Every name starts `hotq_`, every metric is described with a unit, and
//! histograms have buckets chosen for this workload (sub-millisecond pops
//! to multi-second long polls). Queue labels are capped: past
//! `queue_labels_max` distinct queues, further queues are counted under
//! `queue="_other"`, so a client creating millions of queues cannot blow
//! up the exporter.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Operations by queue, op and outcome.
pub const OPERATIONS: &str = "hotq_operations_total";
/// Commit conflicts by protocol step.
pub const CONFLICTS: &str = "hotq_commit_conflicts_total";
/// Items delivered, by queue and path (`direct`, `staged`).
pub const POPS: &str = "hotq_pops_total";
/// Requests waiting, by queue (sampled).
pub const REQUESTS_WAITING: &str = "hotq_requests_waiting";
/// Requests served per fulfillment transaction.
pub const FULFILL_BATCH_SIZE: &str = "hotq_fulfill_batch_size";
/// Pop latency, call to item, by path.
pub const POP_LATENCY: &str = "hotq_pop_latency_seconds";
/// Item wait, enqueue to delivery.
pub const ITEM_WAIT: &str = "hotq_item_wait_seconds";
/// Items in a queue (sampled).
pub const QUEUE_DEPTH: &str = "hotq_queue_depth";
/// Age of a queue's oldest item (sampled).
pub const OLDEST_ITEM_AGE: &str = "hotq_oldest_item_age_seconds";
/// Requests cleared unserved at their deadline, by queue.
pub const REQUESTS_EXPIRED: &str = "hotq_requests_expired_total";
/// Uncollected results returned to their queue, by queue.
pub const RESULTS_REAPED: &str = "hotq_results_reaped_total";
/// Items held under a lease, by queue (sampled).
pub const LEASED_ITEMS: &str = "hotq_leased_items";
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
const BATCH_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1_024.0,
];

struct Labels {
    max: usize,
    seen: Mutex<HashSet<String>>,
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static LABELS: OnceLock<Labels> = OnceLock::new();

/// Installs the Prometheus recorder once per process and returns its
/// handle (later calls return the same handle; the first cap wins).
pub fn install(queue_labels_max: usize) -> PrometheusHandle {
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
            describe();
            register_at_start();
            handle
        })
        .clone()
}

fn describe() {
    describe_counter!(
        OPERATIONS,
        Unit::Count,
        "API operations by queue, op and outcome."
    );
    describe_counter!(
        CONFLICTS,
        Unit::Count,
        "Commit conflicts by protocol step (direct_pop, fulfill, withdraw, collect, reap, expire, reveal)."
    );
    describe_counter!(
        POPS,
        Unit::Count,
        "Items delivered, by queue and path (direct or staged)."
    );
    describe_gauge!(
        REQUESTS_WAITING,
        Unit::Count,
        "Pop requests waiting to be fulfilled (sampled)."
    );
    describe_histogram!(
        FULFILL_BATCH_SIZE,
        Unit::Count,
        "Requests served per fulfillment transaction."
    );
    describe_histogram!(
        POP_LATENCY,
        Unit::Seconds,
        "Pop latency from call to item, by path."
    );
    describe_histogram!(
        ITEM_WAIT,
        Unit::Seconds,
        "Item wait from enqueue to delivery."
    );
    describe_gauge!(QUEUE_DEPTH, Unit::Count, "Items in the queue (sampled).");
    describe_gauge!(
        OLDEST_ITEM_AGE,
        Unit::Seconds,
        "Age of the queue's oldest item (sampled)."
    );
    describe_gauge!(
        STORE_UNAVAILABLE,
        Unit::Count,
        "1 while the store has failed or does not answer: the API answers 503 store_unavailable \
         and the daemon exits after store_failure_exit_ms."
    );
    describe_counter!(
        REQUESTS_EXPIRED,
        Unit::Count,
        "Requests cleared unserved at their deadline."
    );
    describe_counter!(
        RESULTS_REAPED,
        Unit::Count,
        "Uncollected results returned to their queue."
    );
    describe_gauge!(
        LEASED_ITEMS,
        Unit::Count,
        "Items delivered under a lease and not yet acked, nacked or expired (sampled)."
    );
    describe_gauge!(
        DELAYED_ITEMS,
        Unit::Count,
        "Items pushed or nacked with a delay, not yet visible (sampled)."
    );
    describe_counter!(ACKS, Unit::Count, "Leases acked: items done.");
    describe_counter!(
        NACKS,
        Unit::Count,
        "Leases nacked: items returned (or dead-lettered) by their worker."
    );
    describe_counter!(
        REDELIVERIES,
        Unit::Count,
        "Expired leases whose item went back to its queue for another delivery."
    );
    describe_counter!(
        DEAD_LETTERED,
        Unit::Count,
        "Items moved to the dead-letter queue after max_deliveries, by the queue they left."
    );
    describe_histogram!(
        STORE_COMMIT_LATENCY,
        Unit::Seconds,
        "Store commit latency, submit to durable answer."
    );
    describe_counter!(
        PUT_BACKS,
        Unit::Count,
        "Items taken by pops whose caller left, put back where they were (not deliveries)."
    );
    describe_histogram!(
        DUE_LATENESS,
        Unit::Seconds,
        "Leases expired and delayed items revealed: commit time minus due time."
    );
    describe_counter!(
        DUE_ROWS,
        Unit::Count,
        "Due-index entries the timer read (leases, delayed items, reap appointments)."
    );
    describe_counter!(
        SETTLE_COMMITS,
        Unit::Count,
        "Settle transactions committed; concurrent acks, nacks and extends of a queue share one."
    );
    describe_histogram!(
        SETTLE_BATCH_SIZE,
        Unit::Count,
        "Acks, nacks and extends per settle transaction."
    );
    describe_histogram!(
        STORE_COMMIT_GROUP_SIZE,
        Unit::Count,
        "Transactions each fsync carried: the accepted writing transactions of one group commit \
         (embedded store). Under durability = \"buffered\" no fsync is made and this counts the \
         transactions of each group written to the OS in one write."
    );
    describe_histogram!(
        FSYNC_SECONDS,
        Unit::Seconds,
        "Latency of making one commit group durable: the journal append and its fsync, which \
         dominates (embedded store; without queueing before it). Under durability = \"buffered\" \
         no fsync is made and nothing is recorded."
    );
}

/// Registers the store's histograms, so they are exported (at 0) before
/// the first commit: the store opens before the recorder is installed, so
/// it cannot register them itself.
fn register_at_start() {
    metrics::gauge!(STORE_UNAVAILABLE).set(0.0);
    let _ = metrics::histogram!(STORE_COMMIT_GROUP_SIZE);
    let _ = metrics::histogram!(FSYNC_SECONDS);
}

/// The label value for `queue`: its name while fewer than the cap have
/// been seen, else [`OVERFLOW_QUEUE_LABEL`]. Without [`install`] every
/// name passes (nothing is exported anyway).
pub fn queue_label(queue: &str) -> String {
    let Some(labels) = LABELS.get() else {
        return queue.to_string();
    };
    let mut seen = labels.seen.lock().expect("label set lock");
    if seen.contains(queue) {
        return queue.to_string();
    }
    if seen.len() < labels.max {
        seen.insert(queue.to_string());
        return queue.to_string();
    }
    OVERFLOW_QUEUE_LABEL.to_string()
}

/// Counts one conflict at protocol step `op`.
pub fn conflict(op: &'static str) {
    metrics::counter!(CONFLICTS, "op" => op).increment(1);
}

/// Counts one API operation.
pub fn operation(queue: &str, op: &'static str, outcome: &'static str) {
    metrics::counter!(OPERATIONS, "queue" => queue_label(queue), "op" => op, "outcome" => outcome)
        .increment(1);
}
