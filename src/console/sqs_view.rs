//! The console's view of SQS queues and messages, as SQS users know them:
//! a message's body, attributes and group (not the SQS envelope hotq
//! stores them in, see [`crate::sqs::message`]); a queue's type, URL, ARN
//! and attributes under their SQS names (`VisibilityTimeout`,
//! `maxReceiveCount`, …) next to the hotq settings they map onto.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::preview::PREVIEW_TEXT_BYTES_MAX;
use crate::keys::QueueKeys;
use crate::server::error::{ApiError, ApiPath, ErrorBody, counted, queue_name};
use crate::server::state::AppState;
use crate::service::Store;
use crate::sqs::queues::{self, SqsQueue};

/// An item sent through SQS, as SQS shows it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SqsMessageInfo {
    /// Its `MessageId`.
    pub message_id: String,
    /// Its body's first bytes (at most 512), as sent.
    pub body: String,
    /// True when `body` shows only the first bytes.
    pub body_truncated: bool,
    /// Its message attributes, in SQS's JSON shape (`{"name": {"DataType",
    /// "StringValue" | "BinaryValue" (base64)}}`).
    #[schema(value_type = Object)]
    pub attributes: serde_json::Value,
    /// A FIFO message's `MessageGroupId`, as sent; null otherwise.
    #[schema(required = true)]
    pub message_group_id: Option<String>,
    /// A FIFO message's `MessageDeduplicationId`; null otherwise.
    #[schema(required = true)]
    pub message_deduplication_id: Option<String>,
    /// A FIFO message's `SequenceNumber`; null otherwise.
    #[schema(required = true)]
    pub sequence_number: Option<String>,
}

impl SqsMessageInfo {
    /// The SQS message in `payload`, if it holds one (an item sent
    /// through SQS); `None` for an item pushed through `/v1`.
    pub fn of(payload: &[u8]) -> Option<SqsMessageInfo> {
        let message = crate::sqs::message::decode_envelope(payload)?;
        let mut end = message.body.len().min(PREVIEW_TEXT_BYTES_MAX);
        while !message.body.is_char_boundary(end) {
            end -= 1;
        }
        let header = message.header;
        Some(SqsMessageInfo {
            message_id: header.id,
            body: message.body[..end].to_string(),
            body_truncated: end < message.body.len(),
            attributes: serde_json::to_value(&header.attrs).unwrap_or_default(),
            message_group_id: header.group,
            message_deduplication_id: header.dedup,
            sequence_number: header.seq,
        })
    }
}

/// The hotq settings SQS attributes map onto, in force for the queue.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HotqSettings {
    /// `VisibilityTimeout` × 1,000; null: the daemon's default (then SQS's 30 s).
    #[schema(required = true)]
    pub default_lease_ms: Option<u64>,
    /// `maxReceiveCount`; null or 0: never dead-lettered.
    #[schema(required = true)]
    pub max_deliveries: Option<u32>,
    /// The `RedrivePolicy`'s target queue; null: none.
    #[schema(required = true)]
    pub dead_letter_queue: Option<String>,
    /// `DelaySeconds` × 1,000.
    pub delivery_delay_ms: u64,
}

/// `GET /v1/queues/{queue}/sqs`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SqsQueueView {
    /// `standard` or `fifo`.
    pub queue_type: String,
    /// True when CreateQueue made it (else it is a `/v1` queue SQS sees as
    /// a standard queue with SQS's defaults).
    pub created_through_sqs: bool,
    /// Its `QueueUrl` (the base as SQS answers it to this request).
    pub queue_url: String,
    /// Its `QueueArn`.
    pub queue_arn: String,
    /// Its attributes, as GetQueueAttributes answers `All`.
    pub attributes: BTreeMap<String, String>,
    /// The `RedrivePolicy`'s `maxReceiveCount`; null without one.
    #[schema(required = true)]
    pub max_receive_count: Option<u32>,
    /// The hotq settings those attributes are.
    pub hotq: HotqSettings,
}

/// `GET /v1/queues/{queue}/sqs`: the queue as SQS shows it.
#[utoipa::path(get, path = "/v1/queues/{queue}/sqs", tag = "admin", operation_id = "queue_sqs",
    params(("queue" = String, Path, description = "Queue name")),
    responses((status = 200, description = "The queue's SQS type, URL, ARN and attributes, next to the hotq settings they map onto", body = SqsQueueView),
        (status = "4XX", description = "Refused", body = ErrorBody),
        (status = "5XX", description = "The store failed or is busy", body = ErrorBody),))]
pub async fn queue_sqs<S: Store>(
    State(state): State<Arc<AppState<S>>>,
    ApiPath(queue): ApiPath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    counted(&queue, "sqs_view", async {
        let name = queue_name(&queue)?;
        let keys = QueueKeys::new(&name);
        let queue = state.hotq.recorded_queue::<queues::Record>(&keys).await?;
        let sqs_queue = SqsQueue {
            keys: keys.clone(),
            record: queue.record,
            settings: queue.settings,
        };
        let config = &state.config.sqs;
        let defaults = state.hotq.settings_defaults();
        let counts = crate::sqs::queue_actions::counts(&state.hotq, &keys).await?;
        let attributes = crate::sqs::queue_attributes::render(config, defaults, &sqs_queue, counts);
        let effective = sqs_queue.settings.effective(&name, defaults);
        let base = crate::sqs::base_url(config, &headers);
        let view = SqsQueueView {
            queue_type: if sqs_queue.is_fifo() {
                "fifo"
            } else {
                "standard"
            }
            .into(),
            created_through_sqs: sqs_queue.record.is_some(),
            queue_url: queues::url_of(&base, config, &name),
            queue_arn: queues::arn_of(config, name.as_str()),
            attributes: attributes
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            max_receive_count: effective
                .max_deliveries
                .filter(|max| *max > 0 && effective.dead_letter_queue.is_some()),
            hotq: HotqSettings {
                default_lease_ms: effective.default_lease_ms,
                max_deliveries: effective.max_deliveries,
                dead_letter_queue: effective.dead_letter_queue.clone(),
                delivery_delay_ms: effective.delivery_delay_ms,
            },
        };
        Ok(Json(view).into_response())
    })
    .await
}
