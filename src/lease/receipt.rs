//! A lease's handle and terms, on their own so that an item can carry its
//! lease without the queue layer depending on the lease module.

use std::fmt;

use rand::RngCore;

use crate::envelope::RECEIPT_LEN;

/// The opaque handle of one lease: 16 random bytes, written as 32 lowercase
/// hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt(pub [u8; RECEIPT_LEN]);

impl Receipt {
    /// A fresh random receipt.
    pub fn random() -> Receipt {
        let mut bytes = [0u8; RECEIPT_LEN];
        rand::rng().fill_bytes(&mut bytes);
        Receipt(bytes)
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
