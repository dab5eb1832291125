//! The cluster suite (`tests/it/common/cluster_suite.rs`) on FoundationDB,
//! through [`open_for_daemon`] exactly as the daemon opens it, and the
//! store conformance suite through the same marker adapter. Runs when
//! built with `--features fdb` and `FDB_CLUSTER_FILE` names a cluster
//! file; every test prints that it skipped, and why, otherwise.
#![cfg(feature = "fdb")]

use hotq::store::fdb::{FdbStore, cluster_file_from_env, open_for_daemon};
use hotq::store::marked::Marked;

/// Why the tests skip when they do.
const SKIPPED_BECAUSE: &str = "FDB_CLUSTER_FILE is unset: no FoundationDB cluster to run against \
     (set it to a cluster file to run the cluster suite on FoundationDB)";

fn cluster() -> Option<Marked<FdbStore>> {
    let Some(path) = cluster_file_from_env() else {
        eprintln!("SKIPPED: {SKIPPED_BECAUSE}");
        return None;
    };
    Some(open_for_daemon(Some(&path)).expect("open the FoundationDB cluster"))
}

mod on_fdb {
    use super::{SKIPPED_BECAUSE, cluster};
    use crate::{cluster_suite_tests, common};

    cluster_suite_tests!(SKIPPED_BECAUSE, cluster());
}

mod conformance_through_markers_on_fdb {
    use super::cluster;
    use crate::{common, conformance_tests};

    conformance_tests!(cluster());
}
