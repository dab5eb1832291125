//! Fairness keys: one noisy tenant never starves the others (issue #40).
//!
//! An item pushed with a fairness key `k` is placed in the FIFO queue's
//! own order by a *virtual tag* instead of its push count (start-time fair
//! queueing): `tag = max(last[k], V) + TAG_SCALE / w_k`, where `last[k]`
//! is the tag the key's previous item got (`meta/("fair", k)`), `V` is the
//! queue's virtual time (the index of its head item, or the `next_index`
//! mark when it is empty) and `w_k` the key's weight from the queue's
//! settings (`fair_weights`, default 1). The tag *is* the item key's index
//! (`items/(tag, random)`), so the queue's order is the fair order and
//! nothing that takes items changes: a direct pop, a fulfill round, a
//! leased or batch pop, on any daemon and after a restart, takes the first
//! key as always and so serves keys round-robin in proportion to their
//! weights, FIFO within a key. A key with a backlog runs ahead in virtual
//! time (its tags climb past `V`), a quiet key's next item lands at `V`
//! plus one step: right behind the head.
//!
//! Every read here is a snapshot read and every write an `atomic_max`, so
//! fair pushes, like all pushes, never conflict with pops or each other.
//! The price is precision under concurrency: two concurrent pushes of one
//! key may take the same tag (their items tie, ordered by the random
//! suffix, as two concurrent plain pushes share an index), and a push that
//! read a head another process just took computes from a slightly older
//! `V` (its item lands a little further forward). Pushes raise
//! `next_index` past every tag they give, so the mark stays the queue's
//! tail and the virtual time of an empty queue never goes back.
//!
//! Items without a fairness key keep today's path (push count, no extra
//! read) unless the queue's `fair` setting is on: then they share the key
//! `""` ([`DEFAULT_KEY`]) and are a tenant like any other. In a queue
//! without `fair`, an unkeyed item pushed after keyed ones lands behind
//! them (the mark is past their tags).
//!
//! A purge drops the items below the mark it read when it began: before
//! that, it raises the queue's floor of virtual time (`meta/("fair_floor",)`)
//! to the mark, so a fair push after it never lands below it
//! ([`floor_for_purge_in`]).
//!
//! What moves an item keeps or recomputes its tag: a nack, an expired
//! lease, a reaped result or a put-back return it to its own key (its
//! tag: at the front if the queue moved on, as a returned item is today);
//! a delayed push gets its tag when the timer reveals it (it arrives
//! then); a dead letter or a redrive gets one in the queue it moves to.
//!
//! A key's tag outlives its items until a pruning pass of the daemon's
//! sampler clears it ([`prune_after_in`]): tags follow the keys with a
//! backlog, not every key ever used.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use rand::RngCore;
use serde_json::Value;

use crate::keys::{QueueKeys, QueueKind, RANDOM_LEN};
use crate::store::{RangeRead, Read, StoreError, Transaction, decode_mark};

/// Virtual time one item of weight 1 takes: 720,720 is divisible by
/// every weight from 1 to 16 (and many more), so those keys advance by
/// exact steps and counts over a window are exact.
pub const TAG_SCALE: u64 = 720_720;
/// Largest weight of a fairness key.
pub const FAIR_WEIGHT_MAX: u32 = 1_000;
/// Most keys a queue's `fair_weights` may name.
pub const FAIR_WEIGHTS_MAX: usize = 100;
/// Most fairness keys' tags one backlog reading scans (see [`backlog_in`]).
pub const FAIR_KEYS_SCANNED_MAX: usize = 10_000;
/// Most keys a queue's stats show the backlog of (the largest).
pub const FAIR_BACKLOG_SHOWN_MAX: usize = 10;
/// Longest fairness key, in bytes.
pub const FAIR_KEY_LEN_MAX: usize = 128;
/// The key of items pushed without one to a queue whose `fair` is on.
pub const DEFAULT_KEY: &str = "";

/// Why a fairness key is refused, if it is: 1 to 128 bytes of
/// `A-Z a-z 0-9 . _ - : @ /` (a group key's alphabet, so an SQS
/// `MessageGroupId` that is a valid group key is a valid fairness key).
pub fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > FAIR_KEY_LEN_MAX {
        return Err(format!(
            "a fairness key is 1 to {FAIR_KEY_LEN_MAX} bytes long, got {}",
            key.len()
        ));
    }
    if let Some(bad) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@' | '/')))
    {
        return Err(format!(
            "fairness key {key:?} is invalid: it may hold only A-Z a-z 0-9 . _ - : @ /, not {bad:?}"
        ));
    }
    Ok(())
}

/// A `fair_weights` setting from its JSON: `null` (no weights) or an
/// object of at most [`FAIR_WEIGHTS_MAX`] valid keys, each with an
/// integer weight from 1 to [`FAIR_WEIGHT_MAX`].
pub fn parse_weights(value: &Value) -> Result<Option<BTreeMap<String, u32>>, String> {
    let object = match value {
        Value::Null => return Ok(None),
        Value::Object(object) => object,
        other => return Err(format!("must be an object of weights or null, got {other}")),
    };
    if object.len() > FAIR_WEIGHTS_MAX {
        return Err(format!(
            "names at most {FAIR_WEIGHTS_MAX} keys, got {}",
            object.len()
        ));
    }
    let mut weights = BTreeMap::new();
    for (key, weight) in object {
        check_key(key)?;
        // `3` or `3.0`: JSON Schema's "integer" takes both.
        let whole = |w: f64| (w.fract() == 0.0 && w >= 0.0).then_some(w as u64);
        let weight = weight
            .as_u64()
            .or_else(|| weight.as_f64().and_then(whole))
            .filter(|w| (1..=FAIR_WEIGHT_MAX as u64).contains(w))
            .ok_or_else(|| {
                format!("the weight of {key:?} must be an integer from 1 to {FAIR_WEIGHT_MAX}, got {weight}")
            })?;
        weights.insert(key.clone(), weight as u32);
    }
    Ok((!weights.is_empty()).then_some(weights))
}

/// The virtual time one item of a key of `weight` takes.
pub fn step(weight: u32) -> u64 {
    (TAG_SCALE / u64::from(weight.max(1))).max(1)
}

/// The weight of `key` under `weights` (1 when not named).
pub fn weight_of(weights: &BTreeMap<String, u32>, key: &str) -> u32 {
    weights.get(key).copied().unwrap_or(1)
}

/// The queue's first item, as virtual time sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    /// Its index (its tag, for an item with a fairness key).
    index: u64,
    /// Its fairness key.
    fair_key: Option<String>,
}

/// In `txn`, with a snapshot read: the queue's first item, if any.
async fn head_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<Option<Head>, StoreError> {
    let (begin, end) = keys.items_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, 1).snapshot())
        .await?;
    Ok(rows.first().and_then(|row| {
        Some(Head {
            index: keys.item_index(&row.key)?,
            fair_key: crate::envelope::decode_item(&row.value).and_then(|item| item.fair_key),
        })
    }))
}

/// In `txn`, with snapshot reads: the queue's `next_index` mark.
async fn mark_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<u64, StoreError> {
    Ok(decode_mark(
        txn.get(&keys.next_index(), Read::Snapshot)
            .await?
            .as_deref(),
    ))
}

/// In `txn`, with snapshot reads: the queue's virtual time, the index of
/// its first item, or (empty) its `next_index` mark, which is past every
/// tag given so far.
#[cfg(feature = "testing")]
pub async fn virtual_time_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<u64, StoreError> {
    match head_in(txn, keys).await? {
        Some(head) => Ok(head.index),
        None => mark_in(txn, keys).await,
    }
}

/// In `txn`, with a snapshot read: the last tag of fairness key `key` (0
/// for a key without one).
async fn tag_in<T: Transaction>(txn: &T, keys: &QueueKeys, key: &str) -> Result<u64, StoreError> {
    Ok(decode_mark(
        txn.get(&keys.fair_tag(key), Read::Snapshot)
            .await?
            .as_deref(),
    ))
}

/// In `txn`: the index each of `fair_keys` takes, in order: a virtual tag
/// for an item with a key, the next push count for one without (as a
/// plain push). Writes the keys' last tags and raises `next_index` past
/// every index given. Snapshot reads and `atomic_max` only: never conflicts.
pub async fn indexes_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    fair_keys: &[Option<&str>],
    weights: &BTreeMap<String, u32>,
) -> Result<Vec<u64>, StoreError> {
    let mut distinct: Vec<&str> = fair_keys.iter().flatten().copied().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let next_index = mark_in(txn, keys).await?;
    let floor = decode_mark(
        txn.get(&keys.fair_floor(), Read::Snapshot)
            .await?
            .as_deref(),
    );
    let virtual_time = head_in(txn, keys)
        .await?
        .map_or(next_index, |head| head.index)
        .max(floor);
    let reads = join_all(distinct.iter().map(|key| tag_in(txn, keys, key))).await;
    let mut last = BTreeMap::new();
    for (key, read) in distinct.into_iter().zip(reads) {
        last.insert(key, read?.max(virtual_time));
    }
    let mut indexes = Vec::with_capacity(fair_keys.len());
    let mut unkeyed = next_index;
    for key in fair_keys {
        match key {
            None => {
                indexes.push(unkeyed);
                unkeyed += 1;
            }
            Some(key) => {
                let tag = last.get_mut(key).expect("every key's tag was read");
                *tag = tag.saturating_add(step(weight_of(weights, key)));
                indexes.push(*tag);
            }
        }
    }
    for (key, tag) in &last {
        txn.atomic_max(&keys.fair_tag(key), *tag)?;
    }
    let mark = indexes
        .iter()
        .max()
        .map_or(next_index, |max| max.saturating_add(1));
    txn.atomic_max(&keys.next_index(), mark.max(next_index))?;
    Ok(indexes)
}

/// In `txn`, before a purge of the FIFO queue `keys` drops the items below
/// its `mark`: raises the queue's floor of virtual time to the mark when
/// the queue has fairness tags, so a fair push that starts after this
/// commit places its items past the mark (a tag from the head's virtual
/// time alone could fall below it, and the purge would drop an item
/// pushed after it began). A queue that never had a fair push reads one
/// empty range and writes nothing.
pub async fn floor_for_purge_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    mark: u64,
) -> Result<bool, StoreError> {
    let (begin, end) = keys.fair_tags_range();
    let tags = txn
        .get_range(RangeRead::new(&begin, &end, 1).snapshot())
        .await?;
    if tags.is_empty() {
        return Ok(false);
    }
    txn.atomic_max(&keys.fair_floor(), mark)?;
    Ok(true)
}

/// In `txn`: writes the encoded item envelopes `values` of the FIFO queue
/// `keys` at `indexes` (from [`indexes_in`]), `values[i]` expiring at
/// `expires[i]`, and counts them in the depth.
pub fn append_at_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[Vec<u8>],
    expires: &[Option<u64>],
    indexes: &[u64],
) -> Result<(), StoreError> {
    let mut rng = rand::rng();
    for (offset, (value, index)) in values.iter().zip(indexes).enumerate() {
        let mut random = [0u8; RANDOM_LEN];
        rng.fill_bytes(&mut random);
        let key = keys.item(*index, &random);
        txn.set(&key, value)?;
        let expires_at_ms = expires.get(offset).copied().flatten();
        crate::queue::expiry::index_in(txn, keys, &key, expires_at_ms)?;
    }
    txn.atomic_add(&keys.depth(), values.len() as i64)
}

/// One fairness key's backlog, as [`backlog_in`] estimates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBacklog {
    /// The key (`""`: items pushed without one to a `fair` queue).
    pub key: String,
    /// Items of the key the queue's head has not reached: its last tag's
    /// lead over the virtual time, in the key's steps.
    pub items: u64,
}

/// The `top` keys of the FIFO queue `keys` with the largest backlog under
/// `weights` (its `fair_weights` setting), largest first, in one snapshot
/// transaction (at most [`FAIR_KEYS_SCANNED_MAX`] keys scanned). For the
/// stats, the console and `crate::metrics::fair::publish`.
#[cfg(feature = "testing")]
pub async fn backlog<S: crate::store::Store>(
    store: &S,
    keys: &QueueKeys,
    weights: &BTreeMap<String, u32>,
    top: usize,
) -> Result<Vec<KeyBacklog>, crate::queue::QueueError> {
    let txn = store.begin()?;
    Ok(backlog_in(&txn, keys, weights, top, FAIR_KEYS_SCANNED_MAX).await?)
}

/// In `txn` (snapshot reads): the `top` keys with the largest backlog,
/// largest first, from at most `scan_max` of the queue's keys. Read from
/// the tags, not counted: no pop writes anything for it, so pops cost
/// what they cost without fairness. Exact while the key's items are
/// pushed in sequence and none is out of order (leased, returned); an
/// estimate otherwise. One known miss: a key whose next item ties the
/// head's tag (pushed in the same batch as the head's key, or at once
/// with it, onto an empty queue) counts one item short (a key of one
/// such item is not shown) until the head moves on: the tags alone
/// cannot tell a tied item from one already taken.
pub async fn backlog_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    weights: &BTreeMap<String, u32>,
    top: usize,
    scan_max: usize,
) -> Result<Vec<KeyBacklog>, StoreError> {
    let (begin, end) = keys.fair_tags_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, scan_max).snapshot())
        .await?;
    if rows.is_empty() {
        // A queue without fairness keys: one empty range read, no more.
        return Ok(Vec::new());
    }
    let head = head_in(txn, keys).await?;
    let virtual_time = match &head {
        Some(head) => head.index,
        None => mark_in(txn, keys).await?,
    };
    let head_key = head.and_then(|head| head.fair_key);
    let mut backlog: Vec<KeyBacklog> = rows
        .iter()
        .filter_map(|row| {
            let key = keys.fair_key_of(&row.key)?;
            let lead = decode_mark(Some(&row.value)).checked_sub(virtual_time)?;
            let step = step(weight_of(weights, &key));
            // The head's key has the head at the virtual time itself, one
            // item more than its lead's steps; another key's first item is
            // at most one step past it.
            let items = if head_key.as_deref() == Some(key.as_str()) {
                lead / step + 1
            } else {
                lead.div_ceil(step)
            };
            (items > 0).then_some(KeyBacklog { key, items })
        })
        .collect();
    backlog.sort_by(|a, b| b.items.cmp(&a.items).then_with(|| a.key.cmp(&b.key)));
    backlog.truncate(top);
    Ok(backlog)
}

/// Most fairness keys' tags one pruning pass reads (see [`prune_after_in`]).
pub const FAIR_PRUNE_SCAN_MAX: usize = 1_000;

/// What one pruning pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Tags cleared.
    pub cleared: usize,
    /// The last tag's key read when the scan was cut at its bound: the
    /// next pass continues after it. `None`: the scan reached the end.
    pub after: Option<Vec<u8>>,
}

/// In `txn`: [`prune_after_in`] from the first tag.
#[cfg(feature = "testing")]
pub async fn prune_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    scan_max: usize,
) -> Result<usize, StoreError> {
    Ok(prune_after_in(txn, keys, None, scan_max).await?.cleared)
}

/// In `txn`: clears the tags of keys the queue's head has passed, among
/// at most `scan_max` tags after the tag key `after` (from the first when
/// `None`). Such a tag says nothing a missing one does not (the key's
/// next item starts from the virtual time either way), so the tags kept
/// follow the keys with a backlog, not every key ever used. The daemon's
/// sampler calls it for each queue its rotation visits. A priority
/// queue's tags (per priority and key) are compared with their level's
/// virtual time (one read per level met).
///
/// The scan is a snapshot read, and only the tags it clears are read
/// again without snapshot: a push that raises one of them concurrently
/// conflicts (one of the two commits; the push's tag stays whole), while
/// pushes of the keys kept, which write their tags all the time, never
/// do. Writes nothing when nothing is stale. A tag below the head's index
/// means the key has no visible item (every item of a key sits at or
/// below its tag); the ones it may still have are under a lease, which
/// returns them at their own tags: the key's next push then starts from
/// the virtual time of that moment, as a key that never had a tag, so it
/// may land before the second of two returned items of the key (FIFO
/// within a key bends only there).
pub async fn prune_after_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    after: Option<&[u8]>,
    scan_max: usize,
) -> Result<Pruned, StoreError> {
    let (begin, end) = match keys.kind() {
        QueueKind::Fifo => keys.fair_tags_range(),
        QueueKind::Priority => keys.fair_priority_tags_range(),
    };
    let begin = after.map_or(begin, crate::store::key_after);
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, scan_max).snapshot())
        .await?;
    if rows.is_empty() {
        return Ok(Pruned::default());
    }
    let after = (rows.len() >= scan_max).then(|| rows[rows.len() - 1].key.clone());
    let mut stale: Vec<(&[u8], u64)> = Vec::new();
    let mut times = TimesRead::default();
    for row in &rows {
        let Some(virtual_time) = times.of(txn, keys, &row.key).await? else {
            continue;
        };
        if decode_mark(Some(&row.value)) < virtual_time {
            stale.push((row.key.as_slice(), virtual_time));
        }
    }
    let reads = join_all(
        stale
            .iter()
            .map(|(key, _)| txn.get(key, Read::Serializable)),
    )
    .await;
    let mut cleared = 0;
    for ((key, virtual_time), read) in stale.into_iter().zip(reads) {
        // Read again with a conflict: cleared only if still stale.
        if decode_mark(read?.as_deref()) < virtual_time {
            txn.clear(key)?;
            cleared += 1;
        }
    }
    Ok(Pruned { cleared, after })
}

/// The virtual times a pruning pass has read: the FIFO queue's, or each
/// priority level's.
#[derive(Default)]
struct TimesRead {
    queue: Option<u64>,
    levels: BTreeMap<i64, u64>,
}

impl TimesRead {
    /// The virtual time the tag at `tag_key` is compared with (read once
    /// per queue or level); `None` for a key that is no tag.
    async fn of<T: Transaction>(
        &mut self,
        txn: &T,
        keys: &QueueKeys,
        tag_key: &[u8],
    ) -> Result<Option<u64>, StoreError> {
        if keys.kind() == QueueKind::Fifo {
            if self.queue.is_none() {
                self.queue = Some(match head_in(txn, keys).await? {
                    Some(head) => head.index,
                    None => mark_in(txn, keys).await?,
                });
            }
            return Ok(self.queue);
        }
        let Some((priority, _)) = keys.fair_priority_tag_parts(tag_key) else {
            return Ok(None);
        };
        if let Some(time) = self.levels.get(&priority) {
            return Ok(Some(*time));
        }
        let time = level_time_in(txn, keys, priority).await?;
        self.levels.insert(priority, time);
        Ok(Some(time))
    }
}

/// In `txn`, with snapshot reads: the virtual time of the level
/// `priority` of the priority queue `keys`: the count of its first item,
/// or (an empty level) its mark, past every tag given at that level.
async fn level_time_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    priority: i64,
) -> Result<u64, StoreError> {
    let (begin, end) = keys.priority_range(priority);
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, 1).snapshot())
        .await?;
    if let Some((_, count)) = rows
        .first()
        .and_then(|row| keys.priority_item_parts(&row.key))
    {
        return Ok(count);
    }
    Ok(decode_mark(
        txn.get(&keys.fair_priority_mark(priority), Read::Snapshot)
            .await?
            .as_deref(),
    ))
}

/// In `txn`: the count each of `items` (a priority and a fairness key)
/// takes in the priority queue `keys`, in order: a virtual tag within its
/// level, `max(last[p, k], V_p) + TAG_SCALE / w_k`, where `last[p, k]` is
/// `meta/("pfair", p, k)` and `V_p` the level's virtual time (the count of
/// its first item, or its mark `meta/("pfair_mark", p)` when empty). The
/// count *is* the item key's (`items/(p, tag, random)`), so a `min` pop,
/// which takes the lowest level's first item, serves that level's keys
/// fairly, as a FIFO queue's pops do. Writes the tags and raises each
/// level's mark past them. Snapshot reads and `atomic_max` only: never
/// conflicts.
pub async fn priority_tags_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    items: &[(i64, &str)],
    weights: &BTreeMap<String, u32>,
) -> Result<Vec<u64>, StoreError> {
    let mut levels: Vec<i64> = items.iter().map(|(priority, _)| *priority).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut pairs: Vec<(i64, &str)> = items.to_vec();
    pairs.sort_unstable();
    pairs.dedup();
    let times = join_all(levels.iter().map(|p| level_time_in(txn, keys, *p))).await;
    let mut level_time = BTreeMap::new();
    for (priority, time) in levels.iter().zip(times) {
        level_time.insert(*priority, time?);
    }
    let reads = join_all(pairs.iter().map(|(priority, key)| async move {
        let value = txn
            .get(&keys.fair_priority_tag(*priority, key), Read::Snapshot)
            .await?;
        Ok::<u64, StoreError>(decode_mark(value.as_deref()))
    }))
    .await;
    let mut last = BTreeMap::new();
    for (pair, read) in pairs.into_iter().zip(reads) {
        last.insert(pair, read?.max(level_time[&pair.0]));
    }
    let mut tags = Vec::with_capacity(items.len());
    for pair in items {
        let tag = last.get_mut(pair).expect("every pair's tag was read");
        *tag = tag.saturating_add(step(weight_of(weights, pair.1)));
        tags.push(*tag);
    }
    let mut marks: BTreeMap<i64, u64> = BTreeMap::new();
    for ((priority, key), tag) in &last {
        txn.atomic_max(&keys.fair_priority_tag(*priority, key), *tag)?;
        let mark = marks.entry(*priority).or_default();
        *mark = (*mark).max(tag.saturating_add(1));
    }
    for (priority, mark) in marks {
        txn.atomic_max(&keys.fair_priority_mark(priority), mark)?;
    }
    Ok(tags)
}
