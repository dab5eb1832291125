//! The FIFO queue recipe over any [`Store`].
//!
//! Items live under `items/(index, random)`. A push takes the next index
//! with a *snapshot* read and writes there, so concurrent pushes never
//! conflict (equal indexes are ordered by the random suffix).
//!
//! Where the recipe reads the last item's key, hotq reads `meta/next_index`,
//! which pushes raise with `atomic_max` (a write conflict only). The two
//! agree while the queue holds items; once it drains, the recipe would
//! restart at index 0, in front of every tombstone the drained items left,
//! so later range reads would walk them all. The mark never goes back, and
//! a point read is cheaper than a reverse range read. A direct
//! pop reads the first item without snapshot (limit 1), clears it and
//! commits; two pops of the same head conflict, and the loser is told so
//! as a typed outcome rather than retried blindly.

use crate::queue::limits::budget_in;
use rand::RngCore;

use crate::envelope::{End, PAYLOAD_SIZE_MAX, PUSH_PAYLOAD_BYTES_MAX, decode_item, now_ms};
use crate::keys::{QueueKeys, QueueName, RANDOM_LEN};
use crate::store::Read;
#[cfg(feature = "testing")]
use crate::store::decode_counter;
use crate::store::{RangeRead, RetryPolicy, Store, StoreError, Transaction, decode_mark, transact};

#[cfg(feature = "testing")]
use super::item::hold_in;
use super::item::{Item, PUSH_BATCH_MAX, QueueError};

/// The outcome of one direct-pop attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
// Returned once per pop and moved straight to its caller, never stored:
// boxing the item would cost an allocation on the hot path for nothing.
#[allow(clippy::large_enum_variant)]
pub enum DirectPop {
    /// The item is ours: it left the queue in our commit.
    Took(Item),
    /// The queue was empty at our read version.
    Empty,
    /// Another pop took the head first; nothing changed.
    Conflict,
}

/// A named FIFO queue.
#[derive(Debug, Clone)]
pub struct Queue<S: Store> {
    store: S,
    keys: QueueKeys,
    retry: RetryPolicy,
}

impl<S: Store> Queue<S> {
    /// The queue `name` on `store`.
    pub fn new(store: S, name: QueueName) -> Queue<S> {
        let keys = QueueKeys::new(&name);
        Queue {
            store,
            keys,
            retry: RetryPolicy::default(),
        }
    }

    /// The queue's name.
    #[cfg(feature = "testing")]
    pub fn name(&self) -> &QueueName {
        self.keys.name()
    }

    /// The queue's key layout.
    pub fn keys(&self) -> &QueueKeys {
        &self.keys
    }

    /// The store the queue lives in.
    #[cfg(feature = "testing")]
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Appends one item.
    pub async fn push(&self, payload: &[u8]) -> Result<(), QueueError> {
        self.push_batch(&[payload]).await
    }

    /// Appends up to [`PUSH_BATCH_MAX`] items in one commit, in order.
    /// All or none are written.
    pub async fn push_batch<P: AsRef<[u8]>>(&self, payloads: &[P]) -> Result<(), QueueError> {
        check_batch(payloads.iter().map(AsRef::as_ref))?;
        let enqueued_at_ms = now_ms();
        // A push reads only with snapshot and writes fresh random keys, so a
        // retry after "maybe committed" could duplicate it: not retried.
        // Encoded in the transaction: a large payload's parts are written
        // in it (see `crate::queue::parts`).
        transact(&self.store, self.retry, |txn| async move {
            let values = payloads
                .iter()
                .map(|p| super::parts::encode_fresh_in(&txn, enqueued_at_ms, p.as_ref(), None))
                .collect::<Result<Vec<_>, _>>()?;
            append_in(&txn, &self.keys, &values).await
        })
        .await?;
        crate::metrics::pushed(&self.keys, payloads.len());
        Ok(())
    }

    /// Pushes up to [`PUSH_BATCH_MAX`] items in one commit, invisible to
    /// pops until `delay_ms` from now, when the coordinator's timer appends
    /// them, in order, at the queue's tail. All or none are written.
    #[cfg(feature = "testing")]
    pub async fn push_batch_delayed<P: AsRef<[u8]>>(
        &self,
        payloads: &[P],
        delay_ms: u64,
    ) -> Result<u64, QueueError> {
        check_batch(payloads.iter().map(AsRef::as_ref))?;
        let now = now_ms();
        let visible_at_ms = now.saturating_add(delay_ms);
        transact(&self.store, self.retry, |txn| async move {
            let values = payloads
                .iter()
                .map(|p| held_fresh_in(&txn, now, p.as_ref(), None))
                .collect::<Result<Vec<_>, _>>()?;
            hold_in(&txn, &self.keys, &values, visible_at_ms, &[])
        })
        .await?;
        crate::metrics::pushed(&self.keys, payloads.len());
        Ok(visible_at_ms)
    }

    /// One direct-pop attempt: the first item, cleared in our commit. (A
    /// library pop hands the item straight to its caller: a grouped item's
    /// successor is released in the same commit; see [`crate::queue::groups`].)
    #[cfg(feature = "testing")]
    pub async fn try_pop_direct(&self) -> Result<DirectPop, QueueError> {
        let txn = self.store.begin()?;
        if crate::queue::settings::paused_in(&txn, &self.keys).await? {
            return Ok(DirectPop::Empty);
        }
        let Some(mut item) = self.first_item(&txn, Read::Serializable).await? else {
            return Ok(DirectPop::Empty);
        };
        super::parts::deliver_in(&txn, std::iter::once(&mut item)).await?;
        txn.clear(&item.key)?;
        crate::queue::expiry::unindex_in(&txn, &self.keys, &item.key, item.expires_at_ms)?;
        txn.atomic_add(&self.keys.depth(), -1)?;
        if let Some(group) = &item.group {
            crate::queue::groups::leave_in(&txn, &self.keys, group, now_ms()).await?;
        }
        match txn.commit().await {
            Ok(()) => Ok(DirectPop::Took(item)),
            Err(StoreError::Conflict) => Ok(DirectPop::Conflict),
            Err(error) => Err(error.into()),
        }
    }

    /// Pops the first item with direct pops only, retrying conflicts with
    /// backoff up to the retry policy's bound. (The staged pop, which turns
    /// conflicts into requests, is [`crate::staging::pop`].)
    pub async fn pop(&self) -> Result<Option<Item>, QueueError> {
        let popped = transact(&self.store, self.retry, |txn| async move {
            let gates = crate::queue::settings::gates_in(&txn, &self.keys)
                .await
                .map_err(corrupt_as_store)?;
            if gates.paused {
                return Ok(None);
            }
            // The queue's rate limits count this pop too (it leases nothing:
            // the lease limits do not hold it); a held item answers none.
            let mut budget = budget_in(&txn, &self.keys, gates.limits, false).await?;
            let first = match budget.allows(false) {
                true => self.first_item(&txn, Read::Serializable).await,
                false => Ok(None),
            };
            let Some(mut item) = first.map_err(corrupt_as_store)? else {
                return Ok(None);
            };
            budget
                .read_keys_in(&txn, &self.keys, std::iter::once(&item))
                .await?;
            if !budget.allows_item(&item, false) {
                return Ok(None);
            }
            budget.take_item(&item, false);
            budget.spend_in(&txn, &self.keys)?;
            super::parts::deliver_in(&txn, std::iter::once(&mut item))
                .await
                .map_err(corrupt_as_store)?;
            txn.clear(&item.key)?;
            crate::queue::expiry::unindex_in(&txn, &self.keys, &item.key, item.expires_at_ms)?;
            txn.atomic_add(&self.keys.depth(), -1)?;
            if let Some(group) = &item.group {
                crate::queue::groups::leave_in(&txn, &self.keys, group, now_ms()).await?;
            }
            Ok(Some(item))
        })
        .await?;
        Ok(popped)
    }

    /// The first item, without taking it (a snapshot read: never conflicts).
    pub async fn peek(&self) -> Result<Option<Item>, QueueError> {
        let txn = self.store.begin()?;
        let mut item = self.first_item(&txn, Read::Snapshot).await?;
        if let Some(item) = &mut item {
            super::parts::load_in(&txn, item).await?;
        }
        Ok(item)
    }

    /// The number of items, from the counter pushes and pops maintain.
    #[cfg(feature = "testing")]
    pub async fn len(&self) -> Result<u64, QueueError> {
        let txn = self.store.begin()?;
        let value = txn.get(&self.keys.depth(), Read::Snapshot).await?;
        let depth = decode_counter(value.as_deref());
        if depth < 0 {
            // A bug or another build: reported, not a panic of the caller.
            tracing::error!(queue = %self.keys.name(), depth, "a depth counter is negative; read as 0");
        }
        Ok(depth.max(0) as u64)
    }

    /// True when the queue holds no item.
    #[cfg(feature = "testing")]
    pub async fn is_empty(&self) -> Result<bool, QueueError> {
        Ok(self.len().await? == 0)
    }

    /// Reads the first item in `txn`.
    pub async fn first_item(&self, txn: &S::Txn, read: Read) -> Result<Option<Item>, QueueError> {
        let items = read_end(txn, &self.keys, End::Front, 1, read).await?;
        Ok(items.into_iter().next())
    }
}

/// In `txn`: a fresh delayed item's envelope for `payload` (its parts
/// written when it does not fit one value).
#[cfg(feature = "testing")]
pub(crate) fn held_fresh_in<T: Transaction>(
    txn: &T,
    now_ms: u64,
    payload: &[u8],
    expires_at_ms: Option<u64>,
) -> Result<Vec<u8>, StoreError> {
    Ok(crate::envelope::encode_held(&crate::envelope::HeldItem {
        item_key: Vec::new(),
        item: super::parts::fresh_in(txn, now_ms, payload, expires_at_ms)?,
    }))
}

/// Checks a batch's length and every payload's size (FIFO and priority pushes).
pub(crate) fn check_batch<'a>(
    payloads: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Result<(), QueueError> {
    let len = payloads.len();
    if len == 0 || len > PUSH_BATCH_MAX {
        return Err(QueueError::BadBatch { len });
    }
    let mut bytes = 0usize;
    for payload in payloads {
        if payload.len() > PAYLOAD_SIZE_MAX {
            return Err(QueueError::PayloadTooLarge { len: payload.len() });
        }
        bytes += payload.len();
    }
    // One push is one transaction, bounded by the store (10 MB).
    if bytes > PUSH_PAYLOAD_BYTES_MAX {
        return Err(QueueError::BatchTooLarge { bytes });
    }
    Ok(())
}

/// Appends encoded item envelopes at the tail of the FIFO queue `keys`, in
/// order, in `txn`: the index comes from a snapshot read of the
/// `next_index` mark, so appends never conflict with each other.
pub async fn append_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[Vec<u8>],
) -> Result<(), StoreError> {
    append_expiring_in(txn, keys, values, &[]).await
}

/// [`append_in`], where `values[i]` expires at `expires[i]` (see
/// [`crate::queue::expiry`]; a missing or `None` one never does).
pub async fn append_expiring_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[Vec<u8>],
    expires: &[Option<u64>],
) -> Result<(), StoreError> {
    let next_index = decode_mark(
        txn.get(&keys.next_index(), Read::Snapshot)
            .await?
            .as_deref(),
    );
    let mut rng = rand::rng();
    for (offset, value) in values.iter().enumerate() {
        let mut random = [0u8; RANDOM_LEN];
        rng.fill_bytes(&mut random);
        let key = keys.item(next_index + offset as u64, &random);
        txn.set(&key, value)?;
        let expires_at_ms = expires.get(offset).copied().flatten();
        crate::queue::expiry::index_in(txn, keys, &key, expires_at_ms)?;
    }
    txn.atomic_max(&keys.next_index(), next_index + values.len() as u64)?;
    txn.atomic_add(&keys.depth(), values.len() as i64)
}

/// Inside a retried transaction body only store errors travel; a corrupt
/// envelope is reported as a non-retryable backend error naming the key.
pub(crate) fn corrupt_as_store(error: QueueError) -> StoreError {
    match error {
        QueueError::Store(error) => error,
        other => StoreError::Backend {
            code: 4100,
            message: other.to_string(),
        },
    }
}

/// Reads the first (or last) item of `keys` in `txn`.
pub async fn read_end<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    end: End,
    limit: usize,
    read: Read,
) -> Result<Vec<Item>, QueueError> {
    let (begin, stop) = keys.items_range();
    let mut range = RangeRead::new(&begin, &stop, limit);
    range.reverse = end == End::Back;
    range.read = read;
    txn.get_range(range)
        .await?
        .into_iter()
        .map(|row| {
            let value = decode_item(&row.value).ok_or_else(|| QueueError::Corrupt {
                key: row.key.clone(),
            })?;
            Ok(Item::from_value(row.key, value))
        })
        .collect()
}
