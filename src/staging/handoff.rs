//! The hand-off and the give-back. After a fulfillment round is durable,
//! its items go to the pops it served, in memory; a pop answered "empty"
//! is told so; what nobody is left to take goes back to its original key.
//! A pop whose caller leaves mid-wait or mid-commit finishes on its own
//! and gives back what it took ([`Finishing`], [`InLine`]): no item is
//! taken for a pop that has gone.

use tokio::sync::watch;

use crate::envelope::now_ms;
use crate::keys::QueueKeys;
use crate::metrics;
use crate::queue::{Item, QueueError};
use crate::staging::StagingStats;
use crate::staging::line::{Answered, Claims, LocalId, LocalWaiter};
use crate::staging::registry::Staging;
use crate::staging::requester::restore_items;
use crate::staging::round::answer::Handover;
use crate::staging::round::fulfill::Fulfilled;
use crate::store::Store;

impl<S: Store> Staging<S> {
    /// Hands a round's items to their pops (the commit is durable: it
    /// returned `Ok`), answers the pops it found nothing for, returns the
    /// round's other claims to the line, and gives back what nobody here
    /// takes. A failed round hands nothing over.
    pub(super) async fn hand_over_round(
        &self,
        keys: &QueueKeys,
        claims: Claims,
        outcome: &mut Result<Fulfilled, QueueError>,
    ) {
        let stats = &self.inner.stats;
        let Handover {
            handed,
            emptied,
            acked,
        } = match outcome {
            Ok(fulfilled) => std::mem::take(&mut fulfilled.handover),
            Err(_) => Handover::default(),
        };
        StagingStats::add(&stats.local_hand_offs, handed.len() as u64);
        let mut served_memory = Vec::new();
        let mut unclaimed = Vec::new();
        for (id, items) in handed {
            match id {
                LocalId::Memory(seq) => served_memory.push((seq, items)),
                LocalId::Registered(requester) => {
                    for item in items {
                        unclaimed.extend(self.inner.local.hand_over(&requester, item));
                    }
                }
            }
        }
        unclaimed.extend(claims.resolve(Answered {
            served: served_memory,
            emptied,
            acked,
        }));
        if !unclaimed.is_empty() {
            StagingStats::add(&stats.local_hand_offs_unclaimed, unclaimed.len() as u64);
            // The memory line's uncollected results, as the reaper's are
            // for stored requests.
            metrics::queue_count(
                metrics::RESULTS_REAPED,
                keys.kind(),
                keys.name(),
                unclaimed.len() as u64,
            );
            self.put_back(keys, unclaimed).await;
        }
    }

    /// Returns items whose caller went away to their original keys (leased
    pub(super) async fn put_back(&self, keys: &QueueKeys, items: Vec<Item>) {
        let count = items.len();
        metrics::queue_count(metrics::PUT_BACKS, keys.kind(), keys.name(), count as u64);
        let restored = restore_items(&self.inner.store, keys, items).await;
        match restored {
            Ok(()) => {
                tracing::debug!(queue = %keys.name(), items = count, "put back items of a pop whose caller left")
            }
            Err(error) => {
                tracing::error!(queue = %keys.name(), %error, items = count, "could not put back items of a pop whose caller left")
            }
        }
    }

    /// [`Self::put_back`] from a drop (no await there): spawned on the
    /// current runtime; outside one the items are lost, and logged.
    pub(super) fn put_back_from_drop(&self, keys: &QueueKeys, items: Vec<Item>) {
        if items.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let (pops, keys) = (self.clone(), keys.clone());
                runtime.spawn(async move { pops.put_back(&keys, items).await });
            }
            Err(_) => {
                tracing::error!(queue = %keys.name(), items = items.len(), "items delivered to a pop dropped outside a runtime are lost");
            }
        }
    }
}

type Outcome = Result<Vec<Item>, QueueError>;

/// A pop, boxed so that it can move.
type Pop = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;

/// A pop that runs in its caller's task and finishes even if the caller
/// leaves. Once a commit that takes an item is submitted it may apply
/// whatever the caller does (an HTTP client hanging up drops the handler's
/// future): dropped while pending, the pop moves to a task of its own, is
/// told its caller is gone (a waiting request withdraws at once), and what
/// it takes is put back where it was. Completed, it handed its items to
/// the caller directly: there is no window in between.
pub(super) struct Finishing<S: Store> {
    pop: Option<Pop>,
    gone: watch::Sender<bool>,
    pops: Staging<S>,
    keys: QueueKeys,
}

impl<S: Store> Finishing<S> {
    pub(super) fn new(
        pops: &Staging<S>,
        keys: &QueueKeys,
        gone: watch::Sender<bool>,
        pop: Pop,
    ) -> Self {
        Finishing {
            pop: Some(pop),
            gone,
            pops: pops.clone(),
            keys: keys.clone(),
        }
    }
}

impl<S: Store> std::future::Future for Finishing<S> {
    type Output = Outcome;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Outcome> {
        let pop = self
            .pop
            .as_mut()
            .expect("a finished pop is not polled again");
        let outcome = std::task::ready!(pop.as_mut().poll(cx));
        self.pop = None;
        std::task::Poll::Ready(outcome)
    }
}

impl<S: Store> Drop for Finishing<S> {
    fn drop(&mut self) {
        let Some(pop) = self.pop.take() else {
            return;
        };
        self.gone.send_replace(true);
        let (pops, keys) = (self.pops.clone(), self.keys.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Ok(items) = pop.await
                        && !items.is_empty()
                    {
                        pops.put_back(&keys, items).await;
                    }
                });
            }
            Err(_) => {
                tracing::error!(queue = %keys.name(), "a pop dropped outside a runtime cannot finish; an item it took may be lost");
            }
        }
    }
}

/// A pop waiting in line in its caller's own task. Dropped mid-wait (an
/// HTTP client hanging up), it leaves the line; an item already handed to
/// it goes back. (One its fulfiller has claimed but not yet resolved finds
/// no receiver when it is resolved, and the fulfiller puts it back.)
pub(super) struct InLine<S: Store> {
    pub(super) local: LocalWaiter,
    pops: Staging<S>,
    keys: QueueKeys,
}

impl<S: Store> InLine<S> {
    pub(super) fn new(pops: &Staging<S>, keys: &QueueKeys) -> Self {
        InLine {
            local: LocalWaiter::new(pops.inner.local.clone(), keys),
            pops: pops.clone(),
            keys: keys.clone(),
        }
    }
}

impl<S: Store> Drop for InLine<S> {
    fn drop(&mut self) {
        if let Some(items) = self.local.abandon() {
            self.pops.put_back_from_drop(&self.keys, items);
        }
    }
}

/// How a pop's items reached it: its own direct attempt, or staged (in
/// the line or as a stored request, from a fulfill round). The `path`
/// label of the pop metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// The pop's direct attempt took them.
    Direct,
    /// A fulfill round handed them over.
    Staged,
}

impl Delivered {
    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Delivered::Direct => "direct",
            Delivered::Staged => "staged",
        }
    }
}

/// Records delivered items: count by path, pop service time and the time
/// it waited with its queue empty, enqueue-to-delivery wait. An empty
/// answer records nothing: it is no delivery.
pub(super) fn record_delivery(
    keys: &QueueKeys,
    path: Delivered,
    started: std::time::Instant,
    items: &[Item],
) {
    if items.is_empty() {
        return;
    }
    metrics::pops(keys.kind(), keys.name(), path.label(), items.len() as u64);
    let now = now_ms();
    // A long poll on an empty queue waits for a push: that idling is the
    // client's choice, not the daemon's work. Until its first item was
    // enqueued the queue had nothing for it; clocks of other processes
    // may disagree, so the split is clamped to the pop's own span.
    let elapsed_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let started_ms = now as f64 - elapsed_ms;
    let first_enqueued_ms = items
        .iter()
        .map(|item| item.enqueued_at_ms)
        .min()
        .unwrap_or(0);
    let empty_ms = (first_enqueued_ms as f64 - started_ms).clamp(0.0, elapsed_ms);
    let item_waits_s = items
        .iter()
        .map(|item| now.saturating_sub(item.enqueued_at_ms) as f64 / 1_000.0);
    metrics::delivery(
        path.label(),
        (elapsed_ms - empty_ms) / 1_000.0,
        empty_ms / 1_000.0,
        item_waits_s,
    );
}
