//! A staged leased pop whose requester never takes its item: withdrawn by
//! a caller that left, or reaped after the requester died. Either way the
//! item goes back to its key in the same commit that clears the result,
//! its lease is gone, its delivery is not counted (nobody saw it), and the
//! depth, waiting and leased counters stay exact.

use crate::common;

use hotq::envelope::{End, RequestValue, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::Queue;
use hotq::staging::reap::reap_queue;
use hotq::staging::requester::{Registration, register, withdraw};
use hotq::staging::round::fulfill::{LocalHandoff, fulfill_once};
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, Transaction, decode_counter};

async fn counter(store: &EmbeddedStore, key: &[u8]) -> i64 {
    let txn = store.begin().unwrap();
    decode_counter(txn.get(key, Read::Snapshot).await.unwrap().as_deref())
}

/// A leased request served by the fulfiller: its result holds the item and
/// a lease holds it too.
async fn served_leased_request(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    deadline_ms: u64,
) -> Registration {
    let queue = Queue::new(store.clone(), keys.name().clone());
    queue.push(b"never-seen").await.unwrap();
    let request = RequestValue {
        deadline_ms,
        end: End::Front,
        lease_ms: std::num::NonZeroU64::new(600_000),
    };
    let registration = register(store, keys, &request).await.unwrap();
    let fulfilled = fulfill_once(store, keys, 16, 1 << 20, 0, LocalHandoff::NONE)
        .await
        .unwrap();
    assert_eq!(fulfilled.counts.served, 1);
    assert_eq!(common::scan(store, keys.results_range()).await.len(), 1);
    assert_eq!(
        common::due_of(store, keys, hotq::keys::DueWhat::Lease)
            .await
            .len(),
        1
    );
    assert_eq!(counter(store, &keys.leased()).await, 1);
    registration
}

async fn assert_back_undelivered(store: &EmbeddedStore, keys: &QueueKeys) {
    for (what, range) in [
        ("results", keys.results_range()),
        ("requests", keys.requests_range()),
    ] {
        assert!(common::scan(store, range).await.is_empty(), "{what} left");
    }
    for what in [hotq::keys::DueWhat::Lease, hotq::keys::DueWhat::Delayed] {
        let left = common::due_of(store, keys, what).await;
        assert!(left.is_empty(), "{what:?} left");
    }
    assert_eq!(counter(store, &keys.leased()).await, 0, "leased counter");
    assert_eq!(counter(store, &keys.waiting()).await, 0, "waiting counter");
    assert_eq!(counter(store, &keys.depth()).await, 1, "depth counter");
    let item = Queue::new(store.clone(), keys.name().clone())
        .pop()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(item.payload, b"never-seen");
    assert_eq!(
        item.deliveries, 0,
        "a delivery nobody received is not counted"
    );
}

#[tokio::test]
async fn a_withdrawn_leased_result_returns_its_item_uncounted() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("left").unwrap());
    let registration = served_leased_request(&store, &keys, now_ms() + 60_000).await;
    let taken = withdraw(
        &store,
        &keys,
        &registration.request_key,
        &registration.result_key,
        true,
    )
    .await
    .unwrap();
    assert_eq!(taken, None, "restored, not handed to anyone");
    assert_back_undelivered(&store, &keys).await;
}

#[tokio::test]
async fn a_reaped_leased_result_returns_its_item_uncounted() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("died").unwrap());
    let deadline_ms = now_ms() + 60_000;
    let _dead = served_leased_request(&store, &keys, deadline_ms).await;
    let reaped = reap_queue(&store, &keys, deadline_ms + 1).await.unwrap();
    assert_eq!(reaped.results, 1);
    assert_back_undelivered(&store, &keys).await;
}
