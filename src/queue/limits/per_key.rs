//! The limits per fairness key (see [`super`]): `leases_per_key_max`,
//! counted from a row per lease of the key (`meta/("leases_of", k,
//! expires_at_ms, receipt)`, written with the lease, cleared when it
//! ends, counted at the latest until [`LEASE_ROW_GRACE_MS`] past its
//! expiry: a row a path or an older binary left behind stops counting
//! then, so the count cannot drift), and
//! `pop_rate_per_key_max`, a GCRA cell per key
//! (`meta/("rate_by", k)`, like the queue's). A transaction reads them
//! for the keys of the items it read, and passes over an item whose key
//! is at a limit for the next one.

use std::collections::HashMap;

use super::{Rate, RateRead, now_ns};
use crate::keys::QueueKeys;
use crate::store::{RangeRead, Read, StoreError, Transaction};

/// How long past its expiry a lease row still counts: the timer returns
/// an expired lease's item (and clears its row) well within it; a row
/// nothing cleared (its lease ended by an older binary) stops counting
/// then.
pub(super) const LEASE_ROW_GRACE_MS: u64 = 10_000;

/// The per-key limits as one transaction read them.
#[derive(Debug, Clone, Default)]
pub(super) struct PerKey {
    /// `leases_per_key_max`, when the transaction may lease.
    pub(super) leases_max: Option<u64>,
    /// Leases per key: as read, plus those taken here.
    pub(super) leased: HashMap<String, u64>,
    /// When each key's first lease as read stops counting at the latest
    /// (its expiry plus [`LEASE_ROW_GRACE_MS`], epoch ms).
    pub(super) first_expiry_ms: HashMap<String, u64>,
    /// `pop_rate_per_key_max`.
    pub(super) rate: Option<Rate>,
    /// Each key's rate cell as read, and the items taken under it here.
    pub(super) cells: HashMap<String, (RateRead, u64)>,
}

impl PerKey {
    /// True when one more item of `key` may go (under a lease when
    /// `leasing`). A key not read is not held.
    pub(super) fn allows(&self, key: &str, leasing: bool) -> bool {
        let leases_ok = match (leasing, self.leases_max) {
            (true, Some(max)) => self.leased.get(key).copied().unwrap_or(0) < max,
            _ => true,
        };
        let rate_ok = self
            .cells
            .get(key)
            .is_none_or(|(read, taken)| read.left(*taken) > 0);
        leases_ok && rate_ok
    }

    /// Spends one item of `key`.
    pub(super) fn take(&mut self, key: &str, leasing: bool) {
        if leasing && self.leases_max.is_some() {
            *self.leased.entry(key.to_string()).or_default() += 1;
        }
        if let Some((_, taken)) = self.cells.get_mut(key) {
            *taken += 1;
        }
    }

    /// Reads `key`'s leases (snapshot) and rate cell (without snapshot:
    /// pops taking items of one key serialize on it), once.
    pub(super) async fn read_in<T: Transaction>(
        &mut self,
        txn: &T,
        keys: &QueueKeys,
        key: &str,
    ) -> Result<(), StoreError> {
        if let (Some(max), false) = (self.leases_max, self.leased.contains_key(key)) {
            // Counting to the limit is enough to know it is reached. A
            // lease counts until the timer returns its item (which clears
            // its row and lets its item, first of its key, go next), or at
            // the latest `LEASE_ROW_GRACE_MS` past its expiry.
            let from_ms = crate::envelope::now_ms().saturating_sub(LEASE_ROW_GRACE_MS);
            let (begin, end) = keys.leases_of_range(key, from_ms);
            let rows = RangeRead::new(&begin, &end, max as usize).snapshot();
            let rows = txn.get_range(rows).await?;
            if let Some(first) = rows
                .first()
                .and_then(|row| keys.lease_of_expiry(key, &row.key))
            {
                let until_ms = first.saturating_add(LEASE_ROW_GRACE_MS);
                self.first_expiry_ms.insert(key.to_string(), until_ms);
            }
            self.leased.insert(key.to_string(), rows.len() as u64);
        }
        if let (Some(rate), false) = (self.rate, self.cells.contains_key(key)) {
            let cell = txn.get(&keys.rate_by(key), Read::Serializable).await?;
            let read = RateRead::of(rate, cell.as_deref(), now_ns());
            self.cells.insert(key.to_string(), (read, 0));
        }
        Ok(())
    }

    /// When the first key the rate holds gets its next token (epoch ms),
    /// if the rate holds one.
    pub(super) fn rate_held_until_ms(&self) -> Option<u64> {
        self.cells
            .values()
            .filter(|(read, taken)| read.left(*taken) == 0)
            .map(|(read, taken)| read.next_ms(*taken))
            .min()
    }

    /// The keys `leases_per_key_max` holds.
    fn leases_held(&self) -> impl Iterator<Item = &String> {
        let max = self.leases_max.unwrap_or(u64::MAX);
        self.leased
            .iter()
            .filter(move |(_, leased)| **leased >= max)
            .map(|(key, _)| key)
    }

    /// Whether `leases_per_key_max` holds a key, and when the first one
    /// held frees a place at the latest (its first lease's expiry, epoch
    /// ms; none for a key held by leases taken in this transaction).
    pub(super) fn leases_held_until_ms(&self) -> (bool, Option<u64>) {
        let held = self.leases_held().next().is_some();
        let first = self
            .leases_held()
            .filter_map(|key| self.first_expiry_ms.get(key))
            .min();
        (held, first.copied())
    }

    /// Writes each key's rate cell advanced by the items taken under it.
    pub(super) fn spend_in<T: Transaction>(
        &self,
        txn: &T,
        keys: &QueueKeys,
    ) -> Result<(), StoreError> {
        for (key, (read, taken)) in &self.cells {
            if *taken > 0 {
                txn.set(&keys.rate_by(key), &read.tat_after(*taken).to_be_bytes())?;
            }
        }
        Ok(())
    }
}
