//! Administration over HTTP (see [`crate::service::Hotq::list_queues`] and its neighbours): `GET /v1/queues`,
//! `POST /v1/queues/{queue}/purge`, `DELETE /v1/queues/{queue}`,
//! `GET /v1/queues/{queue}/leases`.

use crate::server::error::counted;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ApiPath, ErrorBody, ErrorDetail};
use super::error::{outcome, queue_name};
use super::items::QueueStats;
use super::state::AppState;
use crate::keys::{QueueKeys, QueueKind};
use crate::metrics::operation;
use crate::service::{LEASES_LIMIT_MAX, LIST_LIMIT_MAX, LeaseCursor, LeaseSummary, Store};

/// Query of a listing: `limit` (default 20, at most 100), `after` (the
/// `next` of the previous page), `kind` (`fifo`, the default, or `priority`).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Most queues in the page.
    pub limit: Option<usize>,
    /// Continue after this queue.
    pub after: Option<String>,
    /// Which kind of queue.
    pub kind: Option<String>,
}

/// A query string's parameters, or 400 `bad_parameter` saying why not.
pub(crate) fn query<T>(params: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    params
        .map(|Query(params)| params)
        .map_err(|e| ApiError::bad_parameter(e.body_text()))
}

/// A page's `limit` (`default` when absent), or 400 past `1..=max`.
pub(crate) fn limit(limit: Option<usize>, default: usize, max: usize) -> Result<usize, ApiError> {
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
#[utoipa::path(get, path = "/v1/queues", tag = "admin", operation_id = "list_queues",
    params(ListParams),
    responses((status = 200, description = "One page of queues, in name order", body = QueueList),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
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
        let page = list_page(&state, kind, after.as_ref(), limit).await?;
        Ok(Json(page).into_response())
    }
    .await
}

/// One page of the queues of `kind` after `after`, at most `limit` (every
/// front end's listings; `limit` checked by the caller).
pub(crate) async fn list_page<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    after: Option<&crate::keys::QueueName>,
    limit: usize,
) -> Result<QueueList, ApiError> {
    let (page, next) = state.hotq.list_queues(kind, after, limit).await?;
    let queues = page.into_iter().map(QueueStats::from).collect();
    Ok(QueueList { queues, next })
}

/// One page of `GET /v1/queues`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueueList {
    /// The queues of the page, in name order, each as its stats.
    pub queues: Vec<QueueStats>,
    /// The `after` of the next page; null on the last page.
    #[schema(required = true)]
    pub next: Option<String>,
}

/// The answer to a purge.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PurgeAnswer {
    /// Items dropped: `items` + `delayed`.
    pub purged: u64,
    /// Visible items dropped.
    pub items: u64,
    /// Delayed items dropped.
    pub delayed: u64,
    /// Leased items dropped (always 0: a purge leaves leases alone).
    pub leased: u64,
    /// Uncollected results dropped (always 0 for a purge).
    pub results: u64,
    /// False when a bound left work: call again.
    pub done: bool,
}

/// The answer to a delete (200), and its counts in a 503 `queue_busy`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteAnswer {
    /// True on a 200; false in a 503 `queue_busy` answer, whose counts say
    /// what was dropped before pushes kept it from finishing.
    pub deleted: bool,
    /// Visible items dropped.
    pub items: u64,
    /// Delayed items dropped.
    pub delayed: u64,
    /// Leased items dropped; their receipts answer `unknown_receipt` from now on.
    pub leased: u64,
    /// Items handed to a stored request but not yet collected, dropped.
    pub results: u64,
    /// As `deleted`.
    pub done: bool,
}

/// The 503 answer of a delete that pushes kept from finishing: the error
/// shape, with what it dropped so far beside it, so a client can count.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteBusy {
    /// `queue_busy`.
    pub error: ErrorDetail,
    /// What was dropped before it gave up (`deleted` and `done` false).
    #[serde(flatten)]
    pub dropped: DeleteAnswer,
}

fn queue_busy(dropped: DeleteAnswer) -> Response {
    let message = format!(
        "items kept arriving while the queue was deleted (call again); dropped so far: items {}, delayed {}, leased {}, results {}",
        dropped.items, dropped.delayed, dropped.leased, dropped.results
    );
    let body = DeleteBusy {
        error: ErrorDetail {
            code: "queue_busy".into(),
            message,
        },
        dropped,
    };
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

/// `POST /v1/queues/{queue}/purge`: 200 `{"purged": n, "items", "delayed",
/// "done"}`: drops the visible and delayed items pushed before the call;
/// leased items stay leased. `done` is false when a bound left work (call
/// again).
#[utoipa::path(post, path = "/v1/queues/{queue}/purge", tag = "admin",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "Visible and delayed items dropped; leases kept", body = PurgeAnswer),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn purge<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    purge_of(&state, QueueKind::Fifo, &queue).await
}

/// `POST /v1/pqueues/{queue}/purge`: as [`purge`], for a priority queue.
#[utoipa::path(post, path = "/v1/pqueues/{queue}/purge", tag = "admin", operation_id = "pq_purge",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "Visible and delayed items dropped; leases kept", body = PurgeAnswer),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_purge<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    purge_of(&state, QueueKind::Priority, &queue).await
}

async fn purge_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
) -> Result<Response, ApiError> {
    counted(queue, op_name(kind, "purge"), async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        Ok(Json(purge_checked(state, &keys).await?).into_response())
    })
    .await
}

/// Drops `keys`' visible and delayed items pushed before the call (every
/// front end's purges).
pub(crate) async fn purge_checked<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
) -> Result<PurgeAnswer, ApiError> {
    let dropped = state.hotq.purge(keys).await?;
    Ok(PurgeAnswer {
        purged: dropped.items + dropped.delayed,
        items: dropped.items,
        delayed: dropped.delayed,
        leased: dropped.leased,
        results: dropped.results,
        done: dropped.done,
    })
}

/// The operation label of `op` on a queue of `kind` (priority ops are `pq_*`).
pub(crate) fn op_name(kind: QueueKind, op: &'static str) -> &'static str {
    match (kind, op) {
        (QueueKind::Fifo, op) => op,
        (QueueKind::Priority, "purge") => "pq_purge",
        (QueueKind::Priority, "delete") => "pq_delete",
        (QueueKind::Priority, "leases") => "pq_leases",
        (QueueKind::Priority, "settings_get") => "pq_settings_get",
        (QueueKind::Priority, "settings_put") => "pq_settings_put",
        (QueueKind::Priority, _) => "pq_other",
    }
}

/// `DELETE /v1/queues/{queue}`: 200 `{"deleted": true, "items", "delayed",
/// "leased", "results"}`: the queue's items, delayed items, leases (their
/// receipts answer 404 `unknown_receipt` from now on), stored requests and
/// uncollected results, counters, settings and dedup ids are gone. 503
/// `queue_busy` when traffic kept it from finishing (call again).
#[utoipa::path(delete, path = "/v1/queues/{queue}", tag = "admin", operation_id = "delete_queue",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "The queue and all it held are gone", body = DeleteAnswer),
        (status = 503, description = "queue_busy: pushes kept the delete from finishing within 5 s; the error, with what was dropped so far; call again", body = DeleteBusy),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn delete<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    delete_of(&state, QueueKind::Fifo, &queue).await
}

/// `DELETE /v1/pqueues/{queue}`: as [`delete`], for a priority queue.
#[utoipa::path(delete, path = "/v1/pqueues/{queue}", tag = "admin", operation_id = "pq_delete",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue")),
    responses((status = 200, description = "The queue and all it held are gone", body = DeleteAnswer),
        (status = 503, description = "queue_busy: pushes kept the delete from finishing within 5 s; the error, with what was dropped so far; call again", body = DeleteBusy),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_delete<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Response, ApiError> {
    delete_of(&state, QueueKind::Priority, &queue).await
}

async fn delete_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
) -> Result<Response, ApiError> {
    let result = async {
        let name = queue_name(queue)?;
        let answer = delete_checked(state, kind, &name).await?;
        if !answer.done {
            return Ok(queue_busy(answer));
        }
        Ok(Json(answer).into_response())
    }
    .await;
    // A busy delete answers its counts, but it did not do what was asked.
    let label = match &result {
        Ok(response) if response.status() == StatusCode::SERVICE_UNAVAILABLE => "error",
        other => outcome(other),
    };
    operation(queue, op_name(kind, "delete"), label);
    result
}

/// Deletes the queue `name` of `kind` and all it holds (every front end's
/// deletes); `done` false when pushes kept it from finishing (call again).
pub(crate) async fn delete_checked<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    name: &crate::keys::QueueName,
) -> Result<DeleteAnswer, ApiError> {
    // The one delete path: it forgets every memory of the queue here.
    let dropped = state.delete_queue(&QueueKeys::of_kind(kind, name)).await?;
    Ok(DeleteAnswer {
        deleted: dropped.done,
        items: dropped.items,
        delayed: dropped.delayed,
        leased: dropped.leased,
        results: dropped.results,
        done: dropped.done,
    })
}

/// Query of a lease listing: `limit` (default 100, at most 1,000), `after`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LeasesParams {
    /// Most leases in the page.
    pub limit: Option<usize>,
    /// Continue where an earlier page's `next` says (opaque).
    pub after: Option<String>,
}

/// `GET /v1/queues/{queue}/leases?limit=&after=`: 200 `{"leases":
/// [{"receipt", "delivery_count", "lease_expires_at_ms",
/// "enqueued_at_ms", "group"}], "next"}`: the leases at their issued
/// expiry in expiry order, then the extended ones (see
/// [`crate::service::Hotq::leases`]: every lease that lives through the listing is
/// listed). A lease is one row of the store-wide due index, so a page
/// reads at most 100,000 of its rows and may end short (even empty) with
/// a `next`; `next` is null once the listing is complete.
#[utoipa::path(get, path = "/v1/queues/{queue}/leases", tag = "admin", operation_id = "list_leases",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), LeasesParams),
    responses((status = 200, description = "One page of the leases in flight: those at their issued expiry in expiry order, then the extended ones; every lease that lives through the listing is listed, one extended meanwhile perhaps twice. A page may end short, even empty, with a `next`", body = LeaseList),
        (status = 400, description = "bad_parameter: `after` is not the `next` of an earlier page, or `limit` is out of range", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn leases<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<LeasesParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    leases_of(&state, QueueKind::Fifo, &queue, params).await
}

/// `GET /v1/pqueues/{queue}/leases?limit=&after=`: as [`leases`], for a
/// priority queue (its leased pops).
#[utoipa::path(get, path = "/v1/pqueues/{queue}/leases", tag = "admin", operation_id = "pq_list_leases",
    params(("queue" = String, Path, description = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue"), LeasesParams),
    responses((status = 200, description = "One page of the leases in flight: those at their issued expiry in expiry order, then the extended ones; every lease that lives through the listing is listed, one extended meanwhile perhaps twice. A page may end short, even empty, with a `next`", body = LeaseList),
        (status = 400, description = "bad_parameter: `after` is not the `next` of an earlier page, or `limit` is out of range", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_leases<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<LeasesParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    leases_of(&state, QueueKind::Priority, &queue, params).await
}

async fn leases_of<S: Store>(
    state: &AppState<S>,
    kind: QueueKind,
    queue: &str,
    params: Result<Query<LeasesParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    counted(queue, op_name(kind, "leases"), async {
        let keys = QueueKeys::of_kind(kind, &queue_name(queue)?);
        let params = query(params)?;
        let page = leases_page(state, &keys, params.after.as_deref(), params.limit).await?;
        Ok(Json(page).into_response())
    })
    .await
}

/// One page of `keys`' leases in flight, at most `limit` (default 100,
/// checked) after the cursor `after` (every front end's lease listings).
pub(crate) async fn leases_page<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
    after: Option<&str>,
    limit_asked: Option<usize>,
) -> Result<LeaseList, ApiError> {
    let limit = limit(limit_asked, 100, LEASES_LIMIT_MAX)?;
    let after = match after {
        None => None,
        Some(text) => Some(LeaseCursor::parse(text).ok_or_else(|| {
            ApiError::bad_parameter(format!(
                "after must be the next of an earlier page, got {text:?}"
            ))
        })?),
    };
    let (page, next) = state.hotq.leases(keys, after.as_ref(), limit).await?;
    let leases: Vec<LeaseInfo> = page.iter().map(LeaseInfo::from).collect();
    let next = next.map(|next| next.to_string());
    Ok(LeaseList { leases, next })
}

impl From<&LeaseSummary> for LeaseInfo {
    fn from(lease: &LeaseSummary) -> Self {
        let preview = crate::console::preview::Preview::of(&lease.payload);
        LeaseInfo {
            receipt: lease.receipt.to_string(),
            delivery_count: lease.delivery_count,
            lease_expires_at_ms: lease.expires_at_ms,
            enqueued_at_ms: lease.enqueued_at_ms,
            group: lease.group.clone(),
            size: lease.size,
            payload: preview.text,
            encoding: preview.encoding.to_string(),
            truncated: preview.truncated,
            sqs: crate::console::sqs_view::SqsMessageInfo::of(&lease.payload),
        }
    }
}

/// One lease in flight.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LeaseInfo {
    /// The receipt, as the pop answered it (ack, nack, extend take it).
    pub receipt: String,
    /// Deliveries so far, this one included (0 for a lease older than the
    /// due index, whose item details are not kept with it).
    pub delivery_count: u32,
    /// When the lease expires, in ms since the epoch.
    pub lease_expires_at_ms: u64,
    /// When the item was pushed, in ms since the epoch (0 as for `delivery_count`).
    pub enqueued_at_ms: u64,
    /// The item's message group; null when it has none.
    #[schema(required = true)]
    pub group: Option<String>,
    /// The payload's size in bytes (0 as for `delivery_count`).
    pub size: usize,
    /// The payload's first bytes: as text when the payload is UTF-8, else
    /// hex (as an item listing shows it; empty as for `delivery_count`).
    pub payload: String,
    /// `text` or `hex`.
    pub encoding: String,
    /// True when `payload` shows only the first bytes.
    pub truncated: bool,
    /// A message sent through SQS, as SQS shows it (see the item
    /// listing's `sqs`); null for other items.
    // An object (`SqsMessageInfo`'s fields: message_id, body,
    // body_truncated, attributes, message_group_id,
    // message_deduplication_id, sequence_number) or null.
    #[schema(required = true, value_type = Option<Object>)]
    pub sqs: Option<crate::console::sqs_view::SqsMessageInfo>,
}

/// One page of `GET /v1/queues/{queue}/leases`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LeaseList {
    /// The leases of the page: at their issued expiry in expiry order,
    /// then extended ones.
    pub leases: Vec<LeaseInfo>,
    /// The `after` of the next page; null on the last page.
    #[schema(required = true)]
    pub next: Option<String>,
}
