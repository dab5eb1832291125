//! The core API: every operation of every front end (`/v1`, SQS, the
//! console, RESP, the CLI's in-process parts, `hotq bench`) goes through
//! [`Hotq`]. It owns the transactions, counts the metrics of what it does
//! and classifies every failure into one [`Error`] with a stable code;
//! front ends parse, call it and render, and import nothing below it.
//!
//! One file per area of operations, each an `impl` block of [`Hotq`]:
//! the front ends' handlers read as "parse, `hotq.op(..)`, render".

use std::sync::Arc;

use crate::config::Config;
use crate::coordinator::Coordinator;

mod attributes;
mod browse;
mod configure;
mod default_leases;
mod error;
mod health;
mod inspect;
mod manage;
mod pop;
mod push;
mod redrive;
mod settle;

pub use crate::envelope::End;
pub use crate::queue::admin::{
    Dropped, LEASES_CURSOR_LEN_MAX, LEASES_LIMIT_MAX, LIST_LIMIT_MAX, LeaseCursor, LeaseSummary,
    QueueSummary,
};
pub use crate::queue::fair::{
    FAIR_BACKLOG_SHOWN_MAX, FAIR_PRUNE_SCAN_MAX, FAIR_WEIGHT_MAX, FAIR_WEIGHTS_MAX, KeyBacklog,
    Pruned,
};
pub use crate::queue::limits::{LEASES_MAX, LEASES_PER_KEY_MAX, POP_RATE_BURST_MAX, POP_RATE_MAX};
pub use crate::queue::settings::{
    DEDUP_WINDOW_MS_MAX, Defaults as SettingsDefaults, Effective, MAX_DELIVERIES_MAX, Stored,
};
pub use crate::store::Store;
pub use attributes::{RecordChange, RecordEditor, RecordedQueue};
pub use browse::{GROUP_WAITING_COUNT_MAX, GROUPS_LIMIT_MAX, GroupSummary, ITEMS_LIMIT_MAX};
pub use configure::QueueSettings;
pub use default_leases::DEFAULT_LEASE_CACHE_MS;
pub use error::{Error, Result};
pub use inspect::{QueueWalk, WalkStep};
pub use manage::QueueCounts;
pub use pop::{Item, POP_ACKS_MAX, PopAnswer, PopLease, PopOptions, Riding};
pub use push::{
    DEDUP_ID_LEN_MAX, FAIR_KEY_LEN_MAX, GROUP_KEY_LEN_MAX, PUSH_BATCH_MAX, PushItem, PushOptions,
    Pushed, RETENTION_MS_MAX, check_dedup_id, check_fair_key, check_group, check_retention_ms,
};
pub use redrive::REDRIVE_BATCH_MAX;
pub use settle::{ACK_BATCH_MAX, Receipt, ReceiptOutcome, Returned, Stale, parse_receipt};

pub(crate) use default_leases::DefaultLeases;

/// hotq over one store: one process's share of the work (see
/// [`Coordinator`]) and what every front end asks of it.
pub struct Hotq<S: Store> {
    /// The store. Front ends never see it: transactions are the core's.
    store: S,
    /// Staged pops, fulfillment loops, settling, the due index's timer.
    coordinator: Coordinator<S>,
    /// The defaults of queue settings (from `config`).
    settings_defaults: crate::queue::settings::Defaults,
    /// Queues' default leases, shared by every pop so a plain pop does not
    /// read the settings key each time (bounded, short-lived; forgotten
    /// when the queue's settings change or it is deleted here).
    default_leases: Arc<DefaultLeases>,
    /// The configured bounds of pushes and pops (see [`Limits`]).
    pub(crate) limits: Limits,
}

/// The configured bounds every front end's pushes and pops are held to,
/// read once from `config`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most bytes in one item (`payload_bytes_max`).
    pub(crate) payload_bytes_max: usize,
    /// Longest delay of a push or a nack (`leases.delay_max_ms`).
    pub(crate) delay_max_ms: u64,
    /// Longest lease (`leases.lease_max_ms`).
    pub(crate) lease_max_ms: u64,
    /// Longest wait of a pop (`wait_max_ms`).
    pub(crate) wait_max_ms: u64,
    /// Most items of one pop (`pop_max_items`).
    pub(crate) pop_max_items: usize,
}

impl Limits {
    fn from_config(config: &Config) -> Limits {
        Limits {
            payload_bytes_max: config.payload_bytes_max,
            delay_max_ms: config.leases.delay_max_ms,
            lease_max_ms: config.leases.lease_max_ms,
            wait_max_ms: config.wait_max_ms,
            pop_max_items: config.pop_max_items,
        }
    }
}

impl<S: Store> Hotq<S> {
    /// hotq over `store`, configured by `config`. Fulfillers start on
    /// demand; [`Self::spawn_timer`] starts the due index's timer.
    pub fn new(store: S, config: &Config) -> Self {
        let coordinator = Coordinator::new(
            store.clone(),
            crate::staging::StagingConfig::from_config(config),
        );
        Hotq {
            store,
            coordinator,
            settings_defaults: crate::queue::settings::Defaults::from_config(config),
            default_leases: Arc::default(),
            limits: Limits::from_config(config),
        }
    }

    /// Starts the due index's timer (expired leases, delayed items,
    /// retention, reaping); it stops at [`Self::shutdown`].
    pub fn spawn_timer(&self) -> tokio::task::JoinHandle<()> {
        self.coordinator.spawn_timer()
    }

    /// Stops taking new pops; waiters are answered.
    pub fn begin_shutdown(&self) {
        self.coordinator.begin_shutdown();
    }

    /// Stops every task, waiting at most `wait` for rounds under way.
    pub async fn shutdown(&self, wait: std::time::Duration) {
        self.coordinator.shutdown(wait).await;
    }
}
