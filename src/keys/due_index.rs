//! The store-wide due index, `("hotq-due", due_ms, kind, queue, what, id)`
//! (see the layout table in [`super`]).

use foundationdb_tuple::{Bytes, Subspace};

use super::{QueueKind, QueueName};

pub(super) fn due() -> Subspace {
    Subspace::all().subspace(&("hotq-due",))
}

/// What a due-index entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DueWhat {
    /// A delayed item, visible from the due time.
    Delayed,
    /// A lease, expiring at the due time.
    Lease,
    /// The queue's stored requests or results may pass their deadline.
    Reap,
    /// A push's deduplication id stops counting (see `crate::queue::dedup`).
    Dedup,
    /// A group head popped without a lease is taken as delivered, if its
    /// hand-off has not ended by then (see `crate::queue::groups`).
    Group,
    /// An item's retention ends: the id is the key it is stored under
    /// (visible, waiting behind a group head, or delayed); see
    /// `crate::queue::expiry`.
    Expire,
}

impl DueWhat {
    pub(super) fn tag(self) -> &'static str {
        match self {
            DueWhat::Delayed => "delayed",
            DueWhat::Lease => "lease",
            DueWhat::Reap => "reap",
            DueWhat::Dedup => "dedup",
            DueWhat::Group => "group",
            DueWhat::Expire => "expire",
        }
    }
}

/// One parsed due-index key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueEntry {
    /// When it is due, in ms since the epoch.
    pub due_ms: u64,
    /// Whose queue.
    pub kind: QueueKind,
    /// Which queue.
    pub queue: QueueName,
    /// What is due.
    pub what: DueWhat,
    /// A receipt, a random tie-breaker, or empty.
    pub id: Vec<u8>,
}

/// `[begin, end)` of the due index entries due at or before `now_ms`.
pub fn due_until(now_ms: u64) -> (Vec<u8>, Vec<u8>) {
    (due().range().0, due().pack(&(now_ms.saturating_add(1),)))
}

/// `[begin, end)` of the whole due index.
pub fn due_range() -> (Vec<u8>, Vec<u8>) {
    due().range()
}

/// Parses a due-index key; `None` for a key that is not one.
pub fn due_entry(key: &[u8]) -> Option<DueEntry> {
    let (due_ms, kind, queue, what, id) = due()
        .unpack::<(u64, String, String, String, Bytes)>(key)
        .ok()?;
    let kind = match kind.as_str() {
        "fifo" => QueueKind::Fifo,
        "priority" => QueueKind::Priority,
        _ => return None,
    };
    let what = match what.as_str() {
        "delayed" => DueWhat::Delayed,
        "lease" => DueWhat::Lease,
        "reap" => DueWhat::Reap,
        "dedup" => DueWhat::Dedup,
        "group" => DueWhat::Group,
        "expire" => DueWhat::Expire,
        _ => return None,
    };
    Some(DueEntry {
        due_ms,
        kind,
        queue: QueueName::new(&queue).ok()?,
        what,
        id: id.into_owned(),
    })
}
