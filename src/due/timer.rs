//! The due index's timer: [`run`] is its loop, which decides when to look
//! ([`Alarm`]: the earliest due time it knows, lowered by whoever writes an
//! earlier one); [`look_once`] is one look: a sweep of the due index (see
//! [`super`]), then the queues whose reap appointments came (see
//! [`crate::staging::reap::reap_due`]), counted in the coordinator's stats
//! and in Prometheus. The coordinator starts the loop
//! ([`crate::coordinator::Coordinator::spawn_timer`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use crate::envelope::now_ms;
use crate::keys::QueueKeys;
use crate::metrics;
use crate::queue::QueueError;
use crate::staging::StagingStats;
use crate::staging::reap::reap_due;
use crate::store::Store;

use super::{Sweep, sweep_until};
use crate::lease::DeliveryPolicy;

/// When a queue's reap failed, its appointments are tried again this much later.
const REAP_FAILED_RETRY_MS: u64 = 1_000;
/// The next look comes at least this long after one that finished its
/// work: entries due within it share that look's commits instead of
/// waking the timer one by one (a backlog is swept again at once).
const LOOK_GAP_MS: u64 = 10;

/// When the timer next looks, and the way to wake it sooner.
#[derive(Debug)]
pub struct Alarm {
    /// When the timer next looks, in epoch ms (`u64::MAX` while it sweeps,
    /// so anything scheduled meanwhile wakes it).
    next_ms: AtomicU64,
    /// Wakes the timer for a due time earlier than `next_ms`.
    wake: Notify,
}

impl Default for Alarm {
    fn default() -> Self {
        Alarm {
            next_ms: AtomicU64::new(u64::MAX),
            wake: Notify::new(),
        }
    }
}

impl Alarm {
    /// Lowers the timer's next look to `due_ms`, waking it if that is earlier.
    pub fn schedule(&self, due_ms: u64) {
        let next = self.next_ms.fetch_min(due_ms, Ordering::AcqRel);
        if due_ms < next {
            self.wake.notify_one();
        }
    }
}

/// The timer's loop, until `shutdown`. Bounded: one sweep per due time;
/// between sweeps it sleeps until the earliest due time it knows (at most
/// `interval_ms` away), waking early only when [`Alarm::schedule`] lowers
/// that time, and sweeping only once it has come.
pub async fn run<S: Store>(
    store: &S,
    policy: &DeliveryPolicy,
    stats: &StagingStats,
    alarm: &Alarm,
    interval_ms: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval_ms = interval_ms.max(1);
    loop {
        if *shutdown.borrow() {
            return;
        }
        let now = now_ms();
        let planned = now.saturating_add(interval_ms);
        // A lease issued while the sweep runs wakes the timer only if
        // it is due before the planned next look.
        alarm.next_ms.store(planned, Ordering::Release);
        let due = match look_once(store, policy, stats, now, planned).await {
            Ok((_, due)) => due.unwrap_or(planned).min(planned),
            Err(error) => {
                tracing::warn!(%error, "lease and delay sweep failed");
                planned
            }
        };
        let mut next = alarm.next_ms.fetch_min(due, Ordering::AcqRel).min(due);
        loop {
            let pause = Duration::from_millis(next.saturating_sub(now_ms()));
            tokio::select! {
                _ = tokio::time::sleep(pause) => break,
                _ = alarm.wake.notified() => {
                    next = alarm.next_ms.load(Ordering::Acquire);
                    if next <= now_ms() {
                        break;
                    }
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// Consumes everything due at `now_ms` and reaps the queues due a look.
/// Returns the sweep and when something is next due (`now_ms` when a
/// bound left work undone), looking no further than `horizon_ms`.
pub async fn look_once<S: Store>(
    store: &S,
    policy: &DeliveryPolicy,
    stats: &StagingStats,
    now_ms: u64,
    horizon_ms: u64,
) -> Result<(Sweep, Option<u64>), QueueError> {
    let swept = sweep_until(store, policy, now_ms, horizon_ms).await?;
    for ((kind, name), &count) in &swept.redelivered {
        StagingStats::add(&stats.leases_expired, count as u64);
        metrics::queue_count(metrics::REDELIVERIES, *kind, name, count as u64);
    }
    for ((kind, name), &count) in &swept.dead_lettered {
        StagingStats::add(&stats.dead_lettered, count as u64);
        metrics::queue_count(metrics::DEAD_LETTERED, *kind, name, count as u64);
    }
    for ((kind, name), &count) in &swept.expired {
        metrics::queue_count(metrics::EXPIRED, *kind, name, count as u64);
    }
    StagingStats::add(&stats.delayed_revealed, swept.revealed as u64);
    ::metrics::counter!(metrics::DUE_ROWS).increment(swept.rows_read as u64);
    let mut next = swept.next_due_ms;
    let mut reap_failed = false;
    for (kind, name, appointments) in &swept.reap_queues {
        let keys = QueueKeys::of_kind(*kind, name);
        // One queue's failure must not stop the others'.
        let reaped = match reap_due(store, &keys, appointments, now_ms).await {
            Ok(reaped) => reaped,
            Err(error) => {
                tracing::warn!(queue = %name, %error, "reaping a queue failed");
                reap_failed = true;
                let retry = now_ms.saturating_add(REAP_FAILED_RETRY_MS);
                next = Some(next.map_or(retry, |n| n.min(retry)));
                continue;
            }
        };
        if let Some(at) = reaped.next_deadline_ms {
            let at = at.max(now_ms).saturating_add(1);
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        if reaped.results > 0 {
            StagingStats::add(&stats.results_reaped, reaped.results as u64);
            metrics::queue_count(metrics::RESULTS_REAPED, *kind, name, reaped.results as u64);
        }
        if reaped.requests > 0 {
            StagingStats::add(&stats.requests_expired, reaped.requests as u64);
            metrics::queue_count(
                metrics::REQUESTS_EXPIRED,
                *kind,
                name,
                reaped.requests as u64,
            );
        }
    }
    // A failed reap leaves its appointments due: sweeping again at once
    // would only fail again, so the gap holds then too.
    if !swept.more || reap_failed {
        next = next.map(|at| at.max(now_ms.saturating_add(LOOK_GAP_MS)));
    }
    Ok((swept, next))
}
