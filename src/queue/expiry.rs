//! Retention: an item pushed with a retention (the queue's `retention_ms`
//! setting, or the push's own) carries `expires_at_ms` in its envelope and
//! is dropped once that passes, wherever it waits: visible, waiting behind
//! a group head, or delayed.
//!
//! **Indexed, never scanned.** While the item sits at a key (its item
//! key, its `grouped/` key, or its delayed due-index key), a due-index
//! entry `("hotq-due", expires_at_ms, kind, queue, "expire", that key)`
//! stands for it ([`index_in`]). Every path that puts an item with an
//! expiry somewhere writes the entry for where it lands; a pop, lease or
//! move that takes it from there clears it ([`unindex_in`]), so a
//! delivered item leaves no entry behind. The timer consumes a due entry
//! with [`expire_in`]: it reads the key without snapshot, so of a pop and
//! the expiry of one item exactly one commits, and drops what it finds
//! in the same commit (a group head's next item becomes the head).
//!
//! A leased item is out of every queue key: its lease row holds it. When
//! the lease expires (or is nacked) past the item's retention, the item is
//! dropped there instead of being returned ([`is_expired`], see
//! `crate::lease::settle::return_held`); a delayed item's reveal does the
//! same. An item that reached a worker (popped, or acked) is never
//! expired afterwards.
//!
//! The expiry is fixed at push: a later change of the queue's setting
//! applies to later pushes. A dead-lettered item leaves its retention
//! behind (kept until redriven or deleted), and its dedup id keeps
//! counting for its window, as for any other way an item leaves.

use crate::envelope::{ItemValue, decode_held, decode_item};
use crate::keys::{DueWhat, QueueKeys, due_entry};
use crate::store::{Read, StoreError, Transaction};

/// Longest retention a queue or a push may set: 365 days, in ms.
pub const RETENTION_MS_MAX: u64 = 365 * 24 * 60 * 60 * 1_000;

/// When an item pushed at `now_ms` with `retention_ms` expires.
pub fn expires_at(now_ms: u64, retention_ms: Option<u64>) -> Option<u64> {
    retention_ms.map(|retention_ms| now_ms.saturating_add(retention_ms.max(1)))
}

/// True when `item`'s retention has ended at `now_ms`.
pub fn is_expired(item: &ItemValue, now_ms: u64) -> bool {
    item.expires_at_ms.is_some_and(|at| at <= now_ms)
}

/// In `txn`: the item stored under `location` expires at `expires_at_ms`
/// (nothing for an item without a retention).
pub fn index_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    location: &[u8],
    expires_at_ms: Option<u64>,
) -> Result<(), StoreError> {
    match expires_at_ms {
        Some(at) => txn.set(&keys.due(at, DueWhat::Expire, location), &[]),
        None => Ok(()),
    }
}

/// In `txn`: the item with `expires_at_ms` leaves `location` (popped,
/// leased, moved): its entry goes with it.
pub fn unindex_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    location: &[u8],
    expires_at_ms: Option<u64>,
) -> Result<(), StoreError> {
    match expires_at_ms {
        Some(at) => txn.clear(&keys.due(at, DueWhat::Expire, location)),
        None => Ok(()),
    }
}

/// In `txn`: counts `count` items of `keys` dropped by their retention.
pub fn count_in<T: Transaction>(txn: &T, keys: &QueueKeys, count: i64) -> Result<(), StoreError> {
    txn.atomic_add(&keys.expired_count(), count)
}

/// In the timer's transaction (which consumed the entry due at `due_ms`):
/// drops the item under `location` if it is still there with that expiry.
/// Returns whether it dropped one.
pub async fn expire_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    location: &[u8],
    due_ms: u64,
    now_ms: u64,
) -> Result<bool, StoreError> {
    // Not snapshot: a pop, lease or move of the item conflicts with this.
    let Some(value) = txn.get(location, Read::Serializable).await? else {
        return Ok(false);
    };
    let ours = |item: &ItemValue| item.expires_at_ms == Some(due_ms);
    if keys.is_item_key(location) {
        let Some(item) = decode_item(&value).filter(ours) else {
            return Ok(false);
        };
        remove_visible_in(txn, keys, location, item, now_ms).await?;
    } else if keys.is_grouped_key(location) {
        let waiting = crate::queue::groups::waiting_item_of_value(&value);
        if !waiting.is_some_and(|item| ours(&item)) {
            return Ok(false);
        }
        txn.clear(location)?;
        txn.atomic_add(&keys.grouped_count(), -1)?;
    } else if is_delayed_key(keys, location) {
        let Some(held) = decode_held(&value).filter(|held| ours(&held.item)) else {
            return Ok(false);
        };
        txn.clear(location)?;
        txn.atomic_add(&keys.delayed_count(), -1)?;
        // A delayed item of a group is its group's head: the next one moves up.
        if let Some(group) = &held.item.group {
            crate::queue::groups::leave_in(txn, keys, group, now_ms).await?;
        }
    } else {
        tracing::warn!(queue = %keys.name(), ?location, "an expiry entry names no item key of its queue");
        return Ok(false);
    }
    count_in(txn, keys, 1)?;
    Ok(true)
}

/// In `txn`: removes the visible `item` stored under `key` (read by the
/// caller without snapshot), as every path deleting a visible item does:
/// the item, its count, its expiry entry, and its group's head (the next
/// item moves up).
pub async fn remove_visible_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    key: &[u8],
    item: ItemValue,
    now_ms: u64,
) -> Result<(), StoreError> {
    txn.clear(key)?;
    txn.atomic_add(&keys.depth(), -1)?;
    unindex_in(txn, keys, key, item.expires_at_ms)?;
    crate::queue::groups::dropped_in(txn, keys, std::iter::once(Some(item)), now_ms).await
}

fn is_delayed_key(keys: &QueueKeys, key: &[u8]) -> bool {
    due_entry(key).is_some_and(|entry| {
        entry.what == DueWhat::Delayed && entry.kind == keys.kind() && &entry.queue == keys.name()
    })
}
