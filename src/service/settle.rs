//! Settling leases: ack, nack and extend one receipt, ack many with an
//! outcome per receipt. The ACKS counter is counted here only
//! ([`count_acks`]: single acks, batch acks and acks riding on pops), and
//! a failed settle is classified here only ([`classify`], [`outcome_of`]).

use super::{Error, Hotq, Result};
use crate::envelope::now_ms;
use crate::keys::QueueKeys;
use crate::lease::LeaseError;
use crate::lease::backlog::SettleOp;
use crate::lease::settle::stale_in;
use crate::metrics;
use crate::store::{RetryPolicy, Store, transact};

pub use crate::lease::Receipt;
pub use crate::lease::settle::{Returned, Stale};

/// Most receipts one batch ack names.
pub const ACK_BATCH_MAX: usize = 1_000;

/// What became of one receipt of a batch ack or of the acks riding on a
/// pop, in the words front ends answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// The item is done.
    Acked,
    /// No lease holds the receipt (settled, returned, never issued).
    UnknownReceipt,
    /// The lease expired before the ack.
    LeaseExpired,
    /// The receipt was issued by another queue.
    ReceiptQueueMismatch,
    /// The text is not a receipt.
    Invalid,
}

impl ReceiptOutcome {
    /// The outcome's word: `acked`, `unknown_receipt`, `lease_expired`,
    /// `receipt_queue_mismatch`, `invalid`.
    pub fn word(self) -> &'static str {
        match self {
            ReceiptOutcome::Acked => "acked",
            ReceiptOutcome::UnknownReceipt => "unknown_receipt",
            ReceiptOutcome::LeaseExpired => "lease_expired",
            ReceiptOutcome::ReceiptQueueMismatch => "receipt_queue_mismatch",
            ReceiptOutcome::Invalid => "invalid",
        }
    }
}

/// A receipt from its text, or `invalid_receipt`.
pub fn parse_receipt(raw: &str) -> Result<Receipt> {
    Receipt::parse(raw).ok_or_else(|| {
        // The batch ack calls the same receipt `invalid`.
        Error::InvalidReceipt(format!(
            "receipt {raw:?} is invalid: a receipt is 32 hex digits"
        ))
    })
}

/// The error of a settle of `receipt` on `keys`' queue that failed: an
/// unknown receipt carrying another queue's tag was used with the wrong
/// queue, not a lease that is gone.
pub(super) fn classify(keys: &QueueKeys, receipt: &Receipt, error: LeaseError) -> Error {
    if error == LeaseError::UnknownReceipt && !receipt.names_queue(keys) {
        return Error::ReceiptQueueMismatch(format!(
            "this receipt was not issued by {} queue {} (use it on the queue that popped it)",
            metrics::kind_label(keys.kind()),
            keys.name()
        ));
    }
    error.into()
}

/// The outcome of an ack of `receipt` on `keys`' queue, or the error
/// that is no receipt's own (the store failed).
pub(super) fn outcome_of(
    keys: &QueueKeys,
    receipt: &Receipt,
    result: std::result::Result<(), LeaseError>,
) -> Result<ReceiptOutcome> {
    let Err(error) = result else {
        return Ok(ReceiptOutcome::Acked);
    };
    match classify(keys, receipt, error) {
        Error::UnknownReceipt => Ok(ReceiptOutcome::UnknownReceipt),
        Error::LeaseExpired { .. } => Ok(ReceiptOutcome::LeaseExpired),
        Error::ReceiptQueueMismatch(_) => Ok(ReceiptOutcome::ReceiptQueueMismatch),
        error => Err(error),
    }
}

/// Counts `acked` acks on `keys`' queue: the one place ACKS is counted.
pub(super) fn count_acks(keys: &QueueKeys, acked: u64) {
    if acked > 0 {
        metrics::queue_count(metrics::ACKS, keys.kind(), keys.name(), acked);
    }
}

impl<S: Store> Hotq<S> {
    /// Acks receipt `raw` on `keys`' queue: the item is done.
    pub async fn ack(&self, keys: &QueueKeys, raw: &str) -> Result<()> {
        let receipt = parse_receipt(raw)?;
        self.ack_receipt(keys, &receipt).await
    }

    /// Acks `receipt` on `keys`' queue: the item is done.
    pub async fn ack_receipt(&self, keys: &QueueKeys, receipt: &Receipt) -> Result<()> {
        self.coordinator
            .settler()
            .settle(keys, *receipt, SettleOp::Ack)
            .await
            .map_err(|error| classify(keys, receipt, error))?;
        count_acks(keys, 1);
        Ok(())
    }

    /// Acks the receipts `raw` on `keys`' queue in shared settle commits:
    /// one outcome per receipt, in order (a receipt named twice is acked
    /// once; the second is unknown). 1 to [`ACK_BATCH_MAX`] receipts; a
    /// failure of the store fails the batch (it may have committed).
    pub async fn ack_many(&self, keys: &QueueKeys, raw: &[&str]) -> Result<Vec<ReceiptOutcome>> {
        if raw.is_empty() || raw.len() > ACK_BATCH_MAX {
            return Err(Error::BadParameter(format!(
                "a batch ack names 1 to {ACK_BATCH_MAX} receipts, got {}",
                raw.len()
            )));
        }
        let parsed: Vec<Option<Receipt>> = raw.iter().map(|r| Receipt::parse(r)).collect();
        let settles = parsed
            .iter()
            .flatten()
            .map(|receipt| (*receipt, SettleOp::Ack))
            .collect();
        let settled = self.coordinator.settler().settle_many(keys, settles).await;
        let mut settled = settled.into_iter();
        let mut outcomes = Vec::with_capacity(raw.len());
        for receipt in &parsed {
            let Some(receipt) = receipt else {
                outcomes.push(ReceiptOutcome::Invalid);
                continue;
            };
            // One answer per settle: never short.
            let result = settled.next().unwrap_or(Err(LeaseError::UnknownReceipt));
            let outcome = outcome_of(keys, receipt, result.map(drop))?;
            outcomes.push(outcome);
        }
        let acked = outcomes.iter().filter(|o| **o == ReceiptOutcome::Acked);
        count_acks(keys, acked.count() as u64);
        Ok(outcomes)
    }

    /// Nacks receipt `raw` on `keys`' queue, `delay_ms` checked: the item
    /// returns now, or after `delay_ms`, or goes to the dead-letter queue
    /// once out of deliveries. Returns where it went.
    pub async fn nack(&self, keys: &QueueKeys, raw: &str, delay_ms: u64) -> Result<Returned> {
        let delay_ms = self.check_delay_ms(delay_ms)?;
        let receipt = parse_receipt(raw)?;
        self.nack_receipt(keys, &receipt, delay_ms).await
    }

    /// [`Self::nack`] of a parsed receipt.
    pub async fn nack_receipt(
        &self,
        keys: &QueueKeys,
        receipt: &Receipt,
        delay_ms: u64,
    ) -> Result<Returned> {
        let delay_ms = self.check_delay_ms(delay_ms)?;
        self.coordinator
            .nack(keys, receipt, delay_ms)
            .await
            .map_err(|error| classify(keys, receipt, error))
    }

    /// Moves receipt `raw`'s lease on `keys`' queue to `lease_ms` (checked)
    /// from now, shorter or longer: the new expiry, in ms since the epoch.
    pub async fn extend(&self, keys: &QueueKeys, raw: &str, lease_ms: u64) -> Result<u64> {
        self.check_lease_ms(lease_ms)?;
        let receipt = parse_receipt(raw)?;
        self.extend_receipt(keys, &receipt, lease_ms).await
    }

    /// [`Self::extend`] of a parsed receipt.
    pub async fn extend_receipt(
        &self,
        keys: &QueueKeys,
        receipt: &Receipt,
        lease_ms: u64,
    ) -> Result<u64> {
        let lease_ms = self.check_lease_ms(lease_ms)?;
        self.coordinator
            .extend(keys, receipt, lease_ms.get())
            .await
            .map_err(|error| classify(keys, receipt, error))
    }

    /// For `receipt`, whose settle found no lease in force: was its item
    /// (`item_key`, as its lease held it with `deliveries`) received
    /// since? With `delete`, deletes it, in one transaction, when it was
    /// not (SQS deletes a message by the handle of its last receive).
    pub async fn settle_stale(
        &self,
        keys: &QueueKeys,
        receipt: &Receipt,
        (item_key, deliveries): (&[u8], u32),
        delete: bool,
    ) -> Result<Stale> {
        let found = (item_key, deliveries);
        let outcome = transact(&self.store, RetryPolicy::default(), |txn| async move {
            stale_in(&txn, keys, receipt, found, delete, now_ms()).await
        })
        .await?;
        match outcome {
            Ok(stale) => Ok(stale),
            Err(LeaseError::Queue(error)) => Err(error.into()),
            Err(LeaseError::UnknownReceipt | LeaseError::Expired { .. }) => Ok(Stale::Gone),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::QueueName;

    #[test]
    fn a_failed_settle_is_classified_once_for_every_caller() {
        let jobs = QueueKeys::new(&QueueName::new("jobs").unwrap());
        let other = QueueKeys::new(&QueueName::new("other").unwrap());
        let own = Receipt::for_lease(&jobs, 1);
        let foreign = Receipt::for_lease(&other, 1);
        let unknown = || Err(LeaseError::UnknownReceipt);
        assert_eq!(
            outcome_of(&jobs, &own, unknown()),
            Ok(ReceiptOutcome::UnknownReceipt)
        );
        assert_eq!(
            outcome_of(&jobs, &foreign, unknown()),
            Ok(ReceiptOutcome::ReceiptQueueMismatch)
        );
        let expired = Err(LeaseError::Expired { expired_at_ms: 7 });
        assert_eq!(
            outcome_of(&jobs, &own, expired),
            Ok(ReceiptOutcome::LeaseExpired)
        );
        let error = classify(&jobs, &foreign, LeaseError::UnknownReceipt);
        assert_eq!(error.code(), "receipt_queue_mismatch");
        assert!(error.to_string().contains("queue jobs"), "{error}");
        assert_eq!(parse_receipt("nope").unwrap_err().code(), "invalid_receipt");
    }
}
