//! Administration of queues (see [`crate::queue::admin`]): listing them,
//! their stats, purge and delete; every front end's (`/v1`, SQS, the
//! console, RESP, the sampler).

use super::{Error, Hotq, Result};
use crate::keys::{QueueKeys, QueueKind, QueueName};
use crate::queue::admin::{self, Dropped, LEASES_LIMIT_MAX, LIST_LIMIT_MAX, QueueSummary};
use crate::queue::admin::{LeaseCursor, LeaseSummary};
use crate::queue::fair::{FAIR_PRUNE_SCAN_MAX, Pruned, prune_after_in};
use crate::store::{Read, Store, Transaction, decode_counter};

/// A queue's counters, read in one snapshot (SQS's `ApproximateNumberOf…`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Visible items (the queue's `depth`).
    pub depth: i64,
    /// Items waiting behind their message group's head.
    pub grouped: i64,
    /// Items under a lease.
    pub leased: i64,
    /// Delayed items.
    pub delayed: i64,
}

/// 400 `bad_parameter` unless `limit` is within `1..=max`.
pub(crate) fn check_limit(limit: usize, max: usize) -> Result<()> {
    if limit == 0 || limit > max {
        return Err(Error::BadParameter(format!(
            "limit must be 1 to {max}, got {limit}"
        )));
    }
    Ok(())
}

impl<S: Store> Hotq<S> {
    /// Up to `limit` (1 to [`LIST_LIMIT_MAX`]) queues of `kind` in name
    /// order after `after`, each with its stats; and the name to continue
    /// after, when more may follow.
    pub async fn list_queues(
        &self,
        kind: QueueKind,
        after: Option<&QueueName>,
        limit: usize,
    ) -> Result<(Vec<QueueSummary>, Option<String>)> {
        check_limit(limit, LIST_LIMIT_MAX)?;
        let (mut page, next) = admin::list(&self.store, kind, after, limit).await?;
        for queue in &mut page {
            self.count_memory_waiting(queue);
        }
        Ok((page, next))
    }

    /// The stats of the queue of `keys`, read in one snapshot.
    pub async fn queue_stats(&self, keys: &QueueKeys) -> Result<QueueSummary> {
        let mut stats = admin::stats(&self.store, keys).await?;
        self.count_memory_waiting(&mut stats);
        Ok(stats)
    }

    /// The counters of the queue of `keys`, read in one snapshot: cheaper
    /// than [`Self::queue_stats`] (no head, settings or role read).
    pub async fn queue_counts(&self, keys: &QueueKeys) -> Result<QueueCounts> {
        let txn = self.store.begin()?;
        let counter = |value: Option<Vec<u8>>| decode_counter(value.as_deref());
        Ok(QueueCounts {
            depth: counter(txn.get(&keys.depth(), Read::Snapshot).await?),
            grouped: counter(txn.get(&keys.grouped_count(), Read::Snapshot).await?),
            leased: counter(txn.get(&keys.leased(), Read::Snapshot).await?),
            delayed: counter(txn.get(&keys.delayed_count(), Read::Snapshot).await?),
        })
    }

    /// Clears the tags of fairness keys the head of the queue of `keys`
    /// has passed, reading at most [`FAIR_PRUNE_SCAN_MAX`] tags after the
    /// tag key `after` (see [`crate::queue::fair::prune_after_in`]), in one
    /// attempt: a conflict (a push of a key being cleared, another
    /// daemon's pass) is an error, and the next pass tries again. Commits
    /// only when something is cleared; a queue without keys costs one
    /// empty range read.
    pub async fn prune_fair_tags(&self, keys: &QueueKeys, after: Option<&[u8]>) -> Result<Pruned> {
        let txn = self.store.begin()?;
        let pruned = prune_after_in(&txn, keys, after, FAIR_PRUNE_SCAN_MAX).await?;
        if pruned.cleared > 0 {
            txn.commit().await?;
        }
        Ok(pruned)
    }

    /// This daemon's waiters in memory count as waiting too, as they do in
    /// every stat.
    fn count_memory_waiting(&self, queue: &mut QueueSummary) {
        let keys = QueueKeys::of_kind(queue.kind, &queue.name);
        queue.waiting += self.coordinator.memory_waiting(&keys) as i64;
    }

    /// Drops the visible and delayed items of `keys` pushed before the
    /// call; leased items stay leased. `done` is false when a bound left
    /// work (call again).
    pub async fn purge(&self, keys: &QueueKeys) -> Result<Dropped> {
        Ok(admin::purge(&self.store, keys).await?)
    }

    /// As [`Self::purge`], and the leased items too (SQS's PurgeQueue).
    pub async fn purge_in_flight(&self, keys: &QueueKeys) -> Result<Dropped> {
        Ok(admin::purge_in_flight(&self.store, keys).await?)
    }

    /// Deletes the queue of `keys` and all it holds, to its end even if
    /// the caller goes away; `done` false when pushes kept it from
    /// finishing (call again). This daemon's cached default lease of the
    /// queue is forgotten whatever the outcome (a failed delete may have
    /// committed part of its work); then, in the delete's own task,
    /// `forget(finished)` lets the front end forget its own memories of
    /// the queue (`finished`: the queue is gone).
    pub async fn delete_queue(
        &self,
        keys: &QueueKeys,
        forget: impl FnOnce(bool) + Send + 'static,
    ) -> Result<Dropped> {
        let leases = self.default_leases.clone();
        let gone = keys.clone();
        let dropped = admin::delete(&self.store, keys, move |outcome| {
            leases.forget(&gone);
            forget(matches!(outcome, Ok(dropped) if dropped.done));
        })
        .await?;
        Ok(dropped)
    }

    /// Up to `limit` (1 to [`LEASES_LIMIT_MAX`]) leases in flight of `keys`
    /// from `after` on (see [`admin::leases`]); and where to continue,
    /// when more may follow.
    pub async fn leases(
        &self,
        keys: &QueueKeys,
        after: Option<&LeaseCursor>,
        limit: usize,
    ) -> Result<(Vec<LeaseSummary>, Option<LeaseCursor>)> {
        check_limit(limit, LEASES_LIMIT_MAX)?;
        Ok(admin::leases(&self.store, keys, after, limit).await?)
    }
}
