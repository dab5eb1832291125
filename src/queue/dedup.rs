//! Deduplicated pushes to a FIFO queue: an item pushed with a dedup id is
//! stored only if no push with the same id was stored within the queue's
//! dedup window.
//!
//! The id's key (`meta/("dedup", id)`, valued with when it stops counting)
//! is read *without* snapshot and written in the push's own transaction, so
//! of two concurrent pushes with one id the resolver lets exactly one
//! commit first; the other conflicts, retries, reads the key and answers
//! "duplicate". That holds across daemons: it is the store's guarantee.
//!
//! Cleanup: each stored id also writes an entry in the store-wide due index
//! at its expiry (`DueWhat::Dedup`), so the coordinator's timer clears
//! expired ids as it clears expired leases ([`expire_in`]): its work
//! follows what expires, bounded per transaction like the rest of the due
//! index. A push that finds an expired id not yet swept takes it over and
//! clears the old due entry itself.

use std::collections::BTreeSet;

use crate::envelope::{HeldItem, ItemValue, encode_held, encode_item_value, now_ms};
use crate::keys::{DueWhat, QueueKeys};
use crate::queue::settings::{Defaults, read_in};
use crate::queue::{QueueError, append_expiring_in, check_batch, hold_in};
use crate::store::Read;
use crate::store::{RetryPolicy, Store, StoreError, Transaction, transact};

/// Longest dedup id, in bytes.
pub const DEDUP_ID_LEN_MAX: usize = 128;

/// One item of a push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushItem {
    /// The bytes.
    pub payload: Vec<u8>,
    /// Stored only if this id was not stored within the dedup window.
    pub dedup_id: Option<Vec<u8>>,
    /// Its message group (see [`crate::queue::groups`]); checked by the caller.
    pub group: Option<String>,
    /// Its fairness key (see [`crate::queue::fair`]); checked by the
    /// caller with [`crate::queue::fair::check_key`].
    pub fair_key: Option<String>,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// Per item, in order: true when it was a duplicate and not stored.
    pub duplicate: Vec<bool>,
    /// When the stored items become visible, for a delayed push.
    pub visible_at_ms: Option<u64>,
    /// When the stored items' retention ends, if they have one.
    pub expires_at_ms: Option<u64>,
}

impl Pushed {
    /// How many items were stored.
    pub fn stored(&self) -> usize {
        self.duplicate.iter().filter(|d| !**d).count()
    }
}

/// Why a dedup id is refused, if it is.
pub fn check_id(id: &[u8]) -> Result<(), String> {
    if id.is_empty() || id.len() > DEDUP_ID_LEN_MAX {
        return Err(format!(
            "a dedup id is 1 to {DEDUP_ID_LEN_MAX} bytes long, got {}",
            id.len()
        ));
    }
    Ok(())
}

/// Pushes `items` to the FIFO queue `keys` in one commit, all or none:
/// after `delay_ms`, or (`None`) after the queue's delivery delay; items
/// whose dedup id is still counting are left out and reported.
#[cfg(feature = "testing")]
pub async fn push<S: Store>(
    store: &S,
    keys: &QueueKeys,
    items: &[PushItem],
    delay_ms: Option<u64>,
    defaults: &Defaults,
) -> Result<Pushed, QueueError> {
    push_with(store, keys, items, delay_ms, None, defaults).await
}

/// Pushes `items` to the FIFO queue `keys` in one commit, all or none:
/// after `delay_ms`, or (`None`) after the queue's delivery delay; items
/// whose dedup id is still counting are left out and reported. They are
/// kept for `retention_ms` (`None`: the queue's `retention_ms` setting,
/// if any; see [`crate::queue::expiry`]).
#[cfg(feature = "testing")]
pub async fn push_with<S: Store>(
    store: &S,
    keys: &QueueKeys,
    items: &[PushItem],
    delay_ms: Option<u64>,
    retention_ms: Option<u64>,
    defaults: &Defaults,
) -> Result<Pushed, QueueError> {
    let terms = PushTerms {
        delay_ms,
        retention_ms,
    };
    push_fair(store, keys, items, terms, defaults).await
}

/// What a push asks beyond its items (see [`push_fair`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PushTerms {
    /// Visible after this many ms; `None`: the queue's delivery delay.
    pub delay_ms: Option<u64>,
    /// Kept this long unless delivered; `None`: the queue's `retention_ms`.
    pub retention_ms: Option<u64>,
}

/// Pushes `items` to the FIFO queue `keys` in one commit, all or none,
/// as `terms` ask (items whose dedup id is still counting are left out
/// and reported), each under its fairness key ([`PushItem::fair_key`]):
/// served fairly between keys, in proportion to the queue's
/// `fair_weights`. Items without a key take the queue's default key
/// when its `fair` setting is on, else push order (see [`crate::queue::fair`]).
pub async fn push_fair<S: Store>(
    store: &S,
    keys: &QueueKeys,
    items: &[PushItem],
    terms: PushTerms,
    defaults: &Defaults,
) -> Result<Pushed, QueueError> {
    let PushTerms {
        delay_ms,
        retention_ms,
    } = terms;
    check_batch(items.iter().map(|item| item.payload.as_slice()))?;
    assert_checked(items);
    // Retried on conflict: a conflict means a racing push stored one of our
    // ids first, and the retry reads it. Not retried when the outcome is
    // unknown, like every push (fresh random keys could duplicate items).
    let pushed = transact(store, RetryPolicy::default(), |txn| async move {
        let now = now_ms();
        let settings = read_in(&txn, keys)
            .await
            .map_err(crate::queue::corrupt_as_store)?
            .effective(keys.name(), defaults);
        let duplicate = claim_ids_in(&txn, keys, items, now, settings.dedup_window_ms).await?;
        let stored: Vec<ToStore<'_>> = items
            .iter()
            .zip(&duplicate)
            .filter(|(_, duplicate)| !**duplicate)
            .map(|(item, _)| ToStore {
                item,
                fair_key: fair_key_of(item, settings.fair),
            })
            .collect();
        let delay_ms = delay_ms.unwrap_or(settings.delivery_delay_ms);
        let expires_at_ms =
            crate::queue::expiry::expires_at(now, retention_ms.or(settings.retention_ms));
        let terms = StoreTerms {
            now,
            delay_ms,
            expires_at_ms,
            weights: &settings.fair_weights,
        };
        let visible_at_ms = store_in(&txn, keys, &stored, terms).await?;
        Ok(Pushed {
            duplicate,
            visible_at_ms,
            expires_at_ms: expires_at_ms.filter(|_| !stored.is_empty()),
        })
    })
    .await?;
    // Counted once the commit returned, as every other push is (duplicates
    // wrote nothing, so they are not counted).
    crate::metrics::pushed(keys, pushed.stored());
    Ok(pushed)
}

/// The fairness key of `item`: its own, else the default key in a
/// `fair` queue, else none.
fn fair_key_of(item: &PushItem, fair: bool) -> Option<&str> {
    match item.fair_key.as_deref() {
        Some(key) => Some(key),
        None => fair.then_some(crate::queue::fair::DEFAULT_KEY),
    }
}

/// An item to store (not a duplicate) and its fairness key.
struct ToStore<'a> {
    item: &'a PushItem,
    fair_key: Option<&'a str>,
}

/// Dedup ids, group keys and fairness keys come checked: a front end refuses bad ones
/// with its own error before anything is written.
fn assert_checked(items: &[PushItem]) {
    for item in items {
        if let Some(id) = &item.dedup_id {
            assert!(check_id(id).is_ok(), "dedup ids are checked by the caller");
        }
        if let Some(group) = &item.group {
            assert!(
                crate::queue::groups::check_key(group).is_ok(),
                "group keys are checked by the caller"
            );
        }
        if let Some(key) = &item.fair_key {
            assert!(
                crate::queue::fair::check_key(key).is_ok(),
                "fairness keys are checked by the caller"
            );
        }
    }
}

/// In `txn`: claims each item's dedup id; true where the item is a
/// duplicate (its id still counts, or an earlier item of the batch has it).
async fn claim_ids_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &[PushItem],
    now: u64,
    window_ms: u64,
) -> Result<Vec<bool>, StoreError> {
    let mut duplicate = Vec::with_capacity(items.len());
    let mut seen = BTreeSet::new();
    for item in items {
        let fresh = match &item.dedup_id {
            None => true,
            Some(id) => {
                seen.insert(id.as_slice()) && claim_in(txn, keys, id, now, window_ms).await?
            }
        };
        duplicate.push(!fresh);
    }
    Ok(duplicate)
}

/// When and for how long a push's items are stored, and the queue's
/// fairness weights.
#[derive(Clone, Copy)]
struct StoreTerms<'a> {
    now: u64,
    delay_ms: u64,
    expires_at_ms: Option<u64>,
    weights: &'a std::collections::BTreeMap<String, u32>,
}

/// In `txn`: stores the items that are not duplicates, behind their
/// groups, visible now, or held until their delay ends; when they become
/// visible, if not now.
async fn store_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    stored: &[ToStore<'_>],
    terms: StoreTerms<'_>,
) -> Result<Option<u64>, StoreError> {
    let StoreTerms {
        now,
        delay_ms,
        expires_at_ms,
        weights,
    } = terms;
    // Empty (no allocation) without a retention: nothing is indexed.
    let expires = match expires_at_ms {
        Some(_) => vec![expires_at_ms; stored.len()],
        None => Vec::new(),
    };
    let fair = stored.iter().any(|s| s.fair_key.is_some());
    if stored.is_empty() {
        Ok(None)
    } else if stored.iter().any(|s| s.item.group.is_some()) {
        // Only a push naming a group takes this path: ungrouped pushes
        // read and write what they always did.
        let new: Vec<crate::queue::groups::NewItem<'_>> = stored
            .iter()
            .map(|s| crate::queue::groups::NewItem {
                group: s.item.group.as_deref(),
                payload: &s.item.payload,
                expires_at_ms,
                fair_key: s.fair_key,
            })
            .collect();
        Ok(crate::queue::groups::push_in(txn, keys, &new, now, delay_ms, weights).await?)
    } else if delay_ms == 0 && !fair {
        let values = stored
            .iter()
            .map(|s| crate::queue::parts::encode_fresh_in(txn, now, &s.item.payload, expires_at_ms))
            .collect::<Result<Vec<_>, _>>()?;
        append_expiring_in(txn, keys, &values, &expires).await?;
        Ok(None)
    } else if delay_ms == 0 {
        let values = stored
            .iter()
            .map(|s| {
                Ok(encode_item_value(&fresh_fair_in(
                    txn,
                    now,
                    s,
                    expires_at_ms,
                )?))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let fair_keys: Vec<Option<&str>> = stored.iter().map(|s| s.fair_key).collect();
        let indexes = crate::queue::fair::indexes_in(txn, keys, &fair_keys, weights).await?;
        crate::queue::fair::append_at_in(txn, keys, &values, &expires, &indexes)?;
        Ok(None)
    } else {
        // A delayed item keeps its fairness key in its envelope: the
        // timer gives it its tag when it reveals it (it arrives then).
        let values = stored
            .iter()
            .map(|s| {
                Ok(encode_held(&HeldItem {
                    item_key: Vec::new(),
                    item: fresh_fair_in(txn, now, s, expires_at_ms)?,
                }))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let at = now.saturating_add(delay_ms);
        hold_in(txn, keys, &values, at, &expires)?;
        Ok(Some(at))
    }
}

/// In `txn`: a fresh item's envelope for `stored`, with its fairness key.
fn fresh_fair_in<T: Transaction>(
    txn: &T,
    now: u64,
    stored: &ToStore<'_>,
    expires_at_ms: Option<u64>,
) -> Result<ItemValue, StoreError> {
    let mut item = crate::queue::parts::fresh_in(txn, now, &stored.item.payload, expires_at_ms)?;
    item.fair_key = stored.fair_key.map(str::to_string);
    Ok(item)
}

fn decode_expiry(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
}

/// In `txn`: true (and the id now counts until `now_ms + window_ms`) when
/// `id` was not counting; false when it was (a duplicate).
pub async fn claim_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    id: &[u8],
    now_ms: u64,
    window_ms: u64,
) -> Result<bool, StoreError> {
    let key = keys.dedup(id);
    // Not snapshot: this read is what makes one of two racing pushes lose.
    let previous = txn.get(&key, Read::Serializable).await?;
    if let Some(expires_at_ms) = previous.as_deref().and_then(decode_expiry) {
        if expires_at_ms > now_ms {
            return Ok(false);
        }
        // Expired, not yet swept: ours now, and its old entry goes.
        txn.clear(&keys.due(expires_at_ms, DueWhat::Dedup, id))?;
    }
    let expires_at_ms = now_ms.saturating_add(window_ms.max(1));
    txn.set(&key, &expires_at_ms.to_be_bytes())?;
    txn.set(&keys.due(expires_at_ms, DueWhat::Dedup, id), &[])?;
    Ok(true)
}

/// In `txn` (the timer's, which has cleared the due entry): clears the id
/// `id` if it still expires at `due_ms` (a later push may have renewed it,
/// with a due entry of its own).
pub async fn expire_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    id: &[u8],
    due_ms: u64,
) -> Result<(), StoreError> {
    let key = keys.dedup(id);
    // Not snapshot: a push renewing the id conflicts with this clear.
    let current = txn.get(&key, Read::Serializable).await?;
    if current.as_deref().and_then(decode_expiry) == Some(due_ms) {
        txn.clear(&key)?;
    }
    Ok(())
}

/// How many dedup ids `keys` holds (expired ones not yet swept included);
/// for tests, bounded at `limit`.
#[cfg(feature = "testing")]
pub async fn ids_held<S: Store>(
    store: &S,
    keys: &QueueKeys,
    limit: usize,
) -> Result<usize, QueueError> {
    let (begin, end) = keys.dedup_range();
    let txn = store.begin()?;
    let rows = txn
        .get_range(crate::store::RangeRead::new(&begin, &end, limit).snapshot())
        .await?;
    Ok(rows.len())
}
