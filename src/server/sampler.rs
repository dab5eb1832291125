//! Samples depth, waiting requests, leased and delayed items, oldest-item
//! age, the dead-letter and paused flags of queues and the backlog of a
//! FIFO queue's largest fairness keys, at a fixed interval
//! and for a bounded number of queues per pass, so a scrape never scans a
//! queue and the sampler's cost does not grow with the number of queues. Each pass takes, within
//! `metrics_sample_queues_max`:
//! - the queues the timer just changed (revealed, redelivered: their
//!   gauges follow at once);
//! - queues this daemon served recently (active queues stay fresh);
//! - the next queues of a rotation through every queue in the store, so
//!   every gauge is refreshed within one rotation, however many queues
//!   exist and whoever used them. The `_other` label (queues past the
//!   label cap) is the sum over one full rotation, published when it
//!   completes: every such queue counts once, none is left out.
//!
//! Depth and waiting come from the counters pushes, pops and requests
//! maintain with atomic adds; the oldest age from one snapshot read of the head.
//!
//! The rotation also prunes each queue's fairness tags the head has
//! passed ([`prune_fair_tags`]: at most 1,000 read per queue and visit,
//! continuing where a cut scan stopped at the queue's next visit), so a
//! queue of many short-lived keys keeps tags only for keys with items.
//! Every daemon's sampler does it; two passes on one queue at once
//! conflict, and one of them tries again at its next visit.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::state::AppState;
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::metrics::{
    DELAYED_ITEMS, LEASED_ITEMS, OLDEST_ITEM_AGE, OVERFLOW_QUEUE_LABEL, QUEUE_DEAD_LETTER,
    QUEUE_DEPTH, QUEUE_PAUSED, REQUESTS_WAITING, kind_label, queue_label,
};
use crate::service::{QueueWalk, Store, WalkStep};

/// Gauges of one queue or label: depth, waiting, oldest age (s), leased,
/// delayed, 1 for a dead-letter queue (0 for `_other`, which may mix), and
/// paused (a label's: how many of its queues are).
type Gauges = [f64; 7];

/// Where the rotation through every queue stands.
pub struct Rotation {
    kind: QueueKind,
    /// Where the walk through `kind`'s queues stands.
    cursor: QueueWalk,
    /// `_other`'s sums so far in this rotation, by kind (FIFO, priority).
    other: [Gauges; 2],
    /// Whether this rotation met any `_other` queue, by kind.
    other_seen: [bool; 2],
    /// Whether `_other` was ever published, by kind (then an empty
    /// rotation sets it to 0).
    other_published: [bool; 2],
    /// Where the pruning of a queue's fairness tags continues, for the
    /// queues whose last scan was cut at its bound (at most
    /// [`PRUNE_CURSORS_MAX`]; past that, new ones start from the first tag).
    prune_after: HashMap<(QueueKind, QueueName), Vec<u8>>,
}

/// Most queues whose pruning cursor the rotation keeps.
const PRUNE_CURSORS_MAX: usize = 1_024;

/// The index of `kind` in [`Rotation`]'s per-kind arrays.
fn kind_index(kind: QueueKind) -> usize {
    match kind {
        QueueKind::Fifo => 0,
        QueueKind::Priority => 1,
    }
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            kind: QueueKind::Fifo,
            cursor: QueueWalk::default(),
            other: [[0.0; 7]; 2],
            other_seen: [false; 2],
            other_published: [false; 2],
            prune_after: HashMap::new(),
        }
    }
}

/// Samples until `stop` turns true.
pub async fn run<S: Store>(state: Arc<AppState<S>>, mut stop: watch::Receiver<bool>) {
    let interval = Duration::from_millis(state.config.metrics_sample_interval_ms);
    let mut rotation = Rotation::default();
    loop {
        sample_once(&state, &mut rotation).await;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
    }
}

/// One pass over at most `metrics_sample_queues_max` queues.
pub async fn sample_once<S: Store>(state: &AppState<S>, rotation: &mut Rotation) {
    let budget = state.config.metrics_sample_queues_max.max(4);
    let mut sampled: BTreeSet<(QueueKind, QueueName)> = BTreeSet::new();
    for queue in state.hotq.take_touched_queues(budget / 4) {
        sample_labelled(state, &queue, &mut sampled).await;
    }
    let known: Vec<_> = state
        .known_queues
        .lock()
        .iter()
        .take(budget / 2)
        .cloned()
        .collect();
    for queue in known {
        sample_labelled(state, &queue, &mut sampled).await;
    }
    // At least a quarter of every pass goes to the rotation, so it moves on
    // however busy the other two sources are.
    let rotation_budget = budget.saturating_sub(sampled.len()).max(budget / 4);
    for _ in 0..rotation_budget {
        let read_began = std::time::Instant::now();
        let Some(queue) = next_queue(state, rotation).await else {
            break;
        };
        // It is in the store: if deleted earlier, it was made again.
        crate::metrics::found_in_store(queue.0, &queue.1, read_began);
        prune_fair_tags(state, rotation, &queue).await;
        let Some(gauges) = read_gauges(state, &queue).await else {
            continue;
        };
        let label = queue_label(queue.1.as_str());
        if label == OVERFLOW_QUEUE_LABEL {
            rotation.other_seen[kind_index(queue.0)] = true;
            add(&mut rotation.other[kind_index(queue.0)], &gauges);
        } else if !sampled.contains(&queue) {
            publish(queue.0, &label, &gauges);
        }
    }
    let step_ms = crate::console::history::step_ms(state.config.metrics_sample_interval_ms);
    for kind in [QueueKind::Fifo, QueueKind::Priority] {
        crate::console::history::record_total(kind, crate::envelope::now_ms(), step_ms);
    }
}

/// Prunes the fairness tags the head of `queue` has passed, from where its
/// last pass stopped; a failed pass (a conflict) is tried again from the
/// same place at the next visit.
async fn prune_fair_tags<S: Store>(
    state: &AppState<S>,
    rotation: &mut Rotation,
    queue: &(QueueKind, QueueName),
) {
    let keys = QueueKeys::of_kind(queue.0, &queue.1);
    let after = rotation.prune_after.remove(queue);
    let next = match state.hotq.prune_fair_tags(&keys, after.as_deref()).await {
        Ok(pruned) => pruned.after,
        // Tried again from the same place.
        Err(_) => after,
    };
    if let Some(next) = next
        && rotation.prune_after.len() < PRUNE_CURSORS_MAX
    {
        rotation.prune_after.insert(queue.clone(), next);
    }
}

/// Samples `queue` for its own label; `_other` queues are left to the
/// rotation's sums.
async fn sample_labelled<S: Store>(
    state: &AppState<S>,
    queue: &(QueueKind, QueueName),
    sampled: &mut BTreeSet<(QueueKind, QueueName)>,
) {
    if !sampled.insert(queue.clone()) {
        return;
    }
    let label = queue_label(queue.1.as_str());
    if label == OVERFLOW_QUEUE_LABEL {
        return;
    }
    if let Some(gauges) = read_gauges(state, queue).await {
        publish(queue.0, &label, &gauges);
    }
}

async fn read_gauges<S: Store>(
    state: &AppState<S>,
    (kind, name): &(QueueKind, QueueName),
) -> Option<Gauges> {
    let stats = state
        .hotq
        .queue_stats(&QueueKeys::of_kind(*kind, name))
        .await
        .ok()?;
    let counts = [
        stats.depth as f64,
        stats.waiting as f64,
        stats.oldest_item_age_ms.unwrap_or(0) as f64 / 1_000.0,
        stats.leased as f64,
        stats.delayed as f64,
    ];
    if let Some(backlog) = &stats.fair_backlog {
        let top: Vec<(String, u64)> = backlog
            .iter()
            .map(|key| (key.key.clone(), key.items))
            .collect();
        crate::metrics::fair::publish(*kind, name, &top);
    }
    let flag = |set: bool| if set { 1.0 } else { 0.0 };
    // The console's charts keep what was just read (bounded rings).
    crate::console::history::record(
        *kind,
        name.as_str(),
        counts,
        crate::envelope::now_ms(),
        crate::console::history::step_ms(state.config.metrics_sample_interval_ms),
    );
    let [depth, waiting, oldest_age_s, leased, delayed] = counts;
    Some([
        depth,
        waiting,
        oldest_age_s,
        leased,
        delayed,
        flag(stats.dead_letter),
        flag(stats.paused),
    ])
}

fn add(sum: &mut Gauges, gauges: &Gauges) {
    sum[0] += gauges[0];
    sum[1] += gauges[1];
    // The oldest age of a label is the oldest of its queues.
    sum[2] = sum[2].max(gauges[2]);
    sum[3] += gauges[3];
    sum[4] += gauges[4];
    // `_other` may mix dead-letter and live queues: its flag stays 0.
    sum[6] += gauges[6];
}

fn publish(
    kind: QueueKind,
    label: &str,
    [
        depth,
        waiting,
        oldest_age_s,
        leased,
        delayed,
        dead_letter,
        paused,
    ]: &Gauges,
) {
    let kind = kind_label(kind);
    let labels = [("queue", label.to_string()), ("kind", kind.to_string())];
    metrics::gauge!(QUEUE_DEPTH, &labels).set(*depth);
    metrics::gauge!(REQUESTS_WAITING, &labels).set(*waiting);
    metrics::gauge!(OLDEST_ITEM_AGE, &labels).set(*oldest_age_s);
    metrics::gauge!(LEASED_ITEMS, &labels).set(*leased);
    metrics::gauge!(DELAYED_ITEMS, &labels).set(*delayed);
    metrics::gauge!(QUEUE_DEAD_LETTER, &labels).set(*dead_letter);
    metrics::gauge!(QUEUE_PAUSED, &labels).set(*paused);
}

/// The rotation's next queue: one range read of limit 1 from the cursor,
/// which then skips past that queue's whole subspace. At the end of the
/// priority queues' root the rotation is complete: `_other` is published
/// and it starts over (returning `None` for this pass).
async fn next_queue<S: Store>(
    state: &AppState<S>,
    rotation: &mut Rotation,
) -> Option<(QueueKind, QueueName)> {
    // Bounded: at most one switch of root per call.
    for _ in 0..2 {
        match state
            .hotq
            .walk_queues(rotation.kind, &mut rotation.cursor)
            .await
            .ok()?
        {
            WalkStep::Queue(name) => return Some((rotation.kind, name)),
            // Not a queue's key (nothing hotq writes): stepped over.
            WalkStep::Skipped => return None,
            WalkStep::End => {}
        }
        match rotation.kind {
            QueueKind::Fifo => rotation.kind = QueueKind::Priority,
            QueueKind::Priority => {
                rotation.kind = QueueKind::Fifo;
                for kind in [QueueKind::Fifo, QueueKind::Priority] {
                    let i = kind_index(kind);
                    if rotation.other_seen[i] || rotation.other_published[i] {
                        publish(kind, OVERFLOW_QUEUE_LABEL, &rotation.other[i]);
                        rotation.other_published[i] = true;
                    }
                }
                rotation.other = [[0.0; 7]; 2];
                rotation.other_seen = [false; 2];
                return None;
            }
        }
    }
    None
}
