//! At-least-once delivery: leases with ack, nack and extend, redelivery
//! counts, dead letters, and delayed items.
//!
//! A leased pop moves its item, in the same commit that takes it from the
//! queue (direct or staged), to the store-wide due index at
//! `(expires_at_ms, queue, "lease", receipt)`: one row per lease. The
//! receipt holds the expiry it was issued with, so a settle finds the
//! lease with one point read, and the timer finds every expired lease of
//! every queue with one range read. An extend moves the lease to a new
//! expiry and leaves the queue's `receipts/(receipt)` row naming it (a
//! forwarding row; receipts of binaries before receipts held their expiry
//! have one too): the receipt row exists exactly while the lease is not at
//! its receipt's issued expiry.
//!
//! - [`settle`]: `ack` (delete), `nack` (return now or after a delay),
//!   `extend` (move the expiry out), and the release of a leased item whose
//!   pop reached nobody (back as if never delivered; used by
//!   [`crate::staging::requester::restore_items`], withdrawals and the reaper).
//! - [`backlog`]: the settle backlog: concurrent acks, nacks and extends of a
//!   queue share one commit.
//! - [`redrive`]: a dead-letter queue's items back to where they came from.
//!
//! The other half of a lease's life is in [`crate::due`]: the timer over
//! the due index returns an expired lease's item to its original key with
//! its delivery counted, or to the dead-letter queue after
//! `max_deliveries`.
//!
//! Every transaction that consumes a lease or a delayed item reads its key
//! without snapshot (or adds a read-conflict on it), so an ack racing the
//! timer, or a nack racing an extend, has exactly one winner: the other
//! conflicts, re-reads, and finds the receipt gone.

pub mod backlog;
pub mod receipt;
pub mod redrive;
pub mod settle;

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU64;

use crate::envelope::{HeldItem, ItemValue, encode_held};
use crate::keys::{QueueKeys, QueueName};
use crate::queue::{Item, QueueError};
use crate::store::{StoreError, Transaction};

pub use receipt::{Lease, Receipt};

pub use crate::config::MAX_DELIVERIES_DEFAULT;

/// Why a receipt could not be acted on, or the store failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseError {
    /// No lease has this receipt: never issued, already acked or nacked,
    /// or expired and returned to the queue.
    UnknownReceipt,
    /// The lease expired; the item is being returned to the queue (or
    /// dead-lettered), and this receipt no longer acts on it.
    Expired {
        /// When it expired, in ms since the epoch.
        expired_at_ms: u64,
    },
    /// The store failed, or holds something hotq did not write.
    Queue(QueueError),
}

impl From<StoreError> for LeaseError {
    fn from(error: StoreError) -> Self {
        LeaseError::Queue(QueueError::Store(error))
    }
}

impl From<QueueError> for LeaseError {
    fn from(error: QueueError) -> Self {
        LeaseError::Queue(error)
    }
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::UnknownReceipt => f.write_str(
                "no lease has this receipt (never issued, already settled, or expired and redelivered)",
            ),
            LeaseError::Expired { expired_at_ms } => write!(
                f,
                "the lease expired at {expired_at_ms} ms since the epoch; the item returns to the queue"
            ),
            LeaseError::Queue(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for LeaseError {}

/// How many deliveries each queue allows before dead-lettering.
#[derive(Debug, Clone)]
pub struct DeliveryPolicy {
    /// For queues not named in `per_queue`.
    pub max_deliveries_default: u32,
    /// Per-queue overrides, by queue name.
    pub per_queue: HashMap<String, u32>,
}

impl Default for DeliveryPolicy {
    fn default() -> Self {
        DeliveryPolicy {
            max_deliveries_default: MAX_DELIVERIES_DEFAULT,
            per_queue: HashMap::new(),
        }
    }
}

impl DeliveryPolicy {
    /// The policy the `[leases]` table sets.
    pub fn from_config(leases: &crate::config::LeasesSection) -> DeliveryPolicy {
        DeliveryPolicy {
            max_deliveries_default: leases.max_deliveries,
            per_queue: leases
                .queues
                .iter()
                .map(|(name, queue)| (name.clone(), queue.max_deliveries))
                .collect(),
        }
    }

    /// Deliveries `queue` allows; `None` for a dead-letter queue, whose
    /// items are redelivered however often (there is nowhere further to send them).
    pub fn max_deliveries(&self, queue: &QueueName) -> Option<u32> {
        if queue.is_dead_letter() {
            return None;
        }
        Some(
            self.per_queue
                .get(queue.as_str())
                .copied()
                .unwrap_or(self.max_deliveries_default),
        )
    }
}

/// Puts `item`, which the caller clears from its key in the same
/// transaction, under a fresh lease of `lease_ms` from `now_ms`, and
/// records the lease on the item.
pub fn lease_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    item: &mut Item,
    lease_ms: NonZeroU64,
    now_ms: u64,
) -> Result<(), StoreError> {
    assert!(item.lease.is_none(), "an item is leased once per delivery");
    let expires_at_ms = now_ms
        .saturating_add(lease_ms.get())
        .min(receipt::RECEIPT_EXPIRY_MS_MAX);
    let receipt = Receipt::for_lease(keys, expires_at_ms);
    let delivery_count = item.deliveries.saturating_add(1);
    let held = HeldItem {
        item_key: item.key.clone(),
        item: ItemValue {
            deliveries: delivery_count,
            ..item.value()
        },
    };
    // The lease row is in the due index: every daemon's timer finds it
    // there, and the receipt names its key (no receipt row).
    txn.set(&keys.lease(expires_at_ms, &receipt.0), &encode_held(&held))?;
    txn.atomic_add(&keys.leased(), 1)?;
    if let Some(fair_key) = &item.fair_key {
        txn.set(&keys.lease_of(fair_key, expires_at_ms, &receipt.0), b"")?;
    }
    item.lease = Some(Lease {
        receipt,
        expires_at_ms,
        delivery_count,
    });
    Ok(())
}

/// In `txn`: clears the receipt row of the lease `receipt` (a due-index
/// entry's id) due at `due_ms`, if it has one: it was extended, or its
/// receipt was issued by a binary before receipts held their expiry (whose
/// bytes there are random). Whoever consumes a lease by its due-index
/// entry (the timer, a delete) calls this with it.
pub(crate) fn clear_receipt_row_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    receipt: &[u8],
    due_ms: u64,
) -> Result<(), StoreError> {
    let has_row = match <[u8; crate::envelope::RECEIPT_LEN]>::try_from(receipt) {
        Ok(bytes) => Receipt(bytes).issued_expiry_ms() != due_ms,
        Err(_) => true,
    };
    if has_row {
        txn.clear(&keys.receipt(receipt))?;
    }
    Ok(())
}

/// Counts the end of the lease at `lease_key` (its row in the due index)
/// of an item of fairness key `fair_key`: one lease fewer in the queue's
/// count, and its row under the key (see [`clear_lease_of_in`]) cleared.
pub(crate) fn end_lease_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    fair_key: Option<&str>,
    lease_key: &[u8],
) -> Result<(), StoreError> {
    txn.atomic_add(&keys.leased(), -1)?;
    clear_lease_of_in(txn, keys, fair_key, lease_key)
}

/// Clears the row `leases_per_key_max` counts for the lease at
/// `lease_key` of an item of fairness key `fair_key` (none: nothing to
/// clear). Clearing is idempotent, and a row left behind stops counting
/// at its lease's expiry: the count per key cannot drift.
pub(crate) fn clear_lease_of_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    fair_key: Option<&str>,
    lease_key: &[u8],
) -> Result<(), StoreError> {
    let (Some(fair_key), Some(entry)) = (fair_key, crate::keys::due_entry(lease_key)) else {
        return Ok(());
    };
    txn.clear(&keys.lease_of(fair_key, entry.due_ms, &entry.id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_round_trip_as_hex_and_reject_anything_else() {
        let receipt = Receipt::random();
        let text = receipt.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(Receipt::parse(&text), Some(receipt));
        for bad in [
            "",
            "zz",
            &text[..31],
            &format!("{text}0"),
            &"é".repeat(16),
            &"g".repeat(32),
            &"+f".repeat(16),
        ] {
            assert_eq!(Receipt::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn receipts_name_their_queue() {
        let keys = |n: &str| QueueKeys::new(&QueueName::new(n).unwrap());
        let receipt = Receipt::for_lease(&keys("jobs"), 1_700_000_000_123);
        assert!(receipt.names_queue(&keys("jobs")));
        assert!(!receipt.names_queue(&keys("jobz")));
        assert!(!receipt.names_queue(&keys("jobs.dead")));
        // Random beyond the tag and expiry: two leases never share a receipt.
        assert_ne!(
            receipt,
            Receipt::for_lease(&keys("jobs"), 1_700_000_000_123)
        );
    }

    #[test]
    fn receipts_hold_the_expiry_they_were_issued_with() {
        let keys = QueueKeys::new(&QueueName::new("jobs").unwrap());
        for expires_at_ms in [0, 1, 1_700_000_000_123, receipt::RECEIPT_EXPIRY_MS_MAX] {
            let receipt = Receipt::for_lease(&keys, expires_at_ms);
            assert_eq!(receipt.issued_expiry_ms(), expires_at_ms);
            assert_eq!(Receipt::parse(&receipt.to_string()), Some(receipt));
        }
    }

    #[test]
    fn dead_letter_queues_never_dead_letter() {
        let mut policy = DeliveryPolicy::default();
        policy.per_queue.insert("poison".into(), 2);
        let name = |n: &str| QueueName::new(n).unwrap();
        assert_eq!(policy.max_deliveries(&name("jobs")), Some(5));
        assert_eq!(policy.max_deliveries(&name("poison")), Some(2));
        assert_eq!(policy.max_deliveries(&name("jobs.dead")), None);
    }
}
