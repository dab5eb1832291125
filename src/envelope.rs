//! Values stored under item, request and result keys. Each starts with a
//! version byte; integers are big-endian.
//!
//! - item: `1, enqueued_at_ms, payload`
//! - request: `1, deadline_ms, end`
//! - result: `1, deadline_ms, enqueued_at_ms, key_len (u32), item key, payload`

use std::time::{SystemTime, UNIX_EPOCH};

use crate::store::VALUE_SIZE_MAX;

const VERSION: u8 = 1;
const HEADER_LEN: usize = 1 + 8;

/// Largest payload an item can carry, in bytes. Below the store's value
/// limit by enough to carry the item through a result envelope, which adds
/// a deadline and the item's original key.
pub const PAYLOAD_SIZE_MAX: usize = VALUE_SIZE_MAX - 1_024;

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

/// Which end of a queue a pop takes from: the front (FIFO, priority min)
/// or the back (priority max).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// The first key: a FIFO pop, a priority `pop_min`.
    Front,
    /// The last key: a priority `pop_max`.
    Back,
}

/// A waiting pop's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestValue {
    /// When the requester stops waiting, in ms since the epoch.
    pub deadline_ms: u64,
    /// The end it pops from.
    pub end: End,
}

/// Encodes a request envelope.
pub fn encode_request(request: &RequestValue) -> Vec<u8> {
    let mut value = Vec::with_capacity(10);
    value.push(VERSION);
    value.extend_from_slice(&request.deadline_ms.to_be_bytes());
    value.push(match request.end {
        End::Front => 0,
        End::Back => 1,
    });
    value
}

/// Decodes a request envelope; `None` if malformed.
pub fn decode_request(value: &[u8]) -> Option<RequestValue> {
    if value.len() != 10 || value[0] != VERSION {
        return None;
    }
    let deadline_ms = u64::from_be_bytes(value[1..9].try_into().ok()?);
    let end = match value[9] {
        0 => End::Front,
        1 => End::Back,
        _ => return None,
    };
    Some(RequestValue { deadline_ms, end })
}

/// An item handed to a requester, with what it takes to put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultValue {
    /// After this the reaper returns the item to `item_key`.
    pub deadline_ms: u64,
    /// When the item was pushed.
    pub enqueued_at_ms: u64,
    /// The key the item was taken from.
    pub item_key: Vec<u8>,
    /// The item's bytes.
    pub payload: Vec<u8>,
}

/// Encodes a result envelope.
pub fn encode_result(result: &ResultValue) -> Vec<u8> {
    let mut value = Vec::with_capacity(21 + result.item_key.len() + result.payload.len());
    value.push(VERSION);
    value.extend_from_slice(&result.deadline_ms.to_be_bytes());
    value.extend_from_slice(&result.enqueued_at_ms.to_be_bytes());
    value.extend_from_slice(&(result.item_key.len() as u32).to_be_bytes());
    value.extend_from_slice(&result.item_key);
    value.extend_from_slice(&result.payload);
    value
}

/// Decodes a result envelope; `None` if malformed.
pub fn decode_result(value: &[u8]) -> Option<ResultValue> {
    if value.len() < 21 || value[0] != VERSION {
        return None;
    }
    let deadline_ms = u64::from_be_bytes(value[1..9].try_into().ok()?);
    let enqueued_at_ms = u64::from_be_bytes(value[9..17].try_into().ok()?);
    let key_len = u32::from_be_bytes(value[17..21].try_into().ok()?) as usize;
    let rest = &value[21..];
    if rest.len() < key_len {
        return None;
    }
    Some(ResultValue {
        deadline_ms,
        enqueued_at_ms,
        item_key: rest[..key_len].to_vec(),
        payload: rest[key_len..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_result_round_trip() {
        let request = RequestValue {
            deadline_ms: 7,
            end: End::Back,
        };
        assert_eq!(decode_request(&encode_request(&request)), Some(request));
        assert_eq!(decode_request(b"garbage"), None);
        let result = ResultValue {
            deadline_ms: 9,
            enqueued_at_ms: 3,
            item_key: b"key".to_vec(),
            payload: b"payload".to_vec(),
        };
        assert_eq!(decode_result(&encode_result(&result)), Some(result));
        let mut truncated = encode_result(&ResultValue {
            deadline_ms: 1,
            enqueued_at_ms: 1,
            item_key: vec![1; 10],
            payload: vec![],
        });
        truncated.truncate(25);
        assert_eq!(decode_result(&truncated), None);
    }

    #[test]
    fn round_trip_and_rejects_garbage() {
        let value = encode_item(42, b"payload");
        assert_eq!(decode_item(&value), Some((42, &b"payload"[..])));
        assert_eq!(decode_item(b"short"), None);
        assert_eq!(decode_item(&[9; 20]), None);
    }
}
