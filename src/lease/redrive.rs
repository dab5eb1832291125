//! Re-driving a dead-letter queue: its items go back to the queues they
//! came from, as fresh items (delivery count 0), in one commit per batch.
//! A batch is bounded by items and by bytes, so a re-drive of large items
//! takes several commits instead of one transaction over the store's size
//! limit.

use std::collections::BTreeMap;

use crate::envelope::{ItemValue, encode_item_value};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::queue::{Item, QueueError, append_in, read_end};
use crate::store::Read;
use crate::store::{RetryPolicy, Store, Transaction, key_after, transact};

/// Most items one re-drive moves.
pub const REDRIVE_BATCH_MAX: usize = 1_000;
/// Most items one commit of a re-drive moves.
pub const REDRIVE_PASS_ITEMS_MAX: usize = 256;
/// Most key and value bytes one commit of a re-drive writes (a store
/// transaction is limited to 10 MB; every moved item is written once, and
/// its old key cleared). At least one item is always taken, and an item is
/// at most 100 kB.
pub const REDRIVE_PASS_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Moves up to `max` items from the front of the dead-letter queue `dead`
/// to the tails of the queues they came from (an item pushed straight into
/// the dead-letter queue goes to its default origin, see
/// [`crate::queue::dead_letters::default_origin_in`]; with none, the re-drive
/// stops at that item and leaves it), in commits of at most [`REDRIVE_PASS_ITEMS_MAX`]
/// items and [`REDRIVE_PASS_BYTES_MAX`] bytes. Returns how many moved. A
/// commit's read conflicts cover the items it moves, so a concurrent pop of
/// the same items conflicts and one side retries. An error after some
/// commits leaves those items moved and the rest in `dead`.
pub async fn redrive<S: Store>(
    store: &S,
    dead: &QueueName,
    max: usize,
) -> Result<usize, QueueError> {
    // Which queues are dead-letter queues is the caller's check (by role,
    // see `crate::queue::dead_letters`); this only needs where origin-less items go.
    let default_origin = {
        let txn = store.begin()?;
        crate::queue::dead_letters::default_origin_in(&txn, dead).await?
    };
    let dead_keys = QueueKeys::new(dead);
    let max = max.clamp(1, REDRIVE_BATCH_MAX);
    let mut moved = 0usize;
    // Every pass but the last moves at least one item, so this ends within
    // `max` passes.
    while moved < max {
        let pass = redrive_pass(store, &dead_keys, default_origin.as_ref(), max - moved).await?;
        assert!(pass.moved <= max - moved, "a pass moved more than asked");
        moved += pass.moved;
        if pass.moved == 0 || !pass.more {
            break;
        }
    }
    Ok(moved)
}

/// What one commit of a re-drive did.
struct Pass {
    moved: usize,
    /// True when a bound, not the queue's end, stopped the pass.
    more: bool,
}

/// Moves up to `want` items of `dead_keys`, bounded by bytes, in one commit.
async fn redrive_pass<S: Store>(
    store: &S,
    dead_keys: &QueueKeys,
    default_origin: Option<&QueueName>,
    want: usize,
) -> Result<Pass, QueueError> {
    let limit = want.clamp(1, REDRIVE_PASS_ITEMS_MAX);
    let pass = transact(store, RetryPolicy::default(), |txn| async move {
        // A snapshot read, then read conflicts over only the items moved:
        // a page cut short by bytes does not conflict on the items left.
        let mut items = read_end(
            &txn,
            dead_keys,
            crate::envelope::End::Front,
            limit,
            Read::Snapshot,
        )
        .await
        .map_err(crate::queue::corrupt_as_store)?;
        let mut more = items.len() >= limit;
        let mut bytes = 0usize;
        let mut by_origin: BTreeMap<Origin, Vec<Vec<u8>>> = BTreeMap::new();
        let mut kept = 0usize;
        for item in &items {
            let Some((origin, value)) = fresh(item, default_origin) else {
                // Nowhere to send it: the re-drive ends here, it stays.
                more = false;
                break;
            };
            bytes += item.key.len() + value.len();
            if kept > 0 && bytes > REDRIVE_PASS_BYTES_MAX {
                more = true;
                break;
            }
            by_origin.entry(origin).or_default().push(value);
            kept += 1;
        }
        items.truncate(kept);
        let Some(last) = items.last() else {
            return Ok(Pass {
                moved: 0,
                more: false,
            });
        };
        let (begin, _) = dead_keys.items_range();
        txn.add_read_conflict_range(&begin, &key_after(&last.key))?;
        for item in &items {
            txn.clear(&item.key)?;
        }
        for (origin, values) in &by_origin {
            match origin.priority {
                None => append_in(&txn, &QueueKeys::new(&origin.queue), values).await?,
                Some(priority) => {
                    let keys = QueueKeys::of_kind(QueueKind::Priority, &origin.queue);
                    let values: Vec<(i64, Vec<u8>)> = values
                        .iter()
                        .map(|value| (priority, value.clone()))
                        .collect();
                    crate::queue::priority::append_in(&txn, &keys, &values).await?;
                }
            }
        }
        txn.atomic_add(&dead_keys.depth(), -(items.len() as i64))?;
        Ok(Pass {
            moved: items.len(),
            more,
        })
    })
    .await?;
    Ok(pass)
}

/// Where a dead letter goes back to: a FIFO queue, or a priority queue at
/// a priority.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Origin {
    queue: QueueName,
    priority: Option<i64>,
}

/// The queue `item` goes back to and its fresh envelope there; `None`
/// when it names no origin and the dead-letter queue has no default.
fn fresh(item: &Item, default_origin: Option<&QueueName>) -> Option<(Origin, Vec<u8>)> {
    let origin = match &item.dead_letter {
        Some(dead) => Origin {
            queue: QueueName::new(&dead.queue).ok()?,
            priority: dead.priority,
        },
        None => Origin {
            queue: default_origin.cloned()?,
            priority: None,
        },
    };
    let value = ItemValue::new(item.enqueued_at_ms, item.payload.clone());
    Some((origin, encode_item_value(&value)))
}
