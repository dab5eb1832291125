//! The SQS API's protocol edges over HTTP against a real daemon: its error
//! shape and header, refusals, the gate with a token, the metric, and the
//! SQS envelope as a `/v1` consumer sees it (boto3, the AWS CLI and Celery
//! run in tests/sqs/).

use crate::common;

use common::daemon::{Daemon, http};
use serde_json::{Value, json};

async fn sqs(daemon: &Daemon, action: &str, body: Value) -> reqwest::Response {
    http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", format!("AmazonSQS.{action}"))
        .header("Content-Type", "application/x-amz-json-1.0")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

async fn error_of(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let query = response.headers()["x-amzn-query-error"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        response.headers()["content-type"],
        "application/x-amz-json-1.0"
    );
    // Errors name their request too, as SQS's do.
    assert_eq!(response.headers()["x-amzn-requestid"].len(), 36);
    let body: Value = response.json().await.unwrap();
    (status, body["__type"].as_str().unwrap().to_string(), query)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn errors_come_in_sqs_shape() {
    let daemon = Daemon::start(|_| {}).await;
    let missing = sqs(&daemon, "GetQueueUrl", json!({"QueueName": "nope"})).await;
    assert_eq!(
        error_of(missing).await,
        (
            400,
            "com.amazonaws.sqs#QueueDoesNotExist".into(),
            "AWS.SimpleQueueService.NonExistentQueue;Sender".into()
        )
    );
    let unknown = sqs(&daemon, "PaintQueue", json!({})).await;
    assert_eq!(error_of(unknown).await.2, "InvalidAction;Sender");
    let not_json = http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", "AmazonSQS.ListQueues")
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(not_json).await.2, "InvalidParameterValue;Sender");
    let url = sqs(&daemon, "CreateQueue", json!({"QueueName": "edges"}))
        .await
        .json::<Value>()
        .await
        .unwrap()["QueueUrl"]
        .clone();
    let too_many = sqs(
        &daemon,
        "ReceiveMessage",
        json!({"QueueUrl": url, "MaxNumberOfMessages": 11}),
    )
    .await;
    assert_eq!(error_of(too_many).await.2, "InvalidParameterValue;Sender");
    let malformed = sqs(
        &daemon,
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": "zz"}),
    )
    .await;
    assert_eq!(
        error_of(malformed).await.1,
        "com.amazonaws.sqs#ReceiptHandleIsInvalid"
    );
    let bad_name = sqs(&daemon, "CreateQueue", json!({"QueueName": "has.dot"})).await;
    assert_eq!(error_of(bad_name).await.2, "InvalidParameterValue;Sender");
    let metrics = http()
        .get(&daemon.metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("hotq_sqs_requests_total{")
                && l.contains("action=\"GetQueueUrl\"")
                && l.contains("outcome=\"QueueDoesNotExist\"")
                && l.ends_with(" 1")),
        "the refused call is counted"
    );
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_a_token_unsigned_sqs_calls_are_refused() {
    let daemon = Daemon::start(|config| config.token = Some("s3cret".into())).await;
    let refused = sqs(&daemon, "ListQueues", json!({})).await;
    assert_eq!(
        error_of(refused).await,
        (
            403,
            "com.amazonaws.sqs#MissingAuthenticationToken".into(),
            "MissingAuthenticationToken;Sender".into()
        )
    );
    let forged = http()
        .post(format!("{}/", daemon.url))
        .header("X-Amz-Target", "AmazonSQS.ListQueues")
        .header("X-Amz-Date", "20240101T000000Z")
        .header(
            "Authorization",
            "AWS4-HMAC-SHA256 Credential=hotq/20240101/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=00",
        )
        .body("{}")
        .send()
        .await
        .unwrap();
    // The token's key id, but a date far outside the skew (and no valid signature).
    assert_eq!(error_of(forged).await.0, 403);
    daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn v1_consumers_see_the_envelope_and_receipts_are_shared() {
    let daemon = Daemon::start(|_| {}).await;
    let url = sqs(&daemon, "CreateQueue", json!({"QueueName": "shared"}))
        .await
        .json::<Value>()
        .await
        .unwrap()["QueueUrl"]
        .clone();
    let sent: Value = sqs(
        &daemon,
        "SendMessage",
        json!({"QueueUrl": url, "MessageBody": "body"}),
    )
    .await
    .json()
    .await
    .unwrap();
    let popped = http()
        .post(format!(
            "{}/v1/queues/shared/pop?lease_ms=60000",
            daemon.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(popped.status(), 200);
    let receipt = popped.headers()["hotq-receipt"]
        .to_str()
        .unwrap()
        .to_string();
    let payload = popped.bytes().await.unwrap();
    let text = std::str::from_utf8(&payload).unwrap();
    let mut lines = text.splitn(3, '\n');
    assert_eq!(lines.next(), Some("hotq.sqs/1"));
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["id"], sent["MessageId"]);
    assert_eq!(lines.next(), Some("body"));
    // The /v1 receipt is an SQS receipt handle: DeleteMessage acks it.
    let deleted = sqs(
        &daemon,
        "DeleteMessage",
        json!({"QueueUrl": url, "ReceiptHandle": receipt}),
    )
    .await;
    assert_eq!(deleted.status(), 200);
    let stats: Value = http()
        .get(format!("{}/v1/queues/shared", daemon.url))
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

/// A `/v1` push shaped like an SQS envelope but carrying an attribute no
/// send would accept (neither a string nor a binary value) is received
/// through SQS without a panic: before, the attributes' digest hit an
/// `unreachable!` after the lease committed (500, the message leased and
/// never delivered, again on every receive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_push_shaped_like_an_sqs_envelope_is_received_whole() {
    let daemon = Daemon::start(|_| {}).await;
    let url = sqs(&daemon, "CreateQueue", json!({"QueueName": "crafted"}))
        .await
        .json::<Value>()
        .await
        .unwrap()["QueueUrl"]
        .as_str()
        .unwrap()
        .to_string();
    let crafted = "hotq.sqs/1\n{\"id\":\"x\",\"attrs\":{\"a\":{\"DataType\":\"String\"}}}\nbody";
    let pushed = http()
        .post(format!("{}/v1/queues/crafted/items", daemon.url))
        .body(crafted)
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), 201);
    let received = sqs(
        &daemon,
        "ReceiveMessage",
        json!({"QueueUrl": url, "MessageAttributeNames": ["All"], "WaitTimeSeconds": 1}),
    )
    .await;
    assert_eq!(received.status(), 200);
    let body: Value = received.json().await.unwrap();
    assert_eq!(body["Messages"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(body["Messages"][0]["Body"], "body");
}
