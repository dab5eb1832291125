//! Every queue is first-class over HTTP: a dead-letter queue with its own
//! name is one (redrive, stats, listing, gauge); a priority queue has what
//! a FIFO queue has (oldest item age, purge, delete, settings, leases); a
//! deleted queue's series leave the exporter.

use crate::common;

use std::time::Duration;

use common::daemon::{Daemon, http, metric_sum};
use hotq::envelope::now_ms;
use reqwest::StatusCode;
use serde_json::{Value, json};

const BOUND: Duration = Duration::from_secs(30);

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn pop_json(base: &str, path: &str) -> Value {
    let (status, body) = send(
        http()
            .post(format!("{base}{path}"))
            .header("accept", "application/json"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{path}: {body}");
    body[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_dead_letter_queue_is_one_by_role() {
    if !common::alone::here(module_path!(), "a_named_dead_letter_queue_is_one_by_role").await {
        return;
    }
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    let base = daemon.url.clone();
    let client = http();
    // Not yet named by anyone: not a dead-letter queue.
    let (status, body) = send(client.post(format!("{base}/v1/queues/graveyard/redrive"))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body["error"]["code"], "not_dead_letter_queue", "{body}");
    let (status, _) = send(
        client
            .put(format!("{base}/v1/queues/gy/settings"))
            .json(&json!({"max_deliveries": 1, "dead_letter_queue": "graveyard"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(client.post(format!("{base}/v1/queues/gy/items")).body("a")).await;
    assert_eq!(status, StatusCode::CREATED);
    let leased = pop_json(&base, "/v1/queues/gy/pop?lease_ms=60000").await;
    let receipt = leased["receipt"].as_str().unwrap();
    let (status, body) = send(client.post(format!("{base}/v1/queues/gy/nack/{receipt}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let (_, stats) = send(client.get(format!("{base}/v1/queues/graveyard"))).await;
    assert_eq!(stats["dead_letter"], true, "{stats}");
    assert_eq!(stats["depth"], 1);
    let (_, stats) = send(client.get(format!("{base}/v1/queues/gy"))).await;
    assert_eq!(stats["dead_letter"], false, "{stats}");
    let (_, list) = send(client.get(format!("{base}/v1/queues"))).await;
    let flags: Vec<(String, bool)> = list["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["queue"].as_str().unwrap().to_string(),
                q["dead_letter"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        flags,
        [("graveyard".to_string(), true), ("gy".to_string(), false)]
    );
    // The dashboard's and alerts' flag.
    let metrics = daemon.metrics_url.clone();
    common::eventually("the dead-letter gauge of graveyard", BOUND, || {
        let metrics = metrics.clone();
        async move {
            metric_sum(&metrics, "hotq_queue_dead_letter", &["queue=\"graveyard\""]).await == 1.0
        }
    })
    .await;
    assert_eq!(
        metric_sum(&metrics, "hotq_queue_dead_letter", &["queue=\"gy\""]).await,
        0.0
    );

    // Redrive takes it back to its origin.
    let (status, body) = send(client.post(format!("{base}/v1/queues/graveyard/redrive"))).await;
    assert_eq!(
        (status, body["redriven"].as_u64()),
        (StatusCode::OK, Some(1))
    );
    let (_, stats) = send(client.get(format!("{base}/v1/queues/gy"))).await;
    assert_eq!(stats["depth"], 1);

    // Once gy names another target, graveyard is a live queue again.
    let (status, _) = send(
        client
            .put(format!("{base}/v1/queues/gy/settings"))
            .json(&json!({"dead_letter_queue": null})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, stats) = send(client.get(format!("{base}/v1/queues/graveyard"))).await;
    assert_eq!(stats["dead_letter"], false, "{stats}");
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_sends_an_origin_less_item_to_the_only_origin() {
    let daemon = Daemon::start(|_| {}).await;
    let (base, client) = (daemon.url.clone(), http());
    let (status, _) = send(
        client
            .put(format!("{base}/v1/queues/solo/settings"))
            .json(&json!({"dead_letter_queue": "morgue"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Pushed straight into the dead-letter queue: no origin of its own.
    send(
        client
            .post(format!("{base}/v1/queues/morgue/items"))
            .body("x"),
    )
    .await;
    let (status, body) = send(client.post(format!("{base}/v1/queues/morgue/redrive"))).await;
    assert_eq!(
        (status, body["redriven"].as_u64()),
        (StatusCode::OK, Some(1))
    );
    let (_, stats) = send(client.get(format!("{base}/v1/queues/solo"))).await;
    assert_eq!(stats["depth"], 1);
    // Two origins: an origin-less item has nowhere to go and stays.
    send(
        client
            .put(format!("{base}/v1/queues/duo/settings"))
            .json(&json!({"dead_letter_queue": "morgue"})),
    )
    .await;
    send(
        client
            .post(format!("{base}/v1/queues/morgue/items"))
            .body("y"),
    )
    .await;
    let (status, body) = send(client.post(format!("{base}/v1/queues/morgue/redrive"))).await;
    assert_eq!(
        (status, body["redriven"].as_u64()),
        (StatusCode::OK, Some(0))
    );
    let (_, stats) = send(client.get(format!("{base}/v1/queues/morgue"))).await;
    assert_eq!(stats["depth"], 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_queue_reports_its_oldest_item_not_its_front() {
    if !common::alone::here(
        module_path!(),
        "a_priority_queue_reports_its_oldest_item_not_its_front",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    let (base, client) = (daemon.url.clone(), http());
    let (_, stats) = send(client.get(format!("{base}/v1/pqueues/tasks"))).await;
    assert_eq!(stats["oldest_item_age_ms"], Value::Null);
    send(
        client
            .post(format!("{base}/v1/pqueues/tasks/items?priority=5"))
            .body("old"),
    )
    .await;
    let (_, old) = send(
        client
            .get(format!("{base}/v1/pqueues/tasks/peek?end=max"))
            .header("accept", "application/json"),
    )
    .await;
    let old_at = old[0]["enqueued_at_ms"].as_u64().unwrap();
    // The clock moves on before the newer, lower-priority (front) item.
    common::wait_until("the clock to pass 300 ms", BOUND, || {
        now_ms() > old_at + 300
    })
    .await;
    send(
        client
            .post(format!("{base}/v1/pqueues/tasks/items?priority=1"))
            .body("new"),
    )
    .await;
    let before = now_ms();
    let (_, stats) = send(client.get(format!("{base}/v1/pqueues/tasks"))).await;
    let age = stats["oldest_item_age_ms"].as_u64().unwrap();
    assert!(age >= before - old_at, "age {age} < {}", before - old_at);
    // The gauge follows.
    let metrics = daemon.metrics_url.clone();
    common::eventually("the priority queue's oldest-age gauge", BOUND, || {
        let metrics = metrics.clone();
        async move {
            let labels = ["queue=\"tasks\"", "kind=\"priority\""];
            metric_sum(&metrics, "hotq_oldest_item_age_seconds", &labels).await >= 0.3
        }
    })
    .await;
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_queue_has_settings_leases_purge_and_delete() {
    let daemon = Daemon::start(|_| {}).await;
    let (base, client) = (daemon.url.clone(), http());
    let pq = format!("{base}/v1/pqueues/work");
    // Settings, kept apart from the FIFO queue of the same name.
    let (status, body) = send(client.put(format!("{pq}/settings")).json(
        &json!({"max_deliveries": 1, "default_lease_ms": 60000, "dead_letter_queue": "work-dlq"}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["settings"]["default_lease_ms"], 60000);
    let (_, fifo) = send(client.get(format!("{base}/v1/queues/work/settings"))).await;
    assert_eq!(fifo["stored"], json!({}), "{fifo}");
    for priority in [3, 1, 2] {
        send(
            client
                .post(format!("{pq}/items?priority={priority}"))
                .body("x"),
        )
        .await;
    }
    // The default lease applies to a pop that names none.
    let leased = pop_json(&base, "/v1/pqueues/work/pop?end=min").await;
    let receipt = leased["receipt"]
        .as_str()
        .expect("leased by default")
        .to_string();
    let (status, list) = send(client.get(format!("{pq}/leases"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["leases"][0]["receipt"], receipt.as_str(), "{list}");
    // Out of deliveries: to the named dead-letter queue, which is one.
    let (status, body) = send(client.post(format!("{pq}/nack/{receipt}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, dlq) = send(client.get(format!("{base}/v1/queues/work-dlq"))).await;
    assert_eq!(
        (dlq["depth"].as_i64(), dlq["dead_letter"].as_bool()),
        (Some(1), Some(true))
    );
    // Purge drops the visible items, keeps leases.
    let _leased = pop_json(&base, "/v1/pqueues/work/pop?end=min").await;
    let (status, purged) = send(client.post(format!("{pq}/purge"))).await;
    assert_eq!(
        (status, purged["purged"].as_u64()),
        (StatusCode::OK, Some(1))
    );
    let (_, stats) = send(client.get(pq.clone())).await;
    assert_eq!(
        (stats["depth"].as_i64(), stats["leased"].as_i64()),
        (Some(0), Some(1))
    );
    // Delete drops the lease and the settings.
    let (status, deleted) = send(client.delete(pq.clone())).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["leased"], 1);
    let (_, settings) = send(client.get(format!("{pq}/settings"))).await;
    assert_eq!(settings["stored"], json!({}));
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_leaves_the_exporter_until_used_again() {
    if !common::alone::here(
        module_path!(),
        "a_deleted_queue_leaves_the_exporter_until_used_again",
    )
    .await
    {
        return;
    }
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    let (base, client) = (daemon.url.clone(), http());
    let metrics = daemon.metrics_url.clone();
    let text = || async {
        http()
            .get(&metrics)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    send(
        client
            .post(format!("{base}/v1/queues/brief/items"))
            .body("x"),
    )
    .await;
    send(
        client
            .post(format!("{base}/v1/queues/kept/items"))
            .body("x"),
    )
    .await;
    assert!(text().await.contains("queue=\"brief\""));
    let (status, _) = send(client.delete(format!("{base}/v1/queues/brief"))).await;
    assert_eq!(status, StatusCode::OK);
    let after = text().await;
    assert!(!after.contains("queue=\"brief\""), "{after}");
    assert!(after.contains("queue=\"kept\""));
    // Used again: back, counting on.
    send(
        client
            .post(format!("{base}/v1/queues/brief/items"))
            .body("x"),
    )
    .await;
    let labels = ["queue=\"brief\"", "kind=\"fifo\""];
    assert_eq!(
        metric_sum(&metrics, "hotq_pushed_items_total", &labels).await,
        2.0
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_queue_delays_pushes_as_its_settings_say() {
    let daemon = Daemon::start(|_| {}).await;
    let (base, client) = (daemon.url.clone(), http());
    let pq = format!("{base}/v1/pqueues/later");
    let (status, _) = send(
        client
            .put(format!("{pq}/settings"))
            .json(&json!({"delivery_delay_ms": 200})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, pushed) = send(client.post(format!("{pq}/items?priority=1")).body("x")).await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(pushed["visible_at_ms"].as_u64().is_some(), "{pushed}");
    let (_, stats) = send(client.get(pq.clone())).await;
    assert_eq!(
        (stats["depth"].as_i64(), stats["delayed"].as_i64()),
        (Some(0), Some(1))
    );
    // A long poll gets it once it is due.
    let item = pop_json(&base, "/v1/pqueues/later/pop?end=min&wait_ms=30000").await;
    assert_eq!(item["item"], "eA==");
    // A push naming delay_ms=0 is visible at once.
    send(
        client
            .post(format!("{pq}/items?priority=1&delay_ms=0"))
            .body("y"),
    )
    .await;
    let (_, stats) = send(client.get(pq.clone())).await;
    assert_eq!(stats["depth"], 1);
    daemon.stop().await;
}
