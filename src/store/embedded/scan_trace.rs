//! A test aid: the key intervals range reads actually scanned in fjall.
//!
//! Timings over tombstones are noisy; which keys a read walked is not. A
//! test that knows which keys it cleared counts the tombstones each read
//! walked from these intervals. Off unless a test turns it on, and bounded
//! while on.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Most intervals kept between two takes; past it the trace says it overflowed.
const INTERVALS_MAX: usize = 65_536;

/// The intervals scanned since the last take.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ScanTrace {
    /// `[begin, end)` of each fjall scan, in the order the scans ran: every
    /// key the scan passed over (live or tombstone) lies inside.
    pub intervals: Vec<(Vec<u8>, Vec<u8>)>,
    /// More than the bound were scanned; some are missing.
    pub overflowed: bool,
}

#[derive(Debug, Default)]
pub(crate) struct ScanTracer {
    on: AtomicBool,
    trace: Mutex<ScanTrace>,
}

impl ScanTracer {
    pub(crate) fn set(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
        if !on {
            *self.trace.lock() = ScanTrace::default();
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub(crate) fn record(&self, begin: &[u8], end: &[u8]) {
        if !self.is_on() || begin >= end {
            return;
        }
        let mut trace = self.trace.lock();
        if trace.intervals.len() < INTERVALS_MAX {
            trace.intervals.push((begin.to_vec(), end.to_vec()));
        } else {
            trace.overflowed = true;
        }
    }

    pub(crate) fn take(&self) -> ScanTrace {
        std::mem::take(&mut *self.trace.lock())
    }
}
