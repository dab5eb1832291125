//! The store conformance suite on a FoundationDB cluster. Runs when built
//! with `--features fdb` and `FDB_CLUSTER_FILE` names a cluster file; says
//! plainly that it skipped otherwise. Each test works in a keyspace of
//! its own on the cluster (`common::backend::fdb_raw`), so the suite can
//! run on a cluster that daemons or other suites use.
#![cfg(feature = "fdb")]

use crate::common;

use hotq::store::fdb::FdbStore;

fn cluster() -> Option<FdbStore> {
    let store = common::backend::fdb_raw();
    if store.is_none() {
        eprintln!("SKIPPED: {}", common::backend::FDB_SKIPPED_BECAUSE);
    }
    store
}

crate::conformance_tests!(cluster());
