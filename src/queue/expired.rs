//! Dropping an item whose retention ended (see [`crate::queue::expiry`]):
//! the timer's side, which reads the item where its entry says and moves
//! its group on.

use crate::envelope::{ItemValue, decode_held, decode_item};
use crate::keys::{DueWhat, QueueKeys, due_entry};
use crate::queue::expiry::{count_in, unindex_in};
use crate::store::{Read, StoreError, Transaction};

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
        let Some(item) = waiting.filter(ours) else {
            return Ok(false);
        };
        txn.clear(location)?;
        crate::queue::parts::clear_in(txn, item.parts)?;
        txn.atomic_add(&keys.grouped_count(), -1)?;
    } else if is_delayed_key(keys, location) {
        let Some(held) = decode_held(&value).filter(|held| ours(&held.item)) else {
            return Ok(false);
        };
        txn.clear(location)?;
        crate::queue::parts::clear_in(txn, held.item.parts)?;
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
/// the item, its parts (see [`crate::queue::parts`]), its count, its
/// expiry entry, and its group's head (the next item moves up).
pub async fn remove_visible_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    key: &[u8],
    item: ItemValue,
    now_ms: u64,
) -> Result<(), StoreError> {
    txn.clear(key)?;
    crate::queue::parts::clear_in(txn, item.parts)?;
    txn.atomic_add(&keys.depth(), -1)?;
    unindex_in(txn, keys, key, item.expires_at_ms)?;
    crate::queue::groups::dropped_in(txn, keys, std::iter::once(Some(item)), now_ms).await
}

fn is_delayed_key(keys: &QueueKeys, key: &[u8]) -> bool {
    due_entry(key).is_some_and(|entry| {
        entry.what == DueWhat::Delayed && entry.kind == keys.kind() && &entry.queue == keys.name()
    })
}
