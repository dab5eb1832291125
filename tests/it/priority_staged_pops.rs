//! Staged pops at both ends of a priority queue, through
//! `Coordinator::pop` with `End::Front` (min) and `End::Back` (max): every
//! item delivered once under contention, and one fulfillment batch hands
//! min requesters the smallest items and max requesters the largest, each
//! in request order; with requests in memory (the default) and in the
//! store.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::priority::PriorityQueue;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, Transaction, decode_counter};
use rand::Rng;

const ITEMS: usize = 10_000;
const PUSHERS: usize = 4;
const POPPERS_PER_END: usize = 32;

async fn assert_no_requests_or_results(store: &EmbeddedStore, keys: &QueueKeys) {
    assert!(
        common::scan(store, keys.requests_range()).await.is_empty(),
        "requests left behind"
    );
    assert!(
        common::scan(store, keys.results_range()).await.is_empty(),
        "results left behind"
    );
    let waiting = store
        .begin()
        .unwrap()
        .get(&keys.waiting(), Read::Snapshot)
        .await
        .unwrap();
    assert_eq!(
        decode_counter(waiting.as_deref()),
        0,
        "waiting back to zero"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_min_and_thirty_two_max_poppers_every_item_once() {
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let name = QueueName::new("hot-pq").unwrap();
    let queue = PriorityQueue::new(store.clone(), name.clone());
    let keys = queue.keys().clone();
    // StagingStats are per coordinator: min poppers use one, max poppers the
    // other, so each coordinator's staged and direct counts are its end's.
    // Both run a fulfiller for the queue, and each serves both ends.
    let min_side = Coordinator::new(store.clone(), StagingConfig::default());
    let max_side = Coordinator::new(store.clone(), StagingConfig::default());
    let delivered = Arc::new(Mutex::new(Vec::with_capacity(ITEMS)));
    let count = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for pusher in 0..PUSHERS {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            let per = ITEMS / PUSHERS;
            // Small batches keep pushes interleaved with pops.
            for chunk in (0..per).collect::<Vec<_>>().chunks(10) {
                let batch: Vec<(i64, String)> = {
                    let mut rng = rand::rng();
                    chunk
                        .iter()
                        .map(|n| (rng.random_range(-100..=100), format!("{pusher}-{n}")))
                        .collect()
                };
                queue.push_batch(&batch).await.unwrap();
            }
        }));
    }
    for popper in 0..2 * POPPERS_PER_END {
        let (coordinator, end) = if popper % 2 == 0 {
            (min_side.clone(), End::Front)
        } else {
            (max_side.clone(), End::Back)
        };
        let (keys, delivered, count) = (keys.clone(), delivered.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
            while count.load(Ordering::SeqCst) < ITEMS {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "contention run exceeded 300 s"
                );
                let popped = coordinator
                    .pop(&keys, end, Duration::from_millis(300))
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
    let unique: HashSet<&String> = delivered.iter().collect();
    assert_eq!(unique.len(), delivered.len(), "an item was delivered twice");
    let expected: HashSet<String> = (0..PUSHERS)
        .flat_map(|p| (0..ITEMS / PUSHERS).map(move |n| format!("{p}-{n}")))
        .collect();
    let got: HashSet<String> = delivered.iter().cloned().collect();
    assert_eq!(got, expected, "every pushed item delivered");

    let (min_stats, max_stats) = (min_side.stats(), max_side.stats());
    let staged_min = StagingStats::get(&min_stats.staged_pops);
    let staged_max = StagingStats::get(&max_stats.staged_pops);
    let direct =
        StagingStats::get(&min_stats.direct_pops) + StagingStats::get(&max_stats.direct_pops);
    eprintln!("min side: {:?}", min_side.stats_snapshot());
    eprintln!("max side: {:?}", max_side.stats_snapshot());
    eprintln!(
        "staged min {staged_min}, staged max {staged_max}, direct {direct}; store (commits, conflicts, fsync groups): {:?}",
        store.counts()
    );
    assert_eq!(
        staged_min + staged_max + direct,
        ITEMS as u64,
        "every delivery counted on exactly one path"
    );
    assert!(staged_min > 0, "staged pops at the min end ran");
    assert!(staged_max > 0, "staged pops at the max end ran");
    assert!(
        StagingStats::get(&min_stats.fulfill_batches)
            + StagingStats::get(&max_stats.fulfill_batches)
            > 0,
        "fulfillment batches ran"
    );
    assert_eq!(queue.len().await.unwrap(), 0);
    assert!(common::scan(&store, keys.items_range()).await.is_empty());
    min_side.shutdown(Duration::from_secs(10)).await;
    max_side.shutdown(Duration::from_secs(10)).await;
    // Every popper collected or withdrew its last request before returning.
    assert_no_requests_or_results(&store, &keys).await;
}

in_both_request_modes!(one_batch_serves_both_ends_in_order:
    one_batch_serves_min_requesters_smallest_and_max_requesters_largest_in_order,
    one_batch_serves_stored_min_and_max_requests_in_order);

async fn one_batch_serves_both_ends_in_order(requests_in_memory: bool) {
    const PER_END: usize = 10;
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let queue = PriorityQueue::new(store.clone(), QueueName::new("order-pq").unwrap());
    let keys = queue.keys().clone();
    let coordinator = Coordinator::new(store.clone(), common::staging(requests_in_memory));
    let mut poppers = Vec::new();
    // Registered alternately min, max, min, ..., one at a time.
    for i in 0..2 * PER_END {
        let end = if i % 2 == 0 { End::Front } else { End::Back };
        let (popper, popper_keys) = (coordinator.clone(), keys.clone());
        poppers.push((
            end,
            tokio::spawn(async move {
                popper
                    .pop(&popper_keys, end, Duration::from_secs(60))
                    .await
                    .unwrap()
            }),
        ));
        common::wait_until("registration", Duration::from_secs(30), || {
            common::requests_made(&coordinator) == i as u64 + 1
        })
        .await;
    }
    // Distinct priorities, pushed shuffled in one commit.
    let mut priorities: Vec<i64> = (0..2 * PER_END as i64).map(|n| n * 1_000 - 7_000).collect();
    priorities.insert(0, i64::MIN);
    priorities.push(i64::MAX);
    let mut shuffled = priorities.clone();
    {
        let mut rng = rand::rng();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.random_range(0..=i));
        }
    }
    let batch: Vec<(i64, String)> = shuffled.iter().map(|&p| (p, p.to_string())).collect();
    queue.push_batch(&batch).await.unwrap();

    let (mut min_rank, mut max_rank) = (0usize, 0usize);
    for (end, popper) in poppers {
        let item = popper.await.unwrap().expect("served before its deadline");
        let got: i64 = String::from_utf8(item.payload).unwrap().parse().unwrap();
        match end {
            End::Front => {
                assert_eq!(got, priorities[min_rank], "min requester {min_rank}");
                min_rank += 1;
            }
            End::Back => {
                let expected = priorities[priorities.len() - 1 - max_rank];
                assert_eq!(got, expected, "max requester {max_rank}");
                max_rank += 1;
            }
        }
    }
    let stats = coordinator.stats();
    assert_eq!(StagingStats::get(&stats.staged_pops), 2 * PER_END as u64);
    assert_eq!(StagingStats::get(&stats.direct_pops), 0);
    assert_eq!(
        StagingStats::get(&stats.fulfill_batches),
        1,
        "one fulfillment transaction served them all"
    );
    // The two middle items were left: the next-smallest and next-largest.
    assert_eq!(queue.len().await.unwrap(), 2);
    let left = |item: Option<hotq::queue::Item>| -> i64 {
        String::from_utf8(item.unwrap().payload)
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(left(queue.pop_min().await.unwrap()), priorities[PER_END]);
    assert_eq!(
        left(queue.pop_max().await.unwrap()),
        priorities[PER_END + 1]
    );
    assert_no_requests_or_results(&store, &keys).await;
    coordinator.shutdown(Duration::from_secs(10)).await;
}

// With fewer items than waiting requests, the earliest request is served
// whatever its end: a max requester that registered first must not lose
// the only item to a min requester that registered after it.
in_both_request_modes!(scarce_items_go_to_the_earliest:
    scarce_items_go_to_the_earliest_request_whatever_its_end,
    scarce_items_go_to_the_earliest_stored_request_whatever_its_end);

async fn scarce_items_go_to_the_earliest(requests_in_memory: bool) {
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let queue = PriorityQueue::new(store.clone(), QueueName::new("fair-pq").unwrap());
    let keys = queue.keys().clone();
    let coordinator = Coordinator::new(store.clone(), common::staging(requests_in_memory));
    let mut poppers = Vec::new();
    for (i, end) in [End::Back, End::Front].into_iter().enumerate() {
        let (popper, popper_keys) = (coordinator.clone(), keys.clone());
        poppers.push(tokio::spawn(async move {
            popper
                .pop(&popper_keys, end, Duration::from_secs(2))
                .await
                .unwrap()
        }));
        common::wait_until("registration", Duration::from_secs(30), || {
            common::requests_made(&coordinator) == i as u64 + 1
        })
        .await;
    }
    queue.push(b"only", 0).await.unwrap();
    let first_back = poppers.remove(0).await.unwrap();
    let then_front = poppers.remove(0).await.unwrap();
    assert!(
        first_back.is_some() && then_front.is_none(),
        "the max requester registered first, yet the min requester got the item"
    );
    coordinator.shutdown(Duration::from_secs(10)).await;
}
