//! `/v1/pqueues/{queue}/ack|nack|extend/{receipt}`: settling the leases of
//! priority-queue pops (`POST /v1/pqueues/{queue}/pop?lease_ms=`) as FIFO
//! leases are settled. An expired or nacked item returns under its own
//! priority key; one out of deliveries goes to the FIFO queue `{queue}.dead`
//! (or the queue's stored dead-letter target). Receipts carry the tag of
//! the priority queue that issued them, so one settled on another queue
//! (or on the FIFO queue of the same name) is `receipt_queue_mismatch`.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;

use super::error::{ApiError, ApiPath, ErrorBody};
use super::leases::{
    ExtendAnswer, ExtendParams, NackAnswer, NackParams, ack_of, extend_of, nack_of,
};
use super::state::AppState;
use crate::keys::QueueKind;
use crate::service::Store;

/// `POST /v1/pqueues/{queue}/ack/{receipt}`: 204; the item is done.
#[utoipa::path(post, path = "/v1/pqueues/{queue}/ack/{receipt}", tag = "priority", operation_id = "pq_ack",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), ("receipt" = String, Path, description = "The receipt a leased priority pop answered (32 hex digits)")),
    responses((status = 204, description = "Acked: the item is done"),
        (status = 400, description = "receipt_queue_mismatch: the receipt was issued by another queue", body = ErrorBody),
        (status = 404, description = "unknown_receipt: the lease is lost (settled, returned by the timer, or never issued)", body = ErrorBody),
        (status = 409, description = "lease_expired: the lease is lost (expired, not yet returned)", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn ack<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, raw)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    ack_of(&state, QueueKind::Priority, &queue, &raw, "pq_ack").await
}

/// `POST /v1/pqueues/{queue}/nack/{receipt}?delay_ms=`: 200 with where the
/// item went, as a FIFO nack answers.
#[utoipa::path(post, path = "/v1/pqueues/{queue}/nack/{receipt}", tag = "priority", operation_id = "pq_nack",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), ("receipt" = String, Path, description = "The receipt a leased priority pop answered (32 hex digits)"), NackParams),
    responses((status = 200, description = "Where the item went: back under its priority (now or delayed), or dead-lettered", body = NackAnswer),
        (status = 400, description = "receipt_queue_mismatch: the receipt was issued by another queue", body = ErrorBody),
        (status = 404, description = "unknown_receipt: the lease is lost", body = ErrorBody),
        (status = 409, description = "lease_expired: the lease is lost", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn nack<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, raw)): ApiPath<(String, String)>,
    params: Result<Query<NackParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    nack_of(&state, QueueKind::Priority, &queue, &raw, params, "pq_nack").await
}

/// `POST /v1/pqueues/{queue}/extend/{receipt}?lease_ms=`: 200
/// `{"lease_expires_at_ms"}`, as a FIFO extend answers.
#[utoipa::path(post, path = "/v1/pqueues/{queue}/extend/{receipt}", tag = "priority", operation_id = "pq_extend",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), ("receipt" = String, Path, description = "The receipt a leased priority pop answered (32 hex digits)"), ExtendParams),
    responses((status = 200, description = "The lease's new expiry", body = ExtendAnswer),
        (status = 400, description = "receipt_queue_mismatch: the receipt was issued by another queue", body = ErrorBody),
        (status = 404, description = "unknown_receipt: the lease is lost", body = ErrorBody),
        (status = 409, description = "lease_expired: the lease is lost", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn extend<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, raw)): ApiPath<(String, String)>,
    params: Result<Query<ExtendParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    extend_of(
        &state,
        QueueKind::Priority,
        &queue,
        &raw,
        params,
        "pq_extend",
    )
    .await
}
