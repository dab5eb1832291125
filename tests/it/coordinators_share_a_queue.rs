//! K coordinators in one process over one embedded store, each with its
//! own line and fulfiller, exactly as K daemons on one cluster would run
//! (issue #15): they share one hot queue without losing or duplicating an
//! item, in proportion to their waiters; what a dead one leaves in the
//! store is returned by the others' reapers; a small one is not starved by
//! a big one.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::requester::register;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::embedded::{Durability, EmbeddedStore};

/// Bound on every run: generous, the runs take seconds.
const RUN_BOUND: Duration = Duration::from_secs(240);
/// How long each pop waits in its line.
const POP_WAIT: Duration = Duration::from_millis(500);

/// What each coordinator's waiters delivered.
struct Deliveries {
    payloads: Mutex<Vec<String>>,
    per_coordinator: Vec<AtomicUsize>,
    total: AtomicUsize,
}

impl Deliveries {
    fn new(coordinators: usize) -> Arc<Deliveries> {
        Arc::new(Deliveries {
            payloads: Mutex::new(Vec::new()),
            per_coordinator: (0..coordinators).map(|_| AtomicUsize::new(0)).collect(),
            total: AtomicUsize::new(0),
        })
    }

    fn counts(&self) -> Vec<usize> {
        self.per_coordinator
            .iter()
            .map(|c| c.load(Ordering::SeqCst))
            .collect()
    }

    /// Asserts that exactly `expected` came out, each once.
    fn assert_exactly_once(&self, expected: &HashSet<String>) {
        let payloads = self.payloads.lock().unwrap();
        let distinct: HashSet<&String> = payloads.iter().collect();
        assert_eq!(
            distinct.len(),
            payloads.len(),
            "an item was delivered twice"
        );
        let lost: Vec<_> = expected.iter().filter(|p| !distinct.contains(p)).collect();
        assert!(lost.is_empty(), "{} items lost: {lost:?}", lost.len());
        assert_eq!(payloads.len(), expected.len(), "foreign items delivered");
    }
}

/// `waiters[i]` tasks on coordinator `i`, popping until `until` items came
/// out in all.
fn spawn_waiters(
    coordinators: &[Coordinator<EmbeddedStore>],
    waiters: &[usize],
    keys: &QueueKeys,
    deliveries: &Arc<Deliveries>,
    until: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (index, coordinator) in coordinators.iter().enumerate() {
        for _ in 0..waiters[index] {
            let (coordinator, keys, deliveries) =
                (coordinator.clone(), keys.clone(), deliveries.clone());
            tasks.push(tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + RUN_BOUND;
                while deliveries.total.load(Ordering::SeqCst) < until {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "run exceeded {RUN_BOUND:?}"
                    );
                    let popped = coordinator.pop(&keys, End::Front, POP_WAIT).await.unwrap();
                    if let Some(item) = popped {
                        let payload = String::from_utf8(item.payload).unwrap();
                        deliveries.payloads.lock().unwrap().push(payload);
                        deliveries.per_coordinator[index].fetch_add(1, Ordering::SeqCst);
                        deliveries.total.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
    }
    tasks
}

fn coordinators(
    store: &EmbeddedStore,
    k: usize,
    config: StagingConfig,
) -> Vec<Coordinator<EmbeddedStore>> {
    (0..k)
        .map(|_| Coordinator::new(store.clone(), config.clone()))
        .collect()
}

const SHARE_ITEMS: usize = 8_000;
const SHARE_COORDINATORS: usize = 4;
const SHARE_WAITERS: usize = 64;
/// How far a coordinator's share of the items may stray from its share
/// of the waiters (see the share tests).
const SHARE_TOLERANCE: f64 = 0.15;
/// Most items pushed and not yet delivered: keeps the stream steady
/// instead of turning into a preloaded drain.
const BACKLOG_MAX: usize = 256;

/// 4 coordinators × 64 waiters, a steady push stream of 8,000 items: each
/// item delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_coordinators_share_a_push_stream_exactly_once() {
    share_a_push_stream(false, StagingConfig::default()).await
}

/// The same run: each coordinator's share of the items within
/// ±[`SHARE_TOLERANCE`] of its share of the waiters (judged by counts).
/// Without the second level each coordinator's fulfiller raced the others'
/// for the head and a conflicted round had no claim on the next, so shares
/// drifted (0.70 to 1.46 of fair). With counted requests served by
/// whichever round won, 0.84 to 1.16 (a winner's own new pops still raced
/// for the items behind the requests). Now a line behind another's request
/// puts its new pops in the store too, each round takes only the items
/// left after every request ahead of its pops, and ties in request order
/// go by chance: every run seen is within issue #15's ±15%.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_coordinators_share_a_push_stream_in_proportion_to_their_waiters() {
    share_a_push_stream(true, StagingConfig::default()).await
}

/// With `requests_in_memory = false` every staged pop is a stored request,
/// served in request order by whichever fulfiller gets there: exactly once,
/// and each coordinator's share within ±15% of its share of the waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_requests_share_a_push_stream_in_proportion_to_their_waiters() {
    share_a_push_stream(true, common::staging(false)).await
}

async fn share_a_push_stream(check_shares: bool, config: StagingConfig) {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let name = QueueName::new("shared").unwrap();
    let keys = QueueKeys::new(&name);
    let coordinators = coordinators(&store, SHARE_COORDINATORS, config);
    let deliveries = Deliveries::new(SHARE_COORDINATORS);
    let waiters = [SHARE_WAITERS; SHARE_COORDINATORS];
    let tasks = spawn_waiters(&coordinators, &waiters, &keys, &deliveries, SHARE_ITEMS);
    let queue = Queue::new(store.clone(), name.clone());
    let expected: Vec<String> = (0..SHARE_ITEMS).map(|n| format!("item-{n}")).collect();
    for (batch, chunk) in expected.chunks(16).enumerate() {
        let pushed = batch * 16;
        common::wait_until("the backlog to drain below its bound", RUN_BOUND, || {
            pushed - deliveries.total.load(Ordering::SeqCst) < BACKLOG_MAX
        })
        .await;
        queue.push_batch(chunk).await.unwrap();
    }
    for task in tasks {
        task.await.unwrap();
    }
    deliveries.assert_exactly_once(&expected.into_iter().collect());
    let counts = deliveries.counts();
    eprintln!("items per coordinator: {counts:?}");
    for coordinator in &coordinators {
        let stats: Vec<_> = coordinator
            .stats_snapshot()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
        eprintln!("{stats:?}");
    }
    if !check_shares {
        return shut_down(&coordinators).await;
    }
    let fair = 1.0 / SHARE_COORDINATORS as f64;
    for (index, &count) in counts.iter().enumerate() {
        let share = count as f64 / SHARE_ITEMS as f64;
        assert!(
            (share / fair - 1.0).abs() <= SHARE_TOLERANCE,
            "coordinator {index} got {share:.3} of the items for {fair:.3} of the waiters: {counts:?}"
        );
    }
    shut_down(&coordinators).await;
}

async fn shut_down(coordinators: &[Coordinator<EmbeddedStore>]) {
    for coordinator in coordinators {
        coordinator.shutdown(Duration::from_secs(5)).await;
    }
}

const DEAD_REQUESTS: usize = 32;
const DEAD_ITEMS: usize = 400;

/// Three live coordinators (8 waiters each, with their reapers) take every
/// item of `expected` beside what a dead coordinator left in the store:
/// each delivered exactly once. They keep running for the caller's checks.
async fn live_coordinators_drain(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    expected: Vec<String>,
) -> (
    Vec<Coordinator<EmbeddedStore>>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let config = StagingConfig {
        result_grace_ms: 300,
        reap_interval_ms: 100,
        ..StagingConfig::default()
    };
    let live = coordinators(store, 3, config);
    let timers: Vec<_> = live.iter().map(|c| c.spawn_timer()).collect();
    let deliveries = Deliveries::new(live.len());
    let tasks = spawn_waiters(&live, &[8, 8, 8], keys, &deliveries, DEAD_ITEMS);
    for task in tasks {
        task.await.unwrap();
    }
    deliveries.assert_exactly_once(&expected.into_iter().collect());
    (live, timers)
}

async fn stop_live(
    live: Vec<Coordinator<EmbeddedStore>>,
    reapers: Vec<tokio::task::JoinHandle<()>>,
) {
    shut_down(&live).await;
    for reaper in reapers {
        reaper.await.unwrap();
    }
}

/// A coordinator dies mid-round: its stored requests (as a
/// `requests_in_memory = false` daemon writes them) are left in the
/// request subspace, nobody will collect their results. The live
/// coordinators' fulfillers serve those requests in request order (a
/// stored request written by one coordinator served by another's
/// fulfiller), and their reapers return the uncollected results, which
/// their own waiters then take: every item delivered once, nothing left in
/// `requests` or `results`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_coordinators_requests_and_results_are_returned_by_the_others() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let name = QueueName::new("orphans").unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name.clone());
    let expected: Vec<String> = (0..DEAD_ITEMS).map(|n| format!("item-{n}")).collect();
    queue.push_batch(&expected).await.unwrap();
    // The dead coordinator's requests: registered, never awaited, never
    // withdrawn. Their deadline leaves the live fulfillers ample time to
    // serve them first (they are first in request order).
    let dead_deadline_ms = now_ms() + 3_000;
    for _ in 0..DEAD_REQUESTS {
        let registration = register(&store, &keys, &RequestValue::front(dead_deadline_ms))
            .await
            .unwrap();
        drop(registration);
    }
    let (live, reapers) = live_coordinators_drain(&store, &keys, expected).await;
    let reaped: u64 = live
        .iter()
        .map(|c| StagingStats::get(&c.stats().results_reaped))
        .sum();
    assert_eq!(
        reaped, DEAD_REQUESTS as u64,
        "every dead request was served, and its result returned by a live reaper"
    );
    common::eventually("requests and results are empty", RUN_BOUND, || async {
        common::scan(&store, keys.requests_range()).await.is_empty()
            && common::scan(&store, keys.results_range()).await.is_empty()
    })
    .await;
    stop_live(live, reapers).await;
}

const DEAD_LINE_POPS: usize = 32;

/// A coordinator dies with its line in the store as a counted request (as
/// a line that lost a round writes it): one key for 32 pops, whose
/// results nobody will collect. The live coordinators' fulfillers serve it
/// first in request order, one result per item, and their reapers return
/// the uncollected results, which their own waiters then take: every item
/// delivered once, nothing left in `requests`, `results` or `waiting`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_coordinators_counted_request_is_served_and_returned_by_the_others() {
    use hotq::staging::counted::{self, LINE_ID_LEN};
    use hotq::staging::line::Waiting;
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let name = QueueName::new("dead-line").unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name.clone());
    let expected: Vec<String> = (0..DEAD_ITEMS).map(|n| format!("item-{n}")).collect();
    queue.push_batch(&expected).await.unwrap();
    let dead = Waiting {
        end: End::Front,
        lease_ms: None,
        pops: DEAD_LINE_POPS,
        deadline_ms: now_ms() + 3_000,
    };
    let asked = counted::ask(&store, &keys, &[0xDE; LINE_ID_LEN], &[dead], 256)
        .await
        .unwrap();
    assert_eq!(asked.pops as usize, DEAD_LINE_POPS);
    let (live, reapers) = live_coordinators_drain(&store, &keys, expected).await;
    let sum = |counter: fn(&StagingStats) -> &std::sync::atomic::AtomicU64| -> u64 {
        live.iter()
            .map(|c| StagingStats::get(counter(c.stats())))
            .sum()
    };
    assert!(
        sum(|s| &s.line_results_written) >= DEAD_LINE_POPS as u64,
        "the dead line's request was served in full by the live fulfillers"
    );
    assert_eq!(
        sum(|s| &s.results_reaped),
        DEAD_LINE_POPS as u64,
        "and its results returned by a live reaper"
    );
    common::eventually(
        "requests, results and waiting are empty",
        RUN_BOUND,
        || async {
            let txn = hotq::store::Store::begin(&store).unwrap();
            let waiting = hotq::store::decode_counter(
                hotq::store::Transaction::get(
                    &txn,
                    &keys.waiting(),
                    hotq::store::Read::Serializable,
                )
                .await
                .unwrap()
                .as_deref(),
            );
            waiting == 0
                && common::scan(&store, keys.requests_range()).await.is_empty()
                && common::scan(&store, keys.results_range()).await.is_empty()
        },
    )
    .await;
    stop_live(live, reapers).await;
}

const SMALL_POPS: usize = 20;
const BIG_WAITERS: usize = 256;
/// The big coordinator's committed rounds allowed while the small one's
/// single waiter waits for one item. Generous: without the second level
/// of staging nothing orders the two fulfillers, and a pop that begins
/// while the big one is mid-burst saw 9 (in CI; most see 0). Starvation
/// would show as far more: the queue holds 160 of the big one's rounds.
const ROUNDS_BOUND: u64 = 32;
/// Items preloaded: 8 full rounds of the big coordinator per small pop.
const LOPSIDED_ITEMS: usize = BIG_WAITERS * 8 * SMALL_POPS;

/// A coordinator with 1 waiter beside one with 256 on a queue that never
/// runs dry: each of the small one's pops is served within
/// `ROUNDS_BOUND` committed rounds of the big one's fulfiller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_waiter_is_not_starved_by_two_hundred_and_fifty_six() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let name = QueueName::new("lopsided").unwrap();
    let keys = QueueKeys::new(&name);
    let queue = Queue::new(store.clone(), name.clone());
    // Enough that the big coordinator cannot empty it before the small
    // one's pops are done unless the small one is starved.
    let items = LOPSIDED_ITEMS;
    let payloads: Vec<String> = (0..items).map(|n| format!("item-{n}")).collect();
    for chunk in payloads.chunks(1_000) {
        queue.push_batch(chunk).await.unwrap();
    }
    let [big, small]: [Coordinator<EmbeddedStore>; 2] =
        coordinators(&store, 2, StagingConfig::default())
            .try_into()
            .unwrap_or_else(|_| unreachable!());
    let deliveries = Deliveries::new(1);
    let big_tasks = spawn_waiters(
        std::slice::from_ref(&big),
        &[BIG_WAITERS],
        &keys,
        &deliveries,
        items,
    );
    let mut rounds_per_pop = Vec::with_capacity(SMALL_POPS);
    for _ in 0..SMALL_POPS {
        let before = StagingStats::get(&big.stats().fulfill_batches);
        let popped = small
            .pop(&keys, End::Front, Duration::from_secs(30))
            .await
            .unwrap();
        let after = StagingStats::get(&big.stats().fulfill_batches);
        assert!(
            popped.is_some(),
            "the small coordinator's pop came back empty: {rounds_per_pop:?}"
        );
        rounds_per_pop.push(after - before);
    }
    eprintln!("big coordinator's rounds per small pop: {rounds_per_pop:?}");
    assert!(
        rounds_per_pop.iter().all(|&rounds| rounds <= ROUNDS_BOUND),
        "the big coordinator committed more than {ROUNDS_BOUND} rounds during one of the small one's pops: {rounds_per_pop:?}"
    );
    // Let the big one finish the queue so its waiters end.
    deliveries.total.fetch_add(items, Ordering::SeqCst);
    for task in big_tasks {
        task.await.unwrap();
    }
    big.shutdown(Duration::from_secs(5)).await;
    small.shutdown(Duration::from_secs(5)).await;
}
