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
use crate::keys::{QueueKeys, QueueKind, QueueName, queues_root_range};
use crate::queue::settings::{Stored, read_in};
use crate::store::{RangeRead, Read, Store, StoreError, Transaction};

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

/// Reads the record of `keys` in `txn`.
pub async fn record_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    read: Read,
) -> Result<Option<Record>, StoreError> {
    let key = keys.sqs_queue();
    match txn.get(&key, read).await? {
        None => Ok(None),
        Some(value) => serde_json::from_slice(&value)
            .map(Some)
            .map_err(|_| StoreError::Backend {
                code: 4100,
                message: format!("malformed SQS record under key {key:?}"),
            }),
    }
}

/// Writes `record` for `keys` in `txn`.
pub fn write_record_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    record: &Record,
) -> Result<(), StoreError> {
    let value = serde_json::to_vec(record).expect("record serializes");
    txn.set(&keys.sqs_queue(), &value)
}

/// True when the FIFO queue of `keys` holds any key, in `txn` (snapshot).
pub async fn exists_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<bool, StoreError> {
    let (begin, end) = keys.queue_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, 1).snapshot())
        .await?;
    Ok(!rows.is_empty())
}

/// The queue `name`, or `QueueDoesNotExist`.
pub async fn load<S: Store>(store: &S, name: &QueueName) -> Result<SqsQueue, SqsError> {
    let keys = QueueKeys::new(name);
    let txn = store.begin()?;
    let record = record_in(&txn, &keys, Read::Snapshot).await?;
    if record.is_none() && !exists_in(&txn, &keys).await? {
        return Err(SqsError::no_queue(name.as_str()));
    }
    let settings = read_in(&txn, &keys).await?;
    Ok(SqsQueue {
        keys,
        record,
        settings,
    })
}

/// The queue named by the request's `QueueUrl`.
pub async fn load_url<S: Store>(
    store: &S,
    config: &SqsSection,
    input: &serde_json::Value,
) -> Result<SqsQueue, SqsError> {
    let url = super::required_string(input, "QueueUrl")?;
    load(store, &name_of_url(config, url)?).await
}

/// Up to `limit` names of FIFO queues starting with `prefix`, in name
/// order, after `after`; and the name to continue after when more may
/// follow. Reads one key per queue (the store skips between subspaces).
pub async fn list_names<S: Store>(
    store: &S,
    prefix: &str,
    after: Option<&QueueName>,
    limit: usize,
) -> Result<(Vec<QueueName>, Option<String>), SqsError> {
    let (root_begin, _) = queues_root_range(QueueKind::Fifo);
    // `(root, name)` packs as the root's bytes, 0x02, the name, 0x00: names
    // with `prefix` are the keys from `root 0x02 prefix` to that plus 0xff.
    let mut begin = root_begin[..root_begin.len() - 1].to_vec();
    begin.push(0x02);
    begin.extend_from_slice(prefix.as_bytes());
    let mut end = begin.clone();
    end.push(0xff);
    let mut cursor = match after {
        Some(name) => QueueKeys::new(name).queue_range().1.max(begin),
        None => begin,
    };
    let txn = store.begin()?;
    let mut names = Vec::new();
    loop {
        let rows = txn
            .get_range(RangeRead::new(&cursor, &end, 1).snapshot())
            .await?;
        let Some(row) = rows.first() else {
            return Ok((names, None));
        };
        let Some((name, next)) = crate::keys::queue_of_key(QueueKind::Fifo, &row.key) else {
            cursor = crate::store::key_after(&row.key);
            continue;
        };
        if names.len() == limit {
            let last: &QueueName = names.last().expect("limit is at least 1");
            return Ok((names.clone(), Some(last.as_str().to_string())));
        }
        cursor = next;
        names.push(name);
    }
}
