//! A receipt used with another queue is told so (400
//! `receipt_queue_mismatch`, SQS `ReceiptHandleIsInvalid`), also between
//! two queues whose names share the 2-byte tag receipts held before
//! (issue #35, defect 5: such a receipt answered 404 `unknown_receipt`, and
//! SQS DeleteMessage answered 200 and deleted nothing).

use crate::common;

use std::collections::HashMap;

use common::daemon::{Daemon, http};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// FNV-1a (32 bits) over a FIFO queue's kind byte and name: the first two
/// bytes were the whole queue tag of a receipt before issue #35.
fn old_tag(name: &str) -> [u8; 2] {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in std::iter::once(b'f').chain(name.bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let [first, second, ..] = hash.to_be_bytes();
    [first, second]
}

/// The first two names `q0`, `q1`, … whose old tags are equal (a few
/// hundred names in: the same pair on every run).
fn colliding_names() -> (String, String) {
    let mut seen: HashMap<[u8; 2], String> = HashMap::new();
    for i in 0..100_000 {
        let name = format!("q{i}");
        if let Some(earlier) = seen.insert(old_tag(&name), name.clone()) {
            return (earlier, name);
        }
    }
    panic!("no two of 100,000 names share 16 bits")
}

async fn post(url: String, body: Option<Value>) -> reqwest::Response {
    let mut request = http().post(url);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_of_a_colliding_queue_is_a_mismatch_over_http() {
    let (a, b) = colliding_names();
    let daemon = Daemon::start(|_| {}).await;
    let queue = |name: &str| format!("{}/v1/queues/{name}", daemon.url);
    for name in [&a, &b] {
        let pushed = http()
            .post(format!("{}/items", queue(name)))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(pushed.status(), StatusCode::CREATED);
    }
    let popped = post(format!("{}/pop?lease_ms=60000", queue(&a)), None).await;
    assert_eq!(popped.status(), StatusCode::OK);
    let receipt = popped.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();

    // On `b`: the ack, the batch ack and an ack riding on a pop all say so.
    let acked = post(format!("{}/ack/{receipt}", queue(&b)), None).await;
    assert_eq!(
        acked.status(),
        StatusCode::BAD_REQUEST,
        "ack of {a}'s receipt on {b}"
    );
    let error: Value = acked.json().await.unwrap();
    assert_eq!(error["error"]["code"], "receipt_queue_mismatch", "{error}");
    let batch = post(format!("{}/ack", queue(&b)), Some(json!([receipt]))).await;
    let batch: Value = batch.json().await.unwrap();
    assert_eq!(
        batch["results"][0]["outcome"], "receipt_queue_mismatch",
        "{batch}"
    );
    let riding = post(format!("{}/pop?ack={receipt}", queue(&b)), None).await;
    assert_eq!(riding.status(), StatusCode::OK);
    assert_eq!(riding.headers()["hotq-acked"], "receipt_queue_mismatch");

    // On `a`, where it was issued, it acks.
    let acked = post(format!("{}/ack/{receipt}", queue(&a)), None).await;
    assert_eq!(acked.status(), StatusCode::NO_CONTENT);
    daemon.stop().await;
}

async fn sqs(daemon: &Daemon, action: &str, body: Value) -> (StatusCode, Value) {
    let response = http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", format!("AmazonSQS.{action}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (response.status(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_of_a_colliding_queue_is_invalid_over_sqs() {
    let (a, b) = colliding_names();
    let daemon = Daemon::start(|_| {}).await;
    let (_, created) = sqs(&daemon, "CreateQueue", json!({"QueueName": a})).await;
    let url_a = created["QueueUrl"].clone();
    let (_, created) = sqs(&daemon, "CreateQueue", json!({"QueueName": b})).await;
    let url_b = created["QueueUrl"].clone();
    let sent = json!({"QueueUrl": url_a, "MessageBody": "m"});
    assert_eq!(sqs(&daemon, "SendMessage", sent).await.0, StatusCode::OK);
    let receive = json!({"QueueUrl": url_a, "VisibilityTimeout": 60});
    let (_, received) = sqs(&daemon, "ReceiveMessage", receive).await;
    let handle = received["Messages"][0]["ReceiptHandle"].clone();
    assert!(handle.is_string(), "{received}");

    // As AWS answers a handle of another queue.
    let invalid = json!("com.amazonaws.sqs#ReceiptHandleIsInvalid");
    let delete = json!({"QueueUrl": url_b, "ReceiptHandle": handle});
    let (status, answer) = sqs(&daemon, "DeleteMessage", delete).await;
    assert_eq!(
        (status, &answer["__type"]),
        (StatusCode::BAD_REQUEST, &invalid),
        "{answer}"
    );
    let change = json!({"QueueUrl": url_b, "ReceiptHandle": handle, "VisibilityTimeout": 0});
    let (status, answer) = sqs(&daemon, "ChangeMessageVisibility", change).await;
    assert_eq!(
        (status, &answer["__type"]),
        (StatusCode::BAD_REQUEST, &invalid),
        "{answer}"
    );

    // On its own queue it deletes the message.
    let delete = json!({"QueueUrl": url_a, "ReceiptHandle": handle});
    assert_eq!(
        sqs(&daemon, "DeleteMessage", delete).await.0,
        StatusCode::OK
    );
    let stats: Value = http()
        .get(format!("{}/v1/queues/{a}", daemon.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (stats["depth"].as_i64(), stats["leased"].as_i64()),
        (Some(0), Some(0))
    );
    daemon.stop().await;
}
