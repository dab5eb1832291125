//! The coordinator's side of leases and delays: expired leases go back
//! (or to the dead-letter queue), delayed items become visible. Both are
//! keyed by the time they are due, so one range read from the start of the
//! subspace finds all that is due, and the earliest key says when to look
//! next: one timer per daemon, never a loop per item.

use crate::envelope::{decode_held, encode_item_value};
use crate::keys::QueueKeys;
use crate::queue::{QueueError, append_in};
use crate::store::{KeyValue, RangeRead, Store, StoreError, Transaction};

use super::settle::{Returned, return_held};

/// Most leases or delayed items one transaction moves.
pub const DUE_BATCH_MAX: usize = 256;
/// Most value bytes one transaction moves (a store transaction is limited
/// to 10 MB, and every moved item is written once more). At least one
/// row is always taken, and a row is at most 100 kB.
pub const DUE_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most transactions one sweep of one queue runs (the rest waits for the
/// next sweep, which comes at once when work was left).
const DUE_PASSES_MAX: usize = 64;

/// What one sweep of one queue did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Expired leases whose item went back to the queue.
    pub redelivered: usize,
    /// Expired leases whose item went to the dead-letter queue.
    pub dead_lettered: usize,
    /// Delayed items that became visible.
    pub revealed: usize,
    /// True when the pass limit stopped the sweep with work left.
    pub more: bool,
}

/// Returns every lease of `keys` expired at `now_ms`, in bounded
/// transactions; items with `max_deliveries` deliveries go to the
/// dead-letter queue.
pub async fn expire_leases<S: Store>(
    store: &S,
    keys: &QueueKeys,
    now_ms: u64,
    max_deliveries: Option<u32>,
) -> Result<Swept, QueueError> {
    let mut swept = Swept::default();
    let (begin, end) = keys.leases_due_range(now_ms);
    for _ in 0..DUE_PASSES_MAX {
        let txn = store.begin()?;
        let (rows, full) = due_rows(&txn, &begin, &end).await?;
        if rows.is_empty() {
            return Ok(swept);
        }
        let mut pass = Swept::default();
        for KeyValue { key, value } in &rows {
            // Consumes the lease: an ack, nack or extend of it conflicts.
            txn.add_read_conflict_key(key)?;
            txn.clear(key)?;
            txn.atomic_add(&keys.leased(), -1)?;
            let parsed = keys.lease_parts(key).zip(decode_held(value));
            let Some(((_, receipt), held)) = parsed else {
                tracing::warn!(queue = %keys.name(), ?key, "clearing a malformed lease");
                continue;
            };
            txn.clear(&keys.receipt(&receipt))?;
            match return_held(&txn, keys, held, 0, now_ms, max_deliveries).await? {
                Returned::DeadLettered => pass.dead_lettered += 1,
                Returned::Requeued | Returned::Delayed { .. } => pass.redelivered += 1,
            }
        }
        match txn.commit().await {
            Ok(()) => {
                swept.redelivered += pass.redelivered;
                swept.dead_lettered += pass.dead_lettered;
            }
            // An ack or extend won a lease: read the page again.
            Err(StoreError::Conflict) => crate::metrics::conflict("expire"),
            Err(error) => return Err(error.into()),
        }
        if !full {
            return Ok(swept);
        }
    }
    swept.more = true;
    Ok(swept)
}

/// Makes every delayed item of `keys` due at `now_ms` visible: a nacked
/// item at its original key, a delayed push at the queue's tail.
pub async fn reveal_delayed<S: Store>(
    store: &S,
    keys: &QueueKeys,
    now_ms: u64,
) -> Result<Swept, QueueError> {
    let mut swept = Swept::default();
    let (begin, end) = keys.delayed_due_range(now_ms);
    for _ in 0..DUE_PASSES_MAX {
        let txn = store.begin()?;
        let (rows, full) = due_rows(&txn, &begin, &end).await?;
        if rows.is_empty() {
            return Ok(swept);
        }
        let mut to_tail = Vec::new();
        let mut returned = 0usize;
        for KeyValue { key, value } in &rows {
            txn.add_read_conflict_key(key)?;
            txn.clear(key)?;
            let Some(held) = decode_held(value) else {
                tracing::warn!(queue = %keys.name(), ?key, "clearing a malformed delayed item");
                continue;
            };
            if held.item_key.is_empty() {
                to_tail.push(encode_item_value(&held.item));
            } else {
                txn.set(&held.item_key, &encode_item_value(&held.item))?;
                returned += 1;
            }
        }
        let revealed = returned + to_tail.len();
        if !to_tail.is_empty() {
            append_in(&txn, keys, &to_tail).await?;
        }
        if returned > 0 {
            txn.atomic_add(&keys.depth(), returned as i64)?;
        }
        if revealed > 0 {
            txn.atomic_add(&keys.delayed_count(), -(revealed as i64))?;
        }
        match txn.commit().await {
            Ok(()) => swept.revealed += revealed,
            // Another daemon's timer took them first.
            Err(StoreError::Conflict) => crate::metrics::conflict("reveal"),
            Err(error) => return Err(error.into()),
        }
        if !full {
            return Ok(swept);
        }
    }
    swept.more = true;
    Ok(swept)
}

/// The first due rows of `[begin, end)`, at most [`DUE_BATCH_MAX`] and
/// [`DUE_BATCH_BYTES_MAX`] bytes (at least one), and whether more may follow.
async fn due_rows<T: Transaction>(
    txn: &T,
    begin: &[u8],
    end: &[u8],
) -> Result<(Vec<KeyValue>, bool), StoreError> {
    let mut rows = txn
        .get_range(RangeRead::new(begin, end, DUE_BATCH_MAX).snapshot())
        .await?;
    let mut full = rows.len() >= DUE_BATCH_MAX;
    let mut bytes = 0usize;
    if let Some(cut) = rows.iter().position(|row| {
        bytes += row.key.len() + row.value.len();
        bytes > DUE_BATCH_BYTES_MAX
    }) {
        rows.truncate(cut.max(1));
        full = true;
    }
    Ok((rows, full))
}

/// When `keys` next has a lease expiring or a delayed item coming due,
/// in ms since the epoch; `None` when it has neither.
pub async fn next_due<S: Store>(store: &S, keys: &QueueKeys) -> Result<Option<u64>, QueueError> {
    let txn = store.begin()?;
    let first = |(begin, end): (Vec<u8>, Vec<u8>)| {
        let txn = &txn;
        async move {
            txn.get_range(RangeRead::new(&begin, &end, 1).snapshot())
                .await
                .map(|rows| rows.into_iter().next().map(|row| row.key))
        }
    };
    let lease = first(keys.leases_range())
        .await?
        .and_then(|key| keys.lease_parts(&key).map(|(at, _)| at));
    let delayed = first(keys.delayed_range())
        .await?
        .and_then(|key| keys.delayed_visible_at(&key));
    Ok(match (lease, delayed) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}
