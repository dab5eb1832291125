//! Whether the store answers: `/healthz` and the store watcher's probe.

use std::time::Duration;

use super::Hotq;
use crate::store::{Read, Store, Transaction};

impl<S: Store> Hotq<S> {
    /// Why the store has failed for good (a write or fsync failed: it
    /// refuses every transaction from then on), if it has.
    pub fn store_failure(&self) -> Option<String> {
        self.store.failure()
    }

    /// How long the oldest store write under way has waited for its
    /// commit, if one is under way (a disk that stalls).
    pub fn write_under_way_for(&self) -> Option<Duration> {
        self.store.write_under_way_for()
    }

    /// One health check: a failed store's own verdict, else one snapshot
    /// read within `bound`; `Err` says why the store does not answer.
    pub async fn probe_store(&self, bound: Duration) -> std::result::Result<(), String> {
        if let Some(reason) = self.store_failure() {
            return Err(reason);
        }
        let read = async {
            let txn = self.store.begin()?;
            txn.get(b"hotq-healthz", Read::Snapshot).await
        };
        match tokio::time::timeout(bound, read).await {
            Ok(Ok(_)) => Ok(()),
            // A conflict or too-old read is contention, not a failing store.
            Ok(Err(error)) if error.is_retryable() => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("a store read did not answer within {bound:?}")),
        }
    }
}
