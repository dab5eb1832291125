//! What a sweep's waves did, added up as their chunks finish.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use crate::keys::{QueueKind, QueueName};
use crate::queue::QueueError;

use super::wave::Chunk;
use super::{REAP_QUEUES_MAX, Sweep, stats, touch};

/// What a sweep's committed chunks did, gathered wave by wave.
#[derive(Default)]
pub(super) struct Tally {
    sweep: Sweep,
    visited: BTreeSet<(QueueKind, QueueName)>,
    reap: BTreeMap<(QueueKind, QueueName), BTreeSet<Vec<u8>>>,
    /// Appointments of queues past [`REAP_QUEUES_MAX`] were left due.
    reap_left: bool,
}

impl Tally {
    /// Adds a wave's chunks; lowers `resume` to the earliest chunk to
    /// read again. A failed chunk fails the sweep, after the others of its
    /// wave (and of the wave started behind it) are counted.
    pub(super) fn record(
        &mut self,
        outcomes: Vec<Result<Chunk, QueueError>>,
        resume: &mut Option<Vec<u8>>,
    ) -> Result<(), QueueError> {
        let mut failed = None;
        for outcome in outcomes {
            match outcome {
                Ok(chunk) => self.add(chunk, resume),
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    fn add(&mut self, chunk: Chunk, resume: &mut Option<Vec<u8>>) {
        let sweep = &mut self.sweep;
        sweep.rows_read += chunk.rows_read;
        stats()
            .rows_read
            .fetch_add(chunk.rows_read as u64, Ordering::Relaxed);
        for (queue, keys) in chunk.reap {
            if self.reap.len() < REAP_QUEUES_MAX || self.reap.contains_key(&queue) {
                self.reap.entry(queue).or_default().extend(keys);
            } else {
                // Still due: the next sweep finds them, at once (`more`).
                self.reap_left = true;
            }
        }
        if let Some(pass) = chunk.committed {
            for (queue, count) in pass.redelivered {
                *sweep.redelivered.entry(queue).or_default() += count;
            }
            for (queue, count) in pass.dead_lettered {
                *sweep.dead_lettered.entry(queue).or_default() += count;
            }
            for (queue, count) in pass.expired {
                *sweep.expired.entry(queue).or_default() += count;
            }
            sweep.revealed += pass.revealed;
            for queue in pass.queues {
                touch(queue.clone());
                self.visited.insert(queue);
            }
        }
        if let Some(from) = chunk.resume
            && resume.as_ref().is_none_or(|earliest| from < *earliest)
        {
            *resume = Some(from);
        }
    }

    pub(super) fn into_sweep(self) -> Sweep {
        let Tally {
            mut sweep,
            mut visited,
            reap,
            reap_left,
        } = self;
        sweep.more = reap_left;
        visited.extend(reap.keys().cloned());
        sweep.queues_visited = visited.len();
        sweep.reap_queues = reap
            .into_iter()
            .map(|((kind, name), keys)| (kind, name, keys.into_iter().collect()))
            .collect();
        sweep
    }
}
