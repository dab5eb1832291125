//! SQS queues over hotq FIFO queues: the SQS record kept with each queue,
//! URLs and ARNs, and listing by name prefix.
//!
//! A queue exists for SQS when hotq's FIFO queue of that name exists (any
//! key under its subspace, as `/v1/queues` lists it). CreateQueue writes
//! its record (`meta/("sqs",)`, JSON): the attributes SQS has and hotq's
//! settings do not, and the tags. A queue only ever used through `/v1` has
//! no record and reads as a standard queue with SQS's defaults; its
//! settings (lease, delay, dead letters) show through as attributes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::SqsSection;
use super::error::SqsError;
use crate::keys::{QueueKeys, QueueName};
use crate::service::{Hotq, Store, Stored};

/// SQS's default visibility timeout, in seconds.
pub const VISIBILITY_TIMEOUT_DEFAULT_S: u64 = 30;

/// What a queue keeps for SQS beyond hotq's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Record {
    /// When CreateQueue made it, in seconds since the epoch.
    pub created_s: u64,
    /// When its attributes last changed, in seconds since the epoch.
    pub modified_s: u64,
    /// A FIFO queue (`.fifo`): message groups and dedup ids.
    pub fifo: bool,
    /// FIFO: the dedup id of a message sent without one is its body's SHA-256.
    pub content_dedup: bool,
    /// FIFO: dedup ids count per message group (else per queue).
    pub dedup_per_group: bool,
    /// FIFO: `FifoThroughputLimit` is `perMessageGroupId` (hotq has no
    /// throughput quota either way; kept to answer as set).
    pub throughput_per_group: bool,
    /// `MaximumMessageSize`; `None`: the largest hotq allows.
    pub maximum_message_size: Option<u64>,
    /// `ReceiveMessageWaitTimeSeconds`.
    pub receive_wait_s: u64,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Attributes kept and answered as set, not enforced: `Policy`,
    /// `RedriveAllowPolicy`, `KmsMasterKeyId`,
    /// `KmsDataKeyReusePeriodSeconds`, `SqsManagedSseEnabled` (see
    /// [`super::queue_attributes::KEPT`]).
    pub kept: BTreeMap<String, String>,
}

/// A queue as one action sees it.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    /// Its keys.
    pub keys: QueueKeys,
    /// Its record; `None` for a queue used only through `/v1`.
    pub record: Option<Record>,
    /// Its stored settings.
    pub settings: Stored,
}

impl SqsQueue {
    /// Its record, or the defaults of a queue without one.
    pub fn record(&self) -> Record {
        self.record.clone().unwrap_or_default()
    }

    /// True for a FIFO queue.
    pub fn is_fifo(&self) -> bool {
        self.record.as_ref().is_some_and(|r| r.fifo)
    }
}

/// The queue's name from a queue URL (`…/{account}/{name}`), checked; a
/// bare queue name (no `/`) is taken as the name, as SQS takes it.
pub fn name_of_url(config: &SqsSection, url: &str) -> Result<QueueName, SqsError> {
    if !url.contains('/') {
        return QueueName::new(url).map_err(|_| SqsError::no_queue(url));
    }
    let path = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut segments = path.trim_end_matches('/').rsplit('/');
    let name = segments.next().unwrap_or("");
    let account = segments.next().unwrap_or("");
    if account != config.account {
        return Err(SqsError::no_queue(url));
    }
    QueueName::new(name).map_err(|_| SqsError::no_queue(url))
}

/// The URL of queue `name`.
pub fn url_of(base_url: &str, config: &SqsSection, name: &QueueName) -> String {
    format!("{base_url}/{}/{name}", config.account)
}

/// The ARN of queue `name`.
pub fn arn_of(config: &SqsSection, name: &str) -> String {
    format!("arn:aws:sqs:{}:{}:{name}", config.region, config.account)
}

/// The queue an ARN names, in this account and region.
pub fn name_of_arn(config: &SqsSection, arn: &str) -> Option<QueueName> {
    let name = arn.strip_prefix(&format!(
        "arn:aws:sqs:{}:{}:",
        config.region, config.account
    ))?;
    QueueName::new(name).ok()
}

/// The queue `name`, or `QueueDoesNotExist`.
pub async fn load<S: Store>(hotq: &Hotq<S>, name: &QueueName) -> Result<SqsQueue, SqsError> {
    let keys = QueueKeys::new(name);
    let queue = hotq.recorded_queue::<Record>(&keys).await?;
    if queue.record.is_none() && !queue.exists {
        return Err(SqsError::no_queue(name.as_str()));
    }
    Ok(SqsQueue {
        keys,
        record: queue.record,
        settings: queue.settings,
    })
}

/// The queue named by the request's `QueueUrl`.
pub async fn load_url<S: Store>(
    hotq: &Hotq<S>,
    config: &SqsSection,
    input: &serde_json::Value,
) -> Result<SqsQueue, SqsError> {
    let url = super::required_string(input, "QueueUrl")?;
    load(hotq, &name_of_url(config, url)?).await
}
