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

    /// What running the transaction again would mean, by FoundationDB code
    /// (see [`classify`]).
    pub fn class(&self) -> ErrorClass {
        classify(self.code())
    }

    /// True when running the whole transaction again can succeed: nothing
    /// was written ([`ErrorClass::NotCommitted`]), or the outcome is
    /// unknown ([`ErrorClass::UnknownOutcome`], only for idempotent bodies
    /// or once a marker has resolved it).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.class(),
            ErrorClass::NotCommitted | ErrorClass::UnknownOutcome
        )
    }

    /// True when the store has failed for good and refuses every
    /// transaction: only a restart (on a disk with room) helps.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }

    /// True when the commit may have been applied although it reported
    /// failure ([`ErrorClass::UnknownOutcome`]).
    pub fn is_maybe_committed(&self) -> bool {
        self.class() == ErrorClass::UnknownOutcome
    }
}

/// What a failed transaction means for the caller, decided by its
/// FoundationDB error code alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Nothing was written and running the transaction again can succeed:
    /// conflicts, too-old, and the cluster's transient pushback.
    NotCommitted,
    /// The commit may have been applied, or may still apply: running it
    /// again can do its work twice. Resolve it first (see
    /// [`crate::store::resolving`]) or retry only idempotent bodies.
    UnknownOutcome,
    /// Retrying cannot help: invalid arguments, limits, a failed store.
    Permanent,
}

/// FoundationDB's `commit_unknown_result`.
pub const COMMIT_UNKNOWN_RESULT: i32 = 1021;
/// FoundationDB's `cluster_version_changed`: with the multi-version client,
/// a commit in flight during an upgrade may have applied.
pub const CLUSTER_VERSION_CHANGED: i32 = 1039;
/// FoundationDB's `transaction_timed_out`: raised during a commit, that
/// commit may have applied or may still apply.
pub const TRANSACTION_TIMED_OUT: i32 = 1031;

/// Classifies a FoundationDB error code.
///
/// Mirrors the client library's `fdb_error_predicate` for API 7.3 (its
/// `MAYBE_COMMITTED` and `RETRYABLE_NOT_COMMITTED` sets), so the embedded
/// backend, which has no client library, classifies exactly as a cluster
/// would, and tests can check it as a pure function. One deliberate
/// difference: `transaction_timed_out` (1031) is an unknown outcome here,
/// not a permanent error, because a commit that timed out may still apply
/// (FoundationDB's own documentation of automatic idempotency warns of
/// it); treating it as permanent would report a pop that took an item as
/// failed.
pub fn classify(code: i32) -> ErrorClass {
    match code {
        COMMIT_UNKNOWN_RESULT | CLUSTER_VERSION_CHANGED | TRANSACTION_TIMED_OUT => {
            ErrorClass::UnknownOutcome
        }
        // transaction_too_old, future_version, not_committed,
        // process_behind, database_locked,
        // commit_proxy_memory_limit_exceeded, batch_transaction_throttled,
        // grv_proxy_memory_limit_exceeded, tag_throttled.
        1007 | 1009 | 1020 | 1037 | 1038 | 1042 | 1051 | 1078 | 1213 => ErrorClass::NotCommitted,
        _ => ErrorClass::Permanent,
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

#[cfg(test)]
mod tests {
    use super::{ErrorClass, StoreError, classify};

    #[test]
    fn codes_classify_as_the_client_library_does() {
        for code in [1007, 1009, 1020, 1037, 1038, 1042, 1051, 1078, 1213] {
            assert_eq!(classify(code), ErrorClass::NotCommitted, "code {code}");
        }
        for code in [1021, 1039, 1031] {
            assert_eq!(classify(code), ErrorClass::UnknownOutcome, "code {code}");
        }
        // transaction_cancelled, too_many_watches, external_client_already_loaded,
        // operation_cancelled, io_error, the size limits, used_during_commit,
        // invalid_option_value, unknown_error, success.
        for code in [
            1025, 1032, 1040, 1101, 1510, 2101, 2102, 2103, 2017, 2006, 4000, 0,
        ] {
            assert_eq!(classify(code), ErrorClass::Permanent, "code {code}");
        }
    }

    #[test]
    fn every_variant_keeps_its_class_through_its_code() {
        let cases = [
            (StoreError::Conflict, ErrorClass::NotCommitted),
            (StoreError::TooOld, ErrorClass::NotCommitted),
            (StoreError::MaybeCommitted, ErrorClass::UnknownOutcome),
            (StoreError::TransactionTooLarge, ErrorClass::Permanent),
            (StoreError::TooManyWatches, ErrorClass::Permanent),
            (StoreError::Cancelled, ErrorClass::Permanent),
            (StoreError::Io("disk".into()), ErrorClass::Permanent),
            (
                StoreError::Unavailable("gone".into()),
                ErrorClass::Permanent,
            ),
        ];
        for (error, class) in cases {
            assert_eq!(error.class(), class, "{error}");
            let again = StoreError::from_code(error.code(), "again");
            assert_eq!(again.class(), class, "{error} through its code");
        }
    }

    #[test]
    fn an_unknown_outcome_is_retryable_and_maybe_committed_and_nothing_else_is_both() {
        for code in 0..5000 {
            let error = StoreError::from_code(code, "");
            assert_eq!(
                error.is_maybe_committed(),
                classify(code) == ErrorClass::UnknownOutcome
            );
            assert_eq!(
                error.is_retryable(),
                classify(code) != ErrorClass::Permanent,
                "code {code}"
            );
        }
        let version_changed = StoreError::from_code(1039, "cluster_version_changed");
        assert!(version_changed.is_maybe_committed() && version_changed.is_retryable());
    }
}
