//! `/v1/pqueues/{queue}/...`: priority queues over HTTP.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use super::fifo::{
    PopParams, body_bytes, check_item, check_lease_ms, items_response, outcome, pop_limits,
    pop_outcome, queue_name, queue_stats,
};
use crate::envelope::End;
use crate::keys::{QueueKeys, QueueKind};
use crate::metrics::operation;
use crate::priority::PriorityQueue;
use crate::store::Store;

/// Query of a push: the priority, a signed 64-bit integer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushParams {
    /// The item's priority; lower pops first from `min`.
    pub priority: Option<String>,
}

/// Query of a pop or peek: which end, and for a pop how long and how many.
#[derive(Debug, Deserialize)]
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

fn parse_priority(params: Result<Query<PushParams>, QueryRejection>) -> Result<i64, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
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

/// `POST /v1/pqueues/{queue}/items?priority=N`: pushes the body as one item.
pub async fn push<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<PushParams>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let priority = parse_priority(params)?;
        let body = body_bytes(body)?;
        check_item(&body)?;
        state.note_queue(QueueKind::Priority, &name);
        PriorityQueue::new(state.store.clone(), name)
            .push(&body, priority)
            .await?;
        Ok((StatusCode::CREATED, Json(json!({"pushed": 1}))).into_response())
    }
    .await;
    operation(&queue, "pq_push", outcome(&result));
    result
}

/// `POST /v1/pqueues/{queue}/pop?end=min|max&wait_ms=&max=&lease_ms=`.
pub async fn pop<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<EndParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
        let end = parse_end(params.end.as_deref())?;
        let limits = Ok(Query(PopParams {
            lease_ms: None,
            wait_ms: params.wait_ms,
            max: params.max,
            path: None,
        }));
        let (wait, max) = pop_limits(&state, limits)?;
        let lease_ms = params
            .lease_ms
            .map(|lease_ms| check_lease_ms(&state, lease_ms))
            .transpose()?;
        state.note_queue(QueueKind::Priority, &name);
        let keys = QueueKeys::of_kind(QueueKind::Priority, &name);
        let items = state
            .coordinator
            .pop_leased(&keys, end, max, wait, lease_ms.unwrap_or(0))
            .await?;
        Ok((items, max))
    }
    .await;
    operation(&queue, "pq_pop", pop_outcome(&result));
    result.map(|(items, max)| items_response(items, max > 1))
}

/// `GET /v1/pqueues/{queue}/peek?end=min|max`.
pub async fn peek<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<EndParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(&queue)?;
        let Query(params) = params.map_err(|e| ApiError::bad_parameter(e.body_text()))?;
        let end = parse_end(params.end.as_deref())?;
        let queue = PriorityQueue::new(state.store.clone(), name);
        let item = match end {
            End::Front => queue.peek_min().await?,
            End::Back => queue.peek_max().await?,
        };
        Ok(items_response(item.into_iter().collect(), false))
    }
    .await;
    operation(&queue, "pq_peek", outcome(&result));
    result
}

/// `GET /v1/pqueues/{queue}`: JSON stats.
pub async fn stats<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
) -> Result<Response, ApiError> {
    let name = queue_name(&queue)?;
    let stats = queue_stats(&state, &QueueKeys::of_kind(QueueKind::Priority, &name)).await?;
    Ok(Json(stats).into_response())
}
