//! Walks through every queue in the store (the sampler's rotation) and the
//! queues the timer changed.

use super::{Hotq, Result};
use crate::keys::{QueueKind, QueueName, queue_of_key, queues_root_range};
use crate::store::{RangeRead, Store, Transaction, key_after};

/// Where a walk through every queue of one kind stands (opaque): the
/// next key to look for a queue at, or the start of the kind's root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueWalk(Option<Vec<u8>>);

/// One step of a walk through every queue of a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkStep {
    /// The next queue; the walk goes on past its whole subspace.
    Queue(QueueName),
    /// A key that is not a queue's (nothing hotq writes) was stepped over.
    Skipped,
    /// No queue is left: the walk starts over from the root's start.
    End,
}

impl<S: Store> Hotq<S> {
    /// The next queue of `kind` from `walk`: one range read of limit 1,
    /// after which `walk` skips past that queue's subspace.
    pub async fn walk_queues(&self, kind: QueueKind, walk: &mut QueueWalk) -> Result<WalkStep> {
        let (root_begin, root_end) = queues_root_range(kind);
        let begin = walk.0.clone().unwrap_or(root_begin);
        let txn = self.store.begin()?;
        let rows = txn
            .get_range(RangeRead::new(&begin, &root_end, 1).snapshot())
            .await?;
        let Some(row) = rows.first() else {
            walk.0 = None;
            return Ok(WalkStep::End);
        };
        let Some((name, end)) = queue_of_key(kind, &row.key) else {
            walk.0 = Some(key_after(&row.key));
            return Ok(WalkStep::Skipped);
        };
        walk.0 = Some(end);
        Ok(WalkStep::Queue(name))
    }

    /// Takes up to `max` of the queues the timer changed (revealed,
    /// redelivered, expired items) since the last call.
    pub fn take_touched_queues(&self, max: usize) -> Vec<(QueueKind, QueueName)> {
        crate::due::take_touched(max)
    }
}
