//! Acting on a lease by its receipt: ack, nack, extend, and release (in
//! another transaction, for a leased item that reached nobody).

use crate::envelope::{HeldItem, ItemValue, decode_held, encode_held, encode_item_value, now_ms};
use crate::keys::{QueueKeys, QueueName};
use crate::queue::QueueError;
use crate::store::{Read, StoreError, Transaction};

use super::{LeaseError, Receipt};

/// Where a nacked or expired item went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Returned {
    /// Back under its original key, visible now.
    Requeued,
    /// Under its original key again once the delay has passed.
    Delayed {
        /// When it becomes visible, in ms since the epoch.
        visible_at_ms: u64,
    },
    /// Its retention ended while it was leased: dropped, not returned
    /// (see [`crate::queue::expiry`]).
    Expired,
    /// Out of deliveries: appended to the dead-letter queue.
    DeadLettered {
        /// The FIFO queue it went to: `{queue}.dead`, or the queue's
        /// stored `dead_letter_queue` setting.
        queue: crate::keys::QueueName,
    },
}

/// A lease found by its receipt, every key on the way read without
/// snapshot (so a settle racing the timer, or another settle, conflicts).
struct Open {
    lease_key: Vec<u8>,
    /// The receipt's forwarding row, when the lease was found through one.
    receipt_key: Option<Vec<u8>>,
    held: HeldItem,
}

/// Finds the lease of `receipt`: at the expiry the receipt was issued
/// with (one read), else where its receipt row says (an extended lease,
/// or a receipt of an older binary). With `expired_ok`, a lease past its
/// expiry that the timer has not yet returned is still opened.
async fn open<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
    now_ms: u64,
    expired_ok: bool,
) -> Result<Result<Open, LeaseError>, StoreError> {
    let issued_key = keys.lease(receipt.issued_expiry_ms(), &receipt.0);
    if let Some(value) = txn.get(&issued_key, Read::Serializable).await? {
        let Some(held) = decode_held(&value) else {
            return Ok(corrupt(&issued_key));
        };
        return Ok(
            unexpired(receipt.issued_expiry_ms(), now_ms, expired_ok).map(|()| Open {
                lease_key: issued_key,
                receipt_key: None,
                held,
            }),
        );
    }
    let receipt_key = keys.receipt(&receipt.0);
    let Some(value) = txn.get(&receipt_key, Read::Serializable).await? else {
        return Ok(Err(LeaseError::UnknownReceipt));
    };
    let Ok(expires) = <[u8; 8]>::try_from(value.as_slice()) else {
        return Ok(corrupt(&receipt_key));
    };
    let expires_at_ms = u64::from_be_bytes(expires);
    if let Err(expired) = unexpired(expires_at_ms, now_ms, expired_ok) {
        return Ok(Err(expired));
    }
    let mut lease_key = keys.lease(expires_at_ms, &receipt.0);
    let mut value = txn.get(&lease_key, Read::Serializable).await?;
    if value.is_none() {
        // Written by a binary before the due index and not yet moved into
        // it (see `migrate`): settled where it is.
        lease_key = keys.legacy_lease(expires_at_ms, &receipt.0);
        value = txn.get(&lease_key, Read::Serializable).await?;
    }
    // A receipt row names where its lease is: the lease is cleared with it,
    // or moved with it by an extend.
    let Some(held) = value.as_deref().and_then(decode_held) else {
        return Ok(corrupt(&keys.lease(expires_at_ms, &receipt.0)));
    };
    Ok(Ok(Open {
        lease_key,
        receipt_key: Some(receipt_key),
        held,
    }))
}

fn corrupt<T>(key: &[u8]) -> Result<T, LeaseError> {
    Err(LeaseError::Queue(QueueError::Corrupt { key: key.to_vec() }))
}

/// `Expired` for a lease past `expires_at_ms`, unless `expired_ok`.
fn unexpired(expires_at_ms: u64, now_ms: u64, expired_ok: bool) -> Result<(), LeaseError> {
    if expires_at_ms <= now_ms && !expired_ok {
        return Err(LeaseError::Expired {
            expired_at_ms: expires_at_ms,
        });
    }
    Ok(())
}

impl Open {
    fn clear<T: Transaction>(&self, txn: &T, keys: &QueueKeys) -> Result<(), StoreError> {
        txn.clear(&self.lease_key)?;
        if let Some(receipt_key) = &self.receipt_key {
            txn.clear(receipt_key)?;
        }
        let fair_key = self.held.item.fair_key.as_deref();
        crate::lease::end_lease_in(txn, keys, fair_key, &self.lease_key)
    }
}

/// Acks the lease in `txn`, as of `now_ms`: the item is done and deleted.
/// Inner error: this receipt's outcome; outer: the transaction failed.
pub async fn ack_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
    now_ms: u64,
) -> Result<Result<(), LeaseError>, StoreError> {
    let open = match open(txn, keys, receipt, now_ms, false).await? {
        Ok(open) => open,
        Err(error) => return Ok(Err(error)),
    };
    open.clear(txn, keys)?;
    // The item is done: its parts go with its lease (see `crate::queue::parts`).
    crate::queue::parts::clear_in(txn, open.held.item.parts)?;
    if let Some(group) = &open.held.item.group {
        crate::queue::groups::leave_in(txn, keys, group, now_ms).await?;
    }
    Ok(Ok(()))
}

/// What a receipt no longer in force found of its item (see [`stale_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    /// Not received since: its lease is past its expiry (the timer has not
    /// returned it yet), or it is back under its key with the delivery
    /// count it had under the receipt. Deleted, when asked.
    NotReceivedSince,
    /// Gone (settled, dead-lettered, purged) or received again since.
    Gone,
}

/// In `txn`: for a receipt whose settle found no lease in force, whether
/// its item was received since, and with `delete`, deletes it when it was
/// not (SQS deletes a message by the handle of its last receive, expired
/// or not). `item_key` and `deliveries` are the item's key and delivery
/// count as the receipt's lease held them. Every key read without
/// snapshot: a pop taking the item, or the timer returning it, conflicts.
pub async fn stale_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
    (item_key, deliveries): (&[u8], u32),
    delete: bool,
    now_ms: u64,
) -> Result<Result<Stale, LeaseError>, StoreError> {
    match open(txn, keys, receipt, now_ms, true).await? {
        Ok(open) => {
            if delete {
                open.clear(txn, keys)?;
                crate::queue::parts::clear_in(txn, open.held.item.parts)?;
                if let Some(group) = &open.held.item.group {
                    crate::queue::groups::leave_in(txn, keys, group, now_ms).await?;
                }
            }
            return Ok(Ok(Stale::NotReceivedSince));
        }
        Err(LeaseError::UnknownReceipt | LeaseError::Expired { .. }) => {}
        Err(error) => return Ok(Err(error)),
    }
    let (begin, end) = keys.items_range();
    if item_key < begin.as_slice() || item_key >= end.as_slice() {
        return Ok(Ok(Stale::Gone));
    }
    let Some(value) = txn.get(item_key, Read::Serializable).await? else {
        return Ok(Ok(Stale::Gone));
    };
    let Some(item) = crate::envelope::decode_item(&value) else {
        return Ok(corrupt(item_key));
    };
    if item.deliveries != deliveries {
        return Ok(Ok(Stale::Gone));
    }
    if delete {
        // As every path deleting a visible item: its parts, count, expiry
        // entry and group go with it.
        crate::queue::expired::remove_visible_in(txn, keys, item_key, item, now_ms).await?;
    }
    Ok(Ok(Stale::NotReceivedSince))
}

/// Moves the lease's expiry in `txn` to `lease_ms` after `now_ms` (1 ms
/// more for an extended lease that would land on its issued expiry);
/// returns the new expiry.
pub async fn extend_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
    lease_ms: u64,
    now_ms: u64,
) -> Result<Result<u64, LeaseError>, StoreError> {
    assert!(lease_ms > 0, "a lease lasts at least a millisecond");
    let open = match open(txn, keys, receipt, now_ms, false).await? {
        Ok(open) => open,
        Err(error) => return Ok(Err(error)),
    };
    let mut expires_at_ms = now_ms.saturating_add(lease_ms);
    if open.receipt_key.is_some() && expires_at_ms == receipt.issued_expiry_ms() {
        // An extended lease never goes back to its issued expiry (1 ms
        // more here): a lease listing passes the issued expiries first and
        // the receipt rows after, so one coming back behind it would be
        // missed (see `crate::queue::admin::leases`).
        expires_at_ms += 1;
    }
    txn.clear(&open.lease_key)?;
    txn.set(
        &keys.lease(expires_at_ms, &receipt.0),
        &encode_held(&open.held),
    )?;
    if let Some(fair_key) = open.held.item.fair_key.as_deref() {
        // The row `leases_per_key_max` counts moves with the lease.
        crate::lease::clear_lease_of_in(txn, keys, Some(fair_key), &open.lease_key)?;
        txn.set(&keys.lease_of(fair_key, expires_at_ms, &receipt.0), b"")?;
    }
    // The receipt row forwards to the new expiry, unless the lease never
    // left the expiry its receipt says.
    if expires_at_ms != receipt.issued_expiry_ms() {
        txn.set(&keys.receipt(&receipt.0), &expires_at_ms.to_be_bytes())?;
    }
    Ok(Ok(expires_at_ms))
}

/// Nacks the lease in `txn`, as of `now_ms`: the item goes back now
/// (`delay_ms` 0) or after `delay_ms`, or to the dead-letter queue once it
/// has had `max_deliveries` (`None`: no limit).
pub async fn nack_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
    delay_ms: u64,
    max_deliveries: Option<u32>,
    now_ms: u64,
) -> Result<Result<Returned, LeaseError>, StoreError> {
    let open = match open(txn, keys, receipt, now_ms, false).await? {
        Ok(open) => open,
        Err(error) => return Ok(Err(error)),
    };
    open.clear(txn, keys)?;
    let returned = return_held(txn, keys, open.held, delay_ms, now_ms, max_deliveries).await?;
    Ok(Ok(returned))
}

/// In `txn`: whether lease `receipt` still holds its item, expired or
/// not: `false` once it is gone (acked, returned, purged with its queue's
/// in-flight messages, deleted with its queue, or dropped at the end of
/// its retention). A store that holds what hotq did not write answers
/// `true`: the caller's own `Corrupt` stands then.
pub(crate) async fn lease_exists_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
) -> Result<bool, StoreError> {
    Ok(!matches!(
        open(txn, keys, receipt, now_ms(), true).await?,
        Err(LeaseError::UnknownReceipt)
    ))
}

/// In `txn`: returns the item of lease `receipt` to its key with its
/// delivery uncounted (it never reached a worker), expired or not. `false`
/// when the lease is gone (the timer returned it, or it was settled).
pub(crate) async fn release_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &Receipt,
) -> Result<Result<bool, QueueError>, StoreError> {
    let open = match open(txn, keys, receipt, now_ms(), true).await? {
        Ok(open) => open,
        Err(LeaseError::Queue(error)) => return Ok(Err(error)),
        Err(LeaseError::UnknownReceipt | LeaseError::Expired { .. }) => return Ok(Ok(false)),
    };
    open.clear(txn, keys)?;
    let item = ItemValue {
        deliveries: open.held.item.deliveries.saturating_sub(1),
        ..open.held.item
    };
    txn.set(&open.held.item_key, &encode_item_value(&item))?;
    // Past its retention, the entry is due at once: the timer drops it.
    crate::queue::expiry::index_in(txn, keys, &open.held.item_key, item.expires_at_ms)?;
    txn.atomic_add(&keys.depth(), 1)?;
    Ok(Ok(true))
}

/// Where `held` goes once out of deliveries, if it is: its queue's
/// dead-letter queue, when it has had `max_deliveries` (the queue's stored
/// settings override the configured default). A dead-letter queue by role
/// (one some queue's `dead_letter_queue` names; a `.dead` name has no
/// default limit already) does not dead-letter again unless its own
/// settings set `max_deliveries`: its items would lose the origin a
/// redrive returns them to. The role is read only for an item out of
/// deliveries.
async fn dead_letter_target_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    held: &HeldItem,
    max_deliveries: Option<u32>,
) -> Result<Option<QueueName>, StoreError> {
    let stored = crate::queue::settings::read_in(txn, keys)
        .await
        .map_err(crate::queue::corrupt_as_store)?;
    // A stored 0 is "no limit" (see `queue_settings::Stored`).
    let limit = stored
        .max_deliveries
        .or(max_deliveries)
        .filter(|max| *max > 0);
    let out = limit.is_some_and(|max| held.item.deliveries >= max);
    let Some(dead) = stored.dead_letter_target(keys.name()).filter(|_| out) else {
        return Ok(None);
    };
    if stored.max_deliveries.is_none()
        && crate::queue::dead_letters::is_dead_letter_queue_in(txn, keys)
            .await
            .map_err(crate::queue::corrupt_as_store)?
    {
        return Ok(None);
    }
    Ok(Some(dead))
}

/// In `txn`: moves `held` to the dead-letter queue `dead`. The item leaves
/// its group here for good: the next one is released. In the dead-letter
/// queue it joins the tail of its group there (so a re-drive can give it
/// back its group and its order).
async fn dead_letter_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    held: HeldItem,
    dead: &QueueName,
    now_ms: u64,
) -> Result<(), StoreError> {
    if let Some(group) = &held.item.group {
        crate::queue::groups::leave_in(txn, keys, group, now_ms).await?;
    }
    let item = ItemValue {
        deliveries: 0,
        // A dead letter is kept until redriven or deleted: the origin's
        // retention does not follow it.
        expires_at_ms: None,
        dead_letter: Some(crate::envelope::DeadLetter {
            queue: keys.name().as_str().to_string(),
            deliveries: held.item.deliveries,
            // A priority item's key holds its priority: the redrive puts
            // it back at the same place (a key that does not parse was
            // never written by a priority push: priority 0).
            priority: match keys.kind() {
                crate::keys::QueueKind::Fifo => None,
                crate::keys::QueueKind::Priority => Some(
                    keys.priority_item_parts(&held.item_key)
                        .map_or(0, |(priority, _)| priority),
                ),
            },
        }),
        ..held.item
    };
    let moved = crate::queue::groups::Moved {
        item,
        visible_at_ms: now_ms,
    };
    crate::queue::groups::move_in(txn, &QueueKeys::new(dead), &[moved], now_ms).await
}

/// Puts an item that left its lease (nack, expiry) where it belongs next:
/// the dead-letter queue when it is out of deliveries (see
/// [`dead_letter_target_in`]), the delayed subspace when `delay_ms` > 0,
/// its original key otherwise.
pub(crate) async fn return_held<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    held: HeldItem,
    delay_ms: u64,
    now_ms: u64,
    max_deliveries: Option<u32>,
) -> Result<Returned, StoreError> {
    if crate::queue::expiry::is_expired(&held.item, now_ms) {
        // Its retention ended while it was out: dropped here, as the
        // expiry would have dropped it in the queue (its parts with it),
        // and its group moves on.
        crate::queue::parts::clear_in(txn, held.item.parts)?;
        crate::queue::expiry::count_in(txn, keys, 1)?;
        if let Some(group) = &held.item.group {
            crate::queue::groups::leave_in(txn, keys, group, now_ms).await?;
        }
        return Ok(Returned::Expired);
    }
    if let Some(dead) = dead_letter_target_in(txn, keys, &held, max_deliveries).await? {
        dead_letter_in(txn, keys, held, &dead, now_ms).await?;
        return Ok(Returned::DeadLettered { queue: dead });
    }
    let visible_at_ms = now_ms.saturating_add(delay_ms);
    // An item of an SQS FIFO batch goes back behind its group, ahead of the
    // items still waiting there (see `crate::queue::groups::batch`).
    if crate::queue::groups::batch::return_in(txn, keys, &held, visible_at_ms, now_ms).await? {
        return Ok(if delay_ms > 0 {
            Returned::Delayed { visible_at_ms }
        } else {
            Returned::Requeued
        });
    }
    if delay_ms > 0 {
        let random = Receipt::random();
        let key = keys.delayed(visible_at_ms, &random.0);
        txn.set(&key, &encode_held(&held))?;
        crate::queue::expiry::index_in(txn, keys, &key, held.item.expires_at_ms)?;
        txn.atomic_add(&keys.delayed_count(), 1)?;
        return Ok(Returned::Delayed { visible_at_ms });
    }
    txn.set(&held.item_key, &encode_item_value(&held.item))?;
    crate::queue::expiry::index_in(txn, keys, &held.item_key, held.item.expires_at_ms)?;
    txn.atomic_add(&keys.depth(), 1)?;
    Ok(Returned::Requeued)
}
