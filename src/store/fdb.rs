//! The FoundationDB backend: the store contract on a FoundationDB cluster,
//! through the `foundationdb` crate (client API 7.3).
//!
//! The contract *is* FoundationDB's, so this module is a thin mapping:
//! every call validates its arguments the way the contract says, then hands
//! them to the client library; every failure is classified by its numeric
//! FoundationDB code with [`StoreError::from_code`], never by its message.
//!
//! The client network is booted once per process by the first
//! [`FdbStore::open`] and is never stopped (see [`FdbStore::open`]).
//!
//! [`FdbStore`] reports `commit_unknown_result` (1021) as FoundationDB does,
//! as [`StoreError::MaybeCommitted`]. The daemon runs it behind
//! [`Resolving`] ([`open_for_daemon`]), which resolves every such outcome
//! with a marker key, so that a pop or push never loses or duplicates an
//! item because a proxy failed mid-commit; see [`super::resolving`] for the
//! mechanism and for why FoundationDB 7.3's automatic idempotency is not
//! used instead.

use parking_lot::{Mutex, MutexGuard};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use foundationdb::api::{FdbApiBuilder, NetworkAutoStop};
use foundationdb::options::{ConflictRangeType, MutationType, StreamingMode};
use foundationdb::{
    Database, FdbBindingError, FdbError, KeySelector, RangeOption, TransactionCommitError,
};

use super::resolving::{Resolving, sweep_markers};
use super::{
    ErrorClass, KeyValue, RangeRead, Read, Store, StoreError, Transaction, Watch, check_key,
    check_value,
};

/// The environment variable naming the cluster file, as `fdbcli` and the
/// client library read it.
pub const CLUSTER_FILE_ENV: &str = "FDB_CLUSTER_FILE";

/// FoundationDB's `transaction_cancelled`: an uncommitted transaction was
/// reset or destroyed (its watches fail with it).
const TRANSACTION_CANCELLED: i32 = 1025;
/// FoundationDB's `unknown_error`, for binding errors that carry no code.
const UNKNOWN_ERROR: i32 = 4000;

/// The cluster file named by `FDB_CLUSTER_FILE`, if set and not empty.
///
/// Tests use it to decide whether a cluster is available.
pub fn cluster_file_from_env() -> Option<String> {
    std::env::var(CLUSTER_FILE_ENV)
        .ok()
        .filter(|path| !path.is_empty())
}

/// Marker slots unwritten for this long belong to daemons that are gone:
/// a slot in use is rewritten by every commit it serves, and its owner
/// reads it within seconds of writing it.
pub const MARKER_SWEEP_AGE_MS: u64 = 3_600_000;

/// The store the daemon serves from on a cluster: [`FdbStore`] behind
/// [`Resolving`], so no writing commit's outcome stays unknown. Also starts,
/// when called inside a Tokio runtime, one background sweep of the marker
/// slots that daemons gone for over [`MARKER_SWEEP_AGE_MS`] left behind.
///
/// # Errors
///
/// As [`FdbStore::open`].
pub fn open_for_daemon(cluster_file: Option<&str>) -> Result<Resolving<FdbStore>, StoreError> {
    let store = FdbStore::open(cluster_file)?;
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let sweep = store.clone();
        runtime.spawn(async move {
            match sweep_markers(&sweep, MARKER_SWEEP_AGE_MS).await {
                Ok(cleared) => tracing::info!(cleared, "swept stale commit markers"),
                Err(error) => tracing::warn!(%error, "could not sweep stale commit markers"),
            }
        });
    }
    Ok(Resolving::new(store))
}

/// The client network, booted at most once per process.
///
/// The guard lives in a `static`, so it is never dropped: this is deliberate.
/// The client library can select its API version and run its network thread
/// only once per process (a second boot panics), and a stopped network can
/// never be restarted, so dropping the guard would make every later
/// [`FdbStore::open`] fail. The guard must also outlive every [`Database`],
/// transaction and watch, which nothing short of process exit guarantees.
/// At exit the network thread is simply torn down with the process. A failed
/// boot is remembered too, because it cannot be retried either.
static NETWORK: OnceLock<Result<NetworkAutoStop, StoreError>> = OnceLock::new();

/// Boots the client network if this process has not yet, else returns the
/// outcome of the first boot.
// The crate denies `unsafe_code` (src/lib.rs); the client's boot is the one
// call that needs it, its contract argued at the call (SAFETY below).
#[allow(unsafe_code)]
fn ensure_network() -> Result<(), StoreError> {
    let booted = NETWORK.get_or_init(|| {
        let builder = FdbApiBuilder::default().build().map_err(fdb_error)?;
        // SAFETY: `boot` requires the returned guard to be dropped before the
        // process exits or never used past exit; it is kept in `NETWORK` for
        // the life of the process (see its documentation), and `OnceLock`
        // guarantees this runs at most once.
        unsafe { builder.boot() }.map_err(fdb_error)
    });
    match booted {
        Ok(_) => Ok(()),
        Err(error) => Err(error.clone()),
    }
}

/// Classifies a FoundationDB error by its code.
fn fdb_error(error: FdbError) -> StoreError {
    StoreError::from_code(error.code(), error.to_string())
}

impl From<FdbError> for StoreError {
    fn from(error: FdbError) -> Self {
        fdb_error(error)
    }
}

impl From<TransactionCommitError> for StoreError {
    fn from(error: TransactionCommitError) -> Self {
        StoreError::from_code(error.code(), error.to_string())
    }
}

impl From<FdbBindingError> for StoreError {
    /// By the wrapped FoundationDB code when there is one; otherwise
    /// [`StoreError::Backend`] with `unknown_error` (4000).
    fn from(error: FdbBindingError) -> Self {
        match error.get_fdb_error() {
            Some(inner) => fdb_error(inner),
            None => StoreError::Backend {
                code: UNKNOWN_ERROR,
                message: error.to_string(),
            },
        }
    }
}

/// Rejects `[begin, end)` with `begin > end` before FoundationDB does
/// (`inverted_range`, 2005).
fn check_range(begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
    if begin > end {
        return Err(StoreError::InvalidArgument("range begin is after its end"));
    }
    Ok(())
}

/// A handle on a FoundationDB database. Cheap to clone: clones share one
/// client connection, one key prefix and one set of counters.
///
/// Every key the handle reads, writes, clears or watches lives under its
/// prefix (empty by default): keys are prefixed on the way in and the
/// prefix is taken off range rows on the way out, so nothing above the
/// store sees it. A prefix gives a test suite (or a second deployment) a
/// keyspace of its own on a cluster that others use at the same time.
#[derive(Clone)]
pub struct FdbStore {
    db: Arc<Database>,
    prefix: Arc<[u8]>,
    counts: Arc<FdbCounts>,
}

/// Commits and conflicts of one [`FdbStore`] and its clones, as the
/// embedded store counts its own (for `hotq bench`).
#[derive(Debug, Default)]
struct FdbCounts {
    commits: AtomicU64,
    conflicts: AtomicU64,
}

impl fmt::Debug for FdbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FdbStore")
    }
}

impl FdbStore {
    /// Opens the database described by `cluster_file`, or the client
    /// library's default (`FDB_CLUSTER_FILE`, then the platform's default
    /// cluster file) when `None`.
    ///
    /// The first call in a process selects API version 7.3 and starts the
    /// client network thread; it keeps running until the process exits. If
    /// that boot fails (for instance, the installed `libfdb_c` is older than
    /// 7.3), every call in this process returns the same error.
    ///
    /// Opening does not contact the cluster: an unreachable cluster shows up
    /// as errors or waits on the first transaction.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidArgument`] for a path with a NUL byte; otherwise
    /// the FoundationDB error of the network boot or of opening the database
    /// (e.g. 2203 `api_version_not_supported`, 1515 `no_cluster_file_found`),
    /// classified by [`StoreError::from_code`].
    pub fn open(cluster_file: Option<&str>) -> Result<FdbStore, StoreError> {
        if cluster_file.is_some_and(|path| path.contains('\0')) {
            return Err(StoreError::InvalidArgument(
                "cluster file path contains a NUL byte",
            ));
        }
        ensure_network()?;
        let db = Database::new(cluster_file).map_err(fdb_error)?;
        Ok(FdbStore {
            db: Arc::new(db),
            prefix: Arc::from(&[][..]),
            counts: Arc::default(),
        })
    }

    /// A handle on the same database whose every key lives under `prefix`
    /// (appended to this handle's own prefix), with counters of its own.
    pub fn with_prefix(&self, prefix: &[u8]) -> FdbStore {
        FdbStore {
            db: Arc::clone(&self.db),
            prefix: [&self.prefix[..], prefix].concat().into(),
            counts: Arc::default(),
        }
    }

    /// The key prefix of this handle.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Commits that succeeded and commits refused with a conflict, through
    /// this handle and its clones so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.counts.commits.load(Ordering::Relaxed),
            self.counts.conflicts.load(Ordering::Relaxed),
        )
    }
}

impl Store for FdbStore {
    type Txn = FdbTransaction;

    fn begin(&self) -> Result<FdbTransaction, StoreError> {
        let trx = self.db.create_trx().map_err(fdb_error)?;
        Ok(FdbTransaction {
            slot: Arc::new(Mutex::new(Some(trx))),
            committed: Arc::new(AtomicBool::new(false)),
            prefix: Arc::clone(&self.prefix),
            counts: Arc::clone(&self.counts),
        })
    }
}

/// A FoundationDB transaction. Clones share one underlying transaction.
///
/// `commit` takes the transaction out of the shared slot, so any use after
/// it (on any clone) fails with [`StoreError::UsedAfterCommit`]. Dropping
/// the last clone without committing rolls the transaction back and cancels
/// its watches.
#[derive(Clone)]
pub struct FdbTransaction {
    /// The live transaction; `None` once `commit` has taken it.
    slot: Arc<Mutex<Option<foundationdb::Transaction>>>,
    /// Set once `commit` succeeded. Kept apart from `slot` so that pending
    /// watches can read it without keeping the transaction alive.
    committed: Arc<AtomicBool>,
    /// The store's key prefix (see [`FdbStore`]).
    prefix: Arc<[u8]>,
    counts: Arc<FdbCounts>,
}

impl fmt::Debug for FdbTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FdbTransaction")
            .field("live", &self.lock().is_some())
            .field("committed", &self.committed.load(Ordering::Acquire))
            .finish()
    }
}

impl FdbTransaction {
    fn lock(&self) -> MutexGuard<'_, Option<foundationdb::Transaction>> {
        self.slot.lock()
    }

    /// `key` under the store's prefix, as the cluster stores it.
    fn full(&self, key: &[u8]) -> Vec<u8> {
        [&self.prefix[..], key].concat()
    }

    /// Runs `f` on the live transaction, under the lock. `f` only issues
    /// calls (FoundationDB futures do not borrow the transaction), so the
    /// lock is never held across an `.await`.
    fn with<R>(&self, f: impl FnOnce(&foundationdb::Transaction) -> R) -> Result<R, StoreError> {
        match self.lock().as_ref() {
            Some(trx) => Ok(f(trx)),
            None => Err(StoreError::UsedAfterCommit),
        }
    }
}

/// Classifies a watch's failure. A watch fails with its transaction's
/// commit error, or `transaction_cancelled` when the transaction is dropped
/// uncommitted; both mean "the transaction did not commit", which the
/// contract reports as [`StoreError::Cancelled`].
fn watch_error(error: FdbError, committed: &AtomicBool) -> StoreError {
    let code = error.code();
    match code {
        1032 => StoreError::TooManyWatches,
        _ if super::classify(code) == ErrorClass::UnknownOutcome => StoreError::MaybeCommitted,
        TRANSACTION_CANCELLED => StoreError::Cancelled,
        _ if !committed.load(Ordering::Acquire) => StoreError::Cancelled,
        _ => fdb_error(error),
    }
}

impl Transaction for FdbTransaction {
    async fn get(&self, key: &[u8], read: Read) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        let key = self.full(key);
        let pending = self.with(|trx| trx.get(&key, read.is_snapshot()))?;
        let value = pending.await.map_err(fdb_error)?;
        Ok(value.map(|slice| slice.to_vec()))
    }

    async fn get_range(&self, range: RangeRead<'_>) -> Result<Vec<KeyValue>, StoreError> {
        range.validate()?;
        check_key(range.begin)?;
        check_key(range.end)?;
        let mut opt = RangeOption {
            begin: KeySelector::first_greater_or_equal(self.full(range.begin)),
            end: KeySelector::first_greater_or_equal(self.full(range.end)),
            // FoundationDB takes an i32 limit; larger asks are capped, which
            // only shortens a read that could not be served in 5 s anyway.
            limit: Some(range.limit.min(i32::MAX as usize)),
            mode: StreamingMode::WantAll,
            reverse: range.reverse,
            ..RangeOption::default()
        };
        let mut rows = Vec::new();
        // WantAll returns everything up to the limit, but a batch can still
        // stop early (byte limits); continue after the last row until the
        // limit is met or the range is exhausted. Each batch adds its own
        // read-conflict range; together they cover `range.conflict_range`.
        loop {
            let pending = self.with(|trx| trx.get_range(&opt, 1, range.read.is_snapshot()))?;
            let batch = pending.await.map_err(fdb_error)?;
            // Every row lies in `[prefix+begin, prefix+end)`, so under the prefix.
            let unprefixed = self.prefix.len();
            rows.extend(batch.iter().map(|kv| KeyValue {
                key: kv.key()[unprefixed..].to_vec(),
                value: kv.value().to_vec(),
            }));
            // `next_range` lowers the limit by the batch and returns `None`
            // once it reaches zero or there is nothing more.
            match opt.next_range(&batch) {
                Some(next) => opt = next,
                None => break,
            }
        }
        rows.truncate(range.limit);
        Ok(rows)
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        check_range(begin, end)?;
        let (begin, end) = (self.full(begin), self.full(end));
        self.with(|trx| trx.add_conflict_range(&begin, &end, ConflictRangeType::Read))?
            .map_err(fdb_error)
    }

    fn set(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        check_value(value)?;
        let key = self.full(key);
        self.with(|trx| trx.set(&key, value))
    }

    fn clear(&self, key: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        let key = self.full(key);
        self.with(|trx| trx.clear(&key))
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) -> Result<(), StoreError> {
        check_range(begin, end)?;
        let (begin, end) = (self.full(begin), self.full(end));
        self.with(|trx| trx.clear_range(&begin, &end))
    }

    fn atomic_add(&self, key: &[u8], delta: i64) -> Result<(), StoreError> {
        check_key(key)?;
        let operand = delta.to_le_bytes();
        let key = self.full(key);
        self.with(|trx| trx.atomic_op(&key, &operand, MutationType::Add))
    }

    fn atomic_max(&self, key: &[u8], value: u64) -> Result<(), StoreError> {
        check_key(key)?;
        let operand = value.to_le_bytes();
        let key = self.full(key);
        self.with(|trx| trx.atomic_op(&key, &operand, MutationType::Max))
    }

    fn watch(&self, key: &[u8]) -> Result<Watch, StoreError> {
        check_key(key)?;
        let key = self.full(key);
        let pending = self.with(|trx| trx.watch(&key))?;
        // Only the flag, not the transaction: a watch must not keep an
        // uncommitted transaction alive, or it would never be cancelled.
        let committed = Arc::clone(&self.committed);
        Ok(Watch::new(async move {
            pending
                .await
                .map_err(|error| watch_error(error, &committed))
        }))
    }

    async fn commit(&self) -> Result<(), StoreError> {
        let trx = self.lock().take().ok_or(StoreError::UsedAfterCommit)?;
        match trx.commit().await {
            Ok(_committed) => {
                self.committed.store(true, Ordering::Release);
                self.counts.commits.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(error) => {
                let error = StoreError::from(error);
                if error == StoreError::Conflict {
                    self.counts.conflicts.fetch_add(1, Ordering::Relaxed);
                }
                Err(error)
            }
        }
    }
}
