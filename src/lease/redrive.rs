//! Re-driving a dead-letter queue: its items go back to the queues they
//! came from, as fresh items (delivery count 0, no dead-letter origin), in
//! one commit per batch. A batch is bounded by items and by bytes, so a
//! re-drive of large items takes several commits instead of one
//! transaction over the store's size limit.
//!
//! **Message groups.** A dead letter keeps its group (see
//! [`crate::lease::settle`]), so in the dead-letter queue it is a grouped
//! item like any other: one head per group, the rest waiting behind it
//! (items pushed there with a group are the same). A commit takes the
//! front items in order and, with each group head, the items waiting
//! behind it there, in group order; each item joins the *tail* of its
//! group in the queue it goes back to, behind whatever that group holds
//! already (a head out under a lease included), as a push at that moment
//! would place it (SQS's `StartMessageMoveTask` likewise returns messages
//! as new messages of their group). So no group is ever out twice, the
//! re-driven items of a group keep their order, and nothing of a group is
//! left without a head on either side: a commit cut short inside a group
//! leaves the group's next item as its head in the dead-letter queue, the
//! first the next commit takes. Everything one item's move touches (its
//! old key, the groups on both sides, the counters) is in one commit.
//!
//! A re-drive is a move, not a push: it neither checks nor records dedup
//! ids, so a re-driven item is never dropped as a duplicate, and an id its
//! original push recorded keeps counting in its queue until its window
//! ends.

use std::collections::BTreeMap;

use crate::envelope::{End, ItemValue, encode_item_value, now_ms};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::queue::groups::Moved;
use crate::queue::{QueueError, read_end};
use crate::store::Read;
use crate::store::{RetryPolicy, Store, StoreError, Transaction, key_after, transact};

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

/// Moves up to `want` items of `dead_keys`, bounded by bytes, in one
/// commit: the front items in order, each group head with the items
/// waiting behind it in the dead-letter queue (see [`Plan`]).
async fn redrive_pass<S: Store>(
    store: &S,
    dead_keys: &QueueKeys,
    default_origin: Option<&QueueName>,
    want: usize,
) -> Result<Pass, QueueError> {
    let limit = want.clamp(1, REDRIVE_PASS_ITEMS_MAX);
    let pass = transact(store, RetryPolicy::default(), |txn| async move {
        let now_ms = now_ms();
        // A snapshot read, then read conflicts over only the items moved:
        // a page cut short by bytes does not conflict on the items left.
        let heads = read_end(&txn, dead_keys, End::Front, limit, Read::Snapshot)
            .await
            .map_err(crate::queue::corrupt_as_store)?;
        let mut plan = Plan::new(default_origin, limit);
        let mut last_head: Option<&[u8]> = None;
        let mut heads_taken = 0i64;
        for head in &heads {
            if !plan.admit(head.value(), head.key.len(), now_ms) {
                break;
            }
            txn.clear(&head.key)?;
            crate::queue::expiry::unindex_in(&txn, dead_keys, &head.key, head.expires_at_ms)?;
            heads_taken += 1;
            last_head = Some(&head.key);
            if let Some(group) = &head.group {
                take_group_in(&txn, dead_keys, group, &mut plan, now_ms).await?;
            }
            if plan.stop.is_some() {
                break;
            }
        }
        let Some(last_head) = last_head else {
            return Ok(Pass {
                moved: 0,
                more: false,
            });
        };
        let (begin, _) = dead_keys.items_range();
        txn.add_read_conflict_range(&begin, &key_after(last_head))?;
        txn.atomic_add(&dead_keys.depth(), -heads_taken)?;
        plan.write_in(&txn, now_ms).await?;
        let more = match plan.stop {
            Some(Stop::Full) => true,
            Some(Stop::NoOrigin) => false,
            None => heads.len() >= limit,
        };
        Ok(Pass {
            moved: plan.items,
            more,
        })
    })
    .await?;
    Ok(pass)
}

/// In `txn`: after `group`'s head in the dead-letter queue was taken into
/// `plan`, takes the items waiting behind it there, in group order, as far
/// as the plan admits them (read a page at a time, so a group of large
/// items is not read far past the plan's bytes); then the first item left
/// (if any) becomes the group's head in the dead-letter queue, or the
/// group ends there. So a group is never left without a head while items
/// wait in it.
async fn take_group_in<T: Transaction>(
    txn: &T,
    dead_keys: &QueueKeys,
    group: &str,
    plan: &mut Plan<'_>,
    now_ms: u64,
) -> Result<(), StoreError> {
    // Each page but the last takes a full page, so this ends within
    // `items_max / WAITING_PAGE_MAX + 1` pages.
    'pages: while plan.room() > 0 {
        let asked = plan.room().min(WAITING_PAGE_MAX);
        let page = crate::queue::groups::waiting_in(txn, dead_keys, group, asked).await?;
        for item in &page {
            if !plan.admit(item.item.clone(), item.key.len(), item.visible_at_ms) {
                break 'pages;
            }
            crate::queue::groups::take_waiting_in(txn, dead_keys, item)?;
        }
        if page.len() < asked {
            break;
        }
    }
    if plan.room() == 0 {
        // Items may still wait in the group: the re-drive goes on.
        plan.stop.get_or_insert(Stop::Full);
    }
    crate::queue::groups::leave_in(txn, dead_keys, group, now_ms).await
}

/// Most waiting items of one group read at once.
const WAITING_PAGE_MAX: usize = 16;

/// Why a pass stopped taking items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// It reached its bound of items or bytes: more may follow.
    Full,
    /// The next item has nowhere to go: the re-drive ends at it.
    NoOrigin,
}

/// What one commit of a re-drive moves: per origin, the items in the
/// order taken (dead-letter order, each group's waiting items right after
/// their head), bounded by items and bytes.
struct Plan<'a> {
    default_origin: Option<&'a QueueName>,
    items_max: usize,
    /// Items admitted.
    items: usize,
    bytes: usize,
    by_origin: BTreeMap<Origin, Vec<Moved>>,
    stop: Option<Stop>,
}

impl<'a> Plan<'a> {
    fn new(default_origin: Option<&'a QueueName>, items_max: usize) -> Plan<'a> {
        Plan {
            default_origin,
            items_max,
            items: 0,
            bytes: 0,
            by_origin: BTreeMap::new(),
            stop: None,
        }
    }

    /// How many more items it may take.
    fn room(&self) -> usize {
        if self.stop.is_some() {
            return 0;
        }
        self.items_max - self.items
    }

    /// Takes `item` (its key `key_len` bytes; visible from
    /// `visible_at_ms`) when a bound allows and it has somewhere to go;
    /// else records why not and takes nothing more. At least one item is
    /// always taken if it has an origin.
    fn admit(&mut self, item: ItemValue, key_len: usize, visible_at_ms: u64) -> bool {
        if self.room() == 0 {
            self.stop.get_or_insert(Stop::Full);
            return false;
        }
        let Some((origin, moved)) = fresh(item, self.default_origin, visible_at_ms) else {
            self.stop = Some(Stop::NoOrigin);
            return false;
        };
        let bytes = self.bytes + key_len + moved.item.payload.len() + ENVELOPE_BYTES_MAX;
        if self.items > 0 && bytes > REDRIVE_PASS_BYTES_MAX {
            self.stop = Some(Stop::Full);
            return false;
        }
        self.bytes = bytes;
        self.items += 1;
        self.by_origin.entry(origin).or_default().push(moved);
        true
    }

    /// In `txn`: appends what it took to the tails of the queues they go
    /// back to, each FIFO item in its group (see
    /// [`crate::queue::groups::move_in`]), each priority item at its
    /// priority (at its fairness key's tag there, if it has one).
    async fn write_in<T: Transaction>(&self, txn: &T, now_ms: u64) -> Result<(), StoreError> {
        for (origin, moved) in &self.by_origin {
            match origin.priority {
                None => {
                    let keys = QueueKeys::new(&origin.queue);
                    crate::queue::groups::move_in(txn, &keys, moved, now_ms).await?;
                }
                Some(priority) => {
                    let keys = QueueKeys::of_kind(QueueKind::Priority, &origin.queue);
                    let values: Vec<(i64, Vec<u8>)> = moved
                        .iter()
                        .map(|moved| (priority, encode_item_value(&moved.item)))
                        .collect();
                    let fair_keys: Vec<Option<&str>> = moved
                        .iter()
                        .map(|moved| moved.item.fair_key.as_deref())
                        .collect();
                    let weights = if fair_keys.iter().any(Option::is_some) {
                        crate::queue::settings::read_in(txn, &keys)
                            .await
                            .map_err(crate::queue::corrupt_as_store)?
                            .fair_weights
                            .unwrap_or_default()
                    } else {
                        Default::default()
                    };
                    let fair = crate::queue::priority::Fair {
                        keys: &fair_keys,
                        weights: &weights,
                    };
                    crate::queue::priority::append_fair_in(txn, &keys, &values, &[], fair).await?;
                }
            }
        }
        Ok(())
    }
}

/// Bytes an envelope adds to its payload, at most: version, enqueue time,
/// delivery count, a dead-letter origin, a group key and a fairness key
/// (at most 133, 128 and 128 bytes).
const ENVELOPE_BYTES_MAX: usize = 450;

/// Where a dead letter goes back to: a FIFO queue, or a priority queue at
/// a priority.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Origin {
    queue: QueueName,
    priority: Option<i64>,
}

/// The queue `item` goes back to and its fresh envelope there (delivery
/// count 0, no dead-letter origin, its group kept for a FIFO queue; a
/// priority queue has no groups); `None` when it names no origin and the
/// dead-letter queue has no default.
fn fresh(
    item: ItemValue,
    default_origin: Option<&QueueName>,
    visible_at_ms: u64,
) -> Option<(Origin, Moved)> {
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
    // A priority queue has no groups; its items keep their fairness key
    // (the key it was pushed with, in its priority's fair order).
    let group = match origin.priority {
        None => item.group,
        Some(_) => None,
    };
    let fair_key = item.fair_key;
    // A large payload's parts move with its envelope (see `crate::queue::parts`).
    let item = ItemValue {
        group,
        fair_key,
        parts: item.parts,
        ..ItemValue::new(item.enqueued_at_ms, item.payload)
    };
    Some((
        origin,
        Moved {
            item,
            visible_at_ms,
        },
    ))
}
