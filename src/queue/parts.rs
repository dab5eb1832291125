//! Payloads larger than one store value, split across part keys (issue
//! #38; the layout is in docs/large-items.md).
//!
//! A payload up to [`INLINE_PAYLOAD_MAX`] bytes stays inside its item's
//! envelope, exactly as before parts existed: no extra key, read or write.
//! A longer one is cut into parts of at most [`PART_BYTES_MAX`] bytes
//! under `("hotq-parts", id, n)`, written in the push's own transaction,
//! and the envelope holds `id` and the length instead of the payload (see
//! [`crate::envelope::PartsRef`]). So a push is all or nothing, and every
//! path that *moves* the item (lease, result, nack, delay, dead-letter,
//! redrive, reap) moves only its small envelope: the parts stay where they
//! are, owned by whichever single envelope refers to them.
//!
//! The parts are read where the payload reaches a caller ([`deliver_in`],
//! [`load_in`]) and cleared in the same transaction that ends the item for
//! good: an unleased pop that hands it out (the lease owns them otherwise),
//! an ack, a purge, a delete. A crash between steps leaves the parts with
//! the one envelope that still refers to them; nothing refers to parts
//! that are gone, and no parts outlive their last envelope.

use foundationdb_tuple::{Bytes, Subspace};
use rand::RngCore;

use crate::envelope::{
    INLINE_PAYLOAD_MAX, ItemValue, PARTS_ID_LEN, PartsRef, encode_item, encode_item_value,
};
use crate::store::{KeyValue, RangeRead, StoreError, Transaction};

use super::item::{Item, QueueError};

/// Most payload bytes one part key holds: a store value (100 kB) less the
/// headroom every envelope keeps.
pub const PART_BYTES_MAX: usize = INLINE_PAYLOAD_MAX;

fn subspace() -> Subspace {
    Subspace::all().subspace(&("hotq-parts",))
}

/// `[begin, end)` of every part of every item (for tests and checks: an
/// empty store holds none).
#[cfg(feature = "testing")]
pub fn all_parts_range() -> (Vec<u8>, Vec<u8>) {
    subspace().range()
}

/// `[begin, end)` of the parts named `id`.
pub fn parts_range(id: &[u8; PARTS_ID_LEN]) -> (Vec<u8>, Vec<u8>) {
    subspace().subspace(&(Bytes::from(&id[..]),)).range()
}

/// The parts id of a part key (`None` for a key that is not one).
#[cfg(feature = "testing")]
pub fn parts_id_of_key(key: &[u8]) -> Option<[u8; PARTS_ID_LEN]> {
    let (id, _n) = subspace().unpack::<(Vec<u8>, u32)>(key).ok()?;
    id.try_into().ok()
}

fn part_key(id: &[u8; PARTS_ID_LEN], n: u32) -> Vec<u8> {
    subspace().pack(&(Bytes::from(&id[..]), n))
}

/// How many parts a payload of `len` bytes takes.
pub fn part_count(len: usize) -> usize {
    len.div_ceil(PART_BYTES_MAX)
}

/// In `txn`: writes `payload` as parts under a fresh id; returns the
/// reference its envelope holds.
pub fn write_in<T: Transaction>(txn: &T, payload: &[u8]) -> Result<PartsRef, StoreError> {
    let mut id = [0u8; PARTS_ID_LEN];
    rand::rng().fill_bytes(&mut id);
    for (n, chunk) in payload.chunks(PART_BYTES_MAX).enumerate() {
        txn.set(&part_key(&id, n as u32), chunk)?;
    }
    Ok(PartsRef {
        id,
        // The core refuses payloads past `PAYLOAD_SIZE_MAX` (8 MiB).
        len: u32::try_from(payload.len()).expect("payloads are far below 4 GiB"),
    })
}

/// In `txn`: moves `item`'s payload into parts when it does not fit its
/// envelope (nothing for one that does).
pub fn spill_in<T: Transaction>(txn: &T, item: &mut ItemValue) -> Result<(), StoreError> {
    if item.parts.is_some() || item.payload.len() <= INLINE_PAYLOAD_MAX {
        return Ok(());
    }
    item.parts = Some(write_in(txn, &item.payload)?);
    item.payload = Vec::new();
    Ok(())
}

/// In `txn`: a fresh item's envelope for `payload`, its parts written
/// when it does not fit (a small payload without an expiry is encoded
/// exactly as before).
pub fn encode_fresh_in<T: Transaction>(
    txn: &T,
    enqueued_at_ms: u64,
    payload: &[u8],
    expires_at_ms: Option<u64>,
) -> Result<Vec<u8>, StoreError> {
    if payload.len() <= INLINE_PAYLOAD_MAX && expires_at_ms.is_none() {
        return Ok(encode_item(enqueued_at_ms, payload));
    }
    Ok(encode_item_value(&fresh_in(
        txn,
        enqueued_at_ms,
        payload,
        expires_at_ms,
    )?))
}

/// In `txn`: a fresh item for `payload`, its parts written when it does
/// not fit one value (the payload is copied only when it does).
pub fn fresh_in<T: Transaction>(
    txn: &T,
    enqueued_at_ms: u64,
    payload: &[u8],
    expires_at_ms: Option<u64>,
) -> Result<ItemValue, StoreError> {
    let (inline, parts) = if payload.len() <= INLINE_PAYLOAD_MAX {
        (payload.to_vec(), None)
    } else {
        (Vec::new(), Some(write_in(txn, payload)?))
    };
    Ok(ItemValue {
        parts,
        expires_at_ms,
        ..ItemValue::new(enqueued_at_ms, inline)
    })
}

/// In `txn`: clears the parts `parts` names (nothing for `None`): the
/// item that referred to them ends in this transaction.
pub fn clear_in<T: Transaction>(txn: &T, parts: Option<PartsRef>) -> Result<(), StoreError> {
    if let Some(parts) = parts {
        let (begin, end) = parts_range(&parts.id);
        txn.clear_range(&begin, &end)?;
    }
    Ok(())
}

/// In `txn`: reads the payload of a spilled `item` into it (nothing for
/// an inline one or one already read). Snapshot: parts never change while
/// an envelope refers to them, and whatever ends the item conflicts on
/// its envelope, which the caller reads or read-conflicts.
pub async fn load_in<T: Transaction>(txn: &T, item: &mut Item) -> Result<(), QueueError> {
    let Some(parts) = item.parts else {
        return Ok(());
    };
    if item.payload.len() == parts.len as usize {
        return Ok(());
    }
    item.payload = read_parts(txn, &parts).await?;
    Ok(())
}

/// The payload `parts` names, checked whole.
pub async fn read_parts<T: Transaction>(txn: &T, parts: &PartsRef) -> Result<Vec<u8>, QueueError> {
    let (begin, end) = parts_range(&parts.id);
    let count = part_count(parts.len as usize);
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, count + 1).snapshot())
        .await?;
    let mut payload = Vec::with_capacity(parts.len as usize);
    for (n, KeyValue { key, value }) in rows.iter().enumerate() {
        if *key != part_key(&parts.id, n as u32) {
            return Err(QueueError::Corrupt { key: key.clone() });
        }
        payload.extend_from_slice(value);
    }
    if rows.len() != count || payload.len() != parts.len as usize {
        // Parts missing or extra: the store holds what hotq did not write.
        return Err(QueueError::Corrupt { key: begin });
    }
    Ok(payload)
}

/// The first part of `item`'s payload, for a preview (a console listing
/// shows the head of each item, not megabytes of it): `item.payload` holds
/// it, `item.parts` still says the whole length (see [`Item::len`]).
pub async fn load_head_in<T: Transaction>(txn: &T, item: &mut Item) -> Result<(), QueueError> {
    let Some(parts) = item.parts else {
        return Ok(());
    };
    let key = part_key(&parts.id, 0);
    match txn.get(&key, crate::store::Read::Snapshot).await? {
        Some(head) => item.payload = head,
        None => return Err(QueueError::Corrupt { key }),
    }
    Ok(())
}

/// In `txn`: reads the payloads of the spilled `items` about to reach
/// their callers, and clears the parts of those not leased (a leased
/// item's parts stay with its lease, which an ack ends). The caller
/// commits this in the transaction that takes the items.
pub async fn deliver_in<'a, T: Transaction>(
    txn: &T,
    items: impl IntoIterator<Item = &'a mut Item>,
) -> Result<(), QueueError> {
    for item in items {
        if item.parts.is_none() {
            continue;
        }
        load_in(txn, item).await?;
        if item.lease.is_none() {
            clear_in(txn, item.parts)?;
        }
    }
    Ok(())
}

/// How many of `items`, in order, a pop hands out within `bytes_max`
/// payload bytes (at least one): a pop of many large items stays bounded.
pub fn within_bytes(items: &[Item], bytes_max: usize) -> usize {
    let mut bytes = 0usize;
    for (taken, item) in items.iter().enumerate() {
        bytes = bytes.saturating_add(item.len());
        if taken > 0 && bytes > bytes_max {
            return taken;
        }
    }
    items.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::embedded::EmbeddedStore;
    use crate::store::{Read, Store};

    #[tokio::test]
    async fn a_large_payload_round_trips_through_parts_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            EmbeddedStore::open(crate::store::embedded::EmbeddedConfig::new(dir.path())).unwrap();
        let payload: Vec<u8> = (0..1_048_576u32).map(|i| i as u8).collect();
        let txn = store.begin().unwrap();
        let value = encode_fresh_in(&txn, 7, &payload, None).unwrap();
        txn.commit().await.unwrap();
        assert!(value.len() < 100, "the envelope holds a reference");
        let item = crate::envelope::decode_item(&value).unwrap();
        let parts = item.parts.unwrap();
        let mut item = Item::from_value(b"k".to_vec(), item);
        let txn = store.begin().unwrap();
        deliver_in(&txn, std::iter::once(&mut item)).await.unwrap();
        txn.commit().await.unwrap();
        assert_eq!(item.payload, payload);
        let txn = store.begin().unwrap();
        let (begin, end) = parts_range(&parts.id);
        let left = txn
            .get_range(RangeRead::new(&begin, &end, 100).snapshot())
            .await
            .unwrap();
        assert!(left.is_empty(), "an unleased delivery clears the parts");
        assert!(txn.get(&begin, Read::Snapshot).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_small_payload_writes_no_part() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            EmbeddedStore::open(crate::store::embedded::EmbeddedConfig::new(dir.path())).unwrap();
        let txn = store.begin().unwrap();
        let value = encode_fresh_in(&txn, 7, &[1; INLINE_PAYLOAD_MAX], None).unwrap();
        assert_eq!(value, encode_item(7, &[1; INLINE_PAYLOAD_MAX]));
        txn.commit().await.unwrap();
        let txn = store.begin().unwrap();
        let (begin, end) = all_parts_range();
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, 1).snapshot())
            .await
            .unwrap();
        assert!(rows.is_empty());
    }
}
