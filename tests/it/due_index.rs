//! The timer reads a store-wide due index: its work follows what is due,
//! not the number of queues, and queues that sort last are served like any
//! other (before, a sweep visited every registered queue, up to 100,000,
//! and stranded the rest).

use crate::common;

use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, HeldItem, ItemValue, encode_held, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::lease::{DeliveryPolicy, Receipt};
use hotq::queue::Queue;
use hotq::staging::StagingConfig;
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, Transaction};
use std::sync::atomic::Ordering;

/// Queues holding something due far in the future (CI-sized; the bench
/// runs a million).
const QUEUES: usize = 3_000;
const HOUR_MS: u64 = 3_600_000;

fn name(text: &str) -> QueueName {
    QueueName::new(text).unwrap()
}

async fn many_queues_with_distant_work(
    store: &EmbeddedStore,
    coordinator: &Coordinator<EmbeddedStore>,
) {
    for n in 0..QUEUES {
        let queue = Queue::new(store.clone(), name(&format!("q-{n:05}")));
        if n % 2 == 0 {
            queue
                .push_batch_delayed(&[b"later"], HOUR_MS)
                .await
                .unwrap();
        } else {
            queue.push(b"leased").await.unwrap();
            let items = coordinator
                .pop_leased(
                    queue.keys(),
                    End::Front,
                    1,
                    Duration::ZERO,
                    std::num::NonZeroU64::new(HOUR_MS).expect("a lease of at least 1 ms"),
                )
                .await
                .unwrap();
            assert_eq!(items.len(), 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_costs_what_is_due_and_queues_that_sort_last_are_served() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    many_queues_with_distant_work(&store, &coordinator).await;
    // Queues that sort after all the others: one delayed item, one brief lease.
    let zz = Queue::new(store.clone(), name("zz"));
    zz.push_batch_delayed(&[b"soon"], 500).await.unwrap();
    let zz2 = Queue::new(store.clone(), name("zz2"));
    zz2.push(b"leased briefly").await.unwrap();
    let leased = coordinator
        .pop_leased(
            zz2.keys(),
            End::Front,
            1,
            Duration::ZERO,
            std::num::NonZeroU64::new(500).expect("a lease of at least 1 ms"),
        )
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);

    // Nothing is due yet: a sweep reads the index's first entry, not 3,000 queues.
    let begins = || store.stats().begins.load(Ordering::Relaxed);
    let before = begins();
    coordinator.sweep_due(now_ms()).await.unwrap();
    let transactions = begins() - before;
    assert!(
        transactions <= 4,
        "a sweep with nothing due began {transactions} transactions over {QUEUES} queues"
    );

    let _timer = coordinator.spawn_timer();
    common::eventually(
        "the delayed item of zz is revealed and the lease of zz2 expires",
        Duration::from_secs(60),
        || async { zz.len().await.unwrap() == 1 && zz2.len().await.unwrap() == 1 },
    )
    .await;
    assert_eq!(zz.pop().await.unwrap().unwrap().payload, b"soon");
    let again = zz2.pop().await.unwrap().unwrap();
    assert_eq!(again.payload, b"leased briefly");
    assert_eq!(again.deliveries, 1, "the expired delivery is counted");
    coordinator.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_visits_only_the_queues_with_something_due() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    many_queues_with_distant_work(&store, &coordinator).await;
    let due_at = now_ms() + 50;
    for queue in ["a-first", "q-01500x", "zzz-last"] {
        Queue::new(store.clone(), name(queue))
            .push_batch_delayed(&[queue.as_bytes()], 50)
            .await
            .unwrap();
    }
    let swept = hotq::due::sweep(&store, &DeliveryPolicy::default(), due_at + 1_000)
        .await
        .unwrap();
    assert_eq!(swept.revealed, 3);
    assert_eq!(swept.rows_read, 3, "only the due entries are read");
    assert_eq!(
        swept.queues_visited, 3,
        "only the queues with something due"
    );
    let next = swept
        .next_due_ms
        .expect("the distant work is still due later");
    assert!(next >= due_at + HOUR_MS - 60_000, "next due {next}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_the_layout_before_the_due_index_are_moved_and_settled() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let keys = QueueKeys::new(&name("old"));
    let expires_at_ms = now_ms() + 200;
    let receipts = [Receipt::random(), Receipt::random()];
    // What the previous binary wrote for two leased items.
    let txn = store.begin().unwrap();
    for (n, receipt) in receipts.iter().enumerate() {
        let held = HeldItem {
            item_key: keys.item(n as u64, &[n as u8; 16]),
            item: ItemValue::new(now_ms(), format!("old {n}").into_bytes()),
        };
        txn.set(
            &keys.legacy_lease(expires_at_ms, &receipt.0),
            &encode_held(&held),
        )
        .unwrap();
        txn.set(&keys.receipt(&receipt.0), &expires_at_ms.to_be_bytes())
            .unwrap();
        txn.atomic_add(&keys.leased(), 1).unwrap();
    }
    txn.set(&keys.registry_key(), b"").unwrap();
    txn.commit().await.unwrap();

    // A settle before the move finds the lease where it is.
    coordinator.ack(&keys, &receipts[0]).await.unwrap();
    let moved = hotq::due::migrate::migrate(&store, now_ms()).await.unwrap();
    assert_eq!(moved, 1);
    assert_eq!(
        hotq::due::migrate::migrate(&store, now_ms()).await.unwrap(),
        0,
        "once"
    );
    coordinator.sweep_due(expires_at_ms).await.unwrap();
    let queue = Queue::new(store.clone(), name("old"));
    assert_eq!(
        queue.len().await.unwrap(),
        1,
        "the moved lease expired into the queue"
    );
    assert_eq!(queue.pop().await.unwrap().unwrap().payload, b"old 1");
    assert!(
        common::scan(&store, keys.receipts_range()).await.is_empty(),
        "the old receipts' rows went with their leases"
    );
}

/// A sweep consumes many chunks of the index at once, each in its own
/// transaction: acks racing it still have exactly one winner per lease,
/// and nothing is consumed twice or left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_racing_a_sweep_of_many_chunks_have_one_winner_per_lease() {
    const QUEUES: usize = 10;
    const PER_QUEUE: usize = 400;
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let mut leases = Vec::new();
    let mut expires_max = 0;
    for n in 0..QUEUES {
        let queue = Queue::new(store.clone(), name(&format!("chunked-{n:02}")));
        let payloads: Vec<Vec<u8>> = (0..PER_QUEUE)
            .map(|i| format!("{n}-{i}").into_bytes())
            .collect();
        queue.push_batch(&payloads).await.unwrap();
        while queue.len().await.unwrap() > 0 {
            let items = coordinator
                .pop_leased(
                    queue.keys(),
                    End::Front,
                    100,
                    Duration::ZERO,
                    std::num::NonZeroU64::new(HOUR_MS).expect("a lease of at least 1 ms"),
                )
                .await
                .unwrap();
            for item in items {
                let lease = item.lease.unwrap();
                expires_max = expires_max.max(lease.expires_at_ms);
                leases.push((queue.keys().clone(), lease.receipt));
            }
        }
    }
    assert_eq!(leases.len(), QUEUES * PER_QUEUE);

    // Every other lease is acked while the sweep runs (the acks use the
    // real clock, so for them no lease has expired).
    let acks = {
        let coordinator = coordinator.clone();
        let to_ack: Vec<_> = leases.iter().step_by(2).cloned().collect();
        tokio::spawn(async move {
            let (mut won, mut lost) = (0, 0);
            for (keys, receipt) in to_ack {
                match coordinator.ack(&keys, &receipt).await {
                    Ok(()) => won += 1,
                    Err(hotq::lease::LeaseError::UnknownReceipt) => lost += 1,
                    Err(other) => panic!("ack failed: {other}"),
                }
            }
            (won, lost)
        })
    };
    let policy = DeliveryPolicy::default();
    let mut redelivered = 0;
    let mut sweeps = 0;
    loop {
        let swept = hotq::due::sweep(&store, &policy, expires_max + 1)
            .await
            .unwrap();
        redelivered += swept.redelivered.values().sum::<usize>();
        sweeps += 1;
        if !swept.more {
            break;
        }
        assert!(sweeps < 100, "the sweeps never finished");
    }
    let (acked, lost) = acks.await.unwrap();
    assert_eq!(acked + lost, leases.len().div_ceil(2));
    assert_eq!(
        acked + redelivered,
        leases.len(),
        "each lease is acked or redelivered, exactly once"
    );
    let mut visible = 0;
    for n in 0..QUEUES {
        let keys = QueueKeys::new(&name(&format!("chunked-{n:02}")));
        let items = common::scan(&store, keys.items_range()).await.len();
        let txn = store.begin().unwrap();
        let depth = hotq::store::decode_counter(
            txn.get(&keys.depth(), Read::Snapshot)
                .await
                .unwrap()
                .as_deref(),
        );
        let leased = hotq::store::decode_counter(
            txn.get(&keys.leased(), Read::Snapshot)
                .await
                .unwrap()
                .as_deref(),
        );
        assert_eq!((depth, leased), (items as i64, 0), "queue {n}'s counters");
        visible += items;
    }
    assert_eq!(visible, redelivered, "every redelivered item is back once");
}

/// Reap appointments of more queues than one sweep takes: the sweep hands
/// on as many as it may and says more is due, so the timer sweeps again
/// at once instead of at its next tick (a grouped hand-off's slack could
/// otherwise run out behind a crowd of queues due a reap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reap_appointments_past_a_sweeps_bound_make_it_say_more() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let now = now_ms();
    let queues = hotq::due::REAP_QUEUES_MAX + 20;
    for n in 0..queues {
        let keys = QueueKeys::new(&name(&format!("reap-{n:04}")));
        let txn = store.begin().unwrap();
        txn.set(&keys.reap_at(now - 1), b"").unwrap();
        txn.commit().await.unwrap();
    }
    let swept = hotq::due::sweep(&store, &DeliveryPolicy::default(), now)
        .await
        .unwrap();
    assert_eq!(swept.reap_queues.len(), hotq::due::REAP_QUEUES_MAX);
    assert!(swept.more, "appointments were left behind the bound");
    assert_eq!(swept.next_due_ms, Some(now), "swept again at once");
}

/// The timer's sweep looks for the next due entry only up to its next
/// planned look: past it, the answer would not change when it looks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_looks_for_the_next_due_entry_only_up_to_its_horizon() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let now = now_ms();
    Queue::new(store.clone(), name("later"))
        .push_batch_delayed(&[b"in a minute"], 60_000)
        .await
        .unwrap();
    let policy = DeliveryPolicy::default();
    let short = hotq::due::sweep_until(&store, &policy, now, now + 1_000)
        .await
        .unwrap();
    assert_eq!(short.next_due_ms, None, "nothing is due within a second");
    let long = hotq::due::sweep_until(&store, &policy, now, now + 120_000)
        .await
        .unwrap();
    let next = long.next_due_ms.expect("due within two minutes");
    assert!((now + 59_000..=now + 61_000).contains(&next), "next {next}");
    let unbounded = hotq::due::sweep(&store, &policy, now).await.unwrap();
    assert_eq!(unbounded.next_due_ms, Some(next));
}
