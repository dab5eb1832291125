//! The store conformance suite on a FoundationDB cluster. Runs when built
//! with `--features fdb` and `FDB_CLUSTER_FILE` names a cluster file; says
//! plainly that it skipped otherwise.
#![cfg(feature = "fdb")]

use crate::common;

use hotq::store::fdb::{FdbStore, cluster_file_from_env};

fn cluster() -> Option<FdbStore> {
    match cluster_file_from_env() {
        Some(path) => Some(FdbStore::open(Some(&path)).expect("open the FoundationDB cluster")),
        None => {
            eprintln!(
                "SKIPPED: FDB_CLUSTER_FILE is unset, no FoundationDB cluster to test against"
            );
            None
        }
    }
}

crate::conformance_tests!(cluster());
