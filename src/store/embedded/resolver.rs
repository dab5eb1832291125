//! The resolver: FoundationDB's conflict rule, in process.
//!
//! It keeps the write footprint of recent commits, by commit version, only
//! as long as a live transaction can need it: entries older than the oldest
//! live read version, or older than the transaction age limit, are dropped.
//! A transaction whose read version falls below what is kept is too old.
//!
//! Versions count committed groups: the group written as version `v` is
//! visible to transactions whose read version is `> v`, so a transaction
//! reading at `rv` conflicts with writes at versions `>= rv`.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::time::{Duration, Instant};

use super::empty_ranges::EmptyRanges;
use super::write_set::WriteSet;

/// One committed batch's footprint, for pruning.
#[derive(Debug)]
struct LogEntry {
    version: u64,
    committed_at: Instant,
    keys: Vec<Vec<u8>>,
}

/// The newest writes of one recently written key.
#[derive(Debug, Clone, Copy)]
struct Point {
    /// Newest commit version that wrote it.
    written: u64,
    /// Newest commit version that set (or added to) it: the writes that
    /// can end a stretch's emptiness (clears cannot). Never after `written`.
    inserted: Option<u64>,
}

/// Conflict history, live read versions and known-empty stretches, under one lock.
#[derive(Debug)]
pub(crate) struct Resolver {
    /// Recently written keys. One map for both versions: every commit
    /// inserts and every prune removes each key once, on the committer's
    /// thread (two maps were ~15% of its time with 200,000 queues due).
    points: BTreeMap<Vec<u8>, Point>,
    /// Recently cleared ranges: (begin, end, version).
    range_writes: Vec<(Vec<u8>, Vec<u8>, u64)>,
    log: VecDeque<LogEntry>,
    /// Every write at a version `>= floor` is still recorded.
    floor: u64,
    /// The newest version given to a group.
    pub(crate) last_version: u64,
    /// Read versions of live transactions, with how many hold each.
    live: BTreeMap<u64, usize>,
    /// Stretches known to be empty.
    pub(crate) empty: EmptyRanges,
    age_max: Duration,
}

impl Resolver {
    pub(crate) fn new(floor: u64, age_max: Duration) -> Self {
        Resolver {
            points: BTreeMap::new(),
            range_writes: Vec::new(),
            log: VecDeque::new(),
            floor,
            last_version: floor.saturating_sub(1),
            live: BTreeMap::new(),
            empty: EmptyRanges::default(),
            age_max,
        }
    }

    /// A transaction at `read_version` began.
    pub(crate) fn register(&mut self, read_version: u64) {
        *self.live.entry(read_version).or_insert(0) += 1;
    }

    /// A transaction at `read_version` ended.
    pub(crate) fn unregister(&mut self, read_version: u64) {
        let remaining = self
            .live
            .get_mut(&read_version)
            .expect("every unregistered read version was registered");
        *remaining -= 1;
        if *remaining == 0 {
            self.live.remove(&read_version);
        }
    }

    /// Number of transactions currently live.
    pub(crate) fn live_count(&self) -> usize {
        self.live.values().sum()
    }

    /// Number of keys in the conflict history (bounded by pruning).
    pub(crate) fn history_len(&self) -> usize {
        self.points.len() + self.range_writes.len()
    }

    /// True when a transaction at `read_version` can no longer be checked.
    pub(crate) fn is_too_old(&self, read_version: u64) -> bool {
        read_version < self.floor
    }

    /// True when a write at a version `>= read_version` intersects any of `ranges`.
    pub(crate) fn intersects_since(
        &self,
        read_version: u64,
        ranges: &[(Vec<u8>, Vec<u8>)],
    ) -> bool {
        ranges.iter().any(|(begin, end)| {
            written_since(&self.points, begin, end, read_version, |p| Some(p.written))
                || self
                    .range_writes
                    .iter()
                    .any(|(b, e, version)| *version >= read_version && b < end && begin < e)
        })
    }

    /// True when a write at a version `>= read_version` touched `key` (a
    /// commit of this group recorded before counts too).
    pub(crate) fn key_written_since(&self, read_version: u64, key: &[u8]) -> bool {
        self.points
            .get(key)
            .is_some_and(|point| point.written >= read_version)
            || self.range_writes.iter().any(|(b, e, version)| {
                *version >= read_version && b.as_slice() <= key && key < e.as_slice()
            })
    }

    /// Records an accepted commit's writes at `version` and splits the
    /// empty stretches it writes into.
    pub(crate) fn record_writes(&mut self, version: u64, writes: &WriteSet) {
        let mut keys = Vec::with_capacity(writes.ops.len());
        for (key, op) in &writes.ops {
            let inserts = !matches!(op, super::write_set::KeyOp::Clear);
            let inserted = inserts.then_some(version);
            match self.points.get_mut(key.as_slice()) {
                Some(point) => {
                    debug_assert!(point.written <= version, "versions only grow");
                    point.written = version;
                    point.inserted = inserted.or(point.inserted);
                }
                None => {
                    self.points.insert(
                        key.clone(),
                        Point {
                            written: version,
                            inserted,
                        },
                    );
                }
            }
            keys.push(key.clone());
            if inserts {
                self.empty.split_at(key);
            }
        }
        for (begin, end) in &writes.cleared {
            self.range_writes
                .push((begin.clone(), end.clone(), version));
        }
        match self.log.back_mut() {
            Some(last) if last.version == version => last.keys.extend(keys),
            _ => self.log.push_back(LogEntry {
                version,
                committed_at: Instant::now(),
                keys,
            }),
        }
    }

    /// Records that a reader at `read_version` saw `[begin, end)` empty, if no
    /// commit since set a key inside it (else the observation is stale and
    /// dropped). Clears since then do not matter: they only empty it more,
    /// and under contention the range a reader saw empty is exactly where
    /// other pops are clearing.
    pub(crate) fn observe_empty(&mut self, read_version: u64, begin: Vec<u8>, end: Vec<u8>) {
        if begin >= end || self.is_too_old(read_version) {
            return;
        }
        if !written_since(&self.points, &begin, &end, read_version, |p| p.inserted) {
            let horizon = self.live.keys().next().copied().unwrap_or(read_version);
            self.empty.record(&begin, &end, read_version, horizon);
        }
    }

    /// Drops history no live transaction can need: versions below the oldest
    /// live read version (and below `visible`, the first unpublished
    /// version), and anything older than the age limit.
    pub(crate) fn prune(&mut self, visible: u64) {
        let horizon = self
            .live
            .keys()
            .next()
            .copied()
            .unwrap_or(visible)
            .min(visible);
        let now = Instant::now();
        while let Some(entry) = self.log.front() {
            let unneeded = entry.version < horizon;
            let expired = now.duration_since(entry.committed_at) > self.age_max;
            if !unneeded && !expired {
                break;
            }
            let entry = self.log.pop_front().expect("front exists");
            for key in entry.keys {
                let Some(point) = self.points.get_mut(key.as_slice()) else {
                    continue;
                };
                if point.written == entry.version {
                    // Its newest write is pruned, so every older one was.
                    self.points.remove(&key);
                } else if point.inserted == Some(entry.version) {
                    point.inserted = None;
                }
            }
            self.floor = self.floor.max(entry.version + 1);
        }
        let floor = self.floor;
        self.range_writes
            .retain(|(_, _, version)| *version >= floor);
        self.empty.merge_deferred(horizon);
        self.empty.coalesce(horizon);
    }
}

/// True when `points` holds a key in `[begin, end)` whose `version` (its
/// newest write, or newest insert) is at or after `read_version`.
fn written_since(
    points: &BTreeMap<Vec<u8>, Point>,
    begin: &[u8],
    end: &[u8],
    read_version: u64,
    version: impl Fn(&Point) -> Option<u64>,
) -> bool {
    points
        .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
        .any(|(_, point)| version(point).is_some_and(|v| v >= read_version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_only_with_writes_at_or_after_the_read_version() {
        let mut resolver = Resolver::new(0, Duration::from_secs(5));
        let mut writes = WriteSet::default();
        writes.set(b"k", b"v");
        resolver.record_writes(7, &writes);
        let range = [(b"a".to_vec(), b"z".to_vec())];
        assert!(resolver.intersects_since(7, &range));
        assert!(!resolver.intersects_since(8, &range));
        assert!(!resolver.intersects_since(0, &[(b"l".to_vec(), b"z".to_vec())]));
    }

    #[test]
    fn emptiness_survives_later_clears_but_not_later_sets() {
        let mut resolver = Resolver::new(0, Duration::from_secs(5));
        resolver.register(5);
        let mut clears = WriteSet::default();
        clears.clear(b"c");
        resolver.record_writes(6, &clears);
        resolver.observe_empty(5, b"a".to_vec(), b"m".to_vec());
        assert_eq!(
            resolver.empty.skip_forward(b"a", b"z", 5),
            b"m",
            "a clear keeps it empty"
        );
        let mut sets = WriteSet::default();
        sets.set(b"q", b"v");
        resolver.record_writes(7, &sets);
        resolver.observe_empty(5, b"n".to_vec(), b"t".to_vec());
        assert_eq!(
            resolver.empty.skip_forward(b"n", b"z", 5),
            b"n",
            "a set after the read voids it"
        );
    }

    #[test]
    fn prune_keeps_what_live_readers_need() {
        let mut resolver = Resolver::new(0, Duration::from_secs(5));
        resolver.register(5);
        for version in 3..10 {
            let mut writes = WriteSet::default();
            writes.set(format!("k{version}").as_bytes(), b"v");
            resolver.record_writes(version, &writes);
        }
        resolver.prune(10);
        assert_eq!(
            resolver.history_len(),
            5,
            "versions 5..10 stay for the reader at 5"
        );
        assert!(!resolver.is_too_old(5));
        resolver.unregister(5);
        resolver.prune(10);
        assert_eq!(resolver.history_len(), 0);
        assert!(resolver.is_too_old(9));
    }
}
