//! The second level of the line: a process's line in the store's request
//! subspace, as *counted* requests.
//!
//! Pops waiting in a process's memory line cost no write while its own
//! fulfiller serves them alone. When it cannot — its round lost a
//! conflict to another process's, or another process's request stands in
//! the store — the line writes a counted request: one key,
//! `requests/(index, requester)`, standing for `count` of its pops of one
//! class (end and lease), where `requester` is the process's line id and
//! the class. Behind another process's request, a line's pops not yet in
//! the store always join it at the back ([`OwnLine::sync_counts_in`], in the
//! round's commit) instead of racing for the items behind the requests.
//!
//! Stored requests are served in request order, each from the items left
//! after those of the requests ahead of it. A line's own counted request
//! is served by its own round, from its memory line, straight to its
//! pops; another line's round *leaves* it the items it stands for and
//! takes the ones behind them ([`super::takeover`]), so rounds of
//! different lines take different items and commit side by side. A
//! request its owner does not serve (the process died or stalls) is taken
//! over: served as docs/design.md §4.2 says, each item written under its own result
//! key `results/(requester, item key)` (leased in the same commit if the
//! class is) and the count lowered (the request cleared at 0) in one
//! commit; the owner's next round collects the results
//! ([`super::line::results`]).
//!
//! The count is kept exact without extra conflicts: whoever serves a
//! request lowers its count by the items it took in the commit that takes
//! them (into pops in memory or into results), so a snapshot read of the
//! line's requests and results at one version always sums to the pops
//! asked for. A line that changes one of its own requests adds a read
//! conflict on it (a concurrent takeover makes one side retry); a line
//! adding a request writes a new key, which never conflicts. New pops
//! join at the back with a new request: a line never keeps its place by
//! raising an old request, so lines take turns.
//!
//! A line whose fulfiller stops at shutdown withdraws its requests and
//! gives back its results ([`super::line::results::withdraw_line`]); one
//! that dies leaves them to be taken over, to expire and to the reaper.
//!
//! The `waiting` counter counts pops: a counted request adds its count.

use crate::envelope::{End, RequestValue, decode_counted_request, encode_counted_request};
use crate::keys::{QueueKeys, RequesterId};
use crate::queue::{Item, QueueError};
use crate::staging::line::{MemoryRequest, Waiting};
use crate::staging::takeover::TakeOver;
use crate::store::Read;
use crate::store::{RangeRead, Store, StoreError, Transaction, decode_mark};
use std::num::NonZeroU64;

/// Bytes of a line id (one per process's pop protocol).
pub const LINE_ID_LEN: usize = 16;
/// Bytes of a counted request's requester: line id, end, lease_ms.
const COUNTED_REQUESTER_LEN: usize = LINE_ID_LEN + 1 + 8;

/// The requester of line `line`'s counted requests of one class.
pub fn requester(line: &[u8], end: End, lease_ms: Option<NonZeroU64>) -> RequesterId {
    assert_eq!(line.len(), LINE_ID_LEN, "a line id");
    let mut id = Vec::with_capacity(COUNTED_REQUESTER_LEN);
    id.extend_from_slice(line);
    id.push(match end {
        End::Front => 0,
        End::Back => 1,
    });
    id.extend_from_slice(&lease_ms.map_or(0, NonZeroU64::get).to_be_bytes());
    RequesterId::from_bytes(id)
}

/// True when `requester` is one of line `line`'s counted requesters.
pub fn is_own(line: &[u8], requester: &RequesterId) -> bool {
    let requester = requester.as_bytes();
    !line.is_empty() && requester.len() == COUNTED_REQUESTER_LEN && requester.starts_with(line)
}

/// The end and lease of a counted requester's pops; `None` if it is not one.
pub fn class_of(requester: &RequesterId) -> Option<(End, Option<NonZeroU64>)> {
    let requester = requester.as_bytes();
    if requester.len() != COUNTED_REQUESTER_LEN {
        return None;
    }
    let end = match requester[LINE_ID_LEN] {
        0 => End::Front,
        1 => End::Back,
        _ => return None,
    };
    let lease_ms = u64::from_be_bytes(requester[LINE_ID_LEN + 1..].try_into().ok()?);
    Some((end, NonZeroU64::new(lease_ms)))
}

/// This process's line in the request subspace (the second level).
#[derive(Clone, Copy)]
pub struct LineLevel<'a> {
    /// This process's line id ([`LINE_ID_LEN`] bytes); empty:
    /// the round neither reads nor writes counted requests of its own.
    pub line: &'a [u8],
    /// This line's counted requesters whose results may be waiting (every
    /// one with a request alive or results uncollected after the last
    /// round; the round's `Fulfilled::collect`).
    pub collect: &'a [RequesterId],
    /// Other lines' counted requests the round serves itself; it leaves
    /// the items of the rest to their owners ([`super::takeover`]).
    pub take_over: TakeOver<'a>,
    /// Another process's request stood in the store lately: this line's
    /// new pops join the store even while none stands there now, rather
    /// than race the other processes' rounds for the head.
    pub contended: bool,
}

impl LineLevel<'static> {
    /// No line in the store: every counted request is served here.
    #[cfg(feature = "testing")]
    pub const NONE: LineLevel<'static> = LineLevel {
        line: b"",
        collect: &[],
        take_over: TakeOver::All,
        contended: false,
    };
}

/// One stored request of a line, as read.
#[derive(Debug, Clone)]
pub struct Counted {
    /// Its key.
    pub key: Vec<u8>,
    /// Its requester.
    pub requester: RequesterId,
    /// What its pops ask for.
    pub request: RequestValue,
    /// Its count as read.
    pub count: u32,
}

/// In `txn`: sets the count of request `counted` to `count` (clearing it
/// at 0), with a read conflict on it, and moves `waiting` by the change.
pub fn set_count_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    counted: &Counted,
    count: u32,
) -> Result<(), StoreError> {
    if count == counted.count {
        return Ok(());
    }
    txn.add_read_conflict_key(&counted.key)?;
    if count == 0 {
        txn.clear(&counted.key)?;
    } else {
        txn.set(
            &counted.key,
            &encode_counted_request(&counted.request, count),
        )?;
    }
    txn.atomic_add(&keys.waiting(), i64::from(count) - i64::from(counted.count))
}

/// In `txn`: adds a counted request for `count` pops by `requester` at
/// the back of the request subspace (a snapshot read of the index mark,
/// raised with `atomic_max`: never conflicts), wakes the fulfillers and
/// makes the reaper look after its deadline. Returns its key.
pub async fn add_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    requester: &RequesterId,
    request: &RequestValue,
    count: u32,
) -> Result<Vec<u8>, StoreError> {
    let mark = decode_mark(
        txn.get(&keys.next_request(), Read::Snapshot)
            .await?
            .as_deref(),
    );
    // Requests added at one snapshot of the mark would tie, and ties go
    // by requester (the line id): one line would always go first when
    // lines ask together. A random index among `TIE_SPREAD` orders them
    // by chance instead; a request added after reads the raised mark, so
    // it still goes behind.
    let index = mark + rand::random::<u64>() % TIE_SPREAD;
    let key = keys.request(index, requester);
    txn.set(&key, &encode_counted_request(request, count))?;
    txn.atomic_max(&keys.next_request(), index + 1)?;
    txn.atomic_add(&keys.waiting(), i64::from(count))?;
    txn.atomic_add(&keys.wake(), 1)?;
    txn.set(&keys.registry_key(), b"")?;
    crate::staging::reap::note_request(txn, keys, request.deadline_ms)?;
    Ok(key)
}

/// How many request indexes a counted request picks its own from (see
/// [`add_in`]).
const TIE_SPREAD: u64 = 256;

/// What [`ask`] wrote.
#[derive(Debug, Default)]
pub struct Asked {
    /// Requesters of the counted requests added.
    pub requesters: Vec<RequesterId>,
    /// Pops they stand for.
    pub pops: u32,
}

/// After a round of line `line` lost a conflict: makes sure the store
/// holds counted requests for the line's waiting pops (`waiting`, by
/// class), adding one at the back for those not yet asked for (asked
/// for: the counts of its requests plus its uncollected results). Reads
/// are snapshot and the only writes are new keys, so this never conflicts
/// and a line that keeps losing rounds still gets in line.
pub async fn ask<S: Store>(
    store: &S,
    keys: &QueueKeys,
    line: &[u8],
    waiting: &[Waiting],
    batch_max: usize,
) -> Result<Asked, QueueError> {
    let mut asked = Asked::default();
    if waiting.is_empty() {
        return Ok(asked);
    }
    let batch = batch_max.max(1);
    let txn = store.begin()?;
    let (begin, end) = keys.requests_range();
    let rows = txn
        .get_range(RangeRead::new(&begin, &end, batch).snapshot())
        .await?;
    if rows.len() >= batch {
        // This line's requests may stand past what was read: asking now
        // could ask twice for the same pops (see `OwnLine::sync_counts_in`).
        return Ok(asked);
    }
    for class in waiting {
        let id = requester(line, class.end, class.lease_ms);
        let requested: u64 = rows
            .iter()
            .filter(|row| keys.request_parts(&row.key).is_some_and(|(_, r)| r == id))
            .filter_map(|row| decode_counted_request(&row.value))
            .map(|(_, count)| u64::from(count))
            .sum();
        let (begin, end) = keys.counted_results_range(&id);
        let pending = txn
            .get_range(RangeRead::new(&begin, &end, batch).snapshot())
            .await?
            .len() as u64;
        let wanted = (class.pops.min(batch) as u64).saturating_sub(requested + pending);
        if wanted == 0 {
            continue;
        }
        let request = RequestValue {
            deadline_ms: class.deadline_ms,
            end: class.end,
            lease_ms: class.lease_ms,
        };
        let count = u32::try_from(wanted).expect("bounded by the batch");
        add_in(&txn, keys, &id, &request, count).await?;
        asked.requesters.push(id);
        asked.pops += count;
    }
    if !asked.requesters.is_empty() {
        txn.commit().await?;
    }
    Ok(asked)
}

/// A round's view of this process's line, after it served what it could.
pub struct OwnLine<'a> {
    /// This process's line id (empty: none).
    pub line: &'a [u8],
    /// The round's memory requests, in line order.
    pub memory: &'a [&'a MemoryRequest],
    /// What each got this round.
    pub got: &'a [Option<Vec<Item>>],
    /// The counted requests the round read (this line's and others').
    pub rows: &'a [Counted],
    /// Pops of each served from this line in the round (its own rows).
    pub served: &'a [u32],
    /// This line's pops not served join the store at the back: another
    /// process's request stands there (or did lately: see
    /// [`LineLevel::contended`]).
    pub joins_store: bool,
    /// The round read every request in the store (fewer than its limit),
    /// so `rows` holds all of this line's.
    pub rows_complete: bool,
}

/// What [`OwnLine::sync_counts_in`] left in the store.
#[derive(Debug, Default)]
pub struct Kept {
    /// This line's requesters with a request alive.
    pub requesters: Vec<RequesterId>,
    /// The key of the line's oldest request alive.
    pub oldest: Option<Vec<u8>>,
    /// Pops a request was added for.
    pub pops_asked: usize,
}

impl Kept {
    /// Notes `key` as a request alive, keeping the oldest.
    fn note_oldest(&mut self, key: &[u8]) {
        if self.oldest.as_deref().is_none_or(|oldest| key < oldest) {
            self.oldest = Some(key.to_vec());
        }
    }
}

impl OwnLine<'_> {
    /// In the round's `txn`: brings this line's counted requests, class by
    /// class, to the number of its pops still waiting unserved. Too many:
    /// the newest are lowered first (the oldest keep their place). Too
    /// few while another process's request stands in the store: one is
    /// added at the back for the rest (none is needed otherwise: this
    /// line's own next round serves them first).
    pub async fn sync_counts_in<T: Transaction>(
        &self,
        txn: &T,
        keys: &QueueKeys,
    ) -> Result<Kept, StoreError> {
        let mut kept = Kept::default();
        if self.line.is_empty() {
            return Ok(kept);
        }
        let own_rows: Vec<usize> = (0..self.rows.len())
            .filter(|&r| is_own(self.line, &self.rows[r].requester))
            .collect();
        let waiting: Vec<&MemoryRequest> = (0..self.memory.len())
            .filter(|&i| self.got[i].is_none() && self.memory[i].line.stands_in_store())
            .map(|i| self.memory[i])
            .collect();
        for class in self.classes(&own_rows, &waiting) {
            self.sync_class_in(txn, keys, class, (&own_rows, &waiting), &mut kept)
                .await?;
        }
        Ok(kept)
    }

    /// The classes (end, lease) of this line's own rows and of its pops
    /// waiting in the store's line, each once, in order of appearance.
    fn classes(
        &self,
        own_rows: &[usize],
        waiting: &[&MemoryRequest],
    ) -> Vec<(End, Option<NonZeroU64>)> {
        let mut classes: Vec<(End, Option<NonZeroU64>)> = Vec::new();
        let row_classes = own_rows
            .iter()
            .map(|&r| (self.rows[r].request.end, self.rows[r].request.lease_ms));
        let pop_classes = waiting
            .iter()
            .filter(|_| self.joins_store)
            .map(|m| (m.line.request.end, m.line.request.lease_ms));
        for class in row_classes.chain(pop_classes) {
            if !classes.contains(&class) {
                classes.push(class);
            }
        }
        classes
    }

    /// [`Self::sync_counts_in`] for one class: its rows lowered to the
    /// pops still waiting (the newest first), or one request added for
    /// the pops no row asks for yet.
    async fn sync_class_in<T: Transaction>(
        &self,
        txn: &T,
        keys: &QueueKeys,
        (end, lease_ms): (End, Option<NonZeroU64>),
        (own_rows, waiting): (&[usize], &[&MemoryRequest]),
        kept: &mut Kept,
    ) -> Result<(), StoreError> {
        let pops: Vec<&&MemoryRequest> = waiting
            .iter()
            .filter(|m| (m.line.request.end, m.line.request.lease_ms) == (end, lease_ms))
            .collect();
        let rows: Vec<usize> = own_rows
            .iter()
            .copied()
            .filter(|&r| {
                (self.rows[r].request.end, self.rows[r].request.lease_ms) == (end, lease_ms)
            })
            .collect();
        let mut counts: Vec<u32> = rows
            .iter()
            .map(|&r| self.rows[r].count - self.served[r])
            .collect();
        let asked: u64 = counts.iter().map(|&c| u64::from(c)).sum();
        let mut excess = asked.saturating_sub(pops.len() as u64);
        for count in counts.iter_mut().rev() {
            let cut = excess.min(u64::from(*count)) as u32;
            *count -= cut;
            excess -= u64::from(cut);
        }
        let mut alive = false;
        for (&r, &count) in rows.iter().zip(&counts) {
            set_count_in(txn, keys, &self.rows[r], count)?;
            if count > 0 {
                alive = true;
                kept.note_oldest(&self.rows[r].key);
            }
        }
        let missing = (pops.len() as u64).saturating_sub(asked);
        let id = requester(self.line, end, lease_ms);
        // Rows past the round's read may be this line's: asking again
        // for pops already asked for there would pile up a request
        // per round (the line's own fulfiller serves them meanwhile).
        if missing > 0 && self.joins_store && self.rows_complete {
            let request = RequestValue {
                deadline_ms: pops
                    .iter()
                    .map(|m| m.line.request.deadline_ms)
                    .max()
                    .expect("pops wait"),
                end,
                lease_ms,
            };
            let count = u32::try_from(missing).expect("bounded by the batch");
            let key = add_in(txn, keys, &id, &request, count).await?;
            kept.pops_asked += count as usize;
            alive = true;
            kept.note_oldest(&key);
        }
        if alive {
            kept.requesters.push(id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lines_requesters_are_its_own_and_no_one_elses() {
        let line = [7u8; LINE_ID_LEN];
        let other = [8u8; LINE_ID_LEN];
        let front = requester(&line, End::Front, None);
        let leased = requester(&line, End::Front, NonZeroU64::new(30_000));
        assert_ne!(front, leased, "one requester per class");
        assert!(is_own(&line, &front) && is_own(&line, &leased));
        assert!(!is_own(&other, &front));
        assert!(
            !is_own(&line, &RequesterId::from_bytes(line.to_vec())),
            "a plain request's id is not counted"
        );
        assert!(!is_own(&[], &front), "no line: nothing is its own");
    }
}
