//! The queue recipes and what they keep beside their items: how an item is
//! pushed, ordered and taken by one transaction (a *direct* pop), for every
//! store. The staged pop protocol ([`crate::staging`]) and leases
//! ([`crate::lease`]) build on these.
//!
//! - [`item`]: an item as a queue hands it out, queue errors, how a
//!   delayed item is held (below every recipe, so each can use them).
//! - [`fifo`]: the FIFO recipe ([`Queue`]); its public items are
//!   re-exported here, so `crate::queue::Queue` is the FIFO queue.
//! - [`priority`]: the priority recipe.
//! - [`settings`]: per-queue settings kept in the store.
//! - [`dedup`]: deduplicated pushes.
//! - [`expiry`]: retention: items dropped once their retention ends;
//!   [`expired`]: the timer dropping them.
//! - [`groups`]: message groups: in order within a group, one item of a
//!   group out at a time, groups in parallel.
//! - [`fair`]: fairness keys: tenants served in proportion to their
//!   weights, folded into the FIFO order (issue #40).
//! - [`dead_letters`]: which queues are dead-letter queues, by role.
//! - [`oldest`]: the age of a queue's oldest item.
//! - [`admin`]: list, purge and delete queues; the leases in flight.
//! - [`parts`]: payloads larger than one store value, split across keys.

pub(crate) mod admin;
pub(crate) mod dead_letters;
pub mod dedup;
pub mod expired;
pub mod expiry;
pub mod fair;
pub(crate) mod fifo;
pub mod groups;
pub(crate) mod item;
pub mod limits;
pub(crate) mod oldest;
pub mod parts;
pub mod priority;
pub mod settings;

#[cfg(feature = "testing")]
pub use admin::DELETE_WAIT_MS_MAX;
pub use fifo::{DirectPop, Queue, append_expiring_in, read_end};
pub(crate) use fifo::{check_batch, corrupt_as_store};
pub use item::{Item, PUSH_BATCH_MAX, QueueError, hold_in};
