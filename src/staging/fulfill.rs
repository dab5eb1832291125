//! One fulfillment transaction: pair waiting requests with items, many at
//! once, and write each item under its requester's result key (or, for a
//! requester in this process, hand it over in memory after the commit;
//! see [`super::line`]). What the round is given and returns is in
//! [`super::fulfilled`]; how it reads and sorts the request subspace, in
//! `round_requests.rs`.
//!
//! Requests and items are read with snapshot (so reading many costs no
//! conflicts), and a read-conflict key is added on each one consumed: the
//! commit fails only if another transaction consumed one of the same keys.
//! Requests are served in request order, front requests from the front
//! and back requests (priority `pop_max`) from the back.
//!
//! Two lines of requests are served together: the request subspace, and
//! the memory requests of pops waiting in this process (see
//! [`super::line`]). Each line keeps its order; when items are scarce the
//! two take turns, so neither starves the other. In the request subspace,
//! another process's line stands as counted requests ([`super::counted`]):
//! the round leaves each the items it stands for, to its owner's round,
//! unless it takes it over ([`super::takeover`]: served with up to its
//! count of items under per-item result keys). This process's own counted
//! requests are served from its memory line in their place in request
//! order, and the same round collects results other processes wrote for
//! it ([`super::line_results`]). Behind another process's request, this
//! line's pops not yet in the store join it (a counted request added in
//! this commit) rather than race for the items behind the requests.

use std::collections::HashSet;

use crate::envelope::{End, RequestValue, encode_result, now_ms};
use crate::keys::QueueKeys;
use crate::queue::{Item, QueueError};
use crate::staging::counted::{self, LineLevel, OwnLine};
pub use crate::staging::fulfilled::{Fulfilled, LocalHandoff};
use crate::staging::line::{LocalId, MemoryRequest};
use crate::staging::line_results::{Collected, collect_in};
use crate::staging::marker::marker_says_applied;
use crate::staging::pool::{Pool, Round, read_pool, result_of, take_turns};
use crate::staging::requester::restore_in;
use crate::staging::round_requests::{Requests, Source, assign_own, sort_requests};
use crate::store::{RangeRead, Store, Transaction};

/// Runs one fulfillment transaction on queue `keys`, without a line in
/// the store (see [`fulfill_round`]).
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
    let batch = batch_max.max(1);
    let txn = store.begin()?;
    let (begin, end) = keys.requests_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, batch).snapshot())
        .await?;
    let rows_read = rows.len();
    let now = now_ms();
    // Memory requests past their deadline are skipped: their pops are
    // leaving (or left) on their own. (The claims are bounded: `batch_max`
    // in line order, and as many pops that must not wait behind them.)
    let memory: Vec<&MemoryRequest> = local
        .memory
        .iter()
        .filter(|m| m.line.request.deadline_ms >= now)
        .collect();
    let mut batch_full = rows.len() >= batch || local.memory.len() >= batch;
    if rows.is_empty() && memory.is_empty() && line.collect.is_empty() {
        let watch = txn.watch(&keys.wake())?;
        txn.commit().await?;
        return Ok(Fulfilled {
            watch: Some(watch),
            ..Fulfilled::default()
        });
    }

    let Requests {
        mut stored,
        counted: counted_rows,
        expired,
        expired_pops,
        others_ahead,
    } = sort_requests(&txn, keys, rows, now, line.line, local.is_local)?;

    // What each memory request gets this round (collected results, or
    // items), and which are spoken for by this line's counted requests.
    let mut got: Vec<Option<Vec<Item>>> = vec![None; memory.len()];
    let mut assigned = vec![false; memory.len()];

    // First the results other processes wrote for this line: to its
    // waiting pops in line order, one each; those nobody here waits for
    // go back to the queue in this commit.
    let Collected {
        give_back,
        collected,
        mut collect_next,
    } = collect_in(
        &txn,
        keys,
        &line,
        &counted_rows,
        &memory,
        &mut got,
        (batch, bytes_max),
    )
    .await?;

    // This line's counted requests stand for its earliest waiting pops of
    // their class, in line order.
    assign_own(&mut stored, &counted_rows, &memory, &got, &mut assigned);
    // Another line stands in the store: this line's pops not yet there
    // join it at the back (`OwnLine::settle_in` asks for them in this
    // commit, and the next round serves them in their place) instead of
    // racing the other lines' rounds for the items behind the requests.
    // Pops that must not wait never stand in the store: served here. Nor
    // do pops of several items: a counted request stands for one item per
    // pop, and they take up to their `max` from the items behind.
    let joins_store =
        (others_ahead || line.contended) && !line.line.is_empty() && rows_read < batch;
    let tail: Vec<usize> = (0..memory.len())
        .filter(|&i| got[i].is_none() && !assigned[i])
        .filter(|&i| !joins_store || !memory[i].line.stands_in_store())
        .collect();
    let offered = stored.len() + tail.len();
    if collected > 0 {
        // A round that collects takes no items: it then conflicts with no
        // other process's round (only with a reaper returning a result),
        // so results reach their pops at once however hard the items are
        // contended. The next round, at once, serves the rest.
        stored.clear();
    }
    let tail = if collected > 0 { Vec::new() } else { tail };
    let live = take_turns(
        stored,
        tail.into_iter()
            .map(|index| (Source::Memory { index }, memory[index].line.request)),
        batch,
    );
    // Requests left for the next round: it must come at once.
    batch_full |= live.len() < offered;
    let mut live_memory: HashSet<usize> = (0..memory.len()).filter(|&i| got[i].is_some()).collect();
    for (source, _) in &live {
        match source {
            Source::Memory { index } => {
                live_memory.insert(*index);
            }
            Source::Own { waiters, .. } => live_memory.extend(waiters.iter().copied()),
            Source::Stored { .. } | Source::Counted { .. } => {}
        }
    }

    // One round reads at most `batch_max` items: a pop of many takes what
    // the bound leaves, the rest wait for the next round.
    let demand = |source: &Source| match source {
        Source::Stored { .. } => 1,
        Source::Counted { row } => counted_rows[*row].count as usize,
        Source::Own { waiters, .. } => waiters.len(),
        Source::Memory { index } => memory[*index].line.max.max(1),
    };
    let wanted = |end: End| {
        live.iter()
            .filter(|(_, r)| r.end == end)
            .map(|(source, _)| demand(source))
            .sum::<usize>()
            .min(batch)
    };
    let (wanted_front, wanted_back) = (wanted(End::Front), wanted(End::Back));
    // A paused queue hands nothing out: its round sees no items (pops that
    // must not wait are answered "empty", the others wait for the resume).
    let paused = crate::queue_settings::paused_in(&txn, keys).await?;
    let pool = if paused {
        Pool::nothing()
    } else {
        read_pool(&txn, keys, wanted_front, wanted_back).await?
    };
    let pool_is_everything = pool.is_everything;
    let mut pool = pool.items;
    debug_assert!(
        crate::groups::heads_are_distinct(&pool),
        "one head per group"
    );

    let mut round = Round {
        txn: &txn,
        keys,
        now,
        bytes: 0,
        bytes_max,
        result_grace_ms,
    };
    let mut served = 0usize;
    let mut taken = 0usize;
    let mut next_deadline_ms: Option<u64> = None;
    let mut unserved = 0usize;
    // In service order: collected results first, then what the round
    // took (a memory request's items are filled in from `got` at the end).
    let mut handed: Vec<(LocalId, Vec<Item>)> = (0..memory.len())
        .filter(|&i| got[i].is_some())
        .map(|i| (LocalId::Memory(memory[i].seq), Vec::new()))
        .collect();
    let mut emptied = Vec::new();
    let mut results_written = 0usize;
    let mut own_served = vec![0u32; counted_rows.len()];
    // Items left in the queue for other lines' requests, and those
    // requests (key, count as read).
    let mut left_items = 0usize;
    let mut left_for: Vec<(Vec<u8>, u32)> = Vec::new();
    // Only plain stored requests count here in `waiting`; counted ones
    // move it by their change.
    let mut stored_served = 0usize;
    let mut left = |request: &RequestValue, unserved: &mut usize| {
        *unserved += 1;
        next_deadline_ms =
            Some(next_deadline_ms.map_or(request.deadline_ms, |d| d.min(request.deadline_ms)));
    };
    for (source, request) in live {
        match source {
            Source::Memory { index } => {
                let m = memory[index];
                let mut items = Vec::new();
                while items.len() < m.line.max.max(1) {
                    let Some(item) = round.take(&mut pool, &request)? else {
                        break;
                    };
                    items.push(item);
                }
                if items.is_empty() {
                    // The byte bound held items back: that is not "empty".
                    if m.line.answers_empty && pool_is_everything && round.bytes < bytes_max {
                        emptied.push(m.seq);
                    } else {
                        left(&request, &mut unserved);
                    }
                    continue;
                }
                served += 1;
                taken += items.len();
                got[index] = Some(items);
                handed.push((LocalId::Memory(m.seq), Vec::new()));
            }
            Source::Own { row, waiters } => {
                for &index in &waiters {
                    let Some(item) = round.take(&mut pool, &request)? else {
                        break;
                    };
                    got[index] = Some(vec![item]);
                    handed.push((LocalId::Memory(memory[index].seq), Vec::new()));
                    own_served[row] += 1;
                }
                served += own_served[row] as usize;
                taken += own_served[row] as usize;
                if (own_served[row] as usize) < waiters.len() {
                    left(&request, &mut unserved);
                }
            }
            Source::Counted { row } => {
                let counted = &counted_rows[row];
                if !line.take_over.covers(&counted.key) {
                    // Its owner's round takes these items: this round
                    // takes those behind them, so the two never conflict.
                    let passed = round.leave(&mut pool, &request, counted.count as usize);
                    if passed > 0 {
                        left_items += passed;
                        left_for.push((counted.key.clone(), counted.count));
                    }
                    if passed < counted.count as usize {
                        // Waiting for items, as its owner's round sees it.
                        left(&request, &mut unserved);
                    }
                    continue;
                }
                let mut count = 0u32;
                while count < counted.count {
                    let Some(item) = round.take(&mut pool, &request)? else {
                        break;
                    };
                    let result_key = keys.counted_result(&counted.requester, &item.key);
                    txn.set(
                        &result_key,
                        &encode_result(&result_of(item, &request, result_grace_ms)),
                    )?;
                    count += 1;
                }
                if count > 0 {
                    counted::set_count_in(&txn, keys, counted, counted.count - count)?;
                    served += 1;
                    taken += count as usize;
                    results_written += count as usize;
                }
                if count < counted.count {
                    left(&request, &mut unserved);
                }
            }
            Source::Stored { key, requester } => {
                let Some(item) = round.take(&mut pool, &request)? else {
                    left(&request, &mut unserved);
                    continue;
                };
                served += 1;
                taken += 1;
                txn.add_read_conflict_key(&key)?;
                txn.clear(&key)?;
                stored_served += 1;
                if (local.is_local)(&requester) {
                    handed.push((LocalId::Registered(requester), vec![item]));
                    continue;
                }
                txn.set(
                    &keys.result(&requester),
                    &encode_result(&result_of(item, &request, result_grace_ms)),
                )?;
            }
        }
    }
    let bytes = round.bytes;
    // Pops that must not wait and were left out of this round's batch are
    // answered too once it found nothing left: the requests ahead of them
    // took every visible item.
    if pool_is_everything && pool.is_empty() && bytes < bytes_max {
        emptied.extend(
            memory
                .iter()
                .enumerate()
                .filter(|(i, m)| m.line.answers_empty && !live_memory.contains(i))
                .map(|(_, m)| m.seq),
        );
    }

    // This line's counted requests, brought to its pops still waiting.
    let own = OwnLine {
        line: line.line,
        memory: &memory,
        got: &got,
        rows: &counted_rows,
        served: &own_served,
        joins_store,
        rows_complete: rows_read < batch,
    };
    let kept = own.settle_in(&txn, keys).await?;
    for requester in kept.requesters {
        if !collect_next.contains(&requester) {
            collect_next.push(requester);
        }
    }
    let own_watch = match kept.oldest {
        Some(key) => Some(txn.watch(&key)?),
        None => None,
    };

    for item in &give_back {
        restore_in(&txn, keys, item).await??;
    }
    let mut got: std::collections::HashMap<u64, Vec<Item>> = got
        .into_iter()
        .enumerate()
        .filter_map(|(i, items)| Some((memory[i].seq, items?)))
        .collect();
    for (id, items) in handed.iter_mut() {
        if let LocalId::Memory(seq) = id {
            *items = got.remove(seq).expect("each memory request is handed once");
        }
    }
    debug_assert!(got.is_empty(), "every memory request served is handed over");
    if taken > 0 {
        txn.atomic_add(&keys.depth(), -(taken as i64))?;
    }
    if stored_served > 0 || expired_pops > 0 {
        txn.atomic_add(&keys.waiting(), -(stored_served as i64 + expired_pops))?;
    }
    // Requests remain but items ran out: wake on the next push. If a bound
    // stopped us (bytes, or items per round), items remain and the caller
    // loops at once.
    let watch = if left_items == 0 {
        // A resume bumps the wake key (pushes to a paused queue need not
        // wake the loop).
        let wakes_it = if paused { keys.wake() } else { keys.depth() };
        (unserved > 0 && bytes < bytes_max && pool_is_everything)
            .then(|| txn.watch(&wakes_it))
            .transpose()?
    } else if bytes >= bytes_max
        || (unserved == 0 && served + expired + collected + kept.pops_asked > 0)
    {
        // More to do now: a bound held items back, or this round served
        // (its pops come back) or asked (the next round serves the new
        // request from the items behind those left to other lines).
        None
    } else if unserved > 0 {
        // Items stand, but were left to other lines: their owners taking
        // them (or a push) changes the depth.
        Some(txn.watch(&keys.depth())?)
    } else {
        // Nothing here but other lines' requests: a new request, a pop
        // joining this line, or one of those turning stale wakes the loop.
        Some(txn.watch(&keys.wake())?)
    };
    if !handed.is_empty() {
        txn.set(local.marker_key, &local.attempt.to_be_bytes())?;
    }
    match txn.commit().await {
        Ok(()) => {}
        // Nobody else has the items handed over here, so an unknown
        // outcome must be resolved, not retried: the marker says.
        Err(error) if error.is_maybe_committed() && !handed.is_empty() => {
            if !marker_says_applied(store, local.marker_key, local.attempt).await {
                return Err(error.into());
            }
        }
        Err(error) => return Err(error.into()),
    }
    Ok(Fulfilled {
        served,
        expired,
        unserved,
        batch_full,
        next_deadline_ms,
        watch,
        items: taken,
        handed,
        emptied,
        collected,
        results_written,
        pops_asked: kept.pops_asked,
        own_watch,
        collect: collect_next,
        left_items,
        left_for,
        others_ahead,
    })
}
