//! A pop, from its caller's side: the direct attempt on an uncontended
//! queue, else a wait in the queue's line (in this process's memory, or as
//! a stored request), until the fulfiller hands it items (see
//! [`super::round::fulfillment_loop`] and [`super::handoff`]).

use parking_lot::Mutex;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::envelope::{End, RequestValue};
use crate::keys::QueueKeys;
use crate::lease::Receipt;
use crate::metrics;
use crate::queue::{DirectPop, Item, QueueError};
use crate::staging::StagingStats;
use crate::staging::direct::{Attempt, try_pop};
use crate::staging::handoff::{Delivered, Finishing, InLine, record_delivery};
use crate::staging::line::{AckOutcome, LineRequest, LocalWaiter, SharedAcks};
use crate::staging::registry::Staging;
use crate::staging::requester::{WithdrawOnDrop, await_result, deadline_after, register_with};
use crate::staging::round::riding::{ack_alone, outcomes_after_line, riding};
use crate::store::Store;

impl<S: Store> Staging<S> {
    /// Pops one item from `end` of the queue, waiting up to `wait` (capped
    /// at the configured maximum; zero means do not wait). Tries a direct
    /// pop first; on a conflict, or when requests are already waiting, it
    /// registers a request and waits on its watch. Dropping the future
    /// withdraws the request (an item already handed to it goes back).
    #[cfg(feature = "testing")]
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
    #[cfg(feature = "testing")]
    pub async fn pop_many(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Item>, QueueError> {
        let pop = PopAsk {
            end,
            max,
            wait,
            lease_ms: None,
        };
        Ok(self.pop_acking(keys, pop, Vec::new()).await?.items)
    }

    /// [`Self::pop_many`], with each item moved under a lease of `lease_ms`
    /// in the commit that takes it. A leased item is held until acked,
    /// nacked, or its lease expires.
    #[cfg(feature = "testing")]
    pub async fn pop_leased(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
        lease_ms: NonZeroU64,
    ) -> Result<Vec<Item>, QueueError> {
        let pop = PopAsk {
            end,
            max,
            wait,
            lease_ms: Some(lease_ms),
        };
        Ok(self.pop_acking(keys, pop, Vec::new()).await?.items)
    }

    /// A pop (up to `pop.max` items from `pop.end`, waiting up to
    /// `pop.wait`, each item leased for `pop.lease_ms` or deleted) with
    /// `acks` riding on it (see [`super::round::riding`]): the receipts
    /// are acked, then the pop proceeds;
    /// their outcomes come back in order with the items. A receipt that
    /// fails is its outcome, never the pop's error.
    pub async fn pop_acking(
        &self,
        keys: &QueueKeys,
        pop: PopAsk,
        acks: Vec<Receipt>,
    ) -> Result<Popped, QueueError> {
        let pop = PopAsk {
            wait: pop
                .wait
                .min(Duration::from_millis(self.inner.config.wait_max_ms)),
            max: pop.max.max(1),
            ..pop
        };
        if self.inner.config.requests_in_memory && self.joins_line_at_once(keys, pop.max, pop.wait)
        {
            return self.pop_joining_line(keys, pop, acks).await;
        }
        let (gone, gone_rx) = watch::channel(false);
        let (pops, popped_keys) = (self.clone(), keys.clone());
        let acked = Arc::new(Mutex::new(Vec::new()));
        let acked_out = acked.clone();
        let attempts = async move {
            let keys = popped_keys;
            let started = std::time::Instant::now();
            let outcome = pops.pop_attempts(&keys, pop, acks, gone_rx.clone()).await;
            let (path, items, outcomes) = outcome?;
            *acked_out.lock() = outcomes;
            pops.leases_issued(&items);
            // A pop finishing after its caller left puts its items back
            // (counted as put-backs): only items that reach a caller count.
            if !*gone_rx.borrow() {
                record_delivery(&keys, path, started, &items);
            }
            Ok(items)
        };
        let items = Finishing::new(self, keys, gone, Box::pin(attempts)).await?;
        // No await since the pop completed: these items reached the caller.
        crate::queue::groups::deliver_soon(&self.inner.store, keys, &items);
        let acked = std::mem::take(&mut *acked.lock());
        Ok(Popped { items, acked })
    }

    /// A pop that joins the line at once (the head is contended here),
    /// its acks riding into the fulfill round. Nothing to finish if the
    /// caller leaves: no commit is this pop's own, and the line's claims, once resolved,
    /// answer for what its fulfiller took (acks included).
    async fn pop_joining_line(
        &self,
        keys: &QueueKeys,
        pop: PopAsk,
        acks: Vec<Receipt>,
    ) -> Result<Popped, QueueError> {
        let started = std::time::Instant::now();
        let mut waiter = InLine::new(self, keys);
        let acks = riding(acks);
        let line_pop = self
            .pop_in_line(
                keys,
                &mut waiter.local,
                pop,
                acks.clone(),
                std::future::pending(),
            )
            .await;
        let acked = outcomes_after_line(&self.inner.store, keys, acks).await;
        let items = line_pop?;
        self.leases_issued(&items);
        let acked = match acked {
            Ok(acked) => acked,
            Err(error) => {
                // The pop fails: its items go back, not lost.
                self.put_back(keys, items).await;
                return Err(error.into());
            }
        };
        // Here only while its caller polls: dropped, it never gets here.
        record_delivery(keys, Delivered::Staged, started, &items);
        crate::queue::groups::deliver_soon(&self.inner.store, keys, &items);
        Ok(Popped { items, acked })
    }

    /// Pops one item the way FoundationDB's recipe does: direct pops,
    /// conflicts retried with backoff, never a request. For comparison with
    /// [`Self::pop_acking`]; like it, a pop whose caller left is put back.
    pub async fn pop_recipe(&self, keys: &QueueKeys) -> Result<Vec<Item>, QueueError> {
        let (pops, popped_keys) = (self.clone(), keys.clone());
        let (gone, gone_rx) = watch::channel(false);
        let pop = async move {
            let keys = popped_keys;
            let started = std::time::Instant::now();
            let queue = crate::queue::Queue::new(pops.inner.store.clone(), keys.name().clone());
            let outcome = queue
                .pop()
                .await
                .map(|item| item.into_iter().collect::<Vec<_>>());
            if let Ok(items) = &outcome {
                StagingStats::add(&pops.inner.stats.direct_pops, items.len() as u64);
                if !*gone_rx.borrow() {
                    record_delivery(&keys, Delivered::Direct, started, items);
                }
            }
            outcome
        };
        Finishing::new(self, keys, gone, Box::pin(pop)).await
    }

    /// A direct attempt (unless the head is contended here), then a staged
    /// wait: in the memory line, or as a stored request. `caller_gone`
    /// turns true when the caller has left: the wait ends at once. Returns
    /// the path the items came by (`direct` or `staged`) with them, and
    /// the outcomes of `acks` (acked in the direct attempt's commit, else
    /// riding on in line, else alone before a stored request).
    async fn pop_attempts(
        &self,
        keys: &QueueKeys,
        pop: PopAsk,
        acks: Vec<Receipt>,
        mut caller_gone: watch::Receiver<bool>,
    ) -> Result<(Delivered, Vec<Item>, Vec<AckOutcome>), QueueError> {
        let (attempt, acks) = self.direct_attempt(keys, pop, acks).await?;
        let acked = match attempt {
            DirectOutcome::Done(items, acked) => return Ok((Delivered::Direct, items, acked)),
            DirectOutcome::Wait(acked) => acked,
        };
        if self.inner.config.requests_in_memory {
            // A pop that must not wait gets here only having lost the race
            // for an item it found (a conflict, or requests ahead of it): it
            // waits in line for the fulfiller's own read, which hands it
            // items or finds the queue empty.
            let mut local = LocalWaiter::new(self.inner.local.clone(), keys);
            let stop = async move {
                let _ = caller_gone.wait_for(|gone| *gone).await;
            };
            let acks = riding(acks);
            let items = self
                .pop_in_line(keys, &mut local, pop, acks.clone(), stop)
                .await;
            let line_acked = outcomes_after_line(&self.inner.store, keys, acks).await;
            let items = items?;
            return match (acked, line_acked) {
                (Some(acked), _) => Ok((Delivered::Staged, items, acked)),
                (None, Ok(acked)) => Ok((Delivered::Staged, items, acked)),
                (None, Err(error)) => {
                    // The pop fails: its items go back, not lost.
                    self.put_back(keys, items).await;
                    Err(error.into())
                }
            };
        }
        let acked = match acked {
            Some(acked) => acked,
            None => ack_alone(&self.inner.store, keys, &acks).await?,
        };
        let items = self.wait_as_stored_request(keys, pop, caller_gone).await?;
        Ok((Delivered::Staged, items, acked))
    }

    /// The direct attempt, unless the head is contended here: its items
    /// (and the acks' outcomes) when it is the answer, else the acks'
    /// outcomes if they committed, and the acks still to ride on.
    async fn direct_attempt(
        &self,
        keys: &QueueKeys,
        pop: PopAsk,
        acks: Vec<Receipt>,
    ) -> Result<(DirectOutcome, Vec<Receipt>), QueueError> {
        let stats = &self.inner.stats;
        if self.joins_line_at_once(keys, pop.max, pop.wait) {
            return Ok((DirectOutcome::Wait(None), acks));
        }
        let terms = (pop.end, pop.max, pop.lease_ms);
        let direct = try_pop(&self.inner.store, keys, terms, &acks).await?;
        let acks = if direct.acked.is_some() {
            Vec::new()
        } else {
            acks
        };
        let outcome = match direct.attempt {
            Attempt::Done(DirectPop::Took(_)) => {
                StagingStats::add(&stats.direct_pops, direct.items.len() as u64);
                DirectOutcome::Done(direct.items, direct.acked.unwrap_or_default())
            }
            Attempt::Done(DirectPop::Empty) if pop.wait.is_zero() => {
                DirectOutcome::Done(Vec::new(), direct.acked.unwrap_or_default())
            }
            Attempt::Done(DirectPop::Conflict) => {
                StagingStats::add(&stats.direct_conflicts, 1);
                metrics::conflict("direct_pop");
                DirectOutcome::Wait(direct.acked)
            }
            Attempt::Done(DirectPop::Empty) | Attempt::RequestsWaiting => {
                DirectOutcome::Wait(direct.acked)
            }
        };
        Ok((outcome, acks))
    }

    /// Waits as a stored request (`requests_in_memory` off). Stored
    /// requests take one item each, and cannot answer "empty": a pop that
    /// must not wait waits briefly for the fulfiller to hand out the items
    /// it saw. Leaving is exact either way.
    async fn wait_as_stored_request(
        &self,
        keys: &QueueKeys,
        pop: PopAsk,
        mut caller_gone: watch::Receiver<bool>,
    ) -> Result<Vec<Item>, QueueError> {
        let stats = &self.inner.stats;
        let wait = if pop.wait.is_zero() {
            Duration::from_millis(self.inner.config.lost_race_wait_ms)
        } else {
            pop.wait
        };
        let (deadline, deadline_ms) = deadline_after(wait);
        let request = RequestValue {
            deadline_ms,
            end: pop.end,
            lease_ms: pop.lease_ms,
        };
        let mut local = LocalWaiter::new(self.inner.local.clone(), keys);
        let registered =
            register_with(&self.inner.store, keys, &request, |id| local.add_id(id)).await;
        let mut registration = match registered {
            Ok(registration) => registration,
            Err(error) => {
                // An attempt reported as failed may have committed and been
                // served here already: deliver that item, not the error.
                if let Some(items) = local.take_handed().await {
                    return Ok(self.staged_outcome(items));
                }
                return Err(error.into());
            }
        };
        StagingStats::add(&stats.requests_registered, 1);
        let guard = WithdrawOnDrop::new(self.inner.store.clone(), keys.clone(), &registration);
        self.ensure_fulfiller(keys);
        let mut shutdown = self.inner.shutdown.clone();
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
        Ok(self.staged_outcome(outcome?.into_iter().collect()))
    }

    /// Counts a staged pop's end: items, or nothing (withdrawn, or found
    /// empty by the fulfiller).
    fn staged_outcome(&self, items: Vec<Item>) -> Vec<Item> {
        let stats = &self.inner.stats;
        if items.is_empty() {
            StagingStats::add(&stats.requests_withdrawn, 1);
        } else {
            StagingStats::add(&stats.staged_pops, items.len() as u64);
        }
        items
    }

    /// True when a pop should skip the direct attempt and wait in line at
    /// once: the head is contended. With memory requests that is whenever
    /// the queue's fulfiller runs here or pops of it wait here, for every
    /// kind of pop (no wait, long-poll, leased, several items, either
    /// end): a direct attempt would most likely conflict with the
    /// fulfiller (and jump the line), and the fulfiller serves the pop for
    /// its share of one commit. Stored requests take one item and cannot
    /// answer "empty", so there only single-item waiting pops join at once.
    fn joins_line_at_once(&self, keys: &QueueKeys, max: usize, wait: Duration) -> bool {
        if self.inner.config.requests_in_memory {
            return self.inner.local.waiting_on(keys) > 0 || self.fulfiller_runs(keys);
        }
        max == 1 && !wait.is_zero() && self.inner.local.waiting_on(keys) > 0
    }

    /// Waits in the queue's memory request line (see
    /// [`crate::staging::line`]) until this process's fulfiller hands
    /// items over (or, for a pop that must not wait, finds none visible),
    /// or the wait, shutdown or `stop` ends it (items handed over meanwhile
    /// are still taken: they left the store for this pop).
    async fn pop_in_line(
        &self,
        keys: &QueueKeys,
        local: &mut LocalWaiter,
        pop: PopAsk,
        acks: Option<SharedAcks>,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Vec<Item>, QueueError> {
        let stats = &self.inner.stats;
        let answers_empty = pop.wait.is_zero();
        // A pop that must not wait is answered by the next round; the
        // bound only guards against a fulfiller that cannot commit.
        let wait = if answers_empty {
            Duration::from_millis(self.inner.config.lost_race_wait_ms)
        } else {
            pop.wait
        };
        let (deadline, deadline_ms) = deadline_after(wait);
        local.enqueue(
            LineRequest {
                request: RequestValue {
                    deadline_ms,
                    end: pop.end,
                    lease_ms: pop.lease_ms,
                },
                max: pop.max,
                answers_empty,
            },
            acks,
        );
        StagingStats::add(&stats.memory_requests, 1);
        self.start_or_wake_fulfiller(keys, true);
        let mut shutdown = self.inner.shutdown.clone();
        // True when the deadline ended the wait (not shutdown or the caller).
        let ended = async move {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => true,
                _ = shutdown.wait_for(|stopped| *stopped) => false,
                _ = stop => false,
            }
        };
        let received = tokio::select! {
            // An error means the sender went unused: nothing was handed.
            received = &mut local.receiver => received.ok(),
            expired = ended => {
                let handed = local.take_handed().await;
                if expired && !answers_empty && handed.as_ref().is_none_or(Vec::is_empty) {
                    // Counted as the fulfiller and reaper count stored
                    // requests that reach their deadline unserved.
                    metrics::queue_count(metrics::REQUESTS_EXPIRED, keys.kind(), keys.name(), 1);
                }
                handed
            }
        };
        match received {
            Some(items) => Ok(self.staged_outcome(items)),
            // Only the fulfiller's own read may say "empty".
            None if answers_empty => Err(QueueError::Unanswered),
            None => Ok(self.staged_outcome(Vec::new())),
        }
    }

    /// Memory requests of queue `keys` waiting in this process now (they
    /// are not in the store's `waiting` counter).
    pub fn memory_waiting(&self, keys: &QueueKeys) -> usize {
        self.inner.local.memory_waiting(keys)
    }
}

/// What a pop asks for.
#[derive(Debug, Clone, Copy)]
pub struct PopAsk {
    /// The end it pops from.
    pub end: End,
    /// Most items (at least 1).
    pub max: usize,
    /// How long it may wait. Zero: in line, answered by the fulfiller's
    /// next round, items or "empty".
    pub wait: Duration,
    /// Lease each item for this long (`None`: the items are deleted).
    pub lease_ms: Option<NonZeroU64>,
}

/// What a pop with acks riding on it got.
#[derive(Debug)]
pub struct Popped {
    /// The items (none: nothing came within the wait).
    pub items: Vec<Item>,
    /// One outcome per receipt it carried, in order.
    pub acked: Vec<AckOutcome>,
}

/// How a direct attempt ended, for the pop.
enum DirectOutcome {
    /// The pop's answer: its items, and the acks' outcomes.
    Done(Vec<Item>, Vec<AckOutcome>),
    /// The pop waits in line; the acks' outcomes if they committed.
    Wait(Option<Vec<AckOutcome>>),
}
