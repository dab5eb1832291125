//! The store conformance suite on the embedded backend (fjall on disk, `sync`).

use crate::common;

use hotq::store::embedded::Durability;

// The temporary directory outlives the store: fjall keeps working in it
// until every handle is gone, and the OS reclaims it with the process.
crate::conformance_tests!({
    let (store, dir) = common::embedded_store(Durability::Sync);
    std::mem::forget(dir);
    Some(store)
});
