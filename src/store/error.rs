//! Store errors, classified by FoundationDB error code.
//!
//! Callers decide what to do from the variant (or [`StoreError::code`]),
//! never from a message: a conflict is a typed outcome, separate from I/O.

use std::fmt;

/// Everything a store operation can fail with.
///
/// The numeric codes are FoundationDB's, so the two backends report the
/// same failure the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// A read-conflict range intersected a write committed after the
    /// transaction's read version (`not_committed`, 1020). Nothing was written.
    Conflict,
    /// The transaction is older than the store keeps history for
    /// (`transaction_too_old`, 1007). Nothing was written.
    TooOld,
    /// The commit may or may not have been applied (`commit_unknown_result`, 1021).
    MaybeCommitted,
    /// A key longer than [`crate::store::KEY_SIZE_MAX`] (`key_too_large`, 2102).
    KeyTooLarge {
        /// The offending key's length in bytes.
        len: usize,
    },
    /// A value longer than [`crate::store::VALUE_SIZE_MAX`] (`value_too_large`, 2103).
    ValueTooLarge {
        /// The offending value's length in bytes.
        len: usize,
    },
    /// The transaction's writes and conflict ranges exceed
    /// [`crate::store::TRANSACTION_SIZE_MAX`] (`transaction_too_large`, 2101).
    TransactionTooLarge,
    /// More watches are outstanding than the store allows (`too_many_watches`, 1032).
    TooManyWatches,
    /// The watch's transaction was dropped or failed to commit, or the store
    /// closed (`operation_cancelled`, 1101).
    Cancelled,
    /// The transaction was used after `commit` (`used_during_commit`, 2017).
    UsedAfterCommit,
    /// A range whose begin is after its end, or a zero limit (`inverted_range`, 2005
    /// / `invalid_option_value`, 2006).
    InvalidArgument(&'static str),
    /// The storage engine failed; the message is for humans only.
    Io(String),
    /// The store has failed for good (a write or fsync failed, so it
    /// refuses every transaction until the process restarts on it); the
    /// reason is for humans only. Retrying in this process cannot succeed.
    Unavailable(String),
    /// Any other backend error, by its code.
    Backend {
        /// The backend's numeric error code.
        code: i32,
        /// The backend's description, for humans only.
        message: String,
    },
}

impl StoreError {
    /// FoundationDB's numeric code for this error.
    pub fn code(&self) -> i32 {
        match self {
            StoreError::Conflict => 1020,
            StoreError::TooOld => 1007,
            StoreError::MaybeCommitted => 1021,
            StoreError::KeyTooLarge { .. } => 2102,
            StoreError::ValueTooLarge { .. } => 2103,
            StoreError::TransactionTooLarge => 2101,
            StoreError::TooManyWatches => 1032,
            StoreError::Cancelled => 1101,
            StoreError::UsedAfterCommit => 2017,
            StoreError::InvalidArgument(_) => 2006,
            // FoundationDB's io_error: both are the disk failing; the
            // variant tells a passing fault from a store that gave up.
            StoreError::Io(_) | StoreError::Unavailable(_) => 1510,
            StoreError::Backend { code, .. } => *code,
        }
    }

    /// Maps a FoundationDB error code to the typed error.
    pub fn from_code(code: i32, message: impl Into<String>) -> StoreError {
        match code {
            1020 => StoreError::Conflict,
            1007 => StoreError::TooOld,
            1021 => StoreError::MaybeCommitted,
            2101 => StoreError::TransactionTooLarge,
            1032 => StoreError::TooManyWatches,
            1101 => StoreError::Cancelled,
            2017 => StoreError::UsedAfterCommit,
            // FoundationDB does not say the length; 0 stands for "unknown".
            2102 => StoreError::KeyTooLarge { len: 0 },
            2103 => StoreError::ValueTooLarge { len: 0 },
            code => StoreError::Backend {
                code,
                message: message.into(),
            },
        }
    }

    /// True when running the whole transaction again can succeed: conflicts,
    /// too-old, maybe-committed (for idempotent bodies) and FoundationDB's
    /// transient cluster codes.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code(),
            1007 | 1020 | 1021 | 1009 | 1037 | 1038 | 1039 | 1213 | 1040 | 1042 | 1051
        )
    }

    /// True when the store has failed for good and refuses every
    /// transaction: only a restart (on a disk with room) helps.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }

    /// True when the commit may have been applied although it reported failure.
    pub fn is_maybe_committed(&self) -> bool {
        self.code() == 1021
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Conflict => write!(f, "transaction conflicted (1020)"),
            StoreError::TooOld => write!(f, "transaction too old (1007)"),
            StoreError::MaybeCommitted => write!(f, "commit result unknown (1021)"),
            StoreError::KeyTooLarge { len } => write!(f, "key of {len} bytes is too large (2102)"),
            StoreError::ValueTooLarge { len } => {
                write!(f, "value of {len} bytes is too large (2103)")
            }
            StoreError::TransactionTooLarge => write!(f, "transaction too large (2101)"),
            StoreError::TooManyWatches => write!(f, "too many watches (1032)"),
            StoreError::Cancelled => write!(f, "operation cancelled (1101)"),
            StoreError::UsedAfterCommit => write!(f, "transaction used after commit (2017)"),
            StoreError::InvalidArgument(what) => write!(f, "invalid argument: {what} (2006)"),
            StoreError::Io(message) => write!(f, "storage I/O error: {message}"),
            StoreError::Unavailable(reason) => write!(f, "the store has failed: {reason}"),
            StoreError::Backend { code, message } => write!(f, "backend error {code}: {message}"),
        }
    }
}

impl std::error::Error for StoreError {}
