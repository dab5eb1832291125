//! Message groups (SQS FIFO's `MessageGroupId`): items pushed with one
//! group key are delivered in push order, at most one of them out at a
//! time; different groups are delivered in parallel. FIFO queues only.
//! (An SQS FIFO receive is the one exception: it leases a head with the
//! items behind it, see [`batch`].)
//!
//! **Only a group's head is ever in the queue's `items` range** (or
//! delayed, leased, in a stored result, or being handed over). The items
//! behind it wait in `grouped/(group, index, random)`, so the fulfiller,
//! direct pops and the line need no skipping logic: whatever they find in
//! `items` may go. The group's state key `group/(group,)` says "this group
//! has a head"; it is read without snapshot by every transaction that adds
//! to or takes from the group, so two of them on one group serialize.
//! Items without a group never touch either key: their paths read and
//! write exactly what they did before groups existed.
//!
//! The head leaves for good ([`leave_in`]) when it is acked, dead-lettered,
//! or, popped without a lease, delivered; in that same commit the first
//! waiting item (push order) moves into `items` at its own push index
//! (so across groups the queue stays in push order: a promoted item is as
//! old as it is, not sent to the back) or, if its push asked for a delay
//! that has not passed, into the due index. A nack or an expired lease
//! returns the head to its key: it stays the head.
//!
//! A plain (unleased) pop is the hazard: its commit takes the head, but
//! the item may still come back if its caller has gone (the hand-off and
//! put-back in `crate::staging::handoff`). Promoting the successor at the
//! pop's commit would then leave two heads, out of order. So the pop's
//! commit only marks the state *succession* ([`succession_in`]: due time and
//! item key) and writes a `("hotq-due", due_ms, .., "group", group)`
//! entry; once the pop has reached its caller, [`deliver_soon`] promotes
//! ([`delivered_in`](succession::delivered_in)); a put-back ([`give_back_in`]) makes the item the
//! head again. If the daemon dies in between, the timer takes the item as
//! delivered at the due time ([`succession_due_in`]), as a plain pop's item
//! is lost in such a crash anyway (plain pops are at most once). The due
//! time is past the request's deadline plus the result grace plus
//! [`SUCCESSION_SLACK_MS`], so a live daemon's succession or reap always comes
//! first; should one come later anyway, the returning item cannot become
//! a second head: it waits behind the current one (its order is then
//! lost, never the invariant), and a warning is logged.
//!
//! The library's direct pops (`Queue::pop`, `Queue::try_pop_direct`) hand
//! the item straight to their caller, so they release the successor in
//! their own commit. The daemon's recipe mode (`pop_recipe`) is built on
//! them: a recipe pop whose caller hangs up mid-commit puts its item back
//! behind the group's next head (its order is lost, not the invariant).
//!
//! An item that moves to another queue keeps its group there: a dead
//! letter joins its group's tail in the dead-letter queue, and a redrive
//! takes a group's head there with the items waiting behind it and puts
//! each at its group's tail in its origin ([`move_in`], [`waiting_in`],
//! [`take_waiting_in`]; see [`crate::lease::redrive`]).
//!
//! Purge drops the items waiting behind heads pushed before it began and
//! every visible or delayed head (each dropped head promotes the next
//! item pushed after the purge began, if any); a leased head stays out and
//! releases its group when it leaves. Delete drops everything.

use std::collections::BTreeMap;

use rand::RngCore;

use crate::envelope::{HeldItem, ItemValue, decode_item, encode_held, encode_item_value};
use crate::keys::{DueWhat, QueueKeys, RANDOM_LEN};
use crate::queue::item::{Item, QueueError};
use crate::store::Read;
use crate::store::{
    KeyValue, RangeRead, RetryPolicy, Store, StoreError, Transaction, decode_mark, key_after,
    transact,
};
use futures_util::future::join_all;

/// Longest group key, in bytes.
pub const GROUP_KEY_LEN_MAX: usize = 128;
/// How long past the latest moment a live daemon ends a succession the timer
/// waits before taking a plain-popped head as delivered.
pub const SUCCESSION_SLACK_MS: u64 = 30_000;
/// Most waiting items one purge or delete transaction drops.
pub const DROP_BATCH_MAX: usize = 1_000;

/// Why a group key is refused, if it is: 1 to 128 bytes of
/// `A-Z a-z 0-9 . _ - : @ /`.
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > GROUP_KEY_LEN_MAX {
        return Err(format!(
            "a group key is 1 to {GROUP_KEY_LEN_MAX} bytes long, got {}",
            key.len()
        ));
    }
    if let Some(bad) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@' | '/')))
    {
        return Err(format!(
            "group key {key:?} is invalid: it may hold only A-Z a-z 0-9 . _ - : @ /, not {bad:?}"
        ));
    }
    Ok(())
}

/// True when no two of `items` (read from one queue's visible items at
/// one version) share a group: only heads are ever visible.
pub fn heads_are_distinct<'a>(items: impl IntoIterator<Item = &'a Item>) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    items
        .into_iter()
        .filter_map(|item| item.group.as_deref())
        .all(|group| seen.insert(group))
}

/// What a group's state key says about its head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Visible, delayed, leased or in a stored result.
    Head,
    /// Popped without a lease; taken as delivered at `due_ms` unless its
    /// succession ends first.
    Succession {
        /// When the timer takes it as delivered.
        due_ms: u64,
        /// The key it was popped from (and returns to).
        item_key: Vec<u8>,
    },
    /// Out as an SQS FIFO batch (see [`batch`]): the head and the items
    /// leased with it, `out` of them still leased.
    Batch {
        /// How many of the batch's items are still leased.
        out: u32,
    },
}

fn encode_state(state: &State) -> Vec<u8> {
    match state {
        State::Head => vec![0],
        State::Succession { due_ms, item_key } => {
            let mut value = Vec::with_capacity(9 + item_key.len());
            value.push(1);
            value.extend_from_slice(&due_ms.to_be_bytes());
            value.extend_from_slice(item_key);
            value
        }
        State::Batch { out } => {
            let mut value = vec![2];
            value.extend_from_slice(&out.to_be_bytes());
            value
        }
    }
}

fn decode_state(value: &[u8]) -> Option<State> {
    match value.split_first()? {
        (0, []) => Some(State::Head),
        (1, rest) if rest.len() >= 8 => Some(State::Succession {
            due_ms: u64::from_be_bytes(rest[..8].try_into().ok()?),
            item_key: rest[8..].to_vec(),
        }),
        (2, rest) => Some(State::Batch {
            out: u32::from_be_bytes(rest.try_into().ok()?),
        }),
        _ => None,
    }
}

/// Reads `group`'s state without snapshot. A malformed state (not written
/// by hotq) reads as a head, which keeps the group's items behind it.
pub async fn state_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    group: &str,
) -> Result<Option<State>, StoreError> {
    let value = txn.get(&keys.group(group), Read::Serializable).await?;
    Ok(value.map(|v| decode_state(&v).unwrap_or(State::Head)))
}

/// The state stored as `value` under a group's state key (a malformed one
/// reads as a head, as in [`state_in`]); for listings.
pub fn state_of_value(value: &[u8]) -> State {
    decode_state(value).unwrap_or(State::Head)
}

/// The envelope of the waiting item stored as `value` under a key of
/// `QueueKeys::grouped_item`; for listings.
pub fn waiting_item_of_value(value: &[u8]) -> Option<ItemValue> {
    decode_pending(value).map(|(_, item)| item)
}

/// A waiting item's value: `1, visible_at_ms, item envelope`.
fn encode_pending(visible_at_ms: u64, envelope: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(9 + envelope.len());
    value.push(1);
    value.extend_from_slice(&visible_at_ms.to_be_bytes());
    value.extend_from_slice(envelope);
    value
}

fn decode_pending(value: &[u8]) -> Option<(u64, ItemValue)> {
    let (&version, rest) = value.split_first()?;
    if version != 1 || rest.len() < 8 {
        return None;
    }
    let visible_at_ms = u64::from_be_bytes(rest[..8].try_into().ok()?);
    Some((visible_at_ms, decode_item(&rest[8..])?))
}

/// One item of a push that holds grouped items.
#[derive(Debug, Clone, Copy)]
pub struct NewItem<'a> {
    /// Its group; `None` for an item without one (in a mixed batch).
    pub group: Option<&'a str>,
    /// Its bytes.
    pub payload: &'a [u8],
    /// When its retention ends (see [`crate::queue::expiry`]).
    pub expires_at_ms: Option<u64>,
    /// Its fairness key (see [`crate::queue::fair`]): its push index is
    /// then its virtual tag. A group's items under one key keep push
    /// order; a group whose items name different keys is ordered by tag.
    pub fair_key: Option<&'a str>,
}

/// In `txn`: pushes `items` in order, visible after `delay_ms`. An item of
/// a group without a head becomes the head (visible or delayed, at its
/// push index); one of a group with a head waits behind it. Items without
/// a group go where a plain push puts them. Returns when delayed items
/// become visible (`None` when not delayed). Items with a fairness key
/// are placed by their virtual tag under `weights` (see
/// [`crate::queue::fair`]).
pub async fn push_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &[NewItem<'_>],
    now_ms: u64,
    delay_ms: u64,
    weights: &BTreeMap<String, u32>,
) -> Result<Option<u64>, StoreError> {
    let visible_at_ms = now_ms.saturating_add(delay_ms);
    // Snapshot, as every push: the group state reads below are what orders
    // two pushes to one group.
    let next_index = next_index_in(txn, keys).await?;
    let fair_keys: Vec<Option<&str>> = items.iter().map(|item| item.fair_key).collect();
    let indexes = if fair_keys.iter().any(Option::is_some) {
        crate::queue::fair::indexes_in(txn, keys, &fair_keys, weights).await?
    } else {
        (next_index..next_index + items.len() as u64).collect()
    };
    let mut has_head = heads_in(txn, keys, items.iter().filter_map(|item| item.group)).await?;
    let mut counts = Counts::default();
    let mut plain_delayed = Vec::new();
    let mut plain_expires = Vec::new();
    for (new, index) in items.iter().zip(indexes) {
        let random = fresh_random();
        let mut item = ItemValue {
            group: new.group.map(str::to_string),
            expires_at_ms: new.expires_at_ms,
            fair_key: new.fair_key.map(str::to_string),
            ..ItemValue::new(now_ms, new.payload.to_vec())
        };
        crate::queue::parts::spill_in(txn, &mut item)?;
        let Some(group) = new.group else {
            if delay_ms > 0 {
                plain_expires.push(item.expires_at_ms);
                plain_delayed.push(encode_held(&HeldItem {
                    item_key: Vec::new(),
                    item,
                }));
            } else {
                let key = keys.item(index, &random);
                txn.set(&key, &encode_item_value(&item))?;
                crate::queue::expiry::index_in(txn, keys, &key, item.expires_at_ms)?;
                counts.visible += 1;
            }
            continue;
        };
        debug_assert!(
            check_key(group).is_ok(),
            "group keys are checked by the caller"
        );
        let at = Place {
            index,
            random: &random,
            visible_at_ms,
            now_ms,
        };
        place_in(txn, keys, &mut has_head, group, &item, &at, &mut counts)?;
    }
    txn.atomic_max(&keys.next_index(), next_index + items.len() as u64)?;
    if !plain_delayed.is_empty() {
        crate::queue::item::hold_in(txn, keys, &plain_delayed, visible_at_ms, &plain_expires)?;
    }
    counts.add_in(txn, keys)?;
    Ok((delay_ms > 0).then_some(visible_at_ms))
}

/// The queue's next push index (a snapshot read, as every push's).
async fn next_index_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<u64, StoreError> {
    Ok(decode_mark(
        txn.get(&keys.next_index(), Read::Snapshot)
            .await?
            .as_deref(),
    ))
}

fn fresh_random() -> [u8; RANDOM_LEN] {
    let mut random = [0u8; RANDOM_LEN];
    rand::rng().fill_bytes(&mut random);
    random
}

/// Whether each of `groups` has a head, from its state read without
/// snapshot: all read at once (a store with remote reads waits for them
/// together, not once per group).
async fn heads_in<'a, T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    groups: impl Iterator<Item = &'a str>,
) -> Result<BTreeMap<&'a str, bool>, StoreError> {
    let mut groups: Vec<&str> = groups.collect();
    groups.sort_unstable();
    groups.dedup();
    let states = join_all(groups.iter().map(|group| state_in(txn, keys, group))).await;
    let mut has_head = BTreeMap::new();
    for (group, state) in groups.into_iter().zip(states) {
        has_head.insert(group, state?.is_some());
    }
    Ok(has_head)
}

/// What a push or move added to a queue's counters.
#[derive(Debug, Default)]
struct Counts {
    visible: i64,
    delayed: i64,
    waiting: i64,
}

impl Counts {
    fn add_in<T: Transaction>(&self, txn: &T, keys: &QueueKeys) -> Result<(), StoreError> {
        add(txn, &keys.depth(), self.visible)?;
        add(txn, &keys.delayed_count(), self.delayed)?;
        add(txn, &keys.grouped_count(), self.waiting)
    }
}

/// Where a grouped item is placed: its push index and random suffix, and
/// from when it may be seen.
struct Place<'a> {
    index: u64,
    random: &'a [u8],
    visible_at_ms: u64,
    now_ms: u64,
}

/// In `txn`: places `item` of `group` at `at`: behind the group's head
/// when it has one (`has_head`, read for every group of the batch), else
/// as the head, visible or (not yet visible) delayed.
fn place_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    has_head: &mut BTreeMap<&str, bool>,
    group: &str,
    item: &ItemValue,
    at: &Place<'_>,
    counts: &mut Counts,
) -> Result<(), StoreError> {
    let head = has_head
        .get_mut(group)
        .expect("every group's state was read");
    if *head {
        let pending = encode_pending(at.visible_at_ms, &encode_item_value(item));
        let key = keys.grouped_item(group, at.index, at.random);
        txn.set(&key, &pending)?;
        crate::queue::expiry::index_in(txn, keys, &key, item.expires_at_ms)?;
        counts.waiting += 1;
        return Ok(());
    }
    *head = true;
    txn.set(&keys.group(group), &encode_state(&State::Head))?;
    if at.visible_at_ms > at.now_ms {
        let held = HeldItem {
            item_key: keys.item(at.index, at.random),
            item: item.clone(),
        };
        let key = keys.delayed(at.visible_at_ms, at.random);
        txn.set(&key, &encode_held(&held))?;
        crate::queue::expiry::index_in(txn, keys, &key, item.expires_at_ms)?;
        counts.delayed += 1;
    } else {
        let key = keys.item(at.index, at.random);
        txn.set(&key, &encode_item_value(item))?;
        crate::queue::expiry::index_in(txn, keys, &key, item.expires_at_ms)?;
        counts.visible += 1;
    }
    Ok(())
}

fn add<T: Transaction>(txn: &T, key: &[u8], delta: i64) -> Result<(), StoreError> {
    if delta != 0 {
        txn.atomic_add(key, delta)?;
    }
    Ok(())
}

/// In `txn`: `group`'s head has left for good. The first item waiting
/// behind it becomes the head, or, with none, the group has no head. In a
/// group out as a batch, one of the batch's items has left: the group is
/// released only when it was the last one out.
pub async fn leave_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    group: &str,
    now_ms: u64,
) -> Result<(), StoreError> {
    match state_in(txn, keys, group).await? {
        None => {
            // Purged or deleted while its head was out: nothing waits.
            tracing::debug!(queue = %keys.name(), group, "a group head left a group with no state");
            return Ok(());
        }
        Some(State::Batch { out }) if out > 1 => {
            let state = State::Batch { out: out - 1 };
            return txn.set(&keys.group(group), &encode_state(&state));
        }
        Some(_) => {}
    }
    let (begin, end) = keys.grouped_range(group);
    // Not snapshot: a push writing behind an empty group conflicts with
    // this clear of its state.
    let rows = txn.get_range(RangeRead::new(&begin, &end, 1)).await?;
    let Some(KeyValue { key, value }) = rows.into_iter().next() else {
        return txn.clear(&keys.group(group));
    };
    txn.clear(&key)?;
    txn.atomic_add(&keys.grouped_count(), -1)?;
    txn.set(&keys.group(group), &encode_state(&State::Head))?;
    let parsed = keys.grouped_parts(&key).zip(decode_pending(&value));
    let Some(((_, index, random), (visible_at_ms, item))) = parsed else {
        // Not something hotq wrote; dropping it keeps the group moving.
        tracing::warn!(queue = %keys.name(), group, ?key, "dropping a malformed waiting item");
        return txn.clear(&keys.group(group));
    };
    let item_key = keys.item(index, &random);
    // It moves up: its expiry entry follows it (an expiry already past is
    // the timer's next round's).
    let expires_at_ms = item.expires_at_ms;
    crate::queue::expiry::unindex_in(txn, keys, &key, expires_at_ms)?;
    if visible_at_ms > now_ms {
        let held = HeldItem { item_key, item };
        let delayed = keys.delayed(visible_at_ms, &random);
        txn.set(&delayed, &encode_held(&held))?;
        crate::queue::expiry::index_in(txn, keys, &delayed, expires_at_ms)?;
        return txn.atomic_add(&keys.delayed_count(), 1);
    }
    txn.set(&item_key, &encode_item_value(&item))?;
    crate::queue::expiry::index_in(txn, keys, &item_key, expires_at_ms)?;
    txn.atomic_add(&keys.depth(), 1)
}

/// Drops up to [`DROP_BATCH_MAX`] items waiting behind group heads, pushed
/// at an index below `below_index` (`None`: all); returns how many, and
/// whether any such item may remain.
pub async fn drop_waiting<S: Store>(
    store: &S,
    keys: &QueueKeys,
    below_index: Option<u64>,
    from: &[u8],
) -> Result<(u64, Option<Vec<u8>>), QueueError> {
    let policy = RetryPolicy {
        retry_maybe_committed: false,
        ..RetryPolicy::default()
    };
    let dropped = transact(store, policy, |txn| async move {
        let end = keys.grouped_all_range().1;
        let rows = txn
            .get_range(RangeRead::new(from, &end, DROP_BATCH_MAX).snapshot())
            .await?;
        let mut count = 0i64;
        for row in &rows {
            let keep = keys
                .grouped_parts(&row.key)
                .is_some_and(|(_, index, _)| below_index.is_some_and(|below| index >= below));
            if keep {
                continue;
            }
            // Conflicts with a promotion that took it.
            txn.add_read_conflict_key(&row.key)?;
            txn.clear(&row.key)?;
            let parts = decode_pending(&row.value).and_then(|(_, item)| item.parts);
            crate::queue::parts::clear_in(&txn, parts)?;
            count += 1;
        }
        add(&txn, &keys.grouped_count(), -count)?;
        let next = (rows.len() >= DROP_BATCH_MAX).then(|| key_after(&rows[rows.len() - 1].key));
        Ok((count as u64, next))
    })
    .await?;
    Ok(dropped)
}

/// In a purge's transaction: the groups of the visible or delayed items
/// it drops (by their envelopes, `values`) lose their heads; each releases
/// its next item. Ungrouped items cost a decode of their header only.
pub async fn dropped_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: impl Iterator<Item = Option<ItemValue>>,
    now_ms: u64,
) -> Result<(), StoreError> {
    let mut heads: BTreeMap<String, usize> = BTreeMap::new();
    for item in values.flatten() {
        if let Some(group) = item.group {
            *heads.entry(group).or_default() += 1;
        }
    }
    for (group, count) in heads {
        // One head per group, or the items of one batch (all leased): more
        // would be a broken invariant.
        let batch = matches!(
            state_in(txn, keys, &group).await?,
            Some(State::Batch { .. })
        );
        debug_assert!(count == 1 || batch, "group {group:?} had {count} heads");
        if count > 1 && !batch {
            tracing::error!(queue = %keys.name(), group, count, "a group had more than one head");
        }
        for _ in 0..if batch { count } else { 1 } {
            leave_in(txn, keys, &group, now_ms).await?;
        }
    }
    Ok(())
}

pub mod batch;
mod moves;
mod succession;
pub use moves::{Moved, move_in, take_waiting_in, waiting_in};
#[cfg(test)]
use succession::delivered;
pub use succession::{
    deliver_soon, give_back_in, succession_due_in, succession_due_ms, succession_in,
};

#[cfg(test)]
mod tests;
