//! Values stored under item, request, result, lease and delayed keys. Each
//! starts with a version byte; integers are big-endian.
//!
//! - item: `1, enqueued_at_ms, payload` for an item never delivered under a
//!   lease; else `2, enqueued_at_ms, deliveries (u32), dead-letter origin`
//!   (`len (u8), queue name, deliveries at death (u32)`; `len` 0 for
//!   none), `payload`; an item of a message group (see `crate::queue::groups`) is
//!   version 3: version 2's fields, then `len (u8), group key`, then
//!   `payload` (items without a group never take the longer form).
//!   An item with a retention (see `crate::queue::expiry`) sets bit
//!   `0x10` of its version byte, and its `expires_at_ms` (u64) follows
//!   `enqueued_at_ms`; items without one keep the forms above.
//!   An item pushed with a fairness key (see `crate::queue::fair`) sets
//!   bit `0x20` ([`FAIR_FLAG`]), and `len (u8), fairness key` follows
//!   `enqueued_at_ms` (and `expires_at_ms`, if set); items without one
//!   keep the forms above.
//! - request: `1, deadline_ms, end, lease_ms` (`lease_ms` 0: no lease;
//!   a 10-byte request without it reads as 0): one pop of one item. A
//!   *counted* request, one coordinator's line standing for `count` pops
//!   (see `crate::staging::counted`): `2, deadline_ms, end, lease_ms,
//!   count (u32)`.
//! - result: `2, deadline_ms, leased (u8), [receipt (16), expires_at_ms],
//!   key_len (u32), item key, item envelope`; version 1 (`1, deadline_ms,
//!   enqueued_at_ms, key_len, item key, payload`), from binaries without
//!   leases, still reads.
//! - lease: `1, key_len (u32), item key, item envelope` (its `deliveries`
//!   already counts the delivery the lease belongs to).
//! - delayed: `1, key_len (u32), original key (empty: the tail), item envelope`.
//!
//! - a *spilled* item (payload longer than [`INLINE_PAYLOAD_MAX`]): the
//!   version byte has [`SPILLED_FLAG`] set and the payload's place holds
//!   `parts id (16), payload len (u32)`; the payload is in part keys
//!   (see `crate::queue::parts` and docs/large-items.md). Every envelope
//!   that carries an item (result, lease, delayed) carries it this way, so
//!   moving a large item never copies its parts.
//!
//! Every decoder returns `None` for bytes hotq did not write; it never panics.

use std::num::NonZeroU64;
use std::time::{SystemTime, UNIX_EPOCH};

/// Largest payload stored inside its item's envelope, in bytes: below the
/// store's value limit (`crate::store::VALUE_SIZE_MAX`, 100,000 bytes) by
/// enough to carry the item through a result or lease envelope, which add
/// a deadline, a receipt, the item's original key and a dead-letter
/// origin. A longer payload is split across part keys. Written out rather
/// than imported so this leaf imports nothing above it; the store checks
/// the two agree at compile time.
pub const INLINE_PAYLOAD_MAX: usize = 100_000 - ENVELOPE_HEADROOM;
/// Largest payload the core accepts, in bytes (8 MiB): the ceiling of the
/// `payload_bytes_max` setting. One push writes its items and all their
/// parts in one transaction, which FoundationDB bounds at 10 MB; 8 MiB of
/// parts plus their keys and envelopes stays under it.
pub const PAYLOAD_SIZE_MAX: usize = 8 * 1_048_576;
/// Default of the `payload_bytes_max` setting: 1 MiB, as SQS.
pub const PAYLOAD_BYTES_MAX_DEFAULT: usize = 1_048_576;
/// Most payload bytes one push (a batch) writes, for the same reason as
/// [`PAYLOAD_SIZE_MAX`].
pub const PUSH_PAYLOAD_BYTES_MAX: usize = PAYLOAD_SIZE_MAX;
/// Set in an item envelope's version byte when its payload is in parts.
pub const SPILLED_FLAG: u8 = 0x40;
/// Bytes of a parts id.
pub const PARTS_ID_LEN: usize = 16;
/// What a payload leaves of a store value for its envelope, in bytes.
pub const ENVELOPE_HEADROOM: usize = 1_024;
/// Bytes of a lease receipt.
pub const RECEIPT_LEN: usize = 16;

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Reads big-endian integers and byte strings off the front of a value;
/// every read is checked, so malformed values decode to `None`.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    fn rest(&self) -> &'a [u8] {
        self.0
    }
}

/// Where a dead-lettered item came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The queue it was dead-lettered from.
    pub queue: String,
    /// Its delivery count when it was given up on.
    pub deliveries: u32,
    /// `Some(priority)` when it came from a priority queue (at that
    /// priority), `None` from a FIFO queue: a redrive returns it there.
    pub priority: Option<i64>,
}

/// An item's envelope: everything stored with its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemValue {
    /// When the item was pushed, in ms since the epoch.
    pub enqueued_at_ms: u64,
    /// Deliveries under a lease so far (0 for an item never leased).
    pub deliveries: u32,
    /// Set for an item in a dead-letter queue.
    pub dead_letter: Option<DeadLetter>,
    /// The message group it belongs to (see `crate::queue::groups`).
    pub group: Option<String>,
    /// When its retention ends and it is dropped unless delivered (see
    /// `crate::queue::expiry`), in ms since the epoch; `None`: never.
    pub expires_at_ms: Option<u64>,
    /// The fairness key it was pushed with (see `crate::queue::fair`).
    pub fair_key: Option<String>,
    /// The item's bytes; empty for a spilled item until its parts are read.
    pub payload: Vec<u8>,
    /// Where a payload longer than [`INLINE_PAYLOAD_MAX`] is stored; the
    /// envelope then holds this instead of the payload.
    pub parts: Option<PartsRef>,
}

/// Where a spilled payload is: its parts id and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartsRef {
    /// Random: names the part keys (see `crate::queue::parts`).
    pub id: [u8; PARTS_ID_LEN],
    /// The payload's length in bytes.
    pub len: u32,
}

impl ItemValue {
    /// A fresh item, never delivered.
    pub fn new(enqueued_at_ms: u64, payload: Vec<u8>) -> ItemValue {
        ItemValue {
            enqueued_at_ms,
            deliveries: 0,
            dead_letter: None,
            group: None,
            expires_at_ms: None,
            fair_key: None,
            payload,
            parts: None,
        }
    }

    /// The payload's length, spilled or not.
    pub fn len(&self) -> usize {
        self.parts
            .map_or(self.payload.len(), |parts| parts.len as usize)
    }

    /// True for an empty payload.
    #[cfg(feature = "testing")]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What stands in an envelope for the payload: the payload itself, or
/// the reference to its parts.
fn payload_field(item: &ItemValue) -> std::borrow::Cow<'_, [u8]> {
    match item.parts {
        None => std::borrow::Cow::Borrowed(&item.payload),
        Some(parts) => {
            let mut field = Vec::with_capacity(PARTS_ID_LEN + 4);
            field.extend_from_slice(&parts.id);
            field.extend_from_slice(&parts.len.to_be_bytes());
            std::borrow::Cow::Owned(field)
        }
    }
}

/// The payload (inline) or parts reference (spilled) from what an
/// envelope holds in the payload's place.
fn read_payload(rest: &[u8], spilled: bool) -> Option<(Vec<u8>, Option<PartsRef>)> {
    if !spilled {
        return Some((rest.to_vec(), None));
    }
    if rest.len() != PARTS_ID_LEN + 4 {
        return None;
    }
    let id = rest[..PARTS_ID_LEN].try_into().ok()?;
    let len = u32::from_be_bytes(rest[PARTS_ID_LEN..].try_into().ok()?);
    Some((Vec::new(), Some(PartsRef { id, len })))
}

/// Encodes a fresh item's envelope (never delivered, not dead-lettered).
pub fn encode_item(enqueued_at_ms: u64, payload: &[u8]) -> Vec<u8> {
    encode_item_parts(enqueued_at_ms, 0, None, None, payload)
}

/// Bit of the version byte saying `expires_at_ms` follows `enqueued_at_ms`.
const EXPIRES_FLAG: u8 = 0x10;

/// Encodes an item envelope.
pub fn encode_item_value(item: &ItemValue) -> Vec<u8> {
    let mut value = encode_item_parts(
        item.enqueued_at_ms,
        item.deliveries,
        item.dead_letter.as_ref(),
        item.group.as_deref(),
        &payload_field(item),
    );
    if item.parts.is_some() {
        value[0] |= SPILLED_FLAG;
    }
    let value = match item.expires_at_ms {
        None => value,
        Some(expires_at_ms) => with_expiry(value, expires_at_ms),
    };
    match &item.fair_key {
        None => value,
        Some(key) => with_fair_key(value, key),
    }
}

/// Bit of the version byte saying a fairness key (`len (u8)`, its bytes)
/// follows `enqueued_at_ms` (and `expires_at_ms`, when set).
pub const FAIR_FLAG: u8 = 0x20;

/// `value` (an encoded envelope without a fairness key) with `key` after
/// its times. Only items pushed with a fairness key pay this copy.
fn with_fair_key(value: Vec<u8>, key: &str) -> Vec<u8> {
    // Fairness keys are at most 128 bytes (see `crate::queue::fair::check_key`).
    let len = u8::try_from(key.len()).expect("fairness keys fit a u8 length");
    let at = if value[0] & EXPIRES_FLAG != 0 { 17 } else { 9 };
    let mut out = Vec::with_capacity(value.len() + 1 + key.len());
    out.push(value[0] | FAIR_FLAG);
    out.extend_from_slice(&value[1..at]);
    out.push(len);
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&value[at..]);
    out
}

/// The fairness key after an envelope's times, when `fair` says one is there.
fn read_fair_key(reader: &mut Reader<'_>, fair: bool) -> Option<Option<String>> {
    if !fair {
        return Some(None);
    }
    let len = reader.u8()? as usize;
    let key = std::str::from_utf8(reader.take(len)?).ok()?;
    Some(Some(key.to_string()))
}

/// `value` (an encoded envelope without an expiry) with `expires_at_ms`
/// after its enqueue time. Only items with a retention pay this copy.
fn with_expiry(value: Vec<u8>, expires_at_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 8);
    out.push(value[0] | EXPIRES_FLAG);
    out.extend_from_slice(&value[1..9]);
    out.extend_from_slice(&expires_at_ms.to_be_bytes());
    out.extend_from_slice(&value[9..]);
    out
}

fn encode_item_parts(
    enqueued_at_ms: u64,
    deliveries: u32,
    dead_letter: Option<&DeadLetter>,
    group: Option<&str>,
    payload: &[u8],
) -> Vec<u8> {
    if deliveries == 0 && dead_letter.is_none() && group.is_none() {
        // A fresh item keeps version 1, which binaries without leases read.
        let mut value = Vec::with_capacity(9 + payload.len());
        value.push(1);
        value.extend_from_slice(&enqueued_at_ms.to_be_bytes());
        value.extend_from_slice(payload);
        return value;
    }
    let origin_len = dead_letter.map_or(0, |d| d.queue.len() + 12);
    let group_len = group.map_or(0, |g| g.len() + 1);
    let from_priority = dead_letter.and_then(|dead| dead.priority);
    let mut value = Vec::with_capacity(14 + origin_len + group_len + payload.len());
    // 2: base; 3: with a group; 4 and 5: the same, dead-lettered from a
    // priority queue (its priority follows the origin's deliveries).
    value.push(match (group.is_some(), from_priority.is_some()) {
        (false, false) => 2,
        (true, false) => 3,
        (false, true) => 4,
        (true, true) => 5,
    });
    value.extend_from_slice(&enqueued_at_ms.to_be_bytes());
    value.extend_from_slice(&deliveries.to_be_bytes());
    match dead_letter {
        Some(dead) => {
            // Queue names are at most 133 bytes (see `keys::QueueName`).
            let len = u8::try_from(dead.queue.len()).expect("queue names fit a u8 length");
            assert!(len > 0, "a dead-letter origin names a queue");
            value.push(len);
            value.extend_from_slice(dead.queue.as_bytes());
            value.extend_from_slice(&dead.deliveries.to_be_bytes());
            if let Some(priority) = dead.priority {
                value.extend_from_slice(&priority.to_be_bytes());
            }
        }
        None => value.push(0),
    }
    if let Some(group) = group {
        // Group keys are at most 128 bytes (see `crate::queue::groups::check_key`).
        let len = u8::try_from(group.len()).expect("group keys fit a u8 length");
        assert!(len > 0, "a group key is never empty");
        value.push(len);
        value.extend_from_slice(group.as_bytes());
    }
    value.extend_from_slice(payload);
    value
}

/// Decodes an item envelope; `None` if malformed.
pub fn decode_item(value: &[u8]) -> Option<ItemValue> {
    let mut reader = Reader(value);
    let version = reader.u8()?;
    let spilled = version & SPILLED_FLAG != 0;
    let expiring = version & EXPIRES_FLAG != 0;
    let fair = version & FAIR_FLAG != 0;
    match version & !(SPILLED_FLAG | EXPIRES_FLAG | FAIR_FLAG) {
        1 => {
            let enqueued_at_ms = reader.u64()?;
            let expires_at_ms = if expiring { Some(reader.u64()?) } else { None };
            let fair_key = read_fair_key(&mut reader, fair)?;
            let (payload, parts) = read_payload(reader.rest(), spilled)?;
            Some(ItemValue {
                parts,
                expires_at_ms,
                fair_key,
                ..ItemValue::new(enqueued_at_ms, payload)
            })
        }
        version @ 2..=5 => {
            let from_priority = version >= 4;
            let enqueued_at_ms = reader.u64()?;
            let expires_at_ms = if expiring { Some(reader.u64()?) } else { None };
            let fair_key = read_fair_key(&mut reader, fair)?;
            let deliveries = reader.u32()?;
            let dead_letter = match reader.u8()? {
                0 if from_priority => return None,
                0 => None,
                len => {
                    let queue = std::str::from_utf8(reader.take(len as usize)?).ok()?;
                    let deliveries = reader.u32()?;
                    let priority = if from_priority {
                        Some(i64::from_be_bytes(reader.take(8)?.try_into().ok()?))
                    } else {
                        None
                    };
                    Some(DeadLetter {
                        queue: queue.to_string(),
                        deliveries,
                        priority,
                    })
                }
            };
            let group = if version == 3 || version == 5 {
                let len = reader.u8()?;
                if len == 0 {
                    return None;
                }
                Some(
                    std::str::from_utf8(reader.take(len as usize)?)
                        .ok()?
                        .to_string(),
                )
            } else {
                None
            };
            let (payload, parts) = read_payload(reader.rest(), spilled)?;
            Some(ItemValue {
                enqueued_at_ms,
                deliveries,
                dead_letter,
                group,
                expires_at_ms,
                fair_key,
                payload,
                parts,
            })
        }
        _ => None,
    }
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestValue {
    /// When the requester stops waiting, in ms since the epoch.
    pub deadline_ms: u64,
    /// The end it pops from.
    pub end: End,
    /// Lease the item for this long instead of deleting it (`None`: the
    /// item is deleted; stored as 0).
    pub lease_ms: Option<NonZeroU64>,
}

impl RequestValue {
    /// A request for the front, without a lease, waiting until `deadline_ms`.
    #[cfg(feature = "testing")]
    pub fn front(deadline_ms: u64) -> RequestValue {
        RequestValue {
            deadline_ms,
            end: End::Front,
            lease_ms: None,
        }
    }
}

/// Encodes a request envelope.
pub fn encode_request(request: &RequestValue) -> Vec<u8> {
    let mut value = Vec::with_capacity(18);
    value.push(1);
    value.extend_from_slice(&request.deadline_ms.to_be_bytes());
    value.push(match request.end {
        End::Front => 0,
        End::Back => 1,
    });
    value.extend_from_slice(&request.lease_ms.map_or(0, NonZeroU64::get).to_be_bytes());
    value
}

/// Encodes a counted request: `count` pops (at least 1) of one line.
pub fn encode_counted_request(request: &RequestValue, count: u32) -> Vec<u8> {
    assert!(count > 0, "a counted request stands for at least one pop");
    let mut value = encode_request(request);
    value[0] = 2;
    value.extend_from_slice(&count.to_be_bytes());
    value
}

/// Decodes a request envelope; `None` if malformed. A counted request
/// reads as the request its pops share.
pub fn decode_request(value: &[u8]) -> Option<RequestValue> {
    decode_counted_request(value).map(|(request, _)| request)
}

/// Decodes a request envelope with the number of pops it stands for: 1
/// for a plain request, `count` for a counted one (`None` if malformed,
/// or a counted one of 0).
pub fn decode_counted_request(value: &[u8]) -> Option<(RequestValue, u32)> {
    let mut reader = Reader(value);
    let version = reader.u8()?;
    if version != 1 && version != 2 {
        return None;
    }
    let deadline_ms = reader.u64()?;
    let end = match reader.u8()? {
        0 => End::Front,
        1 => End::Back,
        _ => return None,
    };
    let (lease_ms, count) = match (version, reader.rest().len()) {
        (1, 0) => (0, 1),
        (1, 8) => (reader.u64()?, 1),
        (2, 12) => (reader.u64()?, reader.u32()?),
        _ => return None,
    };
    if count == 0 {
        return None;
    }
    let request = RequestValue {
        deadline_ms,
        end,
        lease_ms: NonZeroU64::new(lease_ms),
    };
    Some((request, count))
}

/// The lease a delivered item is held under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTag {
    /// The receipt that acks, nacks or extends it.
    pub receipt: [u8; RECEIPT_LEN],
    /// When it expires unless acked or extended, in ms since the epoch.
    pub expires_at_ms: u64,
}

/// An item handed to a requester, with what it takes to put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultValue {
    /// After this the reaper returns the item to `item_key` (or, for a
    /// leased item, only clears the result: the lease returns the item).
    pub deadline_ms: u64,
    /// Set when the item was delivered under a lease.
    pub lease: Option<LeaseTag>,
    /// The key the item was taken from.
    pub item_key: Vec<u8>,
    /// The item as it stood in the queue.
    pub item: ItemValue,
}

/// Encodes a result envelope.
pub fn encode_result(result: &ResultValue) -> Vec<u8> {
    let item = encode_item_value(&result.item);
    let mut value = Vec::with_capacity(38 + result.item_key.len() + item.len());
    value.push(2);
    value.extend_from_slice(&result.deadline_ms.to_be_bytes());
    match &result.lease {
        Some(lease) => {
            value.push(1);
            value.extend_from_slice(&lease.receipt);
            value.extend_from_slice(&lease.expires_at_ms.to_be_bytes());
        }
        None => value.push(0),
    }
    push_keyed(&mut value, &result.item_key, &item);
    value
}

/// Decodes a result envelope; `None` if malformed.
pub fn decode_result(value: &[u8]) -> Option<ResultValue> {
    let mut reader = Reader(value);
    match reader.u8()? {
        1 => {
            let deadline_ms = reader.u64()?;
            let enqueued_at_ms = reader.u64()?;
            let key_len = reader.u32()? as usize;
            let item_key = reader.take(key_len)?.to_vec();
            return Some(ResultValue {
                deadline_ms,
                lease: None,
                item_key,
                item: ItemValue::new(enqueued_at_ms, reader.rest().to_vec()),
            });
        }
        2 => {}
        _ => return None,
    }
    let deadline_ms = reader.u64()?;
    let lease = match reader.u8()? {
        0 => None,
        1 => Some(LeaseTag {
            receipt: reader.take(RECEIPT_LEN)?.try_into().ok()?,
            expires_at_ms: reader.u64()?,
        }),
        _ => return None,
    };
    let (item_key, item) = read_keyed(reader)?;
    Some(ResultValue {
        deadline_ms,
        lease,
        item_key,
        item,
    })
}

/// A leased item (under `leases/(expires_at_ms, receipt)`) or a delayed
/// one (under `delayed/(visible_at_ms, random)`): the item and where it
/// returns to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldItem {
    /// The key it returns to; empty for a delayed push, which goes to the
    /// queue's tail when it becomes visible.
    pub item_key: Vec<u8>,
    /// The item; for a lease, `deliveries` counts this delivery.
    pub item: ItemValue,
}

/// Encodes a lease or delayed envelope.
pub fn encode_held(held: &HeldItem) -> Vec<u8> {
    let item = encode_item_value(&held.item);
    let mut value = Vec::with_capacity(5 + held.item_key.len() + item.len());
    value.push(1);
    push_keyed(&mut value, &held.item_key, &item);
    value
}

/// Decodes a lease or delayed envelope; `None` if malformed.
pub fn decode_held(value: &[u8]) -> Option<HeldItem> {
    let mut reader = Reader(value);
    if reader.u8()? != 1 {
        return None;
    }
    let (item_key, item) = read_keyed(reader)?;
    Some(HeldItem { item_key, item })
}

fn push_keyed(value: &mut Vec<u8>, key: &[u8], item: &[u8]) {
    value.extend_from_slice(&(key.len() as u32).to_be_bytes());
    value.extend_from_slice(key);
    value.extend_from_slice(item);
}

fn read_keyed(mut reader: Reader<'_>) -> Option<(Vec<u8>, ItemValue)> {
    let key_len = reader.u32()? as usize;
    let key = reader.take(key_len)?.to_vec();
    let item = decode_item(reader.rest())?;
    Some((key, item))
}

#[cfg(test)]
mod tests;
