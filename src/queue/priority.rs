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
//! the core's pop ([`crate::service::Hotq::pop`]) with [`End::Front`] (min) or
//! [`End::Back`] (max) and these keys ([`PriorityQueue::keys`]).

use std::collections::{BTreeMap, HashMap};

use rand::RngCore;

use crate::envelope::{End, HeldItem, decode_item, encode_held, encode_item_value, now_ms};
use crate::keys::{QueueKeys, QueueKind, QueueName, RANDOM_LEN};
use crate::queue::read_end;
use crate::queue::{Item, QueueError, check_batch};
use crate::store::Read;
#[cfg(feature = "testing")]
use crate::store::decode_counter;
use crate::store::{RangeRead, RetryPolicy, Store, StoreError, Transaction, transact};

/// A named priority queue: items ordered by a signed 64-bit priority,
/// popped from the minimum or the maximum end.
#[derive(Debug, Clone)]
pub struct PriorityQueue<S: Store> {
    store: S,
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
            keys,
            retry: RetryPolicy::default(),
        }
    }

    /// The queue's name.
    #[cfg(feature = "testing")]
    pub fn name(&self) -> &QueueName {
        self.keys.name()
    }

    /// The queue's key layout (what [`crate::coordinator::Coordinator::pop`]
    /// takes for staged pops).
    #[cfg(feature = "testing")]
    pub fn keys(&self) -> &QueueKeys {
        &self.keys
    }

    /// The store the queue lives in.
    #[cfg(feature = "testing")]
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
        // A push reads only with snapshot and writes fresh random keys, so a
        // retry after "maybe committed" could duplicate it: not retried.
        transact(&self.store, self.retry, |txn| async move {
            let values = encode_in(&txn, enqueued_at_ms, items)?;
            self.write_items(&txn, &values).await
        })
        .await?;
        crate::metrics::pushed(&self.keys, items.len());
        Ok(())
    }

    /// Adds up to [`crate::queue::PUSH_BATCH_MAX`] `(priority, payload)`
    /// items in one commit, invisible to pops for `delay_ms` (`None`: the
    /// queue's `delivery_delay_ms` setting, read in the commit). A delayed
    /// item's key is taken when pushed, so among equal priorities it keeps
    /// its push order; the timer writes it there when due. Returns when the
    /// items become visible, `None` when they are at once.
    #[cfg(feature = "testing")]
    pub async fn push_batch_delayed<P: AsRef<[u8]>>(
        &self,
        items: &[(i64, P)],
        delay_ms: Option<u64>,
        defaults: &crate::queue::settings::Defaults,
    ) -> Result<Option<u64>, QueueError> {
        check_batch(items.iter().map(|(_, payload)| payload.as_ref()))?;
        let enqueued_at_ms = now_ms();
        // Not retried after "maybe committed", as every push.
        let visible_at_ms = transact(&self.store, self.retry, |txn| async move {
            let values = &encode_in(&txn, enqueued_at_ms, items)?;
            let delay_ms = match delay_ms {
                Some(delay_ms) => delay_ms,
                None => {
                    crate::queue::settings::read_in(&txn, &self.keys)
                        .await
                        .map_err(corrupt_as_store)?
                        .effective(self.keys.name(), defaults)
                        .delivery_delay_ms
                }
            };
            if delay_ms == 0 {
                self.write_items(&txn, values).await?;
                return Ok(None);
            }
            let visible_at_ms = enqueued_at_ms.saturating_add(delay_ms);
            self.hold_items(&txn, values, visible_at_ms, &[], Fair::NONE)
                .await?;
            Ok(Some(visible_at_ms))
        })
        .await?;
        crate::metrics::pushed(&self.keys, items.len());
        Ok(visible_at_ms)
    }

    /// Writes `values` as delayed items due at `visible_at_ms`, each with
    /// the key it takes when the timer reveals it.
    async fn hold_items(
        &self,
        txn: &S::Txn,
        values: &[(i64, Vec<u8>)],
        visible_at_ms: u64,
        expires: &[Option<u64>],
        fair: Fair<'_>,
    ) -> Result<(), StoreError> {
        let keys = item_keys_in(txn, &self.keys, values, fair).await?;
        let held: Vec<Vec<u8>> = keys
            .into_iter()
            .zip(values)
            .map(|(item_key, (_, value))| {
                let item = decode_item(value).expect("encoded above");
                encode_held(&HeldItem { item_key, item })
            })
            .collect();
        crate::queue::item::hold_in(txn, &self.keys, &held, visible_at_ms, expires)
    }

    /// Adds one item at `priority`, invisible to pops for `ask.delay_ms`
    /// (`None`: the queue's `delivery_delay_ms` setting, read in the
    /// commit; among equal priorities it keeps its push order) and kept for
    /// `ask.retention_ms` (`None`: the queue's `retention_ms` setting, if
    /// any; see [`crate::queue::expiry`]);
    /// with a dedup id, unless a push with that id was stored within the
    /// queue's dedup window (as for FIFO queues, see [`crate::queue::dedup`]):
    /// then nothing is written and the answer says it was a duplicate.
    /// With a fairness key (`ask.fair_key`, or `""` when the queue's `fair`
    /// setting is on), its count within its priority is the key's virtual
    /// tag (see [`crate::queue::fair::priority_tags_in`]), taken when
    /// pushed even when delayed (as a delayed item's key always is).
    pub async fn push_one(
        &self,
        payload: &[u8],
        priority: i64,
        ask: PushAsk<'_>,
        defaults: &crate::queue::settings::Defaults,
    ) -> Result<Deduplicated, QueueError> {
        check_batch(std::iter::once(payload))?;
        if let Some(id) = ask.dedup_id {
            assert!(
                crate::queue::dedup::check_id(id).is_ok(),
                "dedup ids are checked by the caller"
            );
        }
        if let Some(key) = ask.fair_key {
            assert!(
                crate::queue::fair::check_key(key).is_ok(),
                "fairness keys are checked by the caller"
            );
        }
        let enqueued_at_ms = now_ms();
        // Retried on conflict: a racing push stored the id first, and the
        // retry reads it. Not retried when the outcome is unknown.
        let pushed = transact(&self.store, RetryPolicy::default(), |txn| async move {
            let settings = crate::queue::settings::read_in(&txn, &self.keys)
                .await
                .map_err(corrupt_as_store)?
                .effective(self.keys.name(), defaults);
            let now = now_ms();
            if let Some(id) = ask.dedup_id {
                let window_ms = settings.dedup_window_ms;
                if !crate::queue::dedup::claim_in(&txn, &self.keys, id, now, window_ms).await? {
                    return Ok(Deduplicated::Duplicate);
                }
            }
            let retention_ms = ask.retention_ms.or(settings.retention_ms);
            let expires_at_ms = crate::queue::expiry::expires_at(enqueued_at_ms, retention_ms);
            let fair_key = ask
                .fair_key
                .or(settings.fair.then_some(crate::queue::fair::DEFAULT_KEY));
            let value = encode_keyed_in(&txn, enqueued_at_ms, payload, expires_at_ms, fair_key)?;
            let values = [(priority, value)];
            let fair_keys = [fair_key];
            let fair = Fair {
                keys: &fair_keys,
                weights: &settings.fair_weights,
            };
            let delay_ms = ask.delay_ms.unwrap_or(settings.delivery_delay_ms);
            if delay_ms == 0 {
                append_fair_in(&txn, &self.keys, &values, &[expires_at_ms], fair).await?;
                return Ok(Deduplicated::Pushed {
                    visible_at_ms: None,
                    expires_at_ms,
                });
            }
            let visible_at_ms = enqueued_at_ms.saturating_add(delay_ms);
            self.hold_items(&txn, &values, visible_at_ms, &[expires_at_ms], fair)
                .await?;
            Ok(Deduplicated::Pushed {
                visible_at_ms: Some(visible_at_ms),
                expires_at_ms,
            })
        })
        .await?;
        if let Deduplicated::Pushed { .. } = pushed {
            crate::metrics::pushed(&self.keys, 1);
        }
        Ok(pushed)
    }

    async fn write_items(&self, txn: &S::Txn, values: &[(i64, Vec<u8>)]) -> Result<(), StoreError> {
        append_in(txn, &self.keys, values).await
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
    /// into requests, are [`crate::service::Hotq::pop`].)
    async fn pop_end(&self, end: End) -> Result<Option<Item>, QueueError> {
        let popped = transact(&self.store, self.retry, |txn| async move {
            if crate::queue::settings::paused_in(&txn, &self.keys)
                .await
                .map_err(corrupt_as_store)?
            {
                return Ok(None);
            }
            let Some(mut item) = self
                .end_item(&txn, end, Read::Serializable)
                .await
                .map_err(corrupt_as_store)?
            else {
                return Ok(None);
            };
            crate::queue::parts::deliver_in(&txn, std::iter::once(&mut item))
                .await
                .map_err(corrupt_as_store)?;
            txn.clear(&item.key)?;
            crate::queue::expiry::unindex_in(&txn, &self.keys, &item.key, item.expires_at_ms)?;
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
        self.end_item(&txn, End::Front, Read::Snapshot).await
    }

    /// The item of highest priority, without taking it (a snapshot read:
    /// never conflicts).
    pub async fn peek_max(&self) -> Result<Option<Item>, QueueError> {
        let txn = self.store.begin()?;
        self.end_item(&txn, End::Back, Read::Snapshot).await
    }

    /// Reads the item at `end` (front: minimum, back: maximum) in `txn`.
    /// A [`Read::Snapshot`] read adds no read conflict (what the peeks do).
    pub async fn end_item(
        &self,
        txn: &S::Txn,
        end: End,
        read: Read,
    ) -> Result<Option<Item>, QueueError> {
        let mut item = read_end(txn, &self.keys, end, 1, read)
            .await?
            .into_iter()
            .next();
        if let (Some(item), Read::Snapshot) = (&mut item, read) {
            // A peek: a pop reads the payload as it takes the item.
            crate::queue::parts::load_in(txn, item).await?;
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
}

/// In `txn`: the envelopes of fresh `items` at their priorities, the
/// parts of large payloads written (see [`crate::queue::parts`]).
fn encode_in<T: Transaction, P: AsRef<[u8]>>(
    txn: &T,
    enqueued_at_ms: u64,
    items: &[(i64, P)],
) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
    items
        .iter()
        .map(|(priority, p)| {
            let value =
                crate::queue::parts::encode_fresh_in(txn, enqueued_at_ms, p.as_ref(), None)?;
            Ok((*priority, value))
        })
        .collect()
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

/// How one item is pushed: its delay (`None`: the queue's), retention
/// (`None`: the queue's) and dedup id (`None`: not deduplicated).
#[derive(Debug, Clone, Copy, Default)]
pub struct PushAsk<'a> {
    /// Invisible for this long, in ms.
    pub delay_ms: Option<u64>,
    /// Kept at most this long unless delivered, in ms.
    pub retention_ms: Option<u64>,
    /// Stored only if this id is not counting.
    pub dedup_id: Option<&'a [u8]>,
    /// Served fairly with the other keys of its priority (checked by the
    /// caller with [`crate::queue::fair::check_key`]).
    pub fair_key: Option<&'a str>,
}

/// The fairness terms of a priority push: each item's key (`None`, or
/// past the end of `keys`: a plain item at the next count of its
/// priority) and the queue's `fair_weights`.
#[derive(Debug, Clone, Copy)]
pub struct Fair<'a> {
    /// Each item's fairness key, in order.
    pub keys: &'a [Option<&'a str>],
    /// The queue's weights (a key not named has weight 1).
    pub weights: &'a BTreeMap<String, u32>,
}

/// No weights: what a push without fairness keys passes.
static NO_WEIGHTS: BTreeMap<String, u32> = BTreeMap::new();

impl Fair<'static> {
    /// A push without fairness keys.
    pub const NONE: Fair<'static> = Fair {
        keys: &[],
        weights: &NO_WEIGHTS,
    };
}

/// In `txn`: the envelope of a fresh item for `payload`, carrying its
/// fairness key (so a dead letter keeps its tenant).
fn encode_keyed_in<T: Transaction>(
    txn: &T,
    enqueued_at_ms: u64,
    payload: &[u8],
    expires_at_ms: Option<u64>,
    fair_key: Option<&str>,
) -> Result<Vec<u8>, StoreError> {
    let Some(key) = fair_key else {
        return crate::queue::parts::encode_fresh_in(txn, enqueued_at_ms, payload, expires_at_ms);
    };
    let mut item = crate::queue::parts::fresh_in(txn, enqueued_at_ms, payload, expires_at_ms)?;
    item.fair_key = Some(key.to_string());
    Ok(encode_item_value(&item))
}

/// What a push with a dedup id did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deduplicated {
    /// Stored; visible at once (`None`) or at that time.
    Pushed {
        /// When the item becomes visible, for a delayed push.
        visible_at_ms: Option<u64>,
        /// When its retention ends, if it has one.
        expires_at_ms: Option<u64>,
    },
    /// The id was stored within the dedup window: nothing was written.
    Duplicate,
}

/// Appends `(priority, envelope)` items to the priority queue `keys` in
/// `txn`; items of equal priority keep their order.
pub async fn append_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[(i64, Vec<u8>)],
) -> Result<(), StoreError> {
    append_expiring_in(txn, keys, values, &[]).await
}

/// [`append_in`], where `values[i]` expires at `expires[i]` (see
/// [`crate::queue::expiry`]; a missing or `None` one never does).
pub async fn append_expiring_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[(i64, Vec<u8>)],
    expires: &[Option<u64>],
) -> Result<(), StoreError> {
    append_fair_in(txn, keys, values, expires, Fair::NONE).await
}

/// [`append_expiring_in`], the items with a fairness key in `fair` placed
/// at their key's tag within their priority.
pub async fn append_fair_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[(i64, Vec<u8>)],
    expires: &[Option<u64>],
    fair: Fair<'_>,
) -> Result<(), StoreError> {
    let item_keys = item_keys_in(txn, keys, values, fair).await?;
    for (position, (key, (_, value))) in item_keys.iter().zip(values).enumerate() {
        txn.set(key, value)?;
        let expires_at_ms = expires.get(position).copied().flatten();
        crate::queue::expiry::index_in(txn, keys, key, expires_at_ms)?;
    }
    txn.atomic_add(&keys.depth(), values.len() as i64)
}

/// The keys of `values`, in order: each at the next count of its priority
/// (one snapshot read per priority of the batch, so pushes never
/// conflict), or, with a fairness key in `fair`, at its key's tag (see
/// [`crate::queue::fair::priority_tags_in`]; no read for plain items).
async fn item_keys_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[(i64, Vec<u8>)],
    fair: Fair<'_>,
) -> Result<Vec<Vec<u8>>, StoreError> {
    assert_eq!(keys.kind(), QueueKind::Priority, "a priority queue's keys");
    let fair_key = |position: usize| fair.keys.get(position).copied().flatten();
    let keyed: Vec<(i64, &str)> = values
        .iter()
        .enumerate()
        .filter_map(|(position, (priority, _))| Some((*priority, fair_key(position)?)))
        .collect();
    let mut tags = if keyed.is_empty() {
        Vec::new()
    } else {
        crate::queue::fair::priority_tags_in(txn, keys, &keyed, fair.weights).await?
    }
    .into_iter();
    let mut next_count: HashMap<i64, u64> = HashMap::new();
    for (position, (priority, _)) in values.iter().enumerate() {
        if fair_key(position).is_none() && !next_count.contains_key(priority) {
            let next = last_count(txn, keys, *priority)
                .await?
                .map_or(0, |count| count.saturating_add(1));
            next_count.insert(*priority, next);
        }
    }
    let mut rng = rand::rng();
    let mut item_keys = Vec::with_capacity(values.len());
    for (position, (priority, _)) in values.iter().enumerate() {
        let mut random = [0u8; RANDOM_LEN];
        rng.fill_bytes(&mut random);
        if fair_key(position).is_some() {
            let tag = tags.next().expect("a tag per keyed item");
            item_keys.push(keys.priority_item(*priority, tag, &random));
            continue;
        }
        let count = next_count
            .get_mut(priority)
            .expect("every priority of the batch has a count");
        item_keys.push(keys.priority_item(*priority, *count, &random));
        // Saturates only after 2^64 pushes at one priority; the random
        // suffix still keeps keys unique.
        *count = count.saturating_add(1);
    }
    Ok(item_keys)
}

/// The highest count of `priority`, read with snapshot so pushes never
/// conflict.
async fn last_count<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    priority: i64,
) -> Result<Option<u64>, StoreError> {
    let (begin, end) = keys.priority_range(priority);
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, 1).reverse().snapshot())
        .await?;
    Ok(rows
        .first()
        .and_then(|row| keys.priority_item_parts(&row.key))
        .map(|(_, count)| count))
}
