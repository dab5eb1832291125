//! The tests that matter when several daemons share one cluster, written
//! once over the generic [`Store`]: K coordinators in one process, each
//! with its own line, fulfiller and timer, exactly as K daemons would run.
//! `tests/it/cluster_embedded.rs` runs them on the embedded store (always, so
//! the suite itself is proven), `tests/it/cluster_fdb.rs` on FoundationDB when
//! `FDB_CLUSTER_FILE` names a cluster.
//!
//! The cases: exactly-once with 4 coordinators × 64 waiters on one push
//! stream (pops waiting in memory lines, and as stored requests); a dead
//! coordinator's stored requests served and returned by the others; leases
//! settled through any coordinator; an expired lease redelivered by a
//! timer that was never told of it.
//!
//! Every case works in a queue of its own, under a fresh random name, so
//! cases can run side by side on one cluster.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::lease::LeaseError;
use hotq::lease::settle::Returned;
use hotq::queue::{Item, Queue};
use hotq::staging::requester::register;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::Store;

/// Bound on every run: generous, the runs take seconds.
const RUN_BOUND: Duration = Duration::from_secs(240);
/// How long each pop waits in its line.
const POP_WAIT: Duration = Duration::from_millis(500);
/// Coordinators ("daemons") sharing the queue.
const COORDINATORS: usize = 4;
/// Waiters per coordinator.
const WAITERS: usize = 64;
/// Items pushed by the stream.
const ITEMS: usize = 2_000;
/// Most items pushed and not yet delivered: a steady stream, not a drain.
const BACKLOG_MAX: usize = 128;
/// Items per push commit.
const PUSH_BATCH: usize = 16;

/// A queue of its own for one case.
pub fn fresh_queue(case: &str) -> QueueName {
    QueueName::new(&format!("cluster-{case}-{:08x}", rand::random::<u32>())).unwrap()
}

fn coordinators<S: Store>(store: &S, k: usize, config: &StagingConfig) -> Vec<Coordinator<S>> {
    (0..k)
        .map(|_| Coordinator::new(store.clone(), config.clone()))
        .collect()
}

async fn shut_down<S: Store>(coordinators: &[Coordinator<S>]) {
    for coordinator in coordinators {
        coordinator.shutdown(Duration::from_secs(10)).await;
    }
}

/// 4 coordinators × 64 waiters on one queue and a steady push stream:
/// every item delivered exactly once, and every coordinator's waiters got
/// some (none was shut out). With `requests_in_memory = false` every
/// staged pop waits as a stored request that any coordinator may serve.
pub async fn coordinators_deliver_a_push_stream_exactly_once<S: Store>(
    store: S,
    requests_in_memory: bool,
) {
    let name = fresh_queue(if requests_in_memory {
        "memory"
    } else {
        "stored"
    });
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let config = StagingConfig {
        requests_in_memory,
        ..StagingConfig::default()
    };
    let fleet = coordinators(&store, COORDINATORS, &config);
    let delivered = Arc::new(Mutex::new(Vec::<String>::with_capacity(ITEMS)));
    let total = Arc::new(AtomicUsize::new(0));
    let per_coordinator: Arc<Vec<AtomicUsize>> =
        Arc::new((0..COORDINATORS).map(|_| AtomicUsize::new(0)).collect());
    let mut waiters = Vec::new();
    for (index, coordinator) in fleet.iter().enumerate() {
        for _ in 0..WAITERS {
            let (coordinator, keys) = (coordinator.clone(), keys.clone());
            let (delivered, total, per_coordinator) =
                (delivered.clone(), total.clone(), per_coordinator.clone());
            waiters.push(tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + RUN_BOUND;
                while total.load(Ordering::SeqCst) < ITEMS {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "run exceeded {RUN_BOUND:?}"
                    );
                    let popped = coordinator.pop(&keys, End::Front, POP_WAIT).await.unwrap();
                    if let Some(item) = popped {
                        delivered
                            .lock()
                            .unwrap()
                            .push(String::from_utf8(item.payload).unwrap());
                        per_coordinator[index].fetch_add(1, Ordering::SeqCst);
                        total.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
    }
    let expected: Vec<String> = (0..ITEMS).map(|i| format!("item-{i:05}")).collect();
    for (index, batch) in expected.chunks(PUSH_BATCH).enumerate() {
        // Wait for the waiters to catch up: the stream stays steady.
        let pushed = index * PUSH_BATCH;
        super::wait_until("the backlog to drain below its bound", RUN_BOUND, || {
            pushed.saturating_sub(total.load(Ordering::SeqCst)) <= BACKLOG_MAX
        })
        .await;
        queue.push_batch(batch).await.unwrap();
    }
    for waiter in waiters {
        waiter.await.unwrap();
    }
    shut_down(&fleet).await;
    assert_eq!(queue.len().await.unwrap(), 0, "the queue is empty");
    let delivered = std::mem::take(&mut *delivered.lock().unwrap());
    let distinct: HashSet<&String> = delivered.iter().collect();
    assert_eq!(
        distinct.len(),
        delivered.len(),
        "an item was delivered twice"
    );
    let lost: Vec<&String> = expected.iter().filter(|p| !distinct.contains(p)).collect();
    assert!(
        lost.is_empty(),
        "{} items lost, first {:?}",
        lost.len(),
        lost.first()
    );
    assert_eq!(delivered.len(), ITEMS, "foreign items delivered");
    let counts: Vec<usize> = per_coordinator
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    assert!(
        counts.iter().all(|&n| n > 0),
        "a coordinator's waiters got nothing: {counts:?}"
    );
}

/// One leased pop on `coordinator`, waiting up to the run bound for an item.
async fn lease_one<S: Store>(
    coordinator: &Coordinator<S>,
    keys: &QueueKeys,
    lease_ms: u64,
) -> Item {
    let deadline = tokio::time::Instant::now() + RUN_BOUND;
    loop {
        let mut items = coordinator
            .pop_leased(
                keys,
                End::Front,
                1,
                POP_WAIT,
                std::num::NonZeroU64::new(lease_ms).expect("a lease of at least 1 ms"),
            )
            .await
            .unwrap();
        if let Some(item) = items.pop() {
            assert!(item.lease.is_some(), "a leased pop returns its lease");
            return item;
        }
        assert!(tokio::time::Instant::now() < deadline, "no item to lease");
    }
}

/// A lease taken through one coordinator is acked, nacked and extended
/// through another (a load balancer sends the ack anywhere): each acts
/// once, and a settled receipt is refused everywhere after.
pub async fn leases_settle_through_any_coordinator<S: Store>(store: S) {
    let name = fresh_queue("settle");
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let fleet = coordinators(&store, 2, &StagingConfig::default());
    let (a, b) = (&fleet[0], &fleet[1]);
    queue
        .push_batch(&[b"acked".as_slice(), b"nacked"])
        .await
        .unwrap();

    let first = lease_one(a, &keys, 60_000).await;
    assert_eq!(first.payload, b"acked");
    let lease = first.lease.unwrap();
    assert_eq!(lease.delivery_count, 1);
    let extended_to = b.extend(&keys, &lease.receipt, 120_000).await.unwrap();
    assert!(extended_to > lease.expires_at_ms, "extended, not shortened");
    b.ack(&keys, &lease.receipt).await.unwrap();
    assert_eq!(
        a.ack(&keys, &lease.receipt).await,
        Err(LeaseError::UnknownReceipt),
        "an acked receipt acts no more, on any coordinator"
    );

    let second = lease_one(b, &keys, 60_000).await;
    assert_eq!(second.payload, b"nacked");
    let receipt = second.lease.unwrap().receipt;
    assert_eq!(
        a.nack(&keys, &receipt, 0).await.unwrap(),
        Returned::Requeued
    );
    assert_eq!(
        b.extend(&keys, &receipt, 1_000).await,
        Err(LeaseError::UnknownReceipt),
        "a nacked receipt acts no more"
    );
    let again = lease_one(a, &keys, 60_000).await;
    assert_eq!(again.payload, b"nacked", "the nacked item comes back");
    assert_eq!(again.lease.unwrap().delivery_count, 2);
    b.ack(&keys, &again.lease.unwrap().receipt).await.unwrap();

    assert_eq!(queue.len().await.unwrap(), 0);
    shut_down(&fleet).await;
}

/// A lease issued by one coordinator expires and another coordinator's
/// timer (which was never told of it) returns the item, which is delivered
/// again, once; the expired receipt is refused.
pub async fn an_expired_lease_is_redelivered_by_another_coordinators_timer<S: Store>(store: S) {
    let name = fresh_queue("expiry");
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    // The timer looks at least this often for leases it was not told of.
    let config = StagingConfig {
        reap_interval_ms: 50,
        ..StagingConfig::default()
    };
    let fleet = coordinators(&store, 2, &config);
    let (issuer, sweeper) = (&fleet[0], &fleet[1]);
    let timer = sweeper.spawn_timer();
    queue.push(b"expires").await.unwrap();

    let first = lease_one(issuer, &keys, 200).await;
    let receipt = first.lease.unwrap().receipt;
    // Waits on the event (the item is back and leased again), bounded.
    let again = lease_one(issuer, &keys, 60_000).await;
    assert_eq!(again.payload, b"expires");
    let lease = again.lease.unwrap();
    assert_eq!(lease.delivery_count, 2, "delivered a second time");
    assert!(
        matches!(
            issuer.ack(&keys, &receipt).await,
            Err(LeaseError::UnknownReceipt | LeaseError::Expired { .. })
        ),
        "the expired receipt acts no more"
    );
    issuer.ack(&keys, &lease.receipt).await.unwrap();
    assert_eq!(queue.len().await.unwrap(), 0);
    shut_down(&fleet).await;
    timer.await.unwrap();
}

/// Stored requests of a coordinator that died (registered, never awaited)
/// are served, in request order, by the live coordinators' fulfillers,
/// and the results nobody collects are returned by their reapers, which
/// their own waiters then take: every item delivered once, nothing left in
/// the request or result subspaces.
pub async fn a_dead_coordinators_requests_are_served_and_returned_by_the_others<S: Store>(
    store: S,
) {
    const DEAD_REQUESTS: usize = 16;
    const ITEMS_LEFT: usize = 200;
    let name = fresh_queue("orphans");
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name);
    let expected: Vec<String> = (0..ITEMS_LEFT).map(|i| format!("orphan-{i:04}")).collect();
    queue.push_batch(&expected).await.unwrap();
    let dead_deadline_ms = now_ms() + 3_000;
    for _ in 0..DEAD_REQUESTS {
        let registration = register(&store, &keys, &RequestValue::front(dead_deadline_ms))
            .await
            .unwrap();
        drop(registration);
    }
    let config = StagingConfig {
        result_grace_ms: 300,
        reap_interval_ms: 100,
        ..StagingConfig::default()
    };
    let live = coordinators(&store, 2, &config);
    let timers: Vec<_> = live.iter().map(|c| c.spawn_timer()).collect();
    let delivered = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut waiters = Vec::new();
    for coordinator in &live {
        for _ in 0..4 {
            let (coordinator, keys, delivered) =
                (coordinator.clone(), keys.clone(), delivered.clone());
            waiters.push(tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + RUN_BOUND;
                while delivered.lock().unwrap().len() < ITEMS_LEFT {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "run exceeded {RUN_BOUND:?}"
                    );
                    if let Some(item) = coordinator.pop(&keys, End::Front, POP_WAIT).await.unwrap()
                    {
                        delivered
                            .lock()
                            .unwrap()
                            .push(String::from_utf8(item.payload).unwrap());
                    }
                }
            }));
        }
    }
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let delivered = std::mem::take(&mut *delivered.lock().unwrap());
    let distinct: HashSet<&String> = delivered.iter().collect();
    assert_eq!(
        distinct.len(),
        delivered.len(),
        "an item was delivered twice"
    );
    assert!(
        expected.iter().all(|p| distinct.contains(p)),
        "an item was lost"
    );
    let reaped: u64 = live
        .iter()
        .map(|c| StagingStats::get(&c.stats().results_reaped))
        .sum();
    assert_eq!(
        reaped, DEAD_REQUESTS as u64,
        "each dead request's result returned once"
    );
    super::eventually("requests and results are empty", RUN_BOUND, || async {
        scan_is_empty(&store, keys.requests_range()).await
            && scan_is_empty(&store, keys.results_range()).await
    })
    .await;
    shut_down(&live).await;
    for timer in timers {
        timer.await.unwrap();
    }
}

async fn scan_is_empty<S: Store>(store: &S, range: (Vec<u8>, Vec<u8>)) -> bool {
    super::scan(store, range).await.is_empty()
}

/// The suite as tests: `$store` is an expression of type `Option<S>`;
/// `None` means the backend is not available and every test says so.
#[macro_export]
macro_rules! cluster_suite_tests {
    ($skip:expr, $store:expr) => {
        $crate::cluster_suite_tests!(@case $skip, $store;
            four_coordinators_deliver_a_stream_exactly_once
                => coordinators_deliver_a_push_stream_exactly_once(true));
        $crate::cluster_suite_tests!(@case $skip, $store;
            four_coordinators_serve_stored_requests_exactly_once
                => coordinators_deliver_a_push_stream_exactly_once(false));
        $crate::cluster_suite_tests!(@case $skip, $store;
            leases_settle_through_any_coordinator
                => leases_settle_through_any_coordinator());
        $crate::cluster_suite_tests!(@case $skip, $store;
            dead_coordinators_requests_are_served_and_returned_by_the_others
                => a_dead_coordinators_requests_are_served_and_returned_by_the_others());
        $crate::cluster_suite_tests!(@case $skip, $store;
            expired_lease_is_redelivered_by_another_coordinator
                => an_expired_lease_is_redelivered_by_another_coordinators_timer());
    };
    (@case $skip:expr, $store:expr; $name:ident => $case:ident($($arg:expr),*)) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            match $store {
                Some(store) => common::cluster_suite::$case(store $(, $arg)*).await,
                None => eprintln!("SKIPPED {}: {}", stringify!($name), $skip),
            }
        }
    };
}
