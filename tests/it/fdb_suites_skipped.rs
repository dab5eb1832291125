//! Without `--features fdb`, the FoundationDB suites (`conformance_fdb`,
//! `cluster_fdb`, and the `on_fdb` modules of `lease_delivery`,
//! `staged_pop_protocol`, `message_groups` and `admin_queues`) are not
//! built at all, so `cargo test` would list zero
//! tests for them and say nothing. This test stands in their place and
//! says so, by name in the test list and (with `--nocapture`) on stderr.

#[cfg(not(feature = "fdb"))]
#[test]
fn foundationdb_suites_skipped_without_the_fdb_feature() {
    eprintln!(
        "SKIPPED: conformance_fdb, cluster_fdb and the on_fdb modules of lease_delivery, \
         staged_pop_protocol, message_groups and admin_queues are built only with \
         --features fdb (and run only with FDB_CLUSTER_FILE naming a cluster)"
    );
}
