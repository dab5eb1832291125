//! The store-wide due index and its timer. Every lease, delayed item,
//! dedup expiry, group hand-off and reap appointment of every queue is an
//! entry keyed by the time it is due (the key layout is
//! [`crate::keys::due_entry`], in `keys/due_index.rs`). Read in this order:
//!
//! 1. this module: a sweep ([`sweep_until`]) consumes what is
//!    due, in waves ([`wave`](mod@wave)) of disjoint stretches committed
//!    together, counted by a tally (`tally.rs`);
//! 2. [`timer`]: one look of the coordinator's timer, a sweep then the
//!    reaps that came due ([`crate::staging::reap`]); the coordinator's loop
//!    only decides when to run it;
//! 3. [`migrate`]: the one-time move of leases and delayed items from the
//!    layout before the due index.
//!
//! Who writes entries: a leased pop ([`crate::lease::lease_in`]), a nack
//! with a delay and a delayed push, a dedup push ([`crate::queue::dedup`]),
//! a group head popped without a lease ([`crate::queue::groups`]), a stored
//! request (a reap appointment).
//!
//! Because entries are keyed by due time first, one range read from the
//! index's start finds all that is due in every queue, and the first key says when to look next. A sweep's work is the
//! entries due, never the number of queues: a queue with nothing due is
//! not read at all.
//!
//! Why the entries themselves are keyed by due time (rather than a second
//! index key next to a per-queue lease): a lease is then one row plus its
//! receipt, the timer consumes exactly the row every settle reads (so ack
//! against expiry keeps exactly one winner with no extra key to keep in
//! step), and nothing can leave an index entry behind its item.

pub mod migrate;
mod tally;
pub(crate) mod timer;
mod wave;

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::envelope::{HeldItem, decode_held, encode_item_value};
use crate::keys::{
    DueEntry, DueWhat, QueueKeys, QueueKind, QueueName, due_entry, due_range, due_until,
};
use crate::metrics;
use crate::queue::{QueueError, append_expiring_in, expired, expiry};
use crate::store::{KeyValue, RangeRead, Store, StoreError, Transaction, cut_at_bytes};

use crate::lease::DeliveryPolicy;
use crate::lease::settle::{Returned, return_held};
use futures_util::future::join_all;
use tally::Tally;
use wave::{Wave, start_wave};

/// Most due entries one transaction consumes.
pub const DUE_BATCH_MAX: usize = 256;
/// Most key and value bytes one transaction consumes (a commit should stay
/// near 10 MB at most, and every moved item is written once more). At
/// least one row is always taken, and a row is at most 100 kB.
pub const DUE_BATCH_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most transactions one sweep runs (the rest waits for the next sweep,
/// which comes at once when work was left).
const DUE_TRANSACTIONS_MAX: usize = 64;
/// Most transactions one wave of a sweep commits together (they share
/// the store's fsyncs; more would only lengthen the wave).
const DUE_CHUNKS_MAX: usize = 16;
/// Most key and value bytes one wave reads to plan its chunks (a sweep
/// reads at most `DUE_TRANSACTIONS_MAX * DUE_BATCH_MAX` rows in all).
const DUE_WAVE_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Most queues one sweep reaps (the others' appointments stay due, and the
/// sweep says `more`: the next comes at once).
pub const REAP_QUEUES_MAX: usize = 256;
/// Most queues remembered as changed by the timer for the sampler.
const TOUCHED_MAX: usize = 1_024;
/// Lateness buckets: [`LATENESS_FINE_MS`] wide up to
/// [`LATENESS_FINE_UNTIL_MS`], then [`LATENESS_COARSE_MS`] wide; the last
/// counts everything later (a backlog's lateness is then still told apart
/// from a few seconds').
const LATENESS_FINE_MS: u64 = 5;
const LATENESS_FINE_UNTIL_MS: u64 = 10_000;
const LATENESS_COARSE_MS: u64 = 1_000;
const LATENESS_FINE_BUCKETS: usize = (LATENESS_FINE_UNTIL_MS / LATENESS_FINE_MS) as usize;
const LATENESS_BUCKETS: usize = LATENESS_FINE_BUCKETS + 600 + 1;

fn lateness_bucket(lateness_ms: u64) -> usize {
    let bucket = if lateness_ms < LATENESS_FINE_UNTIL_MS {
        (lateness_ms / LATENESS_FINE_MS) as usize
    } else {
        LATENESS_FINE_BUCKETS
            + ((lateness_ms - LATENESS_FINE_UNTIL_MS) / LATENESS_COARSE_MS) as usize
    };
    bucket.min(LATENESS_BUCKETS - 1)
}

/// The upper edge of `bucket`, in ms.
fn lateness_bucket_edge_ms(bucket: usize) -> u64 {
    if bucket < LATENESS_FINE_BUCKETS {
        (bucket as u64 + 1) * LATENESS_FINE_MS
    } else {
        LATENESS_FINE_UNTIL_MS + (bucket - LATENESS_FINE_BUCKETS + 1) as u64 * LATENESS_COARSE_MS
    }
}

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// Due entries read (consumed or, for reap appointments, handed on).
    pub rows_read: usize,
    /// Distinct queues that had something due.
    pub queues_visited: usize,
    /// Expired leases whose item went back to its queue, by queue.
    pub redelivered: BTreeMap<(QueueKind, QueueName), usize>,
    /// Expired leases whose item went to the dead-letter queue, by queue.
    pub dead_lettered: BTreeMap<(QueueKind, QueueName), usize>,
    /// Items dropped because their retention ended (visible, waiting,
    /// delayed, or leased past it), by queue.
    pub expired: BTreeMap<(QueueKind, QueueName), usize>,
    /// Delayed items made visible.
    pub revealed: usize,
    /// Queues whose stored requests and results were due a look.
    pub reap_queues: Vec<(QueueKind, QueueName, Vec<Vec<u8>>)>,
    /// When the next entry after those swept is due; `None`: nothing is.
    pub next_due_ms: Option<u64>,
    /// True when a bound stopped the sweep with due work left.
    pub more: bool,
}

/// Counters of the timer's work in this process (for tests and the bench;
/// Prometheus gets the same through [`crate::metrics`]).
#[derive(Debug, Default)]
pub struct DueStats {
    /// Sweeps run.
    pub sweeps: AtomicU64,
    /// Due entries read.
    pub rows_read: AtomicU64,
    /// Queues visited because something of theirs was due.
    pub queues_visited: AtomicU64,
    /// Leases and delayed items consumed.
    pub consumed: AtomicU64,
    /// Latest lateness seen (commit time minus due time), in ms.
    pub lateness_max_ms: AtomicU64,
    lateness: Vec<AtomicU64>,
}

impl DueStats {
    fn record_lateness(&self, lateness_ms: u64) {
        self.lateness_max_ms
            .fetch_max(lateness_ms, Ordering::Relaxed);
        self.lateness[lateness_bucket(lateness_ms)].fetch_add(1, Ordering::Relaxed);
        ::metrics::histogram!(metrics::DUE_LATENESS).record(lateness_ms as f64 / 1_000.0);
    }

    /// The lateness at `fraction` (0..=1) of the entries consumed so far,
    /// to its bucket's upper edge, in ms.
    pub fn lateness_quantile_ms(&self, fraction: f64) -> u64 {
        let counts: Vec<u64> = self
            .lateness
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((total as f64) * fraction).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return lateness_bucket_edge_ms(bucket);
            }
        }
        unreachable!("the rank is at most the total")
    }
}

/// This process's timer counters.
pub fn stats() -> &'static DueStats {
    static STATS: OnceLock<DueStats> = OnceLock::new();
    STATS.get_or_init(|| DueStats {
        lateness: (0..LATENESS_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        ..DueStats::default()
    })
}

fn touched_set() -> &'static Mutex<BTreeSet<(QueueKind, QueueName)>> {
    static TOUCHED: OnceLock<Mutex<BTreeSet<(QueueKind, QueueName)>>> = OnceLock::new();
    TOUCHED.get_or_init(Mutex::default)
}

/// Notes that the timer changed `queue`'s state, so the sampler looks at
/// it soon (at most [`TOUCHED_MAX`] are remembered; the rest wait for the
/// sampler's rotation).
fn touch(queue: (QueueKind, QueueName)) {
    let mut touched = touched_set().lock();
    if touched.len() < TOUCHED_MAX {
        touched.insert(queue);
    }
}

/// Takes up to `max` of the queues the timer changed since the last call.
pub fn take_touched(max: usize) -> Vec<(QueueKind, QueueName)> {
    let mut touched = touched_set().lock();
    let mut taken = Vec::new();
    while taken.len() < max {
        let Some(queue) = touched.pop_first() else {
            break;
        };
        taken.push(queue);
    }
    taken
}

/// Consumes every lease and delayed item due at `now_ms` in every queue,
/// in bounded transactions, and collects the queues whose reap
/// appointments are due (the caller reaps them: see
/// [`crate::staging::reap::reap_due`]).
///
/// Each wave plans up to [`DUE_CHUNKS_MAX`] disjoint stretches of the
/// index from one snapshot read and consumes each in its own transaction,
/// all committed at once: the store pays one fsync for the group, so the
/// timer keeps up with what comes due instead of paying an fsync per
/// [`DUE_BATCH_MAX`] entries. Each chunk runs in a task of its own, and
/// the next wave (the stretches after this one) starts before this one is
/// awaited, so the chunks' reads run on every core while the store's
/// committer writes, rather than by turns on one task. A stretch
/// that lost a race (or found more than it planned) is read again from
/// its start once the waves under way have committed, or by the next
/// sweep.
#[cfg(feature = "testing")]
pub async fn sweep<S: Store>(
    store: &S,
    policy: &DeliveryPolicy,
    now_ms: u64,
) -> Result<Sweep, QueueError> {
    sweep_until(store, policy, now_ms, u64::MAX).await
}

/// Consumes what is due by `now_ms` (how: `sweep`'s comment, which is this
/// without a horizon, kept for tests); [`Sweep::next_due_ms`] looks no further than
/// `horizon_ms`: `None` then also means "nothing due by the horizon".
/// The timer looks again at its horizon anyway, and acked leases leave
/// their rows' tombstones ahead of the live ones: the look for the next
/// due entry stepped over every lease acked since the last sweep (profiled
/// at 3% of a leased pop's CPU, `docs/profile.md`).
pub async fn sweep_until<S: Store>(
    store: &S,
    policy: &DeliveryPolicy,
    now_ms: u64,
    horizon_ms: u64,
) -> Result<Sweep, QueueError> {
    let stats = stats();
    stats.sweeps.fetch_add(1, Ordering::Relaxed);
    let policy = Arc::new(policy.clone());
    let mut tally = Tally::default();
    let (mut cursor, end) = due_until(now_ms);
    let mut finished = false;
    let mut transactions = 0;
    let pipeline = Pipeline {
        store,
        policy: &policy,
        now_ms,
        end: &end,
    };
    while transactions < DUE_TRANSACTIONS_MAX {
        let chunks_max = DUE_CHUNKS_MAX.min(DUE_TRANSACTIONS_MAX - transactions);
        let Some(wave) = start_wave(store, &policy, now_ms, &cursor, &end, chunks_max).await?
        else {
            finished = true;
            break;
        };
        let (drained, resume) = pipeline
            .run(wave, &mut transactions, &mut tally, &mut cursor)
            .await?;
        // What the committed chunks consumed is gone; what they left (reap
        // appointments, malformed rows) is behind the cursor. A chunk to
        // read again pulls the cursor back to it.
        match resume {
            Some(from) => cursor = from,
            None if drained => {
                finished = true;
                break;
            }
            None => break,
        }
    }
    let mut sweep = tally.into_sweep();
    stats
        .queues_visited
        .fetch_add(sweep.queues_visited as u64, Ordering::Relaxed);
    sweep.more |= !finished;
    sweep.next_due_ms = if sweep.more {
        Some(now_ms)
    } else {
        first_due_from(store, &cursor, horizon_ms).await?
    };
    Ok(sweep)
}

/// What the waves of one sweep share.
struct Pipeline<'a, S: Store> {
    store: &'a S,
    policy: &'a Arc<DeliveryPolicy>,
    now_ms: u64,
    end: &'a [u8],
}

impl<S: Store> Pipeline<'_, S> {
    /// Runs waves one after another from `wave` until the rows run out or
    /// the sweep's transactions do; each next wave starts before the one
    /// before it is awaited. Returns whether the rows ran out, and the
    /// earliest stretch to read again, if any (where the next pipeline
    /// starts); `cursor` moves past the last wave when none is.
    async fn run(
        &self,
        mut wave: Wave,
        transactions: &mut usize,
        tally: &mut Tally,
        cursor: &mut Vec<u8>,
    ) -> Result<(bool, Option<Vec<u8>>), QueueError> {
        let mut resume: Option<Vec<u8>> = None;
        loop {
            *transactions += wave.chunks();
            let full = wave.full;
            let follow = full && *transactions < DUE_TRANSACTIONS_MAX;
            let after_plan = wave.after_plan.clone();
            let chunks_max = DUE_CHUNKS_MAX.min(DUE_TRANSACTIONS_MAX - *transactions);
            // The next wave starts before this one is awaited.
            let next = if follow {
                let (store, policy) = (self.store, self.policy);
                start_wave(
                    store,
                    policy,
                    self.now_ms,
                    &after_plan,
                    self.end,
                    chunks_max,
                )
                .await
            } else {
                Ok(None)
            };
            let outcomes = wave.finish().await;
            if let Err(error) = tally.record(outcomes, &mut resume) {
                // The next wave's chunks run on their own: awaited before
                // the sweep fails, so the sweep ends with nothing in flight
                // and the sampler hears of the queues they changed (the
                // sweep's own counts are lost with the error, as a failed
                // wave's were before).
                if let Ok(Some(next)) = next {
                    let _ = tally.record(next.finish().await, &mut resume);
                }
                return Err(error);
            }
            match next? {
                Some(next) => wave = next,
                None => {
                    *cursor = after_plan;
                    // Out of rows, not out of transactions: nothing due is
                    // left past the cursor.
                    return Ok((follow || !full, resume));
                }
            }
        }
    }
}

/// What one transaction of a sweep consumed.
#[derive(Default)]
struct Consumed {
    due_ms: Vec<u64>,
    redelivered: BTreeMap<(QueueKind, QueueName), usize>,
    dead_lettered: BTreeMap<(QueueKind, QueueName), usize>,
    expired: BTreeMap<(QueueKind, QueueName), usize>,
    revealed: usize,
    queues: BTreeSet<(QueueKind, QueueName)>,
}

async fn consume<T: Transaction>(
    txn: &T,
    policy: &DeliveryPolicy,
    now_ms: u64,
    rows: &[KeyValue],
    reap: &mut BTreeMap<(QueueKind, QueueName), BTreeSet<Vec<u8>>>,
) -> Result<Consumed, QueueError> {
    let mut pass = Consumed::default();
    let mut to_tail: BTreeMap<(QueueKind, QueueName), Tail> = BTreeMap::new();
    let mut expired_here: BTreeSet<Vec<u8>> = BTreeSet::new();
    for KeyValue { key, value } in rows {
        let Some(entry) = due_entry(key) else {
            tracing::warn!(?key, "clearing a malformed due-index key");
            txn.clear(key)?;
            continue;
        };
        if expired_here.contains(key) {
            // A delayed item this transaction already dropped by its
            // expiry entry (due earlier): this row's value is stale.
            continue;
        }
        let queue = (entry.kind, entry.queue.clone());
        let keys = QueueKeys::of_kind(entry.kind, &entry.queue);
        if entry.what == DueWhat::Reap {
            // Bounded by the chunk's rows; the sweep's bound is applied
            // when the chunks are tallied.
            reap.entry(queue).or_default().insert(key.clone());
            continue;
        }
        // Consumes the entry: an ack, nack or extend of the same lease
        // reads it without snapshot, so one of the two conflicts.
        txn.add_read_conflict_key(key)?;
        txn.clear(key)?;
        let due = Due {
            keys: &keys,
            key,
            queue: &queue,
            now_ms,
        };
        if matches!(
            entry.what,
            DueWhat::Dedup | DueWhat::Group | DueWhat::Expire
        ) {
            itemless_due_in(txn, &due, entry, &mut pass, &mut expired_here).await?;
            continue;
        }
        let held = decode_held(value);
        if entry.what == DueWhat::Lease {
            // Whatever its value holds, the lease ends here: its counts and
            // its forwarding row go with it (a count left behind would keep
            // the queue's delete waiting for a lease that is gone).
            let fair_key = held.as_ref().and_then(|held| held.item.fair_key.as_deref());
            crate::lease::end_lease_in(txn, &keys, fair_key, key)?;
            crate::lease::clear_receipt_row_in(txn, &keys, &entry.id, entry.due_ms)?;
        }
        let Some(held) = held else {
            tracing::warn!(queue = %entry.queue, ?key, "clearing a malformed due entry");
            continue;
        };
        pass.due_ms.push(entry.due_ms);
        match entry.what {
            DueWhat::Lease => {
                let max_deliveries = policy.max_deliveries(&entry.queue);
                lease_ended_in(txn, &keys, &queue, held, max_deliveries, now_ms, &mut pass).await?;
            }
            DueWhat::Delayed => reveal_in(txn, &due, held, &mut pass, &mut to_tail).await?,
            DueWhat::Reap | DueWhat::Dedup | DueWhat::Group | DueWhat::Expire => {
                unreachable!("handed on above")
            }
        }
        pass.queues.insert(queue);
    }
    append_tails_in(txn, &to_tail).await?;
    Ok(pass)
}

/// A dedup, group or expiry entry came due: its work is named by its key,
/// not by a held item. An expired item's location is noted in
/// `expired_here` (its delayed row, later in the chunk, is then stale).
async fn itemless_due_in<T: Transaction>(
    txn: &T,
    due: &Due<'_>,
    entry: DueEntry,
    pass: &mut Consumed,
    expired_here: &mut BTreeSet<Vec<u8>>,
) -> Result<(), QueueError> {
    let (keys, now_ms) = (due.keys, due.now_ms);
    match entry.what {
        DueWhat::Dedup => {
            crate::queue::dedup::expire_in(txn, keys, &entry.id, entry.due_ms).await?;
        }
        DueWhat::Group => {
            crate::queue::groups::succession_due_in(txn, keys, &entry.id, entry.due_ms, now_ms)
                .await?;
        }
        DueWhat::Expire => {
            if expired::expire_in(txn, keys, &entry.id, entry.due_ms, now_ms).await? {
                expired_here.insert(entry.id);
                *pass.expired.entry(due.queue.clone()).or_default() += 1;
                pass.queues.insert(due.queue.clone());
            }
        }
        DueWhat::Lease | DueWhat::Delayed | DueWhat::Reap => {
            unreachable!("entries with an item, and reaps, are handled by the caller")
        }
    }
    Ok(())
}

/// A lease's entry came due: its item goes back to its queue, to a
/// dead-letter queue, or (past its retention) away.
async fn lease_ended_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    queue: &(QueueKind, QueueName),
    held: HeldItem,
    max_deliveries: Option<u32>,
    now_ms: u64,
    pass: &mut Consumed,
) -> Result<(), QueueError> {
    match return_held(txn, keys, held, 0, now_ms, max_deliveries).await? {
        Returned::DeadLettered { queue: dead } => {
            *pass.dead_lettered.entry(queue.clone()).or_default() += 1;
            // Dead-letter queues are FIFO queues, whatever the kind of the
            // queue the item left.
            pass.queues.insert((QueueKind::Fifo, dead));
        }
        Returned::Requeued | Returned::Delayed { .. } => {
            *pass.redelivered.entry(queue.clone()).or_default() += 1
        }
        Returned::Expired => *pass.expired.entry(queue.clone()).or_default() += 1,
    }
    Ok(())
}

/// Where a due entry belongs: its queue, its key, and the sweep's time.
struct Due<'a> {
    keys: &'a QueueKeys,
    key: &'a [u8],
    queue: &'a (QueueKind, QueueName),
    now_ms: u64,
}

/// A delayed item came due: revealed under its own key or (keyless) at its
/// queue's tail, or dropped if its retention ended first.
async fn reveal_in<T: Transaction>(
    txn: &T,
    due: &Due<'_>,
    held: HeldItem,
    pass: &mut Consumed,
    to_tail: &mut BTreeMap<(QueueKind, QueueName), Tail>,
) -> Result<(), QueueError> {
    let keys = due.keys;
    txn.atomic_add(&keys.delayed_count(), -1)?;
    expiry::unindex_in(txn, keys, due.key, held.item.expires_at_ms)?;
    if expiry::is_expired(&held.item, due.now_ms) {
        // Its retention ended first (or in the same ms): dropped, never
        // seen, its parts with it; a group head's next item moves up.
        crate::queue::parts::clear_in(txn, held.item.parts)?;
        expiry::count_in(txn, keys, 1)?;
        if let Some(group) = &held.item.group {
            crate::queue::groups::leave_in(txn, keys, group, due.now_ms).await?;
        }
        *pass.expired.entry(due.queue.clone()).or_default() += 1;
    } else if held.item_key.is_empty() {
        pass.revealed += 1;
        let tail = to_tail.entry(due.queue.clone()).or_default();
        tail.values.push(encode_item_value(&held.item));
        tail.expires.push(held.item.expires_at_ms);
        tail.fair_keys.push(held.item.fair_key);
    } else {
        pass.revealed += 1;
        txn.set(&held.item_key, &encode_item_value(&held.item))?;
        expiry::index_in(txn, keys, &held.item_key, held.item.expires_at_ms)?;
        txn.atomic_add(&keys.depth(), 1)?;
    }
    Ok(())
}

/// Appends each queue's revealed keyless items at its tail. Each append
/// reads its queue's tail mark: issued together, a store with remote reads
/// waits for them once, not once per queue.
async fn append_tails_in<T: Transaction>(
    txn: &T,
    to_tail: &BTreeMap<(QueueKind, QueueName), Tail>,
) -> Result<(), QueueError> {
    let tails: Vec<QueueKeys> = to_tail
        .keys()
        .map(|(kind, name)| QueueKeys::of_kind(*kind, name))
        .collect();
    let appends = tails
        .iter()
        .zip(to_tail.values())
        .map(|(keys, tail)| append_tail_in(txn, keys, tail));
    for appended in join_all(appends).await {
        appended?;
    }
    Ok(())
}

/// Appends one queue's revealed items at its tail; items with a fairness
/// key take their virtual tags now, under the queue's weights as they
/// stand (see [`crate::queue::fair`]). A queue without such items reads
/// and writes what it did before fairness keys.
async fn append_tail_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    tail: &Tail,
) -> Result<(), QueueError> {
    if tail.fair_keys.iter().all(Option::is_none) {
        return Ok(append_expiring_in(txn, keys, &tail.values, &tail.expires).await?);
    }
    let weights = crate::queue::settings::read_in(txn, keys)
        .await?
        .fair_weights
        .unwrap_or_default();
    let fair_keys: Vec<Option<&str>> = tail.fair_keys.iter().map(Option::as_deref).collect();
    let indexes = crate::queue::fair::indexes_in(txn, keys, &fair_keys, &weights).await?;
    crate::queue::fair::append_at_in(txn, keys, &tail.values, &tail.expires, &indexes)?;
    Ok(())
}

/// Delayed items of one queue revealed at its tail, in order, with their
/// expiries and fairness keys.
#[derive(Default)]
struct Tail {
    values: Vec<Vec<u8>>,
    expires: Vec<Option<u64>>,
    fair_keys: Vec<Option<String>>,
}

/// The first due rows of `[begin, end)`, at most [`DUE_BATCH_MAX`] and
/// [`DUE_BATCH_BYTES_MAX`] bytes (at least one), and whether more may follow.
async fn due_rows<T: Transaction>(
    txn: &T,
    begin: &[u8],
    end: &[u8],
) -> Result<(Vec<KeyValue>, bool), StoreError> {
    let mut rows = txn
        .get_range(RangeRead::new(begin, end, DUE_BATCH_MAX).snapshot())
        .await?;
    let mut full = rows.len() >= DUE_BATCH_MAX;
    if cut_at_bytes(&mut rows, DUE_BATCH_BYTES_MAX) {
        full = true;
    }
    Ok((rows, full))
}

/// When the first entry at or after `from` is due; `None` when none is
/// due by `until_ms`.
async fn first_due_from<S: Store>(
    store: &S,
    from: &[u8],
    until_ms: u64,
) -> Result<Option<u64>, QueueError> {
    let txn = store.begin()?;
    let end = if until_ms == u64::MAX {
        due_range().1
    } else {
        due_until(until_ms).1
    };
    let rows = txn
        .get_range(RangeRead::new(from, &end, 1).snapshot())
        .await?;
    Ok(rows
        .first()
        .and_then(|row| due_entry(&row.key))
        .map(|entry| entry.due_ms))
}
