//! The key layout of a queue (docs/design.md §3), tuple-encoded under `("hotq", queue)`
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
//! | `receipts` | `(receipt,)`            | an extended lease's `expires_at_ms` |
//! | `meta`     | `("depth",)`, `("waiting",)`, `("leased",)`, `("delayed",)`, `("grouped",)`, `("expired",)`, `("wake",)` | counters (atomic add) |
//! | `group`    | `(group,)`              | group state: the group has a head out of `grouped` (see `crate::queue::groups`) |
//! | `grouped`  | `(group, index, random)` | pending grouped item: visible-at ms and item envelope |
//! | `meta`     | `("fair", key)`         | fairness key `key`'s last virtual tag (`atomic_max`; see `crate::queue::fair`) |
//! | `meta`     | `("fair_floor",)`       | the lowest virtual time of a fair push (a purge's mark; `atomic_max`) |
//!
//! In a queue with fairness keys, an item's `index` is its virtual tag
//! (`crate::queue::fair`), not its push count: the same key shape, so
//! every reader of items is unchanged.
//!
//! Leases and delayed items live in one store-wide **due index**,
//! `("hotq-due", due_ms, kind, queue, what, id)`, not under their queue:
//!
//! | what        | id        | value                              |
//! |-------------|-----------|------------------------------------|
//! | `"delayed"` | random    | delayed envelope: item and its key |
//! | `"lease"`   | receipt   | lease envelope: item and its key   |
//! | `"reap"`    | empty     | empty: look at the queue's stored requests and results then |
//! | `"dedup"`   | dedup id  | empty: the id stops counting       |
//! | `"group"`   | group key | empty: a handed-off head is taken as delivered |
//! | `"expire"`  | the item's key (visible, waiting or delayed) | empty: its retention ends |
//!
//! So the timer finds everything due in every queue with one range read
//! from the index's start, and its work follows what is due, not how many
//! queues exist. The entry *is* the lease or delayed item (no second key
//! per item, and consuming it is one clear that every racing settle reads).
//! Binaries before the due index kept leases and delayed items under
//! `(queue, "leases"|"delayed", due_ms, id)`; [`QueueKeys::legacy_ranges`]
//! names them for the one-time move (see [`crate::due::migrate`]).

use std::sync::Arc;

use foundationdb_tuple::{Bytes, Subspace};

mod due_index;
mod layout;
mod name;

use layout::Layout;

use due_index::due;
pub use due_index::{DueEntry, DueWhat, due_entry, due_range, due_until};
pub use name::{DEAD_LETTER_SUFFIX, InvalidQueueName, QUEUE_NAME_LEN_MAX, QueueName};

/// Who a stored request is for, as it stands in request and result keys:
/// 16 random bytes for a plain request (`crate::staging::requester`), a
/// line's id and its pops' class for a counted one
/// (`crate::staging::counted`). Opaque here; those modules build and read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequesterId(Vec<u8>);

impl RequesterId {
    /// The id made of `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> RequesterId {
        RequesterId(bytes)
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Bytes of randomness in every item key (orders ties, keeps keys unique).
pub const RANDOM_LEN: usize = 16;

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

/// `[begin, end)` of keys.
pub type KeyRange = (Vec<u8>, Vec<u8>);

/// The root of every queue of `kind`: `(root,)`; queue subspaces are
/// `(root, name)` under it, so walking it visits every queue that holds
/// any key (the sampler's rotation).
pub fn queues_root_range(kind: QueueKind) -> (Vec<u8>, Vec<u8>) {
    Subspace::all().subspace(&(kind.root(),)).range()
}

/// The queue whose subspace holds `key` (a key of [`queues_root_range`]),
/// and the end of that queue's subspace (where the next queue starts).
pub fn queue_of_key(kind: QueueKind, key: &[u8]) -> Option<(QueueName, Vec<u8>)> {
    let root = Subspace::all().subspace(&(kind.root(),));
    let rest = key.strip_prefix(root.bytes())?;
    // A tuple string: 0x02, the bytes, 0x00 (queue names hold no NUL, so
    // the first 0x00 ends it).
    let body = rest.strip_prefix(&[0x02])?;
    let len = body.iter().position(|&b| b == 0)?;
    let name = QueueName::new(std::str::from_utf8(&body[..len]).ok()?).ok()?;
    let end = root.subspace(&(name.as_str(),)).range().1;
    Some((name, end))
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

fn dead_letter_roles() -> Subspace {
    Subspace::all().subspace(&("hotq-dlq",))
}

/// The entry saying queue `origin` of `kind` names `target` as its
/// dead-letter queue: `("hotq-dlq", target, kind, origin)`, empty value
/// (see `crate::queue::dead_letters`).
pub fn dead_letter_role_key(target: &QueueName, kind: QueueKind, origin: &QueueName) -> Vec<u8> {
    dead_letter_roles().pack(&(target.as_str(), kind.tag(), origin.as_str()))
}

/// `[begin, end)` of the entries of queues naming `target` as their
/// dead-letter queue.
pub fn dead_letter_roles_range(target: &QueueName) -> (Vec<u8>, Vec<u8>) {
    dead_letter_roles().subspace(&(target.as_str(),)).range()
}

/// The origin queue a [`dead_letter_role_key`] names; `None` for a key
/// that is not one.
pub fn dead_letter_role_origin(key: &[u8]) -> Option<(QueueKind, QueueName)> {
    let (_, tag, origin) = dead_letter_roles()
        .unpack::<(String, String, String)>(key)
        .ok()?;
    let kind = match tag.as_str() {
        "fifo" => QueueKind::Fifo,
        "priority" => QueueKind::Priority,
        _ => return None,
    };
    Some((kind, QueueName::new(&origin).ok()?))
}

/// The subspaces of one queue. Cheap to clone: every clone shares one
/// packed layout (see `keys/layout.rs`).
#[derive(Debug, Clone)]
pub struct QueueKeys(Arc<Layout>);

impl QueueKeys {
    /// The layout of the FIFO queue `name`.
    pub fn new(name: &QueueName) -> QueueKeys {
        QueueKeys::of_kind(QueueKind::Fifo, name)
    }

    /// The layout of queue `name` of `kind`.
    pub fn of_kind(kind: QueueKind, name: &QueueName) -> QueueKeys {
        QueueKeys(layout::layout(kind, name))
    }

    /// The queue's kind.
    pub fn kind(&self) -> QueueKind {
        self.0.kind
    }

    /// The queue's name.
    pub fn name(&self) -> &QueueName {
        &self.0.name
    }

    /// The queue's entry in the registry of queues that staged pops.
    pub fn registry_key(&self) -> Vec<u8> {
        registry().pack(&(self.0.kind.tag(), self.0.name.as_str()))
    }

    /// The key of the item at `index` with tie-breaker `random`.
    pub fn item(&self, index: u64, random: &[u8]) -> Vec<u8> {
        self.0.items.pack(&(index, Bytes::from(random)))
    }

    /// `[begin, end)` of the items subspace.
    pub fn items_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.0.items.range()
    }

    /// The index of an item key, `None` if the key is not an item key.
    pub fn item_index(&self, key: &[u8]) -> Option<u64> {
        self.0
            .items
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(index, _)| index)
    }

    /// The key of a priority-queue item: `items/(priority, count, random)`.
    /// Keys order by priority (signed, `i64::MIN` first), then by `count`
    /// (push order within a priority), then by `random` (ties).
    pub fn priority_item(&self, priority: i64, count: u64, random: &[u8]) -> Vec<u8> {
        self.0.items.pack(&(priority, count, Bytes::from(random)))
    }

    /// `[begin, end)` of the priority-queue items of one `priority`: the
    /// sub-range a push reads (in reverse, limit 1) for the last count.
    pub fn priority_range(&self, priority: i64) -> (Vec<u8>, Vec<u8>) {
        self.0.items.subspace(&(priority,)).range()
    }

    /// The priority and count of a priority-queue item key; `None` if the
    /// key is not one.
    pub fn priority_item_parts(&self, key: &[u8]) -> Option<(i64, u64)> {
        self.0
            .items
            .unpack::<(i64, u64, Bytes)>(key)
            .ok()
            .map(|(priority, count, _)| (priority, count))
    }

    /// The key of the request at `index` by `requester`.
    pub fn request(&self, index: u64, requester: &RequesterId) -> Vec<u8> {
        self.0
            .requests
            .pack(&(index, Bytes::from(requester.as_bytes())))
    }

    /// `[begin, end)` of the requests subspace.
    pub fn requests_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.0.requests.range()
    }

    /// The index and requester of a request key.
    pub fn request_parts(&self, key: &[u8]) -> Option<(u64, RequesterId)> {
        self.0
            .requests
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(index, requester)| (index, RequesterId(requester.into_owned())))
    }

    /// The key of `requester`'s result.
    pub fn result(&self, requester: &RequesterId) -> Vec<u8> {
        self.0.results.pack(&(Bytes::from(requester.as_bytes()),))
    }

    /// The key of the result for item `item_key` of a counted request by
    /// `requester` (one per item, so several fulfillers may serve the
    /// request without touching one another's results; in item order).
    pub fn counted_result(&self, requester: &RequesterId, item_key: &[u8]) -> Vec<u8> {
        self.0
            .results
            .pack(&(Bytes::from(requester.as_bytes()), Bytes::from(item_key)))
    }

    /// `[begin, end)` of the results of counted requests by `requester`.
    pub fn counted_results_range(&self, requester: &RequesterId) -> (Vec<u8>, Vec<u8>) {
        self.0
            .results
            .subspace(&(Bytes::from(requester.as_bytes()),))
            .range()
    }

    /// `[begin, end)` of the results subspace.
    pub fn results_range(&self) -> (Vec<u8>, Vec<u8>) {
        self.0.results.range()
    }

    /// A due-index key of this queue.
    pub fn due(&self, due_ms: u64, what: DueWhat, id: &[u8]) -> Vec<u8> {
        due().pack(&(
            due_ms,
            self.0.kind.tag(),
            self.0.name.as_str(),
            what.tag(),
            Bytes::from(id),
        ))
    }

    /// The key of the lease `receipt`, expiring at `expires_at_ms` (in the
    /// due index).
    pub fn lease(&self, expires_at_ms: u64, receipt: &[u8]) -> Vec<u8> {
        self.due(expires_at_ms, DueWhat::Lease, receipt)
    }

    /// The key mapping `receipt` to its lease's expiry, while the lease is
    /// not at the expiry the receipt holds (see [`crate::lease`]).
    pub fn receipt(&self, receipt: &[u8]) -> Vec<u8> {
        self.0.receipts.pack(&(Bytes::from(receipt),))
    }

    /// `[begin, end)` of the receipts subspace (a row per extended lease).
    pub fn receipts_range(&self) -> KeyRange {
        self.0.receipts.range()
    }

    /// The receipt whose row (see [`Self::receipt`]) is `key`.
    pub fn receipt_of(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.0
            .receipts
            .unpack::<(Bytes,)>(key)
            .ok()
            .map(|(receipt,)| receipt.into_owned())
    }

    /// The key of a delayed item, visible from `visible_at_ms` (in the due
    /// index).
    pub fn delayed(&self, visible_at_ms: u64, random: &[u8]) -> Vec<u8> {
        self.due(visible_at_ms, DueWhat::Delayed, random)
    }

    /// The due-index entry telling the reaper to look at this queue's
    /// stored requests and results at `at_ms`.
    pub fn reap_at(&self, at_ms: u64) -> Vec<u8> {
        self.due(at_ms, DueWhat::Reap, &[])
    }

    /// `[begin, end)` of the leases and of the delayed items as binaries
    /// before the due index kept them: `(queue, "leases", expires_at_ms,
    /// receipt)` and `(queue, "delayed", visible_at_ms, random)`.
    pub fn legacy_ranges(&self) -> [(DueWhat, KeyRange); 2] {
        [
            (DueWhat::Lease, self.0.legacy_leases.range()),
            (DueWhat::Delayed, self.0.legacy_delayed.range()),
        ]
    }

    /// The due time and id of a legacy lease or delayed key.
    pub fn legacy_parts(&self, what: DueWhat, key: &[u8]) -> Option<(u64, Vec<u8>)> {
        let space = match what {
            DueWhat::Lease => &self.0.legacy_leases,
            DueWhat::Delayed => &self.0.legacy_delayed,
            DueWhat::Reap | DueWhat::Dedup | DueWhat::Group | DueWhat::Expire => return None,
        };
        space
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(at, id)| (at, id.into_owned()))
    }

    /// A legacy lease key (tests write old-layout data with it).
    pub fn legacy_lease(&self, expires_at_ms: u64, receipt: &[u8]) -> Vec<u8> {
        self.0
            .legacy_leases
            .pack(&(expires_at_ms, Bytes::from(receipt)))
    }

    /// The count of items under a lease, kept with atomic adds.
    pub fn leased(&self) -> Vec<u8> {
        self.0.meta.pack(&("leased",))
    }

    /// The count of delayed items, kept with atomic adds.
    pub fn delayed_count(&self) -> Vec<u8> {
        self.0.meta.pack(&("delayed",))
    }

    /// The item count, kept with atomic adds.
    pub fn depth(&self) -> Vec<u8> {
        self.0.meta.pack(&("depth",))
    }

    /// The count of waiting requests, kept with atomic adds.
    pub fn waiting(&self) -> Vec<u8> {
        self.0.meta.pack(&("waiting",))
    }

    /// The next item index, kept with `atomic_max` so it never goes back,
    /// even when the queue drains (see [`crate::queue`]).
    pub fn next_index(&self) -> Vec<u8> {
        self.0.meta.pack(&("next_index",))
    }

    /// The next request index, kept like [`Self::next_index`].
    pub fn next_request(&self) -> Vec<u8> {
        self.0.meta.pack(&("next_request",))
    }

    /// The hand-off marker of fulfiller `fulfiller` (see
    /// [`crate::staging::round::fulfill::LocalHandoff`]).
    pub fn handoff_marker(&self, fulfiller: u64) -> Vec<u8> {
        self.0.meta.pack(&("handoff", fulfiller))
    }

    /// The key of push deduplication id `id`: its value is when it stops
    /// counting (8 bytes, big-endian ms since the epoch). Under the queue's
    /// subspace, so deleting the queue drops it.
    pub fn dedup(&self, id: &[u8]) -> Vec<u8> {
        self.0.meta.subspace(&("dedup",)).pack(&(Bytes::from(id),))
    }

    /// `[begin, end)` of the queue's dedup ids.
    #[cfg(feature = "testing")]
    pub fn dedup_range(&self) -> KeyRange {
        self.0.meta.subspace(&("dedup",)).range()
    }

    /// The last virtual tag given to an item of fairness key `key` (see
    /// `crate::queue::fair`), kept with `atomic_max`.
    pub fn fair_tag(&self, key: &str) -> Vec<u8> {
        self.0.meta.subspace(&("fair",)).pack(&(key,))
    }

    /// The lowest virtual time a fair push may start from (see
    /// `crate::queue::fair`): a purge raises it to its mark, so items
    /// pushed after the purge began are placed past the items it drops.
    pub fn fair_floor(&self) -> Vec<u8> {
        self.0.meta.pack(&("fair_floor",))
    }

    /// `[begin, end)` of the queue's fairness keys' tags.
    pub fn fair_tags_range(&self) -> KeyRange {
        self.0.meta.subspace(&("fair",)).range()
    }

    /// The fairness key whose tag (see [`Self::fair_tag`]) is `key`.
    pub fn fair_key_of(&self, key: &[u8]) -> Option<String> {
        self.0
            .meta
            .subspace(&("fair",))
            .unpack::<(String,)>(key)
            .ok()
            .map(|(fair_key,)| fair_key)
    }

    /// The last virtual tag given to an item of fairness key `key` at
    /// `priority` in a priority queue (see `crate::queue::fair`), kept
    /// with `atomic_max`.
    pub fn fair_priority_tag(&self, priority: i64, key: &str) -> Vec<u8> {
        self.0.meta.subspace(&("pfair",)).pack(&(priority, key))
    }

    /// Past every tag given at `priority` in a priority queue (the level's
    /// virtual time while it is empty), kept with `atomic_max`.
    pub fn fair_priority_mark(&self, priority: i64) -> Vec<u8> {
        self.0.meta.pack(&("pfair_mark", priority))
    }

    /// `[begin, end)` of a priority queue's fairness keys' tags.
    pub fn fair_priority_tags_range(&self) -> KeyRange {
        self.0.meta.subspace(&("pfair",)).range()
    }

    /// The priority and fairness key whose tag (see
    /// [`Self::fair_priority_tag`]) is `key`.
    pub fn fair_priority_tag_parts(&self, key: &[u8]) -> Option<(i64, String)> {
        self.0
            .meta
            .subspace(&("pfair",))
            .unpack::<(i64, String)>(key)
            .ok()
    }

    /// The queue's rate-limit cell (see `crate::queue::limits`): the
    /// theoretical arrival time of its next pop, ns since the epoch.
    pub fn rate_cell(&self) -> Vec<u8> {
        self.0.meta.pack(&("rate",))
    }

    /// A lease of an item of fairness key `key` that ends at
    /// `expires_at_ms` (see `crate::queue::limits`): one row per lease,
    /// cleared when the lease ends; `leases_per_key_max` counts the rows
    /// not yet past their expiry, so a row a path failed to clear stops
    /// counting when its lease would have ended.
    pub fn lease_of(&self, key: &str, expires_at_ms: u64, receipt: &[u8]) -> Vec<u8> {
        let leases = self.0.meta.subspace(&("leases_of", key));
        leases.pack(&(expires_at_ms, Bytes::from(receipt)))
    }

    /// The expiry of the lease row `row` of fairness key `key` (see
    /// [`Self::lease_of`]).
    pub fn lease_of_expiry(&self, key: &str, row: &[u8]) -> Option<u64> {
        let leases = self.0.meta.subspace(&("leases_of", key));
        let (expires_at_ms, _) = leases.unpack::<(u64, Bytes)>(row).ok()?;
        Some(expires_at_ms)
    }

    /// `[begin, end)` of the leases of fairness key `key` ending at or
    /// after `from_ms`.
    pub fn leases_of_range(&self, key: &str, from_ms: u64) -> KeyRange {
        let leases = self.0.meta.subspace(&("leases_of", key));
        (leases.pack(&(from_ms,)), leases.range().1)
    }

    /// The rate-limit cell of fairness key `key` (see
    /// `crate::queue::limits`), like [`Self::rate_cell`] for the queue.
    pub fn rate_by(&self, key: &str) -> Vec<u8> {
        self.0.meta.subspace(&("rate_by",)).pack(&(key,))
    }

    /// The queue's lease gate (see `crate::queue::limits`): every leasing
    /// pop of a queue with `leases_max` reads it without snapshot and
    /// writes it, so such pops serialize among themselves.
    pub fn lease_gate(&self) -> Vec<u8> {
        self.0.meta.pack(&("lease_gate",))
    }

    /// The key of the queue's stored settings (see `crate::queue::settings`).
    pub fn settings(&self) -> Vec<u8> {
        self.0.meta.pack(&("settings",))
    }

    /// The key of the queue's SQS record (attributes SQS has and hotq's
    /// settings do not, tags; see `crate::sqs`). Under the queue's
    /// subspace, so deleting the queue drops it.
    pub fn sqs_queue(&self) -> Vec<u8> {
        self.0.meta.pack(&("sqs",))
    }

    /// `[begin, end)` of the whole queue: every key under `(root, name)`
    /// (items, requests, results, receipts, counters, settings, dedup ids).
    /// Its leases and delayed items are in the due index, not here.
    pub fn queue_range(&self) -> KeyRange {
        Subspace::all()
            .subspace(&(self.0.kind.root(), self.0.name.as_str()))
            .range()
    }

    /// The state key of message group `group` (see `crate::queue::groups`).
    pub fn group(&self, group: &str) -> Vec<u8> {
        self.0.groups.pack(&(group,))
    }

    /// `[begin, end)` of every group state of the queue.
    pub fn groups_range(&self) -> KeyRange {
        self.0.groups.range()
    }

    /// The group whose state key (see [`Self::group`]) is `key`.
    pub fn group_of(&self, key: &[u8]) -> Option<String> {
        self.0
            .groups
            .unpack::<(String,)>(key)
            .ok()
            .map(|(group,)| group)
    }

    /// The key of an item of `group` waiting behind the group's head, at
    /// its push `index` with tie-breaker `random`.
    pub fn grouped_item(&self, group: &str, index: u64, random: &[u8]) -> Vec<u8> {
        self.0.grouped.pack(&(group, index, Bytes::from(random)))
    }

    /// `[begin, end)` of the items waiting behind `group`'s head, in push order.
    pub fn grouped_range(&self, group: &str) -> KeyRange {
        self.0.grouped.subspace(&(group,)).range()
    }

    /// `[begin, end)` of every item waiting behind a group head.
    pub fn grouped_all_range(&self) -> KeyRange {
        self.0.grouped.range()
    }

    /// The group, index and random of a key of [`Self::grouped_item`].
    pub fn grouped_parts(&self, key: &[u8]) -> Option<(String, u64, Vec<u8>)> {
        self.0
            .grouped
            .unpack::<(String, u64, Bytes)>(key)
            .ok()
            .map(|(group, index, random)| (group, index, random.into_owned()))
    }

    /// The index and random of an item key (see [`Self::item`]).
    pub fn item_parts(&self, key: &[u8]) -> Option<(u64, Vec<u8>)> {
        self.0
            .items
            .unpack::<(u64, Bytes)>(key)
            .ok()
            .map(|(index, random)| (index, random.into_owned()))
    }

    /// The count of items waiting behind group heads, kept with atomic adds.
    pub fn grouped_count(&self) -> Vec<u8> {
        self.0.meta.pack(&("grouped",))
    }

    /// The count of items dropped because their retention ended (see
    /// `crate::queue::expiry`), kept with atomic adds.
    pub fn expired_count(&self) -> Vec<u8> {
        self.0.meta.pack(&("expired",))
    }

    /// True when `key` is one of this queue's visible item keys.
    pub fn is_item_key(&self, key: &[u8]) -> bool {
        self.0.items.is_start_of(key)
    }

    /// True when `key` is one of this queue's items waiting behind a
    /// group head.
    pub fn is_grouped_key(&self, key: &[u8]) -> bool {
        self.0.grouped.is_start_of(key)
    }

    /// Bumped whenever the fulfiller has new work; fulfillers watch it.
    pub fn wake(&self) -> Vec<u8> {
        self.0.meta.pack(&("wake",))
    }
}

#[cfg(test)]
mod tests;
