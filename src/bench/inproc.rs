//! The drain in process: the library on a store (the embedded store, or
//! a FoundationDB cluster with `--backend fdb`), no HTTP. The staged mode
//! is a client of the core ([`Hotq`]) as the daemon's front ends are; the
//! naive mode measures FoundationDB's recipe itself, one layer down
//! ([`Queue::pop`]), as it is meant to.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::report::{DrainResult, Tally, payloads};
use super::{BenchArgs, Mode};
use crate::config::Config;
use crate::keys::{QueueKeys, QueueName};
use crate::queue::{Queue, QueueError};
use crate::service::{self, End, Hotq, Item, PopLease, PopOptions, PushItem, PushOptions};
use crate::store::embedded::EmbeddedStore;
use crate::store::{Store, StoreError};

/// A store the in-process drain runs on, and what it counts of its own.
pub trait BenchStore: Store {
    /// The report's transport column: where the library's commits went.
    fn transport(&self) -> &'static str;
    /// Commits refused with a conflict so far, by this store's handles.
    fn conflicts(&self) -> u64;
    /// Durable write groups (fsyncs) so far, where the store has them.
    fn fsync_groups(&self) -> Option<u64>;
}

impl BenchStore for EmbeddedStore {
    fn transport(&self) -> &'static str {
        "inproc"
    }

    fn conflicts(&self) -> u64 {
        self.counts().1
    }

    fn fsync_groups(&self) -> Option<u64> {
        Some(self.counts().2)
    }
}

/// FoundationDB as the daemon serves from it (behind the marker adapter).
#[cfg(feature = "fdb")]
impl BenchStore for crate::store::resolving::Resolving<crate::store::fdb::FdbStore> {
    fn transport(&self) -> &'static str {
        "inproc-fdb"
    }

    fn conflicts(&self) -> u64 {
        self.inner().counts().1
    }

    fn fsync_groups(&self) -> Option<u64> {
        None
    }
}

/// Preloads a fresh queue with `args.items` items, then `workers` tasks pop
/// it empty (`staged`: hotq's pop; `naive`: the recipe's direct pop).
pub async fn drain_in_process<S: BenchStore>(
    store: &S,
    args: &BenchArgs,
    mode: Mode,
    workers: usize,
) -> Result<DrainResult, String> {
    if !matches!(mode, Mode::Staged | Mode::Naive) {
        return Err(format!(
            "mode {} pops over HTTP only: give --url",
            mode.name()
        ));
    }
    let run = format!("bench-{}-{workers}-{}", mode.name(), rand::random::<u32>());
    let name = QueueName::new(&run).map_err(|e| e.to_string())?;
    let queue = Queue::new(store.clone(), name.clone());
    let preloaded = payloads(&run, args.items, args.payload_bytes);
    // The configuration's defaults, as the bench always ran.
    let hotq = Arc::new(Hotq::new(store.clone(), &Config::default()));
    preload(&hotq, &name, &preloaded).await?;
    let keys = QueueKeys::new(&name);
    let tally = Arc::new(Tally::new(args.items));
    let (conflicts_before, groups_before) = (store.conflicts(), store.fsync_groups());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let wait = Duration::from_millis(args.wait_ms);
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let worker = Worker {
            tally: tally.clone(),
            hotq: hotq.clone(),
            keys: keys.clone(),
            queue: queue.clone(),
            mode,
            items: args.items,
        };
        tasks.push(tokio::spawn(worker.run(started, deadline, wait)));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    hotq.shutdown(Duration::from_secs(5)).await;
    let (conflicts_after, groups_after) = (store.conflicts(), store.fsync_groups());
    let counts = hotq.pop_protocol_counts();
    let count = |name: &str| counts.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1);
    let (staged, batches) = (count("staged_pops"), count("fulfill_batches"));
    let mut result = tally.summarize(&preloaded, store.transport(), mode, workers);
    result.conflicts_per_pop =
        Some((conflicts_after - conflicts_before) as f64 / args.items.max(1) as f64);
    result.staged_share = Some(staged as f64 / args.items.max(1) as f64);
    result.fulfill_batch_mean = (batches > 0).then(|| staged as f64 / batches as f64);
    result.fsync_groups = groups_after
        .zip(groups_before)
        .map(|(after, before)| after - before);
    Ok(result)
}

/// One of the drain's workers.
struct Worker<S: BenchStore> {
    tally: Arc<Tally>,
    hotq: Arc<Hotq<S>>,
    keys: QueueKeys,
    queue: Queue<S>,
    mode: Mode,
    items: usize,
}

impl<S: BenchStore> Worker<S> {
    /// Pops until every item came or the deadline passed.
    async fn run(self, started: Instant, deadline: Instant, wait: Duration) -> Result<(), String> {
        while !self.tally.done(self.items) && Instant::now() < deadline {
            let call = Instant::now();
            let popped = match self.mode {
                Mode::Naive => self.queue.pop().await.map_err(PopFailed::Recipe),
                _ => pop_one(&self.hotq, &self.keys, wait)
                    .await
                    .map_err(PopFailed::Core),
            };
            match popped {
                Ok(Some(item)) => self.tally.record(started, call, item.payload),
                // Nothing (the queue looked empty, or the recipe's retries
                // ran out under contention: over HTTP a 503): the worker
                // tries again, after yielding. On the embedded store an
                // empty read-only pop completes without awaiting anything,
                // so 256 workers polling an empty-looking queue would never
                // let the runtime poll the task whose commit took the last
                // item (once seen: one pop of 239 s, 51 million empties).
                Ok(None) | Err(PopFailed::Recipe(QueueError::Store(StoreError::Conflict))) => {
                    self.tally
                        .empty_polls
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        Ok(())
    }
}

/// A failed pop of the drain: the recipe's own (one layer down), or the
/// core's.
#[derive(Debug)]
enum PopFailed {
    Recipe(QueueError),
    Core(service::Error),
}

impl std::fmt::Display for PopFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PopFailed::Recipe(error) => error.fmt(f),
            PopFailed::Core(error) => error.fmt(f),
        }
    }
}

/// Pushes `payloads` to the queue `name` through the core, a full batch
/// per commit.
pub(super) async fn preload<S: Store>(
    hotq: &Hotq<S>,
    name: &QueueName,
    payloads: &[Vec<u8>],
) -> Result<(), String> {
    for chunk in payloads.chunks(service::PUSH_BATCH_MAX) {
        let items: Vec<PushItem> = chunk
            .iter()
            .map(|payload| PushItem {
                payload: payload.clone(),
                dedup_id: None,
                group: None,
                fair_key: None,
            })
            .collect();
        let pushed = hotq.push(name, &items, PushOptions::default()).await;
        pushed.map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// One item of `keys`' queue through the core, waiting up to `wait`: a
/// plain pop, never leased (the bench's queue has no settings).
pub(super) async fn pop_one<S: Store>(
    hotq: &Hotq<S>,
    keys: &QueueKeys,
    wait: Duration,
) -> Result<Option<Item>, service::Error> {
    let options = PopOptions {
        end: End::Front,
        max: 1,
        wait,
        lease: PopLease::Never,
    };
    Ok(hotq.pop(keys, options, None).await?.items.pop())
}
