//! ReceiveMessage, DeleteMessage(Batch), ChangeMessageVisibility(Batch):
//! leased pops and settles through the core, the same path as
//! `POST /v1/queues/{q}/pop?lease_ms=` and `/ack`, `/nack`, `/extend`.
//!
//! - ReceiveMessage is a leased pop with the visibility timeout as the
//!   lease (0 s is a lease of 1 ms: visible again at once, the receive
//!   counted) and `WaitTimeSeconds` as the wait: a contended queue stages
//!   it in the line like any pop; an empty one long-polls. On a FIFO
//!   queue each group head received brings the next messages of its
//!   group, in order, while there is room
//!   ([`crate::service::Hotq::with_group_batches`]).
//! - The `ReceiptHandle` is the lease's receipt (32 hex digits, naming
//!   its queue), `-`, the item's key in hex, `-`, the delivery count of
//!   the receive ([`Handle`]). A malformed one, or one issued by another
//!   queue, is `ReceiptHandleIsInvalid`.
//! - DeleteMessage acks the lease. With a handle whose visibility timeout
//!   expired, it deletes the message if no one received it since (the
//!   item is back under its key with the receive's delivery count, or its
//!   lease is past expiry and not yet returned), as SQS does; a FIFO queue
//!   answers that the handle expired instead. A handle of a message
//!   deleted or received again since succeeds and deletes nothing (SQS:
//!   "the request succeeds, but the message will not be deleted").
//! - ChangeMessageVisibility extends the lease to the new timeout from
//!   now; 0 nacks (visible now; out of receives: dead-lettered). With an
//!   expired handle of a message not received since, it succeeds and
//!   changes nothing (the message is visible already); with one of a
//!   message deleted or received again since, `InvalidParameterValue`
//!   (SQS's answers, in the snapshots AWS-validated test suites record).
//! - `ApproximateFirstReceiveTimestamp`: hotq does not store when a
//!   message was first received; on the first receive it is now, on later
//!   ones the time the message was sent.
//! - `ReceiveRequestAttemptId` is accepted and not used: a retried receive
//!   gets other messages; the first attempt's come back after their
//!   visibility timeout.

use std::num::NonZeroU64;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{Map, Value, json};

use super::attributes::{Attributes, md5_hex, md5_of_attributes, select};
use super::error::SqsError;
use super::message;
use super::queues::{self, SqsQueue, VISIBILITY_TIMEOUT_DEFAULT_S};
use super::send::{batch_entries, failure};
use super::{Call, int_member, required_string, string_list};
use crate::envelope::now_ms;
use crate::keys::QueueKind;
use crate::service::{End, Error as CoreError, Item, PopLease, PopOptions, Receipt, Stale, Store};

/// Longest visibility timeout, in seconds (12 hours).
pub const VISIBILITY_TIMEOUT_MAX_S: i64 = 43_200;

fn lease_ms_of<S: Store>(call: &Call<'_, S>, seconds: i64) -> Result<NonZeroU64, SqsError> {
    let ms = (seconds as u64 * 1_000).max(1);
    let max = call.state.config.leases.lease_max_ms;
    if ms > max {
        return Err(SqsError::invalid(format!(
            "Value {seconds} for parameter VisibilityTimeout is invalid. Reason: this daemon's leases.lease_max_ms is {max}."
        )));
    }
    Ok(NonZeroU64::new(ms).expect("at least 1 ms"))
}

/// ReceiveMessage.
pub async fn receive_message<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let state = call.state;
    let queue = queues::load_url(&state.hotq, call.config(), &call.input).await?;
    let max = int_member(&call.input, "MaxNumberOfMessages", 1..=10)?.unwrap_or(1) as usize;
    let lease_ms = match int_member(
        &call.input,
        "VisibilityTimeout",
        0..=VISIBILITY_TIMEOUT_MAX_S,
    )? {
        Some(seconds) => lease_ms_of(call, seconds)?,
        None => match state.hotq.pop_default_lease_ms(&queue.keys).await? {
            Some(ms) => ms,
            // A queue with no default lease (used only through /v1): SQS's default.
            None => {
                NonZeroU64::new(VISIBILITY_TIMEOUT_DEFAULT_S * 1_000).expect("a default above 0")
            }
        },
    };
    let wait_s = match int_member(&call.input, "WaitTimeSeconds", 0..=20)? {
        Some(seconds) => seconds as u64,
        None => queue.record().receive_wait_s,
    };
    let mut system_names = string_list(&call.input, "AttributeNames")?;
    system_names.extend(string_list(&call.input, "MessageSystemAttributeNames")?);
    let attribute_names = string_list(&call.input, "MessageAttributeNames")?;
    state.note_queue(QueueKind::Fifo, queue.keys.name());
    let options = PopOptions {
        end: End::Front,
        max,
        wait: Duration::from_secs(wait_s),
        lease: PopLease::Ms(lease_ms),
    };
    let items = state.hotq.pop(&queue.keys, options, None).await?.items;
    let items = if queue.is_fifo() {
        // Each group head received brings the next of its group.
        let keys = &queue.keys;
        state
            .hotq
            .with_group_batches(keys, items, max, lease_ms)
            .await
    } else {
        items
    };
    let messages: Vec<Value> = items
        .iter()
        .map(|item| render(call, &queue, item, &system_names, &attribute_names))
        .collect();
    if messages.is_empty() {
        return Ok(json!({}));
    }
    Ok(json!({"Messages": messages}))
}

/// One received message in SQS's shape.
fn render<S: Store>(
    call: &Call<'_, S>,
    queue: &SqsQueue,
    item: &Item,
    system_names: &[String],
    attribute_names: &[String],
) -> Value {
    let message = message::decode(&item.payload, &item.key);
    let lease = item
        .lease
        .as_ref()
        .expect("a leased pop's items carry their lease");
    let mut answer = json!({
        "MessageId": message.header.id,
        "ReceiptHandle": Handle::text(&lease.receipt, &item.key, lease.delivery_count),
        "MD5OfBody": md5_hex(message.body.as_bytes()),
        "Body": message.body,
    });
    let system = system_attributes(call, item, &message.header, lease.delivery_count);
    let wanted = |name: &str| system_names.iter().any(|n| n == "All" || n == name);
    let picked: Map<String, Value> = system
        .into_iter()
        .filter(|(name, _)| wanted(name))
        .collect();
    if !picked.is_empty() {
        answer["Attributes"] = Value::Object(picked);
    }
    let attrs: Attributes = select(&message.header.attrs, attribute_names);
    if let Some(md5) = md5_of_attributes(&attrs) {
        answer["MD5OfMessageAttributes"] = json!(md5);
        answer["MessageAttributes"] = serde_json::to_value(attrs).expect("attributes serialize");
    }
    let _ = queue;
    answer
}

fn system_attributes<S: Store>(
    call: &Call<'_, S>,
    item: &Item,
    header: &message::Header,
    receives: u32,
) -> Map<String, Value> {
    let mut out = Map::new();
    let mut put = |name: &str, value: String| {
        out.insert(name.to_string(), Value::String(value));
    };
    put("SenderId", call.config().account.clone());
    put("SentTimestamp", item.enqueued_at_ms.to_string());
    put("ApproximateReceiveCount", receives.to_string());
    let first = if receives <= 1 {
        now_ms()
    } else {
        item.enqueued_at_ms
    };
    put("ApproximateFirstReceiveTimestamp", first.to_string());
    if let Some(seq) = &header.seq {
        put("SequenceNumber", seq.clone());
    }
    if let Some(dedup) = &header.dedup {
        put("MessageDeduplicationId", dedup.clone());
    }
    if let Some(group) = &header.group {
        put("MessageGroupId", group.clone());
    }
    if let Some(trace) = header
        .sys
        .get("AWSTraceHeader")
        .and_then(|v| v.string_value.clone())
    {
        put("AWSTraceHeader", trace);
    }
    if let Some(dead) = &item.dead_letter {
        put(
            "DeadLetterQueueSourceArn",
            queues::arn_of(call.config(), &dead.queue),
        );
    }
    out
}

/// A `ReceiptHandle`: the lease's receipt, and (in the handles receives
/// answer) the item's key and the receive's delivery count, which find the
/// message once the lease is gone. A bare receipt (a `/v1` lease's) is
/// taken too, without them.
struct Handle {
    receipt: Receipt,
    item: Option<(Vec<u8>, u32)>,
}

impl Handle {
    /// Most bytes of an item key a handle carries (SQS handles are at most
    /// 1,024 characters).
    const ITEM_KEY_LEN_MAX: usize = 480;

    fn text(receipt: &Receipt, item_key: &[u8], deliveries: u32) -> String {
        if item_key.len() > Self::ITEM_KEY_LEN_MAX {
            return receipt.to_string();
        }
        format!("{receipt}-{}-{deliveries}", hex::encode(item_key))
    }

    /// The handle `text`, issued by `queue`.
    fn parse(queue: &SqsQueue, text: &str) -> Result<Handle, SqsError> {
        let invalid = || SqsError::receipt_invalid(text);
        let mut parts = text.splitn(3, '-');
        let receipt = parts
            .next()
            .and_then(Receipt::parse)
            .filter(|receipt| receipt.names_queue(&queue.keys))
            .ok_or_else(invalid)?;
        let item = match (parts.next(), parts.next()) {
            (None, _) => None,
            (Some(key), Some(deliveries)) => {
                let key = hex::decode(key).map_err(|_| invalid())?;
                let deliveries: u32 = deliveries.parse().map_err(|_| invalid())?;
                if key.len() > Self::ITEM_KEY_LEN_MAX || deliveries == 0 {
                    return Err(invalid());
                }
                Some((key, deliveries))
            }
            (Some(_), None) => return Err(invalid()),
        };
        Ok(Handle { receipt, item })
    }
}

/// For a handle whose lease is no longer in force: was its message
/// received since? With `delete`, deletes it when not.
async fn stale<S: Store>(
    call: &Call<'_, S>,
    queue: &SqsQueue,
    handle: &Handle,
    delete: bool,
) -> Result<Stale, SqsError> {
    let Some((item_key, deliveries)) = &handle.item else {
        return Ok(Stale::Gone);
    };
    let found = (item_key.as_slice(), *deliveries);
    let hotq = &call.state.hotq;
    Ok(hotq
        .settle_stale(&queue.keys, &handle.receipt, found, delete)
        .await?)
}

/// Deletes (acks) the message of `text`; see the module's notes for a
/// handle no longer in force.
async fn delete_one<S: Store>(
    call: &Call<'_, S>,
    queue: &SqsQueue,
    text: &str,
) -> Result<(), SqsError> {
    let handle = Handle::parse(queue, text)?;
    match call
        .state
        .hotq
        .ack_receipt(&queue.keys, &handle.receipt)
        .await
    {
        Ok(()) => Ok(()),
        Err(CoreError::UnknownReceipt | CoreError::LeaseExpired { .. }) => {
            // A FIFO queue keeps a message whose handle expired: deleting
            // it would let its group's next one overtake a redelivery.
            let fifo = queue.is_fifo();
            match stale(call, queue, &handle, !fifo).await? {
                Stale::NotReceivedSince if fifo => Err(SqsError::invalid(format!(
                    "Value {text} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
                ))),
                Stale::NotReceivedSince | Stale::Gone => Ok(()),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// Sets the visibility timeout of the message of `handle` to `seconds` from now.
async fn change_one<S: Store>(
    call: &Call<'_, S>,
    queue: &SqsQueue,
    text: &str,
    seconds: i64,
) -> Result<(), SqsError> {
    let handle = Handle::parse(queue, text)?;
    let hotq = &call.state.hotq;
    let settled = if seconds == 0 {
        hotq.nack_receipt(&queue.keys, &handle.receipt, 0)
            .await
            .map(|_| ())
    } else {
        let lease_ms = lease_ms_of(call, seconds)?;
        hotq.extend_receipt(&queue.keys, &handle.receipt, lease_ms.get())
            .await
            .map(|_| ())
    };
    let gone = || {
        SqsError::invalid(format!(
            "Value {text} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."
        ))
    };
    match settled {
        Ok(()) => Ok(()),
        // Visible again and not received since: SQS answers 200 and
        // changes nothing.
        Err(CoreError::LeaseExpired { .. }) if handle.item.is_none() => Ok(()),
        Err(CoreError::UnknownReceipt | CoreError::LeaseExpired { .. }) => {
            match stale(call, queue, &handle, false).await? {
                Stale::NotReceivedSince => Ok(()),
                Stale::Gone => Err(gone()),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// DeleteMessage.
pub async fn delete_message<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    delete_one(call, &queue, required_string(&call.input, "ReceiptHandle")?).await?;
    Ok(json!({}))
}

/// ChangeMessageVisibility.
pub async fn change_visibility<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let handle = required_string(&call.input, "ReceiptHandle")?;
    let seconds = int_member(
        &call.input,
        "VisibilityTimeout",
        0..=VISIBILITY_TIMEOUT_MAX_S,
    )?
    .ok_or_else(|| SqsError::missing("VisibilityTimeout"))?;
    change_one(call, &queue, handle, seconds).await?;
    Ok(json!({}))
}

/// The batch answer of per-entry outcomes.
fn batch_answer(entries: &[Value], outcomes: Vec<Result<(), SqsError>>) -> Value {
    let (mut successful, mut failed) = (Vec::new(), Vec::new());
    for (entry, outcome) in entries.iter().zip(outcomes) {
        let id = entry["Id"].as_str().unwrap_or_default();
        match outcome {
            Ok(()) => successful.push(json!({"Id": id})),
            Err(error) => failed.push(failure(id, &error)),
        }
    }
    json!({"Successful": successful, "Failed": failed})
}

/// DeleteMessageBatch: the entries' acks share settle commits.
pub async fn delete_message_batch<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let entries = batch_entries(&call.input, "DeleteMessageBatchRequestEntry")?;
    let outcomes = join_all(entries.iter().map(|entry| {
        let queue = &queue;
        async move { delete_one(call, queue, required_string(entry, "ReceiptHandle")?).await }
    }))
    .await;
    Ok(batch_answer(entries, outcomes))
}

/// ChangeMessageVisibilityBatch.
pub async fn change_visibility_batch<S: Store>(call: &Call<'_, S>) -> Result<Value, SqsError> {
    let queue = queues::load_url(&call.state.hotq, call.config(), &call.input).await?;
    let entries = batch_entries(&call.input, "ChangeMessageVisibilityBatchRequestEntry")?;
    let outcomes = join_all(entries.iter().map(|entry| {
        let queue = &queue;
        async move {
            let handle = required_string(entry, "ReceiptHandle")?;
            let seconds = int_member(entry, "VisibilityTimeout", 0..=VISIBILITY_TIMEOUT_MAX_S)?
                .ok_or_else(|| SqsError::missing("VisibilityTimeout"))?;
            change_one(call, queue, handle, seconds).await
        }
    }))
    .await;
    Ok(batch_answer(entries, outcomes))
}
