//! One direct-pop attempt, at either end of a queue, with the acks riding
//! on it (see [`super::round::riding`]) in the same transaction.

use crate::envelope::{End, now_ms};
use crate::keys::QueueKeys;
use crate::lease::{Receipt, lease_in};
use crate::queue::limits::{Budget, PER_KEY_WIDE, budget_in};
use crate::queue::{DirectPop, Item, QueueError, read_end};
use crate::staging::line::AckOutcome;
use crate::staging::round::riding::ack_all_in;
use crate::store::Read;
use crate::store::{Store, StoreError, Transaction, decode_counter};
use std::num::NonZeroU64;

/// Why a direct pop was not even tried.
#[derive(Debug, Clone, PartialEq, Eq)]
// Returned once per pop and moved straight to its caller, never stored:
// boxing the item would cost an allocation on the hot path for nothing.
#[allow(clippy::large_enum_variant)]
pub enum Attempt {
    /// The attempt's outcome.
    Done(DirectPop),
    /// Requests are waiting: the popper queues behind them instead of
    /// racing the fulfiller for items.
    RequestsWaiting,
}

/// What a direct attempt did.
#[derive(Debug)]
pub struct Direct {
    /// Its outcome.
    pub attempt: Attempt,
    /// The items taken (committed).
    pub items: Vec<Item>,
    /// The acks' outcomes when they committed (with the items, or alone
    /// when the queue was empty); `None`: not acked, they ride on.
    pub acked: Option<Vec<AckOutcome>>,
}

/// Most payload bytes one direct pop hands out (at least one item), as a
/// fulfillment round's default `fulfill_bytes_max`.
pub const DIRECT_BYTES_MAX: usize = 4 * 1_048_576;

/// Tries once to take up to `max` items from `end` of the queue: if no
/// request is waiting (snapshot check), acks `acks`, reads the items
/// without snapshot unless the queue is paused, clears them (moving each
/// under a lease when it has `lease_ms`) and commits. A conflict is returned,
/// not retried. An empty (or paused) queue commits the acks alone (none:
/// nothing to commit).
pub async fn try_pop<S: Store>(
    store: &S,
    keys: &QueueKeys,
    (end, max, lease_ms): (End, usize, Option<NonZeroU64>),
    acks: &[Receipt],
) -> Result<Direct, QueueError> {
    let txn = store.begin()?;
    let waiting = decode_counter(txn.get(&keys.waiting(), Read::Snapshot).await?.as_deref());
    if waiting > 0 {
        return Ok(Direct {
            attempt: Attempt::RequestsWaiting,
            items: Vec::new(),
            acked: None,
        });
    }
    let now = now_ms();
    let acked = ack_all_in(&txn, keys, acks, now).await?;
    // Paused or held back by a limit: nothing to take, though acks still
    // settle. A pop that may wait joins the line, whose rounds hand
    // nothing out until it resumes (or the limit lets items go).
    let terms = (end, max, lease_ms.is_some());
    let (mut items, budget) = read_admitted(&txn, keys, terms).await?;
    if items.is_empty() && acks.is_empty() {
        return Ok(Direct {
            attempt: Attempt::Done(DirectPop::Empty),
            items,
            acked: None,
        });
    }
    take_in(&txn, keys, &mut items, lease_ms, now)?;
    budget.spend_in(&txn, keys)?;
    crate::queue::parts::deliver_in(&txn, items.iter_mut()).await?;
    let acked = (!acks.is_empty()).then_some(acked);
    match txn.commit().await {
        Ok(()) => {
            let attempt = match items.first() {
                Some(first) => Attempt::Done(DirectPop::Took(first.clone())),
                None => Attempt::Done(DirectPop::Empty),
            };
            Ok(Direct {
                attempt,
                items,
                acked,
            })
        }
        Err(StoreError::Conflict) => Ok(Direct {
            attempt: Attempt::Done(DirectPop::Conflict),
            items: Vec::new(),
            acked: None,
        }),
        Err(error) => Err(error.into()),
    }
}

/// Reads, in `txn`, the items the queue's pause and limits let this pop
/// take from `end`: none when paused; else at most `max` and what the
/// limits allow (items of keys at their `leases_per_key_max` passed
/// over), read without snapshot, at most [`DIRECT_BYTES_MAX`] bytes (at
/// least one item). Returns them with the budget they were spent from.
async fn read_admitted<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    (end, max, leasing): (End, usize, bool),
) -> Result<(Vec<Item>, Budget), QueueError> {
    let gates = crate::queue::settings::gates_in(txn, keys).await?;
    if gates.paused {
        return Ok((Vec::new(), Budget::unlimited()));
    }
    let mut budget = budget_in(txn, keys, gates.limits, leasing).await?;
    let wanted = budget.cap(max.max(1), leasing);
    if wanted == 0 {
        budget.refuse(leasing);
        budget.count_refused(keys);
        return Ok((Vec::new(), budget));
    }
    let read = wanted + gates.limits.lookahead(leasing);
    let mut items = read_end(txn, keys, end, read, Read::Serializable).await?;
    budget.read_keys_in(txn, keys, items.iter()).await?;
    let wide = read > wanted && items.len() == read && budget.admissible(&items, leasing) < wanted;
    if wide {
        // Held keys fill the head: look further once, with snapshot (each
        // item taken from the wider read gets its own read conflict).
        let read = wanted + PER_KEY_WIDE;
        items = read_end(txn, keys, end, read, Read::Snapshot).await?;
        budget.read_keys_in(txn, keys, items.iter()).await?;
    }
    debug_assert!(
        crate::queue::groups::heads_are_distinct(&items),
        "one head per group"
    );
    // A pop of many large items stays bounded (the rest stay queued).
    items.truncate(crate::queue::parts::within_bytes(&items, DIRECT_BYTES_MAX));
    let items_read = !items.is_empty();
    let items = budget.admit(items, wanted, leasing);
    if wide {
        for item in &items {
            txn.add_read_conflict_key(&item.key)?;
        }
    }
    if items_read && items.is_empty() {
        // Every item read is of a key at its `leases_per_key_max`.
        budget.refuse_keys();
        budget.count_refused(keys);
    }
    Ok((items, budget))
}

/// In `txn`: clears `items` from the queue, each moved under a lease of
/// `lease_ms` (`None`: no lease) or, in a group, holding its group's next item.
fn take_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &mut [Item],
    lease_ms: Option<NonZeroU64>,
    now: u64,
) -> Result<(), StoreError> {
    for item in items.iter_mut() {
        txn.clear(&item.key)?;
        crate::queue::expiry::unindex_in(txn, keys, &item.key, item.expires_at_ms)?;
        if let Some(lease_ms) = lease_ms {
            lease_in(txn, keys, item, lease_ms, now)?;
        } else if item.group.is_some() {
            // Its successor waits until the pop has reached its caller.
            let due_ms = now.saturating_add(crate::queue::groups::SUCCESSION_SLACK_MS);
            crate::queue::groups::succession_in(txn, keys, item, due_ms)?;
        }
    }
    if !items.is_empty() {
        txn.atomic_add(&keys.depth(), -(items.len() as i64))?;
    }
    Ok(())
}
