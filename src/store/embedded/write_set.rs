//! A transaction's uncommitted writes, and reads through them
//! (read-your-writes).

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::store::{Atomic, KeyValue, apply_add};

/// What a transaction did to one key, last write wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyOp {
    /// Set to this value.
    Set(Vec<u8>),
    /// Cleared.
    Clear,
    /// Apply these mutations, in order, to whatever is committed at commit time.
    Atomic(Vec<Atomic>),
}

/// The writes of one transaction.
///
/// `ops` holds per-key writes; `cleared` holds the ranges cleared with
/// `clear_range`, sorted and disjoint. A key in `ops` shadows `cleared`,
/// because the only way a key gets an op after a range clear is a later
/// write to it.
#[derive(Debug, Default)]
pub(crate) struct WriteSet {
    pub(crate) ops: BTreeMap<Vec<u8>, KeyOp>,
    pub(crate) cleared: Vec<(Vec<u8>, Vec<u8>)>,
    /// Bytes of keys and values written, for the transaction size limit.
    pub(crate) bytes: usize,
}

/// How a key reads through the write set.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Overlay {
    /// The write set decides: this value, or absent.
    Known(Option<Vec<u8>>),
    /// The committed value with these mutations applied.
    Apply(Vec<Atomic>),
    /// The write set does not touch the key.
    Untouched,
}

impl WriteSet {
    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.cleared.is_empty()
    }

    pub(crate) fn set(&mut self, key: &[u8], value: &[u8]) {
        self.bytes += key.len() + value.len();
        self.ops.insert(key.to_vec(), KeyOp::Set(value.to_vec()));
    }

    pub(crate) fn clear(&mut self, key: &[u8]) {
        self.bytes += key.len();
        self.ops.insert(key.to_vec(), KeyOp::Clear);
    }

    pub(crate) fn atomic(&mut self, key: &[u8], mutation: Atomic) {
        self.bytes += key.len() + 8;
        let op = match self.ops.remove(key) {
            Some(KeyOp::Set(value)) => KeyOp::Set(mutation.apply(Some(&value))),
            Some(KeyOp::Clear) => KeyOp::Set(mutation.apply(None)),
            Some(KeyOp::Atomic(mut mutations)) => {
                match (mutations.last_mut(), mutation) {
                    // Consecutive adds fold into one, so a counter bumped in
                    // a loop stays one mutation.
                    (Some(Atomic::Add(previous)), Atomic::Add(delta)) => {
                        *previous = previous.wrapping_add(delta);
                    }
                    (Some(Atomic::Max(previous)), Atomic::Max(value)) => {
                        *previous = (*previous).max(value)
                    }
                    _ => mutations.push(mutation),
                }
                KeyOp::Atomic(mutations)
            }
            None if self.is_cleared(key) => KeyOp::Set(mutation.apply(None)),
            None => KeyOp::Atomic(vec![mutation]),
        };
        self.ops.insert(key.to_vec(), op);
    }

    pub(crate) fn clear_range(&mut self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        self.bytes += begin.len() + end.len();
        let doomed: Vec<Vec<u8>> = self
            .ops
            .range::<[u8], _>((Bound::Included(begin), Bound::Excluded(end)))
            .map(|(key, _)| key.clone())
            .collect();
        for key in doomed {
            self.ops.remove(&key);
        }
        // Merge into the sorted, disjoint list of cleared ranges.
        let mut merged_begin = begin.to_vec();
        let mut merged_end = end.to_vec();
        let mut kept = Vec::with_capacity(self.cleared.len() + 1);
        for (b, e) in self.cleared.drain(..) {
            if e < merged_begin || b > merged_end {
                kept.push((b, e));
            } else {
                merged_begin = merged_begin.min(b);
                merged_end = merged_end.max(e);
            }
        }
        kept.push((merged_begin, merged_end));
        kept.sort();
        self.cleared = kept;
    }

    /// True when `key` lies in a range cleared by this transaction.
    pub(crate) fn is_cleared(&self, key: &[u8]) -> bool {
        let after = self.cleared.partition_point(|(b, _)| b.as_slice() <= key);
        after > 0 && key < self.cleared[after - 1].1.as_slice()
    }

    /// How `key` reads through this write set.
    pub(crate) fn overlay(&self, key: &[u8]) -> Overlay {
        match self.ops.get(key) {
            Some(KeyOp::Set(value)) => Overlay::Known(Some(value.clone())),
            Some(KeyOp::Clear) => Overlay::Known(None),
            Some(KeyOp::Atomic(mutations)) => Overlay::Apply(mutations.clone()),
            None if self.is_cleared(key) => Overlay::Known(None),
            None => Overlay::Untouched,
        }
    }

    /// True when a range read of `[begin, end)` (at most `limit` rows,
    /// from `end` down when `reverse`) is answered by these writes alone,
    /// as FoundationDB's client answers it without the database: walking
    /// from where the read starts, it meets only keys this transaction
    /// set or cleared and ranges it cleared until it has `limit` rows or
    /// reaches the range's other end. (A key under an atomic mutation
    /// depends on the stored value; a key never written is unknown.)
    pub(crate) fn answers_range(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
    ) -> bool {
        let sets_in = |from: &[u8], to: &[u8]| {
            self.ops
                .range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)))
                .filter(|(_, op)| matches!(op, KeyOp::Set(_)))
                .take(limit)
                .count()
        };
        let mut rows = 0usize;
        let mut at = if reverse { end } else { begin }.to_vec();
        // Bounded: each pass moves `at` past a cleared range or a key of
        // `ops`, or returns.
        loop {
            let done = if reverse {
                at.as_slice() <= begin
            } else {
                at.as_slice() >= end
            };
            if done || rows >= limit {
                return true;
            }
            if reverse {
                // The stretch just below `at`: a cleared range, or one key.
                if let Some((b, _)) = self.cleared_below(&at) {
                    let stop = b.as_slice().max(begin).to_vec();
                    rows += sets_in(&stop, &at);
                    at = stop;
                    continue;
                }
                let Some(key) = at.strip_suffix(&[0u8]) else {
                    return false;
                };
                match self.ops.get(key) {
                    Some(KeyOp::Set(_)) => rows += 1,
                    Some(KeyOp::Clear) => {}
                    _ => return false,
                }
                at = key.to_vec();
            } else {
                if let Some((_, e)) = self.cleared_at(&at) {
                    let stop = e.as_slice().min(end).to_vec();
                    rows += sets_in(&at, &stop);
                    at = stop;
                    continue;
                }
                match self.ops.get(&at) {
                    Some(KeyOp::Set(_)) => rows += 1,
                    Some(KeyOp::Clear) => {}
                    _ => return false,
                }
                at.push(0);
            }
        }
    }

    /// The cleared range holding `key`.
    fn cleared_at(&self, key: &[u8]) -> Option<&(Vec<u8>, Vec<u8>)> {
        let after = self.cleared.partition_point(|(b, _)| b.as_slice() <= key);
        after
            .checked_sub(1)
            .map(|i| &self.cleared[i])
            .filter(|(_, e)| key < e.as_slice())
    }

    /// The cleared range holding the keys just below `end` (exclusive).
    fn cleared_below(&self, end: &[u8]) -> Option<&(Vec<u8>, Vec<u8>)> {
        let after = self.cleared.partition_point(|(b, _)| b.as_slice() < end);
        after
            .checked_sub(1)
            .map(|i| &self.cleared[i])
            .filter(|(_, e)| end <= e.as_slice())
    }

    /// Merges committed rows of `[begin, end)` (in read order, from
    /// `committed`) with this write set, returning at most `limit` rows.
    /// `committed` is pulled lazily: no more rows are read than needed.
    pub(crate) fn merge_range<I>(
        &self,
        begin: &[u8],
        end: &[u8],
        limit: usize,
        reverse: bool,
        committed: I,
    ) -> Result<Vec<KeyValue>, crate::store::StoreError>
    where
        I: Iterator<Item = Result<KeyValue, crate::store::StoreError>>,
    {
        let bounds = (Bound::Included(begin), Bound::Excluded(end));
        let mut local: Box<dyn Iterator<Item = (&Vec<u8>, &KeyOp)>> = if reverse {
            Box::new(self.ops.range::<[u8], _>(bounds).rev())
        } else {
            Box::new(self.ops.range::<[u8], _>(bounds))
        };
        let mut committed = committed.peekable();
        let mut next_local = local.next();
        let mut rows = Vec::new();
        // Each pass consumes at least one row from one side; both sides are
        // finite, so the loop ends.
        while rows.len() < limit {
            // A committed row that failed to read ends the scan with its error.
            if let Some(Err(error)) = committed.next_if(Result::is_err) {
                return Err(error);
            }
            let next_committed = match committed.peek() {
                Some(Ok(row)) => Some(row),
                // Taken just above: the next row, if any, read fine.
                Some(Err(_)) | None => None,
            };
            let take_local = match (next_committed, next_local) {
                (None, None) => break,
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(row), Some((key, _))) => {
                    if reverse {
                        key.as_slice() >= row.key.as_slice()
                    } else {
                        key.as_slice() <= row.key.as_slice()
                    }
                }
            };
            if take_local {
                let (key, op) = next_local.expect("take_local implies a local op");
                let committed_value = match committed.peek() {
                    Some(Ok(row)) if row.key == *key => {
                        Some(committed.next().expect("peeked").expect("peeked ok").value)
                    }
                    _ => None,
                };
                let value = match op {
                    KeyOp::Set(value) => Some(value.clone()),
                    KeyOp::Clear => None,
                    KeyOp::Atomic(mutations) => {
                        Some(apply_all(committed_value.as_deref(), mutations))
                    }
                };
                if let Some(value) = value {
                    rows.push(KeyValue {
                        key: key.clone(),
                        value,
                    });
                }
                next_local = local.next();
            } else {
                let row = committed.next().expect("peeked").expect("peeked ok");
                if !self.is_cleared(&row.key) {
                    rows.push(row);
                }
            }
        }
        Ok(rows)
    }
}

/// `existing` with `mutations` applied in order.
pub(crate) fn apply_all(existing: Option<&[u8]>, mutations: &[Atomic]) -> Vec<u8> {
    let mut value = existing.map(<[u8]>::to_vec);
    for mutation in mutations {
        value = Some(mutation.apply(value.as_deref()));
    }
    value.unwrap_or_else(|| apply_add(None, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str) -> Result<KeyValue, crate::store::StoreError> {
        Ok(KeyValue {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        })
    }

    fn keys(rows: &[KeyValue]) -> Vec<String> {
        rows.iter()
            .map(|row| String::from_utf8(row.key.clone()).unwrap())
            .collect()
    }

    #[test]
    fn merge_overlays_sets_clears_and_ranges() {
        let mut writes = WriteSet::default();
        writes.set(b"b", b"local");
        writes.clear(b"c");
        writes.clear_range(b"d", b"f");
        writes.set(b"e", b"after-clear");
        let committed = vec![
            kv("a", "1"),
            kv("c", "3"),
            kv("d", "4"),
            kv("e", "5"),
            kv("g", "7"),
        ];
        let rows = writes
            .merge_range(b"a", b"z", 10, false, committed.clone().into_iter())
            .unwrap();
        assert_eq!(keys(&rows), ["a", "b", "e", "g"]);
        assert_eq!(rows[2].value, b"after-clear");
        let rows = writes
            .merge_range(b"a", b"z", 2, true, committed.into_iter().rev())
            .unwrap();
        assert_eq!(keys(&rows), ["g", "e"]);
    }

    #[test]
    fn a_range_is_answered_alone_only_inside_what_the_writes_decide() {
        let mut writes = WriteSet::default();
        writes.clear_range(b"c", b"m");
        writes.set(b"e", b"1");
        writes.set(b"g", b"2");
        writes.set(b"p", b"3");
        writes.clear(b"p\0");
        writes.atomic(b"r", Atomic::Add(1));
        // Inside the cleared range, either way.
        assert!(writes.answers_range(b"c", b"m", 10, false));
        assert!(writes.answers_range(b"d", b"k", 10, true));
        // Past it, the stored keys are unknown, unless the limit is met first.
        assert!(!writes.answers_range(b"c", b"z", 10, false));
        assert!(writes.answers_range(b"c", b"z", 2, false));
        assert!(!writes.answers_range(b"a", b"z", 1, true));
        assert!(writes.answers_range(b"a", b"m", 2, true));
        assert!(!writes.answers_range(b"a", b"m", 3, true));
        // A key set outside any cleared range answers a read starting on it,
        // and the key cleared right after it continues the walk.
        assert!(writes.answers_range(b"p", b"z", 1, false));
        assert!(!writes.answers_range(b"p", b"z", 2, false));
        assert!(writes.answers_range(b"p", b"p\0\0", 5, false));
        assert!(writes.answers_range(b"a", b"p\0", 1, true));
        // An atomic mutation depends on the stored value.
        assert!(!writes.answers_range(b"r", b"z", 1, false));
        // An empty range needs nothing.
        assert!(writes.answers_range(b"x", b"x", 1, false));
    }

    #[test]
    fn atomics_compose_with_earlier_writes() {
        let mut writes = WriteSet::default();
        writes.atomic(b"n", Atomic::Add(2));
        writes.atomic(b"n", Atomic::Add(3));
        assert_eq!(writes.overlay(b"n"), Overlay::Apply(vec![Atomic::Add(5)]));
        writes.atomic(b"n", Atomic::Max(9));
        assert_eq!(
            writes.overlay(b"n"),
            Overlay::Apply(vec![Atomic::Add(5), Atomic::Max(9)])
        );
        let (one, seven) = (1u64.to_le_bytes(), 7u64.to_le_bytes());
        let mutations = [Atomic::Add(5), Atomic::Max(9)];
        assert_eq!(apply_all(Some(&one), &mutations), 9u64.to_le_bytes());
        assert_eq!(apply_all(Some(&seven), &mutations), 12u64.to_le_bytes());
        writes.set(b"m", &7i64.to_le_bytes());
        writes.atomic(b"m", Atomic::Add(1));
        assert_eq!(
            writes.overlay(b"m"),
            Overlay::Known(Some(8i64.to_le_bytes().to_vec()))
        );
        writes.clear_range(b"a", b"z");
        writes.atomic(b"n", Atomic::Add(1));
        assert_eq!(
            writes.overlay(b"n"),
            Overlay::Known(Some(1i64.to_le_bytes().to_vec()))
        );
    }
}
