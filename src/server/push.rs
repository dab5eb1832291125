//! `POST /v1/queues/{queue}/items` and `items:batch`: pushes to FIFO
//! queues, delayed or not, deduplicated by id or not (see [`crate::dedup`]).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use super::fifo::{body_bytes, check_delay_ms, check_item, outcome, queue_name};
use crate::dedup::{PushItem, check_id, push};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::metrics::operation;
use crate::queue::PUSH_BATCH_MAX;
use crate::store::Store;

/// Header carrying a push's dedup id.
pub const DEDUP_ID_HEADER: &str = "hotq-dedup-id";

/// Query of a push: an optional `delay_ms` (absent: the queue's delivery delay).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushParams {
    /// Keep the items invisible for this long, in ms.
    pub delay_ms: Option<u64>,
}

fn dedup_id(raw: &[u8]) -> Result<Vec<u8>, ApiError> {
    check_id(raw)
        .map_err(|message| ApiError::new(StatusCode::BAD_REQUEST, "bad_dedup_id", message))?;
    Ok(raw.to_vec())
}

/// `POST /v1/queues/{queue}/items?delay_ms=` with an optional
/// `hotq-dedup-id` header: pushes the body as one item. 201, or 200 with
/// `"duplicate": true` when the id was pushed within the dedup window.
pub async fn push_one<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<PushParams>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let delay_ms = push_delay(&state, params)?;
        let dedup_id = headers
            .get(DEDUP_ID_HEADER)
            .map(|value| dedup_id(value.as_bytes()))
            .transpose()?;
        let body = body_bytes(body)?;
        check_item(&body)?;
        let item = PushItem {
            payload: body.to_vec(),
            dedup_id,
        };
        push_items(&state, name, &[item], delay_ms).await
    }
    .await;
    operation(&queue, "push", outcome(&result));
    result
}

/// `POST /v1/queues/{queue}/items:batch?delay_ms=`: a JSON array of
/// items, each a base64 string or `{"item": base64, "dedup_id": text}`,
/// pushed in one commit, in order; all or nothing (duplicates left out).
pub async fn push_batch<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<PushParams>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let delay_ms = push_delay(&state, params)?;
        let items = decode_batch(&body_bytes(body)?)?;
        push_items(&state, name, &items, delay_ms).await
    }
    .await;
    operation(&queue, "push_batch", outcome(&result));
    result
}

fn push_delay<S: Store>(
    state: &AppState<S>,
    params: Result<Query<PushParams>, QueryRejection>,
) -> Result<Option<u64>, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
    params
        .delay_ms
        .map(|delay_ms| check_delay_ms(state, delay_ms))
        .transpose()
}

/// Pushes checked items. 201 `{"pushed": n}` (plus `visible_at_ms` when
/// delayed, and `duplicates`, the positions left out, when any were);
/// 200 with `"duplicate": true` when every item was a duplicate.
async fn push_items<S: Store>(
    state: &AppState<S>,
    name: QueueName,
    items: &[PushItem],
    delay_ms: Option<u64>,
) -> Result<Response, ApiError> {
    state.note_queue(QueueKind::Fifo, &name);
    let keys = QueueKeys::new(&name);
    let pushed = push(
        &state.store,
        &keys,
        items,
        delay_ms,
        &state.settings_defaults,
    )
    .await?;
    if let Some(visible_at_ms) = pushed.visible_at_ms {
        state.coordinator.schedule(visible_at_ms);
    }
    let stored = pushed.stored();
    let mut body = json!({"pushed": stored, "duplicate": stored == 0});
    if let Some(visible_at_ms) = pushed.visible_at_ms {
        body["visible_at_ms"] = json!(visible_at_ms);
    }
    if stored < items.len() {
        let positions: Vec<usize> = pushed
            .duplicate
            .iter()
            .enumerate()
            .filter(|(_, duplicate)| **duplicate)
            .map(|(position, _)| position)
            .collect();
        body["duplicates"] = json!(positions);
    }
    let status = if stored == 0 {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(body)).into_response())
}

/// One element of a batch push.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum BatchItem {
    Plain(String),
    Object(BatchObject),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchObject {
    item: String,
    dedup_id: Option<String>,
}

/// Parses and checks a batch body: a JSON array of 1 to 1,000 items.
pub fn decode_batch(body: &[u8]) -> Result<Vec<PushItem>, ApiError> {
    let encoded: Vec<BatchItem> = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_json",
            format!(
                "expected a JSON array of base64 strings or {{\"item\", \"dedup_id\"}} objects: {e}"
            ),
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
        .into_iter()
        .enumerate()
        .map(|(i, element)| {
            let (text, id) = match element {
                BatchItem::Plain(text) => (text, None),
                BatchItem::Object(object) => (object.item, object.dedup_id),
            };
            let payload = BASE64.decode(&text).map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_base64",
                    format!("item {i} is not valid base64: {e}"),
                )
            })?;
            check_item(&payload)?;
            let dedup_id = id.map(|id| dedup_id(id.as_bytes())).transpose()?;
            Ok(PushItem { payload, dedup_id })
        })
        .collect()
}
