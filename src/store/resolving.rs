//! Commits whose outcome is never left unknown: a store adapter that
//! resolves `commit_unknown_result` (1021) and the other unknown outcomes
//! ([`ErrorClass::UnknownOutcome`]) with a marker key, so that every commit
//! through it either applied (`Ok`) or did not and never will
//! ([`StoreError::Conflict`], which every caller already retries).
//!
//! # Why markers, not FoundationDB's automatic idempotency
//!
//! FoundationDB 7.3 has automatic idempotency, and the `foundationdb` 0.11
//! crate exposes it with the API version the backend selects (730, feature
//! `fdb-7_3`): `TransactionOption::AutomaticIdempotency` per transaction,
//! `DatabaseOption::TransactionAutomaticIdempotency` for all of them. It
//! would do the same job inside the client. It is not used because:
//! - the 7.3 option list itself calls it "in development and not ready for
//!   general use", and warns that a commit that failed with
//!   `transaction_timed_out` or `cluster_version_changed` may still apply
//!   later, which is exactly the case a queue cannot afford to guess about;
//! - it exists only on FoundationDB, so the embedded backend and the tests
//!   on this machine (which has no cluster) could never exercise it, while
//!   this adapter is backend-neutral code that runs, fault-injected, in
//!   `tests/it/unknown_commit_outcome.rs`.
//!
//! # The mechanism
//!
//! A commit that writes anything also writes a marker key of its own:
//! ([`MARKERS_ROOT`], process id, slot, sequence number), never written
//! before, holding a random nonce and the time, with a read-conflict range
//! on it. When the commit reports an unknown outcome, a check transaction
//! reads that key:
//! - it holds our nonce: the commit applied;
//! - it does not: the check writes the key (a *fence*) and commits. Our
//!   commit read-conflicts on the key, so if it were still in flight it
//!   could now only be rejected: it did not apply and never will. (This is
//!   the "dummy transaction" FoundationDB's client runs after 1021, made
//!   explicit so it also covers 1031 and 1039, which skip it.) If our
//!   commit lands between the check's read and its commit, the check
//!   conflicts and reads again.
//!
//! The key is fresh per commit so that its read conflict can never meet
//! another commit's write: reusing one key per slot would make every
//! transaction that began before the slot's last commit conflict with it.
//! A slot serves one commit at a time and is reused afterwards; each commit
//! clears its slot's older keys (a blind range clear, no read conflict), so
//! the keys a process leaves behind are bounded by its peak of concurrent
//! writing commits (a few dozen bytes each); a new process uses a new id.
//! [`sweep_markers`] clears slots that have not been written for a long
//! time (those of processes that are gone).

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use foundationdb_tuple::Subspace;

use super::error::ErrorClass;
use super::{KeyValue, RangeRead, Read, Store, StoreError, Transaction, Watch};

/// The tuple root of every process's marker slots.
pub const MARKERS_ROOT: &str = "hotq-commit";
/// Check transactions tried before the outcome is reported as unknown.
const RESOLVE_ATTEMPTS_MAX: u32 = 50;
/// Upper bound of the pause between check attempts.
const RESOLVE_PAUSE_MAX_MS: u64 = 100;
/// Marker slots cleared per transaction by [`sweep_markers`].
const SWEEP_BATCH_MAX: usize = 1_000;
/// Transactions [`sweep_markers`] runs at most.
const SWEEP_ROUNDS_MAX: usize = 1_000;

/// `[begin, end)` of every process's marker slots.
pub fn markers_range() -> (Vec<u8>, Vec<u8>) {
    Subspace::all().subspace(&(MARKERS_ROOT,)).range()
}

/// Wall-clock ms since the epoch (the store layer keeps its own clock
/// reading: `crate::envelope` builds on this module).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// A marker value: the commit's nonce, then when it was written (ms, big-endian).
fn marker_value(nonce: &[u8; 16], now_ms: u64) -> Vec<u8> {
    let mut value = nonce.to_vec();
    value.extend_from_slice(&now_ms.to_be_bytes());
    value
}

/// When a marker value was written; `None` for a value of another shape.
fn written_at_ms(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.get(16..24)?.try_into().ok()?))
}

/// This process's slots: each serves one commit at a time.
struct Slots {
    subspace: Subspace,
    free: Mutex<Vec<u64>>,
    minted: AtomicU64,
    /// Orders the keys within a slot: a later commit's key sorts after.
    sequence: AtomicU64,
}

impl Slots {
    fn new(process: u64) -> Slots {
        Slots {
            subspace: Subspace::all().subspace(&(MARKERS_ROOT, process)),
            free: Mutex::new(Vec::new()),
            minted: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
        }
    }

    fn take(self: &Arc<Self>) -> Slot {
        let free = self.free.lock().pop();
        let number = free.unwrap_or_else(|| self.minted.fetch_add(1, Ordering::Relaxed));
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        Slot {
            begin: self.subspace.subspace(&(number,)).range().0,
            key: self.subspace.pack(&(number, sequence)),
            number,
            slots: Arc::clone(self),
        }
    }
}

/// A slot in use; returned to the pool when dropped, so no later commit
/// can clear its key while its owner may still read it.
struct Slot {
    /// Where the slot's keys begin: every key below `key` is an older one.
    begin: Vec<u8>,
    /// This commit's marker key.
    key: Vec<u8>,
    number: u64,
    slots: Arc<Slots>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.free.lock().push(self.number);
    }
}

/// A store whose writing commits never end with an unknown outcome (see
/// the module documentation). Cheap to clone; clones share the slots.
#[derive(Clone)]
pub struct Resolving<S: Store> {
    inner: S,
    slots: Arc<Slots>,
}

impl<S: Store> std::fmt::Debug for Resolving<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolving")
            .field("slots_minted", &self.slots.minted.load(Ordering::Relaxed))
            .finish()
    }
}

impl<S: Store> Resolving<S> {
    /// Wraps `inner`, with a fresh random process id for its slots.
    pub fn new(inner: S) -> Resolving<S> {
        let process: u64 = rand::random();
        Resolving {
            inner,
            slots: Arc::new(Slots::new(process)),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Slots this process has created (its peak of concurrent writing commits).
    pub fn slots_minted(&self) -> u64 {
        self.slots.minted.load(Ordering::Relaxed)
    }
}

impl<S: Store> Store for Resolving<S> {
    type Txn = ResolvingTxn<S>;

    fn begin(&self) -> Result<ResolvingTxn<S>, StoreError> {
        Ok(ResolvingTxn {
            inner: self.inner.begin()?,
            store: self.clone(),
            writes: Arc::new(AtomicBool::new(false)),
        })
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }

    fn failure(&self) -> Option<String> {
        self.inner.failure()
    }

    fn write_under_way_for(&self) -> Option<Duration> {
        self.inner.write_under_way_for()
    }
}

/// A transaction of [`Resolving`]. Clones share one transaction.
#[derive(Clone)]
pub struct ResolvingTxn<S: Store> {
    inner: S::Txn,
    store: Resolving<S>,
    /// Whether anything was written: a read-only commit needs no marker.
    writes: Arc<AtomicBool>,
}

impl<S: Store> ResolvingTxn<S> {
    fn wrote(&self) {
        self.writes.store(true, Ordering::Release);
    }
}

impl<S: Store> Transaction for ResolvingTxn<S> {
    async fn get(&self, key: &[u8], read: Read) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get(key, read).await
    }

    async fn get_range(&self, range: RangeRead<'_>) -> Result<Vec<KeyValue>, StoreError> {
        self.inner.get_range(range).await
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        self.inner.add_read_conflict_range(begin, end)
    }

    fn set(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.wrote();
        self.inner.set(key, value)
    }

    fn clear(&self, key: &[u8]) -> Result<(), StoreError> {
        self.wrote();
        self.inner.clear(key)
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        self.wrote();
        self.inner.clear_range(begin, end)
    }

    fn atomic_add(&self, key: &[u8], delta: i64) -> Result<(), StoreError> {
        self.wrote();
        self.inner.atomic_add(key, delta)
    }

    fn atomic_max(&self, key: &[u8], value: u64) -> Result<(), StoreError> {
        self.wrote();
        self.inner.atomic_max(key, value)
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, StoreError> {
        self.inner.watch(key)
    }

    async fn commit(&self) -> Result<(), StoreError> {
        if !self.writes.load(Ordering::Acquire) {
            return self.inner.commit().await;
        }
        let slot = self.store.slots.take();
        let nonce: [u8; 16] = rand::random();
        // The slot's earlier keys: applied markers and fences, all resolved.
        self.inner.clear_range(&slot.begin, &slot.key)?;
        self.inner.add_read_conflict_key(&slot.key)?;
        self.inner.set(&slot.key, &marker_value(&nonce, now_ms()))?;
        match self.inner.commit().await {
            Err(error) if error.class() == ErrorClass::UnknownOutcome => {
                resolve(&self.store.inner, &slot.key, &nonce, error).await
            }
            outcome => outcome,
        }
        // `slot` is freed here, after the outcome is known.
    }
}

/// Decides whether the commit that wrote `nonce` to `marker` applied:
/// `Ok(())` if it did, [`StoreError::Conflict`] if it did not (and, fenced,
/// never will). When no check succeeds in [`RESOLVE_ATTEMPTS_MAX`]
/// attempts, or one fails for good, the outcome stays unknown:
/// [`StoreError::MaybeCommitted`].
pub async fn resolve<S: Store>(
    store: &S,
    marker: &[u8],
    nonce: &[u8; 16],
    unknown: StoreError,
) -> Result<(), StoreError> {
    let mut last = unknown;
    for attempt in 0..RESOLVE_ATTEMPTS_MAX {
        if attempt > 0 {
            let ceiling_us = (1u64 << attempt.min(10)).min(RESOLVE_PAUSE_MAX_MS) * 1000;
            let pause_us = rand::random::<u64>() % ceiling_us;
            tokio::time::sleep(Duration::from_micros(pause_us)).await;
        }
        match check_once(store, marker, nonce).await {
            Ok(true) => return Ok(()),
            Ok(false) => return Err(StoreError::Conflict),
            // A failed check (a conflict with our own late commit included)
            // leaves the question open: ask again.
            Err(error) if error.is_retryable() => last = error,
            // Asking again cannot help; the outcome stays unknown, and must
            // be reported so, never as a plain failure.
            Err(error) => {
                last = error;
                break;
            }
        }
    }
    tracing::error!(
        error = %last,
        "could not learn whether a commit of unknown outcome applied; reporting it unknown"
    );
    Err(StoreError::MaybeCommitted)
}

/// One check: `Ok(true)` if the marker holds `nonce`; `Ok(false)` once a
/// fence is committed over it.
async fn check_once<S: Store>(
    store: &S,
    marker: &[u8],
    nonce: &[u8; 16],
) -> Result<bool, StoreError> {
    let check = store.begin()?;
    if let Some(value) = check.get(marker, Read::Serializable).await?
        && value.get(..16) == Some(&nonce[..])
    {
        return Ok(true);
    }
    // Any value but ours; the time lets the sweep clear it later.
    check.set(marker, &marker_value(&[0; 16], now_ms()))?;
    check.commit().await?;
    Ok(false)
}

/// Clears marker slots (of any process) last written more than
/// `older_than_ms` ago: those of processes that are gone. Safe while
/// other processes run: a marker is only ever read by its own commit's
/// resolution, within seconds of being written, and the sweep adds a read
/// conflict on each key it clears, so a marker rewritten meanwhile (a
/// fence) makes the sweep retry rather than clear it. Returns how many it
/// cleared. Bounded by [`SWEEP_ROUNDS_MAX`] transactions.
pub async fn sweep_markers<S: Store>(store: &S, older_than_ms: u64) -> Result<usize, StoreError> {
    let (begin, end) = markers_range();
    let cutoff_ms = now_ms().saturating_sub(older_than_ms);
    let mut from = begin;
    let mut cleared = 0;
    for _ in 0..SWEEP_ROUNDS_MAX {
        let round = super::transact(store, super::RetryPolicy::default(), |txn| {
            let (from, end) = (from.clone(), end.clone());
            async move {
                // A snapshot read, with a conflict only on what it clears:
                // every daemon's commits write fresh markers in this range,
                // and a conflict on the whole range would starve the sweep.
                let rows = txn
                    .get_range(RangeRead::new(&from, &end, SWEEP_BATCH_MAX).snapshot())
                    .await?;
                let mut stale = 0;
                for row in &rows {
                    if written_at_ms(&row.value).is_none_or(|at| at < cutoff_ms) {
                        txn.add_read_conflict_key(&row.key)?;
                        txn.clear(&row.key)?;
                        stale += 1;
                    }
                }
                let next = (rows.len() == SWEEP_BATCH_MAX)
                    .then(|| rows.last().map(|row| super::key_after(&row.key)))
                    .flatten();
                Ok((stale, next))
            }
        })
        .await?;
        cleared += round.0;
        match round.1 {
            Some(next) => from = next,
            None => break,
        }
    }
    Ok(cleared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_value_carries_its_nonce_and_time() {
        let value = marker_value(&[7; 16], 1_234);
        assert_eq!(&value[..16], &[7; 16]);
        assert_eq!(written_at_ms(&value), Some(1_234));
        assert_eq!(written_at_ms(b"short"), None);
    }

    #[test]
    fn a_slot_is_reused_only_once_freed_and_its_keys_only_grow() {
        let slots = Arc::new(Slots::new(1));
        let one = slots.take();
        let two = slots.take();
        assert_ne!(
            one.number, two.number,
            "two commits in flight never share a slot"
        );
        let (number, first) = (one.number, one.key.clone());
        drop(one);
        let three = slots.take();
        assert_eq!(three.number, number, "a freed slot is reused");
        assert!(
            three.begin <= first && first < three.key,
            "under a fresh key, above the ones its range clear removes"
        );
        assert_eq!(slots.minted.load(Ordering::Relaxed), 2);
        let (begin, end) = markers_range();
        assert!(begin <= three.begin && three.key < end);
    }
}
