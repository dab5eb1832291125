//! A fulfillment round's claim on memory requests of its line: claimed
//! together, resolved together once the round's outcome is known (see
//! [`LocalWaiters::resolve_claims`]), with the acks riding on them.

use std::sync::Arc;

use super::LocalWaiters;
use crate::keys::QueueKeys;
use crate::lease::Receipt;
use crate::queue::Item;
use crate::staging::line::{AckOutcome, MemoryRequest};

impl LocalWaiters {
    /// [`Self::claim_memory`], as a guard that resolves the claims unserved
    /// if dropped unresolved (a fulfiller's task ending mid-round), so no
    /// entry stays claimed, and its pop waiting, for good.
    pub fn claim(self: &Arc<Self>, keys: &QueueKeys, max: usize) -> Claims {
        Claims {
            requests: self.claim_memory(keys, max),
            waiters: self.clone(),
            keys: keys.clone(),
            resolved: false,
        }
    }
}

/// What a committed round answers its claimed memory requests, by their
/// place in the line.
#[derive(Debug, Default)]
pub struct Answered {
    /// Served, with their items (durable now).
    pub served: Vec<(u64, Vec<Item>)>,
    /// Pops that must not wait, found nothing for: answered with none.
    pub emptied: Vec<u64>,
    /// Acks settled in the commit: their outcomes, in order.
    pub acked: Vec<(u64, Vec<AckOutcome>)>,
}

/// Memory requests claimed for one fulfillment transaction (see
/// [`LocalWaiters::claim`]).
pub struct Claims {
    waiters: Arc<LocalWaiters>,
    keys: QueueKeys,
    requests: Vec<MemoryRequest>,
    resolved: bool,
}

impl Claims {
    /// The claimed requests, in arrival order.
    pub fn requests(&self) -> &[MemoryRequest] {
        &self.requests
    }

    /// The acks riding on these claims not settled yet, by place in the
    /// line, in line order; from now on theirs to settle or release
    /// ([`Self::resolve`]), not their pops'.
    pub fn acks(&self) -> Vec<(u64, Vec<Receipt>)> {
        let queues = self.waiters.queues.lock();
        let Some(queue) = queues.get(&(self.keys.kind(), self.keys.name().clone())) else {
            return Vec::new();
        };
        let mut acks = Vec::new();
        for request in &self.requests {
            let riding = queue.line.get(&request.seq).and_then(|e| e.acks.as_ref());
            let Some(riding) = riding else { continue };
            if let Some(receipts) = riding.lock().take_for_round() {
                acks.push((request.seq, receipts));
            }
        }
        acks
    }

    /// [`LocalWaiters::resolve_claims`] for these claims.
    pub fn resolve(mut self, answered: Answered) -> Vec<Item> {
        self.resolved = true;
        self.waiters
            .resolve_claims(&self.keys, &self.requests, answered)
    }
}

impl Drop for Claims {
    fn drop(&mut self) {
        if !self.resolved {
            // Nothing was handed over: no item left the store for them
            // that anyone here knows of (the transaction's outcome is lost
            // with the task, as a crash's would be).
            let unclaimed =
                self.waiters
                    .resolve_claims(&self.keys, &self.requests, Answered::default());
            debug_assert!(unclaimed.is_empty());
        }
    }
}
