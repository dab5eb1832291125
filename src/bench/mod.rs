//! `hotq bench`: pops under contention, measured, not claimed.
//!
//! Scenarios (each bounded by `--deadline-s`):
//! - `drain`: preload one queue with N unique items, then W workers pop
//!   until it is drained, for each W and each mode. In process: `staged`
//!   (hotq's pop) and `naive` (the recipe as written: direct pop, retry on
//!   conflict with backoff, no staging). Over HTTP (`--url`), each pop mode
//!   of the API: `plain` (no wait), `longpoll` (`wait_ms`), `leased`
//!   (`lease_ms`, then an ack per item) and `leased-longpoll`, plus `naive`
//!   (`path=direct`) and `staged` (the same request as `longpoll`), and
//!   `sqs`: the SQS API's ReceiveMessage then DeleteMessage ([`sqs`]). Checks
//!   that exactly N distinct items came out, each once (exit 1 otherwise).
//! - `ceiling`: the embedded store's durable commits/s, one item per
//!   commit and 64 items per commit, from W concurrent committers.
//! - `tombstones`: push+pop cycles per queue pattern (FIFO, FIFO with
//!   items returned behind the head, priority queues at either end); push
//!   and pop latency at the start and at the end must match ([`tombstones`]).
//! - `fair`: a noisy tenant's backlog of N items and 20 quiet tenants at
//!   10 items/s each, W workers: the quiet items' wait and the backlog's
//!   drain rate, FIFO against fairness keys ([`fair`]).
//! - `limits`: two daemons on one store, W workers: a `pop_rate_max` of
//!   `--rate` held over 10 s, and `leases_max` never passed under leased
//!   workers, sampled every 10 ms ([`limits`]).
//!
//! Transports: in-process (the library on an embedded store in
//! `--data-dir`, a fresh temporary directory by default, or with
//! `--backend fdb` on the FoundationDB cluster of `--fdb-cluster-file`,
//! `drain` only, behind the marker adapter as the daemon runs it) or `--url` (HTTP
//! against a running daemon, measured as peerbench measures it: see
//! docs/benchmarks.md). Over HTTP the pops go through [`client`], hyper's connection-level
//! client with one keep-alive connection per worker, so the load
//! generator, which shares the daemon's cores, takes little of their CPU;
//! each drain reports how much it took (`client_cpu_us_per_pop`).

mod ceiling;
pub(crate) mod client;
pub(crate) mod coordinators;
pub(crate) mod due;
mod fair;
mod inproc;
mod limits;
mod over_http;
mod over_resp;
mod report;
mod sqs;
mod tombstones;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::store::embedded::{Durability, EmbeddedConfig, EmbeddedStore};

use ceiling::ceiling;
pub use inproc::{BenchStore, drain_in_process};
pub use over_http::drain_http;
pub use over_resp::drain_resp;

/// A leased pop's lease, as peerbench's `http-leased` target takes it
/// (over HTTP, over RESP and, as a visibility timeout, over SQS).
pub const LEASE_MS: u64 = 30_000;
use report::print_drain;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Preload N items, drain with W workers.
    Drain,
    /// Durable commits/s of the embedded store.
    Ceiling,
    /// Pop latency over many push+pop cycles.
    Tombstones,
    /// `--items` queues each holding one lease or delayed item: idle CPU
    /// and lateness of redelivery and reveal.
    Due,
    /// K coordinators (as K daemons) over one store, W waiters each,
    /// drain one queue: throughput and each one's share.
    Coordinators,
    /// A noisy tenant's backlog and quiet tenants' steady pushes, W
    /// workers: the quiet items' wait, FIFO against fairness keys.
    Fair,
    /// Two daemons on one store, W workers: a rate limit held over 10 s,
    /// a lease limit never passed.
    Limits,
}

/// The store an in-process run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BenchBackend {
    /// The embedded store in `--data-dir`.
    Embedded,
    /// A FoundationDB cluster (`--fdb-cluster-file`; needs the `fdb`
    /// feature): the `drain` scenario only.
    Fdb,
}

/// Which pop to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// hotq: direct pop, then staged on conflict (over HTTP: `wait_ms`).
    Staged,
    /// The recipe: direct pop, retry on conflict, no staging.
    Naive,
    /// Over HTTP: `POST …/pop`, no wait (204 when empty).
    Plain,
    /// Over HTTP: `POST …/pop?wait_ms=` (`--wait-ms`).
    Longpoll,
    /// Over HTTP: `POST …/pop?lease_ms=30000`, then `POST …/ack/{receipt}`.
    Leased,
    /// Over HTTP: a leased pop with `wait_ms`, then its ack.
    LeasedLongpoll,
    /// Over HTTP: `POST …/pop?lease_ms=30000&ack=<the previous receipt>`:
    /// the ack rides on the next pop, one request per item.
    LeasedNext,
    /// Over HTTP, the SQS API (AWS JSON 1.0, unsigned: a daemon without
    /// a token): ReceiveMessage (1 message, no wait, visibility 30 s),
    /// then DeleteMessage of its receipt handle. Not in the default modes.
    Sqs,
    /// Over RESP (`--resp-addr`): `POP <queue>`, the item or nil.
    Resp,
    /// Over RESP: `POP <queue> LEASE 30000`, then `ACK <queue> <receipt>`.
    RespLeased,
    /// Over RESP: `POP <queue> LEASE 30000 ACK <the previous receipt>`:
    /// one round trip and one commit per item.
    RespLeasedNext,
    /// Over RESP: `LPOP <queue>`, Redis's list command.
    RespLpop,
}

impl Mode {
    /// The name the command line and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Staged => "staged",
            Mode::Naive => "naive",
            Mode::Plain => "plain",
            Mode::Longpoll => "longpoll",
            Mode::Leased => "leased",
            Mode::LeasedLongpoll => "leased-longpoll",
            Mode::LeasedNext => "leased-next",
            Mode::Sqs => "sqs",
            Mode::Resp => "resp",
            Mode::RespLeased => "resp-leased",
            Mode::RespLeasedNext => "resp-leased-next",
            Mode::RespLpop => "resp-lpop",
        }
    }

    /// Whether each item is acked after its pop (in `sqs`, deleted).
    pub fn leased(self) -> bool {
        matches!(
            self,
            Mode::Leased
                | Mode::LeasedLongpoll
                | Mode::LeasedNext
                | Mode::Sqs
                | Mode::RespLeased
                | Mode::RespLeasedNext
        )
    }

    /// Whether it pops over the RESP listener (`--resp-addr`).
    pub fn over_resp(self) -> bool {
        matches!(
            self,
            Mode::Resp | Mode::RespLeased | Mode::RespLeasedNext | Mode::RespLpop
        )
    }

    /// The modes run when `--modes` is not given.
    pub fn defaults(over_http: bool) -> Vec<Mode> {
        if over_http {
            vec![
                Mode::Plain,
                Mode::Longpoll,
                Mode::Leased,
                Mode::LeasedLongpoll,
                Mode::LeasedNext,
            ]
        } else {
            vec![Mode::Staged, Mode::Naive]
        }
    }
}

/// `hotq bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(long, value_enum, default_value = "drain")]
    pub scenario: Scenario,
    /// Items preloaded per drain.
    #[arg(long, default_value_t = 20_000)]
    pub items: usize,
    /// Bytes per item.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Worker counts to sweep, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64,256")]
    pub workers: Vec<usize>,
    /// Pop modes to run, comma-separated (default: staged,naive in
    /// process; plain,longpoll,leased,leased-longpoll,leased-next over HTTP;
    /// sqs, the SQS API's receive + delete, over HTTP when asked for;
    /// resp,resp-leased,resp-leased-next,resp-lpop over RESP, with
    /// `--resp-addr`).
    #[arg(long, alias = "mode", value_enum, value_delimiter = ',')]
    pub modes: Vec<Mode>,
    /// Coordinator counts to sweep (the `coordinators` scenario; W is
    /// the first of `--workers`, per coordinator).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub coordinators: Vec<usize>,
    /// The `coordinators` scenario with `requests_in_memory = false`:
    /// every staged pop writes a stored request (for comparison).
    #[arg(long)]
    pub stored_requests: bool,
    /// Push+pop cycles for the tombstone scenario.
    #[arg(long, default_value_t = 1_000_000)]
    pub cycles: usize,
    /// Run against a daemon at this URL instead of in process.
    #[arg(long)]
    pub url: Option<String>,
    /// The daemon's RESP listener (HOST:PORT), for the `resp*` modes
    /// (which preload and count over `--url`).
    #[arg(long)]
    pub resp_addr: Option<String>,
    /// Bearer token for `--url`.
    #[arg(long, env = "HOTQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// In-process store directory (default: a fresh temporary directory).
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// In-process store: the embedded store, or a FoundationDB cluster.
    #[arg(long, value_enum, default_value = "embedded")]
    pub backend: BenchBackend,
    /// With `--backend fdb`: the cluster file (default: the client
    /// library's, `FDB_CLUSTER_FILE` then the platform's).
    #[arg(long)]
    pub fdb_cluster_file: Option<String>,
    /// In-process store durability.
    #[arg(long, default_value = "sync")]
    pub durability: Durability,
    /// How long a staged or long-poll pop waits, in ms.
    #[arg(long, default_value_t = 1_000)]
    pub wait_ms: u64,
    /// Bound on each run, in seconds.
    #[arg(long, default_value_t = 300)]
    pub deadline_s: u64,
    /// The `limits` scenario's `pop_rate_max`, items per second.
    #[arg(long, default_value_t = 1_000)]
    pub rate: u64,
    /// Print results as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Push the drain's items (`--scenario http`) round-robin into this
    /// many message groups (0: none), to compare a grouped queue's drain
    /// with an ungrouped one's.
    #[arg(long, default_value_t = 0)]
    pub groups: usize,
}

pub(crate) fn percentile_ms(sorted_us: &[u64], fraction: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let index = ((sorted_us.len() as f64 - 1.0) * fraction).round() as usize;
    sorted_us[index] as f64 / 1_000.0
}

/// Peak resident set size of this process (Linux), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1_024.0)
}

/// CPU time (user + system) this process has used so far, all threads, in
/// µs (Linux: `/proc/self/stat`, in clock ticks of 10 ms: `USER_HZ` is 100
/// on Linux's common architectures).
pub fn process_cpu_us() -> Option<u64> {
    cpu_us_of_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// CPU time of this process's threads other than fjall's own workers
/// (flushes and compactions), in µs; `None` where `/proc` is missing.
/// Right after a bench writes a million queues, fjall compacts them for a
/// while: that is the store settling, not the timer's cost.
pub fn own_threads_cpu_us() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if name.starts_with("fjall") {
            continue;
        }
        if let Some(us) = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|stat| cpu_us_of_stat(&stat))
        {
            total += us;
        }
    }
    Some(total)
}

/// utime + stime of a `/proc/.../stat` line, in µs.
fn cpu_us_of_stat(stat: &str) -> Option<u64> {
    const MICROSECONDS_PER_TICK: u64 = 1_000_000 / 100;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // Field 3 (state) comes first; utime and stime are fields 14 and 15.
    let utime_ticks: u64 = fields.nth(11)?.parse().ok()?;
    let stime_ticks: u64 = fields.next()?.parse().ok()?;
    Some((utime_ticks + stime_ticks) * MICROSECONDS_PER_TICK)
}

/// Runs the benchmark; exit 1 if a drain did not deliver exactly N items.
pub async fn run(args: BenchArgs) -> Result<u8, String> {
    if args.url.is_none() && args.backend == BenchBackend::Fdb {
        return run_on_fdb(&args).await;
    }
    let _temporary;
    let store = if args.url.is_none() {
        let path = match &args.data_dir {
            Some(path) => path.clone(),
            None => {
                let dir = tempfile_dir()?;
                let path = dir.path().to_path_buf();
                _temporary = dir;
                path
            }
        };
        let mut config = EmbeddedConfig::new(&path);
        config.durability = args.durability;
        Some(EmbeddedStore::open(config).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let mut all_exact = true;
    match args.scenario {
        Scenario::Drain => all_exact &= drains(store.as_ref(), &args).await?,
        Scenario::Ceiling => {
            let store = store.ok_or("the ceiling scenario runs in process only")?;
            for &workers in &args.workers {
                for items_per_commit in [1usize, 64] {
                    ceiling(&store, &args, workers, items_per_commit).await?;
                }
            }
        }
        Scenario::Tombstones => {
            let store = store.ok_or("the tombstone scenario runs in process only")?;
            tombstones::run(&store, &args).await?;
        }
        Scenario::Due => {
            let store = store.ok_or("the due scenario runs in process only")?;
            due::run(&store, &args).await?;
        }
        Scenario::Coordinators => {
            let store = store.ok_or("the coordinators scenario runs in process only")?;
            all_exact &= coordinators::run(&store, &args).await?;
        }
        Scenario::Fair => {
            let store = store.ok_or("the fair scenario runs in process only")?;
            all_exact &= fair::run(&store, &args).await?;
        }
        Scenario::Limits => {
            let store = store.ok_or("the limits scenario runs in process only")?;
            all_exact &= limits::run(&store, &args).await?;
        }
    }
    Ok(if all_exact { 0 } else { 1 })
}

/// The drain scenario: every mode at every worker count, in process on
/// `store` or over `--url`; whether every drain was exact.
async fn drains<S: BenchStore>(store: Option<&S>, args: &BenchArgs) -> Result<bool, String> {
    let modes = match args.modes.is_empty() {
        true => Mode::defaults(args.url.is_some()),
        false => args.modes.clone(),
    };
    if !args.json {
        report::print_header();
    }
    let mut all_exact = true;
    for &mode in &modes {
        for &workers in &args.workers {
            let result = match (store, &args.url) {
                (Some(store), _) => drain_in_process(store, args, mode, workers).await?,
                (None, Some(url)) if mode.over_resp() => {
                    let resp_addr = args.resp_addr.as_deref().ok_or(
                        "the resp modes need --resp-addr HOST:PORT (and --url for the preload)",
                    )?;
                    drain_resp(url, resp_addr, args, mode, workers).await?
                }
                (None, Some(url)) => drain_http(url, args, mode, workers).await?,
                (None, None) => unreachable!("no store means a URL was given"),
            };
            all_exact &= result.exact;
            print_drain(&result, args.json);
        }
    }
    Ok(all_exact)
}

/// `--backend fdb` in process: the drains on a FoundationDB cluster, as
/// the daemon opens it (each drain in a queue of its own).
#[cfg(feature = "fdb")]
async fn run_on_fdb(args: &BenchArgs) -> Result<u8, String> {
    if args.scenario != Scenario::Drain {
        return Err("--backend fdb runs the drain scenario only".into());
    }
    let store = crate::store::fdb::open_for_daemon(args.fdb_cluster_file.as_deref())
        .map_err(|e| format!("opening the FoundationDB cluster: {e}"))?;
    let all_exact = drains(Some(&store), args).await?;
    Ok(if all_exact { 0 } else { 1 })
}

#[cfg(not(feature = "fdb"))]
async fn run_on_fdb(_args: &BenchArgs) -> Result<u8, String> {
    Err("--backend fdb needs a hotq built with --features fdb".into())
}

fn tempfile_dir() -> Result<TempDir, String> {
    TempDir::new()
}

/// A directory removed on drop (the bench's default store location).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let path = std::env::temp_dir().join(format!(
            "hotq-bench-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
        Ok(TempDir(path))
    }

    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
