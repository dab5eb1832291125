//! The cluster suite (`tests/it/common/cluster_suite.rs`) on FoundationDB,
//! behind the marker adapter exactly as the daemon opens it, and the
//! store conformance suite through the same adapter. Runs when built with
//! `--features fdb` and `FDB_CLUSTER_FILE` names a cluster file; every
//! test prints that it skipped, and why, otherwise. Each test works in a
//! keyspace of its own on the cluster (`common::backend::fdb`), so the
//! suite can run on a cluster that daemons or other suites use.
#![cfg(feature = "fdb")]

use crate::common;

use common::backend::FDB_SKIPPED_BECAUSE as SKIPPED_BECAUSE;

fn cluster() -> Option<hotq::store::resolving::Resolving<hotq::store::fdb::FdbStore>> {
    common::backend::fdb()
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
