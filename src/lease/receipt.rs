//! A lease's handle and terms, on their own so that an item can carry its
//! lease without the queue layer depending on the lease module.

use std::fmt;

use rand::RngCore;

use crate::envelope::RECEIPT_LEN;
use crate::keys::{QueueKeys, QueueKind};

/// Bytes of a receipt that name its queue (a hash of kind and name).
pub const RECEIPT_TAG_LEN: usize = 2;
/// Bytes of a receipt that hold the expiry its lease was issued with (ms
/// since the epoch; 48 bits last until the year 10889).
const RECEIPT_EXPIRY_LEN: usize = 6;
/// Where a receipt's random bytes begin: 8 of them, so two leases of one
/// queue issued for the same millisecond never share a receipt.
const RECEIPT_RANDOM_AT: usize = RECEIPT_TAG_LEN + RECEIPT_EXPIRY_LEN;
/// The latest expiry a receipt can hold; leases are issued no later.
pub const RECEIPT_EXPIRY_MS_MAX: u64 = (1 << (8 * RECEIPT_EXPIRY_LEN)) - 1;

/// The opaque handle of one lease: 16 bytes, written as 32 lowercase hex
/// digits. A receipt issued by [`Receipt::for_lease`] holds its queue's tag,
/// so a receipt settled against another queue is told apart from a lease
/// that is gone, and the expiry the lease was issued with, so a settle
/// finds the lease's due-index entry with one read and no receipt row (see
/// [`crate::lease::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt(pub [u8; RECEIPT_LEN]);

impl Receipt {
    /// A fresh random receipt.
    pub fn random() -> Receipt {
        let mut bytes = [0u8; RECEIPT_LEN];
        rand::rng().fill_bytes(&mut bytes);
        Receipt(bytes)
    }

    /// A fresh receipt for a lease of `keys`' queue expiring at
    /// `expires_at_ms`: its tag, the expiry, then random bytes.
    pub fn for_lease(keys: &QueueKeys, expires_at_ms: u64) -> Receipt {
        assert!(
            expires_at_ms <= RECEIPT_EXPIRY_MS_MAX,
            "an expiry fits in {RECEIPT_EXPIRY_LEN} bytes"
        );
        let mut receipt = Receipt::random();
        receipt.0[..RECEIPT_TAG_LEN].copy_from_slice(&queue_tag(keys));
        receipt.0[RECEIPT_TAG_LEN..RECEIPT_RANDOM_AT]
            .copy_from_slice(&expires_at_ms.to_be_bytes()[8 - RECEIPT_EXPIRY_LEN..]);
        receipt
    }

    /// The expiry the lease was issued with, as the receipt holds it. An
    /// extend moves the lease and leaves a receipt row naming the new
    /// expiry; a receipt issued before receipts held their expiry holds
    /// random bytes here, and always has a receipt row.
    pub fn issued_expiry_ms(&self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes[8 - RECEIPT_EXPIRY_LEN..]
            .copy_from_slice(&self.0[RECEIPT_TAG_LEN..RECEIPT_RANDOM_AT]);
        u64::from_be_bytes(bytes)
    }

    /// Whether this receipt carries `keys`' tag. Receipts issued before
    /// tags existed carry random bytes there: callers only ask after the
    /// receipt was not found in the queue, to classify the error.
    pub fn names_queue(&self, keys: &QueueKeys) -> bool {
        self.0[..RECEIPT_TAG_LEN] == queue_tag(keys)
    }

    /// Parses 32 hex digits; `None` for anything else.
    pub fn parse(text: &str) -> Option<Receipt> {
        // `from_str_radix` alone would take a sign ("+f").
        if text.len() != RECEIPT_LEN * 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut bytes = [0u8; RECEIPT_LEN];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[i * 2..i * 2 + 2], 16).ok()?;
        }
        Some(Receipt(bytes))
    }
}

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// The tag of a queue: the top bytes of FNV-1a (32 bits) over its kind and
/// name. Stable across daemons and restarts, since a receipt outlives the
/// daemon that issued it (receipts of older binaries held all four bytes:
/// their first two still match).
fn queue_tag(keys: &QueueKeys) -> [u8; RECEIPT_TAG_LEN] {
    let kind: u8 = match keys.kind() {
        QueueKind::Fifo => b'f',
        QueueKind::Priority => b'p',
    };
    let mut hash: u32 = 0x811c_9dc5;
    for byte in std::iter::once(kind).chain(keys.name().as_str().bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let [first, second, ..] = hash.to_be_bytes();
    [first, second]
}

/// The lease a delivered item is held under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Acks, nacks or extends the lease.
    pub receipt: Receipt,
    /// When the item returns to the queue unless acked or extended, in ms
    /// since the epoch.
    pub expires_at_ms: u64,
    /// This delivery's number: 1 the first time the item is leased.
    pub delivery_count: u32,
}
