//! One typed HTTP client for a daemon's FIFO queues, calling the API as a
//! user does: the pushes, pops, leases, acks and stats most tests need,
//! each asserting the status the call must answer, so a test says what it
//! does rather than how a request is built. (A test of the answers
//! themselves — refusals, headers, bodies — builds its own requests.)

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::Value;

/// The API of the daemon at `url` (`http://127.0.0.1:port`).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
}

/// A queue's stats (`GET /v1/queues/{queue}`), as the API documents them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Stats {
    pub depth: i64,
    pub waiting: i64,
    pub leased: i64,
    pub delayed: i64,
    pub grouped: i64,
    pub oldest_item_age_ms: Option<u64>,
    pub paused: bool,
    pub dead_letter: bool,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// An item delivered under a lease.
#[derive(Debug, Clone)]
pub struct Leased {
    pub body: String,
    /// The `hotq-receipt` that acks, nacks or extends the lease.
    pub receipt: String,
    /// `hotq-delivery-count`: 1 on the first delivery.
    pub delivery_count: u64,
}

impl Client {
    /// A client of the daemon at `url`, with timeouts longer than any
    /// long poll a test makes.
    pub fn new(url: &str) -> Client {
        Client {
            http: super::daemon::http(),
            url: url.to_string(),
        }
    }

    fn queue_url(&self, queue: &str, rest: &str) -> String {
        format!("{}/v1/queues/{queue}{rest}", self.url)
    }

    /// `POST /v1/queues/{queue}/items`: answered 201.
    pub async fn push(&self, queue: &str, body: impl AsRef<[u8]>) {
        let (status, answer) = self.try_push(queue, body).await;
        assert_eq!(status, StatusCode::CREATED, "push to {queue}: {answer}");
    }

    /// `POST /v1/queues/{queue}/items`, whatever it answers: the status
    /// and the JSON body (null when there is none).
    pub async fn try_push(&self, queue: &str, body: impl AsRef<[u8]>) -> (StatusCode, Value) {
        let response = self
            .http
            .post(self.queue_url(queue, "/items"))
            .body(body.as_ref().to_vec())
            .send()
            .await
            .unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST /v1/queues/{queue}/items:batch` of `items` (base64 in JSON):
    /// answered 201.
    pub async fn push_batch(&self, queue: &str, items: &[impl AsRef<[u8]>]) {
        let body: Vec<String> = items.iter().map(|item| BASE64.encode(item)).collect();
        let response = self
            .http
            .post(self.queue_url(queue, "/items:batch"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::CREATED,
            "batch push to {queue}"
        );
    }

    /// `POST /v1/queues/{queue}/pop?wait_ms=…`: the item's body, or None
    /// on a 204 (nothing within the wait).
    pub async fn pop(&self, queue: &str, wait_ms: u64) -> Option<String> {
        let response = self
            .http
            .post(self.queue_url(queue, &format!("/pop?wait_ms={wait_ms}")))
            .send()
            .await
            .unwrap();
        match response.status() {
            StatusCode::OK => Some(response.text().await.unwrap()),
            StatusCode::NO_CONTENT => None,
            other => panic!(
                "pop from {queue}: {other}: {}",
                response.text().await.unwrap()
            ),
        }
    }

    /// `POST /v1/queues/{queue}/pop?lease_ms=…` (no wait): the item and its
    /// lease, or None on a 204.
    pub async fn pop_leased(&self, queue: &str, lease_ms: u64) -> Option<Leased> {
        let response = self
            .http
            .post(self.queue_url(queue, &format!("/pop?lease_ms={lease_ms}")))
            .send()
            .await
            .unwrap();
        match response.status() {
            StatusCode::OK => {}
            StatusCode::NO_CONTENT => return None,
            other => panic!(
                "leased pop from {queue}: {other}: {}",
                response.text().await.unwrap()
            ),
        }
        let header = |name: &str| response.headers()[name].to_str().unwrap().to_string();
        let (receipt, delivery_count) = (header("hotq-receipt"), header("hotq-delivery-count"));
        Some(Leased {
            body: response.text().await.unwrap(),
            receipt,
            delivery_count: delivery_count.parse().unwrap(),
        })
    }

    /// `POST /v1/queues/{queue}/ack/{receipt}`: the status (204 when the
    /// ack committed).
    pub async fn ack(&self, queue: &str, receipt: &str) -> StatusCode {
        self.http
            .post(self.queue_url(queue, &format!("/ack/{receipt}")))
            .send()
            .await
            .unwrap()
            .status()
    }

    /// `POST /v1/queues/{queue}/extend/{receipt}?lease_ms=…`: the status
    /// (200 when the extend committed).
    pub async fn extend(&self, queue: &str, receipt: &str, lease_ms: u64) -> StatusCode {
        let path = format!("/extend/{receipt}?lease_ms={lease_ms}");
        self.http
            .post(self.queue_url(queue, &path))
            .send()
            .await
            .unwrap()
            .status()
    }

    /// `DELETE /v1/queues/{queue}`, which must answer 200: its answer.
    pub async fn delete(&self, queue: &str) -> Value {
        let response = self
            .http
            .delete(self.queue_url(queue, ""))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "delete of {queue}");
        response.json().await.unwrap()
    }

    /// `GET /v1/queues/{queue}`.
    pub async fn stats(&self, queue: &str) -> Stats {
        let response = self
            .http
            .get(self.queue_url(queue, ""))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "stats of {queue}");
        response.json().await.unwrap()
    }

    /// The queue's visible items (its stats' `depth`).
    pub async fn depth(&self, queue: &str) -> i64 {
        self.stats(queue).await.depth
    }
}
