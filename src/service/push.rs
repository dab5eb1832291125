//! Pushes: one item or a batch to a FIFO queue, one item to a priority
//! queue; delayed, deduplicated by id, in a message group, with a
//! retention; and the payload limits every front end's pushes are held to.

use super::{Error, Hotq, Result};
use crate::envelope::PAYLOAD_SIZE_MAX;
use crate::keys::{QueueKeys, QueueName};
use crate::queue::dedup::{PushTerms, check_id, push_fair};
use crate::queue::priority::{Deduplicated, PriorityQueue, PushAsk};
use crate::store::{Read, Store, Transaction, decode_counter};

pub use crate::queue::PUSH_BATCH_MAX;
pub use crate::queue::dedup::{DEDUP_ID_LEN_MAX, PushItem};
pub use crate::queue::expiry::RETENTION_MS_MAX;
pub use crate::queue::fair::FAIR_KEY_LEN_MAX;
pub use crate::queue::groups::GROUP_KEY_LEN_MAX;

/// How a push's items are stored (besides their own dedup id and group).
#[derive(Debug, Clone, Copy, Default)]
pub struct PushOptions {
    /// Invisible for this long, in ms (checked by [`Hotq::check_delay_ms`]);
    /// `None`: the queue's `delivery_delay_ms`.
    pub delay_ms: Option<u64>,
    /// Kept at most this long unless delivered, in ms (checked by
    /// [`check_retention_ms`]); `None`: the queue's `retention_ms`.
    pub retention_ms: Option<u64>,
    /// The largest item this push takes, in bytes (`None`: the configured
    /// `payload_bytes_max`): a front end that wraps each payload in a
    /// header of its own (SQS) names its bound, within the core's ceiling.
    pub item_bytes_max: Option<usize>,
}

/// What a push stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// How many items were stored (duplicates left out).
    pub pushed: usize,
    /// When the stored items become visible, for a delayed push.
    pub visible_at_ms: Option<u64>,
    /// The positions of the items left out as duplicates, in order.
    pub duplicates: Vec<usize>,
}

/// `retention_ms` when it is within 1 ms to a year.
pub fn check_retention_ms(retention_ms: Option<u64>) -> Option<u64> {
    retention_ms.filter(|ms| (1..=RETENTION_MS_MAX).contains(ms))
}

/// A message group key, checked (1-128 of A-Z a-z 0-9 . _ - : @ /).
pub fn check_group(raw: String) -> Result<String> {
    crate::queue::groups::check_key(&raw).map_err(Error::BadGroup)?;
    Ok(raw)
}

/// A fairness key, checked (1-128 of A-Z a-z 0-9 . _ - : @ /).
pub fn check_fair_key(raw: String) -> Result<String> {
    crate::queue::fair::check_key(&raw).map_err(Error::BadFairKey)?;
    Ok(raw)
}

/// A dedup id, checked: 1 to 128 bytes.
pub fn check_dedup_id(raw: &[u8]) -> Result<()> {
    check_id(raw).map_err(Error::BadDedupId)
}

impl<S: Store> Hotq<S> {
    /// Checks one item: at least one byte, at most the core's ceiling (the
    /// configured `payload_bytes_max` is checked by the push itself).
    pub fn check_item(&self, payload: &[u8]) -> Result<()> {
        if payload.is_empty() {
            return Err(Error::EmptyItem);
        }
        check_items_max([payload.len()], PAYLOAD_SIZE_MAX)
    }

    /// Checks items of lengths `lens` against the configured
    /// `payload_bytes_max` (a push checks it too; a front end that notes
    /// the queue only for pushes that may proceed checks first).
    pub fn check_payload_sizes(&self, lens: impl IntoIterator<Item = usize>) -> Result<()> {
        check_items_max(lens, self.limits.payload_bytes_max)
    }

    /// Checks a `delay_ms` (push, nack): 0 to the configured maximum.
    pub fn check_delay_ms(&self, delay_ms: u64) -> Result<u64> {
        let max = self.limits.delay_max_ms;
        if delay_ms > max {
            return Err(Error::BadParameter(format!(
                "delay_ms must be 0 to {max}, got {delay_ms}"
            )));
        }
        Ok(delay_ms)
    }

    /// Pushes `items` to the FIFO queue `name` in one commit, in order,
    /// duplicates left out: all or nothing. Each item is checked against
    /// the configured `payload_bytes_max`, its dedup id, group and
    /// fairness key against their forms. Items with a fairness key are
    /// served fairly between keys (see [`crate::queue::fair`]).
    pub async fn push(
        &self,
        name: &QueueName,
        items: &[PushItem],
        options: PushOptions,
    ) -> Result<Pushed> {
        let item_bytes_max = options
            .item_bytes_max
            .map_or(self.limits.payload_bytes_max, |max| {
                max.min(PAYLOAD_SIZE_MAX)
            });
        check_items_max(items.iter().map(|item| item.payload.len()), item_bytes_max)?;
        for item in items {
            if let Some(id) = &item.dedup_id {
                check_dedup_id(id)?;
            }
            if let Some(group) = &item.group {
                crate::queue::groups::check_key(group).map_err(Error::BadGroup)?;
            }
            if let Some(key) = &item.fair_key {
                crate::queue::fair::check_key(key).map_err(Error::BadFairKey)?;
            }
        }
        let keys = QueueKeys::new(name);
        let terms = PushTerms {
            delay_ms: options.delay_ms,
            retention_ms: options.retention_ms,
        };
        let pushed = push_fair(&self.store, &keys, items, terms, &self.settings_defaults).await?;
        self.schedule_pushed(pushed.visible_at_ms, pushed.expires_at_ms);
        let duplicates = pushed
            .duplicate
            .iter()
            .enumerate()
            .filter(|(_, duplicate)| **duplicate)
            .map(|(position, _)| position)
            .collect();
        Ok(Pushed {
            pushed: pushed.stored(),
            visible_at_ms: pushed.visible_at_ms,
            duplicates,
        })
    }

    /// Pushes one item of `priority` to the priority queue `name`,
    /// checked (empty, over `payload_bytes_max`, its dedup id's and
    /// fairness key's forms); with a fairness key, it is served fairly
    /// with the other keys of its priority (see [`crate::queue::fair`]).
    pub async fn push_priority(
        &self,
        name: &QueueName,
        payload: &[u8],
        priority: i64,
        (dedup_id, fair_key): (Option<&[u8]>, Option<&str>),
        options: PushOptions,
    ) -> Result<Pushed> {
        self.check_item(payload)?;
        let item_bytes_max = options
            .item_bytes_max
            .unwrap_or(self.limits.payload_bytes_max);
        check_items_max([payload.len()], item_bytes_max)?;
        if let Some(id) = dedup_id {
            check_dedup_id(id)?;
        }
        if let Some(key) = fair_key {
            crate::queue::fair::check_key(key).map_err(Error::BadFairKey)?;
        }
        let queue = PriorityQueue::new(self.store.clone(), name.clone());
        let ask = PushAsk {
            delay_ms: options.delay_ms,
            retention_ms: options.retention_ms,
            dedup_id,
            fair_key,
        };
        let pushed = queue
            .push_one(payload, priority, ask, &self.settings_defaults)
            .await?;
        Ok(match pushed {
            Deduplicated::Pushed {
                visible_at_ms,
                expires_at_ms,
            } => {
                self.schedule_pushed(visible_at_ms, expires_at_ms);
                Pushed {
                    pushed: 1,
                    visible_at_ms,
                    duplicates: Vec::new(),
                }
            }
            Deduplicated::Duplicate => Pushed {
                pushed: 0,
                visible_at_ms: None,
                duplicates: vec![0],
            },
        })
    }

    /// The visible items of `keys`' queue (its `depth` stat), read at a
    /// snapshot: what `LPUSH` and `LLEN` answer.
    pub async fn queue_depth(&self, keys: &QueueKeys) -> Result<i64> {
        let txn = self.store.begin()?;
        let depth = txn.get(&keys.depth(), Read::Snapshot).await?;
        Ok(decode_counter(depth.as_deref()))
    }

    /// Tells the timer when what a push stored comes due (its delay, its
    /// retention), so it looks then rather than at its next sweep.
    fn schedule_pushed(&self, visible_at_ms: Option<u64>, expires_at_ms: Option<u64>) {
        for due_ms in [visible_at_ms, expires_at_ms].into_iter().flatten() {
            self.coordinator.schedule(due_ms);
        }
    }
}

/// Refuses (`item_too_large`) an item over `payload_bytes_max` bytes among
/// items of lengths `lens`.
fn check_items_max(lens: impl IntoIterator<Item = usize>, payload_bytes_max: usize) -> Result<()> {
    match lens.into_iter().find(|len| *len > payload_bytes_max) {
        Some(len) => Err(Error::ItemTooLarge(format!(
            "item of {len} bytes exceeds the limit of {payload_bytes_max} bytes"
        ))),
        None => Ok(()),
    }
}
