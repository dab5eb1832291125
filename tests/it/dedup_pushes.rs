//! Deduplicated pushes over HTTP against the real daemon: racing pushes
//! with one id store one item; an id stops counting after the window, and
//! the timer clears it.

use crate::common;

use std::time::{Duration, Instant};

use common::client::Client;
use common::daemon::{Daemon, http};
use hotq::keys::{QueueKeys, QueueName};
use serde_json::Value;

const ROUNDS: usize = 60;
const RACERS: usize = 16;

async fn push(client: &reqwest::Client, url: &str, id: &str, body: &str) -> (u16, Value) {
    let response = client
        .post(url)
        .header("hotq-dedup-id", id)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_pushes_with_one_id_store_one_item() {
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let url = format!("{}/v1/queues/dedup/items", daemon.url);
    for round in 0..ROUNDS {
        let id = format!("job-{round}");
        let racers = (0..RACERS).map(|racer| {
            let (client, url, id) = (client.clone(), url.clone(), id.clone());
            tokio::spawn(async move { push(&client, &url, &id, &format!("{round}/{racer}")).await })
        });
        let mut stored = 0;
        for racer in racers {
            let (status, body) = racer.await.unwrap();
            match status {
                201 => {
                    assert_eq!(body["pushed"], 1);
                    assert_eq!(body["duplicate"], false);
                    stored += 1;
                }
                200 => {
                    assert_eq!(body["pushed"], 0);
                    assert_eq!(body["duplicate"], true);
                }
                other => panic!("push answered {other}: {body}"),
            }
        }
        assert_eq!(
            stored, 1,
            "round {round}: exactly one racer stores its item"
        );
    }
    assert_eq!(Client::new(&daemon.url).depth("dedup").await, ROUNDS as i64);
    // Each round's item is there once: pop them all.
    let mut rounds_seen = std::collections::BTreeSet::new();
    loop {
        let response = client
            .post(format!("{}/v1/queues/dedup/pop", daemon.url))
            .send()
            .await
            .unwrap();
        if response.status() == 204 {
            break;
        }
        let text = response.text().await.unwrap();
        let round: usize = text.split('/').next().unwrap().parse().unwrap();
        assert!(rounds_seen.insert(round), "round {round} stored twice");
    }
    assert_eq!(rounds_seen.len(), ROUNDS);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_leaves_out_ids_seen_before_or_earlier_in_it() {
    if !common::alone::here(
        module_path!(),
        "a_batch_leaves_out_ids_seen_before_or_earlier_in_it",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let url = format!("{}/v1/queues/batched/items", daemon.url);
    assert_eq!(push(&client, &url, "a", "first a").await.0, 201);
    let batch = serde_json::json!([
        {"item": "YQ==", "dedup_id": "a"},
        {"item": "Yg==", "dedup_id": "b"},
        {"item": "Yg==", "dedup_id": "b"},
        "Yw==",
    ]);
    let response = client
        .post(format!("{url}:batch"))
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["pushed"], 2);
    assert_eq!(body["duplicates"], serde_json::json!([0, 2]));
    assert_eq!(Client::new(&daemon.url).depth("batched").await, 3);
    for bad in [
        serde_json::json!([{"item": "YQ==", "dedup_id": ""}]),
        serde_json::json!([{"item": "YQ==", "dedup_id": "x".repeat(129)}]),
        serde_json::json!([{"item": "YQ==", "dedupe": "x"}]),
    ] {
        let response = client
            .post(format!("{url}:batch"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{bad}");
    }
    assert_eq!(Client::new(&daemon.url).depth("batched").await, 3);
    // Stored items are counted as pushed, duplicates are not.
    let metrics = client
        .get(&daemon.metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let pushed: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("hotq_pushed_items_total{"))
        .filter(|l| l.contains("queue=\"batched\"") && l.contains("kind=\"fifo\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(pushed, 3.0, "{metrics}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_window_an_id_is_new_and_expired_ids_are_cleared() {
    const WINDOW_MS: u64 = 300;
    let daemon = Daemon::start(|config| {
        config.leases.dedup_window_ms = WINDOW_MS;
        config.staging.reap_interval_ms = 50;
    })
    .await;
    let client = http();
    let url = format!("{}/v1/queues/windowed/items", daemon.url);
    let first = Instant::now();
    assert_eq!(push(&client, &url, "once", "1").await.0, 201);
    assert_eq!(push(&client, &url, "once", "2").await.0, 200);
    // Pushed again until it is accepted: never before the window has passed.
    let accepted = loop {
        let (status, _) = push(&client, &url, "once", "3").await;
        if status == 201 {
            break first.elapsed();
        }
        assert_eq!(status, 200);
        assert!(
            first.elapsed() < Duration::from_secs(30),
            "never accepted again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        accepted >= Duration::from_millis(WINDOW_MS),
        "accepted after {accepted:?}"
    );
    assert_eq!(Client::new(&daemon.url).depth("windowed").await, 2);

    // Ids nobody pushes again are cleared by the timer once expired.
    for i in 0..20 {
        assert_eq!(push(&client, &url, &format!("gone-{i}"), "x").await.0, 201);
    }
    let keys = QueueKeys::new(&QueueName::new("windowed").unwrap());
    let store = daemon.store.clone();
    common::eventually("expired dedup ids cleared", Duration::from_secs(30), || {
        let (store, keys) = (store.clone(), keys.clone());
        async move {
            hotq::queue::dedup::ids_held(&store, &keys, 100)
                .await
                .unwrap()
                == 0
        }
    })
    .await;
    let due = common::due_of(&daemon.store, &keys, hotq::keys::DueWhat::Dedup).await;
    assert!(due.is_empty(), "no due entries left: {}", due.len());
    daemon.stop().await;
}

/// The guarantee itself, step by step: two transactions both find the id
/// free; the first to commit wins, the second conflicts (its retry then
/// reads the id and answers "duplicate").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_of_two_overlapping_claims_conflicts() {
    use hotq::store::{Store, StoreError, Transaction};
    let (store, _dir) = common::embedded_store(hotq::store::embedded::Durability::Buffered);
    let keys = QueueKeys::new(&QueueName::new("claims").unwrap());
    let now = hotq::envelope::now_ms();
    let first = store.begin().unwrap();
    let second = store.begin().unwrap();
    assert!(
        hotq::queue::dedup::claim_in(&first, &keys, b"id", now, 60_000)
            .await
            .unwrap()
    );
    assert!(
        hotq::queue::dedup::claim_in(&second, &keys, b"id", now, 60_000)
            .await
            .unwrap()
    );
    first.commit().await.unwrap();
    assert_eq!(second.commit().await, Err(StoreError::Conflict));
    let third = store.begin().unwrap();
    assert!(
        !hotq::queue::dedup::claim_in(&third, &keys, b"id", now, 60_000)
            .await
            .unwrap()
    );
}
