//! A lease's handle and terms, on their own so that an item can carry its
//! lease without the queue layer depending on the lease module.
//!
//! A receipt is 16 bytes (32 hex digits). Receipts issued now:
//!
//! | bytes | what |
//! |---|---|
//! | 0–1 | the queue's tag, first 16 bits |
//! | 2–7 | top bit set (this layout); then the expiry the lease was issued with, 47 bits of ms since the epoch |
//! | 8 | the queue's tag, last 8 bits |
//! | 9–15 | random (the tag's salt) |
//!
//! The tag is 24 bits of a hash of the queue's kind and name **salted with
//! the receipt's random bytes** ([`salted_tag`]): two queue names never
//! share their tags as a pair, so a receipt used with the wrong queue is
//! told apart from a lost lease except by a 1-in-2^24 chance per receipt,
//! whatever the two names are.
//!
//! Receipts of older builds stay valid (a cluster upgraded in place keeps
//! its leases in flight):
//!
//! - 2-byte tag, 6-byte expiry (top bit clear until the year 6429), 8
//!   random bytes: the tag is the top 16 bits of FNV-1a over kind and name,
//!   unsalted, so two names sharing them (a pair in 65,536) cannot be told
//!   apart by such a receipt ([`legacy_tag`]).
//! - 4-byte tag (all of that FNV-1a), 12 random bytes, and always a
//!   receipt row naming its lease's expiry.

use std::fmt;

use rand::RngCore;

use crate::envelope::RECEIPT_LEN;
use crate::keys::{QueueKeys, QueueKind};

/// Where a receipt's expiry field is: 6 bytes, whose top bit marks the
/// current layout.
const EXPIRY_FIELD: std::ops::Range<usize> = 2..8;
/// The top bit of the expiry field: set in receipts of the current layout,
/// clear in the 2-byte-tag layout (whose expiries stay below 2^47 ms).
const LAYOUT_MARK: u64 = 1 << 47;
/// Where the last 8 bits of the tag are.
const TAG_LAST_AT: usize = 8;
/// Where a receipt's random bytes begin: 7 of them, so two leases of one
/// queue issued for the same millisecond share a receipt with a
/// probability of 2^-56.
const RANDOM_AT: usize = 9;
/// The latest expiry a receipt can hold (the year 6429); leases are
/// issued no later.
pub const RECEIPT_EXPIRY_MS_MAX: u64 = LAYOUT_MARK - 1;

/// The opaque handle of one lease: 16 bytes, written as 32 lowercase hex
/// digits. A receipt issued by [`Receipt::for_lease`] holds its queue's
/// tag, so a receipt settled against another queue is told apart from a
/// lease that is gone, and the expiry the lease was issued with, so a
/// settle finds the lease's due-index entry with one read and no receipt
/// row (see [`crate::lease::settle`]).
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
    /// `expires_at_ms`: the layout of the module's table.
    pub fn for_lease(keys: &QueueKeys, expires_at_ms: u64) -> Receipt {
        assert!(
            expires_at_ms <= RECEIPT_EXPIRY_MS_MAX,
            "an expiry fits in 47 bits"
        );
        let mut receipt = Receipt::random();
        receipt.0[EXPIRY_FIELD].copy_from_slice(&(expires_at_ms | LAYOUT_MARK).to_be_bytes()[2..]);
        let [first, second, last] = salted_tag(keys, &receipt.salt());
        receipt.0[..2].copy_from_slice(&[first, second]);
        receipt.0[TAG_LAST_AT] = last;
        receipt
    }

    /// The expiry field, as a number (48 bits).
    fn expiry_field(&self) -> u64 {
        let mut bytes = [0u8; 8];
        bytes[2..].copy_from_slice(&self.0[EXPIRY_FIELD]);
        u64::from_be_bytes(bytes)
    }

    /// Whether this receipt has the current layout (salted 24-bit tag).
    fn current_layout(&self) -> bool {
        self.expiry_field() & LAYOUT_MARK != 0
    }

    /// The random bytes that salt the tag of a current-layout receipt.
    fn salt(&self) -> [u8; RECEIPT_LEN - RANDOM_AT] {
        let mut salt = [0u8; RECEIPT_LEN - RANDOM_AT];
        salt.copy_from_slice(&self.0[RANDOM_AT..]);
        salt
    }

    /// The expiry the lease was issued with, as the receipt holds it. An
    /// extend moves the lease and leaves a receipt row naming the new
    /// expiry; a receipt issued before receipts held their expiry holds
    /// random bytes here, and always has a receipt row.
    pub fn issued_expiry_ms(&self) -> u64 {
        let field = self.expiry_field();
        if self.current_layout() {
            field & !LAYOUT_MARK
        } else {
            field
        }
    }

    /// Whether this receipt carries `keys`' tag, in whichever layout it
    /// was issued. Callers only ask after the receipt was not found in the
    /// queue, to classify the error: a receipt of the queue whose lease is
    /// gone always names it; a receipt of another queue names it only by
    /// the chance the module describes.
    pub fn names_queue(&self, keys: &QueueKeys) -> bool {
        let legacy = legacy_tag(keys);
        // The 4-byte layout: its random bytes where the mark is may look
        // like either of the later layouts, so it is tried first.
        if self.0[..4] == legacy {
            return true;
        }
        if self.current_layout() {
            let [first, second, last] = salted_tag(keys, &self.salt());
            self.0[..2] == [first, second] && self.0[TAG_LAST_AT] == last
        } else {
            self.0[..2] == legacy[..2]
        }
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

fn kind_byte(kind: QueueKind) -> u8 {
    match kind {
        QueueKind::Fifo => b'f',
        QueueKind::Priority => b'p',
    }
}

/// FNV-1a (32 bits) over the queue's kind and name: the tag of receipts
/// of older builds (all 4 bytes in the first tagged layout, the first 2 in
/// the next). Stable across daemons and restarts, since a receipt
/// outlives the daemon that issued it.
fn legacy_tag(keys: &QueueKeys) -> [u8; 4] {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in std::iter::once(kind_byte(keys.kind())).chain(keys.name().as_str().bytes()) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash.to_be_bytes()
}

/// The 24-bit tag of `keys`' queue in a receipt salted with `salt`: the top
/// bits of a mix (MurmurHash3's 64-bit finalizer) of FNV-1a (64 bits) over
/// kind and name, xor the salt. Two names with different 64-bit hashes
/// give different mixer inputs for every salt, and the mixer spreads that
/// difference over the top bits: they share a tag by chance, receipt by
/// receipt, never as a pair. Stable across daemons and restarts.
fn salted_tag(keys: &QueueKeys, salt: &[u8; RECEIPT_LEN - RANDOM_AT]) -> [u8; 3] {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in std::iter::once(kind_byte(keys.kind())).chain(keys.name().as_str().bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut salt_bytes = [0u8; 8];
    salt_bytes[1..].copy_from_slice(salt);
    let mut mixed = hash ^ u64::from_be_bytes(salt_bytes);
    mixed ^= mixed >> 33;
    mixed = mixed.wrapping_mul(0xff51_afd7_ed55_8ccd);
    mixed ^= mixed >> 33;
    mixed = mixed.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    mixed ^= mixed >> 33;
    let [first, second, last, ..] = mixed.to_be_bytes();
    [first, second, last]
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

/// A receipt in the layout of the build before the salted tag (2-byte
/// tag, 6-byte expiry, 8 random bytes), as that build issued it: for
/// tests that older receipts keep working.
#[cfg(test)]
pub(crate) fn legacy_for_lease(keys: &QueueKeys, expires_at_ms: u64) -> Receipt {
    let mut receipt = Receipt::random();
    receipt.0[..2].copy_from_slice(&legacy_tag(keys)[..2]);
    receipt.0[EXPIRY_FIELD].copy_from_slice(&expires_at_ms.to_be_bytes()[2..]);
    receipt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::QueueName;

    fn keys(kind: QueueKind, name: &str) -> QueueKeys {
        QueueKeys::of_kind(kind, &QueueName::new(name).unwrap())
    }

    /// The first two FIFO queue names `q0`, `q1`, … whose 2-byte tags of
    /// the older layout are equal (found within a few hundred names).
    fn legacy_colliding_pair() -> (QueueKeys, QueueKeys) {
        let mut seen = std::collections::HashMap::new();
        for i in 0..100_000 {
            let queue = keys(QueueKind::Fifo, &format!("q{i}"));
            let tag: [u8; 2] = legacy_tag(&queue)[..2].try_into().unwrap();
            if let Some(earlier) = seen.insert(tag, queue.clone()) {
                return (earlier, queue);
            }
        }
        panic!("no two of 100,000 names share 16 bits")
    }

    #[test]
    fn a_receipt_holds_its_expiry_and_names_its_queue_alone() {
        let jobs = keys(QueueKind::Fifo, "jobs");
        for expires_at_ms in [0, 1, 1_700_000_000_123, RECEIPT_EXPIRY_MS_MAX] {
            let receipt = Receipt::for_lease(&jobs, expires_at_ms);
            assert_eq!(receipt.issued_expiry_ms(), expires_at_ms);
            assert!(receipt.names_queue(&jobs));
            assert_eq!(Receipt::parse(&receipt.to_string()), Some(receipt));
        }
        let receipt = Receipt::for_lease(&jobs, 1_700_000_000_123);
        for other in [
            keys(QueueKind::Fifo, "jobz"),
            keys(QueueKind::Fifo, "jobs.dead"),
            keys(QueueKind::Priority, "jobs"),
        ] {
            assert!(!receipt.names_queue(&other), "{:?}", other.name());
        }
    }

    #[test]
    fn queues_whose_old_tags_collide_are_told_apart_by_new_receipts() {
        let (a, b) = legacy_colliding_pair();
        // Old receipts cannot tell them apart: the defect of issue #35.
        let old = legacy_for_lease(&a, 1_700_000_000_123);
        assert!(old.names_queue(&a) && old.names_queue(&b));
        // New ones can, receipt by receipt: a salted 24-bit tag matches
        // another queue about once in 16.7 million receipts, so 10,000
        // receipts name `b` none of the time (expected 0.0006 matches).
        for _ in 0..10_000 {
            let receipt = Receipt::for_lease(&a, 1_700_000_000_123);
            assert!(receipt.names_queue(&a));
            assert!(!receipt.names_queue(&b), "{receipt} names both");
        }
    }

    #[test]
    fn receipts_of_older_layouts_still_name_their_queue_and_expiry() {
        let jobs = keys(QueueKind::Fifo, "jobs");
        let other = keys(QueueKind::Fifo, "other");
        // The 2-byte-tag layout: tag, expiry, random.
        let old = legacy_for_lease(&jobs, 1_700_000_000_123);
        assert_eq!(old.issued_expiry_ms(), 1_700_000_000_123);
        assert!(old.names_queue(&jobs));
        assert!(!old.names_queue(&other));
        // The 4-byte-tag layout: tag, then random (its receipt row names
        // the expiry). Its tag's third byte is where the mark is: names
        // with the bit clear and set both still name their queue.
        let mut marks = std::collections::BTreeSet::new();
        for i in 0..64 {
            let queue = keys(QueueKind::Fifo, &format!("jobs{i}"));
            let mut older = Receipt::random();
            older.0[..4].copy_from_slice(&legacy_tag(&queue));
            marks.insert(older.current_layout());
            assert!(older.names_queue(&queue));
            assert!(!older.names_queue(&other));
        }
        assert_eq!(marks.len(), 2, "both states of the mark were tried");
    }

    /// Writes a lease of a fresh item of `keys` under `receipt`, expiring at
    /// `expires_at_ms`, as the build that issued such receipts did: the
    /// due-index row and the `leased` count, no receipt row.
    async fn lease_as_old_builds_did(
        store: &crate::store::embedded::EmbeddedStore,
        keys: &QueueKeys,
        receipt: &Receipt,
        expires_at_ms: u64,
    ) {
        use crate::envelope::{HeldItem, ItemValue, encode_held};
        use crate::store::{Store, Transaction};
        let held = HeldItem {
            item_key: keys.item(1, &[1; 16]),
            item: ItemValue {
                enqueued_at_ms: 1,
                deliveries: 1,
                dead_letter: None,
                group: None,
                expires_at_ms: None,
                fair_key: None,
                payload: b"old".to_vec(),
                parts: None,
            },
        };
        let txn = store.begin().unwrap();
        txn.set(&keys.lease(expires_at_ms, &receipt.0), &encode_held(&held))
            .unwrap();
        txn.atomic_add(&keys.leased(), 1).unwrap();
        txn.commit().await.unwrap();
    }

    #[tokio::test]
    async fn a_receipt_of_the_older_layout_still_extends_and_acks() {
        use crate::envelope::now_ms;
        use crate::lease::LeaseError;
        use crate::lease::settle::{ack_in, extend_in};
        use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};
        use crate::store::{Read, Store, Transaction, decode_counter};
        let dir = tempfile::tempdir().unwrap();
        let mut config = EmbeddedConfig::new(dir.path());
        config.durability = Durability::Buffered;
        let store = EmbeddedStore::open(config).unwrap();
        let jobs = keys(QueueKind::Fifo, "jobs");
        let expires_at_ms = now_ms() + 60_000;
        let (acked, extended) = (
            legacy_for_lease(&jobs, expires_at_ms),
            legacy_for_lease(&jobs, expires_at_ms),
        );
        for receipt in [&acked, &extended] {
            lease_as_old_builds_did(&store, &jobs, receipt, expires_at_ms).await;
        }
        // The expiry decodes from the old layout: found with one read.
        let txn = store.begin().unwrap();
        ack_in(&txn, &jobs, &acked, now_ms())
            .await
            .unwrap()
            .unwrap();
        let moved_to = extend_in(&txn, &jobs, &extended, 120_000, now_ms())
            .await
            .unwrap()
            .unwrap();
        txn.commit().await.unwrap();
        assert!(moved_to > expires_at_ms);
        // Extended, it is found through its receipt row, and acks.
        let txn = store.begin().unwrap();
        ack_in(&txn, &jobs, &extended, now_ms())
            .await
            .unwrap()
            .unwrap();
        txn.commit().await.unwrap();
        let txn = store.begin().unwrap();
        let leased = txn.get(&jobs.leased(), Read::Snapshot).await.unwrap();
        assert_eq!(decode_counter(leased.as_deref()), 0);
        assert!(
            txn.get(&jobs.receipt(&extended.0), Read::Snapshot)
                .await
                .unwrap()
                .is_none(),
            "the forwarding row went with the lease"
        );
        // Settled, both are unknown on their own queue (404), not another's.
        let again = ack_in(&txn, &jobs, &acked, now_ms()).await.unwrap();
        assert_eq!(again, Err(LeaseError::UnknownReceipt));
        assert!(acked.names_queue(&jobs) && extended.names_queue(&jobs));
    }
}
