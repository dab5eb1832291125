//! The embedded backend: fjall for the data, an in-process resolver for
//! FoundationDB's conflict rules, group commit for durable speed.
//!
//! - [`write_set`]: a transaction's own writes, read through (read-your-writes).
//! - [`resolver`]: the conflict history and the live read versions.
//! - [`empty_ranges`]: stretches known empty, so reads skip head tombstones.
//! - [`committer`]: the one thread that resolves, writes and fsyncs.
//! - [`watches`]: watches armed at commit, fired on change.
//! - [`txn`]: the transaction handle.
//! - [`scan`]: range reads that read only between known-empty stretches.
//! - [`scan_trace`]: which key intervals reads scanned (a test aid).

mod committer;
mod empty_ranges;
mod lock;
mod resolver;
mod scan;
mod scan_trace;
mod txn;
mod watches;
mod write_set;

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fjall::{KeyspaceCreateOptions, PersistMode};
use tokio::sync::mpsc;

pub use lock::{LockHolder, OpenError};
pub use scan_trace::ScanTrace;
pub use txn::EmbeddedTxn;

use resolver::Resolver;
use scan_trace::ScanTracer;
use watches::Watches;

use super::{Store, StoreError, TRANSACTION_AGE_MAX_MS};

pub use crate::config::Durability;

/// fjall's persist mode for `durability`.
fn persist_mode(durability: Durability) -> PersistMode {
    match durability {
        Durability::Sync => PersistMode::SyncAll,
        Durability::Buffered => PersistMode::Buffer,
    }
}

/// Settings of the embedded store.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// Directory of the fjall database.
    pub path: PathBuf,
    /// When a commit counts as done.
    pub durability: Durability,
    /// Most transactions resolved and fsynced together.
    pub commit_group_max: usize,
    /// Most commits queued for the committer before `commit` waits.
    pub commit_queue_max: usize,
    /// Most watches armed at once (FoundationDB's default is 10,000).
    pub watches_max: usize,
    /// fjall block cache, in bytes.
    pub cache_bytes: u64,
    /// fjall memtable size, in bytes; a smaller one flushes more often
    /// (fjall's default, 64 MiB, when unset). Fixed when the store is created.
    pub memtable_bytes: Option<u64>,
}

impl EmbeddedConfig {
    /// Defaults for a store at `path`.
    pub fn new(path: impl AsRef<Path>) -> Self {
        EmbeddedConfig {
            path: path.as_ref().to_path_buf(),
            durability: Durability::Sync,
            commit_group_max: 1024,
            commit_queue_max: 16_384,
            watches_max: 100_000,
            cache_bytes: 64 * 1024 * 1024,
            memtable_bytes: None,
        }
    }
}

/// Counters of the store's work since it opened.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Transactions begun.
    pub begins: AtomicU64,
    /// Transactions committed with writes or watches.
    pub commits: AtomicU64,
    /// Commits rejected with a conflict.
    pub conflicts: AtomicU64,
    /// fjall batches written (one fsync each under `sync`).
    pub groups: AtomicU64,
}

/// Which commit versions readers may see.
///
/// Versions are hotq's own (one per committed group), not fjall sequence
/// numbers: fjall's background flushes also take sequence numbers and
/// advance its visible sequence number, which could expose a batch while it
/// is still being written. A snapshot is therefore only accepted when no
/// batch is in flight below its fjall instant.
#[derive(Debug, Default)]
pub(crate) struct Visibility {
    /// The newest group version fully written (and fsynced under `sync`).
    pub(crate) published: u64,
    /// While a group is being written: fjall's next sequence number before
    /// the write began, a lower bound on the batch's own.
    pub(crate) inflight_floor: Option<u64>,
}

/// What every transaction and the committer share.
pub(crate) struct Shared {
    db: fjall::Database,
    data: fjall::Keyspace,
    visibility: Mutex<Visibility>,
    resolver: Mutex<Resolver>,
    watches: Mutex<Watches>,
    durability: Durability,
    age_max: Duration,
    stats: StoreStats,
    scans: ScanTracer,
    /// Set once a group's write or fsync failed: the store is poisoned and
    /// every later transaction fails (fjall's memtable may hold writes of a
    /// group whose commit was reported failed; nothing may read them, and
    /// nothing may build on a journal that could not be made durable).
    failed: std::sync::OnceLock<String>,
    /// When the store opened: the origin of [`Self::writing_since_us`].
    opened: std::time::Instant,
    /// While the committer writes a group (fjall's batch and its fsync):
    /// when it began, in µs since [`Self::opened`], plus one; 0 when idle.
    writing_since_us: AtomicU64,
}

struct Inner {
    shared: Arc<Shared>,
    commits: mpsc::Sender<committer::CommitRequest>,
    committer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Transactions hold their own sender clones, so the committer ends
        // after the last of them; waiting for it here would deadlock when a
        // transaction outlives the store, so it is detached instead.
        drop(self.committer.lock().take());
    }
}

/// A store on local disk with FoundationDB's transaction semantics.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore").finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the store at `config.path` and starts its
    /// committer. [`OpenError::Locked`] when another store has the
    /// directory open (one store per directory).
    pub fn open(config: EmbeddedConfig) -> Result<EmbeddedStore, OpenError> {
        let io = |e: fjall::Error| OpenError::Store(StoreError::Io(e.to_string()));
        std::fs::create_dir_all(&config.path)
            .map_err(|e| OpenError::Store(StoreError::Io(e.to_string())))?;
        let db = fjall::Database::builder(&config.path)
            .cache_size(config.cache_bytes)
            .open()
            .map_err(|e| lock::open_error(&config.path, e))?;
        let memtable_bytes = config.memtable_bytes;
        let data = db
            .keyspace("data", || {
                let options = KeyspaceCreateOptions::default();
                match memtable_bytes {
                    Some(bytes) => options.max_memtable_size(bytes),
                    None => options,
                }
            })
            .map_err(io)?;
        let age_max = Duration::from_millis(TRANSACTION_AGE_MAX_MS);
        let shared = Arc::new(Shared {
            visibility: Mutex::new(Visibility::default()),
            resolver: Mutex::new(Resolver::new(1, age_max)),
            watches: Mutex::new(Watches::new(config.watches_max)),
            db,
            data,
            durability: config.durability,
            age_max,
            stats: StoreStats::default(),
            scans: ScanTracer::default(),
            failed: std::sync::OnceLock::new(),
            opened: std::time::Instant::now(),
            writing_since_us: AtomicU64::new(0),
        });
        let (commits, requests) = mpsc::channel(config.commit_queue_max.max(1));
        let group_max = config.commit_group_max.max(1);
        let committer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("hotq-committer".into())
                .spawn(move || committer::run(shared, requests, group_max))
                .map_err(|e| OpenError::Store(StoreError::Io(e.to_string())))?
        };
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                shared,
                commits,
                committer: Mutex::new(Some(committer)),
            }),
        })
    }

    /// Work counters since the store opened.
    pub fn stats(&self) -> &StoreStats {
        &self.inner.shared.stats
    }

    /// Sizes of the resolver's bounded state: (live transactions, conflict
    /// history keys, empty stretches, armed watches).
    pub fn footprint(&self) -> (usize, usize, usize, usize) {
        let resolver = self.inner.shared.resolver.lock();
        let watches = self.inner.shared.watches.lock().len();
        (
            resolver.live_count(),
            resolver.history_len(),
            resolver.empty.len(),
            watches,
        )
    }

    /// Test aid: start (or stop and forget) recording the key intervals
    /// range reads scan, so a test can count the tombstones each read walked.
    pub fn trace_scans(&self, on: bool) {
        self.inner.shared.scans.set(on);
    }

    /// The intervals scanned since the last call (empty while tracing is off).
    pub fn take_scan_trace(&self) -> ScanTrace {
        self.inner.shared.scans.take()
    }

    /// Total commits, conflicts and fsync groups so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        let stats = self.stats();
        (
            stats.commits.load(Ordering::Relaxed),
            stats.conflicts.load(Ordering::Relaxed),
            stats.groups.load(Ordering::Relaxed),
        )
    }
}

impl Store for EmbeddedStore {
    type Txn = EmbeddedTxn;

    fn begin(&self) -> Result<EmbeddedTxn, StoreError> {
        self.inner
            .shared
            .stats
            .begins
            .fetch_add(1, Ordering::Relaxed);
        EmbeddedTxn::begin(self.inner.shared.clone(), self.inner.commits.clone())
    }

    fn failure(&self) -> Option<String> {
        self.inner.shared.failed.get().cloned()
    }

    fn write_under_way_for(&self) -> Option<Duration> {
        let shared = &self.inner.shared;
        match shared.writing_since_us.load(Ordering::Acquire) {
            0 => None,
            since => {
                let began = Duration::from_micros(since - 1);
                Some(shared.opened.elapsed().saturating_sub(began))
            }
        }
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner
            .shared
            .db
            .persist(PersistMode::SyncAll)
            .map_err(|e| StoreError::Io(e.to_string()))
    }
}
