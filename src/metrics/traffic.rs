//! This daemon's push and pop counts per queue, for the console's rates
//! (`GET /v1/traffic`). Prometheus has the same counts, but the console
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

/// Counts `n` items delivered from `queue`.
pub fn popped(kind: QueueKind, queue: &str, n: u64) {
    add(kind, queue, |counts| counts.popped += n);
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
