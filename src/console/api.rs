//! The API calls the console added (each usable by scripts, documented in
//! the OpenAPI spec): browse a queue's items and groups, delete one item,
//! pause and resume a queue, and this daemon's push and pop counts.

use crate::server::error::counted;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::browse::{self, GROUPS_LIMIT_MAX, ITEM_ID_HEX_LEN_MAX, ITEMS_LIMIT_MAX};
use super::preview::Preview;
use crate::keys::{QueueKeys, QueueKind};
use crate::server::admin_routes::{limit, query};
use crate::server::error::{ApiError, ApiPath, ErrorBody, queue_name};
use crate::server::state::AppState;
use crate::service::{Item, Store};

const QUEUE_PARAM: &str = "Queue name: 1 to 128 of A-Z a-z 0-9 . _ -, not starting with ., plus .dead for a dead-letter queue";

/// The refusal of `value` as the item id `param`.
fn not_an_id(param: &str, value: &str) -> ApiError {
    ApiError::bad_parameter(format!(
        "{param} must be an item id (hex, 2 to {ITEM_ID_HEX_LEN_MAX} digits), got {value:?}"
    ))
}

/// The operation label of `op` on a queue of `kind` (priority ops are `pq_*`).
fn op_label(kind: QueueKind, fifo: &'static str, priority: &'static str) -> &'static str {
    match kind {
        QueueKind::Fifo => fifo,
        QueueKind::Priority => priority,
    }
}

/// Query of an item listing: `limit` (default 50, at most 100), `after`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ItemsParams {
    /// Most items in the page.
    pub limit: Option<usize>,
    /// Continue after this item id (the `next` of the previous page).
    pub after: Option<String>,
}

/// One visible item, as a listing shows it (nothing is taken).
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ItemInfo {
    /// The item's id: names it for `DELETE .../items/{id}` and `after`.
    pub id: String,
    /// When the item was pushed, in ms since the epoch.
    pub enqueued_at_ms: u64,
    /// The payload's size in bytes.
    pub size: usize,
    /// The payload's first bytes: as text when the payload is UTF-8, else hex.
    pub payload: String,
    /// `text` or `hex`.
    pub encoding: String,
    /// True when `payload` shows only the first bytes.
    pub truncated: bool,
    /// Deliveries under a lease so far (nacks and expiries brought it back).
    pub deliveries: u32,
    /// The item's message group; null when it has none.
    #[schema(required = true)]
    pub group: Option<String>,
    /// The queue a dead-lettered item came from; null otherwise.
    #[schema(required = true)]
    pub dead_letter_from: Option<String>,
    /// Deliveries a dead-lettered item had when it died; null otherwise.
    #[schema(required = true)]
    pub dead_letter_deliveries: Option<u32>,
    /// The priority a dead-lettered item had in the priority queue it came
    /// from (a redrive returns it there); null from a FIFO queue, and for
    /// items not dead-lettered.
    #[schema(required = true)]
    pub dead_letter_from_priority: Option<i64>,
    /// A priority queue's item's priority; null for FIFO items.
    #[schema(required = true)]
    pub priority: Option<i64>,
    /// An item sent through SQS: its message as SQS shows it (body,
    /// attributes, group; not the stored envelope); null for other items.
    // An object (`SqsMessageInfo`'s fields: message_id, body,
    // body_truncated, attributes, message_group_id,
    // message_deduplication_id, sequence_number) or null.
    #[schema(required = true, value_type = Option<Object>)]
    pub sqs: Option<super::sqs_view::SqsMessageInfo>,
}

impl ItemInfo {
    fn of(keys: &QueueKeys, item: &Item) -> ItemInfo {
        let preview = Preview::of(&item.payload);
        ItemInfo {
            id: browse::item_id(keys, &item.key),
            enqueued_at_ms: item.enqueued_at_ms,
            size: item.len(),
            payload: preview.text,
            encoding: preview.encoding.to_string(),
            truncated: preview.truncated,
            deliveries: item.deliveries,
            group: item.group.clone(),
            dead_letter_from: item.dead_letter.as_ref().map(|dead| dead.queue.clone()),
            dead_letter_deliveries: item.dead_letter.as_ref().map(|dead| dead.deliveries),
            dead_letter_from_priority: item.dead_letter.as_ref().and_then(|dead| dead.priority),
            priority: keys
                .priority_item_parts(&item.key)
                .filter(|_| keys.kind() == QueueKind::Priority)
                .map(|(priority, _)| priority),
            sqs: super::sqs_view::SqsMessageInfo::of(&item.payload),
        }
    }
}

/// One page of an item listing.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ItemList {
    /// The visible items of the page, in delivery order (a priority
    /// queue's lowest priority first).
    pub items: Vec<ItemInfo>,
    /// The `after` of the next page; null on the last page.
    #[schema(required = true)]
    pub next: Option<String>,
}

/// `GET /v1/queues/{queue}/items?limit=&after=`: the visible items,
/// read-only.
#[utoipa::path(get, path = "/v1/queues/{queue}/items", tag = "admin", operation_id = "list_items",
    params(("queue" = String, Path, description = QUEUE_PARAM), ItemsParams),
    responses((status = 200, description = "One page of the visible items, in delivery order; nothing is taken. Leased, delayed and group-waiting items are not listed", body = ItemList),
        (status = 400, description = "bad_parameter: a limit out of range or an `after` that is not hex (any hex id continues from where it sorts)", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn list_items<S: Store>(
    state: State<Arc<AppState<S>>>,
    queue: ApiPath<String>,
    params: Result<Query<ItemsParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    items_of(state, queue, params, QueueKind::Fifo).await
}

/// `GET /v1/pqueues/{queue}/items?limit=&after=`: as for FIFO queues.
#[utoipa::path(get, path = "/v1/pqueues/{queue}/items", tag = "admin", operation_id = "pq_list_items",
    params(("queue" = String, Path, description = QUEUE_PARAM), ItemsParams),
    responses((status = 200, description = "One page of the visible items, lowest priority first; nothing is taken", body = ItemList),
        (status = 400, description = "bad_parameter", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_list_items<S: Store>(
    state: State<Arc<AppState<S>>>,
    queue: ApiPath<String>,
    params: Result<Query<ItemsParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    items_of(state, queue, params, QueueKind::Priority).await
}

async fn items_of<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<ItemsParams>, QueryRejection>,
    kind: QueueKind,
) -> Result<Response, ApiError> {
    counted(&queue, op_label(kind, "items", "pq_items"), async {
        let keys = QueueKeys::of_kind(kind, &queue_name(&queue)?);
        let params = query(params)?;
        let limit = limit(params.limit, 50, ITEMS_LIMIT_MAX)?;
        let after = match params.after.as_deref() {
            None => None,
            Some(id) => Some(browse::item_key(&keys, id).ok_or_else(|| not_an_id("after", id))?),
        };
        let (page, more) = state
            .hotq
            .browse_items(&keys, after.as_deref(), limit)
            .await?;
        let items: Vec<ItemInfo> = page.iter().map(|item| ItemInfo::of(&keys, item)).collect();
        let next = more.then(|| items.last().expect("a full page").id.clone());
        Ok(Json(ItemList { items, next }).into_response())
    })
    .await
}

/// The answer to an item's delete.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ItemDeleted {
    /// Always true (an item not there answers 404 `item_not_found`).
    pub deleted: bool,
    /// The item as it was.
    pub item: ItemInfo,
}

/// `DELETE /v1/queues/{queue}/items/{id}`: deletes one visible item.
#[utoipa::path(delete, path = "/v1/queues/{queue}/items/{id}", tag = "admin", operation_id = "delete_item",
    params(("queue" = String, Path, description = QUEUE_PARAM),
        ("id" = String, Path, description = "The item's id, as a listing names it")),
    responses((status = 200, description = "Deleted, in one commit; of this and a pop taking the same item exactly one wins", body = ItemDeleted),
        (status = 404, description = "item_not_found: no visible item has this id (popped, deleted, leased or delayed, or never one)", body = ErrorBody),
        (status = 400, description = "bad_parameter: the id is not hex", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn delete_item<S: Store>(
    state: State<Arc<AppState<S>>>,
    path: ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    delete_item_of(state, path, QueueKind::Fifo).await
}

/// `DELETE /v1/pqueues/{queue}/items/{id}`: as for FIFO queues.
#[utoipa::path(delete, path = "/v1/pqueues/{queue}/items/{id}", tag = "admin", operation_id = "pq_delete_item",
    params(("queue" = String, Path, description = QUEUE_PARAM),
        ("id" = String, Path, description = "The item's id, as a listing names it")),
    responses((status = 200, description = "Deleted, in one commit", body = ItemDeleted),
        (status = 404, description = "item_not_found", body = ErrorBody),
        (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn pq_delete_item<S: Store>(
    state: State<Arc<AppState<S>>>,
    path: ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    delete_item_of(state, path, QueueKind::Priority).await
}

async fn delete_item_of<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath((queue, id)): ApiPath<(String, String)>,
    kind: QueueKind,
) -> Result<Response, ApiError> {
    counted(&queue, op_label(kind, "delete_item", "pq_delete_item"), async {
        let keys = QueueKeys::of_kind(kind, &queue_name(&queue)?);
        let key = browse::item_key(&keys, &id).ok_or_else(|| not_an_id("id", &id))?;
        let deleted = if browse::is_item_key(&keys, &key) {
            state.hotq.delete_item(&keys, &key).await?
        } else {
            None
        };
        match deleted {
            Some(item) => Ok(Json(ItemDeleted {
                deleted: true,
                item: ItemInfo::of(&keys, &item),
            })
            .into_response()),
            None => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "item_not_found",
                format!("no visible item {id} in {queue}: it was popped or deleted, or is leased or delayed"),
            )),
        }
    })
    .await
}

/// Query of a group listing: `limit` (default 50, at most 100), `after`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct GroupsParams {
    /// Most groups in the page.
    pub limit: Option<usize>,
    /// Continue after this group key.
    pub after: Option<String>,
}

/// One message group that has a head.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GroupInfo {
    /// The group key.
    pub group: String,
    /// `out` (visible, delayed, leased or in a stored result) or
    /// `handing_off` (popped without a lease, reaching its caller).
    pub head: String,
    /// Items waiting behind the head, counted up to `waiting_capped_at`.
    pub waiting: usize,
    /// The count's bound: `waiting` equal to it means at least that many.
    pub waiting_capped_at: usize,
    /// When the next waiting item was pushed, in ms since the epoch.
    #[schema(required = true)]
    pub next_enqueued_at_ms: Option<u64>,
}

/// One page of `GET /v1/queues/{queue}/groups`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GroupList {
    /// The groups of the page, in key order.
    pub groups: Vec<GroupInfo>,
    /// The `after` of the next page; null on the last page.
    #[schema(required = true)]
    pub next: Option<String>,
}

/// `GET /v1/queues/{queue}/groups?limit=&after=`: the message groups that
/// have a head, with what waits behind it.
#[utoipa::path(get, path = "/v1/queues/{queue}/groups", tag = "admin", operation_id = "list_groups",
    params(("queue" = String, Path, description = QUEUE_PARAM), GroupsParams),
    responses((status = 200, description = "One page of the groups with a head, in key order", body = GroupList),
        (status = 400, description = "bad_parameter: a limit out of range or an `after` that is no group key", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn list_groups<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    params: Result<Query<GroupsParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    counted(&queue, "groups", async {
        let keys = QueueKeys::new(&queue_name(&queue)?);
        let params = query(params)?;
        let limit = limit(params.limit, 50, GROUPS_LIMIT_MAX)?;
        let (page, more) = state
            .hotq
            .browse_groups(&keys, params.after.as_deref(), limit)
            .await?;
        let groups: Vec<GroupInfo> = page
            .into_iter()
            .map(|group| GroupInfo {
                group: group.group,
                head: if group.handing_off {
                    "handing_off"
                } else {
                    "out"
                }
                .to_string(),
                waiting: group.waiting,
                waiting_capped_at: browse::GROUP_WAITING_COUNT_MAX,
                next_enqueued_at_ms: group.next_enqueued_at_ms,
            })
            .collect();
        let next = more.then(|| groups.last().expect("a full page").group.clone());
        Ok(Json(GroupList { groups, next }).into_response())
    })
    .await
}

/// The answer to a pause or resume.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PauseAnswer {
    /// The queue's name.
    pub queue: String,
    /// Whether the queue is paused now.
    pub paused: bool,
}

macro_rules! pause_route {
    ($name:ident, $method_path:literal, $kind:expr, $paused:expr, $op:literal, $what:literal) => {
        #[doc = concat!("`POST ", $method_path, "`: ", $what)]
        #[utoipa::path(post, path = $method_path, tag = "admin", operation_id = $op,
            params(("queue" = String, Path, description = QUEUE_PARAM)),
            responses((status = 200, description = $what, body = PauseAnswer),
                (status = "4XX", description = "Refused; nothing was written", body = ErrorBody),
                (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
        pub async fn $name<S: Store>(
            state: State<Arc<AppState<S>>>,
            queue: ApiPath<String>,
        ) -> Result<Response, ApiError> {
            set_paused(state, queue, $kind, $paused, $op).await
        }
    };
}

pause_route!(
    pause,
    "/v1/queues/{queue}/pause",
    QueueKind::Fifo,
    true,
    "pause",
    "Pauses the queue, for every daemon on the store: it takes pushes and hands nothing out (pops wait, or answer empty); leases in flight still settle. Idempotent."
);
pause_route!(
    resume,
    "/v1/queues/{queue}/resume",
    QueueKind::Fifo,
    false,
    "resume",
    "Resumes the queue: pops waiting on it are served at once. Idempotent."
);
pause_route!(
    pq_pause,
    "/v1/pqueues/{queue}/pause",
    QueueKind::Priority,
    true,
    "pq_pause",
    "Pauses the priority queue, as for FIFO queues."
);
pause_route!(
    pq_resume,
    "/v1/pqueues/{queue}/resume",
    QueueKind::Priority,
    false,
    "pq_resume",
    "Resumes the priority queue, as for FIFO queues."
);

async fn set_paused<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    kind: QueueKind,
    paused: bool,
    op: &'static str,
) -> Result<Response, ApiError> {
    counted(&queue, op, async {
        let keys = QueueKeys::of_kind(kind, &queue_name(&queue)?);
        Ok(Json(set_paused_checked(&state, &keys, paused).await?).into_response())
    })
    .await
}

/// Pauses or resumes `keys`' queue (every front end's pauses and resumes).
pub(crate) async fn set_paused_checked<S: Store>(
    state: &AppState<S>,
    keys: &QueueKeys,
    paused: bool,
) -> Result<PauseAnswer, ApiError> {
    let paused = state.hotq.set_paused(keys, paused).await?;
    Ok(PauseAnswer {
        queue: keys.name().as_str().to_string(),
        paused,
    })
}

/// Query of `GET /v1/traffic`: `kind` and `queues` (comma-separated, at
/// most 100).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TrafficParams {
    /// `fifo` (the default) or `priority`.
    pub kind: Option<String>,
    /// 1 to 100 queue names, comma-separated (an invalid name: 400
    /// `invalid_queue_name`).
    pub queues: String,
}

/// This daemon's push and pop counts of some queues.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Traffic {
    /// When the counts were read, in ms since the epoch.
    pub now_ms: u64,
    /// Queue name → counts; a queue this daemon has not counted is absent.
    pub queues: BTreeMap<String, crate::metrics::traffic::Counts>,
}

/// Most queues one traffic call names.
pub const TRAFFIC_QUEUES_MAX: usize = 100;

/// `GET /v1/traffic?kind=&queues=a,b`: items this daemon pushed and
/// delivered per queue since it started (or since it last forgot the
/// queue); rates are the change between two reads over `now_ms`'s change.
#[utoipa::path(get, path = "/v1/traffic", tag = "admin", operation_id = "traffic",
    params(TrafficParams),
    responses((status = 200, description = "This daemon's counts (other daemons on the store count their own)", body = Traffic),
        (status = 400, description = "bad_parameter: more than 100 names, or an unknown kind; invalid_queue_name", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),))]
pub async fn traffic<S: Store>(
    State(_state): State<Arc<AppState<S>>>,
    params: Result<Query<TrafficParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let params = query(params)?;
    let kind = kind_of(params.kind.as_deref())?;
    let names: Vec<&str> = params.queues.split(',').collect();
    if names.len() > TRAFFIC_QUEUES_MAX {
        return Err(ApiError::bad_parameter(format!(
            "at most {TRAFFIC_QUEUES_MAX} queues, got {}",
            names.len()
        )));
    }
    for name in &names {
        queue_name(name)?;
    }
    let queues = names
        .into_iter()
        .filter_map(|name| {
            Some((
                name.to_string(),
                crate::metrics::traffic::counts(kind, name)?,
            ))
        })
        .collect();
    Ok(Json(Traffic {
        now_ms: crate::envelope::now_ms(),
        queues,
    })
    .into_response())
}

/// Query of `GET /v1/history`: `kind` and one `queue`, or none for the
/// whole daemon.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryParams {
    /// `fifo` (the default) or `priority`.
    pub kind: Option<String>,
    /// The queue; absent: the whole daemon (every queue summed).
    pub queue: Option<String>,
}

/// The last hour of a queue's (or the daemon's) figures.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct History {
    /// When it was read, in ms since the epoch.
    pub now_ms: u64,
    /// How often the sampler reads a queue, in ms (a queue among many is
    /// read less often: once per rotation through the store).
    pub interval_ms: u64,
    /// The step between kept samples, in ms: the newest sample replaces its
    /// step's last, so it is at most one sampling interval old.
    pub step_ms: u64,
    /// The samples, oldest first, at most an hour's; empty for a queue this
    /// daemon has not sampled (or no longer keeps: it keeps 1,000 queues).
    pub samples: Vec<super::history::Sample>,
}

/// `GET /v1/history?kind=&queue=`: the console's charts.
#[utoipa::path(get, path = "/v1/history", tag = "admin", operation_id = "history",
    params(HistoryParams),
    responses((status = 200, description = "The last hour of samples: depths, leased, delayed, waiting and oldest age are the store's (as every daemon sees them); pushed, popped, acked, nacked and dead-lettered are this daemon's counts since it started", body = History),
        (status = 400, description = "bad_parameter: an unknown kind; invalid_queue_name", body = ErrorBody),
        (status = "4XX", description = "Refused", body = ErrorBody),))]
pub async fn history<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    params: Result<Query<HistoryParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let params = query(params)?;
    let kind = kind_of(params.kind.as_deref())?;
    if let Some(queue) = params.queue.as_deref() {
        queue_name(queue)?;
    }
    let interval_ms = state.config.metrics_sample_interval_ms;
    Ok(Json(History {
        now_ms: crate::envelope::now_ms(),
        interval_ms,
        step_ms: super::history::step_ms(interval_ms),
        samples: super::history::samples(kind, params.queue.as_deref()),
    })
    .into_response())
}

/// The queue kind `kind` names: `fifo` (or absent) or `priority`.
fn kind_of(kind: Option<&str>) -> Result<QueueKind, ApiError> {
    match kind {
        None | Some("fifo") => Ok(QueueKind::Fifo),
        Some("priority") => Ok(QueueKind::Priority),
        Some(other) => Err(ApiError::bad_parameter(format!(
            "kind must be fifo or priority, got {other:?}"
        ))),
    }
}
