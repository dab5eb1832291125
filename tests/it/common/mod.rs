//! Helpers shared by the integration tests.

pub mod alone;
pub mod backend;
pub mod client;
pub mod cluster_suite;
pub mod conformance;
pub mod daemon;
pub mod exposition;
pub mod hooked;
pub mod process;
pub mod prom;
pub mod races;
pub mod resp;

use hotq::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

/// An embedded store in a fresh temporary directory (deleted on drop).
pub fn embedded_store(durability: Durability) -> (EmbeddedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = EmbeddedConfig::new(dir.path());
    config.durability = durability;
    (
        EmbeddedStore::open(config).expect("open embedded store"),
        dir,
    )
}

/// Waits until `condition` holds, checking every millisecond, for at most
/// `bound`; panics naming `what` if it never does. For events that offer
/// no notification of their own (a counter in another task).
pub async fn wait_until(
    what: &str,
    bound: std::time::Duration,
    mut condition: impl FnMut() -> bool,
) {
    let deadline = tokio::time::Instant::now() + bound;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {bound:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Every key-value pair in `[begin, end)` (test helper; bounded at 100,000).
pub async fn scan<S: hotq::store::Store>(
    store: &S,
    range: (Vec<u8>, Vec<u8>),
) -> Vec<hotq::store::KeyValue> {
    use hotq::store::{RangeRead, Transaction};
    let txn = store.begin().unwrap();
    txn.get_range(RangeRead::new(&range.0, &range.1, 100_000).snapshot())
        .await
        .unwrap()
}

/// Like [`wait_until`], for a condition that must read the store.
pub async fn eventually<F, Fut>(what: &str, bound: std::time::Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + bound;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {bound:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Staging settings with staged pops' requests in memory (the default) or
/// in the store's request subspace.
pub fn staging(requests_in_memory: bool) -> hotq::staging::StagingConfig {
    hotq::staging::StagingConfig {
        requests_in_memory,
        ..hotq::staging::StagingConfig::default()
    }
}

/// Requests `coordinator` has made, stored or in memory.
pub fn requests_made<S: hotq::store::Store>(
    coordinator: &hotq::coordinator::Coordinator<S>,
) -> u64 {
    use hotq::staging::StagingStats;
    let stats = coordinator.stats();
    StagingStats::get(&stats.requests_registered) + StagingStats::get(&stats.memory_requests)
}

/// Two tests of one scenario `fn(requests_in_memory: bool)`: staged pops
/// waiting as memory requests (the default), and as stored requests.
#[macro_export]
macro_rules! in_both_request_modes {
    ($scenario:ident: $memory:ident, $stored:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $memory() {
            $scenario(true).await
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $stored() {
            $scenario(false).await
        }
    };
}

/// The due-index entries (leases, delayed items or reap appointments) of
/// one queue: they live in a store-wide index, not under the queue.
pub async fn due_of<S: hotq::store::Store>(
    store: &S,
    keys: &hotq::keys::QueueKeys,
    what: hotq::keys::DueWhat,
) -> Vec<hotq::store::KeyValue> {
    scan(store, hotq::keys::due_range())
        .await
        .into_iter()
        .filter(|row| {
            hotq::keys::due_entry(&row.key).is_some_and(|entry| {
                entry.kind == keys.kind() && &entry.queue == keys.name() && entry.what == what
            })
        })
        .collect()
}
