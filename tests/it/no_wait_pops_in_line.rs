//! Pops without a wait that join a contended queue's line: answered by the
//! fulfiller's own read, never by a bound running out. Found in review:
//! such a pop queued behind a full batch of waiting pops on an empty queue
//! sat out its whole bound and then answered "empty" without any read
//! saying so; and one whose bound ran out while items were visible
//! answered "empty" too.

use crate::common;

use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::End;
use hotq::keys::{QueueKeys, QueueName};
use hotq::queue::{Queue, QueueError};
use hotq::staging::StagingConfig;
use hotq::store::embedded::{Durability, EmbeddedStore};

const BATCH_MAX: usize = 8;

fn setup(
    config: StagingConfig,
) -> (
    tempfile::TempDir,
    Coordinator<EmbeddedStore>,
    Queue<EmbeddedStore>,
    QueueKeys,
) {
    let (store, dir) = common::embedded_store(Durability::Sync);
    let coordinator = Coordinator::new(store.clone(), config);
    let name = QueueName::new("nowait").unwrap();
    let keys = QueueKeys::new(&name);
    (dir, coordinator, Queue::new(store, name), keys)
}

/// Starts `count` long-polls of one item on `keys` and waits until they
/// all stand in the line.
async fn long_polls(
    coordinator: &Coordinator<EmbeddedStore>,
    keys: &QueueKeys,
    count: usize,
) -> Vec<tokio::task::JoinHandle<Option<hotq::queue::Item>>> {
    let mut polls = Vec::new();
    for _ in 0..count {
        let (coordinator, keys) = (coordinator.clone(), keys.clone());
        polls.push(tokio::spawn(async move {
            coordinator
                .pop(&keys, End::Front, Duration::from_secs(120))
                .await
                .unwrap()
        }));
    }
    common::wait_until(
        "the long-polls stand in line",
        Duration::from_secs(60),
        || coordinator.memory_waiting(keys) == count,
    )
    .await;
    polls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_wait_pop_behind_a_full_batch_of_waiting_pops_is_answered_empty_by_a_round() {
    // The bound is far above a round: a pop answered only by its bound
    // comes back as `Unanswered`, not as the round's "empty".
    let config = StagingConfig {
        fulfill_batch_max: BATCH_MAX,
        lost_race_wait_ms: 30_000,
        ..StagingConfig::default()
    };
    let (_dir, coordinator, queue, keys) = setup(config);
    let polls = long_polls(&coordinator, &keys, 2 * BATCH_MAX).await;

    let answer = coordinator
        .pop_many(&keys, End::Front, 1, Duration::ZERO)
        .await;
    assert!(
        matches!(&answer, Ok(items) if items.is_empty()),
        "the queue is empty and a round read so: {answer:?}"
    );

    // The long-polls still get what comes.
    let items: Vec<String> = (0..2 * BATCH_MAX).map(|n| format!("i{n}")).collect();
    queue.push_batch(&items).await.unwrap();
    for poll in polls {
        assert!(poll.await.unwrap().is_some());
    }
    coordinator.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_wait_pop_whose_bound_runs_out_while_items_are_visible_is_not_answered_empty() {
    // One item per round (the byte bound) and a short bound: the pop's turn
    // cannot come before its bound while the long-polls ahead take items.
    let config = StagingConfig {
        fulfill_batch_max: BATCH_MAX,
        fulfill_bytes_max: 1,
        lost_race_wait_ms: 20,
        ..StagingConfig::default()
    };
    let (_dir, coordinator, queue, keys) = setup(config);
    let polls = long_polls(&coordinator, &keys, 4 * BATCH_MAX).await;
    let items: Vec<String> = (0..400).map(|n| format!("i{n:03}")).collect();
    queue.push_batch(&items).await.unwrap();

    let answer = coordinator
        .pop_many(&keys, End::Front, 1, Duration::ZERO)
        .await;
    match answer {
        Ok(items) => assert_eq!(items.len(), 1, "served, or..."),
        Err(error) => assert!(
            matches!(error, QueueError::Unanswered),
            "...told it was not answered, never empty: {error:?}"
        ),
    }
    for poll in polls {
        assert!(poll.await.unwrap().is_some());
    }
    coordinator.shutdown(Duration::from_secs(10)).await;
}
