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
//! - [`coordinator`]: one process's share: the lines and fulfillment
//!   loops of its queues, the settle backlogs, the due index's timer
//!   (which runs the reaper), shutdown.
//! - [`service`]: the core API, [`Hotq`]: every operation of every front
//!   end (push, pop, ack/nack/extend, peek, stats, settings, list, purge,
//!   delete, pause/resume, redrive, listings, SQS's queue attributes). It
//!   owns the transactions, counts what it does and classifies every
//!   failure into one [`service::Error`] with a stable code.
//! - [`metrics`]: Prometheus metric names, descriptions, label caps.
//! - [`config`]: the daemon's configuration (file, environment, flags).
//! - [`server`]: the daemon: the `/v1` HTTP API, exporter, sampler,
//!   graceful shutdown.
//! - [`console`]: the web console at `/ui`, and the API calls it added.
//! - [`sqs`]: the Amazon SQS API (AWS JSON 1.0) over the same queues.
//! - [`resp`]: the RESP (Redis protocol) listener: hotq's commands and
//!   Redis's list commands over the same queues.
//! - [`cli`]: the `hotq` command line (daemon, client, bench); the binary
//!   in `main.rs` only calls it.
//! - [`bench`](mod@bench): `hotq bench`.
//!
//! Layers, imports running one way (down), checked by `tests/it/layers.rs`
//! (no import circle between files; leaves import only leaves; the front
//! ends reach nothing below the core):
//!
//! ```text
//! front ends   server (/v1), sqs, resp, console: parse, call the core, render
//!              └ server::state, server::error: what their handlers share
//!              cli, bench: the command line; the benches of lower layers
//! core         service (Hotq), over the coordinator
//! protocol     staging, lease, due
//! recipes      queue
//! store        store (embedded, fdb)
//! leaves       keys, envelope, metrics, config
//! ```
//!
//! A plain pop, from any front end to the commit, in five hops: the
//! handler (`server/fifo_routes.rs`, `resp/cmd/list.rs`, `sqs/receive.rs`) →
//! [`Hotq::pop`] (`service/pop.rs`) → `Staging::pop_acking`
//! (`staging/pop.rs`: the pop, its acks riding) → `pop_attempts` → the
//! direct attempt → `staging::direct::try_pop`, which commits. On a
//! contended queue the pop waits in its queue's line
//! (`staging/line/`) instead; the queue's fulfillment loop
//! (`staging/round/fulfillment_loop.rs`) runs a fulfill round
//! (`staging/round/fulfill/`) that serves the line in one commit, and the
//! hand-off (`staging/handoff.rs`) gives each pop its items (or gives
//! back what nobody is left to take).

//! # Public surface
//!
//! A dependent crate sees the core API ([`service`]: [`Hotq`] and its
//! [`service::Error`]), the store contract and its backends ([`store`]:
//! what the conformance suite in `tests/` runs against), the
//! configuration ([`config`]), the client-facing names ([`QueueName`],
//! [`QueueKind`]) and the command line ([`cli`], for `main.rs`). Every
//! other module is private.
//!
//! The crate's own integration tests (`tests/it`) reach the internals on
//! purpose: they check the protocol's parts (the line, the rounds, the
//! due index, the key layout) one by one. For them, the `testing` feature
//! makes the internal modules public at their own paths
//! (`hotq::staging::...`), so a test names what it reaches exactly as the
//! code does. The feature is not for dependents: Cargo.toml turns it on
//! only for this crate's tests, through a dev-dependency of the crate on
//! itself (`cargo test`, `cargo clippy --all-targets`), while
//! `cargo build`, `cargo clippy` without `--all-targets` and `cargo doc`
//! see the curated surface only (and dead code: an item only tests use is
//! declared under `#[cfg(feature = "testing")]`).
//!
//! # Lints
//!
//! `unsafe_code` is forbidden (denied under the `fdb` feature, whose
//! client must be booted by one `unsafe` call: `store::fdb`), and
//! `missing_docs` and `clippy::unwrap_used` (outside tests) are denied:
//! what cannot fail says why in an `expect`.

#![cfg_attr(not(feature = "fdb"), forbid(unsafe_code))]
#![cfg_attr(feature = "fdb", deny(unsafe_code))]
#![deny(missing_docs)]
// The module map above, and many public items' docs, link the private
// modules for maintainers (`cargo doc --document-private-items`, as CI runs).
#![allow(rustdoc::private_intra_doc_links)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod cli;
pub mod config;
pub mod service;
pub mod store;

pub use keys::{InvalidQueueName, QueueKind, QueueName};
pub use service::Hotq;

// Internal modules: private, public under the `testing` feature only (see
// "Public surface" above). One pair per module rather than a macro, so
// that rustfmt still finds the modules' files.
#[cfg(feature = "testing")]
pub mod bench;
#[cfg(not(feature = "testing"))]
mod bench;
#[cfg(feature = "testing")]
pub mod console;
#[cfg(not(feature = "testing"))]
mod console;
#[cfg(feature = "testing")]
pub mod coordinator;
#[cfg(not(feature = "testing"))]
mod coordinator;
#[cfg(feature = "testing")]
pub mod due;
#[cfg(not(feature = "testing"))]
mod due;
#[cfg(feature = "testing")]
pub mod envelope;
#[cfg(not(feature = "testing"))]
mod envelope;
#[cfg(feature = "testing")]
pub mod keys;
#[cfg(not(feature = "testing"))]
mod keys;
#[cfg(feature = "testing")]
pub mod lease;
#[cfg(not(feature = "testing"))]
mod lease;
#[cfg(feature = "testing")]
pub mod metrics;
#[cfg(not(feature = "testing"))]
mod metrics;
#[cfg(feature = "testing")]
pub mod queue;
#[cfg(not(feature = "testing"))]
mod queue;
#[cfg(feature = "testing")]
pub mod resp;
#[cfg(not(feature = "testing"))]
mod resp;
#[cfg(feature = "testing")]
pub mod server;
#[cfg(not(feature = "testing"))]
mod server;
mod sqs;
#[cfg(feature = "testing")]
pub mod staging;
#[cfg(not(feature = "testing"))]
mod staging;
