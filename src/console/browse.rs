//! Looking inside a queue without taking anything, and deleting one item
//! exactly: what the console's queue page shows and does, over any store.
//!
//! An item is named by its **id**: the hex of its key below the queue's
//! items subspace (`(index, random)` of a FIFO item, `(priority, count,
//! random)` of a priority item). It is stable while the item waits, and
//! it doubles as the cursor of the listing (`after`). Only visible items
//! have ids: leased items are named by their receipts, delayed items and
//! items waiting behind a group head are not in the items subspace.
//!
//! Any hex of 1 to [`ITEM_ID_HEX_LEN_MAX`] digits' worth of bytes is a
//! place in that key order, so the API takes every such id: as `after` it
//! continues from where the id sorts (an item taken since the last page
//! still names its place), and an id that names no visible item is simply
//! not found. This is also what the OpenAPI spec can state exactly.

use crate::keys::QueueKeys;

pub use crate::service::{GROUP_WAITING_COUNT_MAX, GROUPS_LIMIT_MAX, ITEMS_LIMIT_MAX};

/// Most hex digits of an item id: twice the longest key suffix an item
/// can have (a priority item's `(i64, u64, 16 random bytes)`, escaped, is
/// at most 52 bytes), rounded up.
pub const ITEM_ID_HEX_LEN_MAX: usize = 128;

/// The prefix every item key of `keys` starts with.
fn items_prefix(keys: &QueueKeys) -> Vec<u8> {
    let (begin, _) = keys.items_range();
    // A subspace's range is `prefix + 0x00 .. prefix + 0xff`.
    begin[..begin.len() - 1].to_vec()
}

/// The id of the item stored under `key` (see the module doc).
pub fn item_id(keys: &QueueKeys, key: &[u8]) -> String {
    let prefix = items_prefix(keys);
    hex::encode(key.strip_prefix(prefix.as_slice()).unwrap_or(key))
}

/// The key `id` names below `keys`' items subspace: `None` unless `id` is
/// hex of 1 to [`ITEM_ID_HEX_LEN_MAX`] digits (see the module doc).
pub fn item_key(keys: &QueueKeys, id: &str) -> Option<Vec<u8>> {
    if id.len() > ITEM_ID_HEX_LEN_MAX {
        return None;
    }
    let suffix = hex::decode(id).ok().filter(|suffix| !suffix.is_empty())?;
    let mut key = items_prefix(keys);
    key.extend_from_slice(&suffix);
    Some(key)
}

/// Whether `key` (from [`item_key`]) has the shape of an item key of
/// `keys`' kind: only such a key can name an item.
pub fn is_item_key(keys: &QueueKeys, key: &[u8]) -> bool {
    match keys.kind() {
        crate::keys::QueueKind::Fifo => keys.item_parts(key).is_some(),
        crate::keys::QueueKind::Priority => keys.priority_item_parts(key).is_some(),
    }
}
