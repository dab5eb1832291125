//! The fulfillment loop of one queue: rounds of [`super::fulfill`], each
//! serving a batch of the line's pops (and stored requests) in one commit,
//! then handing the items over ([`crate::staging::handoff`]); with nothing to serve
//! it waits on the store's wake key, a push, a pop joining the line, or a
//! request left to another line turning stale ([`crate::staging::takeover`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::envelope::now_ms;
use crate::keys::{QueueKeys, RequesterId};
use crate::metrics;
use crate::queue::QueueError;
use crate::staging::StagingStats;
use crate::staging::counted::{self, LineLevel};
use crate::staging::line::results::withdraw_line;
use crate::staging::registry::{Fulfiller, Staging};
use crate::staging::round::answer::{Carry, Next, RoundCounts};
use crate::staging::round::fulfill::{Fulfilled, LocalHandoff, fulfill_round};
use crate::staging::takeover::{Left, TakeOver};
use crate::store::{RangeRead, RetryPolicy, Store, StoreError, Transaction, transact};

/// Backoff ceiling after a fulfillment conflict, in microseconds.
const FULFILL_CONFLICT_BACKOFF_US_MAX: u64 = 2_000;
/// How long after it last met another process's request in the store a
/// line puts its new pops in the store instead of serving them at once:
/// in a steady contention every line's pops then stand in request order
/// and no round races another for the head, and a line left alone is
/// back to serving at once this soon after.
const CONTENDED_FOR: Duration = Duration::from_millis(500);
/// Pause after an unexpected fulfillment error.
const FULFILL_ERROR_PAUSE_MS: u64 = 100;
/// Longest a round waits for the pops the previous round answered to
/// join the line again (see [`Staging::gather`]); at most half the previous
/// round's own duration.
const GATHER_MAX: Duration = Duration::from_millis(1);

/// What the loop keeps between rounds.
#[derive(Default)]
struct Between {
    /// This line's counted requesters whose results may wait (bounded by
    /// the classes of pop: end and lease).
    collect: Vec<RequesterId>,
    /// Other lines' requests this loop leaves items for, and since when.
    left: Left,
    /// Until when this line counts as contended (another process's
    /// request seen; a lost round alone may have lost to a direct pop or
    /// a purge of this process): see `LineLevel::contended`.
    contended_until: Option<Instant>,
}

impl Between {
    /// Keeps what a round carries to the next.
    fn note(&mut self, carry: Carry) {
        self.collect = carry.collect;
        self.left.note(carry.left_for, Instant::now());
        if carry.others_ahead {
            self.contended_until = Some(Instant::now() + CONTENDED_FOR);
        }
    }

    fn contended(&self) -> bool {
        self.contended_until
            .is_some_and(|until| Instant::now() < until)
    }
}

/// Why the loop's wait between rounds ended.
enum Woken {
    /// Something to do (or to look at) now.
    Again,
    /// The deadline or idle bound passed.
    Idle,
    /// The daemon is shutting down.
    Shutdown,
}

impl<S: Store> Staging<S> {
    /// Starts the fulfillment loop of `keys` unless one runs.
    pub fn ensure_fulfiller(&self, keys: &QueueKeys) {
        self.start_or_wake_fulfiller(keys, false);
    }

    /// Starts the fulfillment loop of `keys`, or wakes the running one
    /// (`wake`: a memory request joined the line; the loop may be idle).
    pub(in crate::staging) fn start_or_wake_fulfiller(&self, keys: &QueueKeys, wake: bool) {
        if *self.inner.shutdown.borrow() {
            return;
        }
        let id = (keys.kind(), keys.name().clone());
        let mut fulfillers = self.inner.fulfillers.lock();
        if let Some(running) = fulfillers.get(&id).filter(|f| !f.task.is_finished()) {
            if wake {
                // A permit is kept if the loop is busy: never lost.
                running.wake.notify_one();
            }
            return;
        }
        let pops = self.clone();
        let keys = keys.clone();
        let wake = Arc::new(Notify::new());
        let woken = wake.clone();
        let task = tokio::spawn(async move { pops.fulfill_loop(keys, woken).await });
        fulfillers.insert(id, Fulfiller { task, wake });
    }

    /// True while the fulfillment loop of `keys` runs in this process.
    pub(in crate::staging) fn fulfiller_runs(&self, keys: &QueueKeys) -> bool {
        let fulfillers = self.inner.fulfillers.lock();
        fulfillers
            .get(&(keys.kind(), keys.name().clone()))
            .is_some_and(|f| !f.task.is_finished())
    }

    async fn fulfill_loop(self, keys: QueueKeys, wake: Arc<Notify>) {
        let marker_key = keys.handoff_marker(rand::random());
        let collect = self.fulfill_rounds(&keys, &marker_key, &wake).await;
        // An idle loop's last round found no request of its line (nor
        // results to collect): only a shutdown leaves some behind.
        if *self.inner.shutdown.borrow() {
            let (line, batch_max) = (&self.inner.line, self.inner.config.fulfill_batch_max);
            let withdrawn =
                withdraw_line(&self.inner.store, &keys, line, &collect, batch_max).await;
            if let Err(error) = withdrawn {
                tracing::warn!(queue = %keys.name(), %error, "could not withdraw the line's counted requests; the reaper will");
            }
        }
        // The marker only mattered to this loop's unknown commit outcomes.
        let cleared = transact(&self.inner.store, RetryPolicy::default(), |txn| {
            let marker_key = &marker_key;
            async move { txn.clear(marker_key) }
        })
        .await;
        if let Err(error) = cleared {
            tracing::debug!(queue = %keys.name(), %error, "could not clear a fulfiller's hand-off marker");
        }
    }

    /// The rounds, until shutdown or idle; returns this line's counted
    /// requesters whose results may still wait. Bounded: it ends on
    /// shutdown, or after `fulfiller_idle_ms` without a request.
    async fn fulfill_rounds(
        &self,
        keys: &QueueKeys,
        marker_key: &[u8],
        wake: &Notify,
    ) -> Vec<RequesterId> {
        let mut shutdown = self.inner.shutdown.clone();
        let mut between = Between::default();
        let mut attempt = 0u64;
        loop {
            attempt += 1;
            if *shutdown.borrow() {
                return between.collect;
            }
            let round_began = Instant::now();
            let fulfilled = match self.one_round(keys, marker_key, attempt, &between).await {
                Ok(fulfilled) => fulfilled,
                Err(QueueError::Store(StoreError::Conflict)) => {
                    self.after_conflict(keys, &mut between.collect).await;
                    continue;
                }
                Err(error) => {
                    tracing::warn!(queue = %keys.name(), %error, "fulfillment failed; retrying");
                    tokio::time::sleep(Duration::from_millis(FULFILL_ERROR_PAUSE_MS)).await;
                    continue;
                }
            };
            self.count_round(keys, &fulfilled.counts);
            between.note(fulfilled.carry);
            if fulfilled.next.watch.is_none() {
                // More requests, or items held back by the byte bound: go on.
                let served = fulfilled.counts.served;
                self.gather(keys, wake, served, round_began.elapsed()).await;
                continue;
            }
            let idle = fulfilled.counts.met_no_request();
            match self
                .wait_for_next(keys, wake, &mut shutdown, fulfilled.next, &between.left)
                .await
            {
                Woken::Again => {}
                Woken::Idle if idle => {
                    self.retire_and_look_again(keys).await;
                    return between.collect;
                }
                Woken::Idle => {}
                Woken::Shutdown => return between.collect,
            }
        }
    }

    /// One round of [`fulfill_round`] over the memory requests claimed
    /// now (and the acks riding on them), handed over whatever its outcome.
    async fn one_round(
        &self,
        keys: &QueueKeys,
        marker_key: &[u8],
        attempt: u64,
        between: &Between,
    ) -> Result<Fulfilled, QueueError> {
        let config = &self.inner.config;
        let local = &self.inner.local;
        let claims = local.claim(keys, config.fulfill_batch_max);
        let acks = claims.acks();
        let stale = between.left.stale(Instant::now());
        let bounds = (
            config.fulfill_batch_max,
            config.fulfill_bytes_max,
            config.result_grace_ms,
        );
        let mut outcome = fulfill_round(
            &self.inner.store,
            keys,
            bounds,
            LocalHandoff {
                is_local: &|requester| local.is_local(requester),
                memory: claims.requests(),
                acks: &acks,
                marker_key,
                attempt,
            },
            LineLevel {
                line: &self.inner.line,
                collect: &between.collect,
                take_over: TakeOver::Only(&stale),
                contended: between.contended(),
            },
        )
        .await;
        // Settled whatever the outcome: a claimed memory request must
        // not outlive its transaction.
        self.hand_over_round(keys, claims, &mut outcome).await;
        outcome
    }

    /// After a round lost a conflict: another process's round won the
    /// items, so this line's pops get in line in the store, and keep their
    /// place there. Once they stand there, the next round takes the items
    /// left for them: no race to back off from.
    async fn after_conflict(&self, keys: &QueueKeys, collect: &mut Vec<RequesterId>) {
        StagingStats::add(&self.inner.stats.fulfill_conflicts, 1);
        metrics::conflict("fulfill");
        if !self.ask(keys, collect).await {
            let pause_us = rand::random::<u64>() % FULFILL_CONFLICT_BACKOFF_US_MAX;
            tokio::time::sleep(Duration::from_micros(pause_us)).await;
        }
    }

    /// Before a round that follows another at once: waits, at most half
    /// the previous round's duration (`round_took`) and [`GATHER_MAX`],
    /// for the line to hold the pops waiting now plus the `served` pops
    /// the previous round answered, whose workers send their next pop.
    ///
    /// Why: with one round in flight, the pops that arrive while a round
    /// commits make the next round, and the pops that round answers come
    /// back while the next one commits: under a steady load the workers
    /// split into two cohorts that take turns, each round serving half of
    /// them for one commit and one fsync. Letting the cohort just served
    /// catch up costs a round trip and serves both in one commit, so the
    /// commits, fsyncs and the round's own reads per item halve. Only
    /// timing changes: every pop in line is served by the round that
    /// follows, whatever ends the wait.
    async fn gather(&self, keys: &QueueKeys, wake: &Notify, served: usize, round_took: Duration) {
        let local = &self.inner.local;
        let target = local
            .memory_waiting(keys)
            .saturating_add(served)
            .min(self.inner.config.fulfill_batch_max);
        if served == 0 {
            return;
        }
        let deadline = Instant::now() + (round_took / 2).min(GATHER_MAX);
        // Bounded by the deadline: each pass waits for a pop joining.
        while local.memory_waiting(keys) < target {
            let joined = tokio::time::timeout_at(deadline.into(), wake.notified()).await;
            if joined.is_err() {
                return;
            }
        }
    }

    /// Counts what a round did.
    fn count_round(&self, keys: &QueueKeys, counts: &RoundCounts) {
        let stats = &self.inner.stats;
        StagingStats::add(&stats.line_pops_asked, counts.pops_asked as u64);
        StagingStats::add(&stats.line_results_written, counts.results_written as u64);
        StagingStats::add(&stats.line_results_collected, counts.collected as u64);
        StagingStats::add(&stats.acks_on_pops, counts.acked as u64);
        if counts.served + counts.expired == 0 {
            return;
        }
        StagingStats::add(&stats.fulfill_batches, 1);
        StagingStats::add(&stats.requests_expired, counts.expired as u64);
        if counts.items > 0 {
            ::metrics::histogram!(metrics::FULFILL_BATCH_SIZE).record(counts.items as f64);
        }
        if counts.expired > 0 {
            metrics::queue_count(
                metrics::REQUESTS_EXPIRED,
                keys.kind(),
                keys.name(),
                counts.expired as u64,
            );
        }
    }

    /// Waits for what `next` names, a pop joining the line (`wake`), the
    /// earliest deadline of a request waiting or of one `left` to another
    /// line turning stale, or the idle bound.
    async fn wait_for_next(
        &self,
        keys: &QueueKeys,
        wake: &Notify,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
        next: Next,
        left: &Left,
    ) -> Woken {
        let idle = Duration::from_millis(self.inner.config.fulfiller_idle_ms);
        let until_deadline = next
            .next_deadline_ms
            .map(|deadline| Duration::from_millis(deadline.saturating_sub(now_ms()) + 1))
            .unwrap_or(idle);
        let until_deadline = match left.next_due(Instant::now()) {
            Some(due) => until_deadline.min(due + Duration::from_millis(1)),
            None => until_deadline,
        };
        let watch = next.watch.expect("a round that waits arms a watch");
        // Another process serving this line's oldest counted request
        // changes it: its results wait.
        let own_watch = async {
            match next.own_watch {
                Some(watch) => {
                    let _ = watch.await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = own_watch => Woken::Again,
            fired = watch => {
                if let Err(error) = fired {
                    tracing::debug!(queue = %keys.name(), %error, "fulfiller watch failed");
                    tokio::time::sleep(Duration::from_millis(FULFILL_ERROR_PAUSE_MS)).await;
                }
                Woken::Again
            }
            _ = wake.notified() => Woken::Again,
            _ = tokio::time::sleep(until_deadline.min(idle)) => Woken::Idle,
            _ = shutdown.changed() => Woken::Shutdown,
        }
    }

    /// Retires an idle loop (about to end). A request registered or
    /// queued just before the retirement saw this loop alive and started
    /// none: look once more, and start a new loop if one came.
    async fn retire_and_look_again(&self, keys: &QueueKeys) {
        self.retire(keys);
        if self.has_requests(keys).await || self.inner.local.memory_waiting(keys) > 0 {
            self.ensure_fulfiller(keys);
        }
    }

    /// [`counted::ask`] for this line's pops waiting now; what it added
    /// is collected from on the next rounds. A failure is left to the
    /// next round (its pops stay in the memory line). True when it added
    /// a request.
    async fn ask(&self, keys: &QueueKeys, collect: &mut Vec<RequesterId>) -> bool {
        let batch_max = self.inner.config.fulfill_batch_max;
        let waiting = self.inner.local.waiting_by_class(keys, now_ms(), batch_max);
        match counted::ask(
            &self.inner.store,
            keys,
            &self.inner.line,
            &waiting,
            batch_max,
        )
        .await
        {
            Ok(asked) => {
                StagingStats::add(&self.inner.stats.line_pops_asked, u64::from(asked.pops));
                for requester in asked.requesters {
                    if !collect.contains(&requester) {
                        collect.push(requester);
                    }
                }
                asked.pops > 0
            }
            Err(error) => {
                tracing::debug!(queue = %keys.name(), %error, "could not put the line's pops in the store");
                false
            }
        }
    }

    async fn has_requests(&self, keys: &QueueKeys) -> bool {
        let (begin, end) = keys.requests_range();
        let read = async {
            let txn = self.inner.store.begin()?;
            txn.get_range(RangeRead::new(&begin, &end, 1).snapshot())
                .await
        };
        // When unsure, assume work: an extra fulfiller costs one idle period.
        read.await.map(|rows| !rows.is_empty()).unwrap_or(true)
    }

    /// Removes an idle fulfiller from the map (it is about to return).
    fn retire(&self, keys: &QueueKeys) {
        let mut fulfillers = self.inner.fulfillers.lock();
        fulfillers.remove(&(keys.kind(), keys.name().clone()));
    }

    /// Waits (at most `wait`) for the fulfillment loops to end after
    /// shutdown was signalled: in-flight commits finish and hand over.
    pub async fn join_fulfillers(&self, wait: Duration) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut fulfillers = self.inner.fulfillers.lock();
            fulfillers.drain().map(|(_, f)| f.task).collect()
        };
        let all = async {
            for task in tasks {
                let _ = task.await;
            }
        };
        let _ = tokio::time::timeout(wait, all).await;
    }
}
