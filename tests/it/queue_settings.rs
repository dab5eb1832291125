//! Queue settings kept in the store: every coordinator on one store applies
//! what was stored, at once (no cache to go stale); over HTTP they are read,
//! changed, refused when invalid, and applied to pops and pushes.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::daemon::{Daemon, http};
use hotq::coordinator::Coordinator;
use hotq::envelope::{End, now_ms};
use hotq::keys::{QueueKeys, QueueName};
use hotq::lease::settle::Returned;
use hotq::queue::Queue;
use hotq::queue::settings::{Defaults, update};
use hotq::staging::StagingConfig;
use hotq::store::embedded::Durability;
use serde_json::{Value, json};

fn name(text: &str) -> QueueName {
    QueueName::new(text).unwrap()
}

async fn set<S: hotq::store::Store>(store: &S, keys: &QueueKeys, change: Value) {
    let change: BTreeMap<String, Value> = serde_json::from_value(change).unwrap();
    update(store, keys, &change, &Defaults::default())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_stored_once_are_applied_by_every_coordinator_at_once() {
    let (store, _dir) = common::embedded_store(Durability::Buffered);
    let first = Coordinator::new(store.clone(), StagingConfig::default());
    let second = Coordinator::new(store.clone(), StagingConfig::default());
    let queue = Queue::new(store.clone(), name("jobs"));
    let keys = queue.keys().clone();
    let graveyard = Queue::new(store.clone(), name("graveyard"));

    // Stored through one path: one delivery, then the graveyard.
    set(
        &store,
        &keys,
        json!({"max_deliveries": 1, "dead_letter_queue": "graveyard"}),
    )
    .await;
    queue.push(b"a").await.unwrap();
    let leased = first
        .pop_leased(
            &keys,
            End::Front,
            1,
            Duration::ZERO,
            std::num::NonZeroU64::new(60_000).expect("a lease of at least 1 ms"),
        )
        .await
        .unwrap();
    let receipt = leased[0].lease.as_ref().unwrap().receipt;
    // The other coordinator's nack applies the stored settings.
    assert_eq!(
        second.nack(&keys, &receipt, 0).await.unwrap(),
        Returned::DeadLettered {
            queue: name("graveyard")
        }
    );
    assert_eq!(graveyard.len().await.unwrap(), 1);
    assert!(queue.is_empty().await.unwrap());

    // An expiry swept by the other coordinator's timer applies them too.
    queue.push(b"b").await.unwrap();
    second
        .pop_leased(
            &keys,
            End::Front,
            1,
            Duration::ZERO,
            std::num::NonZeroU64::new(1).expect("a lease of at least 1 ms"),
        )
        .await
        .unwrap();
    first.sweep_due(now_ms() + 1_000).await.unwrap();
    assert_eq!(graveyard.len().await.unwrap(), 2);

    // Changed again: both see the change with the next operation.
    set(
        &store,
        &keys,
        json!({"max_deliveries": 3, "dead_letter_queue": null}),
    )
    .await;
    queue.push(b"c").await.unwrap();
    for coordinator in [&first, &second] {
        let leased = coordinator
            .pop_leased(
                &keys,
                End::Front,
                1,
                Duration::ZERO,
                std::num::NonZeroU64::new(60_000).expect("a lease of at least 1 ms"),
            )
            .await
            .unwrap();
        let receipt = leased[0].lease.as_ref().unwrap().receipt;
        assert_eq!(
            coordinator.nack(&keys, &receipt, 0).await.unwrap(),
            Returned::Requeued
        );
    }
    assert_eq!(queue.len().await.unwrap(), 1);
    assert_eq!(graveyard.len().await.unwrap(), 2);
}

async fn put(client: &reqwest::Client, url: &str, body: &str) -> (u16, Value) {
    let response = client.put(url).body(body.to_string()).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_over_http_are_checked_and_applied() {
    let daemon = Daemon::start(|_| {}).await;
    let client = http();
    let url = format!("{}/v1/queues/work/settings", daemon.url);
    let got: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(got["settings"]["max_deliveries"], 5);
    assert_eq!(got["settings"]["dead_letter_queue"], "work.dead");
    assert_eq!(got["settings"]["dedup_window_ms"], 300_000);
    assert_eq!(got["settings"]["default_lease_ms"], Value::Null);
    assert_eq!(got["stored"], json!({}));

    let (status, body) = put(
        &client,
        &url,
        r#"{"max_deliveries": 2, "default_lease_ms": 30000, "delivery_delay_ms": 60000}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["settings"]["max_deliveries"], 2);
    assert_eq!(
        body["stored"],
        json!({"max_deliveries": 2, "default_lease_ms": 30000, "delivery_delay_ms": 60000})
    );

    for (bad, code) in [
        (r#"{"max_deliveries": -1}"#, "invalid_settings"),
        (r#"{"max_deliveries": 1001}"#, "invalid_settings"),
        (r#"{"max_deliveries": 3, "lease": 5}"#, "invalid_settings"),
        (r#"{"default_lease_ms": "soon"}"#, "invalid_settings"),
        (r#"{"dead_letter_queue": "work"}"#, "invalid_settings"),
        (r#"{"dedup_window_ms": 999999999999}"#, "invalid_settings"),
        (r#"[1]"#, "bad_json"),
        (r#"{"#, "bad_json"),
    ] {
        let (status, body) = put(&client, &url, bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["error"]["code"], code, "{bad}");
    }
    // Nothing of a refused change was applied.
    let got: Value = client.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(got["settings"]["max_deliveries"], 2);

    // The delivery delay applies to a push that names none.
    let pushed: Value = client
        .post(format!("{}/v1/queues/work/items", daemon.url))
        .body("later")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(pushed["visible_at_ms"].as_u64().is_some(), "{pushed}");
    let response = client
        .post(format!("{}/v1/queues/work/items?delay_ms=0", daemon.url))
        .body("now")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    // The default lease applies to a pop that names none.
    let popped = client
        .post(format!("{}/v1/queues/work/pop", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(popped.status(), 200);
    assert!(popped.headers().contains_key("hotq-receipt"));
    let stats: Value = client
        .get(format!("{}/v1/queues/work", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (stats["leased"].as_i64(), stats["delayed"].as_i64()),
        (Some(1), Some(1))
    );

    // A nack out of deliveries answers the stored dead-letter target.
    let (status, body) = put(
        &client,
        &url,
        r#"{"max_deliveries": 1, "dead_letter_queue": "graveyard"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let receipt = popped.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    let nacked: Value = client
        .post(format!("{}/v1/queues/work/nack/{receipt}", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&nacked["outcome"], &nacked["dead_letter_queue"]),
        (&json!("dead_lettered"), &json!("graveyard")),
        "{nacked}"
    );
    daemon.stop().await;
}
