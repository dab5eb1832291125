//! `/v1/pqueues/{queue}/ack|nack|extend/{receipt}`: settling the leases of
//! priority-queue pops (`POST /v1/pqueues/{queue}/pop?lease_ms=`) as FIFO
//! leases are settled. An expired or nacked item returns under its own
//! priority key; one out of deliveries goes to the FIFO queue `{queue}.dead`
//! (or the queue's stored dead-letter target).

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use super::fifo::{check_delay_ms, check_lease_ms, outcome, queue_name};
use super::leases::{ExtendParams, NackParams};
use crate::keys::{QueueKeys, QueueKind};
use crate::lease::Receipt;
use crate::metrics::operation;
use crate::store::Store;

fn keys(queue: &str) -> Result<QueueKeys, ApiError> {
    Ok(QueueKeys::of_kind(QueueKind::Priority, &queue_name(queue)?))
}

fn receipt(raw: &str) -> Result<Receipt, ApiError> {
    Receipt::parse(raw).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_receipt",
            format!("{raw:?} is not a receipt (32 hex digits)"),
        )
    })
}

fn query<T>(params: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    params
        .map(|Query(params)| params)
        .map_err(|e| ApiError::bad_parameter(e.body_text()))
}

/// `POST /v1/pqueues/{queue}/ack/{receipt}`: 204; the item is done.
pub async fn ack<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path((queue, raw)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let result = async {
        state
            .coordinator
            .ack(&keys(&queue)?, &receipt(&raw)?)
            .await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    operation(&queue, "pq_ack", outcome(&result));
    result
}

/// `POST /v1/pqueues/{queue}/nack/{receipt}?delay_ms=`: 204; the item
/// returns now or after the delay (or is dead-lettered).
pub async fn nack<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path((queue, raw)): Path<(String, String)>,
    params: Result<Query<NackParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let delay_ms = check_delay_ms(&state, query(params)?.delay_ms)?;
        state
            .coordinator
            .nack(&keys(&queue)?, &receipt(&raw)?, delay_ms)
            .await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    operation(&queue, "pq_nack", outcome(&result));
    result
}

/// `POST /v1/pqueues/{queue}/extend/{receipt}?lease_ms=`: 204.
pub async fn extend<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    Path((queue, raw)): Path<(String, String)>,
    params: Result<Query<ExtendParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let result = async {
        let lease_ms = query(params)?
            .lease_ms
            .ok_or_else(|| ApiError::bad_parameter("lease_ms is required"))?;
        let lease_ms = check_lease_ms(&state, lease_ms)?;
        state
            .coordinator
            .extend(&keys(&queue)?, &receipt(&raw)?, lease_ms)
            .await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }
    .await;
    operation(&queue, "pq_extend", outcome(&result));
    result
}
