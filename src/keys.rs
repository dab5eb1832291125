//! The key layout of a queue (DESIGN §3), tuple-encoded under `("hotq", queue)`
//! for FIFO queues and `("hotq-pq", queue)` for priority queues (so the two
//! kinds never share a subspace, whatever their names).
//!
//! Queues that ever staged a pop are also listed under
//! `("hotq-registry", kind, queue)`, so a reaper that starts after a crash
//! finds their stranded results.
//!
//! | subspace   | key                     | value                         |
//! |------------|-------------------------|-------------------------------|
//! | `items`    | `(index, random)`       | item envelope                 |
//! | `items` (priority queue) | `(priority, count, random)` | item envelope   |
//! | `requests` | `(index, requester)`    | request envelope              |
//! | `results`  | `(requester,)`          | result envelope               |
//! | `leases`   | `(expires_at_ms, receipt)` | lease envelope: item and its key |
//! | `receipts` | `(receipt,)`            | the lease's `expires_at_ms`    |
//! | `delayed`  | `(visible_at_ms, random)` | delayed envelope: item and its key |
//! | `meta`     | `("depth",)`, `("waiting",)`, `("leased",)`, `("delayed",)`, `("wake",)` | counters (atomic add) |
//!
//! Leases and delayed items are keyed by the time they are due, so the
//! timer finds everything due with one range read from the subspace's start.

use std::fmt;

use foundationdb_tuple::{Bytes, Subspace};

/// Longest queue name, in bytes (a dead-letter queue's name may add
/// [`DEAD_LETTER_SUFFIX`] to it).
pub const QUEUE_NAME_LEN_MAX: usize = 128;
/// The dead-letter queue of `q` is the queue `q.dead`.
pub const DEAD_LETTER_SUFFIX: &str = ".dead";
/// Bytes of randomness in every item key (orders ties, keeps keys unique).
pub const RANDOM_LEN: usize = 16;

/// A validated queue name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`,
/// not starting with `.`, plus `.dead` for the dead-letter queue of a
/// 128-character name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(String);

/// Why a queue name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidQueueName(pub String);

impl fmt::Display for InvalidQueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidQueueName {}

impl QueueName {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<QueueName, InvalidQueueName> {
        let len_max = if name.ends_with(DEAD_LETTER_SUFFIX) {
            QUEUE_NAME_LEN_MAX + DEAD_LETTER_SUFFIX.len()
        } else {
            QUEUE_NAME_LEN_MAX
        };
        if name.is_empty() || name.len() > len_max {
            return Err(InvalidQueueName(format!(
                "queue name must be 1 to {QUEUE_NAME_LEN_MAX} bytes long \
                 (plus {DEAD_LETTER_SUFFIX} for a dead-letter queue), got {}",
                name.len()
            )));
        }
        if name.starts_with('.') {
            return Err(InvalidQueueName(
                "queue name must not start with '.'".into(),
            ));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(InvalidQueueName(format!(
                "queue name may hold only A-Z a-z 0-9 . _ -, found {bad:?}"
            )));
        }
        Ok(QueueName(name.to_string()))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for a dead-letter queue (a name ending in `.dead`).
    pub fn is_dead_letter(&self) -> bool {
        self.0.ends_with(DEAD_LETTER_SUFFIX)
    }

    /// The queue's dead-letter queue, `{name}.dead`; `None` for a
    /// dead-letter queue, which does not dead-letter again.
    pub fn dead_letter(&self) -> Option<QueueName> {
        if self.is_dead_letter() {
            return None;
        }
        let name = QueueName(format!("{}{DEAD_LETTER_SUFFIX}", self.0));
        debug_assert!(QueueName::new(name.as_str()).is_ok());
        Some(name)
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The two kinds of queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueueKind {
    /// First in, first out.
    Fifo,
    /// Ordered by a signed 64-bit priority.
    Priority,
}

impl QueueKind {
    fn root(self) -> &'static str {
        match self {
            QueueKind::Fifo => "hotq",
            QueueKind::Priority => "hotq-pq",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            QueueKind::Fifo => "fifo",
            QueueKind::Priority => "priority",
        }
    }
}

fn registry() -> Subspace {
    Subspace::all().subspace(&("hotq-registry",))
}

/// `[begin, end)` of the registry of queues that staged pops.
pub fn registry_range() -> (Vec<u8>, Vec<u8>) {
    registry().range()
}

/// The queue a registry key names; `None` for a key that is not one.
pub fn registry_entry(key: &[u8]) -> Option<(QueueKind, QueueName)> {
    let (tag, name) = registry().unpack::<(String, String)>(key).ok()?;
    let kind = match tag.as_str() {
        "fifo" => QueueKind::Fifo,
        "priority" => QueueKind::Priority,
        _ => return None,
    };
    Some((kind, QueueName::new(&name).ok()?))
}

/// The subspaces of one queue.
#[derive(Debug, Clone)]
pub struct QueueKeys {
    kind: QueueKind,
    name: QueueName,
    items: Subspace,
    requests: Subspace,
    results: Subspace,
    leases: Subspace,
    receipts: Subspace,
    delayed: Subspace,
    meta: Subspace,
}

impl QueueKeys {
    /// The layout of the FIFO queue `name`.
    pub fn new(name: &QueueName) -> QueueKeys {
        QueueKeys::of_kind(QueueKind::Fifo, name)
    }

    /// The layout of queue `name` of `kind`.
    pub fn of_kind(kind: QueueKind, name: &QueueName) -> QueueKeys {
        let root = Subspace::all().subspace(&(kind.root(), name.as_str()));
        QueueKeys {
            kind,
            name: name.clone(),
            items: root.subspace(&"items"),
            requests: root.subspace(&"requests"),
            results: root.subspace(&"results"),
            leases: root.subspace(&"leases"),
            receipts: root.subspace(&"receipts"),
            delayed: root.subspace(&"delayed"),
            meta: root.subspace(&"meta"),
        }
    }

    /// The queue's kind.
    pub fn kind(&self) -> QueueKind {
        self.kind
    }

    /// The queue's name.
    pub fn name(&self) -> &QueueName {
        &self.name
    }

    /// The queue's entry in the registry of queues that staged pops.
    pub fn registry_key(&self) -> Vec<u8> {
        registry().pack(&(self.kind.tag(), self.name.as_str()))
    }

    /// The key of the item at `index` with tie-breaker `random`.
    pub fn item(&self, index: u64, random: &[u8]) -> Vec<u8> {
        self.items.pack(&(index, Bytes::from(random)))
    }

    /// `[begin, end)` of the items subspace.
    pub fn items_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.items.range()
    }

    /// The index of an item key, `None` if the key is not an item key.
    pub fn item_index(&self, key: &[u8]) -> Option<u64> {
        self.items
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(index, _)| index)
    }

    /// The key of a priority-queue item: `items/(priority, count, random)`.
    /// Keys order by priority (signed, `i64::MIN` first), then by `count`
    /// (push order within a priority), then by `random` (ties).
    pub fn priority_item(&self, priority: i64, count: u64, random: &[u8]) -> Vec<u8> {
        self.items.pack(&(priority, count, Bytes::from(random)))
    }

    /// `[begin, end)` of the priority-queue items of one `priority`: the
    /// sub-range a push reads (in reverse, limit 1) for the last count.
    pub fn priority_range(&self, priority: i64) -> (Vec<u8>, Vec<u8>) {
        self.items.subspace(&(priority,)).range()
    }

    /// The priority and count of a priority-queue item key; `None` if the
    /// key is not one.
    pub fn priority_item_parts(&self, key: &[u8]) -> Option<(i64, u64)> {
        self.items
            .unpack::<(i64, u64, Bytes)>(key)
            .ok()
            .map(|(priority, count, _)| (priority, count))
    }

    /// The key of the request at `index` by `requester`.
    pub fn request(&self, index: u64, requester: &[u8]) -> Vec<u8> {
        self.requests.pack(&(index, Bytes::from(requester)))
    }

    /// `[begin, end)` of the requests subspace.
    pub fn requests_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.requests.range()
    }

    /// The index and requester of a request key.
    pub fn request_parts(&self, key: &[u8]) -> Option<(u64, Vec<u8>)> {
        self.requests
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(index, requester)| (index, requester.into_owned()))
    }

    /// The key of `requester`'s result.
    pub fn result(&self, requester: &[u8]) -> Vec<u8> {
        self.results.pack(&(Bytes::from(requester),))
    }

    /// `[begin, end)` of the results subspace.
    pub fn results_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.results.range()
    }

    /// The key of the lease `receipt`, expiring at `expires_at_ms`.
    pub fn lease(&self, expires_at_ms: u64, receipt: &[u8]) -> Vec<u8> {
        self.leases.pack(&(expires_at_ms, Bytes::from(receipt)))
    }

    /// `[begin, end)` of the leases subspace.
    pub fn leases_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.leases.range()
    }

    /// `[begin, end)` of the leases that expired at or before `now_ms`.
    pub fn leases_due_range(&self, now_ms: u64) -> (Vec<u8>, Vec<u8>) {
        (self.leases.range().0, self.leases.pack(&(now_ms + 1,)))
    }

    /// The expiry and receipt of a lease key.
    pub fn lease_parts(&self, key: &[u8]) -> Option<(u64, Vec<u8>)> {
        self.leases
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(expires_at_ms, receipt)| (expires_at_ms, receipt.into_owned()))
    }

    /// The key mapping `receipt` to its lease's expiry.
    pub fn receipt(&self, receipt: &[u8]) -> Vec<u8> {
        self.receipts.pack(&(Bytes::from(receipt),))
    }

    /// The key of a delayed item, visible from `visible_at_ms`.
    pub fn delayed(&self, visible_at_ms: u64, random: &[u8]) -> Vec<u8> {
        self.delayed.pack(&(visible_at_ms, Bytes::from(random)))
    }

    /// `[begin, end)` of the delayed subspace.
    pub fn delayed_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.delayed.range()
    }

    /// `[begin, end)` of the delayed items visible at `now_ms`.
    pub fn delayed_due_range(&self, now_ms: u64) -> (Vec<u8>, Vec<u8>) {
        (self.delayed.range().0, self.delayed.pack(&(now_ms + 1,)))
    }

    /// The time a delayed item becomes visible, from its key.
    pub fn delayed_visible_at(&self, key: &[u8]) -> Option<u64> {
        self.delayed
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(visible_at_ms, _)| visible_at_ms)
    }

    /// The count of items under a lease, kept with atomic adds.
    pub fn leased(&self) -> Vec<u8> {
        self.meta.pack(&("leased",))
    }

    /// The count of delayed items, kept with atomic adds.
    pub fn delayed_count(&self) -> Vec<u8> {
        self.meta.pack(&("delayed",))
    }

    /// The item count, kept with atomic adds.
    pub fn depth(&self) -> Vec<u8> {
        self.meta.pack(&("depth",))
    }

    /// The count of waiting requests, kept with atomic adds.
    pub fn waiting(&self) -> Vec<u8> {
        self.meta.pack(&("waiting",))
    }

    /// The next item index, kept with `atomic_max` so it never goes back,
    /// even when the queue drains (see [`crate::queue`]).
    pub fn next_index(&self) -> Vec<u8> {
        self.meta.pack(&("next_index",))
    }

    /// The next request index, kept like [`Self::next_index`].
    pub fn next_request(&self) -> Vec<u8> {
        self.meta.pack(&("next_request",))
    }

    /// The hand-off marker of fulfiller `fulfiller` (see
    /// [`crate::staging::fulfill::LocalHandoff`]).
    pub fn handoff_marker(&self, fulfiller: u64) -> Vec<u8> {
        self.meta.pack(&("handoff", fulfiller))
    }

    /// Bumped whenever the fulfiller has new work; fulfillers watch it.
    pub fn wake(&self) -> Vec<u8> {
        self.meta.pack(&("wake",))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(QueueName::new("jobs-1.high_prio").is_ok());
        for bad in ["", ".hidden", "a/b", "sp ace", "ü", &"x".repeat(129)] {
            assert!(QueueName::new(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn dead_letter_names() {
        let long = QueueName::new(&"x".repeat(QUEUE_NAME_LEN_MAX)).unwrap();
        let dead = long.dead_letter().unwrap();
        assert_eq!(QueueName::new(dead.as_str()), Ok(dead.clone()));
        assert!(dead.is_dead_letter());
        assert_eq!(
            dead.dead_letter(),
            None,
            "a dead-letter queue does not dead-letter"
        );
        assert!(QueueName::new(&"x".repeat(QUEUE_NAME_LEN_MAX + 1)).is_err());
    }

    #[test]
    fn due_ranges_hold_exactly_what_is_due() {
        let keys = QueueKeys::new(&QueueName::new("q").unwrap());
        let (begin, end) = keys.leases_due_range(1_000);
        let (all_begin, all_end) = keys.leases_range();
        assert_eq!(begin, all_begin);
        assert!(end < all_end);
        for (at, due) in [
            (0, true),
            (999, true),
            (1_000, true),
            (1_001, false),
            (u64::MAX - 1, false),
        ] {
            for receipt in [[0u8; 16], [0xff; 16]] {
                let key = keys.lease(at, &receipt);
                assert_eq!(begin <= key && key < end, due, "lease at {at}");
                assert_eq!(keys.lease_parts(&key), Some((at, receipt.to_vec())));
                let delayed = keys.delayed(at, &receipt);
                let (begin, end) = keys.delayed_due_range(1_000);
                assert_eq!(begin <= delayed && delayed < end, due, "delayed at {at}");
                assert_eq!(keys.delayed_visible_at(&delayed), Some(at));
            }
        }
    }

    #[test]
    fn item_keys_order_by_index_then_random_and_stay_in_range() {
        let keys = QueueKeys::new(&QueueName::new("q").unwrap());
        let (begin, end) = keys.items_range();
        let a = keys.item(1, &[0xff; RANDOM_LEN]);
        let b = keys.item(2, &[0x00; RANDOM_LEN]);
        let c = keys.item(256, &[0x00; RANDOM_LEN]);
        assert!(begin < a && a < b && b < c && c < end);
        assert_eq!(keys.item_index(&c), Some(256));
        let other = QueueKeys::new(&QueueName::new("q2").unwrap());
        let (other_begin, other_end) = other.items_range();
        assert!(
            other_begin >= end || other_end <= begin,
            "queues never overlap"
        );
    }

    #[test]
    fn priority_item_keys_order_by_priority_then_count_and_stay_in_their_range() {
        let keys = QueueKeys::of_kind(QueueKind::Priority, &QueueName::new("q").unwrap());
        let (items_begin, items_end) = keys.items_range();
        let priorities = [i64::MIN, i64::MIN + 1, -256, -1, 0, 1, 255, i64::MAX];
        let mut previous: Option<Vec<u8>> = None;
        for &priority in &priorities {
            let (begin, end) = keys.priority_range(priority);
            assert!(items_begin <= begin && end <= items_end);
            for count in [0u64, 1, 255, 256, u64::MAX] {
                for random in [[0x00; RANDOM_LEN], [0xff; RANDOM_LEN]] {
                    let key = keys.priority_item(priority, count, &random);
                    assert!(begin < key && key < end, "{priority}/{count} in its range");
                    assert_eq!(keys.priority_item_parts(&key), Some((priority, count)));
                    if let Some(previous) = &previous {
                        assert!(
                            previous < &key,
                            "{priority}/{count} sorts after its predecessor"
                        );
                    }
                    previous = Some(key);
                }
            }
            if let Some(next) = priorities.iter().find(|&&p| p > priority) {
                let (next_begin, _) = keys.priority_range(*next);
                assert!(end <= next_begin, "priority ranges never overlap");
            }
        }
        assert_eq!(
            keys.priority_item_parts(&keys.item(3, &[0; RANDOM_LEN])),
            None
        );
        assert_eq!(keys.priority_item_parts(&keys.depth()), None);
    }
}
