//! hotq's integration tests, as modules of one test binary: each file was
//! its own binary linking the whole crate (64 of them; the debug target
//! once reached 17 GB). Each module is one scenario, run as users run
//! hotq: a real daemon on 127.0.0.1:0 over HTTP, the built `hotq` binary,
//! or the library against a real store.
//!
//! Run one module with `cargo test --test it MODULE::`, one test with its
//! name as the filter.
//!
//! Tests share this process, so none sets a process environment variable,
//! and in-process daemons share what the crate keeps per process: the
//! metrics recorder (its queue-label cap set by the first daemon, its
//! counters summed over every daemon) and the console's traffic tally. A
//! test that reads either runs alone in a child process of this binary
//! (`common::alone`).

#[macro_use]
mod common;

mod ack_on_pop;
mod ack_races_expiry;
mod admin_cli;
mod admin_queues;
mod batch_acks_at_scale;
mod bench_on_fdb;
mod bench_over_http;
mod cli;
mod cli_convention;
mod cli_docs;
mod client_hang_up;
mod cluster_embedded;
mod cluster_fdb;
mod commit_survives_kill;
mod conformance_embedded;
mod conformance_fdb;
mod console_api;
mod coordinators_share_a_queue;
mod crash_during_fulfill;
mod dashboard_under_prometheus;
mod dead_letter_paths;
mod dedup_pushes;
mod dedup_window_edges;
mod delete_forgets_the_queue;
mod delete_outlives_its_client;
mod delete_race_ledger;
mod delete_race_store;
mod delete_races_grouped_pushes;
mod delete_races_pushes;
mod delete_stays_bounded;
mod docs_stay_true;
mod due_index;
mod empty_stretches_model;
mod every_pop_joins_the_line;
mod every_queue_first_class;
mod expiry_of_large_leases;
mod fairness;
mod fairness_api;
mod fairness_priority;
mod fdb_suites_skipped;
mod fifo_queue;
mod fsync_histograms;
mod fulfill_watches_after_its_round;
mod fulfill_with_unknown_commit_outcome;
mod grouped_plain_pops_survive_kills;
mod healthz_without_fdb;
mod http_api;
mod large_items;
mod large_items_of_ended_leases;
mod layers;
mod lean_leases;
mod lease_delivery;
mod leased_pop_caller_leaves;
mod leases_survive_kills;
mod limits_and_races;
mod line_requests_in_the_store;
mod message_groups;
mod metrics_exported;
mod metrics_queue_label_cap;
mod metrics_truth;
mod no_wait_pops_in_line;
mod one_daemon_per_data_dir;
mod openapi_spec;
mod pause_resume;
mod pop_answers;
mod pop_limits;
mod pops_over_tombstones;
mod pops_total_counts_deliveries;
mod priority_leases_over_http;
mod priority_queue;
mod priority_staged_pops;
mod promtool_checks;
mod queue_settings;
mod reap_large_results;
mod receipts_of_colliding_queues;
mod redrive_groups;
mod redrive_large_items;
mod resp_commands;
mod resp_robustness;
mod resp_workers;
mod retention;
mod settle_batch;
mod shutdown_under_load;
mod slow_commit_with_riding_acks;
mod slow_readers_of_large_pops;
mod sqs_protocol;
mod staged_pop_protocol;
mod staged_pop_under_contention;
mod store_failure;
mod unknown_commit_outcome;
