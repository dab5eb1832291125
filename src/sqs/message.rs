//! What an SQS message is in a hotq item: the **SQS envelope**, kept
//! inside the item's payload, so hotq's item envelope, its keys and every
//! path that moves items (leases, dead letters, groups, re-drive) stay as
//! they are, and an SQS message survives all of them with its id and
//! attributes.
//!
//! The payload of an item sent through SQS is three parts:
//!
//! ```text
//! hotq.sqs/1\n
//! {"id":"…","attrs":{…},"sys":{…},"group":"…","dedup":"…","seq":"…"}\n
//! <the message body, UTF-8>
//! ```
//!
//! A `/v1` consumer reads the first line, the JSON header (message id;
//! message and system attributes in SQS's JSON shape; the original
//! `MessageGroupId`, `MessageDeduplicationId` and `SequenceNumber` of a
//! FIFO message), then the body. An item whose payload does not start
//! with the marker line (pushed through `/v1`) reaches an SQS receiver as:
//! the body is its bytes when they are text SQS allows, else their base64
//! with the message attribute `hotq.encoding` = `base64` (lossless); its
//! `MessageId` is derived from its key, so it is stable across
//! redeliveries.
//!
//! An envelope is chosen over a wider item envelope because the item
//! envelope is read by every pop, lease, reap and timer path, and a field
//! only SQS uses would change all of them; the cost is the header's bytes
//! (on top of the message limit, see [`body_size_max`] and [`item_size_max`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::attributes::{AttributeValue, Attributes, check_text};
use crate::envelope::PAYLOAD_SIZE_MAX;

/// The first line of an SQS envelope.
pub const MARKER: &[u8] = b"hotq.sqs/1\n";
/// The attribute naming how a `/v1` item's bytes were encoded.
pub const ENCODING_ATTRIBUTE: &str = "hotq.encoding";
/// Bytes of the item limit set aside for the SQS header (ids, attributes).
pub const HEADER_RESERVE: usize = 8 * 1_024;

/// The largest message (body and attributes, as SQS counts them) a queue
/// may accept: SQS's own, 1 MiB since 2025. The daemon's
/// `payload_bytes_max` bounds it too (see `send::prepare`); the SQS header
/// rides on top, within [`HEADER_RESERVE`].
pub fn body_size_max() -> usize {
    1_048_576
}

/// The largest item an SQS message is stored as, when the daemon takes
/// items of `payload_bytes_max` bytes: a message of that size and its
/// header, within the core's ceiling.
pub fn item_size_max(payload_bytes_max: usize) -> usize {
    (payload_bytes_max + HEADER_RESERVE).min(PAYLOAD_SIZE_MAX)
}

/// The SQS header of a message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// `MessageId`.
    pub id: String,
    /// Message attributes.
    #[serde(default, skip_serializing_if = "Attributes::is_empty")]
    pub attrs: Attributes,
    /// Message system attributes (`AWSTraceHeader`).
    #[serde(default, skip_serializing_if = "Attributes::is_empty")]
    pub sys: Attributes,
    /// The `MessageGroupId` as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The `MessageDeduplicationId` (sent, or the body's SHA-256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<String>,
    /// The `SequenceNumber` of a FIFO message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<String>,
}

/// A message as read from an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its header (for a `/v1` item: a derived id and maybe `hotq.encoding`).
    pub header: Header,
    /// Its body.
    pub body: String,
}

/// The payload of an item holding `header` and `body`.
pub fn encode(header: &Header, body: &str) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("header serializes");
    let mut payload = Vec::with_capacity(MARKER.len() + json.len() + 1 + body.len());
    payload.extend_from_slice(MARKER);
    payload.extend_from_slice(&json);
    payload.push(b'\n');
    payload.extend_from_slice(body.as_bytes());
    payload
}

/// The message in an item's payload; `item_key` names a `/v1` item.
pub fn decode(payload: &[u8], item_key: &[u8]) -> Message {
    if let Some(message) = decode_envelope(payload) {
        return message;
    }
    let mut header = Header {
        id: derived_id(item_key),
        ..Header::default()
    };
    let body = match std::str::from_utf8(payload) {
        Ok(text) if check_text(text).is_ok() => text.to_string(),
        _ => {
            header.attrs.insert(
                ENCODING_ATTRIBUTE.into(),
                AttributeValue {
                    data_type: "String".into(),
                    string_value: Some("base64".into()),
                    binary_value: None,
                },
            );
            BASE64.encode(payload)
        }
    };
    Message { header, body }
}

/// The message in `payload` when it is an SQS envelope (an item sent
/// through SQS); `None` for any other payload.
pub fn decode_envelope(payload: &[u8]) -> Option<Message> {
    let rest = payload.strip_prefix(MARKER)?;
    let end = rest.iter().position(|&b| b == b'\n')?;
    let header: Header = serde_json::from_slice(&rest[..end]).ok()?;
    let body = std::str::from_utf8(&rest[end + 1..]).ok()?.to_string();
    Some(Message { header, body })
}

/// A fresh `MessageId` (a random UUID).
pub fn new_id() -> String {
    let bytes: [u8; 16] = rand::random();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The `MessageId` of a `/v1` item: UUID-shaped, from its key's SHA-256.
pub fn derived_id(item_key: &[u8]) -> String {
    let digest = Sha256::digest(item_key);
    let bytes: [u8; 16] = digest[..16].try_into().expect("16 bytes");
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The hotq group key of an SQS `MessageGroupId`: the id itself when it
/// holds only characters hotq group keys allow (`A-Z a-z 0-9 . _ - : /`)
/// and no `@`; else `@`-escaped (`@` and the byte's two hex digits) when
/// that fits in 128 bytes; else `@h` and the SHA-256 of the id (which the
/// escaped form cannot produce: `h` is not a hex digit). One id, one key;
/// two ids, two keys (save a SHA-256 collision). The id itself is kept in
/// the message's header, so receivers see it as sent.
pub fn group_key(group_id: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/');
    let mut escaped = String::with_capacity(group_id.len());
    for byte in group_id.bytes() {
        if plain(byte as char) {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("@{byte:02x}"));
        }
    }
    if escaped.len() <= crate::service::GROUP_KEY_LEN_MAX {
        escaped
    } else {
        format!("@h{}", hex::encode(Sha256::digest(group_id.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_and_v1_items_are_lossless() {
        let header = Header {
            id: new_id(),
            group: Some("g!".into()),
            ..Header::default()
        };
        let payload = encode(&header, "héllo\nworld");
        let message = decode(&payload, b"key");
        assert_eq!(message.header, header);
        assert_eq!(message.body, "héllo\nworld");

        let text = decode(b"plain text", b"k1");
        assert_eq!(text.body, "plain text");
        assert!(text.header.attrs.is_empty());
        assert_eq!(text.header.id, decode(b"other", b"k1").header.id);

        let binary = decode(&[0xff, 0x00, 0x01], b"k2");
        assert_eq!(BASE64.decode(&binary.body).unwrap(), [0xff, 0x00, 0x01]);
        assert!(binary.header.attrs.contains_key(ENCODING_ATTRIBUTE));
        // A payload that only looks like an envelope is a /v1 item.
        assert_eq!(
            decode(b"hotq.sqs/1\nnot json", b"k").body,
            "hotq.sqs/1\nnot json"
        );
    }

    #[test]
    fn group_keys_are_valid_and_distinct() {
        let ids = [
            "plain-1",
            "a@b",
            "a@40b",
            "sp ace",
            "#!",
            &"x".repeat(128),
            &"!".repeat(128),
        ];
        let keys: Vec<String> = ids.iter().map(|id| group_key(id)).collect();
        for key in &keys {
            assert!(crate::service::check_group(key.clone()).is_ok(), "{key}");
        }
        let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len());
        assert_eq!(group_key("plain-1"), "plain-1");
    }
}
