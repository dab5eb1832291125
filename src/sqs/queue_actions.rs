//! The queue actions: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue,
//! PurgeQueue, GetQueueAttributes, SetQueueAttributes, TagQueue,
//! UntagQueue, ListQueueTags, ListDeadLetterSourceQueues.
//!
//! CreateQueue and SetQueueAttributes write the SQS record and the queue's
//! settings in one transaction that reads both without snapshot, so two
//! racing changes serialize; every check runs before the first write, so
//! a refused call writes nothing.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::SqsError;
use super::queue_attributes::{self, Change, Counts};
use super::queues::{self, Record, SqsQueue};
use super::{Call, int_member, required_string, string_list, string_member};
use crate::envelope::now_ms;
use crate::keys::{QueueKeys, QueueName};
use crate::service::{Hotq, RecordEditor, RecordedQueue, Store};

/// Most queues ListQueues answers at once.
pub const LIST_RESULTS_MAX: i64 = 1_000;
/// Most tags a queue has.
pub const TAGS_MAX: usize = 50;

fn string_map(input: &Value, name: &str) -> Result<BTreeMap<String, String>, SqsError> {
    match input.get(name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|_| SqsError::invalid(format!("{name} must map strings to strings"))),
    }
}

/// Checks a new queue's name as SQS does: 1-80 of `A-Z a-z 0-9 - _`,
/// with `.fifo` at the end (counted) for a FIFO queue.
fn check_new_name(name: &str, fifo: bool) -> Result<QueueName, SqsError> {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);
    let valid = !name.is_empty()
        && name.len() <= 80
        && !stem.is_empty()
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        && fifo == name.ends_with(".fifo");
    if !valid {
        return Err(SqsError::invalid(format!(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length; \
             a FIFO queue (FifoQueue=true) and only a FIFO queue ends in .fifo: {name:?}"
        )));
    }
    QueueName::new(name).map_err(|e| SqsError::invalid(e.to_string()))
}

/// CreateQueue: idempotent for equal attributes, `QueueNameExists` otherwise.
pub async fn create_queue<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let raw = required_string(&call.input, "QueueName")?;
    let attributes = string_map(&call.input, "Attributes")?;
    let tags = string_map(&call.input, "tags")?;
    check_tags(&tags)?;
    let fifo = attributes
        .get("FifoQueue")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let name = check_new_name(raw, fifo)?;
    let keys = QueueKeys::new(&name);
    let url = json!({"QueueUrl": queues::url_of(&call.base_url, call.config(), keys.name())});
    let creation = Creation {
        call,
        name: name.clone(),
        attributes: &attributes,
        tags: &tags,
    };
    write_change(call, &keys, &creation).await?;
    Ok(url)
}

/// CreateQueue's judgement of the queue as it is: nothing to write when it
/// exists with equal attributes, `QueueNameExists` when with others.
struct Creation<'a, 'c, S: Store> {
    call: &'a Call<'c, S>,
    name: QueueName,
    attributes: &'a BTreeMap<String, String>,
    tags: &'a BTreeMap<String, String>,
}

impl<S: Store> RecordEditor<Record, SqsError> for Creation<'_, '_, S> {
    fn edit(&self, queue: &RecordedQueue<Record>) -> Result<Option<Change>, SqsError> {
        let hotq = &self.call.state.hotq;
        let (config, defaults) = (self.call.config(), hotq.settings_defaults());
        let stored = &queue.settings;
        let base = queue.record.clone().unwrap_or_default();
        let change = queue_attributes::apply(config, defaults, &base, self.attributes, true)?;
        if let Some(existing) = &queue.record {
            let same_settings = hotq.settings_with_change(stored, &self.name, &change.settings)
                == Some(stored.clone());
            if change.record == *existing && same_settings {
                return Ok(None);
            }
            return Err(SqsError::queue_exists(format!(
                "A queue already exists with the same name and a different value for attribute(s) {}",
                self.attributes
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let now_s = now_ms() / 1_000;
        let mut record = Record {
            created_s: now_s,
            modified_s: now_s,
            tags: self.tags.clone(),
            ..change.record.clone()
        };
        record.fifo = change.record.fifo;
        let mut settings = queue_attributes::creation_defaults(stored);
        settings.extend(change.settings.clone());
        Ok(Some(Change {
            record,
            settings,
            dead_letter: change.dead_letter,
        }))
    }

    fn check_dead_letter(
        &self,
        change: &Change,
        dead: &RecordedQueue<Record>,
    ) -> Result<(), SqsError> {
        check_dead_letter(&self.name, change, dead)
    }

    fn invalid_settings(&self, message: String) -> SqsError {
        SqsError::attribute_value(message)
    }
}

/// A change of an existing record (SQS's defaults when it has none) by
/// `edit`: SetQueueAttributes, tags, permissions.
struct Update<'a, F> {
    name: &'a QueueName,
    edit: F,
}

impl<F> RecordEditor<Record, SqsError> for Update<'_, F>
where
    F: Fn(&Record) -> Result<Change, SqsError>,
{
    fn edit(&self, queue: &RecordedQueue<Record>) -> Result<Option<Change>, SqsError> {
        (self.edit)(&queue.record.clone().unwrap_or_default()).map(Some)
    }

    fn check_dead_letter(
        &self,
        change: &Change,
        dead: &RecordedQueue<Record>,
    ) -> Result<(), SqsError> {
        check_dead_letter(self.name, change, dead)
    }

    fn invalid_settings(&self, message: String) -> SqsError {
        SqsError::attribute_value(message)
    }
}

/// The dead-letter queue `change` names must exist, be another queue than
/// `name`, and of the same type (FIFO or standard).
fn check_dead_letter(
    name: &QueueName,
    change: &Change,
    dead: &RecordedQueue<Record>,
) -> Result<(), SqsError> {
    let refuse = |why: &str| {
        Err(SqsError::attribute_value(format!(
            "Value for parameter RedrivePolicy is invalid. Reason: {why}"
        )))
    };
    let exists = dead.record.is_some() || dead.exists;
    if !exists || change.dead_letter.as_ref() == Some(name) {
        return refuse("Dead letter target does not exist.");
    }
    if dead.record.as_ref().is_some_and(|r| r.fifo) != change.record.fifo {
        return refuse(
            "Dead-letter queue and source queue must be the same type (FIFO or standard).",
        );
    }
    Ok(())
}

/// Judges and writes a change of the queue of `keys` in one transaction
/// (see [`Hotq::change_recorded_queue`]): a refused change writes nothing.
async fn write_change<S: Store>(
    call: &Call<'_, S>,
    keys: &QueueKeys,
    editor: &(impl RecordEditor<Record, SqsError> + Sync),
) -> Result<(), SqsError> {
    call.state.hotq.change_recorded_queue(keys, editor).await?
}

/// GetQueueUrl.
pub async fn get_queue_url<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let raw = required_string(&call.input, "QueueName")?;
    let name = QueueName::new(raw).map_err(|_| SqsError::no_queue(raw))?;
    queues::load(&call.state.hotq, &name).await?;
    Ok(json!({"QueueUrl": queues::url_of(&call.base_url, call.config(), &name)}))
}

/// ListQueues (`QueueNamePrefix`, `MaxResults` 1-1000, `NextToken`).
pub async fn list_queues<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let prefix = string_member(&call.input, "QueueNamePrefix")?.unwrap_or("");
    let max = int_member(&call.input, "MaxResults", 1..=LIST_RESULTS_MAX)?;
    let after = string_member(&call.input, "NextToken")?
        .map(|token| {
            QueueName::new(token).map_err(|_| SqsError::invalid("Invalid NextToken value."))
        })
        .transpose()?;
    let limit = max.unwrap_or(LIST_RESULTS_MAX) as usize;
    let (names, next) = call
        .state
        .hotq
        .list_queue_names(prefix, after.as_ref(), limit)
        .await?;
    let urls: Vec<String> = names
        .iter()
        .map(|n| queues::url_of(&call.base_url, call.config(), n))
        .collect();
    let mut answer = json!({"QueueUrls": urls});
    // SQS answers a NextToken only when MaxResults was given.
    if let (Some(next), Some(_)) = (next, max) {
        answer["NextToken"] = json!(next);
    }
    Ok(answer)
}

/// DeleteQueue: drops the queue and everything in it, as `DELETE /v1/queues/{q}`.
pub async fn delete_queue<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let dropped = call.state.delete_queue(&queue.keys).await?;
    if !dropped.done {
        return Err(SqsError::service(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the queue is busy; its delete is not finished, call again".into(),
        ));
    }
    Ok(json!({}))
}

/// PurgeQueue: drops visible, delayed and in-flight messages (SQS: "deletes
/// the messages in a queue, including in-flight messages"); a purged FIFO
/// group is released to the messages sent after the purge began.
pub async fn purge_queue<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let dropped = call.state.hotq.purge_in_flight(&queue.keys).await?;
    if !dropped.done {
        return Err(SqsError::service(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the purge is not finished, call again".into(),
        ));
    }
    Ok(json!({}))
}

/// GetQueueAttributes (`AttributeNames`: `All` or names).
pub async fn get_queue_attributes<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let asked = string_list(&call.input, "AttributeNames")?;
    let counts = counts(&call.state.hotq, &queue.keys).await?;
    let all = queue_attributes::render(
        call.config(),
        call.state.hotq.settings_defaults(),
        &queue,
        counts,
    );
    let mut picked = BTreeMap::new();
    for name in &asked {
        if name == "All" {
            picked.extend(all.iter().map(|(k, v)| (k.to_string(), v.clone())));
        } else if let Some(value) = all.get(name.as_str()) {
            picked.insert(name.clone(), value.clone());
        } else if !known_unshown(name, &queue) {
            return Err(SqsError::attribute_name(format!(
                "Unknown Attribute {name}."
            )));
        }
    }
    if picked.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({"Attributes": picked}))
}

/// Attributes SQS knows that this queue does not show (refused ones,
/// FIFO ones of a standard queue, an absent redrive policy).
fn known_unshown(name: &str, queue: &SqsQueue) -> bool {
    let refused = [
        "MessageRetentionPeriod",
        "Policy",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "RedriveAllowPolicy",
        "RedrivePolicy",
    ];
    let fifo = [
        "FifoQueue",
        "ContentBasedDeduplication",
        "DeduplicationScope",
        "FifoThroughputLimit",
    ];
    refused.contains(&name) || (!queue.is_fifo() && fifo.contains(&name))
}

/// The counters GetQueueAttributes shows as `ApproximateNumberOf…`.
pub(crate) async fn counts<S: Store>(
    hotq: &Hotq<S>,
    keys: &QueueKeys,
) -> crate::service::Result<Counts> {
    let counts = hotq.queue_counts(keys).await?;
    Ok(Counts {
        visible: counts.depth + counts.grouped,
        leased: counts.leased,
        delayed: counts.delayed,
    })
}

/// SetQueueAttributes.
pub async fn set_queue_attributes<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let attributes = string_map(&call.input, "Attributes")?;
    update_record(call, &queue.keys, |record| {
        let mut change = queue_attributes::apply(
            call.config(),
            call.state.hotq.settings_defaults(),
            record,
            &attributes,
            false,
        )?;
        change.record.modified_s = now_ms() / 1_000;
        Ok(change)
    })
    .await?;
    Ok(json!({}))
}

/// Applies `edit` to the queue's record (SQS's defaults when it has none)
/// and writes the change, in one transaction.
async fn update_record<S: Store>(
    call: &Call<'_, S>,
    keys: &QueueKeys,
    edit: impl Fn(&Record) -> Result<Change, SqsError> + Sync,
) -> Result<(), SqsError> {
    let update = Update {
        name: keys.name(),
        edit,
    };
    write_change(call, keys, &update).await
}

fn check_tags(tags: &BTreeMap<String, String>) -> Result<(), SqsError> {
    if tags.len() > TAGS_MAX
        || tags
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > 128 || v.len() > 256)
    {
        return Err(SqsError::invalid(format!(
            "Tags: at most {TAGS_MAX}, keys 1-128 and values 0-256 characters."
        )));
    }
    Ok(())
}

/// TagQueue.
pub async fn tag_queue<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let tags = string_map(&call.input, "Tags")?;
    update_record(call, &queue.keys, |record| {
        let mut record = record.clone();
        record.tags.extend(tags.clone());
        check_tags(&record.tags)?;
        Ok(Change {
            record,
            settings: BTreeMap::new(),
            dead_letter: None,
        })
    })
    .await?;
    Ok(json!({}))
}

/// UntagQueue.
pub async fn untag_queue<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let keys_to_drop = string_list(&call.input, "TagKeys")?;
    update_record(call, &queue.keys, |record| {
        let mut record = record.clone();
        for key in &keys_to_drop {
            record.tags.remove(key);
        }
        Ok(Change {
            record,
            settings: BTreeMap::new(),
            dead_letter: None,
        })
    })
    .await?;
    Ok(json!({}))
}

/// ListQueueTags.
pub async fn list_queue_tags<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let tags = queue.record().tags;
    if tags.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({"Tags": tags}))
}

/// ListDeadLetterSourceQueues: the queues whose dead letters go to this one.
/// Reads the settings of up to `MaxResults` (default and cap 1,000) queues
/// per call; `NextToken` continues.
pub async fn list_dead_letter_sources<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let target = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let max = int_member(&call.input, "MaxResults", 1..=LIST_RESULTS_MAX)?;
    let after = string_member(&call.input, "NextToken")?
        .map(|token| {
            QueueName::new(token).map_err(|_| SqsError::invalid("Invalid NextToken value."))
        })
        .transpose()?;
    let limit = max.unwrap_or(LIST_RESULTS_MAX) as usize;
    let hotq = &call.state.hotq;
    let (names, next) = hotq.list_queue_names("", after.as_ref(), limit).await?;
    let mut urls = Vec::new();
    for name in names {
        let keys = QueueKeys::new(&name);
        let effective = hotq
            .stored_settings(&keys)
            .await?
            .effective(&name, hotq.settings_defaults());
        if effective.max_deliveries.is_some()
            && effective.dead_letter_queue.as_deref() == Some(target.keys.name().as_str())
        {
            urls.push(queues::url_of(&call.base_url, call.config(), &name));
        }
    }
    let mut answer = json!({"queueUrls": urls});
    if let Some(next) = next {
        answer["NextToken"] = json!(next);
    }
    Ok(answer)
}

/// Most characters of a permission's label.
pub const LABEL_LEN_MAX: usize = 80;

fn check_label(label: &str) -> Result<(), SqsError> {
    let valid = !label.is_empty()
        && label.len() <= LABEL_LEN_MAX
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if !valid {
        return Err(SqsError::invalid(format!(
            "Value {label} for parameter Label is invalid. Reason: it must be 1 to {LABEL_LEN_MAX} of A-Z a-z 0-9 - _."
        )));
    }
    Ok(())
}

/// The queue's `Policy` as JSON, or SQS's empty default policy.
fn policy_of(record: &Record, arn: &str) -> Result<Value, SqsError> {
    let empty = || json!({"Version": "2008-10-17", "Id": format!("{arn}/SQSDefaultPolicy"), "Statement": []});
    let Some(text) = record.kept.get("Policy") else {
        return Ok(empty());
    };
    let mut policy: Value = serde_json::from_str(text)
        .map_err(|_| SqsError::invalid("The queue's Policy is not JSON."))?;
    if !policy.get("Statement").is_some_and(Value::is_array) {
        policy["Statement"] = json!([]);
    }
    Ok(policy)
}

/// One principal or action as SQS writes it: the value alone, or a list.
fn one_or_list(mut values: Vec<String>) -> Value {
    if values.len() == 1 {
        json!(values.remove(0))
    } else {
        json!(values)
    }
}

/// AddPermission: a statement in the queue's `Policy`, kept and answered,
/// not enforced (hotq has no IAM; access is by SigV4 credentials).
pub async fn add_permission<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let label = required_string(&call.input, "Label")?;
    check_label(label)?;
    let accounts = string_list(&call.input, "AWSAccountIds")?;
    let actions = string_list(&call.input, "Actions")?;
    if accounts.is_empty() {
        return Err(SqsError::missing("AWSAccountIds"));
    }
    if actions.is_empty() {
        return Err(SqsError::missing("Actions"));
    }
    let arn = queues::arn_of(call.config(), queue.keys.name().as_str());
    let statement = json!({
        "Sid": label,
        "Effect": "Allow",
        "Principal": {"AWS": one_or_list(accounts.iter().map(|a| format!("arn:aws:iam::{a}:root")).collect())},
        "Action": one_or_list(actions.iter().map(|a| format!("SQS:{a}")).collect()),
        "Resource": arn,
    });
    update_record(call, &queue.keys, |record| {
        let mut policy = policy_of(record, &arn)?;
        let statements = policy["Statement"].as_array_mut().expect("an array");
        if statements.iter().any(|s| s["Sid"] == label) {
            return Err(SqsError::invalid(format!(
                "Value {label} for parameter Label is invalid. Reason: Already exists."
            )));
        }
        statements.push(statement.clone());
        let mut record = record.clone();
        record.kept.insert("Policy".into(), policy.to_string());
        Ok(unchanged_settings(record))
    })
    .await?;
    Ok(json!({}))
}

/// RemovePermission: drops the statement `Label` from the queue's `Policy`
/// (the policy goes with its last statement).
pub async fn remove_permission<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let label = required_string(&call.input, "Label")?;
    let arn = queues::arn_of(call.config(), queue.keys.name().as_str());
    update_record(call, &queue.keys, |record| {
        let mut policy = policy_of(record, &arn)?;
        let statements = policy["Statement"].as_array_mut().expect("an array");
        let before = statements.len();
        statements.retain(|s| s["Sid"] != label);
        if statements.len() == before {
            return Err(SqsError::invalid(format!(
                "Value {label} for parameter Label is invalid. Reason: can't find label."
            )));
        }
        let mut record = record.clone();
        if statements.is_empty() {
            record.kept.remove("Policy");
        } else {
            record.kept.insert("Policy".into(), policy.to_string());
        }
        Ok(unchanged_settings(record))
    })
    .await?;
    Ok(json!({}))
}

/// A change of the record alone.
fn unchanged_settings(record: Record) -> Change {
    Change {
        record,
        settings: BTreeMap::new(),
        dead_letter: None,
    }
}
