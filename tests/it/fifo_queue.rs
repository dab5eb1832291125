//! The FIFO recipe on the embedded store: order, isolation between named
//! queues, conflict-free pushes, and peek/len agreeing with pops.

use crate::common;

use hotq::envelope::PAYLOAD_SIZE_MAX;
use hotq::keys::QueueName;
use hotq::queue::{DirectPop, Queue, QueueError};
use hotq::store::embedded::{Durability, EmbeddedStore};

fn queue(store: &EmbeddedStore, name: &str) -> Queue<EmbeddedStore> {
    Queue::new(store.clone(), QueueName::new(name).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_client_fifo_order_across_many_named_queues() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let queues: Vec<_> = (0..16).map(|i| queue(&store, &format!("q{i}"))).collect();
    // Interleave pushes across queues so their keys interleave in time.
    for n in 0..40 {
        for (i, q) in queues.iter().enumerate() {
            q.push(format!("{i}:{n}").as_bytes()).await.unwrap();
        }
    }
    for (i, q) in queues.iter().enumerate() {
        assert_eq!(q.len().await.unwrap(), 40);
        for n in 0..40 {
            let item = q.pop().await.unwrap().expect("item present");
            assert_eq!(
                item.payload,
                format!("{i}:{n}").as_bytes(),
                "queue q{i} out of order"
            );
        }
        assert_eq!(q.pop().await.unwrap(), None);
        assert_eq!(q.try_pop_direct().await.unwrap(), DirectPop::Empty);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pushers_never_conflict() {
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let (_, conflicts_before, _) = store.counts();
    let mut tasks = Vec::new();
    for pusher in 0..8 {
        let q = queue(&store, "hot");
        tasks.push(tokio::spawn(async move {
            for n in 0..1_000 {
                q.push(format!("{pusher}:{n}").as_bytes()).await.unwrap();
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
    let q = queue(&store, "hot");
    assert_eq!(q.len().await.unwrap(), 8_000);
    // Each pusher's own items come out in its push order.
    let mut next = [0u32; 8];
    while let Some(item) = q.pop().await.unwrap() {
        let text = String::from_utf8(item.payload).unwrap();
        let (pusher, n) = text.split_once(':').unwrap();
        let pusher: usize = pusher.parse().unwrap();
        assert_eq!(
            n.parse::<u32>().unwrap(),
            next[pusher],
            "pusher {pusher} out of order"
        );
        next[pusher] += 1;
    }
    assert_eq!(next, [1_000; 8]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_and_len_agree_with_pops() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = queue(&store, "agree");
    q.push_batch(&(0..100).map(|n| format!("item {n}")).collect::<Vec<_>>())
        .await
        .unwrap();
    for left in (1..=100u64).rev() {
        assert_eq!(q.len().await.unwrap(), left);
        let peeked = q.peek().await.unwrap().expect("peek sees the head");
        let again = q.peek().await.unwrap().expect("peek does not consume");
        assert_eq!(peeked, again);
        let popped = q.pop().await.unwrap().expect("pop takes the head");
        assert_eq!(peeked, popped);
    }
    assert_eq!(q.len().await.unwrap(), 0);
    assert!(q.is_empty().await.unwrap());
    assert_eq!(q.peek().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pushes_are_refused_whole() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = queue(&store, "strict");
    let too_big = vec![7u8; PAYLOAD_SIZE_MAX + 1];
    assert_eq!(
        q.push(&too_big).await,
        Err(QueueError::PayloadTooLarge { len: too_big.len() })
    );
    let batch = vec![b"ok".to_vec(), too_big.clone()];
    assert!(matches!(
        q.push_batch(&batch).await,
        Err(QueueError::PayloadTooLarge { .. })
    ));
    let empty: Vec<Vec<u8>> = Vec::new();
    assert_eq!(
        q.push_batch(&empty).await,
        Err(QueueError::BadBatch { len: 0 })
    );
    assert_eq!(
        q.len().await.unwrap(),
        0,
        "nothing of a refused batch was written"
    );
    assert_eq!(q.peek().await.unwrap(), None);

    let exact = vec![1u8; PAYLOAD_SIZE_MAX];
    q.push(&exact).await.unwrap();
    assert_eq!(q.pop().await.unwrap().unwrap().payload, exact);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_direct_pops_take_each_item_once() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let q = queue(&store, "race");
    q.push_batch(&(0..200).map(|n| n.to_string()).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let q = q.clone();
        tasks.push(tokio::spawn(async move {
            let (mut got, mut conflicts) = (Vec::new(), 0u32);
            // Bounded: each pass either pops, conflicts, or sees the end.
            for _ in 0..10_000 {
                match q.try_pop_direct().await.unwrap() {
                    DirectPop::Took(item) => got.push(item.payload),
                    DirectPop::Conflict => conflicts += 1,
                    DirectPop::Empty => break,
                }
            }
            (got, conflicts)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let (got, _) = task.await.unwrap();
        all.extend(got);
    }
    all.sort();
    let mut expected: Vec<Vec<u8>> = (0..200).map(|n: i32| n.to_string().into_bytes()).collect();
    expected.sort();
    assert_eq!(all, expected, "every item exactly once");
    assert_eq!(q.len().await.unwrap(), 0);
}
