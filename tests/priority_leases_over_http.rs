//! Priority queues lease over HTTP as FIFO queues do: pop with `lease_ms`,
//! ack, nack, extend, and expiry returns the item under its priority.

mod common;

use std::time::Duration;

use common::daemon::{Daemon, http};
use serde_json::Value;

async fn push(client: &reqwest::Client, base: &str, body: &str, priority: i64) {
    let response = client
        .post(format!("{base}/v1/pqueues/pq/items?priority={priority}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
}

/// Pops the lowest priority under a lease: (body, receipt, delivery count).
async fn pop(client: &reqwest::Client, base: &str, lease_ms: u64) -> Option<(String, String, u32)> {
    let response = client
        .post(format!(
            "{base}/v1/pqueues/pq/pop?end=min&lease_ms={lease_ms}"
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

async fn stats(client: &reqwest::Client, base: &str) -> (i64, i64) {
    let stats: Value = client
        .get(format!("{base}/v1/pqueues/pq"))
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

async fn settle(client: &reqwest::Client, base: &str, what: &str, receipt: &str) -> u16 {
    client
        .post(format!("{base}/v1/pqueues/pq/{what}/{receipt}"))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_pops_lease_and_settle_over_http() {
    let daemon = Daemon::start(|config| config.staging.reap_interval_ms = 20).await;
    let (client, base) = (http(), daemon.url.clone());
    for (body, priority) in [("five", 5), ("one", 1), ("three", 3)] {
        push(&client, &base, body, priority).await;
    }
    let (body, receipt, count) = pop(&client, &base, 60_000).await.unwrap();
    assert_eq!((body.as_str(), count), ("one", 1));
    assert_eq!(stats(&client, &base).await, (2, 1));
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
    assert_eq!(stats(&client, &base).await, (2, 1));

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
    assert_eq!(stats(&client, &base).await, (3, 0));
    let (body, receipt, count) = pop(&client, &base, 60_000).await.unwrap();
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
    assert_eq!(settle(&client, &base, "ack", &receipt).await, 204);
    assert_eq!(settle(&client, &base, "ack", &receipt).await, 404);
    assert_eq!(stats(&client, &base).await, (2, 0));

    // Expired: the timer returns it under its priority.
    let (body, _, _) = pop(&client, &base, 1).await.unwrap();
    assert_eq!(body, "three");
    let probe = client.clone();
    let url = base.clone();
    common::eventually("the expired lease returns", Duration::from_secs(30), || {
        let (client, base) = (probe.clone(), url.clone());
        async move { stats(&client, &base).await == (2, 0) }
    })
    .await;
    let (body, receipt, count) = pop(&client, &base, 60_000).await.unwrap();
    assert_eq!((body.as_str(), count), ("three", 2));
    assert_eq!(settle(&client, &base, "ack", &receipt).await, 204);
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
