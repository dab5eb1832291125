//! Values stored under item keys: a version byte, the enqueue time, the payload.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::store::VALUE_SIZE_MAX;

const VERSION: u8 = 1;
const HEADER_LEN: usize = 1 + 8;

/// Largest payload an item can carry, in bytes.
pub const PAYLOAD_SIZE_MAX: usize = VALUE_SIZE_MAX - HEADER_LEN;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Encodes an item envelope.
pub fn encode_item(enqueued_at_ms: u64, payload: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_LEN + payload.len());
    value.push(VERSION);
    value.extend_from_slice(&enqueued_at_ms.to_be_bytes());
    value.extend_from_slice(payload);
    value
}

/// Decodes an item envelope into (enqueue time, payload); `None` if malformed.
pub fn decode_item(value: &[u8]) -> Option<(u64, &[u8])> {
    if value.len() < HEADER_LEN || value[0] != VERSION {
        return None;
    }
    let enqueued_at_ms = u64::from_be_bytes(value[1..HEADER_LEN].try_into().ok()?);
    Some((enqueued_at_ms, &value[HEADER_LEN..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects_garbage() {
        let value = encode_item(42, b"payload");
        assert_eq!(decode_item(&value), Some((42, &b"payload"[..])));
        assert_eq!(decode_item(b"short"), None);
        assert_eq!(decode_item(&[9; 20]), None);
    }
}
