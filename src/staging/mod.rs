//! The high-contention pop protocol (docs/design.md §4), written once for every
//! queue kind and every store. Read in this order:
//!
//! 1. [`pop`]: a pop from its caller's side. On an uncontended queue it is
//!    a [`direct`] pop (snapshot check for waiting requests, read the
//!    first item, clear it, commit). Once the queue is contended every
//!    pop — no wait, long-poll, leased, several items, either end — waits
//!    in the queue's line instead of racing the fulfiller.
//! 2. [`line`](mod@line): the line (`line/`). Two levels: pops waiting in
//!    this process queue in memory (no write per pop); when this process's
//!    fulfiller cannot serve them (its round lost a conflict, or other
//!    processes' requests stand ahead) the line stands in the store's
//!    request subspace as [`counted`] requests (one key for many pops),
//!    which fix its place in request order: its own rounds serve them from
//!    the items left for them ([`line::results`]), and any process's
//!    fulfiller takes over one its owner does not serve ([`takeover`]). A
//!    plain stored request ([`requester`]: register, await its result on a
//!    watch, withdraw with a read conflict) is one pop, for
//!    `requests_in_memory = false`.
//! 3. [`round`]: a fulfill round and its loop (`round/`).
//!    [`round::fulfill`]: one round: in one transaction, snapshot-read a
//!    batch of requests (`round/requests.rs`) and items ([`round::pool`]),
//!    add a read conflict on each one consumed, clear items and requests
//!    (or lower a counted request's count), write leases and stored
//!    results, collect this line's results; given and returned as in
//!    [`round::answer`]. A pop that must not wait is answered "empty"
//!    only by a round whose read found nothing visible.
//!    [`round::fulfillment_loop`]: the loop of rounds per queue, waiting on the
//!    wake key, a push, a pop joining the line, another process serving
//!    this line's counted request, or a request left to another line
//!    turning stale; an unknown commit outcome is resolved by its
//!    [`marker`]. Acks that ride on a pop commit in its round
//!    ([`round::riding`]).
//! 4. [`handoff`]: the hand-off and the give-back. Once a round's commit is
//!    durable its items go to their pops in memory; items whose pop has
//!    gone (its caller hung up, its wait ended) go back to their original
//!    keys; a pop whose caller leaves mid-commit finishes on its own.
//! 5. [`reap`]: results nobody collected go back, requests nobody serves
//!    are cleared, when the due index's timer hands over a queue's reap
//!    appointment (see [`crate::due`]).
//!
//! Exactly-once hand-off: an item leaves `items` in the same commit that
//! writes it to exactly one result, one pop in line, or one direct popper;
//! a result leaves `results` in the same commit that hands it to one pop
//! in line or puts it back.
//! Every commit that consumes a request, item or result holds a
//! read-conflict on it, so two transactions can never both consume it;
//! whichever loses conflicts and re-reads.

pub mod counted;
pub mod direct;
pub mod handoff;
pub mod line;
pub mod marker;
pub mod pop;
pub mod reap;
pub mod registry;
pub mod requester;
pub mod results;
pub mod round;
pub mod takeover;

use std::sync::atomic::{AtomicU64, Ordering};

/// Settings of the staged pop protocol.
#[derive(Debug, Clone)]
pub struct StagingConfig {
    /// Most requests one fulfillment transaction serves.
    pub fulfill_batch_max: usize,
    /// Most payload bytes one fulfillment transaction moves (store
    /// transactions are limited to 10 MB).
    pub fulfill_bytes_max: usize,
    /// How long after its request's deadline an uncollected result is
    /// returned to the queue (covers a live requester's collect latency).
    pub result_grace_ms: u64,
    /// How often the reaper sweeps.
    pub reap_interval_ms: u64,
    /// A fulfiller with no request for this long stops; the next local
    /// registration starts it again.
    pub fulfiller_idle_ms: u64,
    /// Longest a pop may wait.
    pub wait_max_ms: u64,
    /// Longest a pop that must not wait waits in line for the fulfiller's
    /// answer: its next round hands it items or, finding nothing visible,
    /// answers "empty" (a lost race is not an empty queue). A round takes a
    /// few ms; the bound only matters when the fulfiller cannot commit.
    /// With stored requests (which cannot answer "empty"), how long such a
    /// pop waits after losing the race.
    pub lost_race_wait_ms: u64,
    /// Longest a pop that stops waiting waits for a fulfill round that has
    /// already claimed it to answer (the round's commit decides whether an
    /// item, and the acks riding on the pop, went to it). Past it the pop
    /// answers without learning: its acks' outcome is unknown (503), and a
    /// hand-off landing later goes back to the queue. Only a stalled store
    /// makes a commit take this long.
    pub hand_off_wait_ms: u64,
    /// A staged pop waits as a memory request in its own process's
    /// request line (one commit per batch of pops; see [`line`](mod@line)) instead
    /// of registering in the store. Off: every request is written to the
    /// request subspace, so other processes see it (their direct pops
    /// defer to it) and any process's fulfiller may serve it.
    pub requests_in_memory: bool,
    /// Deliveries under a lease before an item is dead-lettered, per queue.
    pub delivery: crate::lease::DeliveryPolicy,
}

impl StagingConfig {
    /// The protocol's settings as `config` sets them.
    pub fn from_config(config: &crate::config::Config) -> StagingConfig {
        let staging = &config.staging;
        StagingConfig {
            fulfill_batch_max: staging.fulfill_batch_max,
            fulfill_bytes_max: staging.fulfill_bytes_max,
            result_grace_ms: staging.result_grace_ms,
            reap_interval_ms: staging.reap_interval_ms,
            fulfiller_idle_ms: staging.fulfiller_idle_ms,
            wait_max_ms: config.wait_max_ms,
            lost_race_wait_ms: staging.lost_race_wait_ms,
            hand_off_wait_ms: staging.hand_off_wait_ms,
            requests_in_memory: staging.requests_in_memory,
            delivery: crate::lease::DeliveryPolicy::from_config(&config.leases),
        }
    }
}

impl Default for StagingConfig {
    /// The configuration's defaults (one source: `crate::config`).
    fn default() -> Self {
        StagingConfig::from_config(&crate::config::Config::default())
    }
}

/// Counters of the protocol's work, by path and outcome.
#[derive(Debug, Default)]
pub struct StagingStats {
    /// Items taken by direct pops.
    pub direct_pops: AtomicU64,
    /// Items delivered through requests.
    pub staged_pops: AtomicU64,
    /// Direct pops that lost a conflict and registered instead.
    pub direct_conflicts: AtomicU64,
    /// Requests registered in the store.
    pub requests_registered: AtomicU64,
    /// Requests queued in memory (see [`line`](mod@line)).
    pub memory_requests: AtomicU64,
    /// Fulfillment transactions that committed having served or expired something.
    pub fulfill_batches: AtomicU64,
    /// Fulfillment transactions that conflicted (another fulfiller or a cancel won).
    pub fulfill_conflicts: AtomicU64,
    /// Requests cleared unserved because their deadline passed.
    pub requests_expired: AtomicU64,
    /// Requests withdrawn by their requester (timeout or drop).
    pub requests_withdrawn: AtomicU64,
    /// Uncollected results returned to their queue.
    pub results_reaped: AtomicU64,
    /// Expired leases whose item went back to its queue.
    pub leases_expired: AtomicU64,
    /// Items moved to a dead-letter queue.
    pub dead_lettered: AtomicU64,
    /// Delayed items that became visible.
    pub delayed_revealed: AtomicU64,
    /// Staged pops served in memory (requester in this process).
    pub local_hand_offs: AtomicU64,
    /// Local hand-offs whose requester had gone: item put back.
    pub local_hand_offs_unclaimed: AtomicU64,
    /// Pops this process's line asked for in the store (counted
    /// requests added, see [`counted`]).
    pub line_pops_asked: AtomicU64,
    /// Items this process's fulfillers wrote as results of other
    /// processes' counted requests.
    pub line_results_written: AtomicU64,
    /// Results of this process's counted requests collected.
    pub line_results_collected: AtomicU64,
    /// Receipts acked by the fulfill round of the pop they rode on.
    pub acks_on_pops: AtomicU64,
}

impl StagingStats {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Every counter by name, read now. The destructuring lists every
    /// field with no `..`, so a counter added to the struct and left out
    /// here does not compile.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let StagingStats {
            direct_pops,
            staged_pops,
            direct_conflicts,
            requests_registered,
            memory_requests,
            fulfill_batches,
            fulfill_conflicts,
            requests_expired,
            requests_withdrawn,
            results_reaped,
            leases_expired,
            dead_lettered,
            delayed_revealed,
            local_hand_offs,
            local_hand_offs_unclaimed,
            line_pops_asked,
            line_results_written,
            line_results_collected,
            acks_on_pops,
        } = self;
        [
            ("direct_pops", direct_pops),
            ("staged_pops", staged_pops),
            ("direct_conflicts", direct_conflicts),
            ("requests_registered", requests_registered),
            ("memory_requests", memory_requests),
            ("fulfill_batches", fulfill_batches),
            ("fulfill_conflicts", fulfill_conflicts),
            ("requests_expired", requests_expired),
            ("requests_withdrawn", requests_withdrawn),
            ("results_reaped", results_reaped),
            ("leases_expired", leases_expired),
            ("dead_lettered", dead_lettered),
            ("delayed_revealed", delayed_revealed),
            ("local_hand_offs", local_hand_offs),
            ("local_hand_offs_unclaimed", local_hand_offs_unclaimed),
            ("line_pops_asked", line_pops_asked),
            ("line_results_written", line_results_written),
            ("line_results_collected", line_results_collected),
            ("acks_on_pops", acks_on_pops),
        ]
        .into_iter()
        .map(|(name, counter)| (name, Self::get(counter)))
        .collect()
    }
}
