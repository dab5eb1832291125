//! What a fulfillment round is given ([`LocalHandoff`]: this process's
//! pops, and how their items are handed over) and what it did
//! ([`Fulfilled`]), between [`super::fulfill`] and the loop in
//! [`super::fulfiller`].

use crate::queue::Item;
use crate::staging::line::{LocalId, MemoryRequest};
use crate::store::Watch;

/// What one fulfillment transaction did.
#[derive(Debug, Default)]
pub struct Fulfilled {
    /// Requests served with an item.
    pub served: usize,
    /// Requests cleared because their deadline had passed.
    pub expired: usize,
    /// Live requests left waiting for want of items.
    pub unserved: usize,
    /// True when the batch was full: more requests may be waiting.
    /// (Informational: the loop decides on [`Self::watch`], which is unset
    /// whenever requests were left while items remained.)
    pub batch_full: bool,
    /// Earliest deadline among the unserved requests, in epoch ms.
    pub next_deadline_ms: Option<u64>,
    /// Armed when nothing more can be done now: fires on a new request
    /// (none waiting) or a push (requests waiting, no items).
    pub watch: Option<Watch>,
    /// Items taken from the queue (a memory request may take several).
    pub items: usize,
    /// Items for requesters in this process, to hand over once the commit
    /// is durable (no result was written for them).
    pub handed: Vec<(LocalId, Vec<Item>)>,
    /// Memory requests of pops that must not wait, which this round's own
    /// read found nothing visible for: answered "empty".
    pub emptied: Vec<u64>,
    /// Results of this process's counted requests collected (handed over
    /// with `handed`, or given back to the queue in the same commit).
    pub collected: usize,
    /// Items written as results of other processes' counted requests.
    pub results_written: usize,
    /// Pops this round added counted requests for.
    pub pops_asked: usize,
    /// Fires when this process's oldest counted request changes: another
    /// process's fulfiller served it (its results wait to be collected).
    pub own_watch: Option<Watch>,
    /// This process's counted requesters whose results the next round
    /// must look for (see [`crate::staging::counted::LineLevel::collect`]).
    pub collect: Vec<Vec<u8>>,
    /// Items left in the queue for other lines' counted requests, which
    /// their owners' rounds take ([`crate::staging::takeover`]).
    pub left_items: usize,
    /// Those requests, by key, with their counts as read.
    pub left_for: Vec<(Vec<u8>, u32)>,
    /// Another process's request stood in the store.
    pub others_ahead: bool,
}

/// How a fulfiller hands items to requesters in its own process.
#[derive(Clone, Copy)]
pub struct LocalHandoff<'a> {
    /// True for a registered requester waiting in this process.
    pub is_local: &'a (dyn Fn(&[u8]) -> bool + Sync),
    /// The memory requests of this process, in arrival order (at most the
    /// batch bound is served).
    pub memory: &'a [MemoryRequest],
    /// A key only this fulfiller writes: every transaction that hands
    /// items over sets it to its `attempt`, so a commit whose outcome is
    /// unknown can be told applied (hand the items over) or not (they are
    /// still in the queue).
    pub marker_key: &'a [u8],
    /// This transaction's number, unique for `marker_key`.
    pub attempt: u64,
}

fn never_local(_: &[u8]) -> bool {
    false
}

impl LocalHandoff<'static> {
    /// No requester is local: every served request gets a result.
    pub const NONE: LocalHandoff<'static> = LocalHandoff {
        is_local: &never_local,
        memory: &[],
        marker_key: b"",
        attempt: 0,
    };
}
