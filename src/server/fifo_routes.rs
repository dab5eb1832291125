//! `/v1/queues/{queue}/...`: FIFO queues over HTTP.

use crate::server::error::{counted, counted_as};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::{ApiError, ApiPath, ErrorBody};
use super::pop_acks::with_acked;
use super::state::AppState;
use crate::keys::{QueueKeys, QueueKind};
use crate::service::{End, PopAnswer, PopLease, PopOptions, Riding, Store};

use super::items::QueueStats;
use super::items::{PoppedItem, answers_json, items_response};

use super::error::queue_name;

/// How a pop is done, as its `path` query names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PopPath {
    /// hotq's protocol (the default): a direct attempt on an uncontended
    /// queue, else a wait in the line served by fulfill rounds.
    Staged,
    /// FoundationDB's recipe as written: retry conflicts with backoff,
    /// never wait in line; for comparison. It takes `wait_ms=0`, `max=1`,
    /// no lease and no ack.
    Direct,
}

/// Query of a pop: `wait_ms` (default 0) and `max` (default 1).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PopParams {
    /// How long to wait for an item, in ms.
    #[serde(default)]
    pub wait_ms: u64,
    /// Most items to return.
    pub max: Option<usize>,
    /// `staged` (the default) or `direct`: see [`PopPath`].
    pub path: Option<PopPath>,
    /// Lease each item for this long instead of deleting it, in ms.
    pub lease_ms: Option<u64>,
    /// Receipts to ack before popping, comma-separated (at most 1,000);
    /// their outcomes come back in `hotq-acked`, in order.
    pub ack: Option<String>,
}

/// Checks a pop's parameters against the configured caps.
pub fn pop_limits<S: Store>(
    state: &AppState<S>,
    params: Result<Query<PopParams>, QueryRejection>,
) -> Result<(Duration, usize), ApiError> {
    let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
    Ok(state.hotq.check_pop(params.wait_ms, params.max)?)
}

/// `POST /v1/queues/{queue}/pop?wait_ms=&max=&lease_ms=`.
#[utoipa::path(post, path = "/v1/queues/{queue}/pop", tag = "fifo",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), PopParams),
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
                ("hotq-group" = String, description = "Raw answer: the item's message group, when it has one"),
            )),
        (status = 204, description = "Nothing came within wait_ms"),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pop<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<PopParams>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let result = counted_as(&queue, "pop", pop_outcome, async {
        let name = queue_name(&queue)?;
        let (path, lease_ms, ack) = match &params {
            Ok(Query(params)) => (params.path, params.lease_ms, params.ack.clone()),
            Err(_) => (None, None, None),
        };
        let (wait, max) = pop_limits(&state, params)?;
        let lease_ms = lease_ms
            .map(|lease_ms| state.hotq.check_lease_ms(lease_ms))
            .transpose()?;
        let riding = ack.as_deref().map(Riding::parse).transpose()?;
        state.note_queue(QueueKind::Fifo, &name);
        let keys = QueueKeys::new(&name);
        let popped = match path.unwrap_or(PopPath::Staged) {
            PopPath::Staged => {
                let options = PopOptions {
                    end: End::Front,
                    max,
                    wait,
                    lease: PopLease::named(lease_ms),
                };
                state.hotq.pop(&keys, options, riding).await?
            }
            // An empty `ack=` names no receipt: nothing rides.
            PopPath::Direct
                if wait.is_zero()
                    && max == 1
                    && lease_ms.is_none()
                    && riding.as_ref().is_none_or(Riding::is_empty) =>
            {
                let items = state.hotq.pop_recipe(&keys).await?;
                PopAnswer { items, acked: None }
            }
            PopPath::Direct => {
                return Err(ApiError::bad_parameter(
                    "path=direct takes neither wait_ms, nor max > 1, nor lease_ms, nor receipts to ack",
                ));
            }
        };
        Ok(((popped.items, popped.acked), max))
    })
    .await;
    result.map(|((items, acked), max)| {
        with_acked(items_response(items, answers_json(&headers, max)), acked)
    })
}

/// The outcome label of a pop.
pub fn pop_outcome<T, A>(result: &Result<((Vec<T>, A), usize), ApiError>) -> &'static str {
    match result {
        Ok(((items, _), _)) if items.is_empty() => "empty",
        Ok(_) => "ok",
        Err(_) => "error",
    }
}

/// `GET /v1/queues/{queue}/peek`: the first item, not taken.
#[utoipa::path(get, path = "/v1/queues/{queue}/peek", tag = "fifo",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "JSON when max > 1 or Accept names application/json; else the one item's bytes with hotq-* headers",
            content((Vec<PoppedItem> = "application/json"), ([u8] = "application/octet-stream")),
            headers(
                ("hotq-enqueued-at-ms" = u64, description = "Raw answer: when the item was pushed, ms since the epoch"),
                ("hotq-receipt" = String, description = "Raw answer, leased: the receipt"),
                ("hotq-delivery-count" = u32, description = "Raw answer, leased: this delivery's number"),
                ("hotq-lease-expires-at-ms" = u64, description = "Raw answer, leased: the lease's expiry"),
                ("hotq-dead-letter-from" = String, description = "Raw answer, dead letter: the queue it came from"),
                ("hotq-dead-letter-deliveries" = u32, description = "Raw answer, dead letter: deliveries it had"),
                ("hotq-group" = String, description = "Raw answer: the item's message group, when it has one"),
            )),
        (status = 204, description = "The queue is empty"),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn peek<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    counted(&queue, "peek", async {
        let name = queue_name(&queue)?;
        let item = state.hotq.peek(&QueueKeys::new(&name), End::Front).await?;
        Ok(items_response(
            item.into_iter().collect(),
            answers_json(&headers, 1),
        ))
    })
    .await
}

/// Depth, waiting requests (in the store, and in this daemon's memory
/// line), leased and delayed items and oldest-item age of one queue.
pub async fn queue_stats<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
) -> Result<serde_json::Value, ApiError> {
    let stats = QueueStats::from(state.hotq.queue_stats(keys).await?);
    Ok(serde_json::to_value(stats).expect("stats serialize"))
}

/// `GET /v1/queues/{queue}`: JSON stats.
#[utoipa::path(get, path = "/v1/queues/{queue}", tag = "fifo",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "The queue's stats", body = QueueStats),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn stats<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    counted(&queue, "stats", async {
        let name = queue_name(&queue)?;
        let stats = queue_stats(&state, &QueueKeys::new(&name)).await?;
        Ok(Json(stats).into_response())
    })
    .await
}
