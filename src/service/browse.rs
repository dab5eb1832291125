//! Looking inside a queue without taking anything, and deleting one item
//! exactly: what the console's queue page shows and does (see
//! `crate::console::browse` for how items are named), over any store.

use super::{Error, Hotq, Result};
use crate::envelope::{decode_item, now_ms};
use crate::keys::QueueKeys;
use crate::queue::item::{Item, QueueError};
use crate::store::{RangeRead, Read, RetryPolicy, Store, Transaction, key_after, transact};

/// Most items one listing page holds.
pub const ITEMS_LIMIT_MAX: usize = 100;
/// Most groups one group listing page holds.
pub const GROUPS_LIMIT_MAX: usize = 100;
/// Most items counted behind one group's head (more shows as "at least").
pub const GROUP_WAITING_COUNT_MAX: usize = 100;

/// Deleting consumes an item: a retry after "maybe committed" could
/// report a delete that another path already made, so it is not retried.
const DELETE_RETRY: RetryPolicy = RetryPolicy {
    attempts_max: 100,
    backoff_initial_ms: 1,
    backoff_max_ms: 20,
    retry_maybe_committed: false,
};

/// One message group of a FIFO queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    /// The group key.
    pub group: String,
    /// True while its head was popped without a lease and is being handed
    /// over (see [`crate::queue::groups::State::Succession`]); false while the head
    /// is visible, delayed, leased or in a stored result.
    pub handing_off: bool,
    /// Items waiting behind the head, counted up to
    /// [`GROUP_WAITING_COUNT_MAX`].
    pub waiting: usize,
    /// When the next waiting item was pushed, in ms since the epoch.
    pub next_enqueued_at_ms: Option<u64>,
}

impl<S: Store> Hotq<S> {
    /// Up to `limit` visible items in delivery order (a priority queue's
    /// lowest priority first), from after the item `after` (a key), read with
    /// one snapshot range read: nothing is taken, nothing conflicts. Returns
    /// them and whether more follow.
    pub async fn browse_items(
        &self,
        keys: &QueueKeys,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<Item>, bool)> {
        super::manage::check_limit(limit, ITEMS_LIMIT_MAX)?;
        let (begin, end) = keys.items_range();
        let begin = after.map(key_after).unwrap_or(begin);
        if begin >= end {
            // An `after` past every item key (its id starts with `ff`).
            return Ok((Vec::new(), false));
        }
        let txn = self.store.begin()?;
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, limit + 1).snapshot())
            .await?;
        let more = rows.len() > limit;
        let mut page = Vec::with_capacity(limit);
        for row in rows.into_iter().take(limit) {
            let Some(value) = decode_item(&row.value) else {
                return Err(QueueError::Corrupt { key: row.key }.into());
            };
            let mut item = Item::from_value(row.key, value);
            crate::queue::parts::load_head_in(&txn, &mut item).await?;
            page.push(item);
        }
        Ok((page, more))
    }

    /// Deletes the visible item under `key` in one commit that reads it
    /// without snapshot, so of this delete and a pop (or purge) taking the
    /// same item exactly one commits; the loser re-reads and finds it gone.
    /// Returns the item, or `None` when it is not visible (taken, leased,
    /// delayed, or never there). A group head deleted releases its group's
    /// next item in the same commit, as a purge does.
    pub async fn delete_item(&self, keys: &QueueKeys, key: &[u8]) -> Result<Option<Item>> {
        let deleted = transact(&self.store, DELETE_RETRY, |txn| async move {
            let Some(value) = txn.get(key, Read::Serializable).await? else {
                return Ok(None);
            };
            let Some(item) = decode_item(&value) else {
                return Ok(Some(Err(QueueError::Corrupt { key: key.to_vec() })));
            };
            crate::queue::expired::remove_visible_in(&txn, keys, key, item.clone(), now_ms())
                .await?;
            Ok(Some(Ok(Item::from_value(key.to_vec(), item))))
        })
        .await?;
        Ok(deleted.transpose()?)
    }

    /// Up to `limit` groups that have a head, in group key order, from after
    /// the group `after`; and whether more follow. Snapshot reads only.
    pub async fn browse_groups(
        &self,
        keys: &QueueKeys,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<GroupSummary>, bool)> {
        super::manage::check_limit(limit, GROUPS_LIMIT_MAX)?;
        if let Some(after) = after {
            crate::queue::groups::check_key(after)
                .map_err(|why| Error::BadParameter(format!("after: {why}")))?;
        }
        let (begin, end) = keys.groups_range();
        let begin = after
            .map(|group| key_after(&keys.group(group)))
            .unwrap_or(begin);
        let txn = self.store.begin()?;
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, limit + 1).snapshot())
            .await?;
        let more = rows.len() > limit;
        let mut page = Vec::with_capacity(limit);
        for row in rows.into_iter().take(limit) {
            let Some(group) = keys.group_of(&row.key) else {
                return Err(QueueError::Corrupt { key: row.key }.into());
            };
            let (waiting_begin, waiting_end) = keys.grouped_range(&group);
            let waiting = txn
                .get_range(
                    RangeRead::new(&waiting_begin, &waiting_end, GROUP_WAITING_COUNT_MAX)
                        .snapshot(),
                )
                .await?;
            let next_enqueued_at_ms = waiting
                .first()
                .and_then(|row| crate::queue::groups::waiting_item_of_value(&row.value))
                .map(|item| item.enqueued_at_ms);
            page.push(GroupSummary {
                group,
                handing_off: matches!(
                    crate::queue::groups::state_of_value(&row.value),
                    crate::queue::groups::State::Succession { .. }
                ),
                waiting: waiting.len(),
                next_enqueued_at_ms,
            });
        }
        Ok((page, more))
    }
}
