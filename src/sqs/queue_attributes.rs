//! Queue attributes: each SQS attribute is mapped onto hotq (settings in
//! the store, or the SQS record), or refused with `InvalidAttributeValue`
//! when hotq cannot do what it asks; none is silently ignored.
//!
//! | attribute | where |
//! |---|---|
//! | `VisibilityTimeout` | setting `default_lease_ms` |
//! | `DelaySeconds` | setting `delivery_delay_ms` |
//! | `MessageRetentionPeriod` | setting `retention_ms` (SQS's 4 days for a queue CreateQueue makes) |
//! | `RedrivePolicy` | settings `max_deliveries`, `dead_letter_queue` |
//! | `MaximumMessageSize`, `ReceiveMessageWaitTimeSeconds` | record, enforced |
//! | `FifoQueue`, `ContentBasedDeduplication`, `DeduplicationScope` | record, enforced |
//! | `FifoThroughputLimit` | record (hotq has no per-queue quota) |
//! | `Policy`, `RedriveAllowPolicy`, `KmsMasterKeyId`, `KmsDataKeyReusePeriodSeconds`, `SqsManagedSseEnabled` | record, answered as set, not enforced ([`KEPT`]) |

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::SqsSection;
use super::error::SqsError;
use super::message::body_size_max;
use super::queues::{Record, SqsQueue, arn_of, name_of_arn};
use crate::service::{MAX_DELIVERIES_MAX, SettingsDefaults as Defaults, Stored};

/// Attributes hotq refuses, and why (none since `MessageRetentionPeriod`
/// maps onto `retention_ms`).
const REFUSED: &[(&str, &str)] = &[];

/// Attributes kept in the queue's record and answered as set, as ElasticMQ
/// and LocalStack keep them: hotq enforces no IAM policy (access is by
/// SigV4 credentials, see `[sqs]` in the configuration) and encrypts
/// nothing at rest itself.
pub const KEPT: &[&str] = &[
    "Policy",
    "RedriveAllowPolicy",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
];

/// A change of a queue's record and settings, written together (the
/// core's [`crate::service::RecordChange`] of SQS's [`Record`]).
pub type Change = crate::service::RecordChange<Record>;

fn seconds(name: &str, text: &str, max: u64) -> Result<u64, SqsError> {
    match text.parse::<u64>() {
        Ok(n) if n <= max => Ok(n),
        _ => Err(SqsError::attribute_value(format!(
            "Invalid value for the parameter {name}: {text:?} (an integer from 0 to {max})"
        ))),
    }
}

fn boolean(name: &str, text: &str) -> Result<bool, SqsError> {
    match text.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(SqsError::attribute_value(format!(
            "Invalid value for the parameter {name}: {text:?} (true or false)"
        ))),
    }
}

/// SQS's bounds of `MessageRetentionPeriod`, in seconds: 60 s to 14 days.
const RETENTION_S_MIN: u64 = 60;
const RETENTION_S_MAX: u64 = 1_209_600;
/// SQS's default `MessageRetentionPeriod`: 4 days, in seconds.
pub const RETENTION_S_DEFAULT: u64 = 345_600;

/// Applies SQS attributes to `record` and a settings change. `creating`:
/// CreateQueue (the only time `FifoQueue` may be named).
pub fn apply(
    config: &SqsSection,
    defaults: &Defaults,
    record: &Record,
    attributes: &BTreeMap<String, String>,
    creating: bool,
) -> Result<Change, SqsError> {
    let mut change = Change {
        record: record.clone(),
        settings: BTreeMap::new(),
        dead_letter: None,
    };
    for (name, text) in attributes {
        apply_one(config, defaults, &mut change, name, text, creating)?;
    }
    let sse = |name: &str| attributes.get(name).map(String::as_str);
    if sse("KmsMasterKeyId").is_some_and(|key| !key.is_empty())
        && sse("SqsManagedSseEnabled").is_some_and(|on| on.eq_ignore_ascii_case("true"))
    {
        return Err(SqsError::attribute_name(
            "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE.",
        ));
    }
    // A standard queue knows no FIFO attribute, whatever its value.
    let fifo_only = [
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "FifoThroughputLimit",
    ];
    if !change.record.fifo
        && let Some(name) = fifo_only
            .iter()
            .find(|name| attributes.contains_key(**name))
    {
        // SQS's two texts.
        return Err(SqsError::attribute_name(match *name {
            "ContentBasedDeduplication" => format!("Unknown Attribute {name}."),
            _ => format!("You can specify the {name} only when FifoQueue is set to true."),
        }));
    }
    Ok(change)
}

fn apply_one(
    config: &SqsSection,
    defaults: &Defaults,
    change: &mut Change,
    name: &str,
    text: &str,
    creating: bool,
) -> Result<(), SqsError> {
    match name {
        "VisibilityTimeout" | "DelaySeconds" | "MessageRetentionPeriod" => {
            apply_setting(defaults, change, name, text)
        }
        "FifoQueue"
        | "ContentBasedDeduplication"
        | "DeduplicationScope"
        | "FifoThroughputLimit" => apply_fifo(&mut change.record, name, text, creating),
        "MaximumMessageSize" => {
            let max = body_size_max() as u64;
            match text.parse::<u64>() {
                Ok(n) if (1_024..=max).contains(&n) => {
                    change.record.maximum_message_size = Some(n);
                    Ok(())
                }
                _ => Err(SqsError::attribute_value(format!(
                    "Invalid value for the parameter MaximumMessageSize: {text:?} (1024 to {max})"
                ))),
            }
        }
        "ReceiveMessageWaitTimeSeconds" => {
            change.record.receive_wait_s = seconds(name, text, 20)?;
            Ok(())
        }
        "RedrivePolicy" => redrive_policy(config, change, text),
        _ if KEPT.contains(&name) => keep(&mut change.record, name, text),
        _ => match REFUSED.iter().find(|(refused, _)| *refused == name) {
            Some((_, why)) => Err(SqsError::attribute_value(format!(
                "{name} is not supported: {why}."
            ))),
            None => Err(SqsError::attribute_name(format!(
                "Unknown Attribute {name}."
            ))),
        },
    }
}

/// An attribute that is a hotq setting of the queue: `VisibilityTimeout`
/// (`default_lease_ms`), `DelaySeconds` (`delivery_delay_ms`),
/// `MessageRetentionPeriod` (`retention_ms`).
fn apply_setting(
    defaults: &Defaults,
    change: &mut Change,
    name: &str,
    text: &str,
) -> Result<(), SqsError> {
    let (setting, ms) = match name {
        "VisibilityTimeout" => {
            let max_s = (defaults.lease_max_ms / 1_000).min(43_200);
            // A lease lasts at least a millisecond: 0 s is 1 ms.
            (
                "default_lease_ms",
                (seconds(name, text, max_s)? * 1_000).max(1),
            )
        }
        "DelaySeconds" => ("delivery_delay_ms", seconds(name, text, 900)? * 1_000),
        _ => {
            let s = seconds(name, text, RETENTION_S_MAX)?;
            if s < RETENTION_S_MIN {
                return Err(SqsError::attribute_value(format!(
                    "Invalid value for the parameter MessageRetentionPeriod: {text:?} (an integer from {RETENTION_S_MIN} to {RETENTION_S_MAX})"
                )));
            }
            ("retention_ms", s * 1_000)
        }
    };
    change.settings.insert(setting.into(), json!(ms));
    Ok(())
}

/// A FIFO queue's attribute, kept in its record.
fn apply_fifo(record: &mut Record, name: &str, text: &str, creating: bool) -> Result<(), SqsError> {
    match name {
        // SQS's answers: a standard queue knows no `FifoQueue`, even
        // `false`; a FIFO queue's is `true` for good.
        "FifoQueue" if creating && boolean(name, text)? => record.fifo = true,
        "FifoQueue" if !creating && record.fifo => {
            if !boolean(name, text)? {
                return Err(SqsError::attribute_value(
                    "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.",
                ));
            }
        }
        "FifoQueue" => {
            return Err(SqsError::attribute_name("Unknown Attribute FifoQueue."));
        }
        "ContentBasedDeduplication" => record.content_dedup = boolean(name, text)?,
        "DeduplicationScope" => {
            record.dedup_per_group = match text {
                "messageGroup" => true,
                "queue" => false,
                _ => {
                    return Err(SqsError::attribute_value(format!(
                        "Invalid value for the parameter DeduplicationScope: {text:?} (messageGroup or queue)"
                    )));
                }
            }
        }
        _ => {
            record.throughput_per_group = match text {
                "perMessageGroupId" => true,
                "perQueue" => false,
                _ => {
                    return Err(SqsError::attribute_value(format!(
                        "Invalid value for the parameter FifoThroughputLimit: {text:?} (perMessageGroupId or perQueue)"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// A [`KEPT`] attribute, checked as SQS checks it; `""` removes it (a
/// policy, a key id).
fn keep(record: &mut Record, name: &str, text: &str) -> Result<(), SqsError> {
    let invalid = || SqsError::attribute_value(format!("Invalid value for the parameter {name}."));
    let value = match name {
        "SqsManagedSseEnabled" => boolean(name, text)?.to_string(),
        "KmsDataKeyReusePeriodSeconds" => match text.parse::<u64>() {
            Ok(n) if (60..=86_400).contains(&n) => n.to_string(),
            _ => return Err(invalid()),
        },
        "Policy" | "RedriveAllowPolicy" if !text.is_empty() => {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(_)) => text.to_string(),
                _ => return Err(invalid()),
            }
        }
        _ => text.to_string(),
    };
    if value.is_empty() {
        record.kept.remove(name);
    } else {
        record.kept.insert(name.to_string(), value);
    }
    Ok(())
}

/// `RedrivePolicy`: JSON `{"deadLetterTargetArn", "maxReceiveCount"}`,
/// or empty to remove it (no dead-lettering: `max_deliveries` 0).
fn redrive_policy(config: &SqsSection, change: &mut Change, text: &str) -> Result<(), SqsError> {
    if text.is_empty() || text == "{}" {
        change.settings.insert("max_deliveries".into(), json!(0));
        change
            .settings
            .insert("dead_letter_queue".into(), Value::Null);
        return Ok(());
    }
    let invalid = |why: &str| {
        SqsError::attribute_value(format!(
            "Value {text} for parameter RedrivePolicy is invalid. Reason: {why}"
        ))
    };
    let policy: Value = serde_json::from_str(text)
        .map_err(|_| invalid("Redrive policy is not a valid JSON map."))?;
    let arn = policy
        .get("deadLetterTargetArn")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
        })?;
    let count = match policy.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse().ok(),
        _ => {
            return Err(invalid(
                "Redrive policy does not contain mandatory attribute: maxReceiveCount.",
            ));
        }
    };
    let count = count
        .filter(|n| (1..=MAX_DELIVERIES_MAX as u64).contains(n))
        .ok_or_else(|| invalid("Invalid value for maxReceiveCount: must be 1 to 1000."))?;
    let target = name_of_arn(config, arn).ok_or_else(|| {
        invalid("Dead letter target does not exist (not a queue ARN of this account and region).")
    })?;
    change
        .settings
        .insert("max_deliveries".into(), json!(count));
    change
        .settings
        .insert("dead_letter_queue".into(), json!(target.as_str()));
    change.dead_letter = Some(target);
    Ok(())
}

/// Counters shown as `ApproximateNumberOf…`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Visible items and items waiting behind their group's head.
    pub visible: i64,
    /// Leased items.
    pub leased: i64,
    /// Delayed items.
    pub delayed: i64,
}

/// Every attribute of `queue`, as GetQueueAttributes answers `All`.
pub fn render(
    config: &SqsSection,
    defaults: &Defaults,
    queue: &SqsQueue,
    counts: Counts,
) -> BTreeMap<&'static str, String> {
    let name = queue.keys.name();
    let record = queue.record();
    let effective = queue.settings.effective(name, defaults);
    let mut out = BTreeMap::new();
    out.insert("QueueArn", arn_of(config, name.as_str()));
    out.insert(
        "ApproximateNumberOfMessages",
        counts.visible.max(0).to_string(),
    );
    out.insert(
        "ApproximateNumberOfMessagesNotVisible",
        counts.leased.max(0).to_string(),
    );
    out.insert(
        "ApproximateNumberOfMessagesDelayed",
        counts.delayed.max(0).to_string(),
    );
    out.insert("CreatedTimestamp", record.created_s.to_string());
    out.insert("LastModifiedTimestamp", record.modified_s.to_string());
    let lease_ms = effective
        .default_lease_ms
        .unwrap_or(super::queues::VISIBILITY_TIMEOUT_DEFAULT_S * 1_000);
    out.insert("VisibilityTimeout", (lease_ms / 1_000).to_string());
    out.insert(
        "DelaySeconds",
        (effective.delivery_delay_ms / 1_000).to_string(),
    );
    // A queue made through /v1 may keep messages until delivered: SQS has
    // no word for that, so the attribute is left out.
    if let Some(retention_ms) = effective.retention_ms {
        out.insert("MessageRetentionPeriod", (retention_ms / 1_000).to_string());
    }
    out.insert(
        "MaximumMessageSize",
        record
            .maximum_message_size
            .unwrap_or(body_size_max() as u64)
            .to_string(),
    );
    out.insert(
        "ReceiveMessageWaitTimeSeconds",
        record.receive_wait_s.to_string(),
    );
    // Kept attributes, as set; SSE is off unless set (hotq encrypts nothing).
    out.insert("SqsManagedSseEnabled", "false".into());
    for name in KEPT {
        if let Some(value) = record.kept.get(*name) {
            out.insert(name, value.clone());
        }
    }
    if let (Some(max), Some(dead)) = (effective.max_deliveries, &effective.dead_letter_queue) {
        let policy = json!({"deadLetterTargetArn": arn_of(config, dead), "maxReceiveCount": max});
        out.insert("RedrivePolicy", policy.to_string());
    }
    if record.fifo {
        render_fifo(&record, &mut out);
    }
    out
}

/// A FIFO queue's own attributes.
fn render_fifo(record: &Record, out: &mut BTreeMap<&'static str, String>) {
    let pick = |yes: bool, this: &str, that: &str| if yes { this } else { that }.to_string();
    out.insert("FifoQueue", "true".into());
    out.insert(
        "ContentBasedDeduplication",
        record.content_dedup.to_string(),
    );
    out.insert(
        "DeduplicationScope",
        pick(record.dedup_per_group, "messageGroup", "queue"),
    );
    out.insert(
        "FifoThroughputLimit",
        pick(record.throughput_per_group, "perMessageGroupId", "perQueue"),
    );
}

/// The settings a queue gets when CreateQueue makes it (SQS's defaults)
/// for those it has not stored already.
pub fn creation_defaults(stored: &Stored) -> BTreeMap<String, Value> {
    let mut defaults = BTreeMap::new();
    if stored.default_lease_ms.is_none() {
        defaults.insert(
            "default_lease_ms".into(),
            json!(super::queues::VISIBILITY_TIMEOUT_DEFAULT_S * 1_000),
        );
    }
    if stored.max_deliveries.is_none() {
        // No redrive policy: never dead-lettered.
        defaults.insert("max_deliveries".into(), json!(0));
    }
    if stored.retention_ms.is_none() {
        defaults.insert("retention_ms".into(), json!(RETENTION_S_DEFAULT * 1_000));
    }
    defaults
}
