//! The second level of staging (issue #15): a coordinator's line in the
//! store's request subspace as counted requests. One written for
//! coordinator B's line (as B writes it after losing a round) keeps B's
//! place in request order: coordinator A's round leaves the items it
//! stands for to B's own round, which takes them straight to its pops.
//! When B's line cannot serve it (here B has no fulfiller, as a daemon
//! that died), A's fulfiller takes it over, in request order, ahead of
//! A's own pop, with one result per item (leased in the serving commit
//! when B's pops are); B's round collects them for its pops in line order
//! and gives back what nobody waits for, in the same commit.

use crate::common;

use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, RequestValue, decode_counted_request, decode_result, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::{Item, Queue};
use hotq::staging::counted::{self, LINE_ID_LEN, LineLevel};
use hotq::staging::line::{LineRequest, LocalId, MemoryRequest, Waiting};
use hotq::staging::round::fulfill::{Fulfilled, LocalHandoff, fulfill_round};
use hotq::staging::takeover::TakeOver;
use hotq::staging::{StagingConfig, StagingStats};
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, Transaction, decode_counter};

const BOUND: Duration = Duration::from_secs(30);

/// Coordinator B's line: only its id, as its fulfiller would use it.
const LINE_B: [u8; LINE_ID_LEN] = [0xB0; LINE_ID_LEN];
/// Coordinator A's line, where a test drives A's rounds itself.
const LINE_A: [u8; LINE_ID_LEN] = [0xA0; LINE_ID_LEN];

async fn waiting(store: &EmbeddedStore, keys: &QueueKeys) -> i64 {
    let txn = store.begin().unwrap();
    decode_counter(
        txn.get(&keys.waiting(), Read::Serializable)
            .await
            .unwrap()
            .as_deref(),
    )
}

/// The stored requests (requester and count) and the `waiting` counter,
/// read at one version.
async fn requests_and_waiting(
    store: &EmbeddedStore,
    keys: &QueueKeys,
) -> (Vec<(hotq::keys::RequesterId, u32)>, i64) {
    let txn = store.begin().unwrap();
    let (begin, end) = keys.requests_range();
    let rows = txn
        .get_range(hotq::store::RangeRead::new(&begin, &end, 1_000).snapshot())
        .await
        .unwrap();
    let requests = rows
        .iter()
        .map(|row| {
            let (_, requester) = keys.request_parts(&row.key).expect("a request key");
            let (_, count) = decode_counted_request(&row.value).expect("a counted request");
            (requester, count)
        })
        .collect();
    let waiting = decode_counter(
        txn.get(&keys.waiting(), Read::Snapshot)
            .await
            .unwrap()
            .as_deref(),
    );
    (requests, waiting)
}

/// Coordinator A with one pop waiting in its line (its fulfiller runs),
/// and B's line asking for 3 pops of class `lease_ms` in the store; then
/// 4 items pushed. Returns A, its pop's item, and B's requester.
async fn a_serves_b(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    lease_ms: Option<std::num::NonZeroU64>,
) -> (Coordinator<EmbeddedStore>, Item, hotq::keys::RequesterId) {
    let a = Coordinator::new(store.clone(), StagingConfig::default());
    let pop = {
        let (a, keys) = (a.clone(), keys.clone());
        tokio::spawn(async move { a.pop(&keys, End::Front, BOUND).await.unwrap() })
    };
    common::wait_until("A's pop to wait in its line", BOUND, || {
        a.memory_waiting(keys) == 1
    })
    .await;
    let b_waiting = Waiting {
        end: End::Front,
        lease_ms,
        pops: 3,
        deadline_ms: now_ms() + BOUND.as_millis() as u64,
    };
    let asked = counted::ask(store, keys, &LINE_B, &[b_waiting], 256)
        .await
        .unwrap();
    assert_eq!(asked.pops, 3, "one request for B's 3 pops");
    // A's fulfiller may run its first round for A's pop only now, and
    // then A's pop joins the store behind B's request (as a line's pops
    // do behind another process's): only B's requests are B's.
    let (requests, waiting_now) = requests_and_waiting(store, keys).await;
    let b_requester = counted::requester(&LINE_B, End::Front, lease_ms);
    let b_counts: Vec<u32> = requests
        .iter()
        .filter(|(requester, _)| *requester == b_requester)
        .map(|(_, count)| *count)
        .collect();
    assert_eq!(b_counts, [3], "one key for B's 3 pops, not one per pop");
    let counted: u32 = requests.iter().map(|(_, count)| count).sum();
    assert_eq!(i64::from(counted), waiting_now, "`waiting` counts pops");
    let queue = Queue::new(store.clone(), keys.name().clone());
    queue.push_batch(&["0", "1", "2", "3"]).await.unwrap();
    let own = tokio::time::timeout(BOUND, pop)
        .await
        .expect("A's pop is served")
        .unwrap()
        .expect("an item");
    let requester = counted::requester(&LINE_B, End::Front, lease_ms);
    // B's line has no fulfiller here (as a daemon that died): A's round
    // left B's items for it, and takes the request over once it has
    // stood unchanged for the takeover time.
    common::eventually("A to take over B's request", BOUND, || async {
        common::scan(store, keys.counted_results_range(&requester))
            .await
            .len()
            == 3
    })
    .await;
    (a, own, requester)
}

/// One round of line `line` with `pops` memory requests of class
/// `lease_ms` (seq 1, 2, ...), collecting `collect`'s results.
async fn line_round(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    line: &[u8],
    (pops, lease_ms): (u64, Option<std::num::NonZeroU64>),
    collect: &[hotq::keys::RequesterId],
    take_over: TakeOver<'_>,
) -> Fulfilled {
    let memory: Vec<MemoryRequest> = (1..=pops)
        .map(|seq| MemoryRequest {
            seq,
            line: LineRequest::one(RequestValue {
                deadline_ms: now_ms() + 60_000,
                end: End::Front,
                lease_ms,
            }),
        })
        .collect();
    round_of(store, keys, line, &memory, collect, take_over).await
}

/// One round of `line` with `memory` waiting in it.
async fn round_of(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    line: &[u8],
    memory: &[MemoryRequest],
    collect: &[hotq::keys::RequesterId],
    take_over: TakeOver<'_>,
) -> Fulfilled {
    let marker = keys.handoff_marker(u64::from(line[0]));
    fulfill_round(
        store,
        keys,
        (256, 1 << 20, 5_000),
        LocalHandoff {
            is_local: &|_| false,
            memory,
            acks: &[],
            marker_key: &marker,
            attempt: 1,
        },
        LineLevel {
            line,
            collect,
            take_over,
            contended: false,
        },
    )
    .await
    .unwrap()
}

/// B, another line, asks the store for 3 pops; then `items` are pushed.
async fn b_asks_for_three_then_push(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    items: &[&str],
) -> Queue<EmbeddedStore> {
    let b_waiting = Waiting {
        end: End::Front,
        lease_ms: None,
        pops: 3,
        deadline_ms: now_ms() + BOUND.as_millis() as u64,
    };
    counted::ask(store, keys, &LINE_B, &[b_waiting], 256)
        .await
        .unwrap();
    let queue = Queue::new(store.clone(), keys.name().clone());
    queue.push_batch(items).await.unwrap();
    queue
}

/// B's round: `pops` memory requests of class `lease_ms` in its line.
async fn b_collects(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    requester: &hotq::keys::RequesterId,
    pops: u64,
    lease_ms: Option<std::num::NonZeroU64>,
) -> Vec<(LocalId, Vec<Item>)> {
    let collect = [requester.clone()];
    let only = TakeOver::Only(&[]);
    let fulfilled = line_round(store, keys, &LINE_B, (pops, lease_ms), &collect, only).await;
    assert_eq!(fulfilled.counts.collected, 3, "every result collected");
    assert!(
        fulfilled.carry.collect.is_empty(),
        "nothing left to collect"
    );
    fulfilled.handover.handed
}

fn payloads(items: &[Item]) -> Vec<&str> {
    items
        .iter()
        .map(|item| std::str::from_utf8(&item.payload).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counted_request_of_one_line_is_served_by_another_coordinators_fulfiller() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("counted").unwrap());
    let (a, own, requester) = a_serves_b(&store, &keys, None).await;
    assert_eq!(payloads(&[own]), ["3"], "B's request was ahead of A's pop");
    let results = common::scan(&store, keys.counted_results_range(&requester)).await;
    let served: Vec<String> = results
        .iter()
        .map(|row| String::from_utf8(decode_result(&row.value).unwrap().item.payload).unwrap())
        .collect();
    assert_eq!(
        served,
        ["0", "1", "2"],
        "one result per item, in item order"
    );
    assert!(
        common::scan(&store, keys.requests_range()).await.is_empty(),
        "the request was cleared when its count was served"
    );
    assert_eq!(waiting(&store, &keys).await, 0);
    // A's fulfiller counts a round after its commit: the results can be
    // in the store before the count is.
    let written = || StagingStats::get(&a.stats().line_results_written);
    common::wait_until("A to count the results it wrote", BOUND, || written() >= 3).await;
    assert_eq!(written(), 3, "one result per item");

    // B's round has 2 pops waiting: they get the first two results in
    // line order, and the third goes back to the queue in the same commit.
    let handed = b_collects(&store, &keys, &requester, 2, None).await;
    let handed: Vec<(LocalId, Vec<&str>)> = handed
        .iter()
        .map(|(id, items)| (id.clone(), payloads(items)))
        .collect();
    assert_eq!(
        handed,
        [
            (LocalId::Memory(1), vec!["0"]),
            (LocalId::Memory(2), vec!["1"])
        ]
    );
    assert!(common::scan(&store, keys.results_range()).await.is_empty());
    let queue = Queue::new(store.clone(), keys.name().clone());
    assert_eq!(queue.len().await.unwrap(), 1, "the third result went back");
    let back = queue.pop().await.unwrap().expect("the given-back item");
    assert_eq!(payloads(&[back]), ["2"]);
    a.shutdown(Duration::from_secs(5)).await;
}

/// Both lines alive: A's round meets B's counted request first in request
/// order and leaves the items it stands for in the queue; its own pop,
/// behind another line's request, joins the store at the back in the same
/// commit rather than race B's round for the item behind B's. B's own
/// round then takes its three items straight to its pops in line order
/// and clears its request, leaving the fourth item to A's request, which
/// A's next round takes. No result is written and none collected: each
/// round takes only its own line's items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counted_request_of_a_live_line_is_left_to_its_own_round() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("left").unwrap());
    let queue = b_asks_for_three_then_push(&store, &keys, &["0", "1", "2", "3"]).await;
    let only = TakeOver::Only(&[]);
    let handed = |fulfilled: &Fulfilled| -> Vec<(LocalId, Vec<String>)> {
        fulfilled
            .handover
            .handed
            .iter()
            .map(|(id, items)| {
                let items = payloads(items).into_iter().map(String::from).collect();
                (id.clone(), items)
            })
            .collect()
    };

    let a = line_round(&store, &keys, &LINE_A, (1, None), &[], only).await;
    assert!(handed(&a).is_empty(), "A's pop joins the store behind B's");
    assert_eq!(a.counts.pops_asked, 1);
    assert_eq!(a.counts.left_items, 3, "B's three items left in the queue");
    let left: Vec<u32> = a.carry.left_for.iter().map(|(_, count)| *count).collect();
    assert_eq!(left, [3]);
    assert_eq!(a.counts.results_written, 0);
    assert_eq!(waiting(&store, &keys).await, 4, "B's 3 pops and A's 1");
    assert_eq!(queue.len().await.unwrap(), 4);

    let b = line_round(&store, &keys, &LINE_B, (3, None), &[], only).await;
    let one = |item: &str| vec![item.to_string()];
    assert_eq!(
        handed(&b),
        [
            (LocalId::Memory(1), one("0")),
            (LocalId::Memory(2), one("1")),
            (LocalId::Memory(3), one("2")),
        ],
        "B's pops get B's items in line order"
    );
    assert_eq!((b.counts.collected, b.counts.results_written), (0, 0));
    assert_eq!(
        b.counts.left_items, 1,
        "the fourth item left to A's request"
    );
    assert_eq!(waiting(&store, &keys).await, 1);

    let a = line_round(&store, &keys, &LINE_A, (1, None), &[], only).await;
    assert_eq!(handed(&a), [(LocalId::Memory(1), one("3"))]);
    assert_eq!((a.counts.left_items, a.counts.results_written), (0, 0));
    assert!(common::scan(&store, keys.requests_range()).await.is_empty());
    assert!(common::scan(&store, keys.results_range()).await.is_empty());
    assert_eq!(waiting(&store, &keys).await, 0);
    assert_eq!(queue.len().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_counted_request_is_leased_in_the_serving_commit() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("counted-leased").unwrap());
    let (a, own, requester) = a_serves_b(&store, &keys, std::num::NonZeroU64::new(30_000)).await;
    assert!(own.lease.is_none(), "A's own pop asked for no lease");
    for row in common::scan(&store, keys.counted_results_range(&requester)).await {
        let result = decode_result(&row.value).unwrap();
        assert!(result.lease.is_some(), "leased where it was served");
    }
    let handed = b_collects(
        &store,
        &keys,
        &requester,
        3,
        std::num::NonZeroU64::new(30_000),
    )
    .await;
    let items: Vec<Item> = handed.into_iter().flat_map(|(_, items)| items).collect();
    assert_eq!(payloads(&items), ["0", "1", "2"]);
    for item in &items {
        let lease = item
            .lease
            .as_ref()
            .expect("a collected item carries its lease");
        a.ack(&keys, &lease.receipt)
            .await
            .expect("its receipt acks");
    }
    let queue = Queue::new(store.clone(), keys.name().clone());
    assert_eq!(queue.len().await.unwrap(), 0);
    a.shutdown(Duration::from_secs(5)).await;
}

/// Another process's request stands in the store ahead (a plain request
/// nobody serves: the queue is empty): coordinator B's pops, unserved,
/// join it there as counted requests (one per round that found new pops
/// waiting, each at the back). When B shuts down its
/// line leaves the store: the counted request is cleared and `waiting`
/// lowered by its count, the other process's request left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_behind_another_processs_request_stands_in_the_store_until_it_stops() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("behind").unwrap());
    let deadline_ms = now_ms() + BOUND.as_millis() as u64;
    hotq::staging::requester::register(&store, &keys, &RequestValue::front(deadline_ms))
        .await
        .unwrap();
    let b = Coordinator::new(store.clone(), StagingConfig::default());
    let pops: Vec<_> = (0..2)
        .map(|_| {
            let (b, keys) = (b.clone(), keys.clone());
            tokio::spawn(async move { b.pop(&keys, End::Front, BOUND).await })
        })
        .collect();
    let counted_pops = || async {
        common::scan(&store, keys.requests_range())
            .await
            .iter()
            .filter(|row| row.value.first() == Some(&2))
            .map(|row| {
                hotq::envelope::decode_counted_request(&row.value)
                    .unwrap()
                    .1
            })
            .sum::<u32>()
    };
    common::eventually("B's two pops to stand in the store", BOUND, || async {
        counted_pops().await == 2
    })
    .await;
    let plain = |rows: Vec<hotq::store::KeyValue>| {
        rows.iter()
            .filter(|row| row.value.first() == Some(&1))
            .count()
    };
    assert_eq!(
        plain(common::scan(&store, keys.requests_range()).await),
        1,
        "the other process's request is still first in line"
    );
    assert_eq!(waiting(&store, &keys).await, 3);
    b.shutdown(Duration::from_secs(5)).await;
    for pop in pops {
        assert!(pop.await.unwrap().unwrap().is_none(), "nothing was pushed");
    }
    assert_eq!(counted_pops().await, 0, "B's line left the store");
    let rows = common::scan(&store, keys.requests_range()).await;
    assert_eq!((rows.len(), plain(rows)), (1, 1));
    assert_eq!(waiting(&store, &keys).await, 1);
}

/// A waiting pop of several items does not stand in the store behind
/// another line's request (a counted request is one item per pop): its
/// round serves it from the items behind that request, up to its `max`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pop_of_several_items_takes_them_behind_another_lines_request() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("several").unwrap());
    let items = ["0", "1", "2", "3", "4", "5", "6", "7"];
    let queue = b_asks_for_three_then_push(&store, &keys, &items).await;
    let mut request = LineRequest::one(RequestValue {
        deadline_ms: now_ms() + 60_000,
        end: End::Front,
        lease_ms: None,
    });
    request.max = 4;
    let memory = [MemoryRequest {
        seq: 1,
        line: request,
    }];
    let a = round_of(&store, &keys, &LINE_A, &memory, &[], TakeOver::Only(&[])).await;
    assert_eq!(a.counts.pops_asked, 0, "it does not join the store");
    assert_eq!(a.counts.left_items, 3, "B's three items left in the queue");
    let items: Vec<&Item> = a
        .handover
        .handed
        .iter()
        .flat_map(|(_, items)| items)
        .collect();
    let payloads: Vec<&str> = items
        .iter()
        .map(|item| std::str::from_utf8(&item.payload).unwrap())
        .collect();
    assert_eq!(payloads, ["3", "4", "5", "6"], "up to its max, behind B's");
    assert_eq!(queue.len().await.unwrap(), 4);
}
