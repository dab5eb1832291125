//! The drain's `sqs` mode: each worker loops ReceiveMessage then
//! DeleteMessage, as an AWS SDK's worker does, in the AWS JSON 1.0
//! protocol (`POST /`, `X-Amz-Target: AmazonSQS.<Action>`) over the same
//! keep-alive connection as the `/v1` modes, so its figures stand beside
//! `leased` (a leased pop, then its ack: the same two steps through
//! hotq's own paths).
//!
//! The requests are unsigned: a daemon with no SQS credentials and no
//! token accepts any signature or none (src/sqs/auth.rs), and the bench
//! refuses `--token` in this mode rather than have every call answered
//! 403. The items are preloaded through `/v1` like every mode's: their
//! UTF-8 payloads reach the receiver as the message bodies, byte for
//! byte (src/sqs/message.rs), so the drain's tally checks them the same.

use bytes::Bytes;
use hyper::Uri;
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use std::time::Duration;

use super::LEASE_MS;
use super::client::{ClientError, Connection, Endpoint, Response};

/// The AWS JSON 1.0 content type.
const JSON_1_0: &str = "application/x-amz-json-1.0";
/// `VisibilityTimeout` of each receive, in seconds: `leased`'s lease.
const VISIBILITY_TIMEOUT_S: u64 = LEASE_MS / 1_000;

/// One received message: its body and receipt handle.
#[derive(Debug)]
pub(super) struct Received {
    pub(super) body: Vec<u8>,
    pub(super) receipt_handle: String,
}

/// The two calls of an `sqs` worker, built once per drain.
pub(super) struct SqsCalls {
    /// `/` under the URL's prefix.
    target: Uri,
    receive_headers: HeaderMap,
    delete_headers: HeaderMap,
    /// ReceiveMessage's whole body (the same every time).
    receive_body: Bytes,
    queue_url: String,
}

impl SqsCalls {
    /// The calls on the queue at `queue_url` (as CreateQueue answered it).
    pub(super) fn new(endpoint: &Endpoint, queue_url: String) -> Result<SqsCalls, String> {
        let receive_body = json!({
            "QueueUrl": queue_url,
            "MaxNumberOfMessages": 1,
            // No wait, as `leased` pops: a contended queue still stages the
            // receive in its line; an empty answer is polled again.
            "WaitTimeSeconds": 0,
            "VisibilityTimeout": VISIBILITY_TIMEOUT_S,
        });
        Ok(SqsCalls {
            target: endpoint.target("/").map_err(|e| e.to_string())?,
            receive_headers: headers("ReceiveMessage"),
            delete_headers: headers("DeleteMessage"),
            receive_body: Bytes::from(receive_body.to_string()),
            queue_url,
        })
    }

    /// Sends ReceiveMessage; [`received`] reads its answer.
    pub(super) async fn receive(
        &self,
        connection: &mut Connection,
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        connection
            .post_body(
                &self.target,
                &self.receive_headers,
                self.receive_body.clone(),
                timeout,
            )
            .await
    }

    /// DeleteMessage of `receipt_handle`.
    pub(super) async fn delete(
        &self,
        connection: &mut Connection,
        receipt_handle: &str,
        timeout: Duration,
    ) -> Result<(), String> {
        let body = json!({"QueueUrl": self.queue_url, "ReceiptHandle": receipt_handle});
        let response = connection
            .post_body(
                &self.target,
                &self.delete_headers,
                Bytes::from(body.to_string()),
                timeout,
            )
            .await
            .map_err(|e| format!("DeleteMessage: {e}"))?;
        answer_of("DeleteMessage", response.status, &response.body).map(|_| ())
    }
}

/// The message a ReceiveMessage answered, or `None` when the queue had
/// none visible.
pub(super) fn received(response: &Response) -> Result<Option<Received>, String> {
    received_of(&answer_of(
        "ReceiveMessage",
        response.status,
        &response.body,
    )?)
}

/// The headers of an AWS JSON 1.0 call of `action`.
fn headers(action: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON_1_0));
    headers.insert(
        HeaderName::from_static("x-amz-target"),
        HeaderValue::from_str(&format!("AmazonSQS.{action}")).expect("an action name is ASCII"),
    );
    headers
}

/// A call's JSON answer, or the error it carries (SQS's `__type` and
/// `message`).
fn answer_of(action: &str, status: u16, body: &[u8]) -> Result<Value, String> {
    let shown = || String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    if status != 200 {
        return Err(format!("{action} answered {status}: {}", shown()));
    }
    serde_json::from_slice(body)
        .map_err(|e| format!("{action} answered non-JSON ({e}): {}", shown()))
}

/// The one message of a ReceiveMessage answer (`{}` when none).
fn received_of(answer: &Value) -> Result<Option<Received>, String> {
    let messages = match answer.get("Messages") {
        None => return Ok(None),
        Some(Value::Array(messages)) => messages,
        Some(other) => return Err(format!("ReceiveMessage: Messages is not a list: {other}")),
    };
    let [message] = &messages[..] else {
        return Err(format!(
            "ReceiveMessage with MaxNumberOfMessages 1 answered {} messages",
            messages.len()
        ));
    };
    let text = |name: &str| {
        message[name]
            .as_str()
            .ok_or_else(|| format!("ReceiveMessage: a message without {name}: {message}"))
    };
    Ok(Some(Received {
        body: text("Body")?.as_bytes().to_vec(),
        receipt_handle: text("ReceiptHandle")?.to_string(),
    }))
}

/// Creates `queue` through SQS (untimed, before the preload) and returns
/// its `QueueUrl`, so the workers name it exactly as the daemon does
/// (its configured account and base URL). A queue created so keeps its
/// SQS record after the drain empties it: a receive racing the last
/// delete finds an empty queue, not `QueueDoesNotExist`.
pub(super) async fn create_queue(
    client: &reqwest::Client,
    url: &str,
    queue: &str,
) -> Result<String, String> {
    let response = client
        .post(format!("{}/", url.trim_end_matches('/')))
        .header(CONTENT_TYPE.as_str(), JSON_1_0)
        .header("x-amz-target", "AmazonSQS.CreateQueue")
        .body(json!({"QueueName": queue}).to_string())
        .send()
        .await
        .map_err(|e| format!("CreateQueue: {e}"))?;
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    let answer = answer_of("CreateQueue", status, &body)?;
    answer["QueueUrl"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("CreateQueue answered no QueueUrl: {answer}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_receive_is_none_and_one_message_its_body_and_handle() {
        assert!(received_of(&json!({})).unwrap().is_none());
        let one =
            json!({"Messages": [{"Body": "run:1:..", "ReceiptHandle": "ab12", "MessageId": "x"}]});
        let received = received_of(&one).unwrap().unwrap();
        assert_eq!(
            (&received.body[..], &received.receipt_handle[..]),
            (&b"run:1:.."[..], "ab12")
        );
    }

    #[test]
    fn malformed_receives_and_sqs_errors_are_refused_with_their_text() {
        let two = json!({"Messages": [{"Body": "a", "ReceiptHandle": "1"}, {"Body": "b", "ReceiptHandle": "2"}]});
        assert!(received_of(&two).unwrap_err().contains("2 messages"));
        let no_handle = json!({"Messages": [{"Body": "a"}]});
        assert!(
            received_of(&no_handle)
                .unwrap_err()
                .contains("ReceiptHandle")
        );
        let error = br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"gone"}"#;
        let refused = answer_of("ReceiveMessage", 400, error).unwrap_err();
        assert!(
            refused.contains("400") && refused.contains("QueueDoesNotExist"),
            "{refused}"
        );
    }
}
