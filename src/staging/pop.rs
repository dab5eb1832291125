//! A pop, from its caller's side: the direct attempt on an uncontended
//! queue, else a wait in the queue's line (in this process's memory, or as
//! a stored request), until the fulfiller hands it items (see
//! [`super::fulfiller`] and [`super::handoff`]).

use std::time::Duration;

use tokio::sync::watch;

use crate::envelope::{End, RequestValue, now_ms};
use crate::keys::QueueKeys;
use crate::metrics;
use crate::queue::{DirectPop, Item, QueueError};
use crate::staging::StagingStats;
use crate::staging::direct::{Attempt, try_pop};
use crate::staging::handoff::{Finishing, InLine};
use crate::staging::line::{LineRequest, LocalWaiter};
use crate::staging::pops::Pops;
use crate::staging::requester::{WithdrawOnDrop, await_result, deadline_after, register_with};
use crate::store::Store;

impl<S: Store> Pops<S> {
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
        let max = max.max(1);
        if self.inner.config.requests_in_memory && self.joins_line_at_once(keys, max, wait) {
            // Nothing to finish if the caller leaves: no commit is this
            // pop's own, and the line settles what its fulfiller took.
            let started = std::time::Instant::now();
            let mut waiter = InLine::new(self, keys);
            let items = self
                .pop_in_line(
                    keys,
                    &mut waiter.local,
                    LinePop {
                        end,
                        max,
                        wait,
                        lease_ms,
                    },
                    std::future::pending(),
                )
                .await?;
            self.leases_issued(&items);
            // Here only while its caller polls: dropped, it never gets here.
            record_delivery(keys, "staged", started, &items);
            crate::groups::deliver_soon(&self.inner.store, keys, &items);
            return Ok(items);
        }
        let (gone, gone_rx) = watch::channel(false);
        let (pops, popped_keys) = (self.clone(), keys.clone());
        let pop = async move {
            let keys = popped_keys;
            let started = std::time::Instant::now();
            let outcome = pops
                .pop_attempts(&keys, end, max, wait, lease_ms, gone_rx.clone())
                .await;
            let (path, items) = outcome?;
            pops.leases_issued(&items);
            // A pop finishing after its caller left puts its items back
            // (counted as put-backs): only items that reach a caller count.
            if !*gone_rx.borrow() {
                record_delivery(&keys, path, started, &items);
            }
            Ok(items)
        };
        let items = Finishing::new(self, keys, gone, Box::pin(pop)).await?;
        // No await since the pop completed: these items reached the caller.
        crate::groups::deliver_soon(&self.inner.store, keys, &items);
        Ok(items)
    }

    /// Pops one item the way FoundationDB's recipe does: direct pops,
    /// conflicts retried with backoff, never a request. For comparison with
    /// [`Self::pop`]; like it, a pop whose caller left is put back.
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
                    record_delivery(&keys, "direct", started, items);
                }
            }
            outcome
        };
        Finishing::new(self, keys, gone, Box::pin(pop)).await
    }

    /// A direct attempt (unless the head is contended here), then a staged
    /// wait: in the memory line, or as a stored request. `caller_gone`
    /// turns true when the caller has left: the wait ends at once. Returns
    /// the path the items came by (`direct` or `staged`) with them.
    async fn pop_attempts(
        &self,
        keys: &QueueKeys,
        end: End,
        max: usize,
        wait: Duration,
        lease_ms: u64,
        mut caller_gone: watch::Receiver<bool>,
    ) -> Result<(&'static str, Vec<Item>), QueueError> {
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
                return Ok(("direct", items));
            }
            Attempt::Done(DirectPop::Empty) if wait.is_zero() => return Ok(("direct", Vec::new())),
            Attempt::Done(DirectPop::Conflict) => {
                StagingStats::add(&stats.direct_conflicts, 1);
                metrics::conflict("direct_pop");
            }
            Attempt::Done(DirectPop::Empty) | Attempt::RequestsWaiting => {}
        }
        if self.inner.config.requests_in_memory {
            // A pop that must not wait gets here only having lost the race
            // for an item it found (a conflict, or requests ahead of it): it
            // waits in line for the fulfiller's own read, which hands it
            // items or finds the queue empty.
            let mut local = LocalWaiter::new(self.inner.local.clone(), keys);
            let stop = async move {
                let _ = caller_gone.wait_for(|gone| *gone).await;
            };
            let pop = LinePop {
                end,
                max,
                wait,
                lease_ms,
            };
            return Ok((
                "staged",
                self.pop_in_line(keys, &mut local, pop, stop).await?,
            ));
        }
        // Stored requests take one item each, and cannot answer "empty":
        // a pop that must not wait waits briefly for the fulfiller to hand
        // out the items it saw. Leaving is exact either way.
        let wait = if wait.is_zero() {
            Duration::from_millis(self.inner.config.lost_race_wait_ms)
        } else {
            wait
        };
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
                if let Some(items) = local.take_handed().await {
                    return Ok(("staged", self.staged_outcome(items)));
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
        Ok((
            "staged",
            self.staged_outcome(outcome?.into_iter().collect()),
        ))
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
        pop: LinePop,
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
        local.enqueue(LineRequest {
            request: RequestValue {
                deadline_ms,
                end: pop.end,
                lease_ms: pop.lease_ms,
            },
            max: pop.max,
            answers_empty,
        });
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
                    ::metrics::counter!(metrics::REQUESTS_EXPIRED, "queue" => metrics::queue_label(keys.name().as_str()), "kind" => metrics::kind_label(keys.kind()))
                        .increment(1);
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

/// What a pop waiting in line asks for.
#[derive(Debug, Clone, Copy)]
struct LinePop {
    end: End,
    /// Most items (at least 1).
    max: usize,
    /// Zero: answered by the fulfiller's next round, items or "empty".
    wait: Duration,
    /// 0: no lease, the items are deleted.
    lease_ms: u64,
}

/// Records delivered items: count by path, pop service time and the time
/// it waited with its queue empty, enqueue-to-delivery wait. An empty
/// answer records nothing: it is no delivery.
fn record_delivery(
    keys: &QueueKeys,
    path: &'static str,
    started: std::time::Instant,
    items: &[Item],
) {
    if items.is_empty() {
        return;
    }
    metrics::pops(keys.kind(), keys.name(), path, items.len() as u64);
    let now = now_ms();
    // A long poll on an empty queue waits for a push: that idling is the
    // client's choice, not the daemon's work. Until its first item was
    // enqueued the queue had nothing for it; clocks of other processes
    // may disagree, so the split is clamped to the pop's own span.
    let elapsed_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let started_ms = now as f64 - elapsed_ms;
    let first_enqueued_ms = items
        .iter()
        .map(|item| item.enqueued_at_ms)
        .min()
        .unwrap_or(0);
    let empty_ms = (first_enqueued_ms as f64 - started_ms).clamp(0.0, elapsed_ms);
    let item_waits_s = items
        .iter()
        .map(|item| now.saturating_sub(item.enqueued_at_ms) as f64 / 1_000.0);
    metrics::delivery(
        path,
        (elapsed_ms - empty_ms) / 1_000.0,
        empty_ms / 1_000.0,
        item_waits_s,
    );
}
