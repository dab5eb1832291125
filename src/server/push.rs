//! `POST /v1/queues/{queue}/items` and `items:batch`: pushes to FIFO
//! queues, delayed or not, deduplicated by id or not (see [`crate::service::Hotq::push`]).

use crate::server::error::counted;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::error::{ApiError, ApiPath, ErrorBody};
use super::error::{body_bytes, queue_name};
use super::items::PushAnswer;
use super::state::AppState;
use crate::keys::{QueueKind, QueueName};
use crate::service::{self, Hotq, PUSH_BATCH_MAX, PushItem, PushOptions, Pushed, Store};

/// Header carrying a push's dedup id.
pub const DEDUP_ID_HEADER: &str = "hotq-dedup-id";
/// Header carrying a push's retention in ms (overrides the queue's
/// `retention_ms` setting for these items).
pub const RETENTION_MS_HEADER: &str = "hotq-retention-ms";

/// Header carrying a push's fairness key (every item of a batch that
/// names none).
pub const FAIR_KEY_HEADER: &str = "hotq-fair-key";

/// A push's fairness key from its `hotq-fair-key` header, checked (1-128
/// of A-Z a-z 0-9 . _ - : @ /; 400 `bad_fair_key` otherwise); `None`
/// without the header.
pub(crate) fn fair_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(FAIR_KEY_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| {
        service::Error::BadFairKey(format!(
            "{FAIR_KEY_HEADER} may hold only A-Z a-z 0-9 . _ - : @ /, got {:?}",
            String::from_utf8_lossy(value.as_bytes())
        ))
    })?;
    Ok(Some(service::check_fair_key(text.to_string())?))
}

/// A push's retention from its `hotq-retention-ms` header, checked: a
/// whole number of ms from 1 to a year; `None` without the header.
pub(crate) fn retention_ms(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(RETENTION_MS_HEADER) else {
        return Ok(None);
    };
    service::check_retention_ms(value.to_str().ok().and_then(|text| text.parse().ok()))
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_parameter(format!(
                "{RETENTION_MS_HEADER} is a whole number of ms from 1 to {}, got {:?}",
                service::RETENTION_MS_MAX,
                String::from_utf8_lossy(value.as_bytes())
            ))
        })
}

/// Query of a push: an optional `delay_ms` (absent: the queue's delivery delay).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PushParams {
    /// Keep the items invisible for this long, in ms (default: the queue's
    /// `delivery_delay_ms` setting, 0 unless set).
    pub delay_ms: Option<u64>,
    /// The items' message group (1-128 of A-Z a-z 0-9 . _ - : @ /): in
    /// order within the group, one of the group out at a time. For a
    /// batch, the group of the items that name none.
    pub group: Option<String>,
}

/// A message group key, checked (1-128 of A-Z a-z 0-9 . _ - : @ /).
pub(crate) fn group_key(raw: String) -> Result<String, ApiError> {
    Ok(service::check_group(raw)?)
}

/// A dedup id from the `hotq-dedup-id` header: 1 to 128 printable ASCII
/// characters, as the spec states (a header may carry tabs and opaque
/// bytes, which an id written in a header is not meant to hold; a batch's
/// JSON ids may be any text).
pub(crate) fn dedup_id(raw: &[u8]) -> Result<Vec<u8>, ApiError> {
    service::check_dedup_id(raw)?;
    if let Some(byte) = raw.iter().find(|byte| !(b' '..=b'~').contains(*byte)) {
        return Err(service::Error::BadDedupId(format!(
            "a dedup id in a header is printable ASCII (space to ~), got byte 0x{byte:02x}"
        ))
        .into());
    }
    Ok(raw.to_vec())
}

/// `POST /v1/queues/{queue}/items?delay_ms=` with an optional
/// `hotq-dedup-id` header: pushes the body as one item. 201, or 200 with
/// `"duplicate": true` when the id was pushed within the dedup window.
#[utoipa::path(post, path = "/v1/queues/{queue}/items", tag = "fifo", operation_id = "push",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), PushParams,
        ("hotq-dedup-id" = Option<String>, Header, description = "Dedup id (1-128 bytes): a push naming an id pushed within the queue's dedup window stores nothing and answers 200 with duplicate: true"),
        ("hotq-retention-ms" = Option<u64>, Header, description = "Keep the item at most this long (1 ms to 365 days) unless delivered; default: the queue's retention_ms setting, none unless set"),
        ("hotq-fair-key" = Option<String>, Header, description = "Fairness key (1-128 of A-Z a-z 0-9 . _ - : @ /; 400 bad_fair_key otherwise): pops serve the queue's keys in proportion to their fair_weights (default 1 each), FIFO within a key")),
    request_body(content = [u8], content_type = "application/octet-stream", description = "The item's bytes (1 B to payload_bytes_max, default 1 MiB)"),
    responses((status = 201, description = "Pushed", body = PushAnswer),
        (status = 200, description = "A duplicate: nothing was written (duplicate: true)", body = PushAnswer),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn push_one<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<PushParams>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    counted(&queue, "push", async {
        let name = queue_name(&queue)?;
        let (delay_ms, group) = fifo_push_params(&state, params)?;
        let dedup_id = headers
            .get(DEDUP_ID_HEADER)
            .map(|value| dedup_id(value.as_bytes()))
            .transpose()?;
        let retention_ms = retention_ms(&headers)?;
        let fair_key = fair_key(&headers)?;
        let body = body_bytes(body)?;
        state.hotq.check_item(&body)?;
        let item = PushItem {
            payload: body.to_vec(),
            dedup_id,
            group,
            fair_key,
        };
        push_items(&state, name, &[item], delay_ms, retention_ms).await
    })
    .await
}

/// `POST /v1/queues/{queue}/items:batch?delay_ms=`: a JSON array of
/// items, each a base64 string or `{"item": base64, "dedup_id": text}`,
/// pushed in one commit, in order; all or nothing (duplicates left out).
#[utoipa::path(post, path = "/v1/queues/{queue}/items:batch", tag = "fifo",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), PushParams,
        ("hotq-retention-ms" = Option<u64>, Header, description = "Keep the items at most this long (1 ms to 365 days) unless delivered; default: the queue's retention_ms setting, none unless set"),
        ("hotq-fair-key" = Option<String>, Header, description = "Fairness key of the items that name none (1-128 of A-Z a-z 0-9 . _ - : @ /; 400 bad_fair_key otherwise): pops serve the queue's keys in proportion to their fair_weights (default 1 each), FIFO within a key")),
    request_body(content = Vec<BatchItem>, description = "1 to 1,000 items: base64 strings, or objects with a dedup id"),
    responses((status = 201, description = "Pushed, all in one commit; duplicates lists the positions left out", body = PushAnswer),
        (status = 200, description = "Every item was a duplicate: nothing was written (duplicate: true)", body = PushAnswer),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn push_batch<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<PushParams>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    counted(&queue, "push_batch", async {
        let name = queue_name(&queue)?;
        let (delay_ms, group) = fifo_push_params(&state, params)?;
        let retention_ms = retention_ms(&headers)?;
        let fair_key = fair_key(&headers)?;
        let mut items = decode_batch(&state.hotq, &body_bytes(body)?)?;
        for item in &mut items {
            if item.group.is_none() {
                item.group.clone_from(&group);
            }
            if item.fair_key.is_none() {
                item.fair_key.clone_from(&fair_key);
            }
        }
        push_items(&state, name, &items, delay_ms, retention_ms).await
    })
    .await
}

/// The push's delay and group, checked.
fn fifo_push_params<S: Store>(
    state: &AppState<S>,
    params: Result<Query<PushParams>, QueryRejection>,
) -> Result<(Option<u64>, Option<String>), ApiError> {
    let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
    let delay_ms = params
        .delay_ms
        .map(|delay_ms| state.hotq.check_delay_ms(delay_ms))
        .transpose()?;
    Ok((delay_ms, params.group.map(group_key).transpose()?))
}

/// Pushes checked items. 201 `{"pushed": n}` (plus `visible_at_ms` when
/// delayed, and `duplicates`, the positions left out, when any were);
/// 200 with `"duplicate": true` when every item was a duplicate.
async fn push_items<S: Store>(
    state: &AppState<S>,
    name: QueueName,
    items: &[PushItem],
    delay_ms: Option<u64>,
    retention_ms: Option<u64>,
) -> Result<Response, ApiError> {
    let body = push_checked(state, name, items, delay_ms, retention_ms).await?;
    let status = if body.pushed == 0 {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(body)).into_response())
}

/// Pushes checked items to the FIFO queue `name` in one commit (every
/// front end's pushes): what was stored, when it becomes visible, which
/// positions were duplicates. `retention_ms` (checked) overrides the
/// queue's setting.
pub(crate) async fn push_checked<S: Store>(
    state: &AppState<S>,
    name: QueueName,
    items: &[PushItem],
    delay_ms: Option<u64>,
    retention_ms: Option<u64>,
) -> Result<PushAnswer, ApiError> {
    // Checked before the queue is noted: a refused push names no queue.
    let lens = items.iter().map(|item| item.payload.len());
    state.hotq.check_payload_sizes(lens)?;
    state.note_queue(QueueKind::Fifo, &name);
    let options = PushOptions {
        delay_ms,
        retention_ms,
        item_bytes_max: None,
    };
    let pushed = state.hotq.push(&name, items, options).await?;
    Ok(push_answer(pushed, items.len()))
}

/// The answer to a push of `asked` items: `duplicates` only when some were.
pub(crate) fn push_answer(pushed: Pushed, asked: usize) -> PushAnswer {
    let stored = pushed.pushed;
    PushAnswer {
        pushed: stored,
        visible_at_ms: pushed.visible_at_ms,
        duplicate: Some(stored == 0),
        duplicates: (stored < asked).then_some(pushed.duplicates),
    }
}

/// One element of a batch push: the item's bytes in base64, or an object
/// naming a dedup id too.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum BatchItem {
    /// The item's bytes, base64.
    Plain(String),
    /// The item with a dedup id.
    Object(BatchObject),
}

/// A batch element with a dedup id, a group or a fairness key.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchObject {
    /// The item's bytes, base64.
    pub item: String,
    /// Dedup id (1-128 bytes); null or absent: not deduplicated.
    pub dedup_id: Option<String>,
    /// Message group (1-128 of A-Z a-z 0-9 . _ - : @ /); null or absent:
    /// the batch's `group` parameter, if any.
    pub group: Option<String>,
    /// Fairness key (1-128 of A-Z a-z 0-9 . _ - : @ /); null or absent:
    /// the batch's `hotq-fair-key` header, if any.
    pub fair_key: Option<String>,
}

/// Parses and checks a batch body: a JSON array of 1 to 1,000 items.
pub fn decode_batch<S: Store>(hotq: &Hotq<S>, body: &[u8]) -> Result<Vec<PushItem>, ApiError> {
    let encoded: Vec<BatchItem> = serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_json",
            format!(
                "expected a JSON array of base64 strings or {{\"item\", \"dedup_id\", \"group\", \"fair_key\"}} objects: {e}"
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
            let (text, id, group, fair_key) = match element {
                BatchItem::Plain(text) => (text, None, None, None),
                BatchItem::Object(object) => {
                    (object.item, object.dedup_id, object.group, object.fair_key)
                }
            };
            let payload = BASE64.decode(&text).map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_base64",
                    format!("item {i} is not valid base64: {e}"),
                )
            })?;
            hotq.check_item(&payload)?;
            let dedup_id = id.map(|id| dedup_id(id.as_bytes())).transpose()?;
            let group = group.map(group_key).transpose()?;
            let fair_key = fair_key.map(service::check_fair_key).transpose()?;
            Ok(PushItem {
                payload,
                dedup_id,
                group,
                fair_key,
            })
        })
        .collect()
}
