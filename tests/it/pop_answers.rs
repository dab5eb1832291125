//! One JSON pop answer: whenever a pop or peek answers JSON it is an array
//! of objects with every field present, whatever `max` and lease are; the
//! raw answer of one item is kept for curl and peerbench. Settles say what
//! they did; a receipt used with another queue gets its own error.

use crate::common;

use common::client::Client;
use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::Value;

const FIELDS: [&str; 8] = [
    "item",
    "enqueued_at_ms",
    "receipt",
    "delivery_count",
    "lease_expires_at_ms",
    "dead_letter_from",
    "dead_letter_deliveries",
    "group",
];

async fn pop_json(url: &str, query: &str, accept_json: bool) -> Vec<Value> {
    let mut request = http().post(format!("{url}/v1/queues/{query}"));
    if accept_json {
        request = request.header("accept", "application/json");
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{query}");
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "{query}"
    );
    let items: Vec<Value> = response.json().await.unwrap();
    for item in &items {
        let object = item.as_object().expect("an object per item");
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut expected = FIELDS.to_vec();
        expected.sort_unstable();
        assert_eq!(keys, expected, "{query}: every field, always");
    }
    items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_json_pop_has_one_shape_and_max_1_stays_raw() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    for body in ["a", "b", "c", "d", "e"] {
        Client::new(url).push("shape", body).await;
    }
    // max=1 with Accept: application/json: one object in an array.
    let one = pop_json(url, "shape/pop", true).await;
    assert_eq!((one.len(), one[0]["item"].as_str()), (1, Some("YQ==")));
    assert!(one[0]["receipt"].is_null());
    // max>1 without a lease: the same objects.
    let two = pop_json(url, "shape/pop?max=2", false).await;
    assert_eq!(two.len(), 2);
    // Leased, max=1 asked as JSON: the lease fields are filled.
    let leased = pop_json(url, "shape/pop?lease_ms=60000", true).await;
    assert_eq!(leased[0]["delivery_count"], 1);
    assert_eq!(leased[0]["receipt"].as_str().unwrap().len(), 32);
    assert!(leased[0]["lease_expires_at_ms"].as_u64().unwrap() > 0);
    // Peek follows the same rule.
    let peek = http()
        .get(format!("{url}/v1/queues/shape/peek"))
        .header("accept", "text/plain, application/json;q=0.5")
        .send()
        .await
        .unwrap();
    let peeked: Vec<Value> = peek.json().await.unwrap();
    assert_eq!(peeked[0]["item"], "ZQ==");
    // max=1 without Accept: raw bytes and hotq-* headers, as peerbench needs.
    let raw = http()
        .post(format!("{url}/v1/queues/shape/pop?lease_ms=60000"))
        .header("accept", "*/*")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::OK);
    assert!(raw.headers().contains_key("hotq-receipt"));
    assert_eq!(raw.bytes().await.unwrap(), "e");
    // Empty is 204 in every mode.
    for accept in [true, false] {
        let mut request = http().post(format!("{url}/v1/queues/shape/pop?max=5"));
        if accept {
            request = request.header("accept", "application/json");
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
    }
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_lettered_item_says_where_it_came_from_in_json() {
    let daemon = Daemon::start(|config| {
        config.leases.queues.insert(
            "once".into(),
            hotq::config::QueueLeaseSection { max_deliveries: 1 },
        );
    })
    .await;
    let url = &daemon.url;
    Client::new(url).push("once", "poison").await;
    let leased = pop_json(url, "once/pop?lease_ms=60000", true).await;
    let receipt = leased[0]["receipt"].as_str().unwrap();
    let nack = http()
        .post(format!("{url}/v1/queues/once/nack/{receipt}"))
        .send()
        .await
        .unwrap();
    let nack: Value = nack.json().await.unwrap();
    assert_eq!(nack["outcome"], "dead_lettered");
    let dead = pop_json(url, "once.dead/pop?max=10", false).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["dead_letter_from"], "once");
    assert_eq!(dead[0]["dead_letter_deliveries"], 1);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_used_with_another_queue_is_told_apart_from_a_lost_lease() {
    let daemon = Daemon::start(|_| {}).await;
    let url = &daemon.url;
    Client::new(url).push("left", "x").await;
    let leased = pop_json(url, "left/pop?lease_ms=60000", true).await;
    let receipt = leased[0]["receipt"].as_str().unwrap();
    for op in ["ack", "nack", "extend"] {
        let response = http()
            .post(format!(
                "{url}/v1/queues/right/{op}/{receipt}?lease_ms=1000"
            ))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        if op == "nack" {
            // nack takes no lease_ms: refused before the receipt is looked at.
            assert_eq!(body["error"]["code"], "bad_parameter");
            continue;
        }
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("receipt_queue_mismatch")),
            "{op}"
        );
    }
    // The lease is untouched: it acks on its own queue, once.
    for expected in [StatusCode::NO_CONTENT, StatusCode::NOT_FOUND] {
        assert_eq!(Client::new(url).ack("left", receipt).await, expected);
    }
    daemon.stop().await;
}
