//! The last hour of each queue, for the console's charts: a bounded ring
//! of samples per queue, filled by the sampler ([`crate::server::sampler`])
//! each time it reads a queue's gauges, with this daemon's traffic counts
//! ([`crate::metrics::traffic`]) at that moment; and one ring of the sums
//! (the whole daemon), filled at the end of each sampler pass.
//!
//! A ring keeps one sample per step of [`step_ms`] (at least
//! [`HISTORY_STEP_MS_MIN`]): a new sample in the same step replaces the
//! step's last, so the newest point is never older than one sampling
//! interval and the hour costs at most [`HISTORY_SLOTS_MAX`] samples.
//! Memory: a [`Sample`] is 80 bytes, so a full ring is 360 × 80 = 28.8 kB
//! per queue; 10,000 queues would be 288 MB, so the daemon keeps rings for
//! at most [`HISTORY_QUEUES_MAX`] queues (about 29 MB), dropping the ring
//! sampled longest ago for a new one (docs/console.md).

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::keys::QueueKind;
use crate::metrics::traffic::{self, Counts};

/// How far back the history goes.
pub const HISTORY_SPAN_MS: u64 = 3_600_000;
/// The shortest step between kept samples (a shorter sampling interval
/// replaces the step's last sample instead of adding one).
pub const HISTORY_STEP_MS_MIN: u64 = 10_000;
/// Most samples one ring keeps: the span over the shortest step.
pub const HISTORY_SLOTS_MAX: usize = (HISTORY_SPAN_MS / HISTORY_STEP_MS_MIN) as usize;
/// Most queues with a ring, per daemon.
pub const HISTORY_QUEUES_MAX: usize = 1_000;
/// Most queues whose latest sample the daemon's sums take in (about 150
/// bytes each: 15 MB at most); past it a new queue is left out of the sums.
pub const LATEST_QUEUES_MAX: usize = 100_000;

/// One queue's (or the daemon's) figures at `at_ms`: gauges read from the
/// store by the sampler, and this daemon's counts since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sample {
    /// When it was taken, in ms since the epoch.
    pub at_ms: u64,
    /// Visible items (the store's, as every daemon sees it).
    pub depth: u32,
    /// Items under a lease.
    pub leased: u32,
    /// Delayed items.
    pub delayed: u32,
    /// Pops waiting for an item.
    pub waiting: u32,
    /// The oldest visible item's age, in seconds (0 when none).
    pub oldest_age_s: u32,
    /// Items pushed through this daemon, since it started (the change
    /// between two samples over their time apart is a rate; so for the
    /// counts below).
    pub pushed: u64,
    /// Items this daemon's pops delivered.
    pub popped: u64,
    /// Of `popped`, by the direct pop (the rest: staged).
    pub popped_direct: u64,
    /// Leases acked through this daemon.
    pub acked: u64,
    /// Leases nacked through this daemon.
    pub nacked: u64,
    /// Items this daemon dead-lettered from the queue.
    pub dead_lettered: u64,
}

impl Sample {
    fn with_counts(mut self, counts: Counts) -> Sample {
        self.pushed = counts.pushed;
        self.popped = counts.popped;
        self.popped_direct = counts.popped_direct;
        self.acked = counts.acked;
        self.nacked = counts.nacked;
        self.dead_lettered = counts.dead_lettered;
        self
    }
}

type Key = (QueueKind, String);

#[derive(Default)]
struct Rings {
    queues: HashMap<Key, VecDeque<Sample>>,
    /// Every sampled queue's latest sample, ring or not: the daemon's sums
    /// count every queue the sampler has read, not only those with a ring.
    latest: HashMap<Key, Sample>,
    total: [VecDeque<Sample>; 2],
}

fn rings() -> &'static Mutex<Rings> {
    static RINGS: OnceLock<Mutex<Rings>> = OnceLock::new();
    RINGS.get_or_init(Mutex::default)
}

fn kind_index(kind: QueueKind) -> usize {
    match kind {
        QueueKind::Fifo => 0,
        QueueKind::Priority => 1,
    }
}

/// The step between kept samples for a sampler running every `interval_ms`.
pub fn step_ms(interval_ms: u64) -> u64 {
    interval_ms.max(HISTORY_STEP_MS_MIN)
}

/// Adds `sample` to `ring`, replacing the last if it is in the same step.
fn push(ring: &mut VecDeque<Sample>, sample: Sample, step_ms: u64) {
    if let Some(last) = ring
        .back_mut()
        .filter(|last| last.at_ms / step_ms == sample.at_ms / step_ms)
    {
        *last = sample;
        return;
    }
    ring.push_back(sample);
    let slots = (HISTORY_SPAN_MS / step_ms).clamp(1, HISTORY_SLOTS_MAX as u64) as usize;
    while ring.len() > slots {
        ring.pop_front();
    }
}

fn clamp(value: f64) -> u32 {
    // Gauges are counts and seconds: never negative, and past u32 a chart
    // shows its top anyway.
    value.clamp(0.0, f64::from(u32::MAX)) as u32
}

/// Records the gauges the sampler just read of `queue` (depth, waiting,
/// oldest age in seconds, leased, delayed), with this daemon's counts.
pub fn record(kind: QueueKind, queue: &str, gauges: [f64; 5], now_ms: u64, step_ms: u64) {
    let [depth, waiting, oldest_age_s, leased, delayed] = gauges;
    let sample = Sample {
        at_ms: now_ms,
        depth: clamp(depth),
        leased: clamp(leased),
        delayed: clamp(delayed),
        waiting: clamp(waiting),
        oldest_age_s: clamp(oldest_age_s),
        ..Sample::default()
    }
    .with_counts(traffic::counts(kind, queue).unwrap_or_default());
    let mut rings = rings().lock();
    let key = (kind, queue.to_string());
    if rings.latest.contains_key(&key) || rings.latest.len() < LATEST_QUEUES_MAX {
        rings.latest.insert(key.clone(), sample);
    }
    if !rings.queues.contains_key(&key) && rings.queues.len() >= HISTORY_QUEUES_MAX {
        evict_stalest(&mut rings.queues);
    }
    push(rings.queues.entry(key).or_default(), sample, step_ms);
}

/// Drops the ring whose last sample is the oldest (bounded: one pass over
/// at most [`HISTORY_QUEUES_MAX`] rings).
fn evict_stalest(queues: &mut HashMap<Key, VecDeque<Sample>>) {
    let stalest = queues
        .iter()
        .min_by_key(|(_, ring)| ring.back().map_or(0, |sample| sample.at_ms))
        .map(|(key, _)| key.clone());
    if let Some(key) = stalest {
        queues.remove(&key);
    }
}

/// Records the whole daemon's sample of `kind`: the store's gauges summed
/// over every sampled queue's latest sample (a queue among many is read
/// once per rotation of the sampler, so its figure is that old at most;
/// the oldest age: the oldest), and this daemon's counts over every queue.
pub fn record_total(kind: QueueKind, now_ms: u64, step_ms: u64) {
    let mut rings = rings().lock();
    let mut sum = Sample {
        at_ms: now_ms,
        ..Sample::default()
    }
    .with_counts(traffic::total(kind));
    for ((latest_kind, _), last) in &rings.latest {
        if *latest_kind != kind {
            continue;
        }
        sum.depth = sum.depth.saturating_add(last.depth);
        sum.leased = sum.leased.saturating_add(last.leased);
        sum.delayed = sum.delayed.saturating_add(last.delayed);
        sum.waiting = sum.waiting.saturating_add(last.waiting);
        sum.oldest_age_s = sum.oldest_age_s.max(last.oldest_age_s);
    }
    push(&mut rings.total[kind_index(kind)], sum, step_ms);
}

/// The samples of `queue` (or of the whole daemon when `None`), oldest first.
pub fn samples(kind: QueueKind, queue: Option<&str>) -> Vec<Sample> {
    let rings = rings().lock();
    let ring = match queue {
        None => Some(&rings.total[kind_index(kind)]),
        Some(queue) => rings.queues.get(&(kind, queue.to_string())),
    };
    ring.map_or_else(Vec::new, |ring| ring.iter().copied().collect())
}

/// Drops the ring and latest sample of the deleted `queue`.
pub fn forget(kind: QueueKind, queue: &str) {
    let mut rings = rings().lock();
    let key = (kind, queue.to_string());
    rings.queues.remove(&key);
    rings.latest.remove(&key);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_one_sample_per_step_and_at_most_the_hour() {
        let mut ring = VecDeque::new();
        let step = 10_000;
        for at_ms in (0..2 * HISTORY_SPAN_MS).step_by(1_000) {
            push(
                &mut ring,
                Sample {
                    at_ms,
                    ..Sample::default()
                },
                step,
            );
        }
        assert_eq!(ring.len(), HISTORY_SLOTS_MAX);
        // The newest sample is the last one pushed, not its step's first.
        assert_eq!(ring.back().unwrap().at_ms, 2 * HISTORY_SPAN_MS - 1_000);
        assert_eq!(
            std::mem::size_of::<Sample>(),
            80,
            "docs/console.md states it"
        );
    }
}
