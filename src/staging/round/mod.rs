//! A fulfill round and the loop that runs them: how the pops waiting in
//! line (see [`super::line`](mod@super::line)) and the requests stored in
//! the store get items, one transaction at a time. Read in this order:
//!
//! 1. [`fulfillment_loop`]: the loop of rounds of one queue, and what it waits on
//!    between them.
//! 2. [`fulfill`]: one round in one transaction: read the requests
//!    (`requests.rs`) and the items ([`pool`]), serve each source in
//!    request order, bring this line's counted requests to its pops still waiting (sync),
//!    commit.
//! 3. [`answer`]: what a round is given and what it returns, split by
//!    who uses it (the hand-off, the loop, the counters).
//! 4. [`riding`]: acks that ride on a pop and are committed by its round.
//!
//! After the commit the items go to their pops in [`super::handoff`].

pub(crate) mod answer;
pub mod fulfill;
pub(crate) mod fulfillment_loop;
pub(crate) mod pool;
mod requests;
pub(crate) mod riding;
