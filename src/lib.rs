//! hotq: a queue service for worker fleets that hammer the same hot queue.
//!
//! Module map, bottom up:
//!
//! - [`store`]: the store contract (FoundationDB's transactions) and its
//!   backends: [`store::embedded`] (fjall plus an in-process resolver, the
//!   default) and `store::fdb` (a FoundationDB cluster, feature `fdb`).
//! - [`keys`]: the key layout of a queue and of the store-wide due index
//!   (tuple-encoded subspaces).
//! - [`envelope`]: the values stored under item, request, result and due
//!   keys.
//! - [`queue`]: the queue recipes and what they keep: FIFO
//!   ([`queue::Queue`]), priority, per-queue settings, dedup, message
//!   groups, dead-letter roles, administration.
//! - [`staging`]: the staged pop protocol. A pop ([`staging::pop`]) is a
//!   direct pop or waits in the queue's line ([`staging::line`](mod@staging::line));
//!   a fulfill round ([`staging::round`]) serves the line in one
//!   transaction; the hand-off and the give-back ([`staging::handoff`])
//!   deliver the items after the commit.
//! - [`lease`]: at-least-once delivery: a leased pop's item goes to the due
//!   index ([`lease::lease_in`]); ack, nack and extend ([`lease::settle`],
//!   batched by [`lease::backlog`]); redrive from a dead-letter queue.
//! - [`due`]: the store-wide due index's timer: expired leases back to
//!   their queue (or dead-lettered), delayed items visible, dedup ids
//!   cleared, reap appointments handed to the reaper.
//! - [`coordinator`]: one process's share: pops and settles for callers, a
//!   fulfillment loop per queue with waiters, the due index's timer (which
//!   runs the reaper), shutdown.
//! - [`metrics`]: Prometheus metric names, descriptions, label caps.
//! - [`config`]: the daemon's configuration (file, environment, flags).
//! - [`server`]: the daemon: HTTP API, exporter, sampler, graceful shutdown.
//! - [`console`]: the web console at `/ui`, and the API calls it added.
//! - [`sqs`]: the Amazon SQS API (AWS JSON 1.0) over the same queues.
//! - [`resp`]: the RESP (Redis protocol) listener: hotq's commands and
//!   Redis's list commands over the same queues.
//! - [`cli`]: the `hotq` command line (daemon, client, bench); the binary
//!   in `main.rs` only calls it.
//! - [`bench`](mod@bench): `hotq bench`.
//!
//! Layers, imports running one way (down), checked by `tests/it/layers.rs`
//! (no import circle between files; leaves import only leaves):
//!
//! ```text
//! front ends   server (/v1), sqs, resp, console, cli, bench
//!              └ server::state: what their handlers share
//! core         coordinator
//! protocol     staging, lease, due
//! recipes      queue
//! store        store (embedded, fdb)
//! leaves       keys, envelope, metrics, config
//! ```

#![warn(missing_docs)]

pub mod bench;
pub mod cli;
pub mod config;
pub mod console;
pub mod coordinator;
pub mod due;
pub mod envelope;
pub mod keys;
pub mod lease;
pub mod metrics;
pub mod queue;
pub mod resp;
pub mod server;
pub mod service;
pub(crate) mod sqs;
pub mod staging;
pub mod store;
