//! hotq: a queue service for worker fleets that hammer the same hot queue.
//!
//! Module map, bottom up:
//!
//! - [`store`]: the store contract (FoundationDB's transactions) and its
//!   backends: [`store::embedded`] (fjall plus an in-process resolver, the
//!   default) and `store::fdb` (a FoundationDB cluster, feature `fdb`).
//! - [`keys`]: the key layout of a queue (tuple-encoded subspaces).
//! - [`envelope`]: the values stored under item, request and result keys.
//! - [`queue`]: the FIFO queue recipe over any store.
//! - [`staging`]: the staged pop protocol: direct pop, register, fulfill,
//!   await, withdraw, reap.
//! - [`coordinator`]: staged pops for callers, a fulfillment loop per queue
//!   with waiters, the reaper, shutdown.

#![warn(missing_docs)]

pub mod coordinator;
pub mod envelope;
pub mod keys;
pub mod queue;
pub mod staging;
pub mod store;
