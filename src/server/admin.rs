//! Administration over HTTP (see [`crate::admin`]): `GET /v1/queues`,
//! `POST /v1/queues/{queue}/purge`, `DELETE /v1/queues/{queue}`,
//! `GET /v1/queues/{queue}/leases`.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use super::fifo::{outcome, queue_name};
use crate::admin::{self, Dropped, LEASES_LIMIT_MAX, LIST_LIMIT_MAX};
use crate::keys::{QueueKeys, QueueKind};
use crate::lease::Receipt;
use crate::metrics::operation;
use crate::store::Store;

/// Query of a listing: `limit` (default 20, at most 100), `after` (the
/// `next` of the previous page), `kind` (`fifo`, the default, or `priority`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Most queues in the page.
    pub limit: Option<usize>,
    /// Continue after this queue.
    pub after: Option<String>,
    /// Which kind of queue.
    pub kind: Option<String>,
}

fn query<T>(params: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    params
        .map(|Query(params)| params)
        .map_err(|e| ApiError::bad_parameter(e.body_text()))
}

fn limit(limit: Option<usize>, default: usize, max: usize) -> Result<usize, ApiError> {
    let limit = limit.unwrap_or(default);
    if limit == 0 || limit > max {
        return Err(ApiError::bad_parameter(format!(
            "limit must be 1 to {max}, got {limit}"
        )));
    }
    Ok(limit)
}

/// `GET /v1/queues?limit=&after=&kind=`: 200 `{"queues": [{"queue",
/// "depth", "leased", "delayed", "waiting", "oldest_item_age_ms"}],
/// "next"}`, in name order; `next` is null on the last page.
pub async fn list<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    // Not counted per queue: it names none.
    async {
        let params = query(params)?;
        let limit = limit(params.limit, 20, LIST_LIMIT_MAX)?;
        let kind = match params.kind.as_deref() {
            None | Some("fifo") => QueueKind::Fifo,
            Some("priority") => QueueKind::Priority,
            Some(other) => {
                return Err(ApiError::bad_parameter(format!(
                    "kind must be fifo or priority, got {other:?}"
                )));
            }
        };
        let after = params.after.as_deref().map(queue_name).transpose()?;
        let (page, next) = admin::list(&state.store, kind, after.as_ref(), limit).await?;
        let queues: Vec<serde_json::Value> = page
            .iter()
            .map(|queue| {
                // This daemon's waiters in memory count too, as in a queue's stats.
                let memory = state
                    .coordinator
                    .memory_waiting(&QueueKeys::of_kind(queue.kind, &queue.name));
                json!({
                    "queue": queue.name.as_str(),
                    "depth": queue.depth,
                    "leased": queue.leased,
                    "delayed": queue.delayed,
                    "waiting": queue.waiting + memory as i64,
                    "oldest_item_age_ms": queue.oldest_item_age_ms,
                })
            })
            .collect();
        Ok(Json(json!({"queues": queues, "next": next})).into_response())
    }
    .await
}

fn dropped_json(dropped: &Dropped) -> serde_json::Value {
    json!({
        "items": dropped.items,
        "delayed": dropped.delayed,
        "leased": dropped.leased,
        "results": dropped.results,
        "done": dropped.done,
    })
}

/// `POST /v1/queues/{queue}/purge`: 200 `{"purged": n, "items", "delayed",
/// "done"}`: drops the visible and delayed items pushed before the call;
/// leased items stay leased. `done` is false when a bound left work (call
/// again).
pub async fn purge<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
) -> Result<Response, ApiError> {
    let result = async {
        let keys = QueueKeys::new(&queue_name(&queue)?);
        let dropped = admin::purge(&state.store, &keys).await?;
        let mut body = dropped_json(&dropped);
        body["purged"] = json!(dropped.items + dropped.delayed);
        Ok(Json(body).into_response())
    }
    .await;
    operation(&queue, "purge", outcome(&result));
    result
}

/// `DELETE /v1/queues/{queue}`: 200 `{"deleted": true, "items", "delayed",
/// "leased", "results"}`: the queue's items, delayed items, leases (their
/// receipts answer 404 `unknown_receipt` from now on), stored requests and
/// uncollected results, counters, settings and dedup ids are gone. 503
/// `queue_busy` when traffic kept it from finishing (call again).
pub async fn delete<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
) -> Result<Response, ApiError> {
    let result = async {
        let keys = QueueKeys::new(&queue_name(&queue)?);
        let dropped = admin::delete(&state.store, &keys).await?;
        if !dropped.done {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "queue_busy",
                format!(
                    "items kept arriving while the queue was deleted; dropped so far: {}",
                    dropped_json(&dropped)
                ),
            ));
        }
        let mut body = dropped_json(&dropped);
        body["deleted"] = json!(true);
        Ok(Json(body).into_response())
    }
    .await;
    operation(&queue, "delete", outcome(&result));
    result
}

/// Query of a lease listing: `limit` (default 100, at most 1,000), `after`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeasesParams {
    /// Most leases in the page.
    pub limit: Option<usize>,
    /// Continue after this receipt.
    pub after: Option<String>,
}

/// `GET /v1/queues/{queue}/leases?limit=&after=`: 200 `{"leases":
/// [{"receipt", "delivery_count", "lease_expires_at_ms",
/// "enqueued_at_ms"}], "next"}`, in receipt order.
pub async fn leases<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path(queue): Path<String>,
    params: Result<Query<LeasesParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let keys = QueueKeys::new(&queue_name(&queue)?);
        let params = query(params)?;
        let limit = limit(params.limit, 100, LEASES_LIMIT_MAX)?;
        let after = match params.after.as_deref() {
            None => None,
            Some(text) => Some(Receipt::parse(text).ok_or_else(|| {
                ApiError::bad_parameter(format!("after must be a receipt, got {text:?}"))
            })?),
        };
        let (page, next) = admin::leases(&state.store, &keys, after.as_ref(), limit).await?;
        let leases: Vec<serde_json::Value> = page
            .iter()
            .map(|lease| {
                json!({
                    "receipt": lease.receipt.to_string(),
                    "delivery_count": lease.delivery_count,
                    "lease_expires_at_ms": lease.expires_at_ms,
                    "enqueued_at_ms": lease.enqueued_at_ms,
                })
            })
            .collect();
        Ok(Json(json!({"leases": leases, "next": next})).into_response())
    }
    .await;
    operation(&queue, "leases", outcome(&result));
    result
}
