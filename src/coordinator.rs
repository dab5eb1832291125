//! The coordinator: one process's share of the work over one store, all
//! stopped by one shutdown signal: staged pops (the protocol lives in
//! [`crate::staging`]), settling leases, the reaper, and the timer that
//! returns expired leases and reveals delayed items (see [`crate::due`]).
//!
//! Several coordinators may share one store (two daemons on one cluster):
//! their fulfillers then conflict on the keys they both consume, and the
//! loser retries; an item is never handed out twice.

#[cfg(feature = "testing")]
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::due::timer::Alarm;
#[cfg(feature = "testing")]
use crate::envelope::End;
use crate::envelope::now_ms;
use crate::keys::QueueKeys;
use crate::lease::backlog::{SettleOp, Settled, Settler};
use crate::lease::settle::Returned;
use crate::lease::{LeaseError, Receipt};
use crate::metrics;
use crate::queue::{Item, QueueError};
#[cfg(feature = "testing")]
use crate::staging::reap::{reap_queue, registered_queues};
use crate::staging::registry::Staging;
use crate::staging::{StagingConfig, StagingStats};
use crate::store::Store;

struct Inner<S: Store> {
    store: S,
    pops: Staging<S>,
    /// Counted by pops, the timer and the reaper alike.
    stats: Arc<StagingStats>,
    shutdown: watch::Sender<bool>,
    /// When the due index's timer next looks. Shared with the pops, which
    /// lower it for the leases they issue.
    alarm: Arc<Alarm>,
    /// Settle backlogs: concurrent acks, nacks and extends share commits.
    settler: Settler<S>,
}

/// Staged pops, fulfillment loops and the reaper over one store.
pub struct Coordinator<S: Store> {
    inner: Arc<Inner<S>>,
}

impl<S: Store> Clone for Coordinator<S> {
    fn clone(&self) -> Self {
        Coordinator {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Store> Coordinator<S> {
    /// A coordinator over `store`. Fulfillers start on demand; call
    /// [`Self::spawn_timer`] to sweep the due index (expired leases,
    /// delayed items, stranded requests and results).
    pub fn new(store: S, config: StagingConfig) -> Self {
        let (shutdown, stopped) = watch::channel(false);
        let stats = Arc::new(StagingStats::default());
        let alarm = Arc::new(Alarm::default());
        let issued = alarm.clone();
        let lease_issued = Arc::new(move |due_ms: u64| issued.schedule(due_ms));
        let pops = Staging::new(store.clone(), config, stats.clone(), stopped, lease_issued);
        Coordinator {
            inner: Arc::new(Inner {
                settler: Settler::new(store.clone()),
                store,
                pops,
                stats,
                shutdown,
                alarm,
            }),
        }
    }

    /// The protocol's settings.
    pub fn config(&self) -> &StagingConfig {
        self.inner.pops.config()
    }

    /// The staged pop protocol: pops, their lines and fulfillers (the
    /// core's pops call it directly: one hop fewer than a forwarder).
    pub fn staging(&self) -> &Staging<S> {
        &self.inner.pops
    }

    /// [`Staging::pop`].
    #[cfg(feature = "testing")]
    pub async fn pop(
        &self,
        keys: &QueueKeys,
        end: End,
        wait: Duration,
    ) -> Result<Option<Item>, QueueError> {
        self.inner.pops.pop(keys, end, wait).await
    }

    /// [`Staging::pop_many`].
    #[cfg(feature = "testing")]
    pub async fn pop_many(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Item>, QueueError> {
        self.inner.pops.pop_many(keys, end, max, wait).await
    }

    /// [`Staging::pop_leased`].
    #[cfg(feature = "testing")]
    pub async fn pop_leased(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
        lease_ms: NonZeroU64,
    ) -> Result<Vec<Item>, QueueError> {
        self.inner
            .pops
            .pop_leased(keys, end, max, wait, lease_ms)
            .await
    }

    /// [`Staging::pop_acking`].
    #[cfg(feature = "testing")]
    pub async fn pop_acking(
        &self,
        keys: &QueueKeys,
        pop: crate::staging::pop::PopAsk,
        acks: Vec<Receipt>,
    ) -> Result<crate::staging::pop::Popped, QueueError> {
        self.inner.pops.pop_acking(keys, pop, acks).await
    }

    /// [`Staging::pop_recipe`].
    pub async fn pop_recipe(&self, keys: &QueueKeys) -> Result<Vec<Item>, QueueError> {
        self.inner.pops.pop_recipe(keys).await
    }

    /// [`Staging::ensure_fulfiller`].
    #[cfg(feature = "testing")]
    pub fn ensure_fulfiller(&self, keys: &QueueKeys) {
        self.inner.pops.ensure_fulfiller(keys)
    }

    /// [`Staging::memory_waiting`].
    pub fn memory_waiting(&self, keys: &QueueKeys) -> usize {
        self.inner.pops.memory_waiting(keys)
    }

    /// Counters of the protocol's work.
    #[cfg(feature = "testing")]
    pub fn stats(&self) -> &StagingStats {
        &self.inner.stats
    }
    /// Sweeps every registered queue once as of now.
    #[cfg(feature = "testing")]
    pub async fn reap_all(&self) -> Result<crate::staging::reap::Reaped, QueueError> {
        let mut total = crate::staging::reap::Reaped::default();
        for keys in registered_queues(&self.inner.store).await? {
            // One queue's failure must not stop the sweep of the others.
            let reaped = match reap_queue(&self.inner.store, &keys, now_ms()).await {
                Ok(reaped) => reaped,
                Err(error) => {
                    tracing::warn!(queue = %keys.name(), %error, "reaping a queue failed");
                    continue;
                }
            };
            total.results += reaped.results;
            total.requests += reaped.requests;
            let (kind, name) = (keys.kind(), keys.name());
            if reaped.results > 0 {
                metrics::queue_count(metrics::RESULTS_REAPED, kind, name, reaped.results as u64);
            }
            if reaped.requests > 0 {
                metrics::queue_count(
                    metrics::REQUESTS_EXPIRED,
                    kind,
                    name,
                    reaped.requests as u64,
                );
            }
        }
        let stats = &self.inner.stats;
        StagingStats::add(&stats.results_reaped, total.results as u64);
        StagingStats::add(&stats.requests_expired, total.requests as u64);
        Ok(total)
    }

    /// Runs the due index's timer (expired leases, delayed items, the
    /// reaps that come due; see [`crate::due`]) until shutdown, and,
    /// beside it, the one-time move of the layout before the due index into
    /// it. The handle ends when both have stopped.
    pub fn spawn_timer(&self) -> JoinHandle<()> {
        let migrator = self.clone();
        let timer = self.clone();
        tokio::spawn(async move {
            let shutdown = timer.inner.shutdown.subscribe();
            let inner = &timer.inner;
            let interval_ms = timer.config().reap_interval_ms;
            let run = crate::due::timer::run(
                &inner.store,
                &timer.config().delivery,
                &inner.stats,
                &inner.alarm,
                interval_ms,
                shutdown,
            );
            tokio::join!(migrator.migrate_loop(), run);
        })
    }

    /// Moves the data of the layout before the due index into it, once,
    /// retried every `reap_interval_ms` until it succeeds or shutdown.
    async fn migrate_loop(self) {
        let mut shutdown = self.inner.shutdown.subscribe();
        let interval = Duration::from_millis(self.config().reap_interval_ms.max(1));
        loop {
            match crate::due::migrate::migrate(&self.inner.store, now_ms()).await {
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(%error, "moving old leases into the due index failed; retrying")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Tells the timer that something comes due at `due_ms` (epoch ms): a
    /// lease this process issued or shortened, a delayed item it wrote.
    /// Wakes it only when that is earlier than its next look. Leases and delays written
    /// by other processes are found by the timer's own sweeps, at most
    /// `reap_interval_ms` late.
    pub fn schedule(&self, due_ms: u64) {
        self.inner.alarm.schedule(due_ms);
    }

    /// Returns every lease expired at `now_ms`, reveals every delayed item
    /// due and reaps the queues due a look, in every queue, reading only
    /// what is due (see [`crate::due`]). Returns the earliest time
    /// something else comes due (`now_ms` when a bound left work undone).
    #[cfg(feature = "testing")]
    pub async fn sweep_due(&self, now_ms: u64) -> Result<Option<u64>, QueueError> {
        self.sweep_due_until(now_ms, u64::MAX).await
    }

    /// [`Self::sweep_due`], looking for the next due time no further than
    /// `horizon_ms` (`None`: nothing due by then).
    #[cfg(feature = "testing")]
    async fn sweep_due_until(
        &self,
        now_ms: u64,
        horizon_ms: u64,
    ) -> Result<Option<u64>, QueueError> {
        let (_, next) = crate::due::timer::look_once(
            &self.inner.store,
            &self.config().delivery,
            &self.inner.stats,
            now_ms,
            horizon_ms,
        )
        .await?;
        Ok(next)
    }

    /// Acks the lease `receipt` of queue `keys`: the item is done. Not
    /// counted here: acks are counted where they are asked for, in the
    /// core (`service::settle`), once.
    #[cfg(feature = "testing")]
    pub async fn ack(&self, keys: &QueueKeys, receipt: &Receipt) -> Result<(), LeaseError> {
        self.inner
            .settler
            .settle(keys, *receipt, SettleOp::Ack)
            .await?;
        Ok(())
    }

    /// Nacks the lease `receipt`: the item returns now, or after
    /// `delay_ms`, or goes to the dead-letter queue once out of deliveries.
    pub async fn nack(
        &self,
        keys: &QueueKeys,
        receipt: &Receipt,
        delay_ms: u64,
    ) -> Result<Returned, LeaseError> {
        let max_deliveries = self.config().delivery.max_deliveries(keys.name());
        let op = SettleOp::Nack {
            delay_ms,
            max_deliveries,
        };
        let Settled::Nacked(returned) = self.inner.settler.settle(keys, *receipt, op).await? else {
            unreachable!("a nack is answered as a nack")
        };
        metrics::queue_count(metrics::NACKS, keys.kind(), keys.name(), 1);
        match returned {
            Returned::Delayed { visible_at_ms } => self.schedule(visible_at_ms),
            Returned::DeadLettered { .. } => {
                StagingStats::add(&self.inner.stats.dead_lettered, 1);
                metrics::queue_count(metrics::DEAD_LETTERED, keys.kind(), keys.name(), 1);
            }
            Returned::Expired => {
                metrics::queue_count(metrics::EXPIRED, keys.kind(), keys.name(), 1)
            }
            Returned::Requeued => {}
        }
        Ok(returned)
    }

    /// Moves the lease `receipt`'s expiry to `lease_ms` (at least 1) from
    /// now, shorter or longer; returns the new expiry.
    pub async fn extend(
        &self,
        keys: &QueueKeys,
        receipt: &Receipt,
        lease_ms: u64,
    ) -> Result<u64, LeaseError> {
        let op = SettleOp::Extend { lease_ms };
        let Settled::Extended(expires_at_ms) =
            self.inner.settler.settle(keys, *receipt, op).await?
        else {
            unreachable!("an extend is answered as an extend")
        };
        self.schedule(expires_at_ms);
        Ok(expires_at_ms)
    }

    /// The settle backlogs (their counters show how many settles shared a commit).
    pub fn settler(&self) -> &Settler<S> {
        &self.inner.settler
    }

    /// Tells waiting pops to withdraw and return, and fulfillers and the
    /// reaper to stop after their current transaction. Returns at once.
    pub fn begin_shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// [`Self::begin_shutdown`], then waits for in-flight fulfillment
    /// commits to finish (at most `wait`).
    pub async fn shutdown(&self, wait: Duration) {
        self.begin_shutdown();
        self.inner.pops.join_fulfillers(wait).await;
    }

    /// A snapshot of the stats counters, by name.
    pub fn stats_snapshot(&self) -> Vec<(&'static str, u64)> {
        self.inner.stats.snapshot()
    }
}
