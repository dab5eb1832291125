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
//! | `meta`     | `("depth",)`, `("waiting",)`, `("wake",)` | counters (atomic add) |

use std::fmt;

use foundationdb_tuple::{Bytes, Subspace};

/// Longest queue name, in bytes.
pub const QUEUE_NAME_LEN_MAX: usize = 128;
/// Bytes of randomness in every item key (orders ties, keeps keys unique).
pub const RANDOM_LEN: usize = 16;

/// A validated queue name: 1 to 128 characters of `A-Z a-z 0-9 . _ -`,
/// not starting with `.`.
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
        if name.is_empty() || name.len() > QUEUE_NAME_LEN_MAX {
            return Err(InvalidQueueName(format!(
                "queue name must be 1 to {QUEUE_NAME_LEN_MAX} bytes long, got {}",
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
