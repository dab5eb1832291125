//! Items that move between queues with their group: a dead letter goes to
//! its dead-letter queue in its group, and a redrive takes a group's head
//! out of the dead-letter queue together with the items waiting behind it
//! and puts each at the tail of its group in the queue it goes back to.
//! Each side keeps the group's invariant in the mover's own commit: at
//! most one head per group, the rest waiting in push (here: move) order,
//! and no waiting item left without a head in front of it.

use super::*;

/// An item moved into a FIFO queue from another queue, with everything its
/// envelope says (delivery count, dead-letter origin, group) as it is to be
/// stored there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Its envelope in the queue it moves to.
    pub item: ItemValue,
    /// From when it may be seen (past or now: at once).
    pub visible_at_ms: u64,
}

/// In `txn`: appends `items` to the FIFO queue `keys`, in order, each at
/// the next push index and placed as a push places it: an item without a
/// group is visible at once (or, not yet visible, held until its time at
/// that index); an item of a group without a head becomes the head; one
/// of a group with a head waits behind the group's last item. So moved
/// items join the tails of their groups in the order given, behind
/// whatever the group already holds, and one head per group still holds.
/// Reads each group's state without snapshot, as a push does: a concurrent
/// push, promotion or move on one group conflicts.
pub async fn move_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &[Moved],
    now_ms: u64,
) -> Result<(), StoreError> {
    let next_index = next_index_in(txn, keys).await?;
    let indexes = move_indexes_in(txn, keys, items, next_index).await?;
    let groups = items.iter().filter_map(|moved| moved.item.group.as_deref());
    let mut has_head = heads_in(txn, keys, groups).await?;
    let mut counts = Counts::default();
    for (moved, index) in items.iter().zip(indexes) {
        let random = fresh_random();
        let at = Place {
            index,
            random: &random,
            visible_at_ms: moved.visible_at_ms,
            now_ms,
        };
        match moved.item.group.as_deref() {
            Some(group) => place_in(
                txn,
                keys,
                &mut has_head,
                group,
                &moved.item,
                &at,
                &mut counts,
            )?,
            None if at.visible_at_ms > now_ms => {
                let held = HeldItem {
                    item_key: keys.item(at.index, at.random),
                    item: moved.item.clone(),
                };
                let key = keys.delayed(at.visible_at_ms, at.random);
                txn.set(&key, &encode_held(&held))?;
                crate::queue::expiry::index_in(txn, keys, &key, moved.item.expires_at_ms)?;
                counts.delayed += 1;
            }
            None => {
                let key = keys.item(at.index, at.random);
                txn.set(&key, &encode_item_value(&moved.item))?;
                crate::queue::expiry::index_in(txn, keys, &key, moved.item.expires_at_ms)?;
                counts.visible += 1;
            }
        }
    }
    txn.atomic_max(&keys.next_index(), next_index + items.len() as u64)?;
    counts.add_in(txn, keys)
}

/// In `txn`: the push index of each of `items` in the queue they move to:
/// the next push counts, or, when any has a fairness key, their places
/// in the fair order under the queue's weights (see [`crate::queue::fair`]).
async fn move_indexes_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &[Moved],
    next_index: u64,
) -> Result<Vec<u64>, StoreError> {
    let fair_keys: Vec<Option<&str>> = items
        .iter()
        .map(|moved| moved.item.fair_key.as_deref())
        .collect();
    if fair_keys.iter().all(Option::is_none) {
        return Ok((next_index..next_index + items.len() as u64).collect());
    }
    let weights = crate::queue::settings::read_in(txn, keys)
        .await
        .map_err(crate::queue::corrupt_as_store)?
        .fair_weights
        .unwrap_or_default();
    crate::queue::fair::indexes_in(txn, keys, &fair_keys, &weights).await
}

/// An item waiting behind its group's head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Its key under `grouped/`.
    pub key: Vec<u8>,
    /// From when it may be seen (its push's delay).
    pub visible_at_ms: u64,
    /// Its envelope.
    pub item: ItemValue,
}

/// In `txn`: the first (at most `max`) items waiting behind `group`'s
/// head, in group order, read without snapshot: a push behind them or a
/// promotion of the first conflicts with a commit that takes them. The
/// list ends before a waiting value hotq did not write (its group's next
/// promotion drops it, see [`leave_in`]).
pub async fn waiting_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    group: &str,
    max: usize,
) -> Result<Vec<Waiting>, StoreError> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let (begin, end) = keys.grouped_range(group);
    let rows = txn.get_range(RangeRead::new(&begin, &end, max)).await?;
    let mut waiting = Vec::with_capacity(rows.len());
    for KeyValue { key, value } in rows {
        let Some((visible_at_ms, item)) = decode_pending(&value) else {
            break;
        };
        waiting.push(Waiting {
            key,
            visible_at_ms,
            item,
        });
    }
    Ok(waiting)
}

/// In `txn`: `waiting` (read by [`waiting_in`]) leaves its queue for good,
/// moved elsewhere. Its group keeps its head; once the caller has taken
/// what it moves, the head's own leave ([`leave_in`]) promotes the first
/// item still waiting, or ends the group.
pub fn take_waiting_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    waiting: &Waiting,
) -> Result<(), StoreError> {
    txn.clear(&waiting.key)?;
    crate::queue::expiry::unindex_in(txn, keys, &waiting.key, waiting.item.expires_at_ms)?;
    txn.atomic_add(&keys.grouped_count(), -1)
}
