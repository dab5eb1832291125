//! The embedded transaction: a fjall snapshot at the read version, the
//! transaction's own writes on top, and its read-conflict ranges.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;

use fjall::Readable;
use tokio::sync::{mpsc, oneshot};

use super::Shared;
use super::committer::CommitRequest;
use super::scan::GappedScan;
use super::watches::WatchSender;
use super::write_set::{KeyOp, Overlay, WriteSet, apply_all};
use crate::store::{
    Atomic, KeyValue, RangeRead, Read, StoreError, TRANSACTION_SIZE_MAX, Transaction, Watch,
    check_key, check_value, key_after,
};

/// What a transaction accumulates until it commits.
#[derive(Default)]
struct Pending {
    writes: WriteSet,
    reads: Vec<(Vec<u8>, Vec<u8>)>,
    read_bytes: usize,
    watches: Vec<(Vec<u8>, WatchSender)>,
}

struct TxnInner {
    shared: Arc<Shared>,
    commits: mpsc::Sender<CommitRequest>,
    read_version: u64,
    began: Instant,
    snapshot: fjall::Snapshot,
    /// `None` once the transaction was handed to the committer.
    pending: Mutex<Option<Pending>>,
}

impl Drop for TxnInner {
    fn drop(&mut self) {
        // The resolver keeps history for this read version until now.
        self.shared.resolver.lock().unregister(self.read_version);
    }
}

/// A transaction on the embedded store. Clones share it.
#[derive(Clone)]
pub struct EmbeddedTxn {
    inner: Arc<TxnInner>,
}

fn io(error: fjall::Error) -> StoreError {
    match error {
        // fjall refuses everything after a failed write or flush, as the
        // committer does after a failed group: the store is gone for good.
        fjall::Error::Poisoned => StoreError::Unavailable(error.to_string()),
        error => StoreError::Io(error.to_string()),
    }
}

impl EmbeddedTxn {
    pub(crate) fn begin(
        shared: Arc<Shared>,
        commits: mpsc::Sender<CommitRequest>,
    ) -> Result<Self, StoreError> {
        if let Some(failure) = shared.failed.get() {
            return Err(StoreError::Unavailable(failure.clone()));
        }
        let started = Instant::now();
        let mut spins = 0u32;
        // Bounded: a group in flight finishes within an fsync; a store that
        // stalls for the whole transaction age limit is reported.
        let (snapshot, read_version) = loop {
            let visibility = shared.visibility.lock();
            let snapshot = shared.db.snapshot();
            let torn = visibility
                .inflight_floor
                .is_some_and(|floor| snapshot.seqno() > floor);
            if !torn {
                // Every group up to `published` is in this snapshot, none after.
                let read_version = visibility.published + 1;
                // Registration under the same lock: pruning cannot drop
                // history this read version needs in between.
                shared.resolver.lock().register(read_version);
                break (snapshot, read_version);
            }
            // fjall made a batch visible before the committer published
            // it: wait for the committer rather than read half a group.
            drop(snapshot);
            drop(visibility);
            if started.elapsed() > shared.age_max {
                return Err(StoreError::Io(
                    "the committer has not published a group for 5 s".into(),
                ));
            }
            // Usually the committer publishes within microseconds; if a
            // flush opened the window during an fsync, stop spinning.
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        };
        Ok(EmbeddedTxn {
            inner: Arc::new(TxnInner {
                shared,
                commits,
                read_version,
                began: Instant::now(),
                snapshot,
                pending: Mutex::new(Some(Pending::default())),
            }),
        })
    }

    fn check_age(&self) -> Result<(), StoreError> {
        if self.inner.began.elapsed() > self.inner.shared.age_max {
            return Err(StoreError::TooOld);
        }
        Ok(())
    }

    /// Runs `f` on the pending state, failing if the transaction was committed.
    fn with_pending<R>(
        &self,
        f: impl FnOnce(&mut Pending) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let mut pending = self.inner.pending.lock();
        match pending.as_mut() {
            Some(pending) => f(pending),
            None => Err(StoreError::UsedAfterCommit),
        }
    }

    fn add_read_range(
        pending: &mut Pending,
        begin: Vec<u8>,
        end: Vec<u8>,
    ) -> Result<(), StoreError> {
        pending.read_bytes += begin.len() + end.len();
        if pending.read_bytes + pending.writes.bytes > TRANSACTION_SIZE_MAX {
            return Err(StoreError::TransactionTooLarge);
        }
        pending.reads.push((begin, end));
        Ok(())
    }

    fn check_write_size(pending: &Pending) -> Result<(), StoreError> {
        if pending.read_bytes + pending.writes.bytes > TRANSACTION_SIZE_MAX {
            return Err(StoreError::TransactionTooLarge);
        }
        Ok(())
    }

    fn committed_value(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let shared = &self.inner.shared;
        Ok(self
            .inner
            .snapshot
            .get(&shared.data, key)
            .map_err(io)?
            .map(|v| v.to_vec()))
    }

    fn atomic(&self, key: &[u8], mutation: Atomic) -> Result<(), StoreError> {
        check_key(key)?;
        self.with_pending(|pending| {
            pending.writes.atomic(key, mutation);
            Self::check_write_size(pending)
        })
    }

    /// What each atomic key of `writes` holds at the read version, in the
    /// order of `writes.ops`. Read here, on the caller's thread, so the
    /// committer (one thread for the whole store) reads a key only when a
    /// commit since this read version wrote it: with many queues due at
    /// once, reading the counters it adds to was most of its time.
    fn atomic_bases(&self, writes: &WriteSet) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        writes
            .ops
            .iter()
            .filter(|(_, op)| matches!(op, KeyOp::Atomic(_)))
            .map(|(key, _)| self.committed_value(key))
            .collect()
    }

    /// Committed rows of `[begin, end)` at the read version, read only in
    /// the gaps between known-empty stretches, merged with this
    /// transaction's own writes; reports what it saw empty on the way.
    fn read_committed(
        &self,
        range: &RangeRead<'_>,
        overlay: &WriteSet,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let shared = &self.inner.shared;
        let read_version = self.inner.read_version;
        let mut committed = GappedScan::new(
            shared,
            &self.inner.snapshot,
            read_version,
            range.begin,
            range.end,
            range.reverse,
        );
        let rows = overlay.merge_range(
            range.begin,
            range.end,
            range.limit,
            range.reverse,
            committed.by_ref(),
        );
        let observed_empty = committed.finish();
        if !observed_empty.is_empty() {
            let mut resolver = shared.resolver.lock();
            for (begin, end) in observed_empty {
                resolver.observe_empty(read_version, begin, end);
            }
        }
        rows
    }
}

impl Transaction for EmbeddedTxn {
    async fn get(&self, key: &[u8], read: Read) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        self.check_age()?;
        let overlay = self.with_pending(|pending| {
            if !read.is_snapshot() {
                Self::add_read_range(pending, key.to_vec(), key_after(key))?;
            }
            Ok(pending.writes.overlay(key))
        })?;
        match overlay {
            Overlay::Known(value) => Ok(value),
            Overlay::Apply(mutations) => {
                let base = self.committed_value(key)?;
                Ok(Some(apply_all(base.as_deref(), &mutations)))
            }
            Overlay::Untouched => self.committed_value(key),
        }
    }

    async fn get_range(&self, range: RangeRead<'_>) -> Result<Vec<KeyValue>, StoreError> {
        range.validate()?;
        check_key(range.begin)?;
        check_key(range.end)?;
        self.check_age()?;
        // The overlay is copied out of the lock so the scan holds none.
        let overlay = self.with_pending(|pending| Ok(clone_overlay(&pending.writes, &range)))?;
        let rows = self.read_committed(&range, &overlay)?;
        if !range.read.is_snapshot() {
            let (begin, end) = range.conflict_range(&rows);
            self.with_pending(|pending| Self::add_read_range(pending, begin, end))?;
        }
        Ok(rows)
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        check_key(begin)?;
        check_key(end)?;
        if begin > end {
            return Err(StoreError::InvalidArgument("range begin is after its end"));
        }
        self.with_pending(|pending| Self::add_read_range(pending, begin.to_vec(), end.to_vec()))
    }

    fn set(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        check_value(value)?;
        self.with_pending(|pending| {
            pending.writes.set(key, value);
            Self::check_write_size(pending)
        })
    }

    fn clear(&self, key: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        self.with_pending(|pending| {
            pending.writes.clear(key);
            Self::check_write_size(pending)
        })
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        check_key(begin)?;
        check_key(end)?;
        if begin > end {
            return Err(StoreError::InvalidArgument("range begin is after its end"));
        }
        self.with_pending(|pending| {
            pending.writes.clear_range(begin, end);
            Self::check_write_size(pending)
        })
    }

    fn atomic_add(&self, key: &[u8], delta: i64) -> Result<(), StoreError> {
        self.atomic(key, Atomic::Add(delta))
    }

    fn atomic_max(&self, key: &[u8], value: u64) -> Result<(), StoreError> {
        self.atomic(key, Atomic::Max(value))
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, StoreError> {
        check_key(key)?;
        let (sender, receiver) = oneshot::channel();
        self.with_pending(|pending| {
            pending.watches.push((key.to_vec(), sender));
            Ok(())
        })?;
        Ok(Watch::new(async move {
            match receiver.await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Cancelled),
            }
        }))
    }

    async fn commit(&self) -> Result<(), StoreError> {
        let pending = self
            .inner
            .pending
            .lock()
            .take()
            .ok_or(StoreError::UsedAfterCommit)?;
        if pending.writes.is_empty() && pending.watches.is_empty() {
            // Read-only: serializable at its read version, nothing to resolve.
            return Ok(());
        }
        self.check_age()?;
        let atomic_bases = self.atomic_bases(&pending.writes)?;
        let submitted = Instant::now();
        let (reply, outcome) = oneshot::channel();
        let request = CommitRequest {
            atomic_bases,
            read_version: self.inner.read_version,
            began: self.inner.began,
            reads: pending.reads,
            writes: pending.writes,
            watches: pending.watches,
            snapshot: self.inner.snapshot.clone(),
            reply,
        };
        self.inner
            .commits
            .send(request)
            .await
            .map_err(|_| StoreError::Cancelled)?;
        // If the committer vanished after taking the request, the writes
        // may or may not have reached disk.
        let outcome = outcome.await.map_err(|_| StoreError::MaybeCommitted)?;
        metrics::histogram!(crate::metrics::STORE_COMMIT_LATENCY)
            .record(submitted.elapsed().as_secs_f64());
        outcome
    }
}

/// The part of a write set a range read needs, copied so the read holds no lock.
fn clone_overlay(writes: &WriteSet, range: &RangeRead<'_>) -> WriteSet {
    let mut copy = WriteSet::default();
    for (key, op) in writes.ops.range::<[u8], _>((
        std::ops::Bound::Included(range.begin),
        std::ops::Bound::Excluded(range.end),
    )) {
        copy.ops.insert(key.clone(), op.clone());
    }
    copy.cleared = writes
        .cleared
        .iter()
        .filter(|(b, e)| b.as_slice() < range.end && range.begin < e.as_slice())
        .cloned()
        .collect();
    copy
}
