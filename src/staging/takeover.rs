//! Who serves another process's counted request: its owner, unless it
//! cannot.
//!
//! A counted request ([`super::counted`]) fixes a line's place in request
//! order. A round of another process that meets it in that order does not
//! take items for it: it *leaves* the items the request stands for (the
//! first `count` of the request's end, after those left for earlier
//! requests) in the queue for the owner's own round, and takes the ones
//! behind them for its own pops. The two rounds then take different items
//! and commit together without conflict, and the items reach the owner's
//! pops in memory: no result write, no collect, no extra commit. Request
//! order still decides who gets which items, so fairness holds exactly as
//! if the other round had served the request.
//!
//! Leaving is consistent across rounds at different read versions: a
//! request and the items it takes change in one commit (the owner lowers
//! its count in the commit that takes them), so every snapshot sees the
//! requests ahead and the items left for them agree; a round that read an
//! older snapshot overlaps at worst one other round's items and conflicts.
//!
//! A request whose owner does not serve it (the process died, or its
//! fulfiller stalls) would hold its items back until its deadline, so a
//! round that has left items for the same request, unchanged, for
//! [`TAKEOVER_AFTER_MS`] *takes it over*: serves it the way docs/design.md §4.2
//! describes, one result per item, which the owner collects or the reaper
//! returns. [`Left`] keeps that watch in each fulfillment loop.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a round leaves items for another process's counted request
/// that stays unchanged before serving it itself. A live owner serves its
/// request in its next round (a few ms); the bound only costs order and
/// latency for a line that cannot (its items stay in the queue meanwhile,
/// every other pop is served behind them), and taking over a live line's
/// request is safe, only dearer (a result and a collect per item).
pub const TAKEOVER_AFTER_MS: u64 = 100;

/// Which other processes' counted requests a round serves itself.
#[derive(Clone, Copy)]
pub enum TakeOver<'a> {
    /// Every one (a round with no line of its own: docs/design.md §4.1 read literally).
    #[cfg(feature = "testing")]
    All,
    /// Only these (request keys): the rest are left to their owners.
    Only(&'a [Vec<u8>]),
}

impl TakeOver<'_> {
    /// True when the round serves the request at `key` itself.
    pub fn covers(&self, key: &[u8]) -> bool {
        match self {
            #[cfg(feature = "testing")]
            TakeOver::All => true,
            TakeOver::Only(keys) => keys.iter().any(|k| k == key),
        }
    }
}

/// One fulfillment loop's memory of the requests it left items for: each
/// request key with the count it had and since when it was seen so.
/// Bounded: only the last round's requests are kept (at most
/// `fulfill_batch_max`).
#[derive(Debug, Default)]
pub struct Left {
    seen: HashMap<Vec<u8>, (u32, Instant)>,
}

impl Left {
    /// After a round that committed: `left` are the requests it left
    /// items for, with their counts. One seen again with the same count
    /// keeps its time; a changed one (its owner served some) starts over;
    /// one not left this time is forgotten.
    pub fn note(&mut self, left: Vec<(Vec<u8>, u32)>, now: Instant) {
        let mut seen = HashMap::with_capacity(left.len());
        for (key, count) in left {
            let since = match self.seen.get(&key) {
                Some(&(was, since)) if was == count => since,
                _ => now,
            };
            seen.insert(key, (count, since));
        }
        self.seen = seen;
    }

    /// The requests left unchanged for [`TAKEOVER_AFTER_MS`] by `now`.
    pub fn stale(&self, now: Instant) -> Vec<Vec<u8>> {
        let after = Duration::from_millis(TAKEOVER_AFTER_MS);
        self.seen
            .iter()
            .filter(|(_, (_, since))| now.saturating_duration_since(*since) >= after)
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// How long until the next request turns stale (none: no request
    /// left): the loop looks again by then even if nothing wakes it.
    pub fn next_due(&self, now: Instant) -> Option<Duration> {
        let after = Duration::from_millis(TAKEOVER_AFTER_MS);
        self.seen
            .values()
            .map(|(_, since)| (*since + after).saturating_duration_since(now))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_turns_stale_only_while_it_stays_unchanged() {
        let start = Instant::now();
        let after = Duration::from_millis(TAKEOVER_AFTER_MS);
        let mut left = Left::default();
        left.note(vec![(b"a".to_vec(), 3), (b"b".to_vec(), 5)], start);
        assert!(left.stale(start).is_empty());
        assert_eq!(left.next_due(start), Some(after));
        // `a` served in part (its count changed), `b` unchanged.
        left.note(
            vec![(b"a".to_vec(), 2), (b"b".to_vec(), 5)],
            start + after / 2,
        );
        assert_eq!(left.stale(start + after), [b"b".to_vec()]);
        assert_eq!(left.next_due(start + after), Some(Duration::ZERO));
        // Not left this time: forgotten.
        left.note(vec![(b"a".to_vec(), 2)], start + after);
        assert!(left.stale(start + after).is_empty());
        assert_eq!(left.stale(start + after * 2), [b"a".to_vec()]);
        left.note(Vec::new(), start + after * 2);
        assert_eq!(left.next_due(start), None);
    }

    #[test]
    fn all_covers_every_request_and_only_the_listed_ones() {
        let listed = vec![b"a".to_vec()];
        assert!(TakeOver::All.covers(b"z"));
        assert!(TakeOver::Only(&listed).covers(b"a"));
        assert!(!TakeOver::Only(&listed).covers(b"z"));
    }
}
