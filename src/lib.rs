//! hotq: a queue service for worker fleets that hammer the same hot queue.
//!
//! Module map, bottom up:
//!
//! - [`store`]: the store contract (FoundationDB's transactions) and its
//!   backends: [`store::embedded`] (fjall plus an in-process resolver, the
//!   default) and `store::fdb` (a FoundationDB cluster, feature `fdb`).
//! - [`keys`]: the key layout of a queue (tuple-encoded subspaces).
//! - [`envelope`]: the values stored under item keys.
//! - [`queue`]: the FIFO queue recipe over any store.

#![warn(missing_docs)]

pub mod envelope;
pub mod keys;
pub mod queue;
pub mod store;
