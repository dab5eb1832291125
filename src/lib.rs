//! hotq: a queue service for worker fleets that hammer the same hot queue.
//!
//! Module map, bottom up:
//!
//! - [`store`]: the store contract (FoundationDB's transactions) and its
//!   backends: [`store::embedded`] (fjall plus an in-process resolver, the
//!   default) and `store::fdb` (a FoundationDB cluster, feature `fdb`).
//! - [`keys`]: the key layout of a queue (tuple-encoded subspaces).
//! - [`envelope`]: the values stored under item, request and result keys.
//! - [`item`]: an item as a queue hands it out, queue errors, held items.
//! - [`queue`]: the FIFO queue recipe over any store.
//! - [`queue_settings`]: per-queue settings kept in the store.
//! - [`dedup`]: deduplicated pushes.
//! - [`groups`]: message groups: in order within a group, one item of a
//!   group out at a time, groups in parallel.
//! - [`priority`]: the priority queue recipe over any store.
//! - [`staging`]: the staged pop protocol: direct pop, register, fulfill,
//!   await, withdraw, reap.
//! - [`lease`]: at-least-once delivery: leases, ack, nack, extend,
//!   redelivery counts, dead letters, delayed items.
//! - [`admin`]: list, purge and delete queues; leases in flight.
//! - [`coordinator`]: staged pops for callers, a fulfillment loop per queue
//!   with waiters, the reaper, the lease and delay timer, shutdown.
//! - [`metrics`]: Prometheus metric names, descriptions, label caps.
//! - [`config`]: the daemon's configuration (file, environment, flags).
//! - [`server`]: the daemon: HTTP API, exporter, sampler, graceful shutdown.
//! - [`console`]: the web console at `/ui`, and the API calls it added.
//! - [`sqs`]: the Amazon SQS API (AWS JSON 1.0) over the same queues.
//! - [`cli`]: the `hotq` command line (daemon, client, bench); the binary
//!   in `main.rs` only calls it.
//! - [`bench`](mod@bench): `hotq bench`.

#![warn(missing_docs)]

pub mod admin;
pub mod bench;
pub mod cli;
pub mod config;
pub mod console;
pub mod coordinator;
pub mod dead_letters;
pub mod dedup;
pub mod envelope;
pub mod groups;
pub mod item;
pub mod keys;
pub mod lease;
pub mod metrics;
pub mod oldest;
pub mod priority;
pub mod queue;
pub mod queue_settings;
pub mod server;
pub mod sqs;
pub mod staging;
pub mod store;
