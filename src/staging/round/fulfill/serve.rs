//! A fulfillment round's state and its phases over it (see
//! [`super::fulfill_round`], which calls them in order): what the round
//! read, what each request got, and what it wrote.

use std::collections::VecDeque;

use crate::envelope::RequestValue;
use crate::keys::{QueueKeys, RequesterId};
use crate::lease::Receipt;
use crate::queue::limits::Budget;
use crate::queue::{Item, QueueError};
use crate::staging::counted::LineLevel;
use crate::staging::line::results::{Collected, collect_in};
use crate::staging::line::{LocalId, MemoryRequest};
use crate::staging::round::answer::{Handover, LocalHandoff, RoundCounts};
use crate::staging::round::pool::PoolTaker;
use crate::staging::round::requests::{Requests, Source, assign_own, sort_requests};
use crate::staging::round::riding::ack_all_in;
use crate::store::{StoreError, Transaction};

use super::{Bounds, RequestsRead};

/// Most receipts one round acks for the pops riding on it: each ack reads
/// two keys and clears them. A pop whose acks do not fit waits for the
/// next round (its acks first, then its items); the first pop's always fit.
pub const ROUND_ACKS_MAX: usize = 1_024;

/// One round's state, from its read to its commit.
pub(super) struct RoundState<'a, 'm, T: Transaction> {
    /// Takes items in the round's transaction.
    pub(super) take: PoolTaker<'a, T>,
    pub(super) bounds: Bounds,
    /// True for a registered requester waiting in this process.
    pub(super) is_local: &'m (dyn Fn(&RequesterId) -> bool + Sync),
    /// The memory requests within their deadline, in line order.
    pub(super) memory: Vec<&'m MemoryRequest>,
    /// The request subspace's rows, sorted.
    pub(super) sorted: Requests,
    /// Rows read from the request subspace.
    pub(super) rows_read: usize,
    /// What each memory request gets this round (results collected, or items).
    pub(super) got: Vec<Option<Vec<Item>>>,
    /// Memory requests spoken for by this line's counted requests.
    pub(super) assigned: Vec<bool>,
    /// Memory requests whose riding acks did not fit this round.
    pub(super) deferred: Vec<bool>,
    /// Collected results nobody here waits for: back in this commit.
    pub(super) give_back: Vec<Item>,
    /// Counted requesters whose results the next round looks for.
    pub(super) collect_next: Vec<RequesterId>,
    /// Items served per counted request of this line (by row).
    pub(super) own_served: Vec<u32>,
    /// Plain stored requests served (they count one each in `waiting`).
    pub(super) stored_served: usize,
    /// Earliest deadline among the requests left waiting.
    pub(super) next_deadline_ms: Option<u64>,
    /// Requests of other lines this round left items for, with their counts.
    pub(super) left_for: Vec<(Vec<u8>, u32)>,
    /// Where this line's requests stand in the store after the round.
    pub(super) own_watch_key: Option<Vec<u8>>,
    /// The round's read of the items held every visible item.
    pub(super) pool_is_everything: bool,
    /// The queue is paused: the round read no item (see
    /// [`crate::queue::settings`]).
    pub(super) paused: bool,
    /// A request no limit held back was left waiting for want of items.
    pub(super) starved: bool,
    pub(super) handover: Handover,
    pub(super) counts: RoundCounts,
}

impl<'a, 'm, T: Transaction> RoundState<'a, 'm, T> {
    /// Sorts the round's requests, collects the results other processes
    /// wrote for this line (to its waiting pops in line order, one each;
    /// those nobody here waits for go back to the queue in this commit),
    /// and gives this line's counted requests their earliest waiting pops
    /// of their class, in line order.
    pub(super) async fn sort_and_collect(
        txn: &'a T,
        keys: &'a QueueKeys,
        bounds: Bounds,
        local: &LocalHandoff<'m>,
        line: &LineLevel<'_>,
        read: RequestsRead<'m>,
    ) -> Result<Self, QueueError> {
        let RequestsRead { rows, memory, now } = read;
        let rows_read = rows.len();
        let mut sorted = sort_requests(txn, keys, rows, now, line.line, local.is_local)?;
        let mut got = vec![None; memory.len()];
        let mut assigned = vec![false; memory.len()];
        let limits = (bounds.batch, bounds.bytes_max);
        let Collected {
            give_back,
            collected,
            collect_next,
        } = collect_in(txn, keys, line, &sorted.counted, &memory, &mut got, limits).await?;
        assign_own(
            &mut sorted.stored,
            &sorted.counted,
            &memory,
            &got,
            &mut assigned,
        );
        let counts = RoundCounts {
            collected,
            expired: sorted.expired,
            ..RoundCounts::default()
        };
        // In service order: collected results first, then what the round
        // took (a memory request's items are filled in from `got` at the end).
        let handed = (0..memory.len())
            .filter(|&i| got[i].is_some())
            .map(|i| (LocalId::Memory(memory[i].seq), Vec::new()))
            .collect();
        Ok(RoundState {
            take: PoolTaker {
                txn,
                keys,
                now,
                bytes: 0,
                bytes_max: bounds.bytes_max,
                result_grace_ms: bounds.result_grace_ms,
                budget: Budget::unlimited(),
                held_last: false,
            },
            bounds,
            is_local: local.is_local,
            own_served: vec![0; sorted.counted.len()],
            deferred: vec![false; memory.len()],
            memory,
            sorted,
            rows_read,
            got,
            assigned,
            give_back,
            collect_next,
            stored_served: 0,
            next_deadline_ms: None,
            left_for: Vec::new(),
            own_watch_key: None,
            pool_is_everything: false,
            paused: false,
            starved: false,
            handover: Handover {
                handed,
                ..Handover::default()
            },
            counts,
        })
    }

    /// Acks the receipts riding on this round's memory requests (`acks`,
    /// by place in the line), in line order, up to [`ROUND_ACKS_MAX`]:
    /// before any item is taken, so a pop's acks come first. Each ack
    /// reads its lease without snapshot, so one racing the timer has one
    /// winner. A pop whose acks do not fit is not served this round.
    pub(super) async fn ack_riding(
        &mut self,
        acks: &[(u64, Vec<Receipt>)],
    ) -> Result<(), StoreError> {
        if acks.is_empty() {
            return Ok(());
        }
        let by_seq: std::collections::HashMap<u64, &Vec<Receipt>> = acks
            .iter()
            .map(|(seq, receipts)| (*seq, receipts))
            .collect();
        let mut acked = 0usize;
        for (index, m) in self.memory.iter().enumerate() {
            let Some(receipts) = by_seq.get(&m.seq) else {
                continue;
            };
            if acked > 0 && acked + receipts.len() > ROUND_ACKS_MAX {
                self.deferred[index] = true;
                continue;
            }
            acked += receipts.len();
            let (txn, keys) = (self.take.txn, self.take.keys);
            let outcomes = ack_all_in(txn, keys, receipts, self.take.now).await?;
            self.counts.acked += outcomes.iter().filter(|o| o.is_ok()).count();
            self.handover.acked.push((m.seq, outcomes));
        }
        Ok(())
    }

    /// True when memory request `index`'s acks wait for the next round.
    pub(super) fn acks_deferred(&self, index: usize) -> bool {
        self.deferred[index]
    }

    /// Items `source` asks for at most (one round reads at most
    /// `batch_max` items in all).
    pub(super) fn demand(&self, source: &Source) -> usize {
        match source {
            Source::Stored { .. } => 1,
            Source::Counted { row } => self.sorted.counted[*row].count as usize,
            Source::Own { waiters, .. } => waiters.len(),
            Source::Memory { index } => self.memory[*index].line.max.max(1),
        }
    }

    /// True when the byte bound held items back.
    pub(super) fn bytes_full(&self) -> bool {
        self.take.bytes >= self.bounds.bytes_max
    }

    /// A live request left waiting for want of items.
    pub(super) fn left_waiting(&mut self, request: &RequestValue) {
        self.counts.unserved += 1;
        self.starved |= !self.take.held_back();
        self.next_deadline_ms = Some(
            self.next_deadline_ms
                .map_or(request.deadline_ms, |d| d.min(request.deadline_ms)),
        );
    }

    /// Serves one live request from `pool`, by its source.
    pub(super) fn serve(
        &mut self,
        pool: &mut VecDeque<Item>,
        source: Source,
        request: RequestValue,
        line: &LineLevel<'_>,
    ) -> Result<(), QueueError> {
        match source {
            Source::Memory { index } => self.serve_memory(pool, index, &request),
            Source::Own { row, waiters } => self.serve_own(pool, row, &waiters, &request),
            Source::Counted { row } if !line.take_over.covers(&self.sorted.counted[row].key) => {
                self.leave_to_owner(pool, row, &request);
                Ok(())
            }
            Source::Counted { row } => self.serve_taken_over(pool, row, &request),
            Source::Stored { key, requester } => self.serve_stored(pool, &key, requester, &request),
        }
    }

    /// A memory request of this line: up to its `max` items, handed over
    /// after the commit; or "empty" for a pop that must not wait when the
    /// read found nothing visible.
    fn serve_memory(
        &mut self,
        pool: &mut VecDeque<Item>,
        index: usize,
        request: &RequestValue,
    ) -> Result<(), QueueError> {
        let m = self.memory[index];
        let mut items = Vec::new();
        while items.len() < m.line.max.max(1) {
            let Some(item) = self.take.take(pool, request)? else {
                break;
            };
            items.push(item);
        }
        if items.is_empty() {
            // The byte bound held items back: that is not "empty"; a
            // limit holding them back is, for a pop that must not wait.
            let none_visible = self.pool_is_everything && !self.bytes_full();
            if m.line.answers_empty && (none_visible || self.take.held_back()) {
                self.handover.emptied.push(m.seq);
            } else {
                self.left_waiting(request);
            }
            return Ok(());
        }
        self.counts.served += 1;
        self.counts.items += items.len();
        self.got[index] = Some(items);
        self.handover
            .handed
            .push((LocalId::Memory(m.seq), Vec::new()));
        Ok(())
    }
}
