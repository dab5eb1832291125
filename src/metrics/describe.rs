//! What each metric means and its unit, as `# HELP` tells Prometheus:
//! one table per metric type, read once at start-up.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

use super::*;

pub(super) fn describe() {
    for &(name, unit, help) in COUNTERS {
        describe_counter!(name, unit, help);
    }
    for &(name, unit, help) in GAUGES {
        describe_gauge!(name, unit, help);
    }
    for &(name, unit, help) in HISTOGRAMS {
        describe_histogram!(name, unit, help);
    }
}

/// The counters: name, unit, help.
const COUNTERS: &[(&str, Unit, &str)] = &[
    (
        OPERATIONS,
        Unit::Count,
        "API operations by queue, op and outcome.",
    ),
    (
        CONFLICTS,
        Unit::Count,
        "Commit conflicts by protocol step (direct_pop, fulfill, withdraw, collect, reap, expire, settle).",
    ),
    (
        PUSHED,
        Unit::Count,
        "Items pushed, by queue (counted when their commit returns; a delayed item when pushed).",
    ),
    (
        POPS,
        Unit::Count,
        "Items delivered, by queue and path (direct or staged).",
    ),
    (
        HTTP_RESPONSES,
        Unit::Count,
        "API responses by status code, unknown routes (404) and methods (405) included.",
    ),
    (
        RESP_COMMANDS,
        Unit::Count,
        "RESP (Redis protocol) commands by command and outcome (ok, empty, error).",
    ),
    (
        RESP_CLOSED,
        Unit::Count,
        "RESP connections the daemon refused or closed, by reason (connections_max, protocol, buffer_max_bytes).",
    ),
    (
        SQS_REQUESTS,
        Unit::Count,
        "SQS API calls by action and outcome (ok, or the SQS error's shape, e.g. QueueDoesNotExist).",
    ),
    (
        REQUESTS_EXPIRED,
        Unit::Count,
        "Requests cleared unserved at their deadline.",
    ),
    (
        RESULTS_REAPED,
        Unit::Count,
        "Uncollected results returned to their queue.",
    ),
    (ACKS, Unit::Count, "Leases acked: items done."),
    (
        NACKS,
        Unit::Count,
        "Leases nacked: items returned (or dead-lettered) by their worker.",
    ),
    (
        REDELIVERIES,
        Unit::Count,
        "Expired leases whose item went back to its queue for another delivery.",
    ),
    (
        DEAD_LETTERED,
        Unit::Count,
        "Items moved to the dead-letter queue after max_deliveries, by the queue they left.",
    ),
    (
        PUT_BACKS,
        Unit::Count,
        "Items taken by pops whose caller left, put back where they were (not deliveries).",
    ),
    (
        DROPPED_ITEMS,
        Unit::Count,
        "Items a purge or delete dropped (visible, delayed, leased, uncollected results); counted when it ends, answered or not.",
    ),
    (
        EXPIRED,
        Unit::Count,
        "Items dropped because their retention (retention_ms) ended: visible, delayed, waiting behind a group head, or leased past it.",
    ),
    (
        DUE_ROWS,
        Unit::Count,
        "Due-index entries the timer read (leases, delayed items, reap appointments).",
    ),
    (
        SETTLE_COMMITS,
        Unit::Count,
        "Settle transactions committed; concurrent acks, nacks and extends of a queue share one.",
    ),
];

/// The gauges: name, unit, help.
const GAUGES: &[(&str, Unit, &str)] = &[
    (RESP_CONNECTIONS, Unit::Count, "RESP connections open now."),
    (
        REQUESTS_WAITING,
        Unit::Count,
        "Pop requests waiting to be fulfilled (sampled).",
    ),
    (
        BUILD_INFO,
        Unit::Count,
        "1, labelled with the running hotq version.",
    ),
    (QUEUE_DEPTH, Unit::Count, "Items in the queue (sampled)."),
    (
        super::fair::FAIR_KEY_BACKLOG,
        Unit::Count,
        "Items waiting under a fairness key, for each fair queue's largest keys (sampled).",
    ),
    (
        QUEUE_DEAD_LETTER,
        Unit::Count,
        "1 for a dead-letter queue (its name ends in .dead, or a queue names it as its dead_letter_queue), 0 for a live queue (sampled).",
    ),
    (
        OLDEST_ITEM_AGE,
        Unit::Seconds,
        "Age of the queue's oldest item (sampled).",
    ),
    (
        PANICS,
        Unit::Count,
        "Panics in any task of the daemon (each a bug; the daemon goes on serving).",
    ),
    (
        STORE_UNAVAILABLE,
        Unit::Count,
        "1 while the store has failed or does not answer: the API answers 503 store_unavailable \
         and the daemon exits after store_failure_exit_ms.",
    ),
    (
        LEASED_ITEMS,
        Unit::Count,
        "Items delivered under a lease and not yet acked, nacked or expired (sampled).",
    ),
    (
        QUEUE_PAUSED,
        Unit::Count,
        "1 while the queue is paused: it takes pushes and hands nothing out (sampled).",
    ),
    (
        DELAYED_ITEMS,
        Unit::Count,
        "Items pushed or nacked with a delay, not yet visible (sampled).",
    ),
];

/// The histograms: name, unit, help.
const HISTOGRAMS: &[(&str, Unit, &str)] = &[
    (
        FULFILL_BATCH_SIZE,
        Unit::Count,
        "Requests served per fulfillment transaction.",
    ),
    (
        POP_LATENCY,
        Unit::Seconds,
        "Pop service time by path: call to item, less the time the pop waited with its queue \
         empty (see hotq_pop_empty_wait_seconds). Pops that delivered nothing are not recorded.",
    ),
    (
        POP_EMPTY_WAIT,
        Unit::Seconds,
        "Time a delivered pop waited with its queue empty before its item was pushed (0 when \
         items were there): long-poll idling, not the daemon's work.",
    ),
    (
        ITEM_WAIT,
        Unit::Seconds,
        "Item wait from enqueue to delivery.",
    ),
    (
        STORE_COMMIT_LATENCY,
        Unit::Seconds,
        "Store commit latency, submit to durable answer.",
    ),
    (
        DUE_LATENESS,
        Unit::Seconds,
        "Leases expired and delayed items revealed: commit time minus due time.",
    ),
    (
        SETTLE_BATCH_SIZE,
        Unit::Count,
        "Acks, nacks and extends per settle transaction.",
    ),
    (
        STORE_COMMIT_GROUP_SIZE,
        Unit::Count,
        "Transactions each fsync carried: the accepted writing transactions of one group commit \
         (embedded store). Under durability = \"buffered\" no fsync is made and this counts the \
         transactions of each group written to the OS in one write.",
    ),
    (
        FSYNC_SECONDS,
        Unit::Seconds,
        "Latency of making one commit group durable: the journal append and its fsync, which \
         dominates (embedded store; without queueing before it). Under durability = \"buffered\" \
         no fsync is made and nothing is recorded.",
    ),
];
