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
use crate::queue::{Item, PUSH_BATCH_MAX, Queue};
use crate::staging::direct::read_end;
use crate::store::{Store, Transaction, decode_counter};

/// Header carrying an item's enqueue time (ms since the epoch).
pub const ENQUEUED_AT_HEADER: &str = "hotq-enqueued-at-ms";

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
/// was asked for, a JSON array of base64 items otherwise.
pub fn items_response(items: Vec<Item>, as_array: bool) -> Response {
    if items.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    if as_array {
        let encoded: Vec<String> = items
            .iter()
            .map(|item| BASE64.encode(&item.payload))
            .collect();
        return (StatusCode::OK, Json(encoded)).into_response();
    }
    let item = items.into_iter().next().expect("non-empty");
    let mut response = (StatusCode::OK, item.payload).into_response();
    response.headers_mut().insert(
        ENQUEUED_AT_HEADER,
        HeaderValue::from_str(&item.enqueued_at_ms.to_string()).expect("digits are a valid header"),
    );
    response
}

/// The outcome label of a call.
pub fn outcome<T>(result: &Result<T, ApiError>) -> &'static str {
    if result.is_ok() { "ok" } else { "error" }
}

/// `POST /v1/queues/{queue}/items`: pushes the body as one item.
pub async fn push<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let body = body_bytes(body)?;
        check_item(&body)?;
        state.note_queue(QueueKind::Fifo, &name);
        Queue::new(state.store.clone(), name).push(&body).await?;
        Ok((StatusCode::CREATED, Json(json!({"pushed": 1}))).into_response())
    }
    .await;
    operation(&queue, "push", outcome(&result));
    result
}

/// `POST /v1/queues/{queue}/items:batch`: a JSON array of base64 items,
/// pushed in one commit, in order; all or nothing.
pub async fn push_batch<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let payloads = decode_batch(&body_bytes(body)?)?;
        state.note_queue(QueueKind::Fifo, &name);
        Queue::new(state.store.clone(), name)
            .push_batch(&payloads)
            .await?;
        Ok((StatusCode::CREATED, Json(json!({"pushed": payloads.len()}))).into_response())
    }
    .await;
    operation(&queue, "push_batch", outcome(&result));
    result
}

/// Parses and checks a batch body: a JSON array of 1 to 1,000 base64 strings.
pub fn decode_batch(body: &[u8]) -> Result<Vec<Vec<u8>>, ApiError> {
    let encoded: Vec<String> = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_json",
            format!("expected a JSON array of base64 strings: {e}"),
        )
    })?;
    if encoded.is_empty() || encoded.len() > PUSH_BATCH_MAX {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_batch",
            format!(
                "a batch holds 1 to {PUSH_BATCH_MAX} items, got {}",
                encoded.len()
            ),
        ));
    }
    encoded
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let payload = BASE64.decode(text).map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_base64",
                    format!("item {i} is not valid base64: {e}"),
                )
            })?;
            check_item(&payload)?;
            Ok(payload)
        })
        .collect()
}

/// `POST /v1/queues/{queue}/pop?wait_ms=&max=`.
pub async fn pop<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<PopParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let path = match &params {
            Ok(Query(params)) => params.path.clone(),
            Err(_) => None,
        };
        let (wait, max) = pop_limits(&state, params)?;
        state.note_queue(QueueKind::Fifo, &name);
        let keys = QueueKeys::new(&name);
        let items = match path.as_deref() {
            None | Some("staged") => {
                state
                    .coordinator
                    .pop_many(&keys, End::Front, max, wait)
                    .await?
            }
            Some("direct") if wait.is_zero() && max == 1 => {
                state.coordinator.pop_recipe(&keys).await?
            }
            Some("direct") => {
                return Err(ApiError::bad_parameter(
                    "path=direct takes neither wait_ms nor max > 1",
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

/// Depth, waiting requests and oldest-item age of one queue.
pub async fn queue_stats<S: Store>(
    store: &S,
    keys: &QueueKeys,
) -> Result<serde_json::Value, ApiError> {
    let txn = store.begin()?;
    let depth = decode_counter(txn.get(&keys.depth(), true).await?.as_deref());
    let waiting = decode_counter(txn.get(&keys.waiting(), true).await?.as_deref());
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
        let stats = queue_stats(&state.store, &QueueKeys::new(&name)).await?;
        Ok(Json(stats).into_response())
    }
    .await;
    operation(&queue, "stats", outcome(&result));
    result
}
