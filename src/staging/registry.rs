//! The state of one process's pop protocol: its queues' lines and their
//! fulfillment loops over one store. The protocol itself reads in order in
//! [`super::pop`], [`super::round::fulfill`], [`super::round::fulfillment_loop`] and
//! [`super::handoff`].

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::keys::{QueueKind, QueueName};
use crate::queue::Item;
use crate::staging::line::LocalWaiters;
use crate::staging::{StagingConfig, StagingStats};
use crate::store::Store;

/// Tells the lease timer that a lease this process issued comes due at
/// the given epoch ms (it may be earlier than the timer's next look).
pub type LeaseIssued = Arc<dyn Fn(u64) + Send + Sync>;

/// The staged pop protocol of one process: its queues' lines and their
/// fulfillment loops, over one store.
pub struct Staging<S: Store> {
    pub(super) inner: Arc<Inner<S>>,
}

pub(super) struct Inner<S: Store> {
    pub(super) store: S,
    pub(super) config: StagingConfig,
    /// Shared with the coordinator's timer and reaper, which count their
    /// own work (leases expired, results reaped) in the same set.
    pub(super) stats: Arc<StagingStats>,
    /// One fulfillment loop per queue with waiters: a pop starts or wakes
    /// it; an idle one removes itself.
    pub(super) fulfillers: Mutex<HashMap<(QueueKind, QueueName), Fulfiller>>,
    /// True once the process shuts down: waiting pops withdraw, loops end.
    pub(super) shutdown: watch::Receiver<bool>,
    /// Pops waiting in this process, served in memory by its fulfillers.
    pub(super) local: Arc<LocalWaiters>,
    pub(super) lease_issued: LeaseIssued,
    /// This process's line id: its counted requests in the store
    /// ([`super::counted`]) carry it.
    pub(super) line: [u8; crate::staging::counted::LINE_ID_LEN],
}

impl<S: Store> Clone for Staging<S> {
    fn clone(&self) -> Self {
        Staging {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Store> Staging<S> {
    /// The protocol over `store`; `shutdown` turning true ends every wait
    /// and loop; `lease_issued` hears of every lease a pop issues.
    pub fn new(
        store: S,
        config: StagingConfig,
        stats: Arc<StagingStats>,
        shutdown: watch::Receiver<bool>,
        lease_issued: LeaseIssued,
    ) -> Self {
        let local = Arc::new(LocalWaiters::new(config.hand_off_wait_ms));
        Staging {
            inner: Arc::new(Inner {
                store,
                config,
                stats,
                fulfillers: Mutex::new(HashMap::new()),
                shutdown,
                local,
                lease_issued,
                line: rand::random(),
            }),
        }
    }

    /// The protocol's settings.
    pub fn config(&self) -> &StagingConfig {
        &self.inner.config
    }

    /// Tells the timer of the earliest lease among `items`.
    pub(super) fn leases_issued(&self, items: &[Item]) {
        let earliest = items
            .iter()
            .filter_map(|i| i.lease)
            .map(|l| l.expires_at_ms)
            .min();
        if let Some(expires_at_ms) = earliest {
            (self.inner.lease_issued)(expires_at_ms);
        }
    }
}

/// A running fulfillment loop.
pub(super) struct Fulfiller {
    pub(super) task: JoinHandle<()>,
    /// Wakes the loop for a memory request (stored requests wake it
    /// through the store's wake key).
    pub(super) wake: Arc<Notify>,
}
