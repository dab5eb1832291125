//! A range read of committed rows that reads only the gaps between the
//! stretches known empty, in either direction.
//!
//! Skipping only the stretches that touch the start of a scan is not
//! enough: a write inside a stretch splits it, and once that key is
//! cleared again one scan from the split point would walk every tombstone
//! on the far side (a priority push re-reading its last count, a FIFO pop
//! after an item went back behind the head). So the scan asks the stretch
//! map for the next gap each time it finishes one, and reads fjall only
//! there. What it finds empty before its first row is reported, so the
//! holes writes left rejoin their neighbours for later readers.

use fjall::Readable;

use super::Shared;
use crate::store::{KeyValue, StoreError, key_after};

/// Most gaps one read looks up; past it the rest of the range is read in
/// one scan (slower, never wrong).
const GAPS_MAX: usize = 256;
/// Most gaps that yielded rows before the rest of the range is read in one
/// scan. A push leaves the space between its key and the previous item as
/// a stretch of its own (the tail was observed empty, and the write split
/// it), so live items alternate with tiny stretches that hide nothing;
/// opening a fjall iterator per item cost ~400 µs per fulfill read of a
/// preloaded queue (perf, leased drain at W=64). The stretches worth
/// skipping lie before the first rows (a drained head, the popped end of a
/// priority stack) or after the first few (behind an item that went back),
/// so a small budget keeps every skip the tombstone tests measure.
const ROW_GAPS_MAX: usize = 4;

/// One gap being read: its fjall iterator and bounds.
struct Gap {
    rows: fjall::Iter,
    begin: Vec<u8>,
    end: Vec<u8>,
    /// The last row this gap yielded.
    last: Option<Vec<u8>>,
}

/// Committed rows of `[begin, end)` at the reader's snapshot, in read order.
pub(crate) struct GappedScan<'a> {
    shared: &'a Shared,
    snapshot: &'a fjall::Snapshot,
    read_version: u64,
    begin: &'a [u8],
    end: &'a [u8],
    reverse: bool,
    /// Forward: everything before it was read or skipped; reverse: after it.
    position: Vec<u8>,
    gap: Option<Gap>,
    gaps: usize,
    /// Gaps closed after yielding at least one row.
    row_gaps: usize,
    done: bool,
    /// Stretches read and found empty before the first row.
    observed_empty: Vec<(Vec<u8>, Vec<u8>)>,
    seen_row: bool,
}

fn io(error: fjall::Error) -> StoreError {
    StoreError::Io(error.to_string())
}

impl<'a> GappedScan<'a> {
    pub(crate) fn new(
        shared: &'a Shared,
        snapshot: &'a fjall::Snapshot,
        read_version: u64,
        begin: &'a [u8],
        end: &'a [u8],
        reverse: bool,
    ) -> Self {
        GappedScan {
            shared,
            snapshot,
            read_version,
            begin,
            end,
            reverse,
            position: if reverse { end } else { begin }.to_vec(),
            gap: None,
            gaps: 0,
            row_gaps: 0,
            done: begin >= end,
            observed_empty: Vec::new(),
            seen_row: false,
        }
    }

    /// Opens the next gap, or finds the range finished.
    fn open_gap(&mut self) {
        let (gap_begin, gap_end) = if self.gaps >= GAPS_MAX || self.row_gaps >= ROW_GAPS_MAX {
            // Bounded work per read: the rest in one scan.
            if self.reverse {
                (self.begin.to_vec(), self.position.clone())
            } else {
                (self.position.clone(), self.end.to_vec())
            }
        } else {
            let resolver = self.shared.resolver.lock();
            if self.reverse {
                resolver
                    .empty
                    .gap_reverse(self.begin, &self.position, self.read_version)
            } else {
                resolver
                    .empty
                    .gap_forward(&self.position, self.end, self.read_version)
            }
        };
        self.gaps += 1;
        if gap_begin >= gap_end {
            // Nothing to read here: a stretch chain ran past the hop bound,
            // or the range is finished.
            self.position = if self.reverse { gap_begin } else { gap_end };
            self.done = if self.reverse {
                self.position.as_slice() <= self.begin
            } else {
                self.position.as_slice() >= self.end
            };
            return;
        }
        let rows = self
            .snapshot
            .range(&self.shared.data, gap_begin.clone()..gap_end.clone());
        self.gap = Some(Gap {
            rows,
            begin: gap_begin,
            end: gap_end,
            last: None,
        });
    }

    /// The current gap ran out: the scan continues past it.
    fn close_gap(&mut self, gap: Gap) {
        self.shared.scans.record(&gap.begin, &gap.end);
        self.row_gaps += usize::from(gap.last.is_some());
        if !self.seen_row {
            self.observed_empty
                .push((gap.begin.clone(), gap.end.clone()));
        }
        let at_limit = if self.reverse {
            gap.begin.as_slice() <= self.begin
        } else {
            gap.end.as_slice() >= self.end
        };
        self.position = if self.reverse { gap.begin } else { gap.end };
        self.done = at_limit;
    }

    fn next_row(&mut self) -> Option<Result<KeyValue, StoreError>> {
        // Bounded: each pass yields a row, closes a gap or opens one, and
        // gaps are bounded by `GAPS_MAX` (the last one spans the rest).
        loop {
            if let Some(gap) = self.gap.as_mut() {
                let next = if self.reverse {
                    gap.rows.next_back()
                } else {
                    gap.rows.next()
                };
                match next {
                    Some(guard) => {
                        let (key, value) = match guard.into_inner() {
                            Ok(row) => row,
                            Err(error) => return Some(Err(io(error))),
                        };
                        if !self.seen_row {
                            self.seen_row = true;
                            let before = if self.reverse {
                                (key_after(&key), gap.end.clone())
                            } else {
                                (gap.begin.clone(), key.to_vec())
                            };
                            self.observed_empty.push(before);
                        }
                        gap.last = Some(key.to_vec());
                        return Some(Ok(KeyValue {
                            key: key.to_vec(),
                            value: value.to_vec(),
                        }));
                    }
                    None => {
                        let gap = self.gap.take().expect("a gap is open");
                        self.close_gap(gap);
                    }
                }
            } else if self.done {
                return None;
            } else {
                self.open_gap();
            }
        }
    }

    /// What the scan saw empty before its first row, in pieces; reports
    /// the part of the open gap it read to the scan trace.
    pub(crate) fn finish(mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        if let Some(gap) = self.gap.take()
            && let Some(last) = &gap.last
        {
            if self.reverse {
                self.shared.scans.record(last, &gap.end);
            } else {
                self.shared.scans.record(&gap.begin, &key_after(last));
            }
        }
        self.observed_empty.retain(|(begin, end)| begin < end);
        self.observed_empty
    }
}

impl Iterator for GappedScan<'_> {
    type Item = Result<KeyValue, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row()
    }
}
