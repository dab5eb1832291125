//! A line's waiting pops by class (end and lease): what a counted request
//! in the store stands for (see [`crate::staging::counted`]).

use super::LocalWaiters;
use crate::keys::QueueKeys;
use std::num::NonZeroU64;

/// Pops of one class (end and lease) waiting in a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    /// The end they pop from.
    pub end: crate::envelope::End,
    /// Their lease (`None`: none).
    pub lease_ms: Option<NonZeroU64>,
    /// How many wait.
    pub pops: usize,
    /// The latest of their deadlines.
    pub deadline_ms: u64,
}

impl LocalWaiters {
    /// The pops of queue `keys` waiting in this process's line now that a
    /// stored request may stand for (unclaimed, not leaving, waiting until
    /// `now_ms` or later, not a pop that must not wait), by end and lease;
    /// at most `max` per class.
    pub fn waiting_by_class(&self, keys: &QueueKeys, now_ms: u64, max: usize) -> Vec<Waiting> {
        let queues = self.queues.lock();
        let mut classes: Vec<Waiting> = Vec::new();
        let Some(queue) = queues.get(&(keys.kind(), keys.name().clone())) else {
            return classes;
        };
        for entry in queue.line.values() {
            let request = entry.request.request;
            if entry.claimed || entry.leaving || entry.request.answers_empty {
                continue;
            }
            if request.deadline_ms < now_ms {
                continue;
            }
            let class = (request.end, request.lease_ms);
            match classes.iter_mut().find(|c| (c.end, c.lease_ms) == class) {
                Some(c) if c.pops >= max => {}
                Some(c) => {
                    c.pops += 1;
                    c.deadline_ms = c.deadline_ms.max(request.deadline_ms);
                }
                None => classes.push(Waiting {
                    end: request.end,
                    lease_ms: request.lease_ms,
                    pops: 1,
                    deadline_ms: request.deadline_ms,
                }),
            }
        }
        classes
    }
}
