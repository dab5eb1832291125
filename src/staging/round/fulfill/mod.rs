//! One fulfillment transaction: pair waiting requests with items, many at
//! once, and write each item under its requester's result key (or, for a
//! requester in this process, hand it over in memory after the commit;
//! see [`crate::staging::line`]). What the round is given and returns is in
//! [`super::answer`]; how it reads and sorts the request subspace, in
//! `round/requests.rs`; how it serves each kind of request, in
//! [`serve`] and [`sources`].
//!
//! [`fulfill_round`] reads as the round's phases, in order: read the
//! requests, sort them and collect this line's results, settle the acks
//! riding on this line's pops, plan who is served, read the items, serve
//! each source, answer the pops that must not wait, sync this line's
//! counted requests in the store with its pops still waiting, decide what to wait on next, commit,
//! then arm the loop's watches in a read-only transaction of their own
//! (see [`Watched`]: a watch in the round's transaction would make it
//! conflict with every push).
//!
//! Requests and items are read with snapshot (so reading many costs no
//! conflicts), and a read-conflict key is added on each one consumed: the
//! commit fails only if another transaction consumed one of the same keys.
//! Requests are served in request order, front requests from the front
//! and back requests (priority `pop_max`) from the back.
//!
//! Two lines of requests are served together: the request subspace, and
//! the memory requests of pops waiting in this process (see
//! [`crate::staging::line`]). Each line keeps its order; when items are scarce the
//! two take turns, so neither starves the other. In the request subspace,
//! another process's line stands as counted requests ([`crate::staging::counted`]):
//! the round leaves each the items it stands for, to its owner's round,
//! unless it takes it over ([`crate::staging::takeover`]: served with up to its
//! count of items under per-item result keys). This process's own counted
//! requests are served from its memory line in their place in request
//! order, and the same round collects results other processes wrote for
//! it ([`crate::staging::line::results`]). Behind another process's request, this
//! line's pops not yet in the store join it (a counted request added in
//! this commit) rather than race for the items behind the requests.

use std::collections::HashSet;

use crate::envelope::{End, RequestValue, now_ms};
use crate::keys::QueueKeys;
use crate::queue::limits::{PER_KEY_WIDE, budget_in};
use crate::queue::{Item, QueueError};
use crate::staging::counted::LineLevel;
use crate::staging::line::MemoryRequest;
use crate::staging::marker::marker_says_applied;
pub use crate::staging::round::answer::{Fulfilled, LocalHandoff};
use crate::staging::round::answer::{Handover, Next, Seen, WaitOn, what_next};
use crate::staging::round::pool::{Pool, read_pool, take_turns};
use crate::staging::round::requests::Source;
use crate::store::{KeyValue, RangeRead, Read, Store, StoreError, Transaction, Watch};

mod serve;
mod sources;
use serve::RoundState;

/// Runs one fulfillment transaction on queue `keys`, without a line in
/// the store (see [`fulfill_round`]).
#[cfg(feature = "testing")]
pub async fn fulfill_once<S: Store>(
    store: &S,
    keys: &QueueKeys,
    batch_max: usize,
    bytes_max: usize,
    result_grace_ms: u64,
    local: LocalHandoff<'_>,
) -> Result<Fulfilled, QueueError> {
    let bounds = (batch_max, bytes_max, result_grace_ms);
    fulfill_round(store, keys, bounds, local, LineLevel::NONE).await
}

/// A round's bounds.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// Most requests and items (at least 1).
    batch: usize,
    /// Most payload bytes.
    bytes_max: usize,
    /// How long results are kept past their request's deadline.
    result_grace_ms: u64,
}

/// Runs one fulfillment transaction on queue `keys`, within `bounds`
/// (`batch_max` requests and items, `bytes_max` payload bytes, results
/// kept `result_grace_ms` past their request's deadline). A conflict is
/// returned as `StoreError::Conflict`: another fulfiller or a withdrawal
/// won; the caller retries.
pub async fn fulfill_round<S: Store>(
    store: &S,
    keys: &QueueKeys,
    (batch_max, bytes_max, result_grace_ms): (usize, usize, u64),
    local: LocalHandoff<'_>,
    line: LineLevel<'_>,
) -> Result<Fulfilled, QueueError> {
    let bounds = Bounds {
        batch: batch_max.max(1),
        bytes_max,
        result_grace_ms,
    };
    let txn = store.begin()?;
    let read = read_requests(&txn, keys, bounds.batch, &local).await?;
    if read.rows.is_empty() && read.memory.is_empty() && line.collect.is_empty() {
        return commit_idle(txn, keys).await;
    }
    let mut state = RoundState::sort_and_collect(&txn, keys, bounds, &local, &line, read).await?;
    state.ack_riding(local.acks).await?;
    let plan = state.plan(&line);
    let mut pool = state.read_items(&plan.live).await?;
    for (source, request) in plan.live {
        state.serve(&mut pool.items, source, request, &line)?;
    }
    state.answer_empty(&plan.live_memory, &pool);
    state.sync_line(&line, plan.joins_store).await?;
    state.write_counters()?;
    let budget = state.take.budget.clone();
    budget.spend_in(&txn, keys)?;
    let wait_on = watch_keys(keys, what_next(state.seen(&pool)));
    let own_key = state.own_watch_key.take();
    let left = match wait_on.is_empty() {
        false => Some(Watched::read(&txn, wait_on, own_key).await?),
        true => None,
    };
    let mut fulfilled = state.finish();
    // Large items handed over here: payloads read, unleased parts cleared
    // in this commit (see `crate::queue::parts`); the round's bytes are
    // bounded by `bytes_max` as it takes them. Results collected for this
    // line may hold items whose lease ended since: those are left out.
    for (_, items) in fulfilled.handover.handed.iter_mut() {
        crate::staging::results::deliver_results_in(&txn, keys, items).await?;
    }
    commit(store, txn, &local, &fulfilled.handover).await?;
    budget.count_refused(keys);
    if let Some(next_ms) = budget.held().until_ms {
        // The next token's time: the loop's next round then takes it.
        let next = &mut fulfilled.next.next_deadline_ms;
        *next = Some(next.map_or(next_ms, |deadline| deadline.min(next_ms)));
    }
    if let Some(left) = left {
        let (watch, own_watch) = left.watch_after(store).await;
        fulfilled.next.watch = Some(watch);
        fulfilled.next.own_watch = own_watch;
    }
    Ok(fulfilled)
}

/// The keys a round's loop watches when it waits on `wait_on` (none: it
/// goes on at once; see [`WaitOn`]).
fn watch_keys(keys: &QueueKeys, wait_on: WaitOn) -> Vec<Vec<u8>> {
    match wait_on {
        WaitOn::Now => Vec::new(),
        WaitOn::Depth => vec![keys.depth()],
        WaitOn::Wake => vec![keys.wake()],
        WaitOn::Limited { leases, depth } => {
            let leased = leases.then(|| keys.leased());
            let depth = depth.then(|| keys.depth());
            std::iter::once(keys.wake())
                .chain(leased)
                .chain(depth)
                .collect()
        }
    }
}

/// What a round that waits leaves at the keys its loop watches: the keys
/// it waits on (see [`watch_keys`]) and, when this line stands in the
/// store, its oldest counted request.
///
/// The watches are armed after the round commits, in a read-only
/// transaction of their own: a watch reads its key, so in the round's
/// transaction a watch on the depth would make the round conflict with
/// every push committed meanwhile (each adds to the depth). The round
/// reads (snapshot: no conflict) what it leaves there, its own writes
/// applied; the watching transaction compares that with what it reads,
/// and a difference (a push, or another process serving this line's
/// request, between the two) wakes the loop at once. What comes after
/// the watching transaction's read fires its watch, so no change is lost.
struct Watched {
    /// Each key with the value the round leaves there.
    keys: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// The last of `keys` is this line's oldest counted request.
    has_own: bool,
}

impl Watched {
    /// Reads, in the round's transaction, what it leaves at `wait_on`
    /// and at `own_key`.
    async fn read<T: Transaction>(
        txn: &T,
        wait_on: Vec<Vec<u8>>,
        own_key: Option<Vec<u8>>,
    ) -> Result<Watched, QueueError> {
        let has_own = own_key.is_some();
        let mut keys = Vec::with_capacity(wait_on.len() + 1);
        for key in wait_on.into_iter().chain(own_key) {
            let value = txn.get(&key, Read::Snapshot).await?;
            keys.push((key, value));
        }
        Ok(Watched { keys, has_own })
    }

    /// Arms the watches once the round committed: the loop's, and the
    /// one on this line's oldest request if it stands in the store.
    /// Never fails (the round's items are handed over whatever happens
    /// here): a watch that cannot be armed resolves with its error, and
    /// the loop pauses before its next round.
    async fn watch_after<S: Store>(self, store: &S) -> (Watch, Option<Watch>) {
        let has_own = self.has_own;
        match watch_changes(store, self.keys).await {
            Ok(mut watches) => {
                let own = has_own.then(|| watches.pop()).flatten();
                (any_of(watches), own)
            }
            Err(error) => (fired(Err(error)), None),
        }
    }
}

/// A watch on each of `keys` in one read-only transaction (which never
/// conflicts): one that reads a value other than the one given has
/// fired already.
async fn watch_changes<S: Store>(
    store: &S,
    keys: Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Result<Vec<Watch>, StoreError> {
    let txn = store.begin()?;
    let mut watches = Vec::with_capacity(keys.len());
    for (key, left) in keys {
        let now = txn.get(&key, Read::Snapshot).await?;
        watches.push(if now == left {
            txn.watch(&key)?
        } else {
            fired(Ok(()))
        });
    }
    txn.commit().await?;
    Ok(watches)
}

/// One watch that fires when the first of `watches` fires (at once when
/// there is none).
fn any_of(mut watches: Vec<Watch>) -> Watch {
    match watches.len() {
        0 => fired(Ok(())),
        1 => watches.remove(0),
        _ => Watch::new(async move { futures_util::future::select_all(watches).await.0 }),
    }
}

/// A watch that has already fired with `outcome`.
fn fired(outcome: Result<(), StoreError>) -> Watch {
    Watch::new(std::future::ready(outcome))
}

/// What a round read of its requests.
struct RequestsRead<'a> {
    /// The request subspace's first rows (at most the batch).
    rows: Vec<KeyValue>,
    /// The memory requests still within their deadline.
    memory: Vec<&'a MemoryRequest>,
    /// When the round reads, in epoch ms.
    now: u64,
}

/// Reads (snapshot) the first `batch` rows of the request subspace, and
/// keeps the memory requests still within their deadline: those past it
/// are skipped, their pops are leaving (or left) on their own. (The
/// claims are bounded: `batch_max` in line order, and as many pops that
/// must not wait behind them.)
async fn read_requests<'a, T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    batch: usize,
    local: &LocalHandoff<'a>,
) -> Result<RequestsRead<'a>, QueueError> {
    let (begin, end) = keys.requests_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, batch).snapshot())
        .await?;
    let now = now_ms();
    let memory: Vec<&MemoryRequest> = local
        .memory
        .iter()
        .filter(|m| m.line.request.deadline_ms >= now)
        .collect();
    Ok(RequestsRead { rows, memory, now })
}

/// A round with nothing to do: commits a watch on the wake key. It writes
/// nothing, so the watch's read of the key can make it conflict with
/// nothing.
async fn commit_idle<T: Transaction>(txn: T, keys: &QueueKeys) -> Result<Fulfilled, QueueError> {
    let watch = txn.watch(&keys.wake())?;
    txn.commit().await?;
    Ok(Fulfilled {
        next: Next {
            watch: Some(watch),
            ..Next::default()
        },
        ..Fulfilled::default()
    })
}

/// Who a round serves, in service order.
struct Plan {
    /// Live requests, each with its source.
    live: Vec<(Source, RequestValue)>,
    /// Memory requests this round answers (served, or collected for).
    live_memory: HashSet<usize>,
    /// This line's pops not yet in the store join it behind the others.
    joins_store: bool,
}

impl<T: Transaction> RoundState<'_, '_, T> {
    /// Plans the round: the stored requests and this line's memory
    /// requests not served yet, taking turns up to the batch.
    ///
    /// Another line stands in the store: this line's pops not yet there
    /// join it at the back (`OwnLine::sync_counts_in` asks for them in this
    /// commit, and the next round serves them in their place) instead of
    /// racing the other lines' rounds for the items behind the requests.
    /// Pops that must not wait never stand in the store: served here. Nor
    /// do pops of several items: a counted request stands for one item per
    /// pop, and they take up to their `max` from the items behind.
    fn plan(&mut self, line: &LineLevel<'_>) -> Plan {
        let joins_store = (self.sorted.others_ahead || line.contended)
            && !line.line.is_empty()
            && self.rows_read < self.bounds.batch;
        let tail: Vec<usize> = (0..self.memory.len())
            .filter(|&i| self.got[i].is_none() && !self.assigned[i] && !self.acks_deferred(i))
            .filter(|&i| !joins_store || !self.memory[i].line.stands_in_store())
            .collect();
        let mut stored = std::mem::take(&mut self.sorted.stored);
        let collected = self.counts.collected > 0;
        if collected {
            // A round that collects takes no items: it then conflicts with
            // no other process's round (only with a reaper returning a
            // result), so results reach their pops at once however hard
            // the items are contended. The next round, at once, serves the
            // rest.
            stored.clear();
        }
        let tail = if collected { Vec::new() } else { tail };
        let memory = &self.memory;
        let live = take_turns(
            stored,
            tail.into_iter()
                .map(|index| (Source::Memory { index }, memory[index].line.request)),
            self.bounds.batch,
        );
        let mut live_memory: HashSet<usize> = (0..memory.len())
            .filter(|&i| self.got[i].is_some())
            .collect();
        for (source, _) in &live {
            match source {
                Source::Memory { index } => {
                    live_memory.insert(*index);
                }
                Source::Own { waiters, .. } => live_memory.extend(waiters.iter().copied()),
                Source::Stored { .. } | Source::Counted { .. } => {}
            }
        }
        Plan {
            live,
            live_memory,
            joins_store,
        }
    }

    /// Reads the items the `live` requests want at each end, at most the
    /// batch bound: a pop of many takes what the bound leaves, the rest
    /// wait for the next round.
    async fn read_items(&mut self, live: &[(Source, RequestValue)]) -> Result<Pool, QueueError> {
        // A paused queue hands nothing out: its round sees no items (pops
        // that must not wait are answered "empty", the others wait for
        // the resume).
        let gates = crate::queue::settings::gates_in(self.take.txn, self.take.keys).await?;
        self.paused = gates.paused;
        if gates.paused {
            self.pool_is_everything = true;
            return Ok(Pool::nothing());
        }
        let leasing = live.iter().any(|(_, r)| r.lease_ms.is_some());
        let (txn, keys) = (self.take.txn, self.take.keys);
        self.take.budget = budget_in(txn, keys, gates.limits, leasing).await?;
        // At most what the batch and the rate allow (`leases_max` holds
        // back only leasing pops: their takes are refused one by one).
        let wanted = |end: End| {
            let wanted = live
                .iter()
                .filter(|(_, r)| r.end == end)
                .map(|(source, _)| self.demand(source))
                .sum::<usize>()
                .min(self.bounds.batch);
            self.take.budget.cap(wanted, false)
        };
        let wanted = (wanted(End::Front), wanted(End::Back));
        let pool = self
            .read_pool_past_held(wanted, gates.limits.lookahead(leasing), leasing)
            .await?;
        debug_assert!(
            crate::queue::groups::heads_are_distinct(&pool.items),
            "one head per group"
        );
        self.pool_is_everything = pool.is_everything;
        Ok(pool)
    }

    /// Reads the pool of `wanted` items at each end and, under a limit per
    /// fairness key, `lookahead` more, so that items of held keys do not
    /// hide the others; when the keys at the head are held (fewer items
    /// may go than wanted), it reads once more, [`PER_KEY_WIDE`] past what
    /// it wants. The round takes at most what its requests ask.
    async fn read_pool_past_held(
        &mut self,
        (front, back): (usize, usize),
        lookahead: usize,
        leasing: bool,
    ) -> Result<Pool, QueueError> {
        let (txn, keys) = (self.take.txn, self.take.keys);
        let past = |wanted: usize, more: usize| if wanted > 0 { wanted + more } else { 0 };
        let mut pool = read_pool(txn, keys, past(front, lookahead), past(back, lookahead)).await?;
        self.take
            .budget
            .read_keys_in(txn, keys, pool.items.iter())
            .await?;
        let held = |pool: &Pool| {
            let admissible = self.take.budget.admissible(&pool.items, leasing);
            !pool.is_everything && admissible < front + back
        };
        if lookahead > 0 && held(&pool) {
            let (front, back) = (past(front, PER_KEY_WIDE), past(back, PER_KEY_WIDE));
            pool = read_pool(txn, keys, front, back).await?;
            self.take
                .budget
                .read_keys_in(txn, keys, pool.items.iter())
                .await?;
        }
        Ok(pool)
    }

    /// Pops that must not wait and were left out of this round's batch are
    /// answered too once it found nothing left: the requests ahead of them
    /// took every visible item.
    fn answer_empty(&mut self, live_memory: &HashSet<usize>, pool: &Pool) {
        if self.pool_is_everything && pool.items.is_empty() && !self.bytes_full() {
            let emptied = self
                .memory
                .iter()
                .enumerate()
                .filter(|(i, m)| m.line.answers_empty && !live_memory.contains(i))
                .map(|(_, m)| m.seq);
            self.handover.emptied.extend(emptied);
        }
    }

    /// What the round saw, for [`what_next`].
    fn seen(&self, pool: &Pool) -> Seen {
        Seen {
            counts: self.counts,
            bytes_full: self.bytes_full(),
            pool_is_everything: pool.is_everything,
            paused: self.paused,
            held: self.take.budget.held(),
            starved: self.starved,
        }
    }
}

/// Commits the round. Nobody else has the items (or ack outcomes) handed
/// over here, so an unknown outcome must be resolved, not retried: the
/// marker, set in the same commit, says.
async fn commit<S: Store>(
    store: &S,
    txn: S::Txn,
    local: &LocalHandoff<'_>,
    handover: &Handover,
) -> Result<(), QueueError> {
    if !handover.is_empty() {
        txn.set(local.marker_key, &local.attempt.to_be_bytes())?;
    }
    match txn.commit().await {
        Ok(()) => Ok(()),
        Err(error) if error.is_maybe_committed() && !handover.is_empty() => {
            if marker_says_applied(store, local.marker_key, local.attempt).await {
                Ok(())
            } else {
                Err(error.into())
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// Items of `got` for memory requests, by their place in the line.
fn items_by_seq(
    memory: &[&MemoryRequest],
    got: Vec<Option<Vec<Item>>>,
) -> std::collections::HashMap<u64, Vec<Item>> {
    got.into_iter()
        .enumerate()
        .filter_map(|(i, items)| Some((memory[i].seq, items?)))
        .collect()
}
