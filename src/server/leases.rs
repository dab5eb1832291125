//! `/v1/queues/{queue}/ack|nack|extend/{receipt}`, the batch ack
//! `/v1/queues/{queue}/ack`, and `/v1/queues/{queue}/redrive`: leases and
//! dead letters over HTTP.

use crate::server::error::counted;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ApiPath, ErrorBody};
use super::error::{body_bytes, queue_name};
use super::items::{AckBatchAnswer, AckResult, RedriveAnswer};
use super::state::AppState;
use crate::keys::{QueueKeys, QueueKind};
use crate::service::{REDRIVE_BATCH_MAX, Returned, Store};

pub(super) fn query<T>(params: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    params
        .map(|Query(params)| params)
        .map_err(|e| ApiError::bad_parameter(e.body_text()))
}

/// `POST /v1/queues/{queue}/ack/{receipt}`: 204; the item is done.
#[utoipa::path(post, path = "/v1/queues/{queue}/ack/{receipt}", tag = "leases",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), ("receipt" = String, Path, description = "The receipt a leased pop answered (32 hex digits)")),
    responses((status = 204, description = "Acked: the item is done"),
        (status = 404, description = "unknown_receipt: the lease is lost (settled, returned by the timer, or never issued)", body = ErrorBody),
        (status = 409, description = "lease_expired: the lease is lost (expired, not yet returned)", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn ack<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, raw)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    ack_of(&state, QueueKind::Fifo, &queue, &raw, "ack").await
}

/// An ack of receipt `raw` on `queue` of `kind`, counted as operation `op`
/// (FIFO and priority queues settle alike).
pub(super) async fn ack_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
    raw: &str,
    op: &'static str,
) -> Result<Response, ApiError> {
    counted(queue, op, async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        state.hotq.ack(&keys, raw).await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    })
    .await
}

pub use crate::service::ACK_BATCH_MAX;

/// `POST /v1/queues/{queue}/ack` with a JSON array of receipts: 200
/// `{"results":[{"receipt","outcome"}]}`, one per receipt in order, each
/// `acked`, `unknown_receipt`, `lease_expired`, `receipt_queue_mismatch`
/// (issued by another queue) or `invalid` (not a receipt). The acks share commits with the queue's other settles; a
/// receipt named twice is acked once (the second is `unknown_receipt`).
#[utoipa::path(post, path = "/v1/queues/{queue}/ack", tag = "leases",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    request_body(content = Vec<String>, description = "1 to 1,000 receipts"),
    responses((status = 200, description = "Each receipt's outcome, in order", body = AckBatchAnswer),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn ack_batch<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    counted(&queue, "ack_batch", async {
        let keys = QueueKeys::new(&queue_name(&queue)?);
        let raw: Vec<String> = serde_json::from_slice(&body_bytes(body)?).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_json",
                format!("the body must be a JSON array of receipts: {e}"),
            )
        })?;
        let raw: Vec<&str> = raw.iter().map(String::as_str).collect();
        let outcomes = state.hotq.ack_many(&keys, &raw).await?;
        let results = raw
            .iter()
            .zip(outcomes)
            .map(|(text, outcome)| AckResult {
                receipt: text.to_string(),
                outcome: outcome.word().to_string(),
            })
            .collect();
        Ok(Json(AckBatchAnswer { results }).into_response())
    })
    .await
}

/// Query of a nack.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct NackParams {
    /// Keep the item invisible for this long first, in ms (default 0).
    #[serde(default)]
    pub delay_ms: u64,
}

/// `POST /v1/queues/{queue}/nack/{receipt}?delay_ms=`: 200 with where the
/// item went: `{"outcome":"requeued"}`, `{"outcome":"delayed",
/// "visible_at_ms"}` or `{"outcome":"dead_lettered","dead_letter_queue"}`.
#[utoipa::path(post, path = "/v1/queues/{queue}/nack/{receipt}", tag = "leases",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), ("receipt" = String, Path, description = "The receipt a leased pop answered (32 hex digits)"), NackParams),
    responses((status = 200, description = "Where the item went", body = NackAnswer),
        (status = 404, description = "unknown_receipt: the lease is lost", body = ErrorBody),
        (status = 409, description = "lease_expired: the lease is lost", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn nack<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, raw)): ApiPath<(String, String)>,
    params: Result<Query<NackParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    nack_of(&state, QueueKind::Fifo, &queue, &raw, params, "nack").await
}

/// A nack of receipt `raw` on `queue` of `kind`, counted as operation `op`.
pub(super) async fn nack_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
    raw: &str,
    params: Result<Query<NackParams>, QueryRejection>,
    op: &'static str,
) -> Result<Response, ApiError> {
    counted(queue, op, async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let delay_ms = query(params)?.delay_ms;
        let answer = NackAnswer::from(state.hotq.nack(&keys, raw, delay_ms).await?);
        Ok(Json(answer).into_response())
    })
    .await
}

/// Where a nacked item went.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NackOutcome {
    /// Back in the queue, visible now.
    Requeued,
    /// Back in the queue once `visible_at_ms` has passed.
    Delayed,
    /// Its retention had ended: dropped (see the queue's `retention_ms`).
    Expired,
    /// Out of deliveries: in the dead-letter queue.
    DeadLettered,
}

/// The answer to a nack.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NackAnswer {
    /// Where the item went.
    pub outcome: NackOutcome,
    /// When a delayed item becomes visible, in ms since the epoch.
    #[schema(required = true)]
    pub visible_at_ms: Option<u64>,
    /// The queue a dead-lettered item went to.
    #[schema(required = true)]
    pub dead_letter_queue: Option<String>,
}

impl From<Returned> for NackAnswer {
    fn from(returned: Returned) -> NackAnswer {
        match returned {
            Returned::Requeued => NackAnswer {
                outcome: NackOutcome::Requeued,
                visible_at_ms: None,
                dead_letter_queue: None,
            },
            Returned::Delayed { visible_at_ms } => NackAnswer {
                outcome: NackOutcome::Delayed,
                visible_at_ms: Some(visible_at_ms),
                dead_letter_queue: None,
            },
            Returned::Expired => NackAnswer {
                outcome: NackOutcome::Expired,
                visible_at_ms: None,
                dead_letter_queue: None,
            },
            Returned::DeadLettered { queue } => NackAnswer {
                outcome: NackOutcome::DeadLettered,
                visible_at_ms: None,
                dead_letter_queue: Some(queue.as_str().to_string()),
            },
        }
    }
}

/// The answer to an extend.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExtendAnswer {
    /// The lease's new expiry, in ms since the epoch.
    pub lease_expires_at_ms: u64,
}

/// Query of an extend.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExtendParams {
    /// The new lease, from now, in ms.
    pub lease_ms: Option<u64>,
}

/// `POST /v1/queues/{queue}/extend/{receipt}?lease_ms=`: 200
/// `{"lease_expires_at_ms"}`; the lease now expires `lease_ms` from now.
#[utoipa::path(post, path = "/v1/queues/{queue}/extend/{receipt}", tag = "leases",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), ("receipt" = String, Path, description = "The receipt a leased pop answered (32 hex digits)"), ExtendParams),
    responses((status = 200, description = "The lease's new expiry", body = ExtendAnswer),
        (status = 404, description = "unknown_receipt: the lease is lost", body = ErrorBody),
        (status = 409, description = "lease_expired: the lease is lost", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn extend<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, raw)): ApiPath<(String, String)>,
    params: Result<Query<ExtendParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    extend_of(&state, QueueKind::Fifo, &queue, &raw, params, "extend").await
}

/// An extend of receipt `raw` on `queue` of `kind`, counted as operation `op`.
pub(super) async fn extend_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
    raw: &str,
    params: Result<Query<ExtendParams>, QueryRejection>,
    op: &'static str,
) -> Result<Response, ApiError> {
    counted(queue, op, async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let lease_ms = query(params)?
            .lease_ms
            .ok_or_else(|| ApiError::bad_parameter("lease_ms is required"))?;
        let lease_expires_at_ms = state.hotq.extend(&keys, raw, lease_ms).await?;
        let answer = ExtendAnswer {
            lease_expires_at_ms,
        };
        Ok(Json(answer).into_response())
    })
    .await
}

/// Query of a re-drive.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RedriveParams {
    /// Most items to move (default and cap 1,000).
    pub max: Option<usize>,
}

/// `POST /v1/queues/{queue}/redrive?max=`: 200 `{"redriven": n}`;
/// moves up to `max` items from the front of a dead-letter queue (by role:
/// see [`crate::queue::dead_letters`]) back to the queues they came from, as
/// fresh items. 409 `not_dead_letter_queue` for any other queue.
#[utoipa::path(post, path = "/v1/queues/{queue}/redrive", tag = "leases",
    params(("queue" = String, Path, description = "A dead-letter queue: its name ends in .dead, or some queue names it as its dead_letter_queue"), RedriveParams),
    responses((status = 200, description = "Items moved back", body = RedriveAnswer),
        (status = 409, description = "not_dead_letter_queue: no queue names this one as its dead-letter queue and its name does not end in .dead", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn redrive<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<RedriveParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    counted(&queue, "redrive", async {
        let name = queue_name(&queue)?;
        let answer = redrive_checked(&state, &name, query(params)?.max).await?;
        Ok(Json(answer).into_response())
    })
    .await
}

/// Moves up to `max` (default and cap [`REDRIVE_BATCH_MAX`]) items of the
/// dead-letter queue `name` back where they came from (every front end's
/// redrives); 409 `not_dead_letter_queue` for any other queue.
pub(crate) async fn redrive_checked<S: Store>(
    state: &AppState<S>,
    name: &crate::keys::QueueName,
    max: Option<usize>,
) -> Result<RedriveAnswer, ApiError> {
    let max = max.unwrap_or(REDRIVE_BATCH_MAX);
    if max == 0 || max > REDRIVE_BATCH_MAX {
        return Err(ApiError::bad_parameter(format!(
            "max must be 1 to {REDRIVE_BATCH_MAX}, got {max}"
        )));
    }
    if !state
        .hotq
        .is_dead_letter_queue(&QueueKeys::new(name))
        .await?
    {
        // 409: the queue exists (every queue does) but is not in the
        // role a redrive needs.
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_dead_letter_queue",
            format!(
                "{name} is not a dead-letter queue: no queue names it as its \
                 dead_letter_queue and its name does not end in .dead"
            ),
        ));
    }
    let moved = state.hotq.redrive(name, max).await?;
    Ok(RedriveAnswer { redriven: moved })
}
