//! SQS FIFO batches: a receive of up to N messages takes a leased group
//! head together with the next items waiting behind it, in group order
//! (AWS: "you can receive up to 10 messages of one group in a batch"),
//! and the group stays out until every one of them has left.
//!
//! The group's state is then [`State::Batch`] with the number of its items
//! still leased. [`leave_in`] (ack, dead letter, expiry past retention,
//! purge) counts one down and promotes the next item only when none is
//! left out. A batch item that returns (nack, visibility timeout) goes back
//! behind the group at its own push index ([`return_in`]), so the items of
//! the batch that return come first, in their original order, ahead of the
//! items still waiting; the last one out releases the first of them.
//! Nothing but an SQS FIFO receive makes a batch: `/v1` groups keep one
//! item out at a time.

use super::*;
use crate::lease::{Lease, lease_in};
use crate::queue::limits::Budget;
use std::num::NonZeroU64;

/// In `txn`: leases, after the leased group `head` (just received), up to
/// `max` of the items waiting behind it, in group order, each for
/// `lease_ms` from `now_ms`, their payloads read; the group stays out
/// until all of them and the head have left. Takes nothing when the head's
/// lease is no longer in force (returned, or past expiry: its group may be
/// the next receive's), when the group is not simply held by the head, or
/// from the first waiting item not yet visible or past its retention on,
/// or that the queue's limits (`budget`, spent here) hold back.
pub async fn take_batch_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    (head, max): (&Item, usize),
    (lease_ms, now_ms): (NonZeroU64, u64),
    budget: &mut Budget,
) -> Result<Vec<Item>, QueueError> {
    let (Some(group), Some(lease)) = (head.group.as_deref(), head.lease.as_ref()) else {
        return Ok(Vec::new());
    };
    if max == 0 || !lease_in_force_in(txn, keys, lease, now_ms).await? {
        return Ok(Vec::new());
    }
    if state_in(txn, keys, group).await? != Some(State::Head) {
        return Ok(Vec::new());
    }
    let mut taken = Vec::new();
    for waiting in waiting_in(txn, keys, group, max).await? {
        let ready = waiting.visible_at_ms <= now_ms
            && !crate::queue::expiry::is_expired(&waiting.item, now_ms);
        let index = keys.grouped_parts(&waiting.key);
        let Some((_, index, random)) = index.filter(|_| ready) else {
            break;
        };
        let mut item = Item::from_value(keys.item(index, &random), waiting.item.clone());
        budget
            .read_keys_in(txn, keys, std::iter::once(&item))
            .await?;
        if !budget.allows_item(&item, true) {
            break;
        }
        take_waiting_in(txn, keys, &waiting)?;
        budget.take_item(&item, true);
        lease_in(txn, keys, &mut item, lease_ms, now_ms)?;
        crate::queue::parts::load_in(txn, &mut item).await?;
        taken.push(item);
    }
    if !taken.is_empty() {
        let out = State::Batch {
            out: 1 + taken.len() as u32,
        };
        txn.set(&keys.group(group), &encode_state(&out))?;
    }
    Ok(taken)
}

/// Whether `lease`'s row is still at its issued expiry and not past it,
/// read without snapshot (the timer returning it, or a settle, conflicts).
async fn lease_in_force_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    lease: &Lease,
    now_ms: u64,
) -> Result<bool, StoreError> {
    if lease.expires_at_ms <= now_ms {
        return Ok(false);
    }
    let key = keys.lease(lease.expires_at_ms, &lease.receipt.0);
    Ok(txn.get(&key, Read::Serializable).await?.is_some())
}

/// In `txn` (whose caller has cleared its lease): when `held`'s group is
/// out as a batch, puts the returning `held` back behind the group at its
/// own push index, visible from `visible_at_ms`, and counts it out of the
/// batch (the last one out releases the group's first item). `false`, and
/// nothing written, when its group is not out as a batch.
pub async fn return_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    held: &HeldItem,
    visible_at_ms: u64,
    now_ms: u64,
) -> Result<bool, StoreError> {
    let Some(group) = held.item.group.as_deref() else {
        return Ok(false);
    };
    if !matches!(state_in(txn, keys, group).await?, Some(State::Batch { .. })) {
        return Ok(false);
    }
    let (index, random) = keys.item_parts(&held.item_key).unwrap_or_default();
    let key = keys.grouped_item(group, index, &random);
    let pending = encode_pending(visible_at_ms, &encode_item_value(&held.item));
    txn.set(&key, &pending)?;
    crate::queue::expiry::index_in(txn, keys, &key, held.item.expires_at_ms)?;
    txn.atomic_add(&keys.grouped_count(), 1)?;
    leave_in(txn, keys, group, now_ms).await?;
    Ok(true)
}
