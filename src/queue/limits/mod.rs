//! A queue's rate and concurrency limits (issue #40, `docs/design.md`
//! §10): `pop_rate_max` (items per second, with a burst) and `leases_max`
//! (leases in flight), both kept in the store so every daemon on it obeys
//! the same limit, and both decided in the transaction that hands items
//! out (a direct pop or a fulfill round), so no pop is ever refused after
//! the fact and no extra request is made.
//!
//! **Rate**: a GCRA cell (`meta/("rate",)`, [`QueueKeys::rate_cell`])
//! holds the queue's theoretical arrival time `tat` in ns since the epoch.
//! At `now`, a transaction may take `(now + burst·T − max(tat, now)) / T`
//! items (`T = 1 s / pop_rate_max`, at most `burst`), and sets
//! `tat = max(tat, now) + n·T` for the `n` it took. It reads the cell
//! without snapshot, so two pops of a limited queue that both take items
//! conflict and one retries: the limit holds across daemons. (The daemons'
//! clocks are compared through the cell: a daemon whose clock runs ahead
//! of the others' takes early what they would have taken later, and a
//! cell found more than a burst ahead counts as one burst ahead, so a
//! clock set back stalls nothing.)
//!
//! **Leases**: a leasing pop of a queue with `leases_max` reads the
//! `leased` counter with a snapshot read and the gate key
//! ([`QueueKeys::lease_gate`]) without, and writes the gate when it
//! leases: such pops serialize among themselves, never with acks, nacks
//! and expiries, which only lower `leased` (a stale read of it errs on
//! the safe side). A lease that expires (its worker gone, a daemon
//! SIGKILLed) frees its place when the timer returns its item.
//!
//! **Per fairness key** ([`per_key`]): `leases_per_key_max` (a lease
//! count per key) and `pop_rate_per_key_max` (a GCRA cell per key). A
//! pop reads them for the keys of the items it read and passes over an
//! item whose key is at a limit for the next one.
//!
//! A pop the limits hold back is not an error: one that may wait waits in
//! its queue's line (its fulfillment loop waits for the next token's time
//! or for `leased` to change), one that must not wait answers empty.
//! Queues without limits read nothing more: the limits come with the
//! settings the pause check reads anyway.

mod per_key;

use per_key::PerKey;

use crate::keys::QueueKeys;
use crate::queue::Item;
use crate::store::{Read, StoreError, Transaction, decode_counter};

/// Largest `pop_rate_max`, items per second.
pub const POP_RATE_MAX: u64 = 1_000_000;
/// Largest `pop_rate_burst`, items.
pub const POP_RATE_BURST_MAX: u64 = 1_000_000;
/// Largest `leases_max`.
pub const LEASES_MAX: u64 = 1_000_000;
/// Largest `leases_per_key_max`: a pop reads up to this many rows of a
/// key's leases to count them.
pub const LEASES_PER_KEY_MAX: u64 = 10_000;
/// Nanoseconds in a second: the cell's unit, fine enough that the
/// largest rate's interval (1,000 ns) is exact to 0.1%.
const NS_PER_S: u64 = 1_000_000_000;

/// A rate limit: `per_s` items per second, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Items per second (1 to [`POP_RATE_MAX`]).
    pub per_s: u64,
    /// Items that may go at once after a quiet spell (at least 1).
    pub burst: u64,
}

impl Rate {
    /// The rate `per_s` with `burst`, or its default burst: a tenth of a
    /// second's worth (at least 1), so a rate holds within 1% over ten
    /// seconds of full demand.
    pub fn new(per_s: u64, burst: Option<u64>) -> Rate {
        Rate {
            per_s: per_s.max(1),
            burst: burst.unwrap_or(per_s / 10).max(1),
        }
    }

    /// The time one item takes, in ns.
    fn interval_ns(&self) -> u64 {
        (NS_PER_S / self.per_s).max(1)
    }
}

/// A queue's limits, read with its pause (see
/// [`crate::queue::settings::gates_in`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `pop_rate_max` and its burst.
    pub rate: Option<Rate>,
    /// `leases_max`.
    pub leases_max: Option<u64>,
    /// `leases_per_key_max`.
    pub leases_per_key_max: Option<u64>,
    /// `pop_rate_per_key_max`, with its default burst.
    pub rate_per_key: Option<Rate>,
}

impl Limits {
    /// True when a limit per fairness key applies to a transaction that
    /// may lease (`leasing`) or not.
    fn has_per_key(&self, leasing: bool) -> bool {
        (leasing && self.leases_per_key_max.is_some()) || self.rate_per_key.is_some()
    }

    /// Items a transaction reads past those it wants, so that items of
    /// keys at a limit per key do not hide the others.
    pub fn lookahead(&self, leasing: bool) -> usize {
        match self.has_per_key(leasing) {
            true => PER_KEY_LOOKAHEAD,
            false => 0,
        }
    }
}

/// Items a pop of a queue with a limit per key reads past what it wants
/// (see [`Limits::lookahead`]).
pub const PER_KEY_LOOKAHEAD: usize = 32;
/// Items a pop of a queue with a limit per key reads past what it wants
/// when the first read found fewer it may take than it wants (the keys at
/// the head are held: a held tenant's backlog gathers there, in fair
/// order, as the others' items go): read once, with snapshot.
pub const PER_KEY_WIDE: usize = 1_024;

/// What held a transaction's takes back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// When a held item may go at the latest (epoch ms, rounded up): the
    /// rate's next token, or the first expiry of a held key's leases.
    pub until_ms: Option<u64>,
    /// `leases_max` leases are in flight: an ack, nack or expiry frees one.
    pub leases: bool,
}

impl Held {
    /// True when a limit held a take back.
    pub fn any(&self) -> bool {
        self.until_ms.is_some() || self.leases
    }
}

/// What one transaction may still hand out under its queue's limits, read
/// in that transaction ([`budget_in`]); spend it as items go
/// ([`Budget::take`]) and write what was spent before the commit
/// ([`Budget::spend_in`]).
#[derive(Debug, Clone, Default)]
pub struct Budget {
    rate: Option<RateRead>,
    /// Leases `leases_max` still allows (None: no limit, or no lease asked).
    leases_left: Option<u64>,
    /// Items taken under the rate.
    taken: u64,
    /// Leases taken under `leases_max`.
    leased: u64,
    /// What held takes back.
    held: Held,
    /// Takes held back by the rate, then by `leases_max`.
    refused: (u64, u64),
    /// Nothing may go (a paused queue).
    closed: bool,
    /// The limits per fairness key.
    per_key: Option<PerKey>,
}

/// The rate cell as one transaction read it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RateRead {
    rate: Rate,
    /// `max(tat, now)`, ns.
    start_ns: u64,
    now_ns: u64,
}

impl RateRead {
    /// The cell `cell` (absent: never set) read at `now_ns`. A cell never
    /// runs more than the burst ahead of its writer's clock; one further
    /// ahead was written by a clock ahead of this one (or this one was set
    /// back), and counts as the burst ahead: a skew costs at most one
    /// burst, never a stall as long as the skew.
    fn of(rate: Rate, cell: Option<&[u8]>, now_ns: u64) -> RateRead {
        let tat_ns = cell.map_or(0, decode_u64);
        let ahead_max_ns = now_ns + rate.burst * rate.interval_ns();
        RateRead {
            rate,
            start_ns: tat_ns.clamp(now_ns, ahead_max_ns),
            now_ns,
        }
    }

    /// Items the rate allows beyond `taken`.
    fn left(&self, taken: u64) -> u64 {
        let interval = self.rate.interval_ns();
        let horizon = self.now_ns + self.rate.burst * interval;
        let allowed = horizon.saturating_sub(self.start_ns) / interval;
        allowed.min(self.rate.burst).saturating_sub(taken)
    }

    /// The cell after `taken` items.
    fn tat_after(&self, taken: u64) -> u64 {
        self.start_ns + taken * self.rate.interval_ns()
    }

    /// When the item after `taken` may go, epoch ms (rounded up).
    fn next_ms(&self, taken: u64) -> u64 {
        let interval = self.rate.interval_ns();
        let due_ns = self.tat_after(taken) + interval;
        let due_ns = due_ns.saturating_sub(self.rate.burst * interval);
        due_ns.div_ceil(1_000_000)
    }
}

impl Budget {
    /// A budget without limits.
    pub fn unlimited() -> Budget {
        Budget::default()
    }

    /// A budget that lets nothing go (a paused queue's).
    pub fn closed() -> Budget {
        Budget {
            closed: true,
            ..Budget::default()
        }
    }

    /// True when one more item (under a lease when `leasing`) may go.
    pub fn allows(&self, leasing: bool) -> bool {
        if self.closed {
            return false;
        }
        let rate_ok = self.rate.is_none_or(|read| read.left(self.taken) > 0);
        let leases_ok = !leasing || self.leases_left.is_none_or(|left| self.leased < left);
        rate_ok && leases_ok
    }

    /// How many of `wanted` items (under leases when `leasing`) may go.
    pub fn cap(&self, wanted: usize, leasing: bool) -> usize {
        if self.closed {
            return 0;
        }
        let mut cap = wanted as u64;
        if let Some(read) = &self.rate {
            cap = cap.min(read.left(self.taken));
        }
        if let (true, Some(left)) = (leasing, self.leases_left) {
            cap = cap.min(left.saturating_sub(self.leased));
        }
        cap as usize
    }

    /// True when `item` may go (under a lease when `leasing`): the
    /// queue's limits allow one more, and its fairness key's.
    pub fn allows_item(&self, item: &Item, leasing: bool) -> bool {
        let key_ok = match (&self.per_key, item.fair_key.as_deref()) {
            (Some(per_key), Some(key)) => per_key.allows(key, leasing),
            _ => true,
        };
        self.allows(leasing) && key_ok
    }

    /// Spends `item` (see [`Self::take`]), and its key's share.
    pub fn take_item(&mut self, item: &Item, leasing: bool) {
        self.take(leasing);
        if let (Some(per_key), Some(key)) = (self.per_key.as_mut(), item.fair_key.as_deref()) {
            per_key.take(key, leasing);
        }
    }

    /// How many of `items` may go (under leases when `leasing`), each
    /// judged alone: whether a read must look further.
    pub fn admissible<'i>(
        &self,
        items: impl IntoIterator<Item = &'i Item>,
        leasing: bool,
    ) -> usize {
        items
            .into_iter()
            .filter(|item| self.allows_item(item, leasing))
            .count()
    }

    /// The items of `items` that may go, in order, each spent (at most
    /// `max`); the others stay where they are.
    pub fn admit(&mut self, items: Vec<Item>, max: usize, leasing: bool) -> Vec<Item> {
        let mut admitted = Vec::with_capacity(items.len().min(max));
        for item in items {
            if admitted.len() < max && self.allows_item(&item, leasing) {
                self.take_item(&item, leasing);
                admitted.push(item);
            }
        }
        admitted
    }

    /// Notes that a take found only items of keys at a limit per key
    /// (their rate, or under a lease their `leases_per_key_max`).
    pub fn refuse_keys(&mut self) {
        let Some(per_key) = &self.per_key else {
            return;
        };
        let mut until = |ms: u64| {
            let held = self.held.until_ms.map_or(ms, |until| until.min(ms));
            self.held.until_ms = Some(held);
        };
        let rate_until = per_key.rate_held_until_ms();
        let (leases_held, leases_until) = per_key.leases_held_until_ms();
        rate_until
            .into_iter()
            .chain(leases_until)
            .for_each(&mut until);
        if rate_until.is_some() {
            self.refused.0 += 1;
        }
        if leases_held {
            self.held.leases = true;
            self.refused.1 += 1;
        }
    }

    /// Reads what the limits per key allow the fairness keys of `items`
    /// not read yet (see [`PerKey::read_in`]).
    pub async fn read_keys_in<'i, T: Transaction>(
        &mut self,
        txn: &T,
        keys: &QueueKeys,
        items: impl Iterator<Item = &'i Item>,
    ) -> Result<(), StoreError> {
        let Some(per_key) = self.per_key.as_mut() else {
            return Ok(());
        };
        for key in items.filter_map(|item| item.fair_key.as_deref()) {
            per_key.read_in(txn, keys, key).await?;
        }
        Ok(())
    }

    /// Spends one item (and a lease place when `leasing`).
    pub fn take(&mut self, leasing: bool) {
        debug_assert!(self.allows(leasing), "a take within the budget");
        self.taken += 1;
        if leasing {
            self.leased += 1;
        }
    }

    /// Notes that a take (under a lease when `leasing`) was held back,
    /// and by which limit.
    pub fn refuse(&mut self, leasing: bool) {
        match &self.rate {
            Some(read) if read.left(self.taken) == 0 => {
                self.held.until_ms = Some(read.next_ms(self.taken));
                self.refused.0 += 1;
            }
            _ if leasing => {
                self.held.leases = true;
                self.refused.1 += 1;
            }
            _ => debug_assert!(false, "a take refused within the budget"),
        }
    }

    /// What held takes back.
    pub fn held(&self) -> Held {
        self.held
    }

    /// Takes held back, by the limit's label in metrics (`rate`, `leases`).
    pub fn refused(&self) -> [(&'static str, u64); 2] {
        [("rate", self.refused.0), ("leases", self.refused.1)]
    }

    /// Counts the takes held back in `hotq_pops_throttled_total`, by the
    /// limit that held them.
    pub fn count_refused(&self, keys: &QueueKeys) {
        for (limit, refused) in self.refused() {
            if refused > 0 {
                crate::metrics::throttled(keys.kind(), keys.name(), limit, refused);
            }
        }
    }

    /// Writes what was spent in `txn`: the rate cell advanced by the items
    /// taken, the lease gate touched when a lease was taken. Nothing when
    /// nothing was taken under a limit.
    pub fn spend_in<T: Transaction>(&self, txn: &T, keys: &QueueKeys) -> Result<(), StoreError> {
        if let (Some(read), true) = (&self.rate, self.taken > 0) {
            txn.set(&keys.rate_cell(), &read.tat_after(self.taken).to_be_bytes())?;
        }
        if let Some(per_key) = &self.per_key {
            per_key.spend_in(txn, keys)?;
        }
        let per_key_leases = self
            .per_key
            .as_ref()
            .is_some_and(|p| p.leases_max.is_some());
        let gated = self.leases_left.is_some() || per_key_leases;
        if gated && self.leased > 0 {
            // The value does not matter: the write makes every leasing pop
            // that read the gate concurrently conflict.
            txn.set(&keys.lease_gate(), &self.leased.to_be_bytes())?;
        }
        Ok(())
    }
}

/// Reads, in `txn`, what the queue's `limits` still allow: the rate cell
/// (without snapshot) under a rate limit; under `leases_max` and when
/// the transaction may lease (`leasing`), the `leased` count (snapshot)
/// and the gate (without snapshot). A queue without limits reads nothing.
pub async fn budget_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    limits: Limits,
    leasing: bool,
) -> Result<Budget, StoreError> {
    let mut budget = Budget::unlimited();
    if let Some(rate) = limits.rate {
        let cell = txn.get(&keys.rate_cell(), Read::Serializable).await?;
        budget.rate = Some(RateRead::of(rate, cell.as_deref(), now_ns()));
    }
    if let (Some(max), true) = (limits.leases_max, leasing) {
        let leased = decode_counter(txn.get(&keys.leased(), Read::Snapshot).await?.as_deref());
        budget.leases_left = Some(max.saturating_sub(leased.max(0) as u64));
    }
    if limits.has_per_key(leasing) {
        budget.per_key = Some(PerKey {
            leases_max: limits.leases_per_key_max.filter(|_| leasing),
            rate: limits.rate_per_key,
            ..PerKey::default()
        });
    }
    let per_key_leases = leasing && limits.leases_per_key_max.is_some();
    if budget.leases_left.is_some() || per_key_leases {
        txn.get(&keys.lease_gate(), Read::Serializable).await?;
    }
    Ok(budget)
}

/// A big-endian u64 (a short value reads as 0: the cell was never set).
fn decode_u64(bytes: &[u8]) -> u64 {
    <[u8; 8]>::try_from(bytes).map_or(0, u64::from_be_bytes)
}

/// Now, ns since the epoch.
pub(super) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(rate: Rate, tat_ns: u64, now_ns: u64) -> RateRead {
        RateRead {
            rate,
            start_ns: tat_ns.max(now_ns),
            now_ns,
        }
    }

    #[test]
    fn a_quiet_rate_allows_its_burst_then_one_per_interval() {
        let rate = Rate::new(1_000, Some(10));
        let now = 5 * NS_PER_S;
        let fresh = read(rate, 0, now);
        assert_eq!(fresh.left(0), 10);
        assert_eq!(fresh.left(10), 0);
        let tat = fresh.tat_after(10);
        assert_eq!(tat, now + 10 * 1_000_000);
        // At once: nothing; one interval later, one item.
        assert_eq!(read(rate, tat, now).left(0), 0);
        assert_eq!(read(rate, tat, now + 1_000_000).left(0), 1);
        // The next token comes one interval after the burst was spent.
        assert_eq!(fresh.next_ms(10), now / 1_000_000 + 1);
    }

    #[test]
    fn the_default_burst_is_a_tenth_of_a_second() {
        assert_eq!(Rate::new(1_000, None).burst, 100);
        assert_eq!(Rate::new(5, None).burst, 1);
    }

    #[test]
    fn a_budget_caps_leases_only_for_leasing_takes() {
        let mut budget = Budget {
            leases_left: Some(2),
            ..Budget::unlimited()
        };
        assert_eq!(budget.cap(5, true), 2);
        assert_eq!(budget.cap(5, false), 5);
        budget.take(true);
        budget.take(true);
        assert!(!budget.allows(true));
        assert!(budget.allows(false));
        budget.refuse(true);
        assert!(budget.held().leases);
        assert_eq!(budget.held().until_ms, None);
        assert_eq!(budget.refused(), [("rate", 0), ("leases", 1)]);
    }

    fn keyed(key: &str) -> Item {
        let value = crate::envelope::ItemValue {
            fair_key: Some(key.to_string()),
            ..crate::envelope::ItemValue::new(0, b"x".to_vec())
        };
        Item::from_value(key.as_bytes().to_vec(), value)
    }

    #[test]
    fn a_key_at_its_limit_is_passed_over_and_plain_takes_are_not_held() {
        let per_key = PerKey {
            leases_max: Some(1),
            leased: HashMap::from([("a".to_string(), 1)]),
            ..PerKey::default()
        };
        let mut budget = Budget {
            per_key: Some(per_key),
            ..Budget::unlimited()
        };
        let items = vec![keyed("a"), keyed("b"), keyed("a"), keyed("b")];
        let admitted = budget.admit(items.clone(), 4, true);
        let keys: Vec<_> = admitted.iter().map(|i| i.fair_key.as_deref()).collect();
        assert_eq!(keys, [Some("b")]);
        assert_eq!(budget.admit(items, 4, false).len(), 4);
    }

    #[test]
    fn over_ten_seconds_a_saturated_rate_gives_rate_times_ten_plus_burst() {
        let rate = Rate::new(1_000, None);
        let (mut tat, mut taken) = (0u64, 0u64);
        let start = 7 * NS_PER_S;
        // A transaction every 0.5 ms for ten seconds, each taking all it may.
        let mut now = start;
        while now <= start + 10 * NS_PER_S {
            let cell = read(rate, tat, now);
            let n = cell.left(0);
            tat = cell.tat_after(n);
            taken += n;
            now += 500_000;
        }
        assert_eq!(taken, 10_000 + 100);
    }
}
