//! Staged pops under real contention on the embedded store (on disk, `sync`):
//! every item delivered exactly once, and the staged path really ran.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::embedded::{Durability, EmbeddedStore};

const ITEMS: usize = 20_000;
const PUSHERS: usize = 4;
const POPPERS: usize = 64;

struct Load {
    delivered: Vec<String>,
}

/// Runs 4 pushers and 64 poppers; poppers alternate over `coordinators`.
async fn run_contention(
    store: &EmbeddedStore,
    coordinators: &[Coordinator<EmbeddedStore>],
) -> Load {
    let name = QueueName::new("hot").unwrap();
    let keys = QueueKeys::new(&name);
    let delivered = Arc::new(Mutex::new(Vec::with_capacity(ITEMS)));
    let count = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for pusher in 0..PUSHERS {
        let queue = Queue::new(store.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let per = ITEMS / PUSHERS;
            // Small batches keep pushes interleaved with pops.
            for chunk in (0..per).collect::<Vec<_>>().chunks(10) {
                let payloads: Vec<String> = chunk.iter().map(|n| format!("{pusher}-{n}")).collect();
                queue.push_batch(&payloads).await.unwrap();
            }
        }));
    }
    for popper in 0..POPPERS {
        let coordinator = coordinators[popper % coordinators.len()].clone();
        let (keys, delivered, count) = (keys.clone(), delivered.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
            while count.load(Ordering::SeqCst) < ITEMS {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "contention run exceeded 300 s"
                );
                let popped = coordinator
                    .pop(&keys, End::Front, Duration::from_millis(300))
                    .await
                    .unwrap();
                if let Some(item) = popped {
                    count.fetch_add(1, Ordering::SeqCst);
                    delivered
                        .lock()
                        .unwrap()
                        .push(String::from_utf8(item.payload).unwrap());
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let delivered = std::mem::take(&mut *delivered.lock().unwrap());
    Load { delivered }
}

fn assert_exactly_once(delivered: &[String]) {
    let unique: HashSet<&String> = delivered.iter().collect();
    assert_eq!(unique.len(), delivered.len(), "an item was delivered twice");
    let expected: HashSet<String> = (0..PUSHERS)
        .flat_map(|p| (0..ITEMS / PUSHERS).map(move |n| format!("{p}-{n}")))
        .collect();
    let got: HashSet<String> = delivered.iter().cloned().collect();
    assert_eq!(got, expected, "every pushed item delivered");
}

fn report(label: &str, coordinators: &[Coordinator<EmbeddedStore>], store: &EmbeddedStore) {
    for (i, coordinator) in coordinators.iter().enumerate() {
        eprintln!(
            "{label} coordinator {i}: {:?}",
            coordinator.stats_snapshot()
        );
    }
    eprintln!(
        "{label} store (commits, conflicts, fsync groups): {:?}",
        store.counts()
    );
}

in_both_request_modes!(one_coordinator:
    sixty_four_poppers_four_pushers_every_item_once,
    sixty_four_stored_poppers_four_pushers_every_item_once);

async fn one_coordinator(requests_in_memory: bool) {
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let coordinator = Coordinator::new(store.clone(), common::staging(requests_in_memory));
    let load = run_contention(&store, std::slice::from_ref(&coordinator)).await;
    assert_exactly_once(&load.delivered);
    report(
        "one coordinator",
        std::slice::from_ref(&coordinator),
        &store,
    );
    let stats = coordinator.stats();
    // In one process, a pop that finds others of its queue already waiting
    // here registers without a direct attempt: under this load nearly every
    // pop is staged, and direct attempts (and their conflicts) are rare.
    // (Conflicting direct pops are exercised with wait_ms=0 bursts in
    // tests/it/metrics_exported.rs, and across processes below.)
    assert_eq!(
        StagingStats::get(&stats.direct_pops) + StagingStats::get(&stats.staged_pops),
        ITEMS as u64,
        "every item came out through one of the two paths"
    );
    assert!(
        StagingStats::get(&stats.staged_pops) > ITEMS as u64 / 2,
        "most pops were staged"
    );
    assert!(
        StagingStats::get(&stats.fulfill_batches) > 0,
        "fulfillment batches ran"
    );
    // One process: every staged pop was handed over in memory (the only
    // other way a staged pop ends with an item is a withdrawal that finds a
    // result, and no result is written for a local requester).
    assert_eq!(
        StagingStats::get(&stats.local_hand_offs)
            - StagingStats::get(&stats.local_hand_offs_unclaimed),
        StagingStats::get(&stats.staged_pops),
        "staged pops served in memory"
    );
    let queue = Queue::new(store.clone(), QueueName::new("hot").unwrap());
    assert_eq!(queue.len().await.unwrap(), 0);
    coordinator.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_coordinators_on_one_store_still_exactly_once() {
    let (store, _dir) = common::embedded_store(Durability::Sync);
    // One waits in memory, the other in the store: each fulfiller serves
    // its own memory line and every stored request, whoever made it.
    let coordinators = [
        Coordinator::new(store.clone(), common::staging(true)),
        Coordinator::new(store.clone(), common::staging(false)),
    ];
    let keys = QueueKeys::new(&QueueName::new("hot").unwrap());
    // Both run a fulfiller for the queue throughout, so they contend.
    for coordinator in &coordinators {
        coordinator.ensure_fulfiller(&keys);
    }
    let load = run_contention(&store, &coordinators).await;
    assert_exactly_once(&load.delivered);
    report("two coordinators", &coordinators, &store);
    let staged: u64 = coordinators
        .iter()
        .map(|c| StagingStats::get(&c.stats().staged_pops))
        .sum();
    assert!(staged > 0, "staged pops ran");
    let [memory, stored] = &coordinators;
    assert!(StagingStats::get(&memory.stats().memory_requests) > 0);
    assert_eq!(StagingStats::get(&memory.stats().requests_registered), 0);
    assert!(StagingStats::get(&stored.stats().requests_registered) > 0);
    assert_eq!(StagingStats::get(&stored.stats().memory_requests), 0);
    for coordinator in &coordinators {
        coordinator.shutdown(Duration::from_secs(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memtable_flushes_mid_load_keep_exactly_once() {
    // fjall's flushes take sequence numbers and advance its visible one in
    // the background; with a 256 KiB memtable they happen throughout the
    // load, racing the committer's batches.
    let dir = tempfile::tempdir().unwrap();
    let mut config = hotq::store::embedded::EmbeddedConfig::new(dir.path());
    config.memtable_bytes = Some(256 * 1024);
    let store = EmbeddedStore::open(config).unwrap();
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let load = run_contention(&store, std::slice::from_ref(&coordinator)).await;
    assert_exactly_once(&load.delivered);
    report("small memtable", std::slice::from_ref(&coordinator), &store);
    coordinator.shutdown(Duration::from_secs(10)).await;
}
