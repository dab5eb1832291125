//! The subspaces of one queue, packed once per queue and shared.
//!
//! Every pop, ack and hand-off names its queue's keys, and packing them
//! is ten tuple encodings and ten allocations. Profiled under a leased
//! drain (issue #14) that cost more CPU than the pop's own key writes, so
//! a process-wide cache keeps the layouts of the queues in use and every
//! clone of a [`super::QueueKeys`] shares one `Arc`.
//!
//! The cache is bounded by [`LAYOUTS_CACHED_MAX`]: past it, it starts
//! over. A daemon sweeping a million queues (the timer) then packs
//! layouts as it did before the cache, never holds more than the bound.

use parking_lot::Mutex;
use std::borrow::Borrow;
use std::collections::HashMap;
use std::sync::Arc;

use foundationdb_tuple::Subspace;

use super::{QueueKind, QueueName};

/// Most queue layouts kept per kind.
pub const LAYOUTS_CACHED_MAX: usize = 4096;

/// The packed subspaces of one queue (see the table in `crate::keys`).
#[derive(Debug)]
pub(super) struct Layout {
    pub kind: QueueKind,
    pub name: QueueName,
    pub items: Subspace,
    pub requests: Subspace,
    pub results: Subspace,
    pub receipts: Subspace,
    /// Where binaries before the due index kept leases and delayed items.
    pub legacy_leases: Subspace,
    pub legacy_delayed: Subspace,
    pub meta: Subspace,
    pub groups: Subspace,
    pub grouped: Subspace,
}

impl Layout {
    fn pack(kind: QueueKind, name: &QueueName) -> Layout {
        let root = Subspace::all().subspace(&(kind.root(), name.as_str()));
        Layout {
            kind,
            name: name.clone(),
            items: root.subspace(&"items"),
            requests: root.subspace(&"requests"),
            results: root.subspace(&"results"),
            receipts: root.subspace(&"receipts"),
            legacy_leases: root.subspace(&"leases"),
            legacy_delayed: root.subspace(&"delayed"),
            meta: root.subspace(&"meta"),
            groups: root.subspace(&"group"),
            grouped: root.subspace(&"grouped"),
        }
    }
}

impl Borrow<str> for QueueName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

/// The layouts of one kind of queue, by name.
type Layouts = HashMap<QueueName, Arc<Layout>>;

/// The cached layouts, FIFO queues first, priority queues second.
static LAYOUTS: Mutex<[Option<Layouts>; 2]> = Mutex::new([None, None]);

/// The layout of queue `name` of `kind`, packed at most once while cached.
pub(super) fn layout(kind: QueueKind, name: &QueueName) -> Arc<Layout> {
    let slot = match kind {
        QueueKind::Fifo => 0,
        QueueKind::Priority => 1,
    };
    // A poisoned lock only means another thread panicked mid-insert; the
    // map holds whole entries either way.
    let mut cached = LAYOUTS.lock();
    let map = cached[slot].get_or_insert_with(HashMap::new);
    if let Some(layout) = map.get(name.as_str()) {
        return layout.clone();
    }
    if map.len() >= LAYOUTS_CACHED_MAX {
        map.clear();
    }
    let layout = Arc::new(Layout::pack(kind, name));
    map.insert(name.clone(), layout.clone());
    debug_assert!(map.len() <= LAYOUTS_CACHED_MAX);
    layout
}
