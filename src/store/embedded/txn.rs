//! The embedded transaction: the transaction's own writes, its
//! read-conflict ranges, and, from its first read on, a fjall snapshot at
//! its read version.
//!
//! The read version is taken as FoundationDB's client takes it: at the
//! first read the store must answer (a `get`, `get_range` or `watch`,
//! snapshot or not, that the transaction's own writes do not answer
//! alone), or at commit by a transaction that read nothing. Conflict
//! ranges are checked against the writes committed since then, so an
//! explicit read-conflict key protects nothing a transaction learned
//! before its read version.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;

use fjall::Readable;
use tokio::sync::{mpsc, oneshot};

use super::Shared;
use super::committer::CommitRequest;
use super::scan::GappedScan;
use super::watches::PendingWatch;
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
    watches: Vec<PendingWatch>,
}

/// A transaction's read version and the data as of it.
struct ReadState {
    read_version: u64,
    /// When the read version was taken: the age limit counts from here,
    /// as FoundationDB's does from its read version.
    taken: Instant,
    snapshot: fjall::Snapshot,
}

struct TxnInner {
    shared: Arc<Shared>,
    commits: mpsc::Sender<CommitRequest>,
    /// `None` until the first read that needs the store (or the commit).
    read: Mutex<Option<Arc<ReadState>>>,
    /// `None` once the transaction was handed to the committer.
    pending: Mutex<Option<Pending>>,
}

impl Drop for TxnInner {
    fn drop(&mut self) {
        // The resolver keeps history for this read version until now.
        if let Some(state) = self.read.get_mut().take() {
            self.shared.resolver.lock().unregister(state.read_version);
        }
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

/// Takes a read version: the newest published group, with a fjall
/// snapshot holding exactly the groups up to it, registered with the
/// resolver so the history it needs is kept.
fn take_read_version(shared: &Shared) -> Result<ReadState, StoreError> {
    if let Some(failure) = shared.failed.get() {
        return Err(StoreError::Unavailable(failure.clone()));
    }
    let started = Instant::now();
    let mut spins = 0u32;
    // Bounded: a group in flight finishes within an fsync; a store that
    // stalls for the whole transaction age limit is reported.
    loop {
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
            return Ok(ReadState {
                read_version,
                taken: Instant::now(),
                snapshot,
            });
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
        Ok(EmbeddedTxn {
            inner: Arc::new(TxnInner {
                shared,
                commits,
                read: Mutex::new(None),
                pending: Mutex::new(Some(Pending::default())),
            }),
        })
    }

    /// The read version, taken now if this is the transaction's first
    /// read (or its commit); fails once it is too old.
    fn read_state(&self) -> Result<Arc<ReadState>, StoreError> {
        let mut read = self.inner.read.lock();
        let state = match read.as_ref() {
            Some(state) => state.clone(),
            None => read
                .insert(Arc::new(take_read_version(&self.inner.shared)?))
                .clone(),
        };
        drop(read);
        if state.taken.elapsed() > self.inner.shared.age_max {
            return Err(StoreError::TooOld);
        }
        Ok(state)
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

    fn committed_value(
        &self,
        state: &ReadState,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let shared = &self.inner.shared;
        Ok(state
            .snapshot
            .get(&shared.data, key)
            .map_err(io)?
            .map(|v| v.to_vec()))
    }

    /// Reads `key` through this transaction's own writes. A key they
    /// decide (set, cleared) is answered without the store, as
    /// FoundationDB's client answers it: no read version is taken and no
    /// read conflict added (the value cannot depend on another writer).
    fn read_key(&self, key: &[u8], read: Read) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        let overlay = self.with_pending(|pending| Ok(pending.writes.overlay(key)))?;
        if let Overlay::Known(value) = overlay {
            return Ok(value);
        }
        let state = self.read_state()?;
        if !read.is_snapshot() {
            self.with_pending(|pending| {
                Self::add_read_range(pending, key.to_vec(), key_after(key))
            })?;
        }
        let base = self.committed_value(&state, key)?;
        match overlay {
            Overlay::Apply(mutations) => Ok(Some(apply_all(base.as_deref(), &mutations))),
            _ => Ok(base),
        }
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
    fn atomic_bases(
        &self,
        state: &ReadState,
        writes: &WriteSet,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        writes
            .ops
            .iter()
            .filter(|(_, op)| matches!(op, KeyOp::Atomic(_)))
            .map(|(key, _)| self.committed_value(state, key))
            .collect()
    }

    /// Committed rows of `[begin, end)` at the read version, read only in
    /// the gaps between known-empty stretches, merged with this
    /// transaction's own writes; reports what it saw empty on the way.
    fn read_committed(
        &self,
        state: &ReadState,
        range: &RangeRead<'_>,
        overlay: &WriteSet,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let shared = &self.inner.shared;
        let read_version = state.read_version;
        let mut committed = GappedScan::new(
            shared,
            &state.snapshot,
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
        self.read_key(key, read)
    }

    async fn get_range(&self, range: RangeRead<'_>) -> Result<Vec<KeyValue>, StoreError> {
        range.validate()?;
        check_key(range.begin)?;
        check_key(range.end)?;
        // The overlay is copied out of the lock so the scan holds none.
        let (overlay, answered) = self.with_pending(|pending| {
            let answered =
                pending
                    .writes
                    .answers_range(range.begin, range.end, range.limit, range.reverse);
            Ok((clone_overlay(&pending.writes, &range), answered))
        })?;
        if answered {
            // Every key the read covers is this transaction's own to
            // decide: FoundationDB's client reads nothing from the
            // database, takes no read version and adds no conflict.
            return overlay.merge_range(
                range.begin,
                range.end,
                range.limit,
                range.reverse,
                std::iter::empty(),
            );
        }
        let state = self.read_state()?;
        let rows = self.read_committed(&state, &range, &overlay)?;
        if !range.read.is_snapshot() {
            // The whole range, own writes included: FoundationDB leaves
            // out the keys a transaction wrote itself, so this may conflict
            // more than it does, never less.
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
        // As FoundationDB's client does: the watch reads its key, with a
        // read conflict, and fires on any value other than the one read.
        let seen = self.read_key(key, Read::Serializable)?;
        let (sender, receiver) = oneshot::channel();
        self.with_pending(|pending| {
            pending.watches.push(PendingWatch {
                key: key.to_vec(),
                seen,
                sender,
            });
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
        // A transaction that read nothing takes its read version here.
        let state = self.read_state()?;
        let atomic_bases = self.atomic_bases(&state, &pending.writes)?;
        let submitted = Instant::now();
        let (reply, outcome) = oneshot::channel();
        let request = CommitRequest {
            atomic_bases,
            read_version: state.read_version,
            began: state.taken,
            reads: pending.reads,
            writes: pending.writes,
            watches: pending.watches,
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
