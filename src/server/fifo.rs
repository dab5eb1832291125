//! `/v1/queues/{queue}/...`: FIFO queues over HTTP.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use crate::envelope::{End, PAYLOAD_SIZE_MAX, now_ms};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::metrics::operation;
use crate::queue::read_end;
use crate::queue::{Item, Queue};
use crate::store::{Store, Transaction, decode_counter};

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

/// Validates a queue name from the path.
pub fn queue_name(raw: &str) -> Result<QueueName, ApiError> {
    QueueName::new(raw)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_queue_name", e.to_string()))
}

/// A request body, or the error for a body that was refused.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "body_too_large"
        } else {
            "bad_body"
        };
        ApiError::new(status, code, rejection.body_text())
    })
}

/// Checks one item's size.
pub fn check_item(payload: &[u8]) -> Result<(), ApiError> {
    if payload.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "empty_item",
            "an item must hold at least one byte",
        ));
    }
    if payload.len() > PAYLOAD_SIZE_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "item_too_large",
            format!(
                "item of {} bytes exceeds the limit of {PAYLOAD_SIZE_MAX} bytes",
                payload.len()
            ),
        ));
    }
    Ok(())
}

/// Query of a pop: `wait_ms` (default 0) and `max` (default 1).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopParams {
    /// How long to wait for an item, in ms.
    #[serde(default)]
    pub wait_ms: u64,
    /// Most items to return.
    pub max: Option<usize>,
    /// `staged` (the default: direct pop, then a request on conflict) or
    /// `direct` (FoundationDB's recipe as written: retry conflicts with
    /// backoff, never register; for comparison — it needs `wait_ms=0`).
    pub path: Option<String>,
    /// Lease each item for this long instead of deleting it, in ms.
    pub lease_ms: Option<u64>,
}

/// Checks a `lease_ms` (pop, extend): 1 to the configured maximum.
pub fn check_lease_ms<S: Store>(state: &AppState<S>, lease_ms: u64) -> Result<u64, ApiError> {
    let max = state.config.leases.lease_max_ms;
    if lease_ms == 0 || lease_ms > max {
        return Err(ApiError::bad_parameter(format!(
            "lease_ms must be 1 to {max}, got {lease_ms}"
        )));
    }
    Ok(lease_ms)
}

/// Checks a `delay_ms` (push, nack): 0 to the configured maximum.
pub fn check_delay_ms<S: Store>(state: &AppState<S>, delay_ms: u64) -> Result<u64, ApiError> {
    let max = state.config.leases.delay_max_ms;
    if delay_ms > max {
        return Err(ApiError::bad_parameter(format!(
            "delay_ms must be 0 to {max}, got {delay_ms}"
        )));
    }
    Ok(delay_ms)
}

/// Checks a pop's parameters against the configured caps.
pub fn pop_limits<S: Store>(
    state: &AppState<S>,
    params: Result<Query<PopParams>, QueryRejection>,
) -> Result<(Duration, usize), ApiError> {
    let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
    if params.wait_ms > state.config.wait_max_ms {
        return Err(ApiError::bad_parameter(format!(
            "wait_ms must be at most {}, got {}",
            state.config.wait_max_ms, params.wait_ms
        )));
    }
    let max = params.max.unwrap_or(1);
    if max == 0 || max > state.config.pop_max_items {
        return Err(ApiError::bad_parameter(format!(
            "max must be 1 to {}, got {max}",
            state.config.pop_max_items
        )));
    }
    Ok((Duration::from_millis(params.wait_ms), max))
}

/// The answer to a pop or peek: 204 when empty, the item's bytes when one
/// was asked for, a JSON array otherwise: of base64 strings, or for leased
/// items of objects `{"item", "receipt", "delivery_count", "lease_expires_at_ms"}`.
pub fn items_response(items: Vec<Item>, as_array: bool) -> Response {
    if items.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    if as_array {
        if items.iter().any(|item| item.lease.is_some()) {
            let objects: Vec<serde_json::Value> = items.iter().map(item_object).collect();
            return (StatusCode::OK, Json(objects)).into_response();
        }
        let encoded: Vec<String> = items
            .iter()
            .map(|item| BASE64.encode(&item.payload))
            .collect();
        return (StatusCode::OK, Json(encoded)).into_response();
    }
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
    let mut response = (StatusCode::OK, item.payload).into_response();
    for (name, value) in headers {
        // Digits, hex and queue names (A-Z a-z 0-9 . _ -) are valid header values.
        let value = HeaderValue::from_str(&value).expect("a valid header value");
        response.headers_mut().insert(name, value);
    }
    response
}

/// One leased item of a JSON array answer.
fn item_object(item: &Item) -> serde_json::Value {
    let mut object = json!({
        "item": BASE64.encode(&item.payload),
        "enqueued_at_ms": item.enqueued_at_ms,
    });
    if let Some(lease) = &item.lease {
        object["receipt"] = json!(lease.receipt.to_string());
        object["delivery_count"] = json!(lease.delivery_count);
        object["lease_expires_at_ms"] = json!(lease.expires_at_ms);
    }
    if let Some(dead) = &item.dead_letter {
        object["dead_letter_from"] = json!(dead.queue);
        object["dead_letter_deliveries"] = json!(dead.deliveries);
    }
    object
}

/// The outcome label of a call.
pub fn outcome<T>(result: &Result<T, ApiError>) -> &'static str {
    if result.is_ok() { "ok" } else { "error" }
}

/// `POST /v1/queues/{queue}/pop?wait_ms=&max=`.
pub async fn pop<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<PopParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let (path, lease_ms) = match &params {
            Ok(Query(params)) => (params.path.clone(), params.lease_ms),
            Err(_) => (None, None),
        };
        let (wait, max) = pop_limits(&state, params)?;
        let lease_ms = lease_ms
            .map(|lease_ms| check_lease_ms(&state, lease_ms))
            .transpose()?;
        state.note_queue(QueueKind::Fifo, &name);
        let keys = QueueKeys::new(&name);
        let items = match path.as_deref() {
            None | Some("staged") => {
                let lease_ms = match lease_ms {
                    Some(lease_ms) => lease_ms,
                    None => super::settings::default_lease_ms(&state, &keys).await?,
                };
                state
                    .coordinator
                    .pop_leased(&keys, End::Front, max, wait, lease_ms)
                    .await?
            }
            Some("direct") if wait.is_zero() && max == 1 && lease_ms.is_none() => {
                state.coordinator.pop_recipe(&keys).await?
            }
            Some("direct") => {
                return Err(ApiError::bad_parameter(
                    "path=direct takes neither wait_ms, nor max > 1, nor lease_ms",
                ));
            }
            Some(other) => {
                return Err(ApiError::bad_parameter(format!(
                    "path must be staged or direct, got {other:?}"
                )));
            }
        };
        Ok((items, max))
    }
    .await;
    operation(&queue, "pop", pop_outcome(&result));
    // Asking for more than one item always answers with an array.
    result.map(|(items, max)| items_response(items, max > 1))
}

/// The outcome label of a pop.
pub fn pop_outcome<T>(result: &Result<(Vec<T>, usize), ApiError>) -> &'static str {
    match result {
        Ok((items, _)) if items.is_empty() => "empty",
        Ok(_) => "ok",
        Err(_) => "error",
    }
}

/// `GET /v1/queues/{queue}/peek`: the first item, not taken.
pub async fn peek<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let item = Queue::new(state.store.clone(), name).peek().await?;
        Ok(items_response(item.into_iter().collect(), false))
    }
    .await;
    operation(&queue, "peek", outcome(&result));
    result
}

/// Depth, waiting requests (in the store, and in this daemon's memory
/// line), leased and delayed items and oldest-item age of one queue.
pub async fn queue_stats<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
) -> Result<serde_json::Value, ApiError> {
    let txn = state.store.begin()?;
    let depth = decode_counter(txn.get(&keys.depth(), true).await?.as_deref());
    let waiting = decode_counter(txn.get(&keys.waiting(), true).await?.as_deref())
        + state.coordinator.memory_waiting(keys) as i64;
    let leased = decode_counter(txn.get(&keys.leased(), true).await?.as_deref());
    let delayed = decode_counter(txn.get(&keys.delayed_count(), true).await?.as_deref());
    let oldest = read_end(&txn, keys, End::Front, 1, true).await?;
    let oldest_age_ms = match keys.kind() {
        QueueKind::Fifo => oldest
            .first()
            .map(|item| now_ms().saturating_sub(item.enqueued_at_ms)),
        // The front of a priority queue is its lowest priority, not its oldest item.
        QueueKind::Priority => None,
    };
    Ok(json!({
        "queue": keys.name().as_str(),
        "depth": depth,
        "waiting": waiting,
        "leased": leased,
        "delayed": delayed,
        "oldest_item_age_ms": oldest_age_ms,
    }))
}

/// `GET /v1/queues/{queue}`: JSON stats.
pub async fn stats<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let stats = queue_stats(&state, &QueueKeys::new(&name)).await?;
        Ok(Json(stats).into_response())
    }
    .await;
    operation(&queue, "stats", outcome(&result));
    result
}
