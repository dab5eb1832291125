//! Settles are batched: concurrent acks of a queue share commits, and a
//! batch answers each receipt's own outcome.

use crate::common;

use std::time::Duration;

use hotq::coordinator::Coordinator;
use hotq::envelope::{End, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::lease::backlog::{SettleOp, Settled};
use hotq::lease::{LeaseError, Receipt};
use hotq::queue::{Item, Queue};
use hotq::staging::StagingConfig;
use hotq::store::embedded::{Durability, EmbeddedStore};
use std::sync::atomic::Ordering;

async fn leased(
    coordinator: &Coordinator<EmbeddedStore>,
    queue: &Queue<EmbeddedStore>,
    count: usize,
    lease_ms: u64,
) -> Vec<Item> {
    let mut items = Vec::new();
    while items.len() < count {
        let popped = coordinator
            .pop_leased(
                queue.keys(),
                End::Front,
                count - items.len(),
                Duration::ZERO,
                std::num::NonZeroU64::new(lease_ms).expect("a lease of at least 1 ms"),
            )
            .await
            .unwrap();
        assert!(!popped.is_empty(), "items were pushed");
        items.extend(popped);
    }
    items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_answers_each_receipt_and_settles_each_once() {
    let (store, _dir) = common::embedded_store(Durability::Sync);
    // No timer: an expired lease stays until swept by hand.
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let queue = Queue::new(store.clone(), QueueName::new("batch").unwrap());
    queue.push_batch(&[b"a", b"b", b"c", b"d"]).await.unwrap();
    let long = leased(&coordinator, &queue, 3, 60_000).await;
    let short = leased(&coordinator, &queue, 1, 1).await;
    let expires_at_ms = short[0].lease.unwrap().expires_at_ms;
    common::wait_until("the short lease expires", Duration::from_secs(10), || {
        now_ms() > expires_at_ms
    })
    .await;
    let receipt = |item: &Item| item.lease.unwrap().receipt;
    let settles = vec![
        (receipt(&long[0]), SettleOp::Ack),
        (receipt(&long[1]), SettleOp::Ack),
        (receipt(&long[0]), SettleOp::Ack),
        (Receipt::random(), SettleOp::Ack),
        (receipt(&short[0]), SettleOp::Ack),
        (receipt(&long[2]), SettleOp::Ack),
    ];
    let outcomes = coordinator
        .settler()
        .settle_many(queue.keys(), settles)
        .await;
    assert_eq!(outcomes[0], Ok(Settled::Acked));
    assert_eq!(outcomes[1], Ok(Settled::Acked));
    assert_eq!(
        outcomes[2],
        Err(LeaseError::UnknownReceipt),
        "a duplicate is settled once"
    );
    assert_eq!(outcomes[3], Err(LeaseError::UnknownReceipt));
    assert_eq!(
        outcomes[4],
        Err(LeaseError::Expired {
            expired_at_ms: expires_at_ms
        })
    );
    assert_eq!(outcomes[5], Ok(Settled::Acked));
    assert_eq!(
        coordinator
            .settler()
            .stats()
            .commits
            .load(Ordering::Relaxed),
        1
    );
    // The expired one was not acked: its item comes back.
    coordinator.sweep_due(now_ms()).await.unwrap();
    assert_eq!(queue.len().await.unwrap(), 1);
    assert_eq!(
        queue.pop().await.unwrap().unwrap().payload,
        short[0].payload
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acks_share_commits() {
    const ITEMS: usize = 400;
    let (store, _dir) = common::embedded_store(Durability::Sync);
    let coordinator = Coordinator::new(store.clone(), StagingConfig::default());
    let queue = Queue::new(store.clone(), QueueName::new("acks").unwrap());
    let payloads: Vec<Vec<u8>> = (0..ITEMS).map(|n| n.to_string().into_bytes()).collect();
    queue.push_batch(&payloads).await.unwrap();
    let items = leased(&coordinator, &queue, ITEMS, 60_000).await;
    let tasks: Vec<_> = items
        .iter()
        .map(|item| {
            let (coordinator, keys) = (coordinator.clone(), queue.keys().clone());
            let receipt = item.lease.unwrap().receipt;
            tokio::spawn(async move { coordinator.ack(&keys, &receipt).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let stats = coordinator.settler().stats();
    let commits = stats.commits.load(Ordering::Relaxed);
    assert_eq!(stats.settled.load(Ordering::Relaxed), ITEMS as u64);
    assert!(
        commits < ITEMS as u64,
        "{ITEMS} acks took {commits} commits"
    );
    eprintln!("{ITEMS} concurrent acks in {commits} commits");
    assert_eq!(queue.len().await.unwrap(), 0);
    coordinator.sweep_due(u64::MAX / 2).await.unwrap();
    assert_eq!(queue.len().await.unwrap(), 0, "every lease was acked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_ack_endpoint_answers_each_receipt() {
    use common::daemon::{Daemon, http};
    use reqwest::StatusCode;
    use serde_json::{Value, json};
    let daemon = Daemon::start(|_| {}).await;
    let (client, url) = (http(), &daemon.url);
    for body in ["a", "b"] {
        let pushed = client
            .post(format!("{url}/v1/queues/jobs/items"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(pushed.status(), StatusCode::CREATED);
    }
    let popped: Vec<Value> = client
        .post(format!("{url}/v1/queues/jobs/pop?max=2&lease_ms=60000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let receipts: Vec<&str> = popped
        .iter()
        .map(|item| item["receipt"].as_str().unwrap())
        .collect();
    let jobs = QueueKeys::new(&QueueName::new("jobs").unwrap());
    let unknown = Receipt::for_lease(&jobs, 1).to_string();
    let other = QueueKeys::new(&QueueName::new("other").unwrap());
    let elsewhere = Receipt::for_lease(&other, 1).to_string();
    let body = json!([
        receipts[0],
        "not-a-receipt",
        receipts[1],
        receipts[0],
        unknown,
        elsewhere
    ]);
    let response = client
        .post(format!("{url}/v1/queues/jobs/ack"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    let outcomes: Vec<(&str, &str)> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["receipt"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (receipts[0], "acked"),
            ("not-a-receipt", "invalid"),
            (receipts[1], "acked"),
            (receipts[0], "unknown_receipt"),
            (unknown.as_str(), "unknown_receipt"),
            (elsewhere.as_str(), "receipt_queue_mismatch"),
        ]
    );
    let stats: Value = client
        .get(format!("{url}/v1/queues/jobs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (stats["leased"].as_i64(), stats["depth"].as_i64()),
        (Some(0), Some(0))
    );
    for bad in [
        json!([]),
        json!(vec![unknown.as_str(); 1_001]),
        json!({"receipts": []}),
    ] {
        let response = client
            .post(format!("{url}/v1/queues/jobs/ack"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    daemon.stop().await;
}
