//! Priority queues lease over HTTP as FIFO queues do: pop with `lease_ms`,
//! ack, nack, extend, and expiry returns the item under its priority.

use crate::common;

use std::time::Duration;

use common::daemon::{Daemon, http};
use serde_json::Value;

async fn push(client: &reqwest::Client, base: &str, q: &str, body: &str, priority: i64) {
    let response = client
        .post(format!("{base}/v1/pqueues/{q}/items?priority={priority}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
}

/// Pops the lowest priority under a lease: (body, receipt, delivery count).
async fn pop(
    client: &reqwest::Client,
    base: &str,
    q: &str,
    lease_ms: u64,
) -> Option<(String, String, u32)> {
    let response = client
        .post(format!(
            "{base}/v1/pqueues/{q}/pop?end=min&lease_ms={lease_ms}"
        ))
        .send()
        .await
        .unwrap();
    if response.status() == 204 {
        return None;
    }
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let header = |name: &str| headers[name].to_str().unwrap().to_string();
    let count = header("hotq-delivery-count").parse().unwrap();
    Some((
        response.text().await.unwrap(),
        header("hotq-receipt"),
        count,
    ))
}

async fn stats(client: &reqwest::Client, base: &str, q: &str) -> (i64, i64) {
    let stats: Value = client
        .get(format!("{base}/v1/pqueues/{q}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        stats["depth"].as_i64().unwrap(),
        stats["leased"].as_i64().unwrap(),
    )
}

async fn settle(client: &reqwest::Client, base: &str, q: &str, what: &str, receipt: &str) -> u16 {
    client
        .post(format!("{base}/v1/pqueues/{q}/{what}/{receipt}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_pops_lease_and_settle_over_http() {
    if !common::alone::here(module_path!(), "priority_pops_lease_and_settle_over_http").await {
        return;
    }
    let daemon = Daemon::start(|config| config.staging.reap_interval_ms = 20).await;
    let (client, base) = (http(), daemon.url.clone());
    for (body, priority) in [("five", 5), ("one", 1), ("three", 3)] {
        push(&client, &base, "pq", body, priority).await;
    }
    let (body, receipt, count) = pop(&client, &base, "pq", 60_000).await.unwrap();
    assert_eq!((body.as_str(), count), ("one", 1));
    assert_eq!(stats(&client, &base, "pq").await, (2, 1));
    // Its receipt is tagged with the priority queue: the FIFO queue of the
    // same name, and another priority queue, refuse it as another queue's
    // (not as a lost lease), and the lease stays.
    for url in [
        format!("{base}/v1/queues/pq/ack/{receipt}"),
        format!("{base}/v1/pqueues/other/ack/{receipt}"),
        format!("{base}/v1/pqueues/other/nack/{receipt}"),
        format!("{base}/v1/pqueues/other/extend/{receipt}?lease_ms=1000"),
    ] {
        let refused = client.post(&url).send().await.unwrap();
        assert_eq!(refused.status(), 400, "{url}");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "receipt_queue_mismatch", "{url}");
    }
    assert_eq!(stats(&client, &base, "pq").await, (2, 1));

    // Nacked: back under its priority, first again, delivered a second time.
    let nacked: serde_json::Value = client
        .post(format!("{base}/v1/pqueues/pq/nack/{receipt}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(nacked["outcome"], "requeued", "{nacked}");
    assert_eq!(stats(&client, &base, "pq").await, (3, 0));
    let (body, receipt, count) = pop(&client, &base, "pq", 60_000).await.unwrap();
    assert_eq!((body.as_str(), count), ("one", 2));
    let extended = client
        .post(format!(
            "{base}/v1/pqueues/pq/extend/{receipt}?lease_ms=120000"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(extended.status(), 200);
    let extended: serde_json::Value = extended.json().await.unwrap();
    assert!(
        extended["lease_expires_at_ms"].as_u64().unwrap() > hotq::envelope::now_ms() + 60_000,
        "{extended}"
    );
    assert_eq!(settle(&client, &base, "pq", "ack", &receipt).await, 204);
    assert_eq!(settle(&client, &base, "pq", "ack", &receipt).await, 404);
    assert_eq!(stats(&client, &base, "pq").await, (2, 0));

    // Expired: the timer returns it under its priority.
    let (body, _, _) = pop(&client, &base, "pq", 1).await.unwrap();
    assert_eq!(body, "three");
    let probe = client.clone();
    let url = base.clone();
    common::eventually("the expired lease returns", Duration::from_secs(30), || {
        let (client, base) = (probe.clone(), url.clone());
        async move { stats(&client, &base, "pq").await == (2, 0) }
    })
    .await;
    let (body, receipt, count) = pop(&client, &base, "pq", 60_000).await.unwrap();
    assert_eq!((body.as_str(), count), ("three", 2));
    assert_eq!(settle(&client, &base, "pq", "ack", &receipt).await, 204);
    let bad = client
        .post(format!("{base}/v1/pqueues/pq/pop?end=min&lease_ms=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    // The lease counters tell the priority queue from the FIFO queue of
    // the same name (whose refused ack above counted nothing).
    let text = client
        .get(&daemon.metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str, kind: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter(|l| l.contains("queue=\"pq\"") && l.contains(&format!("kind=\"{kind}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(value("hotq_acks_total", "priority"), 2.0, "{text}");
    assert_eq!(value("hotq_nacks_total", "priority"), 1.0);
    assert_eq!(value("hotq_redeliveries_total", "priority"), 1.0);
    assert_eq!(value("hotq_acks_total", "fifo"), 0.0);
    daemon.stop().await;
}

/// A priority queue's dead letter is redriven into that priority queue, at
/// its priority, not into the FIFO queue of the same name (which never
/// sees it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_dead_letter_is_redriven_to_its_priority_queue_at_its_priority() {
    let daemon = Daemon::start(|config| config.leases.max_deliveries = 2).await;
    let (client, base) = (http(), daemon.url.clone());
    push(&client, &base, "pdl", "seven", 7).await;
    for delivery in 1..=2 {
        let (body, receipt, count) = pop(&client, &base, "pdl", 60_000).await.unwrap();
        assert_eq!((body.as_str(), count), ("seven", delivery));
        assert_eq!(settle(&client, &base, "pdl", "nack", &receipt).await, 200);
    }
    assert_eq!(stats(&client, &base, "pdl").await, (0, 0), "dead-lettered");
    let dead = client
        .get(format!("{base}/v1/queues/pdl.dead"))
        .send()
        .await
        .unwrap();
    let dead: Value = dead.json().await.unwrap();
    assert_eq!(dead["depth"], 1);
    // Items on both sides of its priority, to see where it lands.
    push(&client, &base, "pdl", "five", 5).await;
    push(&client, &base, "pdl", "nine", 9).await;
    let redriven: Value = client
        .post(format!("{base}/v1/queues/pdl.dead/redrive"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(redriven["redriven"], 1);
    assert_eq!(stats(&client, &base, "pdl").await, (3, 0));
    let fifo: Value = client
        .get(format!("{base}/v1/queues/pdl"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        fifo["depth"], 0,
        "the FIFO queue of the same name stays empty"
    );
    let mut order = Vec::new();
    while let Some((body, receipt, count)) = pop(&client, &base, "pdl", 60_000).await {
        assert_eq!(count, 1, "a redriven item starts its deliveries afresh");
        assert_eq!(settle(&client, &base, "pdl", "ack", &receipt).await, 204);
        order.push(body);
    }
    assert_eq!(order, ["five", "seven", "nine"]);
    daemon.stop().await;
}

/// A priority push with `hotq-dedup-id` is deduplicated as a FIFO one is:
/// the second push of an id answers 200 `duplicate` and stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_priority_push_with_a_seen_dedup_id_stores_nothing() {
    let daemon = Daemon::start(|_| {}).await;
    let (client, base) = (http(), daemon.url.clone());
    let push_once = |priority: i64, id: &'static str| {
        client
            .post(format!("{base}/v1/pqueues/pdd/items?priority={priority}"))
            .header("hotq-dedup-id", id)
            .body("order")
            .send()
    };
    let first = push_once(1, "order-42").await.unwrap();
    assert_eq!(first.status(), 201);
    let again = push_once(3, "order-42").await.unwrap();
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(
        (again["pushed"].clone(), again["duplicate"].clone()),
        (0.into(), true.into())
    );
    assert_eq!(push_once(1, "order-43").await.unwrap().status(), 201);
    assert_eq!(stats(&client, &base, "pdd").await, (2, 0));
    // The FIFO queue of the same name keeps its own ids.
    let fifo = client
        .post(format!("{base}/v1/queues/pdd/items"))
        .header("hotq-dedup-id", "order-42")
        .body("fifo")
        .send()
        .await
        .unwrap();
    assert_eq!(fifo.status(), 201);
    let bad = push_once(1, "").await.unwrap();
    assert_eq!(
        bad.status(),
        400,
        "an empty id is refused, as for FIFO pushes"
    );
    daemon.stop().await;
}
