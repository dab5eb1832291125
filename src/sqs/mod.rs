//! The Amazon SQS API (AWS JSON 1.0: `POST /` with `X-Amz-Target:
//! AmazonSQS.<Action>`), served on the API listener beside `/v1`, mapped
//! onto hotq's own machinery rather than kept beside it:
//!
//! | SQS | hotq |
//! |---|---|
//! | a queue (`{base}/{account}/{name}`) | the FIFO queue `/v1/queues/{name}` shows, plus an SQS record under its `meta` ([`queues`]) |
//! | `VisibilityTimeout`, `DelaySeconds`, `RedrivePolicy` | the queue's settings in the store: `default_lease_ms`, `delivery_delay_ms`, `max_deliveries` and `dead_letter_queue` (no policy: `max_deliveries` 0, never dead-lettered) |
//! | ReceiveMessage | a leased pop through the coordinator, as `/v1/queues/{q}/pop?lease_ms=` (a contended queue stages it in the line; `WaitTimeSeconds` is its wait) |
//! | DeleteMessage, ChangeMessageVisibility | ack; extend (0: nack, visible now), through the settle backlog |
//! | `ReceiptHandle` | the lease's receipt (a fresh one each receive; `/v1` acks take it too) |
//! | `ApproximateReceiveCount` | the lease's delivery count |
//! | `.fifo` queues | message groups (`MessageGroupId`) and dedup ids (`MessageDeduplicationId`, or the body's SHA-256) |
//! | message id, attributes | the SQS envelope in the item's payload ([`message`]) |
//!
//! - [`auth`]: SigV4 verification.
//! - [`error`]: SQS's JSON error shape.
//! - [`attributes`]: message attributes and their MD5 digests.
//! - [`message`]: the SQS envelope inside an item.
//! - [`queues`]: queue records, URLs, listing.
//! - [`queue_attributes`]: queue attributes: which map, which are refused.
//! - [`queue_actions`]: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
//!   PurgeQueue, Get/SetQueueAttributes, tags, ListDeadLetterSourceQueues,
//!   Add/RemovePermission (kept in `Policy`, not enforced).
//! - [`send`]: SendMessage, SendMessageBatch.
//! - [`receive`]: ReceiveMessage, DeleteMessage(Batch), ChangeMessageVisibility(Batch).
//! - [`move_tasks`]: Start/List/CancelMessageMoveTask, on hotq's re-drive.

pub mod attributes;
pub mod auth;
pub mod error;
pub mod message;
pub mod move_registry;
pub mod move_tasks;
pub mod queue_actions;
pub mod queue_attributes;
pub mod queues;
pub mod receive;
pub mod send;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::envelope::now_ms;
use crate::server::state::AppState;
use crate::service::Store;
use error::{JSON_1_0, SqsError};

/// Metric: SQS calls by action and outcome (`ok` or the error's shape).
pub const REQUESTS_METRIC: &str = crate::metrics::SQS_REQUESTS;

/// Every action served, the metric's `action` label values (others are
/// counted as `unknown`).
pub const ACTIONS: &[&str] = &[
    "CreateQueue",
    "GetQueueUrl",
    "ListQueues",
    "DeleteQueue",
    "PurgeQueue",
    "GetQueueAttributes",
    "SetQueueAttributes",
    "SendMessage",
    "SendMessageBatch",
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
    "TagQueue",
    "UntagQueue",
    "ListQueueTags",
    "ListDeadLetterSourceQueues",
    "AddPermission",
    "RemovePermission",
    "StartMessageMoveTask",
    "ListMessageMoveTasks",
    "CancelMessageMoveTask",
];

pub use crate::config::SqsSection;

/// What an action's handler gets.
pub struct Call<'a, S: Store> {
    /// The daemon's state (shared: a move task outlives its call).
    pub state: &'a Arc<AppState<S>>,
    /// The base of queue URLs for this request.
    pub base_url: String,
    /// The request's JSON object.
    pub input: Value,
}

impl<S: Store> Call<'_, S> {
    /// The `[sqs]` configuration.
    pub fn config(&self) -> &SqsSection {
        &self.state.config.sqs
    }
}

/// `POST /` with `X-Amz-Target: AmazonSQS.<Action>`.
#[utoipa::path(post, path = "/", tag = "sqs", operation_id = "sqs", security(()),
    params(("X-Amz-Target" = String, Header, description = "AmazonSQS.<Action>, e.g. AmazonSQS.SendMessage (docs/sqs.md lists the actions)")),
    request_body(content = Object, content_type = "application/x-amz-json-1.0", description = "The action's input, as the Amazon SQS API reference gives it; signed with SigV4 when credentials are configured"),
    responses((status = 200, description = "The action's output, as the Amazon SQS API reference gives it", content_type = "application/x-amz-json-1.0"),
        (status = 400, description = "An SQS error: {\"__type\": \"com.amazonaws.sqs#<Error>\", \"message\"} with the x-amzn-query-error header (a body over the limit is one too)"),
        (status = 403, description = "An SQS error: a refused signature (SignatureDoesNotMatch, ...)"),
        (status = "5XX", description = "InternalFailure, or ServiceUnavailable (retry)")))]
pub async fn handle<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let action = target.strip_prefix("AmazonSQS.").unwrap_or("");
    let label = ACTIONS
        .iter()
        .find(|a| **a == action)
        .copied()
        .unwrap_or("unknown");
    let result = async {
        let body = body.map_err(|rejection| SqsError::invalid(rejection.body_text()))?;
        let signed = auth::Signed { method: &method, uri: &uri, headers: &headers, body: &body };
        auth::verify(&state.config.sqs, state.config.token.as_deref(), &signed, now_ms() / 1_000)?;
        if let Some(reason) = state.hotq.store_failure() {
            return Err(SqsError::service(StatusCode::SERVICE_UNAVAILABLE, format!("the store has failed: {reason}")));
        }
        if label == "unknown" {
            return Err(SqsError::unknown_action(if target.is_empty() {
                "(none: hotq serves SQS's AWS JSON 1.0 protocol, with X-Amz-Target; not the query protocol)"
            } else {
                target
            }));
        }
        let input: Value = if body.is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_slice(&body).map_err(|e| SqsError::invalid(format!("the body is not JSON: {e}")))?
        };
        if !input.is_object() {
            return Err(SqsError::invalid("the body must be a JSON object"));
        }
        let call = Call { state: &state, base_url: base_url(&state.config.sqs, &headers), input };
        dispatch(label, &call).await
    }
    .await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(error) => error.shape,
    };
    metrics::counter!(REQUESTS_METRIC, "action" => label, "outcome" => outcome).increment(1);
    let mut response = match result {
        Ok(value) => {
            let mut response = (StatusCode::OK, value.to_string()).into_response();
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON_1_0));
            response
        }
        Err(error) => error.into_response(),
    };
    // Every SQS answer, errors included, names its request (SDKs expose
    // it as ResponseMetadata.RequestId; support asks for it).
    if let Ok(id) = HeaderValue::from_str(&message::new_id()) {
        response.headers_mut().insert(REQUEST_ID_HEADER, id);
    }
    response
}

/// The header naming an answer's request, as SQS sends it.
pub const REQUEST_ID_HEADER: &str = "x-amzn-requestid";

async fn dispatch<S: Store>(action: &str, call: &Call<'_, S>) -> Result<Value, SqsError> {
    match action {
        "CreateQueue" => queue_actions::create_queue(call).await,
        "GetQueueUrl" => queue_actions::get_queue_url(call).await,
        "ListQueues" => queue_actions::list_queues(call).await,
        "DeleteQueue" => queue_actions::delete_queue(call).await,
        "PurgeQueue" => queue_actions::purge_queue(call).await,
        "GetQueueAttributes" => queue_actions::get_queue_attributes(call).await,
        "SetQueueAttributes" => queue_actions::set_queue_attributes(call).await,
        "TagQueue" => queue_actions::tag_queue(call).await,
        "UntagQueue" => queue_actions::untag_queue(call).await,
        "ListQueueTags" => queue_actions::list_queue_tags(call).await,
        "ListDeadLetterSourceQueues" => queue_actions::list_dead_letter_sources(call).await,
        "AddPermission" => queue_actions::add_permission(call).await,
        "RemovePermission" => queue_actions::remove_permission(call).await,
        "StartMessageMoveTask" => move_tasks::start(call).await,
        "ListMessageMoveTasks" => move_tasks::list(call).await,
        "CancelMessageMoveTask" => move_tasks::cancel(call).await,
        "SendMessage" => send::send_message(call).await,
        "SendMessageBatch" => send::send_message_batch(call).await,
        "ReceiveMessage" => receive::receive_message(call).await,
        "DeleteMessage" => receive::delete_message(call).await,
        "DeleteMessageBatch" => receive::delete_message_batch(call).await,
        "ChangeMessageVisibility" => receive::change_visibility(call).await,
        "ChangeMessageVisibilityBatch" => receive::change_visibility_batch(call).await,
        other => Err(SqsError::unknown_action(other)),
    }
}

/// The base of queue URLs: configured, else `http://` and the request's host.
pub(crate) fn base_url(config: &SqsSection, headers: &HeaderMap) -> String {
    if let Some(base) = &config.base_url {
        return base.trim_end_matches('/').to_string();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// Registers the SQS counters at 0 for every action, so rates have data
/// from start-up.
pub fn register_metrics() {
    for action in ACTIONS {
        metrics::counter!(REQUESTS_METRIC, "action" => *action, "outcome" => "ok").absolute(0);
    }
}

/// Reads an optional string member of a request.
pub fn string_member<'a>(input: &'a Value, name: &str) -> Result<Option<&'a str>, SqsError> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(SqsError::invalid(format!(
            "{name} must be a string, got {other}"
        ))),
    }
}

/// Reads a required string member.
pub fn required_string<'a>(input: &'a Value, name: &str) -> Result<&'a str, SqsError> {
    string_member(input, name)?.ok_or_else(|| SqsError::missing(name))
}

/// Reads an optional integer member within `range`.
pub fn int_member(
    input: &Value,
    name: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<Option<i64>, SqsError> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(SqsError::invalid(format!(
                "Value {n} for parameter {name} is invalid. Reason: must be between {} and {}.",
                range.start(),
                range.end()
            ))),
        },
        Some(other) => Err(SqsError::invalid(format!(
            "{name} must be an integer, got {other}"
        ))),
    }
}

/// Reads an optional list of strings.
pub fn string_list(input: &Value, name: &str) -> Result<Vec<String>, SqsError> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|_| SqsError::invalid(format!("{name} must be a list of strings"))),
    }
}
