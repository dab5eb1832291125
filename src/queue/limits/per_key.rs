//! The limits per fairness key (see [`super`]): `leases_per_key_max`,
//! kept in a lease count per key (`meta/("leased_by", k)`, next to
//! `leased`), and `pop_rate_per_key_max`, a GCRA cell per key
//! (`meta/("rate_by", k)`, like the queue's). A transaction reads them
//! for the keys of the items it read, and passes over an item whose key
//! is at a limit for the next one.

use std::collections::HashMap;

use super::{Rate, RateRead, now_ns};
use crate::keys::QueueKeys;
use crate::store::{Read, StoreError, Transaction, decode_counter};

/// The per-key limits as one transaction read them.
#[derive(Debug, Clone, Default)]
pub(super) struct PerKey {
    /// `leases_per_key_max`, when the transaction may lease.
    pub(super) leases_max: Option<u64>,
    /// Leases per key: as read, plus those taken here.
    pub(super) leased: HashMap<String, u64>,
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

    /// Reads `key`'s count (snapshot) and rate cell (without snapshot:
    /// pops taking items of one key serialize on it), once.
    pub(super) async fn read_in<T: Transaction>(
        &mut self,
        txn: &T,
        keys: &QueueKeys,
        key: &str,
    ) -> Result<(), StoreError> {
        if self.leases_max.is_some() && !self.leased.contains_key(key) {
            let read = txn.get(&keys.leased_by(key), Read::Snapshot).await?;
            let count = decode_counter(read.as_deref()).max(0) as u64;
            self.leased.insert(key.to_string(), count);
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
    pub(super) fn rate_next_ms(&self) -> Option<u64> {
        self.cells
            .values()
            .filter(|(read, taken)| read.left(*taken) == 0)
            .map(|(read, taken)| read.next_ms(*taken))
            .min()
    }

    /// True when `leases_per_key_max` holds a key.
    pub(super) fn leases_held(&self) -> bool {
        self.leases_max
            .is_some_and(|max| self.leased.values().any(|leased| *leased >= max))
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
