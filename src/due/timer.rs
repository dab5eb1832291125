//! One round of the coordinator's timer: a sweep of the due index (see
//! [`super`]), then the queues whose reap appointments came (see
//! [`crate::staging::reap::reap_due`]), counted in the coordinator's stats
//! and in Prometheus. The coordinator's loop only decides when to run it.

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
/// The next round comes at least this long after one that finished its
/// work: entries due within it share that round's commits instead of
/// waking the timer one by one (a backlog is swept again at once).
const ROUND_GAP_MS: u64 = 10;

/// Consumes everything due at `now_ms` and reaps the queues due a look.
/// Returns the sweep and when something is next due (`now_ms` when a
/// bound left work undone), looking no further than `horizon_ms`.
pub async fn run_round<S: Store>(
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
        next = next.map(|at| at.max(now_ms.saturating_add(ROUND_GAP_MS)));
    }
    Ok((swept, next))
}
