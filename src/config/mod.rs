//! Daemon configuration: defaults, then `config/hotq.toml` (or `--config`),
//! then `HOTQ_*` environment variables, then flags. An unknown or invalid
//! key stops start-up with a message naming it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod sqs;
pub use sqs::SqsSection;

mod resp;
pub use resp::{RESP_CONNECTIONS_MAX, RESP_LISTEN_DEFAULT, RespListen, RespSection};

/// Default of `max_deliveries`: deliveries under a lease before an item
/// goes to the dead-letter queue.
pub const MAX_DELIVERIES_DEFAULT: u32 = 5;
/// Default dedup window: 5 minutes, as SQS.
pub const DEDUP_WINDOW_MS_DEFAULT: u64 = 5 * 60 * 1_000;
/// Longest dedup window a queue may set.
pub const DEDUP_WINDOW_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1_000;

/// When a commit counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// fsync before the commit returns: a returned commit survives power loss.
    #[default]
    Sync,
    /// Written to the OS before the commit returns: survives a killed
    /// process, not a crashed machine.
    Buffered,
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "sync" => Ok(Durability::Sync),
            "buffered" => Ok(Durability::Buffered),
            other => Err(format!(
                "durability must be sync or buffered, not {other:?}"
            )),
        }
    }
}

/// Which store the daemon runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// fjall on local disk, in process.
    #[default]
    Embedded,
    /// A FoundationDB cluster (needs the `fdb` feature).
    Fdb,
}

/// Everything `hotq serve` can be told.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// HTTP API address.
    pub listen: SocketAddr,
    /// Prometheus exporter address.
    pub metrics_listen: SocketAddr,
    /// RESP (Redis protocol) listener address; empty: off (see `crate::resp`).
    pub resp_listen: RespListen,
    /// Bearer token every API call must carry (`/healthz` excepted).
    pub token: Option<String>,
    /// Allow a non-loopback `listen` without a token.
    pub allow_insecure_bind: bool,
    /// Which store to run on.
    pub backend: Backend,
    /// Embedded store directory.
    pub data_dir: PathBuf,
    /// Embedded store durability.
    pub durability: Durability,
    /// FoundationDB cluster file (backend `fdb`); unset uses the default.
    pub fdb_cluster_file: Option<String>,
    /// Largest request body accepted, in bytes (checked before reading).
    pub body_max_bytes: usize,
    /// Largest item accepted on every API, in bytes (default 1 MiB, at
    /// most [`crate::envelope::PAYLOAD_SIZE_MAX`], 8 MiB: one push is one
    /// transaction, and a transaction is at most 10 MB; see
    /// docs/large-items.md). An item over one store value is split across
    /// keys.
    pub payload_bytes_max: usize,
    /// Largest `max` a pop may ask for.
    pub pop_max_items: usize,
    /// Largest `wait_ms` a pop may ask for.
    pub wait_max_ms: u64,
    /// How long shutdown waits for in-flight work, in ms.
    pub shutdown_grace_ms: u64,
    /// After the store has failed (or every health probe failed) for this
    /// long, the daemon stops and exits non-zero so a supervisor restarts
    /// it, in ms. Until then `/healthz` and the API answer 503.
    pub store_failure_exit_ms: u64,
    /// A store write (a commit group's write and fsync) under way for this
    /// long makes `/healthz` answer 503 `store_stalled` until it returns,
    /// in ms. The daemon keeps running: a stall is not a failure.
    pub store_stall_ms: u64,
    /// Most distinct queue label values in metrics; the rest are `_other`.
    pub metrics_queue_labels_max: usize,
    /// How often queue depth and oldest-item age are sampled, in ms.
    pub metrics_sample_interval_ms: u64,
    /// Most queues one sampling pass reads.
    pub metrics_sample_queues_max: usize,
    /// Threads that run the HTTP API and the pop and settle rounds; 0
    /// leaves it to tokio (see [`Config::runtime_workers`]).
    pub worker_threads: usize,
    /// Staged-pop protocol settings.
    pub staging: StagingSection,
    /// Leases, dead letters and delays.
    pub leases: LeasesSection,
    /// The `[sqs]` table: the Amazon SQS API (see [`crate::sqs`]).
    pub sqs: SqsSection,
    /// The `[resp]` table: the RESP listener's limits (see `crate::resp`).
    pub resp: RespSection,
}

/// The `[leases]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeasesSection {
    /// Deliveries under a lease before an item goes to `<queue>.dead`.
    pub max_deliveries: u32,
    /// Longest `lease_ms` a pop or extend may ask for.
    pub lease_max_ms: u64,
    /// Longest `delay_ms` a push or nack may ask for.
    pub delay_max_ms: u64,
    /// Per-queue settings, by queue name (`[leases.queues.<name>]`).
    pub queues: HashMap<String, QueueLeaseSection>,
    /// Lease of a pop that names no `lease_ms`, unless the queue's stored
    /// settings say otherwise; unset: such pops take no lease.
    pub default_lease_ms: Option<u64>,
    /// How long a push's dedup id counts, unless the queue's stored
    /// settings say otherwise.
    pub dedup_window_ms: u64,
    /// Delay of a push that names no `delay_ms`, unless the queue's stored
    /// settings say otherwise.
    pub delivery_delay_ms: u64,
}

/// A `[leases.queues.<name>]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueLeaseSection {
    /// Deliveries under a lease before an item of this queue is dead-lettered.
    pub max_deliveries: u32,
}

impl Default for LeasesSection {
    fn default() -> Self {
        LeasesSection {
            max_deliveries: MAX_DELIVERIES_DEFAULT,
            lease_max_ms: 12 * 60 * 60 * 1_000,
            delay_max_ms: 7 * 24 * 60 * 60 * 1_000,
            queues: HashMap::new(),
            default_lease_ms: None,
            dedup_window_ms: DEDUP_WINDOW_MS_DEFAULT,
            delivery_delay_ms: 0,
        }
    }
}

/// The `[staging]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StagingSection {
    /// Most requests one fulfillment transaction serves.
    pub fulfill_batch_max: usize,
    /// Most payload bytes one fulfillment transaction moves.
    pub fulfill_bytes_max: usize,
    /// Grace after a request's deadline before its uncollected result is reaped, in ms.
    pub result_grace_ms: u64,
    /// Reaper period, in ms.
    pub reap_interval_ms: u64,
    /// An idle fulfiller stops after this long, in ms.
    pub fulfiller_idle_ms: u64,
    /// Longest a pop with no wait waits in line for the fulfiller's answer
    /// (normally one round), in ms.
    pub lost_race_wait_ms: u64,
    /// Longest a pop leaving its line waits for a round that claimed it to
    /// commit, in ms (see `StagingConfig::hand_off_wait_ms`).
    pub hand_off_wait_ms: u64,
    /// Staged pops wait as memory requests in this daemon's request line
    /// (true, the default), or register in the store's request subspace
    /// (false; see `StagingConfig::requests_in_memory`).
    pub requests_in_memory: bool,
}

impl Default for StagingSection {
    fn default() -> Self {
        // The protocol's defaults: `StagingConfig::default()` is made
        // from these.
        StagingSection {
            fulfill_batch_max: 256,
            fulfill_bytes_max: 4 * 1024 * 1024,
            result_grace_ms: 5_000,
            reap_interval_ms: 1_000,
            fulfiller_idle_ms: 30_000,
            lost_race_wait_ms: 5_000,
            hand_off_wait_ms: 30_000,
            requests_in_memory: true,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            resp_listen: RespListen::default(),
            token: None,
            allow_insecure_bind: false,
            backend: Backend::Embedded,
            data_dir: PathBuf::from("./data"),
            durability: Durability::Sync,
            fdb_cluster_file: None,
            body_max_bytes: 8 * 1024 * 1024,
            payload_bytes_max: crate::envelope::PAYLOAD_BYTES_MAX_DEFAULT,
            pop_max_items: 100,
            wait_max_ms: 60_000,
            shutdown_grace_ms: 10_000,
            store_failure_exit_ms: 5_000,
            store_stall_ms: 10_000,
            metrics_queue_labels_max: 100,
            metrics_sample_interval_ms: 1_000,
            metrics_sample_queues_max: 1_000,
            worker_threads: 0,
            staging: StagingSection::default(),
            leases: LeasesSection::default(),
            sqs: SqsSection::default(),
            resp: RespSection::default(),
        }
    }
}

/// A configuration that cannot be used, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Overrides from the command line or environment; `None` leaves the file's value.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen` / `HOTQ_LISTEN`.
    pub listen: Option<SocketAddr>,
    /// `--metrics-listen` / `HOTQ_METRICS_LISTEN`.
    pub metrics_listen: Option<SocketAddr>,
    /// `--resp-listen` / `HOTQ_RESP_LISTEN` (empty: off).
    pub resp_listen: Option<RespListen>,
    /// `--data-dir` / `HOTQ_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--token` / `HOTQ_TOKEN`.
    pub token: Option<String>,
    /// `--durability` / `HOTQ_DURABILITY`.
    pub durability: Option<Durability>,
    /// `--allow-insecure-bind`.
    pub allow_insecure_bind: bool,
    /// `--worker-threads` / `HOTQ_WORKER_THREADS`.
    pub worker_threads: Option<usize>,
}

/// Most runtime worker threads a configuration may ask for.
pub const WORKER_THREADS_MAX: usize = 1_024;
/// Most `staging.result_grace_ms`: an hour.
pub const RESULT_GRACE_MS_MAX: u64 = 3_600_000;
/// Most `staging.hand_off_wait_ms`: ten minutes.
pub const HAND_OFF_WAIT_MS_MAX: u64 = 600_000;

impl Config {
    /// How many threads the daemon's async runtime runs, when set:
    /// `None` (`worker_threads = 0`) leaves it to tokio, one per core
    /// unless `TOKIO_WORKER_THREADS` says otherwise. On a 2-core machine
    /// one worker cost the daemon less CPU per pop in A/B drains but did
    /// not drain faster (docs/profile.md, "Runtime threads").
    pub fn runtime_workers(&self) -> Option<usize> {
        (self.worker_threads > 0).then_some(self.worker_threads)
    }

    /// Parses TOML text (`origin` names it in errors).
    pub fn from_toml(text: &str, origin: &str) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(format!("{origin}: {e}")))
    }

    /// Loads `path`, or the defaults when `path` is `None` and
    /// `config/hotq.toml` does not exist.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match path {
            Some(path) => path.to_path_buf(),
            None => {
                let default = PathBuf::from("config/hotq.toml");
                if !default.exists() {
                    return Ok(Config::default());
                }
                default
            }
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Config::from_toml(&text, &path.display().to_string())
    }

    /// Applies overrides, then checks the whole configuration.
    pub fn apply(mut self, overrides: Overrides) -> Result<Config, ConfigError> {
        if let Some(listen) = overrides.listen {
            self.listen = listen;
        }
        if let Some(listen) = overrides.metrics_listen {
            self.metrics_listen = listen;
        }
        if let Some(listen) = overrides.resp_listen {
            self.resp_listen = listen;
        }
        if let Some(dir) = overrides.data_dir {
            self.data_dir = dir;
        }
        if let Some(token) = overrides.token {
            self.token = Some(token);
        }
        if let Some(durability) = overrides.durability {
            self.durability = durability;
        }
        self.allow_insecure_bind |= overrides.allow_insecure_bind;
        if let Some(threads) = overrides.worker_threads {
            self.worker_threads = threads;
        }
        self.validate()?;
        Ok(self)
    }

    /// Checks values no type can check.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_positive()?;
        self.validate_bounds()?;
        self.validate_lease_queues()?;
        self.validate_access()?;
        self.sqs.validate().map_err(ConfigError)?;
        self.resp
            .validate(self.payload_bytes_max)
            .map_err(ConfigError)?;
        if self.backend == Backend::Fdb && !cfg!(feature = "fdb") {
            return Err(ConfigError(
                "backend = \"fdb\" needs a build with --features fdb".into(),
            ));
        }
        Ok(())
    }

    /// Counts, sizes and intervals that must be at least 1.
    fn validate_positive(&self) -> Result<(), ConfigError> {
        let positive = [
            ("body_max_bytes", self.body_max_bytes as u64),
            ("payload_bytes_max", self.payload_bytes_max as u64),
            ("pop_max_items", self.pop_max_items as u64),
            (
                "metrics_queue_labels_max",
                self.metrics_queue_labels_max as u64,
            ),
            (
                "metrics_sample_interval_ms",
                self.metrics_sample_interval_ms,
            ),
            (
                "metrics_sample_queues_max",
                self.metrics_sample_queues_max as u64,
            ),
            (
                "staging.fulfill_batch_max",
                self.staging.fulfill_batch_max as u64,
            ),
            (
                "staging.fulfill_bytes_max",
                self.staging.fulfill_bytes_max as u64,
            ),
            ("staging.reap_interval_ms", self.staging.reap_interval_ms),
            ("staging.fulfiller_idle_ms", self.staging.fulfiller_idle_ms),
            ("staging.hand_off_wait_ms", self.staging.hand_off_wait_ms),
            ("leases.max_deliveries", self.leases.max_deliveries as u64),
            ("store_failure_exit_ms", self.store_failure_exit_ms),
            ("store_stall_ms", self.store_stall_ms),
            ("leases.lease_max_ms", self.leases.lease_max_ms),
            ("leases.delay_max_ms", self.leases.delay_max_ms),
        ];
        match positive.iter().find(|(_, value)| *value == 0) {
            Some((key, _)) => Err(ConfigError(format!("{key} must be at least 1"))),
            None => Ok(()),
        }
    }

    /// Upper bounds, and values bounded by other values.
    fn validate_bounds(&self) -> Result<(), ConfigError> {
        if self.worker_threads > WORKER_THREADS_MAX {
            return Err(ConfigError(format!(
                "worker_threads must be at most {WORKER_THREADS_MAX} (0 leaves it to tokio)"
            )));
        }
        if self.staging.fulfill_batch_max > 10_000 {
            return Err(ConfigError(
                "staging.fulfill_batch_max must be at most 10000".into(),
            ));
        }
        if self.staging.result_grace_ms > RESULT_GRACE_MS_MAX {
            return Err(ConfigError(format!(
                "staging.result_grace_ms must be at most {RESULT_GRACE_MS_MAX}"
            )));
        }
        if self.staging.hand_off_wait_ms > HAND_OFF_WAIT_MS_MAX {
            return Err(ConfigError(format!(
                "staging.hand_off_wait_ms must be at most {HAND_OFF_WAIT_MS_MAX}"
            )));
        }
        if self.staging.lost_race_wait_ms > self.wait_max_ms {
            return Err(ConfigError(
                "staging.lost_race_wait_ms must be at most wait_max_ms".into(),
            ));
        }
        let window_max = DEDUP_WINDOW_MS_MAX;
        if self.leases.dedup_window_ms == 0 || self.leases.dedup_window_ms > window_max {
            return Err(ConfigError(format!(
                "leases.dedup_window_ms must be 1 to {window_max}"
            )));
        }
        if self
            .leases
            .default_lease_ms
            .is_some_and(|ms| ms == 0 || ms > self.leases.lease_max_ms)
        {
            return Err(ConfigError(
                "leases.default_lease_ms must be 1 to leases.lease_max_ms".into(),
            ));
        }
        if self.leases.delivery_delay_ms > self.leases.delay_max_ms {
            return Err(ConfigError(
                "leases.delivery_delay_ms must be at most leases.delay_max_ms".into(),
            ));
        }
        self.validate_payload_bytes_max()?;
        if self.wait_max_ms > 600_000 {
            return Err(ConfigError(
                "wait_max_ms must be at most 600000 (10 minutes)".into(),
            ));
        }
        Ok(())
    }

    /// `payload_bytes_max`: at most the core's ceiling, and a raw push of
    /// an item of that size fits a request body.
    fn validate_payload_bytes_max(&self) -> Result<(), ConfigError> {
        let ceiling = crate::envelope::PAYLOAD_SIZE_MAX;
        if self.payload_bytes_max > ceiling {
            return Err(ConfigError(format!(
                "payload_bytes_max must be at most {ceiling} (8 MiB: one push is one \
                 transaction, at most 10 MB)"
            )));
        }
        if self.payload_bytes_max > self.body_max_bytes {
            return Err(ConfigError(
                "payload_bytes_max must be at most body_max_bytes".into(),
            ));
        }
        Ok(())
    }

    /// The per-queue lease settings: valid names, never a dead-letter queue.
    fn validate_lease_queues(&self) -> Result<(), ConfigError> {
        for (name, queue) in &self.leases.queues {
            match crate::keys::QueueName::new(name) {
                Err(error) => {
                    return Err(ConfigError(format!("leases.queues.{name:?}: {error}")));
                }
                Ok(queue) if queue.is_dead_letter() => {
                    return Err(ConfigError(format!(
                        "leases.queues.{name}: a dead-letter queue never dead-letters, \
                         so max_deliveries does not apply to it"
                    )));
                }
                Ok(_) => {}
            }
            if queue.max_deliveries == 0 {
                return Err(ConfigError(format!(
                    "leases.queues.{name}.max_deliveries must be at least 1"
                )));
            }
        }
        Ok(())
    }

    /// A token when the API listens beyond loopback.
    fn validate_access(&self) -> Result<(), ConfigError> {
        if self.token.as_deref() == Some("") {
            return Err(ConfigError("token must not be empty".into()));
        }
        if !self.listen.ip().is_loopback() && self.token.is_none() && !self.allow_insecure_bind {
            return Err(ConfigError(format!(
                "listen = {} is not a loopback address and no token is set: set a token, \
                 or allow_insecure_bind = true (--allow-insecure-bind) to serve it unauthenticated",
                self.listen
            )));
        }
        if let RespListen(Some(resp)) = self.resp_listen
            && !resp.ip().is_loopback()
            && self.token.is_none()
            && !self.allow_insecure_bind
        {
            return Err(ConfigError(format!(
                "resp_listen = {resp} is not a loopback address and no token is set: set a token, \
                 or allow_insecure_bind = true (--allow-insecure-bind) to serve it unauthenticated"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
