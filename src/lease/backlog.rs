//! The settle backlog: concurrent acks, nacks and extends of one queue share
//! one transaction, as pops share the fulfiller's (docs/design.md §4.1, "Settle").
//!
//! A settle joins its queue's backlog in memory; a settler task (one per
//! queue with settles pending, gone when the backlog is empty) takes up to
//! [`SETTLE_BATCH_MAX`] of them, runs them in one transaction, commits, and
//! answers each. Each receipt's reads are not snapshot, so a settle racing
//! the timer or another daemon's settle of the same lease still has
//! exactly one winner; a receipt found unknown or expired is that
//! receipt's outcome, computed inside the transaction, and does not fail
//! the others. Two settles of one receipt in one batch see each other's
//! writes (the second finds the lease gone). A settle whose caller left
//! still runs to its end in the task: it applies fully or not at all.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::envelope::now_ms;
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::metrics;
use crate::queue::QueueError;
use crate::store::{Store, StoreError, Transaction};

use super::settle::{Returned, ack_in, extend_in, nack_in};
use super::{LeaseError, Receipt};

/// Most settles one transaction takes.
pub const SETTLE_BATCH_MAX: usize = 256;
/// Most nacks and extends one transaction takes: each writes its item
/// (up to 100 kB) again, and a commit should stay under ~10 MB.
pub const SETTLE_MOVES_MAX: usize = 64;
/// Most settles waiting in one queue's backlog; past it a settle runs in a
/// transaction of its own (memory stays bounded, nothing is refused).
pub const SETTLE_BACKLOG_MAX: usize = 10_000;
/// Attempts of one batch before a conflict splits it in two (so one
/// contended receipt cannot keep the others from committing).
const CONFLICTS_BEFORE_SPLIT: u32 = 2;
/// Attempts of a single settle before its retryable error is its answer.
const ATTEMPTS_MAX: u32 = 100;
/// Ceiling of the random pause after a conflict, in µs.
const CONFLICT_BACKOFF_US_MAX: u64 = 2_000;

/// What to do with a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleOp {
    /// Done: delete the item.
    Ack,
    /// Return the item now or after `delay_ms`, or dead-letter it.
    Nack {
        /// Invisible for this long first, in ms.
        delay_ms: u64,
        /// Deliveries allowed before dead-lettering (`None`: no limit).
        max_deliveries: Option<u32>,
    },
    /// Move the expiry to `lease_ms` from now.
    Extend {
        /// The new lease, in ms (at least 1).
        lease_ms: u64,
    },
}

/// What a settle did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Acked: the item is gone.
    Acked,
    /// Nacked: where the item went.
    Nacked(Returned),
    /// Extended: the new expiry, in ms since the epoch.
    Extended(u64),
}

type Reply = oneshot::Sender<Result<Settled, LeaseError>>;

struct Pending {
    receipt: Receipt,
    op: SettleOp,
    reply: Reply,
}

#[derive(Default)]
struct Backlog {
    pending: VecDeque<Pending>,
    /// A settler task serves this backlog.
    running: bool,
}

/// Counters of the settle backlog's work.
#[derive(Debug, Default)]
pub struct SettleStats {
    /// Settles answered from a committed transaction.
    pub settled: AtomicU64,
    /// Settle transactions committed.
    pub commits: AtomicU64,
    /// Settle transactions that conflicted.
    pub conflicts: AtomicU64,
}

type Backlogs = Mutex<HashMap<(QueueKind, QueueName), Backlog>>;

/// Settle backlogs of every queue over one store.
pub struct Settler<S: Store> {
    store: S,
    backlogs: Arc<Backlogs>,
    stats: Arc<SettleStats>,
}

impl<S: Store> Settler<S> {
    /// Backlogs over `store`; settler tasks start on demand.
    pub fn new(store: S) -> Self {
        Settler {
            store,
            backlogs: Arc::default(),
            stats: Arc::default(),
        }
    }

    /// Counters of the work done.
    #[cfg(feature = "testing")]
    pub fn stats(&self) -> &SettleStats {
        &self.stats
    }

    /// Settles `receipt` of queue `keys` in a transaction shared with the
    /// queue's other pending settles.
    pub async fn settle(
        &self,
        keys: &QueueKeys,
        receipt: Receipt,
        op: SettleOp,
    ) -> Result<Settled, LeaseError> {
        let mut outcomes = self.settle_many(keys, vec![(receipt, op)]).await;
        outcomes.pop().expect("one outcome per settle")
    }

    /// Settles every `(receipt, op)` of queue `keys` (in order; a receipt
    /// named twice is settled once, the second finding it gone); returns
    /// each one's outcome.
    pub async fn settle_many(
        &self,
        keys: &QueueKeys,
        settles: Vec<(Receipt, SettleOp)>,
    ) -> Vec<Result<Settled, LeaseError>> {
        let mut answers = Vec::with_capacity(settles.len());
        let mut overflow = Vec::new();
        {
            let id = (keys.kind(), keys.name().clone());
            let mut backlogs = self.backlogs.lock();
            let backlog = backlogs.entry(id.clone()).or_default();
            for (receipt, op) in settles {
                if let SettleOp::Extend { lease_ms } = op {
                    assert!(lease_ms > 0, "a lease lasts at least a millisecond");
                }
                let (reply, answer) = oneshot::channel();
                answers.push(answer);
                let pending = Pending { receipt, op, reply };
                if backlog.pending.len() >= SETTLE_BACKLOG_MAX {
                    overflow.push(pending);
                } else {
                    backlog.pending.push_back(pending);
                }
            }
            if !backlog.running && !backlog.pending.is_empty() {
                backlog.running = true;
                tokio::spawn(self.task(keys).run());
            }
        }
        if !overflow.is_empty() {
            // Past the backlog, in the caller's task: a caller leaving
            // mid-commit leaves these outcomes unknown to it, as an
            // unbatched settle always could; each commit is atomic.
            let task = self.task(keys);
            for chunk in overflow_chunks(overflow) {
                task.run_batches(chunk).await;
            }
        }
        let mut outcomes = Vec::with_capacity(answers.len());
        for answer in answers {
            let cancelled = LeaseError::Queue(QueueError::Store(StoreError::Cancelled));
            outcomes.push(answer.await.unwrap_or(Err(cancelled)));
        }
        outcomes
    }

    fn task(&self, keys: &QueueKeys) -> Task<S> {
        Task {
            store: self.store.clone(),
            backlogs: self.backlogs.clone(),
            stats: self.stats.clone(),
            keys: keys.clone(),
            id: (keys.kind(), keys.name().clone()),
        }
    }
}

/// Marks a queue's settler stopped if its task ends without emptying its
/// backlog (it panicked, or its runtime is shutting down): its pending
/// settles are dropped, so their callers learn `Cancelled` instead of
/// waiting for good, and the next settle starts a new task. Without it, a
/// panic in one batch would leave `running` set and every later settle of
/// the queue waiting forever.
struct RunningGuard {
    backlogs: Arc<Backlogs>,
    id: (QueueKind, QueueName),
    ended: bool,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut backlogs = self.backlogs.lock();
        if let Some(backlog) = backlogs.remove(&self.id) {
            tracing::error!(queue = %self.id.1, pending = backlog.pending.len(),
                "a queue's settler stopped before its backlog was empty; its pending settles are cancelled");
        }
    }
}

/// Settles past a full backlog, in batches within the backlog's bounds.
fn overflow_chunks(mut pending: Vec<Pending>) -> Vec<Vec<Pending>> {
    let mut chunks = Vec::new();
    while !pending.is_empty() {
        let rest = pending.split_off(pending.len().min(SETTLE_MOVES_MAX));
        chunks.push(std::mem::replace(&mut pending, rest));
    }
    chunks
}

/// One queue's settler.
struct Task<S: Store> {
    store: S,
    backlogs: Arc<Backlogs>,
    stats: Arc<SettleStats>,
    keys: QueueKeys,
    id: (QueueKind, QueueName),
}

impl<S: Store> Task<S> {
    /// Serves the backlog until it is empty (bounded: each turn takes at
    /// least one settle, and callers add at most [`SETTLE_BACKLOG_MAX`]).
    async fn run(self) {
        let mut guard = RunningGuard {
            backlogs: self.backlogs.clone(),
            id: self.id.clone(),
            ended: false,
        };
        self.serve_backlog().await;
        guard.ended = true;
    }

    /// The body of [`Self::run`].
    async fn serve_backlog(&self) {
        loop {
            let batch: Vec<Pending> = {
                let mut backlogs = self.backlogs.lock();
                let Some(backlog) = backlogs.get_mut(&self.id) else {
                    return;
                };
                if backlog.pending.is_empty() {
                    backlog.running = false;
                    backlogs.remove(&self.id);
                    return;
                }
                let mut moves = 0;
                let take = backlog
                    .pending
                    .iter()
                    .take(SETTLE_BATCH_MAX)
                    .take_while(|p| {
                        moves += usize::from(p.op != SettleOp::Ack);
                        moves <= SETTLE_MOVES_MAX
                    })
                    .count();
                backlog.pending.drain(..take.max(1)).collect()
            };
            self.run_batches(batch).await;
        }
    }

    /// Runs `batch` in one transaction, split in halves on repeated
    /// conflicts; answers every settle in it.
    async fn run_batches(&self, batch: Vec<Pending>) {
        let mut work = vec![batch];
        while let Some(batch) = work.pop() {
            if let Some((first, second)) = self.run_one(batch).await {
                work.push(second);
                work.push(first);
            }
        }
    }

    /// One batch to its end, or its two halves after repeated conflicts.
    async fn run_one(&self, batch: Vec<Pending>) -> Option<(Vec<Pending>, Vec<Pending>)> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let error = match self.attempt(&batch).await {
                Ok(outcomes) => {
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    self.stats
                        .settled
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    ::metrics::counter!(metrics::SETTLE_COMMITS).increment(1);
                    ::metrics::histogram!(metrics::SETTLE_BATCH_SIZE).record(batch.len() as f64);
                    for (pending, outcome) in batch.into_iter().zip(outcomes) {
                        // A caller that left does not take its answer: fine.
                        let _ = pending.reply.send(outcome);
                    }
                    return None;
                }
                Err(error) => error,
            };
            // "Maybe committed" is not retried: a second run would report
            // the outcome of a lease the first may have consumed.
            let retryable = error.is_retryable() && !error.is_maybe_committed();
            if matches!(error, StoreError::Conflict) {
                self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                metrics::conflict("settle");
            }
            if retryable && attempt >= CONFLICTS_BEFORE_SPLIT && batch.len() > 1 {
                let mut first = batch;
                let second = first.split_off(first.len() / 2);
                return Some((first, second));
            }
            if !retryable || attempt >= ATTEMPTS_MAX {
                for pending in batch {
                    let _ = pending.reply.send(Err(error.clone().into()));
                }
                return None;
            }
            let pause_us = rand::random::<u64>() % CONFLICT_BACKOFF_US_MAX;
            tokio::time::sleep(Duration::from_micros(pause_us)).await;
        }
    }

    /// One transaction over `batch`: every settle's outcome, committed.
    async fn attempt(
        &self,
        batch: &[Pending],
    ) -> Result<Vec<Result<Settled, LeaseError>>, StoreError> {
        let txn = self.store.begin()?;
        let now = now_ms();
        let keys = &self.keys;
        let mut outcomes = Vec::with_capacity(batch.len());
        for pending in batch {
            let receipt = &pending.receipt;
            let outcome = match pending.op {
                SettleOp::Ack => ack_in(&txn, keys, receipt, now)
                    .await?
                    .map(|()| Settled::Acked),
                SettleOp::Nack {
                    delay_ms,
                    max_deliveries,
                } => nack_in(&txn, keys, receipt, delay_ms, max_deliveries, now)
                    .await?
                    .map(Settled::Nacked),
                SettleOp::Extend { lease_ms } => extend_in(&txn, keys, receipt, lease_ms, now)
                    .await?
                    .map(Settled::Extended),
            };
            outcomes.push(outcome);
        }
        txn.commit().await?;
        Ok(outcomes)
    }
}
