//! The core's one error: every failure of an operation, classified once,
//! here, by type (never by message), with a stable code each front end
//! maps to its wire: an HTTP status and `{"error":{"code"}}`, an SQS
//! error, a RESP `-ERR`.

use std::fmt;

use crate::lease::LeaseError;
use crate::queue::QueueError;
use crate::store::StoreError;

/// What the core answers when an operation fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A parameter is out of its range or malformed (`bad_parameter`).
    BadParameter(String),
    /// A settings change names an unknown key or a value out of range;
    /// nothing changed (`invalid_settings`).
    InvalidSettings(String),
    /// A batch is empty or holds too many items (`bad_batch`).
    BadBatch(String),
    /// One payload is over the limit (`item_too_large`).
    ItemTooLarge(String),
    /// A push's payloads add up to more than one transaction carries
    /// (`batch_too_large`).
    BatchTooLarge(String),
    /// An item of no bytes (`empty_item`).
    EmptyItem,
    /// A message group key out of its form (`bad_group`).
    BadGroup(String),
    /// A fairness key out of its form (`bad_fair_key`).
    BadFairKey(String),
    /// A dedup id out of its form (`bad_dedup_id`).
    BadDedupId(String),
    /// Text that is not a receipt (`invalid_receipt`).
    InvalidReceipt(String),
    /// No lease holds this receipt (`unknown_receipt`).
    UnknownReceipt,
    /// The receipt names another queue (`receipt_queue_mismatch`); the
    /// message names the queue it was used on.
    ReceiptQueueMismatch(String),
    /// The lease ended before the call (`lease_expired`).
    LeaseExpired {
        /// When it ended, in ms since the epoch.
        expired_at_ms: u64,
    },
    /// A stored value is not one hotq wrote (`corrupt_item`).
    Corrupt(String),
    /// A pop that must not wait was not answered in time: whether the
    /// queue is empty is not known (`pop_unanswered`).
    Unanswered(String),
    /// The store is busy; retrying is safe (`store_busy`).
    StoreBusy(String),
    /// The store failed for good; the daemon is stopping
    /// (`store_unavailable`).
    StoreUnavailable(String),
    /// The writes may or may not have applied (`maybe_committed`).
    MaybeCommitted(String),
    /// Any other failure of the store (`store_error`).
    Store(String),
}

/// A core operation's result.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The stable code front ends and scripts match on.
    pub fn code(&self) -> &'static str {
        match self {
            Error::BadParameter(_) => "bad_parameter",
            Error::InvalidSettings(_) => "invalid_settings",
            Error::BadBatch(_) => "bad_batch",
            Error::ItemTooLarge(_) => "item_too_large",
            Error::BatchTooLarge(_) => "batch_too_large",
            Error::EmptyItem => "empty_item",
            Error::BadGroup(_) => "bad_group",
            Error::BadFairKey(_) => "bad_fair_key",
            Error::BadDedupId(_) => "bad_dedup_id",
            Error::InvalidReceipt(_) => "invalid_receipt",
            Error::UnknownReceipt => "unknown_receipt",
            Error::ReceiptQueueMismatch(_) => "receipt_queue_mismatch",
            Error::LeaseExpired { .. } => "lease_expired",
            Error::Corrupt(_) => "corrupt_item",
            Error::Unanswered(_) => "pop_unanswered",
            Error::StoreBusy(_) => "store_busy",
            Error::StoreUnavailable(_) => "store_unavailable",
            Error::MaybeCommitted(_) => "maybe_committed",
            Error::Store(_) => "store_error",
        }
    }

    /// True when the same call may simply be made again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::StoreBusy(_) | Error::StoreUnavailable(_) | Error::Unanswered(_)
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadParameter(m)
            | Error::InvalidSettings(m)
            | Error::BadBatch(m)
            | Error::ItemTooLarge(m)
            | Error::BatchTooLarge(m)
            | Error::BadGroup(m)
            | Error::BadFairKey(m)
            | Error::BadDedupId(m)
            | Error::InvalidReceipt(m)
            | Error::ReceiptQueueMismatch(m)
            | Error::Corrupt(m)
            | Error::Unanswered(m)
            | Error::StoreBusy(m)
            | Error::StoreUnavailable(m)
            | Error::MaybeCommitted(m)
            | Error::Store(m) => f.write_str(m),
            Error::EmptyItem => f.write_str("an item must hold at least one byte"),
            Error::UnknownReceipt => f.write_str(&LeaseError::UnknownReceipt.to_string()),
            Error::LeaseExpired { expired_at_ms } => {
                let expired_at_ms = *expired_at_ms;
                write!(f, "{}", LeaseError::Expired { expired_at_ms })
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<StoreError> for Error {
    fn from(error: StoreError) -> Self {
        let message = error.to_string();
        match error {
            StoreError::TransactionTooLarge => Error::BatchTooLarge(message),
            StoreError::KeyTooLarge { .. } | StoreError::ValueTooLarge { .. } => {
                Error::ItemTooLarge(message)
            }
            // The daemon exits soon (`store_failure_exit_ms`) so its
            // supervisor restarts it: clients retry elsewhere or later.
            error if error.is_unavailable() => Error::StoreUnavailable(message),
            // A pop whose riding acks a stalled round still carries: retrying
            // blindly is not safe for everything, so it has a code of its own.
            StoreError::MaybeCommitted => Error::MaybeCommitted(message),
            error if error.is_retryable() => Error::StoreBusy(message),
            _ => Error::Store(message),
        }
    }
}

impl From<QueueError> for Error {
    fn from(error: QueueError) -> Self {
        let message = error.to_string();
        match error {
            QueueError::Store(error) => error.into(),
            QueueError::BatchTooLarge { .. } => Error::BatchTooLarge(message),
            QueueError::PayloadTooLarge { .. } => Error::ItemTooLarge(message),
            QueueError::BadBatch { .. } => Error::BadBatch(message),
            QueueError::Corrupt { .. } => Error::Corrupt(message),
            QueueError::Unanswered => Error::Unanswered(message),
        }
    }
}

impl From<LeaseError> for Error {
    fn from(error: LeaseError) -> Self {
        match error {
            LeaseError::UnknownReceipt => Error::UnknownReceipt,
            LeaseError::Expired { expired_at_ms } => Error::LeaseExpired { expired_at_ms },
            LeaseError::Queue(error) => error.into(),
        }
    }
}
