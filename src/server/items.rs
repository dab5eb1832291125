//! What a pop or peek answers (docs/api.md, "What a pop answers, one rule"):
//! JSON, an array of [`PoppedItem`], when `max` > 1 or the request accepts
//! `application/json`; the one item's raw bytes with `hotq-*` headers
//! otherwise; 204 when nothing came.

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use crate::service::{Item, QueueSummary};

/// Header carrying an item's enqueue time (ms since the epoch).
pub const ENQUEUED_AT_HEADER: &str = "hotq-enqueued-at-ms";
/// Header carrying a leased item's receipt.
pub const RECEIPT_HEADER: &str = "hotq-receipt";
/// Header carrying a leased item's delivery count (1 the first time).
pub const DELIVERY_COUNT_HEADER: &str = "hotq-delivery-count";
/// Header carrying a leased item's expiry (ms since the epoch).
pub const LEASE_EXPIRES_HEADER: &str = "hotq-lease-expires-at-ms";
/// Header naming the queue a dead-lettered item came from.
pub const DEAD_LETTER_FROM_HEADER: &str = "hotq-dead-letter-from";
/// Header carrying a dead-lettered item's delivery count when it died.
pub const DEAD_LETTER_DELIVERIES_HEADER: &str = "hotq-dead-letter-deliveries";
/// Header carrying a grouped item's message group.
pub const GROUP_HEADER: &str = "hotq-group";

/// How a pop or peek answers: JSON when more than one item may come
/// (`max` > 1) or the request's `Accept` names `application/json`; the raw
/// bytes of the one item with `hotq-*` headers otherwise (curl, peerbench).
pub fn answers_json(headers: &HeaderMap, max: usize) -> bool {
    max > 1
        || headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|range| {
                let mut parts = range.split(';').map(str::trim);
                let media = parts.next().unwrap_or("");
                // `q=0` means "not this type".
                media.eq_ignore_ascii_case("application/json")
                    && !parts.any(|p| p.eq_ignore_ascii_case("q=0") || p == "q=0.0")
            })
}

/// One item of a JSON pop or peek answer. Every field is always present
/// (null when it does not apply), whatever `max` and lease are.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PoppedItem {
    /// The item's bytes, base64 (standard alphabet, padded).
    pub item: String,
    /// When the item was pushed, in ms since the epoch.
    pub enqueued_at_ms: u64,
    /// The lease's receipt (ack, nack, extend); null when not leased.
    #[schema(required = true)]
    pub receipt: Option<String>,
    /// This delivery's number, 1 the first time; null when not leased.
    #[schema(required = true)]
    pub delivery_count: Option<u32>,
    /// When the lease expires, in ms since the epoch; null when not leased.
    #[schema(required = true)]
    pub lease_expires_at_ms: Option<u64>,
    /// The queue a dead-lettered item came from; null otherwise.
    #[schema(required = true)]
    pub dead_letter_from: Option<String>,
    /// Deliveries a dead-lettered item had when it died; null otherwise.
    #[schema(required = true)]
    pub dead_letter_deliveries: Option<u32>,
    /// The item's message group; null when pushed without one.
    #[schema(required = true)]
    pub group: Option<String>,
}

impl From<&Item> for PoppedItem {
    fn from(item: &Item) -> Self {
        PoppedItem {
            item: BASE64.encode(&item.payload),
            enqueued_at_ms: item.enqueued_at_ms,
            receipt: item.lease.map(|lease| lease.receipt.to_string()),
            delivery_count: item.lease.map(|lease| lease.delivery_count),
            lease_expires_at_ms: item.lease.map(|lease| lease.expires_at_ms),
            dead_letter_from: item.dead_letter.as_ref().map(|dead| dead.queue.clone()),
            dead_letter_deliveries: item.dead_letter.as_ref().map(|dead| dead.deliveries),
            group: item.group.clone(),
        }
    }
}

/// The answer to a pop or peek: 204 when empty; with `json` (see
/// [`answers_json`]) a JSON array of [`PoppedItem`]; otherwise the one
/// item's bytes, its metadata in `hotq-*` headers.
pub fn items_response(items: Vec<Item>, json: bool) -> Response {
    if items.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    if json {
        let objects: Vec<PoppedItem> = items.iter().map(PoppedItem::from).collect();
        return (StatusCode::OK, Json(objects)).into_response();
    }
    assert_eq!(items.len(), 1, "a raw answer holds one item");
    let item = items.into_iter().next().expect("non-empty");
    let mut headers = vec![(ENQUEUED_AT_HEADER, item.enqueued_at_ms.to_string())];
    if let Some(lease) = &item.lease {
        headers.push((RECEIPT_HEADER, lease.receipt.to_string()));
        headers.push((DELIVERY_COUNT_HEADER, lease.delivery_count.to_string()));
        headers.push((LEASE_EXPIRES_HEADER, lease.expires_at_ms.to_string()));
    }
    if let Some(dead) = &item.dead_letter {
        headers.push((DEAD_LETTER_FROM_HEADER, dead.queue.clone()));
        headers.push((DEAD_LETTER_DELIVERIES_HEADER, dead.deliveries.to_string()));
    }
    if let Some(group) = &item.group {
        headers.push((GROUP_HEADER, group.clone()));
    }
    let mut response = (StatusCode::OK, item.payload).into_response();
    for (name, value) in headers {
        // Digits, hex, queue names (A-Z a-z 0-9 . _ -) and group keys
        // (those and : @ /) are valid header values; an item another build
        // stored may carry something else: that header is left out, after
        // its item's commit, rather than failing the answer.
        match HeaderValue::from_str(&value) {
            Ok(value) => {
                response.headers_mut().insert(name, value);
            }
            Err(_) => tracing::warn!(
                header = name,
                "an item's metadata is not a valid header value; left out"
            ),
        }
    }
    response
}

/// The answer to a push or batch push: 201 when at least one item was
/// stored, 200 when every item was a duplicate (nothing written).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PushAnswer {
    /// Items stored, in order, in one commit (duplicates left out).
    pub pushed: usize,
    /// With a delay (`delay_ms`, or the queue's delivery delay): when the
    /// items become visible, in ms since the epoch; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_at_ms: Option<u64>,
    /// True when nothing was stored: every item's dedup id was pushed
    /// within the queue's dedup window (the answer is then 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
    /// The positions (0-based, in the request) of the items left out as
    /// duplicates; absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<Vec<usize>>,
}

/// A queue's stats (`GET /v1/queues/{queue}`, `GET /v1/pqueues/{queue}`).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueueStats {
    /// The queue's name.
    pub queue: String,
    /// Visible items.
    pub depth: i64,
    /// Pops waiting for an item (in the store and in this daemon's memory).
    pub waiting: i64,
    /// Items under a lease.
    pub leased: i64,
    /// Items pushed or nacked with a delay, not yet visible.
    pub delayed: i64,
    /// Items waiting behind their message group's head (not in `depth`).
    pub grouped: i64,
    /// Items dropped so far because their retention (`retention_ms`)
    /// ended, whether visible, delayed, waiting or leased past it.
    /// (Default 0: a CLI reading an older daemon's stats.)
    #[serde(default)]
    #[schema(required = true)]
    pub expired: i64,
    /// How long the oldest visible item has waited, in ms; null when
    /// there is none. For a priority queue, the oldest of the first items
    /// of its first 256 priority levels.
    #[schema(required = true)]
    pub oldest_item_age_ms: Option<u64>,
    /// True while the queue is paused: it takes pushes, hands nothing out.
    pub paused: bool,
    /// True for a dead-letter queue: its name ends in `.dead`, or some
    /// queue names it as its `dead_letter_queue` (redrive takes it).
    pub dead_letter: bool,
    /// A FIFO queue's stats: the backlog of its largest fairness keys
    /// (at most 10), largest first; empty when it has none. Null in a
    /// listing (not read there) and for a priority queue. (Default null:
    /// a CLI reading an older daemon's stats.)
    #[serde(default)]
    #[schema(required = true)]
    pub fair_backlog: Option<Vec<FairKeyBacklog>>,
}

/// One fairness key's backlog in a queue's stats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FairKeyBacklog {
    /// The key (`""`: items pushed without one to a queue whose `fair`
    /// setting is on).
    pub key: String,
    /// Items of the key not yet popped (exact while its items were
    /// pushed in sequence and none is leased or returned; an estimate
    /// otherwise).
    pub items: u64,
}

impl From<QueueSummary> for QueueStats {
    fn from(queue: QueueSummary) -> Self {
        QueueStats {
            queue: queue.name.as_str().to_string(),
            depth: queue.depth,
            leased: queue.leased,
            delayed: queue.delayed,
            grouped: queue.grouped,
            expired: queue.expired,
            waiting: queue.waiting,
            oldest_item_age_ms: queue.oldest_item_age_ms,
            paused: queue.paused,
            dead_letter: queue.dead_letter,
            fair_backlog: queue.fair_backlog.map(|keys| {
                keys.into_iter()
                    .map(|key| FairKeyBacklog {
                        key: key.key,
                        items: key.items,
                    })
                    .collect()
            }),
        }
    }
}

/// One receipt's outcome in a batch ack.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AckResult {
    /// The receipt as sent.
    pub receipt: String,
    /// `acked`, `unknown_receipt`, `lease_expired`,
    /// `receipt_queue_mismatch` or `invalid`.
    pub outcome: String,
}

/// The answer to a batch ack: one result per receipt, in order.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AckBatchAnswer {
    /// One per receipt sent.
    pub results: Vec<AckResult>,
}

/// The answer to a re-drive.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RedriveAnswer {
    /// Items moved back to the queues they came from.
    pub redriven: usize,
}
