//! Per-queue settings kept in the store (`meta/("settings",)` of the queue,
//! see [`QueueKeys::settings`]), so every daemon on one store applies the
//! same: max deliveries, default lease, dead-letter target, dedup window,
//! delivery delay, retention, and whether the queue is paused. The TOML configuration
//! holds the defaults
//! ([`Defaults`]); a stored value overrides its default for one queue.
//!
//! This layer keeps no cache: every transaction that needs a setting reads
//! the settings key itself (one point read, snapshot). A cache would need
//! an invalidation every daemon sees at once; the read costs less than that
//! machinery, and with it a `PUT` is in force for every daemon from the
//! commit on — a push, nack or lease expiry that starts after the `PUT`
//! answered uses the new values. The one exception is above this layer:
//! the daemon answers a plain pop's default lease from memory
//! (`service::DefaultLeases`, at most 1 s old, forgotten at once
//! when the settings change or the queue is deleted through that daemon).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::keys::{QueueKeys, QueueName};
use crate::lease::DeliveryPolicy;
use crate::queue::QueueError;
use crate::queue::limits::{self, Limits, Rate};
use crate::store::Read;
use crate::store::{RetryPolicy, Store, StoreError, Transaction, transact};

pub use crate::config::{DEDUP_WINDOW_MS_DEFAULT, DEDUP_WINDOW_MS_MAX};
/// Most deliveries a queue may allow.
pub const MAX_DELIVERIES_MAX: u32 = 1_000;

/// What a queue has set; `None` falls back to the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Stored {
    /// Deliveries under a lease before an item is dead-lettered; 0 (the
    /// SQS default, a queue without a redrive policy): no limit, never
    /// dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deliveries: Option<u32>,
    /// The lease of a pop that names no `lease_ms`, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_lease_ms: Option<u64>,
    /// Where items out of deliveries go (instead of `{queue}.dead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    /// How long a push's dedup id counts, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<u64>,
    /// The delay of a push that names no `delay_ms`, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_delay_ms: Option<u64>,
    /// True: the queue takes pushes but hands nothing out (see [`paused_in`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// How long an item pushed from now on is kept unless delivered, in
    /// ms (see [`crate::queue::expiry`]); absent: kept until delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_ms: Option<u64>,
    /// True: items pushed without a fairness key share the default key
    /// `""` (see [`crate::queue::fair`]); absent: they keep push order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair: Option<bool>,
    /// Weight per fairness key (1 to [`crate::queue::fair::FAIR_WEIGHT_MAX`]);
    /// a key not named has weight 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_weights: Option<BTreeMap<String, u32>>,
    /// Most items per second the queue hands out, across every daemon
    /// (see [`crate::queue::limits`]); absent: no rate limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pop_rate_max: Option<u64>,
    /// Items that may go at once under `pop_rate_max` after a quiet
    /// spell; absent: a tenth of a second's worth (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pop_rate_burst: Option<u64>,
    /// Most leases in flight at once, across every daemon (see
    /// [`crate::queue::limits`]); absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases_max: Option<u64>,
    /// Most leases in flight at once per fairness key, across every
    /// daemon; absent: no limit per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases_per_key_max: Option<u64>,
    /// Most items per second handed out per fairness key, across every
    /// daemon (burst: a tenth of a second's worth, at least 1); absent:
    /// no rate per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pop_rate_per_key_max: Option<u64>,
}

/// The defaults (from the TOML configuration) and the bounds a `PUT` is
/// checked against.
#[derive(Debug, Clone)]
pub struct Defaults {
    /// Max deliveries, per queue name.
    pub delivery: DeliveryPolicy,
    /// Default lease of a pop; `None`: pops lease only when asked.
    pub default_lease_ms: Option<u64>,
    /// Dedup window.
    pub dedup_window_ms: u64,
    /// Delay of a push.
    pub delivery_delay_ms: u64,
    /// Longest lease a queue may default to.
    pub lease_max_ms: u64,
    /// Longest delay a queue may default to.
    pub delay_max_ms: u64,
}

impl Defaults {
    /// The defaults `config` sets for every queue.
    pub fn from_config(config: &crate::config::Config) -> Defaults {
        Defaults {
            delivery: DeliveryPolicy::from_config(&config.leases),
            default_lease_ms: config.leases.default_lease_ms,
            dedup_window_ms: config.leases.dedup_window_ms,
            delivery_delay_ms: config.leases.delivery_delay_ms,
            lease_max_ms: config.leases.lease_max_ms,
            delay_max_ms: config.leases.delay_max_ms,
        }
    }
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            delivery: DeliveryPolicy::default(),
            default_lease_ms: None,
            dedup_window_ms: DEDUP_WINDOW_MS_DEFAULT,
            delivery_delay_ms: 0,
            lease_max_ms: 12 * 60 * 60 * 1_000,
            delay_max_ms: 7 * 24 * 60 * 60 * 1_000,
        }
    }
}

/// The settings in force for one queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Effective {
    /// `None`: unlimited (a dead-letter queue never dead-letters).
    #[schema(required = true)]
    pub max_deliveries: Option<u32>,
    /// `None`: pops lease only when asked.
    #[schema(required = true)]
    pub default_lease_ms: Option<u64>,
    /// `None`: nowhere (a dead-letter queue).
    #[schema(required = true)]
    pub dead_letter_queue: Option<String>,
    /// How long a dedup id counts.
    pub dedup_window_ms: u64,
    /// Delay of a push that names none.
    pub delivery_delay_ms: u64,
    /// True: the queue takes pushes but hands nothing out.
    pub paused: bool,
    /// `None`: items are kept until delivered (no retention).
    #[schema(required = true)]
    pub retention_ms: Option<u64>,
    /// True: items pushed without a fairness key share the default key `""`.
    pub fair: bool,
    /// Weight per fairness key; a key not named has weight 1.
    pub fair_weights: BTreeMap<String, u32>,
    /// Most items per second handed out; `None`: no rate limit.
    #[schema(required = true)]
    pub pop_rate_max: Option<u64>,
    /// Items that may go at once under the rate limit; `None`: no rate limit.
    #[schema(required = true)]
    pub pop_rate_burst: Option<u64>,
    /// Most leases in flight; `None`: no limit.
    #[schema(required = true)]
    pub leases_max: Option<u64>,
    /// Most leases in flight per fairness key; `None`: no limit per key.
    #[schema(required = true)]
    pub leases_per_key_max: Option<u64>,
    /// Most items per second handed out per fairness key; `None`: no
    /// rate per key.
    #[schema(required = true)]
    pub pop_rate_per_key_max: Option<u64>,
}

impl Stored {
    /// The settings in force for `name` under `defaults`.
    pub fn effective(&self, name: &QueueName, defaults: &Defaults) -> Effective {
        self.effective_in_role(name, defaults, name.is_dead_letter())
    }

    /// The settings in force for `name` under `defaults`, when it is a
    /// dead-letter queue (by its name, or by role: some queue's
    /// `dead_letter_queue` names it, see `crate::queue::dead_letters`) or
    /// not: a dead-letter queue has no delivery limit unless it sets one.
    pub fn effective_in_role(
        &self,
        name: &QueueName,
        defaults: &Defaults,
        dead_letter_queue: bool,
    ) -> Effective {
        let max_deliveries = if dead_letter_queue && self.max_deliveries.is_none() {
            None
        } else {
            self.max_deliveries
                .or_else(|| defaults.delivery.max_deliveries(name))
                .filter(|max| *max > 0)
        };
        let dead_letter_queue = self
            .dead_letter_queue
            .clone()
            .or_else(|| name.dead_letter().map(|dead| dead.as_str().to_string()));
        Effective {
            max_deliveries,
            default_lease_ms: self.default_lease_ms.or(defaults.default_lease_ms),
            dead_letter_queue,
            dedup_window_ms: self.dedup_window_ms.unwrap_or(defaults.dedup_window_ms),
            delivery_delay_ms: self.delivery_delay_ms.unwrap_or(defaults.delivery_delay_ms),
            paused: self.paused == Some(true),
            retention_ms: self.retention_ms,
            fair: self.fair == Some(true),
            fair_weights: self.fair_weights.clone().unwrap_or_default(),
            pop_rate_max: self.pop_rate_max,
            pop_rate_burst: self.limits().rate.map(|rate| rate.burst),
            leases_max: self.leases_max,
            leases_per_key_max: self.leases_per_key_max,
            pop_rate_per_key_max: self.pop_rate_per_key_max,
        }
    }

    /// The limits these settings set.
    pub fn limits(&self) -> Limits {
        Limits {
            rate: self
                .pop_rate_max
                .map(|per_s| Rate::new(per_s, self.pop_rate_burst)),
            leases_max: self.leases_max,
            leases_per_key_max: self.leases_per_key_max,
            rate_per_key: self
                .pop_rate_per_key_max
                .map(|per_s| Rate::new(per_s, None)),
        }
    }

    /// The dead-letter queue items of `name` go to, if any.
    pub fn dead_letter_target(&self, name: &QueueName) -> Option<QueueName> {
        match &self.dead_letter_queue {
            // Checked when it was stored.
            Some(target) => QueueName::new(target).ok(),
            None => name.dead_letter(),
        }
    }
}

/// Why a settings change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSettings(pub String);

impl std::fmt::Display for InvalidSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidSettings {}

/// `n` as a whole non-negative number: `5` or `5.0` (JSON Schema's
/// "integer" takes both, so clients that write numbers as floats pass).
fn whole_number(n: &serde_json::Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        let float = n.as_f64()?;
        // 2^64 as f64; below it every whole float converts exactly.
        let whole = float.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&float);
        whole.then_some(float as u64)
    })
}

/// A true/false setting: true is stored, false (the default) and null
/// are stored as nothing.
fn flag(key: &str, value: &Value) -> Result<Option<bool>, InvalidSettings> {
    match value {
        Value::Null | Value::Bool(false) => Ok(None),
        Value::Bool(true) => Ok(Some(true)),
        other => Err(InvalidSettings(format!(
            "{key}: must be true, false or null, got {other}"
        ))),
    }
}

/// Applies a change (a JSON object: each key sets its setting, `null`
/// returns it to the default) to `stored`, checking every value; nothing
/// is applied when anything is wrong.
pub fn apply_change(
    stored: &Stored,
    name: &QueueName,
    change: &BTreeMap<String, Value>,
    defaults: &Defaults,
) -> Result<Stored, InvalidSettings> {
    let mut next = stored.clone();
    let bad = |key: &str, what: String| Err(InvalidSettings(format!("{key}: {what}")));
    for (key, value) in change {
        let number = |max: u64, min: u64| -> Result<Option<u64>, InvalidSettings> {
            match value {
                Value::Null => Ok(None),
                Value::Number(n) => match whole_number(n) {
                    Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                    _ => Err(InvalidSettings(format!(
                        "{key} must be an integer from {min} to {max}, got {n}"
                    ))),
                },
                other => Err(InvalidSettings(format!(
                    "{key} must be an integer or null, got {other}"
                ))),
            }
        };
        match key.as_str() {
            "max_deliveries" => {
                // 0: no limit (see [`Stored::max_deliveries`]).
                next.max_deliveries = number(MAX_DELIVERIES_MAX as u64, 0)?.map(|n| n as u32);
            }
            "default_lease_ms" => next.default_lease_ms = number(defaults.lease_max_ms, 1)?,
            "dedup_window_ms" => next.dedup_window_ms = number(DEDUP_WINDOW_MS_MAX, 1)?,
            "delivery_delay_ms" => next.delivery_delay_ms = number(defaults.delay_max_ms, 0)?,
            "retention_ms" => {
                next.retention_ms = number(crate::queue::expiry::RETENTION_MS_MAX, 1)?;
            }
            "paused" => next.paused = flag(key, value)?,
            "fair" => next.fair = flag(key, value)?,
            "pop_rate_max" => next.pop_rate_max = number(limits::POP_RATE_MAX, 1)?,
            "pop_rate_burst" => next.pop_rate_burst = number(limits::POP_RATE_BURST_MAX, 1)?,
            "leases_max" => next.leases_max = number(limits::LEASES_MAX, 1)?,
            "leases_per_key_max" => {
                next.leases_per_key_max = number(limits::LEASES_PER_KEY_MAX, 1)?;
            }
            "pop_rate_per_key_max" => {
                next.pop_rate_per_key_max = number(limits::POP_RATE_MAX, 1)?;
            }
            "fair_weights" => match crate::queue::fair::parse_weights(value) {
                Ok(weights) => next.fair_weights = weights,
                Err(what) => return bad(key, what),
            },
            "dead_letter_queue" => match value {
                Value::Null => next.dead_letter_queue = None,
                Value::String(target) => {
                    let target = match QueueName::new(target) {
                        Ok(target) => target,
                        Err(error) => return bad(key, error.to_string()),
                    };
                    if &target == name {
                        return bad(key, "a queue cannot be its own dead-letter queue".into());
                    }
                    next.dead_letter_queue = Some(target.as_str().to_string());
                }
                other => return bad(key, format!("must be a queue name or null, got {other}")),
            },
            other => {
                return Err(InvalidSettings(format!(
                    "unknown setting {other:?} (known: max_deliveries, default_lease_ms, \
                     dead_letter_queue, dedup_window_ms, delivery_delay_ms, paused, \
                     retention_ms, fair, fair_weights, pop_rate_max, pop_rate_burst, \
                     leases_max, leases_per_key_max, pop_rate_per_key_max)"
                )));
            }
        }
    }
    Ok(next)
}

/// Reads the settings `keys` has stored, in `txn` (snapshot: settings are
/// read, never raced on, by the operations that use them).
pub async fn read_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<Stored, QueueError> {
    let key = keys.settings();
    match txn.get(&key, Read::Snapshot).await? {
        None => Ok(Stored::default()),
        Some(value) => serde_json::from_slice(&value).map_err(|_| QueueError::Corrupt { key }),
    }
}

/// Whether the queue of `keys` is paused, read in `txn` **without**
/// snapshot: every transaction that hands items out (a direct pop, a
/// fulfillment round) reads it, so a pause or resume committed while it
/// runs conflicts with it and it retries. A paused queue hands nothing
/// out from the pause's commit on; pushes, settles (ack, nack, extend,
/// expiry) and the timer's reveals go on, since none of them hands out.
pub async fn paused_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<bool, QueueError> {
    let key = keys.settings();
    match txn.get(&key, Read::Serializable).await? {
        None => Ok(false),
        Some(value) => serde_json::from_slice::<Stored>(&value)
            .map(|stored| stored.paused == Some(true))
            .map_err(|_| QueueError::Corrupt { key }),
    }
}

/// What a transaction that hands items out must obey: the pause and the
/// limits, read together (one read of the settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gates {
    /// The queue is paused: nothing goes out.
    pub paused: bool,
    /// Its rate and lease limits.
    pub limits: Limits,
}

/// The queue's [`Gates`], read in `txn` **without** snapshot, as
/// [`paused_in`] reads the pause: a settings change committed while a pop
/// runs makes it retry under the new settings.
pub async fn gates_in<T: Transaction>(txn: &T, keys: &QueueKeys) -> Result<Gates, QueueError> {
    let key = keys.settings();
    match txn.get(&key, Read::Serializable).await? {
        None => Ok(Gates::default()),
        Some(value) => serde_json::from_slice::<Stored>(&value)
            .map(|stored| Gates {
                paused: stored.paused == Some(true),
                limits: stored.limits(),
            })
            .map_err(|_| QueueError::Corrupt { key }),
    }
}

/// [`read_in`] in a transaction of its own.
pub async fn read<S: Store>(store: &S, keys: &QueueKeys) -> Result<Stored, QueueError> {
    let txn = store.begin()?;
    read_in(&txn, keys).await
}

/// Applies `change` to the stored settings of `keys` in one transaction
/// (the settings key is read without snapshot, so two concurrent changes
/// serialize: neither is lost). Returns the settings now stored.
pub async fn update<S: Store>(
    store: &S,
    keys: &QueueKeys,
    change: &BTreeMap<String, Value>,
    defaults: &Defaults,
) -> Result<Result<Stored, InvalidSettings>, QueueError> {
    let outcome = transact(store, RetryPolicy::default(), |txn| async move {
        update_in(&txn, keys, change, defaults).await
    })
    .await?;
    Ok(outcome)
}

/// Records in `txn` that queue `keys` changed its dead-letter target from
/// `before` to `after` (both as stored; `None`: the default, `{queue}.dead`,
/// which is a dead-letter queue by its name and needs no entry).
pub(crate) fn note_target_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    before: Option<&str>,
    after: Option<&str>,
) -> Result<(), StoreError> {
    if before == after {
        return Ok(());
    }
    let entry = |target: &str| {
        // Both were checked when stored.
        QueueName::new(target)
            .ok()
            .map(|target| crate::keys::dead_letter_role_key(&target, keys.kind(), keys.name()))
    };
    if let Some(key) = before.and_then(entry) {
        txn.clear(&key)?;
    }
    if let Some(key) = after.and_then(entry) {
        txn.set(&key, b"")?;
    }
    Ok(())
}

/// [`update`] in `txn`: nothing is written when the change is invalid.
pub async fn update_in<T: Transaction>(
    txn: &T,
    keys: &QueueKeys,
    change: &BTreeMap<String, Value>,
    defaults: &Defaults,
) -> Result<Result<Stored, InvalidSettings>, StoreError> {
    let key = keys.settings();
    let stored = match txn.get(&key, Read::Serializable).await? {
        None => Stored::default(),
        Some(value) => serde_json::from_slice(&value).map_err(|_| StoreError::Backend {
            code: 4100,
            message: format!("malformed settings under key {key:?}"),
        })?,
    };
    let next = match apply_change(&stored, keys.name(), change, defaults) {
        Ok(next) => next,
        Err(invalid) => return Ok(Err(invalid)),
    };
    note_target_in(
        txn,
        keys,
        stored.dead_letter_queue.as_deref(),
        next.dead_letter_queue.as_deref(),
    )?;
    if next.paused != stored.paused || next.limits() != stored.limits() {
        // Fulfillers of a paused (or limited) queue's waiting pops watch
        // its wake key (see `staging::fulfill`): a resume or a new limit
        // serves them at once, on every daemon.
        txn.atomic_add(&keys.wake(), 1)?;
    }
    if next == Stored::default() {
        txn.clear(&key)?;
    } else {
        let value = serde_json::to_vec(&next).expect("settings serialize");
        txn.set(&key, &value)?;
    }
    Ok(Ok(next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(value: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn changes_are_checked_whole_and_null_resets() {
        let name = QueueName::new("jobs").unwrap();
        let defaults = Defaults::default();
        let set = apply_change(
            &Stored::default(),
            &name,
            &change(json!({"max_deliveries": 3, "dead_letter_queue": "graveyard"})),
            &defaults,
        )
        .unwrap();
        let effective = set.effective(&name, &defaults);
        assert_eq!(effective.max_deliveries, Some(3));
        assert_eq!(effective.dead_letter_queue.as_deref(), Some("graveyard"));
        assert_eq!(effective.dedup_window_ms, DEDUP_WINDOW_MS_DEFAULT);
        let reset = apply_change(
            &set,
            &name,
            &change(json!({"max_deliveries": null})),
            &defaults,
        )
        .unwrap();
        assert_eq!(reset.effective(&name, &defaults).max_deliveries, Some(5));
        let unlimited = apply_change(
            &set,
            &name,
            &change(json!({"max_deliveries": 0})),
            &defaults,
        )
        .unwrap();
        assert_eq!(unlimited.effective(&name, &defaults).max_deliveries, None);
        for bad in [
            json!({"max_deliveries": -1}),
            json!({"max_deliveries": "3"}),
            json!({"dedup_window_ms": 0}),
            json!({"default_lease_ms": -1}),
            json!({"dead_letter_queue": "jobs"}),
            json!({"dead_letter_queue": "no/slash"}),
            json!({"color": "blue"}),
            json!({"max_deliveries": 2, "colour": 1}),
            json!({"retention_ms": 0}),
            json!({"retention_ms": 365 * 24 * 3_600_000u64 + 1}),
            json!({"retention_ms": "1s"}),
            json!({"pop_rate_max": 0}),
            json!({"pop_rate_max": 1_000_001}),
            json!({"pop_rate_max": 2.5}),
            json!({"pop_rate_burst": 0}),
            json!({"leases_max": 0}),
            json!({"leases_max": "ten"}),
            json!({"leases_per_key_max": 0}),
            json!({"pop_rate_per_key_max": 0}),
        ] {
            assert!(
                apply_change(&set, &name, &change(bad.clone()), &defaults).is_err(),
                "{bad} must be refused"
            );
        }
    }

    #[test]
    fn limits_take_their_burst_default_and_reset_with_null() {
        let name = QueueName::new("jobs").unwrap();
        let defaults = Defaults::default();
        let set = apply_change(
            &Stored::default(),
            &name,
            &change(json!({"pop_rate_max": 1000, "leases_max": 10})),
            &defaults,
        )
        .unwrap();
        let effective = set.effective(&name, &defaults);
        assert_eq!(effective.pop_rate_max, Some(1_000));
        assert_eq!(effective.pop_rate_burst, Some(100));
        assert_eq!(effective.leases_max, Some(10));
        let reset = apply_change(
            &set,
            &name,
            &change(json!({"pop_rate_max": null, "leases_max": null})),
            &defaults,
        )
        .unwrap();
        assert_eq!(reset, Stored::default());
        assert_eq!(reset.limits(), Limits::default());
    }

    #[test]
    fn dead_letter_queues_stay_unlimited_by_default() {
        let dead = QueueName::new("jobs.dead").unwrap();
        let effective = Stored::default().effective(&dead, &Defaults::default());
        assert_eq!(effective.max_deliveries, None);
        assert_eq!(effective.dead_letter_queue, None);
    }
}
