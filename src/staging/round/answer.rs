//! What a fulfillment round is given ([`LocalHandoff`]: this process's
//! pops, and how their items are handed over) and what it returns
//! ([`Fulfilled`]), between [`super::fulfill`] and the loop in
//! [`super::fulfillment_loop`]. The answer is split by who uses it: the hand-off
//! ([`Handover`]), the stats ([`RoundCounts`]), the loop's memory between
//! rounds ([`Carry`]) and what the loop waits on next ([`Next`], decided
//! by the pure [`what_next`]).

use crate::keys::RequesterId;
use crate::lease::{LeaseError, Receipt};
use crate::queue::Item;
use crate::queue::limits::Held;
use crate::staging::line::{LocalId, MemoryRequest};
use crate::store::Watch;

/// What one fulfillment transaction did.
#[derive(Debug, Default)]
pub struct Fulfilled {
    /// For the pops, once the commit is durable.
    pub handover: Handover,
    /// For the stats.
    pub counts: RoundCounts,
    /// For the loop's next round.
    pub carry: Carry,
    /// What the loop waits on before its next round.
    pub next: Next,
}

/// What goes to this process's pops once the round's commit is durable.
#[derive(Debug, Default)]
pub struct Handover {
    /// Items for requesters in this process (no result was written for
    /// them), in service order.
    pub handed: Vec<(LocalId, Vec<Item>)>,
    /// Memory requests of pops that must not wait, which this round's own
    /// read found nothing visible for: answered "empty".
    pub emptied: Vec<u64>,
    /// Acks riding on memory requests (by their place in the line) that
    /// this round's commit settled: one outcome per receipt, in order.
    pub acked: Vec<(u64, Vec<Result<(), LeaseError>>)>,
}

impl Handover {
    /// True when the commit hands something to a pop here (items, or ack
    /// outcomes): an unknown commit outcome must then be resolved.
    pub fn is_empty(&self) -> bool {
        self.handed.is_empty() && self.acked.is_empty()
    }
}

/// What one round did, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RoundCounts {
    /// Requests served with an item.
    pub served: usize,
    /// Requests cleared because their deadline had passed.
    pub expired: usize,
    /// Live requests left waiting for want of items.
    pub unserved: usize,
    /// Items taken from the queue (a memory request may take several).
    pub items: usize,
    /// Results of this process's counted requests collected (handed over
    /// with `handed`, or given back to the queue in the same commit).
    pub collected: usize,
    /// Items written as results of other processes' counted requests.
    pub results_written: usize,
    /// Pops this round added counted requests for.
    pub pops_asked: usize,
    /// Items left in the queue for other lines' counted requests, which
    /// their owners' rounds take ([`crate::staging::takeover`]).
    pub left_items: usize,
    /// Receipts acked in this round's commit.
    pub acked: usize,
}

impl RoundCounts {
    /// True when the round met no request at all: the loop may retire.
    pub fn met_no_request(&self) -> bool {
        self.unserved == 0 && self.served == 0 && self.expired == 0 && self.left_items == 0
    }
}

/// What the loop keeps from one round for the next.
#[derive(Debug, Default)]
pub struct Carry {
    /// This process's counted requesters whose results the next round
    /// must look for (see [`crate::staging::counted::LineLevel::collect`]).
    pub collect: Vec<RequesterId>,
    /// Requests of other lines this round left items for, by key, with
    /// their counts as read.
    pub left_for: Vec<(Vec<u8>, u32)>,
    /// Another process's request stood in the store.
    pub others_ahead: bool,
}

/// What the loop waits on before its next round.
#[derive(Debug, Default)]
pub struct Next {
    /// Armed when nothing more can be done now: fires on a new request
    /// (none waiting) or a push (requests waiting, no items). Unset: the
    /// next round runs at once.
    pub watch: Option<Watch>,
    /// Fires when this process's oldest counted request changes: another
    /// process's fulfiller served it (its results wait to be collected).
    pub own_watch: Option<Watch>,
    /// Earliest deadline among the unserved requests, in epoch ms.
    pub next_deadline_ms: Option<u64>,
}

/// Which key a round's commit watches for the loop's next round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOn {
    /// Nothing: more can be done at once.
    Now,
    /// The queue's depth: a push, or another line taking the items left
    /// to it.
    Depth,
    /// The wake key: a new request, a pop joining this line, or another
    /// line's request turning stale.
    Wake,
    /// A limit held pops back (see [`crate::queue::limits`]): the wake
    /// key (a settings change, a new request), with `leases` the `leased`
    /// count (an ack, nack or expiry frees a place), with `depth` the
    /// depth (a pop no limit held found no item); the rate's next token is
    /// the loop's deadline.
    Limited {
        /// `leases_max` held a leasing pop back.
        leases: bool,
        /// A pop no limit held back was left waiting for want of items.
        depth: bool,
    },
}

/// What a round saw, as [`what_next`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// What the round counted.
    pub counts: RoundCounts,
    /// The byte bound held items back.
    pub bytes_full: bool,
    /// The round's read of the items held every visible item.
    pub pool_is_everything: bool,
    /// The queue is paused: the round read no item.
    pub paused: bool,
    /// What the queue's limits held back.
    pub held: Held,
    /// A pop no limit held back was left waiting for want of items.
    pub starved: bool,
}

/// What the loop waits on after a round that saw `seen`: requests remain
/// but items ran out, wake on the next push; a bound stopped the round
/// (bytes, or items per round), go on at once.
pub fn what_next(seen: Seen) -> WaitOn {
    let c = &seen.counts;
    if seen.held.any() && c.unserved > 0 && !seen.bytes_full {
        // Going on at once would find the limit where it is.
        return WaitOn::Limited {
            leases: seen.held.leases,
            depth: seen.starved,
        };
    }
    if c.left_items == 0 {
        return if c.unserved > 0 && !seen.bytes_full && seen.pool_is_everything {
            // A resume bumps the wake key; pushes to a paused queue need
            // not wake the loop.
            if seen.paused {
                WaitOn::Wake
            } else {
                WaitOn::Depth
            }
        } else {
            WaitOn::Now
        };
    }
    if seen.bytes_full || (c.unserved == 0 && c.served + c.expired + c.collected + c.pops_asked > 0)
    {
        // More to do now: a bound held items back, or this round served
        // (its pops come back) or asked (the next round serves the new
        // request from the items behind those left to other lines).
        WaitOn::Now
    } else if c.unserved > 0 {
        // Items stand, but were left to other lines: their owners taking
        // them (or a push) changes the depth.
        WaitOn::Depth
    } else {
        // Nothing here but other lines' requests.
        WaitOn::Wake
    }
}

/// How a fulfiller hands items to requesters in its own process.
#[derive(Clone, Copy)]
pub struct LocalHandoff<'a> {
    /// True for a registered requester waiting in this process.
    pub is_local: &'a (dyn Fn(&RequesterId) -> bool + Sync),
    /// The memory requests of this process, in arrival order (at most the
    /// batch bound is served).
    pub memory: &'a [MemoryRequest],
    /// Acks riding on those memory requests, by their place in the line:
    /// acked in the round's commit, before its items are taken.
    pub acks: &'a [(u64, Vec<Receipt>)],
    /// A key only this fulfiller writes: every transaction that hands
    /// items over sets it to its `attempt`, so a commit whose outcome is
    /// unknown can be told applied (hand the items over) or not (they are
    /// still in the queue).
    pub marker_key: &'a [u8],
    /// This transaction's number, unique for `marker_key`.
    pub attempt: u64,
}

#[cfg(feature = "testing")]
fn never_local(_: &RequesterId) -> bool {
    false
}

impl LocalHandoff<'static> {
    /// No requester is local: every served request gets a result.
    #[cfg(feature = "testing")]
    pub const NONE: LocalHandoff<'static> = LocalHandoff {
        is_local: &never_local,
        memory: &[],
        acks: &[],
        marker_key: b"",
        attempt: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(counts: RoundCounts, bytes_full: bool, pool_is_everything: bool) -> Seen {
        Seen {
            counts,
            bytes_full,
            pool_is_everything,
            paused: false,
            held: Held::default(),
            starved: false,
        }
    }

    #[test]
    fn a_paused_round_with_pops_left_waits_for_the_resume_not_a_push() {
        let counts = RoundCounts {
            unserved: 2,
            ..RoundCounts::default()
        };
        let paused = Seen {
            paused: true,
            ..seen(counts, false, true)
        };
        assert_eq!(what_next(paused), WaitOn::Wake);
    }

    #[test]
    fn a_round_a_limit_held_back_waits_for_the_limit_not_at_once() {
        let counts = RoundCounts {
            served: 2,
            unserved: 3,
            ..RoundCounts::default()
        };
        let rate = Held {
            until_ms: Some(5),
            leases: false,
        };
        // Items remain past the read: without the limit, at once.
        let held = Seen {
            held: rate,
            ..seen(counts, false, false)
        };
        let limited = |leases, depth| WaitOn::Limited { leases, depth };
        assert_eq!(what_next(held), limited(false, false));
        let leases = Seen {
            held: Held {
                leases: true,
                ..Held::default()
            },
            starved: true,
            ..seen(counts, false, false)
        };
        assert_eq!(what_next(leases), limited(true, true));
    }

    #[test]
    fn requests_left_with_every_item_taken_wait_for_a_push() {
        let counts = RoundCounts {
            served: 3,
            unserved: 2,
            ..RoundCounts::default()
        };
        assert_eq!(what_next(seen(counts, false, true)), WaitOn::Depth);
        // Items may remain past the read, or the byte bound held them: now.
        assert_eq!(what_next(seen(counts, false, false)), WaitOn::Now);
        assert_eq!(what_next(seen(counts, true, true)), WaitOn::Now);
    }

    #[test]
    fn a_round_that_left_nobody_waiting_goes_on_at_once() {
        let counts = RoundCounts {
            served: 5,
            ..RoundCounts::default()
        };
        assert_eq!(what_next(seen(counts, false, true)), WaitOn::Now);
    }

    #[test]
    fn items_left_to_other_lines() {
        let left = RoundCounts {
            left_items: 3,
            ..RoundCounts::default()
        };
        // Only other lines' requests: a new request or a stale one wakes.
        assert_eq!(what_next(seen(left, false, true)), WaitOn::Wake);
        // This line waits too: the owners taking theirs moves the depth.
        let waiting = RoundCounts {
            unserved: 1,
            ..left
        };
        assert_eq!(what_next(seen(waiting, false, true)), WaitOn::Depth);
        // It served or asked: the next round comes at once.
        for counts in [
            RoundCounts { served: 1, ..left },
            RoundCounts {
                pops_asked: 2,
                ..left
            },
            RoundCounts {
                collected: 1,
                ..left
            },
        ] {
            assert_eq!(what_next(seen(counts, false, true)), WaitOn::Now);
        }
        // The byte bound held items back: at once, waiting or not.
        assert_eq!(what_next(seen(waiting, true, true)), WaitOn::Now);
    }

    #[test]
    fn only_a_round_that_met_nobody_may_retire() {
        assert!(RoundCounts::default().met_no_request());
        for counts in [
            RoundCounts {
                unserved: 1,
                ..RoundCounts::default()
            },
            RoundCounts {
                left_items: 1,
                ..RoundCounts::default()
            },
            RoundCounts {
                expired: 1,
                ..RoundCounts::default()
            },
        ] {
            assert!(!counts.met_no_request());
        }
    }
}
