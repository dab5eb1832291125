//! Pops: plain or leased, waiting or not, one or many, from either end
//! of a queue (a priority queue's `min` or `max`), with acks riding on
//! them. A pop whose caller goes away (an HTTP client or a RESP client
//! hanging up, a `BLPOP`'s losing keys) is simply dropped: what it was
//! handed goes back (the give-back, in [`crate::staging::handoff`]).
//!
//! A plain pop, from a front end's handler to the commit: the handler →
//! [`Hotq::pop`] → `Staging::pop_acking` → `pop_attempts` → `direct_attempt`
//! → `try_pop`, which commits (or, contended, the line's fulfill round).

use std::num::NonZeroU64;
use std::time::Duration;

use super::settle::{count_acks, outcome_of};
use super::{Error, Hotq, ReceiptOutcome, Result};
use crate::envelope::End;
use crate::envelope::now_ms;
use crate::keys::QueueKeys;
use crate::lease::{LeaseError, Receipt};
use crate::queue::groups::batch::take_batch_in;
use crate::staging::line::AckOutcome;
use crate::store::{RetryPolicy, Store, transact};

pub use crate::queue::Item;
pub use crate::staging::round::riding::POP_ACKS_MAX;

/// What a pop asks for.
#[derive(Debug, Clone, Copy)]
pub struct PopOptions {
    /// The end it pops from (a FIFO queue's front; a priority queue's
    /// `min` is the front, `max` the back).
    pub end: End,
    /// Most items (see [`Hotq::check_pop`]).
    pub max: usize,
    /// How long it may wait (zero: answered at once, items or none).
    pub wait: Duration,
    /// Whether the items are leased or deleted.
    pub lease: PopLease,
}

/// Whether a pop leases its items, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PopLease {
    /// The queue's `default_lease_ms`, if it has one; else deleted.
    QueueDefault,
    /// Deleted, whatever the queue's default (`LPOP`, `BLPOP`).
    Never,
    /// Leased for this long (checked by [`Hotq::check_lease_ms`]).
    Ms(NonZeroU64),
}

impl PopLease {
    /// The lease a pop names (`None`: it names none, the queue's default).
    pub fn named(lease_ms: Option<NonZeroU64>) -> PopLease {
        lease_ms.map_or(PopLease::QueueDefault, PopLease::Ms)
    }
}

/// What a pop got.
#[derive(Debug)]
pub struct PopAnswer {
    /// The items (none: nothing came within the wait).
    pub items: Vec<Item>,
    /// When acks rode on the pop, each receipt's outcome, in order.
    pub acked: Option<Vec<ReceiptOutcome>>,
}

/// The receipts a pop acks first, in order (`None`: not a receipt).
#[derive(Debug, Default)]
pub struct Riding {
    parsed: Vec<Option<Receipt>>,
}

impl Riding {
    /// Parses `ack` (comma-separated receipts; empty: none). More than
    /// [`POP_ACKS_MAX`] is refused; a malformed receipt is its outcome.
    pub fn parse(ack: &str) -> Result<Riding> {
        if ack.is_empty() {
            return Ok(Riding::default());
        }
        Riding::of(ack.split(','))
    }

    /// The receipts `receipts` names, in order: more than [`POP_ACKS_MAX`]
    /// is refused; a malformed receipt is its outcome.
    pub fn of<'a>(receipts: impl Iterator<Item = &'a str> + Clone) -> Result<Riding> {
        let count = receipts.clone().count();
        if count > POP_ACKS_MAX {
            return Err(Error::BadParameter(format!(
                "ack names at most {POP_ACKS_MAX} receipts, got {count}"
            )));
        }
        let parsed = receipts.map(Receipt::parse).collect();
        Ok(Riding { parsed })
    }

    /// True when `ack` named no receipt (`ack=`).
    pub fn is_empty(&self) -> bool {
        self.parsed.is_empty()
    }

    /// The well-formed receipts, in order.
    fn receipts(&self) -> Vec<Receipt> {
        self.parsed.iter().flatten().copied().collect()
    }

    /// Each receipt's outcome, in order: a failure that is no receipt's
    /// own (the store's) never fails the pop; its receipt is unknown.
    fn outcomes(&self, keys: &QueueKeys, acked: Vec<AckOutcome>) -> Vec<ReceiptOutcome> {
        let mut acked = acked.into_iter();
        let outcome = |receipt: &Option<Receipt>| {
            let Some(receipt) = receipt else {
                return ReceiptOutcome::Invalid;
            };
            // One outcome per well-formed receipt: never short.
            let result = acked.next().unwrap_or(Err(LeaseError::UnknownReceipt));
            outcome_of(keys, receipt, result).unwrap_or(ReceiptOutcome::UnknownReceipt)
        };
        self.parsed.iter().map(outcome).collect()
    }
}

impl<S: Store> Hotq<S> {
    /// Checks a pop's `wait_ms` and `max` (default 1) against the
    /// configured caps: the wait and the most items.
    pub fn check_pop(&self, wait_ms: u64, max: Option<usize>) -> Result<(Duration, usize)> {
        let limits = &self.limits;
        if wait_ms > limits.wait_max_ms {
            return Err(Error::BadParameter(format!(
                "wait_ms must be at most {}, got {wait_ms}",
                limits.wait_max_ms
            )));
        }
        let max = max.unwrap_or(1);
        if max == 0 || max > limits.pop_max_items {
            return Err(Error::BadParameter(format!(
                "max must be 1 to {}, got {max}",
                limits.pop_max_items
            )));
        }
        Ok((Duration::from_millis(wait_ms), max))
    }

    /// Checks a `lease_ms` (pop, extend): 1 to the configured maximum.
    pub fn check_lease_ms(&self, lease_ms: u64) -> Result<NonZeroU64> {
        let max = self.limits.lease_max_ms;
        match NonZeroU64::new(lease_ms) {
            Some(lease_ms) if lease_ms.get() <= max => Ok(lease_ms),
            _ => Err(Error::BadParameter(format!(
                "lease_ms must be 1 to {max}, got {lease_ms}"
            ))),
        }
    }

    /// Pops from `keys`' queue as `options` asks, `riding` acked first
    /// (in the pop's commit when they can be): the items, and each riding
    /// receipt's outcome. A receipt that fails is its outcome, never the
    /// pop's error. Dropping the future gives back what it was handed.
    pub async fn pop(
        &self,
        keys: &QueueKeys,
        options: PopOptions,
        riding: Option<Riding>,
    ) -> Result<PopAnswer> {
        let lease_ms = match options.lease {
            PopLease::Ms(lease_ms) => Some(lease_ms),
            PopLease::Never => None,
            PopLease::QueueDefault => self.pop_default_lease_ms(keys).await?,
        };
        let ask = crate::staging::pop::PopAsk {
            end: options.end,
            max: options.max,
            wait: options.wait,
            lease_ms,
        };
        // No receipts: no allocation (an empty Vec holds none).
        let receipts = riding.as_ref().map_or_else(Vec::new, Riding::receipts);
        let popped = self
            .coordinator
            .staging()
            .pop_acking(keys, ask, receipts)
            .await?;
        let acked = riding.map(|riding| riding.outcomes(keys, popped.acked));
        if let Some(acked) = &acked {
            let count = acked.iter().filter(|o| **o == ReceiptOutcome::Acked);
            count_acks(keys, count.count() as u64);
        }
        Ok(PopAnswer {
            items: popped.items,
            acked,
        })
    }

    /// A FIFO receive's `heads` (one per group, leased for `lease_ms`),
    /// each followed by the next items of its group, leased too, up to
    /// `max` in all, in one transaction. Should it fail, the heads alone:
    /// they are leased already, and the others still wait.
    pub async fn with_group_batches(
        &self,
        keys: &QueueKeys,
        heads: Vec<Item>,
        max: usize,
        lease_ms: NonZeroU64,
    ) -> Vec<Item> {
        if heads.len() >= max {
            return heads;
        }
        let taken = transact(&self.store, RetryPolicy::default(), |txn| {
            let heads = &heads;
            async move {
                let now = now_ms();
                // The batch is leased too: within the queue's limits (the
                // heads took their share in their pop's commit).
                let mut budget = batch_budget_in(&txn, keys).await?;
                let mut room = max - heads.len();
                let mut taken = Vec::with_capacity(heads.len());
                for head in heads {
                    let terms = (lease_ms, now);
                    let batch = take_batch_in(&txn, keys, (head, room), terms, &mut budget)
                        .await
                        .map_err(crate::queue::corrupt_as_store)?;
                    room = room.saturating_sub(batch.len());
                    taken.push(batch);
                }
                budget.spend_in(&txn, keys)?;
                Ok(taken)
            }
        })
        .await;
        match taken {
            Ok(taken) => heads
                .into_iter()
                .zip(taken)
                .flat_map(|(head, batch)| std::iter::once(head).chain(batch))
                .collect(),
            Err(error) => {
                tracing::warn!(queue = %keys.name(), %error, "taking a FIFO receive's batch failed: its group heads alone");
                heads
            }
        }
    }

    /// Pops one item of `keys`' FIFO queue the way FoundationDB's recipe
    /// does (conflicts retried with backoff, never waiting in line), for
    /// comparison with [`Self::pop`]: no wait, no lease, no riding acks.
    pub async fn pop_recipe(&self, keys: &QueueKeys) -> Result<Vec<Item>> {
        Ok(self.coordinator.pop_recipe(keys).await?)
    }

    /// Counters of the pop protocol's work since this core started, by
    /// name (`direct_pops`, `staged_pops`, `fulfill_batches`, ...).
    pub fn pop_protocol_counts(&self) -> Vec<(&'static str, u64)> {
        self.coordinator.stats_snapshot()
    }

    /// The lease of a pop that names none: the queue's `default_lease_ms`
    /// (`None`: none; the items are deleted), read from a short-lived
    /// cache so a plain pop does not read the settings key each time.
    pub async fn pop_default_lease_ms(&self, keys: &QueueKeys) -> Result<Option<NonZeroU64>> {
        if let Some(lease_ms) = self.default_leases.fresh(keys) {
            return Ok(NonZeroU64::new(lease_ms));
        }
        // Taken before the read: an entry is never younger than what it holds.
        let read_at = std::time::Instant::now();
        let stored = crate::queue::settings::read(&self.store, keys).await?;
        let lease_ms = stored
            .effective(keys.name(), &self.settings_defaults)
            .default_lease_ms
            .unwrap_or(0);
        self.default_leases.remember(keys, lease_ms, read_at);
        Ok(NonZeroU64::new(lease_ms))
    }
}

/// What the queue's pause and limits allow a FIFO receive's batch, in
/// `txn`: nothing when it is paused.
async fn batch_budget_in<T: crate::store::Transaction>(
    txn: &T,
    keys: &QueueKeys,
) -> std::result::Result<crate::queue::limits::Budget, crate::store::StoreError> {
    let gates = crate::queue::settings::gates_in(txn, keys)
        .await
        .map_err(crate::queue::corrupt_as_store)?;
    if gates.paused {
        return Ok(crate::queue::limits::Budget::closed());
    }
    crate::queue::limits::budget_in(txn, keys, gates.limits, true).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::QueueName;

    #[test]
    fn receipts_parse_in_order_and_a_bad_one_is_its_own_outcome() {
        let keys = QueueKeys::new(&QueueName::new("jobs").unwrap());
        let good = Receipt::for_lease(&keys, 1);
        let foreign = Receipt::for_lease(&QueueKeys::new(&QueueName::new("other").unwrap()), 1);
        let riding = Riding::parse(&format!("{good},nope,{foreign},{good}")).unwrap();
        assert_eq!(riding.receipts(), [good, foreign, good]);
        let outcomes = vec![
            Ok(()),
            Err(LeaseError::UnknownReceipt),
            Err(LeaseError::Expired { expired_at_ms: 1 }),
        ];
        let words: Vec<_> = riding
            .outcomes(&keys, outcomes)
            .into_iter()
            .map(ReceiptOutcome::word)
            .collect();
        assert_eq!(
            words.join(","),
            "acked,invalid,receipt_queue_mismatch,lease_expired"
        );
        assert!(Riding::parse("").unwrap().parsed.is_empty());
        let too_many = vec![good.to_string(); POP_ACKS_MAX + 1].join(",");
        assert!(Riding::parse(&too_many).is_err());
        let most = vec![good.to_string(); POP_ACKS_MAX].join(",");
        assert_eq!(Riding::parse(&most).unwrap().parsed.len(), POP_ACKS_MAX);
    }
}
