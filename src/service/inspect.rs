//! Looking without taking: a queue's next item (peek), walks through
//! every queue in the store (the sampler's rotation, SQS's ListQueues)
//! and the queues the timer changed.

use super::{Hotq, Result};
use crate::envelope::End;
use crate::keys::{QueueKeys, QueueKind, QueueName, queue_of_key, queues_root_range};
use crate::queue::priority::PriorityQueue;
use crate::queue::{Item, Queue};
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

impl<S: Store> Hotq<S> {
    /// Up to `limit` names of FIFO queues starting with `prefix`, in name
    /// order, after `after`; and the name to continue after when more may
    /// follow. Reads one key per queue (the store skips between subspaces).
    pub async fn list_queue_names(
        &self,
        prefix: &str,
        after: Option<&QueueName>,
        limit: usize,
    ) -> Result<(Vec<QueueName>, Option<String>)> {
        let (root_begin, _) = queues_root_range(QueueKind::Fifo);
        // `(root, name)` packs as the root's bytes, 0x02, the name, 0x00:
        // names with `prefix` are the keys from `root 0x02 prefix` to that
        // plus 0xff.
        let mut begin = root_begin[..root_begin.len() - 1].to_vec();
        begin.push(0x02);
        begin.extend_from_slice(prefix.as_bytes());
        let mut end = begin.clone();
        end.push(0xff);
        let mut cursor = match after {
            Some(name) => QueueKeys::new(name).queue_range().1.max(begin),
            None => begin,
        };
        let txn = self.store.begin()?;
        let mut names: Vec<QueueName> = Vec::new();
        loop {
            let rows = txn
                .get_range(RangeRead::new(&cursor, &end, 1).snapshot())
                .await?;
            let Some(row) = rows.first() else {
                return Ok((names, None));
            };
            let Some((name, next)) = queue_of_key(QueueKind::Fifo, &row.key) else {
                cursor = key_after(&row.key);
                continue;
            };
            if let Some(last) = names.last().filter(|_| names.len() >= limit) {
                let last = last.as_str().to_string();
                return Ok((names, Some(last)));
            }
            cursor = next;
            names.push(name);
        }
    }
}

impl<S: Store> Hotq<S> {
    /// The item a pop of `keys` at `end` would take next, without taking
    /// it (a snapshot read: never conflicts). A FIFO queue has one end:
    /// its first item, whatever `end` says.
    pub async fn peek(&self, keys: &QueueKeys, end: End) -> Result<Option<Item>> {
        let name = keys.name().clone();
        let item = match (keys.kind(), end) {
            (QueueKind::Fifo, _) => Queue::new(self.store.clone(), name).peek().await?,
            (QueueKind::Priority, End::Front) => {
                PriorityQueue::new(self.store.clone(), name)
                    .peek_min()
                    .await?
            }
            (QueueKind::Priority, End::Back) => {
                PriorityQueue::new(self.store.clone(), name)
                    .peek_max()
                    .await?
            }
        };
        Ok(item)
    }
}
