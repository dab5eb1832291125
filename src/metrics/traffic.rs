//! This daemon's push, pop, ack, nack and dead-letter counts per queue,
//! for the console's rates (`GET /v1/traffic`) and charts (the console's
//! history). Prometheus has the same counts, but the console
//! calls only the API, and the exporter may listen elsewhere or not at
//! all. A queue deleted through this daemon is forgotten ([`forget`]).
//! Bounded: at most [`TRAFFIC_QUEUES_KEPT_MAX`] queues per kind; when
//! a new queue finds it full it starts over (a console then sees counts
//! fall and shows no rate for one refresh).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::keys::QueueKind;

/// Most queues counted per kind.
pub const TRAFFIC_QUEUES_KEPT_MAX: usize = 10_000;

/// One queue's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Counts {
    /// Items pushed through this daemon.
    pub pushed: u64,
    /// Items delivered by this daemon's pops.
    pub popped: u64,
    /// Of `popped`, those the direct pop delivered (the rest went through
    /// the staged path: a waiting request served by a fulfillment round).
    #[serde(default)]
    pub popped_direct: u64,
    /// Leases acked through this daemon.
    #[serde(default)]
    pub acked: u64,
    /// Leases nacked through this daemon.
    #[serde(default)]
    pub nacked: u64,
    /// Items this daemon moved to a dead-letter queue (counted on the
    /// queue they died in).
    #[serde(default)]
    pub dead_lettered: u64,
}

type Tally = [HashMap<String, Counts>; 2];

fn tally() -> &'static Mutex<Tally> {
    static TALLY: OnceLock<Mutex<Tally>> = OnceLock::new();
    TALLY.get_or_init(Mutex::default)
}

fn index(kind: QueueKind) -> usize {
    match kind {
        QueueKind::Fifo => 0,
        QueueKind::Priority => 1,
    }
}

fn add(kind: QueueKind, queue: &str, change: impl FnOnce(&mut Counts)) {
    let mut tally = tally().lock();
    let queues = &mut tally[index(kind)];
    if let Some(counts) = queues.get_mut(queue) {
        change(counts);
        return;
    }
    if queues.len() >= TRAFFIC_QUEUES_KEPT_MAX {
        queues.clear();
    }
    change(queues.entry(queue.to_string()).or_default());
}

/// Counts `n` items pushed to `queue`.
pub fn pushed(kind: QueueKind, queue: &str, n: u64) {
    add(kind, queue, |counts| counts.pushed += n);
}

/// Counts `n` items delivered from `queue`, `direct` or staged.
pub fn popped(kind: QueueKind, queue: &str, n: u64, direct: bool) {
    add(kind, queue, |counts| {
        counts.popped += n;
        if direct {
            counts.popped_direct += n;
        }
    });
}

/// What a lease's settling did, as the tally counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Acked: done.
    Acked,
    /// Nacked: back to the queue, or dead-lettered (counted too).
    Nacked,
    /// Moved to a dead-letter queue.
    DeadLettered,
}

/// Counts `n` acks, nacks or dead letters of `queue`.
pub fn settled(kind: QueueKind, queue: &str, what: Settled, n: u64) {
    add(kind, queue, |counts| match what {
        Settled::Acked => counts.acked += n,
        Settled::Nacked => counts.nacked += n,
        Settled::DeadLettered => counts.dead_lettered += n,
    });
}

/// The sum of every queue's counts of `kind`: this daemon's traffic.
pub fn total(kind: QueueKind) -> Counts {
    let tally = tally().lock();
    let mut sum = Counts::default();
    for counts in tally[index(kind)].values() {
        sum.pushed += counts.pushed;
        sum.popped += counts.popped;
        sum.popped_direct += counts.popped_direct;
        sum.acked += counts.acked;
        sum.nacked += counts.nacked;
        sum.dead_lettered += counts.dead_lettered;
    }
    sum
}

/// The counts of `queue`, if this daemon keeps any.
pub fn counts(kind: QueueKind, queue: &str) -> Option<Counts> {
    tally().lock()[index(kind)].get(queue).copied()
}

/// Drops the counts of the deleted `queue`: a queue of the same name made
/// later counts from 0 (a console sees its counts fall and shows no rate
/// for one refresh), and a deleted queue holds no place in the tally.
pub fn forget(kind: QueueKind, queue: &str) {
    tally().lock()[index(kind)].remove(queue);
}
