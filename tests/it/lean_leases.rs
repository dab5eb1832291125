//! A lease is one row: its entry in the due index, at the key its receipt
//! names (the receipt holds the expiry it was issued with). An extend
//! leaves a forwarding row under the queue's receipts until the lease is
//! settled, expires or is dropped; deletes find leases in the due index,
//! listings there and, once extended, by their forwarding rows.

use crate::common;
use crate::common::client::Client;
use crate::common::daemon::{Daemon, get_json, http};

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroU64;
use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, HeldItem, ItemValue, encode_held, now_ms};
use hotq::keys::{DueWhat, QueueKeys, QueueName};
use hotq::lease::{Lease, Receipt};
use hotq::queue::Queue;
use hotq::staging::StagingConfig;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Read, Store, Transaction, decode_counter};

const HOUR_MS: u64 = 3_600_000;

fn keys(name: &str) -> QueueKeys {
    QueueKeys::new(&QueueName::new(name).unwrap())
}

/// The queue's rows a lease may leave: due-index leases and receipt rows,
/// and its leased counter.
async fn lease_rows(store: &EmbeddedStore, keys: &QueueKeys) -> (usize, usize, i64) {
    let due = common::due_of(store, keys, DueWhat::Lease).await.len();
    let receipts = common::scan(store, keys.receipts_range()).await.len();
    let txn = store.begin().unwrap();
    let leased = decode_counter(
        txn.get(&keys.leased(), Read::Snapshot)
            .await
            .unwrap()
            .as_deref(),
    );
    (due, receipts, leased)
}

async fn leased_one(coordinator: &Coordinator<EmbeddedStore>, keys: &QueueKeys) -> Lease {
    let items = coordinator
        .pop_leased(
            keys,
            End::Front,
            1,
            Duration::ZERO,
            NonZeroU64::new(HOUR_MS).unwrap(),
        )
        .await
        .unwrap();
    items[0]
        .lease
        .expect("a leased pop's item carries its lease")
}

async fn setup(
    name: &str,
    items: usize,
) -> (
    EmbeddedStore,
    tempfile::TempDir,
    Coordinator<EmbeddedStore>,
    QueueKeys,
) {
    let (store, dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let queue = Queue::new(store.clone(), QueueName::new(name).unwrap());
    for n in 0..items {
        queue.push(format!("item {n}").as_bytes()).await.unwrap();
    }
    (store, dir, coordinator, keys(name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_one_row_at_the_key_its_receipt_names() {
    let (store, _dir, coordinator, keys) = setup("one-row", 1).await;
    let lease = leased_one(&coordinator, &keys).await;
    assert_eq!(lease.receipt.issued_expiry_ms(), lease.expires_at_ms);
    let due = common::due_of(&store, &keys, DueWhat::Lease).await;
    assert_eq!(due.len(), 1);
    assert_eq!(
        due[0].key,
        keys.lease(lease.expires_at_ms, &lease.receipt.0)
    );
    assert_eq!(lease_rows(&store, &keys).await, (1, 0, 1), "no receipt row");
    coordinator.ack(&keys, &lease.receipt).await.unwrap();
    assert_eq!(lease_rows(&store, &keys).await, (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_lease_forwards_its_receipt_until_settled() {
    let (store, _dir, coordinator, keys) = setup("forward", 2).await;
    let lease = leased_one(&coordinator, &keys).await;
    for lease_ms in [2 * HOUR_MS, 3 * HOUR_MS] {
        let expires_at_ms = coordinator
            .extend(&keys, &lease.receipt, lease_ms)
            .await
            .unwrap();
        let receipt_rows = common::scan(&store, keys.receipts_range()).await;
        assert_eq!(receipt_rows.len(), 1, "one forwarding row");
        assert_eq!(receipt_rows[0].value, expires_at_ms.to_be_bytes());
        let due = common::due_of(&store, &keys, DueWhat::Lease).await;
        assert_eq!(due.len(), 1, "the lease moved, not copied");
        assert_eq!(due[0].key, keys.lease(expires_at_ms, &lease.receipt.0));
    }
    coordinator.ack(&keys, &lease.receipt).await.unwrap();
    assert_eq!(lease_rows(&store, &keys).await, (0, 0, 0));

    let lease = leased_one(&coordinator, &keys).await;
    coordinator
        .extend(&keys, &lease.receipt, 2 * HOUR_MS)
        .await
        .unwrap();
    coordinator.nack(&keys, &lease.receipt, 0).await.unwrap();
    assert_eq!(lease_rows(&store, &keys).await, (0, 0, 0));
    let again = leased_one(&coordinator, &keys).await;
    assert_eq!(again.delivery_count, 2, "the nacked item came back");
}

/// An extended lease stays extended: asked to go back to exactly its
/// issued expiry, it goes 1 ms past it and keeps its forwarding row. A
/// lease listing passes the issued expiries before the receipt rows, so
/// a lease coming back to a place the listing had passed would be missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_back_to_the_issued_expiry_keeps_the_forwarding_row() {
    let (store, _dir, coordinator, keys) = setup("back", 1).await;
    let lease = leased_one(&coordinator, &keys).await;
    coordinator
        .extend(&keys, &lease.receipt, 2 * HOUR_MS)
        .await
        .unwrap();
    assert_eq!(lease_rows(&store, &keys).await, (1, 1, 1));
    // As of a moment before the issued expiry, extended to exactly it.
    let now = lease.expires_at_ms - 1_000;
    let txn = store.begin().unwrap();
    let extended = hotq::lease::settle::extend_in(&txn, &keys, &lease.receipt, 1_000, now)
        .await
        .unwrap()
        .unwrap();
    txn.commit().await.unwrap();
    assert_eq!(
        extended,
        lease.expires_at_ms + 1,
        "1 ms past the issued expiry"
    );
    assert_eq!(
        lease_rows(&store, &keys).await,
        (1, 1, 1),
        "still forwarded"
    );
    let due = common::due_of(&store, &keys, DueWhat::Lease).await;
    assert_eq!(due[0].key, keys.lease(extended, &lease.receipt.0));
    coordinator.ack(&keys, &lease.receipt).await.unwrap();
    assert_eq!(lease_rows(&store, &keys).await, (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_lease_that_expires_leaves_no_row() {
    let (store, _dir, coordinator, keys) = setup("expires", 1).await;
    let lease = leased_one(&coordinator, &keys).await;
    let expires_at_ms = coordinator
        .extend(&keys, &lease.receipt, 2 * HOUR_MS)
        .await
        .unwrap();
    coordinator.sweep_due(expires_at_ms).await.unwrap();
    assert_eq!(lease_rows(&store, &keys).await, (0, 0, 0));
    let queue = Queue::new(store.clone(), QueueName::new("expires").unwrap());
    assert_eq!(queue.len().await.unwrap(), 1, "the item is back");
    assert!(
        coordinator.ack(&keys, &lease.receipt).await.is_err(),
        "its receipt acts on nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_lease_that_expires_takes_its_count_along() {
    let (store, _dir, coordinator, keys) = setup("malformed", 0).await;
    let due_ms = now_ms() + 1_000;
    let receipt = Receipt::for_lease(&keys, due_ms);
    let txn = store.begin().unwrap();
    txn.set(&keys.lease(due_ms, &receipt.0), b"not an envelope")
        .unwrap();
    txn.atomic_add(&keys.leased(), 1).unwrap();
    txn.commit().await.unwrap();
    coordinator.sweep_due(due_ms).await.unwrap();
    assert_eq!(
        lease_rows(&store, &keys).await,
        (0, 0, 0),
        "no count left for a lease that is gone"
    );
}

/// Pops `n` leased items of `queue` over HTTP; their receipts.
async fn leased_over_http(client: &Client, queue: &str, n: usize) -> Vec<String> {
    let mut receipts = Vec::new();
    for _ in 0..n {
        receipts.push(client.pop_leased(queue, HOUR_MS).await.unwrap().receipt);
    }
    receipts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_drops_plain_and_extended_leases_with_their_rows() {
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    client.push_batch("doomed", &["a", "b", "c"]).await;
    let receipts = leased_over_http(&client, "doomed", 2).await;
    assert_eq!(
        client.extend("doomed", &receipts[0], 2 * HOUR_MS).await,
        200
    );
    let deleted = client.delete("doomed").await;
    assert_eq!(
        (deleted["items"].as_u64(), deleted["leased"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(lease_rows(&daemon.store, &keys("doomed")).await, (0, 0, 0));
    for receipt in &receipts {
        assert_eq!(
            client.ack("doomed", receipt).await,
            404,
            "dropped with the queue"
        );
    }
    daemon.stop().await;
}

/// Writes `n` delayed items of `queue`, due at `due_ms`, straight into the
/// due index (as pushes with a delay would, faster).
async fn delayed_rows(store: &EmbeddedStore, queue: &QueueKeys, n: usize, due_ms: u64) {
    for chunk in 0..n.div_ceil(10_000) {
        let txn = store.begin().unwrap();
        let count = (n - chunk * 10_000).min(10_000);
        for _ in 0..count {
            let held = HeldItem {
                item_key: Vec::new(),
                item: ItemValue::new(now_ms(), b"later".to_vec()),
            };
            txn.set(
                &queue.delayed(due_ms, &Receipt::random().0),
                &encode_held(&held),
            )
            .unwrap();
        }
        txn.atomic_add(&queue.delayed_count(), count as i64)
            .unwrap();
        txn.commit().await.unwrap();
    }
}

/// Follows a lease listing from its first page to the last; the receipts
/// and the number of pages.
async fn list_all(url: &str, queue: &str, limit: usize) -> (Vec<String>, usize) {
    let (mut receipts, mut pages, mut after) = (Vec::new(), 0, None::<String>);
    loop {
        let mut page_url = format!("{url}/v1/queues/{queue}/leases?limit={limit}");
        if let Some(after) = &after {
            page_url.push_str(&format!("&after={after}"));
        }
        let page = get_json(&page_url).await;
        pages += 1;
        assert!(pages < 100, "a listing ends");
        let leases = page["leases"].as_array().unwrap();
        assert!(leases.len() <= limit);
        receipts.extend(
            leases
                .iter()
                .map(|lease| lease["receipt"].as_str().unwrap().to_string()),
        );
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => return (receipts, pages),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_listings_page_past_other_queues_due_entries() {
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    client.push_batch("listed", &["a", "b", "c"]).await;
    client.push_batch("other", &["x", "y", "z", "w"]).await;
    let mut mine = BTreeSet::new();
    for _ in 0..3 {
        // Interleaved with another queue's leases in the due index.
        mine.insert(client.pop_leased("listed", HOUR_MS).await.unwrap().receipt);
        client.pop_leased("other", HOUR_MS).await.unwrap();
    }
    let (listed, pages) = list_all(&daemon.url, "listed", 1).await;
    assert_eq!(listed.iter().cloned().collect::<BTreeSet<_>>(), mine);
    assert_eq!(
        (listed.len(), pages),
        (3, 3),
        "one lease a page, in order, each once"
    );

    // More due entries of another queue before them than one page reads:
    // a page ends short, with a next, and the listing still finds them all.
    delayed_rows(
        &daemon.store,
        &keys("other"),
        110_000,
        now_ms() + HOUR_MS / 2,
    )
    .await;
    let (listed, pages) = list_all(&daemon.url, "listed", 1_000).await;
    assert_eq!(listed.iter().cloned().collect::<BTreeSet<_>>(), mine);
    assert_eq!(listed.len(), 3);
    assert!(
        pages >= 2,
        "the first page ran out of its budget ({pages} pages)"
    );
    for after in ["xyz", "", "abc"] {
        let response = http()
            .get(format!(
                "{}/v1/queues/listed/leases?after={after}",
                daemon.url
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "after={after:?}");
    }
    daemon.stop().await;
}

/// One page of `queue`'s lease listing: its receipts and its `next`.
async fn lease_page(
    url: &str,
    queue: &str,
    limit: usize,
    after: Option<&str>,
) -> (Vec<String>, Option<String>) {
    let mut page_url = format!("{url}/v1/queues/{queue}/leases?limit={limit}");
    if let Some(after) = after {
        page_url.push_str(&format!("&after={after}"));
    }
    let page = get_json(&page_url).await;
    let receipts = page["leases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lease| lease["receipt"].as_str().unwrap().to_string())
        .collect();
    (receipts, page["next"].as_str().map(str::to_string))
}

/// A listing paged while leases are extended — shorter and longer, between
/// its pages and during them, some already extended before it began —
/// lists every lease that exists from its first page to its last (none
/// ends here), and none more than twice: once at the expiry it was issued
/// with, once as extended. A listing in expiry order alone misses a lease
/// extended to an expiry the listing has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_paged_while_leases_are_extended_lists_every_lease() {
    const LEASES: usize = 300;
    const LIMIT: usize = 7;
    let daemon = Daemon::start(|_| {}).await;
    let client = Client::new(&daemon.url);
    let items: Vec<String> = (0..LEASES).map(|n| n.to_string()).collect();
    client.push_batch("extending", &items).await;
    // In issued-expiry order: the order a listing's first run takes.
    let receipts = leased_over_http(&client, "extending", LEASES).await;
    for receipt in receipts.iter().step_by(10) {
        assert_eq!(client.extend("extending", receipt, 2 * HOUR_MS).await, 200);
    }
    let extender = {
        let (client, receipts) = (client.clone(), receipts.clone());
        tokio::spawn(async move {
            for n in 0..LEASES {
                let lease_ms = if n % 2 == 0 { HOUR_MS / 2 } else { 2 * HOUR_MS };
                let receipt = &receipts[(n * 7) % LEASES];
                assert_eq!(
                    client
                        .extend("extending", receipt, lease_ms + n as u64)
                        .await,
                    200
                );
            }
        })
    };
    let mut listed: HashMap<String, usize> = HashMap::new();
    let (mut after, mut pages) = (None::<String>, 0usize);
    loop {
        let (page, next) = lease_page(&daemon.url, "extending", LIMIT, after.as_deref()).await;
        assert!(page.len() <= LIMIT);
        for receipt in page {
            *listed.entry(receipt).or_default() += 1;
        }
        pages += 1;
        assert!(pages < 1_000, "a listing ends");
        let Some(next) = next else { break };
        after = Some(next);
        // Between pages: one not listed yet (from the back) to an expiry
        // before every issued one, one listed already (from the front) to
        // one after them all.
        let ahead = &receipts[LEASES - 1 - pages % LEASES];
        assert_eq!(client.extend("extending", ahead, HOUR_MS / 4).await, 200);
        let behind = &receipts[pages % LEASES];
        assert_eq!(client.extend("extending", behind, 3 * HOUR_MS).await, 200);
    }
    extender.await.unwrap();
    let missed: Vec<&String> = receipts
        .iter()
        .filter(|r| !listed.contains_key(*r))
        .collect();
    assert!(
        missed.is_empty(),
        "{} leases missed: {missed:?}",
        missed.len()
    );
    assert_eq!(listed.len(), LEASES, "nothing but the leases listed");
    let most = listed.values().max().copied();
    assert!(most <= Some(2), "listed at most twice, not {most:?}");
    daemon.stop().await;
}
