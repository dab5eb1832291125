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
//! with `crate::queue::expired::expire_in` (a file of its own: it moves
//! group heads, and the group recipe writes these entries): it reads the
//! key without snapshot, so of a pop and
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

use crate::envelope::ItemValue;
use crate::keys::{DueWhat, QueueKeys};
use crate::store::{StoreError, Transaction};

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
