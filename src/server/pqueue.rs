//! `/v1/pqueues/{queue}/...`: priority queues over HTTP.

use crate::server::error::{counted, counted_as};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::{ApiError, ApiPath, ErrorBody};
use super::error::{body_bytes, queue_name};
use super::fifo_routes::{PopParams, pop_limits, pop_outcome, queue_stats};
use super::items::{PoppedItem, PushAnswer, QueueStats, answers_json, items_response};
use super::pop_acks::with_acked;
use super::push::{DEDUP_ID_HEADER, dedup_id};
use super::state::AppState;
use crate::keys::{QueueKeys, QueueKind};
use crate::service::{End, PopLease, PopOptions, PushOptions, Riding, Store};

/// Query of a push: the priority, a signed 64-bit integer.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PushParams {
    /// The item's priority; lower pops first from `min`.
    pub priority: Option<String>,
    /// Invisible to pops for this long, in ms (absent: the queue's
    /// `delivery_delay_ms` setting, 0 unless set).
    pub delay_ms: Option<u64>,
    /// Refused: message groups are for FIFO queues (named here so the
    /// answer says so, not just "unknown field").
    pub group: Option<String>,
}

/// Query of a pop or peek: which end, and for a pop how long and how many.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EndParams {
    /// `min` or `max`.
    pub end: Option<String>,
    /// How long to wait for an item, in ms (pop only).
    #[serde(default)]
    pub wait_ms: u64,
    /// Most items to return (pop only).
    pub max: Option<usize>,
    /// Lease each item for this long instead of deleting it, in ms (pop
    /// only); settled through `/v1/pqueues/{queue}/ack|nack|extend/{receipt}`.
    pub lease_ms: Option<u64>,
    /// Receipts to ack before popping, comma-separated (pop only, at most
    /// 1,000); their outcomes come back in `hotq-acked`, in order.
    pub ack: Option<String>,
}

fn parse_end(end: Option<&str>) -> Result<End, ApiError> {
    match end {
        Some("min") => Ok(End::Front),
        Some("max") => Ok(End::Back),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_end",
            format!("end must be min or max, got {other:?}"),
        )),
        None => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_end",
            "end=min or end=max is required",
        )),
    }
}

/// The push's priority and delay, checked.
fn priority_push_params<S: Store>(
    state: &AppState<S>,
    params: Result<Query<PushParams>, QueryRejection>,
) -> Result<(i64, Option<u64>), ApiError> {
    let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
    let delay_ms = params
        .delay_ms
        .map(|delay_ms| state.hotq.check_delay_ms(delay_ms))
        .transpose()?;
    Ok((parse_priority(params)?, delay_ms))
}

fn parse_priority(params: PushParams) -> Result<i64, ApiError> {
    if params.group.is_some() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "groups_need_fifo",
            "message groups are for FIFO queues (/v1/queues/...), not priority queues",
        ));
    }
    let text = params.priority.ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_priority",
            "priority=N is required",
        )
    })?;
    text.parse::<i64>().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_priority",
            format!("priority must be a signed 64-bit integer, got {text:?}"),
        )
    })
}

/// `POST /v1/pqueues/{queue}/items?priority=N&delay_ms=`: pushes the body as
/// one item, delayed by `delay_ms` (absent: the queue's `delivery_delay_ms`).
#[utoipa::path(post, path = "/v1/pqueues/{queue}/items", tag = "priority", operation_id = "pq_push",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), PushParams,
        ("hotq-dedup-id" = Option<String>, Header, description = "Dedup id (1-128 bytes): a push naming an id pushed within the queue's dedup window stores nothing and answers 200 with duplicate: true"),
        ("hotq-retention-ms" = Option<u64>, Header, description = "Keep the item at most this long (1 ms to 365 days) unless delivered; default: the queue's retention_ms setting, none unless set"),
        ("hotq-fair-key" = Option<String>, Header, description = "Fairness key (1-128 of A-Z a-z 0-9 . _ - : @ /; 400 bad_fair_key otherwise): min pops serve the keys of one priority in proportion to their fair_weights (default 1 each), FIFO within a key; a lower priority still comes first")),
    request_body(content = [u8], content_type = "application/octet-stream", description = "The item's bytes"),
    responses((status = 201, description = "Pushed", body = PushAnswer),
        (status = 200, description = "A duplicate: nothing was written (duplicate: true)", body = PushAnswer),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn push<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<PushParams>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    counted(&queue, "pq_push", async {
        let name = queue_name(&queue)?;
        let (priority, delay_ms) = priority_push_params(&state, params)?;
        let dedup_id = headers
            .get(DEDUP_ID_HEADER)
            .map(|value| dedup_id(value.as_bytes()))
            .transpose()?;
        let terms = PqPushTerms {
            delay_ms,
            dedup_id,
            retention_ms: super::push::retention_ms(&headers)?,
            fair_key: super::push::fair_key(&headers)?,
        };
        let body = body_bytes(body)?;
        let answer = push_checked(&state, name, &body, priority, terms).await?;
        let status = if answer.duplicate == Some(true) {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        Ok((status, Json(answer)).into_response())
    })
    .await
}

/// How a priority push stores its item, each checked by the front end.
#[derive(Debug, Clone, Default)]
pub(crate) struct PqPushTerms {
    /// Invisible for this long (`None`: the queue's `delivery_delay_ms`).
    pub delay_ms: Option<u64>,
    /// Stored only if this id is not counting.
    pub dedup_id: Option<Vec<u8>>,
    /// Kept at most this long (`None`: the queue's `retention_ms`).
    pub retention_ms: Option<u64>,
    /// Served fairly with the other keys of its priority.
    pub fair_key: Option<String>,
}

/// Pushes one item of `priority` to the priority queue `name`, checked
/// (every front end's priority pushes).
pub(crate) async fn push_checked<S: Store>(
    state: &AppState<S>,
    name: crate::keys::QueueName,
    body: &[u8],
    priority: i64,
    terms: PqPushTerms,
) -> Result<PushAnswer, ApiError> {
    let PqPushTerms {
        delay_ms,
        dedup_id,
        retention_ms,
        fair_key,
    } = terms;
    // Checked before the queue is noted: a refused item names no queue.
    state.hotq.check_item(body)?;
    state.hotq.check_payload_sizes([body.len()])?;
    state.note_queue(QueueKind::Priority, &name);
    let options = PushOptions {
        delay_ms,
        retention_ms,
        item_bytes_max: None,
    };
    let pushed = state
        .hotq
        .push_priority(
            &name,
            body,
            priority,
            (dedup_id.as_deref(), fair_key.as_deref()),
            options,
        )
        .await?;
    Ok(PushAnswer {
        pushed: pushed.pushed,
        visible_at_ms: pushed.visible_at_ms,
        duplicate: (pushed.pushed == 0).then_some(true),
        duplicates: None,
    })
}

/// `POST /v1/pqueues/{queue}/pop?end=min|max&wait_ms=&max=&lease_ms=`:
/// with `lease_ms`, each item is leased (answered as a leased FIFO pop is,
/// its receipt tagged with this priority queue) and settled through
/// `/v1/pqueues/{queue}/ack|nack|extend/{receipt}`.
#[utoipa::path(post, path = "/v1/pqueues/{queue}/pop", tag = "priority", operation_id = "pq_pop",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), EndParams),
    responses((status = 200, description = "JSON when max > 1 or Accept names application/json; else the one item's bytes with hotq-* headers",
            content((Vec<PoppedItem> = "application/json"), ([u8] = "application/octet-stream")),
            headers(
                ("hotq-enqueued-at-ms" = u64, description = "Raw answer: when the item was pushed, ms since the epoch"),
                ("hotq-receipt" = String, description = "Raw answer, leased: the receipt"),
                ("hotq-delivery-count" = u32, description = "Raw answer, leased: this delivery's number"),
                ("hotq-lease-expires-at-ms" = u64, description = "Raw answer, leased: the lease's expiry"),
                ("hotq-dead-letter-from" = String, description = "Raw answer, dead letter: the queue it came from"),
                ("hotq-dead-letter-deliveries" = u32, description = "Raw answer, dead letter: deliveries it had"),
                ("hotq-acked" = String, description = "With ack: each receipt's outcome in order (acked, unknown_receipt, lease_expired, receipt_queue_mismatch, invalid), comma-separated; also on 204"),
            )),
        (status = 204, description = "Nothing came within wait_ms"),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pop<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<EndParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let result = counted_as(&queue, "pq_pop", pop_outcome, async {
        let name = queue_name(&queue)?;
        let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
        let end = parse_end(params.end.as_deref())?;
        let limits = Ok(Query(PopParams {
            lease_ms: None,
            wait_ms: params.wait_ms,
            max: params.max,
            path: None,
            ack: None,
        }));
        let (wait, max) = pop_limits(&state, limits)?;
        let lease_ms = params
            .lease_ms
            .map(|lease_ms| state.hotq.check_lease_ms(lease_ms))
            .transpose()?;
        let riding = params.ack.as_deref().map(Riding::parse).transpose()?;
        state.note_queue(QueueKind::Priority, &name);
        let keys = QueueKeys::of_kind(QueueKind::Priority, &name);
        // No lease named: the queue's default lease, as for a FIFO pop.
        let options = PopOptions {
            end,
            max,
            wait,
            lease: PopLease::named(lease_ms),
        };
        let popped = state.hotq.pop(&keys, options, riding).await?;
        Ok(((popped.items, popped.acked), max))
    })
    .await;
    result.map(|((items, acked), max)| {
        with_acked(items_response(items, answers_json(&headers, max)), acked)
    })
}

/// `GET /v1/pqueues/{queue}/peek?end=min|max`.
#[utoipa::path(get, path = "/v1/pqueues/{queue}/peek", tag = "priority", operation_id = "pq_peek",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), EndParams),
    responses((status = 200, description = "JSON when max > 1 or Accept names application/json; else the one item's bytes with hotq-* headers",
            content((Vec<PoppedItem> = "application/json"), ([u8] = "application/octet-stream")),
            headers(
                ("hotq-enqueued-at-ms" = u64, description = "Raw answer: when the item was pushed, ms since the epoch"),
                ("hotq-receipt" = String, description = "Raw answer, leased: the receipt"),
                ("hotq-delivery-count" = u32, description = "Raw answer, leased: this delivery's number"),
                ("hotq-lease-expires-at-ms" = u64, description = "Raw answer, leased: the lease's expiry"),
                ("hotq-dead-letter-from" = String, description = "Raw answer, dead letter: the queue it came from"),
                ("hotq-dead-letter-deliveries" = u32, description = "Raw answer, dead letter: deliveries it had"),
            )),
        (status = 204, description = "The queue is empty"),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn peek<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<EndParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    counted(&queue, "pq_peek", async {
        let name = queue_name(&queue)?;
        let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
        let end = parse_end(params.end.as_deref())?;
        let keys = QueueKeys::of_kind(QueueKind::Priority, &name);
        let item = state.hotq.peek(&keys, end).await?;
        Ok(items_response(
            item.into_iter().collect(),
            answers_json(&headers, 1),
        ))
    })
    .await
}

/// `GET /v1/pqueues/{queue}`: JSON stats.
#[utoipa::path(get, path = "/v1/pqueues/{queue}", tag = "priority", operation_id = "pq_stats",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "The queue's stats", body = QueueStats),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn stats<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    let name = queue_name(&queue)?;
    let stats = queue_stats(&state, &QueueKeys::of_kind(QueueKind::Priority, &name)).await?;
    Ok(Json(stats).into_response())
}
