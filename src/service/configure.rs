//! Queue settings, kept in the store (see [`crate::queue::settings`]):
//! every front end's reads and changes (`/v1` and the console's
//! `settings`, SQS's queue attributes, RESP's `QSETTINGS`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Error, Hotq, Result};
use crate::keys::{QueueKeys, QueueName};
use crate::queue::settings::{Defaults, Effective, Stored};
use crate::store::Store;

/// A queue's settings: what it set and what is in force.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSettings {
    /// What the queue set; settings not named here are the defaults.
    pub stored: Stored,
    /// The settings in force: what the queue set, else the daemon's
    /// defaults, in the queue's role (a dead-letter queue has no delivery
    /// limit unless it sets one).
    pub effective: Effective,
}

impl<S: Store> Hotq<S> {
    /// The daemon's defaults of queue settings (from `config`).
    pub fn settings_defaults(&self) -> &Defaults {
        &self.settings_defaults
    }

    /// The settings of the queue of `keys`.
    pub async fn settings(&self, keys: &QueueKeys) -> Result<QueueSettings> {
        let stored = crate::queue::settings::read(&self.store, keys).await?;
        self.settings_in_role(keys, stored).await
    }

    /// `stored` with `change` applied for the queue `name` (as
    /// [`Self::update_settings`] would apply it, without writing it);
    /// `None` when the change is invalid.
    pub fn settings_with_change(
        &self,
        stored: &Stored,
        name: &QueueName,
        change: &BTreeMap<String, Value>,
    ) -> Option<Stored> {
        crate::queue::settings::apply_change(stored, name, change, &self.settings_defaults).ok()
    }

    /// Pauses (`paused`) or resumes the queue of `keys`: a paused queue
    /// takes pushes and hands nothing out. Returns whether it is paused now.
    pub async fn set_paused(&self, keys: &QueueKeys, paused: bool) -> Result<bool> {
        let change = BTreeMap::from([("paused".to_string(), Value::Bool(paused))]);
        let updated =
            crate::queue::settings::update(&self.store, keys, &change, &self.settings_defaults)
                .await?;
        let stored = updated.map_err(|invalid| Error::InvalidSettings(invalid.to_string()))?;
        Ok(stored.paused == Some(true))
    }

    /// What the queue of `keys` set, without the settings in force (one
    /// read: cheaper than [`Self::settings`] when many queues are read).
    pub async fn stored_settings(&self, keys: &QueueKeys) -> Result<Stored> {
        Ok(crate::queue::settings::read(&self.store, keys).await?)
    }

    /// Applies `change` to the settings of the queue of `keys` in one
    /// transaction: each key sets its setting, `null` returns it to the
    /// default, keys not named are kept. [`Error::InvalidSettings`],
    /// nothing changed, for an unknown key or a value out of range.
    pub async fn update_settings(
        &self,
        keys: &QueueKeys,
        change: &BTreeMap<String, Value>,
    ) -> Result<QueueSettings> {
        let updated =
            crate::queue::settings::update(&self.store, keys, change, &self.settings_defaults)
                .await;
        // Read afresh on this daemon's next pop, whatever the outcome (an
        // error may still have committed).
        self.default_leases.forget(keys);
        match updated? {
            Ok(stored) => self.settings_in_role(keys, stored).await,
            Err(invalid) => Err(Error::InvalidSettings(invalid.to_string())),
        }
    }

    /// True when some queue names the queue of `keys` as its dead-letter
    /// queue (a dead-letter queue by role; see
    /// [`crate::queue::dead_letters`]).
    pub async fn is_dead_letter_queue(&self, keys: &QueueKeys) -> Result<bool> {
        let txn = self.store.begin()?;
        Ok(crate::queue::dead_letters::is_dead_letter_queue_in(&txn, keys).await?)
    }

    /// `stored` with the settings in force for the queue of `keys`.
    async fn settings_in_role(&self, keys: &QueueKeys, stored: Stored) -> Result<QueueSettings> {
        // A dead-letter queue by role has no delivery limit of its own, as
        // the nack and the timer apply it (`crate::lease::settle`).
        let role = self.is_dead_letter_queue(keys).await?;
        let name = keys.name();
        let effective =
            stored.effective_in_role(name, &self.settings_defaults, role || name.is_dead_letter());
        Ok(QueueSettings { stored, effective })
    }
}
