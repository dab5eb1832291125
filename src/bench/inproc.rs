//! The drain in process: the library on a store (the embedded store, or
//! a FoundationDB cluster with `--backend fdb`), no HTTP.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::report::{DrainResult, Tally, payloads};
use super::{BenchArgs, Mode};
use crate::coordinator::Coordinator;
use crate::envelope::End;
use crate::keys::{QueueKeys, QueueName};
use crate::queue::{Queue, QueueError};
use crate::staging::{StagingConfig, StagingStats};
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
    for chunk in preloaded.chunks(1_000) {
        queue.push_batch(chunk).await.map_err(|e| e.to_string())?;
    }
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let keys = QueueKeys::new(&name);
    let tally = Arc::new(Tally::new(args.items));
    let (conflicts_before, groups_before) = (store.conflicts(), store.fsync_groups());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.deadline_s);
    let wait = Duration::from_millis(args.wait_ms);
    let mut tasks = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tally, coordinator, keys, queue) = (
            tally.clone(),
            coordinator.clone(),
            keys.clone(),
            queue.clone(),
        );
        let items = args.items;
        tasks.push(tokio::spawn(async move {
            while !tally.done(items) && Instant::now() < deadline {
                let call = Instant::now();
                let popped = match mode {
                    Mode::Naive => queue.pop().await,
                    _ => coordinator.pop(&keys, End::Front, wait).await,
                };
                match popped {
                    Ok(Some(item)) => tally.record(started, call, item.payload),
                    // Nothing (the queue looked empty, or the recipe's
                    // retries ran out under contention: over HTTP a 503):
                    // the worker tries again, after yielding. On the
                    // embedded store an empty read-only pop completes
                    // without awaiting anything, so 256 workers polling
                    // an empty-looking queue would never let the runtime
                    // poll the task whose commit took the last item
                    // (once seen: one pop of 239 s, 51 million empties).
                    Ok(None) => {
                        tally
                            .empty_polls
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                    Err(QueueError::Store(StoreError::Conflict)) if mode == Mode::Naive => {
                        tally
                            .empty_polls
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tokio::task::yield_now().await;
                    }
                    Err(error) => return Err(error.to_string()),
                }
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    coordinator.shutdown(Duration::from_secs(5)).await;
    let (conflicts_after, groups_after) = (store.conflicts(), store.fsync_groups());
    let staged = StagingStats::get(&coordinator.stats().staged_pops);
    let batches = StagingStats::get(&coordinator.stats().fulfill_batches);
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
