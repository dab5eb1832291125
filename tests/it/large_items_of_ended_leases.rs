//! A large item leased to a stored request and written as its result, whose
//! lease ends before the result is collected: its retention ended and a
//! nack dropped it (here; a purge of in-flight messages does the same), and
//! its parts went with the lease. Collecting the result then finds the
//! parts gone: the item is left out, as if the queue had been empty, where
//! before the collect failed as corrupt, and a counted line's every round
//! failed until the reaper cleared the result.

use crate::common;

use std::num::NonZeroU64;
use std::time::Duration;

use hotq::envelope::{End, RequestValue, decode_result, now_ms};
use hotq::keys::{QueueKeys, QueueName, RequesterId};
use hotq::lease::Receipt;
use hotq::lease::settle::{Returned, nack_in};
use hotq::queue::parts::{all_parts_range, encode_fresh_in};
use hotq::queue::{Item, QueueError, append_expiring_in};
use hotq::staging::counted::{self, LINE_ID_LEN, LineLevel};
use hotq::staging::line::{LineRequest, LocalId, MemoryRequest, Waiting};
use hotq::staging::requester::{await_result, register, withdraw};
use hotq::staging::round::fulfill::{Fulfilled, LocalHandoff, fulfill_once, fulfill_round};
use hotq::staging::takeover::TakeOver;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, Transaction};

const MIB: usize = 1_048_576;
const BOUND: Duration = Duration::from_secs(30);
/// The items' retention: over before their leases, which last 10 minutes.
const RETENTION_MS: u64 = 60_000;
const LEASE_MS: NonZeroU64 = NonZeroU64::new(600_000).unwrap();
const LINE_A: [u8; LINE_ID_LEN] = [0xA0; LINE_ID_LEN];
const LINE_B: [u8; LINE_ID_LEN] = [0xB0; LINE_ID_LEN];

/// Pushes `count` items of 1 MiB whose retention ends in [`RETENTION_MS`].
async fn push_large(store: &EmbeddedStore, keys: &QueueKeys, count: usize) {
    let expires_at_ms = now_ms() + RETENTION_MS;
    let txn = store.begin().unwrap();
    let mut values = Vec::new();
    for i in 0..count {
        let payload = vec![b'a' + i as u8; MIB];
        values.push(encode_fresh_in(&txn, now_ms(), &payload, Some(expires_at_ms)).unwrap());
    }
    append_expiring_in(&txn, keys, &values, &vec![Some(expires_at_ms); count])
        .await
        .unwrap();
    txn.commit().await.unwrap();
}

/// Nacks every lease held in `results` (result rows) as of after the
/// items' retention ended: each item is dropped, its parts with it.
async fn end_leases(store: &EmbeddedStore, keys: &QueueKeys, results: (Vec<u8>, Vec<u8>)) {
    let rows = common::scan(store, results).await;
    assert!(!rows.is_empty(), "results wait uncollected");
    let after_retention_ms = now_ms() + 2 * RETENTION_MS;
    for row in rows {
        let lease = decode_result(&row.value).unwrap().lease.expect("leased");
        let txn = store.begin().unwrap();
        let returned = nack_in(
            &txn,
            keys,
            &Receipt(lease.receipt),
            0,
            None,
            after_retention_ms,
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(returned, Returned::Expired);
        txn.commit().await.unwrap();
    }
    assert!(
        common::scan(store, all_parts_range()).await.is_empty(),
        "the parts ended with the leases"
    );
}

fn leased_request() -> RequestValue {
    RequestValue {
        lease_ms: Some(LEASE_MS),
        ..RequestValue::front(now_ms() + BOUND.as_millis() as u64)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_requests_result_whose_lease_ended_is_collected_as_nothing() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("ended").unwrap());
    let mut collected = register(&store, &keys, &leased_request()).await.unwrap();
    let withdrawn = register(&store, &keys, &leased_request()).await.unwrap();
    push_large(&store, &keys, 2).await;
    let marker = keys.handoff_marker(1);
    let local = LocalHandoff {
        is_local: &|_| false,
        memory: &[],
        acks: &[],
        marker_key: &marker,
        attempt: 1,
    };
    fulfill_once(&store, &keys, 16, 4 * MIB, 60_000, local)
        .await
        .unwrap();
    end_leases(&store, &keys, keys.results_range()).await;

    let deadline = tokio::time::Instant::now() + BOUND;
    let stop = std::future::pending::<()>();
    let item = await_result(&store, &keys, &mut collected, None, deadline, stop).await;
    assert_eq!(
        item.unwrap(),
        None,
        "the collect finds nothing, not corruption"
    );
    let item = withdraw(
        &store,
        &keys,
        &withdrawn.request_key,
        &withdrawn.result_key,
        false,
    )
    .await;
    assert_eq!(item.unwrap(), None, "the withdrawal finds nothing");
    assert!(common::scan(&store, keys.results_range()).await.is_empty());
    assert!(common::scan(&store, all_parts_range()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_missing_under_a_lease_that_stands_are_still_corrupt() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("corrupt").unwrap());
    let registered = register(&store, &keys, &leased_request()).await.unwrap();
    push_large(&store, &keys, 1).await;
    let marker = keys.handoff_marker(1);
    let local = LocalHandoff {
        is_local: &|_| false,
        memory: &[],
        acks: &[],
        marker_key: &marker,
        attempt: 1,
    };
    fulfill_once(&store, &keys, 16, 4 * MIB, 60_000, local)
        .await
        .unwrap();
    // What hotq never does: the parts cleared while their lease stands.
    let txn = store.begin().unwrap();
    let (begin, end) = all_parts_range();
    txn.clear_range(&begin, &end).unwrap();
    txn.commit().await.unwrap();

    let (request_key, result_key) = (&registered.request_key, &registered.result_key);
    let item = withdraw(&store, &keys, request_key, result_key, false).await;
    assert!(
        matches!(item, Err(QueueError::Corrupt { .. })),
        "reported, not hidden: {item:?}"
    );
}

/// One round of `line`, with `memory` waiting in it, collecting `collect`.
async fn round(
    store: &EmbeddedStore,
    keys: &QueueKeys,
    line: &[u8],
    memory: &[MemoryRequest],
    collect: &[RequesterId],
    take_over: TakeOver<'_>,
) -> Result<Fulfilled, QueueError> {
    let marker = keys.handoff_marker(u64::from(line[0]));
    let local = LocalHandoff {
        is_local: &|_| false,
        memory,
        acks: &[],
        marker_key: &marker,
        attempt: 1,
    };
    let line = LineLevel {
        line,
        collect,
        take_over,
        contended: false,
    };
    fulfill_round(store, keys, (256, 4 * MIB, 60_000), local, line).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lines_round_collecting_a_result_whose_lease_ended_hands_nothing() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("ended-line").unwrap());
    let b_waiting = Waiting {
        end: End::Front,
        lease_ms: Some(LEASE_MS),
        pops: 1,
        deadline_ms: now_ms() + BOUND.as_millis() as u64,
    };
    counted::ask(&store, &keys, &LINE_B, &[b_waiting], 256)
        .await
        .unwrap();
    push_large(&store, &keys, 1).await;
    // A's round takes B's request over (as when B's fulfiller stalls).
    round(&store, &keys, &LINE_A, &[], &[], TakeOver::All)
        .await
        .unwrap();
    let requester = counted::requester(&LINE_B, End::Front, Some(LEASE_MS));
    end_leases(&store, &keys, keys.counted_results_range(&requester)).await;

    let memory = [MemoryRequest {
        seq: 1,
        line: LineRequest::one(leased_request()),
    }];
    let only = TakeOver::Only(&[]);
    let fulfilled = round(&store, &keys, &LINE_B, &memory, &[requester], only)
        .await
        .expect("B's round completes, not corrupt");
    assert_eq!(fulfilled.counts.collected, 1, "the result was taken");
    let handed: Vec<(LocalId, Vec<Item>)> = fulfilled.handover.handed;
    assert!(
        handed.iter().all(|(_, items)| items.is_empty()),
        "nothing handed for the ended lease"
    );
    assert!(common::scan(&store, keys.results_range()).await.is_empty());
    assert!(common::scan(&store, all_parts_range()).await.is_empty());
}
