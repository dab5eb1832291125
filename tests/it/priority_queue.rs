//! The priority recipe on the embedded store: order from both ends (ties
//! FIFO at the min end, reversed at the max end), conflict-free concurrent
//! pushes, peeks that neither change the queue nor conflict, and bad input
//! refused whole.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use hotq::envelope::{End, PAYLOAD_SIZE_MAX};
use hotq::keys::QueueName;
use hotq::queue::priority::PriorityQueue;
use hotq::queue::{Item, PUSH_BATCH_MAX, QueueError};
use hotq::store::Read;
use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::{Store, StoreError, Transaction};
use rand::Rng;

fn pqueue(store: &EmbeddedStore, name: &str) -> PriorityQueue<EmbeddedStore> {
    PriorityQueue::new(store.clone(), QueueName::new(name).unwrap())
}

/// The priority an item was stored under, from its key.
fn priority_of(queue: &PriorityQueue<EmbeddedStore>, item: &Item) -> i64 {
    queue
        .keys()
        .priority_item_parts(&item.key)
        .expect("a priority item key")
        .0
}

/// Priorities drawn mostly from a narrow band (many duplicates), with the
/// extremes and their neighbours mixed in.
fn random_priority(rng: &mut impl Rng) -> i64 {
    match rng.random_range(0..10) {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => *[i64::MIN + 1, i64::MAX - 1, -1, 0, 1]
            .get(rng.random_range(0..5))
            .unwrap(),
        _ => rng.random_range(-20..=20),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_client_order_ties_fifo_at_min_and_reversed_at_max() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = pqueue(&store, "ties");
    let pushed: [(i64, &str); 9] = [
        (5, "a"),
        (1, "b"),
        (5, "c"),
        (i64::MIN, "d"),
        (i64::MAX, "e"),
        (-1, "f"),
        (5, "g"),
        (1, "h"),
        (i64::MAX, "i"),
    ];
    let min_order = ["d", "f", "b", "h", "a", "c", "g", "e", "i"];
    for (pop_max, batched) in [(false, false), (true, false), (false, true), (true, true)] {
        if batched {
            q.push_batch(&pushed).await.unwrap();
        } else {
            for (priority, payload) in pushed {
                q.push(payload.as_bytes(), priority).await.unwrap();
            }
        }
        assert_eq!(q.len().await.unwrap(), pushed.len() as u64);
        let mut got = Vec::new();
        loop {
            let (peeked, popped) = if pop_max {
                (q.peek_max().await.unwrap(), q.pop_max().await.unwrap())
            } else {
                (q.peek_min().await.unwrap(), q.pop_min().await.unwrap())
            };
            assert_eq!(peeked, popped, "a peek shows what the next pop takes");
            let Some(item) = popped else { break };
            let payload = String::from_utf8(item.payload.clone()).unwrap();
            let priority = pushed.iter().find(|(_, p)| *p == payload).unwrap().0;
            assert_eq!(
                priority_of(&q, &item),
                priority,
                "{payload} keyed by its priority"
            );
            got.push(payload);
        }
        let mut expected: Vec<String> = min_order.iter().map(|s| s.to_string()).collect();
        if pop_max {
            expected.reverse();
        }
        assert_eq!(got, expected, "pop_max={pop_max} batched={batched}");
        assert_eq!(q.len().await.unwrap(), 0);
        assert_eq!(q.pop_min().await.unwrap(), None);
        assert_eq!(q.pop_max().await.unwrap(), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_random_priorities_pop_in_order_from_both_ends() {
    const PUSHERS: usize = 8;
    const PER_PUSHER: usize = 400;
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let (_, conflicts_before, _) = store.counts();
    let mut tasks = Vec::new();
    for pusher in 0..PUSHERS {
        let q = pqueue(&store, "random");
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while n < PER_PUSHER {
                // Singles and small batches, so batches' own order is covered too.
                let take = (n % 3 + 1).min(PER_PUSHER - n);
                let batch: Vec<(i64, String)> = {
                    let mut rng = rand::rng();
                    (n..n + take)
                        .map(|seq| {
                            let priority = random_priority(&mut rng);
                            (priority, format!("{pusher}:{seq}:{priority}"))
                        })
                        .collect()
                };
                if batch.len() == 1 {
                    q.push(batch[0].1.as_bytes(), batch[0].0).await.unwrap();
                } else {
                    q.push_batch(&batch).await.unwrap();
                }
                n += take;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let (_, conflicts_after, _) = store.counts();
    assert_eq!(
        conflicts_after - conflicts_before,
        0,
        "pushes read with snapshot only"
    );

    let q = pqueue(&store, "random");
    let total = PUSHERS * PER_PUSHER;
    assert_eq!(q.len().await.unwrap(), total as u64);
    // Alternate ends until empty.
    let mut from_min: Vec<(i64, usize, usize)> = Vec::new();
    let mut from_max: Vec<(i64, usize, usize)> = Vec::new();
    for turn in 0.. {
        let popped = if turn % 2 == 0 {
            q.pop_min().await.unwrap()
        } else {
            q.pop_max().await.unwrap()
        };
        let Some(item) = popped else { break };
        let text = String::from_utf8(item.payload.clone()).unwrap();
        let mut parts = text.split(':');
        let pusher: usize = parts.next().unwrap().parse().unwrap();
        let seq: usize = parts.next().unwrap().parse().unwrap();
        let priority: i64 = parts.next().unwrap().parse().unwrap();
        assert_eq!(priority_of(&q, &item), priority);
        let entry = (priority, pusher, seq);
        if turn % 2 == 0 {
            from_min.push(entry);
        } else {
            from_max.push(entry);
        }
    }
    assert_eq!(from_min.len() + from_max.len(), total, "every item popped");
    assert!(
        from_min.windows(2).all(|w| w[0].0 <= w[1].0),
        "pop_min yields non-decreasing priorities"
    );
    assert!(
        from_max.windows(2).all(|w| w[0].0 >= w[1].0),
        "pop_max yields non-increasing priorities"
    );
    assert!(
        from_min.last().unwrap().0 <= from_max.last().unwrap().0,
        "the two ends meet without crossing"
    );
    for extreme in [i64::MIN, i64::MAX] {
        assert!(
            from_min.iter().chain(&from_max).any(|e| e.0 == extreme),
            "{extreme} was exercised"
        );
    }
    // Among equal priorities, one pusher's items (pushed one after the
    // other) come out in push order at the min end and reversed at the max.
    let mut last_seq: HashMap<(i64, usize), usize> = HashMap::new();
    for &(priority, pusher, seq) in &from_min {
        if let Some(previous) = last_seq.insert((priority, pusher), seq) {
            assert!(
                previous < seq,
                "min end: {pusher} at {priority} out of order"
            );
        }
    }
    let mut last_seq: HashMap<(i64, usize), usize> = HashMap::new();
    for &(priority, pusher, seq) in &from_max {
        if let Some(previous) = last_seq.insert((priority, pusher), seq) {
            assert!(
                previous > seq,
                "max end: {pusher} at {priority} not reversed"
            );
        }
    }
    let mut all: Vec<(usize, usize)> = from_min
        .iter()
        .chain(&from_max)
        .map(|&(_, pusher, seq)| (pusher, seq))
        .collect();
    all.sort();
    let expected: Vec<(usize, usize)> = (0..PUSHERS)
        .flat_map(|p| (0..PER_PUSHER).map(move |s| (p, s)))
        .collect();
    assert_eq!(all, expected, "every item exactly once");
    assert_eq!(q.len().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peeks_never_change_the_queue() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = pqueue(&store, "peek");
    let batch: Vec<(i64, String)> = (0..100)
        .map(|n| ((n * 37) % 11 - 5, n.to_string()))
        .collect();
    q.push_batch(&batch).await.unwrap();
    // The store counts a commit just after answering it.
    common::wait_until("the push is counted", Duration::from_secs(30), || {
        store.counts().0 == 1
    })
    .await;
    let before = common::scan(&store, q.keys().items_range()).await;
    let (min, max) = (q.peek_min().await.unwrap(), q.peek_max().await.unwrap());
    for _ in 0..200 {
        assert_eq!(q.peek_min().await.unwrap(), min);
        assert_eq!(q.peek_max().await.unwrap(), max);
    }
    // A probe commit after the peeks: once it is counted, anything the
    // peeks had sent the committer (nothing) would be counted too.
    let probe = store.begin().unwrap();
    probe.set(b"test/probe", b"x").unwrap();
    probe.commit().await.unwrap();
    common::wait_until("the probe is counted", Duration::from_secs(30), || {
        store.counts().0 == 2
    })
    .await;
    assert_eq!(
        store.counts().1,
        0,
        "peeks commit nothing and conflict with nothing"
    );
    assert_eq!(common::scan(&store, q.keys().items_range()).await, before);
    assert_eq!(q.len().await.unwrap(), 100);
    assert_eq!(priority_of(&q, &min.unwrap()), -5);
    assert_eq!(priority_of(&q, &max.unwrap()), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peek_read_commits_cleanly_after_a_pop_took_what_it_saw() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = pqueue(&store, "peek-race");
    q.push_batch(&[(1, "low"), (2, "mid"), (3, "high")])
        .await
        .unwrap();
    for (end, read) in [
        (End::Front, Read::Snapshot),
        (End::Back, Read::Snapshot),
        (End::Front, Read::Serializable),
        (End::Back, Read::Serializable),
    ] {
        // The read peek_min / peek_max make (snapshot), and for contrast the
        // read a pop makes (not snapshot), each in a transaction that also
        // writes, so its commit is resolved.
        let txn = store.begin().unwrap();
        let seen = q
            .end_item(&txn, end, read)
            .await
            .unwrap()
            .expect("an item at that end");
        let popped = match end {
            End::Front => q.pop_min().await.unwrap(),
            End::Back => q.pop_max().await.unwrap(),
        };
        assert_eq!(popped.as_ref(), Some(&seen), "the pop took the peeked item");
        txn.set(b"test/marker", b"x").unwrap();
        let (_, conflicts_before, _) = store.counts();
        let outcome = txn.commit().await;
        // Put the item back for the next round, at its priority. The store
        // counts a commit group's outcomes just after answering it, and
        // resolves groups one after another: once this push is answered,
        // the counter includes the commit above. (Pushes never conflict.)
        let priority = priority_of(&q, &seen);
        q.push(&seen.payload, priority).await.unwrap();
        let (_, conflicts_after, _) = store.counts();
        if read.is_snapshot() {
            assert_eq!(outcome, Ok(()), "a peek never conflicts ({end:?})");
            assert_eq!(conflicts_after, conflicts_before);
        } else {
            assert_eq!(
                outcome,
                Err(StoreError::Conflict),
                "a pop's read does ({end:?})"
            );
            assert_eq!(conflicts_after, conflicts_before + 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peeks_during_concurrent_pops_see_only_live_items_and_take_nothing() {
    const ITEMS: i64 = 400;
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = pqueue(&store, "peek-pop");
    let batch: Vec<(i64, String)> = (0..ITEMS).map(|n| (n, n.to_string())).collect();
    for chunk in batch.chunks(100) {
        q.push_batch(chunk).await.unwrap();
    }
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut peekers = Vec::new();
    for _ in 0..2 {
        let (q, done) = (q.clone(), done.clone());
        peekers.push(tokio::spawn(async move {
            let mut peeks = 0u64;
            // Bounded by the poppers, which finish in a bounded number of pops.
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let min = q.peek_min().await.unwrap();
                let max = q.peek_max().await.unwrap();
                // Items only leave, so the later max is never below the earlier min.
                if let (Some(min), Some(max)) = (&min, &max) {
                    let parse = |i: &Item| String::from_utf8(i.payload.clone()).unwrap();
                    let (min, max): (i64, i64) =
                        (parse(min).parse().unwrap(), parse(max).parse().unwrap());
                    assert!(min <= max, "peek_min {min} above a later peek_max {max}");
                }
                peeks += 2;
                tokio::task::yield_now().await;
            }
            peeks
        }));
    }
    let mut poppers = Vec::new();
    for p in 0..4 {
        let q = q.clone();
        poppers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let popped = if p % 2 == 0 {
                    q.pop_min().await.unwrap()
                } else {
                    q.pop_max().await.unwrap()
                };
                let Some(item) = popped else { break };
                got.push(
                    String::from_utf8(item.payload)
                        .unwrap()
                        .parse::<i64>()
                        .unwrap(),
                );
            }
            got
        }));
    }
    let mut all = Vec::new();
    for popper in poppers {
        all.extend(popper.await.unwrap());
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut peeks = 0;
    for peeker in peekers {
        peeks += peeker.await.unwrap();
    }
    assert!(peeks > 0);
    all.sort();
    assert_eq!(all, (0..ITEMS).collect::<Vec<_>>(), "peeks took nothing");
    assert_eq!(q.len().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pushes_are_refused_whole() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = pqueue(&store, "strict");
    let counts_before = store.counts();
    let too_big = vec![7u8; PAYLOAD_SIZE_MAX + 1];
    assert_eq!(
        q.push(&too_big, 3).await,
        Err(QueueError::PayloadTooLarge { len: too_big.len() })
    );
    let batch = vec![
        (1, b"ok".to_vec()),
        (2, too_big.clone()),
        (3, b"ok".to_vec()),
    ];
    assert_eq!(
        q.push_batch(&batch).await,
        Err(QueueError::PayloadTooLarge { len: too_big.len() })
    );
    let empty: Vec<(i64, Vec<u8>)> = Vec::new();
    assert_eq!(
        q.push_batch(&empty).await,
        Err(QueueError::BadBatch { len: 0 })
    );
    let oversized: Vec<(i64, &[u8])> = vec![(0, b"x"); PUSH_BATCH_MAX + 1];
    assert_eq!(
        q.push_batch(&oversized).await,
        Err(QueueError::BadBatch {
            len: PUSH_BATCH_MAX + 1
        })
    );
    assert_eq!(store.counts(), counts_before, "no commit was even tried");
    assert_eq!(q.len().await.unwrap(), 0, "nothing of a refused batch");
    assert!(
        common::scan(&store, q.keys().items_range())
            .await
            .is_empty()
    );
    assert_eq!(q.peek_min().await.unwrap(), None);
    assert_eq!(q.peek_max().await.unwrap(), None);

    let exact = vec![1u8; PAYLOAD_SIZE_MAX];
    q.push(&exact, i64::MIN).await.unwrap();
    assert_eq!(q.pop_max().await.unwrap().unwrap().payload, exact);
}
