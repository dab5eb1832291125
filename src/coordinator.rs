//! The coordinator: staged pops for callers, a fulfillment loop per queue
//! with waiters, the reaper, and the timer that returns expired leases and
//! reveals delayed items, all stopped by one shutdown signal.
//!
//! Several coordinators may share one store (two daemons on one cluster):
//! their fulfillers then conflict on the keys they both consume, and the
//! loser retries; an item is never handed out twice.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::envelope::{End, RequestValue, now_ms};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::lease::settle::Returned;
use crate::lease::settler::{SettleOp, Settled, Settler};
use crate::lease::{LeaseError, Receipt};
use crate::metrics;
use crate::queue::{DirectPop, Item, QueueError};
use crate::staging::direct::{Attempt, try_pop};
use crate::staging::fulfill::{LocalHandoff, fulfill_once};
use crate::staging::local::{LocalId, LocalWaiter, LocalWaiters};
use crate::staging::reap::{reap_queue, registered_queues};
use crate::staging::requester::{
    WithdrawOnDrop, await_result, deadline_after, register_with, restore_items,
};
use crate::staging::{StagingConfig, StagingStats};
use crate::store::{RangeRead, RetryPolicy, Store, StoreError, Transaction, transact};

/// Backoff ceiling after a fulfillment conflict, in microseconds.
const FULFILL_CONFLICT_BACKOFF_US_MAX: u64 = 2_000;
/// Pause after an unexpected fulfillment error.
const FULFILL_ERROR_PAUSE_MS: u64 = 100;

struct Inner<S: Store> {
    store: S,
    config: StagingConfig,
    stats: StagingStats,
    fulfillers: Mutex<HashMap<(QueueKind, QueueName), Fulfiller>>,
    shutdown: watch::Sender<bool>,
    /// When the timer next looks, in epoch ms (`u64::MAX` while it sweeps,
    /// so anything scheduled meanwhile wakes it).
    timer_next_ms: AtomicU64,
    /// Wakes the timer for a due time earlier than `timer_next_ms`.
    timer_wake: Notify,
    /// Pops waiting in this process, served in memory by its fulfillers.
    local: Arc<LocalWaiters>,
    /// Settle lines: concurrent acks, nacks and extends share commits.
    settler: Settler<S>,
}

/// A running fulfillment loop.
struct Fulfiller {
    task: JoinHandle<()>,
    /// Wakes the loop for a memory request (stored requests wake it
    /// through the store's wake key).
    wake: Arc<Notify>,
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
    /// [`Self::spawn_reaper`] to sweep stranded results.
    pub fn new(store: S, config: StagingConfig) -> Self {
        let (shutdown, _) = watch::channel(false);
        Coordinator {
            inner: Arc::new(Inner {
                settler: Settler::new(store.clone()),
                store,
                config,
                stats: StagingStats::default(),
                fulfillers: Mutex::new(HashMap::new()),
                shutdown,
                timer_next_ms: AtomicU64::new(u64::MAX),
                timer_wake: Notify::new(),
                local: Arc::new(LocalWaiters::default()),
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.inner.store
    }

    /// The protocol's settings.
    pub fn config(&self) -> &StagingConfig {
        &self.inner.config
    }

    /// Counters of the protocol's work.
    pub fn stats(&self) -> &StagingStats {
        &self.inner.stats
    }

    /// Pops one item from `end` of the queue, waiting up to `wait` (capped
    /// at the configured maximum; zero means do not wait). Tries a direct
    /// pop first; on a conflict, or when requests are already waiting, it
    /// registers a request and waits on its watch. Dropping the future
    /// withdraws the request (an item already handed to it goes back).
    pub async fn pop(
        &self,
        keys: &QueueKeys,
        end: End,
        wait: Duration,
    ) -> Result<Option<Item>, QueueError> {
        Ok(self.pop_many(keys, end, 1, wait).await?.into_iter().next())
    }

    /// Pops up to `max` items: a direct pop takes up to `max` at once; a
    /// staged pop delivers one.
    ///
    /// Once a commit that takes an item is submitted the pop completes even
    /// if the caller goes away (an HTTP client disconnecting drops the
    /// handler's future): it moves to a task of its own, and items nobody
    /// is left to receive are put back where they were.
    pub async fn pop_many(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Item>, QueueError> {
        self.pop_leased(keys, end, max, wait, 0).await
    }

    /// [`Self::pop_many`], with each item moved under a lease of `lease_ms`
    /// (0: no lease, the item is deleted) in the commit that takes it. A
    /// leased item is held until acked, nacked, or its lease expires.
    pub async fn pop_leased(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
        lease_ms: u64,
    ) -> Result<Vec<Item>, QueueError> {
        let wait = wait.min(Duration::from_millis(self.inner.config.wait_max_ms));
        if self.inner.config.requests_in_memory && self.joins_line_at_once(keys, max, wait) {
            // Nothing to finish if the caller leaves: no commit is this
            // pop's own, and the line settles what its fulfiller took.
            let mut waiter = InLine::new(self, keys);
            let items = self
                .pop_in_line(
                    keys,
                    &mut waiter.local,
                    end,
                    wait,
                    lease_ms,
                    std::future::pending(),
                )
                .await;
            if let Some(expires_at_ms) = items
                .iter()
                .filter_map(|i| i.lease)
                .map(|l| l.expires_at_ms)
                .min()
            {
                self.schedule(expires_at_ms);
            }
            return Ok(items);
        }
        let (gone, gone_rx) = watch::channel(false);
        let (coordinator, popped_keys) = (self.clone(), keys.clone());
        let pop = async move {
            let keys = popped_keys;
            let outcome = coordinator
                .pop_attempts(&keys, end, max, wait, lease_ms, gone_rx)
                .await;
            if let Ok(items) = &outcome
                && let Some(expires_at_ms) = items
                    .iter()
                    .filter_map(|i| i.lease)
                    .map(|l| l.expires_at_ms)
                    .min()
            {
                coordinator.schedule(expires_at_ms);
            }
            outcome
        };
        Finishing::new(self, keys, gone, Box::pin(pop)).await
    }

    /// Pops one item the way FoundationDB's recipe does: direct pops,
    /// conflicts retried with backoff, never a request. For comparison with
    /// [`Self::pop`]; like it, a pop whose caller left is put back.
    pub async fn pop_recipe(&self, keys: &QueueKeys) -> Result<Vec<Item>, QueueError> {
        let (coordinator, popped_keys) = (self.clone(), keys.clone());
        let pop = async move {
            let keys = popped_keys;
            let started = std::time::Instant::now();
            let queue =
                crate::queue::Queue::new(coordinator.inner.store.clone(), keys.name().clone());
            let outcome = queue
                .pop()
                .await
                .map(|item| item.into_iter().collect::<Vec<_>>());
            if let Ok(items) = &outcome {
                StagingStats::add(&coordinator.inner.stats.direct_pops, items.len() as u64);
                record_delivery(&keys, "direct", started, items);
            }
            outcome
        };
        let (gone, _) = watch::channel(false);
        Finishing::new(self, keys, gone, Box::pin(pop)).await
    }

    /// Returns items whose caller went away to their original keys (leased
    /// ones are released from their lease, their delivery uncounted).
    async fn put_back(&self, keys: &QueueKeys, items: Vec<Item>) {
        let count = items.len();
        ::metrics::counter!(metrics::PUT_BACKS, "queue" => metrics::queue_label(keys.name().as_str()))
            .increment(count as u64);
        let restored = restore_items(&self.inner.store, keys, items).await;
        match restored {
            Ok(()) => {
                tracing::debug!(queue = %keys.name(), items = count, "put back items of a pop whose caller left")
            }
            Err(error) => {
                tracing::error!(queue = %keys.name(), %error, items = count, "could not put back items of a pop whose caller left")
            }
        }
    }

    /// [`Self::put_back`] from a drop (no await there): spawned on the
    /// current runtime; outside one the items are lost, and logged.
    fn put_back_from_drop(&self, keys: &QueueKeys, items: Vec<Item>) {
        if items.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let (coordinator, keys) = (self.clone(), keys.clone());
                runtime.spawn(async move { coordinator.put_back(&keys, items).await });
            }
            Err(_) => {
                tracing::error!(queue = %keys.name(), items = items.len(), "items delivered to a pop dropped outside a runtime are lost");
            }
        }
    }

    /// A direct attempt (unless the head is contended here), then a staged
    /// wait: in the memory line, or as a stored request. `caller_gone`
    /// turns true when the caller has left: the wait ends at once.
    async fn pop_attempts(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
        lease_ms: u64,
        mut caller_gone: watch::Receiver<bool>,
    ) -> Result<Vec<Item>, QueueError> {
        let started = std::time::Instant::now();
        let stats = &self.inner.stats;
        let attempt = if self.joins_line_at_once(keys, max, wait) {
            (Attempt::RequestsWaiting, Vec::new())
        } else {
            try_pop(&self.inner.store, keys, end, max, lease_ms).await?
        };
        let (attempt, items) = attempt;
        match attempt {
            Attempt::Done(DirectPop::Popped(_)) => {
                StagingStats::add(&stats.direct_pops, items.len() as u64);
                record_delivery(keys, "direct", started, &items);
                return Ok(items);
            }
            Attempt::Done(DirectPop::Empty) if wait.is_zero() => return Ok(Vec::new()),
            Attempt::Done(DirectPop::Conflict) => {
                StagingStats::add(&stats.direct_conflicts, 1);
                metrics::conflict("direct_pop");
            }
            Attempt::Done(DirectPop::Empty) | Attempt::RequestsWaiting => {}
        }
        // A pop that must not wait gets here only having lost the race for
        // an item it found (a conflict, or requests ahead of it): a lost
        // race is not an empty queue, so it waits in line briefly for the
        // fulfiller to hand out the items it saw. Leaving is exact either way.
        let wait = if wait.is_zero() {
            Duration::from_millis(self.inner.config.lost_race_wait_ms)
        } else {
            wait
        };
        if self.inner.config.requests_in_memory {
            let mut local = LocalWaiter::new(self.inner.local.clone(), keys);
            let stop = async move {
                let _ = caller_gone.wait_for(|gone| *gone).await;
            };
            return Ok(self
                .pop_in_line(keys, &mut local, end, wait, lease_ms, stop)
                .await);
        }
        let (deadline, deadline_ms) = deadline_after(wait);
        let request = RequestValue {
            deadline_ms,
            end,
            lease_ms,
        };
        let mut local = LocalWaiter::new(self.inner.local.clone(), keys);
        let registered =
            register_with(&self.inner.store, keys, &request, |id| local.add_id(id)).await;
        let mut registration = match registered {
            Ok(registration) => registration,
            Err(error) => {
                // An attempt reported as failed may have committed and been
                // served here already: deliver that item, not the error.
                if let Some(item) = local.take_handed().await {
                    return Ok(self.staged_outcome(keys, started, Some(item)));
                }
                return Err(error.into());
            }
        };
        StagingStats::add(&stats.requests_registered, 1);
        let guard = WithdrawOnDrop::new(self.inner.store.clone(), keys.clone(), &registration);
        self.ensure_fulfiller(keys);
        let mut shutdown = self.inner.shutdown.subscribe();
        let stop = async move {
            tokio::select! {
                _ = shutdown.wait_for(|stopped| *stopped) => {}
                _ = caller_gone.wait_for(|gone| *gone) => {}
            }
        };
        let outcome = await_result(
            &self.inner.store,
            keys,
            &mut registration,
            Some(&mut local),
            deadline,
            stop,
        )
        .await;
        guard.disarm();
        Ok(self.staged_outcome(keys, started, outcome?))
    }

    /// Counts a staged pop's end: delivered (`Some`), or withdrawn.
    fn staged_outcome(
        &self,
        keys: &QueueKeys,
        started: std::time::Instant,
        item: Option<Item>,
    ) -> Vec<Item> {
        let stats = &self.inner.stats;
        let Some(item) = item else {
            StagingStats::add(&stats.requests_withdrawn, 1);
            return Vec::new();
        };
        StagingStats::add(&stats.staged_pops, 1);
        let items = vec![item];
        record_delivery(keys, "staged", started, &items);
        items
    }

    /// True when a pop should skip the direct attempt and wait in line at
    /// once: pops of this queue already wait here, or (memory requests) its
    /// fulfiller runs here. The head is then contended: a direct attempt
    /// would most likely conflict with the fulfiller (and jump the line),
    /// and the fulfiller serves a memory request for the same one commit a
    /// direct pop costs. A pop of several items, or one that must not
    /// wait, always tries: only a direct pop takes more than one item.
    fn joins_line_at_once(&self, keys: &QueueKeys, max: usize, wait: Duration) -> bool {
        max == 1
            && !wait.is_zero()
            && (self.inner.local.waiting_on(keys) > 0
                || (self.inner.config.requests_in_memory && self.fulfiller_runs(keys)))
    }

    /// Waits in the queue's memory request line (see
    /// [`crate::staging::local`]) until this process's fulfiller hands an
    /// item over, or the wait, shutdown or `stop` ends it (an item handed
    /// over meanwhile is still taken: it left the store for this pop).
    async fn pop_in_line(
        &self,
        keys: &QueueKeys,
        local: &mut LocalWaiter,
        end: End,
        wait: Duration,
        lease_ms: u64,
        stop: impl std::future::Future<Output = ()>,
    ) -> Vec<Item> {
        let started = std::time::Instant::now();
        let stats = &self.inner.stats;
        let (deadline, deadline_ms) = deadline_after(wait);
        local.enqueue(RequestValue {
            deadline_ms,
            end,
            lease_ms,
        });
        StagingStats::add(&stats.memory_requests, 1);
        self.start_or_wake_fulfiller(keys, true);
        let mut shutdown = self.inner.shutdown.subscribe();
        let ended = async move {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = shutdown.wait_for(|stopped| *stopped) => {}
                _ = stop => {}
            }
        };
        let received = tokio::select! {
            // An error means the sender went unused: nothing was handed.
            received = &mut local.receiver => received.ok(),
            () = ended => local.take_handed().await,
        };
        self.staged_outcome(keys, started, received)
    }

    /// Starts the fulfillment loop of `keys` unless one runs.
    pub fn ensure_fulfiller(&self, keys: &QueueKeys) {
        self.start_or_wake_fulfiller(keys, false);
    }

    /// Starts the fulfillment loop of `keys`, or wakes the running one
    /// (`wake`: a memory request joined the line; the loop may be idle).
    fn start_or_wake_fulfiller(&self, keys: &QueueKeys, wake: bool) {
        if *self.inner.shutdown.borrow() {
            return;
        }
        let id = (keys.kind(), keys.name().clone());
        let mut fulfillers = self.inner.fulfillers.lock().expect("fulfiller map lock");
        if let Some(running) = fulfillers.get(&id).filter(|f| !f.task.is_finished()) {
            if wake {
                // A permit is kept if the loop is busy: never lost.
                running.wake.notify_one();
            }
            return;
        }
        let coordinator = self.clone();
        let keys = keys.clone();
        let wake = Arc::new(Notify::new());
        let woken = wake.clone();
        let task = tokio::spawn(async move { coordinator.fulfill_loop(keys, woken).await });
        fulfillers.insert(id, Fulfiller { task, wake });
    }

    /// True while the fulfillment loop of `keys` runs in this process.
    fn fulfiller_runs(&self, keys: &QueueKeys) -> bool {
        let fulfillers = self.inner.fulfillers.lock().expect("fulfiller map lock");
        fulfillers
            .get(&(keys.kind(), keys.name().clone()))
            .is_some_and(|f| !f.task.is_finished())
    }

    /// Number of fulfillment loops running.
    pub fn fulfillers_running(&self) -> usize {
        let fulfillers = self.inner.fulfillers.lock().expect("fulfiller map lock");
        fulfillers
            .values()
            .filter(|f| !f.task.is_finished())
            .count()
    }

    /// Memory requests of queue `keys` waiting in this process now (they
    /// are not in the store's `waiting` counter).
    pub fn memory_waiting(&self, keys: &QueueKeys) -> usize {
        self.inner.local.memory_waiting(keys)
    }

    async fn fulfill_loop(self, keys: QueueKeys, wake: Arc<Notify>) {
        let marker_key = keys.handoff_marker(rand::random());
        self.fulfill_rounds(&keys, &marker_key, &wake).await;
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

    async fn fulfill_rounds(&self, keys: &QueueKeys, marker_key: &[u8], wake: &Notify) {
        let config = &self.inner.config;
        let stats = &self.inner.stats;
        let mut shutdown = self.inner.shutdown.subscribe();
        let idle = Duration::from_millis(config.fulfiller_idle_ms);
        let mut attempt = 0u64;
        // Bounded: it ends on shutdown, or after `fulfiller_idle_ms`
        // without a request.
        loop {
            attempt += 1;
            if *shutdown.borrow() {
                return;
            }
            let local = &self.inner.local;
            let claims = local.claim(keys, config.fulfill_batch_max);
            let mut outcome = fulfill_once(
                &self.inner.store,
                keys,
                config.fulfill_batch_max,
                config.fulfill_bytes_max,
                config.result_grace_ms,
                LocalHandoff {
                    is_local: &|requester| local.is_local(requester),
                    memory: claims.requests(),
                    marker_key,
                    attempt,
                },
            )
            .await;
            // Settled whatever the outcome: a claimed memory request must
            // not outlive its transaction. Durable now: hand over, and put
            // back what nobody here takes.
            let handed = match &mut outcome {
                Ok(fulfilled) => std::mem::take(&mut fulfilled.handed),
                Err(_) => Vec::new(),
            };
            StagingStats::add(&stats.local_hand_offs, handed.len() as u64);
            let mut served_memory = Vec::new();
            let mut unclaimed = Vec::new();
            for (id, item) in handed {
                match id {
                    LocalId::Memory(seq) => served_memory.push((seq, item)),
                    LocalId::Registered(requester) => {
                        unclaimed.extend(local.hand_over(&requester, item))
                    }
                }
            }
            unclaimed.extend(claims.settle(served_memory));
            if !unclaimed.is_empty() {
                StagingStats::add(&stats.local_hand_offs_unclaimed, unclaimed.len() as u64);
                self.put_back(keys, unclaimed).await;
            }
            let fulfilled = match outcome {
                Ok(fulfilled) => fulfilled,
                Err(QueueError::Store(StoreError::Conflict)) => {
                    StagingStats::add(&stats.fulfill_conflicts, 1);
                    metrics::conflict("fulfill");
                    let pause_us = rand::random::<u64>() % FULFILL_CONFLICT_BACKOFF_US_MAX;
                    tokio::time::sleep(Duration::from_micros(pause_us)).await;
                    continue;
                }
                Err(error) => {
                    tracing::warn!(queue = %keys.name(), %error, "fulfillment failed; retrying");
                    tokio::time::sleep(Duration::from_millis(FULFILL_ERROR_PAUSE_MS)).await;
                    continue;
                }
            };
            if fulfilled.served + fulfilled.expired > 0 {
                StagingStats::add(&stats.fulfill_batches, 1);
                StagingStats::add(&stats.requests_expired, fulfilled.expired as u64);
                if fulfilled.served > 0 {
                    ::metrics::histogram!(metrics::FULFILL_BATCH_SIZE)
                        .record(fulfilled.served as f64);
                }
                if fulfilled.expired > 0 {
                    ::metrics::counter!(metrics::REQUESTS_EXPIRED, "queue" => metrics::queue_label(keys.name().as_str()))
                        .increment(fulfilled.expired as u64);
                }
            }
            let Some(watch) = fulfilled.watch else {
                // More requests, or items held back by the byte bound: go on.
                continue;
            };
            let no_requests =
                fulfilled.unserved == 0 && fulfilled.served == 0 && fulfilled.expired == 0;
            // Waiting requests expire: look again by the earliest deadline.
            let until_deadline = fulfilled
                .next_deadline_ms
                .map(|deadline| Duration::from_millis(deadline.saturating_sub(now_ms()) + 1))
                .unwrap_or(idle);
            tokio::select! {
                fired = watch => {
                    if let Err(error) = fired {
                        tracing::debug!(queue = %keys.name(), %error, "fulfiller watch failed");
                        tokio::time::sleep(Duration::from_millis(FULFILL_ERROR_PAUSE_MS)).await;
                    }
                }
                _ = wake.notified() => {}
                _ = tokio::time::sleep(until_deadline.min(idle)) => {
                    if no_requests {
                        self.retire(keys);
                        // A request registered or queued just before the
                        // retirement saw this loop alive and started none:
                        // look once more.
                        if self.has_requests(keys).await || local.memory_waiting(keys) > 0
                        {
                            self.ensure_fulfiller(keys);
                        }
                        return;
                    }
                }
                _ = shutdown.changed() => return,
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
        let mut fulfillers = self.inner.fulfillers.lock().expect("fulfiller map lock");
        fulfillers.remove(&(keys.kind(), keys.name().clone()));
    }

    /// Sweeps every registered queue once as of now.
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
            let label = metrics::queue_label(keys.name().as_str());
            if reaped.results > 0 {
                ::metrics::counter!(metrics::RESULTS_REAPED, "queue" => label.clone())
                    .increment(reaped.results as u64);
            }
            if reaped.requests > 0 {
                ::metrics::counter!(metrics::REQUESTS_EXPIRED, "queue" => label)
                    .increment(reaped.requests as u64);
            }
        }
        let stats = &self.inner.stats;
        StagingStats::add(&stats.results_reaped, total.results as u64);
        StagingStats::add(&stats.requests_expired, total.requests as u64);
        Ok(total)
    }

    /// Runs [`Self::reap_all`] every `reap_interval_ms`, and the timer
    /// (expired leases, delayed items; see [`Self::sweep_due`]), until
    /// shutdown. The handle ends when both have stopped.
    pub fn spawn_reaper(&self) -> JoinHandle<()> {
        let reaper = self.clone();
        let timer = self.clone();
        tokio::spawn(async move {
            tokio::join!(reaper.reap_loop(), timer.timer_loop());
        })
    }

    /// The reaper follows appointments in the due index, so the timer runs
    /// it; what is left here is moving data of the layout before the due
    /// index into it, once, retried until it succeeds or shutdown.
    async fn reap_loop(self) {
        let mut shutdown = self.inner.shutdown.subscribe();
        let interval = Duration::from_millis(self.inner.config.reap_interval_ms.max(1));
        loop {
            match crate::lease::migrate::migrate(&self.inner.store, now_ms()).await {
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
        let next = self.inner.timer_next_ms.fetch_min(due_ms, Ordering::AcqRel);
        if due_ms < next {
            self.inner.timer_wake.notify_one();
        }
    }

    /// Bounded: one sweep per due time; between sweeps it sleeps until the
    /// earliest due time it knows (at most `reap_interval_ms` away), waking
    /// early only when [`Self::schedule`] lowers that time, and sweeping
    /// only once it has come.
    async fn timer_loop(self) {
        let mut shutdown = self.inner.shutdown.subscribe();
        let interval_ms = self.inner.config.reap_interval_ms.max(1);
        let next_ms = &self.inner.timer_next_ms;
        loop {
            if *shutdown.borrow() {
                return;
            }
            let now = now_ms();
            let planned = now.saturating_add(interval_ms);
            // A lease issued while the sweep runs wakes the timer only if
            // it is due before the planned next look.
            next_ms.store(planned, Ordering::Release);
            let due = match self.sweep_due(now).await {
                Ok(due) => due.unwrap_or(planned).min(planned),
                Err(error) => {
                    tracing::warn!(%error, "lease and delay sweep failed");
                    planned
                }
            };
            let mut next = next_ms.fetch_min(due, Ordering::AcqRel).min(due);
            loop {
                let pause = Duration::from_millis(next.saturating_sub(now_ms()));
                tokio::select! {
                    _ = tokio::time::sleep(pause) => break,
                    _ = self.inner.timer_wake.notified() => {
                        next = next_ms.load(Ordering::Acquire);
                        if next <= now_ms() {
                            break;
                        }
                    }
                    _ = shutdown.changed() => return,
                }
            }
        }
    }

    /// Returns every lease expired at `now_ms`, reveals every delayed item
    /// due and reaps the queues due a look, in every queue, reading only
    /// what is due (see [`crate::lease::due`]). Returns the earliest time
    /// something else comes due (`now_ms` when a bound left work undone).
    pub async fn sweep_due(&self, now_ms: u64) -> Result<Option<u64>, QueueError> {
        let (_, next) = crate::lease::timer::run_round(
            &self.inner.store,
            &self.inner.config.delivery,
            &self.inner.stats,
            now_ms,
        )
        .await?;
        Ok(next)
    }

    /// Acks the lease `receipt` of queue `keys`: the item is done.
    pub async fn ack(&self, keys: &QueueKeys, receipt: &Receipt) -> Result<(), LeaseError> {
        self.inner
            .settler
            .settle(keys, *receipt, SettleOp::Ack)
            .await?;
        ::metrics::counter!(metrics::ACKS, "queue" => metrics::queue_label(keys.name().as_str()))
            .increment(1);
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
        let max_deliveries = self.inner.config.delivery.max_deliveries(keys.name());
        let op = SettleOp::Nack {
            delay_ms,
            max_deliveries,
        };
        let Settled::Nacked(returned) = self.inner.settler.settle(keys, *receipt, op).await? else {
            unreachable!("a nack is answered as a nack")
        };
        let label = metrics::queue_label(keys.name().as_str());
        ::metrics::counter!(metrics::NACKS, "queue" => label.clone()).increment(1);
        match returned {
            Returned::Delayed { visible_at_ms } => self.schedule(visible_at_ms),
            Returned::DeadLettered => {
                StagingStats::add(&self.inner.stats.dead_lettered, 1);
                ::metrics::counter!(metrics::DEAD_LETTERED, "queue" => label).increment(1);
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

    /// The settle lines (their counters show how many settles shared a commit).
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
        let tasks: Vec<JoinHandle<()>> = {
            let mut fulfillers = self.inner.fulfillers.lock().expect("fulfiller map lock");
            fulfillers.drain().map(|(_, f)| f.task).collect()
        };
        let all = async {
            for task in tasks {
                let _ = task.await;
            }
        };
        let _ = tokio::time::timeout(wait, all).await;
    }

    /// True once [`Self::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// A snapshot of the stats counters, by name.
    pub fn stats_snapshot(&self) -> Vec<(&'static str, u64)> {
        let s = &self.inner.stats;
        [
            ("direct_pops", &s.direct_pops),
            ("staged_pops", &s.staged_pops),
            ("direct_conflicts", &s.direct_conflicts),
            ("requests_registered", &s.requests_registered),
            ("memory_requests", &s.memory_requests),
            ("fulfill_batches", &s.fulfill_batches),
            ("fulfill_conflicts", &s.fulfill_conflicts),
            ("requests_expired", &s.requests_expired),
            ("requests_withdrawn", &s.requests_withdrawn),
            ("results_reaped", &s.results_reaped),
            ("leases_expired", &s.leases_expired),
            ("dead_lettered", &s.dead_lettered),
            ("delayed_revealed", &s.delayed_revealed),
            ("local_hand_offs", &s.local_hand_offs),
            ("local_hand_offs_unclaimed", &s.local_hand_offs_unclaimed),
        ]
        .into_iter()
        .map(|(name, counter)| (name, counter.load(Ordering::Relaxed)))
        .collect()
    }
}

type Outcome = Result<Vec<Item>, QueueError>;

/// A pop, boxed so that it can move.
type Pop = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// A pop that runs in its caller's task and finishes even if the caller
/// leaves. Once a commit that takes an item is submitted it may apply
/// whatever the caller does (an HTTP client hanging up drops the handler's
/// future): dropped while pending, the pop moves to a task of its own, is
/// told its caller is gone (a waiting request withdraws at once), and what
/// it takes is put back where it was. Completed, it handed its items to
/// the caller directly: there is no window in between.
struct Finishing<S: Store> {
    pop: Option<Pop>,
    gone: watch::Sender<bool>,
    coordinator: Coordinator<S>,
    keys: QueueKeys,
}

impl<S: Store> Finishing<S> {
    fn new(
        coordinator: &Coordinator<S>,
        keys: &QueueKeys,
        gone: watch::Sender<bool>,
        pop: Pop,
    ) -> Self {
        Finishing {
            pop: Some(pop),
            gone,
            coordinator: coordinator.clone(),
            keys: keys.clone(),
        }
    }
}

impl<S: Store> std::future::Future for Finishing<S> {
    type Output = Outcome;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Outcome> {
        let pop = self
            .pop
            .as_mut()
            .expect("a finished pop is not polled again");
        let outcome = std::task::ready!(pop.as_mut().poll(cx));
        self.pop = None;
        std::task::Poll::Ready(outcome)
    }
}

impl<S: Store> Drop for Finishing<S> {
    fn drop(&mut self) {
        let Some(pop) = self.pop.take() else {
            return;
        };
        self.gone.send_replace(true);
        let (coordinator, keys) = (self.coordinator.clone(), self.keys.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Ok(items) = pop.await
                        && !items.is_empty()
                    {
                        coordinator.put_back(&keys, items).await;
                    }
                });
            }
            Err(_) => {
                tracing::error!(queue = %keys.name(), "a pop dropped outside a runtime cannot finish; an item it took may be lost");
            }
        }
    }
}

/// A pop waiting in line in its caller's own task. Dropped mid-wait (an
/// HTTP client hanging up), it leaves the line; an item already handed to
/// it goes back. (One its fulfiller has claimed but not yet settled finds
/// no receiver when it settles, and the fulfiller puts it back.)
struct InLine<S: Store> {
    local: LocalWaiter,
    coordinator: Coordinator<S>,
    keys: QueueKeys,
}

impl<S: Store> InLine<S> {
    fn new(coordinator: &Coordinator<S>, keys: &QueueKeys) -> Self {
        InLine {
            local: LocalWaiter::new(coordinator.inner.local.clone(), keys),
            coordinator: coordinator.clone(),
            keys: keys.clone(),
        }
    }
}

impl<S: Store> Drop for InLine<S> {
    fn drop(&mut self) {
        if let Some(item) = self.local.abandon() {
            self.coordinator.put_back_from_drop(&self.keys, vec![item]);
        }
    }
}

/// Records delivered items: count by path, pop latency, enqueue-to-delivery wait.
fn record_delivery(
    keys: &QueueKeys,
    path: &'static str,
    started: std::time::Instant,
    items: &[Item],
) {
    let label = metrics::queue_label(keys.name().as_str());
    ::metrics::counter!(metrics::POPS, "queue" => label, "path" => path)
        .increment(items.len() as u64);
    ::metrics::histogram!(metrics::POP_LATENCY, "path" => path)
        .record(started.elapsed().as_secs_f64());
    let now = now_ms();
    for item in items {
        let wait_ms = now.saturating_sub(item.enqueued_at_ms);
        ::metrics::histogram!(metrics::ITEM_WAIT).record(wait_ms as f64 / 1_000.0);
    }
}
