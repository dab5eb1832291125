//! A daemon keeps some of a queue in memory by its name (the default lease
//! a plain pop takes, the console's traffic tally, the sampler's and the
//! exporter's queues): a delete through any front end forgets all of it at
//! once, so a queue made again under the same name starts as a new queue
//! (issue #35, defect 2: a plain pop right after a delete was leased with
//! the deleted queue's default lease, and its item delivered twice).

use crate::common;

use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// `method url` with an optional JSON body: the status, the
/// `hotq-receipt` header if any, and the body as JSON (null when none).
async fn call(
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (StatusCode, Option<String>, Value) {
    let mut request = http().request(method, url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let receipt = response
        .headers()
        .get("hotq-receipt")
        .map(|value| value.to_str().unwrap().to_string());
    let bytes = response.bytes().await.unwrap();
    (
        status,
        receipt,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// `POST url` with the body `x`: a push, which must answer 201.
async fn push(url: String) {
    let response = http().post(url).body("x").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

/// One round on queue `base` (`…/v1/queues/q` or `…/v1/pqueues/q`):
/// a default lease set and taken by a plain pop, the queue deleted, then a
/// plain pop of the queue made again must take no lease.
async fn round(base: &str, pop: &str, push_path: &str) {
    use reqwest::Method;
    let settings = format!("{base}/settings");
    let set = json!({"default_lease_ms": 60_000});
    let (status, _, answer) = call(Method::PUT, settings.clone(), Some(set)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    push(format!("{base}{push_path}")).await;
    let (status, receipt, _) = call(Method::POST, format!("{base}{pop}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        receipt.is_some(),
        "the default lease applies before the delete"
    );

    let (status, _, answer) = call(Method::DELETE, base.to_string(), None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, _, answer) = call(Method::GET, settings, None).await;
    assert_eq!(
        answer["settings"]["default_lease_ms"],
        Value::Null,
        "{answer}"
    );
    assert_eq!(answer["stored"], json!({}), "{answer}");

    push(format!("{base}{push_path}")).await;
    let (status, receipt, _) = call(Method::POST, format!("{base}{pop}"), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        receipt, None,
        "a plain pop of the queue made again is at-most-once: no lease"
    );
    let (_, _, stats) = call(Method::GET, base.to_string(), None).await;
    assert_eq!(
        (stats["depth"].as_i64(), stats["leased"].as_i64()),
        (Some(0), Some(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_pop_after_a_delete_takes_no_deleted_default_lease() {
    let daemon = Daemon::start(|_| {}).await;
    // Each round runs well within the daemon's 1 s default-lease cache,
    // which is what a forgotten entry would be served from.
    for _ in 0..3 {
        let fifo = format!("{}/v1/queues/forgotten", daemon.url);
        round(&fifo, "/pop", "/items").await;
        let priority = format!("{}/v1/pqueues/forgotten", daemon.url);
        round(&priority, "/pop?end=min", "/items?priority=1").await;
    }
    daemon.stop().await;
}

async fn sqs(daemon: &Daemon, action: &str, body: Value) -> Value {
    let response = http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", format!("AmazonSQS.{action}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{action}");
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqs_delete_queue_forgets_the_visibility_timeout_too() {
    use reqwest::Method;
    let daemon = Daemon::start(|_| {}).await;
    let v1 = format!("{}/v1/queues/sqs_forgotten", daemon.url);
    for _ in 0..3 {
        let attributes = json!({"VisibilityTimeout": "60"});
        let created = json!({"QueueName": "sqs_forgotten", "Attributes": attributes});
        let url = sqs(&daemon, "CreateQueue", created).await["QueueUrl"].clone();
        sqs(
            &daemon,
            "SendMessage",
            json!({"QueueUrl": url, "MessageBody": "a"}),
        )
        .await;
        // A plain /v1 pop takes the queue's VisibilityTimeout as its lease.
        let (status, receipt, _) = call(Method::POST, format!("{v1}/pop"), None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(receipt.is_some());
        sqs(&daemon, "DeleteQueue", json!({"QueueUrl": url})).await;
        push(format!("{v1}/items")).await;
        let (status, receipt, _) = call(Method::POST, format!("{v1}/pop"), None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(receipt, None, "no lease of the deleted queue's setting");
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_leaves_the_traffic_tally() {
    use reqwest::Method;
    // The tally is the process's, by queue name: this name is no other
    // test's.
    let daemon = Daemon::start(|_| {}).await;
    let queue = format!("{}/v1/queues/tallied_then_deleted", daemon.url);
    let traffic = format!("{}/v1/traffic?queues=tallied_then_deleted", daemon.url);
    for _ in 0..2 {
        push(format!("{queue}/items")).await;
    }
    let (_, _, counts) = call(Method::GET, traffic.clone(), None).await;
    assert_eq!(
        counts["queues"]["tallied_then_deleted"]["pushed"], 2,
        "{counts}"
    );
    let (status, _, _) = call(Method::DELETE, queue.clone(), None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, counts) = call(Method::GET, traffic.clone(), None).await;
    assert_eq!(counts["queues"], json!({}), "forgotten with the queue");
    push(format!("{queue}/items")).await;
    let (_, _, counts) = call(Method::GET, traffic, None).await;
    assert_eq!(
        counts["queues"]["tallied_then_deleted"]["pushed"], 1,
        "the queue made again counts from 0: {counts}"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_queue_made_again_by_a_dead_letter_is_exported_again() {
    use reqwest::Method;
    // The exporter's hidden series are the process's: alone in one.
    let name = "a_deleted_queue_made_again_by_a_dead_letter_is_exported_again";
    if !common::alone::here(module_path!(), name).await {
        return;
    }
    let daemon = Daemon::start(|config| config.metrics_sample_interval_ms = 20).await;
    let (source, dead) = (
        format!("{}/v1/queues/doomed", daemon.url),
        format!("{}/v1/queues/doomed.dead", daemon.url),
    );
    push(format!("{dead}/items")).await;
    let depth_of_dead = || async {
        let text = http().get(&daemon.metrics_url).send().await.unwrap();
        let text = text.text().await.unwrap();
        let samples = common::exposition::parse(&text);
        let labels = [("queue", "doomed.dead"), ("kind", "fifo")];
        common::exposition::value(&samples, "hotq_queue_depth", &labels)
    };
    common::eventually("the dead-letter queue's depth", BOUND, || async {
        depth_of_dead().await == Some(1.0)
    })
    .await;
    let (status, _, _) = call(Method::DELETE, dead.clone(), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        depth_of_dead().await,
        None,
        "a deleted queue leaves the exporter"
    );

    // Made again by no push or pop of its own: an item out of deliveries.
    let set = json!({"max_deliveries": 1});
    let (status, _, _) = call(Method::PUT, format!("{source}/settings"), Some(set)).await;
    assert_eq!(status, StatusCode::OK);
    push(format!("{source}/items")).await;
    let (status, receipt, _) =
        call(Method::POST, format!("{source}/pop?lease_ms=60000"), None).await;
    assert_eq!(status, StatusCode::OK);
    let nack = format!("{source}/nack/{}", receipt.unwrap());
    let (status, _, answer) = call(Method::POST, nack, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    common::eventually("the queue made again in the exporter", BOUND, || async {
        depth_of_dead().await == Some(1.0)
    })
    .await;
    daemon.stop().await;
}

/// How long the sampler may take to publish what a test waits for.
const BOUND: std::time::Duration = std::time::Duration::from_secs(30);
