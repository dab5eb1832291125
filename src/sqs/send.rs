//! SendMessage and SendMessageBatch: pushes through hotq's deduplicated
//! push ([`crate::service::Hotq::push`]), the same commit path as
//! `POST /v1/queues/{q}/items`. A FIFO message's `MessageGroupId` becomes
//! the item's message group ([`message::group_key`]) and its dedup id (or
//! the body's SHA-256, with `ContentBasedDeduplication`) the push's dedup
//! id, counted in the queue's dedup window (5 minutes, as SQS). A
//! standard queue's `MessageGroupId` becomes the item's fairness key
//! (as SQS fair queues use it): groups are served round-robin, in
//! proportion to the queue's `fair_weights` ([`crate::service::Hotq::push`]).
//!
//! A batch checks every entry first (a bad entry fails alone, with its
//! code), then pushes the good ones in one commit per distinct delay, in
//! order (entries of a FIFO batch all share the queue's delay).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::attributes::{self, check_text, md5_hex, md5_of_attributes};
use super::error::SqsError;
use super::message::{self, Header, body_size_max, item_size_max};
use super::queues::{self, SqsQueue};
use super::{Call, int_member, required_string, string_member};
use crate::envelope::now_ms;
use crate::keys::QueueKind;
use crate::service::{PushItem, PushOptions, Store};

/// Most entries in one batch.
pub const BATCH_ENTRIES_MAX: usize = 10;
/// Largest batch, all bodies and attributes together (SQS's 1 MiB).
pub const BATCH_BYTES_MAX: usize = 1_048_576;

/// A checked message, ready to push.
struct Prepared {
    item: PushItem,
    delay_ms: Option<u64>,
    answer: Value,
}

/// SendMessage.
pub async fn send_message<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let prepared = prepare(&queue, &call.input, call.state.config.payload_bytes_max)?;
    push(call, &queue, &[&prepared]).await?;
    Ok(prepared.answer)
}

/// SendMessageBatch.
pub async fn send_message_batch<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let entries = batch_entries(&call.input, "SendMessageBatchRequestEntry")?;
    if queue.is_fifo() {
        fifo_batch_check(&queue, entries)?;
    }
    let size: usize = entries.iter().map(|e| e.to_string().len()).sum();
    if size > BATCH_BYTES_MAX {
        return Err(SqsError::batch_too_long(size, BATCH_BYTES_MAX));
    }
    let mut failed = Vec::new();
    let mut ready: Vec<(String, Prepared)> = Vec::new();
    for entry in entries {
        let id = entry["Id"].as_str().unwrap_or_default().to_string();
        match prepare(&queue, entry, call.state.config.payload_bytes_max) {
            Ok(prepared) => ready.push((id, prepared)),
            Err(error) => failed.push(failure(&id, &error)),
        }
    }
    let mut successful = Vec::new();
    // One push per run of equal delays, in order.
    let mut start = 0;
    while start < ready.len() {
        let delay = ready[start].1.delay_ms;
        let end = start
            + ready[start..]
                .iter()
                .take_while(|(_, p)| p.delay_ms == delay)
                .count();
        let run: Vec<&Prepared> = ready[start..end].iter().map(|(_, p)| p).collect();
        let pushed = push(call, &queue, &run).await;
        for (id, prepared) in &ready[start..end] {
            match &pushed {
                Ok(()) => {
                    let mut answer = prepared.answer.clone();
                    answer["Id"] = json!(id);
                    successful.push(answer);
                }
                Err(error) => failed.push(failure(id, error)),
            }
        }
        start = end;
    }
    Ok(json!({"Successful": successful, "Failed": failed}))
}

/// A FIFO batch with an entry missing its `MessageGroupId`, or its
/// `MessageDeduplicationId` without content-based dedup, fails as a whole
/// with `InvalidParameterValue`, as SQS answers it (a batch's other bad
/// entries fail alone).
fn fifo_batch_check(queue: &SqsQueue, entries: &[Value]) -> Result<(), SqsError> {
    let content_dedup = queue.record().content_dedup;
    for entry in entries {
        if string_member(entry, "MessageGroupId")?.is_none() {
            return Err(SqsError::invalid(
                "The request must contain the parameter MessageGroupId.",
            ));
        }
        if !content_dedup && string_member(entry, "MessageDeduplicationId")?.is_none() {
            return Err(SqsError::invalid(
                "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
            ));
        }
    }
    Ok(())
}

/// A batch entry's failure, as SQS reports it.
pub fn failure(id: &str, error: &SqsError) -> Value {
    json!({"Id": id, "SenderFault": error.sender_fault, "Code": error.query_code, "Message": error.message})
}

/// The `Entries` of a batch request, checked as a whole: 1 to 10, ids of
/// 1-80 `A-Z a-z 0-9 - _`, distinct. `entry` is the action's entry type
/// (`SendMessageBatchRequestEntry`), which SQS's errors name.
pub fn batch_entries<'a>(input: &'a Value, entry: &str) -> Result<&'a Vec<Value>, SqsError> {
    let entries = match input.get("Entries") {
        Some(Value::Array(entries)) => entries,
        None | Some(Value::Null) => return Err(SqsError::missing("Entries")),
        Some(_) => return Err(SqsError::invalid("Entries must be a list")),
    };
    if entries.is_empty() {
        return Err(SqsError::empty_batch(entry));
    }
    if entries.len() > BATCH_ENTRIES_MAX {
        return Err(SqsError::too_many_entries(entries.len(), BATCH_ENTRIES_MAX));
    }
    let mut seen = BTreeSet::new();
    for entry in entries {
        let id = required_string(entry, "Id")?;
        let valid = !id.is_empty()
            && id.len() <= 80
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !valid {
            return Err(SqsError::batch_entry_id(id));
        }
        if !seen.insert(id) {
            return Err(SqsError::ids_not_distinct(id));
        }
    }
    Ok(entries)
}

/// Checks a group or dedup id: 1-128 of ASCII `!` to `~`.
fn check_fifo_id(name: &str, id: &str) -> Result<(), SqsError> {
    if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| (0x21..=0x7e).contains(&b)) {
        return Err(SqsError::invalid(format!(
            "Value {id} for parameter {name} is invalid. Reason: it must be 1 to 128 alphanumeric or punctuation characters."
        )));
    }
    Ok(())
}

fn too_long(size: usize, max: usize) -> SqsError {
    SqsError::invalid(format!(
        "One or more parameters are invalid. Reason: Message must be shorter than {max} bytes \
         (this queue's MaximumMessageSize, within the daemon's payload_bytes_max); got {size}."
    ))
}

/// Checks one message (`input` is a SendMessage request or a batch
/// entry) against the queue's `MaximumMessageSize` and the daemon's
/// `payload_bytes_max`.
fn prepare(
    queue: &SqsQueue,
    input: &Value,
    payload_bytes_max: usize,
) -> Result<Prepared, SqsError> {
    let record = queue.record();
    let body = required_string(input, "MessageBody")?;
    if body.is_empty() {
        return Err(SqsError::invalid(
            "The request must contain a non-empty MessageBody.",
        ));
    }
    check_text(body).map_err(|bad| SqsError::contents(format!("Invalid binary character '#x{:X}' was found in the message body, the set of allowed characters is #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF", bad as u32)))?;
    let (attrs, attrs_size) =
        attributes::parse(input.get("MessageAttributes"), "MessageAttributes")?;
    let (sys, _) = attributes::parse(
        input.get("MessageSystemAttributes"),
        "MessageSystemAttributes",
    )?;
    if let Some(name) = sys.keys().find(|name| *name != "AWSTraceHeader") {
        return Err(SqsError::invalid(format!(
            "Message system attribute name '{name}' is invalid (only AWSTraceHeader)."
        )));
    }
    let max = record
        .maximum_message_size
        .map_or(body_size_max(), |m| m as usize)
        .min(payload_bytes_max);
    let size = body.len() + attrs_size;
    if size > max {
        return Err(too_long(size, max));
    }
    let delay_s = delay_seconds(queue, input)?;
    let group = string_member(input, "MessageGroupId")?;
    let dedup = string_member(input, "MessageDeduplicationId")?;
    if let Some(group) = group {
        check_fifo_id("MessageGroupId", group)?;
    }
    let mut header = Header {
        id: message::new_id(),
        attrs,
        sys,
        group: group.map(str::to_string),
        ..Header::default()
    };
    let (hotq_group, dedup_id) = fifo_keys(queue, (group, dedup), body, &mut header)?;
    // A standard queue's MessageGroupId is its message's tenant, as SQS
    // fair queues take it: served fairly between groups, not in order.
    let fair_key = group.filter(|_| !queue.is_fifo()).map(message::group_key);
    let payload = message::encode(&header, body);
    let item_max = item_size_max(payload_bytes_max);
    if payload.len() > item_max {
        // Attributes whose SQS header outgrows the reserve (base64 of
        // binary values, JSON escapes).
        return Err(SqsError::invalid(format!(
            "One or more parameters are invalid. Reason: the message with its attributes \
             encodes to {} bytes, over hotq's item limit of {item_max} bytes.",
            payload.len()
        )));
    }
    let answer = answer_of(&header, body);
    let delay_ms = delay_s.map(|s| s as u64 * 1_000);
    let item = PushItem {
        payload,
        dedup_id,
        group: hotq_group,
        fair_key,
    };
    Ok(Prepared {
        item,
        delay_ms,
        answer,
    })
}

/// A message's `DelaySeconds` (`None`: the queue's delay). A FIFO queue
/// takes the queue's delay only; an explicit 0 is accepted (and means the
/// queue's delay), as SQS does.
fn delay_seconds(queue: &SqsQueue, input: &Value) -> Result<Option<i64>, SqsError> {
    let delay_s = int_member(input, "DelaySeconds", 0..=900)?;
    match delay_s {
        Some(n) if queue.is_fifo() && n != 0 => Err(SqsError::invalid(format!(
            "Value {n} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type."
        ))),
        _ if queue.is_fifo() => Ok(None),
        delay_s => Ok(delay_s),
    }
}

/// SendMessage's answer for a message with `header` and `body`: its id,
/// the MD5 digests SQS clients check, and a FIFO queue's sequence number.
fn answer_of(header: &Header, body: &str) -> Value {
    let mut answer = json!({"MessageId": header.id, "MD5OfMessageBody": md5_hex(body.as_bytes())});
    if let Some(md5) = md5_of_attributes(&header.attrs) {
        answer["MD5OfMessageAttributes"] = json!(md5);
    }
    if let Some(md5) = md5_of_attributes(&header.sys) {
        answer["MD5OfMessageSystemAttributes"] = json!(md5);
    }
    if let Some(seq) = &header.seq {
        answer["SequenceNumber"] = json!(seq);
    }
    answer
}

/// A FIFO queue's message group and dedup key in hotq's terms (the dedup
/// id given, or the body's SHA-256 with content-based dedup), noted in
/// `header` with its sequence number; a standard queue takes neither.
fn fifo_keys(
    queue: &SqsQueue,
    (group, dedup): (Option<&str>, Option<&str>),
    body: &str,
    header: &mut Header,
) -> Result<(Option<String>, Option<Vec<u8>>), SqsError> {
    let record = queue.record();
    let keys = if queue.is_fifo() {
        let group = group.ok_or_else(|| SqsError::missing("MessageGroupId"))?;
        let dedup = match dedup {
            Some(id) => {
                check_fifo_id("MessageDeduplicationId", id)?;
                id.to_string()
            }
            None if record.content_dedup => hex::encode(Sha256::digest(body.as_bytes())),
            None => {
                return Err(SqsError::invalid(
                    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly",
                ));
            }
        };
        header.dedup = Some(dedup.clone());
        header.seq = Some(next_sequence_number());
        let key = if record.dedup_per_group {
            dedup_key_in_group(group, &dedup)
        } else {
            dedup.into_bytes()
        };
        (Some(message::group_key(group)), Some(key))
    } else {
        if dedup.is_some() {
            return Err(SqsError::invalid(
                "Value for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not valid for this queue type.",
            ));
        }
        (None, None)
    };
    Ok(keys)
}

/// A dedup id counted per message group: the SHA-256 of the group's
/// length, the group and the id (hotq dedup ids are per queue).
fn dedup_key_in_group(group: &str, id: &str) -> Vec<u8> {
    let mut hasher = Sha256::new();
    hasher.update((group.len() as u32).to_be_bytes());
    hasher.update(group.as_bytes());
    hasher.update(id.as_bytes());
    hex::encode(hasher.finalize()).into_bytes()
}

/// A `SequenceNumber`: 20 digits, increasing within this daemon (send
/// time in ms, then a counter), so a group's messages number in order.
fn next_sequence_number() -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let floor = now_ms().saturating_mul(1_000_000);
    let previous = LAST
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
            Some(last.max(floor.saturating_sub(1)) + 1)
        })
        .expect("the update always succeeds");
    format!("{:020}", previous.max(floor.saturating_sub(1)) + 1)
}

/// Pushes prepared messages (one delay) in one commit.
async fn push<S: Store>(
    call: &Call<'_, S>,
    queue: &SqsQueue,
    prepared: &[&Prepared],
) -> Result<(), SqsError> {
    let state = call.state;
    state.note_queue(QueueKind::Fifo, queue.keys.name());
    let items: Vec<PushItem> = prepared.iter().map(|p| p.item.clone()).collect();
    let options = PushOptions {
        delay_ms: prepared.first().and_then(|p| p.delay_ms),
        retention_ms: None,
        // A message's item is its body and its header (checked against
        // SQS's limits when prepared).
        item_bytes_max: Some(item_size_max(state.config.payload_bytes_max)),
    };
    state.hotq.push(queue.keys.name(), &items, options).await?;
    Ok(())
}
