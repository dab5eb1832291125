//! The store contract: FoundationDB's transactions, exactly.
//!
//! Serializable optimistic transactions over ordered byte keys. Reads see the
//! transaction's read version plus its own writes. A non-snapshot read adds
//! a read-conflict range; `commit` fails with [`StoreError::Conflict`] when
//! any read-conflict range intersects a write committed after the read
//! version. Everything above this module is written once, generic over
//! [`Store`], and never learns which backend it runs on.
//!
//! # When the read version is taken
//!
//! As FoundationDB's client takes it, on every backend: at the
//! transaction's first read that the store answers (a `get`, `get_range`
//! or [`Transaction::watch`], snapshot or not; a read its own writes
//! answer alone takes none), or, for a transaction that read nothing, at
//! commit. Not at [`Store::begin`]. Conflict ranges are checked from the
//! read version, so a read-conflict key guards only what the transaction
//! read itself: a transaction that acts on what it learned elsewhere (an
//! earlier transaction, memory) and adds a conflict key without reading
//! first cannot conflict with anything committed before its commit. Read
//! first, or read the key itself.
//!
//! # Watches read their key
//!
//! [`Transaction::watch`] is a non-snapshot read of its key: it takes the
//! read version and adds a read conflict on the key (unless the
//! transaction's own write decides the key's value). A writing transaction
//! that watches a counter therefore conflicts with every concurrent atomic
//! add to it; watch in a read-only transaction of its own instead (a
//! read-only transaction never conflicts), comparing what it reads with
//! what the writing transaction left, so no change in between is lost.
//!
//! Backends:
//! - [`embedded`]: fjall plus an in-process resolver (the default).
//! - `fdb` (feature `fdb`): a FoundationDB cluster through the `foundationdb` crate,
//!   run behind [`resolving::Resolving`] so no commit's outcome stays unknown.

mod error;
mod retry;

pub mod embedded;
#[cfg(feature = "fdb")]
pub mod fdb;
pub mod resolving;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub use error::{ErrorClass, StoreError, classify};
pub use retry::{RetryPolicy, transact};

/// Longest key a store accepts, in bytes (FoundationDB's limit).
pub const KEY_SIZE_MAX: usize = 10_000;
/// Longest value a store accepts, in bytes (FoundationDB's limit).
pub const VALUE_SIZE_MAX: usize = 100_000;
// The envelope (a leaf) writes its payload bound out by hand.
const _: () = assert!(
    crate::envelope::INLINE_PAYLOAD_MAX + crate::envelope::ENVELOPE_HEADROOM == VALUE_SIZE_MAX
);
/// Largest transaction (writes plus conflict ranges), in bytes (FoundationDB's limit).
pub const TRANSACTION_SIZE_MAX: usize = 10_000_000;
/// How long a transaction may live before it is too old (FoundationDB's limit).
pub const TRANSACTION_AGE_MAX_MS: u64 = 5_000;

/// One key and its value, as a range read returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// How a read meets concurrent writes, as in FoundationDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Adds a read-conflict on what it read: a commit that wrote there
    /// since the read version makes this transaction's commit conflict.
    Serializable,
    /// Adds no read-conflict: the value at the read version, whatever
    /// commits later (the caller adds conflicts on what it consumes).
    Snapshot,
}

impl Read {
    /// True for [`Read::Snapshot`].
    pub fn is_snapshot(self) -> bool {
        self == Read::Snapshot
    }
}

/// A range read: keys in `[begin, end)`, at most `limit` of them.
#[derive(Debug, Clone, Copy)]
pub struct RangeRead<'a> {
    /// First key of the range (inclusive).
    pub begin: &'a [u8],
    /// End of the range (exclusive).
    pub end: &'a [u8],
    /// Most rows to return; at least 1.
    pub limit: usize,
    /// Read from `end` downwards.
    pub reverse: bool,
    /// A [`Read::Snapshot`] read adds no read-conflict range.
    pub read: Read,
}

impl<'a> RangeRead<'a> {
    /// A forward, non-snapshot read of `[begin, end)` returning at most `limit` rows.
    pub fn new(begin: &'a [u8], end: &'a [u8], limit: usize) -> Self {
        RangeRead {
            begin,
            end,
            limit,
            reverse: false,
            read: Read::Serializable,
        }
    }

    /// The same read, from the end downwards.
    pub fn reverse(mut self) -> Self {
        self.reverse = true;
        self
    }

    /// The same read, adding no read-conflict range.
    pub fn snapshot(mut self) -> Self {
        self.read = Read::Snapshot;
        self
    }

    /// Rejects ranges a store cannot serve, before any I/O.
    pub fn validate(&self) -> Result<(), StoreError> {
        if self.limit == 0 {
            return Err(StoreError::InvalidArgument(
                "range limit must be at least 1",
            ));
        }
        if self.begin > self.end {
            return Err(StoreError::InvalidArgument("range begin is after its end"));
        }
        Ok(())
    }

    /// The read-conflict range FoundationDB records for this read, given the
    /// rows it returned: up to just past the last row when the limit was
    /// hit, else the whole range. Mirrored for reverse reads.
    pub fn conflict_range(&self, rows: &[KeyValue]) -> (Vec<u8>, Vec<u8>) {
        match rows.last() {
            Some(last) if rows.len() >= self.limit => {
                if self.reverse {
                    (last.key.clone(), self.end.to_vec())
                } else {
                    (self.begin.to_vec(), key_after(&last.key))
                }
            }
            _ => (self.begin.to_vec(), self.end.to_vec()),
        }
    }
}

/// Cuts `rows` before the first row whose key and value bytes, added to
/// those of the rows before it, pass `bytes_max`; the first row always
/// stays, so a bounded read still makes progress. True when it cut.
pub fn cut_at_bytes(rows: &mut Vec<KeyValue>, bytes_max: usize) -> bool {
    let mut bytes = 0usize;
    let Some(cut) = rows.iter().position(|row| {
        bytes += row.key.len() + row.value.len();
        bytes > bytes_max
    }) else {
        return false;
    };
    rows.truncate(cut.max(1));
    true
}

/// The smallest key greater than `key`: `key` followed by a zero byte.
pub fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// Checks a key against [`KEY_SIZE_MAX`].
pub fn check_key(key: &[u8]) -> Result<(), StoreError> {
    if key.len() > KEY_SIZE_MAX {
        return Err(StoreError::KeyTooLarge { len: key.len() });
    }
    Ok(())
}

/// Checks a value against [`VALUE_SIZE_MAX`].
pub fn check_value(value: &[u8]) -> Result<(), StoreError> {
    if value.len() > VALUE_SIZE_MAX {
        return Err(StoreError::ValueTooLarge { len: value.len() });
    }
    Ok(())
}

/// Applies FoundationDB's `ADD` mutation: both sides little-endian, the
/// result as long as the operand (8 bytes), wrapping on overflow.
pub fn apply_add(existing: Option<&[u8]>, delta: i64) -> Vec<u8> {
    let mut base = [0u8; 8];
    if let Some(existing) = existing {
        let n = existing.len().min(8);
        base[..n].copy_from_slice(&existing[..n]);
    }
    u64::from_le_bytes(base)
        .wrapping_add(delta as u64)
        .to_le_bytes()
        .to_vec()
}

/// Applies FoundationDB's `MAX` mutation: the larger of the existing value
/// and `value`, both read as little-endian unsigned integers (the existing
/// one zero-extended or truncated to 8 bytes).
pub fn apply_max(existing: Option<&[u8]>, value: u64) -> Vec<u8> {
    let current = u64::from_le_bytes(
        apply_add(existing, 0)
            .try_into()
            .expect("apply_add returns 8 bytes"),
    );
    current.max(value).to_le_bytes().to_vec()
}

/// An atomic mutation: a write conflict only, applied at commit time to
/// whatever is committed then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Atomic {
    /// FoundationDB's `ADD`.
    Add(i64),
    /// FoundationDB's `MAX`.
    Max(u64),
}

impl Atomic {
    /// The value after applying this mutation to `existing`.
    pub fn apply(self, existing: Option<&[u8]>) -> Vec<u8> {
        match self {
            Atomic::Add(delta) => apply_add(existing, delta),
            Atomic::Max(value) => apply_max(existing, value),
        }
    }
}

/// Reads a counter written by `atomic_add` (missing reads as 0).
pub fn decode_counter(value: Option<&[u8]>) -> i64 {
    i64::from_le_bytes(
        apply_add(value, 0)
            .try_into()
            .expect("apply_add returns 8 bytes"),
    )
}

/// A handle on a database: where transactions begin.
pub trait Store: Clone + Send + Sync + 'static {
    /// The transaction type of this backend.
    type Txn: Transaction;

    /// Starts a transaction. It takes no read version yet: see the module
    /// doc (at its first read, or at commit if it reads nothing).
    fn begin(&self) -> Result<Self::Txn, StoreError>;

    /// Makes every commit that returned durable, whatever the durability
    /// setting (for shutdown). Backends that always are, do nothing.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Why the store refuses every transaction, once it has failed for
    /// good (a failed write or fsync poisons the embedded store); `None`
    /// while it works. A backend that recovers by itself never reports one.
    fn failure(&self) -> Option<String> {
        None
    }

    /// How long the write the storage engine is doing now (a commit
    /// group's write and fsync) has taken, while one is under way; `None`
    /// when none is, or when the backend cannot tell. A stalled disk shows
    /// here: `/healthz` reports the daemon unhealthy past a bound.
    fn write_under_way_for(&self) -> Option<std::time::Duration> {
        None
    }
}

/// A serializable optimistic transaction with FoundationDB's rules.
///
/// Methods take `&self` and clones share one transaction, as in the
/// FoundationDB client, so retry loops can hand it to an async body.
pub trait Transaction: Clone + Send + Sync + 'static {
    /// Reads one key. A [`Read::Serializable`] read adds a read-conflict on it.
    fn get(
        &self,
        key: &[u8],
        read: Read,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;

    /// Reads a range; see [`RangeRead::conflict_range`] for the conflict it adds.
    fn get_range(
        &self,
        range: RangeRead<'_>,
    ) -> impl Future<Output = Result<Vec<KeyValue>, StoreError>> + Send;

    /// Adds `[begin, end)` to the read-conflict ranges, checked from the
    /// read version (which this does not take: see the module doc).
    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError>;

    /// Adds `key` alone to the read-conflict ranges.
    fn add_read_conflict_key(&self, key: &[u8]) -> Result<(), StoreError> {
        self.add_read_conflict_range(key, &key_after(key))
    }

    /// Writes `value` under `key`.
    fn set(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError>;

    /// Removes `key`.
    fn clear(&self, key: &[u8]) -> Result<(), StoreError>;

    /// Removes every key in `[begin, end)`.
    fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError>;

    /// Adds `delta` to the little-endian counter at `key` at commit time:
    /// a write conflict only, never a read conflict.
    fn atomic_add(&self, key: &[u8], delta: i64) -> Result<(), StoreError>;

    /// Sets the little-endian counter at `key` to `value` if that is larger,
    /// at commit time: a write conflict only, never a read conflict.
    fn atomic_max(&self, key: &[u8], value: u64) -> Result<(), StoreError>;

    /// Watches `key`: reads it (a non-snapshot read, so a read conflict on
    /// it, through this transaction's own writes), is active once this
    /// transaction commits, and fires when the key holds any other value
    /// than the one read, whenever that value was committed (before this
    /// commit too). Fails with [`StoreError::Cancelled`] if the
    /// transaction does not commit.
    fn watch(&self, key: &[u8]) -> Result<Watch, StoreError>;

    /// Commits. Fails with a typed error; a conflict writes nothing.
    fn commit(&self) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// A pending watch: resolves `Ok(())` when the watched key changed.
pub struct Watch {
    inner: Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>,
}

impl Watch {
    /// Wraps a backend's watch future.
    pub fn new(inner: impl Future<Output = Result<(), StoreError>> + Send + 'static) -> Self {
        Watch {
            inner: Box::pin(inner),
        }
    }
}

impl Future for Watch {
    type Output = Result<(), StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

/// Reads a mark written by `atomic_max` (missing reads as 0).
pub fn decode_mark(value: Option<&[u8]>) -> u64 {
    u64::from_le_bytes(
        apply_add(value, 0)
            .try_into()
            .expect("apply_add returns 8 bytes"),
    )
}
