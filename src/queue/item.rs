//! An item as a queue hands it out, the errors of queue operations, and
//! how a delayed item is held: below every recipe ([`crate::queue::fifo`],
//! [`crate::queue::groups`], [`crate::lease`]), so each can use them without
//! importing the others.

use std::fmt;

use rand::RngCore;

use crate::envelope::{DeadLetter, ItemValue, PAYLOAD_SIZE_MAX, PUSH_PAYLOAD_BYTES_MAX, PartsRef};
use crate::keys::{QueueKeys, RANDOM_LEN};
use crate::lease::receipt::Lease;
use crate::store::{StoreError, Transaction};

/// Most items one `push_batch` accepts.
pub const PUSH_BATCH_MAX: usize = 1_000;

/// An item taken from or seen in a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's key in the store (where a reaped item returns to).
    pub key: Vec<u8>,
    /// When the item was pushed, in milliseconds since the Unix epoch.
    pub enqueued_at_ms: u64,
    /// The bytes pushed.
    pub payload: Vec<u8>,
    /// Deliveries under a lease before this one.
    pub deliveries: u32,
    /// Where a dead-lettered item came from.
    pub dead_letter: Option<DeadLetter>,
    /// Its message group (see [`crate::queue::groups`]).
    pub group: Option<String>,
    /// When its retention ends (see [`crate::queue::expiry`]); `None`: never.
    pub expires_at_ms: Option<u64>,
    /// The fairness key it was pushed with (see [`crate::queue::fair`]).
    pub fair_key: Option<String>,
    /// The lease it is held under, when popped with one.
    pub lease: Option<Lease>,
    /// Where its payload is stored when it did not fit its envelope (see
    /// [`crate::queue::parts`]); `payload` is empty until they are read.
    pub parts: Option<PartsRef>,
}

impl Item {
    /// The item stored under `key` as `value`, not leased.
    pub fn from_value(key: Vec<u8>, value: ItemValue) -> Item {
        Item {
            key,
            enqueued_at_ms: value.enqueued_at_ms,
            payload: value.payload,
            deliveries: value.deliveries,
            dead_letter: value.dead_letter,
            group: value.group,
            expires_at_ms: value.expires_at_ms,
            fair_key: value.fair_key,
            lease: None,
            parts: value.parts,
        }
    }

    /// The payload's length, spilled or not.
    pub fn len(&self) -> usize {
        self.parts
            .map_or(self.payload.len(), |parts| parts.len as usize)
    }

    /// True for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The item's envelope as it stood in the queue.
    pub fn value(&self) -> ItemValue {
        ItemValue {
            enqueued_at_ms: self.enqueued_at_ms,
            deliveries: self.deliveries,
            dead_letter: self.dead_letter.clone(),
            group: self.group.clone(),
            expires_at_ms: self.expires_at_ms,
            fair_key: self.fair_key.clone(),
            // A spilled item's envelope holds its parts reference, not
            // its payload: no copy of what is not encoded.
            payload: match self.parts {
                None => self.payload.clone(),
                Some(_) => Vec::new(),
            },
            parts: self.parts,
        }
    }
}

/// Errors of queue operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueError {
    /// The store failed.
    Store(StoreError),
    /// A payload is larger than [`PAYLOAD_SIZE_MAX`].
    PayloadTooLarge {
        /// The payload's length.
        len: usize,
    },
    /// A batch's payloads add up to more than [`PUSH_PAYLOAD_BYTES_MAX`].
    BatchTooLarge {
        /// The payloads' total length.
        bytes: usize,
    },
    /// A batch is empty or larger than [`PUSH_BATCH_MAX`].
    BadBatch {
        /// The batch's length.
        len: usize,
    },
    /// A stored value is not a valid envelope: the store holds something
    /// hotq did not write.
    Corrupt {
        /// The key holding it.
        key: Vec<u8>,
    },
    /// A pop that must not wait was not answered by its queue's fulfiller
    /// within its bound (the store is failing or far behind): whether the
    /// queue is empty is not known, so it is not answered "empty".
    Unanswered,
}

impl From<StoreError> for QueueError {
    fn from(error: StoreError) -> Self {
        QueueError::Store(error)
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Store(error) => write!(f, "{error}"),
            QueueError::PayloadTooLarge { len } => {
                write!(
                    f,
                    "item of {len} bytes exceeds the limit of {PAYLOAD_SIZE_MAX} bytes"
                )
            }
            QueueError::BatchTooLarge { bytes } => write!(
                f,
                "a batch of {bytes} payload bytes exceeds the limit of \
                 {PUSH_PAYLOAD_BYTES_MAX} bytes per push"
            ),
            QueueError::BadBatch { len } => {
                write!(f, "a batch holds 1 to {PUSH_BATCH_MAX} items, got {len}")
            }
            QueueError::Corrupt { key } => write!(f, "malformed item envelope under key {key:?}"),
            QueueError::Unanswered => write!(
                f,
                "the queue's fulfiller did not answer in time; whether it is empty is not known"
            ),
        }
    }
}

impl std::error::Error for QueueError {}

/// Writes encoded delayed envelopes (`HeldItem`s with no item key) of the
/// FIFO queue `keys` into the due index in `txn`, visible from
/// `visible_at_ms`, when the timer appends them in order at the tail;
/// `values[i]` expires at `expires[i]`, if set (see [`crate::queue::expiry`]).
pub fn hold_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    values: &[Vec<u8>],
    visible_at_ms: u64,
    expires: &[Option<u64>],
) -> Result<(), StoreError> {
    // One random prefix per batch plus the position keeps the batch's
    // order among items due at the same millisecond.
    let mut random = [0u8; RANDOM_LEN];
    rand::rng().fill_bytes(&mut random[..RANDOM_LEN - 4]);
    for (position, value) in values.iter().enumerate() {
        random[RANDOM_LEN - 4..].copy_from_slice(&(position as u32).to_be_bytes());
        let key = keys.delayed(visible_at_ms, &random);
        txn.set(&key, value)?;
        let expires_at_ms = expires.get(position).copied().flatten();
        crate::queue::expiry::index_in(txn, keys, &key, expires_at_ms)?;
    }
    // The entries are in the store-wide due index, where every daemon's
    // timer finds them.
    txn.atomic_add(&keys.delayed_count(), values.len() as i64)
}
