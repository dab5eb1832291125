//! Delivering items taken from results (see [`deliver_results_in`]): here,
//! above both the parts of large items and leases, since it asks the
//! lease when an item's parts are gone.

use crate::keys::QueueKeys;
use crate::lease::settle::lease_exists_in;
use crate::queue::parts::deliver_in;
use crate::queue::{Item, QueueError};
use crate::store::Transaction;

/// In `txn`: [`deliver_in`] for items taken from results (stored requests
/// served earlier, by any process), keeping in `items` only those still
/// there. A leased item's parts belong to its lease, and the lease may
/// have ended since its result was written (a purge of in-flight
/// messages, a delete of the queue, its retention ending): its parts went
/// with it, and so does the item, as if the queue had been empty then.
/// Parts missing under a lease that still exists are corruption. The
/// lease is read only when the parts are missing.
pub async fn deliver_results_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &mut Vec<Item>,
) -> Result<(), QueueError> {
    let mut kept = Vec::with_capacity(items.len());
    for mut item in std::mem::take(items) {
        match deliver_in(txn, std::iter::once(&mut item)).await {
            Ok(()) => kept.push(item),
            Err(QueueError::Corrupt { key }) => match &item.lease {
                Some(lease) if !lease_exists_in(txn, keys, &lease.receipt).await? => {}
                _ => return Err(QueueError::Corrupt { key }),
            },
            Err(error) => return Err(error),
        }
    }
    *items = kept;
    Ok(())
}
