//! The priority queue recipe over any [`Store`] (FoundationDB's priority
//! queue recipe).
//!
//! Items live under `items/(priority, count, random)`. A push takes the
//! highest count of its priority with a *snapshot* reverse read (limit 1)
//! of the `(priority,)` sub-range and writes at count + 1, so concurrent
//! pushes never conflict (equal counts are ordered by the random suffix).
//! Keys order by priority, then count, so the front of the items subspace
//! is the minimum and the back the maximum: equal priorities come out in
//! push order from the min end and in reverse push order from the max end.
//!
//! Pops here are direct, with the bounded retry of [`transact`], mirroring
//! [`crate::queue::Queue::pop`]. Staged pops at either end go through
//! [`crate::coordinator::Coordinator::pop`] with [`End::Front`] (min) or
//! [`End::Back`] (max) and these keys ([`PriorityQueue::keys`]).

use std::collections::HashMap;

use rand::RngCore;

use crate::envelope::{End, encode_item, now_ms};
use crate::keys::{QueueKeys, QueueKind, QueueName, RANDOM_LEN};
use crate::queue::read_end;
use crate::queue::{Item, QueueError, check_batch};
use crate::store::{
    RangeRead, RetryPolicy, Store, StoreError, Transaction, decode_counter, transact,
};

/// A named priority queue: items ordered by a signed 64-bit priority,
/// popped from the minimum or the maximum end.
#[derive(Debug, Clone)]
pub struct PriorityQueue<S: Store> {
    store: S,
    name: QueueName,
    keys: QueueKeys,
    retry: RetryPolicy,
}

impl<S: Store> PriorityQueue<S> {
    /// The priority queue `name` on `store` (its keys never overlap those of
    /// a FIFO queue of the same name).
    pub fn new(store: S, name: QueueName) -> PriorityQueue<S> {
        let keys = QueueKeys::of_kind(QueueKind::Priority, &name);
        PriorityQueue {
            store,
            name,
            keys,
            retry: RetryPolicy::default(),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &QueueName {
        &self.name
    }

    /// The queue's key layout (what [`crate::coordinator::Coordinator::pop`]
    /// takes for staged pops).
    pub fn keys(&self) -> &QueueKeys {
        &self.keys
    }

    /// The store the queue lives in.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Adds one item at `priority`.
    pub async fn push(&self, payload: &[u8], priority: i64) -> Result<(), QueueError> {
        self.push_batch(&[(priority, payload)]).await
    }

    /// Adds up to [`crate::queue::PUSH_BATCH_MAX`] `(priority, payload)` items in one
    /// commit; items of equal priority keep their batch order. All or none
    /// are written.
    pub async fn push_batch<P: AsRef<[u8]>>(&self, items: &[(i64, P)]) -> Result<(), QueueError> {
        check_batch(items.iter().map(|(_, payload)| payload.as_ref()))?;
        let enqueued_at_ms = now_ms();
        let values: Vec<(i64, Vec<u8>)> = items
            .iter()
            .map(|(priority, p)| (*priority, encode_item(enqueued_at_ms, p.as_ref())))
            .collect();
        // A push reads only with snapshot and writes fresh random keys, so a
        // retry after "maybe committed" could duplicate it: not retried.
        transact(&self.store, self.retry, |txn| {
            let values = &values;
            async move { self.write_items(&txn, values).await }
        })
        .await?;
        crate::metrics::pushed(&self.keys, values.len());
        Ok(())
    }

    async fn write_items(&self, txn: &S::Txn, values: &[(i64, Vec<u8>)]) -> Result<(), StoreError> {
        // The next count of each priority in the batch, one snapshot read each.
        let mut next_count: HashMap<i64, u64> = HashMap::new();
        for (priority, _) in values {
            if !next_count.contains_key(priority) {
                let next = self
                    .last_count(txn, *priority)
                    .await?
                    .map_or(0, |count| count.saturating_add(1));
                next_count.insert(*priority, next);
            }
        }
        let mut rng = rand::rng();
        for (priority, value) in values {
            let count = next_count
                .get_mut(priority)
                .expect("every priority of the batch has a count");
            let mut random = [0u8; RANDOM_LEN];
            rng.fill_bytes(&mut random);
            txn.set(&self.keys.priority_item(*priority, *count, &random), value)?;
            // Saturates only after 2^64 pushes at one priority; the random
            // suffix still keeps keys unique.
            *count = count.saturating_add(1);
        }
        txn.atomic_add(&self.keys.depth(), values.len() as i64)
    }

    /// The highest count of `priority`, read with snapshot so pushes never
    /// conflict.
    async fn last_count(&self, txn: &S::Txn, priority: i64) -> Result<Option<u64>, StoreError> {
        let (begin, end) = self.keys.priority_range(priority);
        let rows = txn
            .get_range(RangeRead::new(&begin, &end, 1).reverse().snapshot())
            .await?;
        Ok(rows
            .first()
            .and_then(|row| self.keys.priority_item_parts(&row.key))
            .map(|(_, count)| count))
    }

    /// Pops the item of lowest priority (the earliest pushed among equals).
    pub async fn pop_min(&self) -> Result<Option<Item>, QueueError> {
        self.pop_end(End::Front).await
    }

    /// Pops the item of highest priority (the latest pushed among equals).
    pub async fn pop_max(&self) -> Result<Option<Item>, QueueError> {
        self.pop_end(End::Back).await
    }

    /// Pops from `end` with direct pops only, retrying conflicts with backoff
    /// up to the retry policy's bound. (Staged pops, which turn conflicts
    /// into requests, are [`crate::coordinator::Coordinator::pop`].)
    async fn pop_end(&self, end: End) -> Result<Option<Item>, QueueError> {
        let popped = transact(&self.store, self.retry, |txn| async move {
            if crate::queue_settings::paused_in(&txn, &self.keys)
                .await
                .map_err(corrupt_as_store)?
            {
                return Ok(None);
            }
            let Some(item) = self
                .end_item(&txn, end, false)
                .await
                .map_err(corrupt_as_store)?
            else {
                return Ok(None);
            };
            txn.clear(&item.key)?;
            txn.atomic_add(&self.keys.depth(), -1)?;
            Ok(Some(item))
        })
        .await?;
        Ok(popped)
    }

    /// The item of lowest priority, without taking it (a snapshot read:
    /// never conflicts).
    pub async fn peek_min(&self) -> Result<Option<Item>, QueueError> {
        let txn = self.store.begin()?;
        self.end_item(&txn, End::Front, true).await
    }

    /// The item of highest priority, without taking it (a snapshot read:
    /// never conflicts).
    pub async fn peek_max(&self) -> Result<Option<Item>, QueueError> {
        let txn = self.store.begin()?;
        self.end_item(&txn, End::Back, true).await
    }

    /// Reads the item at `end` (front: minimum, back: maximum) in `txn`.
    /// With `snapshot` the read adds no read conflict (what the peeks do).
    pub async fn end_item(
        &self,
        txn: &S::Txn,
        end: End,
        snapshot: bool,
    ) -> Result<Option<Item>, QueueError> {
        Ok(read_end(txn, &self.keys, end, 1, snapshot)
            .await?
            .into_iter()
            .next())
    }

    /// The number of items, from the counter pushes and pops maintain.
    pub async fn len(&self) -> Result<u64, QueueError> {
        let txn = self.store.begin()?;
        let value = txn.get(&self.keys.depth(), true).await?;
        let depth = decode_counter(value.as_deref());
        assert!(
            depth >= 0,
            "priority queue {} depth counter is negative: {depth}",
            self.name
        );
        Ok(depth as u64)
    }

    /// True when the queue holds no item.
    pub async fn is_empty(&self) -> Result<bool, QueueError> {
        Ok(self.len().await? == 0)
    }
}

/// Inside a retried transaction body only store errors travel; a corrupt
/// envelope is reported as a non-retryable backend error naming the key
/// (as [`crate::queue::Queue::pop`] does).
fn corrupt_as_store(error: QueueError) -> StoreError {
    match error {
        QueueError::Store(error) => error,
        other => StoreError::Backend {
            code: 4100,
            message: other.to_string(),
        },
    }
}
