//! The cluster suite (`tests/it/common/cluster_suite.rs`) on the embedded
//! store behind [`Resolving`], the same adapter the daemon puts in front of
//! FoundationDB: runs always, so CI proves the suite itself, and the store
//! conformance suite through the adapter, which must keep every rule of
//! the contract.

use crate::common;

use hotq::store::embedded::{Durability, EmbeddedStore};
use hotq::store::resolving::Resolving;

/// A fresh embedded store behind the marker adapter. The temporary
/// directory outlives the store: fjall keeps working in it until every
/// handle is gone, and the OS reclaims it with the process.
fn store() -> Option<Resolving<EmbeddedStore>> {
    let (store, dir) = common::embedded_store(Durability::Buffered);
    std::mem::forget(dir);
    Some(Resolving::new(store))
}

mod on_embedded {
    use super::store;
    use crate::{cluster_suite_tests, common};

    cluster_suite_tests!("never skipped", store());
}

mod conformance_through_markers {
    use super::store;
    use crate::{common, conformance_tests};

    conformance_tests!(store());
}
