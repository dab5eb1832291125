//! Tells when the store has failed, and ends the daemon after a grace.
//!
//! A store that failed a write or fsync refuses every transaction from then
//! on (see `StoreError::Unavailable`); a daemon that kept running on it
//! would be a zombie: up, answering, useless. So the watcher reports the
//! failure (on `/healthz`, in `hotq_store_unavailable`) and, once it has
//! lasted `store_failure_exit_ms`, ends the daemon with an error so its
//! supervisor restarts it, on a disk that by then may have room again.
//! The grace lets load balancers and scrapes see the 503s first.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use crate::service::{Hotq, Store};

/// Whether the store answers, as the watcher last saw it.
#[derive(Debug, Default)]
pub struct StoreHealth {
    /// Since when, and why, the store has not answered.
    failing: Mutex<Option<(Instant, String)>>,
}

impl StoreHealth {
    /// Why the store does not answer, while it does not.
    pub fn failure(&self) -> Option<String> {
        let failing = self.failing.lock();
        failing.as_ref().map(|(_, reason)| reason.clone())
    }

    /// Records a probe's outcome; returns how long the store has failed.
    fn note(&self, outcome: Result<(), String>) -> Option<(Duration, String)> {
        let mut failing = self.failing.lock();
        match outcome {
            Ok(()) => {
                *failing = None;
                None
            }
            Err(reason) => {
                let since = failing
                    .as_ref()
                    .map_or_else(Instant::now, |(since, _)| *since);
                *failing = Some((since, reason.clone()));
                Some((since.elapsed(), reason))
            }
        }
    }
}

/// Longest a health probe (one snapshot read) may take before the store
/// counts as not answering. A store that answers reads at all answers one
/// well within it; one that does not (a FoundationDB cluster nobody can
/// reach: the client waits for it without end) must show on `/healthz` at
/// once, not when the daemon gives up on it.
pub const PROBE_BOUND: Duration = Duration::from_secs(1);

/// How often the store is probed: often enough that the exit comes
/// close to its grace, rarely enough to cost nothing (one snapshot read).
fn probe_interval(exit_after: Duration) -> Duration {
    (exit_after / 5).clamp(Duration::from_millis(10), Duration::from_millis(500))
}

/// Probes the store of `hotq` until it has failed continuously for
/// `exit_after`, then resolves with the reason. Never resolves while the
/// store works.
pub async fn failed_for_good<S: Store>(
    hotq: &Hotq<S>,
    health: &StoreHealth,
    exit_after: Duration,
) -> String {
    let interval = probe_interval(exit_after);
    let mut reported = false;
    loop {
        let outcome = hotq.probe_store(PROBE_BOUND).await;
        let failing = health.note(outcome);
        metrics::gauge!(crate::metrics::STORE_UNAVAILABLE).set(if failing.is_some() {
            1.0
        } else {
            0.0
        });
        match failing {
            Some((lasted, reason)) if lasted >= exit_after => {
                tracing::error!(%reason, ?lasted, "the store has failed; stopping so a supervisor restarts the daemon");
                return reason;
            }
            Some((_, reason)) if !reported => {
                reported = true;
                tracing::error!(%reason, ?exit_after, "the store does not answer: /healthz and the API answer 503; the daemon exits if this lasts");
            }
            Some(_) => {}
            None => reported = false,
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_lasts_from_its_first_report_until_a_success() {
        let health = StoreHealth::default();
        let since = |health: &StoreHealth| health.failing.lock().as_ref().unwrap().0;
        assert_eq!(health.failure(), None);
        health.note(Err("disk full".into())).unwrap();
        let first = since(&health);
        let (_, reason) = health.note(Err("still full".into())).unwrap();
        assert_eq!(since(&health), first, "the failure's start is kept");
        assert_eq!(reason, "still full");
        assert_eq!(health.failure().as_deref(), Some("still full"));
        assert!(health.note(Ok(())).is_none());
        assert_eq!(health.failure(), None);
    }

    #[test]
    fn probes_are_bounded_both_ways() {
        assert_eq!(
            probe_interval(Duration::from_millis(1)),
            Duration::from_millis(10)
        );
        assert_eq!(
            probe_interval(Duration::from_secs(60)),
            Duration::from_millis(500)
        );
    }
}
